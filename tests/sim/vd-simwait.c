/*
 * vd-simwait: clients waiting for verdicts (vd_waitset.h) and the
 * verification schedule's decisions (vd_plan.h) driven through histories
 * no one wrote by hand, with time as an input. A seeded history adds
 * waiters with deadlines, completes jobs in any order (done, failed,
 * stopped as the copy went away, out of time, bytes changed under the
 * hash), removes copies and brings them back, verifies copies again at a
 * newer generation, runs scrub passes, moves the clock (not at all, a
 * little, to the next deadline, far), cancels waiters (also between an
 * answer and the next, as a waiter's function may), and shuts down. A
 * small reference written here keeps what the daemon's copies would hold
 * (generations booked and done, the job in flight, a hasher queue of
 * W_QUEUE jobs), and after every step checks:
 *
 *   - every waiter is answered exactly once, or cancelled and never
 *     answered; never with verdicts before each of its copies reached its
 *     generation with no newer run under way (or vanished); never as
 *     timed out before its deadline (but at shutdown); by the first tick
 *     at or after its deadline; at once when its copies are all reached;
 *     the deadline to arm is the earliest pending one;
 *   - the backlog gives its copies back in the order they came, none
 *     lost; a job out of time waits at least a second, longer each time
 *     in a row, never more than VD_RETRY_MAX_SECONDS, and is due neither
 *     before its time nor after the first tick at or after it; a scrub
 *     pass visits each copy verified when it began once, in path order.
 *
 * Each step draws from its own generator (the seed and the step's number),
 * so a failing history can be shortened by leaving steps out. Prints, last,
 * "N histories, M steps, V invariant violations"; exits 1 when V > 0.
 *
 *   vd-simwait [--seeds N] [--seed S] [--steps K]
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vd_limits.h"
#include "vd_plan.h"
#include "vd_util.h"
#include "vd_waitset.h"

#define SIM_STEPS_DEFAULT 80
#define SIM_STEPS_MAX 10000
#define SIM_SEEDS_DEFAULT 200

#define W_COPIES 6                 /* copy slots */
#define W_QUEUE 3                  /* jobs the hasher queue holds (background) */
#define W_PER_WAITER 3             /* copies one waiter names, at most */
#define W_WAITERS SIM_STEPS_MAX    /* at most one added per step */
#define W_LIMIT_S 30.0             /* a job's time limit */

enum { K_EXPLICIT, K_BACKGROUND, K_SCRUB };
enum { WS_PENDING, WS_ANSWERED, WS_CANCELLED };

#define SIM_REQUIRE(x) do { if (!(x)) { fprintf(stderr, "vd-simwait: %s failed (out of memory?)\n", #x); exit(2); } } while (0)

typedef struct w_copy {
	int present;
	char rel[16];
	uint64_t req_gen, done_gen;
	int inflight, kind;             /* its job, queued or running */
	uint64_t job_gen;
	int again, again_kind;          /* one more run booked */
	uint64_t again_gen;
	int backlog;                    /* waits in the backlog */
	unsigned timeouts;              /* jobs in a row that ran out of time */
	double last_delay;
} w_copy;

typedef struct w_waiter {
	uint64_t id;
	int state, timed_out;
	int n, copy[W_PER_WAITER];
	uint64_t gen[W_PER_WAITER];
	uint64_t deadline;
} w_waiter;

typedef struct w_retry {
	int copy;
	uint64_t due;
} w_retry;

typedef struct world {
	uint32_t rnd;
	unsigned seed;
	int step, down, failed;
	char why[512];
	uint64_t now;
	w_copy c[W_COPIES];
	w_waiter *wt;
	size_t n_wt;
	vd_waitset ws;
	vd_backlog bl;
	char shadow_bl[W_COPIES * SIM_STEPS_MAX][16];   /* what the backlog holds, in order */
	size_t bl_head, bl_n;
	vd_retries rt;
	w_retry shadow_rt[SIM_STEPS_MAX];
	size_t n_rt;
	vd_scrub sc;
	int scrub_expect[W_COPIES], scrub_seen[W_COPIES];
	char scrub_last[16];
} world;

/* What the histories went through, so that a run shows it tested something. */
typedef struct w_seen {
	unsigned long answered, timed_out, cancelled, from_backlog, retried, passes;
} w_seen;
static w_seen seen;

static void violation(world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void violation(world *w, const char *fmt, ...)
{
	va_list ap;

	if (w->failed)
		return;
	w->failed = 1;
	va_start(ap, fmt);
	vsnprintf(w->why, sizeof(w->why), fmt, ap);
	va_end(ap);
}

static uint32_t rnd(world *w, uint32_t n)
{
	w->rnd ^= w->rnd << 13;
	w->rnd ^= w->rnd >> 17;
	w->rnd ^= w->rnd << 5;
	return w->rnd % n;
}

/* ---- the reference: copies, their jobs, the hasher queue ---------------- */

static int queued(const world *w)
{
	int i, n = 0;

	for (i = 0; i < W_COPIES; i++)
		n += w->c[i].present && w->c[i].inflight;
	return n;
}

static int copy_of(const world *w, const char *rel)
{
	int i;

	for (i = 0; i < W_COPIES; i++)
		if (strcmp(w->c[i].rel, rel) == 0)
			return i;
	return -1;
}

/* As the store tells the waiters: a scrub holds no answer back. */
static void copy_state(const world *w, int i, vd_wait_copy *st)
{
	const w_copy *c = &w->c[i];

	st->present = c->present;
	st->done_gen = c->present ? c->done_gen : 0;
	st->busy = c->present && c->inflight && c->kind != K_SCRUB;
}

static int reached(const world *w, int i, uint64_t gen)
{
	vd_wait_copy st;

	copy_state(w, i, &st);
	return !st.present || (st.done_gen >= gen && !st.busy);
}

static void start_job(w_copy *c, int kind, uint64_t gen)
{
	c->inflight = 1;
	c->kind = kind;
	c->job_gen = gen;
}

static void backlog_add(world *w, int i)
{
	w_copy *c = &w->c[i];

	if (c->backlog)
		return;
	c->backlog = 1;
	SIM_REQUIRE(vd_backlog_push(&w->bl, c->rel) == 0);
	SIM_REQUIRE(w->bl_n < sizeof(w->shadow_bl) / sizeof(w->shadow_bl[0]));
	memcpy(w->shadow_bl[w->bl_n++], c->rel, sizeof(c->rel));
}

/* vd_sched_schedule's rules: a run booked while one is in flight; a
 * background one that finds the queue full waits in the backlog. The
 * generation that answers it, or 0. */
static uint64_t schedule(world *w, int i, int kind)
{
	w_copy *c = &w->c[i];

	if (c->inflight) {
		if (!c->again || kind < c->again_kind)
			c->again_kind = kind;
		if (!c->again)
			c->again_gen = ++c->req_gen;
		c->again = 1;
		return c->again_gen;
	}
	if (kind != K_EXPLICIT && queued(w) >= W_QUEUE) {
		backlog_add(w, i);
		return 0;
	}
	start_job(c, kind, ++c->req_gen);
	c->backlog = 0;
	return c->req_gen;
}

static void follow_up(world *w, int i, int kind, uint64_t gen)
{
	w_copy *c = &w->c[i];
	int urgency = kind;

	vd_plan_follow(c->again, c->again_kind, c->again_gen, &urgency, &gen);
	c->again = 0;
	if (urgency != K_EXPLICIT && queued(w) >= W_QUEUE)
		backlog_add(w, i);
	else
		start_job(c, urgency, gen);
}

/* First come, first queued, as the queue empties. */
static void drain(world *w)
{
	const char *rel;
	int i;

	while ((rel = vd_backlog_peek(&w->bl)) != NULL && queued(w) < W_QUEUE) {
		if (w->bl_head >= w->bl_n || strcmp(rel, w->shadow_bl[w->bl_head]) != 0) {
			violation(w, "the backlog gives %s next, but %s came first", rel,
			    w->bl_head < w->bl_n ? w->shadow_bl[w->bl_head] : "nothing");
			return;
		}
		w->bl_head++;
		i = copy_of(w, rel);
		if (w->c[i].present && w->c[i].backlog && !w->c[i].inflight) {
			schedule(w, i, K_BACKGROUND);
			seen.from_backlog++;
		}
		vd_backlog_pop(&w->bl);
	}
	if (vd_backlog_len(&w->bl) != w->bl_n - w->bl_head)
		violation(w, "the backlog holds %zu copies, but %zu came and %zu left it",
		    vd_backlog_len(&w->bl), w->bl_n, w->bl_head);
}

/* ---- what the waiters are told -------------------------------------------- */

static void report(world *w, int i)
{
	vd_wait_copy st;

	copy_state(w, i, &st);
	vd_waitset_progress(&w->ws, w->c[i].rel, &st);
}

static w_waiter *waiter_by_id(world *w, uint64_t id)
{
	size_t k;

	for (k = 0; k < w->n_wt; k++)
		if (w->wt[k].id == id)
			return &w->wt[k];
	return NULL;
}

static void check_answer(world *w, const vd_wait_answer *a)
{
	w_waiter *x = waiter_by_id(w, a->id);
	int k;

	if (x == NULL || a->user != x) {
		violation(w, "an answer for waiter %llu, which was never added", (unsigned long long)a->id);
		return;
	}
	if (x->state != WS_PENDING) {
		violation(w, "waiter %llu answered after it was %s", (unsigned long long)x->id,
		    x->state == WS_ANSWERED ? "answered already" : "cancelled");
		return;
	}
	x->state = WS_ANSWERED;
	x->timed_out = a->timed_out;
	seen.answered++;
	seen.timed_out += a->timed_out != 0;
	if (a->timed_out && !w->down && w->now < x->deadline)
		violation(w, "waiter %llu timed out at %llu ms, before its deadline %llu",
		    (unsigned long long)x->id, (unsigned long long)w->now,
		    (unsigned long long)x->deadline);
	for (k = 0; !a->timed_out && k < x->n; k++)
		if (!reached(w, x->copy[k], x->gen[k]))
			violation(w, "waiter %llu answered before %s reached generation %llu "
			    "(done %llu%s)", (unsigned long long)x->id, w->c[x->copy[k]].rel,
			    (unsigned long long)x->gen[k], (unsigned long long)w->c[x->copy[k]].done_gen,
			    w->c[x->copy[k]].inflight ? ", a run under way" : "");
}

/* Up to max answers (SIZE_MAX: all), as the shell takes them. */
static void take(world *w, size_t max)
{
	vd_wait_answer a;
	size_t n = 0;

	while (n < max && vd_waitset_take(&w->ws, &a)) {
		check_answer(w, &a);
		n++;
		if (n > w->n_wt) {
			violation(w, "more answers than waiters");
			return;
		}
	}
}

/* A check point of the store: every copy's state, then answers. */
static void check_point(world *w)
{
	int i;

	for (i = 0; i < W_COPIES; i++)
		report(w, i);
	vd_waitset_settle(&w->ws);
}

/* ---- steps ----------------------------------------------------------------- */

static const char *step_add(world *w)
{
	static const uint64_t timeouts[] = { 0, 1, 250, 5000, 300000, 30000000, 300000000 };
	w_waiter *x = &w->wt[w->n_wt];
	char *rels[W_PER_WAITER];
	int k, i, tries, want = 1 + (int)rnd(w, W_PER_WAITER);

	memset(x, 0, sizeof(*x));
	for (tries = 0; tries < 20 && x->n < want; tries++) {
		i = (int)rnd(w, W_COPIES);
		for (k = 0; k < x->n && x->copy[k] != i; k++)
			;
		if (k < x->n || !w->c[i].present)
			continue;
		x->copy[x->n] = i;
		x->gen[x->n] = schedule(w, i, K_EXPLICIT);
		rels[x->n] = w->c[i].rel;
		x->n++;
	}
	if (x->n == 0)
		return "add a waiter: no copy";
	x->deadline = w->now + timeouts[rnd(w, sizeof(timeouts) / sizeof(timeouts[0]))];
	SIM_REQUIRE(vd_waitset_add(&w->ws, rels, x->gen, (size_t)x->n, x->deadline, x, &x->id) == 0);
	w->n_wt++;
	/* As the shell does: where its copies stand; no answer yet. */
	for (k = 0; k < x->n; k++)
		report(w, x->copy[k]);
	return "add a waiter";
}

static int pick_inflight(world *w)
{
	int i, k = (int)rnd(w, W_COPIES);

	for (i = 0; i < W_COPIES; i++, k = (k + 1) % W_COPIES)
		if (w->c[k].present && w->c[k].inflight)
			return k;
	return -1;
}

static void retry_later(world *w, int i)
{
	w_copy *c = &w->c[i];
	double d = vd_plan_retry_delay(W_LIMIT_S, c->timeouts);
	uint64_t due = w->now + (uint64_t)(d * 1000);

	if (d < 1 || d > VD_RETRY_MAX_SECONDS)
		violation(w, "%s: retried after %.0f s, outside [1, %d]", c->rel, d, VD_RETRY_MAX_SECONDS);
	if (c->timeouts > 1 && d < c->last_delay)
		violation(w, "%s: retried after %.0f s at its timeout %u in a row, sooner than the %.0f s before",
		    c->rel, d, c->timeouts, c->last_delay);
	c->last_delay = d;
	SIM_REQUIRE(w->n_rt < SIM_STEPS_MAX);
	SIM_REQUIRE(vd_retries_add(&w->rt, c->rel, due) == 0);
	w->shadow_rt[w->n_rt].copy = i;
	w->shadow_rt[w->n_rt].due = due;
	w->n_rt++;
}

static const char *step_complete(world *w)
{
	static const char *const how[] = { "a job done", "a job failed", "a job ran out of time",
		"a job's bytes changed under it", "a job stopped: its copy went away" };
	int i = pick_inflight(w), o = (int)rnd(w, 5);
	w_copy *c;

	if (i < 0)
		return "complete a job: none in flight";
	c = &w->c[i];
	c->inflight = 0;
	if (o <= 2) {
		c->done_gen = c->job_gen;
		c->timeouts = o == 2 ? c->timeouts + 1 : 0;
		if (o == 2)
			retry_later(w, i);
		if (c->again)
			follow_up(w, i, c->again_kind, c->again_gen);
	} else if (o == 3) {
		follow_up(w, i, c->kind, c->job_gen);
	} else if (rnd(w, 2)) {
		schedule(w, i, K_BACKGROUND);   /* the scan that follows finds it changed */
	}
	drain(w);
	return how[o];
}

static const char *step_remove(world *w)
{
	int i = (int)rnd(w, W_COPIES);
	w_copy *c = &w->c[i];

	if (!c->present)
		return "remove a copy: gone already";
	/* Its job, found without a copy on return, is dropped. */
	c->present = 0;
	c->inflight = 0;
	c->backlog = 0;
	drain(w);
	return "remove a copy";
}

static const char *step_readd(world *w)
{
	int i = (int)rnd(w, W_COPIES);
	w_copy *c = &w->c[i];

	if (c->present)
		return "a copy comes back: there already";
	memset(c, 0, sizeof(*c));
	snprintf(c->rel, sizeof(c->rel), "r/c%02d", i);
	c->present = 1;
	schedule(w, i, K_BACKGROUND);
	return "a copy comes back";
}

static const char *step_change(world *w)
{
	int i = (int)rnd(w, W_COPIES);

	if (!w->c[i].present)
		return "a copy changed: gone";
	schedule(w, i, K_BACKGROUND);
	return "a copy changed: verified again at a newer generation";
}

static void check_deadlines(world *w)
{
	uint64_t first = VD_WAIT_NONE;
	size_t k, n = 0;
	int j, all;

	for (k = 0; k < w->n_wt; k++) {
		w_waiter *x = &w->wt[k];
		if (x->state != WS_PENDING)
			continue;
		n++;
		if (x->deadline < first)
			first = x->deadline;
		for (j = 0, all = 1; j < x->n; j++)
			all &= reached(w, x->copy[j], x->gen[j]);
		if (all)
			violation(w, "waiter %llu still waits, but its copies all reached their generation",
			    (unsigned long long)x->id);
	}
	if (vd_waitset_deadline(&w->ws) != first)
		violation(w, "the timer to arm is at %llu ms, but the first deadline is %llu ms",
		    (unsigned long long)vd_waitset_deadline(&w->ws), (unsigned long long)first);
	if (vd_waitset_pending(&w->ws) != n)
		violation(w, "%zu waiters pending, but %zu should be", vd_waitset_pending(&w->ws), n);
}

static void retries_due(world *w)
{
	uint64_t first = VD_PLAN_NONE;
	char *rel;
	size_t k;
	int i;

	while ((rel = vd_retries_take_due(&w->rt, w->now)) != NULL) {
		i = copy_of(w, rel);
		for (k = 0; k < w->n_rt && !(w->shadow_rt[k].copy == i && w->shadow_rt[k].due <= w->now); k++)
			;
		if (k == w->n_rt)
			violation(w, "%s retried at %llu ms, before it was due", rel, (unsigned long long)w->now);
		else
			w->shadow_rt[k] = w->shadow_rt[--w->n_rt];
		if (i >= 0 && w->c[i].present && w->c[i].timeouts > 0) {
			schedule(w, i, K_BACKGROUND);
			seen.retried++;
		}
		free(rel);
	}
	for (k = 0; k < w->n_rt; k++) {
		if (w->shadow_rt[k].due <= w->now)
			violation(w, "%s due at %llu ms, not retried at %llu ms", w->c[w->shadow_rt[k].copy].rel,
			    (unsigned long long)w->shadow_rt[k].due, (unsigned long long)w->now);
		if (w->shadow_rt[k].due < first)
			first = w->shadow_rt[k].due;
	}
	if (vd_retries_next_due(&w->rt) != first)
		violation(w, "the retry timer is for %llu ms, but the first is due at %llu ms",
		    (unsigned long long)vd_retries_next_due(&w->rt), (unsigned long long)first);
}

static const char *step_tick(world *w)
{
	const char *what;
	uint64_t due;

	switch (rnd(w, 5)) {
	case 0:
		what = "the clock does not move";
		break;
	case 1:
		w->now += 1 + rnd(w, 1000);
		what = "the clock moves a little";
		break;
	case 2:
		due = vd_waitset_deadline(&w->ws);
		if (due != VD_WAIT_NONE && due > w->now)
			w->now = due;
		what = "the clock reaches the next deadline";
		break;
	case 3:
		due = vd_retries_next_due(&w->rt);
		if (due != VD_PLAN_NONE && due > w->now)
			w->now = due - rnd(w, 2);
		what = "the clock reaches the next retry (or just before)";
		break;
	default:
		w->now += 1000000 + rnd(w, 100000000);
		what = "the clock jumps";
		break;
	}
	vd_waitset_tick(&w->ws, w->now);
	retries_due(w);
	return what;
}

static const char *step_cancel(world *w)
{
	size_t k, n = 0, pick;

	for (k = 0; k < w->n_wt; k++)
		n += w->wt[k].state == WS_PENDING;
	if (n == 0)
		return "cancel a waiter: none waits";
	pick = rnd(w, (uint32_t)n);
	for (k = 0; k < w->n_wt; k++) {
		if (w->wt[k].state != WS_PENDING || pick-- != 0)
			continue;
		if (vd_waitset_cancel(&w->ws, w->wt[k].id) != 0)
			violation(w, "waiter %llu, not answered, could not be cancelled",
			    (unsigned long long)w->wt[k].id);
		w->wt[k].state = WS_CANCELLED;
		seen.cancelled++;
		break;
	}
	return "cancel a waiter";
}

/* A waiter's function cancels another while answers are being handed
 * out: between the first answer of a tick and the rest. */
static const char *step_cancel_midway(world *w)
{
	w->now += rnd(w, 2) ? 0 : 1 + rnd(w, 6000);
	vd_waitset_tick(&w->ws, w->now);
	retries_due(w);
	take(w, 1);
	step_cancel(w);
	return "the clock moves; a cancel between two answers";
}

static const char *step_scrub(world *w)
{
	const char *rels[W_COPIES], *rel;
	int i, n = 0, order[W_COPIES], k, t;

	if (!w->sc.active) {
		for (i = 0; i < W_COPIES; i++)
			order[i] = i;
		for (i = W_COPIES - 1; i > 0; i--) {
			k = (int)rnd(w, (uint32_t)i + 1);
			t = order[i], order[i] = order[k], order[k] = t;
		}
		memset(w->scrub_seen, 0, sizeof(w->scrub_seen));
		for (i = 0; i < W_COPIES; i++)
			w->scrub_expect[i] = w->c[i].present && w->c[i].done_gen > 0;
		for (i = 0; i < W_COPIES; i++)
			if (w->scrub_expect[order[i]])
				rels[n++] = w->c[order[i]].rel;
		SIM_REQUIRE(vd_scrub_begin(&w->sc, rels, (size_t)n) == 0);
		w->scrub_last[0] = '\0';
		return "a scrub pass begins";
	}
	if ((rel = vd_scrub_next(&w->sc)) == NULL) {
		for (i = 0; i < W_COPIES; i++)
			if (w->scrub_expect[i] && w->scrub_seen[i] != 1)
				violation(w, "a scrub pass visited %s %d times", w->c[i].rel, w->scrub_seen[i]);
		vd_scrub_end(&w->sc);
		seen.passes++;
		return "a scrub pass ends";
	}
	i = copy_of(w, rel);
	if (i < 0 || !w->scrub_expect[i])
		violation(w, "a scrub pass visits %s, not verified when it began", rel);
	else if (++w->scrub_seen[i] > 1)
		violation(w, "a scrub pass visits %s again", rel);
	if (strcmp(w->scrub_last, rel) >= 0)
		violation(w, "a scrub pass visits %s after %s", rel, w->scrub_last);
	snprintf(w->scrub_last, sizeof(w->scrub_last), "%s", rel);
	if (i >= 0 && w->c[i].present && !w->c[i].inflight && queued(w) < W_QUEUE)
		start_job(&w->c[i], K_SCRUB, ++w->c[i].req_gen);
	return "the scrub's next copy";
}

static const char *step_shutdown(world *w)
{
	size_t k;

	w->down = 1;
	vd_waitset_fire_all(&w->ws);
	take(w, SIZE_MAX);
	for (k = 0; k < w->n_wt; k++)
		if (w->wt[k].state == WS_PENDING)
			violation(w, "waiter %llu never answered at shutdown", (unsigned long long)w->wt[k].id);
	return "shutdown: every waiter answered";
}

typedef const char *(*step_fn)(world *w);

static const struct { step_fn fn; unsigned weight; } steps[] = {
	{ step_add, 6 }, { step_complete, 12 }, { step_remove, 2 }, { step_readd, 2 },
	{ step_change, 3 }, { step_tick, 6 }, { step_cancel, 2 }, { step_cancel_midway, 1 },
	{ step_scrub, 3 }, { step_shutdown, 0 },
};
#define N_STEPS (sizeof(steps) / sizeof(steps[0]))

/* ---- histories --------------------------------------------------------------- */

static void reseed(world *w, unsigned salt)
{
	uint32_t x = 2463534242u ^ (w->seed * 2654435761u) ^ (salt * 40503u + 0x9e3779b9u);

	w->rnd = x != 0 ? x : 1;
	(void)rnd(w, 2);
}

static world *world_start(unsigned seed)
{
	world *w = calloc(1, sizeof(*w));
	int i;

	SIM_REQUIRE(w != NULL);
	SIM_REQUIRE((w->wt = calloc(W_WAITERS, sizeof(*w->wt))) != NULL);
	w->seed = seed;
	reseed(w, 0);
	w->now = rnd(w, 1000);
	vd_waitset_init(&w->ws);
	for (i = 0; i < W_COPIES; i++) {
		snprintf(w->c[i].rel, sizeof(w->c[i].rel), "r/c%02d", i);
		w->c[i].present = 1;
		schedule(w, i, K_BACKGROUND);
	}
	return w;
}

static void world_free(world *w)
{
	vd_waitset_free(&w->ws);
	vd_backlog_free(&w->bl);
	vd_retries_free(&w->rt);
	vd_scrub_end(&w->sc);
	free(w->wt);
	free(w);
}

/* One step, number id of the seed's history (the last one shuts down):
 * what it did. */
static const char *world_step(world *w, unsigned id, int last)
{
	unsigned total = 0, r, k;
	const char *what;

	if (w->down)
		return "(after shutdown: nothing)";
	reseed(w, id + 1);
	if (last) {
		k = N_STEPS - 1;
	} else {
		for (k = 0; k < N_STEPS; k++)
			total += steps[k].weight;
		r = rnd(w, total);
		for (k = 0; r >= steps[k].weight; k++)
			r -= steps[k].weight;
	}
	what = steps[k].fn(w);
	if (!w->down) {
		check_point(w);
		take(w, SIZE_MAX);
		check_deadlines(w);
	}
	return what;
}

/* Runs the steps listed (ids; the one numbered last_id shuts down); the
 * index of the first that fails, or -1. */
static int replay(unsigned seed, const unsigned *ids, int n, unsigned last_id, char *why,
    size_t whylen)
{
	world *w = world_start(seed);
	int i, at = -1;

	for (i = 0; i < n && at < 0; i++) {
		w->step = (int)ids[i];
		world_step(w, ids[i], ids[i] == last_id);
		if (w->failed)
			at = i;
	}
	if (at >= 0 && why != NULL)
		snprintf(why, whylen, "%s", w->why);
	world_free(w);
	return at;
}

/* Leave out each step in turn while the history still fails. */
static int shorten(unsigned seed, unsigned *ids, int n, unsigned last_id)
{
	int i, j;

	for (i = n - 2; i >= 0; i--) {
		unsigned drop = ids[i];
		for (j = i; j < n - 1; j++)
			ids[j] = ids[j + 1];
		if (replay(seed, ids, n - 1, last_id, NULL, 0) >= 0) {
			n--;
			continue;
		}
		for (j = n - 1; j > i; j--)
			ids[j] = ids[j - 1];
		ids[i] = drop;
	}
	return replay(seed, ids, n, last_id, NULL, 0) + 1;
}

static void print_failure(unsigned seed, int steps_n, int failed_at, const char *why)
{
	unsigned *ids = calloc((size_t)failed_at + 1, sizeof(*ids)), last_id = (unsigned)steps_n - 1;
	world *w;
	int i, n;

	SIM_REQUIRE(ids != NULL);
	for (i = 0; i <= failed_at; i++)
		ids[i] = (unsigned)i;
	n = shorten(seed, ids, failed_at + 1, last_id);
	printf("seed %u: invariant violated at step %d: %s\n", seed, failed_at, why);
	printf("  again: vd-simwait --seed %u --steps %d\n", seed, steps_n);
	printf("  a shorter history that still fails (%d of %d steps):\n", n, failed_at + 1);
	w = world_start(seed);
	for (i = 0; i < n; i++) {
		w->step = (int)ids[i];
		printf("    step %u at %llu ms: ", ids[i], (unsigned long long)w->now);
		printf("%s\n", world_step(w, ids[i], ids[i] == last_id));
	}
	if (w->failed)
		printf("  fails with: %s\n", w->why);
	world_free(w);
	free(ids);
}

/* One history, ended by a shutdown: 1 when an invariant was violated. */
static int run_history(unsigned seed, int steps_n, unsigned long *total)
{
	world *w = world_start(seed);
	int failed_at = -1;
	char why[sizeof(w->why)];

	for (w->step = 0; w->step < steps_n && !w->failed; w->step++) {
		world_step(w, (unsigned)w->step, w->step == steps_n - 1);
		(*total)++;
		if (w->failed)
			failed_at = w->step;
	}
	snprintf(why, sizeof(why), "%s", w->why);
	world_free(w);
	if (failed_at >= 0) {
		w_seen before = seen;    /* the replays that shorten it are not news */
		print_failure(seed, steps_n, failed_at, why);
		seen = before;
	}
	return failed_at >= 0;
}

static int number(const char *arg, unsigned long max, unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(arg, &end, 10);
	return arg[0] >= '0' && arg[0] <= '9' && *end == '\0' && errno == 0 && *out <= max ? 0 : -1;
}

static void usage(void)
{
	fputs("usage: vd-simwait [--seeds N] [--seed S] [--steps K]\n"
	    "  --seeds N   histories with seeds 1..N (default " VD_XSTR(SIM_SEEDS_DEFAULT) ")\n"
	    "  --seed S    the one history of seed S\n"
	    "  --steps K   steps in each history, the last a shutdown (default "
	    VD_XSTR(SIM_STEPS_DEFAULT) ")\n", stderr);
}

int main(int argc, char **argv)
{
	unsigned long seeds = SIM_SEEDS_DEFAULT, first = 1, steps_n = SIM_STEPS_DEFAULT, total = 0, v;
	unsigned long violations = 0, s;
	int i;

	for (i = 1; i < argc; i++) {
		if (i + 1 < argc && strcmp(argv[i], "--seeds") == 0 && number(argv[i + 1], 1000000, &v) == 0)
			seeds = v;
		else if (i + 1 < argc && strcmp(argv[i], "--seed") == 0 && number(argv[i + 1], UINT32_MAX, &v) == 0)
			first = v, seeds = 1;
		else if (i + 1 < argc && strcmp(argv[i], "--steps") == 0 &&
		    number(argv[i + 1], SIM_STEPS_MAX, &v) == 0 && v > 0)
			steps_n = v;
		else {
			usage();
			return 2;
		}
		i++;
	}
	for (s = first; s < first + seeds; s++)
		violations += (unsigned long)run_history((unsigned)s, (int)steps_n, &total);
	printf("waiters answered %lu (%lu timed out), cancelled %lu; copies queued from the backlog %lu, "
	    "retried %lu; scrub passes %lu\n", seen.answered, seen.timed_out, seen.cancelled,
	    seen.from_backlog, seen.retried, seen.passes);
	printf("%lu histories, %lu steps, %lu invariant violations\n", seeds, total, violations);
	return violations > 0;
}

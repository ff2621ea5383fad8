/*
 * vd-simwait: clients waiting for verdicts (vd_waitset.h) and the
 * verification schedule (vd_plan.h) driven through histories no one
 * wrote by hand, with time as an input. A seeded history adds waiters
 * with deadlines (each asking for its copies to be verified now), starts
 * queued jobs and completes started ones in any order (done, failed,
 * stopped as the copy went away, out of time, bytes changed under the
 * hash), removes copies and brings them back, verifies copies again at a
 * newer generation, runs scrub passes, moves the clock (not at all, a
 * little, to the next deadline, far), cancels waiters (also between an
 * answer and the next, as a waiter's function may), and shuts down. The
 * copies are the model's (vd_model.h); the hasher queue is modelled here,
 * W_QUEUE background jobs waiting at most, a lane for clients' jobs ahead
 * of the rest; what the store does when a job returns is done as the
 * store does it. After every step it checks:
 *
 *   - every waiter is answered exactly once, or cancelled and never
 *     answered; never with verdicts before each of its copies reached its
 *     generation with no newer run under way (or vanished); never as
 *     timed out before its deadline (but at shutdown); by the first tick
 *     at or after its deadline; at once when its copies are all reached;
 *     the deadline to arm is the earliest pending one;
 *   - a copy a client waits for has its queued job in the clients' lane
 *     as an explicit one, or its running one moved ahead;
 *   - every copy marked as in the backlog is in it, and a drain queues the
 *     backlog's copies in its order, as far as the queue takes them;
 *   - a job out of time waits at least a second, longer each time in a
 *     row, never more than VD_RETRY_MAX_SECONDS, and is due neither
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
#include "vd_model.h"
#include "vd_plan.h"
#include "vd_pool.h"
#include "vd_util.h"
#include "vd_waitset.h"

#define SIM_STEPS_DEFAULT 80
#define SIM_STEPS_MAX 10000
#define SIM_SEEDS_DEFAULT 200

#define W_COPIES 6                 /* copy slots */
#define W_QUEUE 3                  /* background jobs waiting at most */
#define W_QUEUE_MAX 4              /* queue_max: clients' jobs waiting at most (twice that) */
#define W_JOBS 256                 /* jobs in the queue, those of removed copies included */
#define W_PER_WAITER 3             /* copies one waiter names, at most */
#define W_WAITERS SIM_STEPS_MAX    /* at most one added per step */
#define W_LIMIT_S 30.0             /* a job's time limit */

enum { WS_PENDING, WS_ANSWERED, WS_CANCELLED };

#define SIM_REQUIRE(x) do { if (!(x)) { fprintf(stderr, "vd-simwait: %s failed (out of memory?)\n", #x); exit(2); } } while (0)

typedef struct w_job {             /* a job in the modelled hasher queue */
	vd_job *j;
	int urgent, started;
} w_job;

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
	char rel[W_COPIES][16];
	double last_delay[W_COPIES];
	vd_model m;
	vd_plan plan;
	w_job jobs[W_JOBS];
	size_t n_jobs;
	w_waiter *wt;
	size_t n_wt;
	vd_waitset ws;
	vd_retries rt;
	w_retry shadow_rt[SIM_STEPS_MAX];
	size_t n_rt;
	vd_scrub sc;
	int scrub_expect[W_COPIES], scrub_seen[W_COPIES];
	char scrub_last[16];
} world;

/* What the histories went through, so that a run shows it tested something. */
typedef struct w_seen {
	unsigned long answered, timed_out, at_shutdown, cancelled, hurried, drained, retried, passes;
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

static vd_copy *copy_at(const world *w, int i)
{
	return vd_model_copy(&w->m, w->rel[i]);
}

/* ---- the hasher queue, modelled: two lanes, clients' first --------------- */

static w_job *job_of(world *w, const vd_job *j)
{
	size_t k;

	for (k = 0; j != NULL && k < w->n_jobs; k++)
		if (w->jobs[k].j == j)
			return &w->jobs[k];
	return NULL;
}

static void job_drop(world *w, w_job *x)
{
	vd_job_free(x->j);
	*x = w->jobs[--w->n_jobs];
}

/* vd_pool_submit's bound: max jobs waiting, twice that for a client's. */
static int q_submit(void *arg, vd_copy *c, vd_job_kind kind, uint64_t gen)
{
	world *w = arg;
	size_t k, waiting = 0;
	unsigned max = kind == VD_JOB_EXPLICIT ? 2 * W_QUEUE_MAX : W_QUEUE;
	vd_job *j;

	for (k = 0; k < w->n_jobs; k++)
		waiting += !w->jobs[k].started;
	if (waiting >= max)
		return -EAGAIN;
	SIM_REQUIRE(w->n_jobs < W_JOBS && (j = vd_job_new(kind, c->relpath)) != NULL);
	j->gen = gen;
	w->jobs[w->n_jobs].j = j;
	w->jobs[w->n_jobs].urgent = kind == VD_JOB_EXPLICIT;
	w->jobs[w->n_jobs].started = 0;
	w->n_jobs++;
	c->inflight = j;
	return 0;
}

static int q_take_back(void *arg, vd_copy *c, uint64_t *gen)
{
	world *w = arg;
	w_job *x = job_of(w, c->inflight);

	if (x == NULL || x->started)
		return -EBUSY;
	*gen = x->j->gen;
	job_drop(w, x);
	c->inflight = NULL;
	return 0;
}

static void q_promote(void *arg, vd_copy *c)
{
	w_job *x = job_of(arg, c->inflight);

	if (x != NULL)
		x->urgent = 1;
}

/* ---- what the waiters are told -------------------------------------------- */

/* As the store tells the waiters: a scrub holds no answer back. */
static void copy_state(const world *w, int i, vd_wait_copy *st)
{
	const vd_copy *c = copy_at(w, i);

	st->present = c != NULL;
	st->done_gen = c ? c->done_gen : 0;
	st->busy = c != NULL && c->inflight != NULL && c->inflight_kind != VD_JOB_SCRUB;
}

static int reached(const world *w, int i, uint64_t gen)
{
	vd_wait_copy st;

	copy_state(w, i, &st);
	return !st.present || (st.done_gen >= gen && !st.busy);
}

static void report(world *w, int i)
{
	vd_wait_copy st;

	copy_state(w, i, &st);
	vd_waitset_progress(&w->ws, w->rel[i], &st);
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
	vd_copy *c;
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
	seen.at_shutdown += w->down;
	if (a->timed_out && !w->down && w->now < x->deadline)
		violation(w, "waiter %llu timed out at %llu ms, before its deadline %llu",
		    (unsigned long long)x->id, (unsigned long long)w->now,
		    (unsigned long long)x->deadline);
	for (k = 0; !a->timed_out && k < x->n; k++) {
		if (reached(w, x->copy[k], x->gen[k]))
			continue;
		c = copy_at(w, x->copy[k]);
		violation(w, "waiter %llu answered before %s reached generation %llu (done %llu%s)",
		    (unsigned long long)x->id, c->relpath, (unsigned long long)x->gen[k],
		    (unsigned long long)c->done_gen, c->inflight ? ", a run under way" : "");
	}
}

/* Every answer there is, as the shell takes them. */
static void take(world *w, size_t max)
{
	vd_wait_answer a;
	size_t n = 0;

	while (n < max && vd_waitset_take(&w->ws, &a)) {
		check_answer(w, &a);
		if (++n > w->n_wt) {
			violation(w, "more answers than waiters");
			return;
		}
	}
}

/* A check point of the store: every copy's state, the answers, and the
 * copies the others wait for hurried. */
static void check_point(world *w)
{
	const char *rel;
	vd_copy *c;
	size_t it = 0;
	int i;

	for (i = 0; i < W_COPIES; i++)
		report(w, i);
	vd_waitset_settle(&w->ws);
	take(w, SIZE_MAX);
	while (vd_waitset_next_watched(&w->ws, &it, &rel))
		if ((c = vd_model_copy(&w->m, rel)) != NULL && vd_plan_hurry(&w->plan, c) == 0)
			seen.hurried++;
	for (i = 0; i < W_COPIES; i++)
		report(w, i);
}

/* ---- checks ----------------------------------------------------------------- */

static void check_waiters(world *w)
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

/* A client's job runs before background work. */
static void check_ahead(world *w)
{
	const w_job *x;
	vd_copy *c;
	size_t k;
	int j;

	for (k = 0; k < w->n_wt; k++) {
		if (w->wt[k].state != WS_PENDING)
			continue;
		for (j = 0; j < w->wt[k].n; j++) {
			c = copy_at(w, w->wt[k].copy[j]);
			if (c == NULL || c->inflight == NULL || c->inflight_kind == VD_JOB_SCRUB)
				continue;
			x = job_of(w, c->inflight);
			if (x == NULL)
				violation(w, "%s has a job in flight the queue does not hold", c->relpath);
			else if (!x->urgent || (!x->started && c->inflight_kind != VD_JOB_EXPLICIT))
				violation(w, "a client waits for %s, whose %s job %s behind background work",
				    c->relpath, x->started ? "running" : "queued",
				    x->started ? "stays" : "waits");
		}
	}
}

/* Every copy marked as in the backlog is in it. */
static void check_backlog(world *w)
{
	size_t k, marked = 0;
	vd_copy *c;
	int i;

	for (i = 0; i < W_COPIES; i++) {
		if ((c = copy_at(w, i)) == NULL || !c->backlog)
			continue;
		marked++;
		for (k = w->plan.backlog.head; k < w->plan.backlog.n; k++)
			if (strcmp(w->plan.backlog.q[k], c->relpath) == 0)
				break;
		if (k == w->plan.backlog.n)
			violation(w, "%s waits for the backlog, which lost it", c->relpath);
		if (c->inflight != NULL)
			violation(w, "%s is in the backlog and in flight", c->relpath);
	}
	if (marked != w->plan.backlogged)
		violation(w, "%zu copies counted in the backlog, %zu marked", w->plan.backlogged, marked);
}

static int listed(const char *const *v, size_t n, const char *s)
{
	while (n-- > 0)
		if (strcmp(v[n], s) == 0)
			return 1;
	return 0;
}

/* A drain queues the backlog's copies in its order (a copy there twice,
 * removed and back, at its first place), as far as the queue takes them:
 * those that got a job are the first of the candidates. */
static void drain(world *w)
{
	const char *cand[W_COPIES];
	size_t k, n = 0, took = 0;
	vd_copy *c;

	for (k = w->plan.backlog.head; k < w->plan.backlog.n && n < W_COPIES; k++)
		if ((c = vd_model_copy(&w->m, w->plan.backlog.q[k])) != NULL && c->backlog &&
		    c->inflight == NULL && !listed(cand, n, c->relpath))
			cand[n++] = c->relpath;
	vd_plan_drain(&w->plan);
	for (k = 0; k < n; k++) {
		c = vd_model_copy(&w->m, cand[k]);
		if (c->inflight == NULL)
			continue;
		if (k != took++)
			violation(w, "the backlog queued %s ahead of %s, which came first", cand[k], cand[took - 1]);
		seen.drained++;
	}
}

/* ---- steps ----------------------------------------------------------------- */

static vd_copy *pick_copy(world *w, int *slot)
{
	int i = (int)rnd(w, W_COPIES);

	if (slot)
		*slot = i;
	return copy_at(w, i);
}

static const char *step_add(world *w)
{
	static const uint64_t timeouts[] = { 0, 250, 5000, 300000, 300000000, 300000000, 300000000 };
	w_waiter *x = &w->wt[w->n_wt];
	char *rels[W_PER_WAITER];
	int k, i, tries, want = 1 + (int)rnd(w, W_PER_WAITER);
	vd_copy *c;

	memset(x, 0, sizeof(*x));
	for (tries = 0; tries < 20 && x->n < want; tries++) {
		c = pick_copy(w, &i);
		for (k = 0; k < x->n && x->copy[k] != i; k++)
			;
		if (k < x->n || c == NULL)
			continue;
		/* The queue full: 503, no one waits. */
		if (vd_plan_schedule(&w->plan, c, VD_JOB_EXPLICIT, &x->gen[x->n]) < 0)
			return "add a waiter: the queue is full";
		x->copy[x->n] = i;
		rels[x->n] = c->relpath;
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

/* The queue's rule: the clients' lane first, each in order of arrival. */
static const char *step_start(world *w)
{
	size_t k, pick = w->n_jobs;

	for (k = 0; k < w->n_jobs; k++)
		if (!w->jobs[k].started && (pick == w->n_jobs ||
		    (w->jobs[k].urgent && !w->jobs[pick].urgent)))
			pick = k;
	if (pick == w->n_jobs)
		return "a hasher starts: nothing waits";
	w->jobs[pick].started = 1;
	return "a hasher starts the next job";
}

static void retry_later(world *w, vd_copy *c)
{
	double d = vd_plan_retry_delay(W_LIMIT_S, c->timeouts);
	uint64_t due = w->now + (uint64_t)(d * 1000);
	int i;

	for (i = 0; i < W_COPIES && strcmp(w->rel[i], c->relpath) != 0; i++)
		;
	if (d < 1 || d > VD_RETRY_MAX_SECONDS)
		violation(w, "%s: retried after %.0f s, outside [1, %d]", c->relpath, d, VD_RETRY_MAX_SECONDS);
	if (c->timeouts > 1 && d < w->last_delay[i])
		violation(w, "%s: retried after %.0f s at its timeout %u in a row, sooner than the %.0f s before",
		    c->relpath, d, c->timeouts, w->last_delay[i]);
	w->last_delay[i] = d;
	SIM_REQUIRE(w->n_rt < SIM_STEPS_MAX);
	SIM_REQUIRE(vd_retries_add(&w->rt, c->relpath, due) == 0);
	w->shadow_rt[w->n_rt].copy = i;
	w->shadow_rt[w->n_rt].due = due;
	w->n_rt++;
}

/* A started job returns, as on_job_done takes it. */
static const char *step_complete(world *w)
{
	static const char *const how[] = { "a job done", "a job failed", "a job ran out of time",
		"a job's bytes changed under it", "a job stopped: its copy went away" };
	size_t k, n = 0, pick;
	int o = (int)rnd(w, 5);
	vd_job *j;
	vd_copy *c;

	for (k = 0; k < w->n_jobs; k++)
		n += w->jobs[k].started;
	if (n == 0)
		return "complete a job: none started";
	pick = rnd(w, (uint32_t)n);
	for (k = 0; !w->jobs[k].started || pick-- != 0; k++)
		;
	j = w->jobs[k].j;
	w->jobs[k].j = NULL;
	job_drop(w, &w->jobs[k]);
	c = vd_model_copy(&w->m, j->relpath);
	if (c == NULL || c->inflight != j) {
		vd_job_free(j);
		drain(w);
		return "a job returns: its copy went away meanwhile";
	}
	c->inflight = NULL;
	if (o == 4) {
		/* The scan that follows finds it replaced, or gone. */
		if (rnd(w, 2)) {
			vd_plan_schedule(&w->plan, c, VD_JOB_BACKGROUND, NULL);
		} else {
			vd_plan_forget(&w->plan, c);
			vd_model_remove_copy(&w->m, c);
		}
	} else if (o == 3) {
		c->timeouts = 0;
		vd_plan_follow_up(&w->plan, c, j->kind, j->gen);
	} else {
		c->timeouts = o == 2 ? c->timeouts + 1 : 0;
		c->done_gen = j->gen;
		if (o == 2)
			retry_later(w, c);
		if (c->again)
			vd_plan_follow_up(&w->plan, c, c->again_kind, c->again_gen);
	}
	vd_job_free(j);
	drain(w);
	return how[o];
}

static const char *step_remove(world *w)
{
	vd_copy *c = pick_copy(w, NULL);

	if (c == NULL)
		return "remove a copy: gone already";
	/* Its job, found without a copy on return, is dropped then. */
	vd_plan_forget(&w->plan, c);
	vd_model_remove_copy(&w->m, c);
	return "remove a copy";
}

static const char *step_readd(world *w)
{
	int i;
	vd_copy *c = pick_copy(w, &i);

	if (c != NULL)
		return "a copy comes back: there already";
	SIM_REQUIRE((c = vd_model_add_copy(&w->m, w->rel[i], "r")) != NULL);
	w->last_delay[i] = 0;
	vd_plan_schedule(&w->plan, c, VD_JOB_BACKGROUND, NULL);
	return "a copy comes back";
}

static const char *step_change(world *w)
{
	vd_copy *c = pick_copy(w, NULL);

	if (c == NULL)
		return "a copy changed: gone";
	vd_plan_schedule(&w->plan, c, VD_JOB_BACKGROUND, NULL);
	return "a copy changed: verified again at a newer generation";
}

static void retries_due(world *w)
{
	uint64_t first = VD_PLAN_NONE;
	char *rel;
	vd_copy *c;
	size_t k;
	int i;

	while ((rel = vd_retries_take_due(&w->rt, w->now)) != NULL) {
		for (i = 0; i < W_COPIES && strcmp(w->rel[i], rel) != 0; i++)
			;
		for (k = 0; k < w->n_rt && !(w->shadow_rt[k].copy == i && w->shadow_rt[k].due <= w->now); k++)
			;
		if (k == w->n_rt)
			violation(w, "%s retried at %llu ms, before it was due", rel, (unsigned long long)w->now);
		else
			w->shadow_rt[k] = w->shadow_rt[--w->n_rt];
		if ((c = vd_model_copy(&w->m, rel)) != NULL && c->timeouts > 0) {
			vd_plan_schedule(&w->plan, c, VD_JOB_BACKGROUND, NULL);
			seen.retried++;
		}
		free(rel);
	}
	for (k = 0; k < w->n_rt; k++) {
		if (w->shadow_rt[k].due <= w->now)
			violation(w, "%s due at %llu ms, not retried at %llu ms", w->rel[w->shadow_rt[k].copy],
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
	vd_copy *c;

	if (!w->sc.active) {
		for (i = 0; i < W_COPIES; i++)
			order[i] = i;
		for (i = W_COPIES - 1; i > 0; i--) {
			k = (int)rnd(w, (uint32_t)i + 1);
			t = order[i], order[i] = order[k], order[k] = t;
		}
		memset(w->scrub_seen, 0, sizeof(w->scrub_seen));
		for (i = 0; i < W_COPIES; i++)
			w->scrub_expect[i] = (c = copy_at(w, i)) != NULL && c->done_gen > 0;
		for (i = 0; i < W_COPIES; i++)
			if (w->scrub_expect[order[i]])
				rels[n++] = w->rel[order[i]];
		SIM_REQUIRE(vd_scrub_begin(&w->sc, rels, (size_t)n) == 0);
		w->scrub_last[0] = '\0';
		return "a scrub pass begins";
	}
	if ((rel = vd_scrub_next(&w->sc)) == NULL) {
		for (i = 0; i < W_COPIES; i++)
			if (w->scrub_expect[i] && w->scrub_seen[i] != 1)
				violation(w, "a scrub pass visited %s %d times", w->rel[i], w->scrub_seen[i]);
		vd_scrub_end(&w->sc);
		seen.passes++;
		return "a scrub pass ends";
	}
	for (i = 0; i < W_COPIES && strcmp(w->rel[i], rel) != 0; i++)
		;
	if (i == W_COPIES || !w->scrub_expect[i])
		violation(w, "a scrub pass visits %s, not verified when it began", rel);
	else if (++w->scrub_seen[i] > 1)
		violation(w, "a scrub pass visits %s again", rel);
	if (strcmp(w->scrub_last, rel) >= 0)
		violation(w, "a scrub pass visits %s after %s", rel, w->scrub_last);
	snprintf(w->scrub_last, sizeof(w->scrub_last), "%s", rel);
	if ((c = vd_model_copy(&w->m, rel)) != NULL && c->inflight == NULL &&
	    vd_plan_start(&w->plan, c, VD_JOB_SCRUB, c->req_gen + 1) == 0)
		c->req_gen++;
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
	{ step_add, 5 }, { step_start, 14 }, { step_complete, 14 }, { step_remove, 1 },
	{ step_readd, 2 }, { step_change, 3 }, { step_tick, 6 }, { step_cancel, 2 },
	{ step_cancel_midway, 2 }, { step_scrub, 3 }, { step_shutdown, 0 },
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
	vd_copy *c;
	int i;

	SIM_REQUIRE(w != NULL);
	SIM_REQUIRE((w->wt = calloc(W_WAITERS, sizeof(*w->wt))) != NULL);
	w->seed = seed;
	reseed(w, 0);
	w->now = rnd(w, 1000);
	vd_waitset_init(&w->ws);
	vd_model_init(&w->m);
	vd_plan_init(&w->plan, &w->m, &(vd_plan_pool){ q_submit, q_take_back, q_promote, w });
	for (i = 0; i < W_COPIES; i++) {
		snprintf(w->rel[i], sizeof(w->rel[i]), "r/c%02d", i);
		SIM_REQUIRE((c = vd_model_add_copy(&w->m, w->rel[i], "r")) != NULL);
		vd_plan_schedule(&w->plan, c, VD_JOB_BACKGROUND, NULL);
	}
	return w;
}

static void world_free(world *w)
{
	vd_waitset_free(&w->ws);
	vd_plan_free(&w->plan);
	while (w->n_jobs > 0)
		job_drop(w, &w->jobs[w->n_jobs - 1]);
	vd_model_free(&w->m);
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
		check_waiters(w);
		check_ahead(w);
		check_backlog(w);
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
	printf("waiters answered %lu (%lu timed out, %lu of them at shutdown), cancelled %lu; jobs "
	    "hurried %lu; copies queued from the backlog %lu, retried %lu; scrub passes %lu\n",
	    seen.answered, seen.timed_out, seen.at_shutdown, seen.cancelled, seen.hurried, seen.drained, seen.retried, seen.passes);
	printf("%lu histories, %lu steps, %lu invariant violations\n", seeds, total, violations);
	return violations > 0;
}

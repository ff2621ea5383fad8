/*
 * vd-simwait: clients waiting for verdicts and the verification schedule,
 * both the core's (vd_core.h, vd_waitset.h, vd_plan.h), driven through
 * vd_core_step by histories no one wrote by hand, with time as an input.
 * A seeded history asks for copies to be verified (clients waiting, with
 * deadlines; a copy changed or back), starts queued jobs and completes
 * started ones in any order (done, failed, stopped as the copy went away,
 * out of time, bytes changed under the hash), has the queue refuse a job
 * the core counted room for, removes copies and brings them back, begins
 * scrub passes, moves the clock (not at all, a little, to the next
 * deadline or retry, far), cancels waiters (also between an answer and the
 * next, as a waiter's function may), and shuts down. The hasher queue is
 * modelled here, W_QUEUE jobs waiting at most for background work, a lane
 * for clients' jobs ahead of the rest; the core's actions are applied to
 * it (a job queued, taken back when not started, else promoted), and what
 * it answered goes back as inputs, as vd_sched.c does. After every step
 * it checks:
 *
 *   - every waiter is answered exactly once, or cancelled and never
 *     answered; never with verdicts before each of its copies reached its
 *     generation with no newer run under way (or vanished); never as
 *     timed out before its deadline (but at shutdown); by the first tick
 *     at or after its deadline; at once when its copies are all reached;
 *     the deadline to arm is the earliest pending one or retry due;
 *   - a copy a client waits for has its queued job in the clients' lane
 *     as an explicit one, or its running one moved ahead;
 *   - no copy ever has two jobs queued or running at once; the job the
 *     core counts in flight is the one the queue holds;
 *   - every verification asked for is answered (its generation done, or
 *     its copy gone), or still waits: a job queued or running for it, a
 *     run booked, or the backlog; a job taken back is queued again (or
 *     waits in the backlog);
 *   - every copy marked as in the backlog is in it, and the backlog's
 *     copies are queued in its order, as far as the queue takes them, as
 *     a job returns;
 *   - a job out of time waits at least a second, longer each time in a
 *     row, never more than VD_RETRY_MAX_SECONDS, and is due neither
 *     before its time nor after the first tick at or after it; a scrub
 *     pass starts each copy that had a verdict when it began once at most,
 *     in path order, one at a time, and passes over none that stayed idle.
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

#include "vd_core.h"
#include "vd_limits.h"
#include "vd_model.h"
#include "vd_plan.h"
#include "vd_util.h"
#include "vd_waitset.h"

#define SIM_STEPS_DEFAULT 80
#define SIM_STEPS_MAX 10000
#define SIM_SEEDS_DEFAULT 200

#define W_COPIES 6                 /* copy slots */
#define W_QUEUE 3                  /* queue_max: background jobs waiting at most,
                                    * clients' twice that */
#define W_JOBS 256                 /* jobs in the queue, those of removed copies included */
#define W_PER_WAITER 3             /* copies one waiter names, at most */
#define W_WAITERS SIM_STEPS_MAX    /* at most one added per step */
#define W_REQUESTS (SIM_STEPS_MAX * 4)
#define W_LIMIT_S 30.0             /* a job's time limit */

enum { WS_PENDING, WS_ANSWERED, WS_CANCELLED };

#define SIM_REQUIRE(x) do { if (!(x)) { fprintf(stderr, "vd-simwait: %s failed (out of memory?)\n", #x); exit(2); } } while (0)

typedef struct w_job {             /* a job in the modelled hasher queue */
	uint64_t id, gen;
	vd_job_kind kind;
	int slot, life;                /* its copy, in which of its lives */
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

typedef struct w_request {         /* a verification asked for, not yet answered */
	int slot, life;
	uint64_t gen;
} w_request;

typedef struct world {
	uint32_t rnd;
	unsigned seed;
	int step, down, failed;
	char why[512];
	uint64_t now, deadline;        /* the clock; the deadline the last output armed */
	char rel[W_COPIES][16];
	int life[W_COPIES];            /* each time a copy comes back, a new life */
	double last_delay[W_COPIES];
	vd_core core;
	w_job jobs[W_JOBS];
	size_t n_jobs;
	int refuse;                    /* the queue refuses so many starts (full meanwhile) */
	int started[W_COPIES];         /* the last input started a job of it */
	w_waiter *wt;
	size_t n_wt;
	w_request *req;
	size_t n_req;
	w_retry shadow_rt[SIM_STEPS_MAX];
	size_t n_rt;
	int scrubbing;                 /* a pass under way, as the outputs said */
	int scrub_expect[W_COPIES], scrub_seen[W_COPIES], scrub_busy[W_COPIES];
	char scrub_last[16];
} world;

/* What the histories went through, so that a run shows it tested something. */
typedef struct w_seen {
	unsigned long answered, timed_out, at_shutdown, cancelled, hurried, taken_back, refused,
	    drained, retried, passes, scrubbed;
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

/* A copy as the core has it: read here, changed only through inputs. */
static const vd_copy *copy_at(const world *w, int i)
{
	return vd_core_copy(&w->core, w->rel[i]);
}

static int slot_of(const char *relpath)
{
	int i;

	for (i = 0; i < W_COPIES; i++) {
		char rel[16];
		snprintf(rel, sizeof(rel), "r/c%02d", i);
		if (strcmp(rel, relpath) == 0)
			return i;
	}
	return -1;
}

/* ---- the hasher queue, modelled: two lanes, clients' first --------------- */

static w_job *job_by_id(world *w, uint64_t id)
{
	size_t k;

	for (k = 0; id != 0 && k < w->n_jobs; k++)
		if (w->jobs[k].id == id)
			return &w->jobs[k];
	return NULL;
}

static void job_drop(world *w, w_job *x)
{
	*x = w->jobs[--w->n_jobs];
}

static unsigned waiting(const world *w)
{
	unsigned n = 0;
	size_t k;

	for (k = 0; k < w->n_jobs; k++)
		n += !w->jobs[k].started;
	return n;
}

/* Jobs of the copy in slot i in its present life, queued or running. */
static int live_jobs(const world *w, int i)
{
	int n = 0;
	size_t k;

	for (k = 0; k < w->n_jobs; k++)
		n += w->jobs[k].slot == i && w->jobs[k].life == w->life[i];
	return n;
}

/* ---- the shell: inputs, and the outputs applied --------------------------- */

static void input(world *w, const vd_core_input *in, vd_core_output *out);

static void check_answer(world *w, const vd_wait_answer *a);

static void scrub_start_seen(world *w, int i)
{
	seen.scrubbed++;
	if (!w->scrubbing)
		violation(w, "a scrub job of %s with no pass under way", w->rel[i]);
	else if (!w->scrub_expect[i])
		violation(w, "a scrub pass starts %s, which had no verdict when it began", w->rel[i]);
	else if (++w->scrub_seen[i] > 1)
		violation(w, "a scrub pass starts %s again", w->rel[i]);
	if (strcmp(w->scrub_last, w->rel[i]) >= 0)
		violation(w, "a scrub pass starts %s after %s", w->rel[i], w->scrub_last);
	snprintf(w->scrub_last, sizeof(w->scrub_last), "%s", w->rel[i]);
}

static void scrub_end_seen(world *w)
{
	int i;

	if (!w->scrubbing) {
		violation(w, "a scrub pass ends, none under way");
		return;
	}
	for (i = 0; i < W_COPIES; i++)
		if (w->scrub_expect[i] && w->scrub_seen[i] == 0 && !w->scrub_busy[i])
			violation(w, "a scrub pass passed over %s, idle all along", w->rel[i]);
	w->scrubbing = 0;
	seen.passes++;
}

/* A job the core asks for: one at a time for each copy. */
static int start(world *w, const vd_action *a)
{
	int i = slot_of(a->copy->relpath);

	SIM_REQUIRE(i >= 0 && w->n_jobs < W_JOBS);
	if (live_jobs(w, i) > 0)
		violation(w, "%s gets a %s job while its job is queued or running", a->copy->relpath,
		    a->job_kind == VD_JOB_SCRUB ? "scrub" : "second");
	if (a->copy->inflight != a->id)
		violation(w, "%s: job %llu started, but the core counts %llu in flight",
		    a->copy->relpath, (unsigned long long)a->id, (unsigned long long)a->copy->inflight);
	if (a->job_kind == VD_JOB_SCRUB)
		scrub_start_seen(w, i);
	else
		w->started[i] = 1;
	if (w->refuse > 0) {
		w->refuse--;
		seen.refused++;
		return -EAGAIN;
	}
	w->jobs[w->n_jobs++] = (w_job){ a->id, a->gen, a->job_kind, i, w->life[i],
		a->job_kind == VD_JOB_EXPLICIT, 0 };
	return 0;
}

/* 0 when taken back (not started yet), else promoted. */
static int take_back(world *w, const vd_action *a)
{
	w_job *x = job_by_id(w, a->id);

	seen.hurried++;
	if (x == NULL) {
		violation(w, "%s: asked to take back job %llu, which the queue does not hold",
		    a->copy->relpath, (unsigned long long)a->id);
		return -ENOENT;
	}
	if (!x->started && !x->urgent) {
		job_drop(w, x);
		seen.taken_back++;
		return 0;
	}
	x->urgent = 1;
	return -EBUSY;
}

/* A job taken back is queued again, ahead, or waits in the backlog. */
static void check_requeued(world *w, int i, uint64_t gen)
{
	const vd_copy *c = copy_at(w, i);
	w_job *x;

	if (c == NULL)
		return;
	x = job_by_id(w, c->inflight);
	if (c->backlog)
		return;
	if (x == NULL || x->gen < gen)
		violation(w, "%s: its job taken back (generation %llu) is not queued again",
		    w->rel[i], (unsigned long long)gen);
	else if (x->kind != VD_JOB_EXPLICIT)
		violation(w, "%s: its job taken back is queued again behind background work", w->rel[i]);
}

typedef struct w_answer {
	vd_core_in_kind kind;
	int slot;
	uint64_t id, gen;
} w_answer;

static void apply(world *w, const vd_core_output *out)
{
	w_answer ans[64];
	size_t i, n = 0;
	w_job *x;

	for (i = 0; i < out->n_actions; i++) {
		const vd_action *a = &out->actions[i];

		SIM_REQUIRE(n < sizeof(ans) / sizeof(ans[0]));
		switch (a->kind) {
		case VD_ACT_START:
			if (start(w, a) < 0)
				ans[n++] = (w_answer){ VD_CORE_UNSTARTED, slot_of(a->copy->relpath), a->id, a->gen };
			break;
		case VD_ACT_TAKE_BACK:
			if (take_back(w, a) == 0)
				ans[n++] = (w_answer){ VD_CORE_TAKEN_BACK, slot_of(a->copy->relpath), a->id, a->gen };
			break;
		case VD_ACT_PROMOTE:
			if ((x = job_by_id(w, a->id)) != NULL)
				x->urgent = 1;
			break;
		}
	}
	for (i = 0; i < n; i++) {
		vd_core_input in = { .kind = ans[i].kind };
		vd_core_output o;

		in.u.action.relpath = w->rel[ans[i].slot];
		in.u.action.id = ans[i].id;
		input(w, &in, &o);
		if (ans[i].kind == VD_CORE_TAKEN_BACK)
			check_requeued(w, ans[i].slot, ans[i].gen);
	}
}

/* As the store steps the core: the queue as it is, the input, its output
 * applied (answers, the scrub's news, then the actions). */
static void input(world *w, const vd_core_input *in, vd_core_output *out)
{
	vd_core_input src = { .kind = VD_CORE_SOURCES };
	vd_core_output ignored;
	size_t k;

	memset(&src.u.sources.src, 0, sizeof(src.u.sources.src));
	src.u.sources.src.scanned = 1;
	src.u.sources.src.queue = (vd_plan_queue){ waiting(w), W_QUEUE, !w->down };
	src.u.sources.change = VD_REFRESH_MODEL;
	vd_core_step(&w->core, &src, &ignored);
	for (k = 0; k < ignored.n_answered; k++)     /* left by a cancel between answers */
		check_answer(w, &ignored.answered[k]);
	memset(w->started, 0, sizeof(w->started));
	vd_core_step(&w->core, in, out);
	w->deadline = out->deadline_ms;
	for (k = 0; k < out->n_answered; k++)
		check_answer(w, &out->answered[k]);
	apply(w, out);
	if (out->scrub_ended)
		scrub_end_seen(w);
}

/* ---- what the waiters are told -------------------------------------------- */

/* As the core tells the waiters: a scrub holds no answer back. */
static int reached(const world *w, int i, uint64_t gen)
{
	const vd_copy *c = copy_at(w, i);

	return c == NULL || (c->done_gen >= gen && (c->inflight == 0 ||
	    c->inflight_kind == VD_JOB_SCRUB));
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
	const vd_copy *c;
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

/* A check point of the store (vd_waiters_check): answers, and the copies
 * the others wait for hurried. */
static void check_point(world *w)
{
	vd_core_input in = { .kind = VD_CORE_WAIT_CHECK };
	vd_core_output out;

	input(w, &in, &out);
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
	for (k = 0; k < w->n_rt; k++)
		if (w->shadow_rt[k].due < first)
			first = w->shadow_rt[k].due;
	if (w->deadline != first)
		violation(w, "the timer to arm is at %llu ms, but the first deadline or retry is at %llu ms",
		    (unsigned long long)w->deadline, (unsigned long long)first);
	if (vd_waitset_pending(&w->core.waiters) != n)
		violation(w, "%zu waiters pending, but %zu should be", vd_waitset_pending(&w->core.waiters), n);
}

/* A client's job runs before background work. */
static void check_ahead(world *w)
{
	const w_job *x;
	const vd_copy *c;
	size_t k;
	int j;

	for (k = 0; k < w->n_wt; k++) {
		if (w->wt[k].state != WS_PENDING)
			continue;
		for (j = 0; j < w->wt[k].n; j++) {
			c = copy_at(w, w->wt[k].copy[j]);
			if (c == NULL || c->inflight == 0 || c->inflight_kind == VD_JOB_SCRUB)
				continue;
			if ((x = job_by_id(w, c->inflight)) == NULL)
				continue;       /* checked by check_jobs */
			if (!x->urgent || (!x->started && c->inflight_kind != VD_JOB_EXPLICIT))
				violation(w, "a client waits for %s, whose %s job %s behind background work",
				    c->relpath, x->started ? "running" : "queued",
				    x->started ? "stays" : "waits");
		}
	}
}

/* One job at most for each copy, the one the core counts in flight. */
static void check_jobs(world *w)
{
	const vd_copy *c;
	int i, n;

	for (i = 0; i < W_COPIES; i++) {
		if ((c = copy_at(w, i)) == NULL)
			continue;
		n = live_jobs(w, i);
		if (n > 1)
			violation(w, "%s has %d jobs queued or running at once", c->relpath, n);
		if (c->inflight != 0 && job_by_id(w, c->inflight) == NULL)
			violation(w, "%s has job %llu in flight, which the queue does not hold", c->relpath,
			    (unsigned long long)c->inflight);
		if (c->inflight == 0 && n > 0)
			violation(w, "%s has a job queued or running, but none in flight", c->relpath);
	}
}

/* Nothing asked for is lost: answered, or a run of it to come. */
static void check_requests(world *w)
{
	const w_request *r;
	const w_job *x;
	const vd_copy *c;
	size_t k;

	for (k = 0; k < w->n_req; ) {
		r = &w->req[k];
		c = copy_at(w, r->slot);
		if (c == NULL || w->life[r->slot] != r->life || c->done_gen >= r->gen) {
			w->req[k] = w->req[--w->n_req];
			continue;
		}
		x = job_by_id(w, c->inflight);
		if (!(x != NULL && x->gen >= r->gen) && !(c->again && c->again_gen >= r->gen) &&
		    !c->backlog)
			violation(w, "%s: the verification asked for at generation %llu is lost "
			    "(done %llu, nothing queued, booked or in the backlog)", c->relpath,
			    (unsigned long long)r->gen, (unsigned long long)c->done_gen);
		k++;
	}
}

/* Every copy marked as in the backlog is in it. */
static void check_backlog(world *w)
{
	const vd_plan *p = &w->core.plan;
	size_t k, marked = 0;
	const vd_copy *c;
	int i;

	for (i = 0; i < W_COPIES; i++) {
		if ((c = copy_at(w, i)) == NULL || !c->backlog)
			continue;
		marked++;
		for (k = p->backlog.head; k < p->backlog.n; k++)
			if (strcmp(p->backlog.q[k], c->relpath) == 0)
				break;
		if (k == p->backlog.n)
			violation(w, "%s waits for the backlog, which lost it", c->relpath);
		if (c->inflight != 0)
			violation(w, "%s is in the backlog and in flight", c->relpath);
	}
	if (marked != p->backlogged)
		violation(w, "%zu copies counted in the backlog, %zu marked", p->backlogged, marked);
}

/* Retries: the core's are the ones due, none of them past. */
static void check_retries(world *w)
{
	const vd_retries *r = &w->core.retries;
	int used[SIM_STEPS_MAX] = { 0 };
	size_t k, j;

	if (r->n != w->n_rt)
		violation(w, "%zu retries kept, %zu due", r->n, w->n_rt);
	for (k = 0; k < r->n && k < SIM_STEPS_MAX; k++) {
		for (j = 0; j < w->n_rt; j++)
			if (!used[j] && w->shadow_rt[j].due == r->v[k].due_ms &&
			    strcmp(w->rel[w->shadow_rt[j].copy], r->v[k].relpath) == 0)
				break;
		if (j == w->n_rt)
			violation(w, "%s is retried at %llu ms, which no timeout asked for", r->v[k].relpath,
			    (unsigned long long)r->v[k].due_ms);
		else
			used[j] = 1;
		if (r->v[k].due_ms <= w->now)
			violation(w, "%s due at %llu ms, not retried at %llu ms", r->v[k].relpath,
			    (unsigned long long)r->v[k].due_ms, (unsigned long long)w->now);
	}
}

/* The scrub: one job at a time; a copy busy or gone meanwhile may be passed over. */
static void check_scrub(world *w)
{
	const vd_copy *c;
	size_t k, n = 0;
	int i;

	for (k = 0; k < w->n_jobs; k++)
		n += w->jobs[k].kind == VD_JOB_SCRUB;
	if (n > 1)
		violation(w, "%zu scrub jobs at once", n);
	if (w->scrubbing != w->core.scrub.active)
		violation(w, "a scrub pass is %s, but the outputs said it %s", w->core.scrub.active ?
		    "under way" : "over", w->scrubbing ? "began" : "ended");
	/* Waiting for room in the queue, it goes on as a job returns. */
	if (w->scrubbing && n == 0 && (!w->core.scrub_waits || w->n_jobs == 0))
		violation(w, "a scrub pass under way with no job%s: it stalls",
		    w->core.scrub_waits ? " and an empty queue" : "");
	for (i = 0; i < W_COPIES && w->scrubbing; i++)
		if ((c = copy_at(w, i)) == NULL || (c->inflight != 0 && c->inflight_kind != VD_JOB_SCRUB) ||
		    c->backlog)
			w->scrub_busy[i] = 1;
}

/* The backlog's copies are queued in its order (a copy there twice,
 * removed and back, at its first place): those the input queued are the
 * first of the candidates before it. */
static size_t backlog_candidates(world *w, int *cand)
{
	const vd_plan *p = &w->core.plan;
	size_t k, n = 0, j;
	const vd_copy *c;
	int i;

	for (k = p->backlog.head; k < p->backlog.n && n < W_COPIES; k++) {
		if ((c = vd_model_copy(&w->core.model, p->backlog.q[k])) == NULL || !c->backlog || c->inflight != 0)
			continue;
		i = slot_of(c->relpath);
		for (j = 0; j < n && cand[j] != i; j++)
			;
		if (j == n)
			cand[n++] = i;
	}
	return n;
}

static void check_drained(world *w, const int *cand, size_t n)
{
	size_t k, took = 0;
	const vd_copy *c;

	for (k = 0; k < n; k++) {
		c = copy_at(w, cand[k]);
		if (c == NULL || !w->started[cand[k]])
			continue;
		if (k != took++)
			violation(w, "the backlog queued %s ahead of %s, which came first", w->rel[cand[k]],
			    w->rel[cand[took - 1]]);
		seen.drained++;
	}
}

/* ---- steps ----------------------------------------------------------------- */

static const vd_copy *pick_copy(world *w, int *slot)
{
	int i = (int)rnd(w, W_COPIES);

	if (slot)
		*slot = i;
	return copy_at(w, i);
}

static void ask(world *w, int i, uint64_t gen)
{
	SIM_REQUIRE(w->n_req < W_REQUESTS);
	w->req[w->n_req++] = (w_request){ i, w->life[i], gen };
}

/* VD_CORE_VERIFY: 0 and the generation that answers it, or -errno. */
static int verify(world *w, int i, vd_job_kind kind, uint64_t *gen)
{
	vd_core_input in = { .kind = VD_CORE_VERIFY };
	vd_core_output out;
	const vd_copy *c = copy_at(w, i);
	uint64_t next = c->req_gen + 1;

	in.u.verify.relpath = w->rel[i];
	in.u.verify.kind = kind;
	input(w, &in, &out);
	if (out.result == 0)
		ask(w, i, out.gen);
	else if (kind != VD_JOB_EXPLICIT)
		ask(w, i, next);        /* the backlog's run answers it */
	if (gen)
		*gen = out.gen;
	return out.result;
}

static const char *step_add(world *w)
{
	static const uint64_t timeouts[] = { 0, 250, 5000, 300000, 300000000, 300000000, 300000000 };
	w_waiter *x = &w->wt[w->n_wt];
	char *rels[W_PER_WAITER];
	vd_core_input in = { .kind = VD_CORE_WAIT };
	vd_core_output out;
	int k, i, tries, want = 1 + (int)rnd(w, W_PER_WAITER);
	const vd_copy *c;

	memset(x, 0, sizeof(*x));
	for (tries = 0; tries < 20 && x->n < want; tries++) {
		c = pick_copy(w, &i);
		for (k = 0; k < x->n && x->copy[k] != i; k++)
			;
		if (k < x->n || c == NULL)
			continue;
		/* The queue full: 503, no one waits. */
		if (verify(w, i, VD_JOB_EXPLICIT, &x->gen[x->n]) < 0)
			return "add a waiter: the queue is full";
		x->copy[x->n] = i;
		rels[x->n] = w->rel[i];
		x->n++;
	}
	if (x->n == 0)
		return "add a waiter: no copy";
	x->deadline = w->now + timeouts[rnd(w, sizeof(timeouts) / sizeof(timeouts[0]))];
	in.u.wait.relpaths = rels;
	in.u.wait.gens = x->gen;
	in.u.wait.n = (size_t)x->n;
	in.u.wait.deadline_ms = x->deadline;
	in.u.wait.user = x;
	w->n_wt++;
	input(w, &in, &out);
	SIM_REQUIRE(out.result == 0);
	x->id = out.wait_id;
	if (out.n_answered > 0)
		violation(w, "a waiter is answered as it is added");
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

static void retried_later(world *w, int i, const vd_core_output *out)
{
	const vd_copy *c = copy_at(w, i);
	double d = out->retry_in;

	if (d < 1 || d > VD_RETRY_MAX_SECONDS)
		violation(w, "%s: retried after %.0f s, outside [1, %d]", c->relpath, d, VD_RETRY_MAX_SECONDS);
	if (d != vd_plan_retry_delay(W_LIMIT_S, c->timeouts))
		violation(w, "%s: retried after %.0f s at its timeout %u in a row, not %.0f s", c->relpath,
		    d, c->timeouts, vd_plan_retry_delay(W_LIMIT_S, c->timeouts));
	if (c->timeouts > 1 && d < w->last_delay[i])
		violation(w, "%s: retried after %.0f s at its timeout %u in a row, sooner than the %.0f s before",
		    c->relpath, d, c->timeouts, w->last_delay[i]);
	w->last_delay[i] = d;
	SIM_REQUIRE(w->n_rt < SIM_STEPS_MAX);
	w->shadow_rt[w->n_rt].copy = i;
	w->shadow_rt[w->n_rt].due = w->now + (uint64_t)(d * 1000);
	w->n_rt++;
}

static void remove_copy(world *w, int i)
{
	vd_core_input in = { .kind = VD_CORE_COPY_GONE };
	vd_core_output out;

	in.u.relpath = w->rel[i];
	input(w, &in, &out);
	if (out.result < 0 || copy_at(w, i) != NULL)
		violation(w, "%s could not be removed", w->rel[i]);
}

/* A started job returns, as on_job_done takes it. */
static const char *step_complete(world *w)
{
	static const char *const how[] = { "a job done", "a job failed", "a job ran out of time",
		"a job's bytes changed under it", "a job stopped: its copy went away" };
	size_t k, n = 0, pick;
	int o = (int)rnd(w, 5), i, cand[W_COPIES];
	vd_core_input in = { .kind = VD_CORE_JOB_DONE };
	vd_core_output out;
	vd_job_result r;
	vd_verdict v;
	w_job j;
	const vd_copy *c;
	int live;
	unsigned long refused;

	for (k = 0; k < w->n_jobs; k++)
		n += w->jobs[k].started;
	if (n == 0)
		return "complete a job: none started";
	pick = rnd(w, (uint32_t)n);
	for (k = 0; !w->jobs[k].started || pick-- != 0; k++)
		;
	j = w->jobs[k];
	job_drop(w, &w->jobs[k]);
	i = j.slot;
	c = copy_at(w, i);
	live = c != NULL && j.life == w->life[i] && c->inflight == j.id;
	memset(&v, 0, sizeof(v));
	v.code = o == 0 || o == 3 ? VD_OK : VD_IO_ERROR;
	memset(&r, 0, sizeof(r));
	r.id = j.id;
	r.relpath = w->rel[i];
	r.kind = j.kind;
	r.gen = j.gen;
	r.abandoned = o == 2 ? VD_ABANDON_TIME : o == 4 ? VD_ABANDON_GONE : VD_ABANDON_NONE;
	r.verdict = &v;
	if (c != NULL)
		r.fp_before = r.fp_after = c->fp;
	r.fp_before.ok = r.fp_after.ok = 1;
	r.fp_after.digest[0] ^= (uint8_t)(o == 3);
	r.changed = "";
	r.limit = W_LIMIT_S;
	r.now_ms = w->now;
	in.u.job = &r;
	n = backlog_candidates(w, cand);
	refused = seen.refused;
	input(w, &in, &out);
	check_drained(w, cand, n);      /* before the answers to its actions */
	/* A job back: the backlog goes on as far as the queue takes it. */
	if (out.result != VD_JOB_DROPPED && seen.refused == refused && waiting(w) < W_QUEUE &&
	    backlog_candidates(w, cand) > 0)
		violation(w, "%s waits in the backlog, with room in the queue", w->rel[cand[0]]);
	if (!live) {
		if (out.result != VD_JOB_DROPPED)
			violation(w, "a job of %s no longer its own was taken (%d)", w->rel[i], out.result);
		return "a job returns: its copy went away meanwhile";
	}
	if (out.result == VD_JOB_DROPPED)
		violation(w, "the job of %s in flight was dropped", w->rel[i]);
	if (o == 2 && out.result == VD_JOB_TIMED_OUT && out.retry_in > 0)
		retried_later(w, i, &out);
	if (o == 4) {
		/* The scan that follows finds it replaced, or gone. */
		if (rnd(w, 2)) {
			verify(w, i, VD_JOB_BACKGROUND, NULL);
		} else {
			remove_copy(w, i);
		}
	}
	return how[o];
}

static const char *step_remove(world *w)
{
	int i;
	const vd_copy *c = pick_copy(w, &i);

	if (c == NULL)
		return "remove a copy: gone already";
	/* Its job, found without a copy on return, is dropped then. */
	remove_copy(w, i);
	return "remove a copy";
}

/* A copy comes into the core's model as a client's named one does. */
static void adopt(world *w, int i)
{
	vd_core_input in = { .kind = VD_CORE_ADOPT, .u.adopt = { w->rel[i], VD_KIND_DIR } };
	vd_core_output out;

	input(w, &in, &out);
	SIM_REQUIRE(out.result == VD_SCAN_NEW);
}

static const char *step_readd(world *w)
{
	int i;
	const vd_copy *c = pick_copy(w, &i);

	if (c != NULL)
		return "a copy comes back: there already";
	adopt(w, i);
	w->life[i]++;
	w->last_delay[i] = 0;
	verify(w, i, VD_JOB_BACKGROUND, NULL);
	return "a copy comes back";
}

static const char *step_change(world *w)
{
	int i;
	const vd_copy *c = pick_copy(w, &i);

	if (c == NULL)
		return "a copy changed: gone";
	verify(w, i, VD_JOB_BACKGROUND, NULL);
	return "a copy changed: verified again at a newer generation";
}

/* The queue filled meanwhile: the next starts are refused after all. */
static const char *step_refuse(world *w)
{
	w->refuse = 1 + (int)rnd(w, 2);
	return "the queue will refuse the next jobs";
}

/* The shadow of the retries: those due at now are fired. */
static void retries_fired(world *w)
{
	const vd_copy *c;
	size_t k;

	for (k = 0; k < w->n_rt; ) {
		if (w->shadow_rt[k].due > w->now) {
			k++;
			continue;
		}
		c = copy_at(w, w->shadow_rt[k].copy);
		seen.retried += c != NULL && c->timeouts > 0;
		w->shadow_rt[k] = w->shadow_rt[--w->n_rt];
	}
}

static void tick(world *w)
{
	vd_core_input in = { .kind = VD_CORE_TICK, .u.now_ms = w->now };
	vd_core_output out;
	size_t k;

	retries_fired(w);
	input(w, &in, &out);
	for (k = 0; k < w->n_wt; k++)
		if (w->wt[k].state == WS_PENDING && w->wt[k].deadline <= w->now)
			violation(w, "waiter %llu still waits at %llu ms, past its deadline %llu ms",
			    (unsigned long long)w->wt[k].id, (unsigned long long)w->now,
			    (unsigned long long)w->wt[k].deadline);
}

static const char *step_tick(world *w)
{
	const char *what;
	uint64_t due = VD_PLAN_NONE;
	size_t k;

	switch (rnd(w, 5)) {
	case 0:
		what = "the clock does not move";
		break;
	case 1:
		w->now += 1 + rnd(w, 1000);
		what = "the clock moves a little";
		break;
	case 2:
		if (w->deadline != VD_WAIT_NONE && w->deadline > w->now)
			w->now = w->deadline;
		what = "the clock reaches the next deadline";
		break;
	case 3:
		for (k = 0; k < w->n_rt; k++)
			if (w->shadow_rt[k].due < due)
				due = w->shadow_rt[k].due;
		if (due != VD_PLAN_NONE && due > w->now)
			w->now = due - rnd(w, 2);
		what = "the clock reaches the next retry (or just before)";
		break;
	default:
		w->now += 1000000 + rnd(w, 100000000);
		what = "the clock jumps";
		break;
	}
	tick(w);
	return what;
}

static const char *step_cancel(world *w)
{
	vd_core_input in = { .kind = VD_CORE_WAIT_CANCEL };
	vd_core_output out;
	size_t k, n = 0, pick;

	for (k = 0; k < w->n_wt; k++)
		n += w->wt[k].state == WS_PENDING;
	if (n == 0)
		return "cancel a waiter: none waits";
	pick = rnd(w, (uint32_t)n);
	for (k = 0; k < w->n_wt; k++) {
		if (w->wt[k].state != WS_PENDING || pick-- != 0)
			continue;
		w->wt[k].state = WS_CANCELLED;
		in.u.wait_id = w->wt[k].id;
		input(w, &in, &out);
		if (out.result != 0)
			violation(w, "waiter %llu, not answered, could not be cancelled",
			    (unsigned long long)w->wt[k].id);
		seen.cancelled++;
		break;
	}
	return "cancel a waiter";
}

/* A waiter's function cancels another while answers are being handed
 * out: the waiters' deadlines passed as TICK passes them, the first
 * answer taken, a cancel (whose output brings the answers left), and the
 * tick itself. */
static const char *step_cancel_midway(world *w)
{
	vd_wait_answer a;
	size_t k, n = 0, pick;

	w->now += rnd(w, 2) ? 0 : 1 + rnd(w, 6000);
	vd_waitset_tick(&w->core.waiters, w->now);
	if (vd_waitset_take(&w->core.waiters, &a))
		check_answer(w, &a);
	for (k = 0; k < w->n_wt; k++)
		n += w->wt[k].state == WS_PENDING;
	pick = n ? rnd(w, (uint32_t)n) : 0;
	for (k = 0; k < w->n_wt && n > 0; k++) {
		if (w->wt[k].state != WS_PENDING || pick-- != 0)
			continue;
		w->wt[k].state = WS_CANCELLED;
		if (vd_waitset_cancel(&w->core.waiters, w->wt[k].id) != 0)
			violation(w, "waiter %llu, not answered, could not be cancelled",
			    (unsigned long long)w->wt[k].id);
		seen.cancelled++;
		break;
	}
	tick(w);
	return "the clock moves; a cancel between two answers";
}

static const char *step_scrub(world *w)
{
	vd_core_input in = { .kind = VD_CORE_SCRUB };
	vd_core_output out;
	int expect[W_COPIES], i;
	const vd_copy *c;

	for (i = 0; i < W_COPIES; i++)
		expect[i] = (c = copy_at(w, i)) != NULL && c->has_verdict;
	if (!w->scrubbing) {
		memcpy(w->scrub_expect, expect, sizeof(expect));
		memset(w->scrub_seen, 0, sizeof(w->scrub_seen));
		for (i = 0; i < W_COPIES; i++)
			w->scrub_busy[i] = (c = copy_at(w, i)) == NULL || c->inflight != 0 || c->backlog;
		w->scrub_last[0] = '\0';
		w->scrubbing = 1;       /* before its first job starts */
	}
	input(w, &in, &out);
	if (out.result == -EBUSY)
		return "the scrub's interval: a pass under way";
	if (out.result < 0) {
		violation(w, "a scrub pass could not begin: %d", out.result);
		return "the scrub's interval";
	}
	return "a scrub pass begins";
}

static const char *step_shutdown(world *w)
{
	vd_core_input in = { .kind = VD_CORE_WAIT_FIRE_ALL };
	vd_core_output out;
	size_t k;

	w->down = 1;
	input(w, &in, &out);
	for (k = 0; k < w->n_wt; k++)
		if (w->wt[k].state == WS_PENDING)
			violation(w, "waiter %llu never answered at shutdown", (unsigned long long)w->wt[k].id);
	return "shutdown: every waiter answered";
}

typedef const char *(*step_fn)(world *w);

static const struct { step_fn fn; unsigned weight; } steps[] = {
	{ step_add, 5 }, { step_start, 14 }, { step_complete, 14 }, { step_remove, 1 },
	{ step_readd, 2 }, { step_change, 3 }, { step_tick, 6 }, { step_cancel, 2 },
	{ step_cancel_midway, 2 }, { step_scrub, 2 }, { step_refuse, 1 }, { step_shutdown, 0 },
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
	SIM_REQUIRE((w->req = calloc(W_REQUESTS, sizeof(*w->req))) != NULL);
	w->seed = seed;
	reseed(w, 0);
	w->now = rnd(w, 1000);
	w->deadline = VD_WAIT_NONE;
	vd_core_init(&w->core, NULL, NULL);     /* no records: waiters and jobs only */
	for (i = 0; i < W_COPIES; i++) {
		snprintf(w->rel[i], sizeof(w->rel[i]), "r/c%02d", i);
		adopt(w, i);
		verify(w, i, VD_JOB_BACKGROUND, NULL);
	}
	return w;
}

static void world_free(world *w)
{
	vd_core_free(&w->core);
	free(w->wt);
	free(w->req);
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
		check_jobs(w);
		check_requests(w);
		check_backlog(w);
		check_retries(w);
		check_scrub(w);
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
	    "hurried %lu (taken back %lu), refused by the queue %lu; copies queued from the backlog "
	    "%lu, retried %lu; scrub passes %lu (%lu copies)\n", seen.answered, seen.timed_out,
	    seen.at_shutdown, seen.cancelled, seen.hurried, seen.taken_back, seen.refused,
	    seen.drained, seen.retried, seen.passes, seen.scrubbed);
	printf("%lu histories, %lu steps, %lu invariant violations\n", seeds, total, violations);
	return violations > 0;
}

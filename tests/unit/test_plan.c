/*
 * The verification schedule's decisions, without a loop, a pool or a
 * clock: the backlog drains in the order it filled; a job that ran out of
 * time waits longer each time, never more than VD_RETRY_MAX_SECONDS, and
 * is due neither before its time nor later than the first look after it;
 * a scrub pass visits each copy once, in path order; a copy goes on with
 * the more urgent and later of two runs; over a queue of a few places, a
 * run is booked while one is in flight, a background one that finds the
 * queue full waits in the backlog, a client's goes ahead of it, all as
 * actions the owner applies; a job the queue refused after all waits in
 * the backlog.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "vd_limits.h"
#include "vd_model.h"
#include "vd_plan.h"
#include "vd_pool.h"

static void test_backlog_order(void **unused)
{
	(void)unused;
	vd_backlog b = { 0 };
	char rel[32];
	int i;

	assert_null(vd_backlog_peek(&b));
	for (i = 0; i < 600; i++) {
		snprintf(rel, sizeof(rel), "r/%03d", i);
		assert_int_equal(vd_backlog_push(&b, rel), 0);
	}
	assert_int_equal(vd_backlog_len(&b), 600);
	for (i = 0; i < 300; i++) {
		snprintf(rel, sizeof(rel), "r/%03d", i);
		assert_string_equal(vd_backlog_peek(&b), rel);
		vd_backlog_pop(&b);
	}
	/* Pushed while half drained: behind the rest. */
	assert_int_equal(vd_backlog_push(&b, "late"), 0);
	for (i = 300; i < 600; i++) {
		snprintf(rel, sizeof(rel), "r/%03d", i);
		assert_string_equal(vd_backlog_peek(&b), rel);
		vd_backlog_pop(&b);
	}
	assert_string_equal(vd_backlog_peek(&b), "late");
	vd_backlog_pop(&b);
	assert_null(vd_backlog_peek(&b));
	assert_int_equal(vd_backlog_len(&b), 0);
	vd_backlog_pop(&b);     /* empty: nothing happens */
	assert_int_equal(vd_backlog_push(&b, "again"), 0);
	assert_string_equal(vd_backlog_peek(&b), "again");
	vd_backlog_free(&b);
}

static void test_retry_delay(void **unused)
{
	(void)unused;
	double prev = 0, d;
	unsigned n;

	assert_true(vd_plan_retry_delay(0, 1) == 1);          /* at least a second */
	assert_true(vd_plan_retry_delay(30, 0) == 30);
	assert_true(vd_plan_retry_delay(30, 1) == 30);
	assert_true(vd_plan_retry_delay(30, 2) == 60);
	assert_true(vd_plan_retry_delay(30, 3) == 120);
	for (n = 1; n < 100; n++) {
		d = vd_plan_retry_delay(45, n);
		assert_true(d >= prev);
		assert_true(d <= VD_RETRY_MAX_SECONDS);
		prev = d;
	}
	assert_true(prev == VD_RETRY_MAX_SECONDS);
	assert_true(vd_plan_retry_delay(1e9, 1) == VD_RETRY_MAX_SECONDS);
	assert_true(vd_plan_retry_delay(10, UINT32_MAX) == VD_RETRY_MAX_SECONDS);
}

static void test_retries_due(void **unused)
{
	(void)unused;
	vd_retries r = { 0 };
	char *rel;

	assert_int_equal(vd_retries_next_due(&r), VD_PLAN_NONE);
	assert_int_equal(vd_retries_add(&r, "late", 5000), 0);
	assert_int_equal(vd_retries_add(&r, "early", 1000), 0);
	assert_int_equal(vd_retries_add(&r, "mid", 3000), 0);
	assert_int_equal(vd_retries_next_due(&r), 1000);
	assert_null(vd_retries_take_due(&r, 999));
	rel = vd_retries_take_due(&r, 4000);
	assert_string_equal(rel, "early");
	free(rel);
	rel = vd_retries_take_due(&r, 4000);
	assert_string_equal(rel, "mid");
	free(rel);
	assert_null(vd_retries_take_due(&r, 4000));
	assert_int_equal(vd_retries_next_due(&r), 5000);
	vd_retries_free(&r);    /* "late" with it */
}

static void test_scrub_pass(void **unused)
{
	(void)unused;
	const char *in[] = { "b/2", "a/1", "b/10", "a/1", "c" };
	const char *want[] = { "a/1", "b/10", "b/2", "c" };
	vd_scrub sc = { 0 };
	size_t i;

	assert_null(vd_scrub_next(&sc));
	assert_int_equal(vd_scrub_begin(&sc, in, 5), 0);
	assert_int_equal(sc.n, 4);
	for (i = 0; i < 4; i++)
		assert_string_equal(vd_scrub_next(&sc), want[i]);
	assert_null(vd_scrub_next(&sc));
	assert_int_equal(vd_scrub_begin(&sc, in, 0), 0);   /* an empty pass */
	assert_null(vd_scrub_next(&sc));
	vd_scrub_end(&sc);
	assert_int_equal(sc.active, 0);
}

static void test_follow(void **unused)
{
	(void)unused;
	int urgency = 1;
	uint64_t gen = 5;

	vd_plan_follow(0, 0, 9, &urgency, &gen);      /* nothing booked */
	assert_int_equal(urgency, 1);
	assert_int_equal(gen, 5);
	vd_plan_follow(1, 2, 4, &urgency, &gen);      /* less urgent, older */
	assert_int_equal(urgency, 1);
	assert_int_equal(gen, 5);
	vd_plan_follow(1, 0, 7, &urgency, &gen);
	assert_int_equal(urgency, 0);
	assert_int_equal(gen, 7);
}

/* A queue of two places for background jobs (queue_max 2), four for a
 * client's; none is started. The plan's actions are applied to it as an
 * owner would; it takes back any job asked for, none having started. */
typedef struct fake_job {
	uint64_t id, gen;
	vd_job_kind kind;
	vd_copy *c;
} fake_job;

typedef struct fake_queue {
	fake_job jobs[8];
	size_t n;
	int promoted;
} fake_queue;

static void fq_remove(fake_queue *q, uint64_t id)
{
	size_t i;

	for (i = 0; i < q->n && q->jobs[i].id != id; i++)
		;
	assert_true(i < q->n);
	q->jobs[i] = q->jobs[--q->n];
}

/* A new input: the queue as it is now. */
static void fq_begin(vd_plan *p, const fake_queue *q)
{
	vd_plan_set_queue(p, &(vd_plan_queue){ (unsigned)q->n, 2, 1 });
	vd_plan_begin(p);
}

/* The input's actions, and the answers they bring (each another input). */
static void fq_apply(vd_plan *p, fake_queue *q)
{
	vd_action acts[8];
	size_t i, n = p->n_acts;

	assert_true(n <= 8);
	memcpy(acts, p->acts, n * sizeof(*acts));
	for (i = 0; i < n; i++) {
		if (acts[i].kind == VD_ACT_START) {
			assert_true(q->n < 8);
			assert_int_equal(acts[i].copy->inflight, acts[i].id);
			q->jobs[q->n++] = (fake_job){ acts[i].id, acts[i].gen, acts[i].job_kind,
				vd_model_copy(p->model, acts[i].copy->relpath) };
		} else if (acts[i].kind == VD_ACT_TAKE_BACK) {
			fq_remove(q, acts[i].id);
			fq_begin(p, q);
			vd_plan_taken_back(p, vd_model_copy(p->model, acts[i].copy->relpath), acts[i].id);
			fq_apply(p, q);
		} else {
			q->promoted++;
		}
	}
}

static int schedule(vd_plan *p, fake_queue *q, vd_copy *c, vd_job_kind kind, uint64_t *gen)
{
	int rc;

	fq_begin(p, q);
	rc = vd_plan_schedule(p, c, kind, gen);
	fq_apply(p, q);
	return rc;
}

static const fake_job *job_of(const fake_queue *q, const vd_copy *c)
{
	static const fake_job none;
	size_t i;

	for (i = 0; i < q->n; i++)
		if (q->jobs[i].id == c->inflight)
			return &q->jobs[i];
	fail_msg("%s has no job in the queue", c->relpath);
	return &none;
}

/* c's job returns done, as the core takes it. */
static void job_done(vd_plan *p, fake_queue *q, vd_copy *c)
{
	const fake_job *j = job_of(q, c);
	uint64_t id, gen;

	id = j->id;
	gen = j->gen;
	fq_remove(q, id);
	fq_begin(p, q);
	assert_int_equal(vd_plan_returned(p, c, id), 0);
	assert_int_equal(vd_plan_returned(p, c, id), -ESRCH);    /* once */
	c->done_gen = gen;
	if (c->again)
		vd_plan_follow_up(p, c, c->again_kind, c->again_gen);
	vd_plan_drain(p);
	fq_apply(p, q);
}

static void test_schedule(void **unused)
{
	(void)unused;
	fake_queue q = { 0 };
	vd_model m;
	vd_plan p;
	vd_copy *c[4];
	uint64_t gen = 0;
	char rel[16];
	int i;

	vd_model_init(&m);
	vd_plan_init(&p, &m);
	for (i = 0; i < 4; i++) {
		snprintf(rel, sizeof(rel), "r/c%d", i);
		assert_non_null(c[i] = vd_model_add_copy(&m, rel, "r"));
		assert_int_equal(schedule(&p, &q, c[i], VD_JOB_BACKGROUND, &gen), i < 2 ? 0 : -EAGAIN);
	}
	/* c2 and c3 wait in the backlog, in that order. */
	assert_int_equal(p.backlogged, 2);
	assert_true(c[2]->backlog && c[3]->backlog);
	/* In flight: one more run is booked, at the most urgent kind. */
	assert_int_equal(schedule(&p, &q, c[0], VD_JOB_SCRUB, &gen), 0);
	assert_int_equal(gen, 2);
	assert_int_equal(c[0]->again_kind, VD_JOB_SCRUB);
	assert_int_equal(schedule(&p, &q, c[0], VD_JOB_BACKGROUND, &gen), 0);
	assert_int_equal(gen, 2);
	assert_int_equal(c[0]->again_kind, VD_JOB_BACKGROUND);
	/* A client's request books a run of c1 and takes its queued job back
	 * (the queue answers it was not started): queued again ahead, it
	 * answers the booked run too. */
	assert_int_equal(schedule(&p, &q, c[1], VD_JOB_EXPLICIT, &gen), 0);
	assert_int_equal(gen, 2);
	assert_int_equal(c[1]->inflight_kind, VD_JOB_EXPLICIT);
	assert_int_equal(job_of(&q, c[1])->gen, 2);
	assert_false(c[1]->again);
	assert_int_equal(q.promoted, 0);
	/* A client's request for c3, in the backlog: queued at once. */
	assert_int_equal(schedule(&p, &q, c[3], VD_JOB_EXPLICIT, &gen), 0);
	assert_int_equal(c[3]->inflight_kind, VD_JOB_EXPLICIT);
	assert_false(c[3]->backlog);
	assert_int_equal(p.backlogged, 1);
	/* c0 returns: the queue is full, its booked run waits behind c2. */
	job_done(&p, &q, c[0]);
	assert_int_equal(c[0]->done_gen, 1);
	assert_int_equal(c[0]->inflight, 0);
	assert_true(c[0]->backlog && c[2]->backlog);
	assert_int_equal(p.backlogged, 2);
	/* Room for one: c2, which came first. */
	job_done(&p, &q, c[3]);
	assert_int_not_equal(c[2]->inflight, 0);
	assert_int_equal(c[0]->inflight, 0);
	job_done(&p, &q, c[1]);
	assert_int_not_equal(c[0]->inflight, 0);
	assert_int_equal(p.backlogged, 0);
	assert_null(vd_backlog_peek(&p.backlog));
	job_done(&p, &q, c[2]);
	job_done(&p, &q, c[0]);
	/* Queued from the backlog as a new run: it answers the booked one too. */
	assert_int_equal(c[0]->done_gen, 3);
	assert_int_equal(q.n, 0);
	vd_plan_free(&p);
	vd_model_free(&m);
}

/* The queue refuses a job after all (full meanwhile): its copy waits in
 * the backlog, a scrub's is let go; a stopping queue queues nothing; a
 * client's request for a copy whose job runs promotes it; each job has
 * its own id. */
static void test_refused(void **unused)
{
	(void)unused;
	vd_model m;
	vd_plan p;
	vd_copy *a, *b;
	uint64_t gen, first;

	vd_model_init(&m);
	vd_plan_init(&p, &m);
	assert_non_null(a = vd_model_add_copy(&m, "r/a", "r"));
	assert_non_null(b = vd_model_add_copy(&m, "r/b", "r"));
	vd_plan_set_queue(&p, &(vd_plan_queue){ 0, 4, 1 });
	vd_plan_begin(&p);
	assert_int_equal(vd_plan_schedule(&p, a, VD_JOB_BACKGROUND, &gen), 0);
	assert_int_equal(p.n_acts, 1);
	assert_int_equal(p.acts[0].kind, VD_ACT_START);
	first = p.acts[0].id;
	vd_plan_begin(&p);
	vd_plan_unstarted(&p, a, first + 1);            /* not its job: nothing */
	assert_int_equal(a->inflight, first);
	vd_plan_unstarted(&p, a, first);
	assert_int_equal(a->inflight, 0);
	assert_true(a->backlog);
	assert_int_equal(p.n_acts, 0);
	vd_plan_drain(&p);
	assert_int_equal(p.n_acts, 1);
	assert_true(p.acts[0].id > first);
	assert_false(a->backlog);
	/* A scrub refused is let go. */
	vd_plan_begin(&p);
	assert_int_equal(vd_plan_start(&p, b, VD_JOB_SCRUB, 1), 0);
	assert_int_equal(vd_plan_start(&p, b, VD_JOB_SCRUB, 2), -EBUSY);
	vd_plan_unstarted(&p, b, p.acts[0].id);
	assert_false(b->backlog);
	/* a's job runs: a client's request books a run, asks for it back,
	 * and the queue promotes it instead (no answer comes back). */
	vd_plan_begin(&p);
	assert_int_equal(vd_plan_schedule(&p, a, VD_JOB_EXPLICIT, &gen), 0);
	assert_int_equal(p.n_acts, 1);
	assert_int_equal(p.acts[0].kind, VD_ACT_TAKE_BACK);
	assert_true(a->again);
	assert_int_equal(a->again_kind, VD_JOB_EXPLICIT);
	assert_int_equal(a->again_gen, gen);
	/* Stopping: nothing is queued, background work waits. */
	vd_plan_set_queue(&p, &(vd_plan_queue){ 0, 4, 0 });
	vd_plan_begin(&p);
	assert_int_equal(vd_plan_schedule(&p, b, VD_JOB_EXPLICIT, &gen), -ESHUTDOWN);
	assert_int_equal(vd_plan_schedule(&p, b, VD_JOB_BACKGROUND, &gen), -ESHUTDOWN);
	assert_true(b->backlog);
	assert_int_equal(p.n_acts, 0);
	vd_plan_free(&p);
	vd_model_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backlog_order),
		cmocka_unit_test(test_retry_delay),
		cmocka_unit_test(test_retries_due),
		cmocka_unit_test(test_scrub_pass),
		cmocka_unit_test(test_follow),
		cmocka_unit_test(test_schedule),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

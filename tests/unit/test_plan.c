/*
 * The verification schedule's decisions, without a loop, a pool or a
 * clock: the backlog drains in the order it filled; a job that ran out of
 * time waits longer each time, never more than VD_RETRY_MAX_SECONDS, and
 * is due neither before its time nor later than the first look after it;
 * a scrub pass visits each copy once, in path order; a copy goes on with
 * the more urgent and later of two runs; over a queue of a few places, a
 * run is booked while one is in flight, a background one that finds the
 * queue full waits in the backlog, a client's goes ahead of it.
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

/* A queue of two places for background jobs; none is started. */
typedef struct fake_queue {
	vd_job *jobs[8];
	size_t n;
	int promoted;
} fake_queue;

static int fq_submit(void *arg, vd_copy *c, vd_job_kind kind, uint64_t gen)
{
	fake_queue *q = arg;

	if (kind != VD_JOB_EXPLICIT && q->n >= 2)
		return -EAGAIN;
	assert_true(q->n < 8);
	assert_non_null(q->jobs[q->n] = vd_job_new(kind, c->relpath));
	q->jobs[q->n]->gen = gen;
	c->inflight = q->jobs[q->n++];
	return 0;
}

static void fq_remove(fake_queue *q, vd_job *j)
{
	size_t i;

	for (i = 0; i < q->n && q->jobs[i] != j; i++)
		;
	assert_true(i < q->n);
	q->jobs[i] = q->jobs[--q->n];
	vd_job_free(j);
}

static int fq_take_back(void *arg, vd_copy *c, uint64_t *gen)
{
	*gen = c->inflight->gen;
	fq_remove(arg, c->inflight);
	c->inflight = NULL;
	return 0;
}

static void fq_promote(void *arg, vd_copy *c)
{
	(void)c;
	((fake_queue *)arg)->promoted++;
}

/* c's job returns done, as the store takes it. */
static void job_done(vd_plan *p, fake_queue *q, vd_copy *c)
{
	vd_job *j = c->inflight;

	c->inflight = NULL;
	c->done_gen = j->gen;
	fq_remove(q, j);
	if (c->again)
		vd_plan_follow_up(p, c, c->again_kind, c->again_gen);
	vd_plan_drain(p);
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
	vd_plan_init(&p, &m, &(vd_plan_pool){ fq_submit, fq_take_back, fq_promote, &q });
	for (i = 0; i < 4; i++) {
		snprintf(rel, sizeof(rel), "r/c%d", i);
		assert_non_null(c[i] = vd_model_add_copy(&m, rel, "r"));
		assert_int_equal(vd_plan_schedule(&p, c[i], VD_JOB_BACKGROUND, &gen), i < 2 ? 0 : -EAGAIN);
	}
	/* c2 and c3 wait in the backlog, in that order. */
	assert_int_equal(p.backlogged, 2);
	assert_true(c[2]->backlog && c[3]->backlog);
	/* In flight: one more run is booked, at the most urgent kind. */
	assert_int_equal(vd_plan_schedule(&p, c[0], VD_JOB_SCRUB, &gen), 0);
	assert_int_equal(gen, 2);
	assert_int_equal(c[0]->again_kind, VD_JOB_SCRUB);
	assert_int_equal(vd_plan_schedule(&p, c[0], VD_JOB_BACKGROUND, &gen), 0);
	assert_int_equal(gen, 2);
	assert_int_equal(c[0]->again_kind, VD_JOB_BACKGROUND);
	/* A client's request takes c1's queued job back and queues it ahead,
	 * answering what was asked before. */
	assert_int_equal(vd_plan_schedule(&p, c[1], VD_JOB_EXPLICIT, &gen), 0);
	assert_int_equal(gen, 1);
	assert_int_equal(c[1]->inflight_kind, VD_JOB_EXPLICIT);
	assert_int_equal(q.promoted, 0);
	/* A client's request for c3, in the backlog: queued at once. */
	assert_int_equal(vd_plan_schedule(&p, c[3], VD_JOB_EXPLICIT, &gen), 0);
	assert_int_equal(c[3]->inflight_kind, VD_JOB_EXPLICIT);
	assert_false(c[3]->backlog);
	assert_int_equal(p.backlogged, 1);
	/* c0 returns: the queue is full, its booked run waits behind c2. */
	job_done(&p, &q, c[0]);
	assert_int_equal(c[0]->done_gen, 1);
	assert_null(c[0]->inflight);
	assert_true(c[0]->backlog && c[2]->backlog);
	assert_int_equal(p.backlogged, 2);
	/* Room for one: c2, which came first. */
	job_done(&p, &q, c[3]);
	assert_non_null(c[2]->inflight);
	assert_null(c[0]->inflight);
	job_done(&p, &q, c[1]);
	assert_non_null(c[0]->inflight);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backlog_order),
		cmocka_unit_test(test_retry_delay),
		cmocka_unit_test(test_retries_due),
		cmocka_unit_test(test_scrub_pass),
		cmocka_unit_test(test_follow),
		cmocka_unit_test(test_schedule),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The verification schedule's decisions, without a loop, a pool or a
 * clock: the backlog drains in the order it filled; a job that ran out of
 * time waits longer each time, never more than VD_RETRY_MAX_SECONDS, and
 * is due neither before its time nor later than the first look after it;
 * a scrub pass visits each copy once, in path order; a copy goes on with
 * the more urgent and later of two runs.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "vd_limits.h"
#include "vd_plan.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backlog_order),
		cmocka_unit_test(test_retry_delay),
		cmocka_unit_test(test_retries_due),
		cmocka_unit_test(test_scrub_pass),
		cmocka_unit_test(test_follow),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

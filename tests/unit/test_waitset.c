/*
 * Clients waiting for verdicts, without a loop or a clock: answered when
 * every copy reached its generation with nothing newer under way, or when
 * a copy vanished, or as timed out at the first tick at or after the
 * deadline; each once, never after a cancel; one deadline to arm at a time.
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

#include "vd_waitset.h"

static char rel_a[] = "a/r1", rel_b[] = "b/r1";
static char *const two[] = { rel_a, rel_b };
static int users[8];

static uint64_t add(vd_waitset *ws, char *const *rel, const uint64_t *gens, size_t n,
    uint64_t deadline, int user)
{
	uint64_t id = 0;

	assert_int_equal(vd_waitset_add(ws, rel, gens, n, deadline, &users[user], &id), 0);
	assert_true(id > 0);
	return id;
}

static void state(vd_waitset *ws, const char *rel, int present, uint64_t done, int busy)
{
	vd_wait_copy st = { present, done, busy };

	vd_waitset_progress(ws, rel, &st);
}

static void expect_answer(vd_waitset *ws, uint64_t id, int timed_out, int user)
{
	vd_wait_answer a;

	assert_int_equal(vd_waitset_take(ws, &a), 1);
	assert_int_equal(a.id, id);
	assert_int_equal(a.timed_out, timed_out);
	assert_ptr_equal(a.user, &users[user]);
}

static void expect_none(vd_waitset *ws)
{
	vd_wait_answer a;

	assert_int_equal(vd_waitset_take(ws, &a), 0);
}

static void test_reached(void **unused)
{
	(void)unused;
	vd_waitset ws;
	uint64_t gens[] = { 3, 1 }, id;

	vd_waitset_init(&ws);
	id = add(&ws, two, gens, 2, 1000, 0);
	assert_int_equal(vd_waitset_settle(&ws), 0);     /* nothing known yet */
	state(&ws, "a/r1", 1, 3, 0);
	assert_int_equal(vd_waitset_settle(&ws), 0);     /* b/r1 not reached */
	state(&ws, "b/r1", 1, 1, 1);                      /* reached, but a newer run under way */
	assert_int_equal(vd_waitset_settle(&ws), 0);
	state(&ws, "a/r1", 1, 3, 1);                      /* a/r1 busy again */
	state(&ws, "b/r1", 1, 2, 0);
	assert_int_equal(vd_waitset_settle(&ws), 0);
	expect_none(&ws);
	state(&ws, "a/r1", 1, 4, 0);
	assert_int_equal(vd_waitset_pending(&ws), 1);
	assert_int_equal(vd_waitset_settle(&ws), 1);
	assert_int_equal(vd_waitset_pending(&ws), 0);
	assert_int_equal(vd_waitset_deadline(&ws), VD_WAIT_NONE);
	expect_answer(&ws, id, 0, 0);
	expect_none(&ws);
	/* Answered: a later tick or settle does not answer it again. */
	assert_int_equal(vd_waitset_tick(&ws, 5000), 0);
	assert_int_equal(vd_waitset_settle(&ws), 0);
	assert_int_equal(vd_waitset_cancel(&ws, id), -ENOENT);
	vd_waitset_free(&ws);
}

static void test_vanished(void **unused)
{
	(void)unused;
	vd_waitset ws;
	uint64_t gens[] = { 2, 2 }, id;

	vd_waitset_init(&ws);
	id = add(&ws, two, gens, 2, 1000, 1);
	state(&ws, "a/r1", 0, 0, 0);
	state(&ws, "b/r1", 1, 2, 0);
	assert_int_equal(vd_waitset_settle(&ws), 1);
	expect_answer(&ws, id, 0, 1);
	vd_waitset_free(&ws);
}

static void test_deadlines(void **unused)
{
	(void)unused;
	vd_waitset ws;
	uint64_t g1[] = { 1 }, late, early, same;

	vd_waitset_init(&ws);
	late = add(&ws, two, g1, 1, 3000, 0);
	early = add(&ws, two, g1, 1, 1000, 1);
	same = add(&ws, two + 1, g1, 1, 1000, 2);
	assert_int_equal(vd_waitset_deadline(&ws), 1000);
	assert_int_equal(vd_waitset_tick(&ws, 999), 0);
	expect_none(&ws);
	/* At the deadline itself, in order of deadline then of arrival. */
	assert_int_equal(vd_waitset_tick(&ws, 1000), 2);
	expect_answer(&ws, early, 1, 1);
	expect_answer(&ws, same, 1, 2);
	assert_int_equal(vd_waitset_deadline(&ws), 3000);
	assert_int_equal(vd_waitset_tick(&ws, 1000), 0);  /* time not moving */
	assert_int_equal(vd_waitset_tick(&ws, 1000000), 1);   /* a jump */
	expect_answer(&ws, late, 1, 0);
	assert_int_equal(vd_waitset_deadline(&ws), VD_WAIT_NONE);
	vd_waitset_free(&ws);
}

static void test_cancel(void **unused)
{
	(void)unused;
	vd_waitset ws;
	uint64_t g1[] = { 1 }, a, b, c;
	const char *rel;
	size_t it = 0, n = 0;

	vd_waitset_init(&ws);
	a = add(&ws, two, g1, 1, 100, 0);
	b = add(&ws, two, g1, 1, 200, 1);
	c = add(&ws, two, g1, 1, 300, 2);
	assert_int_equal(vd_waitset_cancel(&ws, a), 0);
	assert_int_equal(vd_waitset_cancel(&ws, a), -ENOENT);
	assert_int_equal(vd_waitset_deadline(&ws), 200);
	/* Answered but not taken: a cancel still drops it. */
	assert_int_equal(vd_waitset_tick(&ws, 250), 1);
	assert_int_equal(vd_waitset_cancel(&ws, b), 0);
	expect_none(&ws);
	while (vd_waitset_next_watched(&ws, &it, &rel))
		n++;
	assert_int_equal(n, 1);
	assert_int_equal(vd_waitset_fire_all(&ws), 1);
	expect_answer(&ws, c, 1, 2);
	it = n = 0;
	while (vd_waitset_next_watched(&ws, &it, &rel))
		n++;
	assert_int_equal(n, 0);   /* no waiter left, no copy watched */
	vd_waitset_free(&ws);
}

static void test_no_copies(void **unused)
{
	(void)unused;
	vd_waitset ws;
	uint64_t id;

	vd_waitset_init(&ws);
	id = add(&ws, NULL, NULL, 0, 10, 3);
	assert_int_equal(vd_waitset_settle(&ws), 1);
	expect_answer(&ws, id, 0, 3);
	vd_waitset_free(&ws);
}

/* Many waiters on one copy, freed with answers left untaken. */
static void test_many(void **unused)
{
	(void)unused;
	vd_waitset ws;
	uint64_t g[] = { 0 };
	int i;

	vd_waitset_init(&ws);
	for (i = 0; i < 1000; i++) {
		g[0] = (uint64_t)i % 7;
		add(&ws, two, g, 1, 5000 - (uint64_t)i, 0);
	}
	assert_int_equal(vd_waitset_deadline(&ws), 4001);
	state(&ws, "a/r1", 1, 3, 0);
	assert_int_equal(vd_waitset_settle(&ws), 4 * 143);    /* gens 0..3 of 0..6 */
	assert_int_equal(vd_waitset_pending(&ws), 1000 - 4 * 143);
	vd_waitset_free(&ws);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reached),
		cmocka_unit_test(test_vanished),
		cmocka_unit_test(test_deadlines),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_no_copies),
		cmocka_unit_test(test_many),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

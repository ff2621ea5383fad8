/*
 * The shell around the core's waiters (vd_waiters.c) on a real loop: a
 * waiter's function is called once, never after its cancel, even when
 * another waiter's function, answered in the same batch before it,
 * cancels it; a deadline fires through the one timer. Verdicts answered
 * while lineage passes over the chains are held until the pass ends and
 * lineage has caught up (before every release: never trusted from a
 * lineage behind a verdict; an answer a pass covered waits for no other
 * pass), timed out at their deadline, dropped when cancelled, timed out
 * at shutdown; before the store is scanned whole, held without the loop
 * spinning until the owner checks again.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "vd_core.h"
#include "vd_waiters.h"

typedef struct fx {
	uv_loop_t loop;
	vd_core core;
	vd_waiters ws;
	int closed;
	int passing;                  /* a pass in slices goes on */
	int unscanned;                /* the store is not scanned whole yet */
	int catch_ups;
	int catch_up_begins_pass;     /* the next catch-up begins a pass */
	int changed;                  /* lineage is behind a verdict: a catch-up clears it */
} fx;

typedef struct client {
	fx *f;
	int calls, timed_out;
	int catch_ups;                /* the fixture's, when answered */
	vd_waiter *cancel;            /* cancelled by this client's answer */
	int behind;                   /* answered while lineage was behind */
} client;

static int no_persist(const vd_mem_record *rec, void *arg)
{
	(void)rec;
	(void)arg;
	return 0;
}

static void core_step(void *arg, const vd_core_input *in, vd_core_output *out)
{
	fx *f = arg;

	vd_core_step(&f->core, in, out);
}

static void catch_up(void *arg)
{
	fx *f = arg;

	f->catch_ups++;
	f->changed = 0;
	if (f->catch_up_begins_pass) {
		f->catch_up_begins_pass = 0;
		f->passing = 1;
	}
}

static vd_settling settling(void *arg)
{
	fx *f = arg;

	if (f->unscanned)
		return VD_UNSCANNED;
	return f->passing ? VD_PASSING : VD_SETTLED;
}

static void answered(void *arg, int timed_out)
{
	client *c = arg;

	c->calls++;
	c->timed_out = timed_out;
	if (c->f != NULL) {
		c->catch_ups = c->f->catch_ups;
		c->behind = c->f->changed;
	}
	if (c->cancel != NULL)
		vd_waiters_cancel(c->cancel);
}

static void closed(uv_handle_t *h)
{
	((fx *)h->data)->closed++;
}

static int set_up(void **state)
{
	fx *f = calloc(1, sizeof(*f));
	vd_core_input src = { .kind = VD_CORE_SOURCES };
	vd_core_output out;

	assert_non_null(f);
	assert_int_equal(uv_loop_init(&f->loop), 0);
	vd_core_init(&f->core, no_persist, NULL);
	src.u.sources.change = VD_REFRESH_MODEL;
	vd_core_step(&f->core, &src, &out);
	vd_waiters_init(&f->ws, &f->loop, &f->core,
	    &(vd_waiters_env){ core_step, catch_up, settling, f });
	*state = f;
	return 0;
}

static int tear_down(void **state)
{
	fx *f = *state;

	assert_int_equal(vd_waiters_close(&f->ws, closed, f), 2);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	assert_int_equal(f->closed, 2);
	vd_waiters_free(&f->ws);
	vd_core_free(&f->core);
	assert_int_equal(uv_loop_close(&f->loop), 0);
	free(f);
	return 0;
}

static vd_waiter *wait_for(fx *f, const char *relpath, uint64_t gen, uint64_t timeout_ms,
    client *c)
{
	char *rp = (char *)relpath;
	vd_waiter *w = vd_waiters_wait(&f->ws, &rp, &gen, 1, timeout_ms, answered, c);

	assert_non_null(w);
	return w;
}

/* Both answered by one check (their copy is gone): the first one's
 * function cancels the second, whose function then must not run. */
static void test_cancel_within_batch(void **state)
{
	fx *f = *state;
	client a = { 0 }, b = { 0 };

	wait_for(f, "r/gone", 1, 60000, &a);
	a.cancel = wait_for(f, "r/gone", 1, 60000, &b);
	vd_waiters_check(&f->ws);
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.timed_out, 0);
	assert_int_equal(b.calls, 0);
}

static void test_cancel_before_answer(void **state)
{
	fx *f = *state;
	client a = { 0 };

	vd_waiters_cancel(wait_for(f, "r/gone", 1, 60000, &a));
	vd_waiters_check(&f->ws);
	assert_int_equal(a.calls, 0);
}

/* A copy short of its generation: the deadline answers, once. */
static void test_deadline(void **state)
{
	fx *f = *state;
	client a = { 0 };
	vd_core_input adopt = { .kind = VD_CORE_ADOPT, .u.adopt = { "r/c", VD_KIND_DIR } };
	vd_core_output out;

	vd_core_step(&f->core, &adopt, &out);
	assert_int_equal(out.result, VD_SCAN_NEW);
	wait_for(f, "r/c", 1, 0, &a);
	vd_waiters_check(&f->ws);
	assert_int_equal(a.calls, 0);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.timed_out, 1);
}

/* A few turns of the loop: the held answers are looked at once a turn. */
static void turns(fx *f)
{
	int i;

	for (i = 0; i < 3; i++)
		uv_run(&f->loop, UV_RUN_NOWAIT);
}

/* Answered while a pass goes on: held through its turns, then lineage
 * catches up once and the verdict goes. */
static void test_held_until_pass_ends(void **state)
{
	fx *f = *state;
	client a = { f, 0, 0, 0, NULL, 0 };

	f->passing = 1;
	wait_for(f, "r/gone", 1, 60000, &a);
	vd_waiters_check(&f->ws);
	turns(f);
	assert_int_equal(a.calls, 0);
	assert_int_equal(f->catch_ups, 0);
	f->passing = 0;
	turns(f);
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.timed_out, 0);
	assert_int_equal(a.catch_ups, 1);
	assert_int_equal(f->catch_ups, 1);
}

/* The catch-up begins a pass: the answer waits for that pass's end, and
 * goes once lineage has caught up with what changed meanwhile. */
static void test_catch_up_begins_pass(void **state)
{
	fx *f = *state;
	client a = { f, 0, 0, 0, NULL, 0 };

	f->catch_up_begins_pass = 1;
	wait_for(f, "r/gone", 1, 60000, &a);
	vd_waiters_check(&f->ws);
	assert_int_equal(f->catch_ups, 1);
	turns(f);
	assert_int_equal(a.calls, 0);
	f->passing = 0;
	turns(f);
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.timed_out, 0);
	assert_int_equal(f->catch_ups, 2);
}

/* A verdict that lineage reads arrives as the pass that covers an answer
 * ends (a parent failed): the answer says trusted only from lineage that
 * has taken it in. */
static void test_covered_answer_after_change(void **state)
{
	fx *f = *state;
	client a = { f, 0, 0, 0, NULL, 0 };

	f->catch_up_begins_pass = 1;
	wait_for(f, "r/gone", 1, 60000, &a);
	vd_waiters_check(&f->ws);
	turns(f);
	assert_int_equal(a.calls, 0);
	f->changed = 1;
	f->passing = 0;
	turns(f);
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.timed_out, 0);
	assert_int_equal(a.behind, 0);
}

/* One answer the ended pass covers (b), one it does not (a): after one
 * catch-up b goes, though that catch-up begins another pass (which reads
 * pending whatever it changed); a goes at that pass's end. */
static void test_covered_go_first(void **state)
{
	fx *f = *state;
	client a = { f, 0, 0, 0, NULL, 0 }, b = { f, 0, 0, 0, NULL, 0 };

	f->catch_up_begins_pass = 1;
	wait_for(f, "r/gone", 1, 60000, &b);
	vd_waiters_check(&f->ws);
	wait_for(f, "r/gone", 1, 60000, &a);
	vd_waiters_check(&f->ws);
	assert_int_equal(a.calls + b.calls, 0);
	f->passing = 0;
	f->catch_up_begins_pass = 1;
	turns(f);
	assert_int_equal(b.calls, 1);
	assert_int_equal(b.catch_ups, 2);
	assert_int_equal(a.calls, 0);
	assert_int_equal(f->catch_ups, 2);
	f->passing = 0;
	turns(f);
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.timed_out, 0);
	assert_int_equal(a.catch_ups, 3);
}

/* Held past its deadline: timed out, while the pass still goes on. */
static void test_held_deadline(void **state)
{
	fx *f = *state;
	client a = { f, 0, 0, 0, NULL, 0 };

	f->passing = 1;
	wait_for(f, "r/gone", 1, 0, &a);
	vd_waiters_check(&f->ws);
	turns(f);
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.timed_out, 1);
	assert_int_equal(f->catch_ups, 0);
}

/* Before the store is scanned whole: held, with nothing looking each
 * turn (the loop is left to wait), until the owner's check after the
 * scan; a deadline meanwhile goes through the one timer. */
static void test_held_until_scanned(void **state)
{
	fx *f = *state;
	client a = { f, 0, 0, 0, NULL, 0 }, b = { f, 0, 0, 0, NULL, 0 };

	f->unscanned = 1;
	wait_for(f, "r/gone", 1, 60000, &a);
	wait_for(f, "r/gone", 1, 30, &b);
	vd_waiters_check(&f->ws);
	turns(f);
	assert_false(uv_is_active((uv_handle_t *)&f->ws.release));
	assert_int_equal(a.calls, 0);
	while (b.calls == 0)
		uv_run(&f->loop, UV_RUN_ONCE);   /* blocks until b's deadline */
	assert_int_equal(b.calls, 1);
	assert_int_equal(b.timed_out, 1);
	assert_int_equal(a.calls, 0);
	f->unscanned = 0;
	turns(f);
	assert_int_equal(a.calls, 0);      /* nothing looked: the check does */
	vd_waiters_check(&f->ws);
	turns(f);
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.timed_out, 0);
	assert_int_equal(f->catch_ups, 1);
}

/* Cancelled while held: never called (and freed: the sanitizers). */
static void test_held_cancel(void **state)
{
	fx *f = *state;
	client a = { f, 0, 0, 0, NULL, 0 };
	vd_waiter *w;

	f->passing = 1;
	w = wait_for(f, "r/gone", 1, 60000, &a);
	vd_waiters_check(&f->ws);
	vd_waiters_cancel(w);
	turns(f);
	f->passing = 0;
	turns(f);
	assert_int_equal(a.calls, 0);
}

/* Shutting down: a held answer goes as timed out. */
static void test_held_fire_all(void **state)
{
	fx *f = *state;
	client a = { f, 0, 0, 0, NULL, 0 };

	f->passing = 1;
	wait_for(f, "r/gone", 1, 60000, &a);
	vd_waiters_check(&f->ws);
	vd_waiters_fire_all(&f->ws);
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.timed_out, 1);
	turns(f);
	assert_int_equal(a.calls, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_cancel_within_batch, set_up, tear_down),
		cmocka_unit_test_setup_teardown(test_cancel_before_answer, set_up, tear_down),
		cmocka_unit_test_setup_teardown(test_deadline, set_up, tear_down),
		cmocka_unit_test_setup_teardown(test_held_until_pass_ends, set_up, tear_down),
		cmocka_unit_test_setup_teardown(test_catch_up_begins_pass, set_up, tear_down),
		cmocka_unit_test_setup_teardown(test_covered_answer_after_change, set_up, tear_down),
		cmocka_unit_test_setup_teardown(test_covered_go_first, set_up, tear_down),
		cmocka_unit_test_setup_teardown(test_held_deadline, set_up, tear_down),
		cmocka_unit_test_setup_teardown(test_held_until_scanned, set_up, tear_down),
		cmocka_unit_test_setup_teardown(test_held_cancel, set_up, tear_down),
		cmocka_unit_test_setup_teardown(test_held_fire_all, set_up, tear_down),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

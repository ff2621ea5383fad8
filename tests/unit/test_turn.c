/*
 * The loop's turn (vd_turn): busy time excludes the wait in poll, a
 * turn past its budget puts the next slice off once and only once, and
 * a mark starts the next turn.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <uv.h>

#include "vd_limits.h"
#include "vd_turn.h"

#define BUDGET_NS (VD_TURN_BUDGET_MS * 1000000ull)

static void test_put_off_once(void **state)
{
	unsigned put_off = 0;

	(void)state;
	assert_int_equal(vd_turn_put_off(0, &put_off), 0);
	assert_int_equal(vd_turn_put_off(BUDGET_NS - 1, &put_off), 0);
	assert_int_equal(put_off, 0);
	assert_int_equal(vd_turn_put_off(BUDGET_NS, &put_off), 1);
	/* Put off once: the next turn runs it, however busy. */
	assert_int_equal(vd_turn_put_off(10 * BUDGET_NS, &put_off), 0);
	assert_int_equal(vd_turn_put_off(10 * BUDGET_NS, &put_off), 1);
	/* A turn under budget runs it and forgets the put-off. */
	assert_int_equal(vd_turn_put_off(1, &put_off), 0);
	assert_int_equal(put_off, 0);
	assert_int_equal(vd_turn_put_off(BUDGET_NS, &put_off), 1);
}

static void test_no_turn_never_defers(void **state)
{
	unsigned put_off = 0;
	int i;

	(void)state;
	for (i = 0; i < 3; i++)
		assert_int_equal(vd_turn_defer(NULL, &put_off), 0);
}

typedef struct fx {
	uv_loop_t loop;
	uv_timer_t timer;
	vd_turn turn;
	uint64_t busy, wall, idle;
	int deferred[3];
} fx;

/* 50 ms in poll, then: the wait is idle, not busy. */
static void after_wait(uv_timer_t *t)
{
	fx *f = t->data;

	f->busy = vd_turn_busy(&f->turn);
	f->wall = uv_hrtime() - f->turn.start;
	f->idle = uv_metrics_idle_time(&f->loop) - f->turn.idle;
}

static void test_wait_in_poll_is_not_busy(void **state)
{
	fx f = { 0 };

	(void)state;
	assert_int_equal(uv_loop_init(&f.loop), 0);
	assert_int_equal(uv_loop_configure(&f.loop, UV_METRICS_IDLE_TIME), 0);
	uv_timer_init(&f.loop, &f.timer);
	f.timer.data = &f;
	vd_turn_init(&f.turn, &f.loop);
	uv_timer_start(&f.timer, after_wait, 50, 0);
	uv_run(&f.loop, UV_RUN_DEFAULT);
	assert_true(f.idle >= 40 * 1000000ull);
	assert_true(f.busy + f.idle <= f.wall + 1000000ull);
	uv_close((uv_handle_t *)&f.timer, NULL);
	uv_run(&f.loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&f.loop), 0);
}

/* Busy past the budget (the clock read until it is, not slept on): the
 * next slice is put off, the one after runs; the mark returns the turn's
 * busy time. */
static void spin(uv_timer_t *t)
{
	fx *f = t->data;
	unsigned put_off = 0;

	while (vd_turn_busy(&f->turn) < BUDGET_NS)
		;
	f->deferred[0] = vd_turn_defer(&f->turn, &put_off);
	f->deferred[1] = vd_turn_defer(&f->turn, &put_off);
	f->deferred[2] = vd_turn_defer(&f->turn, &put_off);
	f->busy = vd_turn_mark(&f->turn);
}

static void test_busy_turn_defers(void **state)
{
	fx f = { 0 };

	(void)state;
	assert_int_equal(uv_loop_init(&f.loop), 0);
	assert_int_equal(uv_loop_configure(&f.loop, UV_METRICS_IDLE_TIME), 0);
	uv_timer_init(&f.loop, &f.timer);
	f.timer.data = &f;
	vd_turn_init(&f.turn, &f.loop);
	uv_timer_start(&f.timer, spin, 0, 0);
	uv_run(&f.loop, UV_RUN_DEFAULT);
	assert_int_equal(f.deferred[0], 1);
	assert_int_equal(f.deferred[1], 0);
	assert_int_equal(f.deferred[2], 1);
	assert_true(f.busy >= BUDGET_NS);
	uv_close((uv_handle_t *)&f.timer, NULL);
	uv_run(&f.loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&f.loop), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_put_off_once),
		cmocka_unit_test(test_no_turn_never_defers),
		cmocka_unit_test(test_wait_in_poll_is_not_busy),
		cmocka_unit_test(test_busy_turn_defers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

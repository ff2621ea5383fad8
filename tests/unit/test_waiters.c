/*
 * The shell around the core's waiters (vd_waiters.c) on a real loop: a
 * waiter's function is called once, never after its cancel, even when
 * another waiter's function, answered in the same batch before it,
 * cancels it; a deadline fires through the one timer.
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
} fx;

typedef struct client {
	int calls, timed_out;
	vd_waiter *cancel;            /* cancelled by this client's answer */
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

static void no_catch_up(void *arg)
{
	(void)arg;
}

static void answered(void *arg, int timed_out)
{
	client *c = arg;

	c->calls++;
	c->timed_out = timed_out;
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
	    &(vd_waiters_env){ core_step, no_catch_up, f });
	*state = f;
	return 0;
}

static int tear_down(void **state)
{
	fx *f = *state;

	assert_int_equal(vd_waiters_close(&f->ws, closed, f), 1);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	assert_int_equal(f->closed, 1);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_cancel_within_batch, set_up, tear_down),
		cmocka_unit_test_setup_teardown(test_cancel_before_answer, set_up, tear_down),
		cmocka_unit_test_setup_teardown(test_deadline, set_up, tear_down),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

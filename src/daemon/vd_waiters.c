/* Clients waiting for verdicts: the core's waiters on the loop (vd_waiters.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "vd_log.h"
#include "vd_waiters.h"

struct vd_waiter {
	vd_waiters *ws;
	uint64_t id;
	vd_wait_fn fn;
	void *arg;
	int cancelled;              /* answered, its function not yet called: it won't be */
};

static void on_deadline(uv_timer_t *t);

/* One timer, for the earliest deadline: a thousand clients waiting cost
 * one handle, not a thousand. */
void vd_waiters_arm(vd_waiters *ws, uint64_t due)
{
	uint64_t now;

	/* Not started (a store without a loop renders views only), or closing. */
	if (ws->loop == NULL || uv_is_closing((uv_handle_t *)&ws->timer))
		return;
	now = uv_now(ws->loop);
	if (due == VD_WAIT_NONE)
		uv_timer_stop(&ws->timer);
	else
		uv_timer_start(&ws->timer, on_deadline, due > now ? due - now : 0, 0);
}

/* The input's answers, copied out of the core's output before anything
 * else is asked of it: a function may add or cancel waiters, and lineage
 * catches up before verdicts are answered, each another input. NULL when
 * there are none, or out of memory (each answer then is lost, and its
 * client's connection ends with the daemon's timeout: logged). */
static vd_wait_answer *take(const vd_core_output *out, size_t *n)
{
	vd_wait_answer *a;

	*n = 0;
	if (out->n_answered == 0)
		return NULL;
	if ((a = malloc(out->n_answered * sizeof(*a))) == NULL) {
		log_error("out of memory answering %zu waiting client(s)", out->n_answered);
		return NULL;
	}
	memcpy(a, out->answered, out->n_answered * sizeof(*a));
	*n = out->n_answered;
	return a;
}

/* Each waiter is freed before its function runs. A function may cancel
 * a waiter answered after it in the same batch: that one's is not called. */
static void answer(vd_waiters *ws, vd_wait_answer *a, size_t n, uint64_t deadline_ms)
{
	vd_waiter *w;
	vd_wait_fn fn;
	void *arg;
	size_t i;
	int cancelled;

	vd_waiters_arm(ws, deadline_ms);
	for (i = 0; i < n; i++) {
		w = a[i].user;
		fn = w->fn;
		arg = w->arg;
		cancelled = w->cancelled;
		free(w);
		if (!cancelled)
			fn(arg, a[i].timed_out);
	}
	free(a);
}

/* The inputs that answer waiters ask only for jobs taken back or
 * promoted; the answers to those leave the answers here alone. */
static void step(vd_waiters *ws, const vd_core_input *in, vd_core_output *out)
{
	ws->env.step(ws->env.arg, in, out);
}

static void on_deadline(uv_timer_t *t)
{
	vd_waiters *ws = t->data;
	vd_core_input in = { .kind = VD_CORE_TICK, .u.now_ms = uv_now(ws->loop) };
	vd_core_output out;
	vd_wait_answer *a;
	size_t n;

	step(ws, &in, &out);
	a = take(&out, &n);
	answer(ws, a, n, out.deadline_ms);
}

void vd_waiters_init(vd_waiters *ws, uv_loop_t *loop, vd_core *core, const vd_waiters_env *env)
{
	ws->loop = loop;
	ws->core = core;
	ws->env = *env;
	uv_timer_init(loop, &ws->timer);
	ws->timer.data = ws;
}

unsigned vd_waiters_close(vd_waiters *ws, uv_close_cb cb, void *cb_data)
{
	ws->timer.data = cb_data;   /* no deadline fires once it is closing */
	uv_close((uv_handle_t *)&ws->timer, cb);
	return 1;
}

void vd_waiters_free(vd_waiters *ws)
{
	vd_core_input in = { .kind = VD_CORE_WAIT_FIRE_ALL };
	vd_core_output out;
	size_t i;

	step(ws, &in, &out);
	for (i = 0; i < out.n_answered; i++)
		free(out.answered[i].user);
}

vd_waiter *vd_waiters_wait(vd_waiters *ws, char *const *relpaths, const uint64_t *gens,
    size_t n, uint64_t timeout_ms, vd_wait_fn fn, void *arg)
{
	vd_waiter *w = calloc(1, sizeof(*w));
	vd_core_input in = { .kind = VD_CORE_WAIT };
	vd_core_output out;

	if (w == NULL)
		return NULL;
	w->ws = ws;
	w->fn = fn;
	w->arg = arg;
	in.u.wait.relpaths = relpaths;
	in.u.wait.gens = gens;
	in.u.wait.n = n;
	in.u.wait.deadline_ms = uv_now(ws->loop) + timeout_ms;
	in.u.wait.user = w;
	step(ws, &in, &out);
	if (out.result < 0) {
		free(w);
		return NULL;
	}
	w->id = out.wait_id;
	vd_waiters_arm(ws, out.deadline_ms);
	return w;
}

void vd_waiters_cancel(vd_waiter *w)
{
	vd_waiters *ws = w->ws;
	vd_core_input in = { .kind = VD_CORE_WAIT_CANCEL, .u.wait_id = w->id };
	vd_core_output out;

	step(ws, &in, &out);
	if (out.result == 0)
		free(w);
	else
		w->cancelled = 1;   /* answered in the batch under way: freed there */
	vd_waiters_arm(ws, out.deadline_ms);
}

void vd_waiters_check(vd_waiters *ws)
{
	vd_core_input in = { .kind = VD_CORE_WAIT_CHECK };
	vd_core_output out;
	vd_wait_answer *a;
	size_t n;
	uint64_t deadline;

	step(ws, &in, &out);
	a = take(&out, &n);
	deadline = out.deadline_ms;
	if (n > 0)
		ws->env.before_answers(ws->env.arg);
	answer(ws, a, n, deadline);
}

void vd_waiters_fire_all(vd_waiters *ws)
{
	vd_core_input in = { .kind = VD_CORE_WAIT_FIRE_ALL };
	vd_core_output out;
	vd_wait_answer *a;
	size_t n;

	step(ws, &in, &out);
	a = take(&out, &n);
	answer(ws, a, n, out.deadline_ms);
}

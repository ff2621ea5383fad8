#include "config.h"

#include <stdlib.h>

#include "vd_waiters.h"

struct vd_waiter {
	vd_waiters *ws;
	uint64_t id;
	vd_wait_fn fn;
	void *arg;
};

static void on_deadline(uv_timer_t *t);

/* One timer, for the earliest deadline: a thousand clients waiting cost
 * one handle, not a thousand. */
static void arm(vd_waiters *ws)
{
	uint64_t due = vd_waitset_deadline(&ws->set), now = uv_now(ws->loop);

	if (uv_is_closing((uv_handle_t *)&ws->timer))
		return;
	if (due == VD_WAIT_NONE)
		uv_timer_stop(&ws->timer);
	else
		uv_timer_start(&ws->timer, on_deadline, due > now ? due - now : 0, 0);
}

/* Each answer is taken before its function runs, which may add or cancel
 * waiters. */
static void answer_all(vd_waiters *ws)
{
	vd_wait_answer a;
	vd_waiter *w;
	vd_wait_fn fn;
	void *arg;

	while (vd_waitset_take(&ws->set, &a)) {
		w = a.user;
		fn = w->fn;
		arg = w->arg;
		free(w);
		fn(arg, a.timed_out);
	}
	arm(ws);
}

static void on_deadline(uv_timer_t *t)
{
	vd_waiters *ws = t->data;

	vd_waitset_tick(&ws->set, uv_now(ws->loop));
	answer_all(ws);
}

void vd_waiters_init(vd_waiters *ws, uv_loop_t *loop, const vd_waiters_env *env)
{
	ws->loop = loop;
	ws->env = *env;
	vd_waitset_init(&ws->set);
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
	vd_wait_answer a;

	while (vd_waitset_take(&ws->set, &a))
		free(a.user);
	vd_waitset_fire_all(&ws->set);
	while (vd_waitset_take(&ws->set, &a))
		free(a.user);
	vd_waitset_free(&ws->set);
}

vd_waiter *vd_waiters_wait(vd_waiters *ws, char *const *relpaths, const uint64_t *gens,
    size_t n, uint64_t timeout_ms, vd_wait_fn fn, void *arg)
{
	vd_waiter *w = calloc(1, sizeof(*w));
	vd_wait_copy st;
	size_t i;

	if (w == NULL)
		return NULL;
	w->ws = ws;
	w->fn = fn;
	w->arg = arg;
	if (vd_waitset_add(&ws->set, relpaths, gens, n, uv_now(ws->loop) + timeout_ms, w,
	    &w->id) < 0) {
		free(w);
		return NULL;
	}
	/* Where its copies stand; answered at the next check at the earliest. */
	for (i = 0; i < n; i++) {
		ws->env.copy_state(ws->env.arg, relpaths[i], &st);
		vd_waitset_progress(&ws->set, relpaths[i], &st);
	}
	arm(ws);
	return w;
}

void vd_waiters_cancel(vd_waiter *w)
{
	vd_waiters *ws = w->ws;

	if (vd_waitset_cancel(&ws->set, w->id) == 0)
		free(w);
	arm(ws);
}

void vd_waiters_check(vd_waiters *ws)
{
	const char *rel;
	vd_wait_copy st;
	size_t it = 0;

	if (vd_waitset_pending(&ws->set) == 0)
		return;
	while (vd_waitset_next_watched(&ws->set, &it, &rel)) {
		ws->env.copy_state(ws->env.arg, rel, &st);
		vd_waitset_progress(&ws->set, rel, &st);
	}
	if (vd_waitset_settle(&ws->set) > 0)
		ws->env.before_answers(ws->env.arg);
	/* What the others wait for was booked as background work (a change
	 * seen since their request): it goes ahead all the same. */
	it = 0;
	while (vd_waitset_next_watched(&ws->set, &it, &rel))
		ws->env.hurry(ws->env.arg, rel);
	answer_all(ws);
}

void vd_waiters_fire_all(vd_waiters *ws)
{
	vd_waitset_fire_all(&ws->set);
	answer_all(ws);
}

/* Clients waiting for verdicts: the core's waiters on the loop (vd_waiters.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "vd_log.h"
#include "vd_waiters.h"

struct vd_waiter {
	vd_waiters *ws;
	uint64_t id;
	uint64_t deadline_ms;       /* held past it: answered as timed out */
	vd_wait_fn fn;
	void *arg;
	int cancelled;              /* answered, its function not yet called: it won't be */
};

static void on_deadline(uv_timer_t *t);
static void on_release(uv_idle_t *h);
static uint64_t held_due(const vd_waiters *ws);

/* One timer, for the earliest deadline (the core's, or a held answer's):
 * a thousand clients waiting cost one handle, not a thousand. */
void vd_waiters_arm(vd_waiters *ws, uint64_t due)
{
	uint64_t now;

	/* Not started (a store without a loop renders views only), or closing. */
	if (ws->loop == NULL || uv_is_closing((uv_handle_t *)&ws->timer))
		return;
	now = uv_now(ws->loop);
	if (held_due(ws) < due)
		due = held_due(ws);
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

/* The waiter is freed before its function runs; a cancelled one's does
 * not run. */
static void call(vd_waiter *w, int timed_out)
{
	vd_wait_fn fn = w->fn;
	void *arg = w->arg;
	int cancelled = w->cancelled;

	free(w);
	if (!cancelled)
		fn(arg, timed_out);
}

/* A function may cancel a waiter answered after it in the same batch:
 * that one's is not called. */
static void answer(vd_waiters *ws, vd_wait_answer *a, size_t n, uint64_t deadline_ms)
{
	size_t i;

	vd_waiters_arm(ws, deadline_ms);
	for (i = 0; i < n; i++)
		call(a[i].user, a[i].timed_out);
	free(a);
}

/* Held until lineage settles; out of memory, answered now (its chain
 * may read pending). */
static void hold(vd_waiters *ws, vd_waiter *w, int caught_up)
{
	vd_held *h;
	size_t cap;

	if (ws->n_held == ws->cap_held) {
		cap = ws->cap_held ? 2 * ws->cap_held : 8;
		if ((h = realloc(ws->held, cap * sizeof(*h))) == NULL) {
			log_error("out of memory holding a verdict until lineage catches up; answered now");
			call(w, 0);
			return;
		}
		ws->held = h;
		ws->cap_held = cap;
	}
	ws->held[ws->n_held++] = (vd_held){ w, caught_up };
}

static void look_each_turn(vd_waiters *ws)
{
	if (ws->n_held > 0 && !uv_is_closing((uv_handle_t *)&ws->release))
		uv_idle_start(&ws->release, on_release);
}

/* Verdicts answered before lineage settled: held (the timed out are
 * not), looked at each turn. */
static void hold_all(vd_waiters *ws, vd_wait_answer *a, size_t n, uint64_t deadline_ms,
    int caught_up)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (a[i].timed_out)
			call(a[i].user, 1);
		else
			hold(ws, a[i].user, caught_up);
	}
	free(a);
	vd_waiters_arm(ws, deadline_ms);
	look_each_turn(ws);
}

/* Take the held answers out, then call those that go (go(): 1 a verdict,
 * 2 timed out, 0 held again): a function may cancel a waiter, or add one,
 * and never meets the list under way. */
static void settle(vd_waiters *ws, int (*go)(const vd_waiters *, const vd_held *))
{
	vd_held *h = ws->held;
	size_t n = ws->n_held, i;
	int g;

	ws->held = NULL;
	ws->n_held = ws->cap_held = 0;
	for (i = 0; i < n; i++) {
		g = go(ws, &h[i]);
		if (g == 0)
			hold(ws, h[i].w, h[i].caught_up);
		else
			call(h[i].w, g == 2);
	}
	free(h);
}

static int go_due(const vd_waiters *ws, const vd_held *h)
{
	if (h->w->cancelled)
		return 1;
	return h->w->deadline_ms <= uv_now(ws->loop) ? 2 : 0;
}

static int go_caught_up(const vd_waiters *ws, const vd_held *h)
{
	(void)ws;
	return h->caught_up;
}

static int go_all(const vd_waiters *ws, const vd_held *h)
{
	(void)ws;
	(void)h;
	return 1;
}

static int go_all_timed_out(const vd_waiters *ws, const vd_held *h)
{
	(void)ws;
	(void)h;
	return 2;
}

static int any_due(const vd_waiters *ws)
{
	size_t i;

	for (i = 0; i < ws->n_held; i++)
		if (go_due(ws, &ws->held[i]))
			return 1;
	return 0;
}

static int settled(const vd_waiters *ws)
{
	return ws->env.settling(ws->env.arg) == VD_SETTLED;
}

/* Lineage has settled: it catches up first, for a verdict since the pass
 * ended may take back what the pass granted. The answers the pass covered
 * go then, even when the catch-up began another pass: that one reads
 * pending whatever it changed, never trusted from before. The others go
 * too, unless a pass began; it covers them: they wait for its end, and
 * only it. */
static void release(vd_waiters *ws)
{
	size_t i;

	ws->env.catch_up(ws->env.arg);
	settle(ws, go_caught_up);
	if (ws->n_held == 0)
		return;
	if (settled(ws)) {
		settle(ws, go_all);
		return;
	}
	for (i = 0; i < ws->n_held; i++)
		ws->held[i].caught_up = 1;
}

/* Each turn while answers are held and lineage works on the loop: what
 * is due goes, and all of them once lineage has settled, in a turn with
 * room for the catch-up. Waiting for a scan, it stops: the owner's next
 * check starts it again. */
static void on_release(uv_idle_t *h)
{
	vd_waiters *ws = h->data;
	vd_settling st;

	if (any_due(ws))
		settle(ws, go_due);
	st = ws->env.settling(ws->env.arg);
	if (ws->n_held > 0 && st == VD_SETTLED && !vd_turn_defer(ws->turn, &ws->put_off))
		release(ws);
	if (ws->n_held == 0 || st == VD_UNSCANNED)
		uv_idle_stop(h);
}

/* The earliest deadline of a held answer, or VD_WAIT_NONE. */
static uint64_t held_due(const vd_waiters *ws)
{
	uint64_t due = VD_WAIT_NONE;
	size_t i;

	for (i = 0; i < ws->n_held; i++)
		if (!ws->held[i].w->cancelled && ws->held[i].w->deadline_ms < due)
			due = ws->held[i].w->deadline_ms;
	return due;
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
	if (any_due(ws))
		settle(ws, go_due);
	answer(ws, a, n, out.deadline_ms);
}

void vd_waiters_init(vd_waiters *ws, uv_loop_t *loop, vd_core *core, const vd_waiters_env *env)
{
	memset(ws, 0, sizeof(*ws));
	ws->loop = loop;
	ws->core = core;
	ws->env = *env;
	uv_timer_init(loop, &ws->timer);
	ws->timer.data = ws;
	uv_idle_init(loop, &ws->release);
	ws->release.data = ws;
}

void vd_waiters_pace(vd_waiters *ws, const vd_turn *turn)
{
	ws->turn = turn;
}

unsigned vd_waiters_close(vd_waiters *ws, uv_close_cb cb, void *cb_data)
{
	ws->timer.data = cb_data;   /* nothing fires once they are closing */
	ws->release.data = cb_data;
	uv_close((uv_handle_t *)&ws->timer, cb);
	uv_close((uv_handle_t *)&ws->release, cb);
	return 2;
}

void vd_waiters_free(vd_waiters *ws)
{
	vd_core_input in = { .kind = VD_CORE_WAIT_FIRE_ALL };
	vd_core_output out;
	size_t i;

	step(ws, &in, &out);
	for (i = 0; i < out.n_answered; i++)
		free(out.answered[i].user);
	for (i = 0; i < ws->n_held; i++)
		free(ws->held[i].w);
	free(ws->held);
	ws->held = NULL;
	ws->n_held = ws->cap_held = 0;
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
	in.u.wait.deadline_ms = w->deadline_ms = uv_now(ws->loop) + timeout_ms;
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
		w->cancelled = 1;   /* answered, in the batch under way or held: freed there */
	vd_waiters_arm(ws, out.deadline_ms);
}

void vd_waiters_check(vd_waiters *ws)
{
	vd_core_input in = { .kind = VD_CORE_WAIT_CHECK };
	vd_core_output out;
	vd_wait_answer *a;
	size_t n;
	uint64_t deadline;
	int caught_up = 0;

	step(ws, &in, &out);
	a = take(&out, &n);
	deadline = out.deadline_ms;
	if (n > 0 && settled(ws)) {
		ws->env.catch_up(ws->env.arg);
		caught_up = 1;
	}
	if (n > 0 && !settled(ws))
		hold_all(ws, a, n, deadline, caught_up);
	else
		answer(ws, a, n, deadline);
	look_each_turn(ws);
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
	settle(ws, go_all_timed_out);
	if (ws->loop != NULL && !uv_is_closing((uv_handle_t *)&ws->release))
		uv_idle_stop(&ws->release);
}

#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "vd_sched.h"
#include "vd_waiters.h"

struct vd_waiter {
	vd_waiter *next, **prevp;
	vd_store *store;
	char **relpaths;
	uint64_t *gens;
	size_t n;
	uv_timer_t timer;
	vd_wait_fn fn;
	void *arg;
};

static int waiter_done(vd_store *s, const vd_waiter *w)
{
	size_t i;

	/* Done when the asked-for run finished and no newer one (for a change
	 * seen since) is under way: the answer then describes the bytes on
	 * disk. A scrub does not hold an answer back. */
	for (i = 0; i < w->n; i++) {
		vd_copy *c = vd_model_copy(&s->model, w->relpaths[i]);
		if (c == NULL)
			continue;
		if (c->done_gen < w->gens[i] ||
		    (c->inflight != NULL && c->inflight_kind != VD_JOB_SCRUB))
			return 0;
	}
	return 1;
}

static void waiter_closed(uv_handle_t *h)
{
	vd_waiter *w = h->data;
	size_t i;

	for (i = 0; i < w->n; i++)
		free(w->relpaths[i]);
	free(w->relpaths);
	free(w->gens);
	free(w);
}

static void waiter_unlink(vd_waiter *w)
{
	if (w->prevp == NULL)
		return;
	*w->prevp = w->next;
	if (w->next)
		w->next->prevp = w->prevp;
	w->prevp = NULL;
	uv_timer_stop(&w->timer);
	uv_close((uv_handle_t *)&w->timer, waiter_closed);
}

static void waiter_fire(vd_waiter *w, int timed_out)
{
	vd_wait_fn fn = w->fn;
	void *arg = w->arg;

	waiter_unlink(w);
	fn(arg, timed_out);
}

/* What w waits for was booked as background work (a change seen since
 * its request): it goes ahead all the same. */
static void hurry_waited(vd_store *s, const vd_waiter *w)
{
	vd_copy *c;
	size_t i;

	for (i = 0; i < w->n; i++)
		if ((c = vd_model_copy(&s->model, w->relpaths[i])) != NULL)
			vd_sched_hurry(s, c);
}

void vd_waiters_check(vd_store *s)
{
	vd_waiter *w, *next;

	for (w = s->waiters; w != NULL; w = next) {
		next = w->next;
		if (!waiter_done(s, w)) {
			hurry_waited(s, w);
			continue;
		}
		/* An answer reports trust: lineage first catches up. */
		vd_store_sync(s);
		waiter_fire(w, 0);
	}
}

static void on_wait_timeout(uv_timer_t *t)
{
	waiter_fire(t->data, 1);
}

vd_waiter *vd_store_wait(vd_store *s, char **relpaths, const uint64_t *gens,
    size_t n, uint64_t timeout_ms, vd_wait_fn fn, void *arg)
{
	vd_waiter *w = calloc(1, sizeof(*w));
	size_t i;

	if (w == NULL)
		return NULL;
	w->relpaths = calloc(n ? n : 1, sizeof(char *));
	w->gens = calloc(n ? n : 1, sizeof(uint64_t));
	if (w->relpaths == NULL || w->gens == NULL)
		goto fail;
	w->n = n;
	for (i = 0; i < n; i++) {
		if ((w->relpaths[i] = strdup(relpaths[i])) == NULL)
			goto fail;
		w->gens[i] = gens[i];
	}
	w->store = s;
	w->fn = fn;
	w->arg = arg;
	uv_timer_init(s->loop, &w->timer);
	w->timer.data = w;
	uv_timer_start(&w->timer, on_wait_timeout, timeout_ms, 0);
	w->next = s->waiters;
	if (s->waiters)
		s->waiters->prevp = &w->next;
	s->waiters = w;
	w->prevp = &s->waiters;
	return w;

fail:
	for (i = 0; w->relpaths != NULL && i < n; i++)
		free(w->relpaths[i]);
	free(w->relpaths);
	free(w->gens);
	free(w);
	return NULL;
}

void vd_store_wait_cancel(vd_waiter *w)
{
	waiter_unlink(w);
}

void vd_waiters_fire_all(vd_store *s)
{
	while (s->waiters != NULL)
		waiter_fire(s->waiters, 1);
}

#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vd_waitset.h"

#define ID_KEY_LEN 24

typedef struct vd_wentry {      /* one copy one waiter names */
	struct vd_wnode *node;
	char *relpath;
	uint64_t gen;
	int reached;
	struct vd_wentry *next_same;    /* the next entry naming the same relpath */
} vd_wentry;

typedef struct vd_wnode {
	uint64_t id, deadline;
	void *user;
	vd_wentry *e;               /* NULL once answered */
	size_t n, unreached;
	int answered, timed_out;
	struct vd_wnode *prev, *next;   /* in the pending list, or the answered one */
} vd_wnode;

static void id_key(uint64_t id, char *out)
{
	snprintf(out, ID_KEY_LEN, "%" PRIu64, id);
}

void vd_waitset_init(vd_waitset *ws)
{
	memset(ws, 0, sizeof(*ws));
	vd_map_init(&ws->watch);
	vd_map_init(&ws->byid);
	ws->next_id = 1;
}

/* ---- the watch index ---------------------------------------------------- */

static void watch_unlink(vd_waitset *ws, vd_wentry *e)
{
	vd_wentry *first = vd_map_get(&ws->watch, e->relpath), **pp = &first;

	while (*pp != NULL && *pp != e)
		pp = &(*pp)->next_same;
	if (*pp == NULL)
		return;         /* never linked: an add that failed half way */
	*pp = e->next_same;
	if (first == NULL)
		vd_map_del(&ws->watch, e->relpath);
	else
		vd_map_put(&ws->watch, e->relpath, first);   /* an existing key: no allocation */
}

static int watch_link(vd_waitset *ws, vd_wentry *e)
{
	e->next_same = vd_map_get(&ws->watch, e->relpath);
	return vd_map_put(&ws->watch, e->relpath, e);
}

/* Its copies leave the index: an answered waiter hears of them no more. */
static void drop_entries(vd_waitset *ws, vd_wnode *w)
{
	size_t i;

	for (i = 0; w->e != NULL && i < w->n; i++) {
		watch_unlink(ws, &w->e[i]);
		free(w->e[i].relpath);
	}
	free(w->e);
	w->e = NULL;
	w->n = 0;
}

/* ---- the two lists ------------------------------------------------------- */

static void list_unlink(vd_wnode **head, vd_wnode **tail, vd_wnode *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		*head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		*tail = w->prev;
	w->prev = w->next = NULL;
}

static int before(const vd_wnode *a, const vd_wnode *b)
{
	return a->deadline < b->deadline || (a->deadline == b->deadline && a->id < b->id);
}

/* By deadline: searched from the end, where a wait of the usual length
 * lands at once. */
static void pending_insert(vd_waitset *ws, vd_wnode *w)
{
	vd_wnode *at = ws->tail;

	while (at != NULL && before(w, at))
		at = at->prev;
	w->prev = at;
	w->next = at ? at->next : ws->head;
	if (w->next)
		w->next->prev = w;
	else
		ws->tail = w;
	if (at)
		at->next = w;
	else
		ws->head = w;
	ws->pending++;
}

static void answer(vd_waitset *ws, vd_wnode *w, int timed_out)
{
	list_unlink(&ws->head, &ws->tail, w);
	ws->pending--;
	drop_entries(ws, w);
	w->answered = 1;
	w->timed_out = timed_out;
	w->prev = ws->rtail;
	if (ws->rtail)
		ws->rtail->next = w;
	else
		ws->rhead = w;
	ws->rtail = w;
}

static void node_free(vd_waitset *ws, vd_wnode *w)
{
	char key[ID_KEY_LEN];

	id_key(w->id, key);
	vd_map_del(&ws->byid, key);
	drop_entries(ws, w);
	free(w);
}

/* ---- what the caller feeds in --------------------------------------------- */

int vd_waitset_add(vd_waitset *ws, char *const *relpaths, const uint64_t *gens, size_t n,
    uint64_t deadline_ms, void *user, uint64_t *id)
{
	vd_wnode *w = calloc(1, sizeof(*w));
	char key[ID_KEY_LEN];
	size_t i;

	if (w == NULL || (w->e = calloc(n ? n : 1, sizeof(*w->e))) == NULL)
		goto fail;
	w->id = ws->next_id;
	w->deadline = deadline_ms;
	w->user = user;
	for (i = 0; i < n; i++) {
		w->e[i].node = w;
		w->e[i].gen = gens[i];
		if ((w->e[i].relpath = strdup(relpaths[i])) == NULL)
			goto fail;
		w->n = i + 1;
		if (watch_link(ws, &w->e[i]) < 0)
			goto fail;
	}
	w->unreached = n;
	id_key(w->id, key);
	if (vd_map_put(&ws->byid, key, w) < 0)
		goto fail;
	ws->next_id++;
	pending_insert(ws, w);
	*id = w->id;
	return 0;

fail:
	if (w != NULL)
		drop_entries(ws, w);    /* an entry not linked yet is only freed */
	free(w);
	return -ENOMEM;
}

void vd_waitset_progress(vd_waitset *ws, const char *relpath, const vd_wait_copy *st)
{
	vd_wentry *e;
	int reached;

	for (e = vd_map_get(&ws->watch, relpath); e != NULL; e = e->next_same) {
		/* A newer run under way describes the bytes on disk better than
		 * the one asked for: the answer waits for it. */
		reached = !st->present || (st->done_gen >= e->gen && !st->busy);
		if (reached != e->reached) {
			if (reached)
				e->node->unreached--;
			else
				e->node->unreached++;
			e->reached = reached;
		}
	}
}

size_t vd_waitset_settle(vd_waitset *ws)
{
	vd_wnode *w, *next;
	size_t n = 0;

	for (w = ws->head; w != NULL; w = next) {
		next = w->next;
		if (w->unreached == 0) {
			answer(ws, w, 0);
			n++;
		}
	}
	return n;
}

size_t vd_waitset_tick(vd_waitset *ws, uint64_t now_ms)
{
	size_t n = 0;

	while (ws->head != NULL && ws->head->deadline <= now_ms) {
		answer(ws, ws->head, 1);
		n++;
	}
	return n;
}

size_t vd_waitset_fire_all(vd_waitset *ws)
{
	size_t n = 0;

	while (ws->head != NULL) {
		answer(ws, ws->head, 1);
		n++;
	}
	return n;
}

int vd_waitset_cancel(vd_waitset *ws, uint64_t id)
{
	char key[ID_KEY_LEN];
	vd_wnode *w;

	id_key(id, key);
	if ((w = vd_map_get(&ws->byid, key)) == NULL)
		return -ENOENT;
	if (w->answered) {
		list_unlink(&ws->rhead, &ws->rtail, w);
	} else {
		list_unlink(&ws->head, &ws->tail, w);
		ws->pending--;
	}
	node_free(ws, w);
	return 0;
}

/* ---- what the caller takes out --------------------------------------------- */

int vd_waitset_take(vd_waitset *ws, vd_wait_answer *out)
{
	vd_wnode *w = ws->rhead;

	if (w == NULL)
		return 0;
	list_unlink(&ws->rhead, &ws->rtail, w);
	out->id = w->id;
	out->timed_out = w->timed_out;
	out->user = w->user;
	node_free(ws, w);
	return 1;
}

uint64_t vd_waitset_deadline(const vd_waitset *ws)
{
	return ws->head != NULL ? ws->head->deadline : VD_WAIT_NONE;
}

size_t vd_waitset_pending(const vd_waitset *ws)
{
	return ws->pending;
}

int vd_waitset_next_watched(const vd_waitset *ws, size_t *i, const char **relpath)
{
	void *v;

	return vd_map_next(&ws->watch, i, relpath, &v);
}

void vd_waitset_free(vd_waitset *ws)
{
	vd_wnode *w;

	while ((w = ws->head) != NULL) {
		list_unlink(&ws->head, &ws->tail, w);
		node_free(ws, w);
	}
	while ((w = ws->rhead) != NULL) {
		list_unlink(&ws->rhead, &ws->rtail, w);
		node_free(ws, w);
	}
	vd_map_free(&ws->watch);
	vd_map_free(&ws->byid);
	ws->pending = 0;
}

#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vd_limits.h"
#include "vd_plan.h"
#include "vd_util.h"

#define BACKLOG_FIRST_CAP 256

/* ---- the backlog ------------------------------------------------------ */

int vd_backlog_push(vd_backlog *b, const char *relpath)
{
	char **grown, *rel;
	size_t cap;

	/* Emptied: start again at the front rather than grow forever. */
	if (b->head == b->n)
		b->head = b->n = 0;
	if (b->n == b->cap) {
		cap = b->cap ? b->cap * 2 : BACKLOG_FIRST_CAP;
		if ((grown = realloc(b->q, cap * sizeof(*grown))) == NULL)
			return -ENOMEM;
		b->q = grown;
		b->cap = cap;
	}
	if ((rel = strdup(relpath)) == NULL)
		return -ENOMEM;
	b->q[b->n++] = rel;
	return 0;
}

const char *vd_backlog_peek(const vd_backlog *b)
{
	return b->head < b->n ? b->q[b->head] : NULL;
}

void vd_backlog_pop(vd_backlog *b)
{
	if (b->head < b->n)
		free(b->q[b->head++]);
	if (b->head == b->n)
		b->head = b->n = 0;
}

size_t vd_backlog_len(const vd_backlog *b)
{
	return b->n - b->head;
}

void vd_backlog_free(vd_backlog *b)
{
	while (b->head < b->n)
		free(b->q[b->head++]);
	free(b->q);
	memset(b, 0, sizeof(*b));
}

/* ---- jobs that ran out of time ------------------------------------------ */

/* A job that cannot finish must not hold a worker again and again. */
double vd_plan_retry_delay(double limit_s, unsigned timeouts)
{
	double delay = limit_s > 1 ? limit_s : 1;
	unsigned i;

	for (i = 1; i < timeouts && delay < VD_RETRY_MAX_SECONDS; i++)
		delay *= 2;
	return delay > VD_RETRY_MAX_SECONDS ? VD_RETRY_MAX_SECONDS : delay;
}

int vd_retries_add(vd_retries *r, const char *relpath, uint64_t due_ms)
{
	vd_retry *grown;
	char *rel;

	if ((grown = vd_grow(r->v, &r->cap, r->n, sizeof(*r->v))) == NULL)
		return -ENOMEM;
	r->v = grown;
	if ((rel = strdup(relpath)) == NULL)
		return -ENOMEM;
	r->v[r->n].relpath = rel;
	r->v[r->n].due_ms = due_ms;
	r->n++;
	return 0;
}

static size_t earliest(const vd_retries *r)
{
	size_t i, at = 0;

	for (i = 1; i < r->n; i++)
		if (r->v[i].due_ms < r->v[at].due_ms)
			at = i;
	return at;
}

char *vd_retries_take_due(vd_retries *r, uint64_t now_ms)
{
	size_t at;
	char *rel;

	if (r->n == 0 || r->v[at = earliest(r)].due_ms > now_ms)
		return NULL;
	rel = r->v[at].relpath;
	r->v[at] = r->v[--r->n];
	return rel;
}

uint64_t vd_retries_next_due(const vd_retries *r)
{
	return r->n ? r->v[earliest(r)].due_ms : VD_PLAN_NONE;
}

void vd_retries_free(vd_retries *r)
{
	size_t i;

	for (i = 0; i < r->n; i++)
		free(r->v[i].relpath);
	free(r->v);
	memset(r, 0, sizeof(*r));
}

/* ---- the scrub ------------------------------------------------------------- */

static int relpath_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One pass: in path order, one at a time, so that a scrub never takes
 * more than one worker and its rate stays scrub_rate. */
int vd_scrub_begin(vd_scrub *sc, const char *const *relpaths, size_t n)
{
	size_t i, kept = 0;

	vd_scrub_end(sc);
	if ((sc->list = calloc(n ? n : 1, sizeof(char *))) == NULL)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		if ((sc->list[i] = strdup(relpaths[i])) == NULL) {
			sc->n = i;
			vd_scrub_end(sc);
			return -ENOMEM;
		}
	}
	qsort(sc->list, n, sizeof(char *), relpath_cmp);
	for (i = 0; i < n; i++) {
		if (kept > 0 && strcmp(sc->list[kept - 1], sc->list[i]) == 0)
			free(sc->list[i]);
		else
			sc->list[kept++] = sc->list[i];
	}
	sc->n = kept;
	sc->next = 0;
	sc->active = 1;
	return 0;
}

const char *vd_scrub_next(vd_scrub *sc)
{
	return sc->active && sc->next < sc->n ? sc->list[sc->next++] : NULL;
}

void vd_scrub_again(vd_scrub *sc)
{
	if (sc->active && sc->next > 0)
		sc->next--;
}

void vd_scrub_end(vd_scrub *sc)
{
	size_t i;

	for (i = 0; i < sc->n; i++)
		free(sc->list[i]);
	free(sc->list);
	memset(sc, 0, sizeof(*sc));
}

/* ---- which run goes on ------------------------------------------------------- */

void vd_plan_follow(int again, int again_urgency, uint64_t again_gen, int *urgency,
    uint64_t *gen)
{
	if (!again)
		return;
	if (again_urgency < *urgency)
		*urgency = again_urgency;
	if (again_gen > *gen)
		*gen = again_gen;
}

/* ---- when each copy is verified ------------------------------------------------ */

void vd_plan_init(vd_plan *p, vd_model *model)
{
	memset(p, 0, sizeof(*p));
	p->model = model;
}

void vd_plan_free(vd_plan *p)
{
	vd_backlog_free(&p->backlog);
	free(p->acts);
	memset(p, 0, sizeof(*p));
}

void vd_plan_set_queue(vd_plan *p, const vd_plan_queue *q)
{
	p->queue = *q;
}

void vd_plan_begin(vd_plan *p)
{
	p->n_acts = 0;
}

static int act(vd_plan *p, vd_act_kind kind, vd_copy *c, vd_job_kind job_kind, uint64_t gen,
    uint64_t id)
{
	vd_action *grown;

	if ((grown = vd_grow(p->acts, &p->cap_acts, p->n_acts, sizeof(*grown))) == NULL)
		return -ENOMEM;
	p->acts = grown;
	p->acts[p->n_acts++] = (vd_action){ kind, c, job_kind, gen, id };
	return 0;
}

/* vd_pool_submit's bound: a client's job may go past the background
 * work's, to twice queue_max. */
static int room(const vd_plan_queue *q, vd_job_kind kind)
{
	unsigned max = q->queue_max;

	if (!q->open)
		return -ESHUTDOWN;
	if (kind != VD_JOB_EXPLICIT && max > VD_BACKGROUND_QUEUED)
		max = VD_BACKGROUND_QUEUED;
	if (q->waiting >= (kind == VD_JOB_EXPLICIT ? 2 * max : max))
		return -EAGAIN;
	return 0;
}

/* A copy that found the queue full waits in the backlog, in the order it
 * came: a scan's order, parents before children, which keeps lineage
 * catching up one round at a time. Out of memory, it is still counted and
 * found by the next scan. */
static void backlog_add(vd_plan *p, vd_copy *c)
{
	c->backlog = 1;
	p->backlogged++;
	(void)vd_backlog_push(&p->backlog, c->relpath);
}

static void backlog_left(vd_plan *p, vd_copy *c)
{
	if (c->backlog) {
		c->backlog = 0;
		p->backlogged--;
	}
}

/* Any run of c takes it out of the backlog: its entry there is skipped. */
int vd_plan_start(vd_plan *p, vd_copy *c, vd_job_kind kind, uint64_t gen)
{
	int rc;

	if (c->inflight != 0)
		return -EBUSY;
	if ((rc = room(&p->queue, kind)) < 0)
		return rc;
	if (act(p, VD_ACT_START, c, kind, gen, p->last_id + 1) < 0)
		return -ENOMEM;
	c->inflight = ++p->last_id;
	c->inflight_kind = kind;
	c->inflight_gen = gen;
	p->queue.waiting++;
	backlog_left(p, c);
	return 0;
}

/* A job a client waits for runs as an explicit one: one of c's still
 * waiting in the background lane is taken back, to be queued again ahead
 * (vd_plan_taken_back). One under way (between slices, or hashing) goes
 * ahead from its next slice, keeping what it hashed; it answers only
 * what it was asked for. */
int vd_plan_hurry(vd_plan *p, vd_copy *c)
{
	if (c->inflight == 0 || c->inflight_kind != VD_JOB_BACKGROUND)
		return -ENOENT;
	return act(p, VD_ACT_TAKE_BACK, c, c->inflight_kind, c->inflight_gen, c->inflight);
}

/* It has not read anything yet: it answers what was booked after it too. */
void vd_plan_taken_back(vd_plan *p, vd_copy *c, uint64_t id)
{
	int urgency = VD_JOB_EXPLICIT;
	uint64_t gen = c->inflight_gen;

	if (c->inflight != id || id == 0)
		return;
	c->inflight = 0;
	if (p->queue.waiting > 0)
		p->queue.waiting--;
	vd_plan_follow(c->again, VD_JOB_EXPLICIT, c->again_gen, &urgency, &gen);
	c->again = 0;
	if (vd_plan_start(p, c, VD_JOB_EXPLICIT, gen) < 0 && !c->backlog)
		backlog_add(p, c);
	if (gen > c->req_gen)
		c->req_gen = gen;
}

/* What it was to answer is answered by the backlog's run, of a later
 * generation. */
void vd_plan_unstarted(vd_plan *p, vd_copy *c, uint64_t id)
{
	if (c->inflight != id || id == 0)
		return;
	c->inflight = 0;
	if (p->queue.waiting > 0)
		p->queue.waiting--;
	if (c->inflight_kind != VD_JOB_SCRUB && !c->backlog)
		backlog_add(p, c);
}

int vd_plan_returned(vd_plan *p, vd_copy *c, uint64_t id)
{
	(void)p;
	if (c->inflight != id || id == 0)
		return -ESRCH;
	c->inflight = 0;
	return 0;
}

int vd_plan_schedule(vd_plan *p, vd_copy *c, vd_job_kind kind, uint64_t *gen)
{
	int rc;

	/* A job not started yet reads the bytes as they are when it starts:
	 * the run booked here is what it answers once taken back. */
	if (c->inflight != 0) {
		if (!c->again || kind < c->again_kind)
			c->again_kind = kind;
		if (!c->again)
			c->again_gen = ++c->req_gen;
		c->again = 1;
		if (gen)
			*gen = c->again_gen;
		if (kind == VD_JOB_EXPLICIT)
			(void)vd_plan_hurry(p, c);
		return 0;
	}
	rc = vd_plan_start(p, c, kind, c->req_gen + 1);
	if (rc < 0) {
		if (!c->backlog && kind != VD_JOB_EXPLICIT)
			backlog_add(p, c);
		return rc;
	}
	c->req_gen++;
	if (gen)
		*gen = c->req_gen;
	return 0;
}

/* Run c once more: for a booked request (again), or because its bytes
 * changed under the last run (kind, gen of that run), whichever is more
 * urgent and later. */
void vd_plan_follow_up(vd_plan *p, vd_copy *c, vd_job_kind kind, uint64_t gen)
{
	int urgency = kind;

	vd_plan_follow(c->again, c->again_kind, c->again_gen, &urgency, &gen);
	c->again = 0;
	if (vd_plan_start(p, c, (vd_job_kind)urgency, gen) < 0 && !c->backlog)
		backlog_add(p, c);
}

void vd_plan_drain(vd_plan *p)
{
	const char *rel;
	vd_copy *c;

	while ((rel = vd_backlog_peek(&p->backlog)) != NULL) {
		c = vd_model_copy(p->model, rel);
		if (c != NULL && c->backlog && c->inflight == 0 &&
		    vd_plan_schedule(p, c, VD_JOB_BACKGROUND, NULL) < 0)
			return;
		vd_backlog_pop(&p->backlog);
	}
}

void vd_plan_forget(vd_plan *p, vd_copy *c)
{
	backlog_left(p, c);
}

void vd_plan_promote_group(vd_plan *p, const char *hash)
{
	vd_group *g = vd_model_group(p->model, hash);
	size_t i;

	for (i = 0; g != NULL && i < g->n; i++)
		if (g->copies[i]->inflight != 0 && g->copies[i]->inflight_kind != VD_JOB_SCRUB)
			(void)act(p, VD_ACT_PROMOTE, g->copies[i], g->copies[i]->inflight_kind,
			    g->copies[i]->inflight_gen, g->copies[i]->inflight);
}

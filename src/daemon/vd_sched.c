#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vd_limits.h"
#include "vd_log.h"
#include "vd_sched.h"

static void on_retry(uv_timer_t *t);

/* ---- the queue and its backlog ---------------------------------------- */

/* A copy that found the queue full waits in the backlog, in the order it
 * came: a scan's order, parents before children, which keeps lineage
 * catching up one round at a time. Out of memory, it is still counted and
 * found by the next scan. */
static void backlog_add(vd_store *s, vd_copy *c)
{
	char **grown, *rel;

	c->backlog = 1;
	s->backlog++;
	if (s->backlog_n == s->backlog_cap) {
		size_t cap = s->backlog_cap ? s->backlog_cap * 2 : 256;
		if ((grown = realloc(s->backlog_q, cap * sizeof(*grown))) == NULL)
			return;
		s->backlog_q = grown;
		s->backlog_cap = cap;
	}
	if ((rel = strdup(c->relpath)) != NULL)
		s->backlog_q[s->backlog_n++] = rel;
}

static int submit(vd_store *s, vd_copy *c, vd_job_kind kind, uint64_t gen)
{
	vd_job *j;
	int rc;

	if (s->pool == NULL)
		return -ESHUTDOWN;
	if ((j = vd_job_new(kind, c->relpath)) == NULL)
		return -ENOMEM;
	j->gen = gen;
	j->artifact = c->kind;
	j->max_header_len = s->cfg->max_header_len;
	j->bounds.max_tensors = s->cfg->max_tensors;
	j->bounds.max_job_memory = s->cfg->max_job_memory;
	j->bounds.max_artifact_bytes = s->cfg->max_artifact_bytes;
	/* A verified copy is re-checked chunk by chunk on all workers; only a
	 * changed chunk, or a client asking, costs the full canonical pass. */
	if (kind != VD_JOB_EXPLICIT && c->chunks != NULL && c->has_verdict && c->code == VD_OK)
		j->recheck = vd_chunkmap_dup(c->chunks);
	j->rate = kind == VD_JOB_SCRUB ? s->cfg->scrub_rate : 0;
	j->max_seconds = s->cfg->max_verify_seconds;
	j->floor_rate = s->cfg->verify_floor_rate;
	j->slice = s->cfg->hash_slice_ms / 1000.0;
	j->oms_keys = vd_omskeys_ref(s->oms_keys);
	if ((j->run = strdup(c->run)) == NULL) {
		vd_job_free(j);
		return -ENOMEM;
	}
	if ((rc = vd_pool_submit(s->pool, j, kind == VD_JOB_EXPLICIT ? s->cfg->queue_max :
	    (s->cfg->queue_max < VD_BACKGROUND_QUEUED ? s->cfg->queue_max : VD_BACKGROUND_QUEUED))) < 0) {
		vd_job_free(j);
		return rc;
	}
	c->inflight = j;
	c->inflight_kind = kind;
	return 0;
}

/* A job a client waits for runs as an explicit one: one of c's still
 * waiting in the background lane is queued again, ahead, answering what
 * was booked after it too (it has not read anything yet). One under way
 * (between slices, or hashing) goes ahead from its next slice, keeping
 * what it hashed; it answers only what it was asked for. 0, or -1 when
 * there was none to queue again. */
int vd_sched_hurry(vd_store *s, vd_copy *c)
{
	vd_job *j = c->inflight;
	uint64_t gen;

	if (j == NULL || c->inflight_kind != VD_JOB_BACKGROUND || s->pool == NULL)
		return -1;
	if (vd_pool_take_back(s->pool, j) != 0) {
		vd_pool_promote(s->pool, j);
		return -1;
	}
	gen = c->again && c->again_gen > j->gen ? c->again_gen : j->gen;
	vd_job_free(j);
	c->inflight = NULL;
	c->again = 0;
	if (submit(s, c, VD_JOB_EXPLICIT, gen) < 0 && !c->backlog)
		backlog_add(s, c);
	if (gen > c->req_gen)
		c->req_gen = gen;
	return 0;
}

void vd_sched_interest(vd_store *s, const char *hash)
{
	vd_group *g = vd_store_group(s, hash);
	size_t i;

	for (i = 0; g != NULL && s->pool != NULL && i < g->n; i++)
		if (g->copies[i]->inflight != NULL && g->copies[i]->inflight_kind != VD_JOB_SCRUB)
			vd_pool_promote(s->pool, g->copies[i]->inflight);
}

/* Verify c (again). While a job for it is in flight, one more run is
 * booked for when it returns, at the most urgent kind asked for. */
int vd_sched_schedule(vd_store *s, vd_copy *c, vd_job_kind kind, uint64_t *gen)
{
	int rc;

	/* A job not started yet reads the bytes as they are when it starts:
	 * it answers this request too, once ahead of background work. */
	if (kind == VD_JOB_EXPLICIT && vd_sched_hurry(s, c) == 0) {
		if (gen)
			*gen = c->req_gen;
		return 0;
	}
	if (c->inflight != NULL) {
		if (!c->again || kind < c->again_kind)
			c->again_kind = kind;
		if (!c->again)
			c->again_gen = ++c->req_gen;
		c->again = 1;
		if (gen)
			*gen = c->again_gen;
		return 0;
	}
	rc = submit(s, c, kind, c->req_gen + 1);
	if (rc < 0) {
		if (!c->backlog && kind != VD_JOB_EXPLICIT)
			backlog_add(s, c);
		return rc;
	}
	c->req_gen++;
	if (gen)
		*gen = c->req_gen;
	if (c->backlog) {
		c->backlog = 0;
		s->backlog--;
	}
	return 0;
}

/* Copies that found the queue full are queued as it empties, first come
 * first queued. */
void vd_sched_drain(vd_store *s)
{
	vd_copy *c;

	while (s->backlog_head < s->backlog_n) {
		c = vd_model_copy(&s->model, s->backlog_q[s->backlog_head]);
		if (c != NULL && c->backlog && c->inflight == NULL &&
		    vd_sched_schedule(s, c, VD_JOB_BACKGROUND, NULL) == -EAGAIN)
			return;
		free(s->backlog_q[s->backlog_head++]);
	}
	s->backlog_head = s->backlog_n = 0;
}

/* Run c once more: for a booked request (again), or because its bytes
 * changed under the last run (kind, gen of that run), whichever is more
 * urgent and later. */
void vd_sched_follow_up(vd_store *s, vd_copy *c, vd_job_kind kind, uint64_t gen)
{
	if (c->again) {
		if (c->again_kind < kind)
			kind = c->again_kind;
		if (c->again_gen > gen)
			gen = c->again_gen;
		c->again = 0;
	}
	if (submit(s, c, kind, gen) < 0 && !c->backlog)
		backlog_add(s, c);
}

/* ---- jobs that ran out of time ---------------------------------------- */

typedef struct vd_retry {
	char *relpath;
	uint64_t due;               /* uv_now, ms */
} vd_retry;

static void arm_retry(vd_store *s)
{
	uint64_t first = UINT64_MAX, now = uv_now(s->loop);
	size_t i;

	for (i = 0; i < s->n_retries; i++)
		if (s->retries[i].due < first)
			first = s->retries[i].due;
	if (first == UINT64_MAX)
		uv_timer_stop(&s->retry_timer);
	else
		uv_timer_start(&s->retry_timer, on_retry, first > now ? first - now : 0, 0);
}

/* Its time limit, doubled each time in a row: a job that cannot finish
 * must not hold a worker again and again. */
void vd_sched_retry_later(vd_store *s, vd_copy *c, const vd_job *j)
{
	double delay = j->limit > 1 ? j->limit : 1;
	vd_retry *r;
	unsigned i;
	void *grown;

	for (i = 1; i < c->timeouts && delay < VD_RETRY_MAX_SECONDS; i++)
		delay *= 2;
	if (delay > VD_RETRY_MAX_SECONDS)
		delay = VD_RETRY_MAX_SECONDS;
	log_warn("%s: gave up after %.0f s (max_verify_seconds); verifying it again in %.0f s",
	    c->relpath, j->duration, delay);
	if ((grown = vd_grow(s->retries, &s->cap_retries, s->n_retries,
	    sizeof(*s->retries))) == NULL)
		return;       /* the next restart or change verifies it */
	s->retries = grown;
	r = &s->retries[s->n_retries];
	if ((r->relpath = strdup(c->relpath)) == NULL)
		return;
	r->due = uv_now(s->loop) + (uint64_t)(delay * 1000);
	s->n_retries++;
	arm_retry(s);
}

static void on_retry(uv_timer_t *t)
{
	vd_store *s = t->data;
	uint64_t now = uv_now(s->loop);
	size_t i = 0;
	vd_copy *c;

	while (i < s->n_retries) {
		if (s->retries[i].due > now) {
			i++;
			continue;
		}
		c = vd_model_copy(&s->model, s->retries[i].relpath);
		if (c != NULL && c->timeouts > 0)
			vd_sched_schedule(s, c, VD_JOB_BACKGROUND, NULL);
		free(s->retries[i].relpath);
		s->retries[i] = s->retries[--s->n_retries];
	}
	arm_retry(s);
}

/* ---- scrub ------------------------------------------------------------- */

static int relpath_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One pass: every copy with a verdict, in path order, one at a time so a
 * scrub never takes more than one worker and its rate stays scrub_rate. */
static void scrub_start(uv_timer_t *t)
{
	vd_store *s = t->data;
	const char *k;
	void *v;
	size_t it = 0;

	if (s->scrubbing || s->closing || !s->scanned_once)
		return;
	s->scrub_list = calloc(s->model.copies.count + 1, sizeof(char *));
	if (s->scrub_list == NULL)
		return;
	s->scrub_n = s->scrub_next = 0;
	while (vd_map_next(&s->model.copies, &it, &k, &v))
		if (((vd_copy *)v)->has_verdict)
			s->scrub_list[s->scrub_n++] = strdup(k);
	qsort(s->scrub_list, s->scrub_n, sizeof(char *), relpath_cmp);
	s->scrubbing = 1;
	log_info("scrub: re-hashing %zu artifacts at up to %llu bytes/s", s->scrub_n,
	    (unsigned long long)s->cfg->scrub_rate);
	vd_sched_scrub_next(s);
}

void vd_sched_scrub_next(vd_store *s)
{
	vd_copy *c;
	size_t i;

	while (s->scrubbing && s->scrub_next < s->scrub_n) {
		c = vd_model_copy(&s->model, s->scrub_list[s->scrub_next++]);
		if (c == NULL || c->inflight != NULL)
			continue;      /* gone, or being verified anyway */
		if (submit(s, c, VD_JOB_SCRUB, c->req_gen + 1) == 0) {
			c->req_gen++;
			return;
		}
	}
	if (!s->scrubbing)
		return;
	for (i = 0; i < s->scrub_n; i++)
		free(s->scrub_list[i]);
	free(s->scrub_list);
	s->scrub_list = NULL;
	s->scrub_n = s->scrub_next = 0;
	s->scrubbing = 0;
	s->last_scrub = vd_wall_now();
	log_info("scrub: pass finished");
}

void vd_sched_arm_scrub(vd_store *s)
{
	uint64_t ms = (uint64_t)s->cfg->scrub_interval * 1000;

	if (ms == 0)
		uv_timer_stop(&s->scrub_timer);
	else
		uv_timer_start(&s->scrub_timer, scrub_start, ms, ms);
}

void vd_sched_init(vd_store *s)
{
	uv_timer_init(s->loop, &s->scrub_timer);
	uv_timer_init(s->loop, &s->retry_timer);
	s->scrub_timer.data = s->retry_timer.data = s;
	vd_sched_arm_scrub(s);
}

unsigned vd_sched_close(vd_store *s, uv_close_cb cb)
{
	uv_close((uv_handle_t *)&s->scrub_timer, cb);
	uv_close((uv_handle_t *)&s->retry_timer, cb);
	return 2;
}

void vd_sched_free(vd_store *s)
{
	size_t i;

	for (i = 0; i < s->scrub_n; i++)
		free(s->scrub_list[i]);
	free(s->scrub_list);
	for (i = s->backlog_head; i < s->backlog_n; i++)
		free(s->backlog_q[i]);
	free(s->backlog_q);
	for (i = 0; i < s->n_retries; i++)
		free(s->retries[i].relpath);
	free(s->retries);
}

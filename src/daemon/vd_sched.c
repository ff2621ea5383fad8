#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vd_limits.h"
#include "vd_log.h"
#include "vd_sched.h"

static void on_retry(uv_timer_t *t);

static vd_pool *pool_of(const vd_sched *sc)
{
	return sc->env.pool(sc->env.arg);
}

static const vd_config *cfg_of(const vd_sched *sc)
{
	return sc->env.config(sc->env.arg);
}

/* ---- the hasher queue, as vd_plan uses it --------------------------------- */

static unsigned queue_bound(const vd_config *cfg, vd_job_kind kind)
{
	if (kind == VD_JOB_EXPLICIT || cfg->queue_max < VD_BACKGROUND_QUEUED)
		return cfg->queue_max;
	return VD_BACKGROUND_QUEUED;
}

static vd_job *job_for(vd_sched *sc, vd_copy *c, vd_job_kind kind, uint64_t gen)
{
	const vd_config *cfg = cfg_of(sc);
	vd_job *j;

	if ((j = vd_job_new(kind, c->relpath)) == NULL)
		return NULL;
	j->gen = gen;
	j->artifact = c->kind;
	j->max_header_len = cfg->max_header_len;
	j->bounds.max_tensors = cfg->max_tensors;
	j->bounds.max_job_memory = cfg->max_job_memory;
	j->bounds.max_artifact_bytes = cfg->max_artifact_bytes;
	/* A verified copy is re-checked chunk by chunk on all workers; only a
	 * changed chunk, or a client asking, costs the full canonical pass. */
	if (kind != VD_JOB_EXPLICIT && c->chunks != NULL && c->has_verdict && c->code == VD_OK)
		j->recheck = vd_chunkmap_dup(c->chunks);
	j->rate = kind == VD_JOB_SCRUB ? cfg->scrub_rate : 0;
	j->max_seconds = cfg->max_verify_seconds;
	j->floor_rate = cfg->verify_floor_rate;
	j->slice = cfg->hash_slice_ms / 1000.0;
	j->oms_keys = vd_omskeys_ref(sc->env.oms_keys(sc->env.arg));
	if ((j->run = strdup(c->run)) == NULL) {
		vd_job_free(j);
		return NULL;
	}
	return j;
}

static int pool_submit(void *arg, vd_copy *c, vd_job_kind kind, uint64_t gen)
{
	vd_sched *sc = arg;
	vd_pool *pool = pool_of(sc);
	vd_job *j;
	int rc;

	if (pool == NULL)
		return -ESHUTDOWN;
	if ((j = job_for(sc, c, kind, gen)) == NULL)
		return -ENOMEM;
	if ((rc = vd_pool_submit(pool, j, queue_bound(cfg_of(sc), kind))) < 0) {
		vd_job_free(j);
		return rc;
	}
	c->inflight = j;
	return 0;
}

static int pool_take_back(void *arg, vd_copy *c, uint64_t *gen)
{
	vd_pool *pool = pool_of(arg);

	if (pool == NULL || vd_pool_take_back(pool, c->inflight) < 0)
		return -EBUSY;
	*gen = c->inflight->gen;
	vd_job_free(c->inflight);
	c->inflight = NULL;
	return 0;
}

static void pool_promote(void *arg, vd_copy *c)
{
	vd_pool *pool = pool_of(arg);

	if (pool != NULL)
		vd_pool_promote(pool, c->inflight);
}

int vd_sched_hurry(vd_sched *sc, vd_copy *c)
{
	return vd_plan_hurry(&sc->plan, c);
}

void vd_sched_interest(vd_sched *sc, const char *hash)
{
	vd_group *g = vd_model_group(sc->model, hash);
	vd_pool *pool = pool_of(sc);
	size_t i;

	for (i = 0; g != NULL && pool != NULL && i < g->n; i++)
		if (g->copies[i]->inflight != NULL && g->copies[i]->inflight_kind != VD_JOB_SCRUB)
			vd_pool_promote(pool, g->copies[i]->inflight);
}

int vd_sched_schedule(vd_sched *sc, vd_copy *c, vd_job_kind kind, uint64_t *gen)
{
	return vd_plan_schedule(&sc->plan, c, kind, gen);
}

void vd_sched_drain(vd_sched *sc)
{
	vd_plan_drain(&sc->plan);
}

void vd_sched_follow_up(vd_sched *sc, vd_copy *c, vd_job_kind kind, uint64_t gen)
{
	vd_plan_follow_up(&sc->plan, c, kind, gen);
}

void vd_sched_forget(vd_sched *sc, vd_copy *c)
{
	vd_plan_forget(&sc->plan, c);
}

/* ---- jobs that ran out of time ---------------------------------------- */

static void arm_retry(vd_sched *sc)
{
	uint64_t first = vd_retries_next_due(&sc->retries), now = uv_now(sc->loop);

	if (first == VD_PLAN_NONE)
		uv_timer_stop(&sc->retry_timer);
	else
		uv_timer_start(&sc->retry_timer, on_retry, first > now ? first - now : 0, 0);
}

void vd_sched_retry_later(vd_sched *sc, vd_copy *c, const vd_job *j)
{
	double delay = vd_plan_retry_delay(j->limit, c->timeouts);

	log_warn("%s: gave up after %.0f s (max_verify_seconds); verifying it again in %.0f s",
	    c->relpath, j->duration, delay);
	/* Out of memory, the next restart or change verifies it. */
	if (vd_retries_add(&sc->retries, c->relpath, uv_now(sc->loop) + (uint64_t)(delay * 1000)) == 0)
		arm_retry(sc);
}

static void on_retry(uv_timer_t *t)
{
	vd_sched *sc = t->data;
	char *rel;
	vd_copy *c;

	while ((rel = vd_retries_take_due(&sc->retries, uv_now(sc->loop))) != NULL) {
		c = vd_model_copy(sc->model, rel);
		if (c != NULL && c->timeouts > 0)
			vd_sched_schedule(sc, c, VD_JOB_BACKGROUND, NULL);
		free(rel);
	}
	arm_retry(sc);
}

/* ---- scrub ------------------------------------------------------------- */

/* One pass: every copy with a verdict. */
static void scrub_start(uv_timer_t *t)
{
	vd_sched *sc = t->data;
	const char **rels;
	const char *k;
	void *v;
	size_t it = 0, n = 0;

	if (sc->scrub.active || !sc->env.may_scrub(sc->env.arg))
		return;
	if ((rels = calloc(sc->model->copies.count + 1, sizeof(*rels))) == NULL)
		return;
	while (vd_map_next(&sc->model->copies, &it, &k, &v))
		if (((vd_copy *)v)->has_verdict)
			rels[n++] = k;
	if (vd_scrub_begin(&sc->scrub, rels, n) == 0) {
		log_info("scrub: re-hashing %zu artifacts at up to %llu bytes/s", sc->scrub.n,
		    (unsigned long long)cfg_of(sc)->scrub_rate);
		vd_sched_scrub_next(sc);
	}
	free(rels);
}

void vd_sched_scrub_next(vd_sched *sc)
{
	const char *rel;
	vd_copy *c;

	if (!sc->scrub.active)
		return;
	while ((rel = vd_scrub_next(&sc->scrub)) != NULL) {
		c = vd_model_copy(sc->model, rel);
		if (c == NULL || c->inflight != NULL)
			continue;      /* gone, or being verified anyway */
		if (vd_plan_start(&sc->plan, c, VD_JOB_SCRUB, c->req_gen + 1) == 0) {
			c->req_gen++;
			return;
		}
	}
	vd_scrub_end(&sc->scrub);
	sc->last_scrub = vd_wall_now();
	log_info("scrub: pass finished");
}

void vd_sched_arm_scrub(vd_sched *sc)
{
	uint64_t ms = (uint64_t)cfg_of(sc)->scrub_interval * 1000;

	if (ms == 0)
		uv_timer_stop(&sc->scrub_timer);
	else
		uv_timer_start(&sc->scrub_timer, scrub_start, ms, ms);
}

void vd_sched_init(vd_sched *sc, uv_loop_t *loop, vd_model *model, const vd_sched_env *env)
{
	memset(sc, 0, sizeof(*sc));
	sc->loop = loop;
	sc->model = model;
	sc->env = *env;
	vd_plan_init(&sc->plan, model, &(vd_plan_pool){ pool_submit, pool_take_back,
	    pool_promote, sc });
	uv_timer_init(loop, &sc->scrub_timer);
	uv_timer_init(loop, &sc->retry_timer);
	sc->scrub_timer.data = sc->retry_timer.data = sc;
	vd_sched_arm_scrub(sc);
}

unsigned vd_sched_close(vd_sched *sc, uv_close_cb cb, void *cb_data)
{
	/* No callback of theirs runs after this: their data is the closer's. */
	sc->scrub_timer.data = sc->retry_timer.data = cb_data;
	uv_close((uv_handle_t *)&sc->scrub_timer, cb);
	uv_close((uv_handle_t *)&sc->retry_timer, cb);
	return 2;
}

void vd_sched_free(vd_sched *sc)
{
	vd_scrub_end(&sc->scrub);
	vd_plan_free(&sc->plan);
	vd_retries_free(&sc->retries);
}

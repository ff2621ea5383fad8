#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vd_limits.h"
#include "vd_log.h"
#include "vd_sched.h"

static vd_pool *pool_of(const vd_sched *sc)
{
	return sc->env.pool(sc->env.arg);
}

static const vd_config *cfg_of(const vd_sched *sc)
{
	return sc->env.config(sc->env.arg);
}

/* ---- the core's actions, applied to the pool -------------------------- */

static unsigned queue_bound(const vd_config *cfg, vd_job_kind kind)
{
	if (kind == VD_JOB_EXPLICIT || cfg->queue_max < VD_BACKGROUND_QUEUED)
		return cfg->queue_max;
	return VD_BACKGROUND_QUEUED;
}

static vd_job *job_for(vd_sched *sc, const vd_copy *c, const vd_action *a)
{
	const vd_config *cfg = cfg_of(sc);
	vd_job *j;

	if ((j = vd_job_new(a->job_kind, c->relpath)) == NULL)
		return NULL;
	j->gen = a->gen;
	j->id = a->id;
	j->artifact = c->kind;
	j->max_header_len = cfg->max_header_len;
	j->bounds.max_tensors = cfg->max_tensors;
	j->bounds.max_job_memory = cfg->max_job_memory;
	j->bounds.max_artifact_bytes = cfg->max_artifact_bytes;
	/* A verified copy is re-checked chunk by chunk on all workers; only a
	 * changed chunk, or a client asking, costs the full canonical pass. */
	if (a->job_kind != VD_JOB_EXPLICIT && c->chunks != NULL && c->has_verdict && c->code == VD_OK)
		j->recheck = vd_chunkmap_dup(c->chunks);
	j->rate = a->job_kind == VD_JOB_SCRUB ? cfg->scrub_rate : 0;
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

/* The core counted the queue's room: the pool refuses only what became
 * full meanwhile (a job that gave way went back into it), or once it is
 * stopping, or out of memory. */
static int start(vd_sched *sc, const vd_action *a)
{
	vd_pool *pool = pool_of(sc);
	vd_job *j;

	if (pool == NULL)
		return -ESHUTDOWN;
	if ((j = job_for(sc, a->copy, a)) == NULL)
		return -ENOMEM;
	if (vd_map_put(&sc->jobs, a->copy->relpath, j) < 0) {
		vd_job_free(j);
		return -ENOMEM;
	}
	if (vd_pool_submit(pool, j, queue_bound(cfg_of(sc), a->job_kind)) < 0) {
		vd_map_del(&sc->jobs, a->copy->relpath);
		vd_job_free(j);
		return -EAGAIN;
	}
	return 0;
}

vd_job *vd_sched_job(const vd_sched *sc, const char *relpath)
{
	return vd_map_get(&sc->jobs, relpath);
}

void vd_sched_job_ended(vd_sched *sc, const char *relpath)
{
	vd_map_del(&sc->jobs, relpath);
}

/* The job the action names, if it is still its copy's. */
static vd_job *acted_on(const vd_sched *sc, const vd_action *a)
{
	vd_job *j = vd_sched_job(sc, a->copy->relpath);

	return j != NULL && j->id == a->id ? j : NULL;
}

/* 0 when the job was taken back (the core is told), else it is promoted. */
static int take_back(vd_sched *sc, const vd_action *a, int may)
{
	vd_pool *pool = pool_of(sc);
	vd_job *j;

	/* A pool stopping has discarded its queued jobs: none is looked at. */
	if (pool == NULL || (j = acted_on(sc, a)) == NULL)
		return -ENOENT;
	if (may && vd_pool_take_back(pool, j) == 0) {
		vd_sched_job_ended(sc, a->copy->relpath);
		vd_job_free(j);
		return 0;
	}
	vd_pool_promote(pool, j);
	return -EBUSY;
}

static void promote(vd_sched *sc, const vd_action *a)
{
	vd_pool *pool = pool_of(sc);
	vd_job *j;

	if (pool != NULL && (j = acted_on(sc, a)) != NULL)
		vd_pool_promote(pool, j);
}

/* What goes back to the core, once every action of the output is applied
 * (an input drops the output's actions). */
typedef struct answer {
	vd_core_in_kind kind;
	const vd_copy *copy;        /* those inputs leave every copy in the model */
	uint64_t id;
} answer;

static void tell(vd_sched *sc, const answer *a)
{
	vd_core_input in = { .kind = a->kind, .u.action = { a->copy->relpath, a->id } };
	vd_core_output out;

	sc->env.step(sc->env.arg, &in, &out);
}

/* Most outputs ask for a few jobs: their answers need no allocation. */
#define ANSWERS_ON_STACK 16

void vd_sched_apply(vd_sched *sc, const vd_core_output *out)
{
	answer some[ANSWERS_ON_STACK], *ans;
	size_t i, n = 0;

	if (out->scrub_ended) {
		sc->last_scrub = vd_wall_now();
		log_info("scrub: pass finished");
	}
	if (out->n_actions == 0)
		return;
	/* Out of memory for the answers of a long list, a job is promoted
	 * rather than taken back; one refused is lost (logged): its copy counts
	 * as being verified until the next start. */
	ans = out->n_actions <= ANSWERS_ON_STACK ? some : calloc(out->n_actions, sizeof(*ans));
	for (i = 0; i < out->n_actions; i++) {
		const vd_action *a = &out->actions[i];

		switch (a->kind) {
		case VD_ACT_START:
			if (start(sc, a) == 0)
				break;
			if (ans != NULL)
				ans[n++] = (answer){ VD_CORE_UNSTARTED, a->copy, a->id };
			else
				log_error("out of memory queueing %s; it is verified at the next start",
				    a->copy->relpath);
			break;
		case VD_ACT_TAKE_BACK:
			if (take_back(sc, a, ans != NULL) == 0)
				ans[n++] = (answer){ VD_CORE_TAKEN_BACK, a->copy, a->id };
			break;
		case VD_ACT_PROMOTE:
			promote(sc, a);
			break;
		}
	}
	for (i = 0; i < n; i++)
		tell(sc, &ans[i]);
	if (ans != some)
		free(ans);
}

int vd_sched_verify(vd_sched *sc, const char *relpath, vd_job_kind kind, uint64_t *gen)
{
	vd_core_input in = { .kind = VD_CORE_VERIFY, .u.verify = { relpath, kind } };
	vd_core_output out;

	sc->env.step(sc->env.arg, &in, &out);
	if (gen != NULL)
		*gen = out.gen;
	return out.result;
}

void vd_sched_interest(vd_sched *sc, const char *hash)
{
	vd_core_input in = { .kind = VD_CORE_INTEREST, .u.hash = hash };
	vd_core_output out;

	sc->env.step(sc->env.arg, &in, &out);
}

/* ---- the scrub -------------------------------------------------------- */

/* The interval came round: the core begins a pass unless one is under
 * way or the store was never scanned. */
static void scrub_due(uv_timer_t *t)
{
	vd_sched *sc = t->data;
	vd_core_input in = { .kind = VD_CORE_SCRUB };
	vd_core_output out;

	sc->env.step(sc->env.arg, &in, &out);
	if (out.result >= 0)
		log_info("scrub: re-hashing %d artifacts at up to %llu bytes/s", out.result,
		    (unsigned long long)cfg_of(sc)->scrub_rate);
}

void vd_sched_arm_scrub(vd_sched *sc)
{
	uint64_t ms = (uint64_t)cfg_of(sc)->scrub_interval * 1000;

	if (ms == 0)
		uv_timer_stop(&sc->scrub_timer);
	else
		uv_timer_start(&sc->scrub_timer, scrub_due, ms, ms);
}

void vd_sched_init(vd_sched *sc, uv_loop_t *loop, const vd_sched_env *env)
{
	memset(sc, 0, sizeof(*sc));
	sc->env = *env;
	vd_map_init(&sc->jobs);
	uv_timer_init(loop, &sc->scrub_timer);
	sc->scrub_timer.data = sc;
	vd_sched_arm_scrub(sc);
}

unsigned vd_sched_close(vd_sched *sc, uv_close_cb cb, void *cb_data)
{
	/* No callback of its runs after this: its data is the closer's. */
	sc->scrub_timer.data = cb_data;
	uv_close((uv_handle_t *)&sc->scrub_timer, cb);
	return 1;
}

void vd_sched_free(vd_sched *sc)
{
	vd_map_free(&sc->jobs);     /* the jobs are the pool's */
}

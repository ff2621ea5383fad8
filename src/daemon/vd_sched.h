/*
 * When a copy is verified, the shell's part: the core's schedule
 * (vd_plan.h, owned by vd_core) decides; this applies its actions to the
 * hasher pool (a job made and queued, taken back, promoted) and tells the
 * core what the pool answered, and keeps the scrub's interval timer (the
 * core's pass over every verified copy begins with it). Retries of jobs
 * that ran out of time are the core's, due at its deadline (vd_waiters
 * keeps that timer). The loop thread only. It sees the store only
 * through vd_sched_env and the copies the core's actions name, and keeps
 * each copy's job as it made it (the core knows the job by its id).
 */
#ifndef VD_SCHED_H
#define VD_SCHED_H

#include <uv.h>

#include "vd_config.h"
#include "vd_map.h"
#include "vd_core.h"
#include "vd_model.h"
#include "vd_omskeys.h"
#include "vd_plan.h"
#include "vd_pool.h"

/* What the schedule asks of its owner, as things are now. */
typedef struct vd_sched_env {
	vd_pool *(*pool)(void *arg);            /* NULL once stopping */
	const vd_config *(*config)(void *arg);
	vd_omskeys *(*oms_keys)(void *arg);
	/* One input of the core, its output applied (vd_sched_apply among it). */
	void (*step)(void *arg, const vd_core_input *in, vd_core_output *out);
	void *arg;
} vd_sched_env;

typedef struct vd_sched {
	vd_sched_env env;
	uv_timer_t scrub_timer;     /* the scrub's interval */
	double last_scrub;          /* unix seconds the last pass finished; 0: never */
	vd_map jobs;                /* relpath -> the job queued or running for it,
	                             * owned by the pool */
} vd_sched;

/* Its timer, armed from the config. */
void vd_sched_init(vd_sched *sc, uv_loop_t *loop, const vd_sched_env *env);
/* Close its handles with cb (their data: cb_data): how many were closed. */
unsigned vd_sched_close(vd_sched *sc, uv_close_cb cb, void *cb_data);
/* Its memory, once closed. */
void vd_sched_free(vd_sched *sc);

/* The job of relpath's copy as last started (NULL: none), and its end:
 * a job that comes back is the copy's no more. */
vd_job *vd_sched_job(const vd_sched *sc, const char *relpath);
void vd_sched_job_ended(vd_sched *sc, const char *relpath);

/* Verify c (again) as the core decides (VD_CORE_VERIFY): 0 and the
 * generation whose completion answers the request, or -errno (-EAGAIN:
 * queue full; a background request then waits in the backlog). */
int vd_sched_verify(vd_sched *sc, const char *relpath, vd_job_kind kind, uint64_t *gen);
/* The core's actions in out, applied to the pool in order; what the pool
 * answered that the core could not know (a job refused after all, one
 * taken back before it started) goes back to it as inputs. */
void vd_sched_apply(vd_sched *sc, const vd_core_output *out);
/* A client asked about the artifact claiming hash (GET /artifact/<hash>):
 * the jobs of its copies go ahead of background work, as a waiter's do,
 * from their next slice, keeping their kind and what they hashed. */
void vd_sched_interest(vd_sched *sc, const char *hash);

/* The scrub's timer, after a reload. */
void vd_sched_arm_scrub(vd_sched *sc);

#endif

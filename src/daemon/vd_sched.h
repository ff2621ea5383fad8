/*
 * When a copy is verified: jobs handed to the hasher pool, a backlog for
 * when its queue is full, a client's request ahead of background work,
 * jobs that ran out of time tried again later, and the scrub's slow pass
 * over every verified copy. What to do is decided in vd_plan.h; this is
 * the shell that keeps its timers and makes the jobs the pool runs. The loop
 * thread only. It sees the store only through its model and vd_sched_env.
 */
#ifndef VD_SCHED_H
#define VD_SCHED_H

#include <uv.h>

#include "vd_config.h"
#include "vd_model.h"
#include "vd_omskeys.h"
#include "vd_plan.h"
#include "vd_pool.h"

/* What the schedule asks of its owner, as things are now. */
typedef struct vd_sched_env {
	vd_pool *(*pool)(void *arg);            /* NULL once stopping */
	const vd_config *(*config)(void *arg);
	vd_omskeys *(*oms_keys)(void *arg);
	int (*may_scrub)(void *arg);            /* the store was scanned, and stays open */
	void *arg;
} vd_sched_env;

typedef struct vd_sched {
	uv_loop_t *loop;
	vd_model *model;
	vd_sched_env env;
	vd_plan plan;               /* what is queued, booked, in the backlog */
	vd_retries retries;         /* copies whose job ran out of time */
	uv_timer_t retry_timer;
	vd_scrub scrub;             /* the pass under way */
	uv_timer_t scrub_timer;
	double last_scrub;          /* unix seconds the last pass finished; 0: never */
} vd_sched;

/* Its timers, and the scrub armed from the config. */
void vd_sched_init(vd_sched *sc, uv_loop_t *loop, vd_model *model, const vd_sched_env *env);
/* Close its handles with cb (their data: cb_data): how many were closed. */
unsigned vd_sched_close(vd_sched *sc, uv_close_cb cb, void *cb_data);
/* What it holds, once its handles are closed. */
void vd_sched_free(vd_sched *sc);

/* Verify c (again): 0 and the generation whose completion answers the
 * request, or -errno (-EAGAIN: queue full; a background request then
 * waits in the backlog). While a job of c is in flight, one more run is
 * booked for when it returns. */
int vd_sched_schedule(vd_sched *sc, vd_copy *c, vd_job_kind kind, uint64_t *gen);
/* Run c once more, for what was booked or because its bytes changed
 * under the last run (of kind, answering gen). */
void vd_sched_follow_up(vd_sched *sc, vd_copy *c, vd_job_kind kind, uint64_t gen);
/* A client waits for c: its job still queued behind background work goes
 * ahead. 0, or -ENOENT or -EBUSY when there was none to move
 * (vd_plan_hurry). */
int vd_sched_hurry(vd_sched *sc, vd_copy *c);
/* A client asked about the artifact claiming hash (GET /artifact/<hash>):
 * the jobs of its copies go ahead of background work, as a waiter's do,
 * from their next slice, keeping their kind and what they hashed. */
void vd_sched_interest(vd_sched *sc, const char *hash);
/* Queue what waits in the backlog, as far as the queue takes it. */
void vd_sched_drain(vd_sched *sc);
/* c's job ran out of time: verify it again later, later each time. */
void vd_sched_retry_later(vd_sched *sc, vd_copy *c, const vd_job *j);
/* c leaves the model. */
void vd_sched_forget(vd_sched *sc, vd_copy *c);

/* The scrub's next copy, after one finished; its timer, after a reload. */
void vd_sched_scrub_next(vd_sched *sc);
void vd_sched_arm_scrub(vd_sched *sc);

#endif

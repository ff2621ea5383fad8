/*
 * When a copy is verified: jobs handed to the hasher pool, a backlog for
 * when its queue is full, a client's request ahead of background work,
 * jobs that ran out of time tried again later, and the scrub's slow pass
 * over every verified copy. The loop thread only; the state it keeps is
 * the store's (vd_store.h).
 */
#ifndef VD_SCHED_H
#define VD_SCHED_H

#include "vd_store.h"

/* Its timers, and the scrub armed from the config. */
void vd_sched_init(vd_store *s);
/* Close its handles with cb: how many were closed. */
unsigned vd_sched_close(vd_store *s, uv_close_cb cb);
/* What it holds, once its handles are closed. */
void vd_sched_free(vd_store *s);

/* Verify c (again): 0 and the generation whose completion answers the
 * request, or -errno (-EAGAIN: queue full; a background request then
 * waits in the backlog). While a job of c is in flight, one more run is
 * booked for when it returns. */
int vd_sched_schedule(vd_store *s, vd_copy *c, vd_job_kind kind, uint64_t *gen);
/* Run c once more, for what was booked or because its bytes changed
 * under the last run (of kind, answering gen). */
void vd_sched_follow_up(vd_store *s, vd_copy *c, vd_job_kind kind, uint64_t gen);
/* A client waits for c: its job still queued behind background work goes
 * ahead. 0, or -1 when there was none to move. */
int vd_sched_hurry(vd_store *s, vd_copy *c);
/* A client asked about the artifact claiming hash (GET /artifact/<hash>):
 * the jobs of its copies go ahead of background work, as a waiter's do,
 * from their next slice, keeping their kind and what they hashed. */
void vd_sched_interest(vd_store *s, const char *hash);
/* Queue what waits in the backlog, as far as the queue takes it. */
void vd_sched_drain(vd_store *s);
/* c's job ran out of time: verify it again later, later each time. */
void vd_sched_retry_later(vd_store *s, vd_copy *c, const vd_job *j);

/* The scrub's next copy, after one finished; its timer, after a reload. */
void vd_sched_scrub_next(vd_store *s);
void vd_sched_arm_scrub(vd_store *s);

#endif

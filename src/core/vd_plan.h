/*
 * The verification schedule's decisions, as data and pure functions: when
 * a copy's run is queued, booked for after the one in flight, or left in
 * the backlog of copies that found the hasher queue full (first come,
 * first queued); a client's run ahead of background work; the delay
 * before a job that ran out of time is tried again, and the copies due
 * for that at a given time; the scrub's pass over every verified copy.
 * Time is an input (milliseconds of a monotonic clock); nothing here reads
 * a clock or arms a timer, and the hasher queue is the owner's, reached
 * through vd_plan_pool: vd_sched.c is the daemon's shell around it.
 */
#ifndef VD_PLAN_H
#define VD_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "vd_model.h"

#define VD_PLAN_NONE UINT64_MAX     /* nothing due */

/* ---- the backlog ------------------------------------------------------ */

typedef struct vd_backlog {
	char **q;                   /* relpaths, in the order they came (head on) */
	size_t head, n, cap;
} vd_backlog;

/* relpath waits behind the others: 0, or -ENOMEM (it is not queued). */
int vd_backlog_push(vd_backlog *b, const char *relpath);
/* The next to queue, or NULL when it is empty. */
const char *vd_backlog_peek(const vd_backlog *b);
/* The next was queued (or is not wanted any more): drop it. */
void vd_backlog_pop(vd_backlog *b);
size_t vd_backlog_len(const vd_backlog *b);
void vd_backlog_free(vd_backlog *b);

/* ---- jobs that ran out of time ------------------------------------------ */

/* Seconds before a copy whose job ran out of time (after limit_s) for
 * the timeouts-th time in a row is verified again: the limit (at least a
 * second), doubled for each time after the first, never more than
 * VD_RETRY_MAX_SECONDS. */
double vd_plan_retry_delay(double limit_s, unsigned timeouts);

typedef struct vd_retry {
	char *relpath;
	uint64_t due_ms;
} vd_retry;

typedef struct vd_retries {
	vd_retry *v;
	size_t n, cap;
} vd_retries;

/* relpath is due at due_ms: 0, or -ENOMEM (it is not kept). */
int vd_retries_add(vd_retries *r, const char *relpath, uint64_t due_ms);
/* One copy due at now_ms, the earliest first (the caller frees it), or
 * NULL when none is. */
char *vd_retries_take_due(vd_retries *r, uint64_t now_ms);
/* When the next is due, or VD_PLAN_NONE. */
uint64_t vd_retries_next_due(const vd_retries *r);
void vd_retries_free(vd_retries *r);

/* ---- the scrub ------------------------------------------------------------- */

typedef struct vd_scrub {
	char **list;                /* the pass's copies, in path order */
	size_t n, next;
	int active;
} vd_scrub;

/* A pass over these copies (each once, in path order, duplicates
 * dropped): 0, or -ENOMEM (no pass). */
int vd_scrub_begin(vd_scrub *sc, const char *const *relpaths, size_t n);
/* The pass's next copy, or NULL when it is over (or none is under way). */
const char *vd_scrub_next(vd_scrub *sc);
/* The pass is over: what it held is freed. */
void vd_scrub_end(vd_scrub *sc);

/* ---- which run goes on ------------------------------------------------------- */

/* A copy's next run, of a run booked meanwhile (again: its urgency and
 * generation) and one due (*urgency, *gen): the more urgent (the lower)
 * and the later generation. */
void vd_plan_follow(int again, int again_urgency, uint64_t again_gen, int *urgency,
    uint64_t *gen);

/* ---- when each copy is verified ------------------------------------------------ */

/* The hasher queue, as the schedule uses it. */
typedef struct vd_plan_pool {
	/* Queue a job of c (of kind, answering gen) and set c->inflight: 0, or
	 * -errno (-EAGAIN: the queue is full; -ESHUTDOWN: it is stopping). */
	int (*submit)(void *arg, vd_copy *c, vd_job_kind kind, uint64_t gen);
	/* Take c's job back out of the queue before it started: 0, the
	 * generation it answered in *gen and c->inflight cleared; -EBUSY when
	 * it has started (or there is no queue). */
	int (*take_back)(void *arg, vd_copy *c, uint64_t *gen);
	/* c's job, under way, goes ahead of background work from its next slice. */
	void (*promote)(void *arg, vd_copy *c);
	void *arg;
} vd_plan_pool;

typedef struct vd_plan {
	vd_model *model;
	vd_plan_pool pool;
	vd_backlog backlog;         /* copies that found the queue full */
	size_t backlogged;          /* copies marked so (some maybe not in it: memory) */
} vd_plan;

void vd_plan_init(vd_plan *p, vd_model *model, const vd_plan_pool *pool);
void vd_plan_free(vd_plan *p);

/* Verify c (again): 0 and the generation whose completion answers the
 * request, or -errno (-EAGAIN: queue full; a background request then
 * waits in the backlog). While a job of c is in flight, one more run is
 * booked for when it returns, at the most urgent kind asked for. */
int vd_plan_schedule(vd_plan *p, vd_copy *c, vd_job_kind kind, uint64_t *gen);
/* Run c once more, for what was booked or because its bytes changed
 * under the last run (of kind, answering gen). */
void vd_plan_follow_up(vd_plan *p, vd_copy *c, vd_job_kind kind, uint64_t gen);
/* A client waits for c: its job still queued behind background work goes
 * ahead. 0, or -ENOENT when c has no background job, -EBUSY when it has
 * started (it is promoted instead). */
int vd_plan_hurry(vd_plan *p, vd_copy *c);
/* Queue what waits in the backlog, in order, as far as the queue takes it. */
void vd_plan_drain(vd_plan *p);
/* c leaves the model. */
void vd_plan_forget(vd_plan *p, vd_copy *c);
/* A run of c of kind now, outside the backlog (the scrub's): 0 or -errno. */
int vd_plan_start(vd_plan *p, vd_copy *c, vd_job_kind kind, uint64_t gen);

#endif

/*
 * The verification schedule's decisions, as data and pure functions: when
 * a copy's run is queued, booked for after the one in flight, or left in
 * the backlog of copies that found the hasher queue full (first come,
 * first queued); a client's run ahead of background work; the delay
 * before a job that ran out of time is tried again, and the copies due
 * for that at a given time; the scrub's pass over every verified copy.
 * Time is an input (milliseconds of a monotonic clock); nothing here reads
 * a clock or arms a timer. The hasher queue is the owner's: the schedule
 * counts the jobs waiting there against its bounds, and what it wants
 * done (a job started, taken back, promoted) are actions, applied by the
 * owner, whose answers that can differ (a job refused after all, or taken
 * back before it started) come back as calls. vd_core owns the schedule;
 * vd_sched.c is the daemon's shell that applies its actions to the pool.
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
/* The copy last taken comes next again (the queue had no room for it). */
void vd_scrub_again(vd_scrub *sc);
/* The pass is over: what it held is freed. */
void vd_scrub_end(vd_scrub *sc);

/* ---- which run goes on ------------------------------------------------------- */

/* A copy's next run, of a run booked meanwhile (again: its urgency and
 * generation) and one due (*urgency, *gen): the more urgent (the lower)
 * and the later generation. */
void vd_plan_follow(int again, int again_urgency, uint64_t again_gen, int *urgency,
    uint64_t *gen);

/* ---- when each copy is verified ------------------------------------------------ */

/* What the schedule asks of the hasher queue: its outputs, applied in order. */
typedef enum vd_act_kind {
	VD_ACT_START,       /* queue a job of copy (kind, answering gen, id); should the
	                     * queue refuse it, vd_plan_unstarted */
	VD_ACT_TAKE_BACK,   /* take copy's job (id) back out of the queue if it has not
	                     * started (then vd_plan_taken_back), else promote it */
	VD_ACT_PROMOTE      /* copy's job (id) goes ahead of background work from its
	                     * next slice, keeping its kind and what it hashed */
} vd_act_kind;

typedef struct vd_action {
	vd_act_kind kind;
	const vd_copy *copy;        /* valid until the model changes */
	vd_job_kind job_kind;       /* START */
	uint64_t gen;               /* START: the generation it answers */
	uint64_t id;                /* the job's: copy->inflight from START on */
} vd_action;

/* The hasher queue as the schedule counts it: jobs waiting there (as its
 * owner last said, and those started since), against the bounds
 * vd_pool_submit applies (background work: VD_BACKGROUND_QUEUED at most). */
typedef struct vd_plan_queue {
	unsigned waiting;
	unsigned queue_max;         /* queue_max: a client's job, twice that */
	int open;                   /* 0: stopping, nothing is queued */
} vd_plan_queue;

typedef struct vd_plan {
	vd_model *model;
	vd_plan_queue queue;
	uint64_t last_id;           /* the last job's id */
	vd_backlog backlog;         /* copies that found the queue full */
	size_t backlogged;          /* copies marked so (some maybe not in it: memory) */
	vd_action *acts;            /* what the input being taken asks */
	size_t n_acts, cap_acts;
} vd_plan;

void vd_plan_init(vd_plan *p, vd_model *model);
void vd_plan_free(vd_plan *p);
/* The queue as its owner sees it now. */
void vd_plan_set_queue(vd_plan *p, const vd_plan_queue *q);
/* A new input: the actions of the last one are dropped. */
void vd_plan_begin(vd_plan *p);

/* Verify c (again): 0 and the generation whose completion answers the
 * request, or -errno (-EAGAIN: queue full, -ESHUTDOWN: stopping; a
 * background request then waits in the backlog). While a job of c is in
 * flight, one more run is booked for when it returns, at the most urgent
 * kind asked for; a client's request also takes back a background job not
 * yet started, to queue it ahead (vd_plan_hurry). */
int vd_plan_schedule(vd_plan *p, vd_copy *c, vd_job_kind kind, uint64_t *gen);
/* Run c once more, for what was booked or because its bytes changed
 * under the last run (of kind, answering gen). */
void vd_plan_follow_up(vd_plan *p, vd_copy *c, vd_job_kind kind, uint64_t gen);
/* A client waits for c: its background job goes ahead (VD_ACT_TAKE_BACK).
 * 0, or -ENOENT when c has no background job. */
int vd_plan_hurry(vd_plan *p, vd_copy *c);
/* c's job (id) was taken back before it started: queued again ahead of
 * background work, answering what was booked after it too. */
void vd_plan_taken_back(vd_plan *p, vd_copy *c, uint64_t id);
/* c's job (id) could not be queued after all: c waits in the backlog
 * (a scrub's is let go). */
void vd_plan_unstarted(vd_plan *p, vd_copy *c, uint64_t id);
/* c's job (id) came back: 0, or -ESRCH when it is not c's job now. */
int vd_plan_returned(vd_plan *p, vd_copy *c, uint64_t id);
/* Queue what waits in the backlog, in order, as far as the queue takes it. */
void vd_plan_drain(vd_plan *p);
/* c leaves the model. */
void vd_plan_forget(vd_plan *p, vd_copy *c);
/* A run of c of kind now, outside the backlog (the scrub's): 0 or -errno. */
int vd_plan_start(vd_plan *p, vd_copy *c, vd_job_kind kind, uint64_t gen);
/* The jobs of the copies of the group of hash, under way or queued (a
 * scrub's aside), go ahead of background work: a client asked about it. */
void vd_plan_promote_group(vd_plan *p, const char *hash);

#endif

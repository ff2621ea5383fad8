/*
 * The verification schedule's decisions, as data and pure functions: the
 * backlog of copies that found the hasher queue full (first come, first
 * queued), the delay before a job that ran out of time is tried again,
 * the copies due for that at a given time, the scrub's pass over every
 * verified copy, and which run a copy goes on with. Time is an input
 * (milliseconds of a monotonic clock); nothing here reads a clock, arms a
 * timer or touches the pool: vd_sched.c does, with what these decide.
 */
#ifndef VD_PLAN_H
#define VD_PLAN_H

#include <stddef.h>
#include <stdint.h>

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

#endif

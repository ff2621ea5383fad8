/*
 * Clients waiting for verdicts (POST /verify?wait=): the shell around the
 * core's waiters (VD_CORE_WAIT and its kin, vd_core.h). It keeps the
 * core's one timer, for its earliest deadline (a waiter's, or a retry of a
 * job that ran out of time), feeds the loop's time in, and calls each
 * waiter's function once. The loop thread only.
 */
#ifndef VD_WAITERS_H
#define VD_WAITERS_H

#include <stdint.h>

#include <uv.h>

#include "vd_core.h"
#include "vd_turn.h"

typedef struct vd_waiter vd_waiter;
typedef void (*vd_wait_fn)(void *arg, int timed_out);

/* What lineage is doing, as the waiters see it. */
typedef enum vd_settling {
	VD_SETTLED,                 /* each chain reads what it is: answers go */
	VD_PASSING,                 /* a pass over the chains goes on in slices, a
	                             * turn at a time: a chain may read pending
	                             * for want of its turn */
	VD_UNSCANNED,               /* the store has not been scanned whole: a
	                             * chain may read pending for a parent the
	                             * scan has not reached (the owner checks
	                             * again once it has) */
} vd_settling;

/* What the waiters ask of their owner. */
typedef struct vd_waiters_env {
	/* One input of the core, its output applied (the jobs a check hurries). */
	void (*step)(void *arg, const vd_core_input *in, vd_core_output *out);
	/* Lineage catches up with what changed: verdicts are about to be
	 * answered, and each answer says whether its artifact is trusted. */
	void (*catch_up)(void *arg);
	vd_settling (*settling)(void *arg);
	void *arg;
} vd_waiters_env;

/* A verdict answered while lineage settled, its function not yet called. */
typedef struct vd_held {
	vd_waiter *w;
	int caught_up;              /* lineage caught up after it: the pass covers it */
} vd_held;

typedef struct vd_waiters {
	uv_loop_t *loop;
	uv_timer_t timer;           /* the earliest deadline */
	uv_idle_t release;          /* each turn while answers are held */
	const vd_turn *turn;        /* the catch-up before a release goes by it */
	unsigned put_off;
	vd_core *core;              /* holds the waiters */
	vd_waiters_env env;
	vd_held *held;              /* answered by the core, held until lineage settles */
	size_t n_held, cap_held;
} vd_waiters;

void vd_waiters_init(vd_waiters *ws, uv_loop_t *loop, vd_core *core, const vd_waiters_env *env);
/* The catch-up that releases held answers waits for a turn with room
 * (vd_turn.h); without a turn, it never waits. */
void vd_waiters_pace(vd_waiters *ws, const vd_turn *turn);
/* Close its handles with cb (its data: cb_data): how many were closed. */
unsigned vd_waiters_close(vd_waiters *ws, uv_close_cb cb, void *cb_data);
/* Once its handles are closed, before the core is freed: drops the
 * waiters left, unanswered. */
void vd_waiters_free(vd_waiters *ws);

/* Call fn once every copy reached its generation (or vanished), or after
 * timeout_ms with timed_out set; never before this returns. The waiter is
 * freed before fn is called; vd_waiters_cancel drops it without calling
 * fn. NULL when out of memory. */
vd_waiter *vd_waiters_wait(vd_waiters *ws, char *const *relpaths, const uint64_t *gens,
    size_t n, uint64_t timeout_ms, vd_wait_fn fn, void *arg);
void vd_waiters_cancel(vd_waiter *w);

/* The core's earliest deadline (vd_core_output.deadline_ms), a waiter's or
 * a retry's, as any input left it: the timer fires VD_CORE_TICK then. */
void vd_waiters_arm(vd_waiters *ws, uint64_t due);
/* Answer every waiter whose copies reached their generation, lineage
 * caught up first; what the others wait for goes ahead (the core's
 * actions). Until lineage has settled, those answers are held (their
 * functions not called): they go once it has, and lineage has caught up
 * with what changed before them. The loop's turn stays short, and each
 * client is still told whether its artifact is trusted. A held answer
 * whose deadline comes first is timed out. The owner checks again once
 * the store has been scanned whole. */
void vd_waiters_check(vd_waiters *ws);
/* Shutting down: answer every waiter as timed out, held ones too. */
void vd_waiters_fire_all(vd_waiters *ws);

#endif

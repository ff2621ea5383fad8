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

typedef struct vd_waiter vd_waiter;
typedef void (*vd_wait_fn)(void *arg, int timed_out);

/* What the waiters ask of their owner. */
typedef struct vd_waiters_env {
	/* One input of the core, its output applied (the jobs a check hurries). */
	void (*step)(void *arg, const vd_core_input *in, vd_core_output *out);
	/* Waiters are about to be answered with verdicts (lineage catches up). */
	void (*before_answers)(void *arg);
	void *arg;
} vd_waiters_env;

typedef struct vd_waiters {
	uv_loop_t *loop;
	uv_timer_t timer;           /* the earliest deadline */
	vd_core *core;              /* holds the waiters */
	vd_waiters_env env;
} vd_waiters;

void vd_waiters_init(vd_waiters *ws, uv_loop_t *loop, vd_core *core, const vd_waiters_env *env);
/* Close its timer with cb (its data: cb_data): how many handles were closed. */
unsigned vd_waiters_close(vd_waiters *ws, uv_close_cb cb, void *cb_data);
/* Once its timer is closed, before the core is freed: drops the waiters
 * left, unanswered. */
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
/* Answer every waiter whose copies reached their generation; what the
 * others wait for goes ahead (the core's actions). */
void vd_waiters_check(vd_waiters *ws);
/* Shutting down: answer every waiter as timed out. */
void vd_waiters_fire_all(vd_waiters *ws);

#endif

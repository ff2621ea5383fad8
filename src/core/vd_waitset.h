/*
 * Clients waiting for verdicts, as data: each waiter names copies (by
 * relpath) and the generation of each whose completion answers it, and a
 * deadline. The caller feeds in what happens -- a copy's state as it is
 * now, the time -- and takes out the waiters to answer, each exactly
 * once: when every copy it names reached its generation with nothing
 * newer under way for it (or vanished), or as timed out at the first tick
 * at or after its deadline. No clock is read and nothing is armed here:
 * the caller keeps one timer for vd_waitset_deadline.
 */
#ifndef VD_WAITSET_H
#define VD_WAITSET_H

#include <stddef.h>
#include <stdint.h>

#include "vd_map.h"

#define VD_WAIT_NONE UINT64_MAX    /* no deadline to arm for */

/* A copy as the caller sees it now. */
typedef struct vd_wait_copy {
	int present;                /* 0: it vanished, which answers for it */
	uint64_t done_gen;          /* the last generation its verification finished */
	int busy;                   /* a run a waiter must wait for is queued or running */
} vd_wait_copy;

typedef struct vd_wait_answer {
	uint64_t id;
	int timed_out;
	void *user;
} vd_wait_answer;

struct vd_wnode;

typedef struct vd_waitset {
	vd_map watch;               /* relpath -> its first vd_wentry */
	vd_map byid;                /* decimal id -> vd_wnode, pending or answered */
	struct vd_wnode *head, *tail;    /* pending, by deadline then id */
	struct vd_wnode *rhead, *rtail;  /* answered, in order, not yet taken */
	uint64_t next_id;
	size_t pending;
} vd_waitset;

void vd_waitset_init(vd_waitset *ws);
/* Frees every waiter; none is answered. */
void vd_waitset_free(vd_waitset *ws);

/* A waiter for the n copies relpaths at generations gens, answered as
 * timed out from deadline_ms on; user comes back with its answer. Each of
 * its copies counts as not reached until vd_waitset_progress says
 * otherwise. 0 and *id, or -ENOMEM (nothing added). Never answers. */
int vd_waitset_add(vd_waitset *ws, char *const *relpaths, const uint64_t *gens, size_t n,
    uint64_t deadline_ms, void *user, uint64_t *id);
/* relpath's copy is in state st now: what its waiters hold for it. */
void vd_waitset_progress(vd_waitset *ws, const char *relpath, const vd_wait_copy *st);
/* Answer every waiter whose copies all reached their generation: the
 * caller calls it once it has reported every copy that changed. How many. */
size_t vd_waitset_settle(vd_waitset *ws);
/* The time is now_ms: every waiter whose deadline came is answered as
 * timed out. How many. */
size_t vd_waitset_tick(vd_waitset *ws, uint64_t now_ms);
/* Shutting down: every pending waiter is answered as timed out. */
size_t vd_waitset_fire_all(vd_waitset *ws);
/* Drop a waiter, pending or answered but not taken: it is never
 * answered (again). 0, or -ENOENT when it is not known (taken already). */
int vd_waitset_cancel(vd_waitset *ws, uint64_t id);

/* The next answer, in the order they came (1), or 0 when none is left. */
int vd_waitset_take(vd_waitset *ws, vd_wait_answer *out);
/* The earliest deadline of a pending waiter, or VD_WAIT_NONE. */
uint64_t vd_waitset_deadline(const vd_waitset *ws);
/* Pending waiters (answered ones not taken yet excluded). */
size_t vd_waitset_pending(const vd_waitset *ws);

/* Iterate the relpaths some pending waiter names:
 * for (i = 0; vd_waitset_next_watched(ws, &i, &relpath); ) */
int vd_waitset_next_watched(const vd_waitset *ws, size_t *i, const char **relpath);

#endif

/*
 * A bounded work queue served by dedicated threads (libuv's shared
 * threadpool stays free for file-system calls). Items wait in two lanes,
 * urgent ahead of the rest, each ordered by rank (the least first, so an
 * item that has had least of the threads goes next) and then by arrival.
 * An item runs on a worker thread and goes back to the event loop thread
 * through a uv_async_t, or, when it yields, back into its lane to go on
 * later: a long item takes turns with the rest instead of holding its
 * thread. Idle workers also take
 * tasks: small pieces of work a running item splits off and waits for,
 * while a core is left that no item or task uses.
 * Reserved threads take urgent items only, so that one never waits for
 * the rest, however long it runs.
 */
#ifndef VD_QUEUE_H
#define VD_QUEUE_H

#include "vd_limits.h"
#include "vd_turn.h"

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

typedef struct vd_queue vd_queue;

/* Embedded in whatever the owner queues. */
typedef struct vd_queue_item {
	struct vd_queue_item *next;
	int urgent;                /* ahead of the rest, and may exceed the bound;
	                            * set by the owner before submitting, then by
	                            * vd_queue_promote only */
	uint64_t rank;             /* the owner's: how much it has had (bytes,
	                            * say); 0 for a new item. Set while it runs */
	uint64_t seq;              /* the queue's: arrival order within a rank */
	int started;               /* the queue's: it ran at least once */
} vd_queue_item;

/* What run returns: the item is done (handed to done), or goes back into
 * its lane, at its rank, behind the items of the same rank. */
enum vd_queue_step {
	VD_QUEUE_DONE = 0,
	VD_QUEUE_AGAIN = 1
};

typedef struct vd_queue_ops {
	const char *name;          /* what the threads are called in the log */
	/* A worker thread, no lock held: a vd_queue_step (VD_QUEUE_AGAIN to go
	 * on later). */
	int (*run)(vd_queue *q, vd_queue_item *it, void *arg);
	/* The loop thread: the item is the owner's again. */
	void (*done)(vd_queue_item *it, void *arg);
	/* An item never run or never handed back, once stopping. */
	void (*discard)(vd_queue_item *it, void *arg);
	/* The loop thread: the queue is gone, arg may go too. May be NULL. */
	void (*closed)(void *arg);
} vd_queue_ops;

/* threads that take anything, and reserved ones beside them for urgent
 * items. 0, or -errno when no thread could start (nothing to free then:
 * what was opened closes on the loop, without calling closed). */
int vd_queue_new(uv_loop_t *loop, unsigned threads, unsigned reserved,
    const vd_queue_ops *ops, void *arg, vd_queue **out);
/* Finished items go by the loop's turn: none handed over in a turn already
 * busy for VD_TURN_BUDGET_MS (vd_turn_defer). Loop thread. */
void vd_queue_pace(vd_queue *q, const vd_turn *turn);
/* 0, or -EAGAIN when max items already wait (2 * max for an urgent one);
 * the item stays the caller's then. */
int vd_queue_submit(vd_queue *q, vd_queue_item *it, unsigned max);
/* Take back an item still waiting in the non-urgent lane that never ran:
 * 0 (it is the caller's again), or -EBUSY when it runs or ran already. */
int vd_queue_remove(vd_queue *q, vd_queue_item *it);
/* Move an item to the urgent lane, waiting or running (it then goes back
 * there when it yields). The loop thread, which submitted it. */
void vd_queue_promote(vd_queue *q, vd_queue_item *it);
/* A worker thread running it: would another waiting item run before it,
 * were it to yield now at rank? Then it should. */
int vd_queue_ahead(vd_queue *q, const vd_queue_item *it, uint64_t rank);
/* Whether a goes before b (same lane or not): the queue's order, for
 * what decides when to yield. Pure; no lock. */
int vd_queue_before(const vd_queue_item *a, const vd_queue_item *b);
unsigned vd_queue_queued(vd_queue *q);
/* Items running, on any thread. */
unsigned vd_queue_busy(vd_queue *q);
/* Threads that take anything (the reserved ones are not counted). */
unsigned vd_queue_threads(vd_queue *q);
/* Of those, threads not running an item, as many as there are cores no
 * item or task is using: what tasks posted now would run on. */
unsigned vd_queue_idle(vd_queue *q);
/* Set once the grace of a stop is over: running items should give up. */
int vd_queue_cancelled(const vd_queue *q);
/* Stop without blocking the loop: discard waiting items, let running
 * ones finish for up to grace_ms (a timer) and cancel them then; once
 * every thread has left, join them on libuv's thread pool and close the
 * queue's handles, then call closed. The loop must run on (the handles
 * keep it alive); finished items are discarded, never handed to done,
 * from this call on. */
void vd_queue_stop(vd_queue *q, unsigned grace_ms);

/* ---- tasks ------------------------------------------------------------ */

typedef struct vd_task vd_task;
typedef struct vd_taskset vd_taskset;

/* Embedded in the owner's piece of work. */
struct vd_task {
	vd_task *next;
	vd_taskset *set;
	uint64_t cost;             /* in the owner's unit (bytes, say) */
	int dropped;               /* given up undone: cancelled, or not helped */
};

/* The tasks one item posts and waits for. Counters are the queue's,
 * under its mutex. */
struct vd_taskset {
	/* Any thread, no lock held: works on t alone. */
	void (*run)(vd_task *t);
	/* Under the queue's mutex: t's result into the set, so that results
	 * from several threads are combined in one place. */
	void (*fold)(vd_task *t);
	size_t pending;            /* posted, not yet folded */
	size_t unclaimed;          /* posted, not yet taken by a thread */
	uint64_t unclaimed_cost;
};

/* Queue the tasks linked from first (through next) for idle workers,
 * ahead of any posted before. */
void vd_queue_post(vd_queue *q, vd_taskset *set, vd_task *first);
/* How much of set no thread has taken yet. */
void vd_queue_unclaimed(vd_queue *q, const vd_taskset *set, size_t *n, uint64_t *cost);
/* Run set's tasks no thread has taken (help; else drop them), then wait
 * for the ones others took. Every task is folded when it returns. */
void vd_queue_finish(vd_queue *q, vd_taskset *set, int help);

#endif

#ifndef VD_TURN_H
#define VD_TURN_H

/* The loop's turn under way: how long it has been busy (running
 * callbacks, not waiting in poll) since the last prepare phase. Work done
 * in slices asks before each slice, so that a turn is not the sum of every
 * slice that happens to be ready in it: past VD_TURN_BUDGET_MS, the next
 * slice waits for a later turn. Loop thread only. */

#include <stdint.h>

#include <uv.h>

typedef struct vd_turn {
	uv_loop_t *loop;            /* configured with UV_METRICS_IDLE_TIME */
	uint64_t start;             /* uv_hrtime() at the last mark */
	uint64_t idle;              /* the loop's idle time at the last mark */
} vd_turn;

void vd_turn_init(vd_turn *t, uv_loop_t *loop);
/* A prepare callback: the turn ends, the next one starts. Returns the
 * busy nanoseconds of the turn that ended. */
uint64_t vd_turn_mark(vd_turn *t);
uint64_t vd_turn_busy(const vd_turn *t);

/* Whether a slice waits for a later turn, the turn busy for busy_ns so
 * far. A slice put off once runs in the next turn whatever that turn
 * spent before it: sliced work does not starve behind a steady stream of
 * requests. *put_off is the slice's own, 0 at first. Pure. */
int vd_turn_put_off(uint64_t busy_ns, unsigned *put_off);
/* The same, the turn's busy time read now; t may be NULL (never). */
int vd_turn_defer(const vd_turn *t, unsigned *put_off);

#endif

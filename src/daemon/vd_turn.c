#include "config.h"

#include "vd_limits.h"
#include "vd_turn.h"
#include "vd_util.h"

void vd_turn_init(vd_turn *t, uv_loop_t *loop)
{
	t->loop = loop;
	t->start = uv_hrtime();
	t->idle = uv_metrics_idle_time(loop);
}

/* Both clocks are monotonic, but libuv reads the idle time with its own
 * calls: a difference that comes out negative is a turn of no busy time,
 * not a wrapped one. */
uint64_t vd_turn_busy(const vd_turn *t)
{
	uint64_t now = uv_hrtime(), idle = uv_metrics_idle_time(t->loop);

	return vd_ns_between(vd_ns_between(t->idle, idle), vd_ns_between(t->start, now));
}

uint64_t vd_turn_mark(vd_turn *t)
{
	uint64_t busy = vd_turn_busy(t);

	t->start = uv_hrtime();
	t->idle = uv_metrics_idle_time(t->loop);
	return busy;
}

int vd_turn_put_off(uint64_t busy_ns, unsigned *put_off)
{
	if (busy_ns < VD_TURN_BUDGET_MS * 1000000ull || *put_off) {
		*put_off = 0;
		return 0;
	}
	*put_off = 1;
	return 1;
}

int vd_turn_defer(const vd_turn *t, unsigned *put_off)
{
	return t != NULL && vd_turn_put_off(vd_turn_busy(t), put_off);
}

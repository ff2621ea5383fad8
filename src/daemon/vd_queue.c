#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "vd_limits.h"
#include "vd_log.h"
#include "vd_queue.h"
#include "vd_turn.h"

struct vd_queue {
	uv_loop_t *loop;
	uv_async_t async;
	pthread_mutex_t mu;
	pthread_cond_t cv;         /* an item or a task arrived, or stopping */
	pthread_cond_t task_cv;    /* a task was folded */
	uv_timer_t grace;          /* stopping: when running items are cancelled */
	uv_work_t reap;            /* stopping: joins the threads off the loop */
	int handles_open;
	pthread_t *threads;
	unsigned nthreads;         /* grows under mu as threads start */
	unsigned reserved;         /* of them, taking urgent items only */
	unsigned started;          /* threads that chose their role */
	unsigned shared_busy;      /* items running on threads that take anything */
	unsigned exited;           /* stopping: threads out of their loop */
	int reaping;
	vd_queue_item *urgent_head, *urgent_tail;
	vd_queue_item *head, *tail;
	vd_queue_item *done_head, *done_tail;
	vd_task *task_head;
	unsigned queued, busy;
	unsigned cpus;             /* the process may run on */
	unsigned tasks_busy;       /* tasks running on threads of their own */
	uint64_t seq;              /* items inserted so far */
	int stopping;
	atomic_int cancel;          /* running items give up */
	vd_queue_ops ops;
	void *arg;
	const vd_turn *turn;       /* NULL: finished items are handed over at once */
	unsigned put_off;          /* vd_turn_defer */
};

/* ---- lanes (q->mu held) ----------------------------------------------- */

static void append(vd_queue_item **head, vd_queue_item **tail, vd_queue_item *it)
{
	it->next = NULL;
	if (*tail)
		(*tail)->next = it;
	else
		*head = it;
	*tail = it;
}

int vd_queue_before(const vd_queue_item *a, const vd_queue_item *b)
{
	if (a->urgent != b->urgent)
		return a->urgent;
	if (a->rank != b->rank)
		return a->rank < b->rank;
	return a->seq < b->seq;
}

/* Into its lane, behind every item that goes before it; counted. */
static void insert(vd_queue *q, vd_queue_item *it)
{
	vd_queue_item **head = it->urgent ? &q->urgent_head : &q->head;
	vd_queue_item **tail = it->urgent ? &q->urgent_tail : &q->tail;
	vd_queue_item **pp;

	it->seq = ++q->seq;
	q->queued++;
	/* Most items come new, behind the rest: no walk then. */
	if (*tail == NULL || !vd_queue_before(it, *tail)) {
		append(head, tail, it);
		return;
	}
	for (pp = head; vd_queue_before(*pp, it); pp = &(*pp)->next)
		;
	it->next = *pp;
	*pp = it;
}

/* Out of a lane, if it is there: 1 when it was (and is uncounted). */
static int unlink_item(vd_queue *q, vd_queue_item **head, vd_queue_item **tail,
    vd_queue_item *it)
{
	vd_queue_item **pp, *prev = NULL;

	for (pp = head; *pp != NULL; prev = *pp, pp = &(*pp)->next) {
		if (*pp != it)
			continue;
		*pp = it->next;
		if (*tail == it)
			*tail = prev;
		it->next = NULL;
		q->queued--;
		return 1;
	}
	return 0;
}

static vd_queue_item *pop(vd_queue *q, int urgent_only)
{
	vd_queue_item *it = q->urgent_head;

	if (it != NULL) {
		if ((q->urgent_head = it->next) == NULL)
			q->urgent_tail = NULL;
	} else if (!urgent_only && (it = q->head) != NULL) {
		if ((q->head = it->next) == NULL)
			q->tail = NULL;
	}
	if (it != NULL) {
		it->next = NULL;
		it->started = 1;
		q->queued--;
	}
	return it;
}

/* ---- tasks (q->mu held where noted) ------------------------------------- */

/* q->mu held: the first task of only (any set when NULL). */
static vd_task *pop_task(vd_queue *q, const vd_taskset *only)
{
	vd_task **pp, *t;

	for (pp = &q->task_head; (t = *pp) != NULL; pp = &t->next) {
		if (only == NULL || t->set == only) {
			*pp = t->next;
			t->next = NULL;
			t->set->unclaimed--;
			t->set->unclaimed_cost -= t->cost;
			return t;
		}
	}
	return NULL;
}

/* q->mu held: a core no item or task is using. A task splits an item's
 * work off to run beside it: on a core of its own it saves time, on a core
 * shared with the item (with any item) it only slows that one down. */
static int core_to_spare(const vd_queue *q)
{
	return q->busy + q->tasks_busy < q->cpus;
}

/* q->mu held: a task is done; wake whoever waits for its set. */
static void task_done(vd_queue *q, vd_task *t)
{
	t->set->fold(t);
	t->set->pending--;
	pthread_cond_broadcast(&q->task_cv);
}

void vd_queue_post(vd_queue *q, vd_taskset *set, vd_task *first)
{
	vd_task *t, *last = NULL;
	size_t n = 0;
	uint64_t cost = 0;

	for (t = first; t != NULL; t = t->next) {
		t->set = set;
		n++;
		cost += t->cost;
		last = t;
	}
	pthread_mutex_lock(&q->mu);
	set->pending = set->unclaimed = n;
	set->unclaimed_cost = cost;
	if (last != NULL) {
		last->next = q->task_head;
		q->task_head = first;
	}
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

void vd_queue_unclaimed(vd_queue *q, const vd_taskset *set, size_t *n, uint64_t *cost)
{
	pthread_mutex_lock(&q->mu);
	*n = set->unclaimed;
	*cost = set->unclaimed_cost;
	pthread_mutex_unlock(&q->mu);
}

void vd_queue_finish(vd_queue *q, vd_taskset *set, int help)
{
	vd_task *t;

	pthread_mutex_lock(&q->mu);
	while ((t = pop_task(q, set)) != NULL) {
		if (!help || q->cancel) {
			t->dropped = 1;
			task_done(q, t);
			continue;
		}
		pthread_mutex_unlock(&q->mu);
		set->run(t);
		pthread_mutex_lock(&q->mu);
		task_done(q, t);
	}
	while (set->pending > 0)
		pthread_cond_wait(&q->task_cv, &q->mu);
	pthread_mutex_unlock(&q->mu);
}

/* ---- workers ------------------------------------------------------------ */

/* Queued work is throughput work; answering clients is latency work.
 * Worker threads yield the CPU to the event loop thread. A system-call
 * filter that forbids this (a unit without setpriority) would leave them
 * contending with the loop at its priority: say so, once. */
static void lower_priority(const vd_queue *q)
{
	static atomic_flag warned = ATOMIC_FLAG_INIT;
	struct sched_param sp = { 0 };
	const char *what = "pthread_setschedparam(SCHED_BATCH)";
	int err;

	err = pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), VD_WORKER_NICE) < 0) {
		err = errno;
		what = "setpriority";
	}
	if (err != 0 && !atomic_flag_test_and_set(&warned))
		log_warn("%s threads keep the event loop's priority: %s failed: %s",
		    q->ops.name, what, strerror(err));
}

/* q->mu held on entry and return. */
static void run_item(vd_queue *q, vd_queue_item *it, int reserved)
{
	int again;

	q->busy++;
	q->shared_busy += !reserved;
	pthread_mutex_unlock(&q->mu);
	again = q->ops.run(q, it, q->arg);
	pthread_mutex_lock(&q->mu);
	q->busy--;
	q->shared_busy -= !reserved;
	if (q->task_head != NULL)
		pthread_cond_broadcast(&q->cv);   /* a core for a waiting task */
	/* Yielded: back in its lane, past the bound (it was admitted once).
	 * Stopping, it goes to the loop, which discards it. */
	if (again == VD_QUEUE_AGAIN && !q->stopping) {
		insert(q, it);
		pthread_cond_broadcast(&q->cv);
		return;
	}
	append(&q->done_head, &q->done_tail, it);
	uv_async_send(&q->async);
}

static void *worker(void *arg)
{
	vd_queue *q = arg;
	vd_queue_item *it;

	int reserved;

	lower_priority(q);
	pthread_mutex_lock(&q->mu);
	reserved = q->started++ < q->reserved;
	for (;;) {
		vd_task *t = NULL;
		/* Items first; tasks only when no item waits, and never on a
		 * reserved thread (a task may take as long as an item). */
		while (!q->stopping && (it = pop(q, reserved)) == NULL &&
		    (reserved || !core_to_spare(q) || (t = pop_task(q, NULL)) == NULL))
			pthread_cond_wait(&q->cv, &q->mu);
		if (q->stopping)
			break;
		if (it != NULL) {
			run_item(q, it, reserved);
			continue;
		}
		q->tasks_busy++;
		pthread_mutex_unlock(&q->mu);
		t->set->run(t);
		pthread_mutex_lock(&q->mu);
		q->tasks_busy--;
		task_done(q, t);
	}
	/* Stopping: the last thread out wakes the loop, which joins them all. */
	q->exited++;
	uv_async_send(&q->async);
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

/* ---- the loop side ------------------------------------------------------ */

static void discard_list(vd_queue *q, vd_queue_item *it)
{
	vd_queue_item *next;

	for (; it != NULL; it = next) {
		next = it->next;
		it->next = NULL;
		q->ops.discard(it, q->arg);
	}
}

static void on_closed(uv_handle_t *h)
{
	vd_queue *q = h->data;

	if (--q->handles_open > 0)
		return;
	pthread_mutex_destroy(&q->mu);
	pthread_cond_destroy(&q->cv);
	pthread_cond_destroy(&q->task_cv);
	if (q->ops.closed != NULL)
		q->ops.closed(q->arg);
	free(q->threads);
	free(q);
}

/* libuv's thread pool: every thread has left its loop, so the joins are
 * short; but a worker at nice 10 may wait long for the CPU to return, and
 * the event loop must not wait with it. */
static void join_threads(uv_work_t *w)
{
	vd_queue *q = w->data;
	unsigned i;

	for (i = 0; i < q->nthreads; i++)
		pthread_join(q->threads[i], NULL);
}

static void on_joined(uv_work_t *w, int status)
{
	vd_queue *q = w->data;
	vd_queue_item *done = q->done_head;

	(void)status;
	q->done_head = q->done_tail = NULL;
	discard_list(q, done);
	uv_close((uv_handle_t *)&q->grace, on_closed);
	uv_close((uv_handle_t *)&q->async, on_closed);
}

/* Loop thread, stopping, every thread out of its loop. */
static void reap(vd_queue *q)
{
	if (q->reaping)
		return;
	q->reaping = 1;
	uv_timer_stop(&q->grace);
	q->reap.data = q;
	uv_queue_work(q->loop, &q->reap, join_threads, on_joined);
}

/* Loop thread: hand finished items to the owner, VD_QUEUE_DONE_SLICE a
 * turn, none in a turn already busy for its budget: a burst of small items
 * finished together (the first pass over a store of many thousand rounds)
 * is not one long turn; the rest wake the next turn. */
static void on_async(uv_async_t *h)
{
	vd_queue *q = h->data;
	vd_queue_item *it, *next, *last = NULL;
	size_t n = 0;
	int all_out, more;

	if (!q->stopping && vd_turn_defer(q->turn, &q->put_off)) {
		uv_async_send(&q->async);
		return;
	}
	pthread_mutex_lock(&q->mu);
	it = q->done_head;
	for (next = it; next != NULL && n < VD_QUEUE_DONE_SLICE; n++) {
		last = next;
		next = next->next;
	}
	q->done_head = next;
	if (next == NULL)
		q->done_tail = NULL;
	if (last != NULL)
		last->next = NULL;
	more = next != NULL;
	all_out = !more && q->stopping && q->exited == q->nthreads;
	pthread_mutex_unlock(&q->mu);
	for (; it != NULL; it = next) {
		next = it->next;
		it->next = NULL;
		if (q->stopping)
			q->ops.discard(it, q->arg);
		else
			q->ops.done(it, q->arg);
	}
	if (more)
		uv_async_send(&q->async);
	if (all_out)
		reap(q);
}

/* The grace is over: running items give up at their next step. */
static void on_grace(uv_timer_t *t)
{
	vd_queue *q = t->data;

	q->cancel = 1;
}

/* Signals belong to the loop thread; SIGBUS is synchronous and stays. */
static int start_threads(vd_queue *q, unsigned threads)
{
	sigset_t all, old;
	unsigned i;
	int rc = 0;

	sigfillset(&all);
	sigdelset(&all, SIGBUS);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (i = 0; i < threads; i++) {
		if ((rc = pthread_create(&q->threads[i], NULL, worker, q)) != 0)
			break;
		/* Under the mutex: the threads already running read it. */
		pthread_mutex_lock(&q->mu);
		q->nthreads++;
		pthread_mutex_unlock(&q->mu);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

static unsigned usable_cpus(void)
{
	cpu_set_t set;
	long n;

	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return (unsigned)CPU_COUNT(&set);
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

void vd_queue_pace(vd_queue *q, const vd_turn *turn)
{
	q->turn = turn;
}

int vd_queue_new(uv_loop_t *loop, unsigned threads, unsigned reserved,
    const vd_queue_ops *ops, void *arg, vd_queue **out)
{
	vd_queue *q = calloc(1, sizeof(*q));
	int rc;

	if (q == NULL)
		return -ENOMEM;
	q->loop = loop;
	q->ops = *ops;
	q->arg = arg;
	q->reserved = reserved;
	q->cpus = usable_cpus();
	threads += reserved;
	if ((q->threads = calloc(threads, sizeof(*q->threads))) == NULL)
		goto fail_alloc;
	if (uv_async_init(loop, &q->async, on_async) < 0)
		goto fail_alloc;
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cv, NULL);
	pthread_cond_init(&q->task_cv, NULL);
	uv_timer_init(loop, &q->grace);
	q->async.data = q->grace.data = q;
	q->handles_open = 2;
	rc = start_threads(q, threads);
	if (q->nthreads <= reserved) {
		q->ops.closed = NULL;   /* the caller hears of it now, not later */
		vd_queue_stop(q, 0);
		return rc ? -rc : -EINVAL;
	}
	*out = q;
	return 0;

fail_alloc:
	free(q->threads);
	free(q);
	return -ENOMEM;
}

int vd_queue_submit(vd_queue *q, vd_queue_item *it, unsigned max)
{
	pthread_mutex_lock(&q->mu);
	/* Urgent items may exceed the bound a little: they are few and
	 * someone waits on them; the rest is what the bound sheds. */
	if ((q->queued >= max && !it->urgent) || q->queued >= max * 2) {
		pthread_mutex_unlock(&q->mu);
		return -EAGAIN;
	}
	it->started = 0;
	insert(q, it);
	/* All: the one a signal would wake may be a reserved thread, which
	 * leaves an item of the other lane where it is. */
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	return 0;
}

int vd_queue_remove(vd_queue *q, vd_queue_item *it)
{
	int rc = -EBUSY;

	pthread_mutex_lock(&q->mu);
	if (!it->started && unlink_item(q, &q->head, &q->tail, it))
		rc = 0;
	pthread_mutex_unlock(&q->mu);
	return rc;
}

void vd_queue_promote(vd_queue *q, vd_queue_item *it)
{
	pthread_mutex_lock(&q->mu);
	if (!it->urgent) {
		int waiting = unlink_item(q, &q->head, &q->tail, it);
		it->urgent = 1;
		if (waiting) {
			insert(q, it);
			pthread_cond_broadcast(&q->cv);
		}
	}
	pthread_mutex_unlock(&q->mu);
}

int vd_queue_ahead(vd_queue *q, const vd_queue_item *it, uint64_t rank)
{
	vd_queue_item me = { 0 };
	int ahead;

	pthread_mutex_lock(&q->mu);
	me.urgent = it->urgent;
	me.rank = rank;
	me.seq = q->seq + 1;       /* were it inserted now */
	ahead = (q->urgent_head != NULL && vd_queue_before(q->urgent_head, &me)) ||
	    (q->head != NULL && vd_queue_before(q->head, &me));
	pthread_mutex_unlock(&q->mu);
	return ahead;
}

static unsigned read_locked(vd_queue *q, const unsigned *field)
{
	unsigned n;

	pthread_mutex_lock(&q->mu);
	n = *field;
	pthread_mutex_unlock(&q->mu);
	return n;
}

unsigned vd_queue_queued(vd_queue *q)
{
	return read_locked(q, &q->queued);
}

unsigned vd_queue_busy(vd_queue *q)
{
	return read_locked(q, &q->busy);
}

static unsigned shared_threads(const vd_queue *q)
{
	return q->nthreads > q->reserved ? q->nthreads - q->reserved : 0;
}

unsigned vd_queue_threads(vd_queue *q)
{
	unsigned n;

	pthread_mutex_lock(&q->mu);
	n = shared_threads(q);
	pthread_mutex_unlock(&q->mu);
	return n;
}

unsigned vd_queue_idle(vd_queue *q)
{
	unsigned n;

	pthread_mutex_lock(&q->mu);
	n = shared_threads(q) - q->shared_busy;
	if (!core_to_spare(q))
		n = 0;
	else if (n > q->cpus - q->busy - q->tasks_busy)
		n = q->cpus - q->busy - q->tasks_busy;
	pthread_mutex_unlock(&q->mu);
	return n;
}

int vd_queue_cancelled(const vd_queue *q)
{
	return q->cancel;
}

/* Nothing here waits: idle threads leave at once, running items get
 * grace_ms (the timer) before they are cancelled, and the last thread out
 * wakes on_async, which has them joined off the loop. */
void vd_queue_stop(vd_queue *q, unsigned grace_ms)
{
	vd_queue_item *urgent, *rest;
	int all_out;

	pthread_mutex_lock(&q->mu);
	q->stopping = 1;
	urgent = q->urgent_head;
	rest = q->head;
	q->urgent_head = q->urgent_tail = q->head = q->tail = NULL;
	q->queued = 0;
	pthread_cond_broadcast(&q->cv);
	all_out = q->exited == q->nthreads;
	pthread_mutex_unlock(&q->mu);
	discard_list(q, urgent);
	discard_list(q, rest);
	if (grace_ms == 0)
		q->cancel = 1;
	else
		uv_timer_start(&q->grace, on_grace, grace_ms, 0);
	if (all_out)
		reap(q);
}

#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vd_limits.h"
#include "vd_reader.h"

/* Two threads fill the jobs: the reader's own, and the waiter (the hash)
 * whenever what it needs has not been taken yet, so that the hash never
 * waits for a thread the scheduler does not run. Pieces are taken in
 * order from one cursor; each thread has at most one in flight. */
enum { READER, WAITER, NSIDES };

typedef struct piece {
	int busy;
	size_t job, start;
} piece;

struct vd_reader {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	vd_read_job *jobs;          /* have: bytes taken, under mu */
	uint64_t *pos;              /* where each job starts in the order of reading */
	size_t n;
	size_t cur;                 /* the first job not wholly taken, under mu */
	uint64_t need;              /* how far the waiter has asked, under mu */
	piece flight[NSIDES];       /* under mu */
	int stop, err;              /* under mu; err: errno, 0 for a short file */
	size_t failed;              /* the first job that failed; n when none did */
	size_t failed_at;           /* where in it the failed piece began */
	size_t page;
};

/* Faulting in the pages of a fresh buffer costs as much as hashing them
 * on this kind of machine; asked for a piece at once, the kernel does it
 * without a trap per page. Advice only: a kernel without it faults them
 * in under pread as before. */
static void populate(const vd_reader *r, uint8_t *p, size_t n)
{
#ifdef MADV_POPULATE_WRITE
	uintptr_t a = ((uintptr_t)p + r->page - 1) & ~(uintptr_t)(r->page - 1);
	uintptr_t b = ((uintptr_t)p + n) & ~(uintptr_t)(r->page - 1);

	if (b > a)
		madvise((void *)a, (size_t)(b - a), MADV_POPULATE_WRITE);
#else
	(void)r;
	(void)p;
	(void)n;
#endif
}

/* len bytes of job j from start on into its buffer: 0, or errno (-1 for a
 * file that ended early). */
static int read_piece(const vd_reader *r, const vd_read_job *j, size_t start, size_t len)
{
	size_t off = 0;
	ssize_t got;

	populate(r, j->dst + start, len);
	while (off < len) {
		got = pread(j->fd, j->dst + start + off, len - off, (off_t)(j->file_off + start + off));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got == 0 ? -1 : errno;
		off += (size_t)got;
	}
	return 0;
}

/* The bytes of job i that have arrived: what was taken, less what is
 * still in flight or failed. Under mu. */
static size_t arrived(const vd_reader *r, size_t i)
{
	size_t have = r->jobs[i].have;
	int s;

	if (i == r->failed && r->failed_at < have)
		have = r->failed_at;
	for (s = 0; s < NSIDES; s++)
		if (r->flight[s].busy && r->flight[s].job == i && r->flight[s].start < have)
			have = r->flight[s].start;
	return have;
}

static uint64_t cursor_pos(const vd_reader *r)
{
	return r->pos[r->cur] + r->jobs[r->cur].have;
}

/* Take the next piece for side s, read it outside the lock and publish
 * it. Called and returns under mu; 0 when there was none to take. */
static int take_piece(vd_reader *r, int s)
{
	vd_read_job *j;
	size_t len, start;
	int rc;

	if (r->cur == r->n || r->stop || r->failed < r->n)
		return 0;
	j = &r->jobs[r->cur];
	start = j->have;
	len = j->len - start < VD_LOAD_READ_PIECE ? j->len - start : VD_LOAD_READ_PIECE;
	j->have += len;
	r->flight[s] = (piece){ 1, r->cur, start };
	while (r->cur < r->n && r->jobs[r->cur].have == r->jobs[r->cur].len)
		r->cur++;
	pthread_mutex_unlock(&r->mu);
	rc = read_piece(r, j, start, len);
	pthread_mutex_lock(&r->mu);
	r->flight[s].busy = 0;
	if (rc != 0 && (r->failed == r->n || r->flight[s].job < r->failed)) {
		r->failed = r->flight[s].job;
		r->failed_at = start;
		r->err = rc < 0 ? 0 : rc;
	}
	pthread_cond_broadcast(&r->cv);
	return 1;
}

/* The reader keeps at most VD_LOAD_READ_LEAD bytes ahead of the waiter,
 * so that what it copies is still in the shared cache when hashed. */
static void *run(void *arg)
{
	vd_reader *r = arg;

	pthread_mutex_lock(&r->mu);
	while (!r->stop && r->cur < r->n && r->failed == r->n) {
		if (cursor_pos(r) >= r->need + VD_LOAD_READ_LEAD)
			pthread_cond_wait(&r->cv, &r->mu);
		else
			take_piece(r, READER);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* The thread takes no signals: a program linking the library keeps
 * receiving its own on the threads it knows. */
static int start_thread(vd_reader *r)
{
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&r->thread, NULL, run, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

static void free_reader(vd_reader *r)
{
	free(r->pos);
	free(r->jobs);
	free(r);
}

vd_reader *vd_reader_start(const vd_read_job *jobs, size_t n)
{
	vd_reader *r = calloc(1, sizeof(*r));
	long page = sysconf(_SC_PAGESIZE);
	size_t i;

	if (r == NULL || (r->jobs = malloc((n ? n : 1) * sizeof(*jobs))) == NULL ||
	    (r->pos = malloc((n + 1) * sizeof(*r->pos))) == NULL) {
		if (r != NULL)
			free_reader(r);
		return NULL;
	}
	memcpy(r->jobs, jobs, n * sizeof(*jobs));
	r->n = n;
	r->failed = n;
	r->page = page > 0 ? (size_t)page : 4096;
	r->pos[0] = 0;
	for (i = 0; i < n; i++)
		r->pos[i + 1] = r->pos[i] + r->jobs[i].len;
	while (r->cur < n && r->jobs[r->cur].have == r->jobs[r->cur].len)
		r->cur++;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	if (start_thread(r) != 0) {
		pthread_cond_destroy(&r->cv);
		pthread_mutex_destroy(&r->mu);
		free_reader(r);
		return NULL;
	}
	return r;
}

static int in_flight(const vd_reader *r)
{
	return r->flight[READER].busy || r->flight[WAITER].busy;
}

int vd_reader_wait(vd_reader *r, size_t i, size_t want, size_t *failed, int *err)
{
	int rc = -1;

	pthread_mutex_lock(&r->mu);
	if (r->pos[i] + want > r->need) {
		r->need = r->pos[i] + want;
		pthread_cond_broadcast(&r->cv);
	}
	for (;;) {
		if (arrived(r, i) >= want) {
			rc = 0;
			break;
		}
		if (take_piece(r, WAITER))
			continue;
		if (!in_flight(r))
			break;
		pthread_cond_wait(&r->cv, &r->mu);
	}
	*failed = r->failed;
	*err = r->err;
	pthread_mutex_unlock(&r->mu);
	return rc;
}

void vd_reader_stop(vd_reader *r)
{
	if (r == NULL)
		return;
	pthread_mutex_lock(&r->mu);
	r->stop = 1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	pthread_join(r->thread, NULL);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	free_reader(r);
}

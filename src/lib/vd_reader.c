#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vd_limits.h"
#include "vd_reader.h"

struct vd_reader {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	vd_read_job *jobs;          /* have: what the waiter may read, under mu */
	size_t n;
	int done, stop, err;        /* under mu; err: errno, 0 for a short file */
	size_t failed;              /* the job that failed; n when none did */
};

/* The next piece of job j, or -1 (errno, 0 at end of file). */
static ssize_t read_piece(const vd_read_job *j)
{
	size_t want = j->len - j->have < VD_LOAD_READ_PIECE ? j->len - j->have :
	    VD_LOAD_READ_PIECE;
	ssize_t got;

	do
		got = pread(j->fd, j->dst + j->have, want, (off_t)(j->file_off + j->have));
	while (got < 0 && errno == EINTR);
	if (got == 0)
		errno = 0;
	return got > 0 ? got : -1;
}

/* Job i read to its end: 0, or -1 with r->err set. The piece is read
 * outside the lock; only the new length is published under it. */
static int read_job(vd_reader *r, size_t i)
{
	vd_read_job *j = &r->jobs[i];
	size_t have = j->have;
	vd_read_job mine = *j;
	int stop = 0;

	while (have < j->len) {
		if (stop)
			return -1;
		ssize_t got;
		mine.have = have;
		if ((got = read_piece(&mine)) < 0) {
			pthread_mutex_lock(&r->mu);
			r->err = errno;
			r->failed = i;
			pthread_mutex_unlock(&r->mu);
			return -1;
		}
		have += (size_t)got;
		pthread_mutex_lock(&r->mu);
		j->have = have;
		stop = r->stop;
		pthread_cond_broadcast(&r->cv);
		pthread_mutex_unlock(&r->mu);
	}
	return 0;
}

static void *run(void *arg)
{
	vd_reader *r = arg;
	size_t i;

	for (i = 0; i < r->n && read_job(r, i) == 0; i++)
		;
	pthread_mutex_lock(&r->mu);
	r->done = 1;
	pthread_cond_broadcast(&r->cv);
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

vd_reader *vd_reader_start(const vd_read_job *jobs, size_t n)
{
	vd_reader *r = calloc(1, sizeof(*r));

	if (r == NULL || (r->jobs = malloc((n ? n : 1) * sizeof(*jobs))) == NULL) {
		free(r);
		return NULL;
	}
	memcpy(r->jobs, jobs, n * sizeof(*jobs));
	r->n = n;
	r->failed = n;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	if (start_thread(r) != 0) {
		pthread_cond_destroy(&r->cv);
		pthread_mutex_destroy(&r->mu);
		free(r->jobs);
		free(r);
		return NULL;
	}
	return r;
}

int vd_reader_wait(vd_reader *r, size_t i, size_t want, size_t *failed, int *err)
{
	int rc;

	pthread_mutex_lock(&r->mu);
	while (r->jobs[i].have < want && !r->done)
		pthread_cond_wait(&r->cv, &r->mu);
	rc = r->jobs[i].have >= want ? 0 : -1;
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
	pthread_mutex_unlock(&r->mu);
	pthread_join(r->thread, NULL);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	free(r->jobs);
	free(r);
}

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vd_log.h"
#include "vd_pool.h"

struct vd_pool {
	uv_loop_t *loop;
	uv_async_t async;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t *threads;
	unsigned nthreads;
	char *root;
	vd_job *explicit_head, *explicit_tail;
	vd_job *bg_head, *bg_tail;
	vd_job *done_head, *done_tail;
	unsigned queued, busy;
	int stopping;
	atomic_int cancel;          /* running verifications give up */
	vd_pool_done_fn done;
	void *arg;
};

vd_job *vd_job_new(vd_job_kind kind, const char *relpath)
{
	vd_job *j = calloc(1, sizeof(*j));

	if (j == NULL)
		return NULL;
	j->kind = kind;
	if ((j->relpath = strdup(relpath)) == NULL) {
		free(j);
		return NULL;
	}
	return j;
}

void vd_job_free(vd_job *j)
{
	if (j == NULL)
		return;
	vd_hdrinfo_free(&j->hdr);
	free(j->relpath);
	free(j);
}

static double wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct progress_ctx {
	vd_pool *pool;
	vd_job *job;
	double t0;
} progress_ctx;

/* Cancellation and, for scrubs, the read rate. */
static int on_progress(uint64_t done, uint64_t total, void *arg)
{
	progress_ctx *pc = arg;
	double ahead;

	pc->job->hashed = done;
	if (pc->pool->cancel)
		return 1;
	if (pc->job->rate == 0)
		return 0;
	ahead = (double)done / (double)pc->job->rate - (mono_now() - pc->t0);
	while (ahead > 0 && !pc->pool->cancel) {
		double step = ahead > 0.2 ? 0.2 : ahead;
		struct timespec ts = { (time_t)step, (long)((step - (double)(time_t)step) * 1e9) };
		nanosleep(&ts, NULL);
		ahead -= step;
	}
	return pc->pool->cancel ? 1 : 0;
}

static void run_job(vd_pool *p, vd_job *j)
{
	vd_options opt = { 0 };
	progress_ctx pc = { p, j, mono_now() };
	int fd;

	j->started = wall_now();
	/* The root is opened by path each time: a store that was replaced or
	 * remounted is followed. */
	fd = open(p->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		int dfd = vd_open_beneath(fd, j->relpath);
		close(fd);
		fd = dfd;
	} else {
		fd = -errno;
	}
	if (fd < 0) {
		j->verdict.code = fd == -ENOENT ? VD_ARTIFACT_INVALID : VD_IO_ERROR;
		snprintf(j->verdict.detail, sizeof(j->verdict.detail),
		    "cannot open the artifact directory: %s", strerror(-fd));
		j->duration = mono_now() - pc.t0;
		return;
	}
	opt.max_header_len = j->max_header_len;
	opt.progress = on_progress;
	opt.progress_arg = &pc;
	vd_fingerprint_dir(fd, &j->fp_before);
	vd_artifact_verify(fd, &opt, &j->verdict, NULL);
	vd_fingerprint_dir(fd, &j->fp_after);
	vd_hdrinfo_read(fd, &j->hdr);
	close(fd);
	j->duration = mono_now() - pc.t0;
}

static vd_job *pop(vd_pool *p)
{
	vd_job *j = p->explicit_head;

	if (j != NULL) {
		if ((p->explicit_head = j->next) == NULL)
			p->explicit_tail = NULL;
	} else if ((j = p->bg_head) != NULL) {
		if ((p->bg_head = j->next) == NULL)
			p->bg_tail = NULL;
	}
	if (j != NULL) {
		j->next = NULL;
		p->queued--;
	}
	return j;
}

static void *worker(void *arg)
{
	vd_pool *p = arg;
	vd_job *j;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->stopping && (j = pop(p)) == NULL)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->stopping)
			break;
		p->busy++;
		pthread_mutex_unlock(&p->mu);
		run_job(p, j);
		pthread_mutex_lock(&p->mu);
		p->busy--;
		if (p->done_tail)
			p->done_tail->next = j;
		else
			p->done_head = j;
		p->done_tail = j;
		uv_async_send(&p->async);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* Loop thread: hand finished jobs to the owner. */
static void on_async(uv_async_t *h)
{
	vd_pool *p = h->data;
	vd_job *j, *next;

	pthread_mutex_lock(&p->mu);
	j = p->done_head;
	p->done_head = p->done_tail = NULL;
	pthread_mutex_unlock(&p->mu);
	for (; j != NULL; j = next) {
		next = j->next;
		j->next = NULL;
		if (p->stopping)
			vd_job_free(j);
		else
			p->done(j, p->arg);
	}
}

int vd_pool_new(uv_loop_t *loop, unsigned threads, const char *root,
    vd_pool_done_fn done, void *arg, vd_pool **out)
{
	sigset_t all, old;
	vd_pool *p = calloc(1, sizeof(*p));
	unsigned i;
	int rc;

	if (p == NULL)
		return -ENOMEM;
	p->loop = loop;
	p->root = strdup(root);
	p->done = done;
	p->arg = arg;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->threads = calloc(threads, sizeof(*p->threads));
	if (p->threads == NULL || p->root == NULL ||
	    (rc = uv_async_init(loop, &p->async, on_async)) < 0) {
		free(p->threads);
		free(p->root);
		free(p);
		return -ENOMEM;
	}
	p->async.data = p;
	/* Signals belong to the loop thread; SIGBUS is synchronous and stays. */
	sigfillset(&all);
	sigdelset(&all, SIGBUS);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (i = 0; i < threads; i++) {
		if ((rc = pthread_create(&p->threads[i], NULL, worker, p)) != 0)
			break;
		p->nthreads++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (p->nthreads == 0) {
		vd_pool_stop(p, 0);
		return -rc;
	}
	*out = p;
	return 0;
}

int vd_pool_submit(vd_pool *p, vd_job *j, unsigned queue_max)
{
	vd_job **head, **tail;

	pthread_mutex_lock(&p->mu);
	/* Explicit requests may exceed the bound a little: they are few and
	 * someone waits on them; background work is what the bound sheds. */
	if (p->queued >= queue_max && j->kind != VD_JOB_EXPLICIT) {
		pthread_mutex_unlock(&p->mu);
		return -EAGAIN;
	}
	if (p->queued >= queue_max * 2) {
		pthread_mutex_unlock(&p->mu);
		return -EAGAIN;
	}
	head = j->kind == VD_JOB_EXPLICIT ? &p->explicit_head : &p->bg_head;
	tail = j->kind == VD_JOB_EXPLICIT ? &p->explicit_tail : &p->bg_tail;
	j->next = NULL;
	if (*tail)
		(*tail)->next = j;
	else
		*head = j;
	*tail = j;
	p->queued++;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

unsigned vd_pool_queued(vd_pool *p)
{
	unsigned n;

	pthread_mutex_lock(&p->mu);
	n = p->queued;
	pthread_mutex_unlock(&p->mu);
	return n;
}

unsigned vd_pool_busy(vd_pool *p)
{
	unsigned n;

	pthread_mutex_lock(&p->mu);
	n = p->busy;
	pthread_mutex_unlock(&p->mu);
	return n;
}

unsigned vd_pool_threads(vd_pool *p)
{
	return p->nthreads;
}

static void free_list(vd_job *j)
{
	vd_job *next;

	for (; j != NULL; j = next) {
		next = j->next;
		vd_job_free(j);
	}
}

static void on_closed(uv_handle_t *h)
{
	vd_pool *p = h->data;

	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p->threads);
	free(p->root);
	free(p);
}

void vd_pool_stop(vd_pool *p, unsigned grace_ms)
{
	unsigned i, waited = 0;

	pthread_mutex_lock(&p->mu);
	p->stopping = 1;
	free_list(p->explicit_head);
	free_list(p->bg_head);
	p->explicit_head = p->explicit_tail = p->bg_head = p->bg_tail = NULL;
	p->queued = 0;
	pthread_cond_broadcast(&p->cv);
	while (p->busy > 0 && waited < grace_ms) {
		pthread_mutex_unlock(&p->mu);
		usleep(10000);
		waited += 10;
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	p->cancel = 1;
	for (i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	free_list(p->done_head);
	p->done_head = p->done_tail = NULL;
	uv_close((uv_handle_t *)&p->async, on_closed);
}

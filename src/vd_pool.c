#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vd_log.h"
#include "vd_pool.h"
#include "vd_util.h"

/* Chunk work: digests taken alongside a canonical pass, or compared in a
 * re-check. Items are queued for idle workers; the job that queued them
 * works on its own batch too and waits for it. */
typedef struct chunk_batch chunk_batch;
typedef struct chunk_item {
	struct chunk_item *next;
	chunk_batch *batch;
	const uint8_t *p;
	size_t n;
	uint8_t *out;              /* where the digest goes */
	const uint8_t *expect;     /* re-check: what it must be */
	size_t file, chunk;
	int claimed;
	/* The item's own result, written by the one thread digesting it and
	 * folded into the batch under the pool's mutex. */
	int failed, differs;
} chunk_item;

/* Results are folded in under the pool's mutex (or by the one thread
 * that owns a batch never queued); read once pending is 0. */
struct chunk_batch {
	chunk_item *items;
	size_t count, pending, claimed_by_others;
	int failed;                /* a file shrank under a digest */
	int mismatch;
	size_t mm_file, mm_chunk;  /* the first chunk that differs */
};

struct vd_pool {
	uv_loop_t *loop;
	uv_async_t async;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uv_timer_t grace;          /* stopping: when running jobs are cancelled */
	uv_work_t reap;            /* stopping: joins the threads off the loop */
	int handles_open;
	pthread_t *threads;
	unsigned nthreads;         /* grows under mu as threads start */
	unsigned exited;           /* stopping: threads out of their loop */
	int reaping;
	char *root;
	vd_job *explicit_head, *explicit_tail;
	vd_job *bg_head, *bg_tail;
	vd_job *done_head, *done_tail;
	chunk_item *chunk_head;
	pthread_cond_t chunk_cv;   /* a batch item finished */
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
	vd_chunkmap_free(j->recheck);
	vd_chunkmap_free(j->chunks);
	vd_hdrinfo_free(&j->hdr);
	free(j->relpath);
	free(j);
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

/* ---- chunk work (caller holds p->mu where noted) -------------------- */

/* Digest one item into the item alone: several threads work on a batch. */
static void do_item(chunk_item *it)
{
	uint8_t d[32];

	if (vd_digest_range(it->p, it->n, it->expect ? d : it->out) < 0)
		it->failed = 1;
	else if (it->expect && memcmp(d, it->expect, 32) != 0)
		it->differs = 1;
}

/* p->mu held, or b never queued: the first differing chunk in file order
 * is the one reported, whichever thread found it first. */
static void fold_item(chunk_batch *b, const chunk_item *it)
{
	if (it->failed)
		b->failed = 1;
	if (it->differs && (!b->mismatch || it->file < b->mm_file ||
	    (it->file == b->mm_file && it->chunk < b->mm_chunk))) {
		b->mismatch = 1;
		b->mm_file = it->file;
		b->mm_chunk = it->chunk;
	}
}

/* p->mu held. */
static chunk_item *pop_chunk(vd_pool *p, const chunk_batch *only)
{
	chunk_item **pp, *it;

	for (pp = &p->chunk_head; (it = *pp) != NULL; pp = &it->next) {
		if (only == NULL || it->batch == only) {
			*pp = it->next;
			it->next = NULL;
			it->claimed = 1;
			return it;
		}
	}
	return NULL;
}

/* p->mu held: an item is done; wake whoever waits for its batch. */
static void item_done(vd_pool *p, chunk_item *it)
{
	fold_item(it->batch, it);
	it->batch->pending--;
	pthread_cond_broadcast(&p->chunk_cv);
}

static void queue_batch(vd_pool *p, chunk_batch *b)
{
	size_t i;

	pthread_mutex_lock(&p->mu);
	for (i = b->count; i > 0; i--) {
		b->items[i - 1].next = p->chunk_head;
		p->chunk_head = &b->items[i - 1];
	}
	b->pending = b->count;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

/* Work on b's unclaimed items, then wait for the ones others took. */
static void finish_batch(vd_pool *p, chunk_batch *b, int help)
{
	chunk_item *it;

	pthread_mutex_lock(&p->mu);
	while ((it = pop_chunk(p, b)) != NULL) {
		if (!help || p->cancel) {
			it->failed = 1;     /* not digested: the batch is incomplete */
			item_done(p, it);
			continue;
		}
		pthread_mutex_unlock(&p->mu);
		do_item(it);
		pthread_mutex_lock(&p->mu);
		item_done(p, it);
	}
	while (b->pending > 0)
		pthread_cond_wait(&p->chunk_cv, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };

	nanosleep(&ts, NULL);
}

/* One item after another on this thread, at the job's rate. */
static void throttled_batch(vd_pool *p, vd_job *j, chunk_batch *b)
{
	double t0 = mono_now(), ahead;
	uint64_t done = 0;
	size_t i;

	for (i = 0; i < b->count && !p->cancel; i++) {
		do_item(&b->items[i]);
		fold_item(b, &b->items[i]);
		done += b->items[i].n;
		ahead = (double)done / (double)j->rate - (mono_now() - t0);
		while (ahead > 0 && !p->cancel) {
			sleep_s(ahead > 0.2 ? 0.2 : ahead);
			ahead -= 0.2;
		}
	}
	if (i < b->count)
		b->failed = 1;
}

static chunk_batch *new_batch(const vd_chunkmap *m, const uint8_t *const *maps, int re)
{
	chunk_batch *b = calloc(1, sizeof(*b));
	size_t f, c, n = 0, k = 0;

	if (b == NULL)
		return NULL;
	for (f = 0; f < m->n_files; f++)
		n += m->files[f].n_chunks;
	if ((b->items = calloc(n ? n : 1, sizeof(*b->items))) == NULL) {
		free(b);
		return NULL;
	}
	for (f = 0; f < m->n_files; f++) {
		for (c = 0; c < m->files[f].n_chunks; c++) {
			uint64_t off = (uint64_t)c * m->chunk_size, left = m->files[f].size - off;
			chunk_item *it = &b->items[k++];
			it->batch = b;
			it->p = maps[f] + off;
			it->n = (size_t)(left < m->chunk_size ? left : m->chunk_size);
			it->out = m->files[f].digests[c];
			it->expect = re ? m->files[f].digests[c] : NULL;
			it->file = f;
			it->chunk = c;
		}
	}
	b->count = n;
	return b;
}

static void free_batch(chunk_batch *b)
{
	if (b != NULL) {
		free(b->items);
		free(b);
	}
}

/* The sink: digests of a canonical pass's chunks, taken by idle workers. */
#define VD_SINK_FINISH_BYTES (64u << 20)   /* the owner digests a remainder this small */
typedef struct sink_ctx {
	vd_pool *pool;
	vd_job *job;
	chunk_batch *batch;
} sink_ctx;

static void sink_start(void *arg, const vd_mapped_file *files, size_t n)
{
	sink_ctx *sc = arg;
	const uint8_t **maps;
	size_t i;
	int spare;

	/* Digests are taken only with a worker to spare: when every worker
	 * verifies, they would cost a verification its core. */
	pthread_mutex_lock(&sc->pool->mu);
	spare = sc->pool->busy < sc->pool->nthreads;
	pthread_mutex_unlock(&sc->pool->mu);
	if (!spare)
		return;
	if ((sc->job->chunks = vd_chunkmap_new(files, n, VD_CHUNK_SIZE)) == NULL)
		return;
	if ((maps = calloc(n ? n : 1, sizeof(*maps))) == NULL)
		return;
	for (i = 0; i < n; i++)
		maps[i] = files[i].map;
	sc->batch = new_batch(sc->job->chunks, maps, 0);
	free(maps);
	if (sc->batch != NULL)
		queue_batch(sc->pool, sc->batch);
}

/* Finish the digests only if idle workers took most of them: with every
 * worker busy the map is skipped rather than slowing verification down;
 * a later scrub takes it. */
static void sink_finish(void *arg, const vd_meta_digests *meta)
{
	sink_ctx *sc = arg;
	chunk_batch *b = sc->batch;
	size_t unclaimed = 0, i;
	uint64_t left = 0;

	if (b == NULL) {
		vd_chunkmap_free(sc->job->chunks);
		sc->job->chunks = NULL;
		return;
	}
	pthread_mutex_lock(&sc->pool->mu);
	for (i = 0; i < b->count; i++) {
		unclaimed += !b->items[i].claimed;
		left += b->items[i].claimed ? 0 : b->items[i].n;
	}
	pthread_mutex_unlock(&sc->pool->mu);
	/* Finish the map when what is left is small, or others did most. */
	finish_batch(sc->pool, b, sc->job->kind != VD_JOB_EXPLICIT &&
	    (unclaimed * 2 <= b->count || left <= VD_SINK_FINISH_BYTES));
	if (b->failed) {
		vd_chunkmap_free(sc->job->chunks);
		sc->job->chunks = NULL;
	} else {
		sc->job->chunks->meta = *meta;
	}
	free_batch(b);
	sc->batch = NULL;
}

/* Map every file of the map; their sizes must not have changed. */
static int map_files(int dirfd, const vd_chunkmap *m, const uint8_t **maps, int *fds,
    char *why, size_t n)
{
	struct stat st;
	vd_err err = { 0 };
	size_t f;

	for (f = 0; f < m->n_files; f++) {
		if (vd_artifact_open_member(dirfd, m->files[f].name, &fds[f], &st, &err) != VD_OK) {
			snprintf(why, n, "%s", err.msg);
			return -1;
		}
		if ((uint64_t)st.st_size != m->files[f].size) {
			snprintf(why, n, "%s changed size from %llu to %lld bytes", m->files[f].name,
			    (unsigned long long)m->files[f].size, (long long)st.st_size);
			return -1;
		}
		if (m->files[f].size > 0) {
			maps[f] = mmap(NULL, (size_t)m->files[f].size, PROT_READ, MAP_SHARED, fds[f], 0);
			if (maps[f] == MAP_FAILED) {
				maps[f] = NULL;
				snprintf(why, n, "cannot map %s", m->files[f].name);
				return -1;
			}
		}
	}
	return 0;
}

static int same_meta(int dirfd, const vd_chunkmap *m, char *why, size_t n)
{
	uint8_t d[32];
	vd_err err = { 0 };
	vd_code rc;

	if (vd_artifact_digest_small(dirfd, "header.json", d, &err) != VD_OK ||
	    memcmp(d, m->meta.header, 32) != 0) {
		snprintf(why, n, "header.json changed");
		return 0;
	}
	rc = vd_artifact_digest_small(dirfd, "weights.index.json", d, &err);
	if ((rc == VD_OK) != (m->meta.has_index != 0) ||
	    (rc == VD_OK && memcmp(d, m->meta.index, 32) != 0)) {
		snprintf(why, n, "weights.index.json changed");
		return 0;
	}
	return 1;
}

/* Compare every chunk with its digest, on all idle workers at once.
 * 1: every byte as verified; 0: changed (j->changed says where). */
static int recheck(vd_pool *p, vd_job *j, int dirfd)
{
	const vd_chunkmap *m = j->recheck;
	const uint8_t **maps = calloc(m->n_files, sizeof(*maps));
	int *fds = malloc(m->n_files * sizeof(*fds)), same = 0;
	chunk_batch *b = NULL;
	size_t f;

	if (maps == NULL || fds == NULL)
		goto out;
	for (f = 0; f < m->n_files; f++)
		fds[f] = -1;
	if (!same_meta(dirfd, m, j->changed, sizeof(j->changed)) ||
	    map_files(dirfd, m, maps, fds, j->changed, sizeof(j->changed)) < 0 ||
	    (b = new_batch(m, maps, 1)) == NULL)
		goto out;
	if (j->rate > 0) {
		throttled_batch(p, j, b);     /* a scrub keeps to scrub_rate */
	} else {
		queue_batch(p, b);
		finish_batch(p, b, 1);
	}
	j->hashed = 0;
	for (f = 0; f < m->n_files; f++)
		j->hashed += m->files[f].size;
	if (b->failed) {
		snprintf(j->changed, sizeof(j->changed), "a weight file shrank during the re-check");
	} else if (b->mismatch) {
		uint64_t a = (uint64_t)b->mm_chunk * m->chunk_size;
		uint64_t e = a + m->chunk_size < m->files[b->mm_file].size ? a + m->chunk_size :
		    m->files[b->mm_file].size;
		snprintf(j->changed, sizeof(j->changed), "%s bytes %llu to %llu changed",
		    m->files[b->mm_file].name, (unsigned long long)a, (unsigned long long)e);
	} else {
		same = 1;
	}
out:
	for (f = 0; maps && fds && f < m->n_files; f++) {
		if (maps[f] != NULL)
			munmap((void *)maps[f], (size_t)m->files[f].size);
		if (fds[f] >= 0)
			close(fds[f]);
	}
	free_batch(b);
	free(maps);
	free(fds);
	return same;
}

static void run_job(vd_pool *p, vd_job *j)
{
	vd_options opt = { 0 };
	progress_ctx pc = { p, j, mono_now() };
	int fd;

	j->started = vd_wall_now();
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
	if (j->kind == VD_JOB_SCRUB)
		opt.flags |= VD_VERIFY_KEEP_CACHE_CLEAN;
	opt.progress = on_progress;
	opt.progress_arg = &pc;
	vd_fingerprint_dir(fd, &j->fp_before);
	if (j->recheck != NULL && (j->rechecked = recheck(p, j, fd))) {
		vd_fingerprint_dir(fd, &j->fp_after);
		vd_hdrinfo_read(fd, &j->hdr);
		close(fd);
		j->duration = mono_now() - pc.t0;
		return;
	}
	{
		sink_ctx sc = { p, j, NULL };
		vd_chunk_sink sink = { sink_start, sink_finish, &sc };
		vd_artifact_verify_ex(fd, &opt, &j->verdict, NULL, &sink);
	}
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

/* Hashing is throughput work; answering participants is latency work.
 * Hasher threads yield the CPU to the event loop thread. A system-call
 * filter that forbids this (a unit without setpriority) would leave the
 * hashers contending with the loop at its priority: say so, once. */
static void lower_priority(void)
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
		log_warn("hasher threads keep the event loop's priority: %s failed: %s",
		    what, strerror(err));
}

static void *worker(void *arg)
{
	vd_pool *p = arg;
	vd_job *j;

	lower_priority();
	pthread_mutex_lock(&p->mu);
	for (;;) {
		chunk_item *it = NULL;
		/* Jobs first; chunk work only when no job waits. */
		while (!p->stopping && (j = pop(p)) == NULL && (it = pop_chunk(p, NULL)) == NULL)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->stopping)
			break;
		if (j == NULL) {
			it->batch->claimed_by_others++;
			pthread_mutex_unlock(&p->mu);
			do_item(it);
			pthread_mutex_lock(&p->mu);
			item_done(p, it);
			continue;
		}
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
	/* Stopping: the last thread out wakes the loop, which joins them all. */
	p->exited++;
	uv_async_send(&p->async);
	pthread_mutex_unlock(&p->mu);
	return NULL;
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

	if (--p->handles_open > 0)
		return;
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	pthread_cond_destroy(&p->chunk_cv);
	free(p->threads);
	free(p->root);
	free(p);
}

/* libuv's thread pool: every thread has left its loop, so the joins are
 * short; but a hasher at nice 10 may wait long for the CPU to return, and
 * the event loop must not wait with it. */
static void join_threads(uv_work_t *w)
{
	vd_pool *p = w->data;
	unsigned i;

	for (i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
}

static void on_joined(uv_work_t *w, int status)
{
	vd_pool *p = w->data;

	free_list(p->done_head);
	p->done_head = p->done_tail = NULL;
	uv_close((uv_handle_t *)&p->grace, on_closed);
	uv_close((uv_handle_t *)&p->async, on_closed);
}

/* Loop thread, stopping, every thread out of its loop. */
static void reap(vd_pool *p)
{
	if (p->reaping)
		return;
	p->reaping = 1;
	uv_timer_stop(&p->grace);
	p->reap.data = p;
	uv_queue_work(p->loop, &p->reap, join_threads, on_joined);
}

/* Loop thread: hand finished jobs to the owner. */
static void on_async(uv_async_t *h)
{
	vd_pool *p = h->data;
	vd_job *j, *next;
	int all_out;

	pthread_mutex_lock(&p->mu);
	j = p->done_head;
	p->done_head = p->done_tail = NULL;
	all_out = p->stopping && p->exited == p->nthreads;
	pthread_mutex_unlock(&p->mu);
	for (; j != NULL; j = next) {
		next = j->next;
		j->next = NULL;
		if (p->stopping)
			vd_job_free(j);
		else
			p->done(j, p->arg);
	}
	if (all_out)
		reap(p);
}

/* The grace is over: running verifications give up at their next step. */
static void on_grace(uv_timer_t *t)
{
	vd_pool *p = t->data;

	p->cancel = 1;
}

int vd_pool_new(uv_loop_t *loop, unsigned threads, const char *root,
    vd_pool_done_fn done, void *arg, vd_pool **out)
{
	sigset_t all, old;
	vd_pool *p = calloc(1, sizeof(*p));
	unsigned i;
	int rc = 0;

	if (p == NULL)
		return -ENOMEM;
	p->loop = loop;
	p->root = strdup(root);
	p->done = done;
	p->arg = arg;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	pthread_cond_init(&p->chunk_cv, NULL);
	p->threads = calloc(threads, sizeof(*p->threads));
	if (p->threads == NULL || p->root == NULL ||
	    uv_async_init(loop, &p->async, on_async) < 0) {
		free(p->threads);
		free(p->root);
		free(p);
		return -ENOMEM;
	}
	uv_timer_init(loop, &p->grace);
	p->async.data = p->grace.data = p;
	p->handles_open = 2;
	/* Signals belong to the loop thread; SIGBUS is synchronous and stays. */
	sigfillset(&all);
	sigdelset(&all, SIGBUS);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (i = 0; i < threads; i++) {
		if ((rc = pthread_create(&p->threads[i], NULL, worker, p)) != 0)
			break;
		/* Under the mutex: the threads already running read it. */
		pthread_mutex_lock(&p->mu);
		p->nthreads++;
		pthread_mutex_unlock(&p->mu);
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
	unsigned n;

	pthread_mutex_lock(&p->mu);
	n = p->nthreads;
	pthread_mutex_unlock(&p->mu);
	return n;
}

/* Nothing here waits: idle threads leave at once, running jobs get
 * grace_ms (the timer) before they are cancelled, and the last thread out
 * wakes on_async, which has them joined off the loop. */
void vd_pool_stop(vd_pool *p, unsigned grace_ms)
{
	int all_out;

	pthread_mutex_lock(&p->mu);
	p->stopping = 1;
	free_list(p->explicit_head);
	free_list(p->bg_head);
	p->explicit_head = p->explicit_tail = p->bg_head = p->bg_tail = NULL;
	p->queued = 0;
	pthread_cond_broadcast(&p->cv);
	all_out = p->exited == p->nthreads;
	pthread_mutex_unlock(&p->mu);
	if (grace_ms == 0)
		p->cancel = 1;
	else
		uv_timer_start(&p->grace, on_grace, grace_ms, 0);
	if (all_out)
		reap(p);
}

/*
 * The hasher pool: a re-check spread over every thread reports the first
 * differing chunk in file order, whichever thread digested it, run after
 * run; and stopping never blocks the event loop, yet gives a running job
 * its grace before cancelling it. A verification in parts hashes what
 * one pass does, and fails when a file changed between its parts.
 * Beneath it, the queue: urgent items ahead of the rest and past the
 * bound, each lane by least rank, items that give way back behind those
 * that had less, tasks each run and folded once.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <cmocka.h>
#include <openssl/sha.h>
#include <uv.h>

#include "vd_chunks.h"
#include "vd_pool.h"
#include "vd_queue.h"

#define THREADS 4
#define SMALL_CHUNK 4096u            /* about 770 items: every thread gets some */
#define SHARDS 3
#define RUNS 25
#define PATH_LEN 4200

static char work[PATH_LEN];

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* An artifact by vd-mkartifact, under the work directory (the pool's root). */
static void make_artifact(const char *name, const char *args)
{
	const char *top = getenv("top_builddir");
	char cmd[2 * PATH_LEN];

	assert_non_null(top);
	snprintf(cmd, sizeof(cmd), "'%s/tools/vd-mkartifact' --round 1 %s '%s/%s' >/dev/null",
	    top, args, work, name);
	assert_int_equal(system(cmd), 0);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int is_weights(const struct dirent *d)
{
	size_t n = strlen(d->d_name);

	return n > 12 && strcmp(d->d_name + n - 12, ".safetensors") == 0;
}

/* The chunk map of an artifact as on disk: every chunk's true digest. */
static vd_chunkmap *true_map(const char *name, uint32_t chunk)
{
	char dir[PATH_LEN], path[2 * PATH_LEN];
	struct dirent **ents;
	vd_mapped_file files[SHARDS];
	vd_chunkmap *m;
	vd_err err = { 0 };
	struct stat st;
	int n, i, fd, dfd;
	size_t c;

	snprintf(dir, sizeof(dir), "%s/%s", work, name);
	n = scandir(dir, &ents, is_weights, by_name);
	assert_true(n > 0 && n <= SHARDS);
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, ents[i]->d_name);
		assert_true((fd = open(path, O_RDONLY)) >= 0);
		assert_int_equal(fstat(fd, &st), 0);
		files[i].name = ents[i]->d_name;
		files[i].size = (uint64_t)st.st_size;
		files[i].map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
		assert_true(files[i].map != MAP_FAILED);
		close(fd);
	}
	m = vd_chunkmap_new(files, (size_t)n, chunk);
	assert_non_null(m);
	for (i = 0; i < n; i++) {
		for (c = 0; c < m->files[i].n_chunks; c++) {
			uint64_t off = (uint64_t)c * chunk, left = m->files[i].size - off;
			SHA256(files[i].map + off, left < chunk ? left : chunk, m->files[i].digests[c]);
		}
		munmap((void *)files[i].map, files[i].size);
		free(ents[i]);
	}
	free(ents);
	assert_true((dfd = open(dir, O_RDONLY | O_DIRECTORY)) >= 0);
	assert_int_equal(vd_artifact_digest_small(dfd, "header.json", m->meta.header, &err), VD_OK);
	close(dfd);
	return m;
}

/* ---- a pool on a loop, run until the jobs are back ------------------- */

typedef struct harness {
	uv_loop_t loop;
	vd_pool *pool;
	vd_job *done[RUNS];
	int n_done, want;
} harness;

static void on_done(vd_job *j, void *arg)
{
	harness *h = arg;

	assert_true(h->n_done < RUNS);
	h->done[h->n_done++] = j;
	if (h->n_done == h->want)
		uv_stop(&h->loop);
}

static void harness_start(harness *h, unsigned threads)
{
	memset(h, 0, sizeof(*h));
	assert_int_equal(uv_loop_init(&h->loop), 0);
	assert_int_equal(vd_pool_new(&h->loop, threads, work, on_done, h, &h->pool), 0);
	assert_int_equal(vd_pool_threads(h->pool), threads);
}

static void harness_finish(harness *h)
{
	int i;

	vd_pool_stop(h->pool, 0);
	assert_int_equal(uv_run(&h->loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(uv_loop_close(&h->loop), 0);
	for (i = 0; i < h->n_done; i++)
		vd_job_free(h->done[i]);
}

static vd_job *recheck_job(const vd_chunkmap *m)
{
	vd_job *j = vd_job_new(VD_JOB_BACKGROUND, "shards");

	assert_non_null(j);
	assert_non_null(j->recheck = vd_chunkmap_dup(m));
	return j;
}

static void set_up_shards(void)
{
	char dir[PATH_LEN];
	struct stat st;

	snprintf(dir, sizeof(dir), "%s/shards", work);
	if (stat(dir, &st) != 0)
		make_artifact("shards", "--shards 3 --tensors 6 --bytes 3145728");
}

/* Every chunk as recorded: the re-check passes without a canonical pass. */
static void test_recheck_unchanged(void **state)
{
	vd_chunkmap *m;
	harness h;

	set_up_shards();
	m = true_map("shards", SMALL_CHUNK);
	harness_start(&h, THREADS);
	h.want = 1;
	assert_int_equal(vd_pool_submit(h.pool, recheck_job(m), 16), 0);
	uv_run(&h.loop, UV_RUN_DEFAULT);
	assert_int_equal(h.n_done, 1);
	assert_int_equal(h.done[0]->rechecked, 1);
	assert_string_equal(h.done[0]->changed, "");
	assert_int_equal(h.done[0]->hashed, m->files[0].size * SHARDS);
	harness_finish(&h);
	vd_chunkmap_free(m);
}

/* Digests spoiled from file 1's chunk 17 on, so that threads find
 * differences at the same moment: every run names that chunk, however the
 * items were spread over the threads. */
static void test_recheck_first_mismatch(void **state)
{
	char want[VD_DETAIL_MAX];
	vd_chunkmap *m;
	harness h;
	size_t f, c;
	int r;

	set_up_shards();
	m = true_map("shards", SMALL_CHUNK);
	for (f = 1; f < SHARDS; f++)
		for (c = f == 1 ? 17 : 0; c < m->files[f].n_chunks; c++)
			m->files[f].digests[c][7] ^= 0x40;
	snprintf(want, sizeof(want), "%s bytes %u to %u changed", m->files[1].name,
	    17 * SMALL_CHUNK, 18 * SMALL_CHUNK);
	harness_start(&h, THREADS);
	/* One job at a time: the other threads are idle and take items. */
	for (r = 0; r < RUNS; r++) {
		h.want = r + 1;
		assert_int_equal(vd_pool_submit(h.pool, recheck_job(m), 1), 0);
		uv_run(&h.loop, UV_RUN_DEFAULT);
	}
	assert_int_equal(h.n_done, RUNS);
	for (r = 0; r < RUNS; r++) {
		assert_int_equal(h.done[r]->rechecked, 0);
		assert_string_equal(h.done[r]->changed, want);
		/* The canonical pass that follows a failed re-check. */
		assert_int_equal(h.done[r]->verdict.code, VD_OK);
	}
	harness_finish(&h);
	vd_chunkmap_free(m);
}

/* ---- stopping ---------------------------------------------------------- */

typedef struct stop_run {
	harness h;
	uv_timer_t poll, tick;
	unsigned grace_ms;
	double stop_called, stop_returned, closed;
	int ticks_after_stop;
} stop_run;

static void on_tick(uv_timer_t *t)
{
	stop_run *s = t->data;

	if (s->stop_returned > 0)
		s->ticks_after_stop++;
}

/* Once the scrub runs, stop the pool from the loop, as the store does. */
static void on_poll(uv_timer_t *t)
{
	stop_run *s = t->data;

	if (vd_pool_busy(s->h.pool) == 0)
		return;
	uv_close((uv_handle_t *)&s->poll, NULL);
	s->stop_called = now_s();
	vd_pool_stop(s->h.pool, s->grace_ms);
	s->stop_returned = now_s();
}

static void run_stop(stop_run *s, unsigned grace_ms)
{
	vd_job *j = vd_job_new(VD_JOB_SCRUB, "slow");

	harness_start(&s->h, 2);
	s->grace_ms = grace_ms;
	/* 1 MiB/s over 64 MiB: running far longer than any grace. */
	j->rate = 1u << 20;
	assert_int_equal(vd_pool_submit(s->h.pool, j, 4), 0);
	uv_timer_init(&s->h.loop, &s->poll);
	uv_timer_init(&s->h.loop, &s->tick);
	s->poll.data = s->tick.data = s;
	uv_timer_start(&s->poll, on_poll, 5, 5);
	uv_timer_start(&s->tick, on_tick, 10, 10);
	uv_unref((uv_handle_t *)&s->tick);   /* the pool's handles alone keep the loop */
	uv_run(&s->h.loop, UV_RUN_DEFAULT);
	s->closed = now_s();
	uv_close((uv_handle_t *)&s->tick, NULL);
	uv_run(&s->h.loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&s->h.loop), 0);
}

static void set_up_slow(void)
{
	char dir[PATH_LEN];
	struct stat st;

	snprintf(dir, sizeof(dir), "%s/slow", work);
	if (stat(dir, &st) != 0)
		make_artifact("slow", "--sparse --bytes 67108864");
}

/* ---- a verification in parts ---------------------------------------- */

/* Pauses after every chunk: as many parts as the pass has chunks. */
static int pause_always(uint64_t done, uint64_t total, void *arg)
{
	(void)done;
	(void)total;
	(void)arg;
	return VD_PROGRESS_PAUSE;
}

static int open_work_dir(const char *name)
{
	char dir[PATH_LEN];
	int fd;

	snprintf(dir, sizeof(dir), "%s/%s", work, name);
	assert_true((fd = open(dir, O_RDONLY | O_DIRECTORY)) >= 0);
	return fd;
}

/* Paused in the middle of tensors and at their ends, on every shard, the
 * parts add up to the hash of one pass. */
static void test_verify_in_parts(void **state)
{
	vd_options opt = { .progress = pause_always };
	vd_verdict whole, part;
	vd_resume *r = NULL;
	uint64_t last = 0;
	int dfd, parts = 0;

	make_artifact("parts", "--shards 2 --tensors 3 --bytes 7340032");
	dfd = open_work_dir("parts");
	assert_int_equal(vd_artifact_verify(dfd, NULL, &whole, NULL), VD_OK);
	while (vd_artifact_verify_part(dfd, 0, &opt, NULL, &part, NULL, &r) == 1) {
		assert_non_null(r);
		assert_true(vd_resume_hashed(r) > last);
		last = vd_resume_hashed(r);
		parts++;
	}
	assert_null(r);
	assert_int_equal(part.code, VD_OK);
	assert_string_equal(part.content_hash, whole.content_hash);
	assert_true(parts >= 7);           /* 7 MiB in 1 MiB chunks */
	close(dfd);
}

/* A weight file touched between two parts: the pass fails as one changed
 * under the hash does, naming the file, and is not judged. */
static void test_verify_parts_see_a_change(void **state)
{
	vd_options opt = { .progress = pause_always };
	vd_verdict part;
	vd_resume *r = NULL;
	char path[2 * PATH_LEN];
	struct dirent **ents;
	int dfd, n, i;

	make_artifact("parts-changed", "--tensors 2 --bytes 4194304");
	dfd = open_work_dir("parts-changed");
	assert_int_equal(vd_artifact_verify_part(dfd, 0, &opt, NULL, &part, NULL, &r), 1);
	snprintf(path, sizeof(path), "%s/parts-changed", work);
	n = scandir(path, &ents, is_weights, by_name);
	assert_int_equal(n, 1);
	snprintf(path, sizeof(path), "%s/parts-changed/%s", work, ents[0]->d_name);
	assert_int_equal(utimensat(AT_FDCWD, path, NULL, 0), 0);
	assert_int_equal(vd_artifact_verify_part(dfd, 0, &opt, NULL, &part, NULL, &r), 0);
	assert_null(r);
	assert_int_equal(part.code, VD_IO_ERROR);
	assert_non_null(strstr(part.detail, ents[0]->d_name));
	assert_non_null(strstr(part.detail, "changed while it was being verified"));
	for (i = 0; i < n; i++)
		free(ents[i]);
	free(ents);
	close(dfd);
}

/* A pass given up between parts leaves nothing behind (valgrind, ASan). */
static void test_verify_parts_dropped(void **state)
{
	vd_options opt = { .progress = pause_always };
	vd_verdict part;
	vd_resume *r = NULL;
	int dfd;

	make_artifact("parts-dropped", "--tensors 1 --bytes 3145728");
	dfd = open_work_dir("parts-dropped");
	assert_int_equal(vd_artifact_verify_part(dfd, 0, &opt, NULL, &part, NULL, &r), 1);
	assert_int_equal(vd_resume_hashed(r), 1u << 20);
	vd_resume_free(r);
	close(dfd);
}

/* The loop runs on through the grace; the job is cancelled after it and
 * never handed back; the pool closes by itself. */
static void test_stop_does_not_block(void **state)
{
	stop_run s;

	set_up_slow();
	memset(&s, 0, sizeof(s));
	run_stop(&s, 400);
	assert_true(s.stop_called > 0);
	assert_true(s.stop_returned - s.stop_called < 0.05);
	assert_true(s.ticks_after_stop >= 10);
	assert_true(s.closed - s.stop_called >= 0.39);
	assert_true(s.closed - s.stop_called < 5.0);
	assert_int_equal(s.h.n_done, 0);
}

/* No grace: cancelled at once. */
static void test_stop_without_grace(void **state)
{
	stop_run s;

	set_up_slow();
	memset(&s, 0, sizeof(s));
	run_stop(&s, 0);
	assert_true(s.stop_returned - s.stop_called < 0.05);
	assert_true(s.closed - s.stop_called < 2.0);
	assert_int_equal(s.h.n_done, 0);
}

/* Idle threads: stopping ends as soon as they are joined. */
static void test_stop_idle(void **state)
{
	harness h;
	double t0;

	harness_start(&h, THREADS);
	t0 = now_s();
	vd_pool_stop(h.pool, 60000);
	assert_int_equal(uv_run(&h.loop, UV_RUN_DEFAULT), 0);
	assert_true(now_s() - t0 < 2.0);
	assert_int_equal(uv_loop_close(&h.loop), 0);
}

/* ---- the queue beneath ------------------------------------------------ */

#define Q_ITEMS 8
#define Q_MAX 2                      /* the bound in the lane tests */
#define Q_TASKS 1000

typedef struct qitem {
	vd_queue_item item;
	int id;
	int tasks;                   /* > 0: posts this many tasks and waits */
	int help;
	size_t ran, folded, dropped; /* its tasks' runs, folds and drops */
	int yields;                  /* > 0: gives way this many times */
	int ahead[4];                /* vd_queue_ahead at each of its runs */
	int runs;
} qitem;

typedef struct qtask {
	vd_task task;
	int runs;
} qtask;

typedef struct qset {
	vd_taskset set;
	size_t ran, folded, dropped;
} qset;

/* The first item holds its thread until the test opens the gate. */
typedef struct qrun {
	uv_loop_t loop;
	vd_queue *q;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int open;
	int order[Q_ITEMS], n_done, want, discarded;
	int runs[4 * Q_ITEMS], n_runs;   /* every run, gate item first */
} qrun;

#define QITEM_OF(it) ((qitem *)((char *)(it) - offsetof(qitem, item)))
#define QTASK_OF(t) ((qtask *)((char *)(t) - offsetof(qtask, task)))
#define QSET_OF(s) ((qset *)((char *)(s) - offsetof(qset, set)))

static void qtask_run(vd_task *t)
{
	QTASK_OF(t)->runs++;
}

/* Under the queue's mutex: plain counters suffice. */
static void qtask_fold(vd_task *t)
{
	qset *s = QSET_OF(t->set);

	s->folded++;
	s->ran += (size_t)QTASK_OF(t)->runs;
	s->dropped += t->dropped;
}

static void qitem_tasks(vd_queue *q, qitem *x)
{
	qtask *ts = calloc((size_t)x->tasks, sizeof(*ts));
	qset s;
	int i;

	assert_non_null(ts);
	memset(&s, 0, sizeof(s));
	s.set.run = qtask_run;
	s.set.fold = qtask_fold;
	for (i = 0; i + 1 < x->tasks; i++)
		ts[i].task.next = &ts[i + 1].task;
	vd_queue_post(q, &s.set, &ts[0].task);
	vd_queue_finish(q, &s.set, x->help);
	x->ran = s.ran;
	x->folded = s.folded;
	x->dropped = s.dropped;
	free(ts);
}

static int qitem_run(vd_queue *q, vd_queue_item *it, void *arg)
{
	qitem *x = QITEM_OF(it);
	qrun *r = arg;

	if (x->tasks > 0) {
		qitem_tasks(q, x);
		return VD_QUEUE_DONE;
	}
	pthread_mutex_lock(&r->mu);
	while (!r->open)
		pthread_cond_wait(&r->cv, &r->mu);
	r->runs[r->n_runs++] = x->id;
	pthread_mutex_unlock(&r->mu);
	/* Its rank grows with each run, as bytes hashed do. */
	x->ahead[x->runs++] = vd_queue_ahead(q, it, it->rank + 100);
	if (x->yields-- > 0) {
		it->rank += 100;
		return VD_QUEUE_AGAIN;
	}
	return VD_QUEUE_DONE;
}

static void qitem_done(vd_queue_item *it, void *arg)
{
	qrun *r = arg;

	r->order[r->n_done++] = QITEM_OF(it)->id;
	if (r->n_done == r->want)
		uv_stop(&r->loop);
}

static void qitem_discard(vd_queue_item *it, void *arg)
{
	((qrun *)arg)->discarded++;
}

static const vd_queue_ops qops = { "test", qitem_run, qitem_done, qitem_discard, NULL };

static void qrun_start(qrun *r, unsigned threads)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	assert_int_equal(uv_loop_init(&r->loop), 0);
	assert_int_equal(vd_queue_new(&r->loop, threads, 0, &qops, r, &r->q), 0);
}

static void qrun_open(qrun *r)
{
	pthread_mutex_lock(&r->mu);
	r->open = 1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

static void qrun_finish(qrun *r)
{
	vd_queue_stop(r->q, 0);
	assert_int_equal(uv_run(&r->loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(uv_loop_close(&r->loop), 0);
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cv);
}

/* Until the one thread holds the first item. */
static void wait_busy(vd_queue *q)
{
	struct timespec ts = { 0, 1000000 };
	int i;

	for (i = 0; i < 5000 && vd_queue_busy(q) == 0; i++)
		nanosleep(&ts, NULL);
	assert_int_equal(vd_queue_busy(q), 1);
}

/* With the one thread held: the rest is refused at the bound, urgent
 * items at twice it; urgent ones run first, each lane in order. */
static void test_queue_lanes(void **state)
{
	qitem x[Q_ITEMS];
	qrun r;
	int i, want[] = { 0, 3, 4, 1, 2 };

	memset(x, 0, sizeof(x));
	for (i = 0; i < Q_ITEMS; i++)
		x[i].id = i;
	qrun_start(&r, 1);
	assert_int_equal(vd_queue_submit(r.q, &x[0].item, Q_MAX), 0);
	wait_busy(r.q);
	assert_int_equal(vd_queue_submit(r.q, &x[1].item, Q_MAX), 0);
	assert_int_equal(vd_queue_submit(r.q, &x[2].item, Q_MAX), 0);
	assert_int_equal(vd_queue_submit(r.q, &x[5].item, Q_MAX), -EAGAIN);
	x[3].item.urgent = x[4].item.urgent = x[6].item.urgent = 1;
	assert_int_equal(vd_queue_submit(r.q, &x[3].item, Q_MAX), 0);
	assert_int_equal(vd_queue_submit(r.q, &x[4].item, Q_MAX), 0);
	assert_int_equal(vd_queue_submit(r.q, &x[6].item, Q_MAX), -EAGAIN);
	assert_int_equal(vd_queue_queued(r.q), 4);
	assert_int_equal(vd_queue_idle(r.q), 0);
	r.want = 5;
	qrun_open(&r);
	uv_run(&r.loop, UV_RUN_DEFAULT);
	assert_int_equal(r.n_done, 5);
	for (i = 0; i < 5; i++)
		assert_int_equal(r.order[i], want[i]);
	qrun_finish(&r);
	assert_int_equal(r.discarded, 0);
}

/* The order alone: urgent first, then the least rank, then arrival. */
static void test_queue_before(void **state)
{
	vd_queue_item a = { 0 }, b = { 0 };

	a.seq = 1;
	b.seq = 2;
	assert_true(vd_queue_before(&a, &b));
	assert_false(vd_queue_before(&b, &a));
	a.rank = 1;                        /* has had more: goes after */
	assert_true(vd_queue_before(&b, &a));
	b.rank = 1 << 20;
	assert_true(vd_queue_before(&a, &b));
	b.urgent = 1;                      /* urgent, whatever it has had */
	assert_true(vd_queue_before(&b, &a));
	a.urgent = 1;
	assert_true(vd_queue_before(&a, &b));
	assert_false(vd_queue_before(&a, &a));
}

/* One thread, held while the items come: the urgent one first, an item
 * promoted while it waits behind it; then the background items, an item
 * that gave way after each run behind every one that had less; an item
 * that ran once cannot be taken back. */
static void test_queue_turns(void **state)
{
	qitem x[Q_ITEMS];
	qrun r;
	int i, want[] = { 0, 4, 3, 1, 2, 1, 1 };

	memset(x, 0, sizeof(x));
	for (i = 0; i < Q_ITEMS; i++)
		x[i].id = i;
	x[1].yields = 2;
	qrun_start(&r, 1);
	assert_int_equal(vd_queue_submit(r.q, &x[0].item, Q_MAX), 0);
	wait_busy(r.q);
	for (i = 1; i <= 3; i++)
		assert_int_equal(vd_queue_submit(r.q, &x[i].item, Q_MAX * 4), 0);
	x[4].item.urgent = 1;
	assert_int_equal(vd_queue_submit(r.q, &x[4].item, Q_MAX * 4), 0);
	vd_queue_promote(r.q, &x[3].item);
	assert_true(x[3].item.urgent);
	assert_int_equal(vd_queue_queued(r.q), 4);
	r.want = 5;
	qrun_open(&r);
	uv_run(&r.loop, UV_RUN_DEFAULT);
	assert_int_equal(r.n_runs, 7);
	for (i = 0; i < 7; i++)
		assert_int_equal(r.runs[i], want[i]);
	/* Item 1 saw item 2 (new) ahead of it, then nothing. */
	assert_int_equal(x[1].ahead[0], 1);
	assert_int_equal(x[1].ahead[1], 0);
	assert_int_equal(x[1].ahead[2], 0);
	/* The first urgent one had the promoted one, which had less, ahead;
	 * that one had nothing: the background lane waits behind it. */
	assert_int_equal(x[4].ahead[0], 1);
	assert_int_equal(x[3].ahead[0], 0);
	assert_true(x[1].item.started);
	assert_int_equal(vd_queue_remove(r.q, &x[1].item), -EBUSY);
	qrun_finish(&r);
	assert_int_equal(r.discarded, 0);
}

/* Stopping discards what waits, and never hands it to done. */
static void test_queue_stop_discards(void **state)
{
	qitem x[3];
	qrun r;
	int i;

	memset(x, 0, sizeof(x));
	qrun_start(&r, 1);
	for (i = 0; i < 3; i++)
		assert_int_equal(vd_queue_submit(r.q, &x[i].item, Q_MAX * 2), 0);
	wait_busy(r.q);
	vd_queue_stop(r.q, 0);
	assert_int_equal(r.discarded, 2);
	qrun_open(&r);
	assert_int_equal(uv_run(&r.loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(uv_loop_close(&r.loop), 0);
	assert_int_equal(r.n_done, 0);
	assert_int_equal(r.discarded, 3);
	pthread_mutex_destroy(&r.mu);
	pthread_cond_destroy(&r.cv);
}

/* Every task runs once and is folded once, however many threads took
 * some; with no help and no other thread, every one is dropped. */
static void test_queue_tasks(void **state)
{
	qitem x[2];
	qrun r;

	memset(x, 0, sizeof(x));
	x[0].tasks = x[1].tasks = Q_TASKS;
	x[0].help = 1;
	qrun_start(&r, THREADS);
	r.want = 1;
	assert_int_equal(vd_queue_submit(r.q, &x[0].item, Q_MAX), 0);
	uv_run(&r.loop, UV_RUN_DEFAULT);
	qrun_finish(&r);
	assert_int_equal(x[0].folded, Q_TASKS);
	assert_int_equal(x[0].ran, Q_TASKS);
	assert_int_equal(x[0].dropped, 0);

	qrun_start(&r, 1);
	r.want = 1;
	assert_int_equal(vd_queue_submit(r.q, &x[1].item, Q_MAX), 0);
	uv_run(&r.loop, UV_RUN_DEFAULT);
	qrun_finish(&r);
	assert_int_equal(x[1].folded, Q_TASKS);
	assert_int_equal(x[1].ran, 0);
	assert_int_equal(x[1].dropped, Q_TASKS);
}

/* ---- lowering the hashers' priority ----------------------------------- */

/* setpriority and sched_setscheduler fail with EPERM, as under a unit
 * whose filter leaves them out. The numbers are the native ones, and the
 * test runs native. */
static int deny_priority(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setpriority, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sched_setscheduler, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0 ? -1 : 0;
}

/* Child: a pool started and stopped under that filter, logging to log. */
static int pool_under_filter(const char *log)
{
	uv_loop_t loop;
	vd_pool *p;
	int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || dup2(fd, STDERR_FILENO) < 0)
		return 2;
	if (deny_priority() < 0)
		return 77;
	if (uv_loop_init(&loop) != 0 || vd_pool_new(&loop, THREADS, work, on_done, NULL, &p) != 0)
		return 3;
	/* Threads leave their loop only after lowering their priority. */
	vd_pool_stop(p, 0);
	if (uv_run(&loop, UV_RUN_DEFAULT) != 0 || uv_loop_close(&loop) != 0)
		return 4;
	return 0;
}

/* Every thread fails to lower its priority; the log says so once. */
static void test_priority_failure_logged_once(void **state)
{
	char log[PATH_LEN + 16], line[512];
	int status, warned = 0, named = 0;
	pid_t pid;
	FILE *f;

	snprintf(log, sizeof(log), "%s/pool.log", work);
	fflush(NULL);
	assert_true((pid = fork()) >= 0);
	if (pid == 0)
		_exit(pool_under_filter(log));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		skip();                      /* no seccomp here */
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_non_null(f = fopen(log, "r"));
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strstr(line, "priority") == NULL)
			continue;
		warned++;
		named += strstr(line, "warning: ") == line &&
		    strstr(line, "Operation not permitted") != NULL;
	}
	fclose(f);
	assert_int_equal(warned, 1);
	assert_int_equal(named, 1);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static int set_up(void **state)
{
	const char *t = getenv("TMPDIR");

	snprintf(work, sizeof(work), "%s/test_pool.XXXXXX", t ? t : "/tmp");
	return mkdtemp(work) == NULL ? -1 : 0;
}

static int tear_down(void **state)
{
	return nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		/* First: it forks, and ThreadSanitizer refuses threads in a child
		 * forked after any (libuv keeps its thread pool's). */
		cmocka_unit_test(test_priority_failure_logged_once),
		cmocka_unit_test(test_recheck_unchanged),
		cmocka_unit_test(test_recheck_first_mismatch),
		cmocka_unit_test(test_stop_does_not_block),
		cmocka_unit_test(test_stop_without_grace),
		cmocka_unit_test(test_stop_idle),
		cmocka_unit_test(test_verify_in_parts),
		cmocka_unit_test(test_verify_parts_see_a_change),
		cmocka_unit_test(test_verify_parts_dropped),
		cmocka_unit_test(test_queue_lanes),
		cmocka_unit_test(test_queue_before),
		cmocka_unit_test(test_queue_turns),
		cmocka_unit_test(test_queue_stop_discards),
		cmocka_unit_test(test_queue_tasks),
	};

	if (getenv("top_builddir") == NULL) {
		printf("SKIP: run through make check\n");
		return 77;
	}
	return cmocka_run_group_tests_name("pool", tests, set_up, tear_down);
}

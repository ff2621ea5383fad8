#include "config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vd_limits.h"
#include "vd_pool.h"
#include "vd_tar.h"
#include "vd_util.h"

/* Chunk work: digests taken alongside a canonical pass, or compared in a
 * re-check. Items are posted as tasks for idle workers; the job that
 * posted them works on its own batch too and waits for it. */
typedef struct chunk_item {
	vd_task task;
	const uint8_t *p;
	size_t n;
	uint8_t *out;              /* where the digest goes */
	const uint8_t *expect;     /* re-check: what it must be */
	size_t file, chunk;
	/* The item's own result, written by the one thread digesting it and
	 * folded into the batch under the queue's mutex. */
	int failed, differs;
} chunk_item;

/* Results are folded in under the queue's mutex (or by the one thread
 * that owns a batch never posted); read once the queue says it is done. */
typedef struct chunk_batch {
	vd_taskset set;
	chunk_item *items;
	size_t count;
	int failed;                /* a file shrank under a digest */
	int mismatch;
	size_t mm_file, mm_chunk;  /* the first chunk that differs */
} chunk_batch;

struct vd_pool {
	vd_queue *q;
	char *root;
	vd_pool_done_fn done;
	void *arg;
	atomic_uint_fast64_t hashed;    /* bytes, as slices end */
	atomic_uint_fast64_t yields;    /* slices that gave way */
};

#define ITEM_OF(t) ((chunk_item *)((void *)((char *)(t) - offsetof(chunk_item, task))))
#define BATCH_OF(s) ((chunk_batch *)((void *)((char *)(s) - offsetof(chunk_batch, set))))
#define JOB_OF(it) ((vd_job *)((void *)((char *)(it) - offsetof(vd_job, item))))

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

static void oms_join(vd_job *j, int keep);

void vd_job_free(vd_job *j)
{
	if (j == NULL)
		return;
	vd_chunkmap_free(j->recheck);
	vd_chunkmap_free(j->chunks);
	vd_hdrinfo_free(&j->hdr);
	vd_resume_free(j->resume);
	oms_join(j, 0);
	vd_omskeys_unref(j->oms_keys);
	free(j->run);
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
	vd_queue *q;
	vd_pool *pool;
	vd_job *job;
	double t0;                 /* when this slice began */
	const char *path;          /* the artifact by name, to see it replaced */
	dev_t dev;                 /* what was opened */
	ino_t ino;
	double next_look;
	double slice_end;          /* when it looks whether to give way */
	uint64_t counted;          /* of job->hashed, in the pool's count */
} progress_ctx;

/* Seconds spent on the job: its earlier slices and this one so far. Time
 * waiting for its turn between slices is not its own. */
static double spent(const progress_ctx *pc, double now)
{
	return pc->job->duration + (now - pc->t0);
}

static void count_hashed(progress_ctx *pc)
{
	if (pc->job->hashed > pc->counted) {
		atomic_fetch_add(&pc->pool->hashed, pc->job->hashed - pc->counted);
		pc->counted = pc->job->hashed;
	}
}

/* The job's time limit for total bytes: as configured, or the floor rate
 * (the scrub rate when lower) plus a fixed allowance for the small files. */
static double time_limit(const vd_job *j, uint64_t total)
{
	uint64_t rate = j->floor_rate ? j->floor_rate : 1;

	if (j->max_seconds > 0)
		return j->max_seconds;
	if (j->rate > 0 && j->rate < rate)
		rate = j->rate;
	return VD_VERIFY_BASE_SECONDS + (double)total / (double)rate;
}

/* Hashing bytes nobody will load is wasted work, and a big sparse file
 * would hold a worker for hours: give up once the name no longer leads
 * to what was opened. */
static int still_there(progress_ctx *pc, double now)
{
	struct stat st;

	if (now < pc->next_look)
		return 1;
	pc->next_look = now + VD_JOB_LOOK_SECONDS;
	return lstat(pc->path, &st) == 0 && st.st_dev == pc->dev && st.st_ino == pc->ino;
}

/* Nonzero when the job should stop now: shutdown, its artifact gone, or
 * its time up (the reason in job->abandoned). */
static int should_stop(progress_ctx *pc, uint64_t total)
{
	vd_job *j = pc->job;
	double now;

	if (vd_queue_cancelled(pc->q))
		return 1;
	now = mono_now();
	j->total = total;
	j->limit = time_limit(j, total);
	if (pc->path != NULL && !still_there(pc, now))
		j->abandoned = VD_ABANDON_GONE;
	else if (spent(pc, now) > j->limit)
		j->abandoned = VD_ABANDON_TIME;
	return j->abandoned != VD_ABANDON_NONE;
}

/* Slices also pace the count of bytes hashed: unsliced jobs are counted
 * as often as sliced ones by default. */
static double slice_length(const vd_job *j)
{
	return j->slice > 0 ? j->slice : VD_HASH_SLICE_MS_DEFAULT / 1000.0;
}

/* Past its slice, the job gives way when another would run before it,
 * were it queued again now (vd_queue_ahead); else a new slice begins.
 * Alone, or ahead of the rest, it never stops: slicing costs nothing
 * then. */
static int give_way(progress_ctx *pc)
{
	vd_job *j = pc->job;
	double now;

	if ((now = mono_now()) < pc->slice_end)
		return 0;
	count_hashed(pc);
	pc->slice_end = now + slice_length(j);
	if (j->slice <= 0 || !vd_queue_ahead(pc->q, &j->item, j->hashed))
		return 0;
	j->pausing = 1;
	return 1;
}

/* Cancellation, abandonment and, for scrubs, the read rate. */
static int on_progress(uint64_t done, uint64_t total, void *arg)
{
	progress_ctx *pc = arg;
	double ahead;

	pc->job->hashed = done;
	if (should_stop(pc, total))
		return 1;
	if (give_way(pc))
		return VD_PROGRESS_PAUSE;
	if (pc->job->rate == 0)
		return 0;
	ahead = (double)done / (double)pc->job->rate - spent(pc, mono_now());
	while (ahead > 0 && !should_stop(pc, total)) {
		double step = ahead > 0.2 ? 0.2 : ahead;
		struct timespec ts = { (time_t)step, (long)((step - (double)(time_t)step) * 1e9) };
		nanosleep(&ts, NULL);
		ahead -= step;
	}
	return should_stop(pc, total);
}

/* The verdict of an abandoned job: not judged, and why. */
static void describe_abandon(vd_job *j)
{
	vd_verdict *v = &j->verdict;

	v->code = VD_IO_ERROR;
	v->content_hash[0] = '\0';
	memset(&v->facts, 0, sizeof(v->facts));
	if (j->abandoned == VD_ABANDON_GONE)
		snprintf(v->detail, sizeof(v->detail),
		    "abandoned: the artifact was removed or replaced while it was being verified");
	else
		snprintf(v->detail, sizeof(v->detail),
		    "abandoned after %.0f s: verifying %llu bytes may take %.0f s at most (max_verify_seconds); it is retried later",
		    j->duration, (unsigned long long)j->total, j->limit);
	vd_verdict_remediate(v);
}

/* ---- chunk work --------------------------------------------------- */

/* Digest one item into the item alone: several threads work on a batch. */
static void do_item(chunk_item *it)
{
	uint8_t d[32];

	if (vd_digest_range(it->p, it->n, it->expect ? d : it->out) < 0)
		it->failed = 1;
	else if (it->expect && memcmp(d, it->expect, 32) != 0)
		it->differs = 1;
}

/* The queue's mutex held, or b never posted: the first differing chunk in
 * file order is the one reported, whichever thread found it first. */
static void fold_item(chunk_batch *b, const chunk_item *it)
{
	if (it->failed || it->task.dropped)
		b->failed = 1;      /* a dropped item was not digested: incomplete */
	if (it->differs && (!b->mismatch || it->file < b->mm_file ||
	    (it->file == b->mm_file && it->chunk < b->mm_chunk))) {
		b->mismatch = 1;
		b->mm_file = it->file;
		b->mm_chunk = it->chunk;
	}
}

static void run_task(vd_task *t)
{
	do_item(ITEM_OF(t));
}

static void fold_task(vd_task *t)
{
	fold_item(BATCH_OF(t->set), ITEM_OF(t));
}

static void post_batch(vd_queue *q, chunk_batch *b)
{
	size_t i;

	for (i = 0; i + 1 < b->count; i++)
		b->items[i].task.next = &b->items[i + 1].task;
	vd_queue_post(q, &b->set, b->count ? &b->items[0].task : NULL);
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };

	nanosleep(&ts, NULL);
}

/* One item after another on this thread, at the job's rate. */
static void throttled_batch(vd_queue *q, vd_job *j, chunk_batch *b)
{
	double t0 = mono_now(), ahead;
	uint64_t done = 0;
	size_t i;

	for (i = 0; i < b->count && !vd_queue_cancelled(q); i++) {
		do_item(&b->items[i]);
		fold_item(b, &b->items[i]);
		done += b->items[i].n;
		ahead = (double)done / (double)j->rate - (mono_now() - t0);
		while (ahead > 0 && !vd_queue_cancelled(q)) {
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
			it->p = maps[f] + off;
			it->n = (size_t)(left < m->chunk_size ? left : m->chunk_size);
			it->task.cost = it->n;
			it->out = m->files[f].digests[c];
			it->expect = re ? m->files[f].digests[c] : NULL;
			it->file = f;
			it->chunk = c;
		}
	}
	b->count = n;
	b->set.run = run_task;
	b->set.fold = fold_task;
	return b;
}

static void free_batch(chunk_batch *b)
{
	if (b != NULL) {
		free(b->items);
		free(b);
	}
}

typedef struct sink_ctx {
	vd_queue *q;
	vd_job *job;
	chunk_batch *batch;
} sink_ctx;

static void sink_start(void *arg, const vd_mapped_file *files, size_t n)
{
	sink_ctx *sc = arg;
	const uint8_t **maps;
	size_t i;

	/* Digests are taken only with a worker to spare: when every worker
	 * verifies, they would cost a verification its core. An explicit job
	 * keeps its map only if the others digest every chunk before its pass
	 * ends (sink_finish): not with fewer spare cores than that takes. */
	if (vd_queue_idle(sc->q) <
	    (sc->job->kind == VD_JOB_EXPLICIT ? VD_SINK_EXPLICIT_MIN_IDLE : 1))
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
		post_batch(sc->q, sc->batch);
}

/* Finish the digests only if idle workers took most of them: with every
 * worker busy the map is skipped rather than slowing verification down;
 * a later scrub takes it. */
static void sink_finish(void *arg, const vd_meta_digests *meta)
{
	sink_ctx *sc = arg;
	chunk_batch *b = sc->batch;
	size_t unclaimed;
	uint64_t left;

	if (b == NULL) {
		vd_chunkmap_free(sc->job->chunks);
		sc->job->chunks = NULL;
		return;
	}
	vd_queue_unclaimed(sc->q, &b->set, &unclaimed, &left);
	/* Finish the map when what is left is small, or others did most. */
	vd_queue_finish(sc->q, &b->set, sc->job->kind != VD_JOB_EXPLICIT &&
	    sc->job->abandoned == VD_ABANDON_NONE && !sc->job->pausing &&
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

/* Where a re-check finds the bytes it compares: each weight file of a
 * directory mapped on its own, or the members of a tar as ranges of one
 * mapping of the archive. */
typedef struct recheck_src {
	const uint8_t **maps;      /* per file of the chunk map */
	int *fds;                  /* a directory's files; -1 when not open */
	uint8_t *tar_map;          /* a tar's whole mapping, or NULL */
	size_t tar_len;
} recheck_src;

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
			return -EIO;
		}
		if ((uint64_t)st.st_size != m->files[f].size) {
			snprintf(why, n, "%s changed size from %llu to %lld bytes", m->files[f].name,
			    (unsigned long long)m->files[f].size, (long long)st.st_size);
			return -EIO;
		}
		if (m->files[f].size > 0) {
			maps[f] = mmap(NULL, (size_t)m->files[f].size, PROT_READ, MAP_SHARED, fds[f], 0);
			if (maps[f] == MAP_FAILED) {
				maps[f] = NULL;
				snprintf(why, n, "cannot map %s", m->files[f].name);
				return -EIO;
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

static int dir_source(int dirfd, const vd_chunkmap *m, recheck_src *rs, char *why, size_t n)
{
	if (!same_meta(dirfd, m, why, n))
		return -ESTALE;
	return map_files(dirfd, m, rs->maps, rs->fds, why, n);
}

/* n bytes at off, all of them: a short read means the archive shrank. */
static int read_at(int fd, uint8_t *p, size_t n, uint64_t off)
{
	ssize_t got;

	while (n > 0) {
		got = pread(fd, p, n, (off_t)off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			return -EIO;
		p += got;
		n -= (size_t)got;
		off += (uint64_t)got;
	}
	return 0;
}

/* The archive's index as it is now, its headers read with pread: a
 * mapping truncated under the parse would fault outside any guard. */
static int tar_index(int fd, uint64_t size, vd_tar_index *ix, char *why, size_t n)
{
	/* On the heap: the parser is too large for a hasher's stack. */
	vd_tar_parser *ps = calloc(1, sizeof(*ps));
	uint8_t *buf = malloc(VD_TAR_WANT_MAX);
	vd_err err = { 0 };
	uint64_t off;
	size_t len;
	vd_code rc;

	memset(ix, 0, sizeof(*ix));
	if (ps == NULL || buf == NULL)
		rc = vd_fail(&err, VD_IO_ERROR, "out of memory");
	else
		rc = vd_tar_begin(ps, size, &err);
	while (rc == VD_OK && vd_tar_want(ps, &off, &len))
		rc = read_at(fd, buf, len, off) < 0 ?
		    vd_fail(&err, VD_IO_ERROR, "cannot read its headers") : vd_tar_feed(ps, buf, &err);
	if (rc == VD_OK)
		rc = vd_tar_finish(ps, ix, &err);    /* frees what ps holds */
	else if (ps != NULL)
		vd_tar_parser_free(ps);
	free(ps);
	free(buf);
	if (rc != VD_OK)
		snprintf(why, n, "the archive no longer reads as verified: %s", err.msg);
	return rc == VD_OK ? 0 : -EIO;
}

/* A member's digest compared with the map's; has: whether it was there. */
static int same_member(const recheck_src *rs, const vd_tar_index *ix, const char *name,
    int has, const uint8_t want[32], char *why, size_t n)
{
	const vd_tar_member *mb = vd_tar_find(ix, name);
	uint8_t d[32];

	if ((mb != NULL) != (has != 0) ||
	    (mb != NULL && (vd_digest_range(rs->tar_map + mb->offset, (size_t)mb->size, d) < 0 ||
	    memcmp(d, want, 32) != 0))) {
		snprintf(why, n, "%s changed", name);
		return 0;
	}
	return 1;
}

static int tar_source(int tarfd, const vd_chunkmap *m, recheck_src *rs, char *why, size_t n)
{
	const vd_tar_member *mb;
	vd_tar_index ix;
	struct stat st;
	size_t f;
	int rc = -EIO;

	if (fstat(tarfd, &st) < 0 || (uint64_t)st.st_size > SIZE_MAX) {
		snprintf(why, n, "cannot stat the archive");
		return -EIO;
	}
	if ((rc = tar_index(tarfd, (uint64_t)st.st_size, &ix, why, n)) < 0)
		return rc;
	rc = -EIO;
	rs->tar_map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, tarfd, 0);
	if (rs->tar_map == MAP_FAILED) {
		rs->tar_map = NULL;
		snprintf(why, n, "cannot map the archive");
		goto out;
	}
	rs->tar_len = (size_t)st.st_size;
	/* A verified archive holds only what the verifier reads (a weight
	 * file is never header.json or the index: it would not parse). */
	if (ix.count != 1 + (m->meta.has_index != 0) + m->n_files) {
		snprintf(why, n, "the archive holds %zu files, not the %zu verified", ix.count,
		    1 + (m->meta.has_index != 0) + m->n_files);
		goto out;
	}
	if (!same_member(rs, &ix, "header.json", 1, m->meta.header, why, n) ||
	    !same_member(rs, &ix, "weights.index.json", m->meta.has_index, m->meta.index, why, n))
		goto out;
	for (f = 0; f < m->n_files; f++) {
		if ((mb = vd_tar_find(&ix, m->files[f].name)) == NULL) {
			snprintf(why, n, "%s is missing", m->files[f].name);
			goto out;
		}
		if (mb->size != m->files[f].size) {
			snprintf(why, n, "%s changed size from %llu to %llu bytes", m->files[f].name,
			    (unsigned long long)m->files[f].size, (unsigned long long)mb->size);
			goto out;
		}
		rs->maps[f] = rs->tar_map + mb->offset;
	}
	rc = 0;
out:
	vd_tar_index_free(&ix);
	return rc;
}

static void release_source(const vd_chunkmap *m, recheck_src *rs)
{
	size_t f;

	if (rs->tar_map != NULL)
		munmap(rs->tar_map, rs->tar_len);    /* the maps are ranges of it */
	for (f = 0; rs->tar_map == NULL && rs->maps != NULL && f < m->n_files; f++)
		if (rs->maps[f] != NULL)
			munmap((void *)rs->maps[f], (size_t)m->files[f].size);
	for (f = 0; rs->fds != NULL && f < m->n_files; f++)
		if (rs->fds[f] >= 0)
			close(rs->fds[f]);
	free(rs->maps);
	free(rs->fds);
}

/* What a re-check found. */
typedef enum vd_recheck {
	VD_RECHECK_CHANGED,         /* j->changed says where */
	VD_RECHECK_SAME             /* every byte as verified */
} vd_recheck;

/* Compare every chunk with its digest, on all idle workers at once; fd is
 * the artifact directory or the tar (j->artifact). */
static vd_recheck recheck(vd_queue *q, vd_job *j, int fd)
{
	const vd_chunkmap *m = j->recheck;
	recheck_src rs = { calloc(m->n_files + 1, sizeof(*rs.maps)),
		malloc((m->n_files + 1) * sizeof(*rs.fds)), NULL, 0 };
	chunk_batch *b = NULL;
	vd_recheck found = VD_RECHECK_CHANGED;
	size_t f;

	for (f = 0; rs.fds != NULL && f < m->n_files; f++)
		rs.fds[f] = -1;
	if (rs.maps == NULL || rs.fds == NULL)
		goto out;
	if ((j->artifact == VD_KIND_TAR ? tar_source(fd, m, &rs, j->changed, sizeof(j->changed)) :
	    dir_source(fd, m, &rs, j->changed, sizeof(j->changed))) < 0 ||
	    (b = new_batch(m, rs.maps, 1)) == NULL)
		goto out;
	if (j->rate > 0) {
		throttled_batch(q, j, b);     /* a scrub keeps to scrub_rate */
	} else {
		post_batch(q, b);
		vd_queue_finish(q, &b->set, 1);
	}
	j->hashed = 0;
	for (f = 0; f < m->n_files; f++)
		j->hashed += m->files[f].size;
	if (b->failed) {
		snprintf(j->changed, sizeof(j->changed), "%s shrank during the re-check",
		    j->artifact == VD_KIND_TAR ? "the archive" : "a weight file");
	} else if (b->mismatch) {
		uint64_t a = (uint64_t)b->mm_chunk * m->chunk_size;
		uint64_t e = a + m->chunk_size < m->files[b->mm_file].size ? a + m->chunk_size :
		    m->files[b->mm_file].size;
		snprintf(j->changed, sizeof(j->changed), "%s bytes %llu to %llu changed",
		    m->files[b->mm_file].name, (unsigned long long)a, (unsigned long long)e);
	} else {
		found = VD_RECHECK_SAME;
	}
out:
	release_source(m, &rs);
	free_batch(b);
	return found;
}

/* The job's artifact, a directory or a tar (with the directory holding
 * it in *parent). The root is opened by path each time: a store that was
 * replaced or remounted is followed. An fd, or -errno. */
static int open_artifact(const vd_pool *p, const vd_job *j, int *parent)
{
	int root = open(p->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd;

	*parent = -1;
	if (root < 0)
		return -errno;
	fd = j->artifact == VD_KIND_TAR ? vd_open_tar_beneath(root, j->relpath, parent) :
	    vd_open_beneath(root, j->relpath);
	close(root);
	return fd;
}

/* Gone, a symbolic link or not a file: no artifact to read there. */
static void open_failed(vd_job *j, int err)
{
	if (j->artifact == VD_KIND_DIR) {
		j->verdict.code = err == ENOENT ? VD_ARTIFACT_INVALID : VD_IO_ERROR;
		snprintf(j->verdict.detail, sizeof(j->verdict.detail),
		    "cannot open the artifact directory: %s", strerror(err));
		return;
	}
	j->verdict.code = err == ENOENT || err == ELOOP || err == EINVAL ?
	    VD_ARTIFACT_INVALID : VD_IO_ERROR;
	snprintf(j->verdict.detail, sizeof(j->verdict.detail), "cannot open the archive: %s",
	    err == ELOOP ? "it is a symbolic link" : err == EINVAL ? "it is not a regular file" :
	    strerror(err));
}

static const char *base_name(const char *relpath)
{
	const char *slash = strrchr(relpath, '/');

	return slash ? slash + 1 : relpath;
}

static void fingerprint_fd(const vd_job *j, int fd, int parent, vd_fingerprint *fp)
{
	struct stat st, sig;

	if (j->artifact == VD_KIND_DIR)
		vd_fingerprint_dir(fd, fp);
	else if (fstat(fd, &st) == 0)
		vd_fingerprint_file(&st, vd_tar_sig_stat(parent, base_name(j->relpath), &sig), fp);
}

/* What the job leaves with: the artifact's fingerprint (a tar's by name,
 * so that one renamed over it meanwhile counts as a change) and its
 * header as read after hashing. */
static void note_after(vd_job *j, int fd, int parent)
{
	const char *base = base_name(j->relpath);
	struct stat st, sig;

	if (j->artifact == VD_KIND_DIR) {
		vd_fingerprint_dir(fd, &j->fp_after);
		vd_hdrinfo_read(fd, &j->bounds, &j->hdr);
		return;
	}
	if (fstatat(parent, base, &st, AT_SYMLINK_NOFOLLOW) == 0)
		vd_fingerprint_file(&st, vd_tar_sig_stat(parent, base, &sig), &j->fp_after);
	vd_hdrinfo_read_tar(fd, &j->bounds, &j->hdr);
}

/* ---- the OMS bundle beside the files ----------------------------------
 *
 * model.sig in a directory, NAME.tar.sig beside a tar. Its files' digests
 * are not in the canonical stream (tensor by tensor in name order), so the
 * files are read a second time: on a thread of their own while the worker
 * does the canonical pass when a CPU is free for it, the two reading the
 * same pages so that storage is read once; else right after the pass,
 * from the page cache. */
struct vd_oms_helper {
	pthread_t tid;
	char path[PATH_MAX], sig[PATH_MAX + 8];
	vd_oms_signers t;          /* the job's run keys, held by the job */
	atomic_int cancel;
	vd_oms_code code;
	int differ;
	vd_oms_result r;
};

/* Helpers running, all pools together: each holds a CPU. */
static atomic_uint oms_helpers;

/* The bundle's path and the model's, when there is a bundle: 0, or
 * -ENOENT (or fstatat's -errno) when there is none to read. */
static int oms_paths(const vd_pool *p, const vd_job *j, int fd, int parent, char *path,
    size_t pn, char *sig, size_t sn)
{
	struct stat st;

	if (j->artifact == VD_KIND_DIR ?
	    fstatat(fd, VD_OMS_SIGNATURE_NAME, &st, AT_SYMLINK_NOFOLLOW) < 0 :
	    !vd_tar_sig_stat(parent, base_name(j->relpath), &st))
		return j->artifact == VD_KIND_DIR ? -errno : -ENOENT;
	snprintf(path, pn, "%s/%s", p->root, j->relpath);
	snprintf(sig, sn, j->artifact == VD_KIND_DIR ? "%s/" VD_OMS_SIGNATURE_NAME :
	    "%s" VD_TAR_SIG_SUFFIX, path);
	return 0;
}

static void oms_present(vd_job *j)
{
	const vd_oms_run *keys = vd_omskeys_run(j->oms_keys, j->run ? j->run : "");

	j->oms_present = 1;
	snprintf(j->oms.trust, sizeof(j->oms.trust), "%s", keys ? keys->digest : "");
}

static void oms_note(vd_job *j, vd_oms_code c, int differ, const vd_oms_result *r)
{
	oms_present(j);
	j->oms.code = c;
	j->oms.differ = differ;
	j->oms.verified = c == VD_OMS_OK;
	snprintf(j->oms.method, sizeof(j->oms.method), "%s", r->method);
	memcpy(j->oms.key_id, r->key_id, sizeof(j->oms.key_id));
	snprintf(j->oms.detail, sizeof(j->oms.detail), "%s", r->detail);
}

/* Right after the canonical pass, on the worker's thread. */
static void check_oms(const vd_pool *p, vd_job *j, int fd, int parent)
{
	char path[PATH_MAX], sig[PATH_MAX + 8];
	vd_oms_signers t;
	vd_oms_result *r;
	int differ = 0;
	vd_oms_code c;

	if (oms_paths(p, j, fd, parent, path, sizeof(path), sig, sizeof(sig)) < 0)
		return;
	/* On the heap: the result is too large for a hasher's stack. */
	if ((r = calloc(1, sizeof(*r))) == NULL) {
		oms_present(j);
		j->oms.code = VD_OMS_UNREADABLE;
		snprintf(j->oms.detail, sizeof(j->oms.detail), "out of memory");
		return;
	}
	vd_omskeys_signers(vd_omskeys_run(j->oms_keys, j->run ? j->run : ""), &t);
	c = vd_oms_check(path, sig, &t, r, &differ);
	oms_note(j, c, differ, r);
	free(r);
}

static void *oms_helper_main(void *arg)
{
	struct vd_oms_helper *h = arg;

	h->code = vd_oms_check_until(h->path, h->sig, &h->t, &h->cancel, &h->r, &h->differ);
	atomic_fetch_sub(&oms_helpers, 1);
	return NULL;
}

/* The CPUs this process may run on. */
static unsigned cpus_usable(void)
{
	cpu_set_t set;
	int n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;

	return n < 1 ? 1 : (unsigned)n;
}

/* A CPU no worker and no helper holds, claimed: 0, or -EAGAIN when
 * every one is held. */
static int oms_claim_cpu(const vd_pool *p)
{
	unsigned cpus = cpus_usable(), busy = vd_queue_busy(p->q);
	unsigned h = atomic_load(&oms_helpers);

	do {
		if (busy + h >= cpus)
			return -EAGAIN;
	} while (!atomic_compare_exchange_weak(&oms_helpers, &h, h + 1));
	return 0;
}

/* At a job's start: the bundle's check on a helper thread, when there is
 * a bundle and a free CPU. A throttled scrub keeps it after the pass: a
 * helper reading at full speed would undo the throttle. */
static void oms_begin(const vd_pool *p, vd_job *j, int fd, int parent)
{
	struct vd_oms_helper *h;

	if (j->rate != 0 || j->oms_helper != NULL || oms_claim_cpu(p) < 0)
		return;
	if ((h = calloc(1, sizeof(*h))) == NULL)
		goto unclaim;
	if (oms_paths(p, j, fd, parent, h->path, sizeof(h->path), h->sig, sizeof(h->sig)) < 0)
		goto unclaim;
	vd_omskeys_signers(vd_omskeys_run(j->oms_keys, j->run ? j->run : ""), &h->t);
	atomic_init(&h->cancel, 0);
	if (pthread_create(&h->tid, NULL, oms_helper_main, h) != 0)
		goto unclaim;
	j->oms_helper = h;
	return;
unclaim:
	atomic_fetch_sub(&oms_helpers, 1);
	free(h);
}

/* The helper's end: its result when keep, else it gives up. */
static void oms_join(vd_job *j, int keep)
{
	struct vd_oms_helper *h = j->oms_helper;

	if (h == NULL)
		return;
	if (!keep)
		atomic_store(&h->cancel, 1);
	pthread_join(h->tid, NULL);
	if (keep)
		oms_note(j, h->code, h->differ, &h->r);
	free(h);
	j->oms_helper = NULL;
}

/* Once the pass is done: the helper's result, or the check now. */
static void oms_end(const vd_pool *p, vd_job *j, int fd, int parent, int keep)
{
	if (j->oms_helper != NULL)
		oms_join(j, keep);
	else if (keep)
		check_oms(p, j, fd, parent);
}

/* The artifact for this slice, opened again by name each time; after
 * the first slice, the very one the job began on, or it went meanwhile.
 * An fd, or -errno (-ESTALE: another file has its name now) with the
 * job's outcome set. */
static int open_slice(const vd_pool *p, vd_job *j, int *parent, struct stat *st)
{
	int fd = open_artifact(p, j, parent);

	if (fd < 0 && j->resume == NULL) {
		open_failed(j, -fd);
		return fd;
	}
	if (fd >= 0 && fstat(fd, st) < 0)
		memset(st, 0, sizeof(*st));
	if (fd >= 0 && (j->resume == NULL || (st->st_dev == j->dev && st->st_ino == j->ino)))
		return fd;
	j->abandoned = VD_ABANDON_GONE;
	if (*parent >= 0)
		close(*parent);
	*parent = -1;
	if (fd < 0)
		return fd;
	close(fd);
	return -ESTALE;
}

/* A re-check on the first slice when the copy has a chunk map; else the
 * canonical pass, or its next part: VD_QUEUE_AGAIN when it paused. */
static enum vd_queue_step verify_slice(vd_queue *q, vd_job *j, int fd, progress_ctx *pc)
{
	vd_options opt = { 0 };
	sink_ctx sc = { q, j, NULL };
	vd_chunk_sink sink = { sink_start, sink_finish, &sc };

	if (j->resume == NULL && j->recheck != NULL &&
	    (j->rechecked = (recheck(q, j, fd) == VD_RECHECK_SAME)))
		return VD_QUEUE_DONE;
	opt.max_header_len = j->max_header_len;
	if (j->kind == VD_JOB_SCRUB)
		opt.flags |= VD_VERIFY_KEEP_CACHE_CLEAN;
	opt.progress = on_progress;
	opt.progress_arg = pc;
	j->pausing = 0;
	/* Nonzero: paused, its place in j->resume (the library's API). */
	if (vd_artifact_verify_part(fd, j->artifact == VD_KIND_TAR, &opt, &j->bounds,
	    &j->verdict, &sink, &j->resume) != 0)
		return VD_QUEUE_AGAIN;
	return VD_QUEUE_DONE;
}

/* A worker thread: one slice of the job; when done, the verdict and what
 * goes with it, into the job. */
static int run_job(vd_queue *q, vd_queue_item *item, void *arg)
{
	vd_pool *p = arg;
	vd_job *j = JOB_OF(item);
	progress_ctx pc = { q, p, j, mono_now(), NULL, 0, 0, 0, 0, j->hashed };
	char *path = NULL;
	enum vd_queue_step step = VD_QUEUE_DONE;
	struct stat st;
	int parent = -1, fd;

	if (j->resume == NULL)
		j->started = vd_wall_now();
	if ((fd = open_slice(p, j, &parent, &st)) < 0)
		goto out;
	/* Without the name (out of memory) the job is not abandoned when
	 * removed: the check after hashing still sees the change. */
	if (st.st_ino != 0 && asprintf(&path, "%s/%s", p->root, j->relpath) >= 0) {
		pc.path = path;
		pc.dev = st.st_dev;
		pc.ino = st.st_ino;
		pc.next_look = pc.t0 + VD_JOB_LOOK_SECONDS;
	} else {
		path = NULL;
	}
	pc.slice_end = pc.t0 + slice_length(j);
	if (j->resume == NULL) {
		fingerprint_fd(j, fd, parent, &j->fp_before);
		j->dev = st.st_dev;
		j->ino = st.st_ino;
		oms_begin(p, j, fd, parent);
	}
	if ((step = verify_slice(q, j, fd, &pc)) == VD_QUEUE_DONE) {
		oms_end(p, j, fd, parent, j->abandoned == VD_ABANDON_NONE && !vd_queue_cancelled(q));
		note_after(j, fd, parent);
	}
	close(fd);
	if (parent >= 0)
		close(parent);
	free(path);
out:
	j->duration += mono_now() - pc.t0;
	count_hashed(&pc);
	if (step == VD_QUEUE_AGAIN) {
		j->item.rank = j->hashed;
		atomic_fetch_add(&p->yields, 1);
		return VD_QUEUE_AGAIN;
	}
	if (j->abandoned != VD_ABANDON_NONE)
		describe_abandon(j);
	return VD_QUEUE_DONE;
}

/* The loop thread. */
static void job_done(vd_queue_item *item, void *arg)
{
	const vd_pool *p = arg;

	p->done(JOB_OF(item), p->arg);
}

static void job_discard(vd_queue_item *item, void *arg)
{
	vd_job_free(JOB_OF(item));
}

static void pool_free(void *arg)
{
	vd_pool *p = arg;

	free(p->root);
	free(p);
}

static const vd_queue_ops pool_ops = { "hasher", run_job, job_done, job_discard, pool_free };

void vd_pool_pace(vd_pool *p, const vd_turn *turn)
{
	vd_queue_pace(p->q, turn);
}

int vd_pool_new(uv_loop_t *loop, unsigned threads, const char *root,
    vd_pool_done_fn done, void *arg, vd_pool **out)
{
	vd_pool *p = calloc(1, sizeof(*p));
	int rc = -ENOMEM;

	if (p == NULL)
		return -ENOMEM;
	p->done = done;
	p->arg = arg;
	if ((p->root = strdup(root)) == NULL)
		goto fail;
	if ((rc = vd_queue_new(loop, threads, VD_URGENT_THREADS, &pool_ops, p, &p->q)) < 0)
		goto fail;
	*out = p;
	return 0;

fail:
	pool_free(p);
	return rc;
}

int vd_pool_submit(vd_pool *p, vd_job *j, unsigned queue_max)
{
	j->item.urgent = j->kind == VD_JOB_EXPLICIT;
	return vd_queue_submit(p->q, &j->item, queue_max);
}

int vd_pool_take_back(vd_pool *p, vd_job *j)
{
	return j->item.urgent ? -EBUSY : vd_queue_remove(p->q, &j->item);
}

void vd_pool_promote(vd_pool *p, vd_job *j)
{
	vd_queue_promote(p->q, &j->item);
}

void vd_pool_progress(vd_pool *p, uint64_t *bytes, uint64_t *yields)
{
	*bytes = atomic_load(&p->hashed);
	*yields = atomic_load(&p->yields);
}

unsigned vd_pool_queued(vd_pool *p)
{
	return vd_queue_queued(p->q);
}

unsigned vd_pool_busy(vd_pool *p)
{
	return vd_queue_busy(p->q);
}

unsigned vd_pool_threads(vd_pool *p)
{
	return vd_queue_threads(p->q);
}

/* The pool is freed when its queue has closed (pool_free). */
void vd_pool_stop(vd_pool *p, unsigned grace_ms)
{
	vd_queue_stop(p->q, grace_ms);
}

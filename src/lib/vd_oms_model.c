/*
 * OMS verification and signing of a model on disk (OMS sections 6 and 8):
 * the walk of the model, its files' digests, the comparison with a signed
 * manifest, and the bundle a key signs.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>

#include "vd_dsse.h"
#include "vd_hash.h"
#include "vd_jsonw.h"
#include "vd_mapping.h"
#include "vd_oms.h"
#include "vd_utf8.h"
#include "vd_x509.h"

#define QUOTE_MAX 160

/* OMS 6.2: excluded whatever the bundle says, matched at the top level. */
static const char *const default_ignores[] = { ".git", ".gitattributes", ".github", ".gitignore" };

struct entry {
	char *name;            /* relative to the model root; "." for a one-file model */
	uint64_t size;
	uint8_t *digests;      /* one per shard (one for files), digest_len each */
	size_t n_digests;
	int fd;                /* open while its digests are under way; else -1 */
};

struct model {
	const EVP_MD *md;
	size_t digest_len;
	uint64_t shard;        /* UINT64_MAX for files serialization */
	int allow_symlinks;
	char **ignore;
	size_t n_ignore;
	char root_real[PATH_MAX];
	/* verification with --ignore-unsigned-files: hash listed files only */
	const vd_oms_statement *listed;
	vd_oms_resource **ix;  /* resources by (path, start) */
	struct entry *e;
	size_t n, cap;
	size_t pend[VD_OMS_HASH_OPEN_MAX];   /* entries open, not yet hashed */
	size_t n_pend;
	unsigned jobs;                       /* threads hashing, the caller's included */
	const atomic_int *cancel;            /* set: give up (NULL: never) */
	vd_oms_result *r;
};

static vd_oms_code fail(vd_oms_result *r, vd_oms_code c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static vd_oms_code fail(vd_oms_result *r, vd_oms_code c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->detail, sizeof(r->detail), fmt, ap);
	va_end(ap);
	vd_utf8_sanitize(r->detail);
	r->code = c;
	return c;
}

/* fail() for functions that return 0 or -1. */
static int failn(vd_oms_result *r, vd_oms_code c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int failn(vd_oms_result *r, vd_oms_code c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->detail, sizeof(r->detail), fmt, ap);
	va_end(ap);
	vd_utf8_sanitize(r->detail);
	r->code = c;
	return -1;
}

/* One difference more; the first ones are kept as sentences. */
static void differ(vd_oms_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void differ(vd_oms_result *r, const char *fmt, ...)
{
	va_list ap;

	if (r->n_diffs < VD_OMS_MAX_DIFFS) {
		va_start(ap, fmt);
		vsnprintf(r->diffs[r->n_diffs], VD_DETAIL_MAX, fmt, ap);
		va_end(ap);
		vd_utf8_sanitize(r->diffs[r->n_diffs]);
	}
	r->n_diffs++;
}

static int q(const char *s)
{
	size_t n = strlen(s);

	return (int)(n < QUOTE_MAX ? n : QUOTE_MAX);
}

static void model_free(struct model *m)
{
	size_t i;

	for (i = 0; i < m->n; i++) {
		free(m->e[i].name);
		free(m->e[i].digests);
		if (m->e[i].fd >= 0)
			close(m->e[i].fd);
	}
	free(m->e);
	for (i = 0; i < m->n_ignore; i++)
		free(m->ignore[i]);
	free(m->ignore);
	free(m->ix);
}

static int add_ignore(struct model *m, const char *p)
{
	size_t i;
	char *c;

	for (i = 0; i < m->n_ignore; i++)
		if (strcmp(m->ignore[i], p) == 0)
			return 0;
	if (m->n_ignore >= 2 * VD_OMS_MAX_IGNORE + VD_ARRAY_LEN(default_ignores) + 1)
		return -1;
	if ((c = strdup(p)) == NULL)
		return -1;
	m->ignore[m->n_ignore++] = c;
	return 0;
}

static int ignores_init(struct model *m, char *const *a, size_t na,
    const char *const *b, size_t nb, const char *sig_rel)
{
	size_t i, cap = 2 * VD_OMS_MAX_IGNORE + VD_ARRAY_LEN(default_ignores) + 1;

	if (na > VD_OMS_MAX_IGNORE || nb > VD_OMS_MAX_IGNORE ||
	    (m->ignore = calloc(cap, sizeof(*m->ignore))) == NULL)
		return -1;
	for (i = 0; i < VD_ARRAY_LEN(default_ignores); i++)
		if (add_ignore(m, default_ignores[i]) < 0)
			return -1;
	for (i = 0; i < na; i++)
		if (add_ignore(m, a[i]) < 0)
			return -1;
	for (i = 0; i < nb; i++)
		if (add_ignore(m, b[i]) < 0)
			return -1;
	return sig_rel != NULL && *sig_rel ? add_ignore(m, sig_rel) : 0;
}

/* ---- hashing --------------------------------------------------------------
 *
 * The walk opens each file and leaves it pending; once VD_OMS_HASH_OPEN_MAX
 * wait, or the walk ends, the batch is hashed by m->jobs threads taking
 * tasks in turn: a whole file (files), or one shard (shards). A range of
 * VD_OMS_MAP_MIN bytes or more is hashed in place from a mapping of its
 * own, under the SIGBUS guard, each step dropped from it once hashed:
 * copying it out first with pread cost a tenth more CPU than SHA-256
 * itself, which made the daemon's bundle check outlast the canonical pass
 * beside it. Smaller ones, and what a file grew by, are read with pread
 * into a buffer of the thread's own, so that tasks share no file offset.
 * Digests land in their own slots, so the result does not depend on which
 * thread ran what; of the tasks that fail, the first in walk order is the
 * one reported, as one thread reading the files in turn would report it.
 * A failure of the walk itself (a link refused, a file that will not
 * open) stops it before its pending files are read.
 */

/* NULL when this OpenSSL's providers lack the digest (BLAKE2b is not in
 * the FIPS provider). */
static const EVP_MD *hash_md(vd_oms_hash h)
{
	EVP_MD *md;

	if (h != VD_OMS_BLAKE2B)
		return EVP_sha256();
	if ((md = EVP_MD_fetch(NULL, "BLAKE2B-512", NULL)) == NULL)
		return NULL;
	EVP_MD_free(md);
	return EVP_blake2b512();
}

static const char *hash_name(vd_oms_hash h)
{
	return h == VD_OMS_BLAKE2B ? "blake2b" : "sha256";
}

struct batch {
	struct model *m;
	size_t first[VD_OMS_HASH_OPEN_MAX + 1];  /* pending file i: tasks [first[i], first[i + 1]) */
	size_t n_tasks;
	atomic_size_t next;        /* the next task to take */
	atomic_size_t failed;      /* the first task that failed; n_tasks when none */
	int err;                   /* its -errno, under lock */
	pthread_mutex_t lock;
	atomic_uint_least64_t bytes;
};

struct hasher {
	EVP_MD_CTX *ctx;
	uint8_t *buf;
};

static size_t shard_count(const struct model *m, uint64_t size)
{
	/* Not (size + shard - 1) / shard: a bundle's shard size may be huge. */
	return m->shard == UINT64_MAX ? 1 : (size_t)(size / m->shard + (size % m->shard != 0));
}

/* The pending file a task belongs to. */
static size_t task_file(const struct batch *b, size_t t)
{
	size_t lo = 0, hi = b->m->n_pend, mid;

	while (hi - lo > 1) {
		mid = lo + (hi - lo) / 2;
		if (b->first[mid] <= t)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

static int cancelled(const struct model *m)
{
	return m->cancel != NULL && atomic_load(m->cancel);
}

/* The mapping's bytes [from, to) into ctx, each page dropped from the
 * mapping once hashed (*dropped: how far they are). 0 or -errno. */
static int hash_in_place(const struct model *m, struct hasher *h, uint8_t *p, size_t from,
    size_t to, size_t *dropped, uint64_t ps)
{
	size_t step, drop;

	for (; from < to; from += step) {
		step = to - from < VD_DIGEST_STEP ? to - from : VD_DIGEST_STEP;
		if (cancelled(m))
			return -ECANCELED;
		if (EVP_DigestUpdate(h->ctx, p + from, step) != 1)
			return -ENOMEM;
		/* Resident memory stays one step per thread; the page cache
		 * keeps the pages. */
		if ((drop = (size_t)((from + step) / ps * ps)) > *dropped) {
			vd_mapping_drop(p, *dropped, drop - *dropped, ps);
			*dropped = drop;
		}
	}
	return 0;
}

/* n bytes of fd from file_off into ctx through the thread's buffer. 0,
 * -errno, or -EAGAIN when the file ends first. */
static int hash_read(const struct model *m, struct hasher *h, int fd, uint64_t file_off,
    uint64_t n)
{
	uint64_t done = 0;
	ssize_t got;

	while (done < n) {
		size_t want = n - done < VD_OMS_READ_STEP ? (size_t)(n - done) : VD_OMS_READ_STEP;

		if (cancelled(m))
			return -ECANCELED;
		if ((got = pread(fd, h->buf, want, (off_t)(file_off + done))) < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? -errno : -EAGAIN;
		if (EVP_DigestUpdate(h->ctx, h->buf, (size_t)got) != 1)
			return -ENOMEM;
		done += (uint64_t)got;
	}
	return 0;
}

/* Bytes [off, off + len) of fd into ctx from a mapping: len, -errno, or
 * -EAGAIN when the file shrank under it; 0 when it cannot be mapped (the
 * caller reads it instead). A fault leaves ctx midway: the task fails.
 * The page cache may hold a file in 4 KiB pages (one written by cp, say),
 * whose faults cost more than pread's copy. As the canonical pass does,
 * every VD_PAGE_PROBE_EVERY bytes the next VD_PAGE_PROBE are hashed in
 * place with their faults counted; above VD_SMALL_PAGE_FAULTS per MiB the
 * rest of that stretch is read with pread instead. */
static int64_t hash_mapped(const struct model *m, struct hasher *h, int fd, uint64_t off,
    uint64_t len)
{
	uint64_t ps = (uint64_t)sysconf(_SC_PAGESIZE), at = off / ps * ps;
	size_t n = (size_t)(off - at + len);
	uint8_t *p;
	vd_bus_guard g, *prev;
	volatile int64_t rc = -EAGAIN;

	if (off - at + len > SIZE_MAX ||
	    (p = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, (off_t)at)) == MAP_FAILED)
		return 0;
	madvise(p, n, MADV_SEQUENTIAL);
	memset(&g, 0, sizeof(g));
	g.lo = (uintptr_t)p;
	g.hi = (uintptr_t)p + n;
	vd_bus_guard_lazily();
	prev = vd_bus_guard_push(&g);
	if (sigsetjmp(g.jb, 1) == 0) {
		size_t at_byte = (size_t)(off - at), dropped = 0, probe, stretch;
		uint64_t f0;
		int err = 0;

		while (err == 0 && at_byte < n) {
			stretch = n - at_byte < VD_PAGE_PROBE_EVERY ? n - at_byte : VD_PAGE_PROBE_EVERY;
			probe = stretch < VD_PAGE_PROBE ? stretch : VD_PAGE_PROBE;
			f0 = vd_thread_minor_faults();
			err = hash_in_place(m, h, p, at_byte, at_byte + probe, &dropped, ps);
			if (err == 0 && stretch > probe &&
			    vd_thread_minor_faults() - f0 > (uint64_t)VD_SMALL_PAGE_FAULTS * (probe >> 20))
				err = hash_read(m, h, fd, at + at_byte + probe, stretch - probe);
			else if (err == 0)
				err = hash_in_place(m, h, p, at_byte + probe, at_byte + stretch, &dropped, ps);
			at_byte += stretch;
		}
		rc = err != 0 ? err : (int64_t)len;
	}
	vd_bus_guard_pop(prev);
	munmap(p, n);
	return rc;
}

/* Bytes [off, off + len) of fd into ctx; a file shorter than that changed
 * meanwhile, unless len is UINT64_MAX (to the end, files: the first size
 * bytes from a mapping, what it grew by since read). The bytes read, or
 * -errno. */
static int64_t hash_range(const struct model *m, struct hasher *h, int fd, uint64_t off,
    uint64_t len, uint64_t size)
{
	uint64_t done = 0, mapped = len == UINT64_MAX ? size : len;
	int64_t got;

	if (mapped >= VD_OMS_MAP_MIN && (got = hash_mapped(m, h, fd, off, mapped)) != 0) {
		if (got < 0)
			return got;
		done = (uint64_t)got;
	}
	while (done < len) {
		size_t want = len - done < VD_OMS_READ_STEP ? (size_t)(len - done) : VD_OMS_READ_STEP;

		if (cancelled(m))
			return -ECANCELED;
		if ((got = pread(fd, h->buf, want, (off_t)(off + done))) < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			return len == UINT64_MAX ? (int64_t)done : -EAGAIN;
		if (EVP_DigestUpdate(h->ctx, h->buf, (size_t)got) != 1)
			return -ENOMEM;
		done += (uint64_t)got;
	}
	return (int64_t)done;
}

/* Task t: its digest into its slot. 0, or -errno (-EAGAIN: the file
 * changed while it was read). */
static int run_task(struct batch *b, struct hasher *h, size_t t)
{
	struct model *m = b->m;
	size_t f = task_file(b, t), k = t - b->first[f];
	struct entry *e = &m->e[m->pend[f]];
	uint64_t start = m->shard == UINT64_MAX ? 0 : k * m->shard;
	uint64_t len = m->shard == UINT64_MAX ? UINT64_MAX :
	    e->size - start < m->shard ? e->size - start : m->shard;
	unsigned int n;
	int64_t got;

	if (EVP_DigestInit_ex(h->ctx, m->md, NULL) != 1)
		return -ENOMEM;
	if ((got = hash_range(m, h, e->fd, start, len, e->size)) < 0)
		return (int)got;
	atomic_fetch_add(&b->bytes, (uint64_t)got);
	if (m->shard == UINT64_MAX)
		e->size = (uint64_t)got;        /* this task's alone */
	else if (t + 1 == b->first[f + 1] && (got = pread(e->fd, h->buf, 1,
	    (off_t)(start + len))) != 0)
		return got < 0 ? -errno : -EAGAIN;    /* it grew past its last shard */
	/* An empty file has no shard (OMS 6.3.2): its task only checks that. */
	if (m->shard != UINT64_MAX && e->size == 0)
		return 0;
	return EVP_DigestFinal_ex(h->ctx, e->digests + k * m->digest_len, &n) == 1 &&
	    n == m->digest_len ? 0 : -ENOMEM;
}

static void task_failed(struct batch *b, size_t t, int err)
{
	pthread_mutex_lock(&b->lock);
	if (t < atomic_load(&b->failed)) {
		atomic_store(&b->failed, t);
		b->err = err;
	}
	pthread_mutex_unlock(&b->lock);
}

/* Tasks in turn until none is left. One that cannot start a hasher still
 * takes tasks, to fail them: every task ends done or failed. */
static void *hash_tasks(void *arg)
{
	struct batch *b = arg;
	struct hasher h = { EVP_MD_CTX_new(), malloc(VD_OMS_READ_STEP) };
	size_t t;
	int rc;

	while ((t = atomic_fetch_add(&b->next, 1)) < b->n_tasks) {
		if (t > atomic_load(&b->failed))
			continue;           /* a failure before it is reported anyway */
		rc = h.ctx == NULL || h.buf == NULL ? -ENOMEM : run_task(b, &h, t);
		if (rc < 0)
			task_failed(b, t, rc);
	}
	EVP_MD_CTX_free(h.ctx);
	free(h.buf);
	return NULL;
}

/* The caller's thread and up to jobs - 1 more, as many as there are
 * tasks for; fewer when a thread cannot start. */
static void run_batch(struct batch *b, unsigned jobs)
{
	pthread_t tid[VD_OMS_JOBS_MAX];
	size_t n = 0, i, want = jobs < b->n_tasks ? jobs : b->n_tasks;

	while (n + 1 < want && pthread_create(&tid[n], NULL, hash_tasks, b) == 0)
		n++;
	hash_tasks(b);
	for (i = 0; i < n; i++)
		pthread_join(tid[i], NULL);
}

static int read_failed(struct model *m, const char *rel, int err)
{
	return failn(m->r, VD_OMS_UNREADABLE, err == -EAGAIN ? "\"%.*s\" changed while it was read" :
	    "cannot read \"%.*s\": %s", q(rel), rel, strerror(-err));
}

/* The pending files hashed and closed. 0, or -1 with the first failure. */
static int flush_pending(struct model *m)
{
	struct batch *b;
	size_t i;
	int rc = 0;

	if (m->n_pend == 0)
		return 0;
	if ((b = calloc(1, sizeof(*b))) == NULL || pthread_mutex_init(&b->lock, NULL) != 0) {
		free(b);
		return failn(m->r, VD_OMS_UNREADABLE, "out of memory");
	}
	b->m = m;
	for (i = 0; i < m->n_pend; i++) {
		const struct entry *e = &m->e[m->pend[i]];

		/* An empty file still has a task: whether it grew. */
		b->first[i + 1] = b->first[i] + (e->size == 0 ? 1 : shard_count(m, e->size));
	}
	b->n_tasks = b->first[m->n_pend];
	atomic_init(&b->next, 0);
	atomic_init(&b->failed, b->n_tasks);
	atomic_init(&b->bytes, 0);
	run_batch(b, m->jobs);
	m->r->bytes += atomic_load(&b->bytes);
	if ((i = atomic_load(&b->failed)) < b->n_tasks)
		rc = read_failed(m, m->e[m->pend[task_file(b, i)]].name, b->err);
	for (i = 0; i < m->n_pend; i++) {
		close(m->e[m->pend[i]].fd);
		m->e[m->pend[i]].fd = -1;
	}
	m->n_pend = 0;
	pthread_mutex_destroy(&b->lock);
	free(b);
	return rc;
}

/* fd (which this takes) waits with the pending files; a full batch is
 * hashed. Its size is fixed now: shards are cut from it. */
static int pend_file(struct model *m, struct entry *e, int fd, const char *rel)
{
	struct stat st;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return read_failed(m, rel, -EINVAL);
	}
	e->size = (uint64_t)st.st_size;
	e->n_digests = m->shard == UINT64_MAX ? 1 : shard_count(m, e->size);
	if ((e->digests = malloc(e->n_digests * m->digest_len + 1)) == NULL) {
		close(fd);
		return failn(m->r, VD_OMS_UNREADABLE, "out of memory");
	}
	e->fd = fd;
	m->pend[m->n_pend++] = (size_t)(e - m->e);
	return m->n_pend == VD_OMS_HASH_OPEN_MAX ? flush_pending(m) : 0;
}

/* ---- the walk ------------------------------------------------------------ */

static int path_cmp_str(const vd_oms_resource *r, const char *path)
{
	size_t n = strlen(path), m = r->path_len < n ? r->path_len : n;
	int c = memcmp(r->name, path, m);

	return c != 0 ? c : (r->path_len > n) - (r->path_len < n);
}

/* The first resource whose path is path, in m->ix; its index or -1. */
static long find_path(const struct model *m, const char *path)
{
	size_t lo = 0, hi = m->listed->n_res, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (path_cmp_str(m->ix[mid], path) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < m->listed->n_res && path_cmp_str(m->ix[lo], path) == 0 ? (long)lo : -1;
}

static struct entry *add_entry(struct model *m, const char *rel)
{
	struct entry *e;

	if (m->n >= VD_OMS_MAX_FILES) {
		fail(m->r, VD_OMS_UNREADABLE, "the model holds more than %u files", VD_OMS_MAX_FILES);
		return NULL;
	}
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 64;

		if ((e = realloc(m->e, cap * sizeof(*e))) == NULL)
			goto oom;
		m->e = e;
		m->cap = cap;
	}
	e = &m->e[m->n];
	memset(e, 0, sizeof(*e));
	e->fd = -1;
	if ((e->name = strdup(rel)) == NULL)
		goto oom;
	m->n++;
	return e;
oom:
	fail(m->r, VD_OMS_UNREADABLE, "out of memory");
	return NULL;
}

/* fd is the entry's from here: pending, or closed. */
static int hash_entry(struct model *m, int fd, const char *rel)
{
	struct entry *e = add_entry(m, rel);

	if (e == NULL) {
		close(fd);
		return -1;
	}
	/* An unlisted file needs no digest: it differs whatever its bytes
	 * (or, with --ignore-unsigned-files, does not count). */
	if (m->listed != NULL && strcmp(rel, ".") != 0 && find_path(m, rel) < 0) {
		close(fd);
		return 0;
	}
	return pend_file(m, e, fd, rel);
}

/* A symbolic link the bundle allows: followed to a regular file inside
 * the model root, never out of it. */
static int follow_link(struct model *m, const char *rel)
{
	char full[PATH_MAX * 2], real[PATH_MAX];
	size_t rl = strlen(m->root_real);
	int fd;

	snprintf(full, sizeof(full), "%s/%s", m->root_real, rel);
	if (realpath(full, real) == NULL)
		return failn(m->r, VD_OMS_MISMATCH, "symbolic link \"%.*s\" leads nowhere", q(rel), rel);
	if (strncmp(real, m->root_real, rl) != 0 || real[rl] != '/')
		return failn(m->r, VD_OMS_MISMATCH, "symbolic link \"%.*s\" leads out of the model",
		    q(rel), rel);
	if ((fd = open(real, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)) < 0)
		return failn(m->r, VD_OMS_MISMATCH, "symbolic link \"%.*s\" does not lead to a "
		    "regular file", q(rel), rel);
	return hash_entry(m, fd, rel);
}

static int walk_dir(struct model *m, int dfd, const char *prefix, unsigned depth);

static int walk_one(struct model *m, int dfd, const char *name, const char *rel, unsigned depth)
{
	struct stat st;
	int fd;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return failn(m->r, VD_OMS_UNREADABLE, "cannot read \"%.*s\": %s", q(rel), rel,
		    strerror(errno));
	if (S_ISLNK(st.st_mode)) {
		if (!m->allow_symlinks)
			return failn(m->r, VD_OMS_MISMATCH, "\"%.*s\" is a symbolic link; symbolic "
			    "links are refused", q(rel), rel);
		return follow_link(m, rel);
	}
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return failn(m->r, VD_OMS_MISMATCH, "\"%.*s\" is neither a regular file nor a "
		    "directory", q(rel), rel);
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK |
	    (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
	if (fd < 0)
		return failn(m->r, VD_OMS_UNREADABLE, "cannot open \"%.*s\": %s", q(rel), rel,
		    strerror(errno));
	if (S_ISDIR(st.st_mode))
		return walk_dir(m, fd, rel, depth + 1);     /* walk_dir closes fd */
	return hash_entry(m, fd, rel);
}

/* The regular files below dfd (which this closes), in no order. */
static int walk_dir(struct model *m, int dfd, const char *prefix, unsigned depth)
{
	char rel[VD_OMS_MAX_NAME + 2];
	struct dirent *de;
	DIR *d;
	int rc = 0;

	if (depth > VD_OMS_MAX_DIR_DEPTH) {
		close(dfd);
		return failn(m->r, VD_OMS_UNREADABLE, "the model nests directories deeper than %u "
		    "levels", VD_OMS_MAX_DIR_DEPTH);
	}
	if ((d = fdopendir(dfd)) == NULL) {
		close(dfd);
		return failn(m->r, VD_OMS_UNREADABLE, "cannot read directory \"%.*s\": %s",
		    q(prefix), prefix, strerror(errno));
	}
	while (rc == 0 && (errno = 0, de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (snprintf(rel, sizeof(rel), "%s%s%s", prefix, *prefix ? "/" : "", de->d_name) >
		    VD_OMS_MAX_NAME || !vd_oms_path_valid(rel, strlen(rel)))
			rc = failn(m->r, VD_OMS_MISMATCH, "\"%.*s\" is not a path a manifest can name "
			    "(not UTF-8, or too long)", q(rel), rel);
		else if (!vd_oms_ignored(rel, m->ignore, m->n_ignore))
			rc = walk_one(m, dirfd(d), de->d_name, rel, depth);
	}
	if (rc == 0 && errno != 0)
		rc = failn(m->r, VD_OMS_UNREADABLE, "cannot read directory \"%.*s\": %s",
		    q(prefix), prefix, strerror(errno));
	closedir(d);
	return rc;
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

/* The model at path: a directory walked, or one file named ".". */
static int walk_model(struct model *m, const char *path, int *is_dir)
{
	struct stat st;
	int fd, rc;

	if (lstat(path, &st) < 0)
		return failn(m->r, VD_OMS_UNREADABLE, "cannot read %s: %s", path, strerror(errno));
	if (S_ISLNK(st.st_mode))
		return failn(m->r, VD_OMS_UNREADABLE, "%s is a symbolic link; give the model's "
		    "own path", path);
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return failn(m->r, VD_OMS_UNREADABLE, "%s is neither a directory nor a regular file",
		    path);
	*is_dir = S_ISDIR(st.st_mode);
	if (realpath(path, m->root_real) == NULL)
		return failn(m->r, VD_OMS_UNREADABLE, "cannot resolve %s: %s", path, strerror(errno));
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | (*is_dir ? O_DIRECTORY : 0));
	if (fd < 0)
		return failn(m->r, VD_OMS_UNREADABLE, "cannot open %s: %s", path, strerror(errno));
	rc = *is_dir ? walk_dir(m, fd, "", 0) : hash_entry(m, fd, ".");
	if (rc == 0)
		rc = flush_pending(m);
	if (rc == 0 && m->n > 1)
		qsort(m->e, m->n, sizeof(*m->e), entry_cmp);
	m->r->files = m->n;
	return rc;
}

/* The signature's path relative to the model root when it lies inside
 * it (it is then excluded, OMS 6.2); "" otherwise. */
static void signature_rel(const char *root_real, const char *sig, char *out, size_t n)
{
	char dir[PATH_MAX], real[PATH_MAX];
	const char *slash = strrchr(sig, '/'), *base = slash ? slash + 1 : sig;
	size_t rl = strlen(root_real);

	*out = '\0';
	snprintf(dir, sizeof(dir), "%.*s", slash == NULL ? 1 : slash == sig ? 1 : (int)(slash - sig),
	    slash == NULL ? "." : sig);
	if (realpath(dir, real) == NULL)
		return;
	if (strcmp(real, root_real) == 0)
		snprintf(out, n, "%s", base);
	else if (strncmp(real, root_real, rl) == 0 && real[rl] == '/')
		snprintf(out, n, "%s/%s", real + rl + 1, base);
}

/* ---- comparison with the manifest --------------------------------------- */

static int ix_cmp(const void *x, const void *y)
{
	const vd_oms_resource *a = *(vd_oms_resource *const *)x, *b = *(vd_oms_resource *const *)y;
	size_t m = a->path_len < b->path_len ? a->path_len : b->path_len;
	int c = memcmp(a->name, b->name, m);

	if (c == 0)
		c = (a->path_len > b->path_len) - (a->path_len < b->path_len);
	return c != 0 ? c : (a->start > b->start) - (a->start < b->start);
}

static int index_resources(struct model *m, const vd_oms_statement *s)
{
	size_t i;

	if ((m->ix = malloc((s->n_res + 1) * sizeof(*m->ix))) == NULL)
		return -1;
	for (i = 0; i < s->n_res; i++)
		m->ix[i] = &s->res[i];
	qsort(m->ix, s->n_res, sizeof(*m->ix), ix_cmp);
	return 0;
}

static void hex_of(const uint8_t *d, size_t n, char *out)
{
	vd_hex(d, n, out);
}

static void compare_digest(vd_oms_result *r, const struct entry *e, const vd_oms_resource *res,
    const uint8_t *got, size_t dlen, const vd_oms_statement *s)
{
	char want[2 * VD_OMS_DIGEST_MAX + 1], have[2 * VD_OMS_DIGEST_MAX + 1];

	if (memcmp(got, res->digest, dlen) == 0)
		return;
	hex_of(res->digest, dlen, want);
	hex_of(got, dlen, have);
	if (s->shards)
		differ(r, "\"%.*s\" bytes %" PRIu64 "..%" PRIu64 " differ from the signature: %s %s, "
		    "signed %s", q(e->name), e->name, res->start, res->end, hash_name(s->hash), have, want);
	else
		differ(r, "\"%.*s\" differs from the signature: its %s is %s, the signature says %s",
		    q(e->name), e->name, hash_name(s->hash), have, want);
}

/* One local file against the resources of its path, ix[lo..hi). */
static void compare_entry(struct model *m, const struct entry *e, size_t lo, size_t hi,
    unsigned char *seen, const vd_oms_statement *s)
{
	size_t i, k = hi - lo;
	int ranges_ok = k == e->n_digests;

	for (i = lo; i < hi; i++)
		seen[m->ix[i] - s->res] = 1;
	if (!s->shards) {
		compare_digest(m->r, e, m->ix[lo], e->digests, m->digest_len, s);
		return;
	}
	for (i = 0; ranges_ok && i < k; i++) {
		uint64_t start = i * s->shard_size, end = start + s->shard_size;

		ranges_ok = m->ix[lo + i]->start == start &&
		    m->ix[lo + i]->end == (end < e->size ? end : e->size);
	}
	if (!ranges_ok) {
		differ(m->r, "\"%.*s\" is %" PRIu64 " bytes long; the signature's shards of it end "
		    "at byte %" PRIu64, q(e->name), e->name, e->size, m->ix[hi - 1]->end);
		return;
	}
	for (i = 0; i < k; i++)
		compare_digest(m->r, e, m->ix[lo + i], e->digests + i * m->digest_len,
		    m->digest_len, s);
}

static void unlisted(struct model *m, const struct entry *e, int ignore_unsigned,
    const vd_oms_statement *s)
{
	/* An empty file has no shards (OMS 6.3.2): nothing to list. */
	if (ignore_unsigned || (s->shards && e->size == 0))
		return;
	differ(m->r, "\"%.*s\" is not in the signature (a file added, or one to ignore)",
	    q(e->name), e->name);
}

/* Resources no local file answered: missing, or named what is not a file. */
static void report_missing(struct model *m, const vd_oms_statement *s, const unsigned char *seen,
    int root_fd)
{
	char path[VD_OMS_MAX_NAME + 1];
	struct stat st;
	size_t i;

	for (i = 0; i < s->n_res; i++) {
		const vd_oms_resource *r = m->ix[i];

		if (seen[r - s->res])
			continue;
		if (i > 0 && m->ix[i - 1]->path_len == r->path_len &&
		    memcmp(m->ix[i - 1]->name, r->name, r->path_len) == 0)
			continue;          /* one sentence per file, not per shard */
		snprintf(path, sizeof(path), "%.*s", (int)r->path_len, r->name);
		if (strcmp(path, ".") == 0)
			differ(m->r, "the signature is for a one-file model, not a directory");
		else if (vd_oms_ignored(path, m->ignore, m->n_ignore))
			differ(m->r, "\"%.*s\" is in the signature but excluded by an ignore path",
			    q(path), path);
		else if (root_fd >= 0 && fstatat(root_fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode))
			differ(m->r, "resource \"%.*s\" names a directory, not a file", q(path), path);
		else
			differ(m->r, "\"%.*s\" is in the signature but missing from the model",
			    q(path), path);
	}
}

static vd_oms_code compare(struct model *m, const vd_oms_statement *s, const char *path,
    int is_dir, int ignore_unsigned)
{
	unsigned char *seen = calloc(s->n_res + 1, 1);
	size_t i, lo, hi;
	long f;
	int root_fd;

	if (seen == NULL)
		return fail(m->r, VD_OMS_UNREADABLE, "out of memory");
	for (i = 0; i < m->n; i++) {
		if ((f = find_path(m, m->e[i].name)) < 0) {
			unlisted(m, &m->e[i], ignore_unsigned, s);
			continue;
		}
		lo = (size_t)f;
		for (hi = lo + 1; hi < s->n_res && m->ix[hi]->path_len == m->ix[lo]->path_len &&
		    memcmp(m->ix[hi]->name, m->ix[lo]->name, m->ix[lo]->path_len) == 0; hi++)
			;
		compare_entry(m, &m->e[i], lo, hi, seen, s);
	}
	root_fd = is_dir ? open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
	report_missing(m, s, seen, root_fd);
	if (root_fd >= 0)
		close(root_fd);
	free(seen);
	if (m->r->n_diffs == 0)
		return VD_OMS_OK;
	snprintf(m->r->detail, sizeof(m->r->detail), "%s%s", m->r->diffs[0],
	    m->r->n_diffs > 1 ? " (and more differences)" : "");
	return m->r->code = VD_OMS_MISMATCH;
}

/* ---- verification -------------------------------------------------------- */

static void result_init(vd_oms_result *r)
{
	memset(r, 0, sizeof(*r));
	r->method = "";
	r->serialization = "";
	r->hash_type = "";
}

static int default_signature(const char *path, const char *given, char *out, size_t n,
    vd_oms_result *r)
{
	struct stat st;

	if (given != NULL) {
		snprintf(out, n, "%s", given);
		return 0;
	}
	if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode))
		return failn(r, VD_OMS_UNREADABLE, "%s is a single file: give its signature "
		    "file", path);
	if (snprintf(out, n, "%s/%s", path, VD_OMS_SIGNATURE_NAME) >= (int)n)
		return failn(r, VD_OMS_UNREADABLE, "%s: the path is too long", path);
	return 0;
}

static vd_oms_code read_bundle(const char *sig, vd_oms_bundle *b, vd_oms_result *r)
{
	char why[VD_DETAIL_MAX];
	vd_oms_code c;
	vd_buf buf;
	int rc;

	vd_buf_init(&buf);
	if ((rc = vd_read_file(sig, VD_OMS_MAX_BYTES, &buf)) < 0) {
		vd_buf_free(&buf);
		if (rc == -EFBIG)
			return fail(r, VD_OMS_MALFORMED, "the signature %s is larger than %u bytes",
			    sig, VD_OMS_MAX_BYTES);
		return fail(r, VD_OMS_UNREADABLE, "cannot read the signature %s: %s", sig,
		    rc == -EINVAL ? "not a regular file" : strerror(-rc));
	}
	c = vd_oms_bundle_parse(buf.p, buf.len, b, why, sizeof(why));
	vd_buf_free(&buf);
	return c == VD_OMS_OK ? c : fail(r, c, "%s", why);
}

static int ec_key(const vd_key *k)
{
	return vd_key_get_type(k) != VD_KEY_ED25519;
}

/* pre-v1.1 bundles carry the key itself, PEM text or DER. */
static vd_oms_code check_raw_key(const vd_oms_bundle *b, const vd_key *k, vd_oms_result *r)
{
	char err[VD_DETAIL_MAX];
	vd_key *raw = NULL;
	int same;

	if (vd_key_from_pem_any(b->raw_key.p, b->raw_key.len, 0, &raw, err, sizeof(err)) < 0 &&
	    vd_key_from_spki_der(b->raw_key.p, b->raw_key.len, &raw, err, sizeof(err)) < 0)
		return fail(r, VD_OMS_MALFORMED, "the bundle's publicKey.rawBytes is not a public key");
	same = vd_key_equal(raw, k);
	vd_key_free(raw);
	return same ? VD_OMS_OK : fail(r, VD_OMS_KEY_MISMATCH, "the bundle's publicKey.rawBytes "
	    "hold another public key than the one given");
}

static vd_oms_code signer_by_key(const vd_oms_bundle *b, const vd_oms_verify_opts *o,
    vd_oms_result *r)
{
	if (b->method != VD_OMS_METHOD_KEY)
		return fail(r, VD_OMS_KEY_MISMATCH, "the bundle is signed by a certificate chain, "
		    "not a bare public key: verify it against a CA certificate");
	if (!ec_key(o->key))
		return fail(r, VD_OMS_UNSUPPORTED, "OMS bundles are signed with ECDSA keys "
		    "(P-256, P-384, P-521); the key given is Ed25519");
	if (vd_key_pem_hint(o->key, r->key_id) < 0)
		return fail(r, VD_OMS_UNREADABLE, "out of memory");
	if (b->hint[0] != '\0' && strcmp(b->hint, r->key_id) != 0)
		return fail(r, VD_OMS_KEY_MISMATCH, "the bundle names key %s, not the key given (%s)",
		    b->hint, r->key_id);
	return b->raw_key.len > 0 ? check_raw_key(b, o->key, r) : VD_OMS_OK;
}

static vd_oms_code signer_by_chain(const vd_oms_bundle *b, const vd_oms_verify_opts *o,
    vd_key **leaf, vd_oms_result *r)
{
	const uint8_t *certs[VD_OMS_MAX_CERTS];
	size_t lens[VD_OMS_MAX_CERTS], i;
	char why[VD_DETAIL_MAX];
	vd_x509_anchors *a;
	int rc;

	if (b->method != VD_OMS_METHOD_CERTIFICATE)
		return fail(r, VD_OMS_KEY_MISMATCH, "the bundle names a public key, not a "
		    "certificate chain: verify it with the public key");
	if ((a = vd_x509_anchors_load(o->ca_file, why, sizeof(why))) == NULL)
		return fail(r, VD_OMS_UNREADABLE, "%s", why);
	for (i = 0; i < b->n_certs; i++) {
		certs[i] = b->certs[i].p;
		lens[i] = b->certs[i].len;
	}
	rc = vd_x509_verify_chain(a, certs, lens, b->n_certs, o->now ? o->now : time(NULL),
	    leaf, why, sizeof(why));
	vd_x509_anchors_free(a);
	if (rc < 0)
		return fail(r, rc == VD_X509_EMALFORMED ? VD_OMS_MALFORMED : VD_OMS_UNTRUSTED, "%s", why);
	if (!ec_key(*leaf))
		return fail(r, VD_OMS_UNSUPPORTED, "the leaf certificate's key is not an ECDSA key");
	return vd_key_pem_hint(*leaf, r->key_id) < 0 ? fail(r, VD_OMS_UNREADABLE, "out of memory")
	    : VD_OMS_OK;
}

static vd_oms_code check_signature(const vd_oms_bundle *b, const vd_key *k, vd_oms_result *r)
{
	vd_buf pae;
	int ok;

	vd_buf_init(&pae);
	if (vd_dsse_pae(VD_PT_INTOTO, b->payload.p, b->payload.len, &pae) < 0) {
		vd_buf_free(&pae);
		return fail(r, VD_OMS_UNREADABLE, "out of memory");
	}
	ok = vd_key_verify_any(k, pae.p, pae.len, b->sig.p, b->sig.len);
	vd_buf_free(&pae);
	return ok ? VD_OMS_OK : fail(r, VD_OMS_BAD_SIGNATURE, "the DSSE signature does not "
	    "verify with %s %s", vd_key_type_name(vd_key_get_type(k)), r->key_id);
}

static void describe(vd_oms_result *r, const vd_oms_statement *s)
{
	snprintf(r->subject, sizeof(r->subject), "%s", s->subject);
	memcpy(r->root_digest, s->root_digest, sizeof(r->root_digest));
	r->serialization = s->shards ? "shards" : "files";
	r->hash_type = hash_name(s->hash);
	r->shard_size = s->shard_size;
	r->resources = s->n_res;
}

/* A one-file model is named "." by model_signing, its file name by OMS
 * 6.1.2: the local name follows the manifest. */
static void name_single(struct model *m, const vd_oms_statement *s, const char *path)
{
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	char *dup;

	if (m->n != 1 || s->res[0].path_len != strlen(base) ||
	    memcmp(s->res[0].name, base, s->res[0].path_len) != 0 || (dup = strdup(base)) == NULL)
		return;
	free(m->e[0].name);
	m->e[0].name = dup;
}

/* Threads for a caller's jobs: 0 is one, the caller's. */
static unsigned jobs_of(unsigned jobs)
{
	return jobs == 0 ? 1 : jobs > VD_OMS_JOBS_MAX ? VD_OMS_JOBS_MAX : jobs;
}

static vd_oms_code check_manifest(const char *path, const vd_oms_statement *s,
    const vd_oms_verify_opts *o, const char *sig, const atomic_int *cancel, vd_oms_result *r)
{
	struct model m = { .r = r, .jobs = jobs_of(o->jobs), .cancel = cancel };
	char sig_rel[PATH_MAX];
	vd_oms_code c = VD_OMS_UNREADABLE;
	int is_dir = 0;

	if ((m.md = hash_md(s->hash)) == NULL || EVP_MD_get_size(m.md) <= 0) {
		ERR_clear_error();
		return fail(r, VD_OMS_UNSUPPORTED, "the files are hashed with %s, which this "
		    "OpenSSL does not provide", hash_name(s->hash));
	}
	m.digest_len = (size_t)EVP_MD_get_size(m.md);
	m.shard = s->shards ? s->shard_size : UINT64_MAX;
	m.allow_symlinks = s->allow_symlinks;
	if (realpath(path, m.root_real) == NULL)
		return fail(r, VD_OMS_UNREADABLE, "cannot resolve %s: %s", path, strerror(errno));
	signature_rel(m.root_real, sig, sig_rel, sizeof(sig_rel));
	if (index_resources(&m, s) < 0 ||
	    ignores_init(&m, s->ignore, s->n_ignore, o->ignore, o->n_ignore, sig_rel) < 0) {
		fail(r, VD_OMS_UNREADABLE, "out of memory");
		goto cleanup;
	}
	m.listed = s;
	if (walk_model(&m, path, &is_dir) < 0) {
		c = r->code;
		goto cleanup;
	}
	if (!is_dir)
		name_single(&m, s, m.root_real);
	c = compare(&m, s, path, is_dir, o->ignore_unsigned);
cleanup:
	model_free(&m);
	return c;
}

static vd_oms_code verify_bundle(const char *path, const vd_oms_bundle *b,
    const vd_oms_verify_opts *o, const char *sig, vd_oms_result *r)
{
	char why[VD_DETAIL_MAX];
	vd_oms_statement s;
	vd_key *leaf = NULL;
	const vd_key *k = o->key;
	vd_oms_code c;

	r->method = b->method == VD_OMS_METHOD_KEY ? "key" : "certificate";
	c = o->key != NULL ? signer_by_key(b, o, r) : signer_by_chain(b, o, &leaf, r);
	if (c != VD_OMS_OK)
		goto cleanup;
	if (leaf != NULL)
		k = leaf;
	if ((c = check_signature(b, k, r)) != VD_OMS_OK)
		goto cleanup;
	if ((c = vd_oms_statement_parse(b->payload.p, b->payload.len, &s, why, sizeof(why))) !=
	    VD_OMS_OK) {
		fail(r, c, "%s", why);
		goto cleanup;
	}
	describe(r, &s);
	c = check_manifest(path, &s, o, sig, NULL, r);
	vd_oms_statement_free(&s);
cleanup:
	vd_key_free(leaf);
	return c;
}

vd_oms_code vd_oms_verify(const char *path, const vd_oms_verify_opts *o, vd_oms_result *r)
{
	char sig[PATH_MAX];
	vd_oms_bundle b;
	vd_oms_code c;

	result_init(r);
	if ((o->key == NULL) == (o->ca_file == NULL))
		return fail(r, VD_OMS_UNREADABLE, "give either a public key or CA certificates");
	if (default_signature(path, o->signature, sig, sizeof(sig), r) < 0)
		return r->code;
	if ((c = read_bundle(sig, &b, r)) != VD_OMS_OK)
		return c;
	c = verify_bundle(path, &b, o, sig, r);
	vd_oms_bundle_free(&b);
	return c;
}

/* ---- the daemon's check -------------------------------------------------- */

/* The key the bundle carries (pre-v1.1 rawBytes), or NULL. */
static vd_key *raw_key(const vd_oms_bundle *b)
{
	char err[VD_DETAIL_MAX];
	vd_key *k = NULL;

	if (b->raw_key.len == 0)
		return NULL;
	if (vd_key_from_pem_any(b->raw_key.p, b->raw_key.len, 0, &k, err, sizeof(err)) < 0 &&
	    vd_key_from_spki_der(b->raw_key.p, b->raw_key.len, &k, err, sizeof(err)) < 0)
		return NULL;
	return k;
}

/* A trusted key named by the bundle's hint (an EC key's id is its hint),
 * or equal to the key it carries. */
static vd_oms_code trusted_key(const vd_oms_bundle *b, const vd_oms_signers *t,
    const vd_key **out, vd_oms_result *r)
{
	vd_key *raw = raw_key(b);
	size_t i;

	*out = NULL;
	if (b->hint[0] != '\0')
		snprintf(r->key_id, sizeof(r->key_id), "%s", b->hint);
	else if (raw != NULL && vd_key_pem_hint(raw, r->key_id) < 0)
		r->key_id[0] = '\0';
	for (i = 0; i < t->n_keys && *out == NULL; i++)
		if (ec_key(t->keys[i]) && (b->hint[0] != '\0' ?
		    strcmp(vd_key_id(t->keys[i]), b->hint) == 0 :
		    raw != NULL && vd_key_equal(raw, t->keys[i])))
			*out = t->keys[i];
	if (*out != NULL && raw != NULL && !vd_key_equal(raw, *out))
		*out = NULL;
	vd_key_free(raw);
	if (*out != NULL)
		return VD_OMS_OK;
	if (b->hint[0] == '\0' && b->raw_key.len == 0)
		return fail(r, VD_OMS_MALFORMED, "the bundle names no public key");
	return fail(r, VD_OMS_KEY_MISMATCH, "key %s is not configured to sign for this run",
	    r->key_id[0] ? r->key_id : "(unreadable)");
}

/* The leaf of a chain to one of the CA sets. */
static vd_oms_code trusted_chain(const vd_oms_bundle *b, const vd_oms_signers *t,
    vd_key **leaf, vd_oms_result *r)
{
	const uint8_t *certs[VD_OMS_MAX_CERTS];
	size_t lens[VD_OMS_MAX_CERTS], i;
	char why[VD_DETAIL_MAX] = "no CA certificate is configured for this run";
	int rc = VD_X509_EUNTRUSTED;
	vd_key *named = NULL;

	for (i = 0; i < b->n_certs; i++) {
		certs[i] = b->certs[i].p;
		lens[i] = b->certs[i].len;
	}
	for (i = 0; i < t->n_cas && *leaf == NULL; i++)
		rc = vd_x509_verify_chain(t->cas[i], certs, lens, b->n_certs,
		    t->now ? t->now : time(NULL), leaf, why, sizeof(why));
	if (*leaf == NULL) {
		if (b->n_certs > 0 && vd_x509_cert_key(certs[0], lens[0], &named) == 0 &&
		    vd_key_pem_hint(named, r->key_id) < 0)
			r->key_id[0] = '\0';
		vd_key_free(named);
		return fail(r, rc == VD_X509_EMALFORMED ? VD_OMS_MALFORMED : VD_OMS_UNTRUSTED, "%s",
		    why);
	}
	if (!ec_key(*leaf))
		return fail(r, VD_OMS_UNSUPPORTED, "the leaf certificate's key is not an ECDSA key");
	return vd_key_pem_hint(*leaf, r->key_id) < 0 ? fail(r, VD_OMS_UNREADABLE, "out of memory")
	    : VD_OMS_OK;
}

static vd_oms_code trusted_signer(const vd_oms_bundle *b, const vd_oms_signers *t,
    vd_oms_result *r)
{
	const vd_key *k = NULL;
	vd_key *leaf = NULL;
	vd_oms_code c;

	r->method = b->method == VD_OMS_METHOD_KEY ? "key" : "certificate";
	c = b->method == VD_OMS_METHOD_KEY ? trusted_key(b, t, &k, r) :
	    trusted_chain(b, t, &leaf, r);
	if (c == VD_OMS_OK)
		c = check_signature(b, leaf != NULL ? leaf : k, r);
	vd_key_free(leaf);
	return c;
}

/* The manifest against the files, the signature not yet considered. */
static vd_oms_code check_files(const char *path, const char *sig, const vd_oms_bundle *b,
    const atomic_int *cancel, vd_oms_result *r)
{
	vd_oms_verify_opts none = { 0 };
	char why[VD_DETAIL_MAX];
	vd_oms_statement s;
	vd_oms_code c;

	if ((c = vd_oms_statement_parse(b->payload.p, b->payload.len, &s, why, sizeof(why))) !=
	    VD_OMS_OK)
		return fail(r, c, "%s", why);
	describe(r, &s);
	c = check_manifest(path, &s, &none, sig, cancel, r);
	vd_oms_statement_free(&s);
	return c;
}

vd_oms_code vd_oms_check(const char *path, const char *signature, const vd_oms_signers *t,
    vd_oms_result *r, int *differ)
{
	return vd_oms_check_until(path, signature, t, NULL, r, differ);
}

vd_oms_code vd_oms_check_until(const char *path, const char *signature, const vd_oms_signers *t,
    const atomic_int *cancel, vd_oms_result *r, int *differ)
{
	char detail[VD_DETAIL_MAX];
	vd_oms_bundle b;
	vd_oms_code files, c;

	result_init(r);
	*differ = 0;
	if ((c = read_bundle(signature, &b, r)) != VD_OMS_OK)
		return c;
	files = check_files(path, signature, &b, cancel, r);
	*differ = files == VD_OMS_MISMATCH;
	snprintf(detail, sizeof(detail), "%s", r->detail);
	c = trusted_signer(&b, t, r);
	vd_oms_bundle_free(&b);
	if (c != VD_OMS_OK)
		return c;
	snprintf(r->detail, sizeof(r->detail), "%s", detail);
	return r->code = files;
}

/* ---- signing ------------------------------------------------------------- */

struct item {
	char *name;
	const uint8_t *digest;
};

static int item_cmp(const void *a, const void *b)
{
	return strcmp(((const struct item *)a)->name, ((const struct item *)b)->name);
}

static void items_free(struct item *it, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(it[i].name);
	free(it);
}

/* The resources of the walked model, sorted by code point (OMS 6.4). */
static struct item *make_items(const struct model *m, size_t *n)
{
	struct item *it;
	size_t i, j, total = 0;

	for (i = 0; i < m->n; i++)
		total += m->e[i].n_digests;
	if ((it = calloc(total + 1, sizeof(*it))) == NULL)
		return NULL;
	*n = 0;
	for (i = 0; i < m->n; i++) {
		const struct entry *e = &m->e[i];

		for (j = 0; j < e->n_digests; j++) {
			uint64_t start = j * m->shard, end = start + m->shard;
			char buf[VD_OMS_MAX_NAME + 64];

			if (m->shard == UINT64_MAX)
				snprintf(buf, sizeof(buf), "%s", e->name);
			else
				snprintf(buf, sizeof(buf), "%s:%" PRIu64 ":%" PRIu64, e->name, start,
				    end < e->size ? end : e->size);
			it[*n].digest = e->digests + j * m->digest_len;
			if ((it[(*n)++].name = strdup(buf)) == NULL) {
				items_free(it, *n);
				return NULL;
			}
		}
	}
	qsort(it, *n, sizeof(*it), item_cmp);
	return it;
}

static int ignore_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int jw(vd_buf *b, const char *s)
{
	return vd_jw_string(b, s, strlen(s), VD_JW_UTF8);
}

static int write_serialization(vd_buf *b, const struct model *m)
{
	size_t i;
	int rc = vd_buf_printf(b, "{\"method\":\"%s\",\"hash_type\":\"sha256\",",
	    m->shard == UINT64_MAX ? "files" : "shards");

	if (m->shard != UINT64_MAX)
		rc |= vd_buf_printf(b, "\"shard_size\":%" PRIu64 ",", m->shard);
	rc |= vd_buf_puts(b, "\"allow_symlinks\":false,\"ignore_paths\":[");
	for (i = 0; i < m->n_ignore; i++)
		rc |= (i ? vd_buf_putc(b, ',') : 0) | jw(b, m->ignore[i]);
	return rc | vd_buf_puts(b, "]}");
}

static int write_statement(vd_buf *b, const struct model *m, const char *subject,
    const struct item *it, size_t n, char root[VD_HASH_HEX_LEN + 1])
{
	char hex[2 * VD_OMS_DIGEST_MAX + 1];
	vd_hasher *h = vd_hasher_new();
	size_t i;
	int rc = h == NULL ? -1 : 0;

	for (i = 0; i < n && rc == 0; i++)
		rc = vd_hasher_update(h, it[i].digest, m->digest_len);
	if (rc < 0 || vd_hasher_final(h, root) < 0) {
		vd_hasher_free(h);
		return -1;
	}
	vd_hasher_free(h);
	rc = vd_buf_printf(b, "{\"_type\":\"%s\",\"subject\":[{\"name\":", VD_OMS_STATEMENT_TYPE);
	rc |= jw(b, subject);
	rc |= vd_buf_printf(b, ",\"digest\":{\"sha256\":\"%s\"}}],\"predicateType\":\"%s\","
	    "\"predicate\":{\"serialization\":", root, VD_OMS_PREDICATE_TYPE);
	rc |= write_serialization(b, m);
	rc |= vd_buf_puts(b, ",\"resources\":[");
	for (i = 0; i < n; i++) {
		vd_hex(it[i].digest, m->digest_len, hex);
		rc |= vd_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
		rc |= jw(b, it[i].name);
		rc |= vd_buf_printf(b, ",\"algorithm\":\"sha256\",\"digest\":\"%s\"}", hex);
	}
	return rc | vd_buf_puts(b, "]}}");
}

static int write_bundle(vd_buf *out, const vd_buf *payload, const uint8_t *sig,
    size_t siglen, const char *hint)
{
	int rc = vd_buf_printf(out, "{\"mediaType\":\"%s\",\"verificationMaterial\":"
	    "{\"publicKey\":{\"hint\":\"%s\"},\"tlogEntries\":[]},\"dsseEnvelope\":"
	    "{\"payload\":\"", VD_OMS_MEDIA_TYPE, hint);

	vd_b64_encode(payload->p, payload->len, out);
	rc |= vd_buf_printf(out, "\",\"payloadType\":\"%s\",\"signatures\":[{\"sig\":\"",
	    VD_PT_INTOTO);
	vd_b64_encode(sig, siglen, out);
	rc |= vd_buf_puts(out, "\",\"keyid\":\"\"}]}}\n");
	return rc || out->oom ? -1 : 0;
}

static vd_oms_code sign_payload(const vd_oms_sign_opts *o, const vd_buf *payload,
    vd_buf *out, vd_oms_result *r)
{
	uint8_t sig[VD_SIG_MAX];
	size_t siglen;
	vd_buf pae;
	int rc;

	vd_buf_init(&pae);
	rc = vd_dsse_pae(VD_PT_INTOTO, payload->p, payload->len, &pae) < 0 ||
	    vd_key_sign_any(o->key, pae.p, pae.len, sig, &siglen) < 0 ? -1 : 0;
	vd_buf_free(&pae);
	if (rc < 0)
		return fail(r, VD_OMS_UNREADABLE, "cannot sign with the key");
	if (write_bundle(out, payload, sig, siglen, r->key_id) < 0)
		return fail(r, VD_OMS_UNREADABLE, "out of memory");
	return VD_OMS_OK;
}

static vd_oms_code sign_model(struct model *m, const char *path, const vd_oms_sign_opts *o,
    vd_buf *out, vd_oms_result *r)
{
	const char *slash = strrchr(m->root_real, '/');
	struct item *it;
	vd_buf payload;
	vd_oms_code c;
	size_t n;

	if (m->n == 0)
		return fail(r, VD_OMS_UNREADABLE, "%s holds no file to sign", path);
	if ((it = make_items(m, &n)) == NULL)
		return fail(r, VD_OMS_UNREADABLE, "out of memory");
	if (n == 0) {
		items_free(it, n);
		return fail(r, VD_OMS_UNREADABLE, "%s holds only empty files, which shards do not "
		    "list", path);
	}
	snprintf(r->subject, sizeof(r->subject), "%s", slash && slash[1] ? slash + 1 : m->root_real);
	vd_buf_init(&payload);
	if (write_statement(&payload, m, r->subject, it, n, r->root_digest) < 0 || payload.oom)
		c = fail(r, VD_OMS_UNREADABLE, "out of memory");
	else
		c = sign_payload(o, &payload, out, r);
	r->resources = n;
	vd_buf_free(&payload);
	items_free(it, n);
	return c;
}

vd_oms_code vd_oms_sign(const char *path, const vd_oms_sign_opts *o, vd_buf *out,
    vd_oms_result *r)
{
	struct model m = { .r = r, .jobs = jobs_of(o->jobs) };
	char sig[PATH_MAX], sig_rel[PATH_MAX];
	vd_oms_code c = VD_OMS_UNREADABLE;
	int is_dir;

	result_init(r);
	r->method = "key";
	if (!vd_key_has_private(o->key) || !ec_key(o->key))
		return fail(r, VD_OMS_UNSUPPORTED, "OMS bundles are signed with an ECDSA private "
		    "key (P-256, P-384, P-521)");
	if (default_signature(path, o->signature, sig, sizeof(sig), r) < 0)
		return r->code;
	if (vd_key_pem_hint(o->key, r->key_id) < 0 || realpath(path, m.root_real) == NULL)
		return fail(r, VD_OMS_UNREADABLE, "cannot read %s: %s", path, strerror(errno));
	signature_rel(m.root_real, sig, sig_rel, sizeof(sig_rel));
	m.md = EVP_sha256();
	m.digest_len = VD_HASH_HEX_LEN / 2;
	m.shard = o->shard_size ? o->shard_size : UINT64_MAX;
	r->serialization = o->shard_size ? "shards" : "files";
	r->hash_type = "sha256";
	r->shard_size = o->shard_size;
	if (ignores_init(&m, NULL, 0, o->ignore, o->n_ignore, sig_rel) < 0) {
		fail(r, VD_OMS_UNREADABLE, "out of memory");
		goto cleanup;
	}
	qsort(m.ignore, m.n_ignore, sizeof(*m.ignore), ignore_cmp);
	if (walk_model(&m, path, &is_dir) < 0) {
		c = r->code;
		goto cleanup;
	}
	c = sign_model(&m, path, o, out, r);
cleanup:
	model_free(&m);
	return c;
}

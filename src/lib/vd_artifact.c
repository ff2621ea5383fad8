#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>


#include "vd_artifact.h"
#include "vd_hash.h"
#include "vd_header.h"
#include "vd_json.h"
#include "vd_mapping.h"
#include "vd_reader.h"
#include "vd_safetensors.h"
#include "vd_tar.h"
#include "vd_util.h"

#define INDEX_FILE "weights.index.json"
#define HEADER_FILE "header.json"
/* The name under which a tar's own identity is recorded (vd_file_ids). */
#define TAR_SELF "."
/* What a remediation calls the artifact: "round-" and an int64, or
 * "the artifact". */
#define VD_REMEDIATION_NAME_MAX 32

_Static_assert(VD_TAR_MAX_MEMBERS >= VD_ARTIFACT_MAX_FILES + 2,
    "a tar must have room for every weight file, header.json and the index");

typedef struct weight_file {
	vd_str name;
	int fd;                     /* what the bytes are read from */
	int own_fd;                 /* closed with the file (not a tar's) */
	struct stat st;             /* st_size: the weight file's own size */
	uint64_t file_off;          /* where the weight file starts in fd: 0, or
	                             * its data's offset in a tar */
	uint8_t *bytes;             /* the file: mapped, or read into memory */
	size_t len;
	size_t head;                /* read into memory before hashing (the
	                             * safetensors header); the rest comes with
	                             * the reader, job `job` */
	size_t job;
	/* Mapping source (hash_mapped): bytes hashed, where the next probe
	 * begins, the bytes and faults of the one under way, and whether the
	 * file is read rather than hashed in place until the next. */
	uint64_t hashed, next_probe, probe_bytes, probe_faults;
	int probing, by_read;
	vd_st_file sf;
} weight_file;

typedef struct verify_ctx verify_ctx;

/* Where the weight bytes come from. The steps are the same for every
 * source; only getting, hashing and dropping the bytes differ. */
typedef struct byte_source {
	vd_code (*acquire)(verify_ctx *c, weight_file *w);
	vd_code (*begin)(verify_ctx *c);    /* before the first byte is hashed */
	int (*hash)(verify_ctx *c, vd_hasher *h, weight_file *w, uint64_t off, size_t n);
	vd_code (*end)(verify_ctx *c);      /* after the last: every byte is there */
	void (*drop)(weight_file *w);
	int maps;                   /* reads mappings: needs the SIGBUS guard */
} byte_source;

/* A small member's bytes (header.json, the index), NUL-terminated:
 * charged to the parse budget, and mapped on their own when large
 * (vd_mem_alloc), so that a big one leaves nothing behind on the heap. */
typedef struct small_file {
	uint8_t *p;
	size_t len;
	size_t size;                /* allocated and charged: len + 1 */
} small_file;

/* Where the member files live: a directory, or a tar read in place. The
 * checks are the same; only finding and reading the members differ. */
typedef struct member_store {
	vd_code (*prepare)(verify_ctx *c);
	vd_code (*open_weight)(verify_ctx *c, weight_file *w);
	vd_code (*read_small)(verify_ctx *c, const char *name, size_t cap,
	    vd_code missing_code, small_file *b);
	int (*has)(verify_ctx *c, const char *name);
	vd_code (*unchanged)(verify_ctx *c);
	vd_code (*nothing_else)(verify_ctx *c);    /* once the weights are open */
} member_store;

/* Where a paused canonical pass goes on (vd_artifact_verify_part). */
struct vd_resume {
	vd_hasher *hasher;          /* the stream up to the position */
	size_t tensor;              /* in name order */
	uint64_t at;                /* bytes of its data hashed */
	uint64_t done;              /* bytes of every tensor's data hashed */
	vd_file_ids ids;            /* every file read, as first opened */
	uint8_t header[32];         /* header.json's digest */
};

/* What vd_loaded.store points to: the parsed safetensors headers, which
 * own the tensors' names and shapes. */
struct vd_loaded_store {
	vd_st_file *sf;
	size_t n;
};

struct verify_ctx {
	int dirfd;
	const member_store *store;
	int tarfd;                  /* the archive, when the artifact is a tar (not
	                             * closed here: the caller's) */
	struct stat tar_st;         /* its identity when verification began */
	uint8_t *tar_map;           /* the whole archive (mapping source only) */
	size_t tar_len;
	vd_tar_parser *tar_ps;      /* while the index is read */
	vd_tar_index tar;
	const byte_source *src;
	uint64_t max_bytes;         /* header.json plus weight files held at once */
	vd_loaded *loaded;          /* filled on success when reading into memory */
	vd_buf header_bytes;        /* kept only for loaded */
	const vd_options *opt;
	vd_bounds bounds;           /* every field set (defaults filled in) */
	vd_budget budget;           /* parse memory, max_job_memory */
	vd_verdict *out;
	vd_file_ids *ids;
	vd_err err;
	vd_header hdr;
	int have_hdr;
	weight_file *files;
	size_t nfiles;
	vd_reader *reader;          /* memory source: filling the files meanwhile */
	const vd_st_tensor **sorted;   /* every tensor, by name */
	size_t sorted_size;         /* bytes, charged to budget */
	size_t ntensors;
	vd_hasher *hasher;
	const vd_chunk_sink *sink;
	int sink_started;
	vd_meta_digests meta;
	uint64_t page;              /* the page size, for madvise and mincore */
	uint8_t *read_buf;          /* VD_READ_BUFFER bytes, for files read, not
	                             * hashed in place */
	/* A verification in parts: where this part goes on from (NULL: the
	 * start), and where it paused. */
	const vd_resume *from;
	int pausable, paused;
	size_t at_tensor;
	uint64_t at_byte, done;
	vd_file_ids own_ids;        /* ids, when the caller keeps none */
};

/* The SIGBUS guard of a verification covers every mapping c reads: the
 * archive, or each weight file. Async-signal context: reads only. */
static int ctx_covers(const void *arg, const void *addr)
{
	const verify_ctx *c = arg;
	size_t i;

	if (vd_bus_in_range(addr, c->tar_map, c->tar_len))
		return 1;
	if (c->files == NULL)
		return 0;
	for (i = 0; i < c->nfiles; i++)
		if (vd_bus_in_range(addr, c->files[i].bytes, c->files[i].len))
			return 1;
	return 0;
}

static const char *const code_names[] = {
	[VD_OK] = "ok",
	[VD_SCHEMA_VERSION_MISMATCH] = "schema_version_mismatch",
	[VD_ARTIFACT_INVALID] = "artifact_invalid",
	[VD_RESIDENCY_VIOLATION] = "residency_violation",
	[VD_CHECKPOINT_INTEGRITY] = "checkpoint_integrity",
	[VD_IO_ERROR] = "io_error",
};

const char *vd_code_name(vd_code code)
{
	if ((unsigned)code < VD_ARRAY_LEN(code_names))
		return code_names[code];
	return "unknown";
}

void vd_file_id_from_stat(vd_file_id *id, const char *name, const struct stat *st)
{
	memset(id, 0, sizeof(*id));
	snprintf(id->name, sizeof(id->name), "%s", name);
	id->dev = st->st_dev;
	id->ino = st->st_ino;
	id->size = st->st_size;
	id->mtime = st->st_mtim;
	id->ctime = st->st_ctim;
}

int vd_file_id_same(const vd_file_id *a, const vd_file_id *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	    a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
	    a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

void vd_file_ids_free(vd_file_ids *ids)
{
	free(ids->ids);
	memset(ids, 0, sizeof(*ids));
}

/* ---- the facts behind a failure (vd_facts) ------------------------------ */

/* A name into a fact: up to a NUL, cut before a UTF-8 continuation byte
 * when it is too long, so that what is kept stays valid text. */
static void fact_name(char dst[VD_NAME_MAX], const char *p, size_t len)
{
	const char *nul = memchr(p, '\0', len);
	size_t n = nul != NULL ? (size_t)(nul - p) : len;

	if (n >= VD_NAME_MAX) {
		n = VD_NAME_MAX - 1;
		while (n > 0 && ((unsigned char)p[n] & 0xC0) == 0x80)
			n--;
	}
	memcpy(dst, p, n);
	dst[n] = '\0';
}

static void note_file(verify_ctx *c, vd_str name)
{
	fact_name(c->out->facts.file, name.p, name.len);
}

/* A tensor, and the weight file that stores it. */
static void note_tensor(verify_ctx *c, const vd_st_tensor *t)
{
	fact_name(c->out->facts.tensor, t->name.p, t->name.len);
	note_file(c, c->files[t->file].name);
}

/* Which weight file a SIGBUS at addr fell in, if any (a tar's own headers
 * belong to none). */
static void note_fault(verify_ctx *c, const void *addr)
{
	size_t i;

	for (i = 0; addr != NULL && c->files != NULL && i < c->nfiles; i++)
		if (vd_bus_in_range(addr, c->files[i].bytes, c->files[i].len)) {
			note_file(c, c->files[i].name);
			return;
		}
}

/* The artifact as a coordinator names it, for a remediation. */
static void artifact_name(const vd_verdict *v, char *out, size_t n)
{
	if (v->have_header)
		snprintf(out, n, "round-%05lld", (long long)v->round_index);
	else
		snprintf(out, n, "the artifact");
}

static void remediate_schema(const vd_facts *f, char *out, size_t n)
{
	if (!f->has_file_schema_version)
		snprintf(out, n, "do not load it: header.json has no integer schema_version; re-download the artifact from the coordinator");
	else if (f->file_schema_version > f->reader_max_version)
		snprintf(out, n, "upgrade the verifier: this artifact uses schema version %lld, newer than the %lld it reads",
		    (long long)f->file_schema_version, (long long)f->reader_max_version);
	else
		snprintf(out, n, "do not load it: schema version %lld is older than any this verifier reads (%d to %lld); have the artifact exported again",
		    (long long)f->file_schema_version, VD_HEADER_SCHEMA_MIN,
		    (long long)f->reader_max_version);
}

void vd_verdict_remediate(vd_verdict *v)
{
	char what[VD_REMEDIATION_NAME_MAX], *out = v->facts.remediation;
	size_t n = sizeof(v->facts.remediation);

	artifact_name(v, what, sizeof(what));
	switch (v->code) {
	case VD_OK:
		out[0] = '\0';
		break;
	case VD_SCHEMA_VERSION_MISMATCH:
		remediate_schema(&v->facts, out, n);
		break;
	case VD_ARTIFACT_INVALID:
		snprintf(out, n, "do not load it: re-download %s from the coordinator, and have it exported again if that copy is invalid too",
		    what);
		break;
	case VD_RESIDENCY_VIOLATION:
		snprintf(out, n, "do not load or share it: %s holds weights outside the shared encoder and predictor groups; export it again with those groups only",
		    what);
		break;
	case VD_CHECKPOINT_INTEGRITY:
		snprintf(out, n, "re-download %s from the coordinator; do not load it", what);
		break;
	default:
		snprintf(out, n, "it was not verified: fix what the detail names (permissions, storage or memory) and verify it again");
		break;
	}
}

static int record_id(verify_ctx *c, const char *name, const struct stat *st)
{
	vd_file_ids *ids = c->ids;
	vd_file_id *n;

	if (ids == NULL)
		return 0;
	if (ids->count == ids->cap) {
		size_t cap = ids->cap ? ids->cap * 2 : 8;
		if ((n = realloc(ids->ids, cap * sizeof(*n))) == NULL)
			return -1;
		ids->ids = n;
		ids->cap = cap;
	}
	vd_file_id_from_stat(&ids->ids[ids->count++], name, st);
	return 0;
}

static vd_code io_fail(verify_ctx *c, const char *name, const char *what)
{
	return vd_fail(&c->err, VD_IO_ERROR, "cannot %s %s: %s", what, name,
	    strerror(errno));
}

/* Open a member file: never through a symlink, only a regular file, and
 * without blocking on a FIFO. A missing file is missing_code. */
static vd_code open_member(verify_ctx *c, const char *name, vd_code missing_code,
    int *fdp, struct stat *st)
{
	struct stat pre;
	int fd;

	if (fstatat(c->dirfd, name, &pre, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return vd_fail(&c->err, missing_code, "%s is missing", name);
		return io_fail(c, name, "stat");
	}
	if (S_ISLNK(pre.st_mode))
		return vd_fail(&c->err, VD_ARTIFACT_INVALID,
		    "%s is a symbolic link; artifact files must be regular files", name);
	if (!S_ISREG(pre.st_mode))
		return vd_fail(&c->err, VD_ARTIFACT_INVALID,
		    "%s is not a regular file", name);
	fd = openat(c->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ELOOP)
			return vd_fail(&c->err, VD_ARTIFACT_INVALID,
			    "%s is a symbolic link; artifact files must be regular files", name);
		return io_fail(c, name, "open");
	}
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode) || st->st_ino != pre.st_ino ||
	    st->st_dev != pre.st_dev) {
		close(fd);
		return vd_fail(&c->err, VD_IO_ERROR, "%s changed while it was opened", name);
	}
	*fdp = fd;
	return VD_OK;
}

/* A parse allocation failed: past max_job_memory (what names the
 * document), or the system is out of memory. */
static vd_code no_memory(verify_ctx *c, const char *what)
{
	if (c->budget.exhausted)
		return vd_fail(&c->err, VD_ARTIFACT_INVALID,
		    "%s needs more than %zu bytes to parse (max_job_memory)", what,
		    c->budget.limit);
	return vd_fail(&c->err, VD_IO_ERROR, "out of memory");
}

/* Room in b for a small member of size bytes, charged to the parse
 * budget before it is allocated; give_small returns it. */
static vd_code take_small(verify_ctx *c, const char *name, uint64_t size, small_file *b)
{
	memset(b, 0, sizeof(*b));
	if ((b->p = vd_budget_alloc(&c->budget, (size_t)size + 1)) == NULL)
		return c->budget.exhausted ? no_memory(c, name) :
		    vd_fail(&c->err, VD_IO_ERROR, "out of memory");
	b->size = (size_t)size + 1;
	return VD_OK;
}

static void give_small(verify_ctx *c, small_file *b)
{
	vd_budget_free(&c->budget, b->p, b->size);
	memset(b, 0, sizeof(*b));
}

/* All n bytes of fd, and nothing after them: a file that grows or
 * shrinks while it is read is refused. */
static vd_code read_whole(verify_ctx *c, int fd, const char *name, uint8_t *dst, size_t n)
{
	size_t off = 0;
	uint8_t extra;
	ssize_t got;

	for (;;) {
		got = off < n ? pread(fd, dst + off, n - off, (off_t)off) :
		    pread(fd, &extra, 1, (off_t)off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return io_fail(c, name, "read");
		if (off == n && got == 0)
			return VD_OK;
		if (got == 0 || off == n)
			return vd_fail(&c->err, VD_IO_ERROR, "%s changed while it was being read", name);
		off += (size_t)got;
	}
}

static vd_code read_small(verify_ctx *c, const char *name, size_t cap,
    vd_code missing_code, small_file *b)
{
	struct stat st;
	vd_code rc;
	int fd;

	if ((rc = open_member(c, name, missing_code, &fd, &st)) != VD_OK)
		return rc;
	if ((uint64_t)st.st_size > cap) {
		close(fd);
		return vd_fail(&c->err, VD_ARTIFACT_INVALID,
		    "%s is %lld bytes, above the limit of %zu", name,
		    (long long)st.st_size, cap);
	}
	rc = take_small(c, name, (uint64_t)st.st_size, b);
	if (rc == VD_OK && (rc = read_whole(c, fd, name, b->p, (size_t)st.st_size)) == VD_OK) {
		b->len = (size_t)st.st_size;
		if (record_id(c, name, &st) < 0)
			rc = vd_fail(&c->err, VD_IO_ERROR, "out of memory");
	}
	close(fd);
	return rc;
}

/* The versions behind a schema_version_mismatch: what header.json says,
 * if an integer, and what this verifier reads at most. */
static void note_schema(verify_ctx *c)
{
	vd_facts *f = &c->out->facts;

	f->reader_max_version = VD_HEADER_SCHEMA_MAX;
	if ((f->has_file_schema_version = c->hdr.has_schema_version))
		f->file_schema_version = c->hdr.schema_version;
}

static vd_code load_header(verify_ctx *c)
{
	vd_verdict *o = c->out;
	small_file b = { 0 };
	vd_code rc;

	rc = c->store->read_small(c, HEADER_FILE, VD_HEADER_MAX_BYTES, VD_ARTIFACT_INVALID, &b);
	if (rc == VD_OK && vd_sha256(b.p, b.len, c->meta.header) < 0)
		rc = vd_fail(&c->err, VD_IO_ERROR, "SHA-256 failed on header.json");
	if (rc == VD_OK) {
		rc = vd_header_parse(b.p, b.len,
		    &(vd_parse_bounds){ .max_tensors = c->bounds.max_tensors, .budget = &c->budget },
		    &c->hdr, &c->err);
		if (rc == VD_SCHEMA_VERSION_MISMATCH)
			note_schema(c);
	}
	/* The caller gets the very bytes parsed, in memory of its own. */
	if (rc == VD_OK && c->loaded != NULL &&
	    (vd_buf_reserve(&c->header_bytes, b.len) < 0 ||
	    vd_buf_put(&c->header_bytes, b.p, b.len) < 0))
		rc = vd_fail(&c->err, VD_IO_ERROR, "out of memory");
	give_small(c, &b);
	if (rc != VD_OK)
		return rc;
	c->have_hdr = 1;
	o->have_header = 1;
	o->schema_version = c->hdr.schema_version;
	o->round_index = c->hdr.round_index;
	memcpy(o->claimed_hash, c->hdr.content_hash.p, VD_HASH_HEX_LEN);
	if ((o->has_parent = c->hdr.has_parent))
		memcpy(o->parent_hash, c->hdr.parent_hash.p, VD_HASH_HEX_LEN);
	/* Read through the migration chain: told, never refused for it. */
	if ((o->legacy = c->hdr.schema_version < VD_HEADER_SCHEMA_MAX))
		o->migrated_from = c->hdr.schema_version;
	return VD_OK;
}

/* Refuse, before a byte of them is read, weights larger than an artifact
 * may be: a sparse file claims terabytes that cost nothing to store and
 * hours to hash. */
static vd_code check_artifact_bytes(verify_ctx *c)
{
	uint64_t total = 0;
	size_t i;

	for (i = 0; i < c->nfiles; i++)
		if (vd_add_u64(total, (uint64_t)c->files[i].st.st_size, &total) < 0)
			total = UINT64_MAX;
	if (total > c->bounds.max_artifact_bytes)
		return vd_fail(&c->err, VD_ARTIFACT_INVALID,
		    "the weight files hold %llu bytes, more than %llu (max_artifact_bytes)",
		    (unsigned long long)total, (unsigned long long)c->bounds.max_artifact_bytes);
	return VD_OK;
}

/* Refuse, before reading anything, an artifact larger than the memory the
 * caller allows; it is not judged, so the code says "could not read". */
static vd_code check_budget(verify_ctx *c)
{
	uint64_t total = c->header_bytes.len;
	size_t i;

	for (i = 0; i < c->nfiles; i++)
		if (vd_add_u64(total, (uint64_t)c->files[i].st.st_size, &total) < 0)
			total = UINT64_MAX;
	if (total > c->max_bytes)
		return vd_fail(&c->err, VD_IO_ERROR,
		    "the artifact is %llu bytes (header.json and weight files), above the load limit of %llu bytes",
		    (unsigned long long)total, (unsigned long long)c->max_bytes);
	return VD_OK;
}

static vd_code open_weights(verify_ctx *c)
{
	size_t i;
	vd_code rc;

	if (c->hdr.n_weight_files > VD_ARTIFACT_MAX_FILES)
		return vd_fail(&c->err, VD_ARTIFACT_INVALID,
		    "header.json lists %zu weight files, above the limit of %d",
		    c->hdr.n_weight_files, VD_ARTIFACT_MAX_FILES);
	c->files = calloc(c->hdr.n_weight_files, sizeof(*c->files));
	if (c->files == NULL)
		return vd_fail(&c->err, VD_IO_ERROR, "out of memory");
	for (i = 0; i < c->hdr.n_weight_files; i++) {
		weight_file *w = &c->files[i];
		w->fd = -1;
		w->name = c->hdr.weight_files[i];
		c->nfiles++;
		if ((rc = c->store->open_weight(c, w)) != VD_OK) {
			note_file(c, w->name);
			return rc;
		}
	}
	if ((rc = check_artifact_bytes(c)) != VD_OK)
		return rc;
	return check_budget(c);
}

static vd_code dir_open_weight(verify_ctx *c, weight_file *w)
{
	vd_code rc = open_member(c, w->name.p, VD_CHECKPOINT_INTEGRITY, &w->fd, &w->st);

	if (rc != VD_OK)
		return rc;
	w->own_fd = 1;
	if (record_id(c, w->name.p, &w->st) < 0)
		return vd_fail(&c->err, VD_IO_ERROR, "out of memory");
	return VD_OK;
}

/* The mapping source: pages come in as they are hashed. A file shorter
 * than the length prefix is not mapped (the parse refuses it). */
static vd_code map_file(verify_ctx *c, weight_file *w)
{
	uint64_t size = (uint64_t)w->st.st_size;

	if (size > SIZE_MAX)
		return vd_fail(&c->err, VD_IO_ERROR, "the file is too large to map");
	w->len = (size_t)size;
	if (size < VD_ST_PREFIX_LEN)
		return VD_OK;
	w->bytes = mmap(NULL, w->len, PROT_READ, MAP_SHARED, w->fd, 0);
	if (w->bytes == MAP_FAILED) {
		w->bytes = NULL;
		return vd_fail(&c->err, VD_IO_ERROR, "cannot map it: %s", strerror(errno));
	}
	madvise(w->bytes, w->len, MADV_SEQUENTIAL);
	vd_mapping_sequential(w->fd, 0, w->len);
	return VD_OK;
}

static void unmap_file(weight_file *w)
{
	if (w->bytes != NULL)
		munmap(w->bytes, w->len);
	w->bytes = NULL;
}

/* n bytes at offset at of fd into dst. A file that shrinks under the
 * read fails as a truncated mapping does. */
static vd_code read_at(verify_ctx *c, int fd, uint8_t *dst, size_t n, uint64_t at)
{
	size_t off = 0, want;
	ssize_t got;

	while (off < n) {
		want = n - off < VD_LOAD_READ_STEP ? n - off : VD_LOAD_READ_STEP;
		got = pread(fd, dst + off, want, (off_t)(at + off));
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return vd_fail(&c->err, VD_IO_ERROR, "cannot read it: %s", strerror(errno));
		if (got == 0)
			return vd_fail(&c->err, VD_CHECKPOINT_INTEGRITY,
			    "the file shrank while it was being read");
		off += (size_t)got;
	}
	return VD_OK;
}

/* How much of a file the parse reads: the length prefix and the header
 * it announces (the whole file when it announces more than there is). */
static vd_code read_head(verify_ctx *c, weight_file *w)
{
	uint64_t hlen = 0;
	size_t i, n = w->len < VD_ST_PREFIX_LEN ? w->len : VD_ST_PREFIX_LEN;
	vd_code rc = read_at(c, w->fd, w->bytes, n, w->file_off);

	w->head = n;
	if (rc != VD_OK || n < VD_ST_PREFIX_LEN)
		return rc;
	for (i = VD_ST_PREFIX_LEN; i-- > 0;)
		hlen = hlen << 8 | w->bytes[i];
	w->head = hlen < w->len - VD_ST_PREFIX_LEN ? (size_t)(VD_ST_PREFIX_LEN + hlen) : w->len;
	return read_at(c, w->fd, w->bytes + n, w->head - n, w->file_off + n);
}

/* The memory source: the file's size in memory, its header read now and
 * the rest while it is hashed (begin_reading). A file that grows
 * meanwhile is read up to the size it had when opened (and caught by
 * check_unchanged); one that shrinks fails as a truncated mapping does. */
static vd_code read_file(verify_ctx *c, weight_file *w)
{
	uint64_t size = (uint64_t)w->st.st_size;

	if (size > SIZE_MAX)
		return vd_fail(&c->err, VD_IO_ERROR, "the file is too large to read into memory");
	if ((w->bytes = malloc(size ? (size_t)size : 1)) == NULL)
		return vd_fail(&c->err, VD_IO_ERROR, "out of memory for its %llu bytes",
		    (unsigned long long)size);
	w->len = (size_t)size;
	posix_fadvise(w->fd, (off_t)w->file_off, (off_t)w->len, POSIX_FADV_SEQUENTIAL);
	return read_head(c, w);
}

/* A failure to read w, named as the parse names its failures. */
static vd_code name_failure(verify_ctx *c, weight_file *w)
{
	char msg[VD_DETAIL_MAX];

	snprintf(msg, sizeof(msg), "%s: %s", w->name.p, c->err.msg);
	memcpy(c->err.msg, msg, sizeof(msg));
	note_file(c, w->name);
	return c->err.code;
}

/* The files' order of first need by the hash (tensors in name order), so
 * that the reader fills what the hash waits for first. */
static void order_jobs(verify_ctx *c, vd_read_job *jobs)
{
	size_t i, n = 0;

	for (i = 0; i < c->nfiles; i++)
		c->files[i].job = c->nfiles;
	for (i = 0; i < c->ntensors; i++) {
		weight_file *w = &c->files[c->sorted[i]->file];
		if (w->job == c->nfiles)
			w->job = n++;
	}
	for (i = 0; i < c->nfiles; i++) {
		weight_file *w = &c->files[i];
		if (w->job == c->nfiles)
			w->job = n++;
		jobs[w->job] = (vd_read_job){ w->fd, w->file_off, w->bytes, w->len, w->head };
	}
}

/* The rest of every file: on a thread of its own when there is enough of
 * it and a second core to run it; here, whole, otherwise. */
static vd_code begin_reading(verify_ctx *c)
{
	vd_read_job *jobs;
	uint64_t rest = 0;
	size_t i;
	vd_code rc = VD_OK;

	for (i = 0; i < c->nfiles; i++)
		rest += c->files[i].len - c->files[i].head;
	if (rest >= VD_LOAD_THREAD_MIN && sysconf(_SC_NPROCESSORS_ONLN) > 1 &&
	    (jobs = calloc(c->nfiles, sizeof(*jobs))) != NULL) {
		order_jobs(c, jobs);
		c->reader = vd_reader_start(jobs, c->nfiles);
		free(jobs);
	}
	for (i = 0; c->reader == NULL && i < c->nfiles && rc == VD_OK; i++) {
		weight_file *w = &c->files[i];
		rc = read_at(c, w->fd, w->bytes + w->head, w->len - w->head, w->file_off + w->head);
		if (rc == VD_OK)
			w->head = w->len;
		else
			name_failure(c, w);
	}
	return rc;
}

/* Why the reader could not fill the file of job `job`. */
static vd_code read_failed(verify_ctx *c, size_t job, int err)
{
	size_t i;

	for (i = 0; i < c->nfiles - 1 && c->files[i].job != job; i++)
		;
	if (err == 0)
		vd_fail(&c->err, VD_CHECKPOINT_INTEGRITY, "a weight file shrank while it was being read");
	else
		vd_fail(&c->err, VD_IO_ERROR, "cannot read it: %s", strerror(err));
	return name_failure(c, &c->files[i]);
}

static vd_code wait_read(verify_ctx *c, weight_file *w, size_t want)
{
	size_t failed;
	int err;

	if (c->reader == NULL || want <= w->head ||
	    vd_reader_wait(c->reader, w->job, want, &failed, &err) == 0)
		return VD_OK;
	return read_failed(c, failed, err);
}

static int hash_read(verify_ctx *c, vd_hasher *h, weight_file *w, uint64_t off, size_t n)
{
	if (wait_read(c, w, (size_t)(off + n)) != VD_OK)
		return -1;
	return vd_hasher_update(h, w->bytes + off, n);
}

/* The bytes outside every tensor are handed over too: all of each file. */
static vd_code end_reading(verify_ctx *c)
{
	size_t i;
	vd_code rc = VD_OK;

	for (i = 0; i < c->nfiles && rc == VD_OK; i++)
		rc = wait_read(c, &c->files[i], c->files[i].len);
	vd_reader_stop(c->reader);
	c->reader = NULL;
	return rc;
}

static void free_read(weight_file *w)
{
	free(w->bytes);
	w->bytes = NULL;
}

/* ---- a tar read in place ------------------------------------------------
 * The archive is mapped whole (or, for the memory source, read with
 * pread); its headers give each member's data range, and a weight file is
 * that range: the same bytes a directory's file would hold. */

/* The mapping source over a tar: a weight file is a slice of the
 * archive's mapping, with nothing of its own to map or unmap. */
static vd_code slice_tar(verify_ctx *c, weight_file *w)
{
	w->bytes = c->tar_map + w->file_off;
	w->len = (size_t)w->st.st_size;
	vd_mapping_sequential(w->fd, w->file_off, w->len);
	return VD_OK;
}

static void forget_slice(weight_file *w)
{
	w->bytes = NULL;
}

/* An empty archive stays unmapped (mmap refuses it); the parse refuses
 * it too. */
static vd_code map_tar(verify_ctx *c)
{
	uint64_t size = (uint64_t)c->tar_st.st_size;
	void *m;

	if (size > SIZE_MAX)
		return vd_fail(&c->err, VD_IO_ERROR, "the archive is too large to map");
	if (size == 0)
		return VD_OK;
	m = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, c->tarfd, 0);
	if (m == MAP_FAILED)
		return vd_fail(&c->err, VD_IO_ERROR, "cannot map the archive: %s", strerror(errno));
	madvise(m, (size_t)size, MADV_SEQUENTIAL);
	c->tar_len = (size_t)size;     /* the range first: the SIGBUS guard reads both */
	c->tar_map = m;
	return VD_OK;
}

/* The parse reads headers only, from the mapping or with pread. Its state
 * lives in c, so that a SIGBUS jump out of it leaves nothing that
 * release() cannot free. */
static vd_code index_tar(verify_ctx *c)
{
	uint8_t *buf = NULL;
	uint64_t off;
	size_t len;
	vd_code rc;

	if ((c->tar_ps = calloc(1, sizeof(*c->tar_ps))) == NULL)
		return vd_fail(&c->err, VD_IO_ERROR, "out of memory");
	if (c->tar_map == NULL && (buf = malloc(VD_TAR_WANT_MAX)) == NULL)
		return vd_fail(&c->err, VD_IO_ERROR, "out of memory");
	rc = vd_tar_begin(c->tar_ps, (uint64_t)c->tar_st.st_size, &c->err);
	while (rc == VD_OK && vd_tar_want(c->tar_ps, &off, &len)) {
		if (buf != NULL)
			rc = read_at(c, c->tarfd, buf, len, off);
		if (rc == VD_OK)
			rc = vd_tar_feed(c->tar_ps, buf != NULL ? buf : c->tar_map + off, &c->err);
	}
	free(buf);
	return rc != VD_OK ? rc : vd_tar_finish(c->tar_ps, &c->tar, &c->err);
}

/* The archive's identity now, compared again when hashing is done. */
static vd_code tar_prepare(verify_ctx *c)
{
	vd_code rc;

	if (fstat(c->tarfd, &c->tar_st) < 0)
		return io_fail(c, "the archive", "stat");
	if (!S_ISREG(c->tar_st.st_mode))
		return vd_fail(&c->err, VD_ARTIFACT_INVALID,
		    "the artifact is neither a directory nor a tar file");
	if (record_id(c, TAR_SELF, &c->tar_st) < 0)
		return vd_fail(&c->err, VD_IO_ERROR, "out of memory");
	if (c->src->maps && (rc = map_tar(c)) != VD_OK)
		return rc;
	return index_tar(c);
}

static vd_code tar_open_weight(verify_ctx *c, weight_file *w)
{
	const vd_tar_member *m = vd_tar_find(&c->tar, w->name.p);

	if (m == NULL)
		return vd_fail(&c->err, VD_CHECKPOINT_INTEGRITY, "%s is missing", w->name.p);
	w->fd = c->tarfd;
	w->st = c->tar_st;
	w->st.st_size = (off_t)m->size;
	w->file_off = m->offset;
	return VD_OK;
}

/* header.json or the index: read with pread in both sources, as a
 * directory's are read with read(). */
static vd_code tar_read_small(verify_ctx *c, const char *name, size_t cap,
    vd_code missing_code, small_file *b)
{
	const vd_tar_member *m = vd_tar_find(&c->tar, name);
	vd_code rc;

	if (m == NULL)
		return vd_fail(&c->err, missing_code, "%s is missing", name);
	if (m->size > cap)
		return vd_fail(&c->err, VD_ARTIFACT_INVALID,
		    "%s is %llu bytes, above the limit of %zu", name,
		    (unsigned long long)m->size, cap);
	if ((rc = take_small(c, name, m->size, b)) != VD_OK)
		return rc;
	if ((rc = read_at(c, c->tarfd, b->p, (size_t)m->size, m->offset)) != VD_OK)
		return rc;
	b->len = (size_t)m->size;
	b->p[b->len] = '\0';
	return VD_OK;
}

static int tar_has(verify_ctx *c, const char *name)
{
	return vd_tar_find(&c->tar, name) != NULL;
}

static int read_by_verifier(const verify_ctx *c, const char *name)
{
	size_t i;

	if (strcmp(name, HEADER_FILE) == 0 || strcmp(name, INDEX_FILE) == 0)
		return 1;
	for (i = 0; i < c->nfiles; i++)
		if (strcmp(name, c->files[i].name.p) == 0)
			return 1;
	return 0;
}

/* A member the verifier does not read is refused: whoever extracts the
 * whole archive would write bytes that no hash covered, and a member
 * whose data is a second archive reads as its own members to a reader
 * that takes the first header's size otherwise. Counted first, so that
 * an archive of many members costs a lookup per weight file. */
static vd_code tar_nothing_else(verify_ctx *c)
{
	size_t i, known = 1 + (size_t)tar_has(c, INDEX_FILE);

	for (i = 0; i < c->nfiles; i++)
		known += strcmp(c->files[i].name.p, HEADER_FILE) != 0 &&
		    strcmp(c->files[i].name.p, INDEX_FILE) != 0;
	if (c->tar.count == known)
		return VD_OK;
	for (i = 0; i < c->tar.count; i++)
		if (!read_by_verifier(c, c->tar.members[i].name))
			return vd_fail(&c->err, VD_ARTIFACT_INVALID,
			    "not a valid artifact tar: member \"%.64s\" is neither header.json, "
			    "weights.index.json nor a weight file header.json lists",
			    c->tar.members[i].name);
	return VD_OK;
}

static vd_code tar_unchanged(verify_ctx *c)
{
	struct stat st;
	vd_file_id a, b;

	if (fstat(c->tarfd, &st) < 0)
		return io_fail(c, "the archive", "stat");
	vd_file_id_from_stat(&a, "", &c->tar_st);
	vd_file_id_from_stat(&b, "", &st);
	if (!vd_file_id_same(&a, &b))
		return vd_fail(&c->err, VD_IO_ERROR, "the archive changed while it was being verified");
	return VD_OK;
}

/* before: the tensors the files parsed so far declare, which count
 * against the artifact's max_tensors with this file's. */
static vd_code parse_file(verify_ctx *c, weight_file *w, uint32_t index, uint64_t before)
{
	vd_parse_bounds b = { c->bounds.max_tensors, before, &c->budget };
	uint64_t hlen;
	vd_code rc;

	rc = vd_st_header_len(w->bytes, w->len, c->opt ? c->opt->max_header_len : 0,
	    &hlen, &c->err);
	if (rc != VD_OK)
		return rc;
	return vd_st_parse(w->bytes + VD_ST_PREFIX_LEN, (size_t)hlen,
	    w->len - VD_ST_PREFIX_LEN - hlen, index, &b, &w->sf, &c->err);
}

static vd_code acquire_and_parse(verify_ctx *c, weight_file *w, uint32_t index,
    uint64_t before)
{
	vd_code rc = c->src->acquire(c, w);

	return rc != VD_OK ? rc : parse_file(c, w, index, before);
}

static vd_code check_structure(verify_ctx *c)
{
	char msg[VD_DETAIL_MAX];
	uint64_t declared = 0;
	size_t i;
	vd_code rc;

	for (i = 0; i < c->nfiles; i++) {
		if ((rc = acquire_and_parse(c, &c->files[i], (uint32_t)i, declared)) != VD_OK) {
			/* Name the file: a sharded artifact has several. A bound's
			 * message is a predicate for the name (vd_st_parse). */
			snprintf(msg, sizeof(msg), "%s%s%s", c->files[i].name.p,
			    rc == VD_ARTIFACT_INVALID ? " " : ": ", c->err.msg);
			memcpy(c->err.msg, msg, sizeof(msg));
			note_file(c, c->files[i].name);
			return rc;
		}
		declared += c->files[i].sf.count;
	}
	return VD_OK;
}

/* The files are mapped and well formed: a sink may digest them now. */
static vd_code start_sink(verify_ctx *c)
{
	vd_mapped_file *files;
	size_t i;

	/* On the first part only: the digests of the chunks are taken once. */
	if (c->sink == NULL || c->sink->start == NULL || c->from != NULL)
		return VD_OK;
	if ((files = calloc(c->nfiles, sizeof(*files))) == NULL)
		return VD_OK;       /* digests are an optimisation: go without */
	for (i = 0; i < c->nfiles; i++) {
		files[i].name = c->files[i].name.p;
		files[i].map = c->files[i].bytes;
		files[i].size = c->files[i].len;
	}
	c->sink->start(c->sink->arg, files, c->nfiles);
	c->sink_started = 1;
	free(files);
	return VD_OK;
}

static vd_code check_dtypes(verify_ctx *c)
{
	size_t i, j;

	for (i = 0; i < c->nfiles; i++) {
		for (j = 0; j < c->files[i].sf.count; j++) {
			const vd_st_tensor *t = &c->files[i].sf.tensors[j];
			if (vd_dtype_token(t->dtype) == NULL) {
				note_tensor(c, t);
				return vd_fail(&c->err, VD_ARTIFACT_INVALID,
				    "tensor \"%.64s\" is stored as %s; an artifact stores only F32, F16 and BF16",
				    t->name.p, vd_dtype_name(t->dtype));
			}
		}
	}
	return VD_OK;
}

/* The group of a tensor: its name up to the first '.'. */
static vd_str tensor_group(vd_str name)
{
	const char *dot = memchr(name.p, '.', name.len);
	vd_str g = { name.p, dot ? (size_t)(dot - name.p) : name.len };

	return g;
}

static int shared_group(vd_str g)
{
	return vd_str_eq(g, "encoder") || vd_str_eq(g, "predictor");
}

/* The first tensor stored in group g, to name one when a group is at fault. */
static const vd_st_tensor *group_tensor(const verify_ctx *c, vd_str g)
{
	size_t i, j;

	for (i = 0; i < c->nfiles; i++)
		for (j = 0; j < c->files[i].sf.count; j++)
			if (vd_str_cmp(tensor_group(c->files[i].sf.tensors[j].name), g) == 0)
				return &c->files[i].sf.tensors[j];
	return NULL;
}

static vd_code check_residency(verify_ctx *c)
{
	const vd_st_tensor *t;
	size_t i, j;

	for (i = 0; i < c->hdr.n_param_groups; i++) {
		if (shared_group(c->hdr.param_groups[i]))
			continue;
		if ((t = group_tensor(c, c->hdr.param_groups[i])) != NULL)
			note_tensor(c, t);
		return vd_fail(&c->err, VD_RESIDENCY_VIOLATION,
		    "param group \"%.64s\" is not shared (only encoder and predictor are)",
		    c->hdr.param_groups[i].p);
	}
	for (i = 0; i < c->nfiles; i++) {
		for (j = 0; j < c->files[i].sf.count; j++) {
			vd_str name = c->files[i].sf.tensors[j].name;
			if (!shared_group(tensor_group(name))) {
				note_tensor(c, &c->files[i].sf.tensors[j]);
				return vd_fail(&c->err, VD_RESIDENCY_VIOLATION,
				    "tensor \"%.64s\" is outside the shared groups encoder and predictor",
				    name.p);
			}
		}
	}
	return VD_OK;
}

static vd_code check_groups(verify_ctx *c)
{
	size_t i, j, k;

	for (i = 0; i < c->nfiles; i++) {
		for (j = 0; j < c->files[i].sf.count; j++) {
			vd_str name = c->files[i].sf.tensors[j].name, g = tensor_group(name);
			for (k = 0; k < c->hdr.n_param_groups; k++)
				if (vd_str_cmp(g, c->hdr.param_groups[k]) == 0)
					break;
			if (k == c->hdr.n_param_groups) {
				note_tensor(c, &c->files[i].sf.tensors[j]);
				return vd_fail(&c->err, VD_ARTIFACT_INVALID,
				    "tensor \"%.64s\" belongs to group \"%.*s\", which param_groups does not list",
				    name.p, (int)(g.len > 64 ? 64 : g.len), g.p);
			}
		}
	}
	return VD_OK;
}

static int tensor_name_cmp(const void *a, const void *b)
{
	const vd_st_tensor *x = *(const vd_st_tensor *const *)a;
	const vd_st_tensor *y = *(const vd_st_tensor *const *)b;

	return vd_str_cmp(x->name, y->name);
}

/* Merge the shards into one name-ordered list; a name twice is a fault. */
static vd_code merge_tensors(verify_ctx *c)
{
	size_t i, j, n = 0;

	for (i = 0; i < c->nfiles; i++)
		n += c->files[i].sf.count;
	c->sorted_size = (n ? n : 1) * sizeof(*c->sorted);
	c->sorted = vd_budget_alloc(&c->budget, c->sorted_size);
	if (c->sorted == NULL)
		return no_memory(c, "the list of the weight files' tensors");
	for (i = 0; i < c->nfiles; i++)
		for (j = 0; j < c->files[i].sf.count; j++)
			c->sorted[c->ntensors++] = &c->files[i].sf.tensors[j];
	qsort(c->sorted, c->ntensors, sizeof(*c->sorted), tensor_name_cmp);
	for (i = 1; i < c->ntensors; i++) {
		if (vd_str_cmp(c->sorted[i - 1]->name, c->sorted[i]->name) == 0) {
			note_tensor(c, c->sorted[i]);
			return vd_fail(&c->err, VD_CHECKPOINT_INTEGRITY,
			    "tensor \"%.64s\" is stored in both %s and %s",
			    c->sorted[i]->name.p, c->files[c->sorted[i - 1]->file].name.p,
			    c->files[c->sorted[i]->file].name.p);
		}
	}
	return VD_OK;
}

static const vd_st_tensor *find_tensor(verify_ctx *c, vd_str name)
{
	size_t lo = 0, hi = c->ntensors;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int r = vd_str_cmp(c->sorted[mid]->name, name);
		if (r == 0)
			return c->sorted[mid];
		if (r < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static vd_code check_index_entry(verify_ctx *c, const vd_jval *e)
{
	const vd_st_tensor *t;

	if (e->type != VD_JSTR)
		return vd_fail(&c->err, VD_CHECKPOINT_INTEGRITY,
		    INDEX_FILE " maps \"%.64s\" to something other than a file name", e->key.p);
	t = find_tensor(c, e->key);
	if (t == NULL)
		return vd_fail(&c->err, VD_CHECKPOINT_INTEGRITY,
		    INDEX_FILE " maps \"%.64s\", which no weight file holds", e->key.p);
	if (vd_str_cmp(e->str, c->files[t->file].name) != 0) {
		note_file(c, c->files[t->file].name);
		return vd_fail(&c->err, VD_CHECKPOINT_INTEGRITY,
		    INDEX_FILE " maps \"%.64s\" to %.64s but %s holds it",
		    e->key.p, e->str.p, c->files[t->file].name.p);
	}
	return VD_OK;
}

static vd_code check_index_map(verify_ctx *c, const vd_jval *map)
{
	const vd_jval *e;
	vd_code rc;

	if (map == NULL || map->type != VD_JOBJ)
		return vd_fail(&c->err, VD_CHECKPOINT_INTEGRITY,
		    INDEX_FILE " has no weight_map object");
	for (e = map->child; e != NULL; e = e->next) {
		if ((rc = check_index_entry(c, e)) != VD_OK) {
			fact_name(c->out->facts.tensor, e->key.p, e->key.len);
			return rc;
		}
	}
	if (map->count != c->ntensors)
		return vd_fail(&c->err, VD_CHECKPOINT_INTEGRITY,
		    INDEX_FILE " maps %zu tensors but the weight files hold %zu",
		    map->count, c->ntensors);
	return VD_OK;
}

/* The index as a JSON document, within the parse budget. */
static vd_code parse_index(verify_ctx *c, const small_file *b, vd_jdoc *doc)
{
	vd_json_bounds jb = { .budget = &c->budget };
	char msg[128];

	if (vd_json_parse_bounded(b->p, b->len, NULL, &jb, doc, msg, sizeof(msg)) == 0)
		return VD_OK;
	if (c->budget.exhausted)
		return no_memory(c, INDEX_FILE);
	return vd_fail(&c->err, VD_CHECKPOINT_INTEGRITY, INDEX_FILE " is not valid JSON (%s)", msg);
}

static vd_code check_index(verify_ctx *c)
{
	const vd_jval *root, *k;
	vd_jdoc doc;
	small_file b = { 0 };
	vd_code rc;

	if (!c->store->has(c, INDEX_FILE))
		return VD_OK;
	rc = c->store->read_small(c, INDEX_FILE, VD_HEADER_MAX_BYTES, VD_CHECKPOINT_INTEGRITY, &b);
	if (rc != VD_OK)
		goto out;
	c->meta.has_index = 1;
	if (vd_sha256(b.p, b.len, c->meta.index) < 0) {
		rc = vd_fail(&c->err, VD_IO_ERROR, "SHA-256 failed on %s", INDEX_FILE);
		goto out;
	}
	if ((rc = parse_index(c, &b, &doc)) != VD_OK)
		goto out;
	root = doc.root;
	if (root->type != VD_JOBJ) {
		rc = vd_fail(&c->err, VD_CHECKPOINT_INTEGRITY, INDEX_FILE " is not an object");
	} else {
		for (k = root->child; k != NULL && rc == VD_OK; k = k->next)
			if (!vd_str_eq(k->key, "metadata") && !vd_str_eq(k->key, "weight_map"))
				rc = vd_fail(&c->err, VD_CHECKPOINT_INTEGRITY,
				    INDEX_FILE " has an unknown field \"%.64s\"", k->key.p);
		if (rc == VD_OK)
			rc = check_index_map(c, vd_json_get(root, "weight_map"));
	}
	vd_jdoc_free(&doc);
out:
	give_small(c, &b);
	return rc;
}

static int shape_eq(uint32_t ra, const uint64_t *a, uint32_t rb, const uint64_t *b)
{
	return ra == rb && (ra == 0 || memcmp(a, b, ra * sizeof(*a)) == 0);
}

static vd_code check_manifest_entry(verify_ctx *c, size_t i)
{
	const vd_manifest_entry *m = &c->hdr.manifest[i];
	const vd_st_tensor *t = c->sorted[i];

	if (vd_str_cmp(m->name, t->name) != 0)
		return vd_fail(&c->err, VD_CHECKPOINT_INTEGRITY,
		    "manifest entry %zu names \"%.64s\" where the weights, in name order, hold \"%.64s\"",
		    i, m->name.p, t->name.p);
	if (vd_str_cmp(m->group, tensor_group(t->name)) != 0)
		return vd_fail(&c->err, VD_CHECKPOINT_INTEGRITY,
		    "manifest entry \"%.64s\" has group \"%.32s\", not its name's group",
		    m->name.p, m->group.p);
	if (!vd_str_eq(m->dtype, vd_dtype_token(t->dtype)))
		return vd_fail(&c->err, VD_CHECKPOINT_INTEGRITY,
		    "manifest entry \"%.64s\" has dtype %.32s but the weights store %s",
		    m->name.p, m->dtype.p, vd_dtype_token(t->dtype));
	if (!shape_eq(m->rank, m->shape, t->rank, t->shape))
		return vd_fail(&c->err, VD_CHECKPOINT_INTEGRITY,
		    "manifest entry \"%.64s\" has a shape other than the stored tensor's",
		    m->name.p);
	return VD_OK;
}

static vd_code check_manifest(verify_ctx *c)
{
	size_t i;
	vd_code rc;

	if (c->hdr.n_manifest != c->ntensors)
		return vd_fail(&c->err, VD_CHECKPOINT_INTEGRITY,
		    "the manifest lists %zu tensors but the weight files hold %zu",
		    c->hdr.n_manifest, c->ntensors);
	for (i = 0; i < c->ntensors; i++) {
		/* The stored tensor the entry fails to describe. */
		if ((rc = check_manifest_entry(c, i)) != VD_OK) {
			note_tensor(c, c->sorted[i]);
			return rc;
		}
	}
	return VD_OK;
}

/* The file fd maps from its start: a weight file's own mapping, or the
 * tar that holds it. Page arithmetic is done in file offsets against it. */
static uint8_t *file_base(const weight_file *w)
{
	return w->bytes - w->file_off;
}

/* Hash one mapped chunk in place; drop it from this mapping afterwards so
 * that resident memory stays flat however large the artifact (the page
 * cache keeps it). Never for read buffers: MADV_DONTNEED would zero them. */
static int hash_in_place(verify_ctx *c, vd_hasher *h, weight_file *w, uint64_t off, size_t n)
{
	int rc = vd_hasher_update(h, w->bytes + off, n);

	vd_mapping_drop(file_base(w), w->file_off + off, n, c->page);
	return rc;
}

/* The same bytes through read() into one small buffer, hashed from the
 * cache it stays in. A file that shrinks fails as under the mapping. */
static int hash_by_read(verify_ctx *c, vd_hasher *h, weight_file *w, uint64_t off, size_t n)
{
	size_t done = 0, want;
	ssize_t got;

	if (c->read_buf == NULL && (c->read_buf = malloc(VD_READ_BUFFER)) == NULL) {
		vd_fail(&c->err, VD_IO_ERROR, "out of memory");
		return -1;
	}
	while (done < n) {
		want = n - done < VD_READ_BUFFER ? n - done : VD_READ_BUFFER;
		got = pread(w->fd, c->read_buf, want, (off_t)(w->file_off + off + done));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			if (got == 0)
				vd_fail(&c->err, VD_CHECKPOINT_INTEGRITY,
				    "a weight file shrank while it was being read");
			else
				vd_fail(&c->err, VD_IO_ERROR, "cannot read it: %s", strerror(errno));
			name_failure(c, w);
			return -1;
		}
		if (vd_hasher_update(h, c->read_buf, (size_t)got) < 0)
			return -1;
		done += (size_t)got;
	}
	return 0;
}

/* A mapping of a page cache held in 4 KiB pages faults every few pages
 * and misses the TLB on every one: hashed in place, SHA-256 ran at 0.78x
 * of its rate in memory, through read() at 0.88x. Large folios fault a
 * few hundred KiB at a time and hash in place at 0.96x to 1.0x, where
 * read() would add its copy. One file holds both (read-ahead starts with
 * small folios and grows them), so every VD_PAGE_PROBE_EVERY bytes the
 * next VD_PAGE_PROBE are hashed in place, faults counted, and decide
 * until the next probe; only over pages already cached (a file read in by
 * this pass is laid out by its own read-ahead, which that measures
 * instead). */
static int probing(verify_ctx *c, weight_file *w, uint64_t off)
{
	if (w->probing || w->hashed < w->next_probe)
		return w->probing;
	w->next_probe += VD_PAGE_PROBE_EVERY;
	w->probing = w->len - off >= VD_PAGE_PROBE &&
	    vd_mapping_resident(file_base(w), w->file_off + off, VD_PAGE_PROBE, c->page);
	w->probe_bytes = w->probe_faults = 0;
	return w->probing;
}

static void probe_pages(weight_file *w, size_t n, uint64_t faults)
{
	w->probe_bytes += n;
	w->probe_faults += faults;
	if (w->probe_bytes < VD_PAGE_PROBE)
		return;
	w->by_read = w->probe_faults * (1u << 20) > VD_SMALL_PAGE_FAULTS * w->probe_bytes;
	w->probing = 0;
}

static int hash_mapped(verify_ctx *c, vd_hasher *h, weight_file *w, uint64_t off, size_t n)
{
	int clean = c->opt && (c->opt->flags & VD_VERIFY_KEEP_CACHE_CLEAN);
	int probe = probing(c, w, off);
	unsigned char *was = NULL;
	uint64_t first = 0, ps = c->page, at = w->file_off + off;
	uint64_t f0 = probe ? vd_thread_minor_faults() : 0;
	int rc;

	if (clean)
		was = vd_mapping_residency(file_base(w), at, n, ps, &first);
	rc = w->by_read && !probe ? hash_by_read(c, h, w, off, n) :
	    hash_in_place(c, h, w, off, n);
	if (probe)
		probe_pages(w, n, vd_thread_minor_faults() - f0);
	w->hashed += n;
	if (was != NULL) {
		vd_mapping_evict_new(w->fd, ps, first, was, at, n);
		free(was);
	}
	return rc;
}

/* The progress callback's answer after a chunk: go on, pause here (a
 * verification in parts only) or give up. */
static vd_code after_chunk(verify_ctx *c, size_t i, uint64_t at, uint64_t total)
{
	int r;

	if (c->opt == NULL || c->opt->progress == NULL ||
	    (r = c->opt->progress(c->done, total, c->opt->progress_arg)) == 0)
		return VD_OK;
	if (r == VD_PROGRESS_PAUSE && c->pausable) {
		c->paused = 1;
		c->at_tensor = i;
		c->at_byte = at;
		return vd_fail(&c->err, VD_IO_ERROR, "paused");
	}
	return vd_fail(&c->err, VD_IO_ERROR, "the verification was cancelled");
}

/* Tensor i's data from at on. */
static vd_code hash_data(verify_ctx *c, vd_hasher *h, size_t i, uint64_t at, uint64_t total)
{
	const vd_st_tensor *t = c->sorted[i];
	weight_file *w = &c->files[t->file];
	uint64_t off = w->sf.data_start + t->begin + at, left = t->end - t->begin - at;
	vd_code rc;

	while (left > 0) {
		size_t n = left > VD_HASH_CHUNK ? VD_HASH_CHUNK : (size_t)left;
		if (c->src->hash(c, h, w, off, n) < 0)
			return vd_fail(&c->err, VD_IO_ERROR, "SHA-256 failed");
		off += n;
		left -= n;
		at += n;
		c->done += n;
		if ((rc = after_chunk(c, i, at, total)) != VD_OK)
			return rc;
	}
	return VD_OK;
}

/* The stream so far: from the start, or as a paused part left it (the
 * tensor it paused in has its frame hashed already). */
static vd_code begin_hash(verify_ctx *c, size_t *first, uint64_t *at)
{
	vd_resume *from = (vd_resume *)c->from;

	*first = 0;
	*at = 0;
	if (from != NULL) {
		c->hasher = from->hasher;
		from->hasher = NULL;    /* this part's now: freed with c */
		*first = from->tensor;
		*at = from->at;
		c->done = from->done;
		return VD_OK;
	}
	if ((c->hasher = vd_hasher_new()) == NULL)
		return vd_fail(&c->err, VD_IO_ERROR, "cannot start SHA-256");
	if (vd_hash_begin(c->hasher) < 0)
		return vd_fail(&c->err, VD_IO_ERROR, "SHA-256 failed");
	return VD_OK;
}

static vd_code compute_hash(verify_ctx *c)
{
	vd_hasher *h;
	uint64_t total = 0, at;
	size_t i, first;
	vd_code rc;

	for (i = 0; i < c->ntensors; i++)
		total += c->sorted[i]->end - c->sorted[i]->begin;
	if ((rc = begin_hash(c, &first, &at)) != VD_OK)
		return rc;
	if (c->src->begin != NULL && (rc = c->src->begin(c)) != VD_OK)
		return rc;
	h = c->hasher;
	for (i = first; i < c->ntensors && rc == VD_OK; i++) {
		const vd_st_tensor *t = c->sorted[i];
		if (!(c->from != NULL && i == first) &&
		    vd_hash_tensor_frame(h, t->name, vd_dtype_token(t->dtype), t->rank,
		    t->shape) < 0)
			rc = vd_fail(&c->err, VD_IO_ERROR, "SHA-256 failed");
		else
			rc = hash_data(c, h, i, i == first ? at : 0, total);
	}
	if (rc == VD_OK && (vd_hash_struct(h, &c->hdr) < 0 ||
	    vd_hasher_final(h, c->out->content_hash) < 0))
		rc = vd_fail(&c->err, VD_IO_ERROR, "SHA-256 failed");
	if (rc == VD_OK && c->src->end != NULL)
		rc = c->src->end(c);
	c->out->tensors = c->ntensors;
	c->out->bytes = total;
	return rc;
}

/* Going on from a paused part: every file is the one read then, so that
 * the stream goes on over the same bytes. */
static vd_code check_resume(verify_ctx *c)
{
	const vd_file_ids *was;
	size_t i;

	if (c->from == NULL)
		return VD_OK;
	was = &c->from->ids;
	if (memcmp(c->meta.header, c->from->header, sizeof(c->meta.header)) != 0)
		return vd_fail(&c->err, VD_IO_ERROR, HEADER_FILE " changed while it was being verified");
	for (i = 0; i < was->count; i++)
		if (i >= c->ids->count || strcmp(was->ids[i].name, c->ids->ids[i].name) != 0 ||
		    !vd_file_id_same(&was->ids[i], &c->ids->ids[i]))
			return vd_fail(&c->err, VD_IO_ERROR, "%s changed while it was being verified",
			    strcmp(was->ids[i].name, TAR_SELF) == 0 ? "the archive" : was->ids[i].name);
	if (c->ids->count != was->count)
		return vd_fail(&c->err, VD_IO_ERROR, "the files changed while they were being verified");
	return VD_OK;
}

/* A file rewritten while it was read may have been hashed half old, half new. */
static vd_code check_unchanged(verify_ctx *c)
{
	return c->store->unchanged(c);
}

static vd_code dir_unchanged(verify_ctx *c)
{
	struct stat st;
	vd_file_id a, b;
	size_t i;

	for (i = 0; i < c->nfiles; i++) {
		if (fstat(c->files[i].fd, &st) < 0)
			return io_fail(c, c->files[i].name.p, "stat");
		vd_file_id_from_stat(&a, "", &c->files[i].st);
		vd_file_id_from_stat(&b, "", &st);
		if (!vd_file_id_same(&a, &b))
			return vd_fail(&c->err, VD_IO_ERROR,
			    "%s changed while it was being verified", c->files[i].name.p);
	}
	return VD_OK;
}

/* The two hashes a comparison found different. */
static void note_hashes(verify_ctx *c, const char *expected)
{
	vd_facts *f = &c->out->facts;

	snprintf(f->expected_hash, sizeof(f->expected_hash), "%.*s", VD_HASH_HEX_LEN, expected);
	memcpy(f->recomputed_hash, c->out->content_hash, sizeof(f->recomputed_hash));
}

static vd_code compare_hashes(verify_ctx *c)
{
	const char *want = c->opt ? c->opt->expected_hash : NULL;

	if (memcmp(c->out->content_hash, c->hdr.content_hash.p, VD_HASH_HEX_LEN) != 0) {
		note_hashes(c, c->hdr.content_hash.p);
		return vd_fail(&c->err, VD_CHECKPOINT_INTEGRITY,
		    "the recomputed hash %s differs from header.json content_hash %.64s",
		    c->out->content_hash, c->hdr.content_hash.p);
	}
	if (want != NULL && strcmp(want, c->out->content_hash) != 0) {
		note_hashes(c, want);
		return vd_fail(&c->err, VD_CHECKPOINT_INTEGRITY,
		    "the artifact hash %s differs from the committed hash %.64s",
		    c->out->content_hash, want);
	}
	return VD_OK;
}

static void release(verify_ctx *c)
{
	size_t i;

	if (c->sink_started && c->sink->finish != NULL)
		c->sink->finish(c->sink->arg, &c->meta);
	/* The reader writes into the files' buffers: stopped before they go. */
	vd_reader_stop(c->reader);
	for (i = 0; i < c->nfiles; i++) {
		weight_file *w = &c->files[i];
		vd_st_free(&w->sf);
		c->src->drop(w);
		if (w->own_fd && w->fd >= 0)
			close(w->fd);
	}
	free(c->files);
	vd_budget_free(&c->budget, c->sorted, c->sorted_size);
	vd_hasher_free(c->hasher);
	free(c->read_buf);
	vd_buf_free(&c->header_bytes);
	if (c->have_hdr)
		vd_header_free(&c->hdr);
	if (c->tar_ps != NULL)
		vd_tar_parser_free(c->tar_ps);
	free(c->tar_ps);
	vd_tar_index_free(&c->tar);
	if (c->tar_map != NULL)
		munmap(c->tar_map, c->tar_len);
}

static const byte_source map_source = { map_file, NULL, hash_mapped, NULL, unmap_file, 1 };
static const byte_source read_source = {
	read_file, begin_reading, hash_read, end_reading, free_read, 0,
};
static const byte_source tar_map_source = {
	slice_tar, NULL, hash_mapped, NULL, forget_slice, 1,
};

static vd_code dir_prepare(verify_ctx *c)
{
	return VD_OK;
}

/* A directory may hold other files (a signature, notes): the verifier
 * opens only what it reads, by name, and nothing extracts the directory. */
static vd_code dir_nothing_else(verify_ctx *c)
{
	return VD_OK;
}

static int dir_has(verify_ctx *c, const char *name)
{
	return !(fstatat(c->dirfd, name, &(struct stat){ 0 }, AT_SYMLINK_NOFOLLOW) < 0 &&
	    errno == ENOENT);
}

static const member_store dir_store = {
	dir_prepare, dir_open_weight, read_small, dir_has, dir_unchanged, dir_nothing_else,
};
static const member_store tar_store = {
	tar_prepare, tar_open_weight, tar_read_small, tar_has, tar_unchanged, tar_nothing_else,
};

static vd_code open_store(verify_ctx *c)
{
	return c->store->prepare(c);
}

static vd_code check_members(verify_ctx *c)
{
	return c->store->nothing_else(c);
}

/* Allocate all the caller will get before moving anything, so that a
 * failure leaves the verifier's own state whole for release(). */
static int alloc_loaded(const verify_ctx *c, vd_loaded *l)
{
	size_t i, nf = c->nfiles ? c->nfiles : 1;

	l->files = calloc(nf, sizeof(*l->files));
	l->tensors = calloc(c->ntensors ? c->ntensors : 1, sizeof(*l->tensors));
	l->store = calloc(1, sizeof(*l->store));
	if (l->files == NULL || l->tensors == NULL || l->store == NULL)
		return -1;
	l->n_files = c->nfiles;
	if ((l->store->sf = calloc(nf, sizeof(*l->store->sf))) == NULL)
		return -1;
	l->store->n = c->nfiles;
	for (i = 0; i < c->nfiles; i++)
		if ((l->files[i].name = strdup(c->files[i].name.p)) == NULL)
			return -1;
	return 0;
}

static void fill_tensor(vd_tensor *o, const vd_st_tensor *t, const vd_loaded *l)
{
	o->name = t->name.p;
	o->name_len = t->name.len;
	o->dtype = vd_dtype_token(t->dtype);
	o->rank = t->rank;
	o->shape = t->shape;
	o->data = l->files[t->file].data + l->store->sf[t->file].data_start + t->begin;
	o->len = (size_t)(t->end - t->begin);
	o->file = t->file;
}

/* The last step, memory source only: the verified buffers, and the parsed
 * headers that describe them, change hands. */
static vd_code hand_over(verify_ctx *c)
{
	vd_loaded *l = c->loaded;
	size_t i;

	if (l == NULL)
		return VD_OK;
	if (alloc_loaded(c, l) < 0) {
		vd_loaded_free(l);
		return vd_fail(&c->err, VD_IO_ERROR, "out of memory");
	}
	for (i = 0; i < c->nfiles; i++) {
		weight_file *w = &c->files[i];
		l->files[i].data = w->bytes;
		l->files[i].len = w->len;
		w->bytes = NULL;
		l->store->sf[i] = w->sf;
		/* The caller's now: nothing left to charge once c is gone. */
		l->store->sf[i].doc.arena.budget = NULL;
		memset(&w->sf, 0, sizeof(w->sf));
	}
	for (i = 0; i < c->ntensors; i++)
		fill_tensor(&l->tensors[i], c->sorted[i], l);
	l->n_tensors = c->ntensors;
	l->header = c->header_bytes.p;
	l->header_len = c->header_bytes.len;
	vd_buf_init(&c->header_bytes);
	return VD_OK;
}

typedef vd_code (*verify_step)(verify_ctx *c);

/* The order decides which code a multiply-broken artifact gets
 * (canonical-hash.md section 5). */
static const verify_step steps[] = {
	open_store, load_header, open_weights, check_members, check_structure, start_sink,
	check_dtypes, check_residency, check_groups, merge_tensors, check_index,
	check_manifest, check_resume, compute_hash, check_unchanged, compare_hashes, hand_over,
};

static void run_steps(verify_ctx *c)
{
	vd_code rc = VD_OK;
	size_t i;

	for (i = 0; i < VD_ARRAY_LEN(steps) && rc == VD_OK; i++)
		rc = steps[i](c);
}

/* b, its defaults filled in, and the budget of max_job_memory. */
static void set_bounds(verify_ctx *c, const vd_bounds *b)
{
	c->bounds.max_tensors = b && b->max_tensors ? b->max_tensors : VD_MAX_TENSORS_DEFAULT;
	c->bounds.max_job_memory = b && b->max_job_memory ? b->max_job_memory :
	    VD_MAX_JOB_MEMORY_DEFAULT;
	c->bounds.max_artifact_bytes = b && b->max_artifact_bytes ? b->max_artifact_bytes :
	    VD_MAX_ARTIFACT_BYTES_DEFAULT;
	vd_budget_init(&c->budget, c->bounds.max_job_memory < SIZE_MAX ?
	    (size_t)c->bounds.max_job_memory : SIZE_MAX);
}

/* A context reading through the mapping source within bounds (NULL: the
 * defaults); NULL (and out filled) when out of memory. */
static verify_ctx *new_ctx(int dirfd, const vd_options *opt, const vd_bounds *bounds,
    vd_verdict *out)
{
	verify_ctx *c = calloc(1, sizeof(*c));

	memset(out, 0, sizeof(*out));
	if (c == NULL) {
		out->code = VD_IO_ERROR;
		snprintf(out->detail, sizeof(out->detail), "out of memory");
		vd_verdict_remediate(out);
		return NULL;
	}
	c->dirfd = dirfd;
	c->store = &dir_store;
	c->tarfd = -1;
	c->src = &map_source;
	c->max_bytes = UINT64_MAX;  /* a mapping holds no memory of its own */
	/* Read here rather than cached in a static that every hasher thread
	 * would fill at once. */
	c->page = (uint64_t)sysconf(_SC_PAGESIZE);
	c->opt = opt;
	c->out = out;
	set_bounds(c, bounds);
	return c;
}

/* Where a paused part stopped, taken out of c before it is released;
 * NULL when out of memory. */
static vd_resume *keep_position(verify_ctx *c)
{
	vd_resume *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return NULL;
	r->hasher = c->hasher;
	c->hasher = NULL;
	r->tensor = c->at_tensor;
	r->at = c->at_byte;
	r->done = c->done;
	r->ids = c->own_ids;
	memset(&c->own_ids, 0, sizeof(c->own_ids));
	memcpy(r->header, c->meta.header, sizeof(r->header));
	return r;
}

/* Run the steps, fill the verdict and free c: the one path of both
 * sources. 1 when a part paused (*paused then says where; out is not
 * filled), else 0. */
static int run(verify_ctx *c, vd_resume **paused)
{
	vd_verdict *out = c->out;
	vd_bus_guard g = { .covers = ctx_covers, .arg = c }, *prev;

	if (c->src->maps)
		vd_bus_guard_lazily();
	prev = vd_bus_guard_push(&g);
	if (sigsetjmp(g.jb, 1) == 0) {
		run_steps(c);
	} else {
		vd_fail(&c->err, VD_CHECKPOINT_INTEGRITY, c->tar_map != NULL ?
		    "the archive shrank while it was being read" :
		    "a weight file shrank while it was being read");
		c->out->content_hash[0] = '\0';
		note_fault(c, g.fault);
	}
	vd_bus_guard_pop(prev);
	if (c->paused && (*paused = keep_position(c)) == NULL) {
		c->paused = 0;
		c->err.code = VD_IO_ERROR;
		snprintf(c->err.msg, sizeof(c->err.msg), "out of memory");
	}
	release(c);
	vd_file_ids_free(&c->own_ids);
	if (c->paused) {
		free(c);
		return 1;
	}
	out->code = c->err.code;
	if (out->code != VD_OK)
		snprintf(out->detail, sizeof(out->detail), "%s", c->err.msg);
	vd_verdict_remediate(out);
	free(c);
	return 0;
}

static vd_code run_whole(verify_ctx *c)
{
	vd_verdict *out = c->out;

	run(c, NULL);
	return out->code;
}

vd_code vd_artifact_verify_ex(int dirfd, const vd_options *opt, const vd_bounds *bounds,
    vd_verdict *out, vd_file_ids *ids, const vd_chunk_sink *sink)
{
	verify_ctx *c = new_ctx(dirfd, opt, bounds, out);

	if (c == NULL)
		return out->code;
	c->ids = ids;
	c->sink = sink;
	return run_whole(c);
}

vd_code vd_artifact_verify_tar_ex(int tarfd, const vd_options *opt,
    const vd_bounds *bounds, vd_verdict *out, vd_file_ids *ids, const vd_chunk_sink *sink)
{
	verify_ctx *c = new_ctx(-1, opt, bounds, out);

	if (c == NULL)
		return out->code;
	c->store = &tar_store;
	c->tarfd = tarfd;
	c->src = &tar_map_source;
	c->ids = ids;
	c->sink = sink;
	return run_whole(c);
}

/* fd is a directory, or a regular file taken for a tar. */
static int is_tar_fd(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

static vd_code load_verified(int fd, int tar, const vd_options *opt, uint64_t max_bytes,
    vd_loaded *loaded, vd_verdict *out)
{
	verify_ctx *c;

	memset(loaded, 0, sizeof(*loaded));
	if ((c = new_ctx(tar ? -1 : fd, opt, NULL, out)) == NULL)
		return out->code;
	if (tar) {
		c->store = &tar_store;
		c->tarfd = fd;
	}
	c->src = &read_source;
	c->max_bytes = max_bytes ? max_bytes : VD_LOAD_DEFAULT_MAX_BYTES;
	c->loaded = loaded;
	return run_whole(c);
}

int vd_artifact_verify_part(int fd, int tar, const vd_options *opt, const vd_bounds *bounds,
    vd_verdict *out, const vd_chunk_sink *sink, vd_resume **resume)
{
	vd_resume *from = *resume;
	verify_ctx *c = new_ctx(tar ? -1 : fd, opt, bounds, out);
	int rc;

	*resume = NULL;
	if (c == NULL) {
		vd_resume_free(from);
		return 0;
	}
	if (tar) {
		c->store = &tar_store;
		c->tarfd = fd;
		c->src = &tar_map_source;
	}
	c->ids = &c->own_ids;
	c->sink = sink;
	c->from = from;
	c->pausable = 1;
	rc = run(c, resume);
	vd_resume_free(from);
	return rc;
}

uint64_t vd_resume_hashed(const vd_resume *r)
{
	return r->done;
}

void vd_resume_free(vd_resume *r)
{
	if (r == NULL)
		return;
	vd_hasher_free(r->hasher);
	vd_file_ids_free(&r->ids);
	free(r);
}

vd_code vd_load_verified_at(int fd, const vd_options *opt, uint64_t max_bytes,
    vd_loaded *loaded, vd_verdict *out)
{
	return load_verified(fd, is_tar_fd(fd), opt, max_bytes, loaded, out);
}

const vd_tensor *vd_loaded_tensor(const vd_loaded *loaded, const char *name)
{
	vd_str key = { name, strlen(name) };
	size_t lo = 0, hi = loaded->n_tensors;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const vd_tensor *t = &loaded->tensors[mid];
		int r = vd_str_cmp((vd_str){ t->name, t->name_len }, key);
		if (r == 0)
			return t;
		if (r < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

void vd_loaded_free(vd_loaded *loaded)
{
	size_t i;

	if (loaded == NULL)
		return;
	for (i = 0; i < loaded->n_files; i++) {
		free((char *)loaded->files[i].name);
		free(loaded->files[i].data);
	}
	if (loaded->store != NULL) {
		for (i = 0; i < loaded->store->n; i++)
			vd_st_free(&loaded->store->sf[i]);
		free(loaded->store->sf);
		free(loaded->store);
	}
	free(loaded->files);
	free(loaded->tensors);
	free(loaded->header);
	memset(loaded, 0, sizeof(*loaded));
}

vd_code vd_artifact_open_member(int dirfd, const char *name, int *fd,
    struct stat *st, vd_err *err)
{
	verify_ctx c;
	vd_code rc;

	memset(&c, 0, sizeof(c));
	c.dirfd = dirfd;
	rc = open_member(&c, name, VD_CHECKPOINT_INTEGRITY, fd, st);
	if (rc != VD_OK)
		*err = c.err;
	return rc;
}

vd_code vd_artifact_digest_small(int dirfd, const char *name, uint8_t out[32], vd_err *err)
{
	verify_ctx c;
	small_file b = { 0 };
	vd_code rc;

	memset(&c, 0, sizeof(c));
	c.dirfd = dirfd;
	rc = read_small(&c, name, VD_HEADER_MAX_BYTES, VD_CHECKPOINT_INTEGRITY, &b);
	if (rc == VD_OK && vd_sha256(b.p, b.len, out) < 0)
		rc = vd_fail(&c.err, VD_IO_ERROR, "SHA-256 failed on %s", name);
	if (rc != VD_OK)
		*err = c.err;
	give_small(&c, &b);
	return rc;
}

/* c's header, the caller's now: c's budget is not there to charge when it
 * is freed. */
static void take_header(verify_ctx *c, vd_header *hdr)
{
	*hdr = c->hdr;
	hdr->doc.arena.budget = NULL;
}

vd_code vd_artifact_read_header(int dirfd, const vd_bounds *bounds, vd_header *hdr,
    vd_file_id *id, vd_err *err)
{
	verify_ctx c;
	vd_verdict v;
	vd_file_ids ids = { 0 };
	vd_code rc;

	memset(&c, 0, sizeof(c));
	c.dirfd = dirfd;
	c.store = &dir_store;
	c.out = &v;
	c.ids = &ids;
	set_bounds(&c, bounds);
	rc = load_header(&c);
	if (rc == VD_OK) {
		take_header(&c, hdr);
		if (id != NULL && ids.count > 0)
			*id = ids.ids[0];
	} else {
		*err = c.err;
	}
	vd_file_ids_free(&ids);
	return rc;
}

vd_code vd_artifact_read_header_tar(int tarfd, const vd_bounds *bounds, vd_header *hdr,
    vd_file_id *id, vd_err *err)
{
	verify_ctx c;
	vd_verdict v;
	vd_file_ids ids = { 0 };
	vd_code rc;

	memset(&c, 0, sizeof(c));
	c.store = &tar_store;
	c.src = &read_source;       /* nothing mapped: nothing to guard */
	c.tarfd = tarfd;
	c.out = &v;
	c.ids = &ids;
	set_bounds(&c, bounds);
	rc = tar_prepare(&c);
	if (rc == VD_OK)
		rc = load_header(&c);
	if (rc == VD_OK) {
		take_header(&c, hdr);
		if (id != NULL && ids.count > 0)
			*id = ids.ids[0];
	} else {
		*err = c.err;
	}
	vd_file_ids_free(&ids);
	if (c.tar_ps != NULL)
		vd_tar_parser_free(c.tar_ps);
	free(c.tar_ps);
	vd_tar_index_free(&c.tar);
	return rc;
}

vd_code vd_verify_artifact_at(int fd, const vd_options *opt, vd_verdict *out)
{
	if (is_tar_fd(fd))
		return vd_artifact_verify_tar_ex(fd, opt, NULL, out, NULL, NULL);
	return vd_artifact_verify(fd, opt, out, NULL);
}

/* Open the artifact at path, a directory or a regular file taken for a
 * tar; -1 with out filled when it cannot be. Checked before it is opened,
 * so that a device or a FIFO is never opened at all. */
static int open_path(const char *path, int *tar, vd_verdict *out)
{
	struct stat pre, st;
	int fd, e;

	memset(out, 0, sizeof(*out));
	if (stat(path, &pre) < 0)
		goto fail;
	if (!S_ISDIR(pre.st_mode) && !S_ISREG(pre.st_mode)) {
		out->code = VD_ARTIFACT_INVALID;
		snprintf(out->detail, sizeof(out->detail),
		    "%s is neither a directory nor a tar file", path);
		return -1;
	}
	*tar = S_ISREG(pre.st_mode);
	fd = open(path, O_RDONLY | O_CLOEXEC | (*tar ? O_NONBLOCK : O_DIRECTORY));
	if (fd < 0)
		goto fail;
	if (fstat(fd, &st) < 0 || st.st_dev != pre.st_dev || st.st_ino != pre.st_ino) {
		close(fd);
		out->code = VD_IO_ERROR;
		snprintf(out->detail, sizeof(out->detail), "%s changed while it was opened", path);
		return -1;
	}
	return fd;
fail:
	e = errno;
	out->code = e == ENOENT || e == ENOTDIR ? VD_ARTIFACT_INVALID : VD_IO_ERROR;
	snprintf(out->detail, sizeof(out->detail), "cannot open the artifact %s: %s",
	    path, strerror(e));
	return -1;
}

static int open_artifact(const char *path, int *tar, vd_verdict *out)
{
	int fd = open_path(path, tar, out);

	if (fd < 0)
		vd_verdict_remediate(out);
	return fd;
}

vd_code vd_verify_artifact(const char *path, const vd_options *opt, vd_verdict *out)
{
	int tar = 0, fd = open_artifact(path, &tar, out);
	vd_code rc;

	if (fd < 0)
		return out->code;
	if (tar)
		rc = vd_artifact_verify_tar_ex(fd, opt, NULL, out, NULL, NULL);
	else
		rc = vd_artifact_verify(fd, opt, out, NULL);
	close(fd);
	return rc;
}

vd_code vd_load_verified(const char *path, const vd_options *opt, uint64_t max_bytes,
    vd_loaded *loaded, vd_verdict *out)
{
	int tar = 0, fd;
	vd_code rc;

	memset(loaded, 0, sizeof(*loaded));
	if ((fd = open_artifact(path, &tar, out)) < 0)
		return out->code;
	rc = load_verified(fd, tar, opt, max_bytes, loaded, out);
	close(fd);
	return rc;
}

/* ---- the entry points of the first vd_verdict -----------------------------
 * Programs built against the header from before vd_verdict grew call these
 * names with the smaller struct: they get the fields it has, and nothing
 * is written past it. */
#undef vd_verify_artifact
#undef vd_verify_artifact_at
#undef vd_load_verified
#undef vd_load_verified_at

/* The first vd_verdict ended with bytes. */
#define VERDICT_V1_SIZE offsetof(vd_verdict, facts)
_Static_assert(offsetof(vd_verdict, facts) == offsetof(vd_verdict, bytes) + sizeof(uint64_t),
    "the fields appended to vd_verdict start where the first layout ended");

vd_code vd_verify_artifact(const char *path, const vd_options *opt, void *out);
vd_code vd_verify_artifact_at(int fd, const vd_options *opt, void *out);
vd_code vd_load_verified(const char *path, const vd_options *opt, uint64_t max_bytes,
    vd_loaded *loaded, void *out);
vd_code vd_load_verified_at(int fd, const vd_options *opt, uint64_t max_bytes,
    vd_loaded *loaded, void *out);

static vd_code first_layout(vd_code rc, const vd_verdict *v, void *out)
{
	memcpy(out, v, VERDICT_V1_SIZE);
	return rc;
}

vd_code vd_verify_artifact(const char *path, const vd_options *opt, void *out)
{
	vd_verdict v;

	return first_layout(vd_verify_artifact_v2(path, opt, &v), &v, out);
}

vd_code vd_verify_artifact_at(int fd, const vd_options *opt, void *out)
{
	vd_verdict v;

	return first_layout(vd_verify_artifact_at_v2(fd, opt, &v), &v, out);
}

vd_code vd_load_verified(const char *path, const vd_options *opt, uint64_t max_bytes,
    vd_loaded *loaded, void *out)
{
	vd_verdict v;

	return first_layout(vd_load_verified_v2(path, opt, max_bytes, loaded, &v), &v, out);
}

vd_code vd_load_verified_at(int fd, const vd_options *opt, uint64_t max_bytes,
    vd_loaded *loaded, void *out)
{
	vd_verdict v;

	return first_layout(vd_load_verified_at_v2(fd, opt, max_bytes, loaded, &v), &v, out);
}

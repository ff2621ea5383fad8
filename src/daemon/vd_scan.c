#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


#include "vd_hash.h"
#include "vd_scan.h"

int vd_tar_name(const char *name)
{
	size_t n = strlen(name), sl = strlen(VD_TAR_SUFFIX);

	return name[0] != '.' && n > sl && strcmp(name + n - sl, VD_TAR_SUFFIX) == 0;
}

static char *dup_str(vd_str s)
{
	char *p = malloc(s.len + 1);

	if (p != NULL) {
		memcpy(p, s.p, s.len);
		p[s.len] = '\0';
	}
	return p;
}

/* The fields the store keeps, copied out of a parsed header (freed here). */
static void hdrinfo_take(vd_header *h, vd_hdrinfo *out)
{
	size_t i;

	memcpy(out->content_hash, h->content_hash.p, VD_HASH_HEX_LEN);
	if ((out->has_parent = h->has_parent))
		memcpy(out->parent_hash, h->parent_hash.p, VD_HASH_HEX_LEN);
	out->schema_version = h->schema_version;
	out->round_index = h->round_index;
	out->wmcp_version = dup_str(h->wmcp_version);
	out->config_hash = dup_str(h->config_hash);
	out->created_at = dup_str(h->created_at);
	out->param_groups = calloc(h->n_param_groups ? h->n_param_groups : 1, sizeof(char *));
	for (i = 0; out->param_groups && i < h->n_param_groups; i++)
		out->param_groups[out->n_param_groups++] = dup_str(h->param_groups[i]);
	vd_header_free(h);
}

/* Why a header does not parse is the verification's to say: the copy is
 * verified either way. */
void vd_hdrinfo_read(int dirfd, const vd_bounds *bounds, vd_hdrinfo *out)
{
	vd_header h;
	vd_err err = { 0 };

	memset(out, 0, sizeof(*out));
	out->code = vd_artifact_read_header(dirfd, bounds, &h, NULL, &err);
	if (out->code == VD_OK)
		hdrinfo_take(&h, out);
}

void vd_hdrinfo_read_tar(int tarfd, const vd_bounds *bounds, vd_hdrinfo *out)
{
	vd_header h;
	vd_err err = { 0 };

	memset(out, 0, sizeof(*out));
	out->code = vd_artifact_read_header_tar(tarfd, bounds, &h, NULL, &err);
	if (out->code == VD_OK)
		hdrinfo_take(&h, out);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names of a directory's entries, sorted, at most cap of them; NULL on
 * error. *partial is set when the cap was hit or a name could not be kept:
 * the list then does not say what the directory lacks. */
static char **list_dir(int dirfd, size_t max, size_t *n, int *partial)
{
	char **names = NULL, **grown;
	struct dirent *de;
	size_t cap = 0;
	DIR *d;
	int fd = dup(dirfd);

	*n = 0;
	*partial = 0;
	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	rewinddir(d);
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (*n == max) {
			*partial = 1;
			break;
		}
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			if ((grown = realloc(names, cap * sizeof(*names))) == NULL) {
				*partial = 1;
				break;
			}
			names = grown;
		}
		if ((names[(*n)++] = strdup(de->d_name)) == NULL)
			*partial = 1;
	}
	closedir(d);
	if (names != NULL)
		qsort(names, *n, sizeof(*names), name_cmp);
	else
		names = calloc(1, sizeof(*names));
	return names;
}

static void free_names(char **names, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int vd_fingerprint_dir(int dirfd, vd_fingerprint *fp)
{
	vd_hasher *h = vd_hasher_new();
	struct stat st;
	char **names;
	size_t n, i;
	int64_t rec[9];
	int partial, ok = 1;

	memset(fp, 0, sizeof(*fp));
	if (h == NULL)
		return -ENOMEM;
	names = list_dir(dirfd, VD_SCAN_MAX_DIR_ENTRIES, &n, &partial);
	for (i = 0; names != NULL && i < n; i++) {
		memset(rec, 0, sizeof(rec));
		if (names[i] && fstatat(dirfd, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0) {
			rec[0] = st.st_mode;
			rec[1] = (int64_t)st.st_dev;
			rec[2] = (int64_t)st.st_ino;
			rec[3] = st.st_size;
			rec[4] = st.st_mtim.tv_sec;
			rec[5] = st.st_mtim.tv_nsec;
			rec[6] = st.st_ctim.tv_sec;
			rec[7] = st.st_ctim.tv_nsec;
			rec[8] = (int64_t)st.st_nlink;
			fp->linked += S_ISREG(st.st_mode) && st.st_nlink > 1;
		}
		/* The name with its NUL, then the identity. */
		ok = ok && vd_hasher_update(h, names[i] ? names[i] : "",
		    names[i] ? strlen(names[i]) + 1 : 1) == 0 &&
		    vd_hasher_update(h, rec, sizeof(rec)) == 0;
	}
	fp->entries = n;
	fp->ok = names != NULL && ok && vd_hasher_digest(h, fp->digest) == 0;
	free_names(names, n);
	vd_hasher_free(h);
	return fp->ok ? 0 : -EIO;
}

/* Tagged, so that no directory's digest can equal it. */
#define VD_FP_FILE_TAG "tar\0"

void vd_fingerprint_file(const struct stat *st, const struct stat *sig, vd_fingerprint *fp)
{
	vd_hasher *h = vd_hasher_new();
	int64_t rec[9] = { st->st_mode, (int64_t)st->st_dev, (int64_t)st->st_ino, st->st_size,
		st->st_mtim.tv_sec, st->st_mtim.tv_nsec, st->st_ctim.tv_sec, st->st_ctim.tv_nsec,
		(int64_t)st->st_nlink };
	int64_t srec[6];

	memset(fp, 0, sizeof(*fp));
	fp->entries = 1;
	fp->linked = S_ISREG(st->st_mode) && st->st_nlink > 1;
	fp->ok = h != NULL &&
	    vd_hasher_update(h, VD_FP_FILE_TAG, sizeof(VD_FP_FILE_TAG) - 1) == 0 &&
	    vd_hasher_update(h, rec, sizeof(rec)) == 0;
	/* Only when there is one: a tar without a bundle keeps the digest its
	 * stored verdict was reached on. */
	if (sig != NULL) {
		srec[0] = (int64_t)sig->st_ino;
		srec[1] = sig->st_size;
		srec[2] = sig->st_mtim.tv_sec;
		srec[3] = sig->st_mtim.tv_nsec;
		srec[4] = sig->st_ctim.tv_sec;
		srec[5] = sig->st_ctim.tv_nsec;
		fp->ok = fp->ok && vd_hasher_update(h, srec, sizeof(srec)) == 0;
	}
	fp->ok = fp->ok && vd_hasher_digest(h, fp->digest) == 0;
	vd_hasher_free(h);
}

const struct stat *vd_tar_sig_stat(int parent, const char *tar_name, struct stat *st)
{
	char name[NAME_MAX + 8];

	if (parent < 0 || snprintf(name, sizeof(name), "%s%s", tar_name, VD_TAR_SIG_SUFFIX) >=
	    (int)sizeof(name) || fstatat(parent, name, st, AT_SYMLINK_NOFOLLOW) < 0)
		return NULL;
	return st;
}

int vd_relpath_ok(const char *p)
{
	const char *c = p;

	if (p[0] == '\0' || p[0] == '/')
		return 0;
	while (*c) {
		const char *slash = strchr(c, '/');
		size_t len = slash ? (size_t)(slash - c) : strlen(c);
		if (len == 0 || c[0] == '.')
			return 0;     /* empty, ".", ".." and hidden components */
		c += len + (slash != NULL);
		if (slash && *c == '\0')
			return 0;
	}
	return 1;
}

int vd_open_beneath(int rootfd, const char *relpath)
{
	char comp[256];
	const char *p = relpath;
	int fd = dup(rootfd), next;

	if (fd < 0)
		return -errno;
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		if (len == 0 || len >= sizeof(comp)) {
			close(fd);
			return -EINVAL;
		}
		memcpy(comp, p, len);
		comp[len] = '\0';
		next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		if (next < 0)
			return errno == ELOOP ? -ELOOP : -errno;
		fd = next;
		p += len + (slash != NULL);
	}
	return fd;
}

/* A regular file named name in dirfd, opened without following a link. */
static int openat_tar(int dirfd, const char *name)
{
	struct stat st;
	int fd;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return S_ISLNK(st.st_mode) ? -ELOOP : -EINVAL;
	/* Non-blocking: a FIFO swapped in since the check does not hang. */
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

int vd_open_tar_beneath(int rootfd, const char *relpath, int *dirfd)
{
	const char *slash = strrchr(relpath, '/');
	char parent[PATH_MAX];
	int dfd, fd;

	if (dirfd != NULL)
		*dirfd = -1;
	if (slash != NULL && (size_t)(slash - relpath) >= sizeof(parent))
		return -ENAMETOOLONG;
	snprintf(parent, sizeof(parent), "%.*s", slash ? (int)(slash - relpath) : 0, relpath);
	if ((dfd = vd_open_beneath(rootfd, parent)) < 0)
		return dfd;
	fd = openat_tar(dfd, slash ? slash + 1 : relpath);
	if (fd >= 0 && dirfd != NULL)
		*dirfd = dfd;
	else
		close(dfd);
	return fd;
}

int vd_artifact_kind_at(int rootfd, const char *relpath)
{
	const char *base = strrchr(relpath, '/');
	struct stat st;
	int fd = vd_open_beneath(rootfd, relpath), kind = -ENOENT;

	if (fd >= 0) {
		if (fstatat(fd, "header.json", &st, AT_SYMLINK_NOFOLLOW) == 0)
			kind = VD_KIND_DIR;
		close(fd);
		return kind;
	}
	if (!vd_tar_name(base ? base + 1 : relpath))
		return -ENOENT;
	if ((fd = vd_open_tar_beneath(rootfd, relpath, NULL)) < 0)
		return fd;
	close(fd);
	return VD_KIND_TAR;
}

static char *join(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *p = malloc(la + lb + 2);

	if (p == NULL)
		return NULL;
	if (la) {
		memcpy(p, a, la);
		p[la++] = '/';
	}
	memcpy(p + la, b, lb + 1);
	return p;
}

/* A walk that missed something says so: the store then keeps what it
 * knew instead of taking the missing entries for removed ones. */
static void scan_incomplete(vd_scan_result *r, const char *rel, const char *why)
{
	if (r->incomplete)
		return;
	r->incomplete = 1;
	snprintf(r->incomplete_why, sizeof(r->incomplete_why), "%s: %s", rel[0] ? rel : ".", why);
}

/* fd: the artifact directory, or the tar file (kind). */
static void add_artifact(vd_scan_result *r, int fd, int parent, vd_artifact_kind kind,
    const char *rel, const char *run)
{
	vd_scan_artifact *a, *arr;
	struct stat st, sig;

	if (r->n_artifacts >= (r->room > 0 ? r->room : VD_SCAN_MAX_ARTIFACTS)) {
		r->truncated = 1;
		scan_incomplete(r, rel, "the store holds more artifacts than the scan takes");
		return;
	}
	arr = vd_grow(r->artifacts, &r->cap_artifacts, r->n_artifacts, sizeof(*arr));
	if (arr == NULL) {
		scan_incomplete(r, rel, "out of memory");
		return;
	}
	r->artifacts = arr;
	a = &arr[r->n_artifacts];
	memset(a, 0, sizeof(*a));
	a->relpath = strdup(rel);
	a->run = strdup(run);
	if (a->relpath == NULL || a->run == NULL) {
		free(a->relpath);
		free(a->run);
		scan_incomplete(r, rel, "out of memory");
		return;
	}
	r->n_artifacts++;
	a->kind = kind;
	if (kind == VD_KIND_DIR) {
		vd_fingerprint_dir(fd, &a->fp);
		vd_hdrinfo_read(fd, &r->bounds, &a->hdr);
	} else {
		if (fstat(fd, &st) == 0)
			vd_fingerprint_file(&st, vd_tar_sig_stat(parent, strrchr(rel, '/') ?
			    strrchr(rel, '/') + 1 : rel, &sig), &a->fp);
		vd_hdrinfo_read_tar(fd, &r->bounds, &a->hdr);
	}
}

static void collect_entry(const vd_ledger_record *rec, size_t line, int trusted,
    void *arg)
{
	vd_scan_ledger *l = arg;
	vd_ledger_entry *arr = vd_grow(l->entries, &l->cap_entries, l->n_entries, sizeof(*arr));

	if (arr == NULL) {
		l->oom = 1;
		return;
	}
	l->entries = arr;
	arr[l->n_entries].round_index = rec->round_index;
	memcpy(arr[l->n_entries].global_model_hash, rec->global_model_hash, VD_HASH_HEX_LEN + 1);
	memcpy(arr[l->n_entries].record_hash, rec->record_hash, VD_HASH_HEX_LEN + 1);
	arr[l->n_entries].line = line;
	arr[l->n_entries].trusted = trusted;
	l->n_entries++;
}

void vd_scan_read_ledger(int dirfd, vd_scan_ledger *l)
{
	struct stat st;
	vd_buf b;
	int fd, rc;

	vd_buf_init(&b);
	fd = openat(dirfd, VD_LEDGER_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(l->read_error, sizeof(l->read_error), "cannot read %s: %s", l->relpath,
		    fd < 0 ? strerror(errno) : "not a regular file");
		goto out;
	}
	vd_file_id_from_stat(&l->id, VD_LEDGER_FILE, &st);
	if ((rc = vd_read_all(fd, VD_LEDGER_MAX_BYTES, &b)) < 0) {
		if (rc == -EFBIG)
			snprintf(l->read_error, sizeof(l->read_error),
			    "%s is larger than %u bytes", l->relpath, VD_LEDGER_MAX_BYTES);
		else
			snprintf(l->read_error, sizeof(l->read_error), "cannot read %s: %s",
			    l->relpath, strerror(-rc));
		goto out;
	}
	vd_ledger_verify(b.p, b.len, collect_entry, l, &l->result);
	l->read_ok = 1;
out:
	if (fd >= 0)
		close(fd);
	vd_buf_free(&b);
}

/* A ledger read only in part is not listed: the scan is incomplete, so
 * its memory stands instead of taking the missing records for a rewrite. */
static void add_ledger(vd_scan_result *r, int dirfd, const char *rel, const char *run)
{
	vd_scan_ledger *arr = vd_grow(r->ledgers, &r->cap_ledgers, r->n_ledgers, sizeof(*arr));
	vd_scan_ledger *l;

	if (arr == NULL) {
		scan_incomplete(r, rel, "out of memory");
		return;
	}
	r->ledgers = arr;
	l = &arr[r->n_ledgers];
	memset(l, 0, sizeof(*l));
	l->relpath = strdup(rel);
	l->run = strdup(run);
	if (l->relpath != NULL && l->run != NULL)
		vd_scan_read_ledger(dirfd, l);
	if (l->relpath == NULL || l->run == NULL || l->oom) {
		vd_scan_ledger_free(l);
		scan_incomplete(r, rel, "out of memory");
		return;
	}
	r->n_ledgers++;
}

static void add_dir(vd_scan_result *r, const char *rel)
{
	char **arr = vd_grow(r->dirs, &r->cap_dirs, r->n_dirs, sizeof(*arr));

	if (arr == NULL || (arr[r->n_dirs] = strdup(rel)) == NULL) {
		if (arr != NULL)
			r->dirs = arr;
		scan_incomplete(r, rel, "out of memory");
		return;
	}
	r->dirs = arr;
	r->n_dirs++;
}

/* Not listed as unreadable, its contents would be taken for gone: the
 * scan is incomplete instead. */
static void add_unreadable(vd_scan_result *r, const char *rel, const char *why)
{
	char **arr = vd_grow(r->unreadable, &r->cap_unreadable, r->n_unreadable, sizeof(*arr));
	size_t n = strlen(rel) + strlen(why) + 2;

	if (arr == NULL || (arr[r->n_unreadable] = malloc(n)) == NULL) {
		if (arr != NULL)
			r->unreadable = arr;
		scan_incomplete(r, rel, "out of memory");
		return;
	}
	r->unreadable = arr;
	snprintf(arr[r->n_unreadable++], n, "%s\n%s", rel, why);
}

/* A lookup failing so says the directory cannot be searched (or read):
 * what it holds is unknown, not gone. */
static int lookup_denied(int err)
{
	return err == EACCES || err == EPERM || err == EIO;
}

/* name in the directory rel could not be looked up (err): for a denial
 * the directory is unreadable and its walk stops (1); the entry gone is
 * nothing; any other failure leaves the scan incomplete. */
static int lookup_failed(vd_scan_result *r, const char *rel, const char *name, int err)
{
	char why[VD_DETAIL_MAX];

	if (err == ENOENT)
		return 0;
	snprintf(why, sizeof(why), "cannot look up %s in it: %s", name, strerror(err));
	if (!lookup_denied(err)) {
		scan_incomplete(r, rel, why);
		return 0;
	}
	add_unreadable(r, rel, why);
	return 1;
}

static int envelope_name(const char *name)
{
	size_t n = strlen(name);

	return name[0] != '.' && n > 5 && strcmp(name + n - 5, ".json") == 0;
}

static void read_envelope(int dirfd, const char *name, vd_scan_envelope *e)
{
	struct stat st;
	int fd, rc;

	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(e->read_error, sizeof(e->read_error), "cannot read %s: %s", e->relpath,
		    fd < 0 ? strerror(errno) : "not a regular file");
	} else if ((rc = vd_read_all(fd, VD_DSSE_MAX_BYTES + 1, &e->bytes)) < 0 && rc != -EFBIG) {
		snprintf(e->read_error, sizeof(e->read_error), "cannot read %s: %s", e->relpath,
		    strerror(-rc));
	} else {
		e->read_ok = 1;   /* over the cap: the parser says so */
	}
	if (fd >= 0)
		close(fd);
}

/* The statement file name of rel (the commitments directory dirfd of
 * run); -ENOSPC or -ENOMEM when the scan can take no more. */
static int add_envelope(vd_scan_result *r, int dirfd, const char *rel, const char *run,
    const char *name)
{
	vd_scan_envelope *arr, *e;

	if (r->n_envelopes >= VD_SCAN_MAX_ENVELOPES) {
		scan_incomplete(r, rel, "the store holds more statement files than the scan takes");
		return -ENOSPC;
	}
	if ((arr = vd_grow(r->envelopes, &r->cap_envelopes, r->n_envelopes, sizeof(*arr))) == NULL) {
		scan_incomplete(r, rel, "out of memory");
		return -ENOMEM;
	}
	r->envelopes = arr;
	e = &arr[r->n_envelopes];
	memset(e, 0, sizeof(*e));
	vd_buf_init(&e->bytes);
	e->relpath = join(rel, name);
	e->run = strdup(run);
	if (e->relpath == NULL || e->run == NULL) {
		free(e->relpath);
		free(e->run);
		scan_incomplete(r, rel, "out of memory");
		return -ENOMEM;
	}
	r->n_envelopes++;
	read_envelope(dirfd, name, e);
	return 0;
}

/* The *.json files of <run>/commitments: never an artifact directory. */
static void add_envelopes(vd_scan_result *r, int dirfd, const char *run)
{
	char **names, *rel = join(run, VD_COMMITMENTS_DIR);
	size_t n = 0, i;
	int partial = 0;
	int fd = openat(dirfd, VD_COMMITMENTS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0 || rel == NULL) {
		if (rel == NULL)
			scan_incomplete(r, run, "out of memory");
		else if (errno != ENOENT && errno != ENOTDIR)
			add_unreadable(r, rel, strerror(errno));
		goto out;
	}
	add_dir(r, rel);
	names = list_dir(fd, VD_SCAN_MAX_ENVELOPES, &n, &partial);
	if (names == NULL || partial)
		scan_incomplete(r, rel, "its entries could not all be listed");
	for (i = 0; names != NULL && i < n; i++) {
		if (names[i] == NULL || !envelope_name(names[i]))
			continue;
		if (add_envelope(r, fd, rel, run, names[i]) < 0)
			break;
	}
	if (names != NULL)
		free_names(names, n);
out:
	if (fd >= 0)
		close(fd);
	free(rel);
}

/* A tar artifact in the directory rel: gone or no longer a regular file
 * by now, it is not one. */
static void add_tar(vd_scan_result *r, int dirfd, const char *rel, const char *name)
{
	char *child = join(rel, name);
	int fd;

	if (child == NULL) {
		scan_incomplete(r, rel, "out of memory");
		return;
	}
	fd = openat_tar(dirfd, name);
	if (fd >= 0) {
		add_artifact(r, fd, dirfd, VD_KIND_TAR, child, rel);
		close(fd);
	} else if (fd != -ENOENT && fd != -ELOOP && fd != -EINVAL) {
		add_unreadable(r, child, strerror(-fd));
	}
	free(child);
}

/* A directory that holds header.json is an artifact (but the root). */
static int walk_artifact(vd_scan_result *r, int dirfd, const char *rel, int *stop)
{
	const char *slash = strrchr(rel, '/');
	struct stat st;
	char *run;

	*stop = 0;
	if (fstatat(dirfd, "header.json", &st, AT_SYMLINK_NOFOLLOW) < 0) {
		*stop = lookup_failed(r, rel, "header.json", errno);
		return 0;
	}
	if (rel[0] == '\0')
		return 0;
	run = slash ? strndup(rel, (size_t)(slash - rel)) : strdup("");
	if (run == NULL)
		scan_incomplete(r, rel, "out of memory");
	else
		add_artifact(r, dirfd, -1, VD_KIND_DIR, rel, run);
	free(run);
	return 1;
}

static void walk_ledger(vd_scan_result *r, int dirfd, const char *rel, int *stop)
{
	struct stat st;
	char *child;

	*stop = 0;
	if (fstatat(dirfd, VD_LEDGER_FILE, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		*stop = lookup_failed(r, rel, VD_LEDGER_FILE, errno);
		return;
	}
	if (!S_ISREG(st.st_mode))
		return;
	if ((child = join(rel, VD_LEDGER_FILE)) == NULL)
		scan_incomplete(r, rel, "out of memory");
	else
		add_ledger(r, dirfd, child, rel);
	free(child);
}

static void walk(vd_scan_result *r, int dirfd, const char *rel, unsigned depth);

/* The subdirectory name of rel: gone, or no longer a directory, by now
 * (a symbolic link swapped in), it is nothing; otherwise it is walked or
 * unreadable. */
static void walk_child(vd_scan_result *r, int dirfd, const char *rel, const char *name,
    unsigned depth)
{
	char *child = join(rel, name);
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int err = errno;

	if (child == NULL)
		scan_incomplete(r, rel, "out of memory");
	else if (fd >= 0)
		walk(r, fd, child, depth);
	else if (err != ENOENT && err != ENOTDIR && err != ELOOP)
		add_unreadable(r, child, strerror(err));
	if (fd >= 0)
		close(fd);
	free(child);
}

/* Walk one directory: an artifact directory is not descended into, and a
 * regular file named "*.tar" beside it is an artifact too; hidden entries
 * (a save in progress, ".x.tmp-*", ".x.tar") and symbolic links are
 * skipped. A directory that can be listed but not searched is unreadable,
 * whatever of it was taken before the denial. */
static void walk(vd_scan_result *r, int dirfd, const char *rel, unsigned depth)
{
	struct stat st;
	char **names;
	size_t n, i;
	int partial, stop;

	add_dir(r, rel);
	if (walk_artifact(r, dirfd, rel, &stop) || stop)
		return;
	walk_ledger(r, dirfd, rel, &stop);
	if (stop)
		return;
	add_envelopes(r, dirfd, rel);
	if (depth == 0)
		return;
	if ((names = list_dir(dirfd, VD_SCAN_MAX_WALK_ENTRIES, &n, &partial)) == NULL || partial)
		scan_incomplete(r, rel, "its entries could not all be listed (over the limit, or out of memory)");
	if (names == NULL)
		return;
	for (i = 0; i < n; i++) {
		if (names[i] == NULL || names[i][0] == '.' || strcmp(names[i], VD_COMMITMENTS_DIR) == 0)
			continue;
		if (fstatat(dirfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (lookup_failed(r, rel, names[i], errno))
				break;
			continue;
		}
		if (S_ISREG(st.st_mode) && vd_tar_name(names[i]))
			add_tar(r, dirfd, rel, names[i]);
		else if (S_ISDIR(st.st_mode))
			walk_child(r, dirfd, rel, names[i], depth - 1);
	}
	free_names(names, n);
}

/* An empty result and the store root open, or a negative errno with
 * root_error (what the store logs of this scan). */
static int scan_begin(const char *root, const vd_bounds *bounds, vd_scan_result *out)
{
	int fd;

	memset(out, 0, sizeof(*out));
	if (bounds != NULL)
		out->bounds = *bounds;
	fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		fd = -errno;
		snprintf(out->root_error, sizeof(out->root_error),
		    "cannot open the store %s: %s", root, strerror(-fd));
		return fd;
	}
	out->root_ok = 1;
	return fd;
}

void vd_scan_store(const char *root, unsigned depth, const vd_bounds *bounds,
    vd_scan_result *out)
{
	int fd = scan_begin(root, bounds, out);

	if (fd < 0)
		return;
	walk(out, fd, "", depth);
	close(fd);
}

/* ---- targeted scans ---------------------------------------------------- */

static unsigned components(const char *rel)
{
	unsigned n = rel[0] != '\0';

	for (; *rel; rel++)
		n += *rel == '/';
	return n;
}

/* What the scan covers, as the core reads it. */
static vd_cover cover_of(const vd_scan_result *r)
{
	return (vd_cover){ r->incomplete, r->targeted, r->scopes, r->n_scopes };
}

int vd_scan_covers(const vd_scan_result *r, const char *relpath)
{
	vd_cover cv = cover_of(r);

	return vd_cover_path(&cv, relpath);
}

int vd_scan_each_covered(const vd_scan_result *r, const vd_order *o,
    const char *(*path_of)(const void *elem), void (*fn)(void *arg, void *elem), void *arg)
{
	vd_cover cv = cover_of(r);

	return vd_cover_each(&cv, o, path_of, fn, arg);
}

vd_cover vd_scan_cover(const vd_scan_result *r)
{
	return cover_of(r);
}

static void add_scope(vd_scan_result *r, vd_scope_kind kind, const char *dir, const char *name)
{
	vd_scope *arr;
	char *rel = name ? join(dir, name) : strdup(dir);
	size_t i;

	if (rel == NULL) {
		scan_incomplete(r, dir, "out of memory");
		return;
	}
	for (i = 0; i < r->n_scopes; i++)
		if (r->scopes[i].kind == kind && strcmp(r->scopes[i].relpath, rel) == 0) {
			free(rel);
			return;
		}
	if ((arr = vd_grow(r->scopes, &r->cap_scopes, r->n_scopes, sizeof(*arr))) == NULL) {
		free(rel);
		scan_incomplete(r, dir, "out of memory");
		return;
	}
	r->scopes = arr;
	arr[r->n_scopes].kind = kind;
	arr[r->n_scopes++].relpath = rel;
}

/* The directory of rel, in out (n bytes); its last component in *base. */
static int split(const char *rel, char *out, size_t n, const char **base)
{
	const char *slash = strrchr(rel, '/');
	size_t len = slash ? (size_t)(slash - rel) : 0;

	if (len >= n)
		return -ENAMETOOLONG;
	memcpy(out, rel, len);
	out[len] = '\0';
	*base = slash ? slash + 1 : rel;
	return 0;
}

/* Gone, or no longer a directory: what was there is not. */
static int open_gone(int err)
{
	return err == -ENOENT || err == -ENOTDIR || err == -ELOOP;
}

/* The scopes a change can affect. A file of an artifact directory is its
 * artifact; a new, renamed or removed entry of any other directory is
 * walked as a whole scan would (a round, a tar, a new run); a ledger is
 * its directory's, a statement file only itself; a header.json appearing
 * or going makes its directory walked again, whatever it was. Past the
 * depth limit (a path a client named) nothing is walked, and what was
 * taken for an artifact there is gone, as a whole scan finds it. */
/* "NAME.tar.sig": NAME.tar into tar, 1; else 0. */
static int tar_of_sig(const char *name, char *tar, size_t n)
{
	size_t len = strlen(name), sl = sizeof(VD_TAR_SIG_SUFFIX) - 1;

	if (len <= sl || len - sl >= n || strcmp(name + len - sl, VD_TAR_SIG_SUFFIX) != 0)
		return 0;
	memcpy(tar, name, len - sl);
	tar[len - sl] = '\0';
	return vd_tar_name(tar);
}

static void scope_change(vd_scan_result *r, int rootfd, unsigned depth, const vd_scan_change *c)
{
	const char *name = c->name[0] != '\0' ? c->name : NULL, *base;
	char parent[PATH_MAX], tar[NAME_MAX + 1];
	struct stat st;
	int fd, artifact;

	if (components(c->dir) > depth) {
		add_scope(r, VD_SCOPE_TREE, c->dir, name);
		return;
	}
	if (c->dir[0] != '\0' && split(c->dir, parent, sizeof(parent), &base) == 0 &&
	    strcmp(base, VD_COMMITMENTS_DIR) == 0) {
		if (name == NULL)
			add_scope(r, VD_SCOPE_STMTS, parent, NULL);
		else if (envelope_name(name))
			add_scope(r, VD_SCOPE_FILE, c->dir, name);
		return;
	}
	if (name == NULL || (c->dir[0] != '\0' && strcmp(name, "header.json") == 0)) {
		add_scope(r, VD_SCOPE_TREE, c->dir, NULL);
		return;
	}
	if ((fd = vd_open_beneath(rootfd, c->dir)) < 0) {
		if (open_gone(fd))
			add_scope(r, VD_SCOPE_TREE, c->dir, NULL);
		else
			scan_incomplete(r, c->dir, strerror(-fd));
		return;
	}
	artifact = c->dir[0] != '\0' && fstatat(fd, "header.json", &st, AT_SYMLINK_NOFOLLOW) == 0;
	close(fd);
	if (artifact) {
		/* Nothing inside an artifact directory is walked. */
		add_scope(r, VD_SCOPE_DIR, c->dir, NULL);
		add_scope(r, VD_SCOPE_TREE, c->dir, name);
	} else if (strcmp(name, VD_COMMITMENTS_DIR) == 0) {
		add_scope(r, VD_SCOPE_STMTS, c->dir, NULL);
	} else if (strcmp(name, VD_LEDGER_FILE) == 0) {
		add_scope(r, VD_SCOPE_DIR, c->dir, NULL);
	} else if (tar_of_sig(name, tar, sizeof(tar))) {
		/* A tar's bundle is part of its fingerprint. */
		add_scope(r, VD_SCOPE_TREE, c->dir, tar);
	} else {
		add_scope(r, VD_SCOPE_TREE, c->dir, name);
	}
}

/* A scope inside a tree scope (or a statement file in a run's scope) is
 * walked with it. */
static int subsumed(const vd_scan_result *r, size_t k)
{
	const vd_scope *x = &r->scopes[k];
	size_t i;

	for (i = 0; i < r->n_scopes; i++) {
		const vd_scope *t = &r->scopes[i];
		if (i == k)
			continue;
		if (t->kind == VD_SCOPE_TREE && vd_path_under(x->relpath, t->relpath) &&
		    (x->kind != VD_SCOPE_TREE || strcmp(x->relpath, t->relpath) != 0))
			return 1;
		if (t->kind == VD_SCOPE_STMTS && x->kind == VD_SCOPE_FILE && vd_scope_covers(t, x->relpath))
			return 1;
	}
	return 0;
}

/* Scopes are distinct: of two that cover each other, neither is a
 * tree inside the other, so one of each pair stays. Walked twice, a
 * ledger would be listed twice: out of memory, the scan is incomplete. */
static void drop_subsumed(vd_scan_result *r)
{
	size_t i, n = 0;
	char *drop;

	if (r->n_scopes == 0)
		return;
	if ((drop = calloc(r->n_scopes, 1)) == NULL) {
		scan_incomplete(r, "", "out of memory");
		return;
	}
	for (i = 0; i < r->n_scopes; i++)
		drop[i] = (char)subsumed(r, i);
	for (i = 0; i < r->n_scopes; i++) {
		if (drop[i])
			free(r->scopes[i].relpath);
		else
			r->scopes[n++] = r->scopes[i];
	}
	r->n_scopes = n;
	free(drop);
}

/* A directory of a scope: gone is nothing; unreadable, the scan cannot
 * tell (the store then walks the whole store, which records it). */
static int open_scope_dir(vd_scan_result *r, int rootfd, const char *rel)
{
	int fd = vd_open_beneath(rootfd, rel);

	if (fd < 0 && !open_gone(fd))
		scan_incomplete(r, rel[0] ? rel : ".", strerror(-fd));
	return fd;
}

/* Whether the directory rel (not the root) is, or lies in, an artifact
 * directory or a commitments directory, where a whole scan walks nothing;
 * gone counts as walled too (nothing is there). */
static int walled(int rootfd, const char *rel)
{
	char prefix[PATH_MAX];
	const char *p = rel, *slash, *base;
	struct stat st;
	size_t len;
	int fd, found = 0;

	for (; !found && *p; p = slash ? slash + 1 : p + strlen(p)) {
		slash = strchr(p, '/');
		len = slash ? (size_t)(slash - rel) : strlen(rel);
		if (len >= sizeof(prefix))
			return 1;
		memcpy(prefix, rel, len);
		prefix[len] = '\0';
		base = strrchr(prefix, '/');
		if (strcmp(base ? base + 1 : prefix, VD_COMMITMENTS_DIR) == 0)
			return 1;
		if ((fd = vd_open_beneath(rootfd, prefix)) < 0)
			return 1;
		found = fstatat(fd, "header.json", &st, AT_SYMLINK_NOFOLLOW) == 0;
		close(fd);
	}
	return found;
}

static void walk_tree_scope(vd_scan_result *r, int rootfd, unsigned depth, const char *rel)
{
	char parent[PATH_MAX];
	const char *base;
	struct stat st;
	unsigned k = components(rel);
	int fd;

	if (rel[0] == '\0') {
		walk(r, rootfd, "", depth);
		return;
	}
	if (k > depth || split(rel, parent, sizeof(parent), &base) < 0 ||
	    (fd = open_scope_dir(r, rootfd, parent)) < 0)
		return;
	/* Inside an artifact or commitments directory nothing is walked. */
	if (parent[0] != '\0' && walled(rootfd, parent)) {
		close(fd);
		return;
	}
	if (fstatat(fd, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		lookup_failed(r, parent, base, errno == ENOTDIR ? ENOENT : errno);
	} else if (S_ISREG(st.st_mode) && vd_tar_name(base)) {
		add_tar(r, fd, parent, base);
	} else if (S_ISDIR(st.st_mode)) {
		walk_child(r, fd, parent, base, depth - k);
	}
	close(fd);
}

static void walk_scope(vd_scan_result *r, int rootfd, unsigned depth, const vd_scope *sc)
{
	char dir[PATH_MAX], run[PATH_MAX];
	const char *base, *b2;
	struct stat st;
	int fd, stop;

	if (sc->kind != VD_SCOPE_TREE && sc->kind != VD_SCOPE_FILE && components(sc->relpath) > depth)
		return;
	switch (sc->kind) {
	case VD_SCOPE_TREE:
		walk_tree_scope(r, rootfd, depth, sc->relpath);
		return;
	case VD_SCOPE_DIR:
		if ((fd = open_scope_dir(r, rootfd, sc->relpath)) < 0)
			return;
		add_dir(r, sc->relpath);
		if (!walk_artifact(r, fd, sc->relpath, &stop) && !stop)
			walk_ledger(r, fd, sc->relpath, &stop);
		break;
	case VD_SCOPE_STMTS:
		if ((fd = open_scope_dir(r, rootfd, sc->relpath)) < 0)
			return;
		add_envelopes(r, fd, sc->relpath);
		break;
	case VD_SCOPE_FILE:
		if (split(sc->relpath, dir, sizeof(dir), &base) < 0 ||
		    split(dir, run, sizeof(run), &b2) < 0 ||
		    (fd = open_scope_dir(r, rootfd, dir)) < 0)
			return;
		/* As a whole scan lists it: one that cannot be read is a
		 * statement refused with the reason, gone is nothing. */
		if (fstatat(fd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
			add_envelope(r, fd, dir, run, base);
		break;
	default:
		return;
	}
	close(fd);
}

void vd_scan_changes(const char *root, unsigned depth, const vd_bounds *bounds,
    const vd_scan_change *changes, size_t n, size_t room, vd_scan_result *out)
{
	size_t i;
	int fd = scan_begin(root, bounds, out);

	out->targeted = 1;
	out->room = room;
	if (fd < 0)
		return;
	for (i = 0; i < n; i++)
		scope_change(out, fd, depth, &changes[i]);
	drop_subsumed(out);
	for (i = 0; i < out->n_scopes; i++)
		walk_scope(out, fd, depth, &out->scopes[i]);
	close(fd);
}

void vd_scan_result_free(vd_scan_result *r)
{
	size_t i;

	for (i = 0; i < r->n_artifacts; i++) {
		free(r->artifacts[i].relpath);
		free(r->artifacts[i].run);
		vd_hdrinfo_free(&r->artifacts[i].hdr);
	}
	for (i = 0; i < r->n_ledgers; i++)
		vd_scan_ledger_free(&r->ledgers[i]);
	for (i = 0; i < r->n_envelopes; i++) {
		free(r->envelopes[i].relpath);
		free(r->envelopes[i].run);
		vd_buf_free(&r->envelopes[i].bytes);
	}
	free(r->envelopes);
	for (i = 0; i < r->n_dirs; i++)
		free(r->dirs[i]);
	for (i = 0; i < r->n_unreadable; i++)
		free(r->unreadable[i]);
	free(r->unreadable);
	for (i = 0; i < r->n_scopes; i++)
		free(r->scopes[i].relpath);
	free(r->scopes);
	free(r->artifacts);
	free(r->ledgers);
	free(r->dirs);
	memset(r, 0, sizeof(*r));
}

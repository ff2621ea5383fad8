/*
 * The store walk: find artifacts and ledgers under the store root, read
 * each artifact's header.json (never its weights) and take the identity
 * of every file in it. An artifact is a directory holding a header.json,
 * or a regular file named "*.tar" packing one (vd_tar.h), read in place.
 * Runs off the event loop (it blocks on the file system); the result is a
 * plain value handed back to the loop.
 */
#ifndef VD_SCAN_H
#define VD_SCAN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "vd_artifact.h"
#include "vd_dsse.h"
#include "vd_ledger.h"
#include "vd_limits.h"
#include "vd_order.h"
#include "vd_util.h"
#include "vd_cover.h"
#include "vd_scanned.h"

#define VD_TAR_SUFFIX ".tar"          /* a regular file so named is a tar artifact */

/* Whether a directory entry's name is a tar artifact's: "*.tar", not
 * hidden (".x.tar" is a save in progress, as a hidden directory is). */
int vd_tar_name(const char *name);

void vd_hdrinfo_read(int dirfd, const vd_bounds *bounds, vd_hdrinfo *out);
void vd_hdrinfo_read_tar(int tarfd, const vd_bounds *bounds, vd_hdrinfo *out);

/* 0, or -ENOMEM or -EIO with fp->ok unset (a directory not fully listed). */
int vd_fingerprint_dir(int dirfd, vd_fingerprint *fp);
/* The same for a tar artifact, from its own identity (type, device, inode,
 * size, times, links) and its bundle's beside it (sig; NULL: none): never
 * equal to a directory's. */
void vd_fingerprint_file(const struct stat *st, const struct stat *sig, vd_fingerprint *fp);
/* The OMS bundle beside a tar: "NAME.tar" + this. */
#define VD_TAR_SIG_SUFFIX ".sig"
/* Its identity into st, found in the tar's directory parent: st, or NULL
 * when there is none. */
const struct stat *vd_tar_sig_stat(int parent, const char *tar_name, struct stat *st);

/* Read and verify one ledger file (opened beneath dirfd). */
void vd_scan_read_ledger(int dirfd, vd_scan_ledger *l);

/* One *.json file of a run's commitments directory, read raw: the loop
 * parses and checks it against the keys it trusts. */
typedef struct vd_scan_envelope {
	char *relpath;
	char *run;           /* the run directory, "" for the root */
	vd_buf bytes;        /* at most VD_DSSE_MAX_BYTES + 1 */
	int read_ok;
	char read_error[VD_DETAIL_MAX];
} vd_scan_envelope;

typedef struct vd_scan_result {
	vd_bounds bounds;           /* headers are read within these (0: defaults) */
	int root_ok;
	char root_error[VD_DETAIL_MAX];
	vd_scan_artifact *artifacts;
	size_t n_artifacts, cap_artifacts;
	vd_scan_ledger *ledgers;
	size_t n_ledgers, cap_ledgers;
	vd_scan_envelope *envelopes;
	size_t n_envelopes, cap_envelopes;
	char **dirs;         /* every directory walked, for watches */
	size_t n_dirs, cap_dirs;
	char **unreadable;   /* "relpath\nreason": directories that could not be opened or
	                      * searched: nothing under them is taken for gone */
	size_t n_unreadable, cap_unreadable;
	int truncated;       /* hit VD_SCAN_MAX_ARTIFACTS */
	int incomplete;      /* something was not listed: nothing unseen is gone */
	char incomplete_why[VD_DETAIL_MAX];
	int targeted;        /* only the scopes were looked at */
	size_t room;         /* artifacts it may list (0: VD_SCAN_MAX_ARTIFACTS) */
	vd_scope *scopes;
	size_t n_scopes, cap_scopes;
} vd_scan_result;

void vd_scan_store(const char *root, unsigned depth, const vd_bounds *bounds,
    vd_scan_result *out);
/* A targeted scan: each change becomes the scopes it can affect (a new
 * or removed entry of a run, an artifact's files, a ledger, a statement
 * file), and only those are walked. What they hold is listed as a whole
 * scan lists it, at most room artifacts (the store's room left under
 * VD_SCAN_MAX_ARTIFACTS; 0: that many): past it the scan is incomplete. */
void vd_scan_changes(const char *root, unsigned depth, const vd_bounds *bounds,
    const vd_scan_change *changes, size_t n, size_t room, vd_scan_result *out);
/* Whether the scan listed all there is at relpath, so that what it did
 * not list there is gone: everything for a complete whole scan, nothing
 * for an incomplete one, a targeted one's scopes. */
int vd_scan_covers(const vd_scan_result *r, const char *relpath);
/* Each element of o (settled, in strcmp order of path_of's strings) that
 * the scan covers, once, to fn: a scan of changes finds those under its
 * scopes by binary search, at the cost of what it covers. fn must not
 * change o. 0, or -ENOMEM (nothing passed). */
int vd_scan_each_covered(const vd_scan_result *r, const vd_order *o,
    const char *(*path_of)(const void *elem), void (*fn)(void *arg, void *elem), void *arg);
/* The same, as the core reads it: a view into r. */
vd_cover vd_scan_cover(const vd_scan_result *r);
void vd_scan_result_free(vd_scan_result *r);

/* Open relpath below rootfd one component at a time, following no
 * symbolic link. Returns a directory fd or -errno. */
int vd_open_beneath(int rootfd, const char *relpath);

/* Open the tar artifact relpath below rootfd: its directories as
 * vd_open_beneath does, the file itself without following a symbolic
 * link, checked to be a regular file before it is opened (a FIFO or a
 * device is never opened) and after. Returns a file descriptor or -errno:
 * -ELOOP for a symbolic link, -EINVAL for anything but a regular file.
 * When dirfd is not NULL, *dirfd is the directory holding it (the
 * caller's to close), to find it again by name. */
int vd_open_tar_beneath(int rootfd, const char *relpath, int *dirfd);

/* The kind of artifact at relpath below rootfd (a directory with a
 * header.json, or a tar file so named), or a negative errno when there is
 * none: -ENOENT, or why the tar could not be opened (vd_open_tar_beneath). */
int vd_artifact_kind_at(int rootfd, const char *relpath);

/* A relative path inside the store: no "..", no hidden or empty component. */
int vd_relpath_ok(const char *relpath);

#endif

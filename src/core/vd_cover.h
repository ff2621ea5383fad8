/*
 * What a scan looked at, and so what it can tell is gone: everything for
 * a complete whole scan, nothing for an incomplete one, a targeted one's
 * scopes. Pure functions over paths; the scan (vd_scan) makes the scopes,
 * the core sweeps by them.
 */
#ifndef VD_COVER_H
#define VD_COVER_H

#include <stddef.h>

#include "vd_order.h"

#define VD_LEDGER_FILE "ledger.jsonl"
#define VD_COMMITMENTS_DIR "commitments"   /* signed statements of a run */

typedef enum vd_scope_kind {
	VD_SCOPE_TREE,       /* relpath and all under it, walked as a whole scan walks it */
	VD_SCOPE_DIR,        /* the directory alone: an artifact or not, and its ledger */
	VD_SCOPE_STMTS,      /* the commitments directory of the run relpath */
	VD_SCOPE_FILE        /* one statement file */
} vd_scope_kind;

typedef struct vd_scope {
	vd_scope_kind kind;
	char *relpath;       /* a directory ("" the root), or FILE's file */
} vd_scope;

/* A view of a scan's result: the scopes are the scan's. */
typedef struct vd_cover {
	int incomplete;      /* something was not listed: nothing unseen is gone */
	int targeted;        /* only the scopes were looked at */
	const vd_scope *scopes;
	size_t n_scopes;
} vd_cover;

/* path is dir, or lies in it ("" holds everything). */
int vd_path_under(const char *path, const char *dir);
int vd_scope_covers(const vd_scope *sc, const char *relpath);
/* Whether the scan listed all there is at relpath, so that what it did
 * not list there is gone. */
int vd_cover_path(const vd_cover *cv, const char *relpath);
/* Each element of o (settled, in strcmp order of path_of's strings) that
 * the scan covers, once, to fn: a targeted scan finds those under its
 * scopes by binary search, at the cost of what it covers. fn must not
 * change o. 0, or -ENOMEM (nothing passed). */
int vd_cover_each(const vd_cover *cv, const vd_order *o,
    const char *(*path_of)(const void *elem), void (*fn)(void *arg, void *elem), void *arg);

#endif

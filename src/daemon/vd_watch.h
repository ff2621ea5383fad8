/*
 * inotify watches on the directories of the store, driven by the libuv
 * loop through one uv_poll_t. Linux inotify is not recursive: the store
 * hands over the list of directories after every scan.
 */
#ifndef VD_WATCH_H
#define VD_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "vd_map.h"
#include "vd_order.h"

/* dir is relative to the store root ("" for the root); name may be "".
 * overflow: events were lost, rescan everything. */
typedef void (*vd_watch_fn)(void *arg, const char *dir, const char *name, int overflow);

typedef struct vd_watch {
	uv_poll_t poll;
	int fd;
	char *root;
	vd_map by_dir;      /* rel dir -> wd (as intptr_t) */
	vd_order dirs;      /* by_dir's directories (strdup'd), by strcmp: what a
	                     * scan of one change covers is found, not tested */
	vd_map by_wd;       /* "wd" -> rel dir (strdup'd) */
	vd_watch_fn fn;
	void *arg;
	int active;
} vd_watch;

/* 0, or a negative errno (libuv's codes are those on Linux). */
int vd_watch_init(vd_watch *w, uv_loop_t *loop, const char *root,
    vd_watch_fn fn, void *arg);
/* What a scan looked at: the watches it can drop (covers; NULL: all), and
 * who hears of each watch added. */
typedef struct vd_watch_scope {
	int (*covers)(void *arg, const char *dir);
	/* The directories of dirs (settled, strings in strcmp order) covered,
	 * each once to fn: 0, or -ENOMEM. NULL: covers is asked of each. */
	int (*each_covered)(void *arg, const vd_order *dirs, void (*fn)(void *fnarg, void *dir),
	    void *fnarg);
	void (*added)(void *arg, const char *dir);
	void *arg;
} vd_watch_scope;

/* Watch these directories: add new ones, and drop the others the scan
 * covered (scope NULL: every other). Returns how many were added: what
 * appeared in one before its watch did raised no event. */
size_t vd_watch_sync(vd_watch *w, char *const *dirs, size_t n, const vd_watch_scope *scope);

/* The same over a long list, a part a loop turn: the list is taken in,
 * its new directories watched, those that took a watch along under a new
 * name given their own, then the stale watches dropped (in one part: the
 * scope's index finds them). The list and the scope stay as they are
 * meanwhile; the watches may change under events between parts. */
typedef struct vd_watch_pass {
	vd_map keep;        /* the list's directories */
	size_t pos;         /* in the list, of the step under way */
	int step;
	size_t added;
} vd_watch_pass;

void vd_watch_pass_begin(vd_watch_pass *p);
/* Up to budget directories of the list more: 1 when the pass is over
 * (p->added: how many were added), 0 when more is left. */
int vd_watch_pass_some(vd_watch *w, vd_watch_pass *p, char *const *dirs, size_t n,
    const vd_watch_scope *scope, size_t budget);
/* A pass left before its end. */
void vd_watch_pass_free(vd_watch_pass *p);
/* Close: the poll handle is closed; maps and fd are freed in its callback. */
void vd_watch_close(vd_watch *w);

#endif

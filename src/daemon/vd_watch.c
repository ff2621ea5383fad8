#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "vd_log.h"
#include "vd_util.h"
#include "vd_watch.h"

#define WATCH_MASK (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | \
	IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | \
	IN_ONLYDIR | IN_EXCL_UNLINK)

static void wd_key(int wd, char *out, size_t n)
{
	snprintf(out, n, "%d", wd);
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* dir's string in the index, or NULL. */
static char *dirs_find(vd_watch *w, const char *dir)
{
	size_t i;

	for (i = 0; i < w->dirs.n_added; i++)
		if (strcmp(w->dirs.added[i], dir) == 0)
			return w->dirs.added[i];
	i = vd_order_lower(&w->dirs, dir, str_cmp);
	return i < w->dirs.n && strcmp(w->dirs.v[i], dir) == 0 ? w->dirs.v[i] : NULL;
}

static void dirs_free(vd_watch *w)
{
	size_t i;

	for (i = 0; i < w->dirs.n; i++)
		free(w->dirs.v[i]);
	for (i = 0; i < w->dirs.n_added; i++)
		free(w->dirs.added[i]);
	vd_order_clear(&w->dirs);
}

/* Settled; out of memory once, built again from by_dir (NULL: not now). */
static const vd_order *dirs_settled(vd_watch *w)
{
	const char *k;
	void *v;
	char *copy;
	size_t it = 0;

	if (!w->dirs.failed && vd_order_settle(&w->dirs) == 0)
		return &w->dirs;
	dirs_free(w);
	while (vd_map_next(&w->by_dir, &it, &k, &v))
		if ((copy = strdup(k)) == NULL)
			w->dirs.failed = 1;
		else
			vd_order_add(&w->dirs, copy);
	return vd_order_settle(&w->dirs) == 0 ? &w->dirs : NULL;
}

static int dir_put(vd_watch *w, const char *dir, int wd)
{
	char *copy;
	int known = vd_map_get(&w->by_dir, dir) != NULL;

	if (vd_map_put(&w->by_dir, dir, (void *)(intptr_t)wd) < 0)
		return -ENOMEM;
	if (known)
		return 0;
	if ((copy = strdup(dir)) == NULL)
		w->dirs.failed = 1;
	else
		vd_order_add(&w->dirs, copy);
	return 0;
}

static intptr_t dir_del(vd_watch *w, const char *dir)
{
	intptr_t wd = (intptr_t)vd_map_del(&w->by_dir, dir);
	char *str;

	if (wd != 0 && (str = dirs_find(w, dir)) != NULL) {
		vd_order_del(&w->dirs, str);
		free(str);
	}
	return wd;
}

static void forget_wd(vd_watch *w, int wd)
{
	char key[16], *dir;

	wd_key(wd, key, sizeof(key));
	dir = vd_map_del(&w->by_wd, key);
	if (dir != NULL) {
		if ((intptr_t)vd_map_get(&w->by_dir, dir) == wd)
			dir_del(w, dir);
		free(dir);
	}
}

static void handle_event(vd_watch *w, const struct inotify_event *ev)
{
	char key[16];
	const char *dir;

	if (ev->mask & IN_Q_OVERFLOW) {
		w->fn(w->arg, "", "", 1);
		return;
	}
	wd_key(ev->wd, key, sizeof(key));
	dir = vd_map_get(&w->by_wd, key);
	if (dir == NULL)
		return;
	/* A save in progress (".round-00005.tmp-*", ".round-00005.tar") is not
	 * the store's business until it is renamed into place. A file's events
	 * come with its name in its directory's watch: a tar renamed or
	 * written into a run directory is seen like a directory. */
	if (ev->len > 0 && ev->name[0] == '.')
		return;
	w->fn(w->arg, dir, ev->len > 0 ? ev->name : "", 0);
	if (ev->mask & IN_IGNORED)
		forget_wd(w, ev->wd);
}

static void on_readable(uv_poll_t *h, int status, int events)
{
	vd_watch *w = h->data;
	char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;
	char *p;

	for (;;) {
		n = read(w->fd, buf, sizeof(buf));
		if (n <= 0)
			return;      /* EAGAIN: drained */
		for (p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)(void *)p;
			handle_event(w, ev);
			p += sizeof(*ev) + ev->len;
		}
	}
}

int vd_watch_init(vd_watch *w, uv_loop_t *loop, const char *root,
    vd_watch_fn fn, void *arg)
{
	int rc;

	memset(w, 0, sizeof(*w));
	vd_map_init(&w->by_dir);
	vd_order_init(&w->dirs, str_cmp);
	vd_map_init(&w->by_wd);
	w->fn = fn;
	w->arg = arg;
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->fd < 0)
		return -errno;
	if ((w->root = strdup(root)) == NULL) {
		close(w->fd);
		return -ENOMEM;
	}
	if ((rc = uv_poll_init(loop, &w->poll, w->fd)) < 0) {
		free(w->root);
		close(w->fd);
		return rc;
	}
	w->poll.data = w;
	w->active = 1;
	return uv_poll_start(&w->poll, UV_READABLE, on_readable);
}

/* 0 when dir is watched now, else a negative errno. */
static int add_watch(vd_watch *w, const char *dir)
{
	char path[PATH_MAX], key[16], *copy;
	int wd;

	snprintf(path, sizeof(path), "%s%s%s", w->root, dir[0] ? "/" : "", dir);
	wd = inotify_add_watch(w->fd, path, WATCH_MASK | IN_DONT_FOLLOW);
	if (wd < 0) {
		int e = errno;

		if (e == ENOSPC)
			log_warn("out of inotify watches at %s: raise fs.inotify.max_user_watches; the periodic rescan still sees changes",
			    path);
		return -e;
	}
	wd_key(wd, key, sizeof(key));
	copy = strdup(dir);
	if (copy == NULL)
		return -ENOMEM;
	free(vd_map_del(&w->by_wd, key));
	if (vd_map_put(&w->by_wd, key, copy) < 0) {
		free(copy);
		return -ENOMEM;
	}
	return dir_put(w, dir, wd);
}

/* Whether dir's watch is its own: a directory renamed away keeps the
 * watch it had (inotify's is the inode's), and one made under its old
 * name needs a watch of its own. */
static int watched(const vd_watch *w, const char *dir)
{
	char key[16];
	const char *name;
	intptr_t wd = (intptr_t)vd_map_get(&w->by_dir, dir);

	if (wd <= 0)
		return 0;
	wd_key((int)wd, key, sizeof(key));
	name = vd_map_get(&w->by_wd, key);
	return name != NULL && strcmp(name, dir) == 0;
}

/* A directory gone from the watched ones. A directory renamed keeps its
 * watch (inotify's is the inode's): under its new name, added with the
 * same wd, it stays watched. */
static void drop_dir(vd_watch *w, const char *dir)
{
	int wd = (int)dir_del(w, dir);
	char key[16];
	const char *now;

	if (wd <= 0)
		return;
	wd_key(wd, key, sizeof(key));
	now = vd_map_get(&w->by_wd, key);
	if (now != NULL && strcmp(now, dir) != 0 && (intptr_t)vd_map_get(&w->by_dir, now) == wd)
		return;
	inotify_rm_watch(w->fd, wd);
	forget_wd(w, wd);
}

/* Pass 0 watches the directories not known; pass 1 those known under a
 * watch another name took along. A watch that cannot be added (out of
 * watches) is not tried again until the next scan, nor announced. */
static size_t add_pass(vd_watch *w, char *const *dirs, size_t n, const vd_watch_scope *scope,
    int pass)
{
	size_t i, added = 0;

	for (i = 0; i < n; i++) {
		int known = vd_map_get(&w->by_dir, dirs[i]) != NULL;
		if ((pass == 0 ? known : !known || watched(w, dirs[i])) ||
		    add_watch(w, dirs[i]) < 0)
			continue;
		added++;
		if (scope != NULL && scope->added != NULL)
			scope->added(scope->arg, dirs[i]);
	}
	return added;
}

typedef struct stale_list {
	const vd_map *keep;
	char **v;
	size_t n, cap;
	int failed;
} stale_list;

static void note_stale(void *arg, void *dir)
{
	stale_list *l = arg;
	char **grown;

	if (vd_map_get(l->keep, dir) != NULL)
		return;
	if ((grown = vd_grow(l->v, &l->cap, l->n, sizeof(*grown))) == NULL ||
	    (grown[l->n] = strdup(dir)) == NULL) {
		if (grown != NULL)
			l->v = grown;
		l->failed = 1;
		return;
	}
	l->v = grown;
	l->n++;
}

static void stale_free(stale_list *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
}

/* The stale watches the scope covers, found in the index: 0; -ENOTSUP
 * without a scope that has one, -ENOMEM: they must be looked for one by
 * one. */
static int drop_indexed(vd_watch *w, const vd_map *keep, const vd_watch_scope *scope)
{
	const vd_order *o;
	stale_list l = { keep, NULL, 0, 0, 0 };
	size_t i;

	if (scope == NULL || scope->each_covered == NULL)
		return -ENOTSUP;
	if ((o = dirs_settled(w)) == NULL)
		return -ENOMEM;
	if (scope->each_covered(scope->arg, o, note_stale, &l) < 0 || l.failed) {
		stale_free(&l);
		return -ENOMEM;
	}
	for (i = 0; i < l.n; i++)
		drop_dir(w, l.v[i]);
	stale_free(&l);
	return 0;
}

/* Drop the watches of directories that went away and the scope covers:
 * found in the scope's index, or else in batches of a walk (the map
 * cannot change under its iterator). */
static void drop_stale(vd_watch *w, const vd_map *keep, const vd_watch_scope *scope)
{
	const char *k;
	void *v;
	size_t i, it, nstale;
	char *stale[256];

	if (drop_indexed(w, keep, scope) == 0)
		return;
	do {
		nstale = 0;
		it = 0;
		while (nstale < VD_ARRAY_LEN(stale) && vd_map_next(&w->by_dir, &it, &k, &v))
			/* The scope first: a scan of one change covers few of
			 * the many watched. */
			if ((scope == NULL || scope->covers == NULL || scope->covers(scope->arg, k)) &&
			    vd_map_get(keep, k) == NULL &&
			    (stale[nstale] = strdup(k)) != NULL)
				nstale++;
		for (i = 0; i < nstale; i++) {
			drop_dir(w, stale[i]);
			free(stale[i]);
		}
	} while (nstale == VD_ARRAY_LEN(stale));
}

enum { PASS_KEEP, PASS_ADD, PASS_TAKEN_ALONG, PASS_DROP };

void vd_watch_pass_begin(vd_watch_pass *p)
{
	memset(p, 0, sizeof(*p));
	vd_map_init(&p->keep);
}

void vd_watch_pass_free(vd_watch_pass *p)
{
	vd_map_free(&p->keep);
	memset(p, 0, sizeof(*p));
}

/* Twice over the list: a directory renamed takes its watch along under
 * its new name, and one made under the old name needs its own after. */
int vd_watch_pass_some(vd_watch *w, vd_watch_pass *p, char *const *dirs, size_t n,
    const vd_watch_scope *scope, size_t budget)
{
	size_t end = n - p->pos > budget ? p->pos + budget : n;

	if (!w->active) {
		vd_watch_pass_free(p);
		return 1;
	}
	switch (p->step) {
	case PASS_KEEP:
		for (; p->pos < end; p->pos++)
			vd_map_put(&p->keep, dirs[p->pos], (void *)1);
		break;
	case PASS_ADD:
	case PASS_TAKEN_ALONG:
		p->added += add_pass(w, dirs + p->pos, end - p->pos, scope, p->step == PASS_TAKEN_ALONG);
		p->pos = end;
		break;
	default:
		drop_stale(w, &p->keep, scope);
		vd_map_free(&p->keep);
		return 1;
	}
	if (p->pos == n) {
		p->step++;
		p->pos = 0;
	}
	return 0;
}

size_t vd_watch_sync(vd_watch *w, char *const *dirs, size_t n, const vd_watch_scope *scope)
{
	vd_watch_pass p;

	vd_watch_pass_begin(&p);
	while (!vd_watch_pass_some(w, &p, dirs, n, scope, SIZE_MAX))
		;
	return p.added;
}

static void on_closed(uv_handle_t *h)
{
	vd_watch *w = h->data;
	const char *k;
	void *v;
	size_t it = 0;

	while (vd_map_next(&w->by_wd, &it, &k, &v))
		free(v);
	vd_map_free(&w->by_wd);
	vd_map_free(&w->by_dir);
	dirs_free(w);
	vd_order_free(&w->dirs);
	close(w->fd);
	free(w->root);
}

void vd_watch_close(vd_watch *w)
{
	if (!w->active)
		return;
	w->active = 0;
	uv_close((uv_handle_t *)&w->poll, on_closed);
}

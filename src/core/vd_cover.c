#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vd_cover.h"

/* dir/name, or name in the root "". */
static char *join(const char *dir, const char *name)
{
	size_t ld = strlen(dir), ln = strlen(name);
	char *p = malloc(ld + ln + 2);

	if (p == NULL)
		return NULL;
	if (ld > 0) {
		memcpy(p, dir, ld);
		p[ld++] = '/';
	}
	memcpy(p + ld, name, ln + 1);
	return p;
}

int vd_path_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return n == 0 || (strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/'));
}

/* path is dir's entry name (exact), or lies in it (tree). */
static int at_entry(const char *path, const char *dir, const char *name, int tree)
{
	size_t n = strlen(dir), m = strlen(name);

	if (n > 0) {
		if (strncmp(path, dir, n) != 0 || path[n] != '/')
			return 0;
		path += n + 1;
	}
	return strncmp(path, name, m) == 0 && (path[m] == '\0' || (tree && path[m] == '/'));
}

int vd_scope_covers(const vd_scope *sc, const char *relpath)
{
	switch (sc->kind) {
	case VD_SCOPE_TREE:
		return vd_path_under(relpath, sc->relpath);
	case VD_SCOPE_DIR:
		return strcmp(relpath, sc->relpath) == 0 ||
		    at_entry(relpath, sc->relpath, VD_LEDGER_FILE, 0);
	case VD_SCOPE_STMTS:
		return at_entry(relpath, sc->relpath, VD_COMMITMENTS_DIR, 1);
	case VD_SCOPE_FILE:
		return strcmp(relpath, sc->relpath) == 0;
	}
	return 0;
}

int vd_cover_path(const vd_cover *cv, const char *relpath)
{
	size_t i;

	if (cv->incomplete)
		return 0;
	if (!cv->targeted)
		return 1;
	for (i = 0; i < cv->n_scopes; i++)
		if (vd_scope_covers(&cv->scopes[i], relpath))
			return 1;
	return 0;
}

/* The first position of o whose path is not below key. */
static size_t path_lower(const vd_order *o, const char *(*path_of)(const void *), const char *key)
{
	size_t lo = 0, hi = o->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(key, path_of(o->v[mid])) <= 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

typedef struct span {
	size_t lo, hi;
} span;

/* The positions of o holding dir's entry name alone, or (tree) the
 * paths that start with it; dir "" is the root. 0, or -ENOMEM. */
static int entry_span(const vd_order *o, const char *(*path_of)(const void *), const char *dir,
    const char *name, int tree, span *out)
{
	char *key = join(dir, name);
	size_t n;

	if (key == NULL)
		return -ENOMEM;
	n = strlen(key);
	out->lo = out->hi = path_lower(o, path_of, key);
	while (out->hi < o->n && strncmp(path_of(o->v[out->hi]), key, n) == 0 &&
	    (tree || path_of(o->v[out->hi])[n] == '\0'))
		out->hi++;
	free(key);
	return 0;
}

/* Where what sc covers lies in o: at most two spans, a superset; how
 * many, or -ENOMEM. */
static int scope_spans(const vd_order *o, const char *(*path_of)(const void *), const vd_scope *sc,
    span *out)
{
	const char *p = sc->relpath;
	span whole = { 0, o->n };

	switch (sc->kind) {
	case VD_SCOPE_TREE:
		if (p[0] == '\0') {
			out[0] = whole;
			return 1;
		}
		out[0].lo = path_lower(o, path_of, p);
		out[0].hi = out[0].lo + (out[0].lo < o->n && strcmp(path_of(o->v[out[0].lo]), p) == 0);
		return entry_span(o, path_of, p, "", 1, &out[1]) < 0 ? -ENOMEM : 2;
	case VD_SCOPE_DIR:
		out[0].lo = path_lower(o, path_of, p);
		out[0].hi = out[0].lo + (out[0].lo < o->n && strcmp(path_of(o->v[out[0].lo]), p) == 0);
		return entry_span(o, path_of, p, VD_LEDGER_FILE, 0, &out[1]) < 0 ? -ENOMEM : 2;
	case VD_SCOPE_STMTS:
		return entry_span(o, path_of, p, VD_COMMITMENTS_DIR, 1, &out[0]) < 0 ? -ENOMEM : 1;
	case VD_SCOPE_FILE:
		out[0].lo = path_lower(o, path_of, p);
		out[0].hi = out[0].lo + (out[0].lo < o->n && strcmp(path_of(o->v[out[0].lo]), p) == 0);
		return 1;
	}
	return 0;
}

static int span_cmp(const void *a, const void *b)
{
	const span *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

int vd_cover_each(const vd_cover *cv, const vd_order *o,
    const char *(*path_of)(const void *elem), void (*fn)(void *arg, void *elem), void *arg)
{
	span *spans;
	size_t i, n = 0, at = 0;
	int k;

	if (cv->incomplete)
		return 0;
	if ((spans = calloc(cv->targeted ? 2 * cv->n_scopes + 1 : 1, sizeof(*spans))) == NULL)
		return -ENOMEM;
	if (!cv->targeted)
		spans[n++] = (span){ 0, o->n };
	for (i = 0; cv->targeted && i < cv->n_scopes; i++) {
		if ((k = scope_spans(o, path_of, &cv->scopes[i], &spans[n])) < 0) {
			free(spans);
			return k;
		}
		n += (size_t)k;
	}
	/* In order, each position once where two scopes reach it. */
	qsort(spans, n, sizeof(*spans), span_cmp);
	for (i = 0; i < n; i++) {
		size_t j = spans[i].lo > at ? spans[i].lo : at;
		for (; j < spans[i].hi; j++)
			if (vd_cover_path(cv, path_of(o->v[j])))
				fn(arg, o->v[j]);
		if (spans[i].hi > at)
			at = spans[i].hi;
	}
	free(spans);
	return 0;
}


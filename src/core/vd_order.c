#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vd_limits.h"
#include "vd_order.h"
#include "vd_util.h"

void vd_order_init(vd_order *o, vd_order_cmp cmp)
{
	memset(o, 0, sizeof(*o));
	o->cmp = cmp;
}

void vd_order_free(vd_order *o)
{
	free(o->v);
	free(o->added);
	vd_order_init(o, o->cmp);
}

void vd_order_clear(vd_order *o)
{
	o->n = o->n_added = 0;
	o->failed = 0;
}

void vd_order_add(vd_order *o, void *p)
{
	void **grown;

	/* Removals search what was added one by one: it is kept short. */
	if (o->n_added >= VD_ORDER_UNSORTED_MAX)
		vd_order_settle(o);
	if ((grown = vd_grow(o->added, &o->cap_added, o->n_added, sizeof(*grown))) == NULL) {
		o->failed = 1;
		return;
	}
	o->added = grown;
	o->added[o->n_added++] = p;
}

/* The settled position of p, or n. */
static size_t find(const vd_order *o, const void *p)
{
	size_t lo = 0, hi = o->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = o->cmp(p, o->v[mid]);
		if (c == 0)
			return o->v[mid] == p ? mid : o->n;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return o->n;
}

void vd_order_del(vd_order *o, const void *p)
{
	size_t i;

	for (i = 0; i < o->n_added; i++)
		if (o->added[i] == p) {
			o->added[i] = o->added[--o->n_added];
			return;
		}
	if ((i = find(o, p)) < o->n) {
		memmove(&o->v[i], &o->v[i + 1], (o->n - i - 1) * sizeof(*o->v));
		o->n--;
	}
}

static vd_order_cmp sort_cmp;   /* qsort passes no context; the loop thread only */

static int by_ptr(const void *a, const void *b)
{
	return sort_cmp(*(void *const *)a, *(void *const *)b);
}

int vd_order_settle(vd_order *o)
{
	void **merged;
	size_t i, j, k, n;

	if (o->n_added == 0)
		return o->failed ? -ENOMEM : 0;
	n = o->n + o->n_added;
	if ((merged = malloc(n * sizeof(*merged))) == NULL) {
		o->failed = 1;
		return -ENOMEM;
	}
	sort_cmp = o->cmp;
	qsort(o->added, o->n_added, sizeof(*o->added), by_ptr);
	for (i = j = k = 0; i < o->n || j < o->n_added; k++)
		merged[k] = j == o->n_added || (i < o->n && o->cmp(o->v[i], o->added[j]) < 0) ?
		    o->v[i++] : o->added[j++];
	free(o->v);
	o->v = merged;
	o->n = o->cap = n;
	o->n_added = 0;
	return o->failed ? -ENOMEM : 0;
}

size_t vd_order_lower(const vd_order *o, const void *key,
    int (*cmpkey)(const void *key, const void *elem))
{
	size_t lo = 0, hi = o->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cmpkey(key, o->v[mid]) <= 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

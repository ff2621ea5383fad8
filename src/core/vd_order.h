/*
 * An index of pointers kept in one order as its elements come and go, for
 * the listings served a page at a time: a page costs a binary search and
 * its own length, not a sort of everything. What is added waits unsorted
 * until the next reader settles the index (a first scan adds thousands
 * between two pages), then is sorted and merged in at once; a removal
 * closes its gap. An element's place must not change while it is in.
 */
#ifndef VD_ORDER_H
#define VD_ORDER_H

#include <stddef.h>

typedef int (*vd_order_cmp)(const void *a, const void *b);   /* elements, not pointers to them */

typedef struct vd_order {
	void **v;                   /* settled: in order */
	size_t n, cap;
	void **added;               /* added since, in no order */
	size_t n_added, cap_added;
	vd_order_cmp cmp;           /* a total order: no two elements compare equal */
	int failed;                 /* out of memory: elements are missing */
} vd_order;

void vd_order_init(vd_order *o, vd_order_cmp cmp);
void vd_order_free(vd_order *o);        /* the index, not the elements */
void vd_order_clear(vd_order *o);
void vd_order_add(vd_order *o, void *p);
void vd_order_del(vd_order *o, const void *p);
/* After it, v[0..n) holds every element in order: 0, or -ENOMEM (and
 * failed set: the owner builds the index again). */
int vd_order_settle(vd_order *o);
/* The first settled position whose element is not below key, for
 * cmpkey(key, element) (negative: key is below it). */
size_t vd_order_lower(const vd_order *o, const void *key,
    int (*cmpkey)(const void *key, const void *elem));

#endif

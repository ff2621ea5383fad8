/*
 * The changes the watches reported since a scan began: what the next
 * targeted scan looks at (vd_scan_changes), or, when there are too many,
 * events were lost or a whole scan was asked for, the whole store.
 */
#ifndef VD_CHANGES_H
#define VD_CHANGES_H

#include <stddef.h>

#include "vd_scanned.h"

typedef struct vd_changes {
	vd_scan_change *v;
	size_t n, cap;
	int whole;          /* the whole store: v is empty */
} vd_changes;

void vd_changes_init(vd_changes *c);
/* Note name in dir ("" : dir itself), once; past VD_SCAN_CHANGES_MAX, or
 * out of memory, the whole store. */
void vd_changes_add(vd_changes *c, const char *dir, const char *name);
void vd_changes_whole(vd_changes *c);
int vd_changes_empty(const vd_changes *c);
/* Hand everything noted to out (freed first); c is empty after. */
void vd_changes_take(vd_changes *c, vd_changes *out);
void vd_changes_free(vd_changes *c);

#endif

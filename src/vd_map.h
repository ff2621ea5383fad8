/* A string-keyed hash map (open addressing); keys are copied. */
#ifndef VD_MAP_H
#define VD_MAP_H

#include <stddef.h>

typedef struct vd_map_slot {
	char *key;          /* NULL: empty; (char *)1: deleted */
	void *value;
} vd_map_slot;

typedef struct vd_map {
	vd_map_slot *slots;
	size_t cap, count, used;   /* used counts deleted slots too */
} vd_map;

void vd_map_init(vd_map *m);
void vd_map_free(vd_map *m);           /* frees keys, not values */
void *vd_map_get(const vd_map *m, const char *key);
int vd_map_put(vd_map *m, const char *key, void *value);   /* 0 or -ENOMEM */
void *vd_map_del(vd_map *m, const char *key);              /* the old value */

/* Iterate: for (i = 0; vd_map_next(m, &i, &k, &v); ) */
int vd_map_next(const vd_map *m, size_t *i, const char **key, void **value);

#endif

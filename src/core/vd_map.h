/* A string-keyed hash map (open addressing); keys are copied, or borrowed
 * from the values. */
#ifndef VD_MAP_H
#define VD_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct vd_map_slot {
	char *key;          /* NULL: empty; (char *)1: deleted */
	void *value;
	uint64_t hash;      /* the key's: compared before the key, kept for growing */
} vd_map_slot;

typedef struct vd_map {
	vd_map_slot *slots;
	size_t cap, count, used;   /* used counts deleted slots too */
	int borrowed;              /* keys belong to the values, not copied */
} vd_map;

void vd_map_init(vd_map *m);
/* A map whose keys are not copied: each key passed in must live in its
 * value (a group's hash, a copy's path) and as long as its entry; a put
 * on an existing key takes the new pointer. Saves a copy per entry in the
 * maps that hold one entry per artifact. */
void vd_map_init_borrowed(vd_map *m);
void vd_map_free(vd_map *m);           /* frees keys, not values */
void *vd_map_get(const vd_map *m, const char *key);
int vd_map_put(vd_map *m, const char *key, void *value);   /* 0 or -ENOMEM */
void *vd_map_del(vd_map *m, const char *key);              /* the old value */
/* Room for n more entries without growing the table a step at a time (a
 * map filled with thousands at once): 0 or -ENOMEM (the map unchanged,
 * and it grows as it goes). */
int vd_map_reserve(vd_map *m, size_t n);

/* Iterate: for (i = 0; vd_map_next(m, &i, &k, &v); ) */
int vd_map_next(const vd_map *m, size_t *i, const char **key, void **value);

#endif

#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vd_map.h"
#include "vd_util.h"

#define DELETED ((char *)1)

static uint64_t hash(const char *s)
{
	uint64_t h = VD_FNV_BASIS;

	while (*s)
		h = (h ^ (unsigned char)*s++) * VD_FNV_PRIME;
	return h;
}

void vd_map_init(vd_map *m)
{
	memset(m, 0, sizeof(*m));
}

void vd_map_init_borrowed(vd_map *m)
{
	vd_map_init(m);
	m->borrowed = 1;
}

void vd_map_free(vd_map *m)
{
	int borrowed = m->borrowed;
	size_t i;

	for (i = 0; i < m->cap && !borrowed; i++)
		if (m->slots[i].key != NULL && m->slots[i].key != DELETED)
			free(m->slots[i].key);
	free(m->slots);
	vd_map_init(m);
	m->borrowed = borrowed;
}

/* Keys are mostly hashes of 64 hex digits and paths sharing long
 * prefixes: the stored hash spares most of their comparisons. */
static vd_map_slot *find(const vd_map *m, const char *key, uint64_t h)
{
	size_t i, mask = m->cap - 1;

	if (m->cap == 0)
		return NULL;
	for (i = h & mask;; i = (i + 1) & mask) {
		vd_map_slot *s = &m->slots[i];
		if (s->key == NULL)
			return NULL;
		if (s->key != DELETED && s->hash == h && strcmp(s->key, key) == 0)
			return s;
	}
}

void *vd_map_get(const vd_map *m, const char *key)
{
	vd_map_slot *s = find(m, key, hash(key));

	return s ? s->value : NULL;
}

/* Every entry into a table of cap slots (a power of 2), deleted slots
 * dropped. */
static int rehash(vd_map *m, size_t cap)
{
	vd_map old = *m;
	size_t i;

	m->slots = calloc(cap, sizeof(*m->slots));
	if (m->slots == NULL) {
		*m = old;
		return -ENOMEM;
	}
	m->cap = cap;
	m->count = m->used = 0;
	for (i = 0; i < old.cap; i++) {
		vd_map_slot *s = &old.slots[i], *d;
		size_t j, mask = cap - 1;
		if (s->key == NULL || s->key == DELETED)
			continue;
		for (j = s->hash & mask; m->slots[j].key != NULL; j = (j + 1) & mask)
			;
		d = &m->slots[j];
		*d = *s;
		m->count++;
		m->used++;
	}
	free(old.slots);
	return 0;
}

static int grow(vd_map *m)
{
	/* Rehash in place of the same size when most used slots are deleted. */
	if (m->cap && m->count < m->cap / 4)
		return rehash(m, m->cap);
	return rehash(m, m->cap ? m->cap * 2 : 16);
}

int vd_map_reserve(vd_map *m, size_t n)
{
	size_t cap = m->cap ? m->cap : 16;

	while ((m->count + n + 1) * 4 > cap * 3)
		cap *= 2;
	/* Deleted slots count against the room until a rehash drops them. */
	if (cap > m->cap || (m->used + n + 1) * 4 > m->cap * 3)
		return rehash(m, cap);
	return 0;
}

int vd_map_put(vd_map *m, const char *key, void *value)
{
	uint64_t h = hash(key);
	vd_map_slot *s = find(m, key, h);
	size_t i, mask;
	char *k;

	if (s != NULL) {
		s->value = value;
		if (m->borrowed)
			s->key = (char *)key;   /* the new value's own copy */
		return 0;
	}
	if ((m->used + 1) * 4 > m->cap * 3 && grow(m) < 0)
		return -ENOMEM;
	if (m->borrowed)
		k = (char *)key;
	else if ((k = strdup(key)) == NULL)
		return -ENOMEM;
	mask = m->cap - 1;
	for (i = h & mask; m->slots[i].key != NULL && m->slots[i].key != DELETED;
	    i = (i + 1) & mask)
		;
	if (m->slots[i].key == NULL)
		m->used++;
	m->slots[i].key = k;
	m->slots[i].value = value;
	m->slots[i].hash = h;
	m->count++;
	return 0;
}

void *vd_map_del(vd_map *m, const char *key)
{
	vd_map_slot *s = find(m, key, hash(key));
	void *v;

	if (s == NULL)
		return NULL;
	v = s->value;
	if (!m->borrowed)
		free(s->key);
	s->key = DELETED;
	s->value = NULL;
	m->count--;
	return v;
}

int vd_map_next(const vd_map *m, size_t *i, const char **key, void **value)
{
	for (; *i < m->cap; (*i)++) {
		vd_map_slot *s = &m->slots[*i];
		if (s->key != NULL && s->key != DELETED) {
			*key = s->key;
			*value = s->value;
			(*i)++;
			return 1;
		}
	}
	return 0;
}

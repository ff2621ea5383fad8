#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "vd_changes.h"
#include "vd_limits.h"
#include "vd_util.h"

void vd_changes_init(vd_changes *c)
{
	memset(c, 0, sizeof(*c));
}

static void clear(vd_changes *c)
{
	size_t i;

	for (i = 0; i < c->n; i++) {
		free(c->v[i].dir);
		free(c->v[i].name);
	}
	free(c->v);
	c->v = NULL;
	c->n = c->cap = 0;
}

void vd_changes_whole(vd_changes *c)
{
	clear(c);
	c->whole = 1;
}

void vd_changes_add(vd_changes *c, const char *dir, const char *name)
{
	vd_scan_change *arr;
	size_t i;

	if (c->whole)
		return;
	for (i = 0; i < c->n; i++)
		if (strcmp(c->v[i].dir, dir) == 0 && strcmp(c->v[i].name, name) == 0)
			return;
	if (c->n == VD_SCAN_CHANGES_MAX ||
	    (arr = vd_grow(c->v, &c->cap, c->n, sizeof(*arr))) == NULL) {
		vd_changes_whole(c);
		return;
	}
	c->v = arr;
	arr[c->n].dir = strdup(dir);
	arr[c->n].name = strdup(name);
	if (arr[c->n].dir == NULL || arr[c->n].name == NULL) {
		free(arr[c->n].dir);
		free(arr[c->n].name);
		vd_changes_whole(c);
		return;
	}
	c->n++;
}

int vd_changes_empty(const vd_changes *c)
{
	return !c->whole && c->n == 0;
}

void vd_changes_take(vd_changes *c, vd_changes *out)
{
	vd_changes_free(out);
	*out = *c;
	vd_changes_init(c);
}

void vd_changes_free(vd_changes *c)
{
	clear(c);
	c->whole = 0;
}

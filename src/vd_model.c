#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "vd_chunks.h"
#include "vd_model.h"

const char *vd_astate_name(vd_astate st)
{
	static const char *const names[] = { "pending", "verifying", "verified", "failed" };

	return (unsigned)st < 4 ? names[st] : "unknown";
}

const char *vd_chain_status_name(vd_chain_status st)
{
	static const char *const names[] = { "pending", "intact", "broken" };

	return (unsigned)st < 3 ? names[st] : "unknown";
}

const char *vd_break_name(vd_break_reason r)
{
	static const char *const names[VD_BREAK_COUNT] = { "missing_parent", "parent_failed",
		"round_gap", "detached_root", "commitment_mismatch", "cross_run" };

	return (unsigned)r < VD_BREAK_COUNT ? names[r] : "unknown";
}

const char *vd_run_name(const char *run)
{
	return run[0] ? run : ".";
}

vd_astate vd_copy_state(const vd_copy *c)
{
	/* A scrub re-checks a known verdict: the verdict stands meanwhile. */
	if (c->inflight != NULL && c->inflight_kind != VD_JOB_SCRUB)
		return c->has_verdict || c->inflight_kind == VD_JOB_EXPLICIT ?
		    VD_AS_VERIFYING : VD_AS_PENDING;
	if (!c->has_verdict || !vd_fingerprint_eq(&c->verdict_fp, &c->fp))
		return c->has_verdict && c->code != VD_OK ? VD_AS_FAILED : VD_AS_PENDING;
	return c->code == VD_OK ? VD_AS_VERIFIED : VD_AS_FAILED;
}

vd_astate vd_copy_settled(const vd_copy *c)
{
	if (!c->has_verdict)
		return VD_AS_PENDING;
	return c->code == VD_OK ? VD_AS_VERIFIED : VD_AS_FAILED;
}

vd_astate vd_group_settled(const vd_group *g)
{
	vd_astate st = VD_AS_VERIFIED;
	size_t i;

	for (i = 0; i < g->n; i++) {
		if (vd_copy_settled(g->copies[i]) == VD_AS_FAILED)
			return VD_AS_FAILED;
		if (vd_copy_settled(g->copies[i]) == VD_AS_PENDING)
			st = VD_AS_PENDING;
	}
	return st;
}

vd_astate vd_group_state(const vd_group *g)
{
	vd_astate worst = VD_AS_VERIFIED, st;
	size_t i;

	for (i = 0; i < g->n; i++) {
		st = vd_copy_state(g->copies[i]);
		if (st == VD_AS_FAILED)
			return VD_AS_FAILED;
		if (st == VD_AS_VERIFYING || (st == VD_AS_PENDING && worst != VD_AS_VERIFYING))
			worst = st;
	}
	return worst;
}

vd_astate vd_group_through(const vd_group *g)
{
	vd_astate st = VD_AS_FAILED;
	size_t i;

	for (i = 0; i < g->n; i++) {
		vd_astate c = vd_copy_settled(g->copies[i]);
		if (c == VD_AS_VERIFIED)
			return VD_AS_VERIFIED;
		if (c == VD_AS_PENDING)
			st = VD_AS_PENDING;
	}
	return st;
}

int vd_group_in_run(const vd_group *g, const char *run)
{
	size_t i;

	for (i = 0; i < g->n; i++)
		if (strcmp(g->copies[i]->run, run) == 0)
			return 1;
	return 0;
}

/* ---- the hash index ---------------------------------------------------- */

void vd_model_init(vd_model *m)
{
	vd_map_init(&m->copies);
	vd_map_init(&m->groups);
}

vd_copy *vd_model_copy(const vd_model *m, const char *relpath)
{
	return vd_map_get(&m->copies, relpath);
}

vd_group *vd_model_group(const vd_model *m, const char *hash)
{
	return vd_map_get(&m->groups, hash);
}

void vd_model_unindex(vd_model *m, vd_copy *c)
{
	vd_group *g;
	size_t i;

	if (c->hdr.code != VD_OK || (g = vd_map_get(&m->groups, c->hdr.content_hash)) == NULL)
		return;
	for (i = 0; i < g->n; i++) {
		if (g->copies[i] == c) {
			memmove(&g->copies[i], &g->copies[i + 1], (g->n - i - 1) * sizeof(*g->copies));
			g->n--;
			break;
		}
	}
	if (g->n == 0) {
		vd_map_del(&m->groups, g->hash);
		free(g->copies);
		free(g->breaks);
		free(g);
	}
}

static vd_group *group_for(vd_model *m, const char *hash)
{
	vd_group *g = vd_map_get(&m->groups, hash);

	if (g != NULL)
		return g;
	if ((g = calloc(1, sizeof(*g))) == NULL)
		return NULL;
	memcpy(g->hash, hash, sizeof(g->hash));
	if (vd_map_put(&m->groups, g->hash, g) < 0) {
		free(g);
		return NULL;
	}
	return g;
}

/* Copies stay in path order: answers do not depend on scan order. */
void vd_model_index(vd_model *m, vd_copy *c)
{
	vd_group *g;
	vd_copy **grown;
	size_t i;

	if (c->hdr.code != VD_OK || (g = group_for(m, c->hdr.content_hash)) == NULL)
		return;
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 2;
		if ((grown = realloc(g->copies, cap * sizeof(*grown))) == NULL)
			return;
		g->copies = grown;
		g->cap = cap;
	}
	for (i = g->n; i > 0 && strcmp(g->copies[i - 1]->relpath, c->relpath) > 0; i--)
		g->copies[i] = g->copies[i - 1];
	g->copies[i] = c;
	g->n++;
}

/* ---- copies ------------------------------------------------------------ */

void vd_copy_text(char **dst, const char *text)
{
	free(*dst);
	*dst = text != NULL && text[0] != '\0' ? strdup(text) : NULL;
}

static void free_copy(vd_copy *c)
{
	free(c->detail);
	free(c->changed);
	vd_chunkmap_free(c->chunks);
	vd_hdrinfo_free(&c->hdr);
	free(c->relpath);
	free(c->run);
	free(c);
}

vd_copy *vd_model_add_copy(vd_model *m, const char *relpath, const char *run)
{
	vd_copy *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->relpath = strdup(relpath);
	c->run = strdup(run);
	c->hdr.code = VD_ARTIFACT_INVALID;
	if (c->relpath == NULL || c->run == NULL || vd_map_put(&m->copies, relpath, c) < 0) {
		free_copy(c);
		return NULL;
	}
	return c;
}

void vd_model_remove_copy(vd_model *m, vd_copy *c)
{
	vd_model_unindex(m, c);
	vd_map_del(&m->copies, c->relpath);
	free_copy(c);
}

void vd_model_free(vd_model *m)
{
	const char *k;
	void *v;
	size_t it = 0;

	while (vd_map_next(&m->copies, &it, &k, &v))
		free_copy(v);
	it = 0;
	while (vd_map_next(&m->groups, &it, &k, &v)) {
		free(((vd_group *)v)->copies);
		free(((vd_group *)v)->breaks);
		free(v);
	}
	vd_map_free(&m->copies);
	vd_map_free(&m->groups);
}

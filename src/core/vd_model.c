#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vd_chunks.h"
#include "vd_limits.h"
#include "vd_model.h"
#include "vd_omsruns.h"

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
	if (c->inflight != 0 && c->inflight_kind != VD_JOB_SCRUB)
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

/* ---- the listings' indexes --------------------------------------------- */

static int hash_cmp(const void *a, const void *b)
{
	return strcmp(((const vd_group *)a)->hash, ((const vd_group *)b)->hash);
}

int vd_model_run_cmp(const void *a, const void *b)
{
	const vd_copy *x = a, *y = b;
	int c = strcmp(x->run, y->run);

	if (c != 0)
		return c;
	if (x->run_round != y->run_round)
		return x->run_round < y->run_round ? -1 : 1;
	if ((c = strcmp(x->run_group->hash, y->run_group->hash)) != 0)
		return c;
	return strcmp(x->relpath, y->relpath);
}

static void headerless_put(vd_model *m, vd_copy *c)
{
	if (vd_map_put(&m->headerless, c->relpath, c) < 0)
		m->orders_failed = 1;
}

/* A group's copies leave by_run before its round or copies change, and
 * come back after: an element's key never changes in the index. */
static void runs_out(vd_model *m, vd_group *g)
{
	size_t i;

	for (i = 0; i < g->n; i++)
		if (g->copies[i]->run_group != NULL) {
			vd_order_del(&m->by_run, g->copies[i]);
			g->copies[i]->run_group = NULL;
		}
}

static void runs_in(vd_model *m, vd_group *g)
{
	size_t i;

	for (i = 0; i < g->n; i++) {
		g->copies[i]->run_round = g->round_index;
		g->copies[i]->run_group = g;
		vd_order_add(&m->by_run, g->copies[i]);
	}
}

/* Out of memory once, the indexes are built again from the maps. */
static int settle_orders(vd_model *m)
{
	const char *k;
	void *v;
	size_t it = 0;

	if (!m->orders_failed && !m->by_hash.failed && !m->by_run.failed &&
	    vd_order_settle(&m->by_hash) == 0 && vd_order_settle(&m->by_run) == 0)
		return 0;
	vd_order_clear(&m->by_hash);
	vd_order_clear(&m->by_run);
	vd_map_free(&m->headerless);
	m->orders_failed = 0;
	while (vd_map_next(&m->groups, &it, &k, &v)) {
		vd_group *g = v;
		vd_order_add(&m->by_hash, g);
		for (size_t i = 0; i < g->n; i++)
			g->copies[i]->run_group = NULL;
		runs_in(m, g);
	}
	it = 0;
	while (vd_map_next(&m->copies, &it, &k, &v))
		if (((vd_copy *)v)->hdr.code != VD_OK)
			headerless_put(m, v);
	if (m->orders_failed || vd_order_settle(&m->by_hash) < 0 || vd_order_settle(&m->by_run) < 0)
		return -ENOMEM;
	return 0;
}

const vd_order *vd_model_by_hash(vd_model *m)
{
	return settle_orders(m) == 0 ? &m->by_hash : NULL;
}

const vd_order *vd_model_by_run(vd_model *m)
{
	return settle_orders(m) == 0 ? &m->by_run : NULL;
}

static int path_cmp(const void *a, const void *b)
{
	return strcmp(((const vd_copy *)a)->relpath, ((const vd_copy *)b)->relpath);
}

/* Out of memory once, built again from the map of copies. */
const vd_order *vd_model_by_path(vd_model *m)
{
	const char *k;
	void *v;
	size_t it = 0;

	if (!m->by_path.failed && vd_order_settle(&m->by_path) == 0)
		return &m->by_path;
	vd_order_clear(&m->by_path);
	while (vd_map_next(&m->copies, &it, &k, &v))
		vd_order_add(&m->by_path, v);
	return vd_order_settle(&m->by_path) == 0 ? &m->by_path : NULL;
}

/* ---- the hash index ---------------------------------------------------- */

void vd_model_init(vd_model *m)
{
	vd_map_init_borrowed(&m->copies);
	vd_map_init_borrowed(&m->groups);
	vd_map_init_borrowed(&m->children);
	vd_map_init(&m->dirty);
	vd_map_init(&m->dirty_copies);
	m->dirty_whole_min = VD_DIRTY_WHOLE_MIN;
	vd_order_init(&m->by_hash, hash_cmp);
	vd_order_init(&m->by_run, vd_model_run_cmp);
	vd_order_init(&m->by_path, path_cmp);
	vd_map_init_borrowed(&m->headerless);
	m->orders_failed = 0;
}

vd_copy *vd_model_copy(const vd_model *m, const char *relpath)
{
	return vd_map_get(&m->copies, relpath);
}

vd_group *vd_model_group(const vd_model *m, const char *hash)
{
	return vd_map_get(&m->groups, hash);
}

vd_group *vd_model_first_child(const vd_model *m, const char *hash)
{
	return vd_map_get(&m->children, hash);
}

/* A copy claiming hash changed: its group, and the groups naming it as
 * their parent (whose chains read it), are stamped with the change. */
static void stamp(vd_model *m, const char *hash)
{
	vd_group *g = vd_map_get(&m->groups, hash);

	m->change_gen++;
	if (g != NULL)
		g->changed = m->change_gen;
	for (g = vd_map_get(&m->children, hash); g != NULL; g = g->next_child)
		g->changed = m->change_gen;
}

/* Out of memory, everything is taken as changed too. */
static void mark(vd_model *m, vd_map *set, const char *key)
{
	if (m->dirty_all || vd_map_get(set, key) != NULL)
		return;
	if ((set->count >= m->dirty_whole_min && set->count >= m->groups.count / 4) ||
	    vd_map_put(set, key, (void *)1) < 0) {
		vd_model_clear_dirty(m);
		m->dirty_all = 1;
	}
}

/* A copy's hash changes its group; its parent hash, the parent's count
 * of children (fork alerts). */
static void mark_copy(vd_model *m, const vd_copy *c)
{
	mark(m, &m->dirty_copies, c->relpath);
	if (c->hdr.code != VD_OK)
		return;
	stamp(m, c->hdr.content_hash);
	mark(m, &m->dirty, c->hdr.content_hash);
	if (c->hdr.has_parent)
		mark(m, &m->dirty, c->hdr.parent_hash);
}

void vd_model_touch(vd_model *m, const vd_copy *c)
{
	mark_copy(m, c);
}

void vd_model_clear_dirty(vd_model *m)
{
	vd_map_free(&m->dirty);
	vd_map_free(&m->dirty_copies);
	m->dirty_all = 0;
}

static void unlink_child(vd_model *m, vd_group *g)
{
	vd_group *first = vd_map_get(&m->children, g->parent), **pp;

	if (first == g) {
		if (g->next_child != NULL)     /* keyed by the new first's parent */
			vd_map_put(&m->children, g->next_child->parent, g->next_child);
		else
			vd_map_del(&m->children, g->parent);
	} else {
		for (pp = &first; *pp != NULL && *pp != g; pp = &(*pp)->next_child)
			;
		if (*pp == g)
			*pp = g->next_child;
	}
	g->next_child = NULL;
}

/* The group's header is its first copy's: re-read when that copy changes,
 * moving the group in the children index. */
static void take_first_header(vd_model *m, vd_group *g)
{
	const vd_hdrinfo *h = &g->copies[0]->hdr;

	if (g->has_parent && (!h->has_parent || strcmp(g->parent, h->parent_hash) != 0)) {
		mark(m, &m->dirty, g->parent);
		unlink_child(m, g);
		g->has_parent = 0;
	}
	g->round_index = h->round_index;
	if (h->has_parent && !g->has_parent) {
		memcpy(g->parent, h->parent_hash, sizeof(g->parent));
		g->next_child = vd_map_get(&m->children, g->parent);
		if (vd_map_put(&m->children, g->parent, g) < 0) {
			g->next_child = NULL;
			return;
		}
		g->has_parent = 1;
	}
}

static void free_group(vd_model *m, vd_group *g)
{
	if (g->has_parent)
		unlink_child(m, g);
	vd_order_del(&m->by_hash, g);
	vd_map_del(&m->groups, g->hash);
	free(g->copies);
	free(g->breaks);
	free(g);
	m->groups_gen++;
}

void vd_model_unindex(vd_model *m, vd_copy *c)
{
	vd_group *g;
	size_t i;

	mark(m, &m->dirty_copies, c->relpath);
	vd_map_del(&m->headerless, c->relpath);
	if (c->hdr.code != VD_OK || (g = vd_map_get(&m->groups, c->hdr.content_hash)) == NULL)
		return;
	mark_copy(m, c);
	runs_out(m, g);
	for (i = 0; i < g->n; i++) {
		if (g->copies[i] == c) {
			memmove(&g->copies[i], &g->copies[i + 1], (g->n - i - 1) * sizeof(*g->copies));
			g->n--;
			break;
		}
	}
	if (g->n == 0) {
		free_group(m, g);
		return;
	}
	if (i == 0)
		take_first_header(m, g);
	runs_in(m, g);
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
	vd_order_add(&m->by_hash, g);
	m->groups_gen++;
	return g;
}

/* Copies stay in path order: answers do not depend on scan order. */
void vd_model_index(vd_model *m, vd_copy *c)
{
	vd_group *g;
	vd_copy **grown;
	size_t i;

	mark_copy(m, c);
	vd_map_del(&m->headerless, c->relpath);
	if (c->hdr.code != VD_OK) {
		headerless_put(m, c);
		return;
	}
	if ((g = group_for(m, c->hdr.content_hash)) == NULL)
		return;
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 2;
		if ((grown = realloc(g->copies, cap * sizeof(*grown))) == NULL) {
			if (g->n == 0)
				free_group(m, g);
			return;
		}
		g->copies = grown;
		g->cap = cap;
	}
	runs_out(m, g);
	for (i = g->n; i > 0 && strcmp(g->copies[i - 1]->relpath, c->relpath) > 0; i--)
		g->copies[i] = g->copies[i - 1];
	g->copies[i] = c;
	g->n++;
	if (i == 0)
		take_first_header(m, g);
	runs_in(m, g);
}

/* ---- copies ------------------------------------------------------------ */

void vd_copy_text(char **dst, const char *text)
{
	free(*dst);
	*dst = text != NULL && text[0] != '\0' ? strdup(text) : NULL;
}

static int facts_empty(const vd_facts *f)
{
	return f->expected_hash[0] == '\0' && f->recomputed_hash[0] == '\0' &&
	    !f->has_file_schema_version && f->reader_max_version == 0 &&
	    f->tensor[0] == '\0' && f->file[0] == '\0' && f->remediation[0] == '\0';
}

void vd_copy_facts(vd_copy *c, const vd_facts *f)
{
	if (f == NULL || facts_empty(f)) {
		free(c->facts);
		c->facts = NULL;
		return;
	}
	if (c->facts == NULL && (c->facts = malloc(sizeof(*c->facts))) == NULL)
		return;             /* the verdict stands without its facts */
	*c->facts = *f;
}

void vd_copy_oms(vd_copy *c, const vd_oms_status *st)
{
	if (st == NULL) {
		free(c->oms);
		c->oms = NULL;
		return;
	}
	if (c->oms == NULL && (c->oms = malloc(sizeof(*c->oms))) == NULL)
		return;             /* shown as no bundle until the next check */
	*c->oms = *st;
}

static void free_copy(vd_copy *c)
{
	free(c->oms);
	free(c->detail);
	free(c->changed);
	free(c->facts);
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
	if (c->relpath == NULL || c->run == NULL || vd_map_put(&m->copies, c->relpath, c) < 0) {
		free_copy(c);
		return NULL;
	}
	headerless_put(m, c);
	vd_order_add(&m->by_path, c);
	return c;
}

void vd_model_remove_copy(vd_model *m, vd_copy *c)
{
	vd_model_unindex(m, c);
	vd_order_del(&m->by_path, c);
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
	vd_map_free(&m->children);
	vd_model_clear_dirty(m);
	vd_order_free(&m->by_hash);
	vd_order_free(&m->by_run);
	vd_order_free(&m->by_path);
	vd_map_free(&m->headerless);
}

vd_group *vd_model_next_group(const vd_model *m, size_t *it)
{
	const char *k;
	void *v;

	return vd_map_next(&m->groups, it, &k, &v) ? v : NULL;
}

size_t vd_model_group_count(const vd_model *m)
{
	return m->groups.count;
}

vd_copy *vd_model_next_copy(const vd_model *m, size_t *it)
{
	const char *k;
	void *v;

	return vd_map_next(&m->copies, it, &k, &v) ? v : NULL;
}

vd_copy *vd_model_next_headerless(const vd_model *m, size_t *it)
{
	const char *k;
	void *v;

	return vd_map_next(&m->headerless, it, &k, &v) ? v : NULL;
}

size_t vd_model_copy_count(const vd_model *m)
{
	return m->copies.count;
}

const char *vd_model_next_dirty(const vd_model *m, size_t *it)
{
	const char *k;
	void *v;

	return vd_map_next(&m->dirty, it, &k, &v) ? k : NULL;
}

size_t vd_model_dirty_count(const vd_model *m)
{
	return m->dirty.count;
}

const char *vd_model_next_dirty_copy(const vd_model *m, size_t *it)
{
	const char *k;
	void *v;

	return vd_map_next(&m->dirty_copies, it, &k, &v) ? k : NULL;
}

int vd_model_dirty_all(const vd_model *m)
{
	return m->dirty_all;
}

/*
 * Commitments, lineage and alerts, recomputed from the inputs after every
 * change. Each hash's chain is computed once per refresh from its parent's
 * memoized result, so a refresh costs O(artifacts + commitments), and a
 * walk never visits more than the store holds (a header naming its own
 * descendant is caught as a cycle).
 *
 * The rules that make an artifact trusted hold under both policies: a
 * counting commitment of its own run names it and nothing opposes it (a
 * round under equivocation is never trusted, whichever side a ledger
 * takes), its chain is intact down to round 0 and never crosses runs.
 */
#include "config.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vd_lineage.h"
#include "vd_log.h"
#include "vd_state.h"

#define SLOT_KEY_MAX (VD_RUN_MAX + 32)
#define GENESIS_RUN "*"            /* the pinned genesis applies to every run */

const char *vd_commit_source_name(vd_commit_source src)
{
	static const char *const names[VD_SRC_COUNT] = { "signed", "ledger", "roundclose",
		"pinned" };

	return (unsigned)src < VD_SRC_COUNT ? names[src] : "unknown";
}

int vd_commit_counts(const vd_commit_entry *e, vd_commit_source src, int policy)
{
	return e->has && (src != VD_SRC_LEDGER || e->is_signed || policy == VD_POLICY_LEDGER);
}

/* Strength for display: signed statements and signed ledger records, then
 * token posts, the pin, and unsigned ledger records last. */
static int rank(const vd_commit_entry *e, vd_commit_source src)
{
	switch (src) {
	case VD_SRC_SIGNED: return 0;
	case VD_SRC_LEDGER: return e->is_signed ? 1 : 4;
	case VD_SRC_ROUNDCLOSE: return 2;
	default: return 3;
	}
}

void vd_lineage_init(vd_lineage *l)
{
	memset(l, 0, sizeof(*l));
	vd_map_init(&l->commits);
	vd_map_init(&l->alerts);
	l->head_round = -1;
}

/* ---- commitments ------------------------------------------------------ */

static void slot_key(char *out, size_t n, const char *run, int64_t round)
{
	snprintf(out, n, "%s\n%lld", run, (long long)round);
}

static vd_commit_slot *slot(vd_lineage *l, const char *run, int64_t round)
{
	char key[SLOT_KEY_MAX];
	vd_commit_slot *sl;

	slot_key(key, sizeof(key), run, round);
	if ((sl = vd_map_get(&l->commits, key)) != NULL)
		return sl;
	if ((sl = calloc(1, sizeof(*sl))) == NULL || (sl->run = strdup(run)) == NULL) {
		free(sl);
		return NULL;
	}
	sl->round_index = round;
	if (vd_map_put(&l->commits, key, sl) < 0) {
		free(sl->run);
		free(sl);
		return NULL;
	}
	return sl;
}

const vd_commit_slot *vd_lineage_slot(const vd_lineage *l, const char *run, int64_t round)
{
	char key[SLOT_KEY_MAX];

	slot_key(key, sizeof(key), run, round);
	return vd_map_get(&l->commits, key);
}

static void clear_commits(vd_lineage *l)
{
	const char *k;
	void *v;
	size_t it = 0;

	while (vd_map_next(&l->commits, &it, &k, &v)) {
		free(((vd_commit_slot *)v)->run);
		free(v);
	}
	vd_map_free(&l->commits);
	vd_map_init(&l->commits);
}

/* Every hash any source names for a slot, counting or not: a second one
 * is an equivocation. */
static void note_hash(vd_commit_slot *sl, const char *hash, const char *where)
{
	if (sl->first_hash[0] == '\0')
		memcpy(sl->first_hash, hash, sizeof(sl->first_hash));
	else if (strcmp(sl->first_hash, hash) != 0 && sl->other_hash[0] == '\0') {
		memcpy(sl->other_hash, hash, sizeof(sl->other_hash));
		sl->other_where = where;
	}
}

/* Keep the first entry of a source; a different hash from the same
 * source is still noted as an equivocation. */
static void put(vd_commit_slot *sl, vd_commit_source src, const char *hash,
    const char *where, size_t line, const char *key_id)
{
	vd_commit_entry *e = &sl->src[src];

	note_hash(sl, hash, where);
	if (e->has)
		return;
	e->has = 1;
	memcpy(e->hash, hash, sizeof(e->hash));
	e->where = where;
	e->line = line;
	e->is_signed = key_id != NULL && key_id[0] != '\0';
	snprintf(e->key_id, sizeof(e->key_id), "%s", key_id ? key_id : "");
}

/* How many records of a remembered ledger a trusted checkpoint of its run
 * covers, checked against the memory, never the file as it is now. */
static size_t covered(const vd_lineage_input *in, const vd_ledger_mem *m, const char **key_id)
{
	size_t i, best = 0;

	*key_id = NULL;
	for (i = 0; i < in->n_stmts; i++) {
		const vd_signed_stmt *s = &in->stmts[i];
		if (s->st.kind != VD_STMT_CHECKPOINT || strcmp(s->run, m->run) != 0 ||
		    s->st.records > m->n || s->st.records <= best ||
		    vd_keyring_find(in->keys, s->key_id) == NULL ||
		    strcmp(m->recs[s->st.records - 1].record_hash, s->st.head_record_hash) != 0)
			continue;
		best = s->st.records;
		*key_id = s->key_id;
	}
	return best;
}

static void ledger_commits(vd_lineage *l, const vd_lineage_input *in, const vd_ledger_mem *m)
{
	const char *key_id;
	size_t signed_n = covered(in, m, &key_id), i;
	vd_commit_slot *sl;

	for (i = 0; i < m->n; i++)
		if ((sl = slot(l, m->run, m->recs[i].round_index)) != NULL)
			put(sl, VD_SRC_LEDGER, m->recs[i].hash, m->relpath, m->recs[i].line,
			    i < signed_n ? key_id : NULL);
	for (i = 0; i < m->n_diverged; i++)
		if ((sl = slot(l, m->run, m->diverged[i].round_index)) != NULL)
			note_hash(sl, m->diverged[i].hash, m->relpath);
}

static void build_commits(vd_lineage *l, const vd_lineage_input *in)
{
	const char *k;
	void *v;
	vd_commit_slot *sl;
	size_t i, it = 0;

	clear_commits(l);
	while (vd_map_next(in->mems, &it, &k, &v))
		ledger_commits(l, in, v);
	for (i = 0; i < in->n_posted; i++) {
		const vd_commitment *c = &in->posted[i];
		int is_signed = c->key_id[0] != '\0';
		if (is_signed && vd_keyring_find(in->keys, c->key_id) == NULL)
			continue;       /* the key was revoked */
		if ((sl = slot(l, c->run, c->round_index)) != NULL)
			put(sl, is_signed ? VD_SRC_SIGNED : VD_SRC_ROUNDCLOSE, c->hash, "api", 0,
			    c->key_id);
	}
	for (i = 0; i < in->n_stmts; i++) {
		const vd_signed_stmt *s = &in->stmts[i];
		if (s->st.kind == VD_STMT_ROUNDCLOSE && vd_keyring_find(in->keys, s->key_id) != NULL &&
		    (sl = slot(l, s->run, s->st.round_index)) != NULL)
			put(sl, VD_SRC_SIGNED, s->st.hash, s->where, 0, s->key_id);
	}
	for (i = 0; i < in->n_equivs; i++)
		if ((sl = slot(l, in->equivs[i].run, in->equivs[i].round_index)) != NULL)
			note_hash(sl, in->equivs[i].hash, "api");
	/* Pins: a run's genesis (its own, or the bare one, under "*"), and
	 * anchors, each the commitment of its round and a root. */
	for (i = 0; i < in->cfg->n_genesis; i++)
		if ((sl = slot(l, in->cfg->genesis[i].run, -1)) != NULL)
			put(sl, VD_SRC_PINNED, in->cfg->genesis[i].hash, "config", 0, NULL);
	for (i = 0; i < in->cfg->n_anchors; i++) {
		const vd_pin *a = &in->cfg->anchors[i];
		if ((sl = slot(l, a->run, a->round_index - 1)) != NULL) {
			put(sl, VD_SRC_PINNED, a->hash, "config", 0, NULL);
			sl->anchor = 1;
		}
	}
}

static void count_series(vd_lineage *l)
{
	const char *k;
	void *v;
	size_t it = 0;

	memset(l->series, 0, sizeof(l->series));
	while (vd_map_next(&l->commits, &it, &k, &v)) {
		const vd_commit_slot *sl = v;
		l->series[VD_CS_SIGNED] += sl->src[VD_SRC_SIGNED].has;
		l->series[sl->src[VD_SRC_LEDGER].is_signed ? VD_CS_LEDGER_SIGNED :
		    VD_CS_LEDGER_UNSIGNED] += sl->src[VD_SRC_LEDGER].has;
		l->series[VD_CS_ROUNDCLOSE] += sl->src[VD_SRC_ROUNDCLOSE].has;
		l->series[VD_CS_PINNED] += sl->src[VD_SRC_PINNED].has;
	}
}

/* The commitment for the round of a copy's artifact in the copy's run. */
static const vd_commit_slot *slot_for(const vd_lineage *l, const vd_copy *c)
{
	const vd_commit_slot *sl;

	if (c->hdr.round_index > 0)
		return vd_lineage_slot(l, c->run, c->hdr.round_index - 1);
	if ((sl = vd_lineage_slot(l, c->run, -1)) != NULL)
		return sl;
	return vd_lineage_slot(l, GENESIS_RUN, -1);
}

/* The entry shown: the strongest that names the hash, else the strongest. */
static int shown_source(const vd_commit_slot *sl, const char *hash)
{
	int s, best = -1, best_any = -1;

	for (s = 0; s < VD_SRC_COUNT; s++) {
		const vd_commit_entry *e = &sl->src[s];
		if (!e->has)
			continue;
		if (best_any < 0 || rank(e, (vd_commit_source)s) < rank(&sl->src[best_any], (vd_commit_source)best_any))
			best_any = s;
		if (strcmp(e->hash, hash) == 0 && (best < 0 ||
		    rank(e, (vd_commit_source)s) < rank(&sl->src[best], (vd_commit_source)best)))
			best = s;
	}
	return best >= 0 ? best : best_any;
}

static void group_commitment(const vd_lineage *l, const vd_lineage_input *in, vd_group *g,
    int *mismatch)
{
	int policy = vd_config_policy(in->cfg), s;
	size_t i;

	g->commit = NULL;
	g->committed = 0;
	*mismatch = 0;
	for (i = 0; i < g->n; i++) {
		const vd_commit_slot *sl = slot_for(l, g->copies[i]);
		int names = 0;
		if (sl == NULL)
			continue;
		for (s = 0; s < VD_SRC_COUNT; s++) {
			if (!vd_commit_counts(&sl->src[s], (vd_commit_source)s, policy))
				continue;
			if (strcmp(sl->src[s].hash, g->hash) == 0)
				names = 1;
			else
				*mismatch = 1;
		}
		if (names && sl->other_hash[0] == '\0') {
			g->committed = 1;
			g->commit = sl;
		} else if (g->commit == NULL) {
			g->commit = sl;
		}
	}
	if (g->commit != NULL)
		g->commit_source = shown_source(g->commit, g->hash);
}

/* ---- chains ----------------------------------------------------------- */

static void add_break(vd_group *g, const char *hash, int64_t round, vd_break_reason why)
{
	g->breaks_total++;
	if (g->n_breaks == VD_CHAIN_MAX_BREAKS)
		return;
	/* Out of memory, a break is still counted (breaks_total), not listed. */
	if (g->breaks == NULL && (g->breaks = malloc(VD_CHAIN_MAX_BREAKS * sizeof(*g->breaks))) == NULL)
		return;
	memcpy(g->breaks[g->n_breaks].hash, hash, VD_HASH_HEX_LEN + 1);
	g->breaks[g->n_breaks].round_index = round;
	g->breaks[g->n_breaks++].reason = why;
}

static void group_header(vd_group *g)
{
	const vd_hdrinfo *h = &g->copies[0]->hdr;

	g->round_index = h->round_index;
	g->has_parent = h->has_parent;
	memcpy(g->parent, h->parent_hash, sizeof(g->parent));
}

/* A present parent: its verdict, then its round against the child's. */
static vd_group *parent_state(vd_group *g, vd_group *p, int64_t child_round, int *pending)
{
	vd_astate ps = vd_group_through(p);

	if (ps == VD_AS_FAILED) {
		add_break(g, g->hash, g->round_index, VD_BREAK_PARENT_FAILED);
		return NULL;
	}
	if (ps != VD_AS_VERIFIED) {
		*pending = 1;
		return NULL;
	}
	if (p->n > 0 && p->copies[0]->hdr.round_index != child_round - 1)
		add_break(g, g->hash, g->round_index, VD_BREAK_ROUND_GAP);
	return p;
}

/* A chain never crosses runs: some copy of the parent must sit in a run
 * that holds a copy of the child. */
static int shares_run(const vd_group *g, const vd_group *p)
{
	size_t i;

	for (i = 0; i < g->n; i++)
		if (vd_group_in_run(p, g->copies[i]->run))
			return 1;
	return 0;
}

static const vd_retained *retained(const vd_lineage_input *in, const char *hash)
{
	return in->retained ? vd_map_get(in->retained, hash) : NULL;
}

/* The parent's directory is gone but it was verified and committed: walk
 * the remembered artifacts (pruned links) to a present ancestor, a root,
 * or a break. Returns the present ancestor to continue through, or NULL. */
static vd_group *through_pruned(const vd_lineage_input *in, vd_group *g, const vd_retained *r,
    int *pending)
{
	int64_t round = g->round_index;
	const char *run = NULL;
	size_t hops = 0;
	vd_group *p;

	for (;;) {
		if (run ? strcmp(run, r->run) != 0 : !vd_group_in_run(g, r->run)) {
			add_break(g, g->hash, g->round_index, VD_BREAK_CROSS_RUN);
			return NULL;
		}
		if (r->round_index != round - 1)
			add_break(g, r->hash, r->round_index, VD_BREAK_ROUND_GAP);
		g->pruned++;
		g->chain_len++;
		if (!r->has_parent) {
			if (r->round_index == 0)
				memcpy(g->root, r->hash, sizeof(g->root));
			else
				add_break(g, r->hash, r->round_index, VD_BREAK_DETACHED_ROOT);
			return NULL;
		}
		run = r->run;
		round = r->round_index;
		if ((p = vd_model_group(in->model, r->parent)) != NULL)
			break;
		if (++hops > in->retained->count || (r = retained(in, r->parent)) == NULL) {
			add_break(g, g->hash, g->round_index, VD_BREAK_MISSING_PARENT);
			return NULL;
		}
	}
	if (p->mark == 1 || !vd_group_in_run(p, run)) {
		add_break(g, g->hash, g->round_index, p->mark == 1 ? VD_BREAK_MISSING_PARENT :
		    VD_BREAK_CROSS_RUN);
		return NULL;
	}
	return parent_state(g, p, round, pending);
}

/* g's own links; returns the parent to continue through, or NULL. */
static vd_group *local_links(vd_lineage *l, const vd_lineage_input *in, vd_group *g,
    int *pending)
{
	const vd_retained *r;
	vd_group *p;
	int mismatch;

	group_commitment(l, in, g, &mismatch);
	if (mismatch)
		add_break(g, g->hash, g->round_index, VD_BREAK_COMMITMENT_MISMATCH);
	/* An anchor is where the operator chose to start trusting a run. */
	if (g->committed && g->commit->anchor &&
	    strcmp(g->commit->src[VD_SRC_PINNED].hash, g->hash) == 0) {
		memcpy(g->root, g->hash, sizeof(g->root));
		return NULL;
	}
	if (!g->has_parent) {
		if (g->round_index == 0)
			memcpy(g->root, g->hash, sizeof(g->root));
		else
			add_break(g, g->hash, g->round_index, VD_BREAK_DETACHED_ROOT);
		return NULL;
	}
	if ((p = vd_model_group(in->model, g->parent)) == NULL &&
	    (r = retained(in, g->parent)) != NULL)
		return through_pruned(in, g, r, pending);
	if (p == NULL || p->mark == 1) {
		add_break(g, g->hash, g->round_index, VD_BREAK_MISSING_PARENT);
		return NULL;
	}
	if (!shares_run(g, p)) {
		add_break(g, g->hash, g->round_index, VD_BREAK_CROSS_RUN);
		return NULL;
	}
	return parent_state(g, p, g->round_index, pending);
}

static void inherit(vd_group *g, const vd_group *p, int pending)
{
	size_t i;

	if (p != NULL) {
		g->chain_len += p->chain_len;
		g->pruned += p->pruned;
		memcpy(g->root, p->root, sizeof(g->root));
		for (i = 0; i < p->n_breaks; i++)
			add_break(g, p->breaks[i].hash, p->breaks[i].round_index, p->breaks[i].reason);
		g->breaks_total += p->breaks_total - p->n_breaks;
		pending |= p->chain == VD_CHAIN_PENDING;
	}
	if (g->breaks_total > 0)
		g->chain = VD_CHAIN_BROKEN;
	else if (pending || g->root[0] == '\0')
		g->chain = VD_CHAIN_PENDING;
	else
		g->chain = VD_CHAIN_INTACT;
	g->trusted = vd_group_state(g) == VD_AS_VERIFIED && g->chain == VD_CHAIN_INTACT &&
	    g->committed;
	g->mark = 2;
}

/* Walk up to the first group already done, then fill in on the way down:
 * no recursion, each group computed once. */
typedef struct step {
	vd_group *g, *next;
	int pending;
} step;

static void compute_chain(vd_lineage *l, const vd_lineage_input *in, vd_group *start)
{
	step *path = NULL, *grown;
	vd_group *g = start;
	size_t n = 0, cap = 0;

	while (g != NULL && g->mark == 0) {
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			if ((grown = realloc(path, cap * sizeof(*path))) == NULL)
				break;
			path = grown;
		}
		g->mark = 1;
		g->chain_len = 1;
		g->pruned = 0;
		g->root[0] = '\0';
		g->n_breaks = g->breaks_total = 0;
		group_header(g);
		path[n].g = g;
		path[n].pending = 0;
		path[n].next = local_links(l, in, g, &path[n].pending);
		g = path[n++].next;
	}
	while (n > 0) {
		n--;
		inherit(path[n].g, path[n].next, path[n].pending);
	}
	free(path);
}

static void compute_chains(vd_lineage *l, const vd_lineage_input *in)
{
	const char *k;
	void *v;
	size_t it = 0;

	while (vd_map_next(&in->model->groups, &it, &k, &v))
		((vd_group *)v)->mark = 0;
	it = 0;
	while (vd_map_next(&in->model->groups, &it, &k, &v))
		if (((vd_group *)v)->mark == 0)
			compute_chain(l, in, v);
}

/* ---- heads ------------------------------------------------------------ */

static void compute_head(vd_lineage *l, const vd_lineage_input *in)
{
	const char *k;
	void *v;
	size_t it = 0, i;

	l->head_round = -1;
	l->head_hash[0] = '\0';
	l->head_run = NULL;
	while (vd_map_next(&in->model->groups, &it, &k, &v)) {
		vd_group *g = v;
		if (!g->trusted)
			continue;
		if (g->round_index > l->head_round ||
		    (g->round_index == l->head_round && strcmp(g->hash, l->head_hash) < 0)) {
			l->head_round = g->round_index;
			memcpy(l->head_hash, g->hash, sizeof(l->head_hash));
			l->head_run = g->copies[0]->run;
			for (i = 1; i < g->n; i++)
				if (strcmp(g->copies[i]->run, l->head_run) < 0)
					l->head_run = g->copies[i]->run;
		}
	}
}

/* ---- alerts ----------------------------------------------------------- */

static void alert_add(vd_map *set, int kind, const char *subject, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void alert_add(vd_map *set, int kind, const char *subject, const char *fmt, ...)
{
	char key[SLOT_KEY_MAX + 64], detail[512];
	vd_alert *a;
	va_list ap;

	snprintf(key, sizeof(key), "%s\n%s", vd_alert_name((vd_alert_kind)kind), subject);
	if (vd_map_get(set, key) != NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	if ((a = calloc(1, sizeof(*a))) == NULL)
		return;
	a->kind = kind;
	a->subject = strdup(subject);
	a->detail = strdup(detail);
	if (a->subject == NULL || a->detail == NULL || vd_map_put(set, key, a) < 0) {
		free(a->subject);
		free(a->detail);
		free(a);
	}
}

static void alert_free(vd_alert *a)
{
	free(a->subject);
	free(a->detail);
	free(a);
}

static void copy_alerts(const vd_lineage_input *in, vd_map *set)
{
	const char *k;
	void *v;
	size_t it = 0;

	while (vd_map_next(&in->model->copies, &it, &k, &v)) {
		vd_copy *c = v;
		if (vd_copy_settled(c) == VD_AS_FAILED)
			alert_add(set, VD_ALERT_ARTIFACT_FAILED, c->relpath, "%s (claims %s): %s: %s",
			    c->relpath, c->hdr.code == VD_OK ? c->hdr.content_hash : "no valid header",
			    vd_code_name(c->code), VD_COPY_TEXT(c->detail));
	}
}

/* A fork: two verified artifacts naming one parent. Children are counted
 * per parent in one pass. */
static void fork_alerts(const vd_lineage_input *in, vd_map *set)
{
	vd_map children;
	const char *k;
	void *v;
	vd_group *p;
	size_t it = 0;

	vd_map_init(&children);
	while (vd_map_next(&in->model->groups, &it, &k, &v)) {
		vd_group *g = v;
		if (g->has_parent && vd_group_settled(g) == VD_AS_VERIFIED)
			vd_map_put(&children, g->parent,
			    (void *)((uintptr_t)vd_map_get(&children, g->parent) + 1));
	}
	it = 0;
	while (vd_map_next(&children, &it, &k, &v))
		if ((uintptr_t)v >= 2 && (p = vd_model_group(in->model, k)) != NULL &&
		    vd_group_settled(p) == VD_AS_VERIFIED)
			alert_add(set, VD_ALERT_FORK, k, "%zu verified artifacts name %s as their parent",
			    (size_t)(uintptr_t)v, k);
	vd_map_free(&children);
}

static void group_alerts(const vd_lineage_input *in, vd_map *set)
{
	const char *k;
	void *v;
	size_t it = 0, i;

	while (vd_map_next(&in->model->groups, &it, &k, &v)) {
		vd_group *g = v;
		int verified = vd_group_settled(g) == VD_AS_VERIFIED;

		for (i = 0; i < g->n_breaks; i++)
			if (g->breaks[i].reason == VD_BREAK_COMMITMENT_MISMATCH &&
			    strcmp(g->breaks[i].hash, g->hash) == 0)
				alert_add(set, VD_ALERT_COMMITMENT_MISMATCH, g->hash,
				    "%s (round %lld, %s) is not the hash committed for its round",
				    g->hash, (long long)g->round_index, g->copies[0]->relpath);
		if (verified && g->chain == VD_CHAIN_BROKEN)
			alert_add(set, VD_ALERT_CHAIN_BROKEN, g->hash, "%s (round %lld, %s): %s at %s",
			    g->hash, (long long)g->round_index, g->copies[0]->relpath,
			    vd_break_name(g->breaks[0].reason), g->breaks[0].hash);
	}
	fork_alerts(in, set);
}

static void ledger_alerts(const vd_lineage_input *in, vd_map *set)
{
	const char *k;
	void *v;
	size_t i, it = 0;

	for (i = 0; i < in->n_ledgers; i++) {
		const vd_scan_ledger *l = &in->ledgers[i];
		if (!l->read_ok)
			alert_add(set, VD_ALERT_LEDGER_BROKEN, l->relpath, "%s", l->read_error);
		else if (l->result.brk != VD_LEDGER_INTACT)
			alert_add(set, VD_ALERT_LEDGER_BROKEN, l->relpath, "%s: %s at %s", l->relpath,
			    vd_ledger_break_name(l->result.brk), l->result.break_detail);
	}
	while (vd_map_next(in->mems, &it, &k, &v)) {
		const vd_ledger_mem *m = v;
		if (m->rewritten)
			alert_add(set, VD_ALERT_LEDGER_REWRITTEN, m->relpath, "%s: %s", m->relpath,
			    m->detail);
	}
}

static void equivocation_alerts(vd_lineage *l, vd_map *set)
{
	const char *k;
	void *v;
	char subject[SLOT_KEY_MAX];
	size_t it = 0;

	while (vd_map_next(&l->commits, &it, &k, &v)) {
		const vd_commit_slot *sl = v;
		if (sl->other_hash[0] == '\0')
			continue;
		snprintf(subject, sizeof(subject), "%s round %lld", vd_run_name(sl->run),
		    (long long)sl->round_index);
		alert_add(set, VD_ALERT_EQUIVOCATION, subject,
		    "run %s round %lld: commitments name both %s and %s (%s); no artifact of that round is trusted",
		    vd_run_name(sl->run), (long long)sl->round_index, sl->first_hash, sl->other_hash,
		    sl->other_where ? sl->other_where : "?");
	}
}

/* Log (and record) each alert once when raised and once when cleared. */
static void diff_alerts(vd_lineage *l, const vd_lineage_input *in, vd_map *now)
{
	const char *k;
	void *v;
	size_t it = 0;

	while (vd_map_next(now, &it, &k, &v)) {
		vd_alert *a = v;
		if (vd_map_get(&l->alerts, k) != NULL)
			continue;
		log_warn("alert raised: %s: %s", vd_alert_name((vd_alert_kind)a->kind), a->detail);
		if (in->state)
			vd_state_alert(in->state, vd_alert_name((vd_alert_kind)a->kind), a->subject, a->detail, 1);
	}
	it = 0;
	while (vd_map_next(&l->alerts, &it, &k, &v)) {
		vd_alert *a = v;
		if (vd_map_get(now, k) == NULL) {
			log_info("alert cleared: %s: %s", vd_alert_name((vd_alert_kind)a->kind), a->subject);
			if (in->state)
				vd_state_alert(in->state, vd_alert_name((vd_alert_kind)a->kind), a->subject, a->detail, 0);
		}
		alert_free(a);
	}
	vd_map_free(&l->alerts);
	l->alerts = *now;
	memset(l->alert_counts, 0, sizeof(l->alert_counts));
	it = 0;
	while (vd_map_next(&l->alerts, &it, &k, &v))
		l->alert_counts[((vd_alert *)v)->kind]++;
}

void vd_lineage_refresh(vd_lineage *l, const vd_lineage_input *in, int commits)
{
	vd_map now;

	if (commits || !l->built) {
		build_commits(l, in);
		count_series(l);
		l->built = 1;
	}
	compute_chains(l, in);
	compute_head(l, in);
	vd_map_init(&now);
	copy_alerts(in, &now);
	group_alerts(in, &now);
	ledger_alerts(in, &now);
	equivocation_alerts(l, &now);
	diff_alerts(l, in, &now);
}

void vd_lineage_free(vd_lineage *l)
{
	const char *k;
	void *v;
	size_t it = 0;

	clear_commits(l);
	vd_map_free(&l->commits);
	while (vd_map_next(&l->alerts, &it, &k, &v))
		alert_free(v);
	vd_map_free(&l->alerts);
}

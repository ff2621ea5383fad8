/*
 * Commitments, lineage and alerts, recomputed from the store after every
 * change. Each hash's chain is computed once per refresh from its parent's
 * memoized result, so a refresh costs O(artifacts), and a walk never visits
 * more than the store holds (a header naming its own descendant is
 * caught as a cycle).
 */
#include "config.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vd_log.h"
#include "vd_state.h"
#include "vd_store.h"

const char *vd_chain_status_name(vd_chain_status st)
{
	static const char *const names[] = { "pending", "intact", "broken" };

	return (unsigned)st < 3 ? names[st] : "unknown";
}

const char *vd_break_name(vd_break_reason r)
{
	static const char *const names[] = { "missing_parent", "parent_failed", "round_gap",
		"detached_root", "commitment_mismatch" };

	return (unsigned)r < 5 ? names[r] : "unknown";
}

const char *vd_commit_source_name(vd_commit_source src)
{
	static const char *const names[] = { "ledger", "roundclose", "pinned" };

	return (unsigned)src < 3 ? names[src] : "unknown";
}

const char *vd_run_name(const char *run)
{
	return run[0] ? run : ".";
}

/* ---- commitments ------------------------------------------------------ */

static void slot_key(char *out, size_t n, const char *run, int64_t round)
{
	snprintf(out, n, "%s\n%lld", run, (long long)round);
}

static vd_commit_slot *slot(vd_store *s, const char *run, int64_t round)
{
	char key[1100];
	vd_commit_slot *sl;

	slot_key(key, sizeof(key), run, round);
	if ((sl = vd_map_get(&s->commits, key)) != NULL)
		return sl;
	if ((sl = calloc(1, sizeof(*sl))) == NULL)
		return NULL;
	snprintf(sl->run, sizeof(sl->run), "%s", run);
	sl->round_index = round;
	if (vd_map_put(&s->commits, key, sl) < 0) {
		free(sl);
		return NULL;
	}
	return sl;
}

static void clear_commits(vd_store *s)
{
	const char *k;
	void *v;
	size_t it = 0;

	while (vd_map_next(&s->commits, &it, &k, &v))
		free(v);
	vd_map_free(&s->commits);
	vd_map_init(&s->commits);
}

/* The trusted sources: ledger records before a break, posted RoundClose
 * messages, the pinned genesis (round -1 of every run, kept under "*"). */
static void build_commits(vd_store *s)
{
	vd_commit_slot *sl;
	size_t i, j;

	clear_commits(s);
	for (i = 0; i < s->n_ledgers; i++) {
		const vd_scan_ledger *l = &s->ledgers[i];
		for (j = 0; l->read_ok && j < l->n_entries; j++) {
			if (!l->entries[j].trusted || (sl = slot(s, l->run, l->entries[j].round_index)) == NULL)
				continue;
			sl->has_ledger = 1;
			memcpy(sl->ledger_hash, l->entries[j].global_model_hash, sizeof(sl->ledger_hash));
			sl->ledger_where = l->relpath;
			sl->ledger_line = l->entries[j].line;
		}
	}
	for (i = 0; i < s->n_posted; i++) {
		if ((sl = slot(s, s->posted[i].run, s->posted[i].round_index)) == NULL)
			continue;
		sl->has_post = 1;
		memcpy(sl->post_hash, s->posted[i].hash, sizeof(sl->post_hash));
	}
	if (s->cfg->genesis_hash[0] && (sl = slot(s, "*", -1)) != NULL) {
		sl->has_pinned = 1;
		memcpy(sl->pinned_hash, s->cfg->genesis_hash, sizeof(sl->pinned_hash));
	}
}

static int slot_names(const vd_commit_slot *sl, const char *h)
{
	return (sl->has_ledger && strcmp(sl->ledger_hash, h) == 0) ||
	    (sl->has_post && strcmp(sl->post_hash, h) == 0) ||
	    (sl->has_pinned && strcmp(sl->pinned_hash, h) == 0);
}

static int slot_names_other(const vd_commit_slot *sl, const char *h)
{
	return (sl->has_ledger && strcmp(sl->ledger_hash, h) != 0) ||
	    (sl->has_post && strcmp(sl->post_hash, h) != 0) ||
	    (sl->has_pinned && strcmp(sl->pinned_hash, h) != 0);
}

static vd_commit_source slot_source(const vd_commit_slot *sl, const char *h)
{
	if (sl->has_ledger && strcmp(sl->ledger_hash, h) == 0)
		return VD_SRC_LEDGER;
	if (sl->has_post && strcmp(sl->post_hash, h) == 0)
		return VD_SRC_ROUNDCLOSE;
	if (sl->has_pinned && strcmp(sl->pinned_hash, h) == 0)
		return VD_SRC_PINNED;
	return sl->has_ledger ? VD_SRC_LEDGER : sl->has_post ? VD_SRC_ROUNDCLOSE : VD_SRC_PINNED;
}

/* The commitment for the round of a copy's artifact in the copy's run. */
static vd_commit_slot *slot_for(vd_store *s, const vd_copy *c)
{
	char key[1100];

	if (c->hdr.round_index == 0) {
		slot_key(key, sizeof(key), "*", -1);
		return vd_map_get(&s->commits, key);
	}
	slot_key(key, sizeof(key), c->run, c->hdr.round_index - 1);
	return vd_map_get(&s->commits, key);
}

static void group_commitment(vd_store *s, vd_group *g, int *mismatch)
{
	size_t i;

	g->commit = NULL;
	g->committed = 0;
	*mismatch = 0;
	for (i = 0; i < g->n; i++) {
		vd_commit_slot *sl = slot_for(s, g->copies[i]);
		if (sl == NULL)
			continue;
		if (slot_names(sl, g->hash)) {
			g->committed = 1;
			g->commit = sl;
		} else if (g->commit == NULL) {
			g->commit = sl;
		}
		if (slot_names_other(sl, g->hash))
			*mismatch = 1;
	}
	if (g->commit != NULL)
		g->commit_source = slot_source(g->commit, g->hash);
}

/* ---- chains ----------------------------------------------------------- */

static void add_break(vd_group *g, const char *hash, int64_t round, vd_break_reason why)
{
	g->breaks_total++;
	if (g->n_breaks == VD_CHAIN_MAX_BREAKS)
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

/* g's own links; returns the parent to continue through, or NULL. */
static vd_group *local_links(vd_store *s, vd_group *g, int *pending)
{
	vd_group *p;
	int mismatch;
	vd_astate ps;

	group_commitment(s, g, &mismatch);
	if (mismatch)
		add_break(g, g->hash, g->round_index, VD_BREAK_COMMITMENT_MISMATCH);
	if (!g->has_parent) {
		if (g->round_index == 0)
			memcpy(g->root, g->hash, sizeof(g->root));
		else
			add_break(g, g->hash, g->round_index, VD_BREAK_DETACHED_ROOT);
		return NULL;
	}
	if ((p = vd_store_group(s, g->parent)) == NULL || p->mark == 1) {
		add_break(g, g->hash, g->round_index, VD_BREAK_MISSING_PARENT);
		return NULL;
	}
	if ((ps = vd_group_settled(p)) == VD_AS_FAILED) {
		add_break(g, g->hash, g->round_index, VD_BREAK_PARENT_FAILED);
		return NULL;
	}
	if (ps != VD_AS_VERIFIED) {
		*pending = 1;
		return NULL;
	}
	if (p->n > 0 && p->copies[0]->hdr.round_index != g->round_index - 1)
		add_break(g, g->hash, g->round_index, VD_BREAK_ROUND_GAP);
	return p;
}

static void inherit(vd_group *g, const vd_group *p, int pending)
{
	size_t i;

	if (p != NULL) {
		g->chain_len += p->chain_len;
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

static void compute_chain(vd_store *s, vd_group *start)
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
		g->root[0] = '\0';
		g->n_breaks = g->breaks_total = 0;
		group_header(g);
		path[n].g = g;
		path[n].pending = 0;
		path[n].next = local_links(s, g, &path[n].pending);
		g = path[n++].next;
	}
	while (n > 0) {
		n--;
		inherit(path[n].g, path[n].next, path[n].pending);
	}
	free(path);
}

static void compute_chains(vd_store *s)
{
	const char *k;
	void *v;
	size_t it = 0;

	while (vd_map_next(&s->groups, &it, &k, &v))
		((vd_group *)v)->mark = 0;
	it = 0;
	while (vd_map_next(&s->groups, &it, &k, &v))
		if (((vd_group *)v)->mark == 0)
			compute_chain(s, v);
}

/* ---- heads ------------------------------------------------------------ */

static void compute_head(vd_store *s)
{
	const char *k;
	void *v;
	size_t it = 0, i;

	s->head_round = -1;
	s->head_hash[0] = s->head_run[0] = '\0';
	while (vd_map_next(&s->groups, &it, &k, &v)) {
		vd_group *g = v;
		if (!g->trusted)
			continue;
		if (g->round_index > s->head_round ||
		    (g->round_index == s->head_round && strcmp(g->hash, s->head_hash) < 0)) {
			s->head_round = g->round_index;
			memcpy(s->head_hash, g->hash, sizeof(s->head_hash));
			for (i = 0; i < g->n; i++)
				if (i == 0 || strcmp(g->copies[i]->run, s->head_run) < 0)
					snprintf(s->head_run, sizeof(s->head_run), "%s", g->copies[i]->run);
		}
	}
}

/* ---- alerts ----------------------------------------------------------- */

static void alert_add(vd_map *set, int kind, const char *subject, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void alert_add(vd_map *set, int kind, const char *subject, const char *fmt, ...)
{
	char key[1200], detail[512];
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

static void copy_alerts(vd_store *s, vd_map *set)
{
	const char *k;
	void *v;
	size_t it = 0;

	while (vd_map_next(&s->copies, &it, &k, &v)) {
		vd_copy *c = v;
		if (vd_copy_settled(c) == VD_AS_FAILED)
			alert_add(set, VD_ALERT_ARTIFACT_FAILED, c->relpath, "%s (claims %s): %s: %s",
			    c->relpath, c->hdr.code == VD_OK ? c->hdr.content_hash : "no valid header",
			    vd_code_name(c->code), c->detail);
	}
}

/* A fork: two verified artifacts naming one parent. Children are counted
 * per parent in one pass. */
static void fork_alerts(vd_store *s, vd_map *set)
{
	vd_map children;
	const char *k;
	void *v;
	size_t it = 0;

	vd_map_init(&children);
	while (vd_map_next(&s->groups, &it, &k, &v)) {
		vd_group *g = v;
		if (g->has_parent && vd_group_settled(g) == VD_AS_VERIFIED)
			vd_map_put(&children, g->parent,
			    (void *)((uintptr_t)vd_map_get(&children, g->parent) + 1));
	}
	it = 0;
	while (vd_map_next(&children, &it, &k, &v))
		if ((uintptr_t)v >= 2 && vd_store_group(s, k) != NULL &&
		    vd_group_settled(vd_store_group(s, k)) == VD_AS_VERIFIED)
			alert_add(set, VD_ALERT_FORK, k, "%zu verified artifacts name %s as their parent",
			    (size_t)(uintptr_t)v, k);
	vd_map_free(&children);
}

static void group_alerts(vd_store *s, vd_map *set)
{
	const char *k;
	void *v;
	size_t it = 0, i;

	while (vd_map_next(&s->groups, &it, &k, &v)) {
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
	fork_alerts(s, set);
}

static void commitment_alerts(vd_store *s, vd_map *set)
{
	const char *k;
	void *v;
	char subject[1100];
	size_t it = 0, i;

	for (i = 0; i < s->n_ledgers; i++) {
		const vd_scan_ledger *l = &s->ledgers[i];
		if (!l->read_ok)
			alert_add(set, VD_ALERT_LEDGER_BROKEN, l->relpath, "%s", l->read_error);
		else if (l->result.brk != VD_LEDGER_INTACT)
			alert_add(set, VD_ALERT_LEDGER_BROKEN, l->relpath, "%s: %s at %s", l->relpath,
			    vd_ledger_break_name(l->result.brk), l->result.break_detail);
	}
	while (vd_map_next(&s->commits, &it, &k, &v)) {
		vd_commit_slot *sl = v;
		if (sl->has_ledger && sl->has_post && strcmp(sl->ledger_hash, sl->post_hash) != 0) {
			snprintf(subject, sizeof(subject), "%s round %lld", vd_run_name(sl->run),
			    (long long)sl->round_index);
			alert_add(set, VD_ALERT_EQUIVOCATION, subject,
			    "run %s round %lld: the ledger commits %s, a RoundClose committed %s",
			    vd_run_name(sl->run), (long long)sl->round_index, sl->ledger_hash, sl->post_hash);
		}
	}
	for (i = 0; i < s->n_equivs; i++) {
		snprintf(subject, sizeof(subject), "%s round %lld", vd_run_name(s->equivs[i].run),
		    (long long)s->equivs[i].round_index);
		alert_add(set, VD_ALERT_EQUIVOCATION, subject,
		    "run %s round %lld: a RoundClose for %s conflicted with the hash already committed",
		    vd_run_name(s->equivs[i].run), (long long)s->equivs[i].round_index,
		    s->equivs[i].hash);
	}
}

/* Log (and record) each alert once when raised and once when cleared. */
static void diff_alerts(vd_store *s, vd_map *now)
{
	const char *k;
	void *v;
	size_t it = 0;

	while (vd_map_next(now, &it, &k, &v)) {
		vd_alert *a = v;
		if (vd_map_get(&s->alerts, k) != NULL)
			continue;
		log_warn("alert raised: %s: %s", vd_alert_name((vd_alert_kind)a->kind), a->detail);
		if (s->state)
			vd_state_alert(s->state, vd_alert_name((vd_alert_kind)a->kind), a->subject, a->detail, 1);
	}
	it = 0;
	while (vd_map_next(&s->alerts, &it, &k, &v)) {
		vd_alert *a = v;
		if (vd_map_get(now, k) == NULL) {
			log_info("alert cleared: %s: %s", vd_alert_name((vd_alert_kind)a->kind), a->subject);
			if (s->state)
				vd_state_alert(s->state, vd_alert_name((vd_alert_kind)a->kind), a->subject, a->detail, 0);
		}
		alert_free(a);
	}
	vd_map_free(&s->alerts);
	s->alerts = *now;
	memset(s->alert_counts, 0, sizeof(s->alert_counts));
	it = 0;
	while (vd_map_next(&s->alerts, &it, &k, &v))
		s->alert_counts[((vd_alert *)v)->kind]++;
}

void vd_store_refresh(vd_store *s)
{
	vd_map now;

	build_commits(s);
	compute_chains(s);
	compute_head(s);
	vd_map_init(&now);
	copy_alerts(s, &now);
	group_alerts(s, &now);
	commitment_alerts(s, &now);
	diff_alerts(s, &now);
}

void vd_lineage_free(vd_store *s)
{
	const char *k;
	void *v;
	size_t it = 0;

	clear_commits(s);
	vd_map_free(&s->commits);
	while (vd_map_next(&s->alerts, &it, &k, &v))
		alert_free(v);
	vd_map_free(&s->alerts);
}

/*
 * Lineage replayed without a daemon: a model of copies, ledgers and
 * commitments built in memory, one refresh, and its chains, commitment
 * slots, head and alerts checked. Last, a property: after every change of
 * a random sequence, a lineage refreshed again agrees with one computed
 * from scratch on the same inputs.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "vd_config.h"
#include "vd_keys.h"
#include "vd_lineage.h"
#include "vd_log.h"
#include "vd_model.h"
#include "vd_state.h"

#define MAX_HASHES 2048
#define MAX_POSTS 32               /* posted and refused commitments, each */
#define MAX_STMTS 16
#define MAX_SCAN_LEDGERS 4
#define N_KEYS 2
#define PATH_MAX_LEN 256
#define ALERT_KEY_MAX 512

#define H(n) hx(n)                 /* a chain's hashes */
#define X(n) hx(100 + (n))         /* hashes no artifact claims */
#define RECORD_HASH_BASE 1000      /* record hashes of ledger records */

enum { V_NONE, V_OK, V_FAIL, V_STALE, V_BUSY, V_COUNT };

static vd_key *keys[N_KEYS];
static vd_job busy_job;            /* what a copy being verified points at */

/* A distinct, stable hex64 for n. */
static const char *hx(unsigned n)
{
	static char tab[MAX_HASHES][VD_HASH_HEX_LEN + 1];

	assert_true(n < MAX_HASHES);
	if (tab[n][0] == '\0')
		snprintf(tab[n], sizeof(tab[n]), "%08x%056x", n * 2654435761u, n);
	return tab[n];
}

/* Checks of known defects in lineage run only when asked for, with
 * VD_TEST_KNOWN_DEFECTS=1: each is described where it is skipped. */
static int known_defects(void)
{
	return getenv("VD_TEST_KNOWN_DEFECTS") != NULL;
}

/* ---- the inputs ------------------------------------------------------- */

typedef struct fx {
	vd_model model;
	vd_config cfg;
	vd_map mems;                   /* relpath -> vd_ledger_mem */
	vd_map retained;               /* hash -> vd_retained */
	vd_map retained_children;      /* parent hash -> first vd_retained naming it */
	vd_scan_ledger ledgers[MAX_SCAN_LEDGERS];
	size_t n_ledgers;
	vd_commitment posted[MAX_POSTS];
	size_t n_posted;
	vd_commitment equivs[MAX_POSTS];
	size_t n_equivs;
	vd_signed_stmt stmts[MAX_STMTS];
	size_t n_stmts;
	vd_keyring ring;
	vd_map withdrawn;              /* vd_withdrawal_key -> f */
	unsigned records;              /* record hashes handed out */
	int whole;                     /* the configuration changed, or the memory
	                                * of an artifact whose directory is gone */
	vd_lineage l;
} fx;

static fx *fx_new(void)
{
	fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	vd_model_init(&f->model);
	vd_config_defaults(&f->cfg);
	vd_map_init(&f->mems);
	vd_map_init(&f->retained);
	vd_map_init(&f->retained_children);
	vd_map_init(&f->withdrawn);
	f->ring.keys = keys;
	f->ring.n = 1;                 /* the second key is not trusted */
	f->ring.refs = 1;
	vd_lineage_init(&f->l);
	return f;
}

static void mem_free(vd_ledger_mem *m)
{
	free(m->relpath);
	free(m->run);
	free(m->recs);
	free(m->diverged);
	free(m);
}

static void retained_free(vd_retained *r)
{
	free(r->run);
	free(r);
}

static void fx_free(fx *f)
{
	const char *k;
	void *v;
	size_t it = 0;

	vd_lineage_free(&f->l);
	vd_model_free(&f->model);
	while (vd_map_next(&f->mems, &it, &k, &v))
		mem_free(v);
	vd_map_free(&f->mems);
	it = 0;
	while (vd_map_next(&f->retained, &it, &k, &v))
		retained_free(v);
	vd_map_free(&f->retained);
	vd_map_free(&f->retained_children);
	vd_map_free(&f->withdrawn);
	free(f);
}

static void cfg_set(fx *f, const char *key, const char *value)
{
	char err[256];

	if (vd_config_set(&f->cfg, key, value, err, sizeof(err)) != 0)
		fail_msg("%s = %s: %s", key, value, err);
	f->whole = 1;
}

/* "RUN:HEX" or "RUN:ROUND:HEX" for a pin. */
static void pin(fx *f, const char *key, const char *run, int64_t round, const char *hash)
{
	char v[PATH_MAX_LEN];

	if (round < 0)
		snprintf(v, sizeof(v), "%s%s%s", run, run[0] ? ":" : "", hash);
	else
		snprintf(v, sizeof(v), "%s:%lld:%s", run, (long long)round, hash);
	cfg_set(f, key, v);
}

static void input_for(fx *f, const vd_model *m, vd_lineage_input *in)
{
	memset(in, 0, sizeof(*in));
	in->model = m;
	in->cfg = &f->cfg;
	in->keys = &f->ring;
	in->ledgers = f->ledgers;
	in->n_ledgers = f->n_ledgers;
	in->mems = &f->mems;
	in->posted = f->posted;
	in->n_posted = f->n_posted;
	in->equivs = f->equivs;
	in->n_equivs = f->n_equivs;
	in->stmts = f->stmts;
	in->n_stmts = f->n_stmts;
	in->retained = &f->retained;
	in->retained_children = &f->retained_children;
	in->withdrawn = &f->withdrawn;
}

/* As the store does: commits set when anything but the model changed.
 * Commitment sources, ledgers as read and keys are a VD_REFRESH_COMMITS;
 * the configuration or the memory of an artifact whose directory is gone
 * since the last such refresh, a VD_REFRESH_WHOLE. Then what the model
 * marked is forgotten. */
static void refresh(fx *f, int commits)
{
	vd_lineage_input in;
	vd_refresh what = !commits ? VD_REFRESH_MODEL : f->whole ? VD_REFRESH_WHOLE :
	    VD_REFRESH_COMMITS;

	if (commits)
		f->whole = 0;
	input_for(f, &f->model, &in);
	vd_lineage_refresh(&f->l, &in, what);
	vd_model_clear_dirty(&f->model);
}

/* ---- copies ----------------------------------------------------------- */

/* The verdict fields of a copy not yet indexed, or through verdict(). */
static void set_verdict(vd_copy *c, int v)
{
	c->has_verdict = v != V_NONE;
	c->code = v == V_FAIL ? VD_CHECKPOINT_INTEGRITY : VD_OK;
	vd_copy_text(&c->detail, v == V_FAIL ? "weights.safetensors differs" : NULL);
	memset(&c->fp, 0, sizeof(c->fp));
	memset(&c->verdict_fp, 0, sizeof(c->verdict_fp));
	c->fp.ok = c->verdict_fp.ok = 1;
	c->fp.digest[0] = v == V_STALE;          /* the directory changed since */
	c->inflight = v == V_BUSY ? &busy_job : NULL;
	c->inflight_kind = VD_JOB_BACKGROUND;
}

static void set_header(vd_copy *c, const char *hash, int64_t round, const char *parent)
{
	c->hdr.code = VD_OK;
	snprintf(c->hdr.content_hash, sizeof(c->hdr.content_hash), "%s", hash);
	c->hdr.round_index = round;
	c->hdr.has_parent = parent != NULL;
	snprintf(c->hdr.parent_hash, sizeof(c->hdr.parent_hash), "%s", parent ? parent : "");
}

/* A verdict changed (or a verification started) on an indexed copy: the
 * store tells the model, as lineage may look only at what changed. */
static void verdict(vd_model *m, vd_copy *c, int v)
{
	set_verdict(c, v);
	vd_model_touch(m, c);
}

static vd_copy *model_copy(vd_model *m, const char *run, const char *name, const char *hash,
    int64_t round, const char *parent, int v)
{
	char rel[PATH_MAX_LEN];
	vd_copy *c;

	snprintf(rel, sizeof(rel), "%s%s%s", run, run[0] ? "/" : "", name);
	assert_non_null(c = vd_model_add_copy(m, rel, run));
	set_header(c, hash, round, parent);
	set_verdict(c, v);
	vd_model_index(m, c);
	return c;
}

static vd_copy *copy(fx *f, const char *run, const char *name, const char *hash,
    int64_t round, const char *parent, int v)
{
	return model_copy(&f->model, run, name, hash, round, parent, v);
}

/* Rounds from..to of one run, hx(base + i) the hash of round i. */
static void chain_at(fx *f, const char *run, unsigned base, int from, int to, int v)
{
	char name[32];
	int i;

	for (i = from; i <= to; i++) {
		snprintf(name, sizeof(name), "round-%05d", i);
		copy(f, run, name, hx(base + (unsigned)i), i, i > 0 ? hx(base + (unsigned)i - 1) : NULL, v);
	}
}

/* H(i) the hash of round i. */
static void chain(fx *f, const char *run, int from, int to, int v)
{
	chain_at(f, run, 0, from, to, v);
}

static void reverdict(fx *f, const char *relpath, int v)
{
	vd_copy *c = vd_model_copy(&f->model, relpath);

	assert_non_null(c);
	verdict(&f->model, c, v);
}

static void drop(fx *f, const char *relpath)
{
	vd_copy *c = vd_model_copy(&f->model, relpath);

	assert_non_null(c);
	vd_model_remove_copy(&f->model, c);
}

/* ---- commitments ------------------------------------------------------ */

static void ledger_path(const char *run, char *out, size_t n)
{
	snprintf(out, n, "%s%sledger.jsonl", run, run[0] ? "/" : "");
}

static vd_ledger_mem *mem_of(fx *f, const char *run)
{
	char rel[PATH_MAX_LEN];
	vd_ledger_mem *m;

	ledger_path(run, rel, sizeof(rel));
	if ((m = vd_map_get(&f->mems, rel)) != NULL)
		return m;
	assert_non_null(m = calloc(1, sizeof(*m)));
	assert_non_null(m->relpath = strdup(rel));
	assert_non_null(m->run = strdup(run));
	assert_int_equal(vd_map_put(&f->mems, rel, m), 0);
	return m;
}

static void push_rec(vd_ledger_rec **arr, size_t *n, size_t *cap, int64_t round,
    const char *hash, const char *record_hash, size_t line)
{
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 8;
		assert_non_null(*arr = realloc(*arr, *cap * sizeof(**arr)));
	}
	memset(&(*arr)[*n], 0, sizeof(**arr));
	(*arr)[*n].round_index = round;
	snprintf((*arr)[*n].hash, sizeof((*arr)[*n].hash), "%s", hash);
	snprintf((*arr)[*n].record_hash, sizeof((*arr)[*n].record_hash), "%s", record_hash);
	(*arr)[*n].line = line;
	(*n)++;
}

/* A record remembered of run's ledger; returns its record hash. */
static const char *ledger(fx *f, const char *run, int64_t round, const char *hash)
{
	vd_ledger_mem *m = mem_of(f, run);

	push_rec(&m->recs, &m->n, &m->cap, round, hash, hx(RECORD_HASH_BASE + f->records++),
	    m->n + 1);
	return m->recs[m->n - 1].record_hash;
}

/* The file no longer extends the memory; it says hash for round now. */
static void rewritten(fx *f, const char *run, int64_t round, const char *hash)
{
	vd_ledger_mem *m = mem_of(f, run);
	size_t cap = m->n_diverged;

	m->rewritten = 1;
	snprintf(m->detail, sizeof(m->detail), "line 1 differs");
	push_rec(&m->diverged, &m->n_diverged, &cap, round, hash,
	    hx(RECORD_HASH_BASE + f->records++), m->n_diverged + 1);
}

static void fill_commitment(vd_commitment *c, const char *run, int64_t round,
    const char *hash, const char *key_id)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->run, sizeof(c->run), "%s", run);
	c->round_index = round;
	snprintf(c->hash, sizeof(c->hash), "%s", hash);
	c->schema_version = 2;
	snprintf(c->key_id, sizeof(c->key_id), "%s", key_id ? key_id : "");
}

/* A RoundClose posted with the token (key_id NULL) or signed. */
static void post(fx *f, const char *run, int64_t round, const char *hash, const char *key_id)
{
	assert_true(f->n_posted < MAX_POSTS);
	fill_commitment(&f->posted[f->n_posted++], run, round, hash, key_id);
}

/* A RoundClose refused: it named another hash than one already posted. */
static void refused(fx *f, const char *run, int64_t round, const char *hash)
{
	assert_true(f->n_equivs < MAX_POSTS);
	fill_commitment(&f->equivs[f->n_equivs++], run, round, hash, NULL);
}

static vd_signed_stmt *stmt(fx *f, vd_stmt_kind kind, const char *run, const char *key_id)
{
	vd_signed_stmt *s;

	assert_true(f->n_stmts < MAX_STMTS);
	s = &f->stmts[f->n_stmts++];
	memset(s, 0, sizeof(*s));
	s->st.kind = kind;
	snprintf(s->st.run, sizeof(s->st.run), "%s", run[0] ? run : ".");
	snprintf(s->run, sizeof(s->run), "%s", run);
	snprintf(s->key_id, sizeof(s->key_id), "%s", key_id);
	snprintf(s->where, sizeof(s->where), "%s%scommitments/s%zu.json", run, run[0] ? "/" : "",
	    f->n_stmts);
	return s;
}

static void signed_roundclose(fx *f, const char *run, int64_t round, const char *hash,
    const char *key_id)
{
	vd_signed_stmt *s = stmt(f, VD_STMT_ROUNDCLOSE, run, key_id);

	s->st.schema_version = 2;
	s->st.round_index = round;
	snprintf(s->st.hash, sizeof(s->st.hash), "%s", hash);
}

/* The operator withdraws (run, round) -> hash, or takes that back. */
static void withdraw(fx *f, const char *run, int64_t round, const char *hash, int on)
{
	char key[VD_WITHDRAWAL_KEY_MAX];

	vd_withdrawal_key(key, sizeof(key), run, round, hash);
	if (on)
		assert_int_equal(vd_map_put(&f->withdrawn, key, f), 0);
	else
		vd_map_del(&f->withdrawn, key);
}

static void checkpoint(fx *f, const char *run, uint64_t records, const char *head,
    const char *key_id)
{
	vd_signed_stmt *s = stmt(f, VD_STMT_CHECKPOINT, run, key_id);

	s->st.records = records;
	snprintf(s->st.head_record_hash, sizeof(s->st.head_record_hash), "%s", head);
}

static void retain(fx *f, const char *hash, const char *run, int64_t round, const char *parent)
{
	vd_retained *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	snprintf(r->hash, sizeof(r->hash), "%s", hash);
	assert_non_null(r->run = strdup(run));
	r->round_index = round;
	r->has_parent = parent != NULL;
	snprintf(r->parent, sizeof(r->parent), "%s", parent ? parent : "");
	assert_null(vd_map_get(&f->retained, r->hash));
	assert_int_equal(vd_map_put(&f->retained, r->hash, r), 0);
	if (vd_model_group(&f->model, hash) == NULL)
		f->whole = 1;
	if (r->has_parent) {
		r->next_child = vd_map_get(&f->retained_children, r->parent);
		assert_int_equal(vd_map_put(&f->retained_children, r->parent, r), 0);
	}
}

static void forget_retained(fx *f, const char *hash)
{
	vd_retained *r = vd_map_del(&f->retained, hash), **pp, *first;

	assert_non_null(r);
	if (vd_model_group(&f->model, hash) == NULL)
		f->whole = 1;
	if (r->has_parent) {
		first = vd_map_get(&f->retained_children, r->parent);
		for (pp = &first; *pp != r; pp = &(*pp)->next_child)
			assert_non_null(*pp);
		*pp = r->next_child;
		if (first == NULL)
			vd_map_del(&f->retained_children, r->parent);
		else
			assert_int_equal(vd_map_put(&f->retained_children, r->parent, first), 0);
	}
	retained_free(r);
}

/* ---- checks ----------------------------------------------------------- */

static vd_group *G(fx *f, const char *hash)
{
	vd_group *g = vd_model_group(&f->model, hash);

	if (g == NULL)
		fail_msg("no group for %s", hash);
	return g;
}

static void assert_chain(const vd_group *g, vd_chain_status st, size_t len, const char *root)
{
	if (g->chain != st)
		fail_msg("%s: chain %s, want %s", g->hash, vd_chain_status_name(g->chain),
		    vd_chain_status_name(st));
	assert_int_equal(g->chain_len, len);
	assert_string_equal(g->root, root ? root : "");
}

static void assert_break(const vd_group *g, size_t i, const char *hash, int64_t round,
    vd_break_reason why)
{
	assert_true(i < g->n_breaks);
	if (g->breaks[i].reason != why)
		fail_msg("%s: break %zu is %s, want %s", g->hash, i,
		    vd_break_name(g->breaks[i].reason), vd_break_name(why));
	assert_string_equal(g->breaks[i].hash, hash);
	assert_int_equal(g->breaks[i].round_index, round);
}

static void assert_intact(fx *f, const char *hash, size_t len, const char *root, int trusted)
{
	vd_group *g = G(f, hash);

	assert_chain(g, VD_CHAIN_INTACT, len, root);
	assert_int_equal(g->n_breaks, 0);
	assert_int_equal(g->breaks_total, 0);
	assert_int_equal(g->trusted, trusted);
}

static int has_alert(fx *f, vd_alert_kind kind, const char *subject)
{
	char key[ALERT_KEY_MAX];

	snprintf(key, sizeof(key), "%s\n%s", vd_alert_name(kind), subject);
	return vd_map_get(&f->l.alerts, key) != NULL;
}

static void assert_head(fx *f, int64_t round, const char *hash, const char *run)
{
	assert_int_equal(f->l.head_round, round);
	assert_string_equal(f->l.head_hash, hash ? hash : "");
	if (run == NULL)
		assert_null(f->l.head_run);
	else
		assert_string_equal(f->l.head_run, run);
}

/* Rounds 0..n of run r, hx(base + i) round i's hash: the genesis pinned,
 * the rest in r's ledger. */
static fx *committed_chain_at(unsigned base, int n)
{
	fx *f = fx_new();
	int i;

	pin(f, "genesis_hash", "r", -1, hx(base));
	chain_at(f, "r", base, 0, n, V_OK);
	for (i = 0; i < n; i++)
		ledger(f, "r", i, hx(base + (unsigned)i + 1));
	refresh(f, 1);
	return f;
}

/* Rounds 0..n of run r: the genesis pinned, the rest in r's ledger. */
static fx *committed_chain(int n)
{
	return committed_chain_at(0, n);
}

/* ---- chains ----------------------------------------------------------- */

static void test_clean_chain(void **state)
{
	fx *f = committed_chain(4);
	const vd_commit_slot *sl;
	int i;

	for (i = 0; i <= 4; i++) {
		vd_group *g = G(f, H(i));
		assert_intact(f, H(i), (size_t)i + 1, H(0), 1);
		assert_int_equal(g->committed, 1);
		assert_int_equal(g->pruned, 0);
		assert_int_equal(g->round_index, i);
		assert_int_equal(g->commit_source, i == 0 ? VD_SRC_PINNED : VD_SRC_LEDGER);
	}
	assert_head(f, 4, H(4), "r");
	sl = vd_lineage_slot(&f->l, "r", 1);
	assert_non_null(sl);
	assert_true(sl->src[VD_SRC_LEDGER].has);
	assert_string_equal(sl->src[VD_SRC_LEDGER].hash, H(2));
	assert_string_equal(sl->src[VD_SRC_LEDGER].where, "r/ledger.jsonl");
	assert_int_equal(sl->src[VD_SRC_LEDGER].line, 2);
	assert_false(sl->src[VD_SRC_LEDGER].is_signed);
	assert_string_equal(sl->other_hash, "");
	assert_ptr_equal(G(f, H(2))->commit, sl);
	assert_non_null(sl = vd_lineage_slot(&f->l, "r", -1));
	assert_string_equal(sl->src[VD_SRC_PINNED].where, "config");
	assert_null(vd_lineage_slot(&f->l, "r", 4));
	assert_int_equal(f->l.alerts.count, 0);
	assert_int_equal(f->l.series[VD_CS_LEDGER_UNSIGNED], 4);
	assert_int_equal(f->l.series[VD_CS_PINNED], 1);
	fx_free(f);
}

/* Without the pin nothing commits round 0: its chain is intact, it is
 * not trusted, and its descendants are. */
static void test_unpinned_genesis(void **state)
{
	fx *f = fx_new();
	int i;

	chain(f, "r", 0, 2, V_OK);
	for (i = 0; i < 2; i++)
		ledger(f, "r", i, H(i + 1));
	refresh(f, 1);
	assert_intact(f, H(0), 1, H(0), 0);
	assert_int_equal(G(f, H(0))->committed, 0);
	assert_null(G(f, H(0))->commit);
	assert_intact(f, H(2), 3, H(0), 1);
	assert_head(f, 2, H(2), "r");
	fx_free(f);
}

/* An ancestor not yet verified: pending, whatever is committed. */
static void test_pending_parent(void **state)
{
	fx *f = committed_chain(3);

	reverdict(f, "r/round-00001", V_NONE);
	refresh(f, 0);
	assert_chain(G(f, H(2)), VD_CHAIN_PENDING, 1, NULL);
	assert_chain(G(f, H(3)), VD_CHAIN_PENDING, 2, NULL);
	assert_int_equal(G(f, H(3))->trusted, 0);
	assert_int_equal(G(f, H(1))->trusted, 0);
	assert_head(f, 0, H(0), "r");
	assert_int_equal(f->l.alerts.count, 0);
	fx_free(f);
}

/* Round 2 removed before anything remembered it; then back. */
static void test_missing_parent(void **state)
{
	fx *f = committed_chain(4);
	vd_group *g;

	drop(f, "r/round-00002");
	refresh(f, 0);
	g = G(f, H(3));
	assert_chain(g, VD_CHAIN_BROKEN, 1, NULL);
	assert_int_equal(g->n_breaks, 1);
	assert_break(g, 0, H(3), 3, VD_BREAK_MISSING_PARENT);
	assert_int_equal(g->committed, 1);
	assert_int_equal(g->trusted, 0);
	g = G(f, H(4));
	assert_chain(g, VD_CHAIN_BROKEN, 2, NULL);
	assert_int_equal(g->breaks_total, 1);
	assert_break(g, 0, H(3), 3, VD_BREAK_MISSING_PARENT);
	assert_head(f, 1, H(1), "r");
	assert_true(has_alert(f, VD_ALERT_CHAIN_BROKEN, H(3)));
	assert_true(has_alert(f, VD_ALERT_CHAIN_BROKEN, H(4)));
	assert_int_equal(f->l.alert_counts[VD_ALERT_CHAIN_BROKEN], 2);

	copy(f, "r", "round-00002", H(2), 2, H(1), V_OK);
	refresh(f, 0);
	assert_intact(f, H(4), 5, H(0), 1);
	assert_head(f, 4, H(4), "r");
	assert_int_equal(f->l.alerts.count, 0);
	assert_int_equal(f->l.alert_counts[VD_ALERT_CHAIN_BROKEN], 0);
	fx_free(f);
}

/* A bad extra copy of round 2 raises its own alert; chains pass through
 * the good one. When every copy failed, they break. */
static void test_failed_parent_good_copy(void **state)
{
	fx *f = committed_chain(4);
	vd_group *g;

	copy(f, "r", "round-00002-again", H(2), 2, H(1), V_FAIL);
	refresh(f, 0);
	g = G(f, H(2));
	assert_int_equal(g->n, 2);
	assert_chain(g, VD_CHAIN_INTACT, 3, H(0));
	assert_int_equal(g->trusted, 0);
	assert_intact(f, H(3), 4, H(0), 1);
	assert_intact(f, H(4), 5, H(0), 1);
	assert_head(f, 4, H(4), "r");
	assert_true(has_alert(f, VD_ALERT_ARTIFACT_FAILED, "r/round-00002-again"));
	assert_int_equal(f->l.alerts.count, 1);

	reverdict(f, "r/round-00002", V_FAIL);
	refresh(f, 0);
	g = G(f, H(3));
	assert_chain(g, VD_CHAIN_BROKEN, 1, NULL);
	assert_break(g, 0, H(3), 3, VD_BREAK_PARENT_FAILED);
	assert_chain(G(f, H(4)), VD_CHAIN_BROKEN, 2, NULL);
	assert_break(G(f, H(4)), 0, H(3), 3, VD_BREAK_PARENT_FAILED);
	assert_head(f, 1, H(1), "r");
	assert_true(has_alert(f, VD_ALERT_ARTIFACT_FAILED, "r/round-00002"));
	assert_true(has_alert(f, VD_ALERT_CHAIN_BROKEN, H(3)));
	assert_true(has_alert(f, VD_ALERT_CHAIN_BROKEN, H(4)));
	fx_free(f);
}

/* Round 3 names round 1: a gap, and the walk goes on to the root. */
static void test_round_gap(void **state)
{
	fx *f = fx_new();
	vd_group *g;

	pin(f, "genesis_hash", "r", -1, H(0));
	chain(f, "r", 0, 1, V_OK);
	copy(f, "r", "round-00003", H(3), 3, H(1), V_OK);
	copy(f, "r", "round-00004", H(4), 4, H(3), V_OK);
	post(f, "r", 0, H(1), NULL);
	post(f, "r", 2, H(3), NULL);
	post(f, "r", 3, H(4), NULL);
	refresh(f, 1);
	g = G(f, H(3));
	assert_chain(g, VD_CHAIN_BROKEN, 3, H(0));
	assert_int_equal(g->n_breaks, 1);
	assert_break(g, 0, H(3), 3, VD_BREAK_ROUND_GAP);
	assert_int_equal(g->committed, 1);
	assert_int_equal(g->commit_source, VD_SRC_ROUNDCLOSE);
	assert_int_equal(g->trusted, 0);
	assert_chain(G(f, H(4)), VD_CHAIN_BROKEN, 4, H(0));
	assert_break(G(f, H(4)), 0, H(3), 3, VD_BREAK_ROUND_GAP);
	assert_head(f, 1, H(1), "r");
	assert_true(has_alert(f, VD_ALERT_CHAIN_BROKEN, H(3)));
	fx_free(f);
}

/* No parent at round 2: the walk stops there. */
static void test_detached_root(void **state)
{
	fx *f = committed_chain(1);
	vd_group *g;

	copy(f, "r", "round-00002", H(2), 2, NULL, V_OK);
	copy(f, "r", "round-00003", H(3), 3, H(2), V_OK);
	ledger(f, "r", 1, H(2));
	ledger(f, "r", 2, H(3));
	refresh(f, 1);
	g = G(f, H(2));
	assert_chain(g, VD_CHAIN_BROKEN, 1, NULL);
	assert_break(g, 0, H(2), 2, VD_BREAK_DETACHED_ROOT);
	g = G(f, H(3));
	assert_chain(g, VD_CHAIN_BROKEN, 2, NULL);
	assert_int_equal(g->n_breaks, 1);
	assert_break(g, 0, H(2), 2, VD_BREAK_DETACHED_ROOT);
	assert_int_equal(g->has_parent, 1);
	assert_string_equal(g->parent, H(2));
	assert_int_equal(G(f, H(2))->has_parent, 0);
	assert_head(f, 1, H(1), "r");
	fx_free(f);
}

/* The token's RoundClose names another hash for round 3's artifact. */
static void test_commitment_mismatch(void **state)
{
	fx *f = fx_new();
	vd_group *g;
	int i;

	pin(f, "genesis_hash", "r", -1, H(0));
	chain(f, "r", 0, 4, V_OK);
	for (i = 0; i < 4; i++)
		post(f, "r", i, i == 2 ? X(3) : H(i + 1), NULL);
	refresh(f, 1);
	g = G(f, H(3));
	assert_chain(g, VD_CHAIN_BROKEN, 4, H(0));
	assert_break(g, 0, H(3), 3, VD_BREAK_COMMITMENT_MISMATCH);
	assert_int_equal(g->committed, 0);
	assert_non_null(g->commit);
	assert_int_equal(g->commit->round_index, 2);
	assert_int_equal(g->commit_source, VD_SRC_ROUNDCLOSE);
	assert_int_equal(g->trusted, 0);
	g = G(f, H(4));
	assert_chain(g, VD_CHAIN_BROKEN, 5, H(0));
	assert_break(g, 0, H(3), 3, VD_BREAK_COMMITMENT_MISMATCH);
	assert_int_equal(g->committed, 1);
	assert_int_equal(g->trusted, 0);
	assert_head(f, 2, H(2), "r");
	assert_true(has_alert(f, VD_ALERT_COMMITMENT_MISMATCH, H(3)));
	assert_false(has_alert(f, VD_ALERT_COMMITMENT_MISMATCH, H(4)));
	assert_true(has_alert(f, VD_ALERT_CHAIN_BROKEN, H(3)));
	assert_true(has_alert(f, VD_ALERT_CHAIN_BROKEN, H(4)));
	fx_free(f);
}

/* Run b grafted onto run a's round 1; a copy of round 1 in b mends it. */
static void test_cross_run(void **state)
{
	fx *f = fx_new();
	vd_group *g;

	cfg_set(f, "genesis_hash", H(0));
	copy(f, "a", "round-00000", H(0), 0, NULL, V_OK);
	copy(f, "a", "round-00001", H(1), 1, H(0), V_OK);
	copy(f, "b", "round-00002", H(2), 2, H(1), V_OK);
	post(f, "a", 0, H(1), NULL);
	post(f, "b", 1, H(2), NULL);
	refresh(f, 1);
	g = G(f, H(2));
	assert_chain(g, VD_CHAIN_BROKEN, 1, NULL);
	assert_break(g, 0, H(2), 2, VD_BREAK_CROSS_RUN);
	assert_int_equal(g->committed, 1);
	assert_int_equal(g->trusted, 0);
	assert_head(f, 1, H(1), "a");
	assert_true(has_alert(f, VD_ALERT_CHAIN_BROKEN, H(2)));

	copy(f, "b", "round-00001", H(1), 1, H(0), V_OK);
	refresh(f, 0);
	assert_intact(f, H(2), 3, H(0), 1);
	assert_head(f, 2, H(2), "b");
	assert_false(has_alert(f, VD_ALERT_CHAIN_BROKEN, H(2)));
	fx_free(f);
}

/* A header of an older schema_version, as its copy was last scanned:
 * re-indexed, as the store does when a header changes. */
static void set_schema(fx *f, const char *relpath, int64_t version)
{
	vd_copy *c = vd_model_copy(&f->model, relpath);

	assert_non_null(c);
	vd_model_unindex(&f->model, c);
	c->hdr.schema_version = version;
	vd_model_index(&f->model, c);
}

/* legacy_policy = untrusted: a legacy artifact is never trusted, nor the
 * head, while its descendants' chains pass through it. */
static void test_legacy_policy(void **state)
{
	fx *f = committed_chain(2);
	vd_group *g;

	set_schema(f, "r/round-00001", 1);
	set_schema(f, "r/round-00002", 2);
	refresh(f, 0);
	g = G(f, H(1));
	assert_int_equal(vd_group_migrated_from(g), 1);
	assert_int_equal(vd_group_migrated_from(G(f, H(2))), 0);
	assert_int_equal(g->trusted, 1);
	assert_int_equal(g->legacy_untrusted, 0);

	cfg_set(f, "legacy_policy", "untrusted");
	refresh(f, 1);
	assert_int_equal(g->trusted, 0);
	assert_int_equal(g->legacy_untrusted, 1);
	assert_int_equal(g->committed, 1);
	assert_intact(f, H(2), 3, H(0), 1);
	assert_head(f, 2, H(2), "r");

	/* The head itself legacy: the head falls back past it. */
	set_schema(f, "r/round-00002", 1);
	refresh(f, 0);
	assert_int_equal(G(f, H(2))->trusted, 0);
	assert_head(f, 0, H(0), "r");

	/* Written again at the current version: trusted again. */
	set_schema(f, "r/round-00001", 2);
	set_schema(f, "r/round-00002", 2);
	refresh(f, 0);
	g = G(f, H(1));              /* re-indexed: a new group */
	assert_int_equal(g->trusted, 1);
	assert_int_equal(g->legacy_untrusted, 0);
	assert_head(f, 2, H(2), "r");
	fx_free(f);
}

/* Round 1, verified and committed, then removed: a pruned link. */
static void test_pruned_link(void **state)
{
	fx *f = committed_chain(3);
	vd_group *g;

	retain(f, H(1), "r", 1, H(0));
	drop(f, "r/round-00001");
	refresh(f, 0);
	g = G(f, H(2));
	assert_intact(f, H(2), 3, H(0), 1);
	assert_int_equal(g->pruned, 1);
	assert_int_equal(G(f, H(3))->chain_len, 4);
	assert_int_equal(G(f, H(3))->pruned, 1);
	assert_head(f, 3, H(3), "r");
	assert_int_equal(f->l.alerts.count, 0);

	/* The root pruned as well. */
	retain(f, H(0), "r", 0, NULL);
	drop(f, "r/round-00000");
	refresh(f, 0);
	assert_intact(f, H(2), 3, H(0), 1);
	assert_int_equal(G(f, H(2))->pruned, 2);

	/* Remembered in another run: a graft, not a link. */
	forget_retained(f, H(1));
	retain(f, H(1), "elsewhere", 1, H(0));
	refresh(f, 1);
	g = G(f, H(2));
	assert_chain(g, VD_CHAIN_BROKEN, 1, NULL);
	assert_break(g, 0, H(2), 2, VD_BREAK_CROSS_RUN);
	assert_int_equal(g->pruned, 0);
	fx_free(f);
}

/* Round 1 removed without ever being remembered: a missing parent. */
static void test_removed_unverified(void **state)
{
	fx *f = committed_chain(3);
	vd_group *g;

	reverdict(f, "r/round-00001", V_NONE);
	refresh(f, 0);
	drop(f, "r/round-00001");
	refresh(f, 0);
	g = G(f, H(2));
	assert_chain(g, VD_CHAIN_BROKEN, 1, NULL);
	assert_break(g, 0, H(2), 2, VD_BREAK_MISSING_PARENT);
	assert_int_equal(g->pruned, 0);
	fx_free(f);
}

/* A pruned link whose own parent is gone and not remembered. */
static void test_pruned_then_missing(void **state)
{
	fx *f = committed_chain(3);
	vd_group *g;

	retain(f, H(1), "r", 1, H(0));
	drop(f, "r/round-00001");
	drop(f, "r/round-00000");
	refresh(f, 0);
	g = G(f, H(2));
	assert_chain(g, VD_CHAIN_BROKEN, 2, NULL);
	assert_int_equal(g->pruned, 1);
	assert_break(g, 0, H(2), 2, VD_BREAK_MISSING_PARENT);
	fx_free(f);
}

/* A key signs another hash for round 1 after round 1 was pruned: the
 * chains through it break there, as they would at the artifact itself,
 * and the head falls back below it. */
static void test_pruned_link_contradicted(void **state)
{
	fx *f = committed_chain(3);
	vd_group *g;

	retain(f, H(1), "r", 1, H(0));
	drop(f, "r/round-00001");
	refresh(f, 0);
	assert_intact(f, H(3), 4, H(0), 1);
	assert_head(f, 3, H(3), "r");

	signed_roundclose(f, "r", 0, X(1), vd_key_id(keys[0]));
	refresh(f, 1);
	g = G(f, H(2));
	assert_chain(g, VD_CHAIN_BROKEN, 3, H(0));
	assert_int_equal(g->pruned, 1);
	assert_break(g, 0, H(1), 1, VD_BREAK_COMMITMENT_MISMATCH);
	assert_int_equal(g->trusted, 0);
	g = G(f, H(3));
	assert_chain(g, VD_CHAIN_BROKEN, 4, H(0));
	assert_break(g, 0, H(1), 1, VD_BREAK_COMMITMENT_MISMATCH);
	assert_int_equal(g->trusted, 0);
	assert_head(f, 0, H(0), "r");
	assert_true(has_alert(f, VD_ALERT_EQUIVOCATION, "r round 0"));

	/* The statement withdrawn: the chains mend. */
	f->n_stmts = 0;
	refresh(f, 1);
	assert_intact(f, H(3), 4, H(0), 1);
	assert_head(f, 3, H(3), "r");
	fx_free(f);
}

/* The anchored round pruned: still the run's root. */
static void test_pruned_anchor(void **state)
{
	fx *f = fx_new();
	vd_group *g;

	pin(f, "anchor", "r", 3, H(3));
	copy(f, "r", "round-00003", H(3), 3, H(2), V_OK);
	copy(f, "r", "round-00004", H(4), 4, H(3), V_OK);
	copy(f, "r", "round-00005", H(5), 5, H(4), V_OK);
	post(f, "r", 3, H(4), NULL);
	post(f, "r", 4, H(5), NULL);
	refresh(f, 1);
	assert_intact(f, H(5), 3, H(3), 1);

	retain(f, H(3), "r", 3, H(2));
	drop(f, "r/round-00003");
	refresh(f, 0);
	g = G(f, H(4));
	assert_intact(f, H(4), 2, H(3), 1);
	assert_int_equal(g->pruned, 1);
	assert_intact(f, H(5), 3, H(3), 1);
	assert_head(f, 5, H(5), "r");

	/* Another hash for the anchor's round: no root any more. */
	refused(f, "r", 2, X(3));
	refresh(f, 1);
	g = G(f, H(4));
	assert_chain(g, VD_CHAIN_BROKEN, 2, NULL);
	assert_break(g, 0, H(4), 4, VD_BREAK_MISSING_PARENT);
	assert_head(f, -1, NULL, NULL);
	fx_free(f);
}

#define ORDER_VARIANTS 16          /* hash sets: the marked hashes come in many orders */
#define ORDER_BASE 700             /* hx() offset of their hashes */
#define ORDER_ROUNDS 4

/*
 * A pruned link is looked through again each time something above it
 * changes: round 3 is a pruned link between rounds 2 and 4. In one
 * refresh a verdict of round 4 is marked (so is its parent hash, round
 * 3's) and round 0 fails. Round 4 may be recomputed, and round 3 looked
 * through, before round 0's change reaches round 2; when it does, round
 * 3's hash is queued again and must be looked through again, or round 4
 * keeps an intact, trusted chain through a failed ancestor. Whether the
 * first look comes first depends on the order of the marked hashes, so
 * several hash sets are tried.
 */
static void test_pruned_link_sees_ancestor_change(void **state)
{
	unsigned v, b;
	vd_group *g;
	fx *f;
	for (v = 0; v < ORDER_VARIANTS; v++) {
		b = ORDER_BASE + v * (ORDER_ROUNDS + 1);
		f = committed_chain_at(b, ORDER_ROUNDS);
		retain(f, hx(b + 3), "r", 3, hx(b + 2));
		drop(f, "r/round-00003");
		refresh(f, 0);
		assert_intact(f, hx(b + 4), 5, hx(b), 1);

		reverdict(f, "r/round-00004", V_OK);      /* a scrub found it unchanged */
		reverdict(f, "r/round-00000", V_FAIL);
		refresh(f, 0);
		g = G(f, hx(b + 2));
		assert_chain(g, VD_CHAIN_BROKEN, 2, NULL);
		assert_break(g, 0, hx(b + 1), 1, VD_BREAK_PARENT_FAILED);
		g = G(f, hx(b + 4));
		if (g->chain != VD_CHAIN_BROKEN)
			fail_msg("hash set %u: round 4 is still %s (trusted %d) through a failed round 0",
			    v, vd_chain_status_name(g->chain), g->trusted);
		assert_chain(g, VD_CHAIN_BROKEN, 4, NULL);
		assert_int_equal(g->pruned, 1);
		assert_break(g, 0, hx(b + 1), 1, VD_BREAK_PARENT_FAILED);
		assert_int_equal(g->trusted, 0);
		fx_free(f);
	}
}

/* ---- commitments ------------------------------------------------------ */

/* Each run its own genesis; a bare pin for the others. */
static void test_genesis_per_run(void **state)
{
	fx *f = fx_new();
	const vd_commit_slot *sl;
	vd_group *g;
	char v[4 * VD_HASH_HEX_LEN];

	snprintf(v, sizeof(v), "a:%s, b:%s, %s", X(1), X(2), X(3));
	cfg_set(f, "genesis_hash", v);
	copy(f, "a", "round-00000", X(1), 0, NULL, V_OK);
	copy(f, "b", "round-00000", X(4), 0, NULL, V_OK);
	copy(f, "c", "round-00000", X(3), 0, NULL, V_OK);
	refresh(f, 1);
	g = G(f, X(1));
	assert_intact(f, X(1), 1, X(1), 1);
	assert_int_equal(g->commit_source, VD_SRC_PINNED);
	assert_string_equal(g->commit->run, "a");
	g = G(f, X(4));
	assert_int_equal(g->committed, 0);
	assert_chain(g, VD_CHAIN_BROKEN, 1, X(4));
	assert_break(g, 0, X(4), 0, VD_BREAK_COMMITMENT_MISMATCH);
	assert_true(has_alert(f, VD_ALERT_COMMITMENT_MISMATCH, X(4)));
	g = G(f, X(3));
	assert_intact(f, X(3), 1, X(3), 1);
	assert_string_equal(g->commit->run, "*");
	assert_non_null(sl = vd_lineage_slot(&f->l, "*", -1));
	assert_string_equal(sl->src[VD_SRC_PINNED].hash, X(3));
	assert_null(vd_lineage_slot(&f->l, "c", -1));
	/* Two heads at round 0: the smaller hash. */
	if (strcmp(X(3), X(1)) < 0)
		assert_head(f, 0, X(3), "c");
	else
		assert_head(f, 0, X(1), "a");

	/* Run a's warm start again in a run without a pin of its own: the bare
	 * pin contradicts it. */
	copy(f, "d", "round-00000", X(1), 0, NULL, V_OK);
	refresh(f, 0);
	g = G(f, X(1));
	assert_int_equal(g->committed, 1);
	assert_break(g, 0, X(1), 0, VD_BREAK_COMMITMENT_MISMATCH);
	assert_int_equal(g->trusted, 0);
	fx_free(f);
}

/* An anchor: a later round pinned, a root whatever precedes it. */
static void test_anchor(void **state)
{
	fx *f = fx_new();
	const vd_commit_slot *sl;
	vd_group *g;

	pin(f, "anchor", "r", 3, H(3));
	copy(f, "r", "round-00003", H(3), 3, H(2), V_OK);
	copy(f, "r", "round-00004", H(4), 4, H(3), V_OK);
	post(f, "r", 3, H(4), NULL);
	refresh(f, 1);
	g = G(f, H(3));
	assert_intact(f, H(3), 1, H(3), 1);
	assert_int_equal(g->commit_source, VD_SRC_PINNED);
	assert_intact(f, H(4), 2, H(3), 1);
	assert_head(f, 4, H(4), "r");
	assert_non_null(sl = vd_lineage_slot(&f->l, "r", 2));
	assert_int_equal(sl->anchor, 1);
	assert_string_equal(sl->src[VD_SRC_PINNED].hash, H(3));
	assert_string_equal(sl->src[VD_SRC_PINNED].where, "config");

	/* Another hash for that round: no root, and round 2 is not there. */
	refused(f, "r", 2, X(3));
	refresh(f, 1);
	g = G(f, H(3));
	assert_int_equal(g->committed, 0);
	assert_chain(g, VD_CHAIN_BROKEN, 1, NULL);
	assert_break(g, 0, H(3), 3, VD_BREAK_MISSING_PARENT);
	assert_true(has_alert(f, VD_ALERT_EQUIVOCATION, "r round 2"));
	assert_head(f, -1, NULL, NULL);
	fx_free(f);
}

/* An anchor pins its own run only. */
static void test_anchor_other_run(void **state)
{
	fx *f = fx_new();
	vd_group *g;

	pin(f, "anchor", "r", 3, H(3));
	copy(f, "s", "round-00003", H(3), 3, H(2), V_OK);
	refresh(f, 1);
	g = G(f, H(3));
	assert_int_equal(g->committed, 0);
	assert_chain(g, VD_CHAIN_BROKEN, 1, NULL);
	assert_break(g, 0, H(3), 3, VD_BREAK_MISSING_PARENT);
	fx_free(f);
}

/* Two sources name different hashes for round 3 of the store root's
 * run: round 4 is not trusted and the head falls back to round 3. */
static void test_equivocation(void **state)
{
	fx *f = fx_new();
	const vd_commit_slot *sl;
	vd_group *g;
	int i;

	cfg_set(f, "genesis_hash", H(0));
	chain(f, "", 0, 4, V_OK);
	for (i = 0; i < 4; i++)
		ledger(f, "", i, H(i + 1));
	refused(f, "", 3, X(4));
	refresh(f, 1);
	g = G(f, H(4));
	assert_int_equal(g->committed, 0);
	assert_int_equal(g->trusted, 0);
	assert_intact(f, H(4), 5, H(0), 0);       /* a refused post does not count */
	assert_non_null(sl = vd_lineage_slot(&f->l, "", 3));
	assert_string_equal(sl->first_hash, H(4));
	assert_string_equal(sl->other_hash, X(4));
	assert_string_equal(sl->other_where, "api");
	assert_true(has_alert(f, VD_ALERT_EQUIVOCATION, ". round 3"));
	assert_int_equal(f->l.alert_counts[VD_ALERT_EQUIVOCATION], 1);
	assert_head(f, 3, H(3), "");

	/* A counting source disagrees: a mismatch as well. */
	f->n_equivs = 0;
	post(f, "", 3, X(4), NULL);
	refresh(f, 1);
	g = G(f, H(4));
	assert_int_equal(g->committed, 0);
	assert_break(g, 0, H(4), 4, VD_BREAK_COMMITMENT_MISMATCH);
	assert_true(has_alert(f, VD_ALERT_EQUIVOCATION, ". round 3"));
	assert_true(has_alert(f, VD_ALERT_COMMITMENT_MISMATCH, H(4)));

	/* The cause gone, the alerts go. */
	f->n_posted = 0;
	refresh(f, 1);
	assert_intact(f, H(4), 5, H(0), 1);
	assert_head(f, 4, H(4), "");
	assert_int_equal(f->l.alerts.count, 0);
	fx_free(f);
}

/* A rewritten ledger: what the file says now is an equivocation. */
static void test_rewritten_ledger(void **state)
{
	fx *f = committed_chain(2);

	rewritten(f, "r", 1, X(2));
	refresh(f, 1);
	assert_true(has_alert(f, VD_ALERT_LEDGER_REWRITTEN, "r/ledger.jsonl"));
	assert_true(has_alert(f, VD_ALERT_EQUIVOCATION, "r round 1"));
	assert_int_equal(G(f, H(2))->committed, 0);
	assert_int_equal(G(f, H(1))->trusted, 1);     /* the memory stands */
	assert_head(f, 1, H(1), "r");
	fx_free(f);
}

/* Under "signed" an unsigned ledger record commits nothing; a checkpoint
 * by a trusted key makes the records it covers count. */
static void test_policy_signed(void **state)
{
	fx *f = fx_new();
	const char *rec[3];
	const vd_commit_slot *sl;
	int i;

	cfg_set(f, "commitment_policy", "signed");
	pin(f, "genesis_hash", "r", -1, H(0));
	chain(f, "r", 0, 3, V_OK);
	for (i = 0; i < 3; i++)
		rec[i] = ledger(f, "r", i, H(i + 1));
	refresh(f, 1);
	for (i = 1; i <= 3; i++) {
		assert_intact(f, H(i), (size_t)i + 1, H(0), 0);
		assert_int_equal(G(f, H(i))->committed, 0);
		assert_int_equal(G(f, H(i))->commit_source, VD_SRC_LEDGER);
	}
	assert_head(f, 0, H(0), "r");
	assert_false(vd_commit_counts(&vd_lineage_slot(&f->l, "r", 0)->src[VD_SRC_LEDGER],
	    VD_SRC_LEDGER, VD_POLICY_SIGNED));

	/* Untrusted key, wrong head, too many records: none counts. */
	checkpoint(f, "r", 3, rec[2], vd_key_id(keys[1]));
	checkpoint(f, "r", 2, rec[0], vd_key_id(keys[0]));
	checkpoint(f, "r", 4, rec[2], vd_key_id(keys[0]));
	refresh(f, 1);
	assert_head(f, 0, H(0), "r");

	checkpoint(f, "r", 2, rec[1], vd_key_id(keys[0]));
	refresh(f, 1);
	assert_intact(f, H(2), 3, H(0), 1);
	assert_int_equal(G(f, H(3))->trusted, 0);
	sl = vd_lineage_slot(&f->l, "r", 1);
	assert_true(sl->src[VD_SRC_LEDGER].is_signed);
	assert_string_equal(sl->src[VD_SRC_LEDGER].key_id, vd_key_id(keys[0]));
	assert_false(vd_lineage_slot(&f->l, "r", 2)->src[VD_SRC_LEDGER].is_signed);
	assert_int_equal(f->l.series[VD_CS_LEDGER_SIGNED], 2);
	assert_int_equal(f->l.series[VD_CS_LEDGER_UNSIGNED], 1);
	assert_head(f, 2, H(2), "r");

	/* A signed RoundClose commits round 3; one by an untrusted key not. */
	post(f, "r", 2, X(3), vd_key_id(keys[1]));
	signed_roundclose(f, "r", 2, H(3), vd_key_id(keys[0]));
	refresh(f, 1);
	assert_intact(f, H(3), 4, H(0), 1);
	assert_int_equal(G(f, H(3))->commit_source, VD_SRC_SIGNED);
	assert_string_equal(vd_lineage_slot(&f->l, "r", 2)->other_hash, "");
	assert_head(f, 3, H(3), "r");

	/* The key revoked: what it alone signed stops counting. */
	f->ring.n = 0;
	refresh(f, 1);
	assert_head(f, 0, H(0), "r");

	/* Under "ledger" unsigned records count. */
	f->ring.n = 1;
	f->n_stmts = 0;
	f->n_posted = 0;
	cfg_set(f, "commitment_policy", "ledger");
	refresh(f, 1);
	assert_intact(f, H(3), 4, H(0), 1);
	assert_head(f, 3, H(3), "r");
	fx_free(f);
}

/* An unsigned record naming another hash is no commitment under
 * "signed": it neither opposes the signed statement nor makes the round an
 * equivocation, so a writer of the ledger cannot untrust a signed round.
 * Under "ledger" it counts, and the round is an equivocation. */
static void test_policy_signed_unsigned_other(void **state)
{
	fx *f = fx_new();

	cfg_set(f, "commitment_policy", "signed");
	pin(f, "genesis_hash", "r", -1, H(0));
	chain(f, "r", 0, 1, V_OK);
	ledger(f, "r", 0, X(1));
	signed_roundclose(f, "r", 0, H(1), vd_key_id(keys[0]));
	refresh(f, 1);
	assert_int_equal(G(f, H(1))->n_breaks, 0);
	assert_int_equal(G(f, H(1))->committed, 1);
	assert_true(G(f, H(1))->trusted);
	assert_string_equal(vd_lineage_slot(&f->l, "r", 0)->other_hash, "");
	assert_false(has_alert(f, VD_ALERT_EQUIVOCATION, "r round 0"));

	cfg_set(f, "commitment_policy", "ledger");
	refresh(f, 1);
	assert_int_equal(G(f, H(1))->committed, 0);
	assert_true(has_alert(f, VD_ALERT_EQUIVOCATION, "r round 0"));
	fx_free(f);
}

/* Two signed statements for one round are an equivocation whichever the
 * order; withdrawing one side leaves the other, and only that ends it. */
static void test_equivocation_withdrawn(void **state)
{
	fx *f = fx_new();

	cfg_set(f, "commitment_policy", "signed");
	pin(f, "genesis_hash", "r", -1, H(0));
	chain(f, "r", 0, 1, V_OK);
	signed_roundclose(f, "r", 0, H(1), vd_key_id(keys[0]));
	signed_roundclose(f, "r", 0, X(1), vd_key_id(keys[0]));
	refresh(f, 1);
	assert_false(G(f, H(1))->trusted);
	assert_true(has_alert(f, VD_ALERT_EQUIVOCATION, "r round 0"));

	withdraw(f, "r", 0, X(1), 1);
	refresh(f, 1);
	assert_true(G(f, H(1))->trusted);
	assert_false(has_alert(f, VD_ALERT_EQUIVOCATION, "r round 0"));

	/* Withdrawing the right side too leaves nothing committing round 1. */
	withdraw(f, "r", 0, H(1), 1);
	refresh(f, 1);
	assert_false(G(f, H(1))->committed);
	assert_null(vd_lineage_slot(&f->l, "r", 0));

	/* A pin is the configuration's: a withdrawal does not touch it. */
	withdraw(f, "r", -1, H(0), 1);
	refresh(f, 1);
	assert_true(G(f, H(0))->trusted);
	fx_free(f);
}

/* A RoundClose for round t naming an artifact of its run whose header says
 * another round commits nothing: it cannot make the real round an
 * equivocation. Once that artifact is gone, it counts again. */
static void test_round_mismatch(void **state)
{
	fx *f = fx_new();

	cfg_set(f, "commitment_policy", "signed");
	pin(f, "genesis_hash", "r", -1, H(0));
	chain(f, "r", 0, 2, V_OK);
	signed_roundclose(f, "r", 0, H(1), vd_key_id(keys[0]));
	signed_roundclose(f, "r", 1, H(2), vd_key_id(keys[0]));
	signed_roundclose(f, "r", 1, H(1), vd_key_id(keys[0]));   /* off by one */
	refresh(f, 1);
	assert_true(G(f, H(2))->trusted);
	assert_false(has_alert(f, VD_ALERT_EQUIVOCATION, "r round 1"));
	assert_int_equal(vd_round_mismatch(&f->model, &f->retained, "r", 1, H(1), NULL), 1);
	assert_int_equal(vd_round_mismatch(&f->model, &f->retained, "r", 0, H(1), NULL), 0);
	assert_int_equal(vd_round_mismatch(&f->model, &f->retained, "other", 1, H(1), NULL), 0);
	/* A directory that only claims the hash, with another round, proves
	 * nothing: it cannot veto the real round's commitment. */
	copy(f, "r", "round-00005", H(2), 5, H(1), V_FAIL);
	copy(f, "r", "round-00006", H(2), 6, H(1), V_NONE);
	refresh(f, 0);
	assert_int_equal(vd_round_mismatch(&f->model, &f->retained, "r", 1, H(2), NULL), 0);
	assert_true(G(f, H(2))->committed);
	drop(f, "r/round-00005");
	drop(f, "r/round-00006");

	/* The round-1 artifact pruned (verified and committed, remembered): a
	 * store writer removing it does not make the off-by-one count. */
	retain(f, H(1), "r", 1, H(0));
	drop(f, "r/round-00001");
	refresh(f, 0);
	assert_false(has_alert(f, VD_ALERT_EQUIVOCATION, "r round 1"));
	assert_true(G(f, H(2))->trusted);

	/* Never verified here, and gone: nothing says the statement is off, so
	 * it counts (a model change alone rebuilds what it commits). */
	forget_retained(f, H(1));
	refresh(f, 1);
	assert_true(has_alert(f, VD_ALERT_EQUIVOCATION, "r round 1"));
	fx_free(f);
}

/* A slot that holds only a hash another source noted (a refused
 * conflicting post) has no entry to show. */
static void test_noted_only_slot(void **state)
{
	fx *f = fx_new();
	const vd_commit_slot *sl;

	cfg_set(f, "commitment_policy", "ledger");
	pin(f, "genesis_hash", "r", -1, H(0));
	chain(f, "r", 0, 1, V_OK);
	f->equivs[0] = (vd_commitment){ .round_index = 0 };
	snprintf(f->equivs[0].run, sizeof(f->equivs[0].run), "r");
	snprintf(f->equivs[0].hash, sizeof(f->equivs[0].hash), "%s", X(1));
	f->n_equivs = 1;
	refresh(f, 1);
	sl = vd_lineage_slot(&f->l, "r", 0);
	assert_non_null(sl);
	assert_ptr_equal(G(f, H(1))->commit, sl);
	assert_int_equal(G(f, H(1))->commit_source, -1);
	assert_null(vd_slot_entry(sl, G(f, H(1))->commit_source));
	assert_null(vd_slot_entry(sl, VD_SRC_COUNT));
	assert_false(G(f, H(1))->trusted);
	fx_free(f);
}

/* ---- alerts ----------------------------------------------------------- */

static void test_fork(void **state)
{
	fx *f = committed_chain(2);

	copy(f, "r", "round-00002-other", X(2), 2, H(1), V_OK);
	refresh(f, 0);
	assert_true(has_alert(f, VD_ALERT_FORK, H(1)));
	assert_int_equal(f->l.alert_counts[VD_ALERT_FORK], 1);
	/* The ledger names round 2 for that round: the fork's other side is
	 * contradicted. */
	assert_int_equal(G(f, X(2))->committed, 0);
	assert_chain(G(f, X(2)), VD_CHAIN_BROKEN, 3, H(0));
	assert_break(G(f, X(2)), 0, X(2), 2, VD_BREAK_COMMITMENT_MISMATCH);
	assert_intact(f, H(2), 3, H(0), 1);

	reverdict(f, "r/round-00002-other", V_FAIL);
	refresh(f, 0);
	assert_false(has_alert(f, VD_ALERT_FORK, H(1)));
	assert_true(has_alert(f, VD_ALERT_ARTIFACT_FAILED, "r/round-00002-other"));
	assert_int_equal(f->l.alert_counts[VD_ALERT_FORK], 0);
	fx_free(f);
}

/* Each alert goes on the refresh after its cause does. */
static void test_alerts_cleared(void **state)
{
	fx *f = committed_chain(2);
	vd_copy *c = vd_model_copy(&f->model, "r/round-00001");

	f->ledgers[0].relpath = (char *)"r/ledger.jsonl";
	f->ledgers[0].run = (char *)"r";
	f->ledgers[0].read_ok = 0;
	snprintf(f->ledgers[0].read_error, sizeof(f->ledgers[0].read_error), "permission denied");
	f->n_ledgers = 1;
	verdict(&f->model, c, V_FAIL);
	refresh(f, 1);
	assert_true(has_alert(f, VD_ALERT_LEDGER_BROKEN, "r/ledger.jsonl"));
	assert_true(has_alert(f, VD_ALERT_ARTIFACT_FAILED, "r/round-00001"));
	assert_true(has_alert(f, VD_ALERT_CHAIN_BROKEN, H(2)));
	assert_int_equal(f->l.alerts.count, 3);

	f->ledgers[0].read_ok = 1;
	f->ledgers[0].result.brk = VD_LEDGER_PREV_MISMATCH;
	snprintf(f->ledgers[0].result.break_detail, sizeof(f->ledgers[0].result.break_detail), "line 3");
	verdict(&f->model, c, V_OK);
	refresh(f, 1);
	assert_true(has_alert(f, VD_ALERT_LEDGER_BROKEN, "r/ledger.jsonl"));
	assert_int_equal(f->l.alerts.count, 1);

	f->ledgers[0].result.brk = VD_LEDGER_INTACT;
	refresh(f, 1);
	assert_int_equal(f->l.alerts.count, 0);
	assert_int_equal(f->l.alert_counts[VD_ALERT_LEDGER_BROKEN], 0);
	assert_head(f, 2, H(2), "r");
	fx_free(f);
}

/*
 * An alert that stays raised while its cause changes says the cause of
 * now: "parent_failed" of a chain first broken by a missing parent.
 */
static void test_alert_detail_follows_cause(void **state)
{
	char key[ALERT_KEY_MAX];
	const vd_alert *a;
	fx *f;

	f = committed_chain(3);
	drop(f, "r/round-00001");
	refresh(f, 0);
	snprintf(key, sizeof(key), "%s\n%s", vd_alert_name(VD_ALERT_CHAIN_BROKEN), H(2));
	assert_non_null(a = vd_map_get(&f->l.alerts, key));
	assert_non_null(strstr(a->detail, "missing_parent"));

	copy(f, "r", "round-00001", H(1), 1, H(0), V_FAIL);
	refresh(f, 0);
	assert_break(G(f, H(2)), 0, H(2), 2, VD_BREAK_PARENT_FAILED);
	assert_non_null(a = vd_map_get(&f->l.alerts, key));
	if (strstr(a->detail, "parent_failed") == NULL)
		fail_msg("the alert still says \"%s\"", a->detail);
	fx_free(f);
}

/* A re-verification under way changes no alert and no chain. */
static void test_busy_keeps_alerts(void **state)
{
	fx *f = committed_chain(2);
	vd_copy *c;

	reverdict(f, "r/round-00001", V_FAIL);
	refresh(f, 0);
	assert_int_equal(f->l.alerts.count, 2);
	c = vd_model_copy(&f->model, "r/round-00001");
	c->inflight = &busy_job;
	vd_model_touch(&f->model, c);
	refresh(f, 0);
	assert_int_equal(f->l.alerts.count, 2);
	assert_break(G(f, H(2)), 0, H(2), 2, VD_BREAK_PARENT_FAILED);
	fx_free(f);
}

/* ---- the property: refreshed again == computed from scratch ------------ */

#define P_IDS 12                   /* artifacts a copy can claim */
#define P_PHANTOMS 2               /* parents no copy ever claims */
#define P_SLOTS 16                 /* copy directories, alternating runs */
#define P_ROUNDS 5
#define P_MAX_RECORDS 6            /* per remembered ledger */
#define P_STEPS 250
#define P_SEEDS 12
#define P_SEEDS_DEEP 3000          /* with VD_TEST_DEEP=1: a quarter of a minute */
#define P_ID_HASH 200              /* hx() offset of the artifacts' hashes */
#define P_GROW_HASH 300            /* hx() offset of the hashes that grow tables */
#define P_SCRATCH_GROWTH 60        /* groups that grow a fresh model's tables */
#define P_GROW_EVERY 4             /* steps: one fresh model in so many is grown */

static const char *const p_runs[] = { "a", "b" };
#define P_RUNS 2

typedef struct p_id {
	int round, parent;          /* parent: an id below, a phantom, or -1 */
} p_id;

typedef struct p_slot {
	int present, id, verdict, forged, bad_header;
} p_slot;

typedef struct world {
	uint32_t rnd;
	unsigned seed;
	int step;
	p_id ids[P_IDS];
	p_slot slots[P_SLOTS];
	fx *f;
} world;

static uint32_t rnd(world *w, uint32_t n)
{
	w->rnd ^= w->rnd << 13;
	w->rnd ^= w->rnd >> 17;
	w->rnd ^= w->rnd << 5;
	return w->rnd % n;
}

static const char *id_hash(int id)
{
	return hx(P_ID_HASH + (unsigned)id);
}

/* Mostly the main chain, so that chains are trusted as often as not. */
static int pick_id(world *w)
{
	return (int)(rnd(w, 10) < 6 ? rnd(w, P_ROUNDS) : rnd(w, P_IDS));
}

static int pick_verdict(world *w)
{
	return (int)(rnd(w, 10) < 6 ? V_OK : rnd(w, V_COUNT));
}

/* What a commitment of round t names: mostly the main chain's round t+1. */
static const char *pick_commit(world *w, int64_t t)
{
	if (t + 1 < P_ROUNDS && rnd(w, 10) < 8)
		return id_hash((int)t + 1);
	return id_hash((int)rnd(w, P_IDS));
}

static const char *slot_run(int s)
{
	return p_runs[s % P_RUNS];
}

static void slot_relpath(int s, char *out, size_t n)
{
	snprintf(out, n, "%s/c%02d", slot_run(s), s);
}

/* Ids 0..P_ROUNDS-1 are one chain, what commitments mostly name; the
 * others are drawn: forks, gaps, detached roots, phantom parents. Parents
 * are below: no cycles. */
static void draw_ids(world *w)
{
	int i, j, k, cands[P_IDS], n;

	for (i = 0; i < P_ROUNDS; i++) {
		w->ids[i].round = i;
		w->ids[i].parent = i - 1;
	}
	for (; i < P_IDS; i++) {
		p_id *d = &w->ids[i];
		d->round = (int)rnd(w, P_ROUNDS);
		d->parent = -1;
		k = (int)rnd(w, 8);
		if (d->round == 0 && k != 0)
			continue;
		if (k == 1) {
			d->parent = P_IDS + (int)rnd(w, P_PHANTOMS);
			continue;
		}
		if (k == 2)
			continue;
		for (n = 0, j = 0; j < i; j++)
			if (w->ids[j].round == d->round - 1 || k == 3)
				cands[n++] = j;
		d->parent = n > 0 ? cands[rnd(w, (uint32_t)n)] : P_IDS;
	}
}

static void slot_header(const world *w, const p_slot *s, vd_copy *c)
{
	const p_id *d = &w->ids[s->id];

	if (s->bad_header) {
		vd_hdrinfo_free(&c->hdr);
		c->hdr.code = VD_ARTIFACT_INVALID;
		return;
	}
	set_header(c, id_hash(s->id), d->round + s->forged, d->parent >= 0 ? id_hash(d->parent) : NULL);
}

static void slot_add(const world *w, vd_model *m, int i)
{
	char rel[PATH_MAX_LEN];
	vd_copy *c;

	slot_relpath(i, rel, sizeof(rel));
	assert_non_null(c = vd_model_add_copy(m, rel, slot_run(i)));
	slot_header(w, &w->slots[i], c);
	set_verdict(c, w->slots[i].verdict);
	vd_model_index(m, c);
}

static vd_copy *slot_copy(world *w, int i)
{
	char rel[PATH_MAX_LEN];

	slot_relpath(i, rel, sizeof(rel));
	return vd_model_copy(&w->f->model, rel);
}

/* ---- changes: each returns whether the refresh is a whole pass -------- */

static int ch_presence(world *w)
{
	int i = (int)rnd(w, P_SLOTS);
	p_slot *s = &w->slots[i];

	if (s->present) {
		vd_model_remove_copy(&w->f->model, slot_copy(w, i));
		s->present = 0;
		return 0;
	}
	memset(s, 0, sizeof(*s));
	s->present = 1;
	s->id = pick_id(w);
	s->verdict = pick_verdict(w);
	s->forged = rnd(w, 10) == 0;
	slot_add(w, &w->f->model, i);
	return 0;
}

static int ch_verdict(world *w)
{
	int i = (int)rnd(w, P_SLOTS);

	if (!w->slots[i].present)
		return 0;
	w->slots[i].verdict = pick_verdict(w);
	verdict(&w->f->model, slot_copy(w, i), w->slots[i].verdict);
	return 0;
}

/* A rescan found another header: unindex, change, index. */
static int ch_header(world *w)
{
	int i = (int)rnd(w, P_SLOTS);
	p_slot *s = &w->slots[i];
	vd_copy *c;

	if (!s->present)
		return 0;
	c = slot_copy(w, i);
	vd_model_unindex(&w->f->model, c);
	s->id = pick_id(w);
	s->forged = rnd(w, 10) == 0;
	s->bad_header = rnd(w, 10) == 0;
	slot_header(w, s, c);
	vd_model_index(&w->f->model, c);
	return 0;
}

static int ch_ledger(world *w)
{
	const char *run = p_runs[rnd(w, P_RUNS)];
	vd_ledger_mem *m = mem_of(w->f, run);
	int k = (int)rnd(w, 6);

	if (k == 0) {              /* forgotten (DELETE /ledger) */
		mem_free(vd_map_del(&w->f->mems, m->relpath));
		return 1;
	}
	if (k == 1) {
		if (m->rewritten) {
			m->rewritten = 0;
			free(m->diverged);
			m->diverged = NULL;
			m->n_diverged = 0;
		} else {
			rewritten(w->f, run, (int64_t)rnd(w, P_ROUNDS), id_hash(pick_id(w)));
		}
		return 1;
	}
	if (m->n >= P_MAX_RECORDS)
		return 1;
	ledger(w->f, run, (int64_t)m->n, pick_commit(w, (int64_t)m->n));
	return 1;
}

/* The token mostly; else a key, trusted or not. */
static const char *p_key(world *w)
{
	uint32_t k = rnd(w, 2 * N_KEYS);

	return k < N_KEYS ? vd_key_id(keys[k]) : NULL;
}

static int ch_posted(world *w)
{
	vd_commitment *arr = rnd(w, 2) ? w->f->posted : w->f->equivs;
	size_t *n = arr == w->f->posted ? &w->f->n_posted : &w->f->n_equivs;
	int64_t t;

	if (*n > 0 && (*n == MAX_POSTS || rnd(w, 3) == 0)) {
		arr[rnd(w, (uint32_t)*n)] = arr[*n - 1];
		(*n)--;
		return 1;
	}
	t = (int64_t)rnd(w, P_ROUNDS) - 1;
	fill_commitment(&arr[(*n)++], p_runs[rnd(w, P_RUNS)], t, pick_commit(w, t),
	    arr == w->f->posted ? p_key(w) : NULL);
	return 1;
}

static int ch_stmt(world *w)
{
	fx *f = w->f;
	const char *run = p_runs[rnd(w, P_RUNS)];
	const char *key = vd_key_id(keys[rnd(w, N_KEYS)]);
	vd_ledger_mem *m;
	char rel[PATH_MAX_LEN];

	if (f->n_stmts > 0 && (f->n_stmts == MAX_STMTS || rnd(w, 3) == 0)) {
		f->stmts[rnd(w, (uint32_t)f->n_stmts)] = f->stmts[f->n_stmts - 1];
		f->n_stmts--;
		return 1;
	}
	ledger_path(run, rel, sizeof(rel));
	m = vd_map_get(&f->mems, rel);
	if (m != NULL && m->n > 0 && rnd(w, 2)) {
		size_t k = 1 + rnd(w, (uint32_t)m->n);
		checkpoint(f, run, k, m->recs[k - 1].record_hash, key);
	} else {
		int64_t t = (int64_t)rnd(w, P_ROUNDS) - 1;
		signed_roundclose(f, run, t, pick_commit(w, t), key);
	}
	return 1;
}

/* The store remembers artifacts while their directories are there; a
 * memory gained or lost for one that is gone is a whole pass. */
static int ch_retained(world *w)
{
	int id = (int)rnd(w, P_IDS);
	const p_id *d = &w->ids[id];
	const vd_group *g = vd_model_group(&w->f->model, id_hash(id));

	if (vd_map_get(&w->f->retained, id_hash(id)) != NULL) {
		forget_retained(w->f, id_hash(id));
		return g == NULL;
	}
	retain(w->f, id_hash(id), g ? g->copies[rnd(w, (uint32_t)g->n)]->run : p_runs[rnd(w, P_RUNS)],
	    d->round, d->parent >= 0 ? id_hash(d->parent) : NULL);
	return g == NULL;
}

/* The operator withdraws a commitment, or the test takes one back. */
static int ch_withdraw(world *w)
{
	int64_t t = (int64_t)rnd(w, P_ROUNDS) - 1;
	const char *run = p_runs[rnd(w, P_RUNS)];
	const char *hash = pick_commit(w, t);
	char key[VD_WITHDRAWAL_KEY_MAX];

	vd_withdrawal_key(key, sizeof(key), run, t, hash);
	withdraw(w->f, run, t, hash, vd_map_get(&w->f->withdrawn, key) == NULL);
	return 1;
}

static int ch_keys(world *w)
{
	w->f->ring.n = rnd(w, N_KEYS + 1);
	return 1;
}

/* A scan read a ledger: the store refreshes whole after a scan. */
static int ch_scan_ledger(world *w)
{
	vd_scan_ledger *l = &w->f->ledgers[rnd(w, P_RUNS)];

	l->read_ok = !l->read_ok;
	return 1;
}

typedef int (*change_fn)(world *w);

static const change_fn changes[] = {
	ch_presence, ch_presence, ch_presence, ch_verdict, ch_verdict, ch_verdict, ch_header,
	ch_ledger, ch_posted, ch_stmt, ch_retained, ch_retained, ch_keys, ch_scan_ledger,
	ch_withdraw,
};

/* ---- comparing two lineages ------------------------------------------- */

#define DIFFER(what, ...) \
	fail_msg("seed %u step %d: " what, w->seed, w->step, __VA_ARGS__)

static int same_str(const char *a, const char *b)
{
	return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static void same_group(const world *w, const vd_group *a, const vd_group *b)
{
	size_t i;

	if (a->chain != b->chain || a->chain_len != b->chain_len || a->pruned != b->pruned ||
	    strcmp(a->root, b->root) != 0)
		DIFFER("%s: chain %s %zu pruned %zu root %.8s, from scratch %s %zu pruned %zu root %.8s",
		    a->hash, vd_chain_status_name(a->chain), a->chain_len, a->pruned, a->root,
		    vd_chain_status_name(b->chain), b->chain_len, b->pruned, b->root);
	if (a->n_breaks != b->n_breaks || a->breaks_total != b->breaks_total)
		DIFFER("%s: %zu breaks (%zu listed), from scratch %zu (%zu)", a->hash,
		    a->breaks_total, a->n_breaks, b->breaks_total, b->n_breaks);
	for (i = 0; i < a->n_breaks; i++)
		if (a->breaks[i].reason != b->breaks[i].reason ||
		    a->breaks[i].round_index != b->breaks[i].round_index ||
		    strcmp(a->breaks[i].hash, b->breaks[i].hash) != 0)
			DIFFER("%s: break %zu is %s at %.8s, from scratch %s at %.8s", a->hash, i,
			    vd_break_name(a->breaks[i].reason), a->breaks[i].hash,
			    vd_break_name(b->breaks[i].reason), b->breaks[i].hash);
	if (a->committed != b->committed || a->trusted != b->trusted ||
	    a->round_index != b->round_index || a->has_parent != b->has_parent ||
	    strcmp(a->parent, b->parent) != 0)
		DIFFER("%s: committed %d trusted %d round %lld, from scratch %d %d %lld", a->hash,
		    a->committed, a->trusted, (long long)a->round_index, b->committed, b->trusted,
		    (long long)b->round_index);
	if ((a->commit == NULL) != (b->commit == NULL))
		DIFFER("%s: commitment %s, from scratch %s", a->hash, a->commit ? "shown" : "none",
		    b->commit ? "shown" : "none");
	if (a->commit != NULL && (strcmp(a->commit->run, b->commit->run) != 0 ||
	    a->commit->round_index != b->commit->round_index || a->commit_source != b->commit_source))
		DIFFER("%s: commitment %s round %lld source %d, from scratch %s %lld %d", a->hash,
		    a->commit->run, (long long)a->commit->round_index, a->commit_source,
		    b->commit->run, (long long)b->commit->round_index, b->commit_source);
}

static void same_groups(const world *w, const vd_model *a, const vd_model *b)
{
	const char *k;
	void *v;
	size_t it = 0;

	if (a->groups.count != b->groups.count)
		DIFFER("%zu groups, from scratch %zu", a->groups.count, b->groups.count);
	while (vd_map_next(&a->groups, &it, &k, &v)) {
		const vd_group *gb = vd_model_group(b, k);
		if (gb == NULL)
			DIFFER("group %s only in the refreshed model", k);
		same_group(w, v, gb);
	}
}

static int same_entry(const vd_commit_entry *a, const vd_commit_entry *b)
{
	if (a->has != b->has)
		return 0;
	return !a->has || (strcmp(a->hash, b->hash) == 0 && same_str(a->where, b->where) &&
	    a->line == b->line && a->is_signed == b->is_signed && strcmp(a->key_id, b->key_id) == 0);
}

static void same_slots(const world *w, const vd_lineage *a, const vd_lineage *b)
{
	const char *k;
	void *v;
	size_t it = 0;
	int s;

	if (a->commits.count != b->commits.count)
		DIFFER("%zu commitment slots, from scratch %zu", a->commits.count, b->commits.count);
	while (vd_map_next(&a->commits, &it, &k, &v)) {
		const vd_commit_slot *sa = v;
		const vd_commit_slot *sb = vd_lineage_slot(b, sa->run, sa->round_index);
		if (sb == NULL)
			DIFFER("slot %s round %lld only in the refreshed lineage", sa->run,
			    (long long)sa->round_index);
		for (s = 0; s < VD_SRC_COUNT; s++)
			if (!same_entry(&sa->src[s], &sb->src[s]))
				DIFFER("slot %s round %lld: source %s differs", sa->run,
				    (long long)sa->round_index, vd_commit_source_name((vd_commit_source)s));
		if (strcmp(sa->first_hash, sb->first_hash) != 0 ||
		    strcmp(sa->other_hash, sb->other_hash) != 0 ||
		    !same_str(sa->other_where, sb->other_where) || sa->anchor != sb->anchor)
			DIFFER("slot %s round %lld: hashes or anchor differ", sa->run,
			    (long long)sa->round_index);
	}
	if (memcmp(a->series, b->series, sizeof(a->series)) != 0)
		DIFFER("%s", "commitment series differ");
}

static void same_alerts(const world *w, const vd_lineage *a, const vd_lineage *b)
{
	const char *k;
	void *v;
	size_t it = 0;

	if (a->alerts.count != b->alerts.count)
		DIFFER("%zu alerts, from scratch %zu", a->alerts.count, b->alerts.count);
	while (vd_map_next(&a->alerts, &it, &k, &v)) {
		const vd_alert *x = v, *y = vd_map_get(&b->alerts, k);
		if (y == NULL)
			DIFFER("alert %s only in the refreshed lineage", k);
		if (x->kind != y->kind || strcmp(x->subject, y->subject) != 0)
			DIFFER("alert %s: kind %d, from scratch %d", k, x->kind, y->kind);
		if (strcmp(x->detail, y->detail) != 0)
			DIFFER("alert %s: \"%s\", from scratch \"%s\"", k, x->detail, y->detail);
	}
	if (memcmp(a->alert_counts, b->alert_counts, sizeof(a->alert_counts)) != 0)
		DIFFER("%s", "alert counts differ");
}

static void same_head(const world *w, const vd_lineage *a, const vd_lineage *b)
{
	if (a->head_round != b->head_round || strcmp(a->head_hash, b->head_hash) != 0 ||
	    !same_str(a->head_run, b->head_run))
		DIFFER("head %lld %.8s, from scratch %lld %.8s", (long long)a->head_round, a->head_hash,
		    (long long)b->head_round, b->head_hash);
}

/* Tables grown and emptied again, so that the fresh model's groups are
 * walked in another order than the refreshed one's. */
static void grow_tables(vd_model *m)
{
	char name[16];
	vd_copy *c[P_SCRATCH_GROWTH];
	int i;

	for (i = 0; i < P_SCRATCH_GROWTH; i++) {
		snprintf(name, sizeof(name), "g%02d", i);
		c[i] = model_copy(m, "grow", name, hx(P_GROW_HASH + (unsigned)i), 0, NULL, V_OK);
	}
	for (i = 0; i < P_SCRATCH_GROWTH; i++)
		vd_model_remove_copy(m, c[i]);
}

/* A model built anew from the slots (in reverse), refreshed by a new
 * lineage. */
static void compare_with_scratch(world *w)
{
	vd_lineage_input in;
	vd_lineage fresh;
	vd_model m;
	int i;

	vd_model_init(&m);
	if (w->step % P_GROW_EVERY == 0)
		grow_tables(&m);
	for (i = P_SLOTS - 1; i >= 0; i--)
		if (w->slots[i].present)
			slot_add(w, &m, i);
	vd_lineage_init(&fresh);
	input_for(w->f, &m, &in);
	vd_lineage_refresh(&fresh, &in, 1);
	same_groups(w, &w->f->model, &m);
	same_slots(w, &w->f->l, &fresh);
	same_head(w, &w->f->l, &fresh);
	same_alerts(w, &w->f->l, &fresh);
	vd_lineage_free(&fresh);
	vd_model_free(&m);
}

static void world_config(world *w)
{
	fx *f = w->f;
	char v[PATH_MAX_LEN];
	int i;

	if (rnd(w, 2))
		cfg_set(f, "commitment_policy", "signed");
	if (rnd(w, 4)) {
		snprintf(v, sizeof(v), "a:%s,%s", id_hash(0), id_hash(rnd(w, 2) ? 0 : 1));
		cfg_set(f, "genesis_hash", v);
	}
	for (i = 0; i < P_IDS; i++)
		if (w->ids[i].round > 0 && rnd(w, 3) == 0) {
			pin(f, "anchor", "b", w->ids[i].round, id_hash(i));
			break;
		}
	for (i = 0; i < P_RUNS; i++) {
		f->ledgers[i].relpath = (char *)(i ? "b/ledger.jsonl" : "a/ledger.jsonl");
		f->ledgers[i].run = (char *)p_runs[i];
		f->ledgers[i].read_ok = 1;
	}
	f->n_ledgers = P_RUNS;
}

static void run_world(unsigned seed)
{
	world w;
	int commits;

	memset(&w, 0, sizeof(w));
	w.seed = seed;
	w.rnd = 2463534242u ^ (seed * 2654435761u);
	w.f = fx_new();
	draw_ids(&w);
	world_config(&w);
	refresh(w.f, 1);
	for (w.step = 0; w.step < P_STEPS; w.step++) {
		commits = changes[rnd(&w, sizeof(changes) / sizeof(changes[0]))](&w);
		refresh(w.f, commits);
		compare_with_scratch(&w);
	}
	fx_free(w.f);
}

/* With VD_TEST_DEEP=1, many more sequences. */
static void test_refresh_equals_scratch(void **state)
{
	unsigned seed, seeds = getenv("VD_TEST_DEEP") ? P_SEEDS_DEEP : P_SEEDS;

	for (seed = 1; seed <= seeds; seed++)
		run_world(seed);
}

/* ---- cycles ----------------------------------------------------------- */

#define CYCLE_HASH 600             /* hx() offset of the hashes in cycles */
#define CYCLE_PAIRS 24             /* candidate pairs: the table order varies */

/* Two headers naming each other: a cycle. */
static void cycle(vd_model *m, const char *a, const char *b)
{
	model_copy(m, "r", "x", a, 1, b, V_OK);
	model_copy(m, "r", "y", b, 2, a, V_OK);
}

static void cycle_refresh(fx *f, vd_model *m, vd_lineage *l)
{
	vd_lineage_input in;

	vd_lineage_init(l);
	input_for(f, m, &in);
	vd_lineage_refresh(l, &in, 1);
}

/* Caught, whichever way it is walked: broken, nothing trusted. */
static void test_cycle_broken(void **state)
{
	fx *f = fx_new();

	cycle(&f->model, hx(CYCLE_HASH), hx(CYCLE_HASH + 1));
	refresh(f, 1);
	assert_int_equal(G(f, hx(CYCLE_HASH))->chain, VD_CHAIN_BROKEN);
	assert_int_equal(G(f, hx(CYCLE_HASH + 1))->chain, VD_CHAIN_BROKEN);
	assert_int_equal(G(f, hx(CYCLE_HASH))->trusted, 0);
	assert_int_equal(G(f, hx(CYCLE_HASH + 1))->trusted, 0);
	assert_true(has_alert(f, VD_ALERT_CHAIN_BROKEN, hx(CYCLE_HASH)));
	fx_free(f);
}

static void same_cycle_group(const vd_model *a, const vd_model *b, const char *hash)
{
	const vd_group *x = vd_model_group(a, hash), *y = vd_model_group(b, hash);

	assert_non_null(x);
	assert_non_null(y);
	if (x->chain_len != y->chain_len || x->n_breaks != y->n_breaks ||
	    strcmp(x->breaks[0].hash, y->breaks[0].hash) != 0 ||
	    x->breaks[0].reason != y->breaks[0].reason)
		fail_msg("%.8s: length %zu, first break %s at %.8s; the same store walked in "
		    "another order: length %zu, %s at %.8s", hash, x->chain_len,
		    vd_break_name(x->breaks[0].reason), x->breaks[0].hash, y->chain_len,
		    vd_break_name(y->breaks[0].reason), y->breaks[0].hash);
}

/*
 * KNOWN DEFECT in vd_lineage.c, skipped: in a cycle of parents, which
 * group's link is reported broken (and so chain.length, the breaks and
 * the chain_broken alert's detail) depends on which group of the cycle
 * compute_chains() reaches first, that is on the order of the groups
 * table, which depends on its history (its capacity, deleted slots). The
 * same store then answers one way before a restart and another after,
 * and a lineage refreshed in place can disagree with one computed from
 * scratch. Run with VD_TEST_KNOWN_DEFECTS=1 to see it fail.
 */
static void test_cycle_order_independent(void **state)
{
	vd_lineage la, lb;
	vd_model a, b;
	fx *f;
	int i;

	if (!known_defects())
		skip();
	f = fx_new();
	for (i = 0; i < CYCLE_PAIRS; i++) {
		const char *x = hx(CYCLE_HASH + 2 * (unsigned)i), *y = hx(CYCLE_HASH + 2 * (unsigned)i + 1);
		vd_model_init(&a);
		vd_model_init(&b);
		cycle(&a, x, y);
		grow_tables(&b);
		cycle(&b, x, y);
		cycle_refresh(f, &a, &la);
		cycle_refresh(f, &b, &lb);
		same_cycle_group(&a, &b, x);
		same_cycle_group(&a, &b, y);
		vd_lineage_free(&la);
		vd_lineage_free(&lb);
		vd_model_free(&a);
		vd_model_free(&b);
	}
	fx_free(f);
}

/* ---- main ------------------------------------------------------------- */

static int set_up(void **state)
{
	int i;

	for (i = 0; i < N_KEYS; i++)
		if (vd_key_generate(&keys[i]) != 0)
			return -1;
	return 0;
}

static int tear_down(void **state)
{
	int i;

	for (i = 0; i < N_KEYS; i++)
		vd_key_free(keys[i]);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean_chain),
		cmocka_unit_test(test_unpinned_genesis),
		cmocka_unit_test(test_pending_parent),
		cmocka_unit_test(test_missing_parent),
		cmocka_unit_test(test_failed_parent_good_copy),
		cmocka_unit_test(test_round_gap),
		cmocka_unit_test(test_detached_root),
		cmocka_unit_test(test_commitment_mismatch),
		cmocka_unit_test(test_cross_run),
		cmocka_unit_test(test_legacy_policy),
		cmocka_unit_test(test_pruned_link),
		cmocka_unit_test(test_removed_unverified),
		cmocka_unit_test(test_pruned_then_missing),
		cmocka_unit_test(test_pruned_link_contradicted),
		cmocka_unit_test(test_pruned_anchor),
		cmocka_unit_test(test_pruned_link_sees_ancestor_change),
		cmocka_unit_test(test_genesis_per_run),
		cmocka_unit_test(test_anchor),
		cmocka_unit_test(test_anchor_other_run),
		cmocka_unit_test(test_equivocation),
		cmocka_unit_test(test_rewritten_ledger),
		cmocka_unit_test(test_policy_signed),
		cmocka_unit_test(test_policy_signed_unsigned_other),
		cmocka_unit_test(test_equivocation_withdrawn),
		cmocka_unit_test(test_round_mismatch),
		cmocka_unit_test(test_noted_only_slot),
		cmocka_unit_test(test_fork),
		cmocka_unit_test(test_alerts_cleared),
		cmocka_unit_test(test_alert_detail_follows_cause),
		cmocka_unit_test(test_busy_keeps_alerts),
		cmocka_unit_test(test_refresh_equals_scratch),
		cmocka_unit_test(test_cycle_broken),
		cmocka_unit_test(test_cycle_order_independent),
	};

	vd_log_set_level(VD_LOG_ERROR);   /* raised and cleared alerts are logged */
	return cmocka_run_group_tests_name("lineage", tests, set_up, tear_down);
}

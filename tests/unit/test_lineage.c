/*
 * Lineage replayed without a daemon: a model of copies, ledgers and
 * commitments built in memory (tests/sim/lineage_fx.c), one refresh, and
 * its chains, commitment slots, head and alerts checked. Histories no one
 * wrote by hand are the simulator's (tests/sim/vd-sim.c).
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

#include "lineage_fx.h"

/* ---- checks ----------------------------------------------------------- */

static vd_group *G(fx *f, const char *hash)
{
	vd_group *g = vd_model_group(f->model, hash);

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
	return vd_map_get(&f->core.lineage.alerts, key) != NULL;
}

static void assert_head(fx *f, int64_t round, const char *hash, const char *run)
{
	assert_int_equal(f->core.lineage.head_round, round);
	assert_string_equal(f->core.lineage.head_hash, hash ? hash : "");
	if (run == NULL)
		assert_null(f->core.lineage.head_run);
	else
		assert_string_equal(f->core.lineage.head_run, run);
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
	sl = vd_lineage_slot(&f->core.lineage, "r", 1);
	assert_non_null(sl);
	assert_true(sl->src[VD_SRC_LEDGER].has);
	assert_string_equal(sl->src[VD_SRC_LEDGER].hash, H(2));
	assert_string_equal(sl->src[VD_SRC_LEDGER].where, "r/ledger.jsonl");
	assert_int_equal(sl->src[VD_SRC_LEDGER].line, 2);
	assert_false(sl->src[VD_SRC_LEDGER].is_signed);
	assert_string_equal(sl->other_hash, "");
	assert_ptr_equal(G(f, H(2))->commit, sl);
	assert_non_null(sl = vd_lineage_slot(&f->core.lineage, "r", -1));
	assert_string_equal(sl->src[VD_SRC_PINNED].where, "config");
	assert_null(vd_lineage_slot(&f->core.lineage, "r", 4));
	assert_int_equal(f->core.lineage.alerts.count, 0);
	assert_int_equal(f->core.lineage.series[VD_CS_LEDGER_UNSIGNED], 4);
	assert_int_equal(f->core.lineage.series[VD_CS_PINNED], 1);
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
	assert_int_equal(f->core.lineage.alerts.count, 0);
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
	assert_int_equal(f->core.lineage.alert_counts[VD_ALERT_CHAIN_BROKEN], 2);

	copy(f, "r", "round-00002", H(2), 2, H(1), V_OK);
	refresh(f, 0);
	assert_intact(f, H(4), 5, H(0), 1);
	assert_head(f, 4, H(4), "r");
	assert_int_equal(f->core.lineage.alerts.count, 0);
	assert_int_equal(f->core.lineage.alert_counts[VD_ALERT_CHAIN_BROKEN], 0);
	fx_free(f);
}

/* Before the store has been scanned whole, a parent not found is one the
 * scan may not have reached: the chains through it read pending, and no
 * alert is raised. The pass after the whole scan finds it missing. */
static void test_parent_unseen_before_scan(void **state)
{
	fx *f = fx_new();
	vd_group *g;
	int i;

	f->unscanned = 1;
	pin(f, "genesis_hash", "r", -1, hx(0));
	chain_at(f, "r", 0, 0, 4, V_OK);
	for (i = 0; i < 4; i++)
		ledger(f, "r", i, hx((unsigned)i + 1));
	drop(f, "r/round-00002");
	refresh(f, 1);
	g = G(f, H(3));
	assert_chain(g, VD_CHAIN_PENDING, 1, NULL);
	assert_int_equal(g->breaks_total, 0);
	assert_int_equal(g->trusted, 0);
	assert_chain(G(f, H(4)), VD_CHAIN_PENDING, 2, NULL);
	assert_int_equal(G(f, H(4))->trusted, 0);
	assert_head(f, 1, H(1), "r");
	assert_int_equal(f->core.lineage.alert_counts[VD_ALERT_CHAIN_BROKEN], 0);

	f->unscanned = 0;
	refresh(f, 0);
	g = G(f, H(3));
	assert_chain(g, VD_CHAIN_BROKEN, 1, NULL);
	assert_break(g, 0, H(3), 3, VD_BREAK_MISSING_PARENT);
	assert_true(has_alert(f, VD_ALERT_CHAIN_BROKEN, H(3)));
	assert_true(has_alert(f, VD_ALERT_CHAIN_BROKEN, H(4)));
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
	assert_int_equal(f->core.lineage.alerts.count, 1);

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
	vd_copy *c = vd_model_copy(f->model, relpath);

	assert_non_null(c);
	vd_model_unindex(f->model, c);
	c->hdr.schema_version = version;
	vd_model_index(f->model, c);
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
	assert_int_equal(f->core.lineage.alerts.count, 0);

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
	f->core.mem.n_stmts = 0;
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
	assert_non_null(sl = vd_lineage_slot(&f->core.lineage, "*", -1));
	assert_string_equal(sl->src[VD_SRC_PINNED].hash, X(3));
	assert_null(vd_lineage_slot(&f->core.lineage, "c", -1));
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
	assert_non_null(sl = vd_lineage_slot(&f->core.lineage, "r", 2));
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
	assert_non_null(sl = vd_lineage_slot(&f->core.lineage, "", 3));
	assert_string_equal(sl->first_hash, H(4));
	assert_string_equal(sl->other_hash, X(4));
	assert_string_equal(sl->other_where, "api");
	assert_true(has_alert(f, VD_ALERT_EQUIVOCATION, ". round 3"));
	assert_int_equal(f->core.lineage.alert_counts[VD_ALERT_EQUIVOCATION], 1);
	assert_head(f, 3, H(3), "");

	/* A counting source disagrees: a mismatch as well. */
	f->core.mem.n_equivs = 0;
	post(f, "", 3, X(4), NULL);
	refresh(f, 1);
	g = G(f, H(4));
	assert_int_equal(g->committed, 0);
	assert_break(g, 0, H(4), 4, VD_BREAK_COMMITMENT_MISMATCH);
	assert_true(has_alert(f, VD_ALERT_EQUIVOCATION, ". round 3"));
	assert_true(has_alert(f, VD_ALERT_COMMITMENT_MISMATCH, H(4)));

	/* The cause gone, the alerts go. */
	f->core.mem.n_posted = 0;
	refresh(f, 1);
	assert_intact(f, H(4), 5, H(0), 1);
	assert_head(f, 4, H(4), "");
	assert_int_equal(f->core.lineage.alerts.count, 0);
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
	assert_false(vd_commit_counts(&vd_lineage_slot(&f->core.lineage, "r", 0)->src[VD_SRC_LEDGER],
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
	sl = vd_lineage_slot(&f->core.lineage, "r", 1);
	assert_true(sl->src[VD_SRC_LEDGER].is_signed);
	assert_string_equal(sl->src[VD_SRC_LEDGER].key_id, vd_key_id(keys[0]));
	assert_false(vd_lineage_slot(&f->core.lineage, "r", 2)->src[VD_SRC_LEDGER].is_signed);
	assert_int_equal(f->core.lineage.series[VD_CS_LEDGER_SIGNED], 2);
	assert_int_equal(f->core.lineage.series[VD_CS_LEDGER_UNSIGNED], 1);
	assert_head(f, 2, H(2), "r");

	/* A signed RoundClose commits round 3; one by an untrusted key not. */
	post(f, "r", 2, X(3), vd_key_id(keys[1]));
	signed_roundclose(f, "r", 2, H(3), vd_key_id(keys[0]));
	refresh(f, 1);
	assert_intact(f, H(3), 4, H(0), 1);
	assert_int_equal(G(f, H(3))->commit_source, VD_SRC_SIGNED);
	assert_string_equal(vd_lineage_slot(&f->core.lineage, "r", 2)->other_hash, "");
	assert_head(f, 3, H(3), "r");

	/* The key revoked: what it alone signed stops counting. */
	f->ring.n = 0;
	refresh(f, 1);
	assert_head(f, 0, H(0), "r");

	/* Under "ledger" unsigned records count. */
	f->ring.n = 1;
	f->core.mem.n_stmts = 0;
	f->core.mem.n_posted = 0;
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
	assert_string_equal(vd_lineage_slot(&f->core.lineage, "r", 0)->other_hash, "");
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
	assert_null(vd_lineage_slot(&f->core.lineage, "r", 0));

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
	assert_int_equal(vd_round_mismatch(f->model, &f->core.mem.retained, "r", 1, H(1), NULL), 1);
	assert_int_equal(vd_round_mismatch(f->model, &f->core.mem.retained, "r", 0, H(1), NULL), 0);
	assert_int_equal(vd_round_mismatch(f->model, &f->core.mem.retained, "other", 1, H(1), NULL), 0);
	/* A directory that only claims the hash, with another round, proves
	 * nothing: it cannot veto the real round's commitment. */
	copy(f, "r", "round-00005", H(2), 5, H(1), V_FAIL);
	copy(f, "r", "round-00006", H(2), 6, H(1), V_NONE);
	refresh(f, 0);
	assert_int_equal(vd_round_mismatch(f->model, &f->core.mem.retained, "r", 1, H(2), NULL), 0);
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
	refused(f, "r", 0, X(1));
	refresh(f, 1);
	sl = vd_lineage_slot(&f->core.lineage, "r", 0);
	assert_non_null(sl);
	assert_ptr_equal(G(f, H(1))->commit, sl);
	assert_int_equal(G(f, H(1))->commit_source, -1);
	assert_null(vd_slot_entry(sl, G(f, H(1))->commit_source));
	assert_null(vd_slot_entry(sl, VD_SRC_COUNT));
	assert_false(G(f, H(1))->trusted);
	fx_free(f);
}

/* ---- alerts ----------------------------------------------------------- */

/* A whole pass finds a fork from its children's side: raised while two
 * of them are verified, whatever the order of the groups, and never for
 * a parent that is not there. */
static void test_fork_whole(void **state)
{
	fx *f = committed_chain(2);

	copy(f, "r", "round-00002-other", X(2), 2, H(1), V_OK);
	copy(f, "r", "round-00002-third", X(3), 2, H(1), V_FAIL);
	copy(f, "r", "round-00009", X(9), 9, X(8), V_OK);
	copy(f, "r", "round-00009-other", X(10), 9, X(8), V_OK);
	f->whole = 1;
	refresh(f, 1);
	assert_true(has_alert(f, VD_ALERT_FORK, H(1)));
	assert_false(has_alert(f, VD_ALERT_FORK, X(8)));
	assert_int_equal(f->core.lineage.alert_counts[VD_ALERT_FORK], 1);

	reverdict(f, "r/round-00002-third", V_OK);
	reverdict(f, "r/round-00002-other", V_FAIL);
	f->whole = 1;
	refresh(f, 1);
	assert_true(has_alert(f, VD_ALERT_FORK, H(1)));

	reverdict(f, "r/round-00002-third", V_FAIL);
	f->whole = 1;
	refresh(f, 1);
	assert_false(has_alert(f, VD_ALERT_FORK, H(1)));
	assert_int_equal(f->core.lineage.alert_counts[VD_ALERT_FORK], 0);
	assert_false(f->delta_bad);
	fx_free(f);
}

static void test_fork(void **state)
{
	fx *f = committed_chain(2);

	copy(f, "r", "round-00002-other", X(2), 2, H(1), V_OK);
	refresh(f, 0);
	assert_true(has_alert(f, VD_ALERT_FORK, H(1)));
	assert_int_equal(f->core.lineage.alert_counts[VD_ALERT_FORK], 1);
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
	assert_int_equal(f->core.lineage.alert_counts[VD_ALERT_FORK], 0);
	fx_free(f);
}

/* Each alert goes on the refresh after its cause does. */
static void test_alerts_cleared(void **state)
{
	fx *f = committed_chain(2);
	vd_copy *c = vd_model_copy(f->model, "r/round-00001");

	f->ledgers[0].relpath = (char *)"r/ledger.jsonl";
	f->ledgers[0].run = (char *)"r";
	f->ledgers[0].read_ok = 0;
	snprintf(f->ledgers[0].read_error, sizeof(f->ledgers[0].read_error), "permission denied");
	f->n_ledgers = 1;
	verdict(f->model, c, V_FAIL);
	refresh(f, 1);
	assert_true(has_alert(f, VD_ALERT_LEDGER_BROKEN, "r/ledger.jsonl"));
	assert_true(has_alert(f, VD_ALERT_ARTIFACT_FAILED, "r/round-00001"));
	assert_true(has_alert(f, VD_ALERT_CHAIN_BROKEN, H(2)));
	assert_int_equal(f->core.lineage.alerts.count, 3);

	f->ledgers[0].read_ok = 1;
	f->ledgers[0].result.brk = VD_LEDGER_PREV_MISMATCH;
	snprintf(f->ledgers[0].result.break_detail, sizeof(f->ledgers[0].result.break_detail), "line 3");
	verdict(f->model, c, V_OK);
	refresh(f, 1);
	assert_true(has_alert(f, VD_ALERT_LEDGER_BROKEN, "r/ledger.jsonl"));
	assert_int_equal(f->core.lineage.alerts.count, 1);

	f->ledgers[0].result.brk = VD_LEDGER_INTACT;
	refresh(f, 1);
	assert_int_equal(f->core.lineage.alerts.count, 0);
	assert_int_equal(f->core.lineage.alert_counts[VD_ALERT_LEDGER_BROKEN], 0);
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
	assert_non_null(a = vd_map_get(&f->core.lineage.alerts, key));
	assert_non_null(strstr(a->detail, "missing_parent"));

	copy(f, "r", "round-00001", H(1), 1, H(0), V_FAIL);
	refresh(f, 0);
	assert_break(G(f, H(2)), 0, H(2), 2, VD_BREAK_PARENT_FAILED);
	assert_non_null(a = vd_map_get(&f->core.lineage.alerts, key));
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
	assert_int_equal(f->core.lineage.alerts.count, 2);
	c = vd_model_copy(f->model, "r/round-00001");
	c->inflight = busy_job;
	vd_model_touch(f->model, c);
	refresh(f, 0);
	assert_int_equal(f->core.lineage.alerts.count, 2);
	assert_break(G(f, H(2)), 0, H(2), 2, VD_BREAK_PARENT_FAILED);
	fx_free(f);
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
	refresh_alone(l, &in, 1);
}

/* Caught, whichever way it is walked: broken, nothing trusted. */
static void test_cycle_broken(void **state)
{
	fx *f = fx_new();

	cycle(f->model, hx(CYCLE_HASH), hx(CYCLE_HASH + 1));
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
 * In a cycle of parents, which group's link is reported broken (and so
 * chain.length, the breaks and the chain_broken alert's detail) depends
 * on which group of the cycle a whole pass reaches first: by round and
 * hash, not by the order of the groups table, which depends on its
 * history (its capacity, deleted slots), or the same store would answer
 * one way before a restart and another after.
 */
static void test_cycle_order_independent(void **state)
{
	vd_lineage la, lb;
	vd_model a, b;
	fx *f;
	int i;

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

/* ---- a whole pass in slices ------------------------------------------- */

#define SLICE_ROUNDS 30

/* A store with something of every kind a whole pass computes: a long
 * committed run, a fork, a failed copy and its children, a pruned link, a
 * missing parent, and another run whose round 3 two sources disagree on. */
static void mixed_store(fx *f)
{
	int i;

	pin(f, "genesis_hash", "r", -1, H(0));
	chain(f, "r", 0, SLICE_ROUNDS, V_OK);
	for (i = 0; i < SLICE_ROUNDS; i++)
		ledger(f, "r", i, H(i + 1));
	copy(f, "r", "round-00005-other", X(5), 5, H(4), V_OK);
	reverdict(f, "r/round-00012", V_FAIL);
	retain(f, H(20), "r", 20, H(19));
	drop(f, "r/round-00020");
	copy(f, "r", "stray", X(40), 41, X(39), V_OK);
	pin(f, "genesis_hash", "s", -1, hx(200));
	chain_at(f, "s", 200, 0, 6, V_OK);
	for (i = 0; i < 6; i++)
		ledger(f, "s", i, hx(200 + (unsigned)i + 1));
	refused(f, "s", 3, X(60));
}

/* The first whole pass over a whole scan, as the core asks for it. */
static void first_pass(fx *f, size_t slice, vd_lineage_input *in)
{
	input_for(f, f->model, in);
	in->scanned = 1;
	in->slice = slice;
	vd_lineage_refresh(&f->core.lineage, in, VD_REFRESH_COMMITS, &f->core.delta);
}

static void same_group(const vd_group *x, const vd_group *y)
{
	size_t i;

	assert_non_null(y);
	if (x->chain != y->chain || x->trusted != y->trusted || x->committed != y->committed)
		fail_msg("%.12s: in one go %s trusted %d committed %d, in slices %s %d %d", x->hash,
		    vd_chain_status_name(x->chain), x->trusted, x->committed,
		    vd_chain_status_name(y->chain), y->trusted, y->committed);
	assert_int_equal(x->chain_len, y->chain_len);
	assert_int_equal(x->pruned, y->pruned);
	assert_string_equal(x->root, y->root);
	assert_int_equal(x->n_breaks, y->n_breaks);
	assert_int_equal(x->breaks_total, y->breaks_total);
	for (i = 0; i < x->n_breaks; i++) {
		assert_string_equal(x->breaks[i].hash, y->breaks[i].hash);
		assert_int_equal(x->breaks[i].round_index, y->breaks[i].round_index);
		assert_int_equal(x->breaks[i].reason, y->breaks[i].reason);
	}
	assert_int_equal(x->commit_source, y->commit_source);
	assert_int_equal(x->commit == NULL, y->commit == NULL);
	if (x->commit != NULL) {
		assert_string_equal(x->commit->run, y->commit->run);
		assert_int_equal(x->commit->round_index, y->commit->round_index);
	}
	assert_int_equal(x->legacy_untrusted, y->legacy_untrusted);
}

/* Every group, the head, the alerts and the series alike. */
static void same_lineage(fx *a, fx *b)
{
	const vd_lineage *la = &a->core.lineage, *lb = &b->core.lineage;
	const vd_group *g;
	const char *k;
	void *v;
	size_t it = 0;

	assert_int_equal(vd_model_group_count(a->model), vd_model_group_count(b->model));
	while ((g = vd_model_next_group(a->model, &it)) != NULL)
		same_group(g, vd_model_group(b->model, g->hash));
	assert_head(b, la->head_round, la->head_hash, la->head_run);
	assert_int_equal(la->alerts.count, lb->alerts.count);
	it = 0;
	while (vd_map_next(&la->alerts, &it, &k, &v)) {
		const vd_alert *y = vd_map_get(&lb->alerts, k);
		if (y == NULL)
			fail_msg("alert %s raised in one go, not in slices", k);
		assert_string_equal(((const vd_alert *)v)->detail, y->detail);
	}
	assert_memory_equal(la->alert_counts, lb->alert_counts, sizeof(la->alert_counts));
	assert_memory_equal(la->series, lb->series, sizeof(la->series));
	assert_int_equal(vd_lineage_slot_count(la), vd_lineage_slot_count(lb));
}

/* What a refresh changed, in the same order. */
static void same_delta(const vd_lineage_delta *x, const vd_lineage_delta *y)
{
	size_t i;

	assert_int_equal(x->whole, y->whole);
	assert_int_equal(x->settled, y->settled);
	assert_int_equal(x->head_changed, y->head_changed);
	assert_int_equal(x->n_alerts, y->n_alerts);
	for (i = 0; i < x->n_alerts; i++) {
		assert_int_equal(x->alerts[i].kind, y->alerts[i].kind);
		assert_int_equal(x->alerts[i].raised, y->alerts[i].raised);
		assert_string_equal(x->alerts[i].subject, y->alerts[i].subject);
		assert_string_equal(x->alerts[i].detail, y->alerts[i].detail);
	}
}

/* Until the pass reaches a group it reads pending, trusting and
 * committing nothing, and there is no head; nothing changed is said. */
static void assert_not_reached(fx *f)
{
	const vd_group *g;
	size_t it = 0;

	assert_int_equal(f->core.lineage.head_round, -1);
	assert_null(f->core.lineage.head_run);
	assert_int_equal(f->core.delta.n_alerts, 0);
	assert_false(f->core.delta.head_changed);
	while ((g = vd_model_next_group(f->model, &it)) != NULL) {
		if (g->mark == 2)
			continue;
		if (g->trusted || g->committed || g->chain != VD_CHAIN_PENDING || g->commit != NULL ||
		    vd_trust_reason(g, vd_group_state(g)) == NULL)
			fail_msg("%.12s reads %s trusted %d committed %d before the pass reached it",
			    g->hash, vd_chain_status_name(g->chain), g->trusted, g->committed);
	}
}

/* Slices of 3 groups give what one go gives, and say it once, at the
 * end; until then nothing reads trusted that the pass has not reached,
 * not even what an earlier refresh had trusted. */
static void test_pass_in_slices(void **state)
{
	fx *a = fx_new(), *b = fx_new();
	vd_lineage_input in;
	size_t slices = 0;

	mixed_store(a);
	mixed_store(b);
	b->unscanned = 1;
	refresh(b, 1);          /* as during a merge: trusted before the scan is whole */
	b->unscanned = 0;
	assert_true(G(b, H(3))->trusted);
	first_pass(a, 0, &in);
	assert_false(vd_lineage_passing(&a->core.lineage));
	first_pass(b, 3, &in);
	assert_true(vd_lineage_passing(&b->core.lineage));
	assert_false(G(b, H(3))->trusted);
	assert_not_reached(b);
	while (!vd_lineage_pass(&b->core.lineage, &in, &b->core.delta)) {
		slices++;
		assert_true(vd_lineage_passing(&b->core.lineage));
		assert_not_reached(b);
	}
	assert_false(vd_lineage_passing(&b->core.lineage));
	/* A slice of 3 computes at least 3 groups (a walk up computes more). */
	assert_true(slices >= 2 && slices <= vd_model_group_count(b->model) / 3 + 1);
	same_lineage(a, b);
	assert_head(b, 11, H(11), "r");         /* round 12 failed */
	assert_true(G(b, H(3))->trusted);
	assert_true(has_alert(b, VD_ALERT_FORK, H(4)));
	assert_true(has_alert(b, VD_ALERT_EQUIVOCATION, "s round 3"));
	fx_free(a);
	fx_free(b);
}

/* The same from a lineage never refreshed: the delta too is the one of
 * the pass in one go. */
static void test_pass_in_slices_delta(void **state)
{
	fx *a = fx_new(), *b = fx_new();
	vd_lineage_input in;

	mixed_store(a);
	mixed_store(b);
	first_pass(a, 0, &in);
	first_pass(b, 7, &in);
	assert_int_equal(b->core.delta.n_alerts, 0);
	while (!vd_lineage_pass(&b->core.lineage, &in, &b->core.delta))
		;
	same_lineage(a, b);
	same_delta(&a->core.delta, &b->core.delta);
	assert_true(b->core.delta.whole);
	assert_true(b->core.delta.head_changed);
	fx_free(a);
	fx_free(b);
}

/* The model changes between slices (a verdict, a copy removed and its
 * group freed, a new group): the pass ends on the model as it is, the
 * marks since its start are caught up by the refresh after it, and the
 * result is a from-scratch pass's over the final store. */
static void change_store(fx *f)
{
	reverdict(f, "r/round-00002", V_FAIL);
	drop(f, "r/round-00025");
	copy(f, "r", "late", X(50), 31, H(SLICE_ROUNDS), V_OK);
	copy(f, "s", "round-00007", hx(207), 7, hx(206), V_OK);
}

static void test_pass_in_slices_model_changes(void **state)
{
	fx *a = fx_new(), *b = fx_new();
	vd_lineage_input in;
	int slices = 0;

	mixed_store(a);
	change_store(a);
	first_pass(a, 0, &in);
	mixed_store(b);
	first_pass(b, 5, &in);
	vd_model_clear_dirty(b->model);     /* as the core does when a pass begins */
	do {
		if (++slices == 2)
			change_store(b);
		input_for(b, b->model, &in);
		in.scanned = 1;
		in.slice = 5;
	} while (!vd_lineage_pass(&b->core.lineage, &in, &b->core.delta));
	assert_true(slices > 2);
	/* The groups made meanwhile were computed by the pass too. */
	assert_int_equal(G(b, X(50))->mark, 2);
	assert_int_equal(G(b, hx(207))->mark, 2);
	refresh(b, 0);
	same_lineage(a, b);
	fx_free(a);
	fx_free(b);
}

/* A parent appears after the pass computed its child (every chain done,
 * the head and the alerts left for the last slice): the slice that
 * computes the parent reads it as the refresh after the pass would, and
 * that refresh must still recompute the child, which read the parent
 * missing. */
static void test_pass_parent_appears_late(void **state)
{
	fx *a = fx_new(), *b = fx_new();
	vd_lineage_input in;

	mixed_store(a);
	copy(a, "r", "stray-parent", X(39), 40, NULL, V_OK);
	first_pass(a, 0, &in);
	mixed_store(b);
	first_pass(b, vd_model_group_count(b->model), &in);
	vd_model_clear_dirty(b->model);     /* as the core does when a pass begins */
	assert_false(vd_lineage_pass(&b->core.lineage, &in, &b->core.delta));
	assert_int_equal(G(b, X(40))->mark, 2);
	copy(b, "r", "stray-parent", X(39), 40, NULL, V_OK);
	input_for(b, b->model, &in);
	in.scanned = 1;
	assert_true(vd_lineage_pass(&b->core.lineage, &in, &b->core.delta));
	refresh(b, 0);
	same_lineage(a, b);
	fx_free(a);
	fx_free(b);
}

/* A refresh under way drops the pass and recomputes everything at once:
 * the head it compares with is the one before the pass. */
static void test_pass_dropped(void **state)
{
	fx *a = fx_new(), *b = fx_new();
	vd_lineage_input in;

	mixed_store(a);
	mixed_store(b);
	a->unscanned = b->unscanned = 1;
	refresh(a, 1);
	refresh(b, 1);
	a->unscanned = b->unscanned = 0;
	first_pass(a, 0, &in);
	first_pass(b, 4, &in);
	assert_false(vd_lineage_pass(&b->core.lineage, &in, &b->core.delta));
	post(a, "s", 5, hx(206), NULL);
	post(b, "s", 5, hx(206), NULL);
	refresh(a, 1);
	refresh(b, 1);
	assert_false(vd_lineage_passing(&b->core.lineage));
	same_lineage(a, b);
	assert_false(b->core.delta.head_changed);
	assert_true(vd_lineage_pass(&b->core.lineage, &in, &b->core.delta));
	assert_int_equal(b->core.delta.n_alerts, 0);
	fx_free(a);
	fx_free(b);
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
		cmocka_unit_test(test_parent_unseen_before_scan),
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
		cmocka_unit_test(test_fork_whole),
		cmocka_unit_test(test_alerts_cleared),
		cmocka_unit_test(test_alert_detail_follows_cause),
		cmocka_unit_test(test_busy_keeps_alerts),
		cmocka_unit_test(test_cycle_broken),
		cmocka_unit_test(test_pass_in_slices),
		cmocka_unit_test(test_pass_in_slices_delta),
		cmocka_unit_test(test_pass_in_slices_model_changes),
		cmocka_unit_test(test_pass_parent_appears_late),
		cmocka_unit_test(test_pass_dropped),
		cmocka_unit_test(test_cycle_order_independent),
	};

	vd_log_set_level(VD_LOG_ERROR);   /* raised and cleared alerts are logged */
	return cmocka_run_group_tests_name("lineage", tests, set_up, tear_down);
}

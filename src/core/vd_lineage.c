/*
 * Commitments, lineage and alerts. A whole pass (at start, and after the
 * configuration changed) computes each hash's chain once from its
 * parent's memoized result: O(artifacts + commitments). Between whole
 * passes, a refresh recomputes only the hashes the model marked dirty and,
 * when what a child reads of a hash changed, its children (through pruned
 * links too): a verdict costs its own chain and the children it changes,
 * not the store. A changed commitment source rebuilds the slots and has
 * every group read its commitment again, but walks only the chains of
 * the groups whose reading changed: a round appended to a ledger costs
 * a lookup per group and the chains it reaches. A walk never visits more
 * than the store holds (a header naming its own descendant is caught as a
 * cycle).
 *
 * A refresh writes nothing but the lineage and the groups' lineage part:
 * the alerts it raised and cleared, in order, and what it recomputed are
 * its result (vd_lineage_delta), which the shell records, publishes and
 * logs.
 *
 * The rules that make an artifact trusted hold under both policies: a
 * counting commitment of its own run names it and nothing opposes it (a
 * round under equivocation is never trusted, whichever side a ledger
 * takes), its chain is intact down to round 0 (or an anchor), never
 * crosses runs, and has no link, present or pruned, that a counting
 * commitment contradicts; and under legacy_policy = untrusted, its
 * header.json is not of an older schema_version (its children's chains
 * pass through it still).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vd_lineage.h"
#include "vd_omsruns.h"

#define SLOT_KEY_MAX (VD_RUN_MAX + 32)
#define GENESIS_RUN "*"            /* the pinned genesis applies to every run */

const char *vd_commit_source_name(vd_commit_source src)
{
	static const char *const names[VD_SRC_COUNT] = { "signed", "ledger", "roundclose",
		"pinned", "oms" };

	return (unsigned)src < VD_SRC_COUNT ? names[src] : "unknown";
}

int vd_commit_counts(const vd_commit_entry *e, vd_commit_source src, int policy)
{
	return e->has && (src != VD_SRC_LEDGER || e->is_signed || policy == VD_POLICY_LEDGER);
}

int64_t vd_group_migrated_from(const vd_group *g)
{
	const vd_hdrinfo *h = g->n > 0 ? &g->copies[0]->hdr : NULL;

	return h != NULL && h->code == VD_OK && h->schema_version < VD_HEADER_SCHEMA_MAX ?
	    h->schema_version : 0;
}

/* Strength for display: signed statements and signed ledger records, then
 * token posts, the pin, and unsigned ledger records last. */
static int rank(const vd_commit_entry *e, vd_commit_source src)
{
	switch (src) {
	case VD_SRC_SIGNED: return 0;
	case VD_SRC_OMS: return 1;
	case VD_SRC_LEDGER: return e->is_signed ? 1 : 4;
	case VD_SRC_ROUNDCLOSE: return 2;
	default: return 3;
	}
}

void vd_lineage_init(vd_lineage *l)
{
	memset(l, 0, sizeof(*l));
	vd_map_init_borrowed(&l->commits);
	vd_map_init(&l->key_ids);
	vd_map_init(&l->oms_where);
	vd_map_init(&l->alerts);
	vd_map_init(&l->named);
	vd_map_init(&l->mems_seen);
	l->head_round = -1;
}

/* ---- commitments ------------------------------------------------------ */

/* "run\nround": looked up once per group whenever a commitment source
 * changes, so written without snprintf. Truncated like snprintf. */
static void slot_key(char *out, size_t n, const char *run, int64_t round)
{
	size_t len = strlen(run);

	if (len + 1 + VD_I64_DIGITS_MAX + 1 > n) {
		snprintf(out, n, "%s\n%lld", run, (long long)round);
		return;
	}
	memcpy(out, run, len);
	out[len++] = '\n';
	len += vd_i64_digits(out + len, round);
	out[len] = '\0';
}

/* While some slots are rebuilt alone, the sources go by the others. */
static int only_has(const vd_lineage *l, const char *run, int64_t round)
{
	size_t i;

	if (round < l->only_min || round > l->only_max)
		return 0;
	for (i = 0; i < l->n_only; i++)
		if (l->only[i].round == round && strcmp(l->only[i].run, run) == 0)
			return 1;
	return 0;
}

static vd_commit_slot *slot(vd_lineage *l, const char *run, int64_t round)
{
	char key[SLOT_KEY_MAX], *tail;
	vd_commit_slot *sl;
	size_t klen, rlen = strlen(run);

	if (l->only_on && !only_has(l, run, round))
		return NULL;
	slot_key(key, sizeof(key), run, round);
	if ((sl = vd_map_get(&l->commits, key)) != NULL)
		return sl;
	/* One allocation: the slot, then its map key and its run. */
	klen = strlen(key);
	if ((sl = calloc(1, sizeof(*sl) + klen + 1 + rlen + 1)) == NULL)
		return NULL;
	tail = (char *)(sl + 1);
	memcpy(tail, key, klen + 1);
	sl->run = memcpy(tail + klen + 1, run, rlen + 1);
	sl->round_index = round;
	if (vd_map_put(&l->commits, tail, sl) < 0) {
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
		free(((vd_commit_slot *)v)->more);
		free(v);
	}
	vd_map_free(&l->commits);       /* still borrowing keys */
	it = 0;
	while (vd_map_next(&l->oms_where, &it, &k, &v))
		free(v);
	vd_map_free(&l->oms_where);
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

/* The slot's own copy of hash, for an entry to point to; NULL out of
 * memory. */
static const char *slot_hash(vd_commit_slot *sl, const char *hash)
{
	size_t i;

	if (strcmp(sl->first_hash, hash) == 0)
		return sl->first_hash;
	if (strcmp(sl->other_hash, hash) == 0)
		return sl->other_hash;
	for (i = 0; i < sl->n_more; i++)
		if (strcmp(sl->more[i], hash) == 0)
			return sl->more[i];
	/* Allocated whole at once: entries point into it. */
	if (sl->more == NULL && (sl->more = calloc(VD_SLOT_MORE_HASHES, sizeof(*sl->more))) == NULL)
		return NULL;
	if (sl->n_more == VD_SLOT_MORE_HASHES)
		return NULL;
	memcpy(sl->more[sl->n_more], hash, VD_HASH_HEX_LEN + 1);
	return sl->more[sl->n_more++];
}

/* One copy of each key id, for the slots: there are a few keys and a
 * slot per round. */
static const char *key_copy(vd_lineage *l, const char *key_id)
{
	char *k;

	if (key_id == NULL || key_id[0] == '\0')
		return "";
	if ((k = vd_map_get(&l->key_ids, key_id)) != NULL)
		return k;
	if ((k = strdup(key_id)) == NULL || vd_map_put(&l->key_ids, key_id, k) < 0) {
		free(k);
		return NULL;
	}
	return k;
}

/* Keep the first entry of a source. Only what counts under the policy is
 * noted, so that a different hash from a counting source is an
 * equivocation and an unsigned record under "signed" never is one
 * (trust.md section 8). */
static void put(vd_lineage *l, vd_commit_slot *sl, vd_commit_source src, const char *hash,
    const char *where, size_t line, const char *key_id, int counts)
{
	vd_commit_entry *e = &sl->src[src];

	if (counts)
		note_hash(sl, hash, where);
	if (e->has || (e->hash = slot_hash(sl, hash)) == NULL ||
	    (e->key_id = key_copy(l, key_id)) == NULL)
		return;
	e->has = 1;
	e->where = where;
	e->line = line;
	e->is_signed = e->key_id[0] != '\0';
}

/* The operator withdrew (run, round) -> hash: no source of it counts. */
static int withdrawn(const vd_lineage_input *in, const char *run, int64_t round,
    const char *hash)
{
	char key[VD_WITHDRAWAL_KEY_MAX];

	if (in->withdrawn == NULL || in->withdrawn->count == 0)
		return 0;
	vd_withdrawal_key(key, sizeof(key), run, round, hash);
	return vd_map_get(in->withdrawn, key) != NULL;
}

int vd_round_mismatch(const vd_model *m, const vd_map *retained, const char *run,
    int64_t round, const char *hash, int64_t *header_round)
{
	const vd_group *g = vd_model_group(m, hash);
	const vd_retained *r;
	size_t i;
	int present = 0;

	/* Only a verified copy speaks for the hash: its header's round is bound
	 * by it. A copy that merely claims the hash proves nothing, or a store
	 * writer could veto any commitment with a directory claiming it. */
	for (i = 0; g != NULL && i < g->n; i++) {
		const vd_copy *c = g->copies[i];
		if (strcmp(c->run, run) != 0)
			continue;
		present = 1;
		if (vd_copy_settled(c) == VD_AS_VERIFIED && c->hdr.round_index != round + 1) {
			if (header_round != NULL)
				*header_round = c->hdr.round_index;
			return 1;
		}
	}
	/* A pruned artifact was verified: removing its directory must not
	 * make a statement naming it for another round count again. While a
	 * copy is in the run, the copies speak (the memory follows them). */
	r = retained != NULL && !present ? vd_map_get(retained, hash) : NULL;
	if (r != NULL && strcmp(r->run, run) == 0 && r->round_index != round + 1) {
		if (header_round != NULL)
			*header_round = r->round_index;
		return 1;
	}
	return 0;
}

/* Whether a RoundClose counts depends on the model too (the round check):
 * each hash a RoundClose names is kept with what the check said, so that
 * a refresh of the model alone rebuilds the slots only when an artifact
 * it names changes that answer. */
typedef struct named_hash {
	const char *run;               /* in the same allocation */
	int64_t round;
	int mismatch;
	int multi;                     /* named for more than one (run, round) */
} named_hash;

static void clear_named(vd_lineage *l)
{
	const char *k;
	void *v;
	size_t it = 0;

	while (vd_map_next(&l->named, &it, &k, &v))
		free(v);
	vd_map_free(&l->named);
}

static void note_named(vd_lineage *l, const char *run, int64_t round, const char *hash,
    int mismatch)
{
	named_hash *n = vd_map_get(&l->named, hash);

	if (n != NULL) {
		n->multi |= n->round != round || strcmp(n->run, run) != 0;
		return;
	}
	if ((n = calloc(1, sizeof(*n) + strlen(run) + 1)) == NULL ||
	    vd_map_put(&l->named, hash, n) < 0) {
		free(n);
		l->named_failed = 1;   /* every model refresh rebuilds the slots */
		return;
	}
	n->run = strcpy((char *)(n + 1), run);
	n->round = round;
	n->mismatch = mismatch;
}

/* A RoundClose counts when nothing withdrew it and it names no artifact
 * of its run whose header says another round. */
static int roundclose_ok(vd_lineage *l, const vd_lineage_input *in, const char *run,
    int64_t round, const char *hash)
{
	int mismatch;

	if (withdrawn(in, run, round, hash))
		return 0;
	mismatch = vd_round_mismatch(in->model, in->retained, run, round, hash, NULL);
	note_named(l, run, round, hash, mismatch);
	return !mismatch;
}

/* Whether a change of the model changes what a RoundClose commits. */
static int named_differs(const vd_lineage_input *in, const named_hash *n, const char *hash)
{
	return n->multi ||
	    vd_round_mismatch(in->model, in->retained, n->run, n->round, hash, NULL) != n->mismatch;
}

/* The model marked too many to list: every hash a commitment names is
 * looked at. */
static int named_any_changed(const vd_lineage *l, const vd_lineage_input *in)
{
	const char *k;
	void *v;
	size_t it = 0;

	while (vd_map_next(&l->named, &it, &k, &v))
		if (named_differs(in, v, k))
			return 1;
	return 0;
}

static int named_changed(const vd_lineage *l, const vd_lineage_input *in)
{
	const named_hash *n;
	const char *k;
	size_t it = 0;

	if (l->named_failed)
		return 1;
	if (vd_model_dirty_all(in->model))
		return named_any_changed(l, in);
	while ((k = vd_model_next_dirty(in->model, &it)) != NULL)
		if ((n = vd_map_get(&l->named, k)) != NULL && named_differs(in, n, k))
			return 1;
	return 0;
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
	int policy = in->policy.commitment;
	vd_commit_slot *sl;

	for (i = 0; i < m->n; i++) {
		const vd_ledger_rec *r = &m->recs[i];
		int is_signed = i < signed_n;
		if (withdrawn(in, m->run, r->round_index, r->hash) ||
		    (sl = slot(l, m->run, r->round_index)) == NULL)
			continue;
		put(l, sl, VD_SRC_LEDGER, r->hash, m->relpath, r->line, is_signed ? key_id : NULL,
		    is_signed || policy == VD_POLICY_LEDGER);
	}
	/* What a rewritten file says now is no commitment under "signed". */
	if (policy != VD_POLICY_LEDGER)
		return;
	for (i = 0; i < m->n_diverged; i++)
		if (!withdrawn(in, m->run, m->diverged[i].round_index, m->diverged[i].hash) &&
		    (sl = slot(l, m->run, m->diverged[i].round_index)) != NULL)
			note_hash(sl, m->diverged[i].hash, m->relpath);
}

static const char *where_copy(vd_lineage *l, const char *relpath)
{
	char *w = vd_map_get(&l->oms_where, relpath);

	if (w != NULL)
		return w;
	if ((w = strdup(relpath)) == NULL || vd_map_put(&l->oms_where, relpath, w) < 0) {
		free(w);
		return "oms";
	}
	return w;
}

int vd_oms_stale(const vd_copy *c, const vd_omskeys *keys)
{
	return c->oms != NULL && strcmp(c->oms->trust, vd_omskeys_digest(keys, c->run)) != 0;
}

int vd_oms_commits(const vd_copy *c, const vd_omskeys *keys)
{
	return c->oms != NULL && c->oms->verified && c->has_verdict && c->code == VD_OK &&
	    c->hdr.code == VD_OK && strcmp(c->oms->trust, vd_omskeys_digest(keys, c->run)) == 0;
}

/* A bundle signs the files of one copy: it commits that copy's hash for
 * the round its header claims, in the run where it lies, and nowhere
 * else (a key of one run is no signer for another). */
static void oms_commits(vd_lineage *l, const vd_lineage_input *in)
{
	const vd_copy *c;
	size_t it = 0;
	vd_commit_slot *sl;

	while ((c = vd_model_next_copy(in->model, &it)) != NULL) {
		int64_t round = c->hdr.round_index - 1;
		if (!vd_oms_commits(c, in->oms_keys) ||
		    withdrawn(in, c->run, round, c->hdr.content_hash) ||
		    (sl = slot(l, c->run, round)) == NULL)
			continue;
		put(l, sl, VD_SRC_OMS, c->hdr.content_hash, where_copy(l, c->relpath), 0,
		    c->oms->key_id, 1);
	}
}

static void add_sources(vd_lineage *l, const vd_lineage_input *in, int oms);

/* About how many slots the sources fill: a ledger's record, a post or a
 * statement each (a slot per round of a run's ledger). */
static size_t sources_size(const vd_lineage_input *in)
{
	const char *k;
	void *v;
	size_t it = 0, n = in->n_posted + in->n_stmts;

	while (vd_map_next(in->mems, &it, &k, &v))
		n += ((const vd_ledger_mem *)v)->n;
	return n;
}

static void build_commits(vd_lineage *l, const vd_lineage_input *in)
{
	clear_commits(l);
	clear_named(l);
	l->named_failed = 0;
	l->n_only = 0;
	/* Room at once for the 16,000 slots of as many rounds, not a table
	 * grown and rehashed a step at a time; out of memory, it grows. */
	(void)vd_map_reserve(&l->commits, sources_size(in));
	add_sources(l, in, 1);
}

/* Every source's entries, into every slot, or (l->only_on) into those;
 * the copies' OMS bundles unless (!oms) none commits anything. */
static void add_sources(vd_lineage *l, const vd_lineage_input *in, int oms)
{
	const char *k;
	void *v;
	vd_commit_slot *sl;
	size_t i, it = 0;

	while (vd_map_next(in->mems, &it, &k, &v))
		ledger_commits(l, in, v);
	for (i = 0; i < in->n_posted; i++) {
		const vd_commitment *c = &in->posted[i];
		int is_signed = c->key_id[0] != '\0';
		if (is_signed && vd_keyring_find(in->keys, c->key_id) == NULL)
			continue;       /* the key was revoked */
		if (roundclose_ok(l, in, c->run, c->round_index, c->hash) &&
		    (sl = slot(l, c->run, c->round_index)) != NULL)
			put(l, sl, is_signed ? VD_SRC_SIGNED : VD_SRC_ROUNDCLOSE, c->hash, "api", 0,
			    c->key_id, 1);
	}
	for (i = 0; i < in->n_stmts; i++) {
		const vd_signed_stmt *s = &in->stmts[i];
		if (s->st.kind == VD_STMT_ROUNDCLOSE && vd_keyring_find(in->keys, s->key_id) != NULL &&
		    roundclose_ok(l, in, s->run, s->st.round_index, s->st.hash) &&
		    (sl = slot(l, s->run, s->st.round_index)) != NULL)
			put(l, sl, VD_SRC_SIGNED, s->st.hash, s->where, 0, s->key_id, 1);
	}
	if (oms)
		oms_commits(l, in);
	for (i = 0; i < in->n_equivs; i++) {
		const vd_commitment *c = &in->equivs[i];
		if (c->key_id[0] != '\0' && vd_keyring_find(in->keys, c->key_id) == NULL)
			continue;       /* the key was revoked */
		if (roundclose_ok(l, in, c->run, c->round_index, c->hash) &&
		    (sl = slot(l, c->run, c->round_index)) != NULL)
			note_hash(sl, c->hash, "api");
	}
	/* Pins: a run's genesis (its own, or the bare one, under "*"), and
	 * anchors, each the commitment of its round and a root. The operator
	 * withdraws a pin by editing the configuration. */
	for (i = 0; i < in->policy.n_genesis; i++)
		if ((sl = slot(l, in->policy.genesis[i].run, -1)) != NULL)
			put(l, sl, VD_SRC_PINNED, in->policy.genesis[i].hash, "config", 0, NULL, 1);
	for (i = 0; i < in->policy.n_anchors; i++) {
		const vd_pin *a = &in->policy.anchors[i];
		if ((sl = slot(l, a->run, a->round_index - 1)) != NULL) {
			put(l, sl, VD_SRC_PINNED, a->hash, "config", 0, NULL, 1);
			sl->anchor = 1;
		}
	}
}

/* A slot's share of the series, counted in (1) or out (-1). */
static void series_add(vd_lineage *l, const vd_commit_slot *sl, int sign)
{
	l->series[VD_CS_SIGNED] += (uint64_t)(sign * sl->src[VD_SRC_SIGNED].has);
	l->series[sl->src[VD_SRC_LEDGER].is_signed ? VD_CS_LEDGER_SIGNED :
	    VD_CS_LEDGER_UNSIGNED] += (uint64_t)(sign * sl->src[VD_SRC_LEDGER].has);
	l->series[VD_CS_ROUNDCLOSE] += (uint64_t)(sign * sl->src[VD_SRC_ROUNDCLOSE].has);
	l->series[VD_CS_PINNED] += (uint64_t)(sign * sl->src[VD_SRC_PINNED].has);
	l->series[VD_CS_OMS] += (uint64_t)(sign * sl->src[VD_SRC_OMS].has);
}

static void count_series(vd_lineage *l)
{
	const char *k;
	void *v;
	size_t it = 0;

	memset(l->series, 0, sizeof(l->series));
	while (vd_map_next(&l->commits, &it, &k, &v))
		series_add(l, v, 1);
}

/* ---- slots rebuilt alone ------------------------------------------------ */

/* What the slots read of one ledger's memory when last built. */
typedef struct mem_seen {
	const vd_ledger_mem *m;
	uint64_t serial;               /* m's: its address may be another's since */
	size_t at;                     /* its place in the map's iteration: the order
	                                * of ledgers sharing a slot */
	size_t n, signed_n;
	const char *key_id;            /* the covering checkpoint's key (key_copy) */
	char last[VD_HASH_HEX_LEN + 1];  /* record_hash of record n - 1 */
	int rewritten;
	size_t n_diverged;
} mem_seen;

static void clear_seen(vd_lineage *l)
{
	const char *k;
	void *v;
	size_t it = 0;

	while (vd_map_next(&l->mems_seen, &it, &k, &v))
		free(v);
	vd_map_free(&l->mems_seen);
	l->in_place_ok = 0;
}

/* Everything but the ledgers' records that the slots are built from,
 * entry pointers included (a statement's file name lives in its array). */
static uint64_t others_sig(const vd_lineage_input *in, size_t *n_oms)
{
	uint64_t h = VD_FNV_BASIS, w = 0;
	int valid;
	const char *k;
	void *v;
	size_t i, it = 0;

	/* The policy by value: a reload may put its pins where the old ones were. */
	h = vd_fnv(h, &in->policy.commitment, sizeof(in->policy.commitment));
	h = vd_fnv(h, &in->policy.legacy, sizeof(in->policy.legacy));
	for (i = 0; i < in->policy.n_genesis; i++)
		h = vd_fnv(h, &in->policy.genesis[i], sizeof(in->policy.genesis[i]));
	h = vd_fnv(h, &in->policy.n_genesis, sizeof(in->policy.n_genesis));
	for (i = 0; i < in->policy.n_anchors; i++)
		h = vd_fnv(h, &in->policy.anchors[i], sizeof(in->policy.anchors[i]));
	h = vd_fnv(h, &in->policy.n_anchors, sizeof(in->policy.n_anchors));
	h = vd_fnv(h, &in->mems->count, sizeof(in->mems->count));
	/* Each list's length ends it: a post is not taken for a refused one. */
	h = vd_fnv(h, &in->n_posted, sizeof(in->n_posted));
	for (i = 0; i < in->n_posted; i++) {
		const vd_commitment *c = &in->posted[i];
		valid = c->key_id[0] == '\0' || vd_keyring_find(in->keys, c->key_id) != NULL;
		h = vd_fnv_str(vd_fnv_str(vd_fnv_str(h, c->run), c->hash), c->key_id);
		h = vd_fnv(vd_fnv(h, &c->round_index, sizeof(c->round_index)), &valid, sizeof(valid));
	}
	for (i = 0; i < in->n_stmts; i++) {
		const vd_signed_stmt *s = &in->stmts[i];
		if (s->st.kind != VD_STMT_ROUNDCLOSE)
			continue;
		valid = vd_keyring_find(in->keys, s->key_id) != NULL;
		h = vd_fnv_str(vd_fnv_str(vd_fnv_str(vd_fnv_str(h, s->run), s->st.hash), s->key_id), s->where);
		h = vd_fnv(vd_fnv(h, &s->st.round_index, sizeof(s->st.round_index)), &valid,
		    sizeof(valid));
		h = vd_fnv(vd_fnv(h, &i, sizeof(i)), &s, sizeof(s));
	}
	h = vd_fnv(h, &in->n_equivs, sizeof(in->n_equivs));
	for (i = 0; i < in->n_equivs; i++) {
		const vd_commitment *c = &in->equivs[i];
		valid = c->key_id[0] == '\0' || vd_keyring_find(in->keys, c->key_id) != NULL;
		h = vd_fnv_str(vd_fnv_str(vd_fnv_str(h, c->run), c->hash), c->key_id);
		h = vd_fnv(vd_fnv(h, &c->round_index, sizeof(c->round_index)), &valid, sizeof(valid));
	}
	while (in->withdrawn != NULL && vd_map_next(in->withdrawn, &it, &k, &v))
		w ^= vd_fnv_str(VD_FNV_BASIS, k);       /* in any order */
	h = vd_fnv(h, &w, sizeof(w));
	it = 0;
	*n_oms = 0;
	while (vd_map_next(&in->model->copies, &it, &k, &v)) {
		const vd_copy *c = v;
		if (c->oms != NULL && vd_oms_commits(c, in->oms_keys)) {
			++*n_oms;
			h = vd_fnv_str(vd_fnv_str(vd_fnv_str(h, k), c->hdr.content_hash), c->oms->key_id);
			h = vd_fnv(h, &c->hdr.round_index, sizeof(c->hdr.round_index));
		}
	}
	return h;
}

/* After a build from every source (or some slots): what it read, and
 * sig, the other sources' others_sig. */
static void note_sources(vd_lineage *l, const vd_lineage_input *in, uint64_t sig)
{
	const char *k, *key_id;
	void *v;
	size_t it = 0, at;
	mem_seen *ms;

	clear_seen(l);
	for (;;) {
		at = it;
		if (!vd_map_next(in->mems, &it, &k, &v))
			break;
		const vd_ledger_mem *m = v;
		if ((ms = calloc(1, sizeof(*ms))) == NULL || vd_map_put(&l->mems_seen, k, ms) < 0) {
			free(ms);
			clear_seen(l);
			return;
		}
		ms->m = m;
		ms->serial = m->serial;
		ms->at = at;
		ms->n = m->n;
		ms->signed_n = covered(in, m, &key_id);
		if ((ms->key_id = key_copy(l, key_id)) == NULL) {
			clear_seen(l);
			return;
		}
		if (m->n > 0)
			memcpy(ms->last, m->recs[m->n - 1].record_hash, sizeof(ms->last));
		ms->rewritten = m->rewritten;
		ms->n_diverged = m->n_diverged;
	}
	l->others_sig = sig;
	l->in_place_ok = 1;
}

/* 0, -E2BIG past VD_SLOTS_IN_PLACE_MAX, or -ENOMEM. */
static int only_add(vd_lineage *l, const char *run, int64_t round)
{
	vd_slot_ref *grown;

	if (only_has(l, run, round))
		return 0;
	if (l->n_only >= VD_SLOTS_IN_PLACE_MAX)
		return -E2BIG;
	if ((grown = vd_grow(l->only, &l->cap_only, l->n_only, sizeof(*grown))) == NULL)
		return -ENOMEM;
	l->only = grown;
	l->only[l->n_only++] = (vd_slot_ref){ run, round };
	if (l->n_only == 1 || round < l->only_min)
		l->only_min = round;
	if (l->n_only == 1 || round > l->only_max)
		l->only_max = round;
	return 0;
}

static int only_records(vd_lineage *l, const vd_ledger_mem *m, size_t from, size_t to)
{
	int rc;

	for (; from < to; from++)
		if ((rc = only_add(l, m->run, m->recs[from].round_index)) < 0)
			return rc;
	return 0;
}

/* Whether the slots can be rebuilt in place or must be built from every
 * source. */
typedef enum slots_plan {
	SLOTS_IN_PLACE,
	SLOTS_BUILD_ALL
} slots_plan;

/* The slots whose ledger records were added or changed signature since
 * the last build, listed, when nothing else changed. */
static slots_plan changed_records(vd_lineage *l, const vd_lineage_input *in)
{
	const char *k, *key_id;
	void *v;
	size_t it = 0, at, signed_n;
	const mem_seen *ms;

	for (;;) {
		at = it;
		if (!vd_map_next(in->mems, &it, &k, &v))
			return SLOTS_IN_PLACE;
		const vd_ledger_mem *m = v;
		if ((ms = vd_map_get(&l->mems_seen, k)) == NULL || ms->m != m || ms->serial != m->serial ||
		    ms->at != at ||
		    m->n < ms->n || m->rewritten != ms->rewritten || m->n_diverged != ms->n_diverged ||
		    m->n_diverged > 0 || (ms->n > 0 && strcmp(m->recs[ms->n - 1].record_hash, ms->last) != 0))
			return SLOTS_BUILD_ALL;
		signed_n = covered(in, m, &key_id);
		if (only_records(l, m, ms->n, m->n) < 0 ||
		    only_records(l, m, strcmp(key_id ? key_id : "", ms->key_id) != 0 ? 0 :
		    (signed_n < ms->signed_n ? signed_n : ms->signed_n),
		    signed_n > ms->signed_n ? signed_n : ms->signed_n) < 0)
			return SLOTS_BUILD_ALL;
	}
}

static int slot_empty(const vd_commit_slot *sl)
{
	int s;

	for (s = 0; s < VD_SRC_COUNT; s++)
		if (sl->src[s].has)
			return 0;
	return sl->first_hash[0] == '\0';
}

static void slot_reset(vd_commit_slot *sl)
{
	memset(sl->src, 0, sizeof(sl->src));
	sl->first_hash[0] = sl->other_hash[0] = '\0';
	free(sl->more);
	sl->more = NULL;
	sl->n_more = 0;
	sl->other_where = NULL;
	sl->anchor = 0;
}

/* Only ledgers grew or got signed: their slots are emptied and filled
 * again by the same pass as a build, which passes the other slots by.
 * SLOTS_BUILD_ALL when every slot must be built instead. */
static slots_plan update_commits(vd_lineage *l, const vd_lineage_input *in)
{
	char key[SLOT_KEY_MAX];
	vd_commit_slot *sl;
	uint64_t sig;
	size_t i, n_oms;
	int gone = 0;

	l->n_only = 0;
	if (!l->in_place_ok || l->named_failed || in->mems->count != l->mems_seen.count ||
	    named_changed(l, in) || (sig = others_sig(in, &n_oms)) != l->others_sig ||
	    changed_records(l, in) == SLOTS_BUILD_ALL) {
		l->n_only = 0;
		return SLOTS_BUILD_ALL;
	}
	for (i = 0; i < l->n_only; i++)
		if ((sl = (vd_commit_slot *)vd_lineage_slot(l, l->only[i].run, l->only[i].round)) != NULL) {
			series_add(l, sl, -1);
			slot_reset(sl);
		}
	l->only_on = 1;
	add_sources(l, in, n_oms > 0);
	l->only_on = 0;
	/* A slot nothing names now is no slot, as in a build; the runs of the
	 * list are the slots' own (the records' runs until here). */
	for (i = 0; i < l->n_only; i++) {
		slot_key(key, sizeof(key), l->only[i].run, l->only[i].round);
		if ((sl = vd_map_get(&l->commits, key)) == NULL) {
			l->only[i].run = NULL;
			continue;
		}
		l->only[i].run = sl->run;
		if (slot_empty(sl)) {
			vd_map_del(&l->commits, key);
			free(sl);
			l->only[i].run = NULL;
			gone = 1;
			continue;
		}
		series_add(l, sl, 1);
	}
	note_sources(l, in, sig);
	l->in_place++;
	/* A slot gone: who read it is not known; every group looks again. */
	l->commits_in_place = !gone;
	return SLOTS_IN_PLACE;
}

/* The commitment for an artifact of a round in a run. */
static const vd_commit_slot *slot_at(const vd_lineage *l, const char *run, int64_t round)
{
	const vd_commit_slot *sl;

	if (round > 0)
		return vd_lineage_slot(l, run, round - 1);
	if ((sl = vd_lineage_slot(l, run, -1)) != NULL)
		return sl;
	return vd_lineage_slot(l, GENESIS_RUN, -1);
}

static const vd_commit_slot *slot_for(const vd_lineage *l, const vd_copy *c)
{
	return slot_at(l, c->run, c->hdr.round_index);
}

/* Whether a counting source of the slot names hash; *mismatch is set when
 * one names another. */
static int slot_names(const vd_commit_slot *sl, const char *hash, int policy, int *mismatch)
{
	int s, names = 0;

	for (s = 0; s < VD_SRC_COUNT; s++) {
		if (!vd_commit_counts(&sl->src[s], (vd_commit_source)s, policy))
			continue;
		if (strcmp(sl->src[s].hash, hash) == 0)
			names = 1;
		else
			*mismatch = 1;
	}
	return names;
}

const vd_commit_entry *vd_slot_entry(const vd_commit_slot *sl, int src)
{
	if (sl == NULL || src < 0 || src >= VD_SRC_COUNT || !sl->src[src].has)
		return NULL;
	return &sl->src[src];
}

/* The entry shown: the strongest that names the hash, else the strongest;
 * -1 when the slot holds only noted hashes (an equivocation's other side). */
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
	int policy = in->policy.commitment;
	size_t i;

	g->commit = NULL;
	g->committed = 0;
	*mismatch = 0;
	for (i = 0; i < g->n; i++) {
		const vd_commit_slot *sl = slot_for(l, g->copies[i]);
		if (sl == NULL)
			continue;
		if (slot_names(sl, g->hash, policy, mismatch) && sl->other_hash[0] == '\0') {
			g->committed = 1;
			g->commit = sl;
		} else if (g->commit == NULL) {
			g->commit = sl;
		}
	}
	g->commit_source = g->commit != NULL ? shown_source(g->commit, g->hash) : -1;
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
	if (p->round_index != child_round - 1)
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

/* A pruned link's commitment as it is now, not as when it was
 * remembered: a counting commitment of its round naming another hash
 * breaks the chains through it, as at a present artifact, and the run's
 * anchor pinning it is a root. */
enum { LINK_MISMATCH = 1, LINK_ANCHOR = 2 };

static int link_read(const vd_lineage *l, const vd_lineage_input *in, const vd_retained *r)
{
	const vd_commit_slot *sl = slot_at(l, r->run, r->round_index);
	int mismatch = 0, names;

	if (sl == NULL)
		return 0;
	names = slot_names(sl, r->hash, in->policy.commitment, &mismatch);
	return (mismatch ? LINK_MISMATCH : 0) |
	    (names && sl->other_hash[0] == '\0' && sl->anchor && sl->src[VD_SRC_PINNED].has &&
	    strcmp(sl->src[VD_SRC_PINNED].hash, r->hash) == 0 ? LINK_ANCHOR : 0);
}

/* A parent neither in the store nor remembered. Until the store has been
 * scanned whole, the scan may not have reached it yet: the chain reads
 * pending (a participant asking while the daemon starts is not told of a
 * break, nor an alert raised); after, it is missing. Returns NULL. */
static vd_group *parent_unseen(const vd_lineage_input *in, vd_group *g, int *pending)
{
	if (!in->scanned)
		*pending = 1;
	else
		add_break(g, g->hash, g->round_index, VD_BREAK_MISSING_PARENT);
	return NULL;
}

/* The parent's directory is gone but it was verified and committed: walk
 * the remembered artifacts (pruned links) to a present ancestor, a root,
 * or a break. Returns the present ancestor to continue through, or NULL. */
static vd_group *through_pruned(const vd_lineage *l, const vd_lineage_input *in, vd_group *g,
    const vd_retained *r, int *pending)
{
	int64_t round = g->round_index;
	const char *run = NULL;
	size_t hops = 0;
	vd_group *p;
	int read;

	for (;;) {
		if (run ? strcmp(run, r->run) != 0 : !vd_group_in_run(g, r->run)) {
			add_break(g, g->hash, g->round_index, VD_BREAK_CROSS_RUN);
			return NULL;
		}
		if (r->round_index != round - 1)
			add_break(g, r->hash, r->round_index, VD_BREAK_ROUND_GAP);
		g->pruned++;
		g->chain_len++;
		read = link_read(l, in, r);
		if (read & LINK_MISMATCH)
			add_break(g, r->hash, r->round_index, VD_BREAK_COMMITMENT_MISMATCH);
		if (read & LINK_ANCHOR) {
			memcpy(g->root, r->hash, sizeof(g->root));
			return NULL;
		}
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
		if (++hops > in->retained->count || (r = retained(in, r->parent)) == NULL)
			return parent_unseen(in, g, pending);
	}
	if (p->mark == 1 || !vd_group_in_run(p, run)) {
		add_break(g, g->hash, g->round_index, p->mark == 1 ? VD_BREAK_MISSING_PARENT :
		    VD_BREAK_CROSS_RUN);
		return NULL;
	}
	return parent_state(g, p, round, pending);
}

/* An anchor is where the operator chose to start trusting a run. */
static int anchored(const vd_group *g)
{
	return g->committed && g->commit->anchor &&
	    strcmp(g->commit->src[VD_SRC_PINNED].hash, g->hash) == 0;
}

/* Everything a chain reads of the group's commitment slots. */
static int read_commitment(const vd_lineage *l, const vd_lineage_input *in, vd_group *g,
    int *mismatch)
{
	group_commitment(l, in, g, mismatch);
	return (g->committed ? 1 : 0) | (*mismatch ? 2 : 0) | (anchored(g) ? 4 : 0);
}

/* g's own links; returns the parent to continue through, or NULL. */
static vd_group *local_links(vd_lineage *l, const vd_lineage_input *in, vd_group *g,
    int *pending)
{
	const vd_retained *r;
	vd_group *p;
	int mismatch;

	g->commit_read = read_commitment(l, in, g, &mismatch);
	g->via_pruned = 0;
	if (mismatch)
		add_break(g, g->hash, g->round_index, VD_BREAK_COMMITMENT_MISMATCH);
	if (anchored(g)) {
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
	    (r = retained(in, g->parent)) != NULL) {
		g->via_pruned = 1;
		return through_pruned(l, in, g, r, pending);
	}
	if (p == NULL)
		return parent_unseen(in, g, pending);
	if (p->mark == 1) {
		add_break(g, g->hash, g->round_index, VD_BREAK_MISSING_PARENT);
		return NULL;
	}
	if (!shares_run(g, p)) {
		add_break(g, g->hash, g->round_index, VD_BREAK_CROSS_RUN);
		return NULL;
	}
	return parent_state(g, p, g->round_index, pending);
}

/* ---- what changed ------------------------------------------------------ */

/* Everything a child's chain reads of its parent: when this changes, the
 * children are recomputed. */
static uint64_t group_sig(const vd_group *g)
{
	uint64_t h = VD_FNV_BASIS;
	int st = (int)vd_group_through(g), chain = (int)g->chain;
	size_t i;

	h = vd_fnv(h, &st, sizeof(st));
	h = vd_fnv(h, &chain, sizeof(chain));
	h = vd_fnv(h, &g->round_index, sizeof(g->round_index));
	h = vd_fnv(h, &g->chain_len, sizeof(g->chain_len));
	h = vd_fnv(h, &g->pruned, sizeof(g->pruned));
	h = vd_fnv(h, &g->breaks_total, sizeof(g->breaks_total));
	h = vd_fnv(h, g->root, strlen(g->root) + 1);
	for (i = 0; i < g->n_breaks; i++) {
		h = vd_fnv(h, g->breaks[i].hash, VD_HASH_HEX_LEN);
		h = vd_fnv(h, &g->breaks[i].round_index, sizeof(g->breaks[i].round_index));
		h = vd_fnv(h, &g->breaks[i].reason, sizeof(g->breaks[i].reason));
	}
	for (i = 0; i < g->n; i++)
		h = vd_fnv(h, g->copies[i]->run, strlen(g->copies[i]->run) + 1);
	return h;
}

/* Out of memory, a hash is not queued: the refresh then falls back to a
 * whole pass (queue_failed). */
static void enqueue(vd_lineage *l, const char *hash)
{
	void *grown;

	if (l->n_queue == l->cap_queue) {
		size_t cap = l->cap_queue ? l->cap_queue * 2 : 64;
		if ((grown = realloc(l->queue, cap * sizeof(*l->queue))) == NULL) {
			l->queue_failed = 1;
			return;
		}
		l->queue = grown;
		l->cap_queue = cap;
	}
	memcpy(l->queue[l->n_queue++], hash, VD_HASH_HEX_LEN + 1);
}

static void note_touched(vd_lineage *l, vd_group *g)
{
	void *grown;

	if (l->n_touched == l->cap_touched) {
		size_t cap = l->cap_touched ? l->cap_touched * 2 : 64;
		if ((grown = realloc(l->touched, cap * sizeof(*l->touched))) == NULL) {
			l->queue_failed = 1;
			return;
		}
		l->touched = grown;
		l->cap_touched = cap;
	}
	l->touched[l->n_touched++] = g;
}

/* The chains that read hash: its children, and the children of the
 * pruned links that name it (queued as hashes to look through). */
static void queue_dependents(vd_lineage *l, const vd_lineage_input *in, const char *hash)
{
	const vd_retained *r;
	vd_group *c;

	for (c = vd_model_first_child(in->model, hash); c != NULL; c = c->next_child)
		if (c->mark == 2) {
			c->mark = 0;
			enqueue(l, c->hash);
		}
	if (in->retained_children == NULL)
		return;
	for (r = vd_map_get(in->retained_children, hash); r != NULL; r = r->next_child)
		if (vd_model_group(in->model, r->hash) == NULL)
			enqueue(l, r->hash);
}

static void inherit(vd_lineage *l, const vd_lineage_input *in, vd_group *g, const vd_group *p,
    int pending)
{
	uint64_t sig;
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
	g->legacy_untrusted = in->policy.legacy == VD_LEGACY_UNTRUSTED &&
	    vd_group_migrated_from(g) > 0;
	g->trusted = vd_trust_reason(g, vd_group_state(g)) == NULL;
	g->mark = 2;
	g->computed = in->model->change_gen;
	sig = group_sig(g);
	if (!l->whole) {
		note_touched(l, g);
		if (sig != g->sig)
			queue_dependents(l, in, g->hash);
	}
	g->sig = sig;
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
		path[n].g = g;
		path[n].pending = 0;
		path[n].next = local_links(l, in, g, &path[n].pending);
		g = path[n++].next;
	}
	while (n > 0) {
		n--;
		inherit(l, in, path[n].g, path[n].next, path[n].pending);
	}
	free(path);
}

/* A group's place in a whole pass: by round, then by hash (its first
 * bytes, then all of it), an order of the content alone. */
typedef struct vd_pass_ent {
	int64_t round;
	uint64_t prefix;
	vd_group *g;
} pass_ent;

static int pass_cmp(const void *a, const void *b)
{
	const pass_ent *x = a, *y = b;

	if (x->round != y->round)
		return x->round < y->round ? -1 : 1;
	if (x->prefix != y->prefix)
		return x->prefix < y->prefix ? -1 : 1;
	return strcmp(x->g->hash, y->g->hash);
}

static uint64_t hash_prefix(const char *hash)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = v << 8 | (unsigned char)hash[i];
	return v;
}

/* The groups left to compute (mark 0), by round; NULL out of memory. */
static pass_ent *by_pass_order(const vd_model *m, size_t *n)
{
	pass_ent *order = malloc((vd_model_group_count(m) + 1) * sizeof(*order));
	vd_group *g;
	size_t it = 0;

	*n = 0;
	if (order == NULL)
		return NULL;
	while ((g = vd_model_next_group(m, &it)) != NULL)
		if (g->mark == 0)
			order[(*n)++] = (pass_ent){ g->round_index, hash_prefix(g->hash), g };
	qsort(order, *n, sizeof(*order), pass_cmp);
	return order;
}

/* Out of memory for the order: the map's. */
static void compute_unordered(vd_lineage *l, const vd_lineage_input *in)
{
	vd_group *g;
	size_t it = 0;

	while ((g = vd_model_next_group(in->model, &it)) != NULL)
		if (g->mark == 0)
			compute_chain(l, in, g);
}

/* Walked by round: a parent is most often the group just computed,
 * still in the cache, where the map's order is the order of no memory
 * (a whole pass over 16,000 rounds waits on the memory more than it
 * computes). */
static void compute_chains(vd_lineage *l, const vd_lineage_input *in)
{
	pass_ent *order;
	vd_group *g;
	size_t it = 0, n, i;

	while ((g = vd_model_next_group(in->model, &it)) != NULL)
		g->mark = 0;
	if ((order = by_pass_order(in->model, &n)) == NULL) {
		compute_unordered(l, in);
		return;
	}
	for (i = 0; i < n; i++)
		if (order[i].g->mark == 0)
			compute_chain(l, in, order[i].g);
	free(order);
}

/* Gone hashes first, then the groups by round: parents before children,
 * so that a chain changed by several verdicts is recomputed once. */
static int by_round(const void *a, const void *b)
{
	const vd_group *x = *(const vd_group *const *)a, *y = *(const vd_group *const *)b;

	return (x->round_index > y->round_index) - (x->round_index < y->round_index);
}

static void queue_dirty(vd_lineage *l, const vd_lineage_input *in)
{
	vd_group **gs, *g;
	const char *k;
	size_t n = 0, i, it = 0;

	if ((gs = malloc((vd_model_dirty_count(in->model) + 1) * sizeof(*gs))) == NULL) {
		l->queue_failed = 1;
		return;
	}
	while ((k = vd_model_next_dirty(in->model, &it)) != NULL) {
		if ((g = vd_model_group(in->model, k)) == NULL) {
			enqueue(l, k);
			continue;
		}
		g->mark = 0;
		gs[n++] = g;
	}
	qsort(gs, n, sizeof(*gs), by_round);
	for (i = 0; i < n; i++)
		enqueue(l, gs[i]->hash);
	free(gs);
}

/* Whether a copy of g reads a slot rebuilt alone (slot_at: the round
 * before its own, or a genesis slot, its run's or "*"). */
static int reads_rebuilt(const vd_lineage *l, const vd_group *g)
{
	size_t i, j;

	for (i = 0; i < g->n; i++) {
		const vd_copy *c = g->copies[i];
		int64_t round = c->hdr.round_index > 0 ? c->hdr.round_index - 1 : -1;
		if (round < l->only_min || round > l->only_max)
			continue;
		for (j = 0; j < l->n_only; j++)
			if (l->only[j].round == round && l->only[j].run != NULL &&
			    (strcmp(l->only[j].run, c->run) == 0 || strcmp(l->only[j].run, GENESIS_RUN) == 0))
				return 1;
	}
	return 0;
}

/* The slots were rebuilt: every group reads its commitment again (the
 * slots it pointed to are gone), and those whose reading changed are
 * queued, with those whose chains go on through pruned links (one per
 * run and cut, walking only the links). O(groups) lookups, no chain
 * walked for the others. After some slots were rebuilt alone, only the
 * groups that read them look again (the others' slots stand). */
static void queue_recommitted(vd_lineage *l, const vd_lineage_input *in)
{
	vd_group **gs = NULL, **grown, *g;
	size_t it = 0, n = 0, cap = 0, i;
	int mismatch;

	while ((g = vd_model_next_group(in->model, &it)) != NULL) {
		if (l->commits_in_place && !g->via_pruned && !reads_rebuilt(l, g))
			continue;
		if ((read_commitment(l, in, g, &mismatch) == g->commit_read && !g->via_pruned) ||
		    g->mark != 2)
			continue;       /* unchanged, or queued already */
		if ((grown = vd_grow(gs, &cap, n, sizeof(*gs))) == NULL) {
			l->queue_failed = 1;
			break;
		}
		gs = grown;
		g->mark = 0;
		gs[n++] = g;
	}
	if (n > 0)
		qsort(gs, n, sizeof(*gs), by_round);
	for (i = 0; i < n; i++)
		enqueue(l, gs[i]->hash);
	free(gs);
}

/* The dirty hashes (and, after the slots changed, the groups whose
 * commitment changed) and what depends on them. A group recomputed too
 * often means a cycle of headers: 0 then, and the caller does a whole
 * pass. */
static int update_chains(vd_lineage *l, const vd_lineage_input *in, int commits)
{
	size_t limit = 8 * (vd_model_group_count(in->model) + vd_model_dirty_count(in->model)) +
	    1024, i;
	vd_group *g;
	int ok = 1;

	l->n_queue = l->n_touched = 0;
	l->queue_failed = 0;
	queue_dirty(l, in);
	if (commits)
		queue_recommitted(l, in);
	for (i = 0; i < l->n_queue && !l->queue_failed; i++) {
		if (i > limit) {
			ok = 0;
			break;
		}
		/* A gone hash is looked through each time it is queued: each
		 * time, something above it changed. */
		if ((g = vd_model_group(in->model, l->queue[i])) == NULL) {
			queue_dependents(l, in, l->queue[i]);
		} else if (g->mark == 0) {
			compute_chain(l, in, g);
		}
	}
	return ok && !l->queue_failed;
}

/* ---- heads ------------------------------------------------------------ */

static void set_head(vd_lineage *l, const vd_group *g)
{
	const char *run = g->copies[0]->run;
	size_t i;

	l->head_round = g->round_index;
	memcpy(l->head_hash, g->hash, sizeof(l->head_hash));
	for (i = 1; i < g->n; i++)
		if (strcmp(g->copies[i]->run, run) < 0)
			run = g->copies[i]->run;
	snprintf(l->head_run_buf, sizeof(l->head_run_buf), "%s", run);
	l->head_run = l->head_run_buf;
}

/* A head as saved (hash "": none). */
static void set_head_to(vd_lineage *l, int64_t round, const char *hash, const char *run)
{
	l->head_round = hash[0] ? round : -1;
	snprintf(l->head_hash, sizeof(l->head_hash), "%s", hash);
	snprintf(l->head_run_buf, sizeof(l->head_run_buf), "%s", run);
	l->head_run = hash[0] ? l->head_run_buf : NULL;
}

static void consider_head(vd_lineage *l, const vd_group *g)
{
	if (g->trusted && (g->round_index > l->head_round ||
	    (g->round_index == l->head_round && strcmp(g->hash, l->head_hash) < 0)))
		set_head(l, g);
}

static void compute_head(vd_lineage *l, const vd_lineage_input *in)
{
	const vd_group *g;
	size_t it = 0;

	l->head_round = -1;
	l->head_hash[0] = '\0';
	l->head_run = NULL;
	while ((g = vd_model_next_group(in->model, &it)) != NULL)
		consider_head(l, g);
}

/* The head moves forward with the groups recomputed; back (a whole look)
 * only when the head itself stopped being trusted. */
static void update_head(vd_lineage *l, const vd_lineage_input *in)
{
	const vd_group *hg = l->head_hash[0] ? vd_model_group(in->model, l->head_hash) : NULL;
	size_t i;

	if (l->head_hash[0] && (hg == NULL || !hg->trusted)) {
		compute_head(l, in);
		return;
	}
	if (hg != NULL)
		set_head(l, hg);      /* its copies may have moved */
	for (i = 0; i < l->n_touched; i++)
		consider_head(l, l->touched[i]);
}

/* ---- alerts ----------------------------------------------------------- */

static void alert_free(vd_alert *a)
{
	free(a->subject);
	free(a->detail);
	free(a);
}

/* Each alert is handed to the shell once when raised and once when
 * cleared, as the set changes: -ENOMEM when the delta cannot take it, and
 * then the set does not change either. */
static int note_change(vd_lineage *l, const vd_alert *a, int raised)
{
	vd_lineage_delta *d = l->out;
	vd_alert_change *grown, *ch;

	if ((grown = vd_grow(d->alerts, &d->cap_alerts, d->n_alerts, sizeof(*grown))) == NULL)
		return -ENOMEM;
	d->alerts = grown;
	ch = &d->alerts[d->n_alerts];
	ch->kind = a->kind;
	ch->raised = raised;
	ch->subject = strdup(a->subject);
	ch->detail = strdup(a->detail);
	if (ch->subject == NULL || ch->detail == NULL) {
		free(ch->subject);
		free(ch->detail);
		return -ENOMEM;
	}
	d->n_alerts++;
	if (raised)
		l->alert_counts[a->kind]++;
	else
		l->alert_counts[a->kind]--;
	return 0;
}

static void alert_key(char *key, size_t n, int kind, const char *subject)
{
	snprintf(key, n, "%s\n%s", vd_alert_name((vd_alert_kind)kind), subject);
}

/* Raise (on) or clear (!on) one alert. A whole pass only raises: what it
 * did not raise again is cleared at its end. */
static void alert_put(vd_lineage *l, int kind, const char *subject, int on,
    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void alert_put(vd_lineage *l, int kind, const char *subject, int on,
    const char *fmt, ...)
{
	char key[SLOT_KEY_MAX + 64], detail[512], *text;
	vd_alert *a;
	va_list ap;

	/* Nothing raised, nothing to clear: most refreshes of a sound store
	 * clear four alerts a hash they look at, none of them raised. */
	if (!on && (l->whole || l->alerts.count == 0))
		return;
	alert_key(key, sizeof(key), kind, subject);
	a = vd_map_get(&l->alerts, key);
	if (!on) {
		if (a != NULL && note_change(l, a, 0) == 0) {
			vd_map_del(&l->alerts, key);
			alert_free(a);
		}
		return;
	}
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	if (a != NULL) {
		/* Still raised: the detail follows the cause, without a new
		 * raise logged. */
		a->seen = 1;
		if (strcmp(a->detail, detail) != 0 && (text = strdup(detail)) != NULL) {
			free(a->detail);
			a->detail = text;
		}
		return;
	}
	if ((a = calloc(1, sizeof(*a))) == NULL)
		return;
	a->kind = kind;
	a->seen = 1;
	a->subject = strdup(subject);
	a->detail = strdup(detail);
	if (a->subject == NULL || a->detail == NULL || vd_map_put(&l->alerts, key, a) < 0) {
		alert_free(a);
		return;
	}
	if (note_change(l, a, 1) < 0) {
		vd_map_del(&l->alerts, key);
		alert_free(a);
	}
}

/* A stale or forged bundle: its manifest disagrees with the files,
 * whoever signed it. */
static void oms_alert(vd_lineage *l, const vd_copy *c, const char *relpath)
{
	int on = c != NULL && c->oms != NULL && c->oms->differ;

	alert_put(l, VD_ALERT_OMS_MISMATCH, relpath, on, "%s: its OMS bundle does not "
	    "describe its files: %s", relpath, on ? c->oms->detail : "");
}

static void copy_alert(vd_lineage *l, const vd_lineage_input *in, const char *relpath)
{
	const vd_copy *c = vd_model_copy(in->model, relpath);
	int on = c != NULL && vd_copy_settled(c) == VD_AS_FAILED;

	oms_alert(l, c, relpath);

	alert_put(l, VD_ALERT_ARTIFACT_FAILED, relpath, on, "%s (claims %s): %s: %s",
	    relpath, c == NULL ? "" : c->hdr.code == VD_OK ? c->hdr.content_hash : "no valid header",
	    c == NULL ? "" : vd_code_name(c->code), c == NULL ? "" : VD_COPY_TEXT(c->detail));
}

/* A fork: two verified artifacts naming one verified parent. */
static void fork_alert(vd_lineage *l, const vd_lineage_input *in, const char *hash)
{
	const vd_group *p = vd_model_group(in->model, hash), *c;
	size_t n = 0;

	if (p != NULL && vd_group_settled(p) == VD_AS_VERIFIED)
		for (c = vd_model_first_child(in->model, hash); c != NULL; c = c->next_child)
			n += vd_group_settled(c) == VD_AS_VERIFIED;
	alert_put(l, VD_ALERT_FORK, hash, n >= 2,
	    "%zu verified artifacts name %s as their parent", n, hash);
}

static int own_mismatch(const vd_group *g)
{
	size_t i;

	for (i = 0; i < g->n_breaks; i++)
		if (g->breaks[i].reason == VD_BREAK_COMMITMENT_MISMATCH &&
		    strcmp(g->breaks[i].hash, g->hash) == 0)
			return 1;
	return 0;
}

static void group_alerts(vd_lineage *l, const vd_lineage_input *in, const char *hash)
{
	const vd_group *g = vd_model_group(in->model, hash);
	int broken = g != NULL && vd_group_settled(g) == VD_AS_VERIFIED &&
	    g->chain == VD_CHAIN_BROKEN && g->n_breaks > 0;

	alert_put(l, VD_ALERT_COMMITMENT_MISMATCH, hash, g != NULL && own_mismatch(g),
	    "%s (round %lld, %s) is not the hash committed for its round", hash,
	    g ? (long long)g->round_index : -1LL, g ? g->copies[0]->relpath : "");
	alert_put(l, VD_ALERT_CHAIN_BROKEN, hash, broken, "%s (round %lld, %s): %s at %s",
	    hash, g ? (long long)g->round_index : -1LL, g ? g->copies[0]->relpath : "",
	    broken ? vd_break_name(g->breaks[0].reason) : "", broken ? g->breaks[0].hash : "");
	fork_alert(l, in, hash);
	if (g != NULL && g->has_parent)
		fork_alert(l, in, g->parent);
}

/* A whole pass only raises (what it does not raise again is cleared at
 * its end): a group's own alerts from what it holds, without a lookup.
 * A fork has at least two children, so one of them has a sibling after
 * it: the first of the parent's list, which is the one that asks. */
static void group_alerts_whole(vd_lineage *l, const vd_lineage_input *in, const vd_group *g)
{
	if (own_mismatch(g))
		alert_put(l, VD_ALERT_COMMITMENT_MISMATCH, g->hash, 1,
		    "%s (round %lld, %s) is not the hash committed for its round", g->hash,
		    (long long)g->round_index, g->copies[0]->relpath);
	if (g->chain == VD_CHAIN_BROKEN && g->n_breaks > 0 && vd_group_settled(g) == VD_AS_VERIFIED)
		alert_put(l, VD_ALERT_CHAIN_BROKEN, g->hash, 1, "%s (round %lld, %s): %s at %s",
		    g->hash, (long long)g->round_index, g->copies[0]->relpath,
		    vd_break_name(g->breaks[0].reason), g->breaks[0].hash);
	if (g->has_parent && g->next_child != NULL &&
	    vd_model_first_child(in->model, g->parent) == g)
		fork_alert(l, in, g->parent);
}

static void ledger_alerts(vd_lineage *l, const vd_lineage_input *in)
{
	const char *k;
	void *v;
	size_t i, it = 0;

	for (i = 0; i < in->n_ledgers; i++) {
		const vd_scan_ledger *lg = &in->ledgers[i];
		if (!lg->read_ok)
			alert_put(l, VD_ALERT_LEDGER_BROKEN, lg->relpath, 1, "%s", lg->read_error);
		else if (lg->result.brk != VD_LEDGER_INTACT)
			alert_put(l, VD_ALERT_LEDGER_BROKEN, lg->relpath, 1, "%s: %s at %s",
			    lg->relpath, vd_ledger_break_name(lg->result.brk), lg->result.break_detail);
	}
	while (vd_map_next(in->mems, &it, &k, &v)) {
		const vd_ledger_mem *m = v;
		if (m->rewritten)
			alert_put(l, VD_ALERT_LEDGER_REWRITTEN, m->relpath, 1, "%s: %s", m->relpath,
			    m->detail);
	}
}

static void equivocation_alerts(vd_lineage *l)
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
		alert_put(l, VD_ALERT_EQUIVOCATION, subject, 1,
		    "run %s round %lld: commitments name both %s and %s (%s); no artifact of that round is trusted",
		    vd_run_name(sl->run), (long long)sl->round_index, sl->first_hash, sl->other_hash,
		    sl->other_where ? sl->other_where : "?");
	}
}

/* What a whole pass did not raise again is cleared, a batch at a time
 * (the map cannot change under its iterator). */
static void clear_unseen(vd_lineage *l)
{
	char *gone[64];
	const char *k;
	void *v;
	vd_alert *a;
	size_t it, n, i;

	do {
		n = 0;
		it = 0;
		while (n < VD_ARRAY_LEN(gone) && vd_map_next(&l->alerts, &it, &k, &v))
			if (!((vd_alert *)v)->seen && (gone[n] = strdup(k)) != NULL)
				n++;
		for (i = 0; i < n; i++) {
			/* Out of memory, it stays raised until the next pass. */
			if ((a = vd_map_get(&l->alerts, gone[i])) != NULL && note_change(l, a, 0) < 0)
				a->seen = 1;
			else if ((a = vd_map_del(&l->alerts, gone[i])) != NULL)
				alert_free(a);
			free(gone[i]);
		}
	} while (n == VD_ARRAY_LEN(gone));
}

/* The alerts of the commitment sources alone (ledgers, their memory,
 * equivocations), after the slots changed: raised again, or cleared. */
static void commit_alerts(vd_lineage *l, const vd_lineage_input *in)
{
	const char *k;
	void *v;
	size_t it = 0;

	while (vd_map_next(&l->alerts, &it, &k, &v)) {
		vd_alert *a = v;
		if (a->kind == VD_ALERT_LEDGER_BROKEN || a->kind == VD_ALERT_LEDGER_REWRITTEN ||
		    a->kind == VD_ALERT_EQUIVOCATION)
			a->seen = 0;
	}
	ledger_alerts(l, in);
	equivocation_alerts(l);
	clear_unseen(l);
}

static void whole_alerts(vd_lineage *l, const vd_lineage_input *in)
{
	const vd_copy *c;
	const vd_group *g;
	const char *k;
	void *v;
	size_t it = 0;

	while (vd_map_next(&l->alerts, &it, &k, &v))
		((vd_alert *)v)->seen = 0;
	it = 0;
	while ((c = vd_model_next_copy(in->model, &it)) != NULL)
		if (vd_copy_settled(c) == VD_AS_FAILED || c->oms != NULL)
			copy_alert(l, in, c->relpath);
	it = 0;
	while ((g = vd_model_next_group(in->model, &it)) != NULL)
		group_alerts_whole(l, in, g);
	ledger_alerts(l, in);
	equivocation_alerts(l);
	clear_unseen(l);
	/* Every alert was just looked at: the history's open episodes that no
	 * longer hold, left by an earlier run of the daemon, end now. */
	l->out->settled = in->scanned;
}

/* The alerts of what changed: the copies marked and the hashes queued
 * (ledger and equivocation alerts change only with commitment sources,
 * in whole passes). The groups recomputed are among the hashes queued: a
 * walk goes on only into a group marked to compute, and only a group
 * queued (or new, and so dirty, and so queued) is; looked at once, not
 * again (a refresh after a burst of verdicts queues thousands). */
static void update_alerts(vd_lineage *l, const vd_lineage_input *in)
{
	const char *k;
	size_t it = 0, i;

	while ((k = vd_model_next_dirty_copy(in->model, &it)) != NULL)
		copy_alert(l, in, k);
	for (i = 0; i < l->n_queue; i++)
		group_alerts(l, in, l->queue[i]);
}

/* ---- refresh ---------------------------------------------------------- */

static void refresh_whole(vd_lineage *l, const vd_lineage_input *in)
{
	l->whole = 1;
	l->whole_owed = 0;
	l->n_touched = l->n_queue = 0;
	compute_chains(l, in);
	compute_head(l, in);
	whole_alerts(l, in);
}

/* ---- a whole pass in slices ------------------------------------------- */

/* Not computed yet: read as pending, trusting and committing nothing, and
 * pointing at no slot (the slots were just rebuilt). */
static void pass_reset(vd_group *g)
{
	g->mark = 0;
	g->chain = VD_CHAIN_PENDING;
	g->chain_len = 1;
	g->pruned = 0;
	g->root[0] = '\0';
	g->n_breaks = g->breaks_total = 0;
	g->commit = NULL;
	g->commit_source = -1;
	g->committed = 0;
	g->trusted = 0;
}

static void pass_begin(vd_lineage *l, const vd_lineage_input *in)
{
	vd_group *g;
	size_t it = 0;

	l->whole = 1;
	l->whole_owed = 0;
	l->n_touched = l->n_queue = 0;
	while ((g = vd_model_next_group(in->model, &it)) != NULL)
		pass_reset(g);
	l->pass_head_round = l->head_round;
	memcpy(l->pass_head_hash, l->head_hash, sizeof(l->pass_head_hash));
	snprintf(l->pass_head_run, sizeof(l->pass_head_run), "%s", l->head_run ? l->head_run : "");
	l->head_round = -1;
	l->head_hash[0] = '\0';
	l->head_run = NULL;
	l->pass_order = NULL;
	l->pass_n = l->pass_next = 0;
	l->pass_looked = in->model->change_gen;
	l->passing = 1;
}

/* The head as it was before the pass, as if the pass had never begun. */
static void pass_drop(vd_lineage *l)
{
	free(l->pass_order);
	l->pass_order = NULL;
	l->pass_n = l->pass_next = 0;
	l->passing = l->pass_in_place = 0;
	l->whole_owed = 1;
	set_head_to(l, l->pass_head_round, l->pass_head_hash, l->pass_head_run);
}

/* Up to *budget more chains; 1 when none is left. Groups made or freed
 * since the order was listed: the order is listed again (those computed
 * left out), its pointers being of groups that may be gone. */
static int pass_chains(vd_lineage *l, const vd_lineage_input *in, size_t *budget)
{
	vd_group *g;

	if (l->pass_order == NULL || l->pass_gen != in->model->groups_gen) {
		free(l->pass_order);
		l->pass_next = 0;
		l->pass_gen = in->model->groups_gen;
		if ((l->pass_order = by_pass_order(in->model, &l->pass_n)) == NULL) {
			compute_unordered(l, in);
			return 1;
		}
	}
	while (l->pass_next < l->pass_n && *budget > 0) {
		g = l->pass_order[l->pass_next++].g;
		if (g->mark == 0) {
			compute_chain(l, in, g);
			(*budget)--;
		}
	}
	return l->pass_next == l->pass_n;
}

/* A group that changed while the pass went on may have been computed
 * after children that read it as it was (a parent that appeared after
 * them): the refresh after the pass recomputes it, and its signature,
 * taken as its slice read it, is forgotten so that its dependents follow
 * whether or not it reads differently then. */
static void pass_forget_changed(const vd_lineage_input *in)
{
	vd_group *g;
	const char *k;
	size_t it = 0;

	while ((k = vd_model_next_dirty(in->model, &it)) != NULL)
		if ((g = vd_model_group(in->model, k)) != NULL)
			g->sig = ~g->sig;
}

/* What a group grants as it reads: to itself (trusted, committed) or to
 * the chains of its children (an intact chain); one a pass has not
 * computed yet reads pending (a first pass) or as last computed (a pass
 * in place). One that grants nothing reads no worse than it is, however
 * it changed. */
static int grants(const vd_group *g)
{
	return g->trusted || g->committed || g->chain == VD_CHAIN_INTACT;
}

typedef struct group_stack {
	vd_group **v;
	size_t n, cap;
	int failed;
} group_stack;

static void stack_push(group_stack *st, vd_group *g)
{
	vd_group **grown;

	if (st->n == st->cap) {
		if ((grown = vd_grow(st->v, &st->cap, st->n, sizeof(*grown))) == NULL) {
			st->failed = 1;
			return;
		}
		st->v = grown;
	}
	st->v[st->n++] = g;
}

/* g, and every descendant whose chain g's grants reached, read pending
 * again, for the pass to compute anew. */
static void pass_undo(const vd_lineage_input *in, group_stack *st, vd_group *g)
{
	vd_group *ch;

	stack_push(st, g);
	while (st->n > 0 && !st->failed) {
		g = st->v[--st->n];
		if (!grants(g))
			continue;
		pass_reset(g);
		for (ch = vd_model_first_child(in->model, g->hash); ch != NULL; ch = ch->next_child)
			stack_push(st, ch);
	}
}

static int changed_since(const vd_group *g)
{
	return g != NULL && g->changed > g->computed && grants(g);
}

/* The head as it stands, or none when it no longer grants (taken back). */
static void keep_head_if_trusted(vd_lineage *l, const vd_lineage_input *in)
{
	const vd_group *g = l->head_hash[0] ? vd_model_group(in->model, l->head_hash) : NULL;

	if (g != NULL && g->trusted)
		return;
	l->head_round = -1;
	l->head_hash[0] = '\0';
	l->head_run = NULL;
}

static void pass_begin_in_place(vd_lineage *l, const vd_lineage_input *in)
{
	group_stack st = { NULL, 0, 0, 0 };
	vd_group *g;
	size_t it = 0;

	while ((g = vd_model_next_group(in->model, &it)) != NULL)
		if (changed_since(g))
			pass_undo(in, &st, g);
	free(st.v);
	it = 0;
	while ((g = vd_model_next_group(in->model, &it)) != NULL) {
		if (st.failed)
			pass_reset(g);      /* out of memory for the walk: nothing grants */
		g->mark = 0;
	}
	l->whole = 1;
	l->whole_owed = 0;
	l->n_touched = l->n_queue = 0;
	l->pass_head_round = l->head_round;
	memcpy(l->pass_head_hash, l->head_hash, sizeof(l->pass_head_hash));
	snprintf(l->pass_head_run, sizeof(l->pass_head_run), "%s", l->head_run ? l->head_run : "");
	keep_head_if_trusted(l, in);
	l->pass_order = NULL;
	l->pass_n = l->pass_next = 0;
	l->pass_looked = in->model->change_gen;
	l->passing = l->pass_in_place = 1;
}

int vd_lineage_pass_changed(vd_lineage *l, const vd_lineage_input *in)
{
	group_stack st = { NULL, 0, 0, 0 };
	vd_group *g;
	const char *k;
	size_t it = 0;
	int undone = 0;

	if (!l->passing)
		return 0;
	if (named_changed(l, in))
		return 1;
	/* Every reader's catch-up asks during a pass; the walk below is of
	 * every group once the model marked too many, and finds only what a
	 * stamp since its last look changed. */
	if (in->model->change_gen == l->pass_looked)
		return 0;
	l->pass_looked = in->model->change_gen;
	if (vd_model_dirty_all(in->model)) {
		while ((g = vd_model_next_group(in->model, &it)) != NULL)
			if (changed_since(g)) {
				pass_undo(in, &st, g);
				undone = 1;
			}
	}
	while (!vd_model_dirty_all(in->model) && (k = vd_model_next_dirty(in->model, &it)) != NULL) {
		if (changed_since(g = vd_model_group(in->model, k))) {
			pass_undo(in, &st, g);
			undone = 1;
		}
		for (g = vd_model_first_child(in->model, k); g != NULL; g = g->next_child)
			if (changed_since(g)) {
				pass_undo(in, &st, g);
				undone = 1;
			}
	}
	free(st.v);
	/* Out of memory for the walk: the pass begins again. */
	if (st.failed) {
		it = 0;
		while ((g = vd_model_next_group(in->model, &it)) != NULL)
			pass_reset(g);
	}
	/* The order lists only what was left to compute: listed again. */
	if (undone || st.failed) {
		free(l->pass_order);
		l->pass_order = NULL;
		l->pass_n = l->pass_next = 0;
	}
	/* A head a pass in place kept may have been taken back, or its group
	 * made anew. */
	keep_head_if_trusted(l, in);
	return 0;
}

int vd_lineage_passing(const vd_lineage *l)
{
	return l->passing;
}

int vd_lineage_pass_in_place(const vd_lineage *l)
{
	return l->passing && l->pass_in_place;
}

int vd_lineage_pass(vd_lineage *l, const vd_lineage_input *in, vd_lineage_delta *out)
{
	size_t budget = in->slice > 0 ? in->slice : SIZE_MAX;

	vd_lineage_delta_clear(out);
	if (!l->passing)
		return 1;
	/* The head and the alerts read every chain: a slice of their own
	 * when the chains took this one's budget. A pass in place may have
	 * found the head it kept no longer trusted. */
	if (!pass_chains(l, in, &budget) || budget == 0) {
		if (l->pass_in_place)
			keep_head_if_trusted(l, in);
		return 0;
	}
	free(l->pass_order);
	l->pass_order = NULL;
	l->pass_n = l->pass_next = 0;
	l->passing = l->pass_in_place = 0;
	pass_forget_changed(in);
	l->out = out;
	compute_head(l, in);
	whole_alerts(l, in);
	l->out = NULL;
	out->whole = 1;
	out->touched = l->touched;
	out->head_changed = l->pass_head_round != l->head_round ||
	    strcmp(l->pass_head_hash, l->head_hash) != 0 ||
	    strcmp(l->pass_head_run, l->head_run ? l->head_run : "") != 0;
	return 1;
}

static void refresh(vd_lineage *l, const vd_lineage_input *in, vd_refresh what)
{
	int commits = what != VD_REFRESH_MODEL || (l->built && named_changed(l, in));
	size_t n_oms;

	l->commits_in_place = 0;
	if (commits || !l->built)
		l->slots_gen++;
	if ((commits || !l->built) &&
	    (!l->built || what == VD_REFRESH_WHOLE || update_commits(l, in) == SLOTS_BUILD_ALL)) {
		build_commits(l, in);
		count_series(l);
		note_sources(l, in, others_sig(in, &n_oms));
	}
	/* The first pass over a whole scan is whole too: only it can tell
	 * which alerts an earlier run of the daemon left open have ended. */
	if (what == VD_REFRESH_WHOLE || !l->built || vd_model_dirty_all(in->model) ||
	    (in->scanned && !l->scanned) || l->whole_owed) {
		int first = in->scanned && !l->scanned;
		int in_place = in->slice > 0 && !commits && l->built && l->scanned && !l->whole_owed &&
		    what == VD_REFRESH_MODEL;
		l->built = 1;
		l->scanned |= in->scanned;
		if (first && in->slice > 0)
			pass_begin(l, in);
		else if (in_place)
			pass_begin_in_place(l, in);
		else
			refresh_whole(l, in);
		return;
	}
	l->whole = 0;
	if (!update_chains(l, in, commits)) {
		l->out->fallback = l->queue_failed ? "out of memory" : "a cycle of parent hashes";
		refresh_whole(l, in);
		return;
	}
	update_head(l, in);
	update_alerts(l, in);
	if (commits)
		commit_alerts(l, in);
}

void vd_lineage_refresh(vd_lineage *l, const vd_lineage_input *in, vd_refresh what,
    vd_lineage_delta *out)
{
	char head_hash[VD_HASH_HEX_LEN + 1], head_run[VD_RUN_MAX];
	int64_t head_round;

	if (l->passing)
		pass_drop(l);
	head_round = l->head_round;
	memcpy(head_hash, l->head_hash, sizeof(head_hash));
	snprintf(head_run, sizeof(head_run), "%s", l->head_run ? l->head_run : "");
	vd_lineage_delta_clear(out);
	l->out = out;
	refresh(l, in, what);
	l->out = NULL;
	if (l->passing)
		return;         /* began in slices: its last says what changed */
	out->whole = l->whole;
	out->touched = l->touched;
	out->n_touched = l->whole ? 0 : l->n_touched;
	out->n_looked = l->whole ? 0 : l->n_queue;
	out->head_changed = head_round != l->head_round || strcmp(head_hash, l->head_hash) != 0 ||
	    strcmp(head_run, l->head_run ? l->head_run : "") != 0;
}

void vd_lineage_delta_init(vd_lineage_delta *d)
{
	memset(d, 0, sizeof(*d));
}

void vd_lineage_delta_clear(vd_lineage_delta *d)
{
	size_t i;

	for (i = 0; i < d->n_alerts; i++) {
		free(d->alerts[i].subject);
		free(d->alerts[i].detail);
	}
	d->n_alerts = 0;
	d->settled = d->whole = d->head_changed = 0;
	d->touched = NULL;
	d->n_touched = d->n_looked = 0;
	d->fallback = NULL;
}

void vd_lineage_delta_free(vd_lineage_delta *d)
{
	vd_lineage_delta_clear(d);
	free(d->alerts);
	vd_lineage_delta_init(d);
}

/* ---- what others read --------------------------------------------------- */

const vd_commit_slot *vd_lineage_next_slot(const vd_lineage *l, size_t *it)
{
	const char *k;
	void *v;

	return vd_map_next(&l->commits, it, &k, &v) ? v : NULL;
}

size_t vd_lineage_slot_count(const vd_lineage *l)
{
	return l->commits.count;
}

const vd_alert *vd_lineage_next_alert(const vd_lineage *l, size_t *it)
{
	const char *k;
	void *v;

	return vd_map_next(&l->alerts, it, &k, &v) ? v : NULL;
}

size_t vd_lineage_alert_count(const vd_lineage *l)
{
	return l->alerts.count;
}

const uint64_t *vd_lineage_alert_counts(const vd_lineage *l)
{
	return l->alert_counts;
}

const uint64_t *vd_lineage_series(const vd_lineage *l)
{
	return l->series;
}

int64_t vd_lineage_head(const vd_lineage *l, const char **hash, const char **run)
{
	if (hash != NULL)
		*hash = l->head_round >= 0 ? l->head_hash : NULL;
	if (run != NULL)
		*run = l->head_run;
	return l->head_round;
}

/* ---- trust -------------------------------------------------------------- */

const char *vd_trust_reason(const vd_group *g, vd_astate st)
{
	switch (st) {
	case VD_AS_FAILED:
		return "failed";
	case VD_AS_VERIFIED:
		break;
	default:
		return "unverified";
	}
	if (g->chain == VD_CHAIN_BROKEN)
		return "chain_broken";
	if (g->chain != VD_CHAIN_INTACT)
		return "chain_pending";
	if (!g->committed)
		return "uncommitted";
	return g->legacy_untrusted ? "legacy" : NULL;
}

int vd_group_trusted(const vd_group *g)
{
	return g->trusted;
}

const char *vd_group_untrusted_reason(const vd_group *g)
{
	const char *why;

	if (g->trusted)
		return NULL;
	why = vd_trust_reason(g, vd_group_state(g));
	return why != NULL ? why : "chain_pending";
}

int vd_copy_trusted(const vd_copy *c, const vd_group *g)
{
	return vd_trust_reason(g, vd_copy_state(c)) == NULL;
}

void vd_lineage_free(vd_lineage *l)
{
	const char *k;
	void *v;
	size_t it = 0;

	clear_commits(l);
	vd_map_free(&l->commits);
	clear_named(l);
	it = 0;
	while (vd_map_next(&l->key_ids, &it, &k, &v))
		free(v);
	vd_map_free(&l->key_ids);
	it = 0;
	while (vd_map_next(&l->alerts, &it, &k, &v))
		alert_free(v);
	vd_map_free(&l->alerts);
	free(l->touched);
	free(l->queue);
	clear_seen(l);
	free(l->only);
	free(l->pass_order);
}

void vd_lineage_input_memory(vd_lineage_input *in, const vd_memory *m)
{
	in->mems = &m->mems;
	in->posted = m->posted;
	in->n_posted = m->n_posted;
	in->equivs = m->equivs;
	in->n_equivs = m->n_equivs;
	in->stmts = m->stmts;
	in->n_stmts = m->n_stmts;
	in->withdrawn = &m->withdrawn;
	in->retained = &m->retained;
	in->retained_children = &m->retained_children;
}

const char *vd_lineage_strong_other(const vd_lineage *l, const char *run, int64_t round,
    const char *hash)
{
	const vd_commit_slot *sl = vd_lineage_slot(l, run, round);
	const vd_commit_entry *e;

	if (sl == NULL)
		return NULL;
	e = &sl->src[VD_SRC_SIGNED];
	if (e->has && strcmp(e->hash, hash) != 0)
		return e->hash;
	e = &sl->src[VD_SRC_LEDGER];
	if (e->has && e->is_signed && strcmp(e->hash, hash) != 0)
		return e->hash;
	return NULL;
}

/* The memory of commitments: decided, persisted by the shell, applied
 * (vd_memory.h). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vd_memory.h"
#include "vd_util.h"

void vd_withdrawal_key(char *out, size_t n, const char *run, int64_t round, const char *hash)
{
	snprintf(out, n, "%s\n%lld\n%s", run, (long long)round, hash);
}

static int retained_cmp(const void *a, const void *b)
{
	const vd_retained *x = a, *y = b;
	int c = strcmp(x->run, y->run);

	if (c != 0)
		return c;
	if (x->round_index != y->round_index)
		return x->round_index < y->round_index ? -1 : 1;
	return strcmp(x->hash, y->hash);
}

void vd_memory_init(vd_memory *m)
{
	memset(m, 0, sizeof(*m));
	vd_map_init(&m->stmt_seen);
	vd_map_init(&m->withdrawn);
	vd_map_init(&m->mems);
	vd_map_init_borrowed(&m->retained);
	vd_map_init_borrowed(&m->retained_children);
	vd_order_init(&m->retained_by_run, retained_cmp);
}

static void mem_free(vd_ledger_mem *m)
{
	if (m == NULL)
		return;
	free(m->relpath);
	free(m->run);
	free(m->recs);
	free(m->diverged);
	free(m);
}

static void retained_free(vd_retained *r)
{
	if (r != NULL) {
		free(r->run);
		free(r);
	}
}

void vd_memory_free(vd_memory *m)
{
	const char *k;
	void *v;
	size_t it = 0;

	while (vd_map_next(&m->mems, &it, &k, &v))
		mem_free(v);
	vd_map_free(&m->mems);
	vd_map_free(&m->stmt_seen);     /* values: the memory itself */
	it = 0;
	while (vd_map_next(&m->withdrawn, &it, &k, &v))
		free(v);
	vd_map_free(&m->withdrawn);
	it = 0;
	while (vd_map_next(&m->retained, &it, &k, &v))
		retained_free(v);
	vd_map_free(&m->retained);
	vd_map_free(&m->retained_children);
	vd_order_free(&m->retained_by_run);
	free(m->posted);
	free(m->equivs);
	free(m->stmts);
	memset(m, 0, sizeof(*m));
}

void vd_mem_record_init(vd_mem_record *rec, vd_mem_kind kind)
{
	memset(rec, 0, sizeof(*rec));
	rec->kind = kind;
}

void vd_mem_record_free(vd_mem_record *rec)
{
	free(rec->recs);
	rec->recs = NULL;
	rec->n = 0;
}

const char *vd_mem_kind_name(vd_mem_kind kind)
{
	static const char *const names[VD_MEM_KINDS] = { "none", "post", "post again",
		"equivocation", "checkpoint", "statement", "signatures", "withdrawal", "ledger append",
		"ledger diverged", "ledger forget", "retain" };

	return (unsigned)kind < VD_MEM_KINDS ? names[kind] : "unknown";
}

int vd_memory_is_volatile(vd_mem_kind kind)
{
	return kind == VD_MEM_NONE || kind == VD_MEM_LEDGER_DIVERGED;
}

int vd_memory_commit(vd_memory *m, const vd_mem_record *rec, vd_mem_persist_fn persist,
    void *arg)
{
	if (!vd_memory_is_volatile(rec->kind) && persist != NULL && persist(rec, arg) < 0)
		return -EIO;
	return vd_memory_apply(m, rec) < 0 ? -ENOMEM : 0;
}

static int has_commitment(const vd_commitment *arr, size_t n, const char *run, int64_t round,
    const char *hash, const char *key_id);

/* ---- applying ----------------------------------------------------------- */

static int push_commitment(vd_commitment **arr, size_t *n, size_t *cap, const vd_commitment *c)
{
	vd_commitment *grown = vd_grow(*arr, cap, *n, sizeof(*grown));

	if (grown == NULL)
		return -ENOMEM;
	*arr = grown;
	grown[(*n)++] = *c;
	return 0;
}

static int push_stmt(vd_memory *m, const vd_signed_stmt *st)
{
	vd_signed_stmt *grown = vd_grow(m->stmts, &m->cap_stmts, m->n_stmts, sizeof(*grown));

	if (grown == NULL)
		return -ENOMEM;
	m->stmts = grown;
	grown[m->n_stmts++] = *st;
	return 0;
}

/* "run\nkind\nnumber\nhash\nkey": one (statement, key) remembered. */
static void stmt_key(char *out, size_t n, const vd_statement *st, const char *run,
    const char *key_id)
{
	int cp = st->kind == VD_STMT_CHECKPOINT;

	snprintf(out, n, "%s\n%d\n%lld\n%s\n%s", run, (int)st->kind,
	    cp ? (long long)st->records : (long long)st->round_index,
	    cp ? st->head_record_hash : st->hash, key_id);
}

#define STMT_KEY_MAX (2 * VD_RUN_MAX)

/* Posted checkpoints stay ahead of the remembered statements. */
static int apply_checkpoint(vd_memory *m, const vd_signed_stmt *ss)
{
	if (push_stmt(m, ss) < 0)
		return -ENOMEM;
	memmove(&m->stmts[m->n_posted_stmts + 1], &m->stmts[m->n_posted_stmts],
	    (m->n_stmts - 1 - m->n_posted_stmts) * sizeof(*m->stmts));
	m->stmts[m->n_posted_stmts++] = *ss;
	return 0;
}

static int apply_statement(vd_memory *m, const vd_signed_stmt *ss)
{
	char key[STMT_KEY_MAX];

	stmt_key(key, sizeof(key), &ss->st, ss->run, ss->key_id);
	if (push_stmt(m, ss) < 0)
		return -ENOMEM;
	if (vd_map_put(&m->stmt_seen, key, m) < 0) {
		m->n_stmts--;
		return -ENOMEM;
	}
	return 0;
}

static int apply_withdrawal(vd_memory *m, const vd_withdrawal *w)
{
	char key[VD_WITHDRAWAL_KEY_MAX];
	vd_withdrawal *copy = malloc(sizeof(*copy));

	if (copy == NULL)
		return -ENOMEM;
	*copy = *w;
	vd_withdrawal_key(key, sizeof(key), w->run, w->round_index, w->hash);
	free(vd_map_del(&m->withdrawn, key));
	if (vd_map_put(&m->withdrawn, key, copy) < 0) {
		free(copy);
		return -ENOMEM;
	}
	return 0;
}

static vd_ledger_mem *mem_get(vd_memory *m, const char *relpath, const char *run)
{
	vd_ledger_mem *lm = vd_map_get(&m->mems, relpath);

	if (lm != NULL)
		return lm;
	if ((lm = calloc(1, sizeof(*lm))) == NULL)
		return NULL;
	lm->relpath = strdup(relpath);
	lm->run = strdup(run);
	if (lm->relpath == NULL || lm->run == NULL || vd_map_put(&m->mems, relpath, lm) < 0) {
		mem_free(lm);
		return NULL;
	}
	lm->serial = ++m->ledger_serials;
	return lm;
}

static void clear_diverged(vd_ledger_mem *lm)
{
	lm->rewritten = 0;
	lm->detail[0] = '\0';
	free(lm->diverged);
	lm->diverged = NULL;
	lm->n_diverged = 0;
}

/* The records are appended whole or not at all. */
static int apply_append(vd_memory *m, const vd_mem_record *rec)
{
	vd_ledger_mem *lm = mem_get(m, rec->relpath, rec->run);
	size_t need;
	vd_ledger_rec *grown;

	if (lm == NULL)
		return -ENOMEM;
	if (rec->first != lm->n)
		return -EINVAL;
	need = lm->n + rec->n;
	if (need > lm->cap) {
		if ((grown = realloc(lm->recs, need * sizeof(*grown))) == NULL)
			return -ENOMEM;
		lm->recs = grown;
		lm->cap = need;
	}
	if (rec->n > 0)
		memcpy(lm->recs + lm->n, rec->recs, rec->n * sizeof(*rec->recs));
	lm->n = need;
	clear_diverged(lm);
	return 0;
}

static int apply_diverged(vd_memory *m, const vd_mem_record *rec)
{
	vd_ledger_mem *lm = mem_get(m, rec->relpath, rec->run);
	vd_ledger_rec *copy = NULL;

	if (lm == NULL)
		return -ENOMEM;
	if (rec->n > 0 && (copy = malloc(rec->n * sizeof(*copy))) == NULL)
		return -ENOMEM;
	if (rec->n > 0)
		memcpy(copy, rec->recs, rec->n * sizeof(*copy));
	free(lm->diverged);
	lm->diverged = copy;
	lm->n_diverged = rec->n;
	lm->rewritten = 1;
	snprintf(lm->detail, sizeof(lm->detail), "%s", rec->detail);
	return 0;
}

/* Its run is the record's (r.run may point anywhere). */
static int apply_retain(vd_memory *m, const vd_mem_record *rec)
{
	const vd_retained *src = &rec->r;
	vd_retained *r = calloc(1, sizeof(*r));

	if (r == NULL || (r->run = strdup(rec->run)) == NULL) {
		free(r);
		return -ENOMEM;
	}
	memcpy(r->hash, src->hash, sizeof(r->hash));
	r->round_index = src->round_index;
	r->has_parent = src->has_parent;
	memcpy(r->parent, src->parent, sizeof(r->parent));
	r->verified_at = src->verified_at;
	if (vd_map_put(&m->retained, r->hash, r) < 0) {
		retained_free(r);
		return -ENOMEM;
	}
	vd_order_add(&m->retained_by_run, r);
	/* Indexed by parent too: a change there reaches the chains that pass
	 * through r once its directory is gone. */
	if (r->has_parent) {
		r->next_child = vd_map_get(&m->retained_children, r->parent);
		if (vd_map_put(&m->retained_children, r->parent, r) < 0)
			r->next_child = NULL;
	}
	return 0;
}

/* The posted statement under each new signer. */
static int apply_signers(vd_memory *m, const vd_mem_record *rec)
{
	vd_signed_stmt ss = rec->stmt;
	size_t i;

	for (i = 0; i < rec->n_signers; i++) {
		snprintf(ss.key_id, sizeof(ss.key_id), "%s", rec->signers[i]);
		if (apply_statement(m, &ss) < 0)
			return -ENOMEM;
	}
	return 0;
}

int vd_memory_apply(vd_memory *m, const vd_mem_record *rec)
{
	switch (rec->kind) {
	case VD_MEM_POST:
		if (push_commitment(&m->posted, &m->n_posted, &m->cap_posted, &rec->c) < 0)
			return -ENOMEM;
		return apply_signers(m, rec);
	case VD_MEM_POST_AGAIN:
	case VD_MEM_SIGNATURES:
		return apply_signers(m, rec);
	case VD_MEM_EQUIVOCATION:
		return push_commitment(&m->equivs, &m->n_equivs, &m->cap_equivs, &rec->c);
	case VD_MEM_CHECKPOINT:
		if (apply_checkpoint(m, &rec->stmt) < 0)
			return -ENOMEM;
		return apply_signers(m, rec);
	case VD_MEM_STATEMENT:
		return apply_statement(m, &rec->stmt);
	case VD_MEM_WITHDRAWAL:
		return apply_withdrawal(m, &rec->w);
	case VD_MEM_LEDGER_APPEND:
		return apply_append(m, rec);
	case VD_MEM_LEDGER_DIVERGED:
		return apply_diverged(m, rec);
	case VD_MEM_LEDGER_FORGET:
		mem_free(vd_map_del(&m->mems, rec->relpath));
		return 0;
	case VD_MEM_RETAIN:
		return apply_retain(m, rec);
	default:
		return 0;
	}
}

/* Rows of the database are what an earlier run wrote, read back: one
 * that does not follow what is restored so far is left out. */
static int restorable(const vd_memory *m, const vd_mem_record *rec)
{
	char key[STMT_KEY_MAX];
	const vd_ledger_mem *lm;
	size_t i;

	switch (rec->kind) {
	case VD_MEM_STATEMENT:
		stmt_key(key, sizeof(key), &rec->stmt.st, rec->stmt.run, rec->stmt.key_id);
		return vd_map_get(&m->stmt_seen, key) == NULL;
	case VD_MEM_LEDGER_APPEND:
		lm = vd_map_get(&m->mems, rec->relpath);
		if (rec->first != (lm ? lm->n : 0))
			return 0;
		for (i = 0; i < rec->n; i++)
			if (!vd_is_hex64((vd_str){ rec->recs[i].hash, strlen(rec->recs[i].hash) }) ||
			    !vd_is_hex64((vd_str){ rec->recs[i].record_hash,
			    strlen(rec->recs[i].record_hash) }))
				return 0;
		return 1;
	case VD_MEM_RETAIN:
		return vd_map_get(&m->retained, rec->r.hash) == NULL;
	case VD_MEM_EQUIVOCATION:
		return !has_commitment(m->equivs, m->n_equivs, rec->c.run, rec->c.round_index,
		    rec->c.hash, rec->c.key_id);
	default:
		return !vd_memory_is_volatile(rec->kind);
	}
}

int vd_memory_restore(vd_memory *m, const vd_mem_record *rec)
{
	int rc;

	if (!restorable(m, rec))
		return VD_RESTORE_SKIPPED;
	if ((rc = vd_memory_apply(m, rec)) < 0)
		return rc;
	return VD_RESTORE_APPLIED;
}

/* ---- deciding ------------------------------------------------------------- */

static int same_commit(const char *run, int64_t round, const char *hash, const char *r2,
    int64_t round2, const char *h2)
{
	return round == round2 && strcmp(run, r2) == 0 && strcmp(hash, h2) == 0;
}

vd_post_result vd_memory_post(const vd_memory *m, const vd_commitment *c, const char *strong_other,
    vd_mem_record *rec, char *existing)
{
	size_t i;

	vd_mem_record_init(rec, VD_MEM_POST);
	rec->c = *c;
	if (strong_other != NULL && strcmp(strong_other, c->hash) != 0) {
		rec->kind = VD_MEM_EQUIVOCATION;
		snprintf(rec->existing, sizeof(rec->existing), "%s", strong_other);
	}
	/* One post per round: the first one stands. */
	for (i = 0; rec->kind == VD_MEM_POST && i < m->n_posted; i++) {
		const vd_commitment *p = &m->posted[i];
		if (p->round_index != c->round_index || strcmp(p->run, c->run) != 0)
			continue;
		if (strcmp(p->hash, c->hash) == 0) {
			rec->kind = VD_MEM_POST_AGAIN;
			return VD_POST_KNOWN;
		}
		rec->kind = VD_MEM_EQUIVOCATION;
		snprintf(rec->existing, sizeof(rec->existing), "%s", p->hash);
	}
	if (rec->kind == VD_MEM_POST)
		return VD_POST_NEW;
	memcpy(existing, rec->existing, VD_HASH_HEX_LEN + 1);
	/* The same conflict by the same party again: nothing new. */
	if (has_commitment(m->equivs, m->n_equivs, c->run, c->round_index, c->hash, c->key_id))
		rec->kind = VD_MEM_NONE;
	return VD_POST_CONFLICT;
}

static void api_stmt(vd_signed_stmt *ss, const vd_statement *st, const char *run,
    const char *key_id, const char *where)
{
	memset(ss, 0, sizeof(*ss));
	ss->st = *st;
	snprintf(ss->run, sizeof(ss->run), "%s", run);
	snprintf(ss->key_id, sizeof(ss->key_id), "%s", key_id);
	snprintf(ss->where, sizeof(ss->where), "%s", where);
}

vd_post_result vd_memory_post_checkpoint(const vd_memory *m, const vd_statement *st, const char *key_id,
    vd_mem_record *rec)
{
	size_t i;

	vd_mem_record_init(rec, VD_MEM_NONE);
	for (i = 0; i < m->n_posted_stmts; i++) {
		const vd_signed_stmt *p = &m->stmts[i];
		if (p->st.records == st->records && strcmp(p->run, st->run) == 0 &&
		    strcmp(p->st.head_record_hash, st->head_record_hash) == 0 &&
		    strcmp(p->key_id, key_id) == 0)
			return VD_POST_KNOWN;
	}
	rec->kind = VD_MEM_CHECKPOINT;
	api_stmt(&rec->stmt, st, st->run, key_id, "api");
	return VD_POST_NEW;
}

void vd_memory_post_signers(const vd_memory *m, const vd_statement *st, const char *run,
    const char *const *key_ids, size_t n, vd_mem_record *rec)
{
	char key[STMT_KEY_MAX];
	size_t i, j;
	int dup;

	if (rec->kind != VD_MEM_POST && rec->kind != VD_MEM_POST_AGAIN &&
	    rec->kind != VD_MEM_CHECKPOINT && rec->kind != VD_MEM_NONE)
		return;
	if (rec->kind != VD_MEM_CHECKPOINT)
		api_stmt(&rec->stmt, st, run, "", "api");
	rec->n_signers = 0;
	for (i = 0; i < n && rec->n_signers < VD_DSSE_MAX_SIGS; i++) {
		stmt_key(key, sizeof(key), st, run, key_ids[i]);
		for (j = 0, dup = 0; j < rec->n_signers; j++)
			dup |= strcmp(rec->signers[j], key_ids[i]) == 0;
		if (!dup && vd_map_get(&m->stmt_seen, key) == NULL)
			snprintf(rec->signers[rec->n_signers++], sizeof(rec->signers[0]), "%s", key_ids[i]);
	}
	if (rec->kind == VD_MEM_NONE && rec->n_signers > 0)
		rec->kind = VD_MEM_SIGNATURES;
}

vd_post_result vd_memory_remember(const vd_memory *m, const vd_statement *st, const char *run,
    const char *key_id, const char *where, vd_mem_record *rec)
{
	char key[STMT_KEY_MAX];

	vd_mem_record_init(rec, VD_MEM_NONE);
	stmt_key(key, sizeof(key), st, run, key_id);
	if (vd_map_get(&m->stmt_seen, key) != NULL)
		return VD_POST_KNOWN;
	rec->kind = VD_MEM_STATEMENT;
	api_stmt(&rec->stmt, st, run, key_id, where);
	return VD_POST_NEW;
}

static unsigned posts_naming(const vd_commitment *arr, size_t n, const char *run,
    int64_t round, const char *hash)
{
	unsigned named = 0;
	size_t i;

	for (i = 0; i < n; i++)
		if (same_commit(run, round, hash, arr[i].run, arr[i].round_index, arr[i].hash))
			named |= arr[i].key_id[0] ? VD_MEM_NAMED_SIGNED : VD_MEM_NAMED_TOKEN;
	return named;
}

static int recs_name(const vd_ledger_rec *recs, size_t n, const char *lrun, const char *run,
    int64_t round, const char *hash)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (same_commit(run, round, hash, lrun, recs[i].round_index, recs[i].hash))
			return 1;
	return 0;
}

unsigned vd_memory_sources(const vd_memory *m, const char *run, int64_t round,
    const char *hash)
{
	unsigned named = posts_naming(m->posted, m->n_posted, run, round, hash) |
	    posts_naming(m->equivs, m->n_equivs, run, round, hash);
	const char *k;
	void *v;
	size_t i, it = 0;

	for (i = 0; i < m->n_stmts; i++)
		if (m->stmts[i].st.kind == VD_STMT_ROUNDCLOSE && same_commit(run, round, hash,
		    m->stmts[i].run, m->stmts[i].st.round_index, m->stmts[i].st.hash))
			named |= VD_MEM_NAMED_SIGNED;
	while (vd_map_next(&m->mems, &it, &k, &v)) {
		const vd_ledger_mem *lm = v;
		if (recs_name(lm->recs, lm->n, lm->run, run, round, hash) ||
		    recs_name(lm->diverged, lm->n_diverged, lm->run, run, round, hash))
			named |= VD_MEM_NAMED_LEDGER;
	}
	return named;
}

int vd_memory_withdraw(const vd_memory *m, const vd_withdrawal *w, double at,
    vd_mem_record *rec)
{
	vd_mem_record_init(rec, VD_MEM_NONE);
	if (vd_memory_is_withdrawn(m, w->run, w->round_index, w->hash))
		return VD_POST_KNOWN;
	if (w->sources[0] == '\0')
		return -ENOENT;
	rec->kind = VD_MEM_WITHDRAWAL;
	rec->w = *w;
	rec->w.at = at;
	return VD_POST_NEW;
}

static void rec_from_entry(vd_ledger_rec *r, const vd_ledger_entry *e)
{
	memset(r, 0, sizeof(*r));
	r->round_index = e->round_index;
	memcpy(r->hash, e->global_model_hash, sizeof(r->hash));
	memcpy(r->record_hash, e->record_hash, sizeof(r->record_hash));
	r->line = e->line;
}

/* Entries [from, to) of l as records of rec. */
static int take_entries(vd_mem_record *rec, const vd_scan_ledger *l, size_t from, size_t to)
{
	size_t i;

	if (to <= from)
		return 0;
	if ((rec->recs = calloc(to - from, sizeof(*rec->recs))) == NULL)
		return -ENOMEM;
	for (i = from; i < to; i++)
		rec_from_entry(&rec->recs[rec->n++], &l->entries[i]);
	return 0;
}

static void ledger_names(vd_mem_record *rec, const char *relpath, const char *run)
{
	snprintf(rec->relpath, sizeof(rec->relpath), "%s", relpath);
	snprintf(rec->run, sizeof(rec->run), "%s", run);
}

/* The file no longer extends what was seen: what it says instead, from
 * entry from on, is noted for equivocations. */
static int diverged(vd_mem_record *rec, const vd_scan_ledger *l, size_t from)
{
	rec->kind = VD_MEM_LEDGER_DIVERGED;
	return take_entries(rec, l, from, l->n_entries);
}

int vd_memory_read_ledger(const vd_memory *m, const vd_scan_ledger *l, vd_mem_record *rec)
{
	return vd_memory_read_ledger_some(m, l, SIZE_MAX, rec, NULL);
}

int vd_memory_read_ledger_some(const vd_memory *m, const vd_scan_ledger *l, size_t max,
    vd_mem_record *rec, int *more)
{
	const vd_ledger_mem *lm = vd_map_get(&m->mems, l->relpath);
	size_t i, n = lm ? lm->n : 0, end;

	vd_mem_record_init(rec, VD_MEM_NONE);
	ledger_names(rec, l->relpath, l->run);
	/* Unreadable: ledger_broken says so; the memory stands (known, empty). */
	if (!l->read_ok) {
		if (lm == NULL)
			rec->kind = VD_MEM_LEDGER_APPEND;
		return 0;
	}
	for (i = 0; i < n; i++) {
		if (i >= l->n_entries) {
			snprintf(rec->detail, sizeof(rec->detail),
			    "it now holds %zu records; %zu were seen before", l->n_entries, n);
			return diverged(rec, l, l->n_entries);
		}
		if (strcmp(l->entries[i].record_hash, lm->recs[i].record_hash) != 0) {
			snprintf(rec->detail, sizeof(rec->detail),
			    "line %zu (record %zu) differs from the record seen there before (line %zu)",
			    l->entries[i].line, i + 1, lm->recs[i].line);
			return diverged(rec, l, i);
		}
	}
	rec->kind = VD_MEM_LEDGER_APPEND;
	rec->first = n;
	for (end = n; end < l->n_entries && l->entries[end].trusted; end++)
		;
	if (more != NULL)
		*more = end - n > max;
	return take_entries(rec, l, n, end - n > max ? n + max : end);
}

void vd_memory_ledger_gone(const vd_memory *m, const char *relpath, vd_mem_record *rec)
{
	const vd_ledger_mem *lm = vd_map_get(&m->mems, relpath);

	vd_mem_record_init(rec, VD_MEM_NONE);
	if (lm == NULL || lm->n == 0)
		return;
	rec->kind = VD_MEM_LEDGER_DIVERGED;
	ledger_names(rec, lm->relpath, lm->run);
	snprintf(rec->detail, sizeof(rec->detail), "the file is gone");
}

int vd_memory_forget_ledger(const vd_memory *m, const char *relpath, vd_mem_record *rec)
{
	const vd_ledger_mem *lm = vd_map_get(&m->mems, relpath);

	vd_mem_record_init(rec, VD_MEM_NONE);
	if (lm == NULL)
		return -ENOENT;
	rec->kind = VD_MEM_LEDGER_FORGET;
	ledger_names(rec, lm->relpath, lm->run);
	return 0;
}

/* Out of memory once: built again from the map. */
const vd_order *vd_memory_retained_order(vd_memory *m)
{
	const char *k;
	void *v;
	size_t it = 0;

	if (!m->retained_by_run.failed && vd_order_settle(&m->retained_by_run) == 0)
		return &m->retained_by_run;
	vd_order_clear(&m->retained_by_run);
	while (vd_map_next(&m->retained, &it, &k, &v))
		vd_order_add(&m->retained_by_run, v);
	return vd_order_settle(&m->retained_by_run) == 0 ? &m->retained_by_run : NULL;
}

vd_post_result vd_memory_retain(const vd_memory *m, const vd_retained *r, vd_mem_record *rec)
{
	vd_mem_record_init(rec, VD_MEM_NONE);
	if (vd_map_get(&m->retained, r->hash) != NULL)
		return VD_POST_KNOWN;
	rec->kind = VD_MEM_RETAIN;
	rec->r = *r;
	rec->r.next_child = NULL;
	snprintf(rec->run, sizeof(rec->run), "%s", r->run);
	rec->r.run = rec->run;
	return VD_POST_NEW;
}

/* ---- reading ----------------------------------------------------------- */

const vd_ledger_mem *vd_memory_ledger(const vd_memory *m, const char *relpath)
{
	return vd_map_get(&m->mems, relpath);
}

static int has_commitment(const vd_commitment *arr, size_t n, const char *run, int64_t round,
    const char *hash, const char *key_id)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (same_commit(run, round, hash, arr[i].run, arr[i].round_index, arr[i].hash) &&
		    (key_id == NULL || strcmp(arr[i].key_id, key_id) == 0))
			return 1;
	return 0;
}

int vd_memory_has_post(const vd_memory *m, const vd_commitment *c)
{
	return has_commitment(m->posted, m->n_posted, c->run, c->round_index, c->hash, c->key_id);
}

int vd_memory_has_equivocation(const vd_memory *m, const char *run, int64_t round,
    const char *hash)
{
	return has_commitment(m->equivs, m->n_equivs, run, round, hash, NULL);
}

int vd_memory_has_statement(const vd_memory *m, const vd_statement *st, const char *run,
    const char *key_id)
{
	char key[STMT_KEY_MAX];

	stmt_key(key, sizeof(key), st, run, key_id);
	return vd_map_get(&m->stmt_seen, key) != NULL;
}

int vd_memory_is_withdrawn(const vd_memory *m, const char *run, int64_t round,
    const char *hash)
{
	char key[VD_WITHDRAWAL_KEY_MAX];

	vd_withdrawal_key(key, sizeof(key), run, round, hash);
	return vd_map_get(&m->withdrawn, key) != NULL;
}

/* ---- the digest -------------------------------------------------------- */

static uint64_t commitments_digest(uint64_t h, const vd_commitment *arr, size_t n)
{
	size_t i;

	h = vd_fnv(h, &n, sizeof(n));
	for (i = 0; i < n; i++) {
		h = vd_fnv_str(h, arr[i].run);
		h = vd_fnv(h, &arr[i].round_index, sizeof(arr[i].round_index));
		h = vd_fnv_str(h, arr[i].hash);
		h = vd_fnv(h, &arr[i].schema_version, sizeof(arr[i].schema_version));
		h = vd_fnv_str(h, arr[i].key_id);
	}
	return h;
}

static uint64_t stmt_digest(uint64_t h, const vd_signed_stmt *s)
{
	h = vd_fnv_str(h, s->run);
	h = vd_fnv_str(h, s->key_id);
	h = vd_fnv_str(h, s->where);
	h = vd_fnv(h, &s->st.kind, sizeof(s->st.kind));
	h = vd_fnv(h, &s->st.round_index, sizeof(s->st.round_index));
	h = vd_fnv_str(h, s->st.hash);
	h = vd_fnv(h, &s->st.records, sizeof(s->st.records));
	return vd_fnv_str(h, s->st.head_record_hash);
}

static uint64_t recs_digest(uint64_t h, const vd_ledger_rec *r, size_t n)
{
	size_t i;

	h = vd_fnv(h, &n, sizeof(n));
	for (i = 0; i < n; i++) {
		h = vd_fnv(h, &r[i].round_index, sizeof(r[i].round_index));
		h = vd_fnv_str(h, r[i].hash);
		h = vd_fnv_str(h, r[i].record_hash);
		h = vd_fnv(h, &r[i].line, sizeof(r[i].line));
	}
	return h;
}

static uint64_t mem_digest(const vd_ledger_mem *lm, int with_volatile)
{
	uint64_t h = vd_fnv_str(VD_FNV_BASIS, lm->relpath);

	h = vd_fnv_str(h, lm->run);
	h = recs_digest(h, lm->recs, lm->n);
	if (with_volatile) {
		h = vd_fnv(h, &lm->rewritten, sizeof(lm->rewritten));
		h = vd_fnv_str(h, lm->detail);
		h = recs_digest(h, lm->diverged, lm->n_diverged);
	}
	return h;
}

static uint64_t withdrawal_digest(const vd_withdrawal *w)
{
	uint64_t h = vd_fnv_str(VD_FNV_BASIS, w->run);

	h = vd_fnv(h, &w->round_index, sizeof(w->round_index));
	h = vd_fnv_str(h, w->hash);
	h = vd_fnv_str(h, w->sources);
	h = vd_fnv_str(h, w->reason);
	return vd_fnv(h, &w->at, sizeof(w->at));
}

static uint64_t retained_digest(const vd_retained *r)
{
	uint64_t h = vd_fnv_str(VD_FNV_BASIS, r->hash);

	h = vd_fnv_str(h, r->run);
	h = vd_fnv(h, &r->round_index, sizeof(r->round_index));
	h = vd_fnv(h, &r->has_parent, sizeof(r->has_parent));
	return vd_fnv_str(h, r->parent);
}

/* Maps in any order: their entries' digests are summed. */
static uint64_t maps_digest(uint64_t h, const vd_memory *m, int with_volatile)
{
	const char *k;
	void *v;
	size_t it = 0;
	uint64_t sum = 0;

	while (vd_map_next(&m->mems, &it, &k, &v))
		if (with_volatile || ((const vd_ledger_mem *)v)->n > 0)
			sum += mem_digest(v, with_volatile);
	h = vd_fnv(h, &sum, sizeof(sum));
	for (sum = 0, it = 0; vd_map_next(&m->withdrawn, &it, &k, &v); )
		sum += withdrawal_digest(v);
	h = vd_fnv(h, &sum, sizeof(sum));
	for (sum = 0, it = 0; vd_map_next(&m->retained, &it, &k, &v); )
		sum += retained_digest(v);
	return vd_fnv(h, &sum, sizeof(sum));
}

uint64_t vd_memory_digest(const vd_memory *m, int with_volatile)
{
	uint64_t h = VD_FNV_BASIS;
	size_t i;

	h = commitments_digest(h, m->posted, m->n_posted);
	h = commitments_digest(h, m->equivs, m->n_equivs);
	h = vd_fnv(h, &m->n_stmts, sizeof(m->n_stmts));
	h = vd_fnv(h, &m->n_posted_stmts, sizeof(m->n_posted_stmts));
	for (i = 0; i < m->n_stmts; i++)
		h = stmt_digest(h, &m->stmts[i]);
	h = vd_fnv(h, &m->stmt_seen.count, sizeof(m->stmt_seen.count));
	return maps_digest(h, m, with_volatile);
}

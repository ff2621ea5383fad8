/*
 * The memory of commitments: each decision's outcomes, that a decision
 * leaves the memory as it was, that a record is applied only once its
 * persist succeeded, and that restoring the persisted records rebuilds
 * what was kept step by step.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "vd_memory.h"

#define MAX_KEPT 64

static char hexes[16][VD_HASH_HEX_LEN + 1];

/* A distinct hex64 for n. */
static const char *hx(unsigned n)
{
	snprintf(hexes[n], sizeof(hexes[n]), "%064x", n + 1);
	return hexes[n];
}

/* A persistence that keeps copies of what it was given, or fails. */
typedef struct fake_db {
	vd_mem_record kept[MAX_KEPT];
	size_t n;
	int fail, calls;
} fake_db;

static int fake_persist(const vd_mem_record *rec, void *arg)
{
	fake_db *db = arg;
	vd_mem_record *copy;

	db->calls++;
	if (db->fail || db->n == MAX_KEPT)
		return -1;
	copy = &db->kept[db->n++];
	*copy = *rec;
	copy->recs = NULL;
	if (rec->n > 0) {
		copy->recs = malloc(rec->n * sizeof(*rec->recs));
		assert_non_null(copy->recs);
		memcpy(copy->recs, rec->recs, rec->n * sizeof(*rec->recs));
	}
	return 0;
}

static void fake_free(fake_db *db)
{
	size_t i;

	for (i = 0; i < db->n; i++)
		vd_mem_record_free(&db->kept[i]);
	db->n = 0;
}

static void commitment(vd_commitment *c, const char *run, int64_t round, const char *hash,
    const char *key_id)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->run, sizeof(c->run), "%s", run);
	c->round_index = round;
	snprintf(c->hash, sizeof(c->hash), "%s", hash);
	c->schema_version = 2;
	snprintf(c->key_id, sizeof(c->key_id), "%s", key_id);
}

static void roundclose(vd_statement *st, const char *run, int64_t round, const char *hash)
{
	memset(st, 0, sizeof(*st));
	st->kind = VD_STMT_ROUNDCLOSE;
	snprintf(st->run, sizeof(st->run), "%s", run[0] ? run : ".");
	st->schema_version = 2;
	st->round_index = round;
	snprintf(st->hash, sizeof(st->hash), "%s", hash);
}

static void checkpoint(vd_statement *st, const char *run, uint64_t records, const char *head)
{
	memset(st, 0, sizeof(*st));
	st->kind = VD_STMT_CHECKPOINT;
	snprintf(st->run, sizeof(st->run), "%s", run);
	st->records = records;
	snprintf(st->head_record_hash, sizeof(st->head_record_hash), "%s", head);
}

/* Decided, persisted, applied: the commit must take. */
static void commit_ok(vd_memory *m, vd_mem_record *rec, fake_db *db)
{
	assert_int_equal(vd_memory_commit(m, rec, fake_persist, db), 0);
	vd_mem_record_free(rec);
}

static void post_ok(vd_memory *m, fake_db *db, const char *run, int64_t round,
    const char *hash, const char *key_id)
{
	char existing[VD_HASH_HEX_LEN + 1];
	vd_commitment c;
	vd_mem_record rec;

	commitment(&c, run, round, hash, key_id);
	assert_int_equal(vd_memory_post(m, &c, NULL, &rec, existing), VD_POST_NEW);
	commit_ok(m, &rec, db);
}

/* ---- posts -------------------------------------------------------------- */

static void test_post_outcomes(void **state)
{
	char existing[VD_HASH_HEX_LEN + 1];
	vd_memory m;
	vd_commitment c;
	vd_mem_record rec;
	fake_db db = { .n = 0 };
	uint64_t before;

	(void)state;
	vd_memory_init(&m);
	commitment(&c, "r", 0, hx(1), "");
	before = vd_memory_digest(&m, 1);
	assert_int_equal(vd_memory_post(&m, &c, NULL, &rec, existing), VD_POST_NEW);
	assert_int_equal(rec.kind, VD_MEM_POST);
	assert_int_equal(m.n_posted, 0);                 /* decided, not applied */
	assert_true(vd_memory_digest(&m, 1) == before);
	commit_ok(&m, &rec, &db);
	assert_true(vd_memory_has_post(&m, &c));

	/* The same again: only an audit entry may be new. */
	assert_int_equal(vd_memory_post(&m, &c, NULL, &rec, existing), VD_POST_KNOWN);
	assert_int_equal(rec.kind, VD_MEM_POST_AGAIN);
	commit_ok(&m, &rec, &db);
	assert_int_equal(m.n_posted, 1);

	/* Another hash for the round: the first stands, the second is an
	 * equivocation, whoever posts it. */
	commitment(&c, "r", 0, hx(2), "k");
	assert_int_equal(vd_memory_post(&m, &c, NULL, &rec, existing), VD_POST_CONFLICT);
	assert_int_equal(rec.kind, VD_MEM_EQUIVOCATION);
	assert_string_equal(existing, hx(1));
	commit_ok(&m, &rec, &db);
	assert_int_equal(m.n_posted, 1);
	assert_true(vd_memory_has_equivocation(&m, "r", 0, hx(2)));

	/* The same conflict by the same party: refused again, nothing new. */
	assert_int_equal(vd_memory_post(&m, &c, NULL, &rec, existing), VD_POST_CONFLICT);
	assert_int_equal(rec.kind, VD_MEM_NONE);
	commitment(&c, "r", 0, hx(2), "k2");
	assert_int_equal(vd_memory_post(&m, &c, NULL, &rec, existing), VD_POST_CONFLICT);
	assert_int_equal(rec.kind, VD_MEM_EQUIVOCATION);

	/* Another round, another run: new. */
	commitment(&c, "r", 1, hx(2), "");
	assert_int_equal(vd_memory_post(&m, &c, NULL, &rec, existing), VD_POST_NEW);
	commitment(&c, "s", 0, hx(2), "");
	assert_int_equal(vd_memory_post(&m, &c, NULL, &rec, existing), VD_POST_NEW);
	fake_free(&db);
	vd_memory_free(&m);
}

/* A signed statement or checkpointed record naming another hash makes a
 * new post a conflict; one naming the same hash does not. */
static void test_post_strong_other(void **state)
{
	char existing[VD_HASH_HEX_LEN + 1];
	vd_memory m;
	vd_commitment c;
	vd_mem_record rec;

	(void)state;
	vd_memory_init(&m);
	commitment(&c, "r", 3, hx(1), "");
	assert_int_equal(vd_memory_post(&m, &c, hx(4), &rec, existing), VD_POST_CONFLICT);
	assert_int_equal(rec.kind, VD_MEM_EQUIVOCATION);
	assert_string_equal(existing, hx(4));
	assert_string_equal(rec.existing, hx(4));
	assert_int_equal(vd_memory_post(&m, &c, hx(1), &rec, existing), VD_POST_NEW);
	assert_int_equal(rec.kind, VD_MEM_POST);
	vd_memory_free(&m);
}

/* ---- committing: persisted first, applied only then ---------------------- */

static void test_commit_failed_persist(void **state)
{
	char existing[VD_HASH_HEX_LEN + 1];
	vd_memory m;
	vd_commitment c;
	vd_mem_record rec;
	fake_db db = { .n = 0 };
	uint64_t before;

	(void)state;
	vd_memory_init(&m);
	post_ok(&m, &db, "r", 0, hx(1), "");
	before = vd_memory_digest(&m, 1);
	commitment(&c, "r", 1, hx(2), "");
	assert_int_equal(vd_memory_post(&m, &c, NULL, &rec, existing), VD_POST_NEW);
	db.fail = 1;
	assert_int_equal(vd_memory_commit(&m, &rec, fake_persist, &db), -EIO);
	assert_true(vd_memory_digest(&m, 1) == before);
	assert_false(vd_memory_has_post(&m, &c));
	assert_int_equal(db.n, 1);
	/* Tried again once the database takes it. */
	db.fail = 0;
	assert_int_equal(vd_memory_commit(&m, &rec, fake_persist, &db), 0);
	assert_true(vd_memory_has_post(&m, &c));
	fake_free(&db);
	vd_memory_free(&m);
}

/* What a scan finds again after a restart is applied without a persist. */
static void test_commit_volatile(void **state)
{
	vd_memory m;
	vd_mem_record rec;
	fake_db db = { .n = 0 };

	(void)state;
	vd_memory_init(&m);
	vd_mem_record_init(&rec, VD_MEM_LEDGER_DIVERGED);
	snprintf(rec.relpath, sizeof(rec.relpath), "r/ledger.jsonl");
	snprintf(rec.run, sizeof(rec.run), "r");
	snprintf(rec.detail, sizeof(rec.detail), "the file is gone");
	db.fail = 1;
	assert_int_equal(vd_memory_commit(&m, &rec, fake_persist, &db), 0);
	assert_int_equal(db.calls, 0);
	assert_true(vd_memory_ledger(&m, "r/ledger.jsonl")->rewritten);
	assert_true(vd_memory_is_volatile(VD_MEM_LEDGER_DIVERGED));
	assert_false(vd_memory_is_volatile(VD_MEM_POST));
	vd_memory_free(&m);
}

/* ---- statements and checkpoints ---------------------------------------- */

static void test_remember(void **state)
{
	vd_memory m;
	vd_statement st;
	vd_mem_record rec;
	fake_db db = { .n = 0 };

	(void)state;
	vd_memory_init(&m);
	roundclose(&st, "r", 0, hx(1));
	assert_int_equal(vd_memory_remember(&m, &st, "r", "k1", "r/commitments/a.json", &rec), VD_POST_NEW);
	assert_int_equal(rec.kind, VD_MEM_STATEMENT);
	assert_int_equal(m.n_stmts, 0);
	commit_ok(&m, &rec, &db);
	assert_true(vd_memory_has_statement(&m, &st, "r", "k1"));
	assert_string_equal(m.stmts[0].where, "r/commitments/a.json");

	/* Known under that key, whatever the file; new under another. */
	assert_int_equal(vd_memory_remember(&m, &st, "r", "k1", "api", &rec), VD_POST_KNOWN);
	assert_int_equal(rec.kind, VD_MEM_NONE);
	assert_int_equal(vd_memory_remember(&m, &st, "r", "k2", "api", &rec), VD_POST_NEW);
	commit_ok(&m, &rec, &db);
	assert_int_equal(m.n_stmts, 2);
	assert_false(vd_memory_has_statement(&m, &st, "other", "k1"));
	fake_free(&db);
	vd_memory_free(&m);
}

/* Posted checkpoints are kept ahead of the remembered statements. */
static void test_post_checkpoint(void **state)
{
	vd_memory m;
	vd_statement st, cp;
	vd_mem_record rec;
	fake_db db = { .n = 0 };

	(void)state;
	vd_memory_init(&m);
	roundclose(&st, "r", 0, hx(1));
	assert_int_equal(vd_memory_remember(&m, &st, "r", "k1", "api", &rec), VD_POST_NEW);
	commit_ok(&m, &rec, &db);
	checkpoint(&cp, "r", 2, hx(5));
	assert_int_equal(vd_memory_post_checkpoint(&m, &cp, "k1", &rec), VD_POST_NEW);
	assert_int_equal(rec.kind, VD_MEM_CHECKPOINT);
	commit_ok(&m, &rec, &db);
	assert_int_equal(m.n_stmts, 2);
	assert_int_equal(m.n_posted_stmts, 1);
	assert_int_equal(m.stmts[0].st.kind, VD_STMT_CHECKPOINT);
	assert_string_equal(m.stmts[0].where, "api");
	assert_int_equal(m.stmts[1].st.kind, VD_STMT_ROUNDCLOSE);
	assert_int_equal(vd_memory_post_checkpoint(&m, &cp, "k1", &rec), VD_POST_KNOWN);
	assert_int_equal(rec.kind, VD_MEM_NONE);
	assert_int_equal(vd_memory_post_checkpoint(&m, &cp, "k2", &rec), VD_POST_NEW);
	fake_free(&db);
	vd_memory_free(&m);
}

/* A signed post remembers its statement under every key new to it, in
 * the same record; the same again only the keys it lacks. */
static void test_post_signers(void **state)
{
	char existing[VD_HASH_HEX_LEN + 1];
	const char *keys[] = { "k1", "k2", "k1" };
	vd_memory m;
	vd_commitment c;
	vd_statement st;
	vd_mem_record rec;
	fake_db db = { .n = 0 };

	(void)state;
	vd_memory_init(&m);
	commitment(&c, "r", 0, hx(1), "k1");
	roundclose(&st, "r", 0, hx(1));
	assert_int_equal(vd_memory_post(&m, &c, NULL, &rec, existing), VD_POST_NEW);
	vd_memory_post_signers(&m, &st, "r", keys, 1, &rec);
	assert_int_equal(rec.n_signers, 1);
	commit_ok(&m, &rec, &db);
	assert_true(vd_memory_has_post(&m, &c));
	assert_true(vd_memory_has_statement(&m, &st, "r", "k1"));
	assert_string_equal(m.stmts[0].where, "api");

	/* Again, signed by one more key (and one twice): only that one. */
	assert_int_equal(vd_memory_post(&m, &c, NULL, &rec, existing), VD_POST_KNOWN);
	vd_memory_post_signers(&m, &st, "r", keys, 3, &rec);
	assert_int_equal(rec.kind, VD_MEM_POST_AGAIN);
	assert_int_equal(rec.n_signers, 1);
	assert_string_equal(rec.signers[0], "k2");
	db.fail = 1;
	assert_int_equal(vd_memory_commit(&m, &rec, fake_persist, &db), -EIO);
	assert_false(vd_memory_has_statement(&m, &st, "r", "k2"));
	db.fail = 0;
	commit_ok(&m, &rec, &db);
	assert_true(vd_memory_has_statement(&m, &st, "r", "k2"));
	assert_int_equal(m.n_posted, 1);
	assert_int_equal(m.n_stmts, 2);

	/* A conflict remembers no signer. */
	commitment(&c, "r", 0, hx(2), "k1");
	roundclose(&st, "r", 0, hx(2));
	assert_int_equal(vd_memory_post(&m, &c, NULL, &rec, existing), VD_POST_CONFLICT);
	vd_memory_post_signers(&m, &st, "r", keys, 2, &rec);
	assert_int_equal(rec.kind, VD_MEM_EQUIVOCATION);
	assert_int_equal(rec.n_signers, 0);
	fake_free(&db);
	vd_memory_free(&m);
}

/* A checkpoint known already: only new signatures, if any. */
static void test_checkpoint_signers(void **state)
{
	const char *keys[] = { "k1", "k2" };
	vd_memory m;
	vd_statement cp;
	vd_mem_record rec;
	fake_db db = { .n = 0 };

	(void)state;
	vd_memory_init(&m);
	checkpoint(&cp, "r", 2, hx(5));
	assert_int_equal(vd_memory_post_checkpoint(&m, &cp, "k1", &rec), VD_POST_NEW);
	vd_memory_post_signers(&m, &cp, "r", keys, 1, &rec);
	assert_int_equal(rec.kind, VD_MEM_CHECKPOINT);
	commit_ok(&m, &rec, &db);
	assert_int_equal(m.n_posted_stmts, 1);
	assert_true(vd_memory_has_statement(&m, &cp, "r", "k1"));
	assert_int_equal(vd_memory_post_checkpoint(&m, &cp, "k1", &rec), VD_POST_KNOWN);
	vd_memory_post_signers(&m, &cp, "r", keys, 1, &rec);
	assert_int_equal(rec.kind, VD_MEM_NONE);
	vd_memory_post_signers(&m, &cp, "r", keys, 2, &rec);
	assert_int_equal(rec.kind, VD_MEM_SIGNATURES);
	commit_ok(&m, &rec, &db);
	assert_true(vd_memory_has_statement(&m, &cp, "r", "k2"));
	assert_int_equal(m.n_posted_stmts, 1);
	assert_int_equal(m.n_stmts, 3);
	fake_free(&db);
	vd_memory_free(&m);
}

/* ---- withdrawals --------------------------------------------------------- */

static void withdrawal(vd_withdrawal *w, const char *run, int64_t round, const char *hash)
{
	memset(w, 0, sizeof(*w));
	snprintf(w->run, sizeof(w->run), "%s", run);
	w->round_index = round;
	snprintf(w->hash, sizeof(w->hash), "%s", hash);
	snprintf(w->reason, sizeof(w->reason), "a mistake");
}

static void test_withdraw(void **state)
{
	vd_memory m;
	vd_statement st;
	vd_withdrawal w;
	vd_mem_record rec;
	fake_db db = { .n = 0 };

	(void)state;
	vd_memory_init(&m);
	withdrawal(&w, "r", 0, hx(1));
	assert_int_equal(vd_memory_sources(&m, "r", 0, hx(1)), 0);
	assert_int_equal(vd_memory_withdraw(&m, &w, 10.0, &rec), -ENOENT);

	post_ok(&m, &db, "r", 0, hx(1), "");
	roundclose(&st, "r", 0, hx(1));
	assert_int_equal(vd_memory_remember(&m, &st, "r", "k1", "api", &rec), VD_POST_NEW);
	commit_ok(&m, &rec, &db);
	assert_int_equal(vd_memory_sources(&m, "r", 0, hx(1)),
	    VD_MEM_NAMED_TOKEN | VD_MEM_NAMED_SIGNED);
	assert_int_equal(vd_memory_sources(&m, "r", 0, hx(2)), 0);
	assert_int_equal(vd_memory_sources(&m, "s", 0, hx(1)), 0);
	withdrawal(&w, "r", 0, hx(1));
	snprintf(w.sources, sizeof(w.sources), "roundclose,signed");
	assert_int_equal(vd_memory_withdraw(&m, &w, 10.0, &rec), VD_POST_NEW);
	assert_int_equal(rec.kind, VD_MEM_WITHDRAWAL);
	assert_true(rec.w.at == 10.0);
	assert_false(vd_memory_is_withdrawn(&m, "r", 0, hx(1)));
	commit_ok(&m, &rec, &db);
	assert_true(vd_memory_is_withdrawn(&m, "r", 0, hx(1)));
	assert_int_equal(vd_memory_withdraw(&m, &w, 11.0, &rec), VD_POST_KNOWN);
	assert_int_equal(rec.kind, VD_MEM_NONE);
	fake_free(&db);
	vd_memory_free(&m);
}

/* ---- ledgers ------------------------------------------------------------- */

typedef struct file {
	vd_ledger_entry e[8];
	vd_scan_ledger l;
} file;

static void file_init(file *f, size_t n)
{
	size_t i;

	memset(f, 0, sizeof(*f));
	for (i = 0; i < n; i++) {
		f->e[i].round_index = (int64_t)i;
		snprintf(f->e[i].global_model_hash, sizeof(f->e[i].global_model_hash), "%s", hx(1 + i));
		snprintf(f->e[i].record_hash, sizeof(f->e[i].record_hash), "%s", hx(8 + i));
		f->e[i].line = i + 1;
		f->e[i].trusted = 1;
	}
	f->l.relpath = (char *)"r/ledger.jsonl";
	f->l.run = (char *)"r";
	f->l.read_ok = 1;
	f->l.entries = f->e;
	f->l.n_entries = n;
}

static void read_ok(vd_memory *m, const file *f, fake_db *db, vd_mem_kind kind)
{
	vd_mem_record rec;

	assert_int_equal(vd_memory_read_ledger(m, &f->l, &rec), 0);
	assert_int_equal(rec.kind, kind);
	commit_ok(m, &rec, db);
}

static void test_ledger_append(void **state)
{
	vd_memory m;
	vd_mem_record rec;
	fake_db db = { .n = 0 };
	file f;

	(void)state;
	vd_memory_init(&m);
	file_init(&f, 3);
	f.e[2].trusted = 0;                 /* the chain breaks there */
	assert_int_equal(vd_memory_read_ledger(&m, &f.l, &rec), 0);
	assert_int_equal(rec.kind, VD_MEM_LEDGER_APPEND);
	assert_int_equal(rec.first, 0);
	assert_int_equal(rec.n, 2);
	assert_null(vd_memory_ledger(&m, "r/ledger.jsonl"));
	commit_ok(&m, &rec, &db);
	assert_int_equal(vd_memory_ledger(&m, "r/ledger.jsonl")->n, 2);

	/* Mended and grown: only what is new. */
	file_init(&f, 4);
	assert_int_equal(vd_memory_read_ledger(&m, &f.l, &rec), 0);
	assert_int_equal(rec.first, 2);
	assert_int_equal(rec.n, 2);
	assert_string_equal(rec.recs[0].record_hash, hx(10));
	commit_ok(&m, &rec, &db);
	assert_int_equal(vd_memory_ledger(&m, "r/ledger.jsonl")->n, 4);

	/* A record out of sequence is not applied. */
	rec.kind = VD_MEM_LEDGER_APPEND;
	snprintf(rec.relpath, sizeof(rec.relpath), "r/ledger.jsonl");
	rec.first = 7;
	rec.n = 0;
	assert_int_equal(vd_memory_apply(&m, &rec), -EINVAL);
	fake_free(&db);
	vd_memory_free(&m);
}

static void test_ledger_rewritten(void **state)
{
	const vd_ledger_mem *lm;
	vd_memory m;
	vd_mem_record rec;
	fake_db db = { .n = 0 };
	file f;

	(void)state;
	vd_memory_init(&m);
	file_init(&f, 3);
	read_ok(&m, &f, &db, VD_MEM_LEDGER_APPEND);

	/* A record changed: the memory keeps its records, notes the rest. */
	snprintf(f.e[1].record_hash, sizeof(f.e[1].record_hash), "%s", hx(15));
	assert_int_equal(vd_memory_read_ledger(&m, &f.l, &rec), 0);
	assert_int_equal(rec.kind, VD_MEM_LEDGER_DIVERGED);
	assert_string_equal(rec.detail,
	    "line 2 (record 2) differs from the record seen there before (line 2)");
	assert_int_equal(rec.n, 2);
	commit_ok(&m, &rec, &db);
	lm = vd_memory_ledger(&m, "r/ledger.jsonl");
	assert_int_equal(lm->n, 3);
	assert_true(lm->rewritten);
	assert_int_equal(lm->n_diverged, 2);

	/* Cut short. */
	file_init(&f, 1);
	assert_int_equal(vd_memory_read_ledger(&m, &f.l, &rec), 0);
	assert_string_equal(rec.detail, "it now holds 1 records; 3 were seen before");
	vd_mem_record_free(&rec);

	/* Put back: it extends the memory again. */
	file_init(&f, 3);
	assert_int_equal(vd_memory_read_ledger(&m, &f.l, &rec), 0);
	assert_int_equal(rec.kind, VD_MEM_LEDGER_APPEND);
	assert_int_equal(rec.n, 0);
	commit_ok(&m, &rec, &db);
	assert_false(lm->rewritten);
	assert_int_equal(lm->n_diverged, 0);

	/* Gone, then unreadable: the memory stands. */
	vd_memory_ledger_gone(&m, "r/ledger.jsonl", &rec);
	assert_int_equal(rec.kind, VD_MEM_LEDGER_DIVERGED);
	assert_string_equal(rec.detail, "the file is gone");
	commit_ok(&m, &rec, &db);
	f.l.read_ok = 0;
	assert_int_equal(vd_memory_read_ledger(&m, &f.l, &rec), 0);
	assert_int_equal(rec.kind, VD_MEM_NONE);
	assert_true(lm->rewritten);
	vd_memory_ledger_gone(&m, "other/ledger.jsonl", &rec);
	assert_int_equal(rec.kind, VD_MEM_NONE);
	fake_free(&db);
	vd_memory_free(&m);
}

static void test_ledger_forget(void **state)
{
	vd_memory m;
	vd_mem_record rec;
	fake_db db = { .n = 0 };
	file f;

	(void)state;
	vd_memory_init(&m);
	assert_int_equal(vd_memory_forget_ledger(&m, "r/ledger.jsonl", &rec), -ENOENT);
	file_init(&f, 2);
	read_ok(&m, &f, &db, VD_MEM_LEDGER_APPEND);
	assert_int_equal(vd_memory_forget_ledger(&m, "r/ledger.jsonl", &rec), 0);
	assert_int_equal(rec.kind, VD_MEM_LEDGER_FORGET);
	assert_non_null(vd_memory_ledger(&m, "r/ledger.jsonl"));
	commit_ok(&m, &rec, &db);
	assert_null(vd_memory_ledger(&m, "r/ledger.jsonl"));
	fake_free(&db);
	vd_memory_free(&m);
}

/* ---- retained artifacts --------------------------------------------------- */

static void test_retain(void **state)
{
	vd_memory m;
	vd_retained r, *got;
	vd_mem_record rec;
	fake_db db = { .n = 0 };

	(void)state;
	vd_memory_init(&m);
	memset(&r, 0, sizeof(r));
	snprintf(r.hash, sizeof(r.hash), "%s", hx(2));
	r.run = (char *)"r";
	r.round_index = 2;
	r.has_parent = 1;
	snprintf(r.parent, sizeof(r.parent), "%s", hx(1));
	assert_int_equal(vd_memory_retain(&m, &r, &rec), VD_POST_NEW);
	assert_int_equal(rec.kind, VD_MEM_RETAIN);
	commit_ok(&m, &rec, &db);
	got = vd_map_get(&m.retained, hx(2));
	assert_non_null(got);
	assert_string_equal(got->run, "r");
	assert_ptr_equal(vd_map_get(&m.retained_children, hx(1)), got);
	assert_int_equal(vd_memory_retain(&m, &r, &rec), VD_POST_KNOWN);
	assert_int_equal(rec.kind, VD_MEM_NONE);
	fake_free(&db);
	vd_memory_free(&m);
}

/* ---- a restart ------------------------------------------------------------ */

/* Every kind of record, persisted, restored into a fresh memory: the same
 * memory; rows that do not follow are left out. */
static void test_restore(void **state)
{
	vd_memory m, fresh;
	vd_statement st;
	vd_withdrawal w;
	vd_mem_record rec;
	fake_db db = { .n = 0 };
	file f;
	size_t i;
	char existing[VD_HASH_HEX_LEN + 1];
	vd_commitment c;

	(void)state;
	vd_memory_init(&m);
	post_ok(&m, &db, "r", 0, hx(1), "");
	commitment(&c, "r", 0, hx(2), "");
	assert_int_equal(vd_memory_post(&m, &c, NULL, &rec, existing), VD_POST_CONFLICT);
	commit_ok(&m, &rec, &db);
	roundclose(&st, "r", 1, hx(3));
	assert_int_equal(vd_memory_remember(&m, &st, "r", "k1", "api", &rec), VD_POST_NEW);
	commit_ok(&m, &rec, &db);
	file_init(&f, 2);
	read_ok(&m, &f, &db, VD_MEM_LEDGER_APPEND);
	withdrawal(&w, "r", 1, hx(3));
	assert_int_equal(vd_memory_sources(&m, "r", 1, hx(3)), VD_MEM_NAMED_SIGNED);
	assert_int_equal(vd_memory_sources(&m, "r", 1, hx(2)), VD_MEM_NAMED_LEDGER);
	snprintf(w.sources, sizeof(w.sources), "signed");
	assert_int_equal(vd_memory_withdraw(&m, &w, 5.0, &rec), VD_POST_NEW);
	commit_ok(&m, &rec, &db);

	vd_memory_init(&fresh);
	for (i = 0; i < db.n; i++)
		assert_int_equal(vd_memory_restore(&fresh, &db.kept[i]), VD_RESTORE_APPLIED);
	assert_true(vd_memory_digest(&fresh, 0) == vd_memory_digest(&m, 0));
	assert_true(vd_memory_has_equivocation(&fresh, "r", 0, hx(2)));
	/* Loaded twice: nothing new. */
	for (i = 0; i < db.n; i++)
		if (db.kept[i].kind == VD_MEM_STATEMENT || db.kept[i].kind == VD_MEM_LEDGER_APPEND)
			assert_int_equal(vd_memory_restore(&fresh, &db.kept[i]), VD_RESTORE_SKIPPED);
	assert_true(vd_memory_digest(&fresh, 0) == vd_memory_digest(&m, 0));
	vd_memory_free(&fresh);
	fake_free(&db);
	vd_memory_free(&m);
}

/* The digest does not depend on the order the maps were filled in. */
static void test_digest_order(void **state)
{
	vd_memory a, b;
	vd_withdrawal w1, w2;
	vd_mem_record rec;

	(void)state;
	vd_memory_init(&a);
	vd_memory_init(&b);
	withdrawal(&w1, "r", 0, hx(1));
	withdrawal(&w2, "r", 1, hx(2));
	vd_mem_record_init(&rec, VD_MEM_WITHDRAWAL);
	rec.w = w1;
	assert_int_equal(vd_memory_apply(&a, &rec), 0);
	rec.w = w2;
	assert_int_equal(vd_memory_apply(&a, &rec), 0);
	assert_int_equal(vd_memory_apply(&b, &rec), 0);
	assert_false(vd_memory_digest(&a, 1) == vd_memory_digest(&b, 1));
	rec.w = w1;
	assert_int_equal(vd_memory_apply(&b, &rec), 0);
	assert_true(vd_memory_digest(&a, 1) == vd_memory_digest(&b, 1));
	assert_string_equal(vd_mem_kind_name(VD_MEM_LEDGER_APPEND), "ledger append");
	vd_memory_free(&a);
	vd_memory_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_post_outcomes),
		cmocka_unit_test(test_post_strong_other),
		cmocka_unit_test(test_commit_failed_persist),
		cmocka_unit_test(test_commit_volatile),
		cmocka_unit_test(test_remember),
		cmocka_unit_test(test_post_checkpoint),
		cmocka_unit_test(test_post_signers),
		cmocka_unit_test(test_checkpoint_signers),
		cmocka_unit_test(test_withdraw),
		cmocka_unit_test(test_ledger_append),
		cmocka_unit_test(test_ledger_rewritten),
		cmocka_unit_test(test_ledger_forget),
		cmocka_unit_test(test_retain),
		cmocka_unit_test(test_restore),
		cmocka_unit_test(test_digest_order),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

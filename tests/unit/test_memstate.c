/*
 * The memory of commitments through the real state database: every kind
 * of record made durable by vd_memstate_persist and applied, then the
 * database reopened and the memory rebuilt from its rows alone, which
 * must equal the one kept step by step. A write that fails (a trigger
 * from a second connection, as a full disk) leaves the memory as it was.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "vd_log.h"
#include "vd_memstate.h"

#define HASH_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define HASH_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define HASH_C "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
#define KEY_1 "1111111111111111111111111111111111111111111111111111111111111111"
#define KEY_2 "2222222222222222222222222222222222222222222222222222222222222222"
#define RECORDS 3

typedef struct fx {
	char dir[64];
	char db[128];
	vd_state *st;
	vd_memory m;
} fx;

static int setup(void **state)
{
	fx *f = calloc(1, sizeof(*f));
	char err[256];

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/vd-memstate-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->db, sizeof(f->db), "%s/" VD_STATE_FILE, f->dir);
	assert_int_equal(vd_state_open(f->dir, &f->st, err, sizeof(err)), 0);
	vd_memory_init(&f->m);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	char cmd[160];

	vd_state_close(f->st);
	vd_memory_free(&f->m);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* SQL on a second connection, as another process would. */
static void outside(fx *f, const char *sql)
{
	sqlite3 *db;

	assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

static const vd_audit audit_of = { .run = "r", .kind = VD_AUDIT_ROUND_CLOSE, .number = 7,
	.hash = HASH_A, .source = "signed", .author = VD_AUDIT_KEY, .key_id = KEY_1, .peer = "",
	.file = "" };

static int commit(fx *f, vd_mem_record *rec)
{
	int rc = vd_memory_commit(&f->m, rec, vd_memstate_persist, f->st);

	vd_mem_record_free(rec);
	return rc;
}

static void commitment(vd_commitment *c, int64_t round, const char *hash, const char *key_id)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->run, sizeof(c->run), "r");
	c->round_index = round;
	snprintf(c->hash, sizeof(c->hash), "%s", hash);
	c->schema_version = 2;
	snprintf(c->key_id, sizeof(c->key_id), "%s", key_id);
}

static void statement(vd_statement *st, const vd_commitment *c)
{
	memset(st, 0, sizeof(*st));
	st->kind = VD_STMT_ROUNDCLOSE;
	snprintf(st->run, sizeof(st->run), "r");
	st->schema_version = 2;
	st->round_index = c->round_index;
	snprintf(st->hash, sizeof(st->hash), "%s", c->hash);
}

/* A post, signed by keys (n of them; none: the token's). */
static int post(fx *f, int64_t round, const char *hash, const char *const *keys, size_t n)
{
	char existing[VD_HASH_HEX_LEN + 1];
	vd_commitment c;
	vd_statement st;
	vd_mem_record rec;
	int rc;

	commitment(&c, round, hash, n > 0 ? keys[0] : "");
	statement(&st, &c);
	rc = vd_memory_post(&f->m, &c, NULL, &rec, existing);
	vd_memory_post_signers(&f->m, &st, "r", keys, n, &rec);
	rec.env = (const uint8_t *)"{}";
	rec.env_len = 2;
	assert_int_equal(commit(f, &rec), 0);
	return rc;
}

static void ledger(fx *f, size_t n, const char *changed)
{
	vd_ledger_entry e[RECORDS];
	vd_scan_ledger l;
	vd_mem_record rec;
	size_t i;

	memset(e, 0, sizeof(e));
	for (i = 0; i < n; i++) {
		e[i].round_index = (int64_t)i;
		snprintf(e[i].global_model_hash, sizeof(e[i].global_model_hash), "%s", HASH_A);
		snprintf(e[i].record_hash, sizeof(e[i].record_hash), "%0*zx", VD_HASH_HEX_LEN, i + 1);
		e[i].line = i + 1;
		e[i].trusted = 1;
	}
	if (changed != NULL)
		snprintf(e[0].record_hash, sizeof(e[0].record_hash), "%s", changed);
	memset(&l, 0, sizeof(l));
	l.relpath = (char *)"r/ledger.jsonl";
	l.run = (char *)"r";
	l.read_ok = 1;
	l.entries = e;
	l.n_entries = n;
	assert_int_equal(vd_memory_read_ledger(&f->m, &l, &rec), 0);
	assert_int_equal(commit(f, &rec), 0);
}

/* Every kind of record there is, through the database. */
static void fill(fx *f)
{
	const char *keys[] = { KEY_1, KEY_2 };
	vd_statement cp, file;
	vd_withdrawal w;
	vd_retained r;
	vd_mem_record rec;

	assert_int_equal(post(f, 0, HASH_A, NULL, 0), 0);
	assert_int_equal(post(f, 1, HASH_B, keys, 1), 0);
	assert_int_equal(post(f, 1, HASH_B, keys, 2), 1);          /* one more signer */
	assert_int_equal(post(f, 1, HASH_C, keys + 1, 1), 2);      /* an equivocation */
	assert_int_equal(post(f, 0, HASH_C, NULL, 0), 2);
	assert_int_equal(post(f, 0, HASH_C, NULL, 0), 2);          /* nothing new */

	memset(&cp, 0, sizeof(cp));
	cp.kind = VD_STMT_CHECKPOINT;
	snprintf(cp.run, sizeof(cp.run), "r");
	cp.records = 2;
	snprintf(cp.head_record_hash, sizeof(cp.head_record_hash), "%0*x", VD_HASH_HEX_LEN, 2);
	assert_int_equal(vd_memory_post_checkpoint(&f->m, &cp, KEY_1, &rec), VD_POST_NEW);
	vd_memory_post_signers(&f->m, &cp, "r", keys, 1, &rec);
	rec.env = (const uint8_t *)"{}";
	rec.env_len = 2;
	assert_int_equal(commit(f, &rec), 0);
	assert_int_equal(vd_memory_post_checkpoint(&f->m, &cp, KEY_1, &rec), VD_POST_KNOWN);
	vd_memory_post_signers(&f->m, &cp, "r", keys, 2, &rec);
	assert_int_equal(rec.kind, VD_MEM_SIGNATURES);
	rec.env = (const uint8_t *)"{}";
	rec.env_len = 2;
	assert_int_equal(commit(f, &rec), 0);

	memset(&file, 0, sizeof(file));
	file.kind = VD_STMT_ROUNDCLOSE;
	snprintf(file.run, sizeof(file.run), "r");
	file.schema_version = 2;
	file.round_index = 2;
	snprintf(file.hash, sizeof(file.hash), "%s", HASH_C);
	assert_int_equal(vd_memory_remember(&f->m, &file, "r", KEY_2, "r/commitments/rc2.json",
	    &rec), VD_POST_NEW);
	assert_int_equal(commit(f, &rec), 0);

	ledger(f, 2, NULL);
	ledger(f, RECORDS, NULL);
	assert_int_equal(vd_memory_forget_ledger(&f->m, "r/ledger.jsonl", &rec), 0);
	assert_int_equal(commit(f, &rec), 0);
	ledger(f, 2, HASH_B);

	memset(&w, 0, sizeof(w));
	snprintf(w.run, sizeof(w.run), "r");
	w.round_index = 0;
	snprintf(w.hash, sizeof(w.hash), "%s", HASH_A);
	snprintf(w.sources, sizeof(w.sources), "roundclose");
	snprintf(w.reason, sizeof(w.reason), "a mistake");
	assert_int_equal(vd_memory_withdraw(&f->m, &w, 1.5e9, &rec), VD_POST_NEW);
	assert_int_equal(commit(f, &rec), 0);

	memset(&r, 0, sizeof(r));
	snprintf(r.hash, sizeof(r.hash), "%s", HASH_B);
	r.run = (char *)"r";
	r.round_index = 2;
	r.has_parent = 1;
	snprintf(r.parent, sizeof(r.parent), "%s", HASH_A);
	assert_int_equal(vd_memory_retain(&f->m, &r, &rec), VD_POST_NEW);
	assert_int_equal(commit(f, &rec), 0);
}

static void test_rebuilt_equals_kept(void **state)
{
	fx *f = *state;
	char err[256];
	vd_memory fresh;

	fill(f);
	assert_int_equal(f->m.n_posted, 2);
	assert_int_equal(f->m.n_equivs, 2);
	assert_int_equal(f->m.n_posted_stmts, 1);
	assert_int_equal(f->m.n_stmts, 6);
	vd_state_close(f->st);
	assert_int_equal(vd_state_open(f->dir, &f->st, err, sizeof(err)), 0);
	vd_memory_init(&fresh);
	assert_int_equal(vd_memstate_load(f->st, &fresh, err, sizeof(err)), 0);
	assert_true(vd_memory_digest(&fresh, 0) == vd_memory_digest(&f->m, 0));
	assert_int_equal(fresh.n_stmts, 6);
	assert_string_equal(fresh.equivs[0].key_id, KEY_2);
	vd_memory_free(&fresh);
}

/* A record of each kind, as the shell would persist it: which table a
 * failure at table i stops. */
static void record_for(fx *f, size_t i, vd_mem_record *rec)
{
	static const char *const keys[] = { KEY_1 };
	char existing[VD_HASH_HEX_LEN + 1];
	vd_ledger_entry e;
	vd_scan_ledger l;
	vd_commitment c;
	vd_statement st;

	/* New posts, one a table; then a conflict with the first. */
	commitment(&c, i == 3 ? 7 : 7 + (int64_t)i, i == 3 ? HASH_B : HASH_A, KEY_1);
	statement(&st, &c);
	if (i <= 3) {
		vd_memory_post(&f->m, &c, NULL, rec, existing);
		vd_memory_post_signers(&f->m, &st, "r", keys, 1, rec);
		rec->env = (const uint8_t *)"{}";
		rec->env_len = 2;
		rec->audit = &audit_of;
	} else if (i == 4) {
		memset(&st, 0, sizeof(st));
		st.kind = VD_STMT_CHECKPOINT;
		snprintf(st.run, sizeof(st.run), "r");
		st.records = 1;
		snprintf(st.head_record_hash, sizeof(st.head_record_hash), "%s", HASH_C);
		vd_memory_post_checkpoint(&f->m, &st, KEY_1, rec);
		rec->env = (const uint8_t *)"{}";
		rec->env_len = 2;
	} else if (i == 5) {
		vd_withdrawal w = { .run = "r", .round_index = 7, .hash = HASH_A, .sources = "signed" };
		vd_memory_withdraw(&f->m, &w, 2.0, rec);
	} else {
		memset(&e, 0, sizeof(e));
		snprintf(e.global_model_hash, sizeof(e.global_model_hash), "%s", HASH_A);
		snprintf(e.record_hash, sizeof(e.record_hash), "%s", HASH_C);
		e.line = 1;
		e.trusted = 1;
		l = (vd_scan_ledger){ .relpath = (char *)"s/ledger.jsonl", .run = (char *)"s",
			.read_ok = 1, .entries = &e, .n_entries = 1 };
		assert_int_equal(vd_memory_read_ledger(&f->m, &l, rec), 0);
	}
}

/* Whatever table a record goes to, a write that fails there changes
 * nothing; once it can be written, the same record takes. */
static void test_failed_writes(void **state)
{
	static const char *const tables[] = { "commitments", "commitment_audit", "statements",
		"equivocations", "checkpoints", "withdrawals", "ledger_memory" };
	fx *f = *state;
	char sql[256];
	vd_mem_record rec;
	uint64_t before;
	size_t i;

	for (i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		snprintf(sql, sizeof(sql), "CREATE TRIGGER full BEFORE INSERT ON %s"
		    " BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;", tables[i]);
		outside(f, sql);
		before = vd_memory_digest(&f->m, 1);
		record_for(f, i, &rec);
		assert_int_equal(vd_memory_commit(&f->m, &rec, vd_memstate_persist, f->st), -EIO);
		assert_true(vd_memory_digest(&f->m, 1) == before);
		assert_false(vd_state_ok(f->st));
		outside(f, "DROP TRIGGER full;");
		assert_int_equal(commit(f, &rec), 0);
		assert_false(vd_memory_digest(&f->m, 1) == before);
	}
	assert_true(vd_memory_is_withdrawn(&f->m, "r", 7, HASH_A));
	assert_true(vd_memory_has_equivocation(&f->m, "r", 7, HASH_B));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_rebuilt_equals_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_writes, setup, teardown),
	};

	vd_log_set_level(VD_LOG_ERROR - 1);    /* the failures injected are logged */
	return cmocka_run_group_tests(tests, NULL, NULL);
}

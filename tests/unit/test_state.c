/*
 * The state database from the inside: what a write that fails leaves
 * behind (nothing), the memory of statements and withdrawals across a
 * reopen, and the health the daemon shows while writes fail. Faults are
 * injected with a trigger that aborts one insert, from a second
 * connection, as a full disk would at that step.
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
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "vd_lineage.h"
#include "vd_log.h"
#include "vd_state.h"

#define HASH_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define HASH_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define KEY_1 "1111111111111111111111111111111111111111111111111111111111111111"
#define KEY_2 "2222222222222222222222222222222222222222222222222222222222222222"

typedef struct fx {
	char dir[64];
	char db[128];
	char err[256];
	vd_state *st;
} fx;

static int setup(void **state)
{
	fx *f = calloc(1, sizeof(*f));
	char err[256];

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/vd-state-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->db, sizeof(f->db), "%s/" VD_STATE_FILE, f->dir);
	assert_int_equal(vd_state_open(f->dir, &f->st, err, sizeof(err)), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	char cmd[160];

	vd_state_close(f->st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static void reopen(fx *f)
{
	char err[256];

	vd_state_close(f->st);
	assert_int_equal(vd_state_open(f->dir, &f->st, err, sizeof(err)), 0);
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

static int64_t count(fx *f, const char *sql)
{
	sqlite3 *db;
	sqlite3_stmt *s;
	int64_t n;

	assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	n = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	sqlite3_close(db);
	return n;
}

static vd_commitment rc(const char *hash)
{
	vd_commitment c;

	memset(&c, 0, sizeof(c));
	c.round_index = 4;
	c.schema_version = 2;
	snprintf(c.hash, sizeof(c.hash), "%s", hash);
	return c;
}

static vd_audit audit_of(const vd_commitment *c)
{
	return (vd_audit){ .run = c->run, .kind = VD_AUDIT_ROUND_CLOSE, .number = c->round_index,
	    .hash = c->hash, .source = "roundclose", .author = VD_AUDIT_OPERATOR, .key_id = "",
	    .peer = "127.0.0.1" };
}

/* A post whose audit entry cannot be written records nothing: answered
 * 503, it must not commit (and then vanish at the next restart). */
static void test_post_all_or_nothing(void **state)
{
	fx *f = *state;
	vd_commitment c = rc(HASH_A), old;
	vd_audit a = audit_of(&c);

	outside(f, "CREATE TRIGGER full BEFORE INSERT ON commitment_audit"
	    " BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;");
	assert_int_equal(vd_state_post_commitment(f->st, &c, NULL, 0, &a, NULL, &old), -EIO);
	assert_false(vd_state_ok(f->st));
	assert_true(vd_state_failures(f->st) >= 1);
	assert_int_equal(count(f, "SELECT count(*) FROM commitments"), 0);
	assert_int_equal(count(f, "SELECT count(*) FROM commitment_audit"), 0);

	outside(f, "DROP TRIGGER full;");
	assert_int_equal(vd_state_post_commitment(f->st, &c, NULL, 0, &a, NULL, &old), VD_POST_NEW);
	assert_true(vd_state_ok(f->st));
	assert_int_equal(count(f, "SELECT count(*) FROM commitments"), 1);
	assert_int_equal(count(f, "SELECT count(*) FROM commitment_audit"), 1);

	/* The same again by the same party: nothing new; another hash: a
	 * conflict, and nothing written either. */
	assert_int_equal(vd_state_post_commitment(f->st, &c, NULL, 0, &a, NULL, &old), VD_POST_KNOWN);
	c = rc(HASH_B);
	a = audit_of(&c);
	assert_int_equal(vd_state_post_commitment(f->st, &c, NULL, 0, &a, NULL, &old), VD_POST_CONFLICT);
	assert_string_equal(old.hash, HASH_A);
	assert_int_equal(count(f, "SELECT count(*) FROM commitments"), 1);
	assert_int_equal(count(f, "SELECT count(*) FROM commitment_audit"), 1);
}

typedef struct rows {
	int n;
	char keys[8][VD_KEYID_LEN + 1];
	char where[8][64];
	vd_statement st[8];
} rows;

static void one_stmt(const vd_statement *s, const char *run, const char *key_id,
    const char *where, void *arg)
{
	rows *r = arg;

	assert_true(r->n < 8);
	assert_string_equal(run, "");
	r->st[r->n] = *s;
	snprintf(r->keys[r->n], sizeof(r->keys[0]), "%s", key_id);
	snprintf(r->where[r->n++], sizeof(r->where[0]), "%s", where);
}

/* A statement is kept once per key that signed it, whatever happens to
 * its file, and read back as it was. */
static void test_statements_remembered(void **state)
{
	fx *f = *state;
	vd_statement s;
	rows r;

	memset(&s, 0, sizeof(s));
	s.kind = VD_STMT_ROUNDCLOSE;
	snprintf(s.run, sizeof(s.run), ".");
	s.schema_version = 2;
	s.round_index = 4;
	snprintf(s.hash, sizeof(s.hash), "%s", HASH_A);
	assert_int_equal(vd_state_remember_statement(f->st, &s, "", KEY_1, "commitments/a.json",
	    (const uint8_t *)"{}", 2), VD_POST_NEW);
	assert_int_equal(vd_state_remember_statement(f->st, &s, "", KEY_1, "commitments/b.json",
	    NULL, 0), VD_POST_KNOWN);
	assert_int_equal(vd_state_remember_statement(f->st, &s, "", KEY_2, "api", NULL, 0), VD_POST_NEW);
	assert_int_equal(vd_state_flush(f->st), 0);
	reopen(f);
	memset(&r, 0, sizeof(r));
	assert_int_equal(vd_state_load_statements(f->st, one_stmt, &r, f->err, sizeof(f->err)), 0);
	assert_int_equal(r.n, 2);
	assert_string_equal(r.keys[0], KEY_1);
	assert_string_equal(r.where[0], "commitments/a.json");
	assert_string_equal(r.keys[1], KEY_2);
	assert_int_equal(r.st[1].kind, VD_STMT_ROUNDCLOSE);
	assert_int_equal(r.st[1].round_index, 4);
	assert_string_equal(r.st[1].hash, HASH_A);
	assert_string_equal(r.st[1].run, ".");
}

static void one_withdrawal(const vd_withdrawal *w, void *arg)
{
	vd_withdrawal *out = arg;

	*out = *w;
}

static void test_withdrawal_durable(void **state)
{
	fx *f = *state;
	vd_withdrawal w, back;

	memset(&w, 0, sizeof(w));
	snprintf(w.run, sizeof(w.run), "run-a");
	w.round_index = 7;
	snprintf(w.hash, sizeof(w.hash), "%s", HASH_B);
	snprintf(w.sources, sizeof(w.sources), "signed,ledger");
	snprintf(w.peer, sizeof(w.peer), "::1");
	snprintf(w.reason, sizeof(w.reason), "signed in error");
	w.at = 1.5e9;
	assert_int_equal(vd_state_withdraw(f->st, &w, NULL), 0);
	reopen(f);
	memset(&back, 0, sizeof(back));
	assert_int_equal(vd_state_load_withdrawals(f->st, one_withdrawal, &back, f->err, sizeof(f->err)), 0);
	assert_string_equal(back.run, "run-a");
	assert_int_equal(back.round_index, 7);
	assert_string_equal(back.hash, HASH_B);
	assert_string_equal(back.sources, "signed,ledger");
	assert_string_equal(back.peer, "::1");
	assert_string_equal(back.reason, "signed in error");
	assert_true(back.at == 1.5e9);
}

/* A withdrawal that cannot be written is not taken. */
static void test_withdrawal_failed(void **state)
{
	fx *f = *state;
	vd_withdrawal w, back;

	outside(f, "CREATE TRIGGER full BEFORE INSERT ON withdrawals"
	    " BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;");
	memset(&w, 0, sizeof(w));
	snprintf(w.hash, sizeof(w.hash), "%s", HASH_A);
	assert_int_equal(vd_state_withdraw(f->st, &w, NULL), -EIO);
	assert_false(vd_state_ok(f->st));
	memset(&back, 0, sizeof(back));
	assert_int_equal(vd_state_load_withdrawals(f->st, one_withdrawal, &back, f->err, sizeof(f->err)), 0);
	assert_string_equal(back.hash, "");
}

/* A table that cannot be read at start: the sentence is the caller's to
 * say, and the database counts as failing. */
static void test_load_failed(void **state)
{
	fx *f = *state;
	vd_withdrawal back;

	outside(f, "DROP TABLE withdrawals");
	f->err[0] = '\0';
	assert_int_equal(vd_state_load_withdrawals(f->st, one_withdrawal, &back, f->err,
	    sizeof(f->err)), -EIO);
	assert_string_equal(f->err, "loading withdrawals: no such table: withdrawals");
	assert_false(vd_state_ok(f->st));
}

/* A withdrawal and a checkpoint are recorded with their audit entries,
 * or neither is: answered 503, nothing shows. */
static void test_withdrawal_checkpoint_all_or_nothing(void **state)
{
	fx *f = *state;
	vd_withdrawal w;
	vd_statement cp;
	vd_audit wa, ca;

	memset(&w, 0, sizeof(w));
	snprintf(w.run, sizeof(w.run), "run-a");
	w.round_index = 3;
	snprintf(w.hash, sizeof(w.hash), "%s", HASH_A);
	snprintf(w.sources, sizeof(w.sources), "roundclose");
	wa = (vd_audit){ .run = w.run, .kind = VD_AUDIT_WITHDRAWAL, .number = w.round_index,
	    .hash = w.hash, .source = w.sources, .author = VD_AUDIT_OPERATOR, .key_id = "",
	    .peer = "127.0.0.1" };
	memset(&cp, 0, sizeof(cp));
	cp.kind = VD_STMT_CHECKPOINT;
	snprintf(cp.run, sizeof(cp.run), "run-a");
	cp.records = 2;
	snprintf(cp.head_record_hash, sizeof(cp.head_record_hash), "%s", HASH_B);
	vd_audit_signed(&ca, &cp, cp.run, "k", "127.0.0.1", NULL);

	outside(f, "CREATE TRIGGER full BEFORE INSERT ON commitment_audit"
	    " BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;");
	assert_int_equal(vd_state_withdraw(f->st, &w, &wa), -EIO);
	assert_int_equal(vd_state_post_checkpoint(f->st, &cp, "k", (const uint8_t *)"{}", 2, &ca, NULL), -EIO);
	assert_false(vd_state_ok(f->st));
	assert_int_equal(count(f, "SELECT count(*) FROM withdrawals"), 0);
	assert_int_equal(count(f, "SELECT count(*) FROM checkpoints"), 0);
	assert_int_equal(count(f, "SELECT count(*) FROM commitment_audit"), 0);

	outside(f, "DROP TRIGGER full;");
	assert_int_equal(vd_state_withdraw(f->st, &w, &wa), 0);
	assert_int_equal(vd_state_post_checkpoint(f->st, &cp, "k", (const uint8_t *)"{}", 2, &ca, NULL), VD_POST_NEW);
	assert_true(vd_state_ok(f->st));
	assert_int_equal(count(f, "SELECT count(*) FROM withdrawals"), 1);
	assert_int_equal(count(f, "SELECT count(*) FROM checkpoints"), 1);
	assert_int_equal(count(f, "SELECT count(*) FROM commitment_audit"), 2);
	assert_int_equal(vd_state_post_checkpoint(f->st, &cp, "k", (const uint8_t *)"{}", 2, &ca, NULL), VD_POST_KNOWN);
	assert_int_equal(count(f, "SELECT count(*) FROM commitment_audit"), 2);
}

typedef struct equivs {
	int n;
	vd_commitment c[8];
} equivs;

static void one_equivocation(const vd_commitment *c, void *arg)
{
	equivs *e = arg;

	assert_true(e->n < 8);
	e->c[e->n++] = *c;
}

/* An equivocation is restored with the key that signed the conflicting
 * post (the token's: none); one row per party, in the order recorded. */
static void test_equivocation_keyed(void **state)
{
	fx *f = *state;
	vd_commitment c = rc(HASH_B);
	equivs back;

	snprintf(c.run, sizeof(c.run), "run-a");
	snprintf(c.key_id, sizeof(c.key_id), "k1");
	assert_int_equal(vd_state_record_equivocation(f->st, &c, HASH_A, "signed"), 0);
	snprintf(c.key_id, sizeof(c.key_id), "k2");
	assert_int_equal(vd_state_record_equivocation(f->st, &c, HASH_A, "signed"), 0);
	snprintf(c.key_id, sizeof(c.key_id), "k1");
	assert_int_equal(vd_state_record_equivocation(f->st, &c, HASH_A, "signed"), 0);
	c.round_index = 5;
	c.key_id[0] = '\0';
	assert_int_equal(vd_state_record_equivocation(f->st, &c, HASH_A, "roundclose"), 0);
	reopen(f);
	memset(&back, 0, sizeof(back));
	assert_int_equal(vd_state_load_equivocations(f->st, one_equivocation, &back, f->err, sizeof(f->err)), 0);
	assert_int_equal(back.n, 3);
	assert_string_equal(back.c[0].run, "run-a");
	assert_int_equal(back.c[0].round_index, 4);
	assert_string_equal(back.c[0].hash, HASH_B);
	assert_string_equal(back.c[0].key_id, "k1");
	assert_int_equal(back.c[0].schema_version, 2);
	assert_string_equal(back.c[1].key_id, "k2");
	assert_int_equal(back.c[2].round_index, 5);
	assert_string_equal(back.c[2].key_id, "");
}

/* A signed post, its audit entry and its statement under every key that
 * signed it, or none of them. */
static void test_signed_post_all_or_nothing(void **state)
{
	fx *f = *state;
	vd_commitment c = rc(HASH_A), old;
	vd_audit a = audit_of(&c);
	const char *keys[] = { "k1", "k2" };
	vd_statement stm;
	vd_stmt_sigs sigs;

	memset(&stm, 0, sizeof(stm));
	stm.kind = VD_STMT_ROUNDCLOSE;
	snprintf(stm.run, sizeof(stm.run), ".");
	stm.schema_version = 2;
	stm.round_index = c.round_index;
	snprintf(stm.hash, sizeof(stm.hash), "%s", c.hash);
	snprintf(c.key_id, sizeof(c.key_id), "k1");
	sigs = (vd_stmt_sigs){ .stm = &stm, .run = "", .source = "api", .key_ids = keys, .n = 2,
		.env = (const uint8_t *)"{}", .env_len = 2 };
	outside(f, "CREATE TRIGGER full BEFORE INSERT ON statements"
	    " BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;");
	assert_int_equal(vd_state_post_commitment(f->st, &c, (const uint8_t *)"{}", 2, &a, &sigs,
	    &old), -EIO);
	assert_int_equal(count(f, "SELECT count(*) FROM commitments"), 0);
	assert_int_equal(count(f, "SELECT count(*) FROM commitment_audit"), 0);
	assert_int_equal(vd_state_remember_signatures(f->st, &sigs), -EIO);
	assert_int_equal(count(f, "SELECT count(*) FROM statements"), 0);

	outside(f, "DROP TRIGGER full;");
	sigs.n = 1;
	assert_int_equal(vd_state_post_commitment(f->st, &c, (const uint8_t *)"{}", 2, &a, &sigs,
	    &old), VD_POST_NEW);
	assert_int_equal(count(f, "SELECT count(*) FROM commitments"), 1);
	assert_int_equal(count(f, "SELECT count(*) FROM statements"), 1);
	/* The same again, signed by one more key: its row is added. */
	sigs.n = 2;
	assert_int_equal(vd_state_post_commitment(f->st, &c, (const uint8_t *)"{}", 2, &a, &sigs,
	    &old), VD_POST_KNOWN);
	assert_int_equal(count(f, "SELECT count(*) FROM statements"), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_post_all_or_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_statements_remembered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_withdrawal_durable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_withdrawal_failed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_load_failed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_withdrawal_checkpoint_all_or_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_equivocation_keyed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_signed_post_all_or_nothing, setup, teardown),
	};

	vd_log_set_level(VD_LOG_ERROR - 1);   /* the injected failures are logged */
	return cmocka_run_group_tests(tests, NULL, NULL);
}

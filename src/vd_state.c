#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <sqlite3.h>

#include "vd_lineage.h"
#include "vd_log.h"
#include "vd_state.h"
#include "vd_util.h"

struct vd_state {
	sqlite3 *db;
	int batch;           /* a write transaction is open (vd_state_flush ends it) */
	char error[256];
};

/* Forward migrations: migrations[i] takes user_version i to i + 1. */
static const char *const migrations[VD_STATE_SCHEMA] = {
	"CREATE TABLE commitments ("
	"  run TEXT NOT NULL, round_index INTEGER NOT NULL,"
	"  global_model_hash TEXT NOT NULL, schema_version INTEGER NOT NULL,"
	"  received_at REAL NOT NULL, PRIMARY KEY (run, round_index));"
	"CREATE TABLE verdicts ("
	"  relpath TEXT PRIMARY KEY, fingerprint BLOB NOT NULL, code INTEGER NOT NULL,"
	"  detail TEXT NOT NULL, content_hash TEXT NOT NULL, tensors INTEGER NOT NULL,"
	"  bytes INTEGER NOT NULL, verified_at REAL NOT NULL, duration_ms REAL NOT NULL);"
	"CREATE TABLE equivocations ("
	"  run TEXT NOT NULL, round_index INTEGER NOT NULL, hash_a TEXT NOT NULL,"
	"  hash_b TEXT NOT NULL, source TEXT NOT NULL, seen_at REAL NOT NULL,"
	"  PRIMARY KEY (run, round_index, hash_a, hash_b));"
	"CREATE TABLE alerts ("
	"  id INTEGER PRIMARY KEY, kind TEXT NOT NULL, subject TEXT NOT NULL,"
	"  detail TEXT NOT NULL, event TEXT NOT NULL, at REAL NOT NULL);",
	/* 1 -> 2: chunk digests beside each verdict, for parallel re-checks. */
	"ALTER TABLE verdicts ADD COLUMN chunks BLOB;",
	/* 2 -> 3: signed commitments and the append-only memory of ledgers. */
	"ALTER TABLE commitments ADD COLUMN key_id TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE commitments ADD COLUMN envelope BLOB;"
	"CREATE TABLE checkpoints ("
	"  run TEXT NOT NULL, records INTEGER NOT NULL, head_record_hash TEXT NOT NULL,"
	"  key_id TEXT NOT NULL, envelope BLOB NOT NULL, received_at REAL NOT NULL,"
	"  PRIMARY KEY (run, records, head_record_hash, key_id));"
	"CREATE TABLE ledger_memory ("
	"  path TEXT NOT NULL, seq INTEGER NOT NULL, round_index INTEGER NOT NULL,"
	"  global_model_hash TEXT NOT NULL, record_hash TEXT NOT NULL, line INTEGER NOT NULL,"
	"  PRIMARY KEY (path, seq));",
	/* 3 -> 4: what was verified and committed outlives its directory. */
	"CREATE TABLE retained ("
	"  content_hash TEXT PRIMARY KEY, run TEXT NOT NULL, round_index INTEGER NOT NULL,"
	"  parent_hash TEXT, verified_at REAL NOT NULL, retained_at REAL NOT NULL);",
};

const char *vd_state_error(vd_state *st)
{
	return st->error;
}

static int db_fail(vd_state *st, const char *what)
{
	snprintf(st->error, sizeof(st->error), "%s: %s", what, sqlite3_errmsg(st->db));
	log_error("state database: %s", st->error);
	return -1;
}

static int exec(vd_state *st, const char *sql)
{
	char *msg = NULL;

	if (sqlite3_exec(st->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(st->error, sizeof(st->error), "%s", msg ? msg : "unknown error");
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

/* Verdicts, forgotten verdicts, equivocations and alert events join one
 * transaction that the loop commits once per turn (vd_state_flush): a
 * stream of verdicts then costs one fsync a turn, not one each. What a
 * client is told is stored (posted commitments, checkpoints, forgetting a
 * ledger, remembered records) is committed before the call returns. */
static int batch_begin(vd_state *st)
{
	if (st->batch)
		return 0;
	if (exec(st, "BEGIN IMMEDIATE") < 0)
		return -1;
	st->batch = 1;
	return 0;
}

int vd_state_flush(vd_state *st)
{
	if (st == NULL || !st->batch)
		return 0;
	st->batch = 0;
	if (exec(st, "COMMIT") < 0) {
		db_fail(st, "committing state");
		exec(st, "ROLLBACK");
		return -1;
	}
	return 0;
}

static int user_version(vd_state *st, int *v)
{
	sqlite3_stmt *s;
	int rc;

	if (sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &s, NULL) != SQLITE_OK)
		return -1;
	rc = sqlite3_step(s);
	*v = rc == SQLITE_ROW ? sqlite3_column_int(s, 0) : -1;
	sqlite3_finalize(s);
	return rc == SQLITE_ROW ? 0 : -1;
}

/* A damaged file is refused with the reason, never silently replaced. */
static int check_integrity(vd_state *st)
{
	sqlite3_stmt *s;
	const char *res;
	int ok = 0;

	if (sqlite3_prepare_v2(st->db, "PRAGMA quick_check", -1, &s, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(s) == SQLITE_ROW) {
		res = (const char *)sqlite3_column_text(s, 0);
		ok = res != NULL && strcmp(res, "ok") == 0;
		if (!ok)
			snprintf(st->error, sizeof(st->error), "integrity check: %s", res ? res : "?");
	}
	sqlite3_finalize(s);
	return ok ? 0 : -1;
}

static int migrate(vd_state *st, int from)
{
	char sql[64];
	int v;

	for (v = from; v < VD_STATE_SCHEMA; v++) {
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", v + 1);
		if (exec(st, "BEGIN IMMEDIATE") < 0)
			return -1;
		if (exec(st, migrations[v]) < 0 || exec(st, sql) < 0) {
			char keep[sizeof(st->error)];
			memcpy(keep, st->error, sizeof(keep));
			exec(st, "ROLLBACK");
			memcpy(st->error, keep, sizeof(keep));
			return -1;
		}
		if (exec(st, "COMMIT") < 0)
			return -1;
		if (v > 0 || from > 0)
			log_info("state database migrated to schema %d", v + 1);
	}
	return 0;
}

static int setup(vd_state *st, char *err, size_t errlen, const char *path)
{
	int v;

	sqlite3_busy_timeout(st->db, VD_STATE_BUSY_MS);
	if (check_integrity(st) < 0) {
		snprintf(err, errlen, "%s is damaged (%s); move it aside or restore it from a backup",
		    path, st->error[0] ? st->error : sqlite3_errmsg(st->db));
		return -1;
	}
	if (exec(st, "PRAGMA journal_mode = WAL") < 0 ||
	    exec(st, "PRAGMA synchronous = FULL") < 0 ||
	    exec(st, "PRAGMA foreign_keys = ON") < 0 || user_version(st, &v) < 0) {
		snprintf(err, errlen, "%s: %s", path, st->error[0] ? st->error : sqlite3_errmsg(st->db));
		return -1;
	}
	if (v > VD_STATE_SCHEMA) {
		snprintf(err, errlen, "%s has schema version %d, newer than the %d this lensemble-verifyd knows; run a newer version",
		    path, v, VD_STATE_SCHEMA);
		return -1;
	}
	if (migrate(st, v) < 0) {
		snprintf(err, errlen, "%s: migrating from schema %d failed: %s", path, v, st->error);
		return -1;
	}
	return 0;
}

int vd_state_open(const char *state_dir, vd_state **out, char *err, size_t errlen)
{
	char path[2048];
	vd_state *st;

	if (mkdir(state_dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create the state directory %s: %s", state_dir,
		    strerror(errno));
		return -1;
	}
	snprintf(path, sizeof(path), "%s/%s", state_dir, VD_STATE_FILE);
	if ((st = calloc(1, sizeof(*st))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
	    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "cannot open %s: %s", path,
		    st->db ? sqlite3_errmsg(st->db) : "out of memory");
		vd_state_close(st);
		return -1;
	}
	if (setup(st, err, errlen, path) < 0) {
		vd_state_close(st);
		return -1;
	}
	*out = st;
	return 0;
}

void vd_state_close(vd_state *st)
{
	if (st == NULL)
		return;
	vd_state_flush(st);
	sqlite3_close(st->db);
	free(st);
}

static void copy_text(char *dst, size_t n, const unsigned char *src)
{
	snprintf(dst, n, "%s", src ? (const char *)src : "");
}

int vd_state_load_verdicts(vd_state *st, vd_verdict_fn fn, void *arg)
{
	sqlite3_stmt *s;
	vd_stored_verdict v;
	int rc;

	if (sqlite3_prepare_v2(st->db, "SELECT relpath, fingerprint, code, detail, content_hash,"
	    " tensors, bytes, verified_at, duration_ms, chunks FROM verdicts", -1, &s, NULL) != SQLITE_OK)
		return db_fail(st, "loading verdicts");
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		memset(&v, 0, sizeof(v));
		copy_text(v.relpath, sizeof(v.relpath), sqlite3_column_text(s, 0));
		if (sqlite3_column_bytes(s, 1) != (int)sizeof(v.fingerprint))
			continue;
		memcpy(v.fingerprint, sqlite3_column_blob(s, 1), sizeof(v.fingerprint));
		v.code = (vd_code)sqlite3_column_int(s, 2);
		copy_text(v.detail, sizeof(v.detail), sqlite3_column_text(s, 3));
		copy_text(v.content_hash, sizeof(v.content_hash), sqlite3_column_text(s, 4));
		v.tensors = (uint64_t)sqlite3_column_int64(s, 5);
		v.bytes = (uint64_t)sqlite3_column_int64(s, 6);
		v.verified_at = sqlite3_column_double(s, 7);
		v.duration_ms = sqlite3_column_double(s, 8);
		v.chunks = sqlite3_column_blob(s, 9);
		v.chunks_len = (size_t)sqlite3_column_bytes(s, 9);
		if ((unsigned)v.code <= VD_IO_ERROR)
			fn(&v, arg);
	}
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "loading verdicts");
}

int vd_state_put_verdict(vd_state *st, const vd_stored_verdict *v)
{
	sqlite3_stmt *s;
	int rc;

	if (batch_begin(st) < 0)
		return db_fail(st, "starting a state transaction");
	if (sqlite3_prepare_v2(st->db, "INSERT OR REPLACE INTO verdicts VALUES (?,?,?,?,?,?,?,?,?,?)",
	    -1, &s, NULL) != SQLITE_OK)
		return db_fail(st, "storing a verdict");
	sqlite3_bind_text(s, 1, v->relpath, -1, SQLITE_STATIC);
	sqlite3_bind_blob(s, 2, v->fingerprint, sizeof(v->fingerprint), SQLITE_STATIC);
	sqlite3_bind_int(s, 3, (int)v->code);
	sqlite3_bind_text(s, 4, v->detail, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 5, v->content_hash, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 6, (sqlite3_int64)v->tensors);
	sqlite3_bind_int64(s, 7, (sqlite3_int64)v->bytes);
	sqlite3_bind_double(s, 8, v->verified_at);
	sqlite3_bind_double(s, 9, v->duration_ms);
	if (v->chunks != NULL)
		sqlite3_bind_blob(s, 10, v->chunks, (int)v->chunks_len, SQLITE_STATIC);
	else
		sqlite3_bind_null(s, 10);
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "storing a verdict");
}

int vd_state_forget_verdict(vd_state *st, const char *relpath)
{
	sqlite3_stmt *s;
	int rc;

	if (batch_begin(st) < 0)
		return db_fail(st, "starting a state transaction");
	if (sqlite3_prepare_v2(st->db, "DELETE FROM verdicts WHERE relpath = ?", -1, &s,
	    NULL) != SQLITE_OK)
		return db_fail(st, "forgetting a verdict");
	sqlite3_bind_text(s, 1, relpath, -1, SQLITE_STATIC);
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "forgetting a verdict");
}

static void row_commitment(sqlite3_stmt *s, vd_commitment *c)
{
	memset(c, 0, sizeof(*c));
	copy_text(c->run, sizeof(c->run), sqlite3_column_text(s, 0));
	c->round_index = sqlite3_column_int64(s, 1);
	copy_text(c->hash, sizeof(c->hash), sqlite3_column_text(s, 2));
	c->schema_version = sqlite3_column_int64(s, 3);
	c->received_at = sqlite3_column_double(s, 4);
	copy_text(c->key_id, sizeof(c->key_id), sqlite3_column_text(s, 5));
}

int vd_state_load_commitments(vd_state *st, vd_commitment_fn fn, void *arg)
{
	sqlite3_stmt *s;
	vd_commitment c;
	int rc;

	if (sqlite3_prepare_v2(st->db, "SELECT run, round_index, global_model_hash,"
	    " schema_version, received_at, key_id FROM commitments ORDER BY run, round_index",
	    -1, &s, NULL) != SQLITE_OK)
		return db_fail(st, "loading commitments");
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		row_commitment(s, &c);
		fn(&c, arg);
	}
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "loading commitments");
}

static int find_commitment(vd_state *st, const char *run, int64_t round, vd_commitment *out)
{
	sqlite3_stmt *s;
	int rc;

	if (sqlite3_prepare_v2(st->db, "SELECT run, round_index, global_model_hash,"
	    " schema_version, received_at, key_id FROM commitments WHERE run = ? AND round_index = ?",
	    -1, &s, NULL) != SQLITE_OK)
		return db_fail(st, "reading a commitment");
	sqlite3_bind_text(s, 1, run, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, round);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		row_commitment(s, out);
	sqlite3_finalize(s);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return db_fail(st, "reading a commitment");
	return rc == SQLITE_ROW;
}

int vd_state_post_commitment(vd_state *st, const vd_commitment *c,
    const uint8_t *env, size_t env_len, vd_commitment *existing)
{
	sqlite3_stmt *s;
	int rc;

	if (vd_state_flush(st) < 0)
		return -1;
	if (exec(st, "BEGIN IMMEDIATE") < 0)
		return db_fail(st, "posting a commitment");
	rc = find_commitment(st, c->run, c->round_index, existing);
	if (rc != 0) {
		exec(st, "ROLLBACK");
		return rc < 0 ? -1 : strcmp(existing->hash, c->hash) == 0 ? 1 : 2;
	}
	if (sqlite3_prepare_v2(st->db, "INSERT INTO commitments (run, round_index,"
	    " global_model_hash, schema_version, received_at, key_id, envelope)"
	    " VALUES (?,?,?,?,?,?,?)", -1, &s,
	    NULL) != SQLITE_OK) {
		exec(st, "ROLLBACK");
		return db_fail(st, "posting a commitment");
	}
	sqlite3_bind_text(s, 1, c->run, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, c->round_index);
	sqlite3_bind_text(s, 3, c->hash, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 4, c->schema_version);
	sqlite3_bind_double(s, 5, vd_wall_now());
	sqlite3_bind_text(s, 6, c->key_id, -1, SQLITE_STATIC);
	if (env != NULL)
		sqlite3_bind_blob(s, 7, env, (int)env_len, SQLITE_STATIC);
	else
		sqlite3_bind_null(s, 7);
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE || exec(st, "COMMIT") < 0) {
		db_fail(st, "posting a commitment");
		exec(st, "ROLLBACK");
		return -1;
	}
	return 0;
}

int vd_state_record_equivocation(vd_state *st, const char *run, int64_t round,
    const char *hash_a, const char *hash_b, const char *source)
{
	sqlite3_stmt *s;
	int rc;

	if (vd_state_flush(st) < 0)
		return -1;
	if (sqlite3_prepare_v2(st->db, "INSERT OR IGNORE INTO equivocations VALUES (?,?,?,?,?,?)",
	    -1, &s, NULL) != SQLITE_OK)
		return db_fail(st, "recording an equivocation");
	sqlite3_bind_text(s, 1, run, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, round);
	sqlite3_bind_text(s, 3, hash_a, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 4, hash_b, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 5, source, -1, SQLITE_STATIC);
	sqlite3_bind_double(s, 6, vd_wall_now());
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "recording an equivocation");
}

int vd_state_load_equivocations(vd_state *st, vd_commitment_fn fn, void *arg)
{
	sqlite3_stmt *s;
	vd_commitment c;
	int rc;

	/* Reported as the rejected hash (hash_b) for the round. */
	if (sqlite3_prepare_v2(st->db, "SELECT run, round_index, hash_b, 0, seen_at, ''"
	    " FROM equivocations", -1, &s, NULL) != SQLITE_OK)
		return db_fail(st, "loading equivocations");
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		row_commitment(s, &c);
		fn(&c, arg);
	}
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "loading equivocations");
}

int vd_state_alert(vd_state *st, const char *kind, const char *subject,
    const char *detail, int raised)
{
	sqlite3_stmt *s;
	int rc;

	if (batch_begin(st) < 0)
		return db_fail(st, "starting a state transaction");
	if (sqlite3_prepare_v2(st->db, "INSERT INTO alerts (kind, subject, detail, event, at)"
	    " VALUES (?,?,?,?,?)", -1, &s, NULL) != SQLITE_OK)
		return db_fail(st, "recording an alert");
	sqlite3_bind_text(s, 1, kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, subject, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 3, detail, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 4, raised ? "raised" : "cleared", -1, SQLITE_STATIC);
	sqlite3_bind_double(s, 5, vd_wall_now());
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "recording an alert");
}

int vd_state_post_checkpoint(vd_state *st, const vd_statement *c, const char *key_id,
    const uint8_t *env, size_t env_len)
{
	sqlite3_stmt *s;
	int rc;

	if (vd_state_flush(st) < 0)
		return -1;
	if (sqlite3_prepare_v2(st->db, "INSERT OR IGNORE INTO checkpoints VALUES (?,?,?,?,?,?)",
	    -1, &s, NULL) != SQLITE_OK)
		return db_fail(st, "posting a checkpoint");
	sqlite3_bind_text(s, 1, c->run, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)c->records);
	sqlite3_bind_text(s, 3, c->head_record_hash, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 4, key_id, -1, SQLITE_STATIC);
	sqlite3_bind_blob(s, 5, env, (int)env_len, SQLITE_STATIC);
	sqlite3_bind_double(s, 6, vd_wall_now());
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE)
		return db_fail(st, "posting a checkpoint");
	return sqlite3_changes(st->db) == 1 ? 0 : 1;
}

int vd_state_load_checkpoints(vd_state *st, vd_checkpoint_fn fn, void *arg)
{
	sqlite3_stmt *s;
	vd_statement c;
	char key_id[VD_KEYID_LEN + 1];
	int rc;

	if (sqlite3_prepare_v2(st->db, "SELECT run, records, head_record_hash, key_id"
	    " FROM checkpoints ORDER BY run, records", -1, &s, NULL) != SQLITE_OK)
		return db_fail(st, "loading checkpoints");
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		memset(&c, 0, sizeof(c));
		c.kind = VD_STMT_CHECKPOINT;
		copy_text(c.run, sizeof(c.run), sqlite3_column_text(s, 0));
		c.records = (uint64_t)sqlite3_column_int64(s, 1);
		copy_text(c.head_record_hash, sizeof(c.head_record_hash), sqlite3_column_text(s, 2));
		copy_text(key_id, sizeof(key_id), sqlite3_column_text(s, 3));
		fn(&c, key_id, arg);
	}
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "loading checkpoints");
}

int vd_state_load_ledgers(vd_state *st, vd_ledger_rec_fn fn, void *arg)
{
	sqlite3_stmt *s;
	int rc;

	if (sqlite3_prepare_v2(st->db, "SELECT path, seq, round_index, global_model_hash,"
	    " record_hash, line FROM ledger_memory ORDER BY path, seq", -1, &s, NULL) != SQLITE_OK)
		return db_fail(st, "loading ledger memory");
	while ((rc = sqlite3_step(s)) == SQLITE_ROW)
		fn((const char *)sqlite3_column_text(s, 0), sqlite3_column_int64(s, 1),
		    sqlite3_column_int64(s, 2), (const char *)sqlite3_column_text(s, 3),
		    (const char *)sqlite3_column_text(s, 4), sqlite3_column_int64(s, 5), arg);
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "loading ledger memory");
}

static int insert_recs(vd_state *st, const char *path, size_t first,
    const vd_ledger_rec *recs, size_t n)
{
	sqlite3_stmt *s;
	size_t i;
	int rc = SQLITE_DONE;

	if (sqlite3_prepare_v2(st->db, "INSERT INTO ledger_memory VALUES (?,?,?,?,?,?)", -1, &s,
	    NULL) != SQLITE_OK)
		return -1;
	for (i = 0; i < n && rc == SQLITE_DONE; i++) {
		sqlite3_bind_text(s, 1, path, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 2, (sqlite3_int64)(first + i));
		sqlite3_bind_int64(s, 3, recs[i].round_index);
		sqlite3_bind_text(s, 4, recs[i].hash, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 5, recs[i].record_hash, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 6, (sqlite3_int64)recs[i].line);
		rc = sqlite3_step(s);
		sqlite3_reset(s);
	}
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : -1;
}

int vd_state_append_ledger(vd_state *st, const char *path, size_t first,
    const vd_ledger_rec *recs, size_t n)
{
	if (vd_state_flush(st) < 0)
		return -1;
	if (exec(st, "BEGIN IMMEDIATE") < 0)
		return db_fail(st, "remembering ledger records");
	if (insert_recs(st, path, first, recs, n) < 0 || exec(st, "COMMIT") < 0) {
		db_fail(st, "remembering ledger records");
		exec(st, "ROLLBACK");
		return -1;
	}
	return 0;
}

int vd_state_forget_ledger(vd_state *st, const char *path)
{
	sqlite3_stmt *s;
	int rc;

	if (vd_state_flush(st) < 0)
		return -1;
	if (sqlite3_prepare_v2(st->db, "DELETE FROM ledger_memory WHERE path = ?", -1, &s,
	    NULL) != SQLITE_OK)
		return db_fail(st, "forgetting a ledger");
	sqlite3_bind_text(s, 1, path, -1, SQLITE_STATIC);
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "forgetting a ledger");
}

int vd_state_retain(vd_state *st, const vd_retained *r)
{
	sqlite3_stmt *s;
	int rc;

	if (batch_begin(st) < 0)
		return db_fail(st, "starting a state transaction");
	if (sqlite3_prepare_v2(st->db, "INSERT OR IGNORE INTO retained VALUES (?,?,?,?,?,?)",
	    -1, &s, NULL) != SQLITE_OK)
		return db_fail(st, "remembering an artifact");
	sqlite3_bind_text(s, 1, r->hash, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, r->run, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, r->round_index);
	if (r->has_parent)
		sqlite3_bind_text(s, 4, r->parent, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(s, 4);
	sqlite3_bind_double(s, 5, r->verified_at);
	sqlite3_bind_double(s, 6, vd_wall_now());
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "remembering an artifact");
}

int vd_state_load_retained(vd_state *st, vd_retained_fn fn, void *arg)
{
	sqlite3_stmt *s;
	vd_retained r;
	char run[VD_RUN_MAX];
	int rc;

	if (sqlite3_prepare_v2(st->db, "SELECT content_hash, run, round_index, parent_hash,"
	    " verified_at FROM retained", -1, &s, NULL) != SQLITE_OK)
		return db_fail(st, "loading remembered artifacts");
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		memset(&r, 0, sizeof(r));
		copy_text(r.hash, sizeof(r.hash), sqlite3_column_text(s, 0));
		copy_text(run, sizeof(run), sqlite3_column_text(s, 1));
		r.run = run;
		r.round_index = sqlite3_column_int64(s, 2);
		r.has_parent = sqlite3_column_type(s, 3) != SQLITE_NULL;
		copy_text(r.parent, sizeof(r.parent), sqlite3_column_text(s, 3));
		r.verified_at = sqlite3_column_double(s, 4);
		fn(&r, arg);
	}
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "loading remembered artifacts");
}

#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <sqlite3.h>

#include "vd_limits.h"
#include "vd_lineage.h"
#include "vd_log.h"
#include "vd_omskeys.h"
#include "vd_state.h"
#include "vd_util.h"

struct vd_state {
	sqlite3 *db;
	int batch;           /* a write transaction is open (vd_state_flush ends
	                      * it): 1 committed without a sync, 2 with one */
	double synced_at;    /* when a batch was last committed with a sync */
	int failing;         /* the last write failed; a commit since clears it */
	uint64_t failures;   /* writes that failed, since start */
	unsigned alert_retention;    /* seconds; 0: cleared alerts are kept */
	double next_prune;   /* when old cleared alerts are next removed */
	struct {
		const char *sql;             /* a string literal: compared by address */
		sqlite3_stmt *stmt;
	} cache[VD_STMT_CACHE_MAX];
};

/* The prepared statement of sql, reset; finish it with done(). */
static int prepared(vd_state *st, const char *sql, sqlite3_stmt **out)
{
	size_t i;

	for (i = 0; i < VD_STMT_CACHE_MAX && st->cache[i].sql != NULL; i++)
		if (st->cache[i].sql == sql) {
			*out = st->cache[i].stmt;
			return SQLITE_OK;
		}
	if (i == VD_STMT_CACHE_MAX)
		return sqlite3_prepare_v2(st->db, sql, -1, out, NULL);
	if (sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, out, NULL) != SQLITE_OK)
		return SQLITE_ERROR;
	st->cache[i].sql = sql;
	st->cache[i].stmt = *out;
	return SQLITE_OK;
}

static void done(vd_state *st, sqlite3_stmt *s)
{
	size_t i;

	for (i = 0; i < VD_STMT_CACHE_MAX; i++)
		if (st->cache[i].stmt == s) {
			sqlite3_reset(s);
			sqlite3_clear_bindings(s);
			return;
		}
	sqlite3_finalize(s);
}

static const char SQL_PUT_VERDICT[] =
	"INSERT OR REPLACE INTO verdicts (relpath, fingerprint, code, detail, content_hash,"
	" tensors, bytes, verified_at, duration_ms, chunks, expected_hash, recomputed_hash,"
	" file_schema_version, reader_max_version, tensor, file, remediation, oms_code,"
	" oms_verified, oms_differ, oms_method, oms_key_id, oms_detail, oms_trust)"
	" VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
static const char SQL_RETAIN[] = "INSERT OR IGNORE INTO retained VALUES (?,?,?,?,?,?)";
static const char SQL_LEDGER_REC[] = "INSERT INTO ledger_memory VALUES (?,?,?,?,?,?)";
/* One a verdict, alert, head or commitment published: 16,000 in a first
 * pass at 16,000 rounds, each parsed again before. */
static const char SQL_PUT_EVENT[] = "INSERT OR REPLACE INTO events VALUES (?,?,?,?)";
static const char SQL_AUDIT[] = "INSERT OR IGNORE INTO commitment_audit (run, kind, number,"
	" hash, source, author, key_id, peer, file, line, first_seen) VALUES (?,?,?,?,?,?,?,?,?,?,?)";

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
	/* 4 -> 5: the history GET /events resumes from (Last-Event-ID). */
	"CREATE TABLE events ("
	"  id INTEGER PRIMARY KEY, type TEXT NOT NULL, data TEXT NOT NULL, at REAL NOT NULL);",
	/* 5 -> 6: alerts as episodes for GET /alerts (the raised and cleared
	 * events folded: a raise repeated at a restart with no clear between
	 * continues its episode), and the audit of commitments for GET
	 * /commitments, started from what is known: posts with the time they
	 * were received (the token and the client unknown), remembered ledger
	 * records with the time of the upgrade. */
	"CREATE TABLE alert_episodes ("
	"  id INTEGER PRIMARY KEY, kind TEXT NOT NULL, subject TEXT NOT NULL,"
	"  detail TEXT NOT NULL, raised_at REAL NOT NULL, cleared_at REAL,"
	"  confirmed_at REAL NOT NULL);"
	"CREATE INDEX alerts_by_key ON alerts (kind, subject, id);"
	"INSERT INTO alert_episodes (kind, subject, detail, raised_at, cleared_at, confirmed_at)"
	"  SELECT r.kind, r.subject, r.detail, r.at,"
	"    (SELECT c.at FROM alerts c WHERE c.kind = r.kind AND c.subject = r.subject"
	"      AND c.event = 'cleared' AND c.id > r.id ORDER BY c.id LIMIT 1), r.at"
	"  FROM alerts r WHERE r.event = 'raised' AND NOT EXISTS ("
	"    SELECT 1 FROM alerts p WHERE p.kind = r.kind AND p.subject = r.subject"
	"      AND p.event = 'raised' AND p.id < r.id AND NOT EXISTS ("
	"        SELECT 1 FROM alerts c WHERE c.kind = r.kind AND c.subject = r.subject"
	"          AND c.event = 'cleared' AND c.id > p.id AND c.id < r.id))"
	"  ORDER BY r.id;"
	"DROP TABLE alerts;"
	"ALTER TABLE alert_episodes RENAME TO alerts;"
	"CREATE INDEX alerts_open ON alerts (kind, subject) WHERE cleared_at IS NULL;"
	"CREATE INDEX alerts_cleared ON alerts (cleared_at) WHERE cleared_at IS NOT NULL;"
	"CREATE TABLE commitment_audit ("
	"  id INTEGER PRIMARY KEY, run TEXT NOT NULL, kind TEXT NOT NULL, number INTEGER NOT NULL,"
	"  hash TEXT NOT NULL, source TEXT NOT NULL, author TEXT NOT NULL, key_id TEXT NOT NULL,"
	"  peer TEXT NOT NULL, file TEXT NOT NULL, line INTEGER NOT NULL, first_seen REAL NOT NULL,"
	"  UNIQUE (run, kind, number, hash, author, key_id, file));"
	"CREATE INDEX commitment_audit_run ON commitment_audit (run, id);"
	"INSERT OR IGNORE INTO commitment_audit (run, kind, number, hash, source, author,"
	"  key_id, peer, file, line, first_seen)"
	"  SELECT run, kind, number, hash, source, author, key_id, peer, file, line, t FROM ("
	"    SELECT run, 'round_close' AS kind, round_index AS number, global_model_hash AS hash,"
	"      CASE key_id WHEN '' THEN 'roundclose' ELSE 'signed' END AS source,"
	"      CASE key_id WHEN '' THEN 'token' ELSE 'key' END AS author, key_id,"
	"      '' AS peer, '' AS file, 0 AS line, received_at AS t, 0 AS seq FROM commitments"
	"    UNION ALL SELECT run, 'ledger_checkpoint', records, head_record_hash, 'signed',"
	"      'key', key_id, '', '', 0, received_at, 0 FROM checkpoints"
	"    UNION ALL SELECT rtrim(rtrim(path, replace(path, '/', '')), '/'), 'round_close',"
	"      round_index, global_model_hash, 'ledger', 'unsigned', '', '', path, line,"
	"      (julianday('now') - 2440587.5) * 86400.0, seq FROM ledger_memory)"
	"  ORDER BY t, seq;",
	/* 6 -> 7: the facts behind a failed verdict, NULL where they do not
	 * apply (and in rows from before: those facts were never kept). */
	"ALTER TABLE verdicts ADD COLUMN expected_hash TEXT;"
	"ALTER TABLE verdicts ADD COLUMN recomputed_hash TEXT;"
	"ALTER TABLE verdicts ADD COLUMN file_schema_version INTEGER;"
	"ALTER TABLE verdicts ADD COLUMN reader_max_version INTEGER;"
	"ALTER TABLE verdicts ADD COLUMN tensor TEXT;"
	"ALTER TABLE verdicts ADD COLUMN file TEXT;"
	"ALTER TABLE verdicts ADD COLUMN remediation TEXT;",
	/* 7 -> 8: every signed statement accepted, one row per key whose
	 * signature verified, kept whatever happens to its file; and the
	 * operator's withdrawals (trust.md section 8). A RoundClose keys on
	 * (round_index, hash); a checkpoint on (records, head_record_hash). */
	"CREATE TABLE statements ("
	"  run TEXT NOT NULL, kind INTEGER NOT NULL, number INTEGER NOT NULL,"
	"  hash TEXT NOT NULL, schema_version INTEGER NOT NULL, key_id TEXT NOT NULL,"
	"  source TEXT NOT NULL, envelope BLOB, received_at REAL NOT NULL,"
	"  PRIMARY KEY (run, kind, number, hash, key_id));"
	"CREATE TABLE withdrawals ("
	"  run TEXT NOT NULL, round_index INTEGER NOT NULL, hash TEXT NOT NULL,"
	"  sources TEXT NOT NULL, peer TEXT NOT NULL, reason TEXT NOT NULL, at REAL NOT NULL,"
	"  PRIMARY KEY (run, round_index, hash));",
	/* 8 -> 9: the OMS bundle beside the files as last checked (oms_code
	 * NULL: none), and the run's keys it was checked under. */
	"ALTER TABLE verdicts ADD COLUMN oms_code INTEGER;"
	"ALTER TABLE verdicts ADD COLUMN oms_verified INTEGER;"
	"ALTER TABLE verdicts ADD COLUMN oms_differ INTEGER;"
	"ALTER TABLE verdicts ADD COLUMN oms_method TEXT;"
	"ALTER TABLE verdicts ADD COLUMN oms_key_id TEXT;"
	"ALTER TABLE verdicts ADD COLUMN oms_detail TEXT;"
	"ALTER TABLE verdicts ADD COLUMN oms_trust TEXT;",
	/* 9 -> 10: the key and schema_version of a conflicting post, so that
	 * a restart restores the equivocation as it was (a key revoked stops
	 * it counting); one row per key. Rows from before were the token's or
	 * of a key not kept: '', and of no known schema_version: 0. */
	"CREATE TABLE equivocations_keyed ("
	"  run TEXT NOT NULL, round_index INTEGER NOT NULL, hash_a TEXT NOT NULL,"
	"  hash_b TEXT NOT NULL, source TEXT NOT NULL, seen_at REAL NOT NULL,"
	"  key_id TEXT NOT NULL DEFAULT '', schema_version INTEGER NOT NULL DEFAULT 0,"
	"  PRIMARY KEY (run, round_index, hash_a, hash_b, key_id));"
	"INSERT INTO equivocations_keyed (run, round_index, hash_a, hash_b, source, seen_at)"
	"  SELECT run, round_index, hash_a, hash_b, source, seen_at FROM equivocations;"
	"DROP TABLE equivocations;"
	"ALTER TABLE equivocations_keyed RENAME TO equivocations;",
};

/* A write (or a read while running) that failed: logged here, since its
 * callers only mark the store's health. */
static int db_fail(vd_state *st, const char *what)
{
	log_error("state database: %s: %s", what, sqlite3_errmsg(st->db));
	st->failing = 1;
	st->failures++;
	return -EIO;
}

/* A load at start that failed: the sentence goes to the caller, who
 * refuses to start with it. */
static int load_fail(vd_state *st, const char *what, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s: %s", what, sqlite3_errmsg(st->db));
	st->failing = 1;
	st->failures++;
	return -EIO;
}

int vd_state_ok(const vd_state *st)
{
	return st == NULL || !st->failing;
}

uint64_t vd_state_failures(const vd_state *st)
{
	return st != NULL ? st->failures : 0;
}

/* SQLite's sentence and, when a system call failed under it, errno: "unable
 * to open database file" alone does not say whether the file is missing,
 * forbidden or on a full disk. */
static const char *db_reason(vd_state *st, char *buf, size_t n)
{
	int e = st->db ? sqlite3_system_errno(st->db) : 0;

	snprintf(buf, n, "%s", st->db ? sqlite3_errmsg(st->db) : "out of memory");
	if (e != 0)
		snprintf(buf + strlen(buf), n - strlen(buf), " (errno %d, %s)", e, strerror(e));
	return buf;
}

/* sql run; on failure SQLite's sentence goes to why (NULL: dropped, for
 * callers that report sqlite3_errmsg through db_fail). */
static int exec_why(vd_state *st, const char *sql, char *why, size_t n)
{
	char *msg = NULL;

	if (sqlite3_exec(st->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		if (why != NULL)
			snprintf(why, n, "%s", msg ? msg : "unknown error");
		sqlite3_free(msg);
		return -EIO;
	}
	return 0;
}

static int exec(vd_state *st, const char *sql)
{
	return exec_why(st, sql, NULL, 0);
}

/* A transaction committed: the database takes writes again. */
static int commit_why(vd_state *st, char *why, size_t n)
{
	if (exec_why(st, "COMMIT", why, n) < 0)
		return -EIO;
	st->failing = 0;
	return 0;
}

static int commit(vd_state *st)
{
	return commit_why(st, NULL, 0);
}

static int audit_insert(vd_state *st, const vd_audit *a);

/* Verdicts, forgotten verdicts, remembered artifacts, alert episodes,
 * events and statement files' audit rows join one transaction that the
 * loop commits once per turn (vd_state_flush), synced to disk at most once
 * per VD_STATE_SYNC_INTERVAL: a batch between syncs is committed with
 * synchronous = NORMAL, which in WAL mode loses nothing to a crash of the
 * process and at most that interval of batches, all of which can be
 * computed again, to a power loss. Everything else, what a client is told
 * is stored among it (posted commitments and checkpoints, forgetting a
 * ledger, remembered ledger records, equivocations), is committed under
 * the connection's synchronous = FULL before the call returns, which
 * syncs the batches before it too. */
static int batch_begin(vd_state *st)
{
	int sync;

	if (st->batch)
		return 0;
	sync = vd_wall_now() - st->synced_at >= VD_STATE_SYNC_INTERVAL;
	if (!sync && exec(st, "PRAGMA synchronous = NORMAL") < 0)
		return -EIO;
	if (exec(st, "BEGIN IMMEDIATE") < 0) {
		if (!sync)
			exec(st, "PRAGMA synchronous = FULL");
		return -EIO;
	}
	st->batch = sync ? 2 : 1;
	return 0;
}

static void prune_alerts(vd_state *st, double now);

int vd_state_flush(vd_state *st)
{
	double now;
	int synced, rc;

	if (st == NULL)
		return 0;
	/* The loop flushes every turn: old alerts go at its first flush and
	 * then hourly, in the batch, without a timer of their own. */
	if (st->alert_retention > 0 && (now = vd_wall_now()) >= st->next_prune) {
		st->next_prune = now + VD_STATE_PRUNE_INTERVAL;
		prune_alerts(st, now);
	}
	if (!st->batch)
		return 0;
	synced = st->batch == 2;
	st->batch = 0;
	if ((rc = commit(st)) < 0) {
		db_fail(st, "committing state");
		exec(st, "ROLLBACK");
	} else if (synced) {
		st->synced_at = vd_wall_now();
	}
	/* Whatever the commit did: every other write is synced. */
	if (!synced && exec(st, "PRAGMA synchronous = FULL") < 0)
		rc = db_fail(st, "restoring synchronous = FULL");
	return rc;
}

static int user_version(vd_state *st, int *v)
{
	sqlite3_stmt *s;
	int rc;

	if (sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &s, NULL) != SQLITE_OK)
		return -EIO;
	rc = sqlite3_step(s);
	*v = rc == SQLITE_ROW ? sqlite3_column_int(s, 0) : -1;
	sqlite3_finalize(s);
	return rc == SQLITE_ROW ? 0 : -EIO;
}

/* A damaged file is refused with the reason, never silently replaced. */
static int check_integrity(vd_state *st, char *why, size_t n)
{
	sqlite3_stmt *s;
	const char *res;
	int ok = 0;

	if (sqlite3_prepare_v2(st->db, "PRAGMA quick_check", -1, &s, NULL) != SQLITE_OK)
		return -EIO;
	if (sqlite3_step(s) == SQLITE_ROW) {
		res = (const char *)sqlite3_column_text(s, 0);
		ok = res != NULL && strcmp(res, "ok") == 0;
		if (!ok)
			snprintf(why, n, "integrity check: %s", res ? res : "?");
	}
	sqlite3_finalize(s);
	return ok ? 0 : -EIO;
}

static int migrate(vd_state *st, int from, char *why, size_t n)
{
	char sql[64];
	int v;

	for (v = from; v < VD_STATE_SCHEMA; v++) {
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", v + 1);
		if (exec_why(st, "BEGIN IMMEDIATE", why, n) < 0)
			return -EIO;
		if (exec_why(st, migrations[v], why, n) < 0 || exec_why(st, sql, why, n) < 0) {
			exec(st, "ROLLBACK");
			return -EIO;
		}
		if (commit_why(st, why, n) < 0)
			return -EIO;
	}
	/* One line for the whole climb: each step is an internal detail. */
	if (from < VD_STATE_SCHEMA)
		log_info("state database migrated from schema %d to %d", from, VD_STATE_SCHEMA);
	return 0;
}

static int setup(vd_state *st, char *err, size_t errlen, const char *path)
{
	char why[320] = "";
	int v;

	sqlite3_busy_timeout(st->db, VD_STATE_BUSY_MS);
	if (check_integrity(st, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "%s is damaged (%s); move it aside or restore it from a backup",
		    path, why[0] ? why : db_reason(st, why, sizeof(why)));
		return -EIO;
	}
	if (exec_why(st, "PRAGMA journal_mode = WAL", why, sizeof(why)) < 0 ||
	    exec_why(st, "PRAGMA synchronous = FULL", why, sizeof(why)) < 0 ||
	    exec_why(st, "PRAGMA foreign_keys = ON", why, sizeof(why)) < 0 ||
	    exec_why(st, "PRAGMA cache_size = " VD_STATE_CACHE_KIB, why, sizeof(why)) < 0 ||
	    user_version(st, &v) < 0) {
		snprintf(err, errlen, "%s: %s", path, why[0] ? why : db_reason(st, why, sizeof(why)));
		return -EIO;
	}
	if (v > VD_STATE_SCHEMA) {
		snprintf(err, errlen, "%s has schema version %d, newer than the %d this lensemble-verifyd knows; run a newer version",
		    path, v, VD_STATE_SCHEMA);
		return -EIO;
	}
	if (migrate(st, v, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "%s: migrating from schema %d failed: %s", path, v, why);
		return -EIO;
	}
	return 0;
}

/* The alerts an earlier run left raised hold only if this run raises
 * them again: until then confirmed_at is 0 (vd_state_alerts_settle). */
static int unconfirm_alerts(vd_state *st, char *err, size_t errlen, const char *path)
{
	char why[320];

	if (exec_why(st, "UPDATE alerts SET confirmed_at = 0 WHERE cleared_at IS NULL", why,
	    sizeof(why)) < 0) {
		snprintf(err, errlen, "%s: %s", path, why);
		return -EIO;
	}
	return 0;
}

int vd_state_open(const char *state_dir, vd_state **out, char *err, size_t errlen)
{
	char path[2048];
	vd_state *st;
	int e;

	if (mkdir(state_dir, 0700) < 0 && (e = errno) != EEXIST) {
		snprintf(err, errlen, "cannot create the state directory %s: %s", state_dir,
		    strerror(e));
		return -e;
	}
	snprintf(path, sizeof(path), "%s/%s", state_dir, VD_STATE_FILE);
	if ((st = calloc(1, sizeof(*st))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
	    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		char why[320];
		snprintf(err, errlen, "cannot open %s: %s", path, db_reason(st, why, sizeof(why)));
		vd_state_close(st);
		return -EIO;
	}
	if (setup(st, err, errlen, path) < 0 || unconfirm_alerts(st, err, errlen, path) < 0) {
		vd_state_close(st);
		return -EIO;
	}
	*out = st;
	return 0;
}

void vd_state_close(vd_state *st)
{
	size_t i;

	if (st == NULL)
		return;
	vd_state_flush(st);
	for (i = 0; i < VD_STMT_CACHE_MAX; i++)
		sqlite3_finalize(st->cache[i].stmt);
	sqlite3_close(st->db);
	free(st);
}

static void copy_text(char *dst, size_t n, const unsigned char *src)
{
	snprintf(dst, n, "%s", src ? (const char *)src : "");
}

#define FACT_COLUMNS 7

/* The facts of a verdict row from column first on (NULL: does not apply);
 * 0 when none does. */
static int row_facts(sqlite3_stmt *s, int first, vd_facts *f)
{
	int i, any = 0;

	for (i = 0; i < FACT_COLUMNS; i++)
		any |= sqlite3_column_type(s, first + i) != SQLITE_NULL;
	if (!any)
		return 0;
	memset(f, 0, sizeof(*f));
	copy_text(f->expected_hash, sizeof(f->expected_hash), sqlite3_column_text(s, first));
	copy_text(f->recomputed_hash, sizeof(f->recomputed_hash), sqlite3_column_text(s, first + 1));
	if ((f->has_file_schema_version = sqlite3_column_type(s, first + 2) != SQLITE_NULL))
		f->file_schema_version = sqlite3_column_int64(s, first + 2);
	f->reader_max_version = sqlite3_column_int64(s, first + 3);
	copy_text(f->tensor, sizeof(f->tensor), sqlite3_column_text(s, first + 4));
	copy_text(f->file, sizeof(f->file), sqlite3_column_text(s, first + 5));
	copy_text(f->remediation, sizeof(f->remediation), sqlite3_column_text(s, first + 6));
	return 1;
}

static void bind_fact(sqlite3_stmt *s, int i, const char *text)
{
	if (text[0] != '\0')
		sqlite3_bind_text(s, i, text, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(s, i);
}

static void bind_fact_int(sqlite3_stmt *s, int i, int applies, int64_t v)
{
	if (applies)
		sqlite3_bind_int64(s, i, (sqlite3_int64)v);
	else
		sqlite3_bind_null(s, i);
}

/* The facts of a verdict into SQL_PUT_VERDICT from parameter first on. */
static void bind_facts(sqlite3_stmt *s, int first, const vd_facts *f)
{
	static const vd_facts none;

	if (f == NULL)
		f = &none;
	bind_fact(s, first, f->expected_hash);
	bind_fact(s, first + 1, f->recomputed_hash);
	bind_fact_int(s, first + 2, f->has_file_schema_version, f->file_schema_version);
	bind_fact_int(s, first + 3, f->reader_max_version != 0, f->reader_max_version);
	bind_fact(s, first + 4, f->tensor);
	bind_fact(s, first + 5, f->file);
	bind_fact(s, first + 6, f->remediation);
}

/* The bundle of a verdict row from column first on; 0 when it has none. */
static int row_oms(sqlite3_stmt *s, int first, vd_oms_status *o)
{
	if (sqlite3_column_type(s, first) == SQLITE_NULL)
		return 0;
	memset(o, 0, sizeof(*o));
	o->code = (vd_oms_code)sqlite3_column_int(s, first);
	if ((unsigned)o->code >= VD_OMS_CODE_COUNT)
		o->code = VD_OMS_UNREADABLE;
	o->verified = sqlite3_column_int(s, first + 1) != 0;
	o->differ = sqlite3_column_int(s, first + 2) != 0;
	copy_text(o->method, sizeof(o->method), sqlite3_column_text(s, first + 3));
	copy_text(o->key_id, sizeof(o->key_id), sqlite3_column_text(s, first + 4));
	copy_text(o->detail, sizeof(o->detail), sqlite3_column_text(s, first + 5));
	copy_text(o->trust, sizeof(o->trust), sqlite3_column_text(s, first + 6));
	return 1;
}

#define OMS_COLUMNS 7

static void bind_oms(sqlite3_stmt *s, int first, const vd_oms_status *o)
{
	int i;

	if (o == NULL) {
		for (i = 0; i < OMS_COLUMNS; i++)
			sqlite3_bind_null(s, first + i);
		return;
	}
	sqlite3_bind_int(s, first, (int)o->code);
	sqlite3_bind_int(s, first + 1, o->verified);
	sqlite3_bind_int(s, first + 2, o->differ);
	sqlite3_bind_text(s, first + 3, o->method, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, first + 4, o->key_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, first + 5, o->detail, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, first + 6, o->trust, -1, SQLITE_STATIC);
}

int vd_state_load_verdicts(vd_state *st, vd_verdict_fn fn, void *arg,
    char *err, size_t errlen)
{
	sqlite3_stmt *s;
	vd_stored_verdict v;
	vd_facts facts;
	vd_oms_status oms;
	int rc;

	if (sqlite3_prepare_v2(st->db, "SELECT relpath, fingerprint, code, detail, content_hash,"
	    " tensors, bytes, verified_at, duration_ms, chunks, expected_hash, recomputed_hash,"
	    " file_schema_version, reader_max_version, tensor, file, remediation, oms_code,"
	    " oms_verified, oms_differ, oms_method, oms_key_id, oms_detail, oms_trust FROM verdicts",
	    -1, &s, NULL) != SQLITE_OK)
		return load_fail(st, "loading verdicts", err, errlen);
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
		v.facts = row_facts(s, 10, &facts) ? &facts : NULL;
		v.oms = row_oms(s, 10 + FACT_COLUMNS, &oms) ? &oms : NULL;
		if ((unsigned)v.code <= VD_IO_ERROR)
			fn(&v, arg);
	}
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : load_fail(st, "loading verdicts", err, errlen);
}

int vd_state_put_verdict(vd_state *st, const vd_stored_verdict *v)
{
	sqlite3_stmt *s;
	int rc;

	if (batch_begin(st) < 0)
		return db_fail(st, "starting a state transaction");
	if (prepared(st, SQL_PUT_VERDICT, &s) != SQLITE_OK)
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
	bind_facts(s, 11, v->facts);
	bind_oms(s, 11 + FACT_COLUMNS, v->oms);
	rc = sqlite3_step(s);
	done(st, s);
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

int vd_state_load_commitments(vd_state *st, vd_commitment_fn fn, void *arg,
    char *err, size_t errlen)
{
	sqlite3_stmt *s;
	vd_commitment c;
	int rc;

	if (sqlite3_prepare_v2(st->db, "SELECT run, round_index, global_model_hash,"
	    " schema_version, received_at, key_id FROM commitments ORDER BY run, round_index",
	    -1, &s, NULL) != SQLITE_OK)
		return load_fail(st, "loading commitments", err, errlen);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		row_commitment(s, &c);
		fn(&c, arg);
	}
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : load_fail(st, "loading commitments", err, errlen);
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

/* The commitment and its audit entry are durable together or not at
 * all: a post answered 503 has changed nothing. */
static int64_t stmt_number(const vd_statement *st)
{
	return st->kind == VD_STMT_CHECKPOINT ? (int64_t)st->records : st->round_index;
}

static const char *stmt_hash(const vd_statement *st)
{
	return st->kind == VD_STMT_CHECKPOINT ? st->head_record_hash : st->hash;
}

/* 1 a new row, 0 known, -EIO error (not failed yet: the caller says so). */
static int statement_insert(vd_state *st, const vd_statement *stm, const char *run,
    const char *key_id, const char *source, const uint8_t *env, size_t env_len)
{
	sqlite3_stmt *s;
	int rc;

	if (sqlite3_prepare_v2(st->db, "INSERT OR IGNORE INTO statements (run, kind, number,"
	    " hash, schema_version, key_id, source, envelope, received_at)"
	    " VALUES (?,?,?,?,?,?,?,?,?)", -1, &s, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(s, 1, run, -1, SQLITE_STATIC);
	sqlite3_bind_int(s, 2, (int)stm->kind);
	sqlite3_bind_int64(s, 3, stmt_number(stm));
	sqlite3_bind_text(s, 4, stmt_hash(stm), -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 5, stm->schema_version);
	sqlite3_bind_text(s, 6, key_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 7, source, -1, SQLITE_STATIC);
	if (env != NULL)
		sqlite3_bind_blob(s, 8, env, (int)env_len, SQLITE_STATIC);
	else
		sqlite3_bind_null(s, 8);
	sqlite3_bind_double(s, 9, vd_wall_now());
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE)
		return -EIO;
	return sqlite3_changes(st->db) > 0 ? 1 : 0;
}

/* Every signature of sigs (NULL: none), in the transaction under way. */
static int sigs_insert(vd_state *st, const vd_stmt_sigs *sigs)
{
	size_t i;

	for (i = 0; sigs != NULL && i < sigs->n; i++)
		if (statement_insert(st, sigs->stm, sigs->run, sigs->key_ids[i], sigs->source,
		    sigs->env, sigs->env_len) < 0)
			return -EIO;
	return 0;
}

int vd_state_remember_statement(vd_state *st, const vd_statement *stm, const char *run,
    const char *key_id, const char *source, const uint8_t *env, size_t env_len)
{
	int rc = statement_insert(st, stm, run, key_id, source, env, env_len);

	if (rc < 0)
		return db_fail(st, "remembering a statement");
	return rc > 0 ? VD_POST_NEW : VD_POST_KNOWN;
}

int vd_state_remember_signatures(vd_state *st, const vd_stmt_sigs *sigs)
{
	if (vd_state_flush(st) < 0)
		return -EIO;
	if (exec(st, "BEGIN IMMEDIATE") < 0)
		return db_fail(st, "remembering a statement");
	if (sigs_insert(st, sigs) < 0 || commit(st) < 0) {
		db_fail(st, "remembering a statement");
		exec(st, "ROLLBACK");
		return -EIO;
	}
	return 0;
}

int vd_state_post_commitment(vd_state *st, const vd_commitment *c,
    const uint8_t *env, size_t env_len, const struct vd_audit *audit, const vd_stmt_sigs *sigs,
    vd_commitment *existing)
{
	sqlite3_stmt *s;
	int rc;

	if (vd_state_flush(st) < 0)
		return -EIO;
	if (exec(st, "BEGIN IMMEDIATE") < 0)
		return db_fail(st, "posting a commitment");
	rc = find_commitment(st, c->run, c->round_index, existing);
	if (rc < 0 || (rc > 0 && strcmp(existing->hash, c->hash) != 0)) {
		exec(st, "ROLLBACK");
		return rc < 0 ? -EIO : VD_POST_CONFLICT;
	}
	if (rc > 0) {
		/* The same again: only its audit entry, by this party, and its
		 * signatures may be new. */
		if ((audit != NULL && audit_insert(st, audit) < 0) || sigs_insert(st, sigs) < 0 ||
		    commit(st) < 0) {
			db_fail(st, "recording a commitment in the audit");
			exec(st, "ROLLBACK");
			return -EIO;
		}
		return VD_POST_KNOWN;
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
	if (rc != SQLITE_DONE || (audit != NULL && audit_insert(st, audit) < 0) ||
	    sigs_insert(st, sigs) < 0 || commit(st) < 0) {
		db_fail(st, "posting a commitment");
		exec(st, "ROLLBACK");
		return -EIO;
	}
	return VD_POST_NEW;
}

int vd_state_record_equivocation(vd_state *st, const vd_commitment *c, const char *hash_a,
    const char *source)
{
	sqlite3_stmt *s;
	int rc;

	if (vd_state_flush(st) < 0)
		return -EIO;
	if (sqlite3_prepare_v2(st->db, "INSERT OR IGNORE INTO equivocations (run, round_index,"
	    " hash_a, hash_b, source, seen_at, key_id, schema_version) VALUES (?,?,?,?,?,?,?,?)",
	    -1, &s, NULL) != SQLITE_OK)
		return db_fail(st, "recording an equivocation");
	sqlite3_bind_text(s, 1, c->run, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, c->round_index);
	sqlite3_bind_text(s, 3, hash_a, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 4, c->hash, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 5, source, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 7, c->key_id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 8, c->schema_version);
	sqlite3_bind_double(s, 6, vd_wall_now());
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "recording an equivocation");
}

int vd_state_load_equivocations(vd_state *st, vd_commitment_fn fn, void *arg,
    char *err, size_t errlen)
{
	sqlite3_stmt *s;
	vd_commitment c;
	int rc;

	/* Reported as the rejected hash (hash_b) for the round. */
	if (sqlite3_prepare_v2(st->db, "SELECT run, round_index, hash_b, schema_version, seen_at,"
	    " key_id FROM equivocations ORDER BY rowid", -1, &s, NULL) != SQLITE_OK)
		return load_fail(st, "loading equivocations", err, errlen);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		row_commitment(s, &c);
		fn(&c, arg);
	}
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : load_fail(st, "loading equivocations", err, errlen);
}

/* One statement on an alert's open episode, bound as text then time. */
static int alert_step(vd_state *st, const char *sql, const char *kind, const char *subject,
    const char *detail)
{
	sqlite3_stmt *s;
	int rc;

	if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK)
		return SQLITE_ERROR;
	sqlite3_bind_text(s, 1, kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, subject, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 3, detail, -1, SQLITE_STATIC);
	sqlite3_bind_double(s, 4, vd_wall_now());
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	return rc;
}

int vd_state_alert(vd_state *st, const char *kind, const char *subject,
    const char *detail, int raised)
{
	int rc;

	if (batch_begin(st) < 0)
		return db_fail(st, "starting a state transaction");
	if (!raised)
		rc = alert_step(st, "UPDATE alerts SET detail = ?3, cleared_at = ?4"
		    " WHERE kind = ?1 AND subject = ?2 AND cleared_at IS NULL", kind, subject, detail);
	else if ((rc = alert_step(st, "UPDATE alerts SET detail = ?3, confirmed_at = ?4"
	    " WHERE kind = ?1 AND subject = ?2 AND cleared_at IS NULL", kind, subject,
	    detail)) == SQLITE_DONE && sqlite3_changes(st->db) == 0)
		rc = alert_step(st, "INSERT INTO alerts (kind, subject, detail, raised_at, confirmed_at)"
		    " VALUES (?1, ?2, ?3, ?4, ?4)", kind, subject, detail);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "recording an alert");
}

int vd_state_alerts_settle(vd_state *st)
{
	sqlite3_stmt *s;
	int rc;

	if (batch_begin(st) < 0)
		return db_fail(st, "starting a state transaction");
	if (sqlite3_prepare_v2(st->db, "UPDATE alerts SET cleared_at = ? WHERE cleared_at IS NULL"
	    " AND confirmed_at = 0", -1, &s, NULL) != SQLITE_OK)
		return db_fail(st, "closing stale alerts");
	sqlite3_bind_double(s, 1, vd_wall_now());
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE)
		return db_fail(st, "closing stale alerts");
	if (sqlite3_changes(st->db) > 0)
		log_info("alert history: %d alert(s) raised before the restart and not raised since are cleared",
		    sqlite3_changes(st->db));
	return 0;
}

void vd_state_set_alert_retention(vd_state *st, unsigned seconds)
{
	if (st == NULL)
		return;           /* a reload before the database is open */
	st->alert_retention = seconds;
	st->next_prune = 0;
}

static void prune_alerts(vd_state *st, double now)
{
	sqlite3_stmt *s;
	int rc;

	if (batch_begin(st) < 0) {
		db_fail(st, "starting a state transaction");
		return;
	}
	if (sqlite3_prepare_v2(st->db, "DELETE FROM alerts WHERE cleared_at IS NOT NULL"
	    " AND cleared_at < ?", -1, &s, NULL) != SQLITE_OK) {
		db_fail(st, "removing old alerts");
		return;
	}
	sqlite3_bind_double(s, 1, now - st->alert_retention);
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE)
		db_fail(st, "removing old alerts");
	else if (sqlite3_changes(st->db) > 0)
		log_info("alert history: %d alert(s) cleared more than alert_retention (%u s) ago removed",
		    sqlite3_changes(st->db), st->alert_retention);
}

/* Rows of a page: the statement asks for one more than pg->limit, to
 * tell whether another follows. Column 0 is the id. */
static int list_page(vd_state *st, sqlite3_stmt *s, vd_page *pg,
    void (*row)(sqlite3_stmt *s, void *ctx), void *ctx)
{
	int64_t last = 0;
	size_t n = 0;
	int rc, more = 0;

	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (n == pg->limit) {
			more = 1;
			rc = SQLITE_DONE;
			break;
		}
		row(s, ctx);
		last = sqlite3_column_int64(s, 0);
		n++;
	}
	sqlite3_finalize(s);
	pg->next = more ? last : 0;
	return rc == SQLITE_DONE ? 0 : db_fail(st, "reading a history");
}

typedef struct alert_ctx {
	vd_alert_row_fn fn;
	void *arg;
} alert_ctx;

static void alert_row(sqlite3_stmt *s, void *ctx)
{
	const alert_ctx *c = ctx;
	vd_alert_row a;

	a.id = sqlite3_column_int64(s, 0);
	a.kind = (const char *)sqlite3_column_text(s, 1);
	a.subject = (const char *)sqlite3_column_text(s, 2);
	a.detail = (const char *)sqlite3_column_text(s, 3);
	a.raised_at = sqlite3_column_double(s, 4);
	a.cleared_at = sqlite3_column_type(s, 5) == SQLITE_NULL ? 0 : sqlite3_column_double(s, 5);
	c->fn(&a, c->arg);
}

int vd_state_list_alerts(vd_state *st, vd_alert_filter which, vd_page *pg, vd_alert_row_fn fn,
    void *arg)
{
	static const char *const sql[] = {    /* by vd_alert_filter */
		"SELECT id, kind, subject, detail, raised_at, cleared_at FROM alerts"
		" WHERE id < ? AND cleared_at IS NOT NULL ORDER BY id DESC LIMIT ?",
		"SELECT id, kind, subject, detail, raised_at, cleared_at FROM alerts"
		" WHERE id < ? AND cleared_at IS NULL ORDER BY id DESC LIMIT ?",
		"SELECT id, kind, subject, detail, raised_at, cleared_at FROM alerts"
		" WHERE id < ? ORDER BY id DESC LIMIT ?",
	};
	alert_ctx c = { fn, arg };
	sqlite3_stmt *s;

	if (sqlite3_prepare_v2(st->db, sql[which], -1, &s,
	    NULL) != SQLITE_OK)
		return db_fail(st, "reading the alert history");
	sqlite3_bind_int64(s, 1, pg->before > 0 ? pg->before : INT64_MAX);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)pg->limit + 1);
	return list_page(st, s, pg, alert_row, &c);
}

/* ---- the audit of commitments -------------------------------------------- */

static int audit_insert(vd_state *st, const vd_audit *a)
{
	sqlite3_stmt *s;
	int rc;

	if (prepared(st, SQL_AUDIT, &s) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(s, 1, a->run, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, a->kind, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, a->number);
	sqlite3_bind_text(s, 4, a->hash, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 5, a->source, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 6, a->author, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 7, a->key_id ? a->key_id : "", -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 8, a->peer ? a->peer : "", -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 9, a->file ? a->file : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 10, a->line);
	sqlite3_bind_double(s, 11, a->first_seen > 0 ? a->first_seen : vd_wall_now());
	rc = sqlite3_step(s);
	done(st, s);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

int vd_state_audit(vd_state *st, const vd_audit *a)
{
	if (st == NULL)
		return 0;
	if (vd_state_flush(st) < 0)
		return -EIO;
	return audit_insert(st, a) == 0 ? 0 : db_fail(st, "recording a commitment in the audit");
}

void vd_audit_signed(vd_audit *a, const vd_statement *s, const char *run, const char *key_id,
    const char *peer, const char *file)
{
	int cp = s->kind == VD_STMT_CHECKPOINT;

	*a = (vd_audit){
		.run = run, .kind = cp ? VD_AUDIT_CHECKPOINT : VD_AUDIT_ROUND_CLOSE,
		.number = cp ? (int64_t)s->records : s->round_index,
		.hash = cp ? s->head_record_hash : s->hash, .source = vd_commit_source_name(VD_SRC_SIGNED),
		.author = VD_AUDIT_KEY, .key_id = key_id, .peer = peer, .file = file,
	};
}

int vd_state_audit_signed(vd_state *st, const vd_statement *s, const char *run,
    const char *key_id, const char *peer, const char *file)
{
	vd_audit a;

	vd_audit_signed(&a, s, run, key_id, peer, file);
	/* A post is durable before its answer. */
	return file != NULL ? vd_state_audit_file(st, &a) : vd_state_audit(st, &a);
}

int vd_state_audit_file(vd_state *st, const vd_audit *a)
{
	/* A file is read again by the next scan: its entry joins the loop
	 * turn's transaction, as verdicts do, instead of costing an fsync
	 * each (a long run holds one per round). */
	if (st == NULL)
		return 0;
	if (batch_begin(st) < 0)
		return db_fail(st, "starting a state transaction");
	return audit_insert(st, a) == 0 ? 0 : db_fail(st, "recording a commitment in the audit");
}

typedef struct audit_ctx {
	vd_audit_fn fn;
	void *arg;
} audit_ctx;

static void audit_row(sqlite3_stmt *s, void *ctx)
{
	const audit_ctx *c = ctx;
	vd_audit a;

	a.id = sqlite3_column_int64(s, 0);
	a.run = (const char *)sqlite3_column_text(s, 1);
	a.kind = (const char *)sqlite3_column_text(s, 2);
	a.number = sqlite3_column_int64(s, 3);
	a.hash = (const char *)sqlite3_column_text(s, 4);
	a.source = (const char *)sqlite3_column_text(s, 5);
	a.author = (const char *)sqlite3_column_text(s, 6);
	a.key_id = (const char *)sqlite3_column_text(s, 7);
	a.peer = (const char *)sqlite3_column_text(s, 8);
	a.file = (const char *)sqlite3_column_text(s, 9);
	a.line = sqlite3_column_int64(s, 10);
	a.first_seen = sqlite3_column_double(s, 11);
	a.withdrawn_at = sqlite3_column_type(s, 12) == SQLITE_NULL ? 0 : sqlite3_column_double(s, 12);
	a.withdrawn_reason = (const char *)sqlite3_column_text(s, 13);
	c->fn(&a, c->arg);
}

int vd_state_list_audit(vd_state *st, const char *run, vd_page *pg, vd_audit_fn fn, void *arg)
{
	/* A RoundClose the operator withdrew carries the withdrawal. */
	static const char cols[] = "SELECT id, a.run, kind, number, a.hash, source, author, key_id,"
	    " a.peer, file, line, first_seen, w.at, w.reason FROM commitment_audit a"
	    " LEFT JOIN withdrawals w ON kind = '" VD_AUDIT_ROUND_CLOSE "' AND w.run = a.run"
	    " AND w.round_index = number AND w.hash = a.hash";
	char sql[768];
	audit_ctx c = { fn, arg };
	sqlite3_stmt *s;

	snprintf(sql, sizeof(sql), "%s WHERE id < ?1%s ORDER BY id DESC LIMIT ?2", cols,
	    run ? " AND a.run = ?3" : "");
	if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK)
		return db_fail(st, "reading the audit of commitments");
	sqlite3_bind_int64(s, 1, pg->before > 0 ? pg->before : INT64_MAX);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)pg->limit + 1);
	if (run)
		sqlite3_bind_text(s, 3, run, -1, SQLITE_STATIC);
	return list_page(st, s, pg, audit_row, &c);
}

/* s (prepared and bound) stepped, the audit entry (NULL: none) and the
 * signatures (NULL: none) inserted in one transaction, durable before it
 * returns: all or nothing. The rows s changed, or -EIO (s is finalized either way). */
static int step_audited(vd_state *st, sqlite3_stmt *s, const vd_audit *audit,
    const vd_stmt_sigs *sigs, const char *what)
{
	int rc, changed;

	if (exec(st, "BEGIN IMMEDIATE") < 0) {
		sqlite3_finalize(s);
		return db_fail(st, what);
	}
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	changed = sqlite3_changes(st->db);
	if (rc != SQLITE_DONE || (audit != NULL && audit_insert(st, audit) < 0) ||
	    sigs_insert(st, sigs) < 0 || commit(st) < 0) {
		db_fail(st, what);
		exec(st, "ROLLBACK");
		return -EIO;
	}
	return changed;
}

int vd_state_post_checkpoint(vd_state *st, const vd_statement *c, const char *key_id,
    const uint8_t *env, size_t env_len, const vd_audit *audit, const vd_stmt_sigs *sigs)
{
	sqlite3_stmt *s;
	int changed;

	if (vd_state_flush(st) < 0)
		return -EIO;
	if (sqlite3_prepare_v2(st->db, "INSERT OR IGNORE INTO checkpoints VALUES (?,?,?,?,?,?)",
	    -1, &s, NULL) != SQLITE_OK)
		return db_fail(st, "posting a checkpoint");
	sqlite3_bind_text(s, 1, c->run, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)c->records);
	sqlite3_bind_text(s, 3, c->head_record_hash, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 4, key_id, -1, SQLITE_STATIC);
	sqlite3_bind_blob(s, 5, env, (int)env_len, SQLITE_STATIC);
	sqlite3_bind_double(s, 6, vd_wall_now());
	if ((changed = step_audited(st, s, audit, sigs, "posting a checkpoint")) < 0)
		return -EIO;
	return changed == 1 ? VD_POST_NEW : VD_POST_KNOWN;
}

int vd_state_load_checkpoints(vd_state *st, vd_checkpoint_fn fn, void *arg,
    char *err, size_t errlen)
{
	sqlite3_stmt *s;
	vd_statement c;
	char key_id[VD_KEYID_LEN + 1];
	int rc;

	if (sqlite3_prepare_v2(st->db, "SELECT run, records, head_record_hash, key_id"
	    " FROM checkpoints ORDER BY run, records", -1, &s, NULL) != SQLITE_OK)
		return load_fail(st, "loading checkpoints", err, errlen);
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
	return rc == SQLITE_DONE ? 0 : load_fail(st, "loading checkpoints", err, errlen);
}

int vd_state_load_ledgers(vd_state *st, vd_ledger_rec_fn fn, void *arg,
    char *err, size_t errlen)
{
	sqlite3_stmt *s;
	int rc;

	if (sqlite3_prepare_v2(st->db, "SELECT path, seq, round_index, global_model_hash,"
	    " record_hash, line FROM ledger_memory ORDER BY path, seq", -1, &s, NULL) != SQLITE_OK)
		return load_fail(st, "loading ledger memory", err, errlen);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW)
		fn((const char *)sqlite3_column_text(s, 0), sqlite3_column_int64(s, 1),
		    sqlite3_column_int64(s, 2), (const char *)sqlite3_column_text(s, 3),
		    (const char *)sqlite3_column_text(s, 4), sqlite3_column_int64(s, 5), arg);
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : load_fail(st, "loading ledger memory", err, errlen);
}

/* A ledger record's audit row: made by whoever wrote the file. */
static int audit_rec(vd_state *st, const char *path, const vd_ledger_rec *r)
{
	const char *slash = strrchr(path, '/');
	char run[VD_RUN_MAX];
	vd_audit a = {
		.run = run, .kind = VD_AUDIT_ROUND_CLOSE, .number = r->round_index, .hash = r->hash,
		.source = vd_commit_source_name(VD_SRC_LEDGER), .author = VD_AUDIT_UNSIGNED, .file = path,
		.line = (int64_t)r->line,
	};

	snprintf(run, sizeof(run), "%.*s", slash ? (int)(slash - path) : 0, path);
	return audit_insert(st, &a);
}

static int insert_recs(vd_state *st, const char *path, size_t first,
    const vd_ledger_rec *recs, size_t n)
{
	sqlite3_stmt *s;
	size_t i;
	int rc = SQLITE_DONE;

	for (i = 0; i < n; i++)
		if (audit_rec(st, path, &recs[i]) < 0)
			return -EIO;
	if (prepared(st, SQL_LEDGER_REC, &s) != SQLITE_OK)
		return -EIO;
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
	done(st, s);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

int vd_state_append_ledger(vd_state *st, const char *path, size_t first,
    const vd_ledger_rec *recs, size_t n)
{
	if (vd_state_flush(st) < 0)
		return -EIO;
	if (exec(st, "BEGIN IMMEDIATE") < 0)
		return db_fail(st, "remembering ledger records");
	if (insert_recs(st, path, first, recs, n) < 0 || commit(st) < 0) {
		db_fail(st, "remembering ledger records");
		exec(st, "ROLLBACK");
		return -EIO;
	}
	return 0;
}

int vd_state_forget_ledger(vd_state *st, const char *path)
{
	sqlite3_stmt *s;
	int rc;

	if (vd_state_flush(st) < 0)
		return -EIO;
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
	if (prepared(st, SQL_RETAIN, &s) != SQLITE_OK)
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
	done(st, s);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "remembering an artifact");
}

int vd_state_load_retained(vd_state *st, vd_retained_fn fn, void *arg,
    char *err, size_t errlen)
{
	sqlite3_stmt *s;
	vd_retained r;
	char run[VD_RUN_MAX];
	int rc;

	if (sqlite3_prepare_v2(st->db, "SELECT content_hash, run, round_index, parent_hash,"
	    " verified_at FROM retained", -1, &s, NULL) != SQLITE_OK)
		return load_fail(st, "loading remembered artifacts", err, errlen);
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
	return rc == SQLITE_DONE ? 0 : load_fail(st, "loading remembered artifacts", err, errlen);
}

/* ---- the event history of GET /events -------------------------------- */

int vd_state_put_event(vd_state *st, uint64_t id, const char *type, const char *data)
{
	sqlite3_stmt *s;
	int rc;

	if (batch_begin(st) < 0)
		return db_fail(st, "starting a state transaction");
	if (prepared(st, SQL_PUT_EVENT, &s) != SQLITE_OK)
		return db_fail(st, "recording an event");
	sqlite3_bind_int64(s, 1, (sqlite3_int64)id);
	sqlite3_bind_text(s, 2, type, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 3, data, -1, SQLITE_STATIC);
	sqlite3_bind_double(s, 4, vd_wall_now());
	rc = sqlite3_step(s);
	done(st, s);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "recording an event");
}

int vd_state_load_events(vd_state *st, uint64_t after, size_t limit, vd_event_row_fn fn,
    void *arg)
{
	sqlite3_stmt *s;
	int rc;

	if (sqlite3_prepare_v2(st->db, "SELECT id, type, data FROM events WHERE id > ?"
	    " ORDER BY id LIMIT ?", -1, &s, NULL) != SQLITE_OK)
		return db_fail(st, "reading events");
	sqlite3_bind_int64(s, 1, (sqlite3_int64)after);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)limit);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW)
		fn((uint64_t)sqlite3_column_int64(s, 0), (const char *)sqlite3_column_text(s, 1),
		    (const char *)sqlite3_column_text(s, 2), arg);
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "reading events");
}

int vd_state_event_range(vd_state *st, uint64_t *first, uint64_t *last)
{
	sqlite3_stmt *s;
	int rc;

	*first = *last = 0;
	if (sqlite3_prepare_v2(st->db, "SELECT min(id), max(id) FROM events", -1, &s,
	    NULL) != SQLITE_OK)
		return db_fail(st, "reading events");
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*first = (uint64_t)sqlite3_column_int64(s, 0);
		*last = (uint64_t)sqlite3_column_int64(s, 1);
	}
	sqlite3_finalize(s);
	return rc == SQLITE_ROW ? 0 : db_fail(st, "reading events");
}

int vd_state_trim_events(vd_state *st, uint64_t through)
{
	sqlite3_stmt *s;
	int rc;

	if (batch_begin(st) < 0)
		return db_fail(st, "starting a state transaction");
	if (sqlite3_prepare_v2(st->db, "DELETE FROM events WHERE id <= ?", -1, &s,
	    NULL) != SQLITE_OK)
		return db_fail(st, "trimming events");
	sqlite3_bind_int64(s, 1, (sqlite3_int64)through);
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "trimming events");
}

/* ---- statement memory and withdrawals (trust.md section 8) ------------- */

int vd_state_load_statements(vd_state *st, vd_stmt_row_fn fn, void *arg,
    char *err, size_t errlen)
{
	sqlite3_stmt *s;
	vd_statement c;
	char run[VD_RUN_MAX], key_id[VD_KEYID_LEN + 1], source[VD_RUN_MAX];
	int rc;

	if (sqlite3_prepare_v2(st->db, "SELECT run, kind, number, hash, schema_version, key_id,"
	    " source FROM statements ORDER BY rowid", -1, &s, NULL) != SQLITE_OK)
		return load_fail(st, "loading statements", err, errlen);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		memset(&c, 0, sizeof(c));
		copy_text(run, sizeof(run), sqlite3_column_text(s, 0));
		c.kind = (vd_stmt_kind)sqlite3_column_int(s, 1);
		snprintf(c.run, sizeof(c.run), "%s", run[0] ? run : ".");
		if (c.kind == VD_STMT_CHECKPOINT) {
			c.records = (uint64_t)sqlite3_column_int64(s, 2);
			copy_text(c.head_record_hash, sizeof(c.head_record_hash), sqlite3_column_text(s, 3));
		} else {
			c.round_index = sqlite3_column_int64(s, 2);
			copy_text(c.hash, sizeof(c.hash), sqlite3_column_text(s, 3));
		}
		c.schema_version = sqlite3_column_int64(s, 4);
		copy_text(key_id, sizeof(key_id), sqlite3_column_text(s, 5));
		copy_text(source, sizeof(source), sqlite3_column_text(s, 6));
		fn(&c, run, key_id, source, arg);
	}
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : load_fail(st, "loading statements", err, errlen);
}

int vd_state_withdraw(vd_state *st, const vd_withdrawal *w, const vd_audit *audit)
{
	sqlite3_stmt *s;

	if (vd_state_flush(st) < 0)
		return -EIO;
	if (sqlite3_prepare_v2(st->db, "INSERT OR IGNORE INTO withdrawals VALUES (?,?,?,?,?,?,?)",
	    -1, &s, NULL) != SQLITE_OK)
		return db_fail(st, "recording a withdrawal");
	sqlite3_bind_text(s, 1, w->run, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, w->round_index);
	sqlite3_bind_text(s, 3, w->hash, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 4, w->sources, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 5, w->peer, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 6, w->reason, -1, SQLITE_STATIC);
	sqlite3_bind_double(s, 7, w->at);
	return step_audited(st, s, audit, NULL, "recording a withdrawal") < 0 ? -EIO : 0;
}

int vd_state_load_withdrawals(vd_state *st, vd_withdrawal_fn fn, void *arg,
    char *err, size_t errlen)
{
	sqlite3_stmt *s;
	vd_withdrawal w;
	int rc;

	if (sqlite3_prepare_v2(st->db, "SELECT run, round_index, hash, sources, peer, reason, at"
	    " FROM withdrawals ORDER BY at", -1, &s, NULL) != SQLITE_OK)
		return load_fail(st, "loading withdrawals", err, errlen);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		memset(&w, 0, sizeof(w));
		copy_text(w.run, sizeof(w.run), sqlite3_column_text(s, 0));
		w.round_index = sqlite3_column_int64(s, 1);
		copy_text(w.hash, sizeof(w.hash), sqlite3_column_text(s, 2));
		copy_text(w.sources, sizeof(w.sources), sqlite3_column_text(s, 3));
		copy_text(w.peer, sizeof(w.peer), sqlite3_column_text(s, 4));
		copy_text(w.reason, sizeof(w.reason), sqlite3_column_text(s, 5));
		w.at = sqlite3_column_double(s, 6);
		fn(&w, arg);
	}
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : load_fail(st, "loading withdrawals", err, errlen);
}

-- A state database at schema 5, as lensemble-verifyd before the alert
-- episodes and the audit of commitments wrote it (the migrations of
-- src/daemon/vd_state.c up to 4 -> 5), without rows: a test adds its own.
CREATE TABLE commitments (
  run TEXT NOT NULL, round_index INTEGER NOT NULL,
  global_model_hash TEXT NOT NULL, schema_version INTEGER NOT NULL,
  received_at REAL NOT NULL, PRIMARY KEY (run, round_index));
CREATE TABLE verdicts (
  relpath TEXT PRIMARY KEY, fingerprint BLOB NOT NULL, code INTEGER NOT NULL,
  detail TEXT NOT NULL, content_hash TEXT NOT NULL, tensors INTEGER NOT NULL,
  bytes INTEGER NOT NULL, verified_at REAL NOT NULL, duration_ms REAL NOT NULL);
CREATE TABLE equivocations (
  run TEXT NOT NULL, round_index INTEGER NOT NULL, hash_a TEXT NOT NULL,
  hash_b TEXT NOT NULL, source TEXT NOT NULL, seen_at REAL NOT NULL,
  PRIMARY KEY (run, round_index, hash_a, hash_b));
CREATE TABLE alerts (
  id INTEGER PRIMARY KEY, kind TEXT NOT NULL, subject TEXT NOT NULL,
  detail TEXT NOT NULL, event TEXT NOT NULL, at REAL NOT NULL);
ALTER TABLE verdicts ADD COLUMN chunks BLOB;
ALTER TABLE commitments ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
ALTER TABLE commitments ADD COLUMN envelope BLOB;
CREATE TABLE checkpoints (
  run TEXT NOT NULL, records INTEGER NOT NULL, head_record_hash TEXT NOT NULL,
  key_id TEXT NOT NULL, envelope BLOB NOT NULL, received_at REAL NOT NULL,
  PRIMARY KEY (run, records, head_record_hash, key_id));
CREATE TABLE ledger_memory (
  path TEXT NOT NULL, seq INTEGER NOT NULL, round_index INTEGER NOT NULL,
  global_model_hash TEXT NOT NULL, record_hash TEXT NOT NULL, line INTEGER NOT NULL,
  PRIMARY KEY (path, seq));
CREATE TABLE retained (
  content_hash TEXT PRIMARY KEY, run TEXT NOT NULL, round_index INTEGER NOT NULL,
  parent_hash TEXT, verified_at REAL NOT NULL, retained_at REAL NOT NULL);
CREATE TABLE events (
  id INTEGER PRIMARY KEY, type TEXT NOT NULL, data TEXT NOT NULL, at REAL NOT NULL);
PRAGMA user_version = 5;

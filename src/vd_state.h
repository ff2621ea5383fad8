/*
 * Durable state in SQLite under state_dir: commitments posted with the
 * operator token, verdicts keyed by the identities of an artifact's files,
 * equivocations seen, and the alert history. WAL with synchronous=FULL: a
 * write is on disk when the call returns. The schema is versioned
 * (PRAGMA user_version) with forward migrations; a newer or corrupt
 * database is refused, never recreated. Used from the loop thread only.
 */
#ifndef VD_STATE_H
#define VD_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "lensemble/verify.h"
#include "vd_dsse.h"
#include "vd_keys.h"
#include "vd_scan.h"

#define VD_STATE_FILE "state.db"
#define VD_STATE_SCHEMA 4
#define VD_STATE_BUSY_MS 5000

typedef struct vd_state vd_state;

typedef struct vd_stored_verdict {
	char relpath[1024];
	uint8_t fingerprint[32];
	vd_code code;
	char detail[VD_DETAIL_MAX];
	char content_hash[VD_HASH_HEX_LEN + 1];
	uint64_t tensors, bytes;
	double verified_at, duration_ms;
	const uint8_t *chunks;      /* chunk map blob, or NULL */
	size_t chunks_len;
} vd_stored_verdict;

typedef struct vd_commitment {
	char run[1024];
	int64_t round_index;
	char hash[VD_HASH_HEX_LEN + 1];
	int64_t schema_version;
	double received_at;
	char key_id[VD_KEYID_LEN + 1];    /* "" for the operator token */
} vd_commitment;

/* Open (creating if absent) and migrate. -1 with a sentence on error. */
int vd_state_open(const char *state_dir, vd_state **out, char *err, size_t errlen);
void vd_state_close(vd_state *st);

typedef void (*vd_verdict_fn)(const vd_stored_verdict *v, void *arg);
typedef void (*vd_commitment_fn)(const vd_commitment *c, void *arg);

int vd_state_load_verdicts(vd_state *st, vd_verdict_fn fn, void *arg);
int vd_state_put_verdict(vd_state *st, const vd_stored_verdict *v);
int vd_state_forget_verdict(vd_state *st, const char *relpath);

int vd_state_load_commitments(vd_state *st, vd_commitment_fn fn, void *arg);
/* 0 inserted; 1 the same one was there; 2 another hash is there (conflict,
 * *existing filled); -1 error. Durable before it returns. A signed post
 * keeps its envelope (env, or NULL for a token post). */
int vd_state_post_commitment(vd_state *st, const vd_commitment *c,
    const uint8_t *env, size_t env_len, vd_commitment *existing);

/* Signed ledger checkpoints posted: 0 new, 1 known, -1 error. */
typedef void (*vd_checkpoint_fn)(const vd_statement *s, const char *key_id, void *arg);
int vd_state_post_checkpoint(vd_state *st, const vd_statement *s, const char *key_id,
    const uint8_t *env, size_t env_len);
int vd_state_load_checkpoints(vd_state *st, vd_checkpoint_fn fn, void *arg);

/* The append-only memory of ledgers: record seq (0-based) of each path. */
typedef void (*vd_ledger_rec_fn)(const char *path, int64_t seq, int64_t round_index,
    const char *hash, const char *record_hash, int64_t line, void *arg);
int vd_state_load_ledgers(vd_state *st, vd_ledger_rec_fn fn, void *arg);
typedef struct vd_ledger_rec vd_ledger_rec;
/* Append recs[0..n) as seq first.. in one transaction. */
int vd_state_append_ledger(vd_state *st, const char *path, size_t first,
    const vd_ledger_rec *recs, size_t n);
int vd_state_forget_ledger(vd_state *st, const char *path);

/* Artifacts verified and committed, remembered after removal (batched). */
typedef struct vd_retained vd_retained;
typedef void (*vd_retained_fn)(const vd_retained *r, void *arg);
int vd_state_retain(vd_state *st, const vd_retained *r);
int vd_state_load_retained(vd_state *st, vd_retained_fn fn, void *arg);

/* Equivocations: two hashes for one round of one run. */
int vd_state_record_equivocation(vd_state *st, const char *run, int64_t round,
    const char *hash_a, const char *hash_b, const char *source);
int vd_state_load_equivocations(vd_state *st, vd_commitment_fn fn, void *arg);

int vd_state_alert(vd_state *st, const char *kind, const char *subject,
    const char *detail, int raised);

/* Commit the writes batched since the last call (verdicts, alert events);
 * the loop calls it once per turn. 0, or -1 (they are lost: verdicts are
 * recomputed, which is why they may be batched). */
int vd_state_flush(vd_state *st);

const char *vd_state_error(vd_state *st);

#endif

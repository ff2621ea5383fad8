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
#include "vd_scan.h"

#define VD_STATE_FILE "state.db"
#define VD_STATE_SCHEMA 2
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
 * *existing filled); -1 error. Durable before it returns. */
int vd_state_post_commitment(vd_state *st, const vd_commitment *c, vd_commitment *existing);

/* Equivocations: two hashes for one round of one run. */
int vd_state_record_equivocation(vd_state *st, const char *run, int64_t round,
    const char *hash_a, const char *hash_b, const char *source);
int vd_state_load_equivocations(vd_state *st, vd_commitment_fn fn, void *arg);

int vd_state_alert(vd_state *st, const char *kind, const char *subject,
    const char *detail, int raised);

const char *vd_state_error(vd_state *st);

#endif

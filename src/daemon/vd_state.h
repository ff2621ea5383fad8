/*
 * Durable state in SQLite under state_dir: commitments posted with the
 * operator token, verdicts keyed by the identities of an artifact's files,
 * equivocations seen, the alert history, the event history of GET
 * /events and the audit of every commitment accepted. WAL with
 * synchronous=FULL: a write is on disk when the call returns. The schema is versioned
 * (PRAGMA user_version) with forward migrations; a newer or corrupt
 * database is refused, never recreated. Used from the loop thread only.
 * A call that fails returns -EIO: a write or a read while running has
 * logged it and counted it (vd_state_ok); opening and the loads at start
 * leave the sentence in the caller's err instead.
 */
#ifndef VD_STATE_H
#define VD_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "lensemble/verify.h"
#include "vd_dsse.h"
#include "vd_keys.h"
#include "vd_limits.h"
#include "vd_memory.h"
#include "vd_scan.h"

#define VD_STATE_FILE "state.db"
#define VD_STATE_SCHEMA 10

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
	const vd_facts *facts;      /* behind a failure, or NULL; loaded: valid in
	                             * the callback only */
	const struct vd_oms_status *oms;  /* its OMS bundle as checked, or NULL;
	                             * loaded: valid in the callback only */
} vd_stored_verdict;

/* Open (creating if absent) and migrate: 0, or -errno (-EIO from the
 * database) with a sentence in err. */
int vd_state_open(const char *state_dir, vd_state **out, char *err, size_t errlen);
void vd_state_close(vd_state *st);

typedef void (*vd_verdict_fn)(const vd_stored_verdict *v, void *arg);
typedef void (*vd_commitment_fn)(const vd_commitment *c, void *arg);

/* The loads read at start: 0, or -EIO with the sentence in err. */
int vd_state_load_verdicts(vd_state *st, vd_verdict_fn fn, void *arg,
    char *err, size_t errlen);
int vd_state_put_verdict(vd_state *st, const vd_stored_verdict *v);
int vd_state_forget_verdict(vd_state *st, const char *relpath);

int vd_state_load_commitments(vd_state *st, vd_commitment_fn fn, void *arg,
    char *err, size_t errlen);

/* The signatures of one statement (trust.md section 8), one row per key,
 * written in the transaction of what they come with. */
typedef struct vd_stmt_sigs {
	const vd_statement *stm;
	const char *run;                  /* store form */
	const char *source;               /* "api", or the statement's file */
	const char *const *key_ids;
	size_t n;
	const uint8_t *env;
	size_t env_len;
} vd_stmt_sigs;

/* VD_POST_NEW inserted; VD_POST_KNOWN the same one was there;
 * VD_POST_CONFLICT another hash is there (*existing filled); -EIO error,
 * and nothing written. Durable before it
 * returns, with its audit entry and its statement's signatures (NULL:
 * none) in the same transaction, the same again included. A signed post
 * keeps its envelope (env, or NULL for a token post). */
struct vd_audit;
int vd_state_post_commitment(vd_state *st, const vd_commitment *c,
    const uint8_t *env, size_t env_len, const struct vd_audit *audit, const vd_stmt_sigs *sigs,
    vd_commitment *existing);

/* Whether the last write succeeded (a failed one is logged, counted and
 * shown by /readyz until a write succeeds again); the failures since
 * start. */
int vd_state_ok(const vd_state *st);
uint64_t vd_state_failures(const vd_state *st);

/* Signed ledger checkpoints posted, with the audit entry and the
 * statement's signatures (NULL: none) in the same transaction:
 * VD_POST_NEW, VD_POST_KNOWN, or -EIO (nothing written). */
typedef void (*vd_checkpoint_fn)(const vd_statement *s, const char *key_id, void *arg);
int vd_state_post_checkpoint(vd_state *st, const vd_statement *s, const char *key_id,
    const uint8_t *env, size_t env_len, const struct vd_audit *audit, const vd_stmt_sigs *sigs);
int vd_state_load_checkpoints(vd_state *st, vd_checkpoint_fn fn, void *arg,
    char *err, size_t errlen);

/* The append-only memory of ledgers: record seq (0-based) of each path. */
typedef void (*vd_ledger_rec_fn)(const char *path, int64_t seq, int64_t round_index,
    const char *hash, const char *record_hash, int64_t line, void *arg);
int vd_state_load_ledgers(vd_state *st, vd_ledger_rec_fn fn, void *arg,
    char *err, size_t errlen);
/* Append recs[0..n) as seq first.. in one transaction, with their audit
 * rows (vd_state_audit). */
int vd_state_append_ledger(vd_state *st, const char *path, size_t first,
    const vd_ledger_rec *recs, size_t n);
int vd_state_forget_ledger(vd_state *st, const char *path);

/* Artifacts verified and committed, remembered after removal (batched). */
typedef void (*vd_retained_fn)(const vd_retained *r, void *arg);
int vd_state_retain(vd_state *st, const vd_retained *r);
int vd_state_load_retained(vd_state *st, vd_retained_fn fn, void *arg,
    char *err, size_t errlen);

/* Equivocations: two hashes for one round of one run, c (hash_b) posted
 * by the token (key_id "") or signed by its key against hash_a. Loaded as
 * c was, received_at the time it was recorded. */
int vd_state_record_equivocation(vd_state *st, const vd_commitment *c, const char *hash_a,
    const char *source);
int vd_state_load_equivocations(vd_state *st, vd_commitment_fn fn, void *arg,
    char *err, size_t errlen);

/* The alert history: an alert raised opens an episode, cleared closes it.
 * An alert still raised when the daemon stopped continues its episode
 * when it is raised again after a restart; one no longer raised is closed
 * by vd_state_alerts_settle. Batched, like verdicts. */
int vd_state_alert(vd_state *st, const char *kind, const char *subject,
    const char *detail, int raised);
/* Close, as of now, the episodes an earlier run of the daemon left open
 * and nothing raised again since this one opened the database: called
 * when every alert has just been looked at. */
int vd_state_alerts_settle(vd_state *st);
/* Cleared episodes older than seconds (0: none ever) are removed at the
 * next flush, then every VD_STATE_PRUNE_INTERVAL. */
void vd_state_set_alert_retention(vd_state *st, unsigned seconds);

/* A page of a history, newest first: the rows with an id below before
 * (0: from the newest), at most limit of them; next is set to the id of
 * the last row given when more follow, else 0. */
typedef struct vd_page {
	int64_t before;
	size_t limit;
	int64_t next;
} vd_page;

typedef struct vd_alert_row {
	int64_t id;
	const char *kind, *subject, *detail;
	double raised_at;
	double cleared_at;          /* 0: still raised */
} vd_alert_row;
typedef void (*vd_alert_row_fn)(const vd_alert_row *a, void *arg);
/* Which episodes a listing of alerts shows. */
typedef enum vd_alert_filter {
	VD_ALERTS_CLEARED,          /* only cleared ones */
	VD_ALERTS_RAISED,           /* only those not cleared */
	VD_ALERTS_ALL
} vd_alert_filter;
int vd_state_list_alerts(vd_state *st, vd_alert_filter which, vd_page *pg, vd_alert_row_fn fn,
    void *arg);

/* ---- the audit of commitments (GET /commitments) -------------------------- */

#define VD_AUDIT_ROUND_CLOSE "round_close"
#define VD_AUDIT_CHECKPOINT "ledger_checkpoint"
#define VD_AUDIT_WITHDRAWAL "withdrawal"
/* Who made a commitment. */
#define VD_AUDIT_OPERATOR "operator"     /* the operator token (token_file) */
#define VD_AUDIT_RUN_TOKEN "run_token"   /* the run's own token (run_token_file) */
#define VD_AUDIT_KEY "key"               /* a trusted key: key_id */
#define VD_AUDIT_UNSIGNED "unsigned"     /* a ledger record: whoever wrote the file */
#define VD_AUDIT_TOKEN "token"           /* a token post from before the audit: which one is unknown */

/* A commitment as first seen: who made it, from where, when. */
typedef struct vd_audit {
	int64_t id;                 /* when read */
	const char *run;            /* store form: "" the root */
	const char *kind;           /* VD_AUDIT_ROUND_CLOSE or VD_AUDIT_CHECKPOINT */
	int64_t number;             /* the round_index, or a checkpoint's records */
	const char *hash;           /* global_model_hash, or head_record_hash */
	const char *source;         /* "roundclose", "signed", "ledger" or "oms" (vd_commit_source_name) */
	const char *author;         /* VD_AUDIT_OPERATOR ... */
	const char *key_id;         /* "" unless a key */
	const char *peer;           /* a post's client address; "" for a file (or unknown) */
	const char *file;           /* a file's path in the store; "" for a post */
	int64_t line;               /* a ledger record's line; 0: none */
	double first_seen;          /* 0 when recording: now */
	double withdrawn_at;        /* when read: 0, or when the operator withdrew it */
	const char *withdrawn_reason;
} vd_audit;
typedef void (*vd_audit_fn)(const vd_audit *a, void *arg);

/* Record a commitment accepted, once: a repeat (the same run, kind,
 * number, hash, author, key and file) keeps the first. Durable before it
 * returns; st NULL records nothing. 0 or -EIO. The records of a ledger are
 * recorded by vd_state_append_ledger, in its transaction. */
int vd_state_audit(vd_state *st, const vd_audit *a);
/* The audit entry of a signed statement accepted: posted from peer, or
 * read from file (a points at the arguments). */
void vd_audit_signed(vd_audit *a, const vd_statement *s, const char *run, const char *key_id,
    const char *peer, const char *file);
/* A signed statement accepted: posted from peer, or read from file. */
int vd_state_audit_signed(vd_state *st, const vd_statement *s, const char *run,
    const char *key_id, const char *peer, const char *file);
/* vd_state_audit for a commitment read from a file of the store (a->file),
 * which the next scan reads again: batched with the loop turn's writes. */
int vd_state_audit_file(vd_state *st, const vd_audit *a);
/* The audit of one run (run NULL: of every run), a page at a time. */
int vd_state_list_audit(vd_state *st, const char *run, vd_page *pg, vd_audit_fn fn, void *arg);

/* Commit the writes batched since the last call (verdicts, alert events);
 * the loop calls it once per turn. 0, or -EIO (they are lost: verdicts are
 * recomputed, which is why they may be batched). */
int vd_state_flush(vd_state *st);

/* The memory of signed statements: one row per (statement, key).
 * VD_POST_NEW when the row is new, VD_POST_KNOWN when it was known, -EIO on
 * error. run in store form.
 * A row joins the loop turn's batch when one is open. */
int vd_state_remember_statement(vd_state *st, const vd_statement *stm, const char *run,
    const char *key_id, const char *source, const uint8_t *env, size_t env_len);
/* Signatures in one transaction of their own, durable before it returns:
 * 0, or -EIO (nothing written). */
int vd_state_remember_signatures(vd_state *st, const vd_stmt_sigs *sigs);
typedef void (*vd_stmt_row_fn)(const vd_statement *stm, const char *run, const char *key_id,
    const char *source, void *arg);
int vd_state_load_statements(vd_state *st, vd_stmt_row_fn fn, void *arg,
    char *err, size_t errlen);

/* Withdrawals, durable before the call returns, with the audit entry
 * (NULL: none) in the same transaction: 0, or -EIO (nothing written). */
int vd_state_withdraw(vd_state *st, const vd_withdrawal *w, const struct vd_audit *audit);
typedef void (*vd_withdrawal_fn)(const vd_withdrawal *w, void *arg);
int vd_state_load_withdrawals(vd_state *st, vd_withdrawal_fn fn, void *arg,
    char *err, size_t errlen);

/* The event history GET /events resumes from: rows are added and trimmed
 * in the batched transaction (vd_state_flush), so an event costs no fsync
 * of its own; a lost batch loses events, which a client sees as a gap. */
typedef void (*vd_event_row_fn)(uint64_t id, const char *type, const char *data, void *arg);
int vd_state_put_event(vd_state *st, uint64_t id, const char *type, const char *data);
/* Rows with an id above after, in id order, at most limit of them. */
int vd_state_load_events(vd_state *st, uint64_t after, size_t limit, vd_event_row_fn fn,
    void *arg);
/* The lowest and highest id held (both 0 when none). */
int vd_state_event_range(vd_state *st, uint64_t *first, uint64_t *last);
/* Drop the rows up to and including id through. */
int vd_state_trim_events(vd_state *st, uint64_t through);

#endif

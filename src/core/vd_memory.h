/*
 * The daemon's memory of commitments: RoundClose posts and the conflicting
 * ones refused, signed statements remembered under each key, checkpoints
 * posted, withdrawals, the append-only memory of ledgers and the artifacts
 * retained after their directories went. No I/O, no clock.
 *
 * Every change is decided first, without touching the memory: a decision
 * yields a record. The shell makes the record durable, and only once that
 * succeeded applies it (vd_memory_commit does both through the shell's
 * persistence). A restart rebuilds the memory by restoring the records
 * loaded from the database, in order. A persist that fails leaves the
 * memory exactly as it was.
 */
#ifndef VD_MEMORY_H
#define VD_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "vd_dsse.h"
#include "vd_limits.h"
#include "vd_map.h"
#include "vd_order.h"
#include "vd_scanned.h"

/* A RoundClose posted (token: key_id ""; signed: the key) or refused. */
typedef struct vd_commitment {
	char run[VD_RUN_MAX];
	int64_t round_index;
	char hash[VD_HASH_HEX_LEN + 1];
	int64_t schema_version;
	double received_at;
	char key_id[VD_KEYID_LEN + 1];    /* "" for the operator token */
} vd_commitment;

/* A commitment the operator withdrew (trust.md section 8). */
typedef struct vd_withdrawal {
	char run[VD_RUN_MAX];
	int64_t round_index;
	char hash[VD_HASH_HEX_LEN + 1];
	char sources[64];                 /* the sources that named it, comma-separated */
	char peer[64];                    /* the request's address */
	char reason[VD_WITHDRAW_REASON_MAX + 1];
	double at;
} vd_withdrawal;

/* A ledger record as remembered. */
typedef struct vd_ledger_rec {
	int64_t round_index;
	char hash[VD_HASH_HEX_LEN + 1];
	char record_hash[VD_HASH_HEX_LEN + 1];
	size_t line;
} vd_ledger_rec;

/* The append-only memory of one ledger (trust.md section 5). */
typedef struct vd_ledger_mem {
	char *relpath, *run;
	vd_ledger_rec *recs;           /* the remembered prefix */
	size_t n, cap;
	int rewritten;                 /* the file no longer extends it */
	char detail[VD_DETAIL_MAX];
	vd_ledger_rec *diverged;       /* what the file says now, past the departure */
	size_t n_diverged;
	uint64_t serial;               /* new for each ledger remembered anew (one
	                                * forgotten and read again is another) */
} vd_ledger_mem;

/* A statement whose envelope verified under a trusted key. */
typedef struct vd_signed_stmt {
	vd_statement st;
	char run[VD_RUN_MAX];          /* store form: "" for the root */
	char key_id[VD_KEYID_LEN + 1];
	char where[VD_RUN_MAX];        /* the envelope file, or "api" */
} vd_signed_stmt;

/* An artifact once verified and committed, remembered after its
 * directory is removed: chains pass through it as a pruned link. */
typedef struct vd_retained {
	char hash[VD_HASH_HEX_LEN + 1];
	char *run;
	int64_t round_index;
	int has_parent;
	char parent[VD_HASH_HEX_LEN + 1];
	double verified_at;
	struct vd_retained *next_child;  /* the next one naming the same parent */
} vd_retained;

typedef struct vd_memory {
	vd_commitment *posted;         /* RoundClose commitments posted */
	size_t n_posted, cap_posted;
	vd_commitment *equivs;         /* conflicting posts refused */
	size_t n_equivs, cap_equivs;
	vd_signed_stmt *stmts;         /* posted checkpoints, then remembered statements */
	size_t n_stmts, n_posted_stmts, cap_stmts;
	vd_map stmt_seen;              /* remembered (statement, key) -> the memory */
	vd_map withdrawn;              /* vd_withdrawal_key -> vd_withdrawal */
	vd_map mems;                   /* ledger relpath -> vd_ledger_mem */
	vd_map retained;               /* hash -> vd_retained: verified and committed */
	vd_map retained_children;      /* parent hash -> first vd_retained naming it */
	vd_order retained_by_run;      /* the vd_retained by (run, round, hash): /chain?run= */
	uint64_t ledger_serials;       /* the last vd_ledger_mem.serial given */
} vd_memory;

/* What a record does. Those marked volatile are never persisted: a scan
 * finds them again after a restart. */
typedef enum vd_mem_kind {
	VD_MEM_NONE,              /* nothing to record or apply */
	VD_MEM_POST,              /* a RoundClose accepted: c, and signers */
	VD_MEM_POST_AGAIN,        /* the same again: its audit entry and signers may be new */
	VD_MEM_EQUIVOCATION,      /* a RoundClose refused: c against existing */
	VD_MEM_CHECKPOINT,        /* a signed ledger checkpoint posted: stmt, and signers */
	VD_MEM_STATEMENT,         /* a signed statement under one key: stmt */
	VD_MEM_SIGNATURES,        /* a statement known, new signers of it */
	VD_MEM_WITHDRAWAL,        /* w */
	VD_MEM_LEDGER_APPEND,     /* recs[0..n) appended at seq first of relpath */
	VD_MEM_LEDGER_DIVERGED,   /* volatile: the file no longer extends the memory */
	VD_MEM_LEDGER_FORGET,     /* the operator forgets relpath */
	VD_MEM_RETAIN,            /* r, its run in run (r.run is not read) */
	VD_MEM_KINDS
} vd_mem_kind;

typedef struct vd_mem_record {
	vd_mem_kind kind;
	vd_commitment c;
	char existing[VD_HASH_HEX_LEN + 1];
	vd_signed_stmt stmt;
	/* A signed post's statement (stmt, key_id aside) is remembered under
	 * each of these keys with it, in the same record. */
	char signers[VD_DSSE_MAX_SIGS][VD_KEYID_LEN + 1];
	size_t n_signers;
	vd_withdrawal w;
	vd_retained r;
	char relpath[VD_RUN_MAX], run[VD_RUN_MAX];
	size_t first;
	vd_ledger_rec *recs;           /* owned: vd_mem_record_free */
	size_t n;
	char detail[VD_DETAIL_MAX];
	/* Persisted beside the record by the shell; never read here. */
	const uint8_t *env;
	size_t env_len;
	const struct vd_audit *audit;
} vd_mem_record;

void vd_memory_init(vd_memory *m);
void vd_memory_free(vd_memory *m);
void vd_mem_record_init(vd_mem_record *rec, vd_mem_kind kind);
void vd_mem_record_free(vd_mem_record *rec);

/* Makes rec durable: 0, or a negative errno when it could not (nothing
 * was). */
typedef int (*vd_mem_persist_fn)(const vd_mem_record *rec, void *arg);

/* Persist rec, and only once that succeeded apply it: 0, -EIO when the
 * persist failed (m unchanged), -ENOMEM when applying ran out of memory
 * (it is durable: a restart restores it). A volatile record is applied
 * only. */
int vd_memory_commit(vd_memory *m, const vd_mem_record *rec, vd_mem_persist_fn persist,
    void *arg);
/* Apply a decided record: 0, -ENOMEM, or -EINVAL for a ledger append
 * that does not follow the records remembered. */
int vd_memory_apply(vd_memory *m, const vd_mem_record *rec);
/* What restoring a record did. */
typedef enum vd_restore_result {
	VD_RESTORE_APPLIED,
	VD_RESTORE_SKIPPED          /* not consistent with what is restored */
} vd_restore_result;
/* Apply a record loaded from the database at start: one that is not
 * consistent with what is restored (a ledger record out of sequence, a
 * duplicate) is skipped. A vd_restore_result, or -ENOMEM. */
int vd_memory_restore(vd_memory *m, const vd_mem_record *rec);
int vd_memory_is_volatile(vd_mem_kind kind);
const char *vd_mem_kind_name(vd_mem_kind kind);

/* ---- decisions: each fills rec and leaves m as it is ---------------------- */

/* What a decision on something offered to the memory (a post, a
 * statement read, a withdrawal, an artifact to keep) meets. */
typedef enum vd_post_result {
	VD_POST_NEW,                /* nothing of it known: recorded now */
	VD_POST_KNOWN,              /* the same one is there */
	VD_POST_CONFLICT            /* another hash is there for its round */
} vd_post_result;

/* A RoundClose c posted. strong_other: another hash a commitment by the
 * token or a trusted key already names for the round (from lineage), or
 * NULL. VD_POST_NEW (VD_MEM_POST), VD_POST_KNOWN (VD_MEM_POST_AGAIN), or
 * VD_POST_CONFLICT (VD_MEM_EQUIVOCATION, existing filled; VD_MEM_NONE
 * when the same party's conflict is remembered already). An unsigned
 * ledger record never blocks a post. */
vd_post_result vd_memory_post(const vd_memory *m, const vd_commitment *c, const char *strong_other,
    vd_mem_record *rec, char *existing);

/* A signed checkpoint posted: VD_POST_NEW, or VD_POST_KNOWN (VD_MEM_NONE). */
vd_post_result vd_memory_post_checkpoint(const vd_memory *m, const vd_statement *st, const char *key_id,
    vd_mem_record *rec);

/* The keys that signed a posted statement st (run in store form), those
 * the memory does not hold yet, into rec: a VD_MEM_POST, POST_AGAIN or
 * CHECKPOINT remembers the statement under them with what it records; a
 * VD_MEM_NONE becomes VD_MEM_SIGNATURES when some are new. An
 * equivocation records none. */
void vd_memory_post_signers(const vd_memory *m, const vd_statement *st, const char *run,
    const char *const *key_ids, size_t n, vd_mem_record *rec);

/* A signed statement under one key: VD_POST_NEW, or VD_POST_KNOWN
 * (VD_MEM_NONE). run in store form; where: its file or "api". */
vd_post_result vd_memory_remember(const vd_memory *m, const vd_statement *st, const char *run,
    const char *key_id, const char *where, vd_mem_record *rec);

/* The sources of the memory that name (run, round) -> hash, as bits. */
#define VD_MEM_NAMED_TOKEN 1u      /* a post with a token */
#define VD_MEM_NAMED_SIGNED 2u     /* a signed post or statement */
#define VD_MEM_NAMED_LEDGER 4u     /* a remembered ledger record, or one diverged */
unsigned vd_memory_sources(const vd_memory *m, const char *run, int64_t round,
    const char *hash);
/* A withdrawal by the operator at time at, w->sources naming every source
 * (the shell's to fill): VD_POST_NEW (VD_MEM_WITHDRAWAL), VD_POST_KNOWN
 * already withdrawn, or -ENOENT when w->sources names nothing. */
int vd_memory_withdraw(const vd_memory *m, const vd_withdrawal *w, double at,
    vd_mem_record *rec);

/* A ledger as a scan read it: VD_MEM_LEDGER_APPEND (its new intact
 * records; none when it only still extends the memory) or
 * VD_MEM_LEDGER_DIVERGED (detail says where), or VD_MEM_NONE when it
 * could not be read (the memory stands). -ENOMEM out of memory. */
/* The retained artifacts in (run, round, hash) order, or NULL out of
 * memory: a page of a run's chain is a search, not a sort. */
const vd_order *vd_memory_retained_order(vd_memory *m);

int vd_memory_read_ledger(const vd_memory *m, const vd_scan_ledger *l, vd_mem_record *rec);
/* The same, taking at most max new records (*more set when the file
 * holds further ones): a long ledger is remembered a slice at a time. */
int vd_memory_read_ledger_some(const vd_memory *m, const vd_scan_ledger *l, size_t max,
    vd_mem_record *rec, int *more);
/* A remembered ledger missing where a complete scan looked: diverged (the
 * file is gone), or VD_MEM_NONE when nothing of it is remembered. */
void vd_memory_ledger_gone(const vd_memory *m, const char *relpath, vd_mem_record *rec);
/* The operator forgets a ledger: 0, -ENOENT none remembered. */
int vd_memory_forget_ledger(const vd_memory *m, const char *relpath, vd_mem_record *rec);

/* An artifact verified and committed: VD_POST_NEW, or VD_POST_KNOWN
 * remembered already. */
vd_post_result vd_memory_retain(const vd_memory *m, const vd_retained *r, vd_mem_record *rec);

/* ---- reading ---------------------------------------------------------- */

const vd_ledger_mem *vd_memory_ledger(const vd_memory *m, const char *relpath);
int vd_memory_has_post(const vd_memory *m, const vd_commitment *c);
int vd_memory_has_equivocation(const vd_memory *m, const char *run, int64_t round,
    const char *hash);
int vd_memory_has_statement(const vd_memory *m, const vd_statement *st, const char *run,
    const char *key_id);
int vd_memory_is_withdrawn(const vd_memory *m, const char *run, int64_t round,
    const char *hash);

/* What is durable in m, as one number: equal memories give equal digests
 * whatever order their maps were filled in. with_volatile: the ledgers'
 * diverged state, and ledgers of which nothing is remembered, too. */
uint64_t vd_memory_digest(const vd_memory *m, int with_volatile);

/* The map key of a withdrawn commitment (run in store form). */
#define VD_WITHDRAWAL_KEY_MAX (VD_RUN_MAX + 24 + VD_HASH_HEX_LEN + 2)
void vd_withdrawal_key(char *out, size_t n, const char *run, int64_t round, const char *hash);

#endif

/*
 * The store as the daemon knows it, owned by the event loop thread: every
 * artifact directory (a "copy") with its header and latest verdict, the
 * copies grouped by the content hash their headers claim, the ledgers,
 * and the clients waiting for verifications. Scans run on libuv's
 * threadpool and hashing on the hasher pool; both hand plain results back
 * here.
 */
#ifndef VD_STORE_H
#define VD_STORE_H

#include <stdint.h>

#include <uv.h>

#include "vd_config.h"
#include "vd_map.h"
#include "vd_metrics.h"
#include "vd_pool.h"
#include "vd_scan.h"
#include "vd_watch.h"

typedef enum vd_astate {
	VD_AS_PENDING, VD_AS_VERIFYING, VD_AS_VERIFIED, VD_AS_FAILED
} vd_astate;

const char *vd_astate_name(vd_astate s);

typedef struct vd_copy {
	char *relpath;
	char *run;                  /* the directory holding it */
	vd_hdrinfo hdr;             /* header.json as last scanned */
	vd_fingerprint fp;          /* the directory as last seen */
	/* The latest verdict and the directory state it describes. */
	int has_verdict;
	vd_code code;
	char detail[VD_DETAIL_MAX];
	char recomputed[VD_HASH_HEX_LEN + 1];
	uint64_t tensors, bytes;
	double verified_at, duration_ms;
	vd_fingerprint verdict_fp;
	/* Scheduling. */
	vd_job *inflight;           /* queued or running; owned by the pool */
	vd_job_kind inflight_kind;
	int again;                  /* verify once more when it returns */
	vd_job_kind again_kind;
	uint64_t again_gen, req_gen, done_gen;
	int backlog;                /* could not be queued: queue full */
	int seen;                   /* scan sweep mark */
	struct vd_chunkmap *chunks; /* chunk digests of the verified bytes */
	char changed[VD_DETAIL_MAX];  /* what the last re-check found changed */
	int was_failed;             /* for alert transitions */
} vd_copy;

#define VD_CHAIN_MAX_BREAKS 16     /* breaks listed per chain; the rest counted */

typedef enum vd_chain_status { VD_CHAIN_PENDING, VD_CHAIN_INTACT, VD_CHAIN_BROKEN } vd_chain_status;

typedef enum vd_break_reason {
	VD_BREAK_MISSING_PARENT, VD_BREAK_PARENT_FAILED, VD_BREAK_ROUND_GAP,
	VD_BREAK_DETACHED_ROOT, VD_BREAK_COMMITMENT_MISMATCH
} vd_break_reason;

const char *vd_chain_status_name(vd_chain_status s);
const char *vd_break_name(vd_break_reason r);

typedef struct vd_break {
	char hash[VD_HASH_HEX_LEN + 1];
	int64_t round_index;
	vd_break_reason reason;
} vd_break;

typedef enum vd_commit_source { VD_SRC_LEDGER, VD_SRC_ROUNDCLOSE, VD_SRC_PINNED } vd_commit_source;
const char *vd_commit_source_name(vd_commit_source s);

/* What the trusted sources say for one round of one run. */
typedef struct vd_commit_slot {
	char run[1024];
	int64_t round_index;           /* the RoundClose round t (-1: pinned genesis) */
	int has_ledger, has_post, has_pinned;
	char ledger_hash[VD_HASH_HEX_LEN + 1], post_hash[VD_HASH_HEX_LEN + 1];
	char pinned_hash[VD_HASH_HEX_LEN + 1];
	const char *ledger_where;      /* the ledger's relpath */
	size_t ledger_line;
} vd_commit_slot;

typedef struct vd_group {      /* every copy claiming one content hash */
	char hash[VD_HASH_HEX_LEN + 1];
	vd_copy **copies;
	size_t n, cap;
	/* Lineage, recomputed after every change (vd_lineage.c). */
	int mark;                      /* 0 not yet, 1 on the walk, 2 done */
	vd_chain_status chain;
	size_t chain_len;
	char root[VD_HASH_HEX_LEN + 1];
	vd_break breaks[VD_CHAIN_MAX_BREAKS];
	size_t n_breaks, breaks_total;
	const vd_commit_slot *commit;  /* the commitment for its round, if any */
	vd_commit_source commit_source;
	int committed;                 /* a trusted source names this hash */
	int trusted;
	int64_t round_index;
	int has_parent;
	char parent[VD_HASH_HEX_LEN + 1];
} vd_group;

typedef struct vd_waiter vd_waiter;
typedef void (*vd_wait_fn)(void *arg, int timed_out);

typedef struct vd_state vd_state;

typedef struct vd_alert {
	int kind;
	char *subject, *detail;
} vd_alert;

typedef struct vd_store {
	uv_loop_t *loop;
	const vd_config *cfg;
	vd_pool *pool;
	vd_metrics *metrics;
	vd_watch watch;
	vd_map copies;              /* relpath -> vd_copy */
	vd_map groups;              /* content hash -> vd_group */
	vd_scan_ledger *ledgers;    /* from the last scan */
	size_t n_ledgers;
	char *root;                 /* fixed for the daemon's life */
	unsigned scan_depth;        /* for the scan under way */
	uv_work_t scan_work;
	vd_scan_result scan_result;
	int scanning, scan_again, scanned_once;
	uv_timer_t debounce, rescan;
	uint64_t first_event_ms;
	double last_scan, last_scrub;
	int root_ok;
	vd_waiter *waiters;
	vd_state *state;               /* durable state; NULL: memory only */
	vd_map stored;                 /* relpath -> stored verdict, from the last run */
	vd_map unreadable;             /* directories reported unreadable */
	struct vd_commitment *posted;  /* RoundClose commitments posted */
	size_t n_posted, cap_posted;
	struct vd_commitment *equivs;  /* conflicting posts refused */
	size_t n_equivs, cap_equivs;
	vd_map commits;                /* "run\nround" -> vd_commit_slot */
	vd_map alerts;                 /* "kind\nsubject" -> vd_alert */
	uint64_t alert_counts[VD_ALERT_COUNT];
	int64_t head_round;            /* committed head, -1: none */
	char head_hash[VD_HASH_HEX_LEN + 1];
	char head_run[1024];
	/* Scrub: one pass re-hashes every verified artifact, one at a time. */
	uv_timer_t scrub_timer;
	char **scrub_list;
	size_t scrub_n, scrub_next;
	int scrubbing;
	size_t backlog;
	int closing;
	unsigned handles_open;
	void (*on_closed)(void *arg);
	void *closed_arg;
} vd_store;

int vd_store_init(vd_store *s, uv_loop_t *loop, const vd_config *cfg,
    vd_metrics *metrics);
void vd_store_set_config(vd_store *s, const vd_config *cfg);
void vd_store_scan(vd_store *s);            /* now (or right after the running one) */
void vd_store_close(vd_store *s, void (*done)(void *), void *arg);

vd_astate vd_copy_state(const vd_copy *c);
/* The last verdict, ignoring a verification under way: what lineage and
 * alerts follow, so that a re-check does not clear and raise them. */
vd_astate vd_copy_settled(const vd_copy *c);
vd_astate vd_group_settled(const vd_group *g);
vd_group *vd_store_group(vd_store *s, const char *hash);
vd_copy *vd_store_copy(vd_store *s, const char *relpath);
/* The state of a hash: failed if any copy failed, verified if all did. */
vd_astate vd_group_state(const vd_group *g);

/* Queue a verification that bypasses the cached verdict. Returns 0 and the
 * generation whose completion answers it, or -EAGAIN (queue full). */
int vd_store_verify_now(vd_store *s, vd_copy *c, uint64_t *gen);
/* Register a directory a client named that no scan has seen yet. */
vd_copy *vd_store_adopt(vd_store *s, const char *relpath);

/* Call fn once every copy reached its generation (or vanished), or after
 * timeout_ms with timed_out set. A waiter is freed after fn returns;
 * vd_store_wait_cancel drops it without calling fn. */
vd_waiter *vd_store_wait(vd_store *s, char **relpaths, const uint64_t *gens,
    size_t n, uint64_t timeout_ms, vd_wait_fn fn, void *arg);
void vd_store_wait_cancel(vd_waiter *w);

void vd_store_gauges(vd_store *s, vd_gauges *g);

/* Durable state: load stored verdicts and commitments before the first
 * scan merges (call right after vd_store_init). */
int vd_store_attach_state(vd_store *s, vd_state *st);

/* Record a RoundClose posted with the operator token: 0 new, 1 the same
 * again, 2 conflict (*existing_hash filled, equivocation recorded), -1 error. */
int vd_store_post_commitment(vd_store *s, const char *run, int64_t round,
    const char *hash, int64_t schema_version, char *existing_hash);

/* Recompute commitments, lineage and alerts (after any change). */
void vd_store_refresh(vd_store *s);

/* Free what vd_store_refresh built (vd_lineage.c; at close). */
void vd_lineage_free(vd_store *s);

/* The run key as shown: "." for the store root. */
const char *vd_run_name(const char *run);

#endif

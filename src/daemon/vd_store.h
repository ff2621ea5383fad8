/*
 * The store as the daemon knows it, owned by the event loop thread: the
 * shell around the core (vd_core), which holds every artifact (a "copy":
 * a directory or a tar) with its header and latest verdict, grouped by
 * the content hash their headers claim, the commitments, lineage, the
 * clients waiting and the schedule. Scans run on libuv's threadpool and
 * hashing on the hasher pool; both hand plain results back here, which
 * become the core's inputs; the store applies its outputs.
 */
#ifndef VD_STORE_H
#define VD_STORE_H

#include <stdint.h>

#include <uv.h>

#include "vd_config.h"
#include "vd_core.h"
#include "vd_keys.h"
#include "vd_lineage.h"
#include "vd_map.h"
#include "vd_memory.h"
#include "vd_metrics.h"
#include "vd_model.h"
#include "vd_omskeys.h"
#include "vd_pool.h"
#include "vd_changes.h"
#include "vd_scan.h"
#include "vd_sched.h"
#include "vd_state.h"
#include "vd_turn.h"
#include "vd_waiters.h"
#include "vd_watch.h"

typedef struct vd_store {
	uv_loop_t *loop;
	const vd_config *cfg;
	vd_pool *pool;
	vd_metrics *metrics;
	vd_watch watch;
	vd_core core;               /* the model, the memory of commitments, lineage,
	                             * alerts, head, waiters and the schedule */
	vd_scan_ledger *ledgers;    /* from the last scan */
	size_t n_ledgers;
	vd_keyring *keys;           /* trusted keys; NULL: none */
	vd_omskeys *oms_keys;       /* run_oms_keys as last read; NULL: none */
	unsigned keys_gen;          /* bumped when the keys change */
	vd_map env_cache;           /* envelope relpath -> its last evaluation */
	char *root;                 /* fixed for the daemon's life */
	unsigned scan_depth;        /* for the scan under way */
	vd_bounds scan_bounds;
	uv_work_t scan_work;
	vd_scan_result scan_result;
	vd_changes changes;         /* noted since the scan under way began */
	vd_changes scan_changes;    /* what the scan under way looks at */
	size_t scan_room;           /* artifacts it may add */
	int scanning, scan_again, scanned_once;
	int merging;                /* the last scan's result is being merged */
	size_t merge_next;          /* its next artifact */
	int merge_step;             /* then what is left of it, a step a turn */
	size_t merge_pos;           /* the next ledger or directory of the step */
	uv_idle_t merge_idle;       /* active: the merge goes on next loop turn */
	const vd_turn *turn;        /* the loop's turn under way: when to put a slice off */
	unsigned merge_put_off, pass_put_off, retain_put_off;  /* vd_turn_defer */
	vd_watch_pass watch_pass;   /* the merge's watches, a slice a turn */
	int watch_passing;
	uv_timer_t debounce, rescan;
	uint64_t first_event_ms;
	double last_scan;
	int root_ok;
	vd_waiters waiters;         /* clients waiting for verdicts */
	vd_state *state;               /* durable state; NULL: memory only */
	struct vd_events *events;      /* GET /events, once the state is attached */
	vd_map stored;                 /* relpath -> stored verdict, from the last run */
	vd_map runs;                   /* directories that can be runs, from the last scan */
	/* Batched state writes end with each loop turn. */
	uv_check_t flush_check;
	uv_prepare_t flush_prepare;
	/* Lineage recomputation after verdicts, bounded in loop share. */
	uv_timer_t refresh_timer;
	/* Active while a whole pass left groups to remember: VD_RETAIN_SLICE
	 * of them a loop turn. */
	uv_idle_t retain_idle;
	/* Active while the first whole pass over a scan goes on in slices:
	 * VD_LINEAGE_PASS_SLICE chains a loop turn. */
	uv_idle_t pass_idle;
	/* The alert history's writes not yet known committed, in order (kind
	 * -1: a settle): the first alerts_written are in the open batch, the
	 * rest wait for the database to take writes again. */
	vd_alert_change *unsaved;
	size_t n_unsaved, cap_unsaved, alerts_written;
	uint64_t alerts_failures;      /* vd_state_failures as they were written */
	uv_timer_t alerts_timer;       /* writes them again */
	uint64_t commit_sig;           /* what the last scan's commitment sources said */
	uint64_t trimmed_at;           /* uv_now of the last malloc_trim */
	/* When each copy is verified: backlog, retries, scrub. */
	vd_sched sched;
	int closing;
	unsigned handles_open;
	void (*on_closed)(void *arg);
	void *closed_arg;
} vd_store;

/* turn: the loop's turn, marked by the caller each prepare phase; the
 * store's sliced work and its pool's finished jobs go by it. */
int vd_store_init(vd_store *s, uv_loop_t *loop, const vd_turn *turn, const vd_config *cfg,
    vd_metrics *metrics);
void vd_store_set_config(vd_store *s, const vd_config *cfg);
void vd_store_scan(vd_store *s);            /* now (or right after the running one) */
void vd_store_close(vd_store *s, void (*done)(void *), void *arg);

const vd_group *vd_store_group(vd_store *s, const char *hash);
const vd_copy *vd_store_copy(vd_store *s, const char *relpath);
const vd_model *vd_store_model(vd_store *s);
const vd_lineage *vd_store_lineage(vd_store *s);
/* What the API reads of the store as it is now. */
uv_loop_t *vd_store_loop(vd_store *s);
int vd_store_closing(const vd_store *s);
int vd_store_scanned(const vd_store *s);      /* a whole scan was merged */
int vd_store_passing(const vd_store *s);      /* a first pass goes on: groups read pending */
vd_state *vd_store_state(vd_store *s);         /* NULL: memory only */
struct vd_events *vd_store_events(vd_store *s);
vd_waiters *vd_store_waiters(vd_store *s);
const vd_keyring *vd_store_keys(vd_store *s);  /* NULL: none */
/* A client asked about the artifact claiming hash: its copies' jobs go
 * ahead of background work (vd_sched_interest). */
void vd_store_interest(vd_store *s, const char *hash);

/* Queue a verification that bypasses the cached verdict. Returns 0 and the
 * generation whose completion answers it, or -EAGAIN (queue full). */
int vd_store_verify_now(vd_store *s, const vd_copy *c, uint64_t *gen);
/* Register an artifact (a directory or a tar) a client named that no scan
 * has seen yet. */
const vd_copy *vd_store_adopt(vd_store *s, const char *relpath, vd_artifact_kind kind);

void vd_store_gauges(vd_store *s, vd_gauges *g);

/* Durable state: load stored verdicts and commitments before the first
 * scan merges (call right after vd_store_init). 0, or -EIO with the
 * sentence in err. */
int vd_store_attach_state(vd_store *s, vd_state *st, char *err, size_t errlen);

/* Record a RoundClose posted with the operator token (no keys) or signed
 * by trusted keys (key_ids, the first the post's, and the envelope), with
 * its audit entry and its statement under each key new to it in the same
 * transaction: VD_POST_NEW, VD_POST_KNOWN (the same again), or
 * VD_POST_CONFLICT with a commitment by the token or a key (*existing_hash
 * filled, equivocation recorded); -EIO (nothing recorded, nothing changed). An unsigned ledger record
 * never blocks a post: the conflict is an equivocation. */
int vd_store_post_commitment(vd_store *s, const char *run, int64_t round,
    const char *hash, int64_t schema_version, const char *const *key_ids, size_t n_keys,
    const uint8_t *env, size_t env_len, const vd_audit *audit, char *existing_hash);

/* Record a signed ledger checkpoint (st->run in store form) signed by
 * key_ids, with its audit entry and the statement under each key new to
 * it in the same transaction: VD_POST_NEW, VD_POST_KNOWN, or -EIO
 * (nothing recorded or changed). */
int vd_store_post_checkpoint(vd_store *s, const vd_statement *st, const char *const *key_ids,
    size_t n_keys, const uint8_t *env, size_t env_len, const vd_audit *audit);

/* Whether an artifact of run with this hash has a header round other
 * than round + 1 (*header_round: that round): its RoundClose commits
 * nothing. */
int vd_store_round_mismatch(vd_store *s, const char *run, int64_t round, const char *hash,
    int64_t *header_round);

/* The operator withdraws (run, round) -> hash, from every source but the
 * configuration, durably with its audit entry in the same transaction:
 * VD_POST_NEW, VD_POST_KNOWN already withdrawn, -ENOENT no such
 * commitment, -EIO (nothing recorded or changed). w's sources are filled
 * in. */
int vd_store_withdraw(vd_store *s, vd_withdrawal *w);

/* Forget the remembered records of one ledger: 0, -ENOENT, -EIO. */
int vd_store_forget_ledger(vd_store *s, const char *relpath);

/* Trust these keys from now on (a reference is taken; NULL: none). */
void vd_store_set_keys(vd_store *s, vd_keyring *keys);

/* Check OMS bundles against these keys from now on (a reference is
 * taken; NULL: none): a copy whose bundle was checked under other keys
 * for its run is verified again. */
void vd_store_set_oms_keys(vd_store *s, vd_omskeys *keys);

/* Recompute commitments, lineage and alerts now (after a change to the
 * commitments). */
void vd_store_refresh(vd_store *s);
/* A verdict changed: lineage is recomputed soon, within its loop budget. */
void vd_store_touch(vd_store *s);
/* Before reading lineage: catch up if it is stale and the budget allows. */
void vd_store_sync(vd_store *s);

/* Whether run ("" for the root) can hold a run: a directory of the store
 * seen by a scan (not an artifact or commitments directory, so not a
 * file, a FIFO or a symbolic link either), or a run the configuration
 * names (genesis_hash, anchor, run_token_file) before its directory
 * exists. */
int vd_store_run_known(vd_store *s, const char *run);

/* The remembered ledger at relpath, or NULL. */
const vd_ledger_mem *vd_store_ledger_mem(vd_store *s, const char *relpath);
/* The remembered artifacts by (run, round, hash), settled; NULL out of
 * memory. */
const vd_order *vd_store_retained_order(vd_store *s);

#endif

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
	int was_failed;             /* for alert transitions */
} vd_copy;

typedef struct vd_group {      /* every copy claiming one content hash */
	char hash[VD_HASH_HEX_LEN + 1];
	vd_copy **copies;
	size_t n, cap;
} vd_group;

typedef struct vd_waiter vd_waiter;
typedef void (*vd_wait_fn)(void *arg, int timed_out);

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

#endif

/*
 * The model: every artifact (a "copy": a directory or a tar) with its
 * header and latest verdict, and the copies grouped by the content hash
 * their headers claim. The core (vd_core) owns and changes it; lineage
 * writes only each group's lineage part; the shell reads it.
 */
#ifndef VD_MODEL_H
#define VD_MODEL_H

#include <stdint.h>

#include "vd_limits.h"
#include "vd_map.h"
#include "vd_scanned.h"

/* What a verification is for: the hasher pool (vd_pool) runs the jobs. */
typedef enum vd_job_kind {
	VD_JOB_EXPLICIT,     /* a client is waiting */
	VD_JOB_BACKGROUND,   /* a new or changed artifact */
	VD_JOB_SCRUB         /* a periodic re-hash, throttled */
} vd_job_kind;

/* Why a job stopped before its verdict: its verdict is then VD_IO_ERROR
 * with the reason, and describes nothing on disk. */
typedef enum vd_abandon {
	VD_ABANDON_NONE,
	VD_ABANDON_GONE,     /* the artifact was removed or replaced meanwhile */
	VD_ABANDON_TIME      /* it ran past its time limit */
} vd_abandon;

typedef struct vd_job vd_job;
#include "vd_order.h"

typedef enum vd_astate {
	VD_AS_PENDING, VD_AS_VERIFYING, VD_AS_VERIFIED, VD_AS_FAILED
} vd_astate;

const char *vd_astate_name(vd_astate s);

typedef struct vd_copy {
	char *relpath;
	char *run;                  /* the directory holding it */
	vd_artifact_kind kind;      /* as last scanned (a directory until then) */
	vd_hdrinfo hdr;             /* header.json as last scanned */
	vd_fingerprint fp;          /* the directory or tar as last seen */
	/* The latest verdict and the directory state it describes. */
	int has_verdict;
	vd_code code;
	char *detail;               /* its sentence; NULL when there is none */
	char recomputed[VD_HASH_HEX_LEN + 1];
	uint64_t tensors, bytes;
	double verified_at, duration_ms;
	vd_fingerprint verdict_fp;
	/* Scheduling: the core's (vd_plan.h). */
	uint64_t inflight;          /* its job queued or running: the job's id; 0: none */
	vd_job_kind inflight_kind;
	uint64_t inflight_gen;      /* the generation that job answers */
	int again;                  /* verify once more when it returns */
	vd_job_kind again_kind;
	uint64_t again_gen, req_gen, done_gen;
	int backlog;                /* could not be queued: queue full */
	unsigned timeouts;          /* jobs in a row that ran out of time */
	int seen;                   /* scan sweep mark */
	struct vd_chunkmap *chunks; /* chunk digests of the verified bytes */
	char *changed;              /* what the last re-check found changed, or NULL */
	vd_facts *facts;            /* the facts behind the latest verdict's failure
	                             * and its remediation; NULL when none */
	struct vd_oms_status *oms;  /* its OMS bundle as last checked; NULL: none */
	/* Its place in the model's by_run index while run_group is set: its
	 * group's round and the group, as when it went in. */
	int64_t run_round;
	struct vd_group *run_group;
} vd_copy;

/* The copy's OMS bundle as checked (NULL: it has none). */
void vd_copy_oms(vd_copy *c, const struct vd_oms_status *st);

typedef enum vd_chain_status { VD_CHAIN_PENDING, VD_CHAIN_INTACT, VD_CHAIN_BROKEN } vd_chain_status;

typedef enum vd_break_reason {
	VD_BREAK_MISSING_PARENT, VD_BREAK_PARENT_FAILED, VD_BREAK_ROUND_GAP,
	VD_BREAK_DETACHED_ROOT, VD_BREAK_COMMITMENT_MISMATCH, VD_BREAK_CROSS_RUN,
	VD_BREAK_COUNT
} vd_break_reason;

const char *vd_chain_status_name(vd_chain_status s);
const char *vd_break_name(vd_break_reason r);

typedef struct vd_break {
	char hash[VD_HASH_HEX_LEN + 1];
	int64_t round_index;
	vd_break_reason reason;
} vd_break;

struct vd_commit_slot;

typedef struct vd_group {      /* every copy claiming one content hash */
	char hash[VD_HASH_HEX_LEN + 1];
	vd_copy **copies;           /* in path order */
	size_t n, cap;
	/* The first copy's header, kept by the model, and the index of
	 * children by parent hash this places the group in. */
	int64_t round_index;
	int has_parent;
	char parent[VD_HASH_HEX_LEN + 1];
	struct vd_group *next_child;   /* the next group naming the same parent */
	/* Lineage, written by vd_lineage.c only. */
	int mark;                   /* 0 to compute, 1 on the walk, 2 done */
	uint64_t changed;           /* the model's change_gen when it or the link to
	                             * its parent last changed */
	uint64_t computed;          /* change_gen when lineage last computed it */
	uint64_t sig;               /* what children read of it, as last computed */
	vd_chain_status chain;
	size_t chain_len;
	size_t pruned;              /* links through removed, remembered artifacts */
	char root[VD_HASH_HEX_LEN + 1];
	vd_break *breaks;           /* allocated at the first break: most chains have none */
	size_t n_breaks, breaks_total;
	const struct vd_commit_slot *commit;  /* the commitment for its round, if any */
	int commit_source;          /* vd_commit_source shown */
	int committed;              /* a counting source names this hash, unopposed */
	int commit_read;            /* what its chain read of its commitment, as last
	                             * computed: a change of slots alone recomputes
	                             * only the groups whose reading changed */
	int via_pruned;             /* its parent was a pruned link, as last computed */
	int trusted;
	int legacy_untrusted;       /* legacy, and legacy_policy = untrusted */
} vd_group;

/* The copies, their index by claimed hash and by parent hash, and what
 * changed since lineage last looked. */
typedef struct vd_model {
	vd_map copies;              /* relpath -> vd_copy */
	vd_map groups;              /* content hash -> vd_group */
	vd_map children;            /* parent hash -> first vd_group naming it */
	vd_map dirty;               /* hashes whose groups or children changed */
	vd_map dirty_copies;        /* relpaths of copies that changed or left */
	int dirty_all;              /* too many to list: everything changed */
	size_t dirty_whole_min;     /* VD_DIRTY_WHOLE_MIN; the simulator's stores
	                             * are smaller */
	/* The listings' indexes, kept as copies and groups come and go. */
	vd_order by_hash;           /* the groups by content hash */
	vd_order by_run;            /* the copies with a header, by run, their
	                             * group's round and hash, then path */
	vd_map headerless;          /* relpath -> a copy with no valid header */
	vd_order by_path;           /* every copy by relpath: a scan of one change
	                             * finds what it covers without a walk of all */
	int orders_failed;          /* out of memory: built again when next read */
	uint64_t change_gen;        /* counts the marks of hashes changed: a group
	                             * computed before its change reads stale */
	uint64_t groups_gen;        /* counts groups made and freed: a list of them
	                             * kept across changes of the model holds while
	                             * it is the same */
} vd_model;

void vd_model_init(vd_model *m);
void vd_model_free(vd_model *m);      /* frees copies and groups */

vd_copy *vd_model_copy(const vd_model *m, const char *relpath);
vd_group *vd_model_group(const vd_model *m, const char *hash);
/* A new copy under relpath (run: its parent directory), not indexed; a
 * directory until its kind is set. */
vd_copy *vd_model_add_copy(vd_model *m, const char *relpath, const char *run);
/* Unindex and free. */
void vd_model_remove_copy(vd_model *m, vd_copy *c);
/* Keep the index in step with c->hdr: call unindex before the header
 * changes and index after. Both mark what they change dirty. */
void vd_model_unindex(vd_model *m, vd_copy *c);
void vd_model_index(vd_model *m, vd_copy *c);

/* Every copy in relpath order (strcmp), settled; NULL out of memory. */
const vd_order *vd_model_by_path(vd_model *m);

/* Iterators over the model (*it = 0 to start; NULL at the end; no change
 * of the model meanwhile) and their sizes: read by lineage, the views and
 * the store through these only. */
vd_group *vd_model_next_group(const vd_model *m, size_t *it);
size_t vd_model_group_count(const vd_model *m);
vd_copy *vd_model_next_copy(const vd_model *m, size_t *it);
/* The copies with no valid header, from *it = 0 on (NULL: no more). */
vd_copy *vd_model_next_headerless(const vd_model *m, size_t *it);
size_t vd_model_copy_count(const vd_model *m);
/* What changed since lineage last looked: hashes, then relpaths of copies
 * (NULL at the end), and whether everything did (too many to list). */
const char *vd_model_next_dirty(const vd_model *m, size_t *it);
size_t vd_model_dirty_count(const vd_model *m);
const char *vd_model_next_dirty_copy(const vd_model *m, size_t *it);
int vd_model_dirty_all(const vd_model *m);

/* The groups whose first copy names hash as its parent, linked through
 * next_child. */
vd_group *vd_model_first_child(const vd_model *m, const char *hash);
/* Mark a copy's verdict or schedule changed, for lineage to look at. */
void vd_model_touch(vd_model *m, const vd_copy *c);
/* Lineage has looked: forget what changed. */
void vd_model_clear_dirty(vd_model *m);

vd_astate vd_copy_state(const vd_copy *c);
/* The last verdict, ignoring a verification under way: what lineage and
 * alerts follow, so that a re-check does not clear and raise them. */
vd_astate vd_copy_settled(const vd_copy *c);
vd_astate vd_group_settled(const vd_group *g);
/* The state of a hash: failed if any copy failed, verified if all did. */
vd_astate vd_group_state(const vd_group *g);
/* What a child's chain sees of its parent: verified when any copy
 * verified (a bad extra copy raises its own alert, but does not break the
 * chains through the good one), failed when every copy failed. */
vd_astate vd_group_through(const vd_group *g);

/* Set a copy's facts (copied; NULL, or none that apply, clears them).
 * Kept out of the copy itself, since most copies have none. */
void vd_copy_facts(vd_copy *c, const vd_facts *f);

/* Set a copy's sentence (detail, changed): NULL or "" clears it. Kept out
 * of the copy itself, since most copies have none. */
void vd_copy_text(char **dst, const char *text);
#define VD_COPY_TEXT(s) ((s) ? (s) : "")

/* The indexes, settled: the groups by hash, the copies by (run, round,
 * hash, path); NULL out of memory. */
const vd_order *vd_model_by_hash(vd_model *m);
const vd_order *vd_model_by_run(vd_model *m);
/* The by_run order of copies (elements of vd_model_by_run). */
int vd_model_run_cmp(const void *a, const void *b);

/* Whether some copy of g lies in run. */
int vd_group_in_run(const vd_group *g, const char *run);

/* The run key as shown: "." for the store root. */
const char *vd_run_name(const char *run);

#endif

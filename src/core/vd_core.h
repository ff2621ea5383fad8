/*
 * The commitments state machine: the memory of commitments (vd_memory),
 * the lineage computed from it and the model (vd_lineage), the artifacts
 * retained as a whole pass finds them committed, the clients waiting for
 * verdicts (vd_waitset) and the verification schedule (vd_plan: the
 * backlog, runs booked, retries of jobs that ran out of time, the scrub's
 * pass). It changes only through vd_core_step, one input at a time, and
 * answers with one output. No I/O, no clock, no threads: time comes in an
 * input, and a record the machine wants durable goes out through the
 * persistence the shell gave it (vd_core_init); the record takes effect
 * only once that said it is durable, and a failed persist leaves the
 * machine as it was.
 *
 * The schedule's effects are actions in the output (jobs to start, take
 * back, promote) and the deadline of the next retry; the hasher queue is
 * the shell's, whose room the machine counts from what SOURCES says waits
 * in it. What only the queue knows comes back as inputs: a start refused
 * after all (UNSTARTED), a job taken back before it started (TAKEN_BACK).
 * Those two answer no waiter, and leave every copy in the model.
 *
 * The model (copies and groups) is the machine's: copies come in only as
 * scans found them (SCANNED) or a client named them (ADOPT), and go only
 * as the machine decides from what a scan covered (SWEEP) or as told
 * (COPY_GONE). The shell reads it through vd_core_model; each copy keeps
 * its schedule (its job in flight, runs booked, the backlog), and lineage
 * its dirty marks until it has seen them.
 */
#ifndef VD_CORE_H
#define VD_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "vd_artifact.h"
#include "vd_cover.h"
#include "vd_lineage.h"
#include "vd_memory.h"
#include "vd_model.h"
#include "vd_plan.h"
#include "vd_scanned.h"
#include "vd_waitset.h"

struct vd_omskeys;

/* What lineage reads besides the memory: set by VD_CORE_SOURCES. */
typedef struct vd_core_sources {
	vd_policy policy;
	const vd_keyring *keys;             /* may be NULL */
	const struct vd_omskeys *oms_keys;  /* may be NULL */
	const vd_scan_ledger *ledgers;      /* as the last scan read them */
	size_t n_ledgers;
	int scanned;                        /* the model holds a whole scan */
	vd_plan_queue queue;                /* the hasher queue as it is now */
} vd_core_sources;

typedef enum vd_core_in_kind {
	VD_CORE_SOURCES,        /* sources: lineage's other inputs; change says how far */
	VD_CORE_TOUCH,          /* the model changed (commits: a commitment it carries too) */
	VD_CORE_REFRESH,        /* recompute lineage now: refresh (raised to what is dirty) */
	VD_CORE_POST,           /* post: a RoundClose posted, then a refresh */
	VD_CORE_CHECKPOINT,     /* checkpoint: a signed ledger checkpoint posted, then a refresh */
	VD_CORE_STATEMENT,      /* statement: one accepted from a file, under each signer */
	VD_CORE_WITHDRAW,       /* withdraw: the operator withdraws, then a refresh */
	VD_CORE_LEDGER,         /* ledger: as a scan read it, at most budget new records */
	VD_CORE_LEDGER_GONE,    /* relpath: missing where a complete scan looked */
	VD_CORE_LEDGER_FORGET,  /* relpath: the operator forgets it, then a refresh */
	VD_CORE_RETAIN,         /* budget: more of the groups a whole pass left to remember */
	VD_CORE_RESTORE,        /* restore: the memory rebuilt from the database at start */
	VD_CORE_VERIFY,         /* verify: a copy to verify (again), of a kind */
	VD_CORE_TAKEN_BACK,     /* job: a VD_ACT_TAKE_BACK found its job not started */
	VD_CORE_UNSTARTED,      /* job: the queue refused a VD_ACT_START after all */
	VD_CORE_INTEREST,       /* hash: a client asked about it: its jobs go ahead */
	VD_CORE_SCRUB,          /* the scrub's interval came round: a pass begins */
	VD_CORE_JOB_DONE,       /* job: a verification came back (judged, gone, timed out) */
	VD_CORE_ADOPT,          /* adopt: an artifact a client named, not scanned yet */
	VD_CORE_SCAN_BEGIN,     /* cover: a scan's result comes: what it covers is unseen */
	VD_CORE_SCANNED,        /* scanned: an artifact as a scan found it */
	VD_CORE_UNREADABLE,     /* unreadable: the directories a scan could not read */
	VD_CORE_SWEEP,          /* cover: the scan merged: what it covers and did not
	                         * find is gone, unless under an unreadable directory */
	VD_CORE_COPY_GONE,      /* relpath: an artifact gone */
	VD_CORE_WAIT,           /* wait: a client waits for copies to reach generations */
	VD_CORE_WAIT_CANCEL,    /* wait_id: it went away */
	VD_CORE_WAIT_CHECK,     /* copies may have reached what their waiters wait for */
	VD_CORE_TICK,           /* now_ms: the time: waiters' deadlines, retries due */
	VD_CORE_WAIT_FIRE_ALL,  /* shutting down: every waiter answered as timed out */
	VD_CORE_PASS            /* budget: more of a whole pass in slices (SIZE_MAX: the rest) */
} vd_core_in_kind;

/* A verdict kept from the last run, for a copy found again: it holds for
 * the files whose identities it was reached on. */
typedef struct vd_kept_verdict {
	uint8_t fingerprint[32];
	vd_code code;
	const char *detail;
	const char *content_hash;
	uint64_t tensors, bytes;
	double verified_at, duration_ms;
	const vd_facts *facts;                /* may be NULL */
	const struct vd_oms_status *oms;      /* may be NULL */
	struct vd_chunkmap **chunks;          /* a passing verdict's digests: taken */
} vd_kept_verdict;

/* What a scanned artifact comes to. */
typedef enum vd_scan_outcome {
	VD_SCAN_SAME,        /* as it was: nothing to do */
	VD_SCAN_NEW,         /* a copy not known before */
	VD_SCAN_CHANGED      /* its files, header or kind changed */
} vd_scan_outcome;

/* What a verification job found, as the core takes it. */
typedef struct vd_job_result {
	uint64_t id;                    /* the copy's job in flight it must be */
	const char *relpath;
	vd_job_kind kind;
	uint64_t gen;                   /* the request generation it answers */
	vd_abandon abandoned;
	const vd_verdict *verdict;
	vd_fingerprint fp_before, fp_after;
	vd_hdrinfo *hdr;                /* header.json after hashing: taken when it changed */
	struct vd_chunkmap **chunks;    /* a passing verdict's chunk digests: taken */
	int rechecked;                  /* chunk by chunk, every byte unchanged */
	const char *changed;            /* what a re-check found changed, or "" */
	double started, duration;       /* wall clock of its first slice; seconds on it */
	double limit;                   /* the time limit it ran under, seconds */
	uint64_t now_ms;                /* the loop's clock as it came back */
	int oms_present;
	const struct vd_oms_status *oms;
} vd_job_result;

/* What a job result comes to, for the shell to act on. */
typedef enum vd_job_outcome {
	VD_JOB_DROPPED,      /* its copy went, or another job is its copy's now */
	VD_JOB_GONE,         /* removed or replaced while hashed: scan it */
	VD_JOB_CHANGED,      /* bytes changed under the hash: verify again, scan it */
	VD_JOB_TIMED_OUT,    /* not judged: try again later */
	VD_JOB_JUDGED        /* a verdict for the bytes on disk: keep it, publish it */
} vd_job_outcome;

typedef struct vd_core_input {
	vd_core_in_kind kind;
	union {
		struct {
			vd_core_sources src;
			vd_refresh change;          /* MODEL: only pointers moved */
		} sources;
		int commits;                    /* VD_CORE_TOUCH */
		vd_refresh refresh;             /* VD_CORE_REFRESH */
		struct {
			const vd_commitment *c;     /* run in store form; key_id "" for the token */
			const char *const *key_ids; /* its signers, the post's first */
			size_t n_keys;
		} post;
		struct {
			const vd_statement *st;     /* st->run in store form */
			const char *const *key_ids;
			size_t n_keys;
		} checkpoint;
		struct {
			const vd_statement *st;
			const char *run;            /* store form */
			const char *const *key_ids;
			size_t n_keys;
			const char *where;          /* its file */
		} statement;
		struct {
			vd_withdrawal *w;           /* sources and at filled in */
			double now;
		} withdraw;
		struct {
			const vd_scan_ledger *l;
			size_t budget;
		} ledger;
		const char *relpath;            /* LEDGER_GONE, LEDGER_FORGET */
		size_t budget;                  /* VD_CORE_RETAIN, VD_CORE_PASS */
		vd_memory *restore;             /* taken over: left empty */
		const vd_job_result *job;       /* VD_CORE_JOB_DONE */
		struct {
			const char *relpath;
			vd_job_kind kind;
		} verify;
		struct {
			const char *relpath;
			uint64_t id;                /* the job's (vd_action) */
		} action;                       /* TAKEN_BACK, UNSTARTED */
		const char *hash;               /* VD_CORE_INTEREST */
		struct {
			vd_scan_artifact *a;        /* its header taken unless SAME */
			const vd_kept_verdict *kept;  /* its verdict of the last run, or NULL */
		} scanned;
		struct {
			const char *relpath;
			vd_artifact_kind kind;
		} adopt;
		struct {
			const vd_cover *cover;      /* what the scan looked at */
			char *const *dirs;          /* "relpath\nreason" each */
			size_t n;
		} unreadable;
		const vd_cover *cover;          /* SCAN_BEGIN, SWEEP */
		struct {
			char *const *relpaths;
			const uint64_t *gens;       /* the generation of each that answers it */
			size_t n;
			uint64_t deadline_ms;       /* answered as timed out from then on */
			void *user;                 /* comes back with its answer */
		} wait;
		uint64_t wait_id;               /* VD_CORE_WAIT_CANCEL */
		uint64_t now_ms;                /* VD_CORE_TICK */
	} u;
	/* Persisted beside the input's records (posts, checkpoints, statements). */
	const uint8_t *env;
	size_t env_len;
	const struct vd_audit *audit;
} vd_core_input;

/* What an input found of the store's paths, for the shell to say once
 * and to act on: a directory newly unreadable (reason) or readable
 * again; an artifact gone (its kind; pruned: the last copy of a
 * remembered round, now a pruned link (hash, round)). */
typedef enum vd_path_note_kind {
	VD_PATH_UNREADABLE,
	VD_PATH_READABLE,
	VD_PATH_GONE
} vd_path_note_kind;

typedef struct vd_path_note {
	vd_path_note_kind kind;
	char *relpath;
	const char *reason;             /* UNREADABLE: in the input */
	vd_artifact_kind artifact;      /* GONE */
	int pruned;
	char hash[VD_HASH_HEX_LEN + 1];
	int64_t round;
} vd_path_note;

/* What a ledger input found, for the shell to say once. */
typedef enum vd_core_note {
	VD_CORE_NOTE_NONE,
	VD_CORE_NOTE_REWRITTEN,     /* newly no longer extends its memory (detail, seen) */
	VD_CORE_NOTE_EXTENDS_AGAIN, /* extends it again */
	VD_CORE_NOTE_FORGOTTEN      /* the operator forgot seen records */
} vd_core_note;

typedef struct vd_core_output {
	/* The input's outcome: 0, a vd_post_result (posts, checkpoints,
	 * withdrawals), the signatures added (statements), the new records
	 * taken (ledgers), a vd_job_outcome (jobs), a vd_scan_outcome (scanned
	 * artifacts), 0 a verification asked for (VERIFY: gen answers it), the
	 * copies of the scrub's pass begun (SCRUB; -EBUSY one is under way,
	 * -EAGAIN the store was not scanned yet or is stopping), a
	 * vd_scan_outcome (ADOPT: NEW or SAME), -ENOMEM (UNREADABLE: not
	 * every directory noted, so the scan must not sweep), or a
	 * negative errno: -EAGAIN the hasher queue is full, -ESHUTDOWN it is
	 * stopping, -EIO nothing could be made
	 * durable (the machine is as it was), -ENOENT nothing to withdraw or
	 * forget, -EINVAL a checkpoint without signers, -ENOMEM. */
	int result;
	char existing[VD_HASH_HEX_LEN + 1];  /* POST conflict: the hash already there */
	int more;                       /* LEDGER: records left for another input */
	int oom;                        /* a durable record not applied: counts after a restart */
	const vd_lineage_delta *delta;  /* lineage was refreshed: what changed; else NULL */
	vd_refresh refreshed;           /* and how far */
	int retaining;                  /* a whole pass still has groups to remember:
	                                 * VD_CORE_RETAIN them, a slice a turn */
	int passing;                    /* a whole pass is under way in slices:
	                                 * VD_CORE_PASS it on, a slice a turn */
	vd_core_note note;
	size_t seen;                    /* records remembered before */
	int oms_commits_now;            /* JOB_DONE: its copy's bundle commits anew */
	uint64_t gen;                   /* VERIFY: the generation that answers it */
	double retry_in;                /* JOB_DONE timed out: verified again in so many
	                                 * seconds (0: not kept, out of memory) */
	int scrub_ended;                /* the scrub's pass is over */
	int verify;                     /* SCANNED: its verdict is missing or holds for
	                                 * other files or other keys: verify it */
	int linked_now;                 /* SCANNED: files with other hard links appeared */
	int pruned;                     /* COPY_GONE: the last copy of a remembered
	                                 * artifact: a pruned link now (hash, round) */
	char hash[VD_HASH_HEX_LEN + 1];
	int64_t round;
	/* The waiters: those answered by this input, in order (valid until the
	 * next input), and the earliest deadline left of a waiter or a retry
	 * (VD_WAIT_NONE: none): a VD_CORE_TICK is due then. */
	const vd_wait_answer *answered;
	size_t n_answered;
	uint64_t wait_id;               /* VD_CORE_WAIT: its id */
	uint64_t deadline_ms;
	/* What the input found of paths, in order (valid until the next
	 * input). UNREADABLE: out of memory noting them (oom set), nothing
	 * the scan covers may be swept. */
	const vd_path_note *paths;
	size_t n_paths;
	/* The schedule's: what the hasher queue is to do, in order (valid
	 * until the next input). */
	const vd_action *actions;
	size_t n_actions;
	char detail[VD_DETAIL_MAX];
} vd_core_output;

typedef struct vd_core {
	vd_model model;
	vd_map unreadable;          /* directories a scan could not read: what is
	                             * under them is unknown, never gone */
	vd_path_note *paths;        /* the last input's */
	size_t n_paths, cap_paths;
	vd_memory mem;
	vd_lineage lineage;
	vd_lineage_delta delta;
	vd_core_sources src;
	vd_mem_persist_fn persist;
	void *persist_arg;
	int model_dirty, commits_dirty, whole_dirty;
	size_t pass_slice;          /* the first whole pass over a whole scan goes in
	                             * slices of this many chains (VD_CORE_PASS);
	                             * 0, as vd_core_init leaves it: all at once */
	vd_refresh pass_what;       /* the refresh a pass in slices began as */
	char (*retain_q)[VD_HASH_HEX_LEN + 1];
	size_t n_retain_q, retain_next, cap_retain_q;
	int retain_unlisted;        /* a whole pass's groups are still to be listed */
	vd_waitset waiters;
	vd_wait_answer *answered;   /* the last input's answers */
	size_t cap_answered;
	vd_plan plan;               /* the verification schedule */
	vd_retries retries;         /* copies whose job ran out of time */
	vd_scrub scrub;             /* the scrub's pass under way */
	int scrub_waits;            /* for room in the hasher queue */
} vd_core;

/* persist makes a record durable (0) or says it could not (< 0). */
void vd_core_init(vd_core *c, vd_mem_persist_fn persist, void *arg);
void vd_core_free(vd_core *c);

/* The first whole pass over a whole scan goes in slices of this many
 * chains (VD_CORE_PASS); 0, as vd_core_init leaves it: all at once. */
void vd_core_slice_passes(vd_core *c, size_t chains);

/* One input; out is overwritten. */
void vd_core_step(vd_core *c, const vd_core_input *in, vd_core_output *out);

/* ---- reading ---------------------------------------------------------- */
const vd_model *vd_core_model(const vd_core *c);
const vd_copy *vd_core_copy(const vd_core *c, const char *relpath);
const vd_group *vd_core_group(const vd_core *c, const char *hash);
/* Whether relpath lies in a directory the last scans could not read (or
 * is one, with self): what it holds there is unknown, never gone. */
int vd_core_unreadable_covers(const vd_core *c, const char *relpath, int self);
size_t vd_core_unreadable_count(const vd_core *c);
/* The model's indexes, settled on reading. */
const vd_order *vd_core_by_hash(vd_core *c);
const vd_order *vd_core_by_run(vd_core *c);
const vd_memory *vd_core_memory(const vd_core *c);
const vd_lineage *vd_core_lineage(const vd_core *c);
/* Whether lineage is behind the model or the commitment sources. */
int vd_core_dirty(const vd_core *c);
/* Whether a whole pass is under way in slices (pass_slice). Until
 * it ends, a group it has not computed reads pending: trusted and
 * committed by nothing, with no committed head. A VD_CORE_REFRESH of the
 * model alone waits for its end (the marks stay); one with changed
 * sources drops it and recomputes everything at once. */
int vd_core_passing(const vd_core *c);
/* Whether an input of this kind must come after the pass under way ends:
 * one that changes the memory, removes a copy, or restores. The shell
 * sends VD_CORE_PASS with SIZE_MAX first and applies its output;
 * otherwise the input ends the pass itself, and its output carries the
 * pass's changes unless it refreshes lineage itself too. */
int vd_core_pass_first(const vd_core *c, vd_core_in_kind kind);
/* Whether a whole pass left groups to remember: while it did, a view of
 * the retained artifacts or a round check is preceded by a VD_CORE_RETAIN
 * of them all. */
int vd_core_retaining(const vd_core *c);
/* The retained artifacts in (run, round, hash) order; NULL out of memory. */
const vd_order *vd_core_retained_order(vd_core *c);
int vd_core_is_retained(const vd_core *c, const char *hash);
/* vd_round_mismatch over the model and the retained artifacts. */
int vd_core_round_mismatch(const vd_core *c, const char *run, int64_t round,
    const char *hash, int64_t *header_round);

#endif

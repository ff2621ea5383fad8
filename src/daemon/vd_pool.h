/*
 * The hasher pool: artifact verifications on a vd_queue, explicit
 * requests ahead of background work, results back on the event loop
 * thread. A verification splits its chunk digests into tasks that idle
 * hashers take. A canonical pass is hashed in slices: past its slice, a
 * job gives its thread to any job ahead of it (explicit first, then the
 * one that has hashed least) and goes on later where it stopped, so that
 * a new or small artifact never waits for a huge one to finish.
 */
#ifndef VD_POOL_H
#define VD_POOL_H

#include <stdint.h>

#include <uv.h>

#include "vd_artifact.h"
#include "vd_chunks.h"
#include "vd_limits.h"
#include "vd_model.h"
#include "vd_omskeys.h"
#include "vd_queue.h"
#include "vd_scan.h"
#include "vd_turn.h"


typedef struct vd_job vd_job;
struct vd_job {
	vd_queue_item item;        /* the queue's link; urgent when explicit */
	vd_job_kind kind;
	char *relpath;
	vd_artifact_kind artifact;  /* a directory or a tar at relpath */
	uint64_t gen;              /* the request generation it answers */
	uint64_t id;               /* the schedule's (vd_action): its copy's inflight */
	uint64_t max_header_len;
	vd_bounds bounds;
	uint64_t rate;             /* bytes/s for scrubs; 0: unthrottled */
	unsigned max_seconds;      /* time limit; 0: from the size at floor_rate */
	uint64_t floor_rate;       /* bytes/s the automatic time limit expects */
	double slice;              /* seconds hashed before giving way; 0: never */
	/* Results, filled by the worker. */
	vd_verdict verdict;
	vd_fingerprint fp_before, fp_after;
	vd_hdrinfo hdr;            /* header.json as read after hashing */
	/* Chunk digests: a map to re-check against (input), and the map taken
	 * alongside a canonical pass (output). */
	vd_chunkmap *recheck;
	vd_chunkmap *chunks;
	int rechecked;             /* the re-check found every byte unchanged */
	char changed[VD_DETAIL_MAX];  /* what the re-check found changed */
	double started;            /* wall clock, seconds: its first slice */
	double duration;           /* seconds spent on it, its slices together */
	uint64_t hashed;           /* bytes fed to SHA-256 */
	uint64_t total;            /* bytes the canonical pass has to hash */
	vd_abandon abandoned;
	double limit;              /* the time limit it ran under, seconds */
	/* Between slices, the worker's: where its pass paused, the artifact
	 * as first opened (it must still be the one), whether this slice
	 * ends in a pause. */
	vd_resume *resume;
	dev_t dev;
	ino_t ino;
	int pausing;
	/* The OMS bundle beside the files, checked once the pass is done
	 * against the keys of the copy's run (a reference, dropped with the
	 * job; NULL: none configured). */
	vd_omskeys *oms_keys;
	char *run;
	int oms_present;
	vd_oms_status oms;
	struct vd_oms_helper *oms_helper;  /* its check under way beside the pass */
};

typedef struct vd_pool vd_pool;
typedef void (*vd_pool_done_fn)(vd_job *job, void *arg);   /* loop thread; owns job */

/* Jobs name artifacts (directories or tars) relative to the store root.
 * Beside the threads, VD_URGENT_THREADS more take explicit jobs only: a
 * participant never waits behind background work, however big. */
int vd_pool_new(uv_loop_t *loop, unsigned threads, const char *root,
    vd_pool_done_fn done, void *arg, vd_pool **out);
/* Finished jobs go by the loop's turn (vd_queue_pace). */
void vd_pool_pace(vd_pool *p, const vd_turn *turn);
/* 0, or -EAGAIN when queue_max jobs already wait. Takes the job. */
int vd_pool_submit(vd_pool *p, vd_job *job, unsigned queue_max);
/* Take back a job still waiting behind others, to queue it as explicit:
 * 0 (the caller's again), or -EBUSY when it runs or ran already (a job
 * between slices included). */
int vd_pool_take_back(vd_pool *p, vd_job *job);
/* A client waits for or asks about job: it goes ahead of background
 * work, from its next slice if it runs, keeping its kind and progress. */
void vd_pool_promote(vd_pool *p, vd_job *job);
/* Bytes hashed, counted as slices end (jobs under way included), and
 * how many slices ended by giving way to another job. */
void vd_pool_progress(vd_pool *p, uint64_t *bytes, uint64_t *yields);
unsigned vd_pool_queued(vd_pool *p);
unsigned vd_pool_busy(vd_pool *p);
unsigned vd_pool_threads(vd_pool *p);
/* Stop without blocking the loop: drop queued jobs, let running ones
 * finish for up to grace_ms (a timer) and cancel them then; once every
 * thread has left, join them on libuv's thread pool and close the pool's
 * handles. The pool is freed in their close callbacks, so the loop must
 * run on (its handles keep it alive); finished jobs are freed, never
 * handed to done, from this call on. */
void vd_pool_stop(vd_pool *p, unsigned grace_ms);

vd_job *vd_job_new(vd_job_kind kind, const char *relpath);
void vd_job_free(vd_job *job);

#endif

/*
 * vd-sim: the commitments and lineage core driven through histories no
 * one wrote by hand. A seeded history changes the inputs one at a time --
 * copies found by scans (some with the verdict kept from before a
 * restart), rescanned as they were or with their files replaced, removed,
 * re-headed, and given verdicts by jobs that come back, ledger files
 * appended, rewritten, deleted and forgotten, RoundClose posts (new, again,
 * conflicting), signed statements written, posted and signed again,
 * checkpoints, keys revoked and restored, artifacts pruned, withdrawals,
 * restarts, reloads that flip the policy and move pins and anchors -- and
 * after every step checks:
 *
 *   - a lineage refreshed incrementally equals one computed from scratch
 *     on the same inputs (chains, slots, head, alerts);
 *   - against a reference written here from trust.md, not from lineage's
 *     code: a group is committed exactly when the counting commitments of
 *     its round name its hash and no other (the policy, checkpoints over
 *     remembered records, trusted keys, withdrawals and the round check
 *     applied); trusted implies verified, committed, an intact chain, and a
 *     verified (or pruned) parent in its run unless it is a root;
 *   - under "signed", dropping every unsigned ledger record changes no
 *     group's trust.
 *
 * In half the histories the first whole pass after the process's first
 * whole scan goes in slices of a few chains (the core's pass_slice), run
 * between the other steps. While it is under way the checks above wait
 * for its end; meanwhile there is no committed head, and a group reads
 * trusted or committed only where the reference says it is. Only its
 * last slice says what changed.
 *
 * Every change to the memory of commitments is an input of the core (the
 * state machine the daemon runs, src/core/vd_core.c: posts, statements,
 * checkpoints, withdrawals, ledgers read, gone and forgotten, refreshes
 * and the retention of what a whole pass finds committed), whose
 * persistence is a fake (a list of records) that fails at random; then:
 *
 *   - the memory is exactly what was made durable: it equals one rebuilt
 *     step by step from the records persisted;
 *   - a failed persist changes nothing: the memory is as before, and so is
 *     every group's trusted and committed;
 *   - at a restart a new core starts from nothing: its memory is rebuilt
 *     from the persisted records alone, and its model from a scan that
 *     finds every present copy with the verdict the state database kept
 *     of it (runs under way are lost with the process). No accepted post,
 *     statement, withdrawal or equivocation is lost, the memory equals the
 *     one kept step by step, and lineage over it (slots, equivocations,
 *     trust of every group, head) is what it was, but where a run under
 *     way was lost.
 *
 * Every few steps the API's views are rendered from the core's state as
 * the daemon renders them (the status of every artifact, GET /artifacts,
 * GET /chain?run= of every run, GET /chain): each renders; each status
 * says trusted exactly when the core does, and a copy is served for its
 * OMS bundle only then; a listing read a page at a time gives what it
 * gives read whole.
 *
 * Clients wait for verdicts, through the core's inputs only: a client
 * waits for present copies at the generation a run under way answers or
 * the next (the simulator is the scheduler: each copy's generations asked
 * for and finished, and its run under way, scrub, background or explicit),
 * with a deadline on a simulated clock that ticks (forward, to the first
 * deadline, or standing still); clients go away; runs come back (judged,
 * or their bytes changed under the hash) or start; a check follows every
 * job and every copy removed or replaced; a restart, and the end of the
 * history, answer every client left (the daemon stops). Against a
 * reference kept here, from vd_waitset.h's rule (a copy answers for its
 * part once gone, or once its generation finished with no run but a
 * scrub under way), every output of the core is checked:
 *
 *   - a waiter is answered at most once, never after its cancel (which
 *     says -ENOENT once it is answered), and by the end exactly once
 *     unless cancelled; with the pointer it came with;
 *   - a check answers exactly the waiters whose copies are all reached,
 *     as ready; a tick exactly those whose deadline came, as timed out;
 *     the shutdown all; no other input any (the shell takes answers from
 *     those three only); one output's answers in (deadline, id) order;
 *   - the deadline to arm is the earliest of the waiters left.
 *
 * Each step draws from its own generator (the seed and the step's number),
 * so a failing history can be shortened by leaving steps out. Prints how
 * many records were persisted, persists failed and restarts were made,
 * the whole passes in slices, what became of the clients, then, last,
 * "N histories, M steps, V invariant violations"; exits 1 when V > 0.
 *
 *   vd-sim [--seeds N] [--seed S] [--steps K] [--quiet]
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "lineage_fx.h"
#include "vd_log.h"
#include "vd_store.h"
#include "vd_views.h"

#define SIM_STEPS_DEFAULT 60
#define SIM_STEPS_MAX 10000
#define SIM_SEEDS_DEFAULT 200
#define REF_HASHES_MAX 16          /* distinct hashes one round can be given */

typedef struct world world;
static void violation(world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));


#define P_IDS 12                   /* artifacts a copy can claim */
#define P_PHANTOMS 2               /* parents no copy ever claims */
#define P_SLOTS 16                 /* copy directories, alternating runs */
#define P_ROUNDS 5
#define P_MAX_RECORDS 6            /* per remembered ledger */
#define P_ID_HASH 200              /* hx() offset of the artifacts' hashes */
#define P_GROW_EVERY 4             /* steps: one fresh model in so many is grown */
#define P_FAIL_ONE_IN 5            /* persists: one in so many fails */
#define P_RECORD_HASHES 900        /* record hashes handed out, round robin */
#define P_WAITERS 48               /* waiters a history keeps (done ones reused) */
#define P_WAIT_COPIES 3            /* copies one client waits for, at most */
#define P_WAIT_MS 4000             /* longest wait drawn, simulated ms */
#define P_TICK_MS 1500             /* longest jump of the simulated clock */
#define P_PASS_SLICE_MAX 5         /* chains a slice of a whole pass computes, at most */
#define P_DIRTY_MIN_MAX 4          /* marks past which the model takes everything as changed */
#define P_SCAN_ONE_IN 4            /* steps: the first whole scan ends on one in so many */
#define P_PASS_ONE_IN 4            /* steps: no slice of a pass under way on one in so many */
#define P_PASS_REST_ONE_IN 8       /* slices: one in so many is the rest (SIZE_MAX) */

static const char *const p_runs[] = { "a", "b" };
#define P_RUNS 2

typedef struct p_id {
	int round, parent;          /* parent: an id below, a phantom, or -1 */
} p_id;

/* A copy directory, and what the daemon's scheduler would hold of its
 * copy: the generations asked for and finished, and the run under way. */
typedef struct p_slot {
	int present, id, verdict, forged, bad_header;
	uint64_t req_gen, done_gen;
	int run;                    /* a run under way: its vd_job_kind + 1, or 0 */
} p_slot;

/* A client waiting for verdicts, as the reference holds it. */
enum { W_FREE, W_LIVE, W_ANSWERED, W_CANCELLED };

typedef struct p_waiter {
	int state;
	uint64_t id, deadline;
	int n, slot[P_WAIT_COPIES];
	uint64_t gen[P_WAIT_COPIES];
} p_waiter;

/* A run's ledger.jsonl as the store holds it now. */
typedef struct p_file {
	vd_ledger_entry e[P_MAX_RECORDS];
	size_t n;
	int present;
} p_file;

/* The fake state database: the records made durable, in order. */
typedef struct sim_db {
	vd_mem_record *recs;
	size_t n, cap;
	int fail;                   /* the next persist fails */
	int failures;               /* persists failed since counted */
	vd_memory durable;          /* the records restored as they were persisted */
} sim_db;

typedef struct world {
	uint32_t rnd;
	unsigned seed;
	int step;
	p_id ids[P_IDS];
	p_slot slots[P_SLOTS];
	p_file files[P_RUNS];
	sim_db db;
	fx *f;
	const char *cmp;            /* what two lineages compared are */
	int no_fail;                /* persists do not fail now */
	p_waiter waiters[P_WAITERS];
	p_waiter *adding;           /* the one VD_CORE_WAIT hands in now */
	uint64_t clock;             /* simulated ms, what TICK tells */
	size_t pass_slice;          /* the core's, as the store sets it: 0 or a few chains */
	size_t dirty_min;           /* the model's dirty_whole_min: its default, or a
	                             * few marks, for refreshes of everything (a pass
	                             * in place when sliced) in stores this small */
	int scanned;                /* the process's first whole scan ended */
	int unreadable;             /* the run the last whole scan could not read,
	                             * plus one; 0: none */
	int failed;                 /* an invariant was violated */
	char why[512];              /* the first one */
} world;

static uint32_t rnd(world *w, uint32_t n)
{
	w->rnd ^= w->rnd << 13;
	w->rnd ^= w->rnd >> 17;
	w->rnd ^= w->rnd << 5;
	return w->rnd % n;
}

static const char *id_hash(int id)
{
	return hx(P_ID_HASH + (unsigned)id);
}

/* Mostly the main chain, so that chains are trusted as often as not. */
static int pick_id(world *w)
{
	return (int)(rnd(w, 10) < 6 ? rnd(w, P_ROUNDS) : rnd(w, P_IDS));
}

static int pick_verdict(world *w)
{
	return (int)(rnd(w, 10) < 6 ? V_OK : rnd(w, V_COUNT));
}

/* What a commitment of round t names: mostly the main chain's round t+1. */
static const char *pick_commit(world *w, int64_t t)
{
	if (t + 1 < P_ROUNDS && rnd(w, 10) < 8)
		return id_hash((int)t + 1);
	return id_hash((int)rnd(w, P_IDS));
}

static const char *slot_run(int s)
{
	return p_runs[s % P_RUNS];
}

static void slot_relpath(int s, char *out, size_t n)
{
	snprintf(out, n, "%s/c%02d", slot_run(s), s);
}

/* Ids 0..P_ROUNDS-1 are one chain, what commitments mostly name; the
 * others are drawn: forks, gaps, detached roots, phantom parents. Parents
 * are below: no cycles. */
static void draw_ids(world *w)
{
	int i, j, k, cands[P_IDS], n;

	for (i = 0; i < P_ROUNDS; i++) {
		w->ids[i].round = i;
		w->ids[i].parent = i - 1;
	}
	for (; i < P_IDS; i++) {
		p_id *d = &w->ids[i];
		d->round = (int)rnd(w, P_ROUNDS);
		d->parent = -1;
		k = (int)rnd(w, 8);
		if (d->round == 0 && k != 0)
			continue;
		if (k == 1) {
			d->parent = P_IDS + (int)rnd(w, P_PHANTOMS);
			continue;
		}
		if (k == 2)
			continue;
		for (n = 0, j = 0; j < i; j++)
			if (w->ids[j].round == d->round - 1 || k == 3)
				cands[n++] = j;
		d->parent = n > 0 ? cands[rnd(w, (uint32_t)n)] : P_IDS;
	}
}

static void slot_header(const world *w, const p_slot *s, vd_copy *c)
{
	const p_id *d = &w->ids[s->id];

	if (s->bad_header) {
		vd_hdrinfo_free(&c->hdr);
		c->hdr.code = VD_ARTIFACT_INVALID;
		return;
	}
	set_header(c, id_hash(s->id), d->round + s->forged, d->parent >= 0 ? id_hash(d->parent) : NULL);
}

static void slot_add(const world *w, vd_model *m, int i)
{
	char rel[PATH_MAX_LEN];
	vd_copy *c;

	slot_relpath(i, rel, sizeof(rel));
	FX_REQUIRE(c = vd_model_add_copy(m, rel, slot_run(i)));
	slot_header(w, &w->slots[i], c);
	set_verdict(c, w->slots[i].verdict);
	c->inflight = w->slots[i].run ? busy_job : 0;
	c->inflight_kind = w->slots[i].run ? (vd_job_kind)(w->slots[i].run - 1) : VD_JOB_BACKGROUND;
	vd_model_index(m, c);
}

static vd_copy *slot_copy(world *w, int i)
{
	char rel[PATH_MAX_LEN];

	slot_relpath(i, rel, sizeof(rel));
	return vd_model_copy(w->f->model, rel);
}

/* ---- changes: each returns whether the refresh is a whole pass -------- */

static void sim_input_raw(world *w, const vd_core_input *in, vd_core_output *out);
static void job_back(world *w, int i, int v);
static void slot_verdict(world *w, int i, int v);
static void wait_check(world *w);

/* Slot i's header as a scan reads it. */
static void slot_hdr(const world *w, const p_slot *s, vd_hdrinfo *h)
{
	const p_id *d = &w->ids[s->id];

	memset(h, 0, sizeof(*h));
	if (s->bad_header) {
		h->code = VD_ARTIFACT_INVALID;
		return;
	}
	h->code = VD_OK;
	snprintf(h->content_hash, sizeof(h->content_hash), "%s", id_hash(s->id));
	h->round_index = d->round + s->forged;
	h->has_parent = d->parent >= 0;
	snprintf(h->parent_hash, sizeof(h->parent_hash), "%s", d->parent >= 0 ? id_hash(d->parent) : "");
}

/* A scan finds slot i's copy: new to the core, pending until verified,
 * or given the verdict it had before a restart when its files are the
 * ones that verdict was reached on. Then it reaches the slot's state. */
static void slot_scanned(world *w, int i)
{
	char rel[PATH_MAX_LEN];
	const p_slot *s = &w->slots[i];
	vd_core_input in = { .kind = VD_CORE_SCANNED };
	vd_kept_verdict kept;
	vd_scan_artifact a;
	vd_core_output out;
	vd_copy *c;
	int v = s->verdict, from_kept = (v == V_OK || v == V_FAIL) && rnd(w, 3) == 0;

	slot_relpath(i, rel, sizeof(rel));
	memset(&a, 0, sizeof(a));
	a.relpath = rel;
	a.run = (char *)slot_run(i);
	a.kind = VD_KIND_DIR;
	a.fp.ok = 1;
	slot_hdr(w, s, &a.hdr);
	memset(&kept, 0, sizeof(kept));
	kept.code = v == V_FAIL ? VD_CHECKPOINT_INTEGRITY : VD_OK;
	kept.detail = v == V_FAIL ? "weights.safetensors differs" : "";
	kept.content_hash = "";
	in.u.scanned.a = &a;
	in.u.scanned.kept = from_kept ? &kept : NULL;
	sim_input_raw(w, &in, &out);
	vd_hdrinfo_free(&a.hdr);
	FX_REQUIRE(c = slot_copy(w, i));
	if (out.result != VD_SCAN_NEW || out.verify != !from_kept)
		violation(w, "%s scanned: outcome %d, verify %d (a kept verdict: %d)", rel, out.result,
		    out.verify, from_kept);
	if (from_kept)
		return;
	if (v == V_OK || v == V_FAIL)
		job_back(w, i, v);
	else if (v != V_NONE)
		slot_verdict(w, i, v);
}

/* A scan looks at slot i's present copy again: as it was (nothing to
 * do), or with its files replaced, its header as the slot now says
 * (verified again, and the job comes back). */
static void rescan(world *w, int i, int replaced)
{
	char rel[PATH_MAX_LEN];
	p_slot *s = &w->slots[i];
	vd_core_input in = { .kind = VD_CORE_SCANNED };
	vd_scan_artifact a;
	vd_core_output out;
	const vd_copy *c = slot_copy(w, i);

	slot_relpath(i, rel, sizeof(rel));
	memset(&a, 0, sizeof(a));
	a.relpath = rel;
	a.run = (char *)slot_run(i);
	a.kind = c->kind;
	a.fp = c->fp;
	a.fp.ok = 1;
	a.fp.digest[2] ^= (uint8_t)replaced;
	slot_hdr(w, s, &a.hdr);
	in.u.scanned.a = &a;
	sim_input_raw(w, &in, &out);
	vd_hdrinfo_free(&a.hdr);
	if (!replaced) {
		if (out.result != VD_SCAN_SAME && c->fp.ok)
			violation(w, "%s rescanned unchanged: outcome %d", rel, out.result);
		return;
	}
	if (out.result != VD_SCAN_CHANGED || !out.verify)
		violation(w, "%s with its files replaced: outcome %d, verify %d", rel, out.result,
		    out.verify);
	wait_check(w);              /* as the store does once a scan is merged */
	s->verdict = rnd(w, 4) ? V_OK : V_FAIL;
	job_back(w, i, s->verdict);
}

static int ch_rescan(world *w)
{
	int i = (int)rnd(w, P_SLOTS);
	const vd_copy *c;

	if (!w->slots[i].present || (c = slot_copy(w, i)) == NULL || c->inflight != 0)
		return 0;
	rescan(w, i, (int)rnd(w, 2));
	return 0;
}

/* Whether slot i's copy is as a scan would find it unchanged. */
static int scans_same(world *w, int i)
{
	const vd_copy *c = slot_copy(w, i);

	return c != NULL && c->fp.ok;
}

static void scan_step(world *w, vd_core_in_kind kind, const vd_cover *cv, vd_core_output *out)
{
	vd_core_input in = { .kind = kind, .u.cover = cv };

	sim_input_raw(w, &in, out);
}

/* Slot i's directory is removed and a scan finds it so: of its own tree
 * (unless its run is unreadable: what is under it is then never gone), or
 * of the whole store, which finds every other present copy as it was and,
 * some of the time, cannot read the other run. The core sweeps: exactly
 * slot i's copy goes, noted once; what lies under the unreadable run
 * stays. */
static void removed_by_scan(world *w, int i)
{
	char rel[PATH_MAX_LEN], dir[PATH_MAX_LEN + 16];
	char *dirs[] = { dir };
	vd_scope scope = { VD_SCOPE_TREE, rel };
	vd_cover tree = { 0, 1, &scope, 1 }, whole = { 0, 0, NULL, 0 };
	int run = i % P_RUNS, other = (i + 1) % P_RUNS;
	const vd_cover *cv = rnd(w, 2) && w->unreadable != run + 1 ? &tree : &whole;
	vd_core_input in = { .kind = VD_CORE_UNREADABLE };
	vd_core_output out;
	int k, unreadable = cv == &whole && rnd(w, 3) == 0;

	slot_relpath(i, rel, sizeof(rel));
	snprintf(dir, sizeof(dir), "%s\npermission denied", p_runs[other]);
	scan_step(w, VD_CORE_SCAN_BEGIN, cv, &out);
	for (k = 0; cv == &whole && k < P_SLOTS; k++)
		if (k != i && w->slots[k].present && !(unreadable && k % P_RUNS == other))
			rescan(w, k, 0);
	in.u.unreadable.cover = cv;
	in.u.unreadable.dirs = dirs;
	in.u.unreadable.n = (size_t)unreadable;
	sim_input_raw(w, &in, &out);
	if (out.result != 0)
		violation(w, "unreadable %s noted: %d", p_runs[other], out.result);
	if (cv == &whole)
		w->unreadable = unreadable ? other + 1 : 0;
	scan_step(w, VD_CORE_SWEEP, cv, &out);
	if (out.n_paths != 1 || out.paths[0].kind != VD_PATH_GONE ||
	    strcmp(out.paths[0].relpath, rel) != 0)
		violation(w, "a scan after %s was removed swept %zu paths, the first %s", rel,
		    out.n_paths, out.n_paths ? out.paths[0].relpath : "none");
	for (k = 0; k < P_SLOTS; k++)
		if ((slot_copy(w, k) != NULL) != (k != i && w->slots[k].present))
			violation(w, "slot %d: a copy %s after the sweep", k,
			    slot_copy(w, k) ? "kept" : "missing");
}

/* A present copy goes, told (COPY_GONE) or found by a scan, when every
 * copy it finds would be found as it was; an absent one comes. */
static int ch_presence_of(world *w, int i);

static int ch_presence(world *w)
{
	return ch_presence_of(w, (int)rnd(w, P_SLOTS));
}

static int ch_presence_of(world *w, int i)
{
	char rel[PATH_MAX_LEN];
	int k, by_scan = (int)rnd(w, 2);
	p_slot *s = &w->slots[i];
	vd_core_input in = { .kind = VD_CORE_COPY_GONE, .u.relpath = rel };
	vd_core_output out;

	if (s->present) {
		for (k = 0; by_scan && k < P_SLOTS; k++)
			by_scan = !w->slots[k].present || scans_same(w, k);
		slot_relpath(i, rel, sizeof(rel));
		if (by_scan) {
			removed_by_scan(w, i);
		} else {
			sim_input_raw(w, &in, &out);
			if (out.result != 0)
				violation(w, "%s gone: %d", rel, out.result);
		}
		s->present = 0;
		wait_check(w);
		return 0;
	}
	memset(s, 0, sizeof(*s));
	s->present = 1;
	s->id = pick_id(w);
	s->verdict = pick_verdict(w);
	s->forged = rnd(w, 10) == 0;
	slot_scanned(w, i);
	return 0;
}

/* The simulator is the scheduler: a run of slot i's copy is under way
 * (queued or running), as the store's pool would have it. */
static void run_start(world *w, int i, vd_job_kind kind)
{
	vd_copy *c = slot_copy(w, i);

	w->slots[i].run = (int)kind + 1;
	c->inflight = busy_job;
	c->inflight_kind = kind;
	vd_model_touch(w->f->model, c);
}

/* A run of the copy comes back to the core, which takes its verdict as
 * the daemon's store does: judged, or (changed) its bytes changed under
 * the hash. It answers a generation asked for and not finished yet (a new
 * one when none is). What is asked beyond it, or all of it when the
 * bytes changed, runs next or waits in the backlog; then the clients
 * waiting are looked at, as after every job. */
static void run_back(world *w, int i, int v, int changed)
{
	p_slot *s = &w->slots[i];
	vd_copy *c = slot_copy(w, i);
	vd_core_input in = { .kind = VD_CORE_JOB_DONE };
	vd_core_output out;
	vd_job_result r;
	vd_verdict vd;
	uint64_t gen;

	if (s->req_gen == s->done_gen)
		s->req_gen++;
	gen = s->done_gen + 1 + rnd(w, (uint32_t)(s->req_gen - s->done_gen));
	s->verdict = changed ? V_STALE : v;
	memset(&vd, 0, sizeof(vd));
	vd.code = v == V_FAIL ? VD_CHECKPOINT_INTEGRITY : VD_OK;
	snprintf(vd.detail, sizeof(vd.detail), "%s", v == V_FAIL ? "weights.safetensors differs" : "");
	c->inflight = busy_job;    /* its job, queued or running until now */
	memset(&r, 0, sizeof(r));
	r.id = busy_job;
	r.relpath = c->relpath;
	r.kind = VD_JOB_BACKGROUND;
	r.gen = gen;
	r.verdict = &vd;
	r.fp_before = r.fp_after = c->fp;
	r.fp_before.ok = r.fp_after.ok = 1;
	r.fp_after.digest[3] ^= (uint8_t)changed;
	r.changed = "";
	in.u.job = &r;
	sim_input_raw(w, &in, &out);
	if (out.result != (changed ? VD_JOB_CHANGED : VD_JOB_JUDGED))
		violation(w, "a job of %s came back %s, but the outcome is %d", c->relpath,
		    changed ? "with its bytes changed under the hash" : "unchanged", out.result);
	s->run = 0;
	if (!changed)
		s->done_gen = gen;
	if ((changed || s->req_gen > s->done_gen) && rnd(w, 2))
		run_start(w, i, VD_JOB_EXPLICIT);
	wait_check(w);
}

static void job_back(world *w, int i, int v)
{
	run_back(w, i, v, 0);
}

/* A verdict set on the copy directly: a run started (busy) and under way
 * from then on, or none, the one under way (if any) gone with no word. */
static void slot_verdict(world *w, int i, int v)
{
	p_slot *s = &w->slots[i];

	if (v == V_BUSY && !s->run)
		s->req_gen++;
	s->run = v == V_BUSY ? VD_JOB_BACKGROUND + 1 : 0;
	verdict(w->f->model, slot_copy(w, i), v);
}

/* A verdict comes back from a job, or the copy is seen changed since its
 * verdict, not verified yet, or being verified. */
static int ch_verdict(world *w)
{
	int i = (int)rnd(w, P_SLOTS);
	int v;

	if (!w->slots[i].present)
		return 0;
	v = w->slots[i].verdict = pick_verdict(w);
	if (v == V_OK || v == V_FAIL)
		job_back(w, i, v);
	else
		slot_verdict(w, i, v);
	return 0;
}

/* A rescan finds another header.json: the files changed, the copy
 * claims another artifact (or none, or a forged round). */
static int ch_header(world *w)
{
	int i = (int)rnd(w, P_SLOTS);
	p_slot *s = &w->slots[i];
	const vd_copy *c;

	if (!s->present || (c = slot_copy(w, i)) == NULL || c->inflight != 0)
		return 0;
	s->id = pick_id(w);
	s->forged = rnd(w, 10) == 0;
	s->bad_header = rnd(w, 10) == 0;
	rescan(w, i, 1);
	return 0;
}

/* ---- the memory, through its decisions and a persistence that fails ---- */

/* What the histories exercised, for the summary (replays not counted). */
static struct {
	unsigned long persisted, failed, restarts, runs_lost;
	unsigned long waited, ready, timed_out, at_stop, cancelled;
	unsigned long passes, slices, sliced_to_end;   /* whole passes in slices */
	unsigned long in_place;                        /* of them, in place */
	int counting;
} tally;

static int sim_persist(const vd_mem_record *rec, void *arg)
{
	world *w = arg;
	sim_db *db = &w->db;
	vd_mem_record *copy;

	if (db->fail) {
		tally.failed += (unsigned long)tally.counting;
		/* The input's own records; not the retention an input catches
		 * up with first, whose failures it does not report. */
		db->failures += rec->kind != VD_MEM_RETAIN;
		return -EIO;
	}
	tally.persisted += (unsigned long)tally.counting;
	if (db->n == db->cap) {
		db->cap = db->cap ? 2 * db->cap : 32;
		FX_REQUIRE(db->recs = realloc(db->recs, db->cap * sizeof(*db->recs)));
	}
	copy = &db->recs[db->n++];
	*copy = *rec;
	copy->recs = NULL;
	if (rec->n > 0) {
		FX_REQUIRE(copy->recs = malloc(rec->n * sizeof(*copy->recs)));
		memcpy(copy->recs, rec->recs, rec->n * sizeof(*copy->recs));
	}
	FX_REQUIRE(vd_memory_restore(&db->durable, rec) >= 0);
	return 0;
}

static void db_free(sim_db *db)
{
	size_t i;

	for (i = 0; i < db->n; i++)
		vd_mem_record_free(&db->recs[i]);
	free(db->recs);
	vd_memory_free(&db->durable);
	memset(db, 0, sizeof(*db));
}

/* ---- clients waiting for verdicts, against a reference --------------- */

static p_waiter *waiter_by_id(world *w, uint64_t id)
{
	int k;

	for (k = 0; k < P_WAITERS; k++)
		if (w->waiters[k].state != W_FREE && w->waiters[k].id == id)
			return &w->waiters[k];
	return NULL;
}

static const char *input_name(vd_core_in_kind kind)
{
	switch (kind) {
	case VD_CORE_SOURCES:
		return "SOURCES";
	case VD_CORE_REFRESH:
		return "REFRESH";
	case VD_CORE_JOB_DONE:
		return "JOB_DONE";
	case VD_CORE_SCANNED:
		return "SCANNED";
	case VD_CORE_COPY_GONE:
		return "COPY_GONE";
	case VD_CORE_SCAN_BEGIN:
		return "SCAN_BEGIN";
	case VD_CORE_UNREADABLE:
		return "UNREADABLE";
	case VD_CORE_SWEEP:
		return "SWEEP";
	case VD_CORE_WAIT:
		return "WAIT";
	case VD_CORE_WAIT_CANCEL:
		return "WAIT_CANCEL";
	default:
		return "another input";
	}
}

static const char *waiter_state(const p_waiter *x)
{
	if (x == NULL)
		return "never added";
	return x->state == W_LIVE ? "waiting" : x->state == W_ANSWERED ? "answered already" :
	    "cancelled";
}

/* The reference's rule, from vd_waitset.h: a copy answers for its part
 * when it is gone, or when its generation finished and no run a client
 * waits for is under way (a scrub re-reads bytes verified already and
 * answers no request). The first copy short of it, or -1 when ready. */
static int waiter_short(const world *w, const p_waiter *x)
{
	const p_slot *s;
	int k;

	for (k = 0; k < x->n; k++) {
		s = &w->slots[x->slot[k]];
		if (s->present && (s->done_gen < x->gen[k] ||
		    (s->run != 0 && s->run - 1 != VD_JOB_SCRUB)))
			return k;
	}
	return -1;
}

static uint64_t waiters_deadline(const world *w)
{
	uint64_t first = VD_WAIT_NONE;
	int k;

	for (k = 0; k < P_WAITERS; k++)
		if (w->waiters[k].state == W_LIVE && w->waiters[k].deadline < first)
			first = w->waiters[k].deadline;
	return first;
}

static void waiter_added(world *w, const vd_core_output *out)
{
	p_waiter *x = w->adding;

	if (out->result != 0) {
		violation(w, "a client could not wait (%d)", out->result);
		return;
	}
	if (waiter_by_id(w, out->wait_id) != NULL) {
		violation(w, "a new waiter has the id %llu of another", (unsigned long long)out->wait_id);
		return;
	}
	x->id = out->wait_id;
	x->state = W_LIVE;
	tally.waited += (unsigned long)tally.counting;
}

/* A client gone: 0 while it waits; -ENOENT once answered (the shell frees
 * the client's waiter on 0). */
static void waiter_cancelled(world *w, const vd_core_input *in, const vd_core_output *out)
{
	p_waiter *x = waiter_by_id(w, in->u.wait_id);
	int live = x != NULL && x->state == W_LIVE;

	if (out->result != (live ? 0 : -ENOENT))
		violation(w, "waiter %llu, %s, cancelled: %d", (unsigned long long)in->u.wait_id,
		    waiter_state(x), out->result);
	if (live) {
		x->state = W_CANCELLED;
		tally.cancelled += (unsigned long)tally.counting;
	}
}

/* One answer of an input's output: of a waiter waiting, in (deadline, id)
 * order after the one before it (prev), as the input may answer it. The
 * shell takes answers from a check, a tick and the shutdown only. */
static void waiter_answer(world *w, const vd_core_input *in, const vd_wait_answer *a,
    p_waiter *x, const p_waiter *prev)
{
	int k;

	if (x == NULL || x->state != W_LIVE) {
		violation(w, "waiter %llu answered, but it was %s", (unsigned long long)a->id,
		    waiter_state(x));
		return;
	}
	x->state = W_ANSWERED;
	if (tally.counting) {
		tally.ready += !a->timed_out;
		tally.timed_out += a->timed_out && in->kind == VD_CORE_TICK;
		tally.at_stop += in->kind == VD_CORE_WAIT_FIRE_ALL;
	}
	if (a->user != x)
		violation(w, "waiter %llu answered with another client's pointer", (unsigned long long)x->id);
	else if (prev != NULL && (prev->deadline > x->deadline ||
	    (prev->deadline == x->deadline && prev->id > x->id)))
		violation(w, "waiter %llu (deadline %llu) answered after %llu (deadline %llu)",
		    (unsigned long long)x->id, (unsigned long long)x->deadline,
		    (unsigned long long)prev->id, (unsigned long long)prev->deadline);
	else if (in->kind == VD_CORE_WAIT_CHECK && a->timed_out)
		violation(w, "waiter %llu answered as timed out by a check", (unsigned long long)x->id);
	else if (in->kind == VD_CORE_WAIT_CHECK && (k = waiter_short(w, x)) >= 0)
		violation(w, "waiter %llu answered, but its copy %d is at generation %llu of %llu (run %d)",
		    (unsigned long long)x->id, x->slot[k],
		    (unsigned long long)w->slots[x->slot[k]].done_gen, (unsigned long long)x->gen[k],
		    w->slots[x->slot[k]].run);
	else if (in->kind == VD_CORE_TICK && (!a->timed_out || x->deadline > in->u.now_ms))
		violation(w, "waiter %llu (deadline %llu) answered by a tick at %llu, timed out %d",
		    (unsigned long long)x->id, (unsigned long long)x->deadline,
		    (unsigned long long)in->u.now_ms, a->timed_out);
	else if (in->kind == VD_CORE_WAIT_FIRE_ALL && !a->timed_out)
		violation(w, "waiter %llu answered as ready at the shutdown", (unsigned long long)x->id);
	else if (in->kind != VD_CORE_WAIT_CHECK && in->kind != VD_CORE_TICK &&
	    in->kind != VD_CORE_WAIT_FIRE_ALL)
		violation(w, "waiter %llu answered by %s (%d), whose answers the shell does not take",
		    (unsigned long long)x->id, input_name(in->kind), (int)in->kind);
}

/* What the input owed: a check every waiter whose copies are all
 * reached, a tick every one whose deadline came, the shutdown all. */
static void waiters_owed(world *w, const vd_core_input *in)
{
	const p_waiter *x;
	int k;

	for (k = 0; k < P_WAITERS && !w->failed; k++) {
		x = &w->waiters[k];
		if (x->state != W_LIVE)
			continue;
		if (in->kind == VD_CORE_WAIT_CHECK && waiter_short(w, x) < 0)
			violation(w, "waiter %llu: its copies reached their generations, but a check "
			    "did not answer it", (unsigned long long)x->id);
		else if (in->kind == VD_CORE_TICK && x->deadline <= in->u.now_ms)
			violation(w, "waiter %llu: a tick at %llu did not answer it (deadline %llu)",
			    (unsigned long long)x->id, (unsigned long long)in->u.now_ms,
			    (unsigned long long)x->deadline);
		else if (in->kind == VD_CORE_WAIT_FIRE_ALL)
			violation(w, "waiter %llu not answered at the shutdown", (unsigned long long)x->id);
	}
}

/* Every output of the core, against the reference. */
static void waiters_observe(world *w, const vd_core_input *in, const vd_core_output *out)
{
	p_waiter *x, *prev = NULL;
	size_t i;

	if (in->kind == VD_CORE_WAIT)
		waiter_added(w, out);
	else if (in->kind == VD_CORE_WAIT_CANCEL)
		waiter_cancelled(w, in, out);
	for (i = 0; i < out->n_answered && !w->failed; i++) {
		x = waiter_by_id(w, out->answered[i].id);
		waiter_answer(w, in, &out->answered[i], x, prev);
		prev = x;
	}
	waiters_owed(w, in);
	if (!w->failed && out->deadline_ms != waiters_deadline(w))
		violation(w, "the deadline to arm is %llu, but the first of the waiters is %llu",
		    (unsigned long long)out->deadline_ms, (unsigned long long)waiters_deadline(w));
}

static void wait_input(world *w, vd_core_in_kind kind)
{
	vd_core_input in = { .kind = kind };
	vd_core_output out;

	sim_input_raw(w, &in, &out);
}

/* Copies may have reached what their clients wait for, as the store says
 * after every job and scan. */
static void wait_check(world *w)
{
	wait_input(w, VD_CORE_WAIT_CHECK);
}

/* The core's other inputs as the world has them: sent before every
 * input, as the store does. A change of the configuration, or a pruned
 * artifact remembered whose directory is gone, is a whole pass. */
static void sim_sources(world *w, vd_refresh change)
{
	fx *f = w->f;
	vd_core_input in = { .kind = VD_CORE_SOURCES };
	vd_core_output out;

	in.u.sources.src = (vd_core_sources){ vd_config_trust(&f->cfg), &f->ring,
		NULL, f->ledgers, f->n_ledgers, w->scanned, { 0, 0, 0 } };   /* no queue: no jobs */
	in.u.sources.change = change;
	vd_core_step(&f->core, &in, &out);
	waiters_observe(w, &in, &out);
}

static void sim_pass(world *w, size_t budget);

/* An input that must follow the end of a whole pass in slices ends it
 * first, its changes noted as their own, as the store does (the input
 * would end it too, but a delta of its own would hide the pass's). */
static void sim_input_raw(world *w, const vd_core_input *in, vd_core_output *out)
{
	int passing;

	if (vd_core_pass_first(&w->f->core, in->kind))
		sim_pass(w, SIZE_MAX);
	sim_sources(w, VD_REFRESH_MODEL);
	passing = vd_core_passing(&w->f->core);
	vd_core_step(&w->f->core, in, out);
	tally.passes += (unsigned long)(tally.counting && !passing && out->passing);
	tally.in_place += (unsigned long)(tally.counting && !passing && out->passing &&
	    vd_lineage_pass_in_place(&w->f->core.lineage));
	waiters_observe(w, in, out);
	if (out->delta != NULL)
		fx_note_delta(w->f, out->delta);
}

/* Lineage catches up, as the store does after every change: with commits
 * set when anything but the model changed. */
static void sim_refresh(world *w, int commits)
{
	vd_core_input in = { .kind = VD_CORE_REFRESH, .u.refresh = VD_REFRESH_MODEL };
	vd_core_output out;

	sim_sources(w, !commits ? VD_REFRESH_MODEL : w->f->whole ? VD_REFRESH_WHOLE :
	    VD_REFRESH_COMMITS);
	if (commits)
		w->f->whole = 0;
	sim_input_raw(w, &in, &out);
}

/* Whether each group is trusted and committed, two bits a group. */
typedef struct trust_snap {
	char (*hash)[VD_HASH_HEX_LEN + 1];
	int *bits;
	size_t n;
} trust_snap;

static void snap_take(const vd_model *m, trust_snap *t)
{
	const char *k;
	void *v;
	size_t it = 0;

	t->n = 0;
	FX_REQUIRE(t->hash = calloc(m->groups.count + 1, sizeof(*t->hash)));
	FX_REQUIRE(t->bits = calloc(m->groups.count + 1, sizeof(*t->bits)));
	while (vd_map_next(&m->groups, &it, &k, &v)) {
		const vd_group *g = v;
		snprintf(t->hash[t->n], sizeof(t->hash[t->n]), "%s", g->hash);
		t->bits[t->n++] = g->trusted * 2 + g->committed;
	}
}

static void snap_check(world *w, const trust_snap *t, const char *what)
{
	const vd_group *g;
	size_t i;

	for (i = 0; i < t->n && !w->failed; i++)
		if (t->bits[i] >= 0 && (g = vd_model_group(w->f->model, t->hash[i])) != NULL &&
		    g->trusted * 2 + g->committed != t->bits[i])
			violation(w, "%s: %.12s was trusted %d committed %d, now %d %d", what,
			    t->hash[i], t->bits[i] / 2, t->bits[i] % 2, g->trusted, g->committed);
}

/* A run under way is lost with its process: the groups with a copy
 * being verified (not scrubbed) are left out of the comparison; whether
 * any was (the head may move then). */
static int snap_unless_busy(world *w, trust_snap *t)
{
	const vd_group *g;
	size_t i, k;
	int left = 0;

	for (i = 0; i < t->n; i++) {
		if ((g = vd_model_group(w->f->model, t->hash[i])) == NULL)
			continue;
		for (k = 0; k < g->n; k++)
			if (g->copies[k]->inflight != 0 && g->copies[k]->inflight_kind != VD_JOB_SCRUB)
				t->bits[i] = -1;
		left |= t->bits[i] < 0;
	}
	return left;
}

static void snap_free(trust_snap *t)
{
	free(t->hash);
	free(t->bits);
}

/* The memory equals what was made durable (volatile knowledge aside). */
static void check_durable(world *w, const char *what)
{
	if (!w->failed && vd_memory_digest(&w->f->core.mem, 0) != vd_memory_digest(&w->db.durable, 0))
		violation(w, "%s: the memory is not what was persisted", what);
}

/* A slice of what a whole pass left to remember, as the store's idle
 * handle remembers VD_RETAIN_SLICE a turn. */
static void sim_retain(world *w, size_t budget)
{
	vd_core_input in = { .kind = VD_CORE_RETAIN, .u.budget = budget };
	vd_core_output out;

	sim_input_raw(w, &in, &out);
	check_durable(w, "after a slice of the retention");
}

/* A slice of the whole pass under way, as the store's idle handle
 * computes one a turn (SIZE_MAX: the rest, as before a client's answer or
 * at a stop). Only its last slice says what changed, and only it. */
static void sim_pass(world *w, size_t budget)
{
	vd_core_input in = { .kind = VD_CORE_PASS, .u.budget = budget };
	vd_core_output out;

	sim_input_raw(w, &in, &out);
	tally.slices += (unsigned long)tally.counting;
	tally.sliced_to_end += (unsigned long)(tally.counting && !out.passing && budget != SIZE_MAX);
	if (out.passing != vd_core_passing(&w->f->core))
		violation(w, "a slice of the pass says passing %d, the core %d", out.passing,
		    vd_core_passing(&w->f->core));
	else if (out.passing && out.delta != NULL)
		violation(w, "a slice of a pass still under way says what changed");
	else if (!out.passing && out.delta == NULL)
		violation(w, "the last slice of a pass does not say what changed");
	else if (budget == SIZE_MAX && out.passing)
		violation(w, "the rest of a pass (SIZE_MAX) left it under way");
}

/* Lineage caught up with everything, to the end of a whole pass the
 * refresh may begin (the first after the first whole scan): what a
 * snapshot of trust is taken from. */
static void sim_settle(world *w)
{
	sim_refresh(w, 1);
	if (vd_core_passing(&w->f->core))
		sim_pass(w, SIZE_MAX);
}

/* One input whose persists fail, one time in P_FAIL_ONE_IN, all of them:
 * a failed persist must leave the memory and every group's trust as they
 * were, unless what changed is volatile (a ledger read as diverged, which
 * is never persisted). The input's result. */
static int sim_input(world *w, const vd_core_input *in)
{
	fx *f = w->f;
	vd_core_output out;
	uint64_t before = 0, before_all = 0;
	trust_snap snap = { NULL, NULL, 0 };
	int fail = rnd(w, P_FAIL_ONE_IN) == 0 && !w->no_fail;

	if (fail) {
		/* Lineage as of the memory now (this step may have changed it). */
		sim_settle(w);
		snap_take(f->model, &snap);
		before = vd_memory_digest(&f->core.mem, 0);
		before_all = vd_memory_digest(&f->core.mem, 1);
	}
	w->db.fail = fail;
	w->db.failures = 0;
	sim_input_raw(w, in, &out);
	w->db.fail = 0;
	FX_REQUIRE(out.result != -ENOMEM && !out.oom);
	if (!fail && out.result == -EIO)
		violation(w, "an input was refused (-EIO) without a persist failing");
	if (fail && w->db.failures > 0 && out.result != -EIO)
		violation(w, "a persist failed, but the input was taken (%d)", out.result);
	check_durable(w, "after an input");
	if (fail) {
		if (!w->failed && vd_memory_digest(&f->core.mem, 0) != before)
			violation(w, "a persist failed, but the memory changed");
		sim_refresh(w, 1);
		if (vd_memory_digest(&f->core.mem, 1) == before_all)
			snap_check(w, &snap, "a persist failed, but trust changed");
		snap_free(&snap);
	}
	return out.result;
}

/* A record decided outside the core (a pruned artifact remembered before
 * the history began to look): persisted, failing as any, applied once
 * durable. 1 when it took. */
static int sim_commit(world *w, vd_mem_record *rec)
{
	int rc;

	w->db.fail = rnd(w, P_FAIL_ONE_IN) == 0 && !w->no_fail;
	rc = vd_memory_commit(&w->f->core.mem, rec, sim_persist, w);
	FX_REQUIRE(rc != -ENOMEM);
	if (!w->db.fail && rc != 0)
		violation(w, "a record (%s) was refused without a persist failing",
		    vd_mem_kind_name(rec->kind));
	if (w->db.fail && rc == 0)
		violation(w, "a persist failed, but its record (%s) was taken",
		    vd_mem_kind_name(rec->kind));
	w->db.fail = 0;
	check_durable(w, "after a record");
	return rc == 0;
}

static void file_entry(world *w, vd_ledger_entry *e, int64_t round, const char *hash,
    size_t line)
{
	memset(e, 0, sizeof(*e));
	e->round_index = round;
	snprintf(e->global_model_hash, sizeof(e->global_model_hash), "%s", hash);
	snprintf(e->record_hash, sizeof(e->record_hash), "%s",
	    hx(RECORD_HASH_BASE + w->f->records++ % P_RECORD_HASHES));
	e->line = line;
	e->trusted = 1;
}

/* A scan reads run i's ledger as its file is now. */
static void scan_ledger(world *w, int i)
{
	fx *f = w->f;
	vd_scan_ledger l = f->ledgers[i];
	vd_core_input in = { .kind = VD_CORE_LEDGER_GONE, .u.relpath = l.relpath };

	if (w->files[i].present) {
		l.entries = w->files[i].e;
		l.n_entries = w->files[i].n;
		in.kind = VD_CORE_LEDGER;
		in.u.ledger.l = &l;
		in.u.ledger.budget = SIZE_MAX;
	}
	sim_input(w, &in);
}

/* Appended, rewritten (a record changed, the file cut short or put back
 * as remembered), deleted, or forgotten by the operator; then read. */
static int ch_ledger(world *w)
{
	int i = (int)rnd(w, P_RUNS), k = (int)rnd(w, 8);
	p_file *file = &w->files[i];
	const vd_ledger_mem *m = vd_memory_ledger(&w->f->core.mem, w->f->ledgers[i].relpath);
	vd_core_input in = { .kind = VD_CORE_LEDGER_FORGET, .u.relpath = w->f->ledgers[i].relpath };
	size_t j;

	if (k == 0 && m != NULL) {
		sim_input(w, &in);
	} else if (k == 1 && file->n > 0) {
		j = rnd(w, (uint32_t)file->n);
		file_entry(w, &file->e[j], file->e[j].round_index, id_hash(pick_id(w)), j + 1);
	} else if (k == 2 && file->n > 0) {
		file->n = rnd(w, (uint32_t)file->n);
	} else if (k == 3 && m != NULL && m->n <= P_MAX_RECORDS) {
		for (j = 0; j < m->n; j++) {
			file_entry(w, &file->e[j], m->recs[j].round_index, m->recs[j].hash, m->recs[j].line);
			snprintf(file->e[j].record_hash, sizeof(file->e[j].record_hash), "%s",
			    m->recs[j].record_hash);
		}
		file->n = m->n;
		file->present = 1;
	} else if (k == 4) {
		file->present = !file->present;
	} else if (file->n < P_MAX_RECORDS) {
		file_entry(w, &file->e[file->n], (int64_t)file->n, pick_commit(w, (int64_t)file->n),
		    file->n + 1);
		file->n++;
		file->present = 1;
	}
	scan_ledger(w, i);
	return 1;
}

/* The token mostly; else a key, trusted or not. */
static const char *p_key(world *w)
{
	uint32_t k = rnd(w, 2 * N_KEYS);

	return k < N_KEYS ? vd_key_id(keys[k]) : NULL;
}

/* A RoundClose posted: new, the same again, or a conflict (an
 * equivocation) with a post or what lineage counts by a key. */
static int ch_posted(world *w)
{
	int64_t t = (int64_t)rnd(w, P_ROUNDS) - 1;
	const char *run = p_runs[rnd(w, P_RUNS)];
	vd_core_input in = { .kind = VD_CORE_POST };
	const char *signers[N_KEYS];
	vd_commitment c;
	size_t n = 0;

	fill_commitment(&c, run, t, pick_commit(w, t), p_key(w));
	/* A signed post is its signers' statement too, remembered with it. */
	if (c.key_id[0] != '\0') {
		signers[n++] = c.key_id;
		if (rnd(w, 2))
			signers[n++] = vd_key_id(keys[rnd(w, N_KEYS)]);
	}
	in.u.post.c = &c;
	in.u.post.key_ids = signers;
	in.u.post.n_keys = n;
	sim_input(w, &in);
	return 1;
}

/* A signed statement written or posted (a RoundClose or a checkpoint
 * over the remembered records), one remembered signed again by another
 * key, or a checkpoint posted. A statement file removed changes nothing
 * in the memory: there is no such step. */
static void stmt_input(world *w, const vd_signed_stmt *ss, const char *key, const char *where)
{
	vd_core_input in = { .kind = VD_CORE_STATEMENT };
	const char *keys1[] = { key };

	in.u.statement.st = &ss->st;
	in.u.statement.run = ss->run;
	in.u.statement.key_ids = keys1;
	in.u.statement.n_keys = 1;
	in.u.statement.where = where;
	sim_input(w, &in);
}

static int ch_stmt(world *w)
{
	fx *f = w->f;
	int i = (int)rnd(w, P_RUNS);
	const char *run = p_runs[i];
	const char *key = vd_key_id(keys[rnd(w, N_KEYS)]);
	const vd_ledger_mem *m = vd_memory_ledger(&f->core.mem, f->ledgers[i].relpath);
	vd_core_input in = { .kind = VD_CORE_CHECKPOINT };
	vd_signed_stmt ss;
	int k = (int)rnd(w, 4);

	if (k == 0 && f->core.mem.n_stmts > 0) {
		ss = f->core.mem.stmts[rnd(w, (uint32_t)f->core.mem.n_stmts)];
		stmt_input(w, &ss, key, ss.where);
	} else if (m != NULL && m->n > 0 && k >= 2) {
		size_t n = 1 + rnd(w, (uint32_t)m->n);
		stmt_at(&ss, f->core.mem.n_stmts + 1, VD_STMT_CHECKPOINT, run, key);
		ss.st.records = n;
		snprintf(ss.st.head_record_hash, sizeof(ss.st.head_record_hash), "%s",
		    m->recs[n - 1].record_hash);
		if (k == 3) {
			const char *signers[] = { key, vd_key_id(keys[rnd(w, N_KEYS)]) };
			snprintf(ss.st.run, sizeof(ss.st.run), "%s", run);
			in.u.checkpoint.st = &ss.st;
			in.u.checkpoint.key_ids = signers;
			in.u.checkpoint.n_keys = 1 + rnd(w, 2);
			sim_input(w, &in);
		} else
			stmt_input(w, &ss, key, ss.where);
	} else {
		int64_t t = (int64_t)rnd(w, P_ROUNDS) - 1;
		stmt_at(&ss, f->core.mem.n_stmts + 1, VD_STMT_ROUNDCLOSE, run, key);
		ss.st.schema_version = 2;
		ss.st.round_index = t;
		snprintf(ss.st.hash, sizeof(ss.st.hash), "%s", pick_commit(w, t));
		stmt_input(w, &ss, key, rnd(w, 2) ? ss.where : "api");
	}
	return 1;
}

/* The store remembers an artifact verified and committed, once: a memory
 * gained for one whose directory is gone is a whole pass. */
static int ch_retained(world *w)
{
	int id = (int)rnd(w, P_IDS);
	const p_id *d = &w->ids[id];
	const vd_group *g = vd_model_group(w->f->model, id_hash(id));
	vd_retained r;
	vd_mem_record rec;

	memset(&r, 0, sizeof(r));
	snprintf(r.hash, sizeof(r.hash), "%s", id_hash(id));
	r.run = (char *)(g ? g->copies[rnd(w, (uint32_t)g->n)]->run : p_runs[rnd(w, P_RUNS)]);
	r.round_index = d->round;
	r.has_parent = d->parent >= 0;
	snprintf(r.parent, sizeof(r.parent), "%s", d->parent >= 0 ? id_hash(d->parent) : "");
	if (vd_memory_retain(&w->f->core.mem, &r, &rec) != VD_POST_NEW || !sim_commit(w, &rec))
		return 0;
	w->f->whole |= g == NULL;
	return g == NULL;
}

/* The operator withdraws a commitment some source names, or one none
 * does (404). */
static int ch_withdraw(world *w)
{
	const vd_memory *m = &w->f->core.mem;
	vd_core_input in = { .kind = VD_CORE_WITHDRAW };
	vd_withdrawal wd;

	memset(&wd, 0, sizeof(wd));
	if (m->n_posted > 0 && rnd(w, 3) == 0) {
		const vd_commitment *c = &m->posted[rnd(w, (uint32_t)m->n_posted)];
		snprintf(wd.run, sizeof(wd.run), "%s", c->run);
		wd.round_index = c->round_index;
		snprintf(wd.hash, sizeof(wd.hash), "%s", c->hash);
	} else {
		wd.round_index = (int64_t)rnd(w, P_ROUNDS) - 1;
		snprintf(wd.run, sizeof(wd.run), "%s", p_runs[rnd(w, P_RUNS)]);
		snprintf(wd.hash, sizeof(wd.hash), "%s", pick_commit(w, wd.round_index));
	}
	snprintf(wd.reason, sizeof(wd.reason), "step %d", w->step);
	in.u.withdraw.w = &wd;
	in.u.withdraw.now = (double)w->step;
	sim_input(w, &in);
	return 1;
}

static int ch_keys(world *w)
{
	w->f->ring.n = rnd(w, N_KEYS + 1);
	return 1;
}

/* The configuration reloaded (SIGHUP): the policy flipped, the genesis
 * pin of run a set to another hash or dropped, or run b's anchor moved or
 * dropped. Lineage refreshes whole, as the store does on a reload. */
static int ch_config(world *w)
{
	fx *f = w->f;
	char v[PATH_MAX_LEN];
	int i, k = (int)rnd(w, 3);

	if (k == 0) {
		cfg_set(f, "commitment_policy",
		    vd_config_policy(&f->cfg) == VD_POLICY_SIGNED ? "ledger" : "signed");
	} else if (k == 1) {
		v[0] = '\0';
		if (rnd(w, 3))
			snprintf(v, sizeof(v), "a:%s", id_hash((int)rnd(w, 2)));
		cfg_set(f, "genesis_hash", v);
	} else {
		cfg_set(f, "anchor", "");
		i = (int)rnd(w, P_IDS);
		if (w->ids[i].round > 0 && rnd(w, 2))
			pin(f, "anchor", "b", w->ids[i].round, id_hash(i));
	}
	return 1;
}

/* A scan read a ledger: the store refreshes whole after a scan. */
static int ch_scan_ledger(world *w)
{
	int i = (int)rnd(w, P_RUNS);

	w->f->ledgers[i].read_ok = !w->f->ledgers[i].read_ok;
	scan_ledger(w, i);
	return 1;
}

/* ---- clients waiting, the clock, and runs under way -------------------- */

/* A free place for a waiter, or one done with (its id forgotten). */
static p_waiter *waiter_place(world *w)
{
	int k;

	for (k = 0; k < P_WAITERS; k++)
		if (w->waiters[k].state == W_FREE)
			return &w->waiters[k];
	for (k = 0; k < P_WAITERS; k++)
		if (w->waiters[k].state != W_LIVE)
			return &w->waiters[k];
	return NULL;
}

/* The generation a client asking for slot i's copy waits for, as the
 * scheduler hands it out: the one a run under way answers (a background
 * one is hurried: explicit from then on), or the next, started now or
 * booked after the run under way. */
static uint64_t wait_gen(world *w, int i)
{
	p_slot *s = &w->slots[i];

	if (rnd(w, 2)) {
		if (s->run == VD_JOB_BACKGROUND + 1)
			run_start(w, i, VD_JOB_EXPLICIT);
		return s->req_gen;
	}
	if (!s->run)
		run_start(w, i, VD_JOB_EXPLICIT);
	return ++s->req_gen;
}

/* A client asks for one or more present copies and waits for them, at
 * most a few simulated seconds (or none: answered by the next tick). */
static int ch_wait(world *w)
{
	char rel[P_WAIT_COPIES][PATH_MAX_LEN], *rels[P_WAIT_COPIES];
	vd_core_input in = { .kind = VD_CORE_WAIT };
	vd_core_output out;
	p_waiter *x = waiter_place(w);
	int i, k, n = 1 + (int)rnd(w, P_WAIT_COPIES), present[P_SLOTS], np = 0;

	for (i = 0; i < P_SLOTS; i++)
		if (w->slots[i].present)
			present[np++] = i;
	if (x == NULL || np == 0)
		return 0;
	memset(x, 0, sizeof(*x));
	/* Distinct copies, as a group's are. */
	for (k = 0; k < n && np > 0; k++) {
		i = (int)rnd(w, (uint32_t)np);
		x->slot[x->n] = present[i];
		present[i] = present[--np];
		i = x->slot[x->n];
		x->gen[x->n] = wait_gen(w, i);
		slot_relpath(i, rel[x->n], sizeof(rel[x->n]));
		rels[x->n] = rel[x->n];
		x->n++;
	}
	if (x->n == 0)
		return 0;
	x->deadline = w->clock + (rnd(w, 8) == 0 ? 0 : 1 + rnd(w, P_WAIT_MS));
	in.u.wait.relpaths = rels;
	in.u.wait.gens = x->gen;
	in.u.wait.n = (size_t)x->n;
	in.u.wait.deadline_ms = x->deadline;
	in.u.wait.user = x;
	w->adding = x;
	sim_input_raw(w, &in, &out);
	w->adding = NULL;
	return 0;
}

/* The clock stands still, jumps to the first deadline exactly, or ahead;
 * the waiters' timer fires. Now and then a check follows. */
static int ch_tick(world *w)
{
	vd_core_input in = { .kind = VD_CORE_TICK };
	vd_core_output out;
	uint64_t first = waiters_deadline(w);
	int k = (int)rnd(w, 6);

	if (k == 1 && first != VD_WAIT_NONE && first > w->clock)
		w->clock = first;
	else if (k > 1)
		w->clock += 1 + rnd(w, P_TICK_MS);
	in.u.now_ms = w->clock;
	sim_input_raw(w, &in, &out);
	if (rnd(w, 3) == 0)
		wait_check(w);
	return 0;
}

/* A client goes away: mostly one waiting, else one answered already. */
static int ch_cancel(world *w)
{
	vd_core_input in = { .kind = VD_CORE_WAIT_CANCEL };
	vd_core_output out;
	int k, at = (int)rnd(w, P_WAITERS), any = rnd(w, 4) == 0;
	const p_waiter *x;

	for (k = 0; k < P_WAITERS; k++) {
		x = &w->waiters[(at + k) % P_WAITERS];
		if (x->state == W_LIVE || (any && x->state != W_FREE)) {
			in.u.wait_id = x->id;
			sim_input_raw(w, &in, &out);
			return 0;
		}
	}
	return 0;
}

/* A run of a present copy comes back (judged, or its bytes changed under
 * the hash), or one starts: a scrub or a background run. Mostly of a copy
 * a client waits for. */
static int ch_run(world *w)
{
	int i = (int)rnd(w, P_SLOTS), changed = rnd(w, 4) == 0, k, at = (int)rnd(w, P_WAITERS);
	int aim = rnd(w, 4) != 0;
	const p_waiter *x;
	p_slot *s;

	for (k = 0; k < P_WAITERS && aim; k++) {
		x = &w->waiters[(at + k) % P_WAITERS];
		if (x->state == W_LIVE) {
			i = x->slot[rnd(w, (uint32_t)x->n)];
			break;
		}
	}
	s = &w->slots[i];

	if (!s->present)
		return 0;
	if (s->run) {
		run_back(w, i, changed || rnd(w, 4) ? V_OK : V_FAIL, changed);
		return 0;
	}
	s->req_gen++;
	run_start(w, i, rnd(w, 2) ? VD_JOB_SCRUB : VD_JOB_BACKGROUND);
	return 0;
}

static int ch_restart(world *w);

/* While a whole pass goes on in slices, a copy whose group it computed
 * already changes: a verdict comes back (failed, mostly), its files are
 * replaced with its round forged or put right, or it goes. */
static int ch_computed(world *w)
{
	const vd_copy *c;
	const vd_group *g;
	int i, k, at = (int)rnd(w, P_SLOTS);

	if (!vd_core_passing(&w->f->core))
		return 0;
	for (k = 0; k < P_SLOTS; k++) {
		i = (at + k) % P_SLOTS;
		if (!w->slots[i].present || (c = slot_copy(w, i)) == NULL || c->hdr.code != VD_OK ||
		    (g = vd_model_group(w->f->model, c->hdr.content_hash)) == NULL || g->mark != 2)
			continue;
		switch (rnd(w, 4)) {
		case 0:         /* replaced, its header's round forged or put right */
			if (c->inflight == 0) {
				w->slots[i].forged = !w->slots[i].forged;
				rescan(w, i, 1);
			}
			break;
		case 1:
			return ch_presence_of(w, i);
		default:
			w->slots[i].verdict = rnd(w, 4) ? V_FAIL : V_OK;
			job_back(w, i, w->slots[i].verdict);
			break;
		}
		return 0;
	}
	return 0;
}

typedef int (*change_fn)(world *w);

/* Weighted: copies come and go and get verdicts most often. */
static const struct change {
	change_fn fn;
	const char *name;
} changes[] = {
	{ ch_presence, "a copy written or removed" }, { ch_rescan, "a copy rescanned or replaced" },
	{ ch_presence, "a copy written or removed" }, { ch_verdict, "a verdict" },
	{ ch_verdict, "a verdict" }, { ch_verdict, "a verdict" },
	{ ch_header, "a header rewritten" }, { ch_ledger, "a ledger appended, rewritten or forgotten" },
	{ ch_posted, "a RoundClose posted" }, { ch_stmt, "a signed statement" },
	{ ch_retained, "an artifact pruned" }, { ch_retained, "an artifact pruned" },
	{ ch_keys, "the trusted keys changed" }, { ch_scan_ledger, "a ledger read or unreadable" },
	{ ch_withdraw, "a withdrawal" }, { ch_restart, "a restart" },
	{ ch_config, "the configuration reloaded" },
	{ ch_wait, "a client waits" }, { ch_wait, "a client waits" },
	{ ch_tick, "the clock moves" }, { ch_tick, "the clock moves" },
	{ ch_cancel, "a client goes away" }, { ch_run, "a run comes back or starts" },
	{ ch_run, "a run comes back or starts" },
	{ ch_computed, "a copy the pass computed changes" },
	{ ch_computed, "a copy the pass computed changes" },
};

/* ---- comparing two lineages ------------------------------------------- */

#define DIFFER(what, ...) \
	do { violation(w, "%s: " what, w->cmp, __VA_ARGS__); return; } while (0)

static int same_str(const char *a, const char *b)
{
	return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static void same_group(world *w, const vd_group *a, const vd_group *b)
{
	size_t i;

	if (a->chain != b->chain || a->chain_len != b->chain_len || a->pruned != b->pruned ||
	    strcmp(a->root, b->root) != 0)
		DIFFER("%s: chain %s %zu pruned %zu root %.8s, from scratch %s %zu pruned %zu root %.8s",
		    a->hash, vd_chain_status_name(a->chain), a->chain_len, a->pruned, a->root,
		    vd_chain_status_name(b->chain), b->chain_len, b->pruned, b->root);
	if (a->n_breaks != b->n_breaks || a->breaks_total != b->breaks_total)
		DIFFER("%s: %zu breaks (%zu listed), from scratch %zu (%zu)", a->hash,
		    a->breaks_total, a->n_breaks, b->breaks_total, b->n_breaks);
	for (i = 0; i < a->n_breaks; i++)
		if (a->breaks[i].reason != b->breaks[i].reason ||
		    a->breaks[i].round_index != b->breaks[i].round_index ||
		    strcmp(a->breaks[i].hash, b->breaks[i].hash) != 0)
			DIFFER("%s: break %zu is %s at %.8s, from scratch %s at %.8s", a->hash, i,
			    vd_break_name(a->breaks[i].reason), a->breaks[i].hash,
			    vd_break_name(b->breaks[i].reason), b->breaks[i].hash);
	if (a->committed != b->committed || a->trusted != b->trusted ||
	    a->round_index != b->round_index || a->has_parent != b->has_parent ||
	    strcmp(a->parent, b->parent) != 0)
		DIFFER("%s: committed %d trusted %d round %lld, from scratch %d %d %lld", a->hash,
		    a->committed, a->trusted, (long long)a->round_index, b->committed, b->trusted,
		    (long long)b->round_index);
	if ((a->commit == NULL) != (b->commit == NULL))
		DIFFER("%s: commitment %s, from scratch %s", a->hash, a->commit ? "shown" : "none",
		    b->commit ? "shown" : "none");
	if (a->commit != NULL && (strcmp(a->commit->run, b->commit->run) != 0 ||
	    a->commit->round_index != b->commit->round_index || a->commit_source != b->commit_source))
		DIFFER("%s: commitment %s round %lld source %d, from scratch %s %lld %d", a->hash,
		    a->commit->run, (long long)a->commit->round_index, a->commit_source,
		    b->commit->run, (long long)b->commit->round_index, b->commit_source);
}

static void same_groups(world *w, const vd_model *a, const vd_model *b)
{
	const char *k;
	void *v;
	size_t it = 0;

	if (a->groups.count != b->groups.count)
		DIFFER("%zu groups, from scratch %zu", a->groups.count, b->groups.count);
	while (vd_map_next(&a->groups, &it, &k, &v)) {
		const vd_group *gb = vd_model_group(b, k);
		if (gb == NULL)
			DIFFER("group %s only in the refreshed model", k);
		same_group(w, v, gb);
	}
}

static int same_entry(const vd_commit_entry *a, const vd_commit_entry *b)
{
	if (a->has != b->has)
		return 0;
	return !a->has || (strcmp(a->hash, b->hash) == 0 && same_str(a->where, b->where) &&
	    a->line == b->line && a->is_signed == b->is_signed && strcmp(a->key_id, b->key_id) == 0);
}

static void same_slots(world *w, const vd_lineage *a, const vd_lineage *b)
{
	const char *k;
	void *v;
	size_t it = 0;
	int s;

	if (a->commits.count != b->commits.count)
		DIFFER("%zu commitment slots, from scratch %zu", a->commits.count, b->commits.count);
	while (vd_map_next(&a->commits, &it, &k, &v)) {
		const vd_commit_slot *sa = v;
		const vd_commit_slot *sb = vd_lineage_slot(b, sa->run, sa->round_index);
		if (sb == NULL)
			DIFFER("slot %s round %lld only in the refreshed lineage", sa->run,
			    (long long)sa->round_index);
		for (s = 0; s < VD_SRC_COUNT; s++)
			if (!same_entry(&sa->src[s], &sb->src[s]))
				DIFFER("slot %s round %lld: source %s differs", sa->run,
				    (long long)sa->round_index, vd_commit_source_name((vd_commit_source)s));
		if (strcmp(sa->first_hash, sb->first_hash) != 0 ||
		    strcmp(sa->other_hash, sb->other_hash) != 0 ||
		    !same_str(sa->other_where, sb->other_where) || sa->anchor != sb->anchor)
			DIFFER("slot %s round %lld: hashes or anchor differ", sa->run,
			    (long long)sa->round_index);
	}
	if (memcmp(a->series, b->series, sizeof(a->series)) != 0)
		DIFFER("%s", "commitment series differ");
}

static void same_alerts(world *w, const vd_lineage *a, const vd_lineage *b)
{
	const char *k;
	void *v;
	size_t it = 0;

	if (a->alerts.count != b->alerts.count)
		DIFFER("%zu alerts, from scratch %zu", a->alerts.count, b->alerts.count);
	while (vd_map_next(&a->alerts, &it, &k, &v)) {
		const vd_alert *x = v, *y = vd_map_get(&b->alerts, k);
		if (y == NULL)
			DIFFER("alert %s only in the refreshed lineage", k);
		if (x->kind != y->kind || strcmp(x->subject, y->subject) != 0)
			DIFFER("alert %s: kind %d, from scratch %d", k, x->kind, y->kind);
		if (strcmp(x->detail, y->detail) != 0)
			DIFFER("alert %s: \"%s\", from scratch \"%s\"", k, x->detail, y->detail);
	}
	if (memcmp(a->alert_counts, b->alert_counts, sizeof(a->alert_counts)) != 0)
		DIFFER("%s", "alert counts differ");
}

/* The alerts the refreshes' deltas raised and did not clear, as the
 * shell applies them, are the alerts computed from scratch. */
static void same_applied(world *w, const fx *f, const vd_lineage *b)
{
	const char *k;
	void *v;
	size_t it = 0;

	if (f->delta_bad)
		DIFFER("%s", "a delta raised an alert raised already, or cleared one not raised");
	if (f->applied.count != b->alerts.count)
		DIFFER("%zu alerts applied from the deltas, from scratch %zu", f->applied.count,
		    b->alerts.count);
	while (vd_map_next(&b->alerts, &it, &k, &v))
		if (vd_map_get(&f->applied, k) == NULL)
			DIFFER("alert %s not applied from the deltas", k);
}

static void same_head(world *w, const vd_lineage *a, const vd_lineage *b)
{
	if (a->head_round != b->head_round || strcmp(a->head_hash, b->head_hash) != 0 ||
	    !same_str(a->head_run, b->head_run))
		DIFFER("head %lld %.8s, from scratch %lld %.8s", (long long)a->head_round, a->head_hash,
		    (long long)b->head_round, b->head_hash);
}

#define P_SETTLE_EVERY 3            /* steps: the listings' indexes are read on one in so many */

/* The index of copies by path, which a scan of changes sweeps: every copy
 * once, in strcmp order. */
static void check_by_path(world *w, vd_model *m)
{
	const vd_order *byp = vd_model_by_path(m);
	size_t i;

	if (byp == NULL) {
		violation(w, "the index by path cannot be read");
		return;
	}
	if (byp->n != m->copies.count)
		violation(w, "the index by path holds %zu copies, the model %zu", byp->n, m->copies.count);
	for (i = 0; i < byp->n; i++) {
		const vd_copy *c = byp->v[i];
		if (vd_model_copy(m, c->relpath) != c ||
		    (i > 0 && strcmp(((const vd_copy *)byp->v[i - 1])->relpath, c->relpath) >= 0))
			violation(w, "the index by path is out of order or stale at %zu (%s)", i, c->relpath);
	}
}

/* The listings' indexes, kept as copies come and go (and read only now and
 * then, so that removals meet elements still unsorted), against the model's
 * maps: every group once by hash, every copy with a header once by (run,
 * its group's round, hash, path), every other copy among the headerless. */
static void check_orders(world *w, vd_model *m)
{
	const vd_order *byh = vd_model_by_hash(m), *byr = vd_model_by_run(m);
	const char *k;
	void *v;
	size_t i, it = 0, with_header = 0, without = 0;

	if (byh == NULL || byr == NULL) {
		violation(w, "the listings' indexes cannot be read");
		return;
	}
	while (vd_map_next(&m->copies, &it, &k, &v)) {
		const vd_copy *c = v;
		if (c->hdr.code == VD_OK && vd_model_group(m, c->hdr.content_hash) != NULL)
			with_header++;
		else if (c->hdr.code != VD_OK && vd_map_get(&m->headerless, k) == c)
			without++;
		else if (c->hdr.code != VD_OK)
			violation(w, "%s has no header but is not listed as headerless", k);
	}
	if (byh->n != m->groups.count || byr->n != with_header || m->headerless.count != without)
		violation(w, "indexes hold %zu groups, %zu copies, %zu headerless; the model %zu, %zu, %zu",
		    byh->n, byr->n, m->headerless.count, m->groups.count, with_header, without);
	for (i = 0; i < byh->n; i++)
		if (vd_model_group(m, ((const vd_group *)byh->v[i])->hash) != byh->v[i] ||
		    (i > 0 && strcmp(((const vd_group *)byh->v[i - 1])->hash,
		    ((const vd_group *)byh->v[i])->hash) >= 0))
			violation(w, "the index by hash is out of order or stale at %zu", i);
	for (i = 0; i < byr->n; i++) {
		const vd_copy *c = byr->v[i];
		if (c->run_group != vd_model_group(m, c->hdr.content_hash) ||
		    c->run_round != c->run_group->round_index ||
		    (i > 0 && vd_model_run_cmp(byr->v[i - 1], c) >= 0))
			violation(w, "the index by run is out of order or stale at %zu (%s)", i, c->relpath);
	}
	check_by_path(w, m);
}

/* A model built anew from the slots (in reverse). */
static void scratch_model(world *w, vd_model *m)
{
	int i;

	memset(m, 0, sizeof(*m));      /* vd_model_init leaves dirty_all as it finds it */
	vd_model_init(m);
	if (w->step % P_GROW_EVERY == 0)
		grow_tables(m);
	for (i = P_SLOTS - 1; i >= 0; i--)
		if (w->slots[i].present)
			slot_add(w, m, i);
}

/* The same inputs refreshed by a new lineage over a model of its own. */
static void compare_with_scratch(world *w)
{
	vd_lineage_input in;
	vd_lineage fresh;
	vd_model m;

	scratch_model(w, &m);
	vd_lineage_init(&fresh);
	input_for(w->f, &m, &in);
	in.scanned = w->f->core.src.scanned;  /* a parent not found yet is no break */
	refresh_alone(&fresh, &in, 1);
	w->cmp = "refreshed != from scratch";
	same_groups(w, w->f->model, &m);
	same_slots(w, &w->f->core.lineage, &fresh);
	same_head(w, &w->f->core.lineage, &fresh);
	same_alerts(w, &w->f->core.lineage, &fresh);
	same_applied(w, w->f, &fresh);
	vd_lineage_free(&fresh);
	vd_model_free(&m);
}

/* The signatures a post came with are remembered after a restart. */
static void check_signers_kept(world *w, const vd_memory *m, const vd_mem_record *r)
{
	size_t i;

	for (i = 0; i < r->n_signers && !w->failed; i++)
		if (!vd_memory_has_statement(m, &r->stmt.st, r->stmt.run, r->signers[i]))
			violation(w, "after a restart: the signature by %.12s of a posted statement of %s is lost",
			    r->signers[i], r->stmt.run);
}

/* Every commitment the fake database holds is in the memory rebuilt from
 * it: nothing accepted is lost, and an equivocation stays one. */
static void check_not_lost(world *w, const vd_memory *m)
{
	size_t i;

	for (i = 0; i < w->db.n && !w->failed; i++) {
		const vd_mem_record *r = &w->db.recs[i];
		if (r->kind == VD_MEM_POST && !vd_memory_has_post(m, &r->c))
			violation(w, "after a restart: the post of %s round %lld -> %.12s is lost",
			    r->c.run, (long long)r->c.round_index, r->c.hash);
		else if (r->kind == VD_MEM_EQUIVOCATION &&
		    !vd_memory_has_equivocation(m, r->c.run, r->c.round_index, r->c.hash))
			violation(w, "after a restart: the equivocation of %s round %lld (%.12s) is lost",
			    r->c.run, (long long)r->c.round_index, r->c.hash);
		else if ((r->kind == VD_MEM_STATEMENT &&
		    !vd_memory_has_statement(m, &r->stmt.st, r->stmt.run, r->stmt.key_id)))
			violation(w, "after a restart: a statement of %s signed by %.12s is lost",
			    r->stmt.run, r->stmt.key_id);
		else if (r->kind == VD_MEM_WITHDRAWAL &&
		    !vd_memory_is_withdrawn(m, r->w.run, r->w.round_index, r->w.hash))
			violation(w, "after a restart: the withdrawal of %s round %lld -> %.12s is lost",
			    r->w.run, (long long)r->w.round_index, r->w.hash);
		else
			check_signers_kept(w, m, r);
	}
}

/* The daemon stops after a scan and starts again: the memory is thrown
 * away and rebuilt from the records persisted, in order, then the first
 * scan reads the ledgers. The rebuilt memory must equal the one kept
 * incrementally, and lineage over it say what it said before. */
/* What outlives the process of slot i's copy: the verdict the state
 * database holds (reached on the files it names), and its files as a
 * scan finds them. */
typedef struct p_disk {
	int present, has_verdict;
	vd_code code;
	uint8_t verdict_fp[32];
	vd_fingerprint fp;
} p_disk;

static void disk_take(world *w, p_disk *d)
{
	const vd_copy *c;
	int i;

	memset(d, 0, P_SLOTS * sizeof(*d));
	for (i = 0; i < P_SLOTS; i++) {
		if (!w->slots[i].present || (c = slot_copy(w, i)) == NULL)
			continue;
		d[i].present = 1;
		d[i].has_verdict = c->has_verdict;
		d[i].code = c->code;
		memcpy(d[i].verdict_fp, c->verdict_fp.digest, sizeof(d[i].verdict_fp));
		d[i].fp = c->fp;
		d[i].fp.ok = 1;
	}
}

/* The new process's first scan finds every present copy, new to its
 * core, with the verdict the database kept of it: one reached on other
 * files is verified again. No job survives the process: a copy's
 * generations start again, and one that was being verified reads its
 * last verdict. */
static void restart_scan(world *w, const p_disk *d)
{
	char rel[PATH_MAX_LEN];
	vd_core_input in = { .kind = VD_CORE_SCANNED };
	vd_kept_verdict kept;
	vd_scan_artifact a;
	vd_core_output out;
	p_slot *s;
	int i;

	for (i = 0; i < P_SLOTS; i++) {
		if (!d[i].present)
			continue;
		s = &w->slots[i];
		slot_relpath(i, rel, sizeof(rel));
		memset(&a, 0, sizeof(a));
		a.relpath = rel;
		a.run = (char *)slot_run(i);
		a.kind = VD_KIND_DIR;
		a.fp = d[i].fp;
		slot_hdr(w, s, &a.hdr);
		memset(&kept, 0, sizeof(kept));
		memcpy(kept.fingerprint, d[i].verdict_fp, sizeof(kept.fingerprint));
		kept.code = d[i].code;
		kept.detail = d[i].code == VD_OK ? "" : "weights.safetensors differs";
		kept.content_hash = "";
		in.u.scanned.a = &a;
		in.u.scanned.kept = d[i].has_verdict ? &kept : NULL;
		sim_input_raw(w, &in, &out);
		vd_hdrinfo_free(&a.hdr);
		if (out.result != VD_SCAN_NEW)
			violation(w, "%s scanned after a restart: outcome %d", rel, out.result);
		s->run = 0;
		s->req_gen = s->done_gen = 0;
		if (s->verdict == V_BUSY)
			s->verdict = !d[i].has_verdict ? V_NONE : d[i].code == VD_OK ? V_OK : V_FAIL;
	}
}

static int ch_restart(world *w)
{
	fx *f = w->f;
	vd_core_input in = { .kind = VD_CORE_RESTORE };
	vd_core_output out;
	vd_lineage before;
	vd_memory old, loaded;
	p_disk disk[P_SLOTS];
	trust_snap snap;
	size_t i;
	int r, readable = 1, runs_lost;

	tally.restarts += (unsigned long)tally.counting;
	/* Clients' waits do not survive the process: it answers them all, and
	 * the new process's ids start again. */
	wait_input(w, VD_CORE_WAIT_FIRE_ALL);
	for (i = 0; i < P_WAITERS; i++)
		w->waiters[i].state = W_FREE;
	w->no_fail = 1;
	for (r = 0; r < P_RUNS; r++)
		scan_ledger(w, r);
	sim_settle(w);      /* the store ends a pass under way as it stops */
	snap_take(f->model, &snap);
	runs_lost = snap_unless_busy(w, &snap);
	tally.runs_lost += (unsigned long)(tally.counting && runs_lost);
	/* The process ends: its lineage and memory are kept aside, to compare
	 * with the new process's; the alerts start again from none. The new
	 * process slices its first whole pass as the old one did (the store
	 * sets pass_slice at init), once its first whole scan has ended. */
	disk_take(w, disk);
	before = f->core.lineage;
	vd_lineage_init(&f->core.lineage);
	old = f->core.mem;
	vd_memory_init(&f->core.mem);
	vd_core_free(&f->core);
	vd_core_init(&f->core, sim_persist, w);
	f->core.pass_slice = w->pass_slice;
	f->core.model.dirty_whole_min = w->dirty_min;
	w->scanned = 0;
	w->unreadable = 0;
	vd_map_free(&f->applied);
	vd_map_init(&f->applied);
	vd_memory_init(&loaded);
	for (i = 0; i < w->db.n; i++)
		FX_REQUIRE(vd_memory_restore(&loaded, &w->db.recs[i]) >= 0);
	check_not_lost(w, &loaded);
	if (!w->failed && vd_memory_digest(&loaded, 0) != vd_memory_digest(&old, 0))
		violation(w, "the memory rebuilt from its records differs from the one kept step by step");
	in.u.restore = &loaded;
	sim_input_raw(w, &in, &out);
	vd_memory_free(&loaded);
	restart_scan(w, disk);
	for (r = 0; r < P_RUNS; r++) {
		scan_ledger(w, r);
		readable &= f->ledgers[r].read_ok;
	}
	/* What an unreadable ledger no longer extends is known again once it
	 * can be read: until then the memory and lineage may differ. */
	if (!readable)
		goto done;
	if (!w->failed && vd_memory_digest(&f->core.mem, 1) != vd_memory_digest(&old, 1))
		violation(w, "after a restart and a scan the memory differs from before");
	sim_refresh(w, 1);
	w->cmp = "before a restart != after it";
	snap_check(w, &snap, "before a restart != after it");
	same_slots(w, &before, &f->core.lineage);
	if (!runs_lost)
		same_head(w, &before, &f->core.lineage);
done:
	f->whole = 1;
	sim_refresh(w, 1);
	snap_free(&snap);
	vd_lineage_free(&before);
	vd_memory_free(&old);
	w->no_fail = 0;
	return 1;
}

static void world_config(world *w)
{
	fx *f = w->f;
	char v[PATH_MAX_LEN];
	int i;

	if (rnd(w, 2))
		cfg_set(f, "commitment_policy", "signed");
	if (rnd(w, 4)) {
		snprintf(v, sizeof(v), "a:%s,%s", id_hash(0), id_hash(rnd(w, 2) ? 0 : 1));
		cfg_set(f, "genesis_hash", v);
	}
	for (i = 0; i < P_IDS; i++)
		if (w->ids[i].round > 0 && rnd(w, 3) == 0) {
			pin(f, "anchor", "b", w->ids[i].round, id_hash(i));
			break;
		}
	for (i = 0; i < P_RUNS; i++) {
		f->ledgers[i].relpath = (char *)(i ? "b/ledger.jsonl" : "a/ledger.jsonl");
		f->ledgers[i].run = (char *)p_runs[i];
		f->ledgers[i].read_ok = 1;
		w->files[i].present = 1;
	}
	f->n_ledgers = P_RUNS;
}


/* ---- the reference ----------------------------------------------------- */

/* The hashes commitments give one round of one run: named by a counting
 * entry, or noted (a refused post), as trust.md sections 4, 5 and 8 say. */
typedef struct ref_set {
	const char *h[REF_HASHES_MAX];
	int n, named;
} ref_set;

static void ref_add(ref_set *r, const char *hash, int named)
{
	int i;

	r->named |= named;
	for (i = 0; i < r->n; i++)
		if (strcmp(r->h[i], hash) == 0)
			return;
	if (r->n < REF_HASHES_MAX)
		r->h[r->n++] = hash;
}

static int ref_withdrawn(const fx *f, const char *run, int64_t t, const char *hash)
{
	char key[VD_WITHDRAWAL_KEY_MAX];

	vd_withdrawal_key(key, sizeof(key), run, t, hash);
	return vd_map_get(&f->core.mem.withdrawn, key) != NULL;
}

/* A verified copy of hash in run, or when none is in the run a pruned
 * artifact of it, says another round than t + 1: a RoundClose for t
 * naming it commits nothing. */
static int ref_mismatch(const fx *f, const char *run, int64_t t, const char *hash)
{
	const vd_group *g = vd_model_group(f->model, hash);
	const vd_retained *r = vd_map_get(&f->core.mem.retained, hash);
	size_t i;

	int present = 0;

	for (i = 0; g != NULL && i < g->n; i++) {
		if (strcmp(g->copies[i]->run, run) != 0)
			continue;
		present = 1;
		if (g->copies[i]->has_verdict && g->copies[i]->code == VD_OK &&
		    g->copies[i]->hdr.round_index != t + 1)
			return 1;
	}
	return !present && r != NULL && strcmp(r->run, run) == 0 && r->round_index != t + 1;
}

static int ref_trusted_key(const fx *f, const char *key_id)
{
	return key_id[0] == '\0' || vd_keyring_find(&f->ring, key_id) != NULL;
}

/* Records 1..N of a remembered ledger a checkpoint by a trusted key covers,
 * checked against the memory. */
static size_t ref_covered(const fx *f, const vd_ledger_mem *m)
{
	size_t i, best = 0;

	for (i = 0; i < f->core.mem.n_stmts; i++) {
		const vd_signed_stmt *s = &f->core.mem.stmts[i];
		if (s->st.kind == VD_STMT_CHECKPOINT && strcmp(s->run, m->run) == 0 &&
		    s->st.records >= 1 && s->st.records <= m->n && s->st.records > best &&
		    vd_keyring_find(&f->ring, s->key_id) != NULL &&
		    strcmp(m->recs[s->st.records - 1].record_hash, s->st.head_record_hash) == 0)
			best = s->st.records;
	}
	return best;
}

static void ref_ledgers(const fx *f, int ledger_policy, const char *run, int64_t t, ref_set *r)
{
	const char *k;
	void *v;
	size_t it = 0, i, covered;

	while (vd_map_next(&f->core.mem.mems, &it, &k, &v)) {
		const vd_ledger_mem *m = v;
		if (strcmp(m->run, run) != 0)
			continue;
		covered = ref_covered(f, m);
		for (i = 0; i < m->n; i++)
			if (m->recs[i].round_index == t && (ledger_policy || i < covered) &&
			    !ref_withdrawn(f, run, t, m->recs[i].hash))
				ref_add(r, m->recs[i].hash, 1);
		for (i = 0; ledger_policy && i < m->n_diverged; i++)
			if (m->diverged[i].round_index == t &&
			    !ref_withdrawn(f, run, t, m->diverged[i].hash))
				ref_add(r, m->diverged[i].hash, 0);
	}
}

/* A RoundClose (posted, refused or signed) counts when its key is trusted,
 * nothing withdrew it, and it passes the round check. */
static int ref_roundclose(const fx *f, const char *run, int64_t t, const char *crun,
    int64_t ct, const char *hash, const char *key_id)
{
	return ct == t && strcmp(crun, run) == 0 && ref_trusted_key(f, key_id) &&
	    !ref_withdrawn(f, run, t, hash) && !ref_mismatch(f, run, t, hash);
}

static void ref_pins(const fx *f, const char *run, int64_t t, ref_set *r)
{
	size_t i;

	for (i = 0; t < 0 && i < f->cfg.n_genesis; i++)
		if (strcmp(f->cfg.genesis[i].run, run) == 0)
			ref_add(r, f->cfg.genesis[i].hash, 1);
	for (i = 0; i < f->cfg.n_anchors; i++)
		if (strcmp(f->cfg.anchors[i].run, run) == 0 && f->cfg.anchors[i].round_index - 1 == t)
			ref_add(r, f->cfg.anchors[i].hash, 1);
}

static void ref_round(const fx *f, const char *run, int64_t t, ref_set *r)
{
	int ledger_policy = vd_config_policy(&f->cfg) == VD_POLICY_LEDGER;
	size_t i;

	memset(r, 0, sizeof(*r));
	ref_ledgers(f, ledger_policy, run, t, r);
	for (i = 0; i < f->core.mem.n_posted; i++)
		if (ref_roundclose(f, run, t, f->core.mem.posted[i].run, f->core.mem.posted[i].round_index,
		    f->core.mem.posted[i].hash, f->core.mem.posted[i].key_id))
			ref_add(r, f->core.mem.posted[i].hash, 1);
	for (i = 0; i < f->core.mem.n_equivs; i++)
		if (ref_roundclose(f, run, t, f->core.mem.equivs[i].run, f->core.mem.equivs[i].round_index,
		    f->core.mem.equivs[i].hash, f->core.mem.equivs[i].key_id))
			ref_add(r, f->core.mem.equivs[i].hash, 0);
	for (i = 0; i < f->core.mem.n_stmts; i++)
		if (f->core.mem.stmts[i].st.kind == VD_STMT_ROUNDCLOSE &&
		    ref_roundclose(f, run, t, f->core.mem.stmts[i].run, f->core.mem.stmts[i].st.round_index,
		    f->core.mem.stmts[i].st.hash, f->core.mem.stmts[i].key_id))
			ref_add(r, f->core.mem.stmts[i].st.hash, 1);
	ref_pins(f, run, t, r);
}

/* What commits the artifact of round `round` in run: round - 1's hashes,
 * and for round 0 the run's own pin, else the one for every run. */
static void ref_for(const fx *f, const char *run, int64_t round, ref_set *r)
{
	if (round > 0) {
		ref_round(f, run, round - 1, r);
		return;
	}
	ref_round(f, run, -1, r);
	if (r->n == 0)
		ref_round(f, "*", -1, r);
}

static int ref_committed(const fx *f, const vd_group *g)
{
	ref_set r;
	size_t i;

	for (i = 0; i < g->n; i++) {
		const vd_copy *c = g->copies[i];
		if (c->hdr.code != VD_OK)
			continue;
		ref_for(f, c->run, c->hdr.round_index, &r);
		if (r.named && r.n == 1 && strcmp(r.h[0], g->hash) == 0)
			return 1;
	}
	return 0;
}

/* An anchor pins the hash at the round a copy of it says, in its run. */
static int anchored(const fx *f, const vd_group *g)
{
	size_t i, j;

	for (i = 0; i < f->cfg.n_anchors; i++)
		for (j = 0; strcmp(f->cfg.anchors[i].hash, g->hash) == 0 && j < g->n; j++)
			if (g->copies[j]->hdr.code == VD_OK &&
			    g->copies[j]->hdr.round_index == f->cfg.anchors[i].round_index &&
			    strcmp(g->copies[j]->run, f->cfg.anchors[i].run) == 0)
				return 1;
	return 0;
}

/* A trusted artifact's parent is a verified artifact or a pruned one of
 * its run, unless it is a root: round 0, or an anchored round. */
static int parent_ok(const fx *f, const vd_group *g)
{
	const vd_group *p;
	const vd_retained *r;
	size_t i;

	if (g->round_index == 0 || anchored(f, g))
		return 1;
	if (!g->has_parent)
		return 0;
	/* One verified copy shows the parent's bytes exist (a failed copy
	 * beside it is that copy's problem); it must have a copy in the run. */
	if ((p = vd_model_group(f->model, g->parent)) != NULL &&
	    vd_group_through(p) == VD_AS_VERIFIED)
		for (i = 0; i < p->n; i++)
			if (vd_group_in_run(g, p->copies[i]->run))
				return 1;
	return (r = vd_map_get(&f->core.mem.retained, g->parent)) != NULL && vd_group_in_run(g, r->run);
}

static void check_group(world *w, const vd_group *g)
{
	const fx *f = w->f;
	int committed = ref_committed(f, g);

	if (g->committed != committed) {
		violation(w, "%.12s: committed %d, but the commitments of its round say %d",
		    g->hash, g->committed, committed);
		return;
	}
	if (!g->trusted)
		return;
	if (vd_group_settled(g) != VD_AS_VERIFIED)
		violation(w, "%.12s: trusted, but not verified", g->hash);
	else if (g->chain != VD_CHAIN_INTACT)
		violation(w, "%.12s: trusted, but its chain is %s", g->hash,
		    vd_chain_status_name(g->chain));
	else if (!parent_ok(f, g)) {
		violation(w, "%.12s: trusted, but its parent is neither verified nor pruned in its run",
		    g->hash);
	}
}

/* Trusted as the reference has it: committed by the commitments of its
 * round, verified, and its parent verified or pruned in its run unless it
 * is a root (its chain is lineage's own). */
static int ref_trusted(const fx *f, const vd_group *g)
{
	return ref_committed(f, g) && vd_group_settled(g) == VD_AS_VERIFIED && parent_ok(f, g);
}

/* While a whole pass goes on in slices: no committed head (a pass in
 * place keeps one the reference trusts), and a group reads trusted or
 * committed only as the reference says it is. */
static void check_passing(world *w)
{
	const fx *f = w->f;
	const vd_group *g;
	const char *k, *head;
	void *v;
	size_t it = 0;

	if (vd_lineage_head(&f->core.lineage, &head, NULL) >= 0 &&
	    !vd_lineage_pass_in_place(&f->core.lineage))
		violation(w, "a committed head while a whole pass is under way");
	else if (vd_lineage_head(&f->core.lineage, &head, NULL) >= 0 &&
	    ((g = vd_model_group(f->model, head)) == NULL || !ref_trusted(f, g)))
		violation(w, "%.12s: the committed head while a pass in place goes on, but not trusted",
		    head);
	while (!w->failed && vd_map_next(&f->model->groups, &it, &k, &v)) {
		g = v;
		if (g->committed && !ref_committed(f, g))
			violation(w, "%.12s: committed while a whole pass is under way, but the "
			    "commitments of its round do not commit it", g->hash);
		else if (g->trusted && !ref_trusted(f, g))
			violation(w, "%.12s: trusted while a whole pass is under way, but the "
			    "reference does not trust it", g->hash);
	}
}

static void check_reference(world *w)
{
	const char *k;
	void *v;
	size_t it = 0;

	while (!w->failed && vd_map_next(&w->f->model->groups, &it, &k, &v))
		check_group(w, v);
}

/* Under "signed" the unsigned records are no commitments: without them
 * (the memory cut to what checkpoints cover, nothing diverged) every
 * group is as trusted as before. */
static void check_unsigned_inert(world *w)
{
	fx *f = w->f;
	vd_ledger_mem *saved;
	vd_lineage_input in;
	vd_lineage l;
	vd_model m;
	const char *k;
	void *v;
	size_t it = 0, n = 0;

	if (vd_config_policy(&f->cfg) == VD_POLICY_LEDGER || w->failed)
		return;
	FX_REQUIRE(saved = calloc(f->core.mem.mems.count + 1, sizeof(*saved)));
	while (vd_map_next(&f->core.mem.mems, &it, &k, &v)) {
		vd_ledger_mem *m0 = v;
		saved[n++] = *m0;
		m0->n = ref_covered(f, m0);
		m0->n_diverged = 0;
		m0->rewritten = 0;
	}
	/* Lineage writes its part into the groups: a model of its own. */
	scratch_model(w, &m);
	vd_lineage_init(&l);
	input_for(f, &m, &in);
	refresh_alone(&l, &in, VD_REFRESH_WHOLE);
	it = n = 0;
	while (vd_map_next(&f->core.mem.mems, &it, &k, &v))
		*(vd_ledger_mem *)v = saved[n++];
	free(saved);
	it = 0;
	while (!w->failed && vd_map_next(&m.groups, &it, &k, &v)) {
		const vd_group *a = v, *b = vd_model_group(f->model, k);
		if (b != NULL && a->trusted != b->trusted)
			violation(w, "%.12s: trusted %d, but %d without the unsigned ledger records "
			    "(policy signed)", k, b->trusted, a->trusted);
	}
	vd_lineage_free(&l);
	vd_model_free(&m);
}

/* ---- histories --------------------------------------------------------- */

static void violation(world *w, const char *fmt, ...)
{
	va_list ap;

	if (w->failed)
		return;
	w->failed = 1;
	va_start(ap, fmt);
	vsnprintf(w->why, sizeof(w->why), fmt, ap);
	va_end(ap);
}

/* Every step its own generator: a history stays the same history with
 * some of its steps left out. */
static void reseed(world *w, unsigned salt)
{
	uint32_t x = 2463534242u ^ (w->seed * 2654435761u) ^ (salt * 40503u + 0x9e3779b9u);

	w->rnd = x != 0 ? x : 1;
	(void)rnd(w, 2);
}

static void world_start(world *w, unsigned seed)
{
	memset(w, 0, sizeof(*w));
	w->seed = seed;
	reseed(w, 0);
	w->f = fx_new();
	/* The core persists through the fake database, as the daemon's does
	 * through the state database. */
	vd_core_free(&w->f->core);
	vd_core_init(&w->f->core, sim_persist, w);
	vd_memory_init(&w->db.durable);
	draw_ids(w);
	world_config(w);
	/* Half the histories go through the first whole pass in slices of a
	 * few chains, as the store's core does in slices of many. */
	w->pass_slice = rnd(w, 2) ? 0 : 1 + rnd(w, P_PASS_SLICE_MAX);
	w->f->core.pass_slice = w->pass_slice;
	w->dirty_min = rnd(w, 2) ? VD_DIRTY_WHOLE_MIN : 1 + rnd(w, P_DIRTY_MIN_MAX);
	w->f->core.model.dirty_whole_min = w->dirty_min;
	sim_refresh(w, 1);
}

/* One step: step number `id` of the seed's history. The change's index. */
/* ---- every route's view -------------------------------------------------- */

#define P_VIEWS_EVERY 6             /* steps: the views are rendered on one in so many */
#define P_VIEW_PAGE 2               /* listings are read whole and this many at a time */

/* The store the API renders from, holding the core's state as it is. Its
 * core (the model, lineage and memory) is f's own, lent for the views
 * (which may settle the listings' indexes) and given back. */
static void views_lend(world *w, vd_store *s)
{
	memset(s, 0, sizeof(*s));
	s->cfg = &w->f->cfg;
	s->core = w->f->core;
	s->ledgers = w->f->ledgers;
	s->n_ledgers = w->f->n_ledgers;
	s->scanned_once = 1;
	/* It has no loop: an input the views send (the retention caught up)
	 * arms no idle slice or timer, as in a store that is stopping. */
	s->closing = 1;
}

static void views_return(world *w, vd_store *s)
{
	w->f->core = s->core;
}

/* Appends the elements of o's list named key, as text, to all. */
static size_t page_elements(json_object *o, const char *key, vd_buf *all)
{
	json_object *list;
	size_t i, n;

	if (o == NULL || !json_object_object_get_ex(o, key, &list) ||
	    !json_object_is_type(list, json_type_array))
		return 0;
	n = json_object_array_length(list);
	for (i = 0; i < n; i++) {
		const char *t = json_object_to_json_string_ext(json_object_array_get_idx(list, i),
		    VD_VIEW_JSON);
		FX_REQUIRE(vd_buf_puts(all, t) == 0 && vd_buf_putc(all, '\n') == 0);
	}
	return n;
}

static int same_buf(const vd_buf *a, const vd_buf *b)
{
	return a->len == b->len && (a->len == 0 || memcmp(a->p, b->p, a->len) == 0);
}

/* Every group's status, its "trusted" the core's one decision. */
static void views_status(world *w, vd_store *s)
{
	json_object *o, *t;
	const vd_copy *c;
	vd_group *g;
	size_t it = 0;
	int rc;

	while (!w->failed && (g = vd_model_next_group(vd_store_model(s), &it)) != NULL) {
		if (vd_view_status(s, g->hash, &o) < 0 || !json_object_object_get_ex(o, "trusted", &t)) {
			violation(w, "the status of %.12s cannot be rendered", g->hash);
			json_object_put(o);
			return;
		}
		if (json_object_get_boolean(t) != vd_group_trusted(g))
			violation(w, "the status of %.12s says trusted %d, the core %d", g->hash,
			    json_object_get_boolean(t), vd_group_trusted(g));
		json_object_put(o);
		rc = vd_view_trusted_copy(s, g->hash, &c);
		if ((rc == 0) != vd_group_trusted(g))
			violation(w, "a trusted copy of %.12s is %s, but the core says trusted %d (%s, state %d)",
			    g->hash, rc == 0 ? "served" : "refused", vd_group_trusted(g),
			    vd_group_untrusted_reason(g) ? vd_group_untrusted_reason(g) : "-",
			    (int)vd_group_state(g));
	}
}

/* GET /artifacts whole against its pages, one after the other. */
static void views_artifacts(world *w, vd_store *s)
{
	vd_buf whole, paged;
	json_object *o, *next;
	char after[VD_HASH_HEX_LEN + 1];
	size_t pages = 0;

	vd_buf_init(&whole);
	vd_buf_init(&paged);
	o = vd_view_artifacts(s, -1, NULL, 0);
	page_elements(o, "artifacts", &whole);
	json_object_put(o);
	after[0] = '\0';
	do {
		o = vd_view_artifacts(s, -1, after[0] ? after : NULL, P_VIEW_PAGE);
		if (o == NULL)
			break;
		page_elements(o, "artifacts", &paged);
		next = NULL;
		if (json_object_object_get_ex(o, "next", &next) && next != NULL)
			snprintf(after, sizeof(after), "%s", json_object_get_string(next));
		json_object_put(o);
	} while (next != NULL && ++pages <= P_IDS + P_SLOTS);
	if (!same_buf(&whole, &paged))
		violation(w, "GET /artifacts read a page at a time differs from it read whole");
	vd_buf_free(&whole);
	vd_buf_free(&paged);
}

/* GET /chain?run= whole against its pages: artifacts and pruned links,
 * each kind in its own order. */
static void views_run(world *w, vd_store *s, const char *run)
{
	vd_buf whole[2], paged[2];
	json_object *o, *next;
	long long after = -1;
	size_t pages = 0;
	int k;

	for (k = 0; k < 2; k++) {
		vd_buf_init(&whole[k]);
		vd_buf_init(&paged[k]);
	}
	o = vd_view_run_chain(s, run, -1, 0);
	page_elements(o, "artifacts", &whole[0]);
	page_elements(o, "pruned", &whole[1]);
	json_object_put(o);
	do {
		if ((o = vd_view_run_chain(s, run, after, P_VIEW_PAGE)) == NULL)
			break;
		page_elements(o, "artifacts", &paged[0]);
		page_elements(o, "pruned", &paged[1]);
		next = NULL;
		if (json_object_object_get_ex(o, "next", &next) && next != NULL)
			after = json_object_get_int64(next);
		json_object_put(o);
	} while (next != NULL && ++pages <= P_IDS + P_SLOTS);
	for (k = 0; k < 2; k++) {
		if (!same_buf(&whole[k], &paged[k]))
			violation(w, "GET /chain?run=%s read a page at a time lists other %s than read whole",
			    run, k == 0 ? "artifacts" : "pruned links");
		vd_buf_free(&whole[k]);
		vd_buf_free(&paged[k]);
	}
}

/* Every route's view of the core's state renders, and agrees with it. */
static void check_views(world *w)
{
	vd_store s;
	vd_buf b;
	int r;

	views_lend(w, &s);
	views_status(w, &s);
	views_artifacts(w, &s);
	for (r = 0; r < P_RUNS; r++)
		views_run(w, &s, p_runs[r]);
	if (vd_view_chain(&s, &b) < 0)
		violation(w, "GET /chain cannot be rendered");
	else
		vd_buf_free(&b);
	views_return(w, &s);
}

static size_t world_step(world *w, unsigned id)
{
	size_t c;
	int commits;

	reseed(w, id + 1);
	/* The process's first whole scan ends: the next refresh is the first
	 * whole pass, in slices when pass_slice is set. */
	if (!w->scanned && rnd(w, P_SCAN_ONE_IN) == 0)
		w->scanned = 1;
	c = rnd(w, (uint32_t)(sizeof(changes) / sizeof(changes[0])));
	commits = changes[c].fn(w);
	/* The retention's slices run when the loop is idle: between any two;
	 * so do the slices of a whole pass. */
	if (rnd(w, 2))
		sim_retain(w, 1 + rnd(w, 3));
	if (vd_core_passing(&w->f->core) && rnd(w, P_PASS_ONE_IN) != 0)
		sim_pass(w, rnd(w, P_PASS_REST_ONE_IN) == 0 ? SIZE_MAX : 1 + rnd(w, P_PASS_SLICE_MAX));
	sim_refresh(w, commits);
	if (vd_core_passing(&w->f->core)) {
		/* A pass under way has computed some groups and left the others
		 * pending, with no head and the alerts of before: lineage from
		 * scratch, the reference's committed and the unsigned records'
		 * trust are for after its end. Until then, only what it reached
		 * may read trusted or committed, and only where the reference
		 * says so. */
		check_passing(w);
	} else {
		compare_with_scratch(w);
		check_reference(w);
		check_unsigned_inert(w);
	}
	if (w->step % P_SETTLE_EVERY == 0)
		check_orders(w, w->f->model);
	if (w->step % P_VIEWS_EVERY == 0)
		check_views(w);
	return c;
}

/* The history ends as the daemon stops: every client still waiting is
 * answered, so that each was answered exactly once or cancelled. */
static void world_end(world *w)
{
	if (!w->failed)
		wait_input(w, VD_CORE_WAIT_FIRE_ALL);
}

/* Runs the steps listed (ids), then the end; the index of the first that
 * fails (the last when the end does), or -1. */
static int replay(unsigned seed, const unsigned *ids, int n, char *why, size_t whylen)
{
	world w;
	int i, at = -1;

	world_start(&w, seed);
	for (i = 0; i < n && at < 0; i++) {
		w.step = (int)ids[i];
		world_step(&w, ids[i]);
		if (w.failed)
			at = i;
	}
	world_end(&w);
	if (at < 0 && w.failed)
		at = n - 1;
	if (at >= 0 && why != NULL)
		snprintf(why, whylen, "%s", w.why);
	fx_free(w.f);
	db_free(&w.db);
	return at;
}

/* Leave out each step in turn while the history still fails. */
static int shorten(unsigned seed, unsigned *ids, int n)
{
	int i, j;

	for (i = n - 2; i >= 0; i--) {
		unsigned drop = ids[i];
		for (j = i; j < n - 1; j++)
			ids[j] = ids[j + 1];
		if (replay(seed, ids, n - 1, NULL, 0) >= 0) {
			n--;
			continue;
		}
		for (j = n - 1; j > i; j--)
			ids[j] = ids[j - 1];
		ids[i] = drop;
	}
	return replay(seed, ids, n, NULL, 0) + 1;
}

static void report(unsigned seed, int steps, int failed_at, const char *why)
{
	unsigned *ids = calloc((size_t)failed_at + 1, sizeof(*ids));
	world w;
	int i, n;

	FX_REQUIRE(ids != NULL);
	for (i = 0; i <= failed_at; i++)
		ids[i] = (unsigned)i;
	n = shorten(seed, ids, failed_at + 1);
	printf("seed %u: invariant violated at step %d: %s\n", seed, failed_at, why);
	printf("  again: vd-sim --seed %u --steps %d\n", seed, steps);
	printf("  a shorter history that still fails (%d of %d steps):\n", n, failed_at + 1);
	world_start(&w, seed);
	for (i = 0; i < n; i++) {
		w.step = (int)ids[i];
		printf("    step %u: %s\n", ids[i], changes[world_step(&w, ids[i])].name);
	}
	if (!w.failed) {
		world_end(&w);
		printf("    then: the daemon stops\n");
	}
	if (w.failed)
		printf("  fails with: %s\n", w.why);
	fx_free(w.f);
	db_free(&w.db);
	free(ids);
}

/* One history: 1 when an invariant was violated. */
/* Refreshes that rebuilt some slots alone (ledgers grown or signed), each
 * compared with slots built from every source. */
static uint64_t in_place_total;

static int run_history(unsigned seed, int steps, unsigned long *total)
{
	world w;
	int failed_at = -1;
	char why[sizeof(w.why)];

	world_start(&w, seed);
	tally.counting = 1;
	for (w.step = 0; w.step < steps && !w.failed; w.step++) {
		world_step(&w, (unsigned)w.step);
		(*total)++;
		if (w.failed)
			failed_at = w.step;
	}
	world_end(&w);
	if (failed_at < 0 && w.failed)
		failed_at = steps - 1;
	tally.counting = 0;
	snprintf(why, sizeof(why), "%s", w.why);
	in_place_total += w.f->core.lineage.in_place;
	fx_free(w.f);
	db_free(&w.db);
	if (failed_at >= 0)
		report(seed, steps, failed_at, why);
	return failed_at >= 0;
}

static int number(const char *arg, unsigned long max, unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(arg, &end, 10);
	return arg[0] >= '0' && arg[0] <= '9' && *end == '\0' && errno == 0 && *out <= max ? 0 : -1;
}

static void usage(void)
{
	fputs("usage: vd-sim [--seeds N] [--seed S] [--steps K]\n"
	    "  --seeds N   histories with seeds 1..N (default " VD_XSTR(SIM_SEEDS_DEFAULT) ")\n"
	    "  --seed S    the one history of seed S\n"
	    "  --steps K   steps in each history (default " VD_XSTR(SIM_STEPS_DEFAULT) ")\n", stderr);
}

int main(int argc, char **argv)
{
	unsigned long seeds = SIM_SEEDS_DEFAULT, first = 1, steps = SIM_STEPS_DEFAULT, total = 0, v;
	unsigned long violations = 0, s;
	int i, k;

	for (i = 1; i < argc; i++) {
		if (i + 1 < argc && strcmp(argv[i], "--seeds") == 0 && number(argv[i + 1], 1000000, &v) == 0)
			seeds = v;
		else if (i + 1 < argc && strcmp(argv[i], "--seed") == 0 && number(argv[i + 1], UINT32_MAX, &v) == 0)
			first = v, seeds = 1;
		else if (i + 1 < argc && strcmp(argv[i], "--steps") == 0 &&
		    number(argv[i + 1], SIM_STEPS_MAX, &v) == 0 && v > 0)
			steps = v;
		else {
			usage();
			return 2;
		}
		i++;
	}
	vd_log_set_level(VD_LOG_ERROR - 1);   /* alerts raised and cleared are not news here */
	for (k = 0; k < N_KEYS; k++)
		if (vd_key_generate(&keys[k]) != 0) {
			fputs("vd-sim: cannot generate a key\n", stderr);
			return 2;
		}
	for (s = first; s < first + seeds; s++)
		violations += (unsigned long)run_history((unsigned)s, (int)steps, &total);
	for (k = 0; k < N_KEYS; k++)
		vd_key_free(keys[k]);
	printf("memory: %lu records persisted, %lu persists failed, %lu restarts (%lu lost a run)\n",
	    tally.persisted, tally.failed, tally.restarts, tally.runs_lost);
	printf("%llu refreshes rebuilt some commitment slots alone\n", (unsigned long long)in_place_total);
	printf("whole passes in slices: %lu begun (%lu in place), %lu slices, %lu ended by a slice of a few chains\n",
	    tally.passes, tally.in_place, tally.slices, tally.sliced_to_end);
	printf("clients: %lu waited, %lu answered ready, %lu timed out, %lu answered at a stop, "
	    "%lu cancelled\n", tally.waited, tally.ready, tally.timed_out, tally.at_stop,
	    tally.cancelled);
	printf("%lu histories, %lu steps, %lu invariant violations\n", seeds, total, violations);
	return violations > 0;
}

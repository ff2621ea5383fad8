#include "config.h"

#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vd_chunks.h"
#include "vd_events.h"
#include "vd_hash.h"
#include "vd_limits.h"
#include "vd_log.h"
#include "vd_memstate.h"
#include "vd_state.h"
#include "vd_store.h"

static void refresh_now(vd_store *s, vd_refresh what);
static void touch(vd_store *s, int commits);
static void on_merge_idle(uv_idle_t *h);
static void scan_path(vd_store *s, const char *relpath);
static void close_step(vd_store *s);

const vd_group *vd_store_group(vd_store *s, const char *hash)
{
	return vd_core_group(&s->core, hash);
}

const vd_copy *vd_store_copy(vd_store *s, const char *relpath)
{
	return vd_core_copy(&s->core, relpath);
}

const vd_model *vd_store_model(vd_store *s)
{
	return vd_core_model(&s->core);
}

const vd_lineage *vd_store_lineage(vd_store *s)
{
	return vd_core_lineage(&s->core);
}

uv_loop_t *vd_store_loop(vd_store *s)
{
	return s->loop;
}

int vd_store_closing(const vd_store *s)
{
	return s->closing;
}

int vd_store_scanned(const vd_store *s)
{
	return s->scanned_once;
}

int vd_store_passing(const vd_store *s)
{
	return vd_core_passing(&s->core) && !vd_lineage_pass_in_place(vd_core_lineage(&s->core));
}

vd_state *vd_store_state(vd_store *s)
{
	return s->state;
}

struct vd_events *vd_store_events(vd_store *s)
{
	return s->events;
}

vd_waiters *vd_store_waiters(vd_store *s)
{
	return &s->waiters;
}

const vd_keyring *vd_store_keys(vd_store *s)
{
	return s->keys;
}

void vd_store_interest(vd_store *s, const char *hash)
{
	vd_sched_interest(&s->sched, hash);
}

int vd_store_verify_now(vd_store *s, const vd_copy *c, uint64_t *gen)
{
	return vd_sched_verify(&s->sched, c->relpath, VD_JOB_EXPLICIT, gen);
}

/* With the hash the header claims, by which the artifact is known. */
static void log_verdict(const vd_copy *c, const vd_job *j)
{
	vd_log_fields f = { .path = c->relpath, .code = vd_code_name(j->verdict.code),
		.run = vd_run_name(c->run), .content_hash = j->hdr.code == VD_OK ?
		j->hdr.content_hash : j->verdict.content_hash[0] ? j->verdict.content_hash : NULL };

	if (j->verdict.code == VD_OK)
		vd_logf(VD_LOG_INFO, &f, "verified %s: %s (%llu tensors, %llu bytes, %.3f s)", c->relpath,
		    j->verdict.content_hash, (unsigned long long)j->verdict.tensors,
		    (unsigned long long)j->verdict.bytes, j->duration);
	else
		vd_logf(VD_LOG_INFO, &f, "verification of %s failed: %s: %s", c->relpath,
		    vd_code_name(j->verdict.code), j->verdict.detail);
}

/* A verdict outlives the process, keyed by the identities it holds for. */
static void persist_verdict(vd_store *s, const vd_copy *c)
{
	vd_stored_verdict v;
	vd_buf blob;

	if (s->state == NULL || !c->verdict_fp.ok)
		return;
	memset(&v, 0, sizeof(v));
	snprintf(v.relpath, sizeof(v.relpath), "%s", c->relpath);
	memcpy(v.fingerprint, c->verdict_fp.digest, sizeof(v.fingerprint));
	v.code = c->code;
	snprintf(v.detail, sizeof(v.detail), "%s", VD_COPY_TEXT(c->detail));
	memcpy(v.content_hash, c->recomputed, sizeof(v.content_hash));
	v.tensors = c->tensors;
	v.bytes = c->bytes;
	v.verified_at = c->verified_at;
	v.duration_ms = c->duration_ms;
	v.facts = c->facts;
	v.oms = c->oms;
	vd_buf_init(&blob);
	if (c->chunks != NULL && c->code == VD_OK && vd_chunkmap_serialize(c->chunks, &blob) == 0) {
		v.chunks = blob.p;
		v.chunks_len = blob.len;
	}
	vd_state_put_verdict(s->state, &v);
	vd_buf_free(&blob);
}

/* A bundle that has just come to commit its copy, in the audit of
 * commitments: a round_close entry of source "oms" by its key, from the
 * bundle's file. The same bundle accepted again (a restart, a key
 * restored on SIGHUP) is a repeat the audit keeps once. */
static void oms_audit(vd_store *s, const vd_copy *c)
{
	char file[PATH_MAX];
	vd_audit a = {
		.run = c->run, .kind = VD_AUDIT_ROUND_CLOSE, .number = c->hdr.round_index - 1,
		.hash = c->hdr.content_hash, .source = vd_commit_source_name(VD_SRC_OMS),
		.author = VD_AUDIT_KEY, .key_id = c->oms->key_id, .peer = "", .file = file,
	};

	/* A tar's bundle lies beside it, a directory's inside. */
	if (snprintf(file, sizeof(file), "%s%s", c->relpath, c->kind == VD_KIND_TAR ?
	    VD_TAR_SIG_SUFFIX : "/" VD_OMS_SIGNATURE_NAME) >= (int)sizeof(file))
		return;
	(void)vd_state_audit_file(s->state, &a);     /* a failure is logged there */
}

static void core_step(vd_store *s, const vd_core_input *in, vd_core_output *out);

/* What the shell says of a job before its copy takes it. */
static void log_job(const vd_copy *c, const vd_job *j)
{
	if (j->rechecked) {
		log_info("re-checked %s chunk by chunk: unchanged (%.3f s)", c->relpath, j->duration);
		return;
	}
	if (j->changed[0])
		log_warn("%s: %s; verifying it in full", c->relpath, j->changed);
	if (j->kind == VD_JOB_SCRUB && j->verdict.code == VD_OK && c->has_verdict)
		log_debug("scrubbed %s: unchanged", c->relpath);
	else
		log_verdict(c, j);
}

/* The job as the core takes it: its results, some moved out of it. */
static void job_result(vd_store *s, vd_job *j, vd_job_result *r)
{
	*r = (vd_job_result){ .id = j->id, .relpath = j->relpath, .kind = j->kind, .gen = j->gen,
		.abandoned = j->abandoned, .verdict = &j->verdict, .fp_before = j->fp_before,
		.fp_after = j->fp_after, .hdr = &j->hdr, .chunks = &j->chunks,
		.rechecked = j->rechecked, .changed = j->changed, .started = j->started,
		.duration = j->duration, .limit = j->limit, .now_ms = uv_now(s->loop),
		.oms_present = j->oms_present, .oms = &j->oms };
}

/* What follows from a job the core judged, or did not, besides the runs
 * the core queued. */
static void after_job(vd_store *s, const vd_copy *c, vd_job *j, const vd_core_output *out)
{
	switch ((vd_job_outcome)out->result) {
	case VD_JOB_GONE:
	case VD_JOB_CHANGED:
		scan_path(s, c->relpath);   /* forgets it, or finds the new one and queues it */
		break;
	case VD_JOB_TIMED_OUT:
	case VD_JOB_JUDGED:
		/* Not judged: a restart verifies it again at once. */
		if (out->result == VD_JOB_TIMED_OUT && out->retry_in > 0)
			log_warn("%s: gave up after %.0f s (max_verify_seconds); verifying it again in %.0f s",
			    c->relpath, j->duration, out->retry_in);
		else if (out->result == VD_JOB_JUDGED)
			persist_verdict(s, c);
		/* A scrub is news only when it finds a copy failed. */
		if (j->kind != VD_JOB_SCRUB || c->code != VD_OK)
			vd_events_verdict(s->events, c);
		break;
	case VD_JOB_DROPPED:
		break;
	}
}

static void on_job_done(vd_job *j, void *arg)
{
	vd_store *s = arg;
	const vd_copy *c = vd_core_copy(&s->core, j->relpath);
	int mine = vd_sched_job(&s->sched, j->relpath) == j, current = c != NULL && mine;
	vd_core_input in = { .kind = VD_CORE_JOB_DONE };
	vd_core_output out;
	vd_job_result r;

	if (j->abandoned == VD_ABANDON_GONE)
		log_info("stopped verifying %s after %.1f s: it was removed or replaced", j->relpath,
		    j->duration);
	else
		vd_metrics_verified(s->metrics, j->verdict.code, j->hashed, j->duration);
	if (current && j->abandoned != VD_ABANDON_GONE)
		log_job(c, j);
	/* The copy's job no more (gone with its copy, or whatever the core
	 * makes of it): a job it queues meanwhile is the copy's from the step
	 * on. */
	if (mine)
		vd_sched_job_ended(&s->sched, j->relpath);
	job_result(s, j, &r);
	in.u.job = &r;
	core_step(s, &in, &out);
	if (out.result != VD_JOB_DROPPED && j->abandoned == VD_ABANDON_NONE && j->oms_present &&
	    !j->oms.verified)
		log_info("%s: its OMS bundle does not verify: %s: %s", c->relpath,
		    vd_oms_code_name(j->oms.code), j->oms.detail);
	if (out.oms_commits_now)
		oms_audit(s, c);
	after_job(s, c, j, &out);
	vd_job_free(j);
	if (out.result != VD_JOB_DROPPED)
		vd_store_touch(s);
	vd_waiters_check(&s->waiters);
}

/* ---- the commitments state machine ------------------------------------ */

static void apply_delta(vd_store *s, const vd_lineage_delta *d);

/* The core's persistence: the state database, once attached. */
static int store_persist(const vd_mem_record *rec, void *arg)
{
	return vd_memstate_persist(rec, ((vd_store *)arg)->state);
}

static void trim_heap(vd_store *s)
{
	uint64_t now = uv_now(s->loop);

	if (now - s->trimmed_at >= VD_TRIM_INTERVAL_MS) {
		s->trimmed_at = now;
		malloc_trim(0);
	}
}

/* What lineage reads besides the memory, as the store has it now. */
static void core_sources(vd_store *s, vd_refresh change)
{
	vd_core_input in = { .kind = VD_CORE_SOURCES };
	vd_core_output out;

	in.u.sources.src = (vd_core_sources){ vd_config_trust(s->cfg), s->keys,
		s->oms_keys, s->ledgers, s->n_ledgers, s->scanned_once,
		{ s->pool ? vd_pool_queued(s->pool) : 0, s->cfg->queue_max, s->pool != NULL } };
	in.u.sources.change = change;
	vd_core_step(&s->core, &in, &out);
}

static void on_retain_idle(uv_idle_t *h);
static void on_pass_idle(uv_idle_t *h);

/* What the core found of a path, said once; a copy gone takes its stored
 * verdict with it. */
static void path_note(vd_store *s, const vd_path_note *n)
{
	const char *where = n->relpath[0] ? n->relpath : ".";

	switch (n->kind) {
	case VD_PATH_UNREADABLE:
		log_warn("cannot read %s: %s", where, n->reason);
		break;
	case VD_PATH_READABLE:
		log_info("%s is readable again", where);
		break;
	case VD_PATH_GONE:
		log_info("%s %s is gone", n->artifact == VD_KIND_TAR ? "tar artifact" :
		    "artifact directory", n->relpath);
		if (s->state)
			vd_state_forget_verdict(s->state, n->relpath);
		if (n->pruned) {
			s->metrics->artifacts_pruned_total++;
			log_info("round %lld (%s, %s) was removed; it stays in its descendants' chains as a pruned link",
			    (long long)n->round, n->relpath, n->hash);
		}
		break;
	}
}
static void on_refresh_timer(uv_timer_t *t);

/* What every output asks of the shell: a refresh's changes logged,
 * recorded and published; the retention's slices scheduled. */
static void core_apply(vd_store *s, const vd_core_output *out)
{
	size_t i;

	if (out->oom)
		log_error("out of memory remembering a commitment; it is stored and counts after a restart");
	for (i = 0; i < out->n_paths; i++)
		path_note(s, &out->paths[i]);
	if (out->delta != NULL) {
		apply_delta(s, out->delta);
		vd_events_lineage(s->events, vd_core_lineage(&s->core), out->delta, vd_core_model(&s->core), s->cfg,
		    out->refreshed != VD_REFRESH_MODEL, s->scanned_once);
		uv_timer_stop(&s->refresh_timer);
		trim_heap(s);
	}
	vd_sched_apply(&s->sched, out);
	if (s->closing)
		return;
	vd_waiters_arm(&s->waiters, out->deadline_ms);
	if (out->retaining)
		uv_idle_start(&s->retain_idle, on_retain_idle);
	else
		uv_idle_stop(&s->retain_idle);
	if (out->passing)
		uv_idle_start(&s->pass_idle, on_pass_idle);
	else
		uv_idle_stop(&s->pass_idle);
}

static void pass_some(vd_store *s, size_t budget);

/* Every input goes in with the sources as they are, and its output is
 * applied before the caller reads it. One that must follow the end of a
 * whole pass in slices (vd_core_pass_first) ends it first, its changes
 * applied as their own. */
static void core_step(vd_store *s, const vd_core_input *in, vd_core_output *out)
{
	if (vd_core_pass_first(&s->core, in->kind))
		pass_some(s, SIZE_MAX);
	core_sources(s, VD_REFRESH_MODEL);
	vd_core_step(&s->core, in, out);
	core_apply(s, out);
}

/* The marks of what changed while the pass went on are caught up as any
 * others, VD_REFRESH_DELAY_MS later. */
static void pass_some(vd_store *s, size_t budget)
{
	vd_core_input in = { .kind = VD_CORE_PASS, .u.budget = budget };
	vd_core_output out;

	core_step(s, &in, &out);
	if (!out.passing && vd_core_dirty(&s->core) && !s->closing &&
	    !uv_is_active((uv_handle_t *)&s->refresh_timer))
		uv_timer_start(&s->refresh_timer, on_refresh_timer, VD_REFRESH_DELAY_MS, 0);
}

/* The events record the commitments of the pass's slots in a turn before
 * its chains: the turn that ends it records the heads only. */
static void on_pass_idle(uv_idle_t *h)
{
	vd_store *s = h->data;

	if (vd_turn_defer(s->turn, &s->pass_put_off) ||
	    vd_events_prime(s->events, vd_core_lineage(&s->core), s->cfg, s->scanned_once))
		return;
	pass_some(s, VD_LINEAGE_PASS_SLICE);
}

static void retain_some(vd_store *s, size_t budget)
{
	vd_core_input in = { .kind = VD_CORE_RETAIN, .u.budget = budget };
	vd_core_output out;

	core_step(s, &in, &out);
}

static void on_retain_idle(uv_idle_t *h)
{
	vd_store *s = h->data;

	if (!vd_turn_defer(s->turn, &s->retain_put_off))
		retain_some(s, VD_RETAIN_SLICE);
}

/* What a whole pass left to remember is remembered at once before the
 * shell reads the memory of retained artifacts: the views, the round
 * check of a statement, the sweep of stored verdicts, and the close. (The
 * core catches up itself before what may change what it remembers from:
 * a copy's removal, a post, a statement, a withdrawal, the next whole
 * pass.) */
static void retain_catch_up(vd_store *s)
{
	if (vd_core_retaining(&s->core))
		retain_some(s, SIZE_MAX);
}

const vd_order *vd_store_retained_order(vd_store *s)
{
	retain_catch_up(s);
	return vd_core_retained_order(&s->core);
}

static const vd_memory *memory(const vd_store *s)
{
	return vd_core_memory(&s->core);
}

/* The last copy of a hash went away: a remembered artifact is pruned (an
 * operator's choice, counted and logged, never an alert). */
static void note_removed(vd_store *s, const char *hash, int64_t round, const char *relpath)
{
	if (vd_core_group(&s->core, hash) != NULL)
		return;
	if (vd_core_is_retained(&s->core, hash)) {
		s->metrics->artifacts_pruned_total++;
		log_info("round %lld (%s, %s) was removed; it stays in its descendants' chains as a pruned link",
		    (long long)round, relpath, hash);
	}
}

typedef struct stored {
	vd_stored_verdict v;
	vd_chunkmap *chunks;
	vd_facts *facts;            /* its own copy of v's, or NULL: most have none */
	vd_oms_status *oms;         /* the same for its bundle */
} stored;

static void free_stored(void *p)
{
	stored *st = p;

	if (st != NULL) {
		vd_chunkmap_free(st->chunks);
		free(st->facts);
		free(st->oms);
		free(st);
	}
}

/* A stored verdict as the core keeps it. */
static const vd_kept_verdict *kept_of(stored *st, vd_kept_verdict *k)
{
	if (st == NULL)
		return NULL;
	*k = (vd_kept_verdict){ .code = st->v.code, .detail = st->v.detail,
		.content_hash = st->v.content_hash, .tensors = st->v.tensors, .bytes = st->v.bytes,
		.verified_at = st->v.verified_at, .duration_ms = st->v.duration_ms,
		.facts = st->facts, .oms = st->oms, .chunks = &st->chunks };
	memcpy(k->fingerprint, st->v.fingerprint, sizeof(k->fingerprint));
	return k;
}

static void merge_artifact(vd_store *s, vd_scan_artifact *a)
{
	stored *st = vd_map_get(&s->stored, a->relpath);
	vd_core_input in = { .kind = VD_CORE_SCANNED };
	vd_kept_verdict kept;
	vd_core_output out;
	const vd_copy *c;

	in.u.scanned.a = a;
	in.u.scanned.kept = kept_of(st, &kept);
	core_step(s, &in, &out);
	if (out.result < 0 || out.result == VD_SCAN_SAME)
		return;
	c = vd_core_copy(&s->core, a->relpath);
	if (out.result == VD_SCAN_NEW)
		log_debug("found %s %s", c->kind == VD_KIND_TAR ? "tar artifact" : "artifact directory",
		    c->relpath);
	/* Written through another link, a file changes without an event in
	 * this directory: only the periodic rescan (ctime) sees it. */
	if (out.linked_now)
		log_warn("%s: %zu file(s) have other hard links; changes made through them are seen at the next rescan (rescan_interval)",
		    c->relpath, c->fp.linked);
	if (st != NULL) {
		if (vd_fingerprint_eq(&c->verdict_fp, &c->fp))
			log_debug("%s unchanged since its stored verdict: not hashed again", c->relpath);
		free_stored(vd_map_del(&s->stored, c->relpath));
	}
}

static int unreadable_covers(const vd_store *s, const char *relpath, int self)
{
	return vd_core_unreadable_covers(&s->core, relpath, self);
}

/* Directories that cannot be opened or searched: each is reported once,
 * at warning, until a scan that looks at it can read it again; a copy
 * there is failed with io_error meanwhile. */
static void merge_unreadable(vd_store *s, vd_scan_result *r)
{
	vd_cover cv = vd_scan_cover(r);
	vd_core_input in = { .kind = VD_CORE_UNREADABLE,
		.u.unreadable = { &cv, r->unreadable, r->n_unreadable } };
	vd_core_output out;

	core_step(s, &in, &out);
	/* Not remembered as unreadable, what is under it would be swept:
	 * nothing is, this time. */
	if (out.result == -ENOMEM) {
		if (!r->incomplete)
			log_warn("out of memory noting an unreadable directory; nothing is taken for removed this time");
		r->incomplete = 1;
	}
}

/* Verdicts stored for directories that are gone since the last run; one
 * under an unreadable directory is kept for when it can be read. A
 * remembered round removed meanwhile is pruned as if the daemon had seen
 * it go: counted and logged once per hash. */
static void prune_stored(vd_store *s)
{
	const vd_retained *r;
	const char *k;
	void *v;
	size_t it = 0;
	vd_map keep, noted;

	retain_catch_up(s);
	vd_map_init(&keep);
	vd_map_init(&noted);
	while (vd_map_next(&s->stored, &it, &k, &v)) {
		const char *hash = ((stored *)v)->v.content_hash;
		if (unreadable_covers(s, k, 0) && vd_map_put(&keep, k, v) == 0)
			continue;
		if ((r = vd_map_get(&memory(s)->retained, hash)) != NULL && vd_map_get(&noted, hash) == NULL &&
		    vd_map_put(&noted, hash, (void *)1) == 0)
			note_removed(s, r->hash, r->round_index, k);
		if (s->state)
			vd_state_forget_verdict(s->state, k);
		free_stored(v);
	}
	vd_map_free(&noted);
	vd_map_free(&s->stored);
	s->stored = keep;
}

/* ---- the append-only memory of ledgers -------------------------------- */

/* What the core found of a ledger, said once. */
static void log_ledger_note(const char *relpath, const vd_core_output *out)
{
	if (out->note == VD_CORE_NOTE_REWRITTEN)
		log_warn("%s was rewritten: %s; keeping the %zu records seen before", relpath,
		    out->detail, out->seen);
	else if (out->note == VD_CORE_NOTE_EXTENDS_AGAIN)
		log_info("%s extends its remembered records again", relpath);
}

/* What a scan read of a ledger: its new records remembered durably, at
 * most *budget of them (taken off it), or the file no longer extending
 * them noted (said once). 0 when records were left for the next turn. */
static int remember_ledger(vd_store *s, const vd_scan_ledger *l, size_t *budget)
{
	vd_core_input in = { .kind = VD_CORE_LEDGER, .u.ledger = { l, *budget } };
	vd_core_output out;

	core_step(s, &in, &out);
	if (out.result == -ENOMEM)
		log_error("out of memory reading %s against its remembered records; read again next scan",
		    l->relpath);
	else if (out.result > 0)
		*budget -= (size_t)out.result;
	/* Not durable: not remembered; read again next scan. */
	log_ledger_note(l->relpath, &out);
	return !out.more;
}

/* The scan's ledgers from merge_pos on, VD_LEDGER_REMEMBER_SLICE new
 * records a turn: each slice is durable, as a file grown between two
 * scans would be. 1 when every one is remembered. */
static int remember_some(vd_store *s, vd_scan_result *r)
{
	size_t budget = VD_LEDGER_REMEMBER_SLICE;

	for (; s->merge_pos < r->n_ledgers; s->merge_pos++)
		if (!remember_ledger(s, &r->ledgers[s->merge_pos], &budget))
			return 0;
	return 1;
}

/* A remembered ledger missing where a complete scan looked was deleted
 * or moved, unless it is under a directory the scan could not read. */
static void remember_ledgers(vd_store *s, vd_scan_result *r)
{
	const char *k;
	void *v;
	vd_map seen, gone;
	size_t i, it = 0;
	int listed = !r->incomplete;

	vd_map_init(&seen);
	vd_map_init(&gone);
	for (i = 0; i < r->n_ledgers; i++)
		if (vd_map_put(&seen, r->ledgers[i].relpath, (void *)1) < 0)
			listed = 0;     /* which are missing is not known */
	while (listed && vd_map_next(&memory(s)->mems, &it, &k, &v))
		if (vd_map_get(&seen, k) == NULL && vd_scan_covers(r, k) && !unreadable_covers(s, k, 0))
			vd_map_put(&gone, k, (void *)1);
	/* Noted after the walk: the memory's map is not changed under it. */
	for (it = 0; vd_map_next(&gone, &it, &k, &v); ) {
		vd_core_input in = { .kind = VD_CORE_LEDGER_GONE, .u.relpath = k };
		vd_core_output out;
		core_step(s, &in, &out);
		log_ledger_note(k, &out);
	}
	vd_map_free(&gone);
	vd_map_free(&seen);
}

const vd_ledger_mem *vd_store_ledger_mem(vd_store *s, const char *relpath)
{
	return vd_memory_ledger(memory(s), relpath);
}

int vd_store_forget_ledger(vd_store *s, const char *relpath)
{
	vd_core_input in = { .kind = VD_CORE_LEDGER_FORGET, .u.relpath = relpath };
	vd_core_output out;

	core_step(s, &in, &out);
	if (out.result < 0)
		return out.result;
	log_warn("forgot the %zu remembered records of %s; re-learning it from the file as it is now",
	    out.seen, relpath);
	vd_store_scan(s);
	return 0;
}

/* ---- signed statements ------------------------------------------------ */

typedef struct env_eval {
	char sha[VD_HASH_HEX_LEN + 1];  /* of the bytes evaluated */
	unsigned keys_gen;
	vd_env_reason reason;
	vd_signed_stmt stmt;            /* key_id: the first signer */
	char signers[VD_DSSE_MAX_SIGS][VD_KEYID_LEN + 1];
	size_t n_signers;
	int seen;
} env_eval;

/* "." names the store root, stored as "". */
static void store_run(const char *run, char *out, size_t n)
{
	snprintf(out, n, "%s", strcmp(run, ".") == 0 ? "" : run);
}

static vd_env_reason verify_signers(vd_store *s, const vd_dsse *env, env_eval *ev,
    char *why, size_t whylen)
{
	const vd_key *signers[VD_DSSE_MAX_SIGS];
	vd_env_reason rc = vd_dsse_verify_all(env, s->keys, signers, VD_DSSE_MAX_SIGS,
	    &ev->n_signers);
	size_t i;

	if (rc != VD_ENV_OK) {
		snprintf(why, whylen, "%s", rc == VD_ENV_BAD_SIGNATURE ?
		    "a trusted key's signature does not verify" : "no signature by a trusted key");
		ev->n_signers = 0;
		return rc;
	}
	for (i = 0; i < ev->n_signers; i++)
		snprintf(ev->signers[i], sizeof(ev->signers[i]), "%s", vd_key_id(signers[i]));
	return VD_ENV_OK;
}

/* A RoundClose naming an artifact of its run whose header says another
 * round commits nothing: an off-by-one cannot block the real round. */
static vd_env_reason check_round(vd_store *s, const vd_signed_stmt *st, char *why, size_t whylen)
{
	int64_t hr;

	retain_catch_up(s);
	if (st->st.kind != VD_STMT_ROUNDCLOSE ||
	    !vd_core_round_mismatch(&s->core, st->run, st->st.round_index, st->st.hash, &hr))
		return VD_ENV_OK;
	snprintf(why, whylen, "the statement commits round %lld to %s, whose header.json says round_index %lld, not %lld",
	    (long long)st->st.round_index, st->st.hash, (long long)hr,
	    (long long)st->st.round_index + 1);
	return VD_ENV_ROUND_MISMATCH;
}

static vd_env_reason evaluate(vd_store *s, const vd_scan_envelope *e, env_eval *ev,
    char *why, size_t whylen)
{
	vd_dsse env;
	vd_env_reason rc;

	if (!e->read_ok) {
		snprintf(why, whylen, "%s", e->read_error);
		return VD_ENV_MALFORMED;
	}
	if ((rc = vd_dsse_parse(e->bytes.p ? e->bytes.p : (const uint8_t *)"", e->bytes.len,
	    &env, why, whylen)) != VD_ENV_OK)
		return rc;
	rc = vd_statement_parse(env.payload_type, env.payload, env.payload_len, &ev->stmt.st,
	    why, whylen);
	if (rc == VD_ENV_OK)
		rc = verify_signers(s, &env, ev, why, whylen);
	vd_dsse_free(&env);
	if (rc != VD_ENV_OK)
		return rc;
	store_run(ev->stmt.st.run, ev->stmt.run, sizeof(ev->stmt.run));
	if (strcmp(ev->stmt.run, e->run) != 0) {
		snprintf(why, whylen, "the statement is for run %s, not for %s where it was found",
		    ev->stmt.st.run, vd_run_name(e->run));
		return VD_ENV_WRONG_RUN;
	}
	snprintf(ev->stmt.key_id, sizeof(ev->stmt.key_id), "%s", ev->signers[0]);
	snprintf(ev->stmt.where, sizeof(ev->stmt.where), "%s", e->relpath);
	return check_round(s, &ev->stmt, why, whylen);
}

int vd_store_round_mismatch(vd_store *s, const char *run, int64_t round, const char *hash,
    int64_t *header_round)
{
	retain_catch_up(s);
	return vd_core_round_mismatch(&s->core, run, round, hash, header_round);
}

/* A file statement accepted is remembered under each of its signers: it
 * counts whatever later happens to the file. */
static void remember_file(vd_store *s, const vd_scan_envelope *e, const env_eval *ev)
{
	const char *keys[VD_DSSE_MAX_SIGS];
	vd_core_input in = { .kind = VD_CORE_STATEMENT, .env = e->bytes.p, .env_len = e->bytes.len };
	vd_core_output out;
	size_t i;

	for (i = 0; i < ev->n_signers; i++)
		keys[i] = ev->signers[i];
	in.u.statement.st = &ev->stmt.st;
	in.u.statement.run = ev->stmt.run;
	in.u.statement.key_ids = keys;
	in.u.statement.n_keys = ev->n_signers;
	in.u.statement.where = e->relpath;
	/* The merge refreshes lineage once it is done (finish_merge). */
	core_step(s, &in, &out);
	if (out.result < 0)
		vd_logf(VD_LOG_ERROR, &(vd_log_fields){ .path = e->relpath },
		    "signed statement %s could not be remembered; it counts until the daemon stops",
		    e->relpath);
}

/* An envelope is evaluated when its bytes or the trusted keys changed;
 * a refusal is logged and counted once. */
static const env_eval *envelope_eval(vd_store *s, const vd_scan_envelope *e)
{
	char sha[VD_HASH_HEX_LEN + 1], why[VD_DETAIL_MAX];
	env_eval *ev = vd_map_get(&s->env_cache, e->relpath);
	vd_env_reason before;
	int again;

	if (vd_sha256_hex(e->bytes.p ? (const char *)e->bytes.p : "", e->bytes.len, sha) < 0)
		return NULL;
	if (ev != NULL && ev->keys_gen == s->keys_gen && strcmp(ev->sha, sha) == 0)
		return ev;
	if (ev == NULL) {
		if ((ev = calloc(1, sizeof(*ev))) == NULL)
			return NULL;
		if (vd_map_put(&s->env_cache, e->relpath, ev) < 0) {
			free(ev);
			return NULL;
		}
	}
	/* The same bytes refused for the same reason under other keys (an old
	 * checkpoint after a key rotation) are not news at every reload. */
	again = strcmp(ev->sha, sha) == 0;
	before = ev->reason;
	memset(ev, 0, sizeof(*ev));
	memcpy(ev->sha, sha, sizeof(ev->sha));
	ev->keys_gen = s->keys_gen;
	ev->reason = evaluate(s, e, ev, why, sizeof(why));
	if (ev->reason != VD_ENV_OK && again && before == ev->reason) {
		vd_logf(VD_LOG_DEBUG, &(vd_log_fields){ .path = e->relpath },
		    "signed statement %s still refused (%s)", e->relpath, vd_env_reason_name(ev->reason));
	} else if (ev->reason != VD_ENV_OK) {
		vd_logf(VD_LOG_WARN, &(vd_log_fields){ .path = e->relpath, .run = vd_run_name(e->run),
		    .code = vd_env_reason_name(ev->reason) }, "signed statement %s refused (%s): %s",
		    e->relpath, vd_env_reason_name(ev->reason), why);
		vd_metrics_envelope_rejected(s->metrics, ev->reason);
	} else {
		vd_logf(VD_LOG_INFO, &(vd_log_fields){ .path = e->relpath, .run = vd_run_name(e->run),
		    .content_hash = ev->stmt.st.kind == VD_STMT_ROUNDCLOSE ? ev->stmt.st.hash : NULL },
		    "signed statement %s accepted: key %s", e->relpath, ev->stmt.key_id);
		vd_state_audit_signed(s->state, &ev->stmt.st, ev->stmt.run, ev->stmt.key_id, NULL,
		    e->relpath);
		remember_file(s, e, ev);
	}
	return ev;
}

/* Envelope files gone where the scan looked are forgotten, a batch at a
 * time (the map cannot change under its iterator). */
static void forget_unseen(vd_store *s, const vd_scan_result *r)
{
	char *gone[64];
	const char *k;
	void *v;
	size_t it, n, i;

	do {
		n = 0;
		it = 0;
		while (n < VD_ARRAY_LEN(gone) && vd_map_next(&s->env_cache, &it, &k, &v))
			if (!((env_eval *)v)->seen && vd_scan_covers(r, k) && (gone[n] = strdup(k)) != NULL)
				n++;
		for (i = 0; i < n; i++) {
			env_eval *ev = vd_map_del(&s->env_cache, gone[i]);
			if (ev != NULL && ev->reason == VD_ENV_OK)
				vd_logf(VD_LOG_INFO, &(vd_log_fields){ .path = gone[i] },
				    "signed statement %s is gone; what it committed is remembered (withdraw it with DELETE /commitment)",
				    gone[i]);
			free(ev);
			free(gone[i]);
		}
	} while (n == VD_ARRAY_LEN(gone));
}

/* Every envelope file is evaluated when it changed; those accepted are
 * remembered (remember_file), so a file gone changes nothing. */
static void merge_envelopes(vd_store *s, vd_scan_result *r)
{
	const env_eval *ev;
	const char *k;
	void *v;
	size_t i, it = 0;

	while (vd_map_next(&s->env_cache, &it, &k, &v))
		((env_eval *)v)->seen = 0;
	for (i = 0; i < r->n_envelopes; i++)
		if ((ev = envelope_eval(s, &r->envelopes[i])) != NULL)
			((env_eval *)ev)->seen = 1;
	/* Under an unreadable directory a statement file is unknown, not gone. */
	for (it = 0; vd_map_next(&s->env_cache, &it, &k, &v); )
		if (!((env_eval *)v)->seen && unreadable_covers(s, k, 0))
			((env_eval *)v)->seen = 1;
	forget_unseen(s, r);
}

void vd_store_set_keys(vd_store *s, vd_keyring *keys)
{
	vd_keyring_unref(s->keys);
	s->keys = keys ? vd_keyring_ref(keys) : NULL;
	s->keys_gen++;
	vd_store_refresh(s);
	/* Envelopes are judged when a scan is merged: only those of a merge
	 * already done are judged again (at start the first is under way). */
	if (s->scanned_once)
		vd_store_scan(s);
}

void vd_store_set_oms_keys(vd_store *s, vd_omskeys *keys)
{
	const vd_copy *c;
	size_t it = 0;

	vd_omskeys_unref(s->oms_keys);
	s->oms_keys = vd_omskeys_ref(keys);
	while ((c = vd_model_next_copy(vd_core_model(&s->core), &it)) != NULL)
		if (vd_oms_stale(c, s->oms_keys))
			vd_sched_verify(&s->sched, c->relpath, VD_JOB_BACKGROUND, NULL);
	/* A bundle checked under the old keys commits nothing meanwhile. */
	vd_store_refresh(s);
}

/* Directories in walk order: a directory before what is in it, names in
 * byte order (so '/' sorts first). */
static int walk_order(const char *a, const char *b)
{
	const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;

	for (; *x && *x == *y; x++, y++)
		;
	if (*x == *y)
		return 0;
	return (*x == '/' ? 1 : *x) - (*y == '/' ? 1 : *y);
}

static int ledger_run_cmp(const void *a, const void *b)
{
	return walk_order(((const vd_scan_ledger *)a)->run, ((const vd_scan_ledger *)b)->run);
}

/* A ledger the scan did not reach (under an unreadable directory, missed
 * by an incomplete scan, or where a targeted one did not look) stays
 * listed as it was last read, in its place: what the commitment sources
 * say does not change. */
/* Among the first n ledgers the scan listed; out of memory for a map. */
static int ledger_listed(const vd_scan_result *r, size_t n, const char *relpath)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(r->ledgers[i].relpath, relpath) == 0)
			return 1;
	return 0;
}

static void carry_ledgers(vd_store *s, vd_scan_result *r)
{
	vd_scan_ledger *arr;
	vd_map now;
	size_t i, scanned = r->n_ledgers;
	int mapped = 1, listed;

	vd_map_init(&now);
	for (i = 0; i < scanned && mapped; i++)
		mapped = vd_map_put(&now, r->ledgers[i].relpath, (void *)1) == 0;
	for (i = 0; i < s->n_ledgers; i++) {
		vd_scan_ledger *l = &s->ledgers[i];
		listed = mapped ? vd_map_get(&now, l->relpath) != NULL :
		    ledger_listed(r, scanned, l->relpath);
		if (listed || (vd_scan_covers(r, l->relpath) && !unreadable_covers(s, l->relpath, 0)))
			continue;
		if ((arr = vd_grow(r->ledgers, &r->cap_ledgers, r->n_ledgers, sizeof(*arr))) == NULL)
			break;
		r->ledgers = arr;
		arr[r->n_ledgers++] = *l;
		memset(l, 0, sizeof(*l));     /* moved */
	}
	vd_map_free(&now);
	/* In walk order, whatever order a scan of changes listed them in. */
	if (r->n_ledgers > 1)
		qsort(r->ledgers, r->n_ledgers, sizeof(*r->ledgers), ledger_run_cmp);
}

static void merge_ledgers(vd_store *s, vd_scan_result *r)
{
	size_t i;

	remember_ledgers(s, r);
	carry_ledgers(s, r);
	for (i = 0; i < s->n_ledgers; i++)
		vd_scan_ledger_free(&s->ledgers[i]);
	free(s->ledgers);
	s->ledgers = r->ledgers;
	s->n_ledgers = r->n_ledgers;
	r->ledgers = NULL;
	r->n_ledgers = r->cap_ledgers = 0;
	/* Remembered now: the entries of an intact ledger are the memory's
	 * records; those of a broken one show where it broke (/chain). */
	for (i = 0; i < s->n_ledgers; i++) {
		vd_scan_ledger *l = &s->ledgers[i];
		if (l->read_ok && l->result.brk == VD_LEDGER_INTACT) {
			free(l->entries);
			l->entries = NULL;
			l->n_entries = l->cap_entries = 0;
		}
	}
}

/* Copies gone where the scan looked, as the core decides. */
static void sweep(vd_store *s, const vd_scan_result *r)
{
	vd_cover cv = vd_scan_cover(r);
	vd_core_input in = { .kind = VD_CORE_SWEEP, .u.cover = &cv };
	vd_core_output out;

	core_step(s, &in, &out);
}

static int commitments_dir(const char *relpath)
{
	const char *base = strrchr(relpath, '/');

	return strcmp(base ? base + 1 : relpath, VD_COMMITMENTS_DIR) == 0;
}

/* Every directory walked can hold a run, but an artifact directory and a
 * run's commitments directory. A run the scan could not reach (under or
 * at an unreadable directory, or where it did not look) stays known; an
 * incomplete scan only adds. */
static void merge_runs(vd_store *s, vd_scan_result *r)
{
	const char *k;
	void *v;
	size_t i, it = 0;
	vd_map now;

	vd_map_init(&now);
	for (i = 0; i < r->n_dirs; i++)
		if (vd_core_copy(&s->core, r->dirs[i]) == NULL && !commitments_dir(r->dirs[i]) &&
		    vd_map_put(&now, r->dirs[i], (void *)1) < 0)
			goto keep_all;
	while (vd_map_next(&s->runs, &it, &k, &v))
		if ((!vd_scan_covers(r, k) || unreadable_covers(s, k, 1)) && vd_map_get(&now, k) == NULL &&
		    vd_map_put(&now, k, (void *)1) < 0)
			goto keep_all;
	vd_map_free(&s->runs);
	s->runs = now;
	return;
keep_all:
	/* Out of memory: the runs known stand, and those the scan found. */
	vd_map_free(&now);
	for (i = 0; i < r->n_dirs; i++)
		if (vd_core_copy(&s->core, r->dirs[i]) == NULL && !commitments_dir(r->dirs[i]))
			vd_map_put(&s->runs, r->dirs[i], (void *)1);
}

static int pin_names(const vd_pin *pins, size_t n, const char *run)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(pins[i].run, run) == 0)
			return 1;
	return 0;
}

/* A run the configuration names (a genesis_hash, anchor or
 * run_token_file entry; "*" names none) before its directory exists. */
static int config_names_run(const vd_config *cfg, const char *run)
{
	size_t i;

	if (strcmp(run, "*") == 0)
		return 0;
	if (pin_names(cfg->genesis, cfg->n_genesis, run) || pin_names(cfg->anchors, cfg->n_anchors, run))
		return 1;
	for (i = 0; i < cfg->n_run_tokens; i++)
		if (strcmp(cfg->run_tokens[i].run, run) == 0)
			return 1;
	return 0;
}

/* A run directory seen by a scan, or a run the configuration names; never
 * an artifact directory or a commitments directory (and, not seen as a
 * directory, never a file, a FIFO or a symbolic link of the store). */
int vd_store_run_known(vd_store *s, const char *run)
{
	if (vd_core_copy(&s->core, run) != NULL || commitments_dir(run))
		return 0;
	return vd_map_get(&s->runs, run) != NULL || config_names_run(s->cfg, run);
}

static void scan_thread(uv_work_t *req)
{
	vd_store *s = req->data;

	if (s->scan_changes.whole)
		vd_scan_store(s->root, s->scan_depth, &s->scan_bounds, &s->scan_result);
	else
		vd_scan_changes(s->root, s->scan_depth, &s->scan_bounds, s->scan_changes.v,
		    s->scan_changes.n, s->scan_room, &s->scan_result);
}

static void scan_request(vd_store *s);

static void scan_done(vd_store *s)
{
	s->merging = 0;
	vd_scan_result_free(&s->scan_result);
	vd_changes_free(&s->scan_changes);
	if (s->scan_again) {
		s->scan_again = 0;
		scan_request(s);
	}
}

static uint64_t mem_sig(const vd_ledger_mem *m)
{
	uint64_t h = vd_fnv_str(VD_FNV_BASIS, m->relpath);
	size_t i;

	h = vd_fnv(h, &m->n, sizeof(m->n));
	h = vd_fnv(h, &m->rewritten, sizeof(m->rewritten));
	h = vd_fnv_str(h, m->detail);
	if (m->n > 0)
		h = vd_fnv_str(h, m->recs[m->n - 1].record_hash);
	for (i = 0; i < m->n_diverged; i++) {
		h = vd_fnv(h, &m->diverged[i].round_index, sizeof(m->diverged[i].round_index));
		h = vd_fnv_str(h, m->diverged[i].hash);
	}
	return h;
}

/* What the commitment sources a scan reads (ledgers, their memory, signed
 * statements) say: when a scan leaves it as it was, lineage catches up
 * with the artifacts alone, without a whole pass. */
static uint64_t commit_sources_sig(const vd_store *s)
{
	uint64_t h = VD_FNV_BASIS, mems = 0;
	const char *k;
	void *v;
	size_t i, it = 0;

	for (i = 0; i < s->n_ledgers; i++) {
		const vd_scan_ledger *l = &s->ledgers[i];
		h = vd_fnv_str(h, l->relpath);
		h = vd_fnv(h, &l->read_ok, sizeof(l->read_ok));
		h = vd_fnv(h, &l->result.brk, sizeof(l->result.brk));
		h = vd_fnv_str(h, l->read_error);
		h = vd_fnv_str(h, l->result.break_detail);
	}
	while (vd_map_next(&memory(s)->mems, &it, &k, &v))
		mems ^= mem_sig(v);       /* in any order */
	h = vd_fnv(h, &mems, sizeof(mems));
	for (i = 0; i < memory(s)->n_stmts; i++) {
		const vd_signed_stmt *st = &memory(s)->stmts[i];
		h = vd_fnv_str(h, st->where);
		h = vd_fnv_str(h, st->key_id);
		h = vd_fnv_str(h, st->run);
		h = vd_fnv(h, &st->st.kind, sizeof(st->st.kind));
		h = vd_fnv(h, &st->st.round_index, sizeof(st->st.round_index));
		h = vd_fnv_str(h, st->st.hash);
		h = vd_fnv(h, &st->st.records, sizeof(st->st.records));
		h = vd_fnv_str(h, st->st.head_record_hash);
	}
	return h;
}

static int watch_covers(void *arg, const char *dir)
{
	return vd_scan_covers(&((vd_store *)arg)->scan_result, dir);
}

static const char *dir_path(const void *dir)
{
	return dir;
}

static int watch_each_covered(void *arg, const vd_order *dirs, void (*fn)(void *, void *),
    void *fnarg)
{
	return vd_scan_each_covered(&((vd_store *)arg)->scan_result, dirs, dir_path, fn, fnarg);
}

static void watch_added(void *arg, const char *dir)
{
	vd_store *s = arg;

	vd_changes_add(&s->changes, dir, "");
	s->scan_again = 1;
}

/* The steps of a merge, each in turns of its own: on a store of many
 * thousand rounds no one turn holds the loop for all of it. */
enum {
	MERGE_ARTIFACTS,     /* VD_MERGE_SLICE artifacts a turn */
	MERGE_GONE,          /* what could not be read, and what is gone */
	MERGE_LEDGERS,       /* the ledgers' new records, VD_LEDGER_REMEMBER_SLICE a turn */
	MERGE_WATCHES,       /* the directories' watches, VD_WATCH_SLICE a turn */
	MERGE_RUNS,          /* the run directories known, in one turn */
	MERGE_SOURCES,       /* the commitment sources and lineage, in one turn */
	MERGE_DONE           /* the scan's result freed, in one turn */
};

static int merge_artifacts(vd_store *s, vd_scan_result *r)
{
	uint64_t until = uv_hrtime() + VD_MERGE_SLICE_MS * 1000000ull;
	size_t end = s->merge_next + VD_MERGE_SLICE;

	if (end > r->n_artifacts)
		end = r->n_artifacts;
	while (s->merge_next < end) {
		merge_artifact(s, &r->artifacts[s->merge_next++]);
		if (uv_hrtime() >= until)
			break;
	}
	return s->merge_next == r->n_artifacts;
}

static void merge_gone(vd_store *s, vd_scan_result *r)
{
	merge_unreadable(s, r);
	if (!r->incomplete)
		sweep(s, r);
	if (!s->scanned_once && !r->incomplete && !r->targeted)
		prune_stored(s);
}

/* A file written into a new directory before its watch was added raised
 * no event: one more scan of it finds it now, not at the next
 * rescan_interval. The scan's directories are watched a slice a turn,
 * then the stale watches dropped. */
static int watch_some(vd_store *s, vd_scan_result *r)
{
	vd_watch_scope scope = { watch_covers, watch_each_covered,
		s->scanned_once ? watch_added : NULL, s };

	if (!s->watch_passing) {
		vd_watch_pass_begin(&s->watch_pass);
		s->watch_passing = 1;
	}
	if (!vd_watch_pass_some(&s->watch, &s->watch_pass, r->dirs, r->n_dirs, &scope,
	    VD_WATCH_SLICE))
		return 0;
	s->watch_passing = 0;
	return 1;
}

/* The sources and lineage change in the same turn: slots point into the
 * sources (a statement's file name), which a merge may free. */
static void merge_sources(vd_store *s)
{
	uint64_t sig;
	vd_scan_result *r = &s->scan_result;

	merge_ledgers(s, r);
	merge_envelopes(s, r);
	s->last_scan = vd_wall_now();
	s->scanned_once = 1;
	if ((sig = commit_sources_sig(s)) != s->commit_sig) {
		s->commit_sig = sig;
		touch(s, 1);
	}
	refresh_now(s, VD_REFRESH_MODEL);
	vd_waiters_check(&s->waiters);
}

/* Merged: the result is freed a turn later (a first pass over a large
 * store goes on in slices of its own meanwhile). */
static void finish_merge(vd_store *s)
{
	scan_done(s);
	malloc_trim(0);
}

/* One turn's part of the merge; the next part runs a turn later, clients
 * answered between them. */
static void merge_more(vd_store *s)
{
	vd_scan_result *r = &s->scan_result;
	int done = 1;

	switch (s->merge_step) {
	case MERGE_ARTIFACTS:
		done = merge_artifacts(s, r);
		break;
	case MERGE_GONE:
		merge_gone(s, r);
		break;
	case MERGE_LEDGERS:
		done = remember_some(s, r);
		break;
	case MERGE_WATCHES:
		done = watch_some(s, r);
		break;
	case MERGE_RUNS:
		merge_runs(s, r);
		break;
	case MERGE_SOURCES:
		merge_sources(s);
		break;
	default:
		uv_idle_stop(&s->merge_idle);
		finish_merge(s);
		return;
	}
	if (done) {
		s->merge_step++;
		s->merge_pos = 0;
	}
	/* Not a timer of 0 ms: libuv runs one started in a timer callback
	 * again in the same turn, and the whole merge would be one turn. An
	 * idle handle runs once a turn, and the loop polls without waiting. */
	uv_idle_start(&s->merge_idle, on_merge_idle);
}

static void on_merge_idle(uv_idle_t *h)
{
	vd_store *s = h->data;

	if (!vd_turn_defer(s->turn, &s->merge_put_off))
		merge_more(s);
}

/* The core forgets which copies the scan covers it has seen: the sweep
 * reads what the merge finds again. */
static void unsee(vd_store *s, const vd_scan_result *r)
{
	vd_cover cv = vd_scan_cover(r);
	vd_core_input in = { .kind = VD_CORE_SCAN_BEGIN, .u.cover = &cv };
	vd_core_output out;

	core_step(s, &in, &out);
}

static void after_scan(uv_work_t *req, int status)
{
	vd_store *s = req->data;
	vd_scan_result *r = &s->scan_result;

	s->scanning = 0;
	s->merging = 1;
	if (s->closing) {
		s->merging = 0;
		vd_scan_result_free(r);
		close_step(s);
		return;
	}
	if (!r->root_ok) {
		if (s->root_ok || !s->scanned_once)
			log_error("%s; keeping the last known state until it is back", r->root_error);
		s->root_ok = 0;
		scan_done(s);
		return;
	}
	if (!s->root_ok && s->scanned_once)
		log_info("the store %s is back", s->cfg->store);
	s->root_ok = 1;
	if (r->truncated && !r->targeted)
		log_warn("the store holds more than %d artifacts; the rest are ignored",
		    VD_SCAN_MAX_ARTIFACTS);
	/* A partial walk proves nothing gone: its sweep is skipped and every
	 * known verdict kept until a complete one. A targeted one is followed
	 * by a whole one, which records what it could not read. */
	if (r->incomplete && r->targeted) {
		log_debug("a scan of what changed was incomplete (%s); scanning the whole store",
		    r->incomplete_why);
		vd_changes_whole(&s->changes);
		s->scan_again = 1;
	} else if (r->incomplete) {
		log_warn("the store scan was incomplete (%s); nothing it missed is taken for removed",
		    r->incomplete_why);
	}
	unsee(s, r);
	s->merge_next = s->merge_pos = 0;
	s->merge_step = MERGE_ARTIFACTS;
	merge_more(s);
}

/* A scan now, or right after the one under way: of the places the
 * changes noted name, or of the whole store (always the first time). */
static void scan_request(vd_store *s)
{
	int whole;

	if (s->closing)
		return;
	if (s->scanning || s->merging) {
		s->scan_again = 1;
		return;
	}
	whole = !s->scanned_once || s->changes.whole ||
	    vd_model_copy_count(vd_core_model(&s->core)) >= VD_SCAN_MAX_ARTIFACTS;
	if (!whole && s->changes.n == 0)
		return;
	vd_changes_take(&s->changes, &s->scan_changes);
	if (whole)
		vd_changes_whole(&s->scan_changes);
	s->scan_room = VD_SCAN_MAX_ARTIFACTS - vd_model_copy_count(vd_core_model(&s->core));
	vd_metrics_scan(s->metrics, whole);
	s->scanning = 1;
	s->scan_depth = s->cfg->scan_depth;
	s->scan_bounds.max_tensors = s->cfg->max_tensors;
	s->scan_bounds.max_job_memory = s->cfg->max_job_memory;
	s->scan_bounds.max_artifact_bytes = s->cfg->max_artifact_bytes;
	s->scan_work.data = s;
	if (uv_queue_work(s->loop, &s->scan_work, scan_thread, after_scan) < 0) {
		s->scanning = 0;
		vd_changes_free(&s->scan_changes);
		vd_changes_whole(&s->changes);
	}
}

void vd_store_scan(vd_store *s)
{
	vd_changes_whole(&s->changes);
	scan_request(s);
}

/* A scan of one artifact's path (one a job or a client named). */
static void scan_path(vd_store *s, const char *relpath)
{
	const char *slash = strrchr(relpath, '/');
	char dir[PATH_MAX];

	if (slash == NULL) {
		vd_changes_add(&s->changes, "", relpath);
	} else if ((size_t)(slash - relpath) >= sizeof(dir)) {
		vd_changes_whole(&s->changes);
	} else {
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - relpath), relpath);
		vd_changes_add(&s->changes, dir, slash + 1);
	}
	scan_request(s);
}

static void on_debounce(uv_timer_t *t)
{
	vd_store *s = t->data;

	s->first_event_ms = 0;
	scan_request(s);
}

/* Coalesce bursts of events into one scan, but never wait forever. */
static void on_fs_event(void *arg, const char *dir, const char *name, int overflow)
{
	vd_store *s = arg;
	uint64_t now = uv_now(s->loop);

	log_debug("change in %s%s%s", dir[0] ? dir : ".", name[0] ? "/" : "", name);
	if (overflow || (dir[0] == '\0' && name[0] == '\0'))
		vd_changes_whole(&s->changes);
	else
		vd_changes_add(&s->changes, dir, name);
	if (s->first_event_ms == 0)
		s->first_event_ms = now;
	if (overflow || now - s->first_event_ms >= VD_SCAN_SETTLE_MAX_MS) {
		uv_timer_stop(&s->debounce);
		on_debounce(&s->debounce);
		return;
	}
	uv_timer_start(&s->debounce, on_debounce, s->cfg->debounce_ms, 0);
}

static void on_rescan(uv_timer_t *t)
{
	vd_store_scan(t->data);
}

const vd_copy *vd_store_adopt(vd_store *s, const char *relpath, vd_artifact_kind kind)
{
	vd_core_input in = { .kind = VD_CORE_ADOPT, .u.adopt = { relpath, kind } };
	vd_core_output out;

	core_step(s, &in, &out);
	if (out.result == VD_SCAN_NEW)
		scan_path(s, relpath);      /* fills in its header */
	return vd_core_copy(&s->core, relpath);
}

/* ---- durable state --------------------------------------------------- */

static void load_verdict(const vd_stored_verdict *v, void *arg)
{
	vd_store *s = arg;
	stored *copy = calloc(1, sizeof(*copy));

	if (copy == NULL)
		return;
	copy->v = *v;
	copy->v.chunks = NULL;
	copy->v.facts = NULL;
	copy->v.oms = NULL;
	if (v->chunks != NULL && v->code == VD_OK)
		copy->chunks = vd_chunkmap_parse(v->chunks, v->chunks_len);
	if (v->facts != NULL && (copy->facts = malloc(sizeof(*copy->facts))) != NULL)
		*copy->facts = *v->facts;
	if (v->oms != NULL && (copy->oms = malloc(sizeof(*copy->oms))) != NULL)
		*copy->oms = *v->oms;
	free_stored(vd_map_del(&s->stored, v->relpath));
	if (vd_map_put(&s->stored, v->relpath, copy) < 0)
		free_stored(copy);
}

int vd_store_attach_state(vd_store *s, vd_state *st, char *err, size_t errlen)
{
	vd_core_input in = { .kind = VD_CORE_RESTORE };
	vd_core_output out;
	vd_memory loaded;
	const vd_memory *m = memory(s);
	int rc;

	s->state = st;
	vd_memory_init(&loaded);
	if ((rc = vd_state_load_verdicts(st, load_verdict, s, err, errlen)) < 0 ||
	    (rc = vd_memstate_load(st, &loaded, err, errlen)) < 0) {
		vd_memory_free(&loaded);
		return rc;
	}
	in.u.restore = &loaded;
	core_step(s, &in, &out);
	vd_memory_free(&loaded);
	log_info("state: %zu stored verdicts, %zu posted commitments, %zu posted checkpoints, %zu remembered statement signatures, %zu withdrawn commitments, %zu remembered ledgers",
	    s->stored.count, m->n_posted, m->n_posted_stmts, m->n_stmts - m->n_posted_stmts,
	    m->withdrawn.count, m->mems.count);
	s->events = vd_events_new(s->loop, s->cfg, st);
	vd_store_scan(s);
	return 0;
}

int vd_store_post_commitment(vd_store *s, const char *run, int64_t round,
    const char *hash, int64_t schema_version, const char *const *key_ids, size_t n_keys,
    const uint8_t *env, size_t env_len, const vd_audit *audit, char *existing_hash)
{
	vd_core_input in = { .kind = VD_CORE_POST, .env = env, .env_len = env_len, .audit = audit };
	vd_core_output out;
	vd_commitment c;

	memset(&c, 0, sizeof(c));
	snprintf(c.run, sizeof(c.run), "%s", run);
	c.round_index = round;
	memcpy(c.hash, hash, sizeof(c.hash));
	c.schema_version = schema_version;
	snprintf(c.key_id, sizeof(c.key_id), "%s", n_keys > 0 ? key_ids[0] : "");
	in.u.post.c = &c;
	in.u.post.key_ids = key_ids;
	in.u.post.n_keys = n_keys;
	core_step(s, &in, &out);
	memcpy(existing_hash, out.existing, sizeof(out.existing));
	return out.result;
}

int vd_store_post_checkpoint(vd_store *s, const vd_statement *st, const char *const *key_ids,
    size_t n_keys, const uint8_t *env, size_t env_len, const vd_audit *audit)
{
	vd_core_input in = { .kind = VD_CORE_CHECKPOINT, .env = env, .env_len = env_len,
		.audit = audit };
	vd_core_output out;

	if (s->state == NULL)
		return -EIO;
	in.u.checkpoint.st = st;
	in.u.checkpoint.key_ids = key_ids;
	in.u.checkpoint.n_keys = n_keys;
	core_step(s, &in, &out);
	return out.result;
}

/* ---- withdrawals by the operator (trust.md section 8) --------------- */

int vd_store_withdraw(vd_store *s, vd_withdrawal *w)
{
	vd_core_input in = { .kind = VD_CORE_WITHDRAW };
	vd_core_output out;
	vd_audit a = {
		.run = w->run, .kind = VD_AUDIT_WITHDRAWAL, .number = w->round_index,
		.hash = w->hash, .source = w->sources, .author = VD_AUDIT_OPERATOR, .key_id = "",
		.peer = w->peer,
	};

	in.u.withdraw.w = w;
	in.u.withdraw.now = vd_wall_now();
	in.audit = &a;
	core_step(s, &in, &out);
	return out.result;
}

static void on_refresh_timer(uv_timer_t *t)
{
	vd_store *s = t->data;

	if (vd_core_dirty(&s->core))
		refresh_now(s, VD_REFRESH_MODEL);
}

/* ---- the alert history ------------------------------------------------ */

/* The alert history follows the alerts counted in /metrics: a write the
 * database refused, or a batch it lost, is written again once it takes
 * writes, in the order the alerts changed. */
static void write_alerts(vd_store *s)
{
	const vd_alert_change *a;
	int rc;

	if (s->alerts_written == 0)
		s->alerts_failures = vd_state_failures(s->state);
	while (s->alerts_written < s->n_unsaved) {
		a = &s->unsaved[s->alerts_written];
		rc = a->kind < 0 ? vd_state_alerts_settle(s->state) :
		    vd_state_alert(s->state, vd_alert_name((vd_alert_kind)a->kind), a->subject,
		    a->detail, a->raised);
		if (rc < 0)
			break;
		s->alerts_written++;
	}
}

static void on_alerts_timer(uv_timer_t *t)
{
	write_alerts(t->data);
}

/* One more write for the history; written at once when nothing waits. */
static void save_alert(vd_store *s, int kind, const char *subject, const char *detail,
    int raised)
{
	vd_alert_change *grown, *a;

	if (s->state == NULL)
		return;
	if ((grown = vd_grow(s->unsaved, &s->cap_unsaved, s->n_unsaved, sizeof(*grown))) == NULL)
		goto direct;
	s->unsaved = grown;
	a = &s->unsaved[s->n_unsaved];
	a->kind = kind;
	a->raised = raised;
	a->subject = subject ? strdup(subject) : NULL;
	a->detail = detail ? strdup(detail) : NULL;
	if ((subject && a->subject == NULL) || (detail && a->detail == NULL)) {
		free(a->subject);
		free(a->detail);
		goto direct;
	}
	s->n_unsaved++;
	write_alerts(s);
	return;
direct:
	/* Out of memory: written once, as it comes. */
	if (kind < 0)
		vd_state_alerts_settle(s->state);
	else
		vd_state_alert(s->state, vd_alert_name((vd_alert_kind)kind), subject, detail, raised);
}

/* The batch was committed (rc 0, and no write failed meanwhile): the
 * writes in it are done. Else every one is written again. */
static void alerts_flushed(vd_store *s, int rc)
{
	size_t i, done = s->alerts_written;

	if (s->n_unsaved == 0)
		return;
	if (rc < 0 || vd_state_failures(s->state) != s->alerts_failures)
		done = 0;
	for (i = 0; i < done; i++) {
		free(s->unsaved[i].subject);
		free(s->unsaved[i].detail);
	}
	memmove(s->unsaved, s->unsaved + done, (s->n_unsaved - done) * sizeof(*s->unsaved));
	s->n_unsaved -= done;
	s->alerts_written = 0;
	s->alerts_failures = vd_state_failures(s->state);
	if (s->n_unsaved > 0 && !s->closing && !uv_is_active((uv_handle_t *)&s->alerts_timer))
		uv_timer_start(&s->alerts_timer, on_alerts_timer, VD_ALERT_RETRY_MS, 0);
}

/* After the I/O callbacks of a turn and before the loop sleeps: what the
 * turn wrote to the state database is committed in one transaction. */
static void on_flush_check(uv_check_t *h)
{
	vd_store *s = h->data;

	alerts_flushed(s, vd_state_flush(s->state));
}

static void on_flush_prepare(uv_prepare_t *h)
{
	vd_store *s = h->data;

	alerts_flushed(s, vd_state_flush(s->state));
}

/* The fields of an alert's log line: its subject is a content hash, a
 * path in the store, or a run's round (equivocation). */
static vd_log_fields alert_fields(const vd_alert_change *a, const char *kind)
{
	vd_log_fields f = { .kind = kind };

	if (vd_is_hex64((vd_str){ a->subject, strlen(a->subject) }))
		f.content_hash = a->subject;
	else if (a->kind != VD_ALERT_EQUIVOCATION)
		f.path = a->subject;
	return f;
}

/* What a refresh changed, in the order it changed: each alert logged,
 * recorded in the history and published once when raised and once when
 * cleared. */
static void apply_delta(vd_store *s, const vd_lineage_delta *d)
{
	const vd_alert_change *a;
	const char *kind;
	vd_log_fields f;
	size_t i;

	if (d->fallback != NULL)
		log_warn("lineage: recomputing every chain (%s)", d->fallback);
	for (i = 0; i < d->n_alerts; i++) {
		a = &d->alerts[i];
		kind = vd_alert_name((vd_alert_kind)a->kind);
		f = alert_fields(a, kind);
		if (a->raised)
			vd_logf(VD_LOG_WARN, &f, "alert raised: %s: %s", kind, a->detail);
		else
			vd_logf(VD_LOG_INFO, &f, "alert cleared: %s: %s", kind, a->subject);
		save_alert(s, a->kind, a->subject, a->detail, a->raised);
		vd_events_alert(s->events, kind, a->subject, a->detail, a->raised);
	}
	if (d->settled)
		save_alert(s, -1, NULL, NULL, 0);
	if (!d->whole)
		log_debug("lineage: %zu hash(es) looked at, %zu chain(s) recomputed", d->n_looked,
		    d->n_touched);
}

static void touch(vd_store *s, int commits)
{
	vd_core_input in = { .kind = VD_CORE_TOUCH, .u.commits = commits };
	vd_core_output out;

	vd_core_step(&s->core, &in, &out);
	if (!s->closing && !uv_is_active((uv_handle_t *)&s->refresh_timer))
		uv_timer_start(&s->refresh_timer, on_refresh_timer, VD_REFRESH_DELAY_MS, 0);
}

void vd_store_touch(vd_store *s)
{
	touch(s, 0);
}

void vd_store_sync(vd_store *s)
{
	if (vd_core_dirty(&s->core))
		refresh_now(s, VD_REFRESH_MODEL);
}

void vd_store_refresh(vd_store *s)
{
	refresh_now(s, VD_REFRESH_COMMITS);
}

static void refresh_now(vd_store *s, vd_refresh what)
{
	vd_core_input in = { .kind = VD_CORE_REFRESH, .u.refresh = what };
	vd_core_output out;

	core_step(s, &in, &out);
}

/* ---- life cycle ------------------------------------------------------- */

void vd_store_gauges(vd_store *s, vd_gauges *g)
{
	const vd_copy *c;
	size_t it = 0;

	while ((c = vd_model_next_copy(vd_core_model(&s->core), &it)) != NULL)
		g->artifacts[vd_copy_state(c)]++;
	memcpy(g->alerts, vd_lineage_alert_counts(vd_core_lineage(&s->core)), sizeof(g->alerts));
	memcpy(g->commitments, vd_lineage_series(vd_core_lineage(&s->core)), sizeof(g->commitments));
	g->committed_head_round = vd_lineage_head(vd_core_lineage(&s->core), NULL, NULL);
	g->state_ok = vd_state_ok(s->state);
	g->state_write_failures = vd_state_failures(s->state);
	if (s->pool != NULL) {
		g->queue_depth = vd_pool_queued(s->pool);
		g->workers_busy = vd_pool_busy(s->pool);
		g->workers = vd_pool_threads(s->pool);
		vd_pool_progress(s->pool, &g->hashing_bytes, &g->hashing_yields);
	}
	g->last_scan = s->last_scan;
	g->unreadable_dirs = vd_core_unreadable_count(&s->core);
	g->last_scrub = s->sched.last_scrub;
}

/* CPUs this process may run on (affinity, cgroup quota); unlike counting
 * /proc/stat it works under systemd's ProcSubset=pid. */
static unsigned default_workers(void)
{
	unsigned n = uv_available_parallelism();

	return n > 0 ? n : 1;
}

/* What the schedule and the waiters see of the store. */
static vd_pool *sched_pool(void *arg)
{
	return ((vd_store *)arg)->pool;
}

static const vd_config *sched_config(void *arg)
{
	return ((vd_store *)arg)->cfg;
}

static vd_omskeys *sched_oms_keys(void *arg)
{
	return ((vd_store *)arg)->oms_keys;
}

static void store_step(void *arg, const vd_core_input *in, vd_core_output *out)
{
	core_step(arg, in, out);
}

/* An answer reports trust: lineage catches up first. Until the store has
 * been scanned whole and while a pass over the chains goes on in slices,
 * the waiters hold their answers (vd_waiters.h): ending the pass in one
 * turn would hold the loop. */
static void waited_catch_up(void *arg)
{
	vd_store_sync(arg);
}

static vd_settling waited_settling(void *arg)
{
	vd_store *s = arg;

	if (!s->scanned_once)
		return VD_UNSCANNED;
	return vd_core_passing(&s->core) ? VD_PASSING : VD_SETTLED;
}

int vd_store_init(vd_store *s, uv_loop_t *loop, const vd_turn *turn, const vd_config *cfg,
    vd_metrics *metrics)
{
	int rc;

	memset(s, 0, sizeof(*s));
	s->loop = loop;
	s->turn = turn;
	s->cfg = cfg;
	s->metrics = metrics;
	s->root_ok = 1;
	vd_core_init(&s->core, store_persist, s);
	vd_core_slice_passes(&s->core, VD_LINEAGE_PASS_SLICE);
	core_sources(s, VD_REFRESH_MODEL);    /* the model is read from the first input on */
	vd_map_init(&s->env_cache);
	vd_map_init(&s->stored);
	vd_map_init(&s->runs);
	if ((s->root = strdup(cfg->store)) == NULL)
		return -ENOMEM;
	rc = vd_pool_new(loop, cfg->workers ? cfg->workers : default_workers(), s->root,
	    on_job_done, s, &s->pool);
	if (rc < 0) {
		free(s->root);
		return rc;
	}
	vd_pool_pace(s->pool, turn);
	if ((rc = vd_watch_init(&s->watch, loop, cfg->store, on_fs_event, s)) < 0)
		log_warn("inotify is unavailable (%s); relying on the periodic rescan",
		    uv_strerror(rc));
	uv_timer_init(loop, &s->debounce);
	uv_timer_init(loop, &s->rescan);
	s->debounce.data = s->rescan.data = s;
	uv_timer_start(&s->rescan, on_rescan, (uint64_t)cfg->rescan_interval * 1000,
	    (uint64_t)cfg->rescan_interval * 1000);
	uv_timer_init(loop, &s->refresh_timer);
	s->refresh_timer.data = s;
	uv_timer_init(loop, &s->alerts_timer);
	s->alerts_timer.data = s;
	uv_idle_init(loop, &s->merge_idle);
	s->merge_idle.data = s;
	uv_idle_init(loop, &s->retain_idle);
	s->retain_idle.data = s;
	uv_idle_init(loop, &s->pass_idle);
	s->pass_idle.data = s;
	uv_check_init(loop, &s->flush_check);
	uv_prepare_init(loop, &s->flush_prepare);
	s->flush_check.data = s->flush_prepare.data = s;
	uv_check_start(&s->flush_check, on_flush_check);
	uv_prepare_start(&s->flush_prepare, on_flush_prepare);
	vd_sched_init(&s->sched, loop, &(vd_sched_env){ sched_pool, sched_config,
	    sched_oms_keys, store_step, s });
	vd_waiters_init(&s->waiters, loop, &s->core, &(vd_waiters_env){ store_step,
	    waited_catch_up, waited_settling, s });
	vd_waiters_pace(&s->waiters, turn);
	return 0;
}

void vd_store_set_config(vd_store *s, const vd_config *cfg)
{
	s->cfg = cfg;
	uv_timer_start(&s->rescan, on_rescan, (uint64_t)cfg->rescan_interval * 1000,
	    (uint64_t)cfg->rescan_interval * 1000);
	vd_sched_arm_scrub(&s->sched);
	vd_events_set_config(s->events, cfg);
	/* Pins and policies may have changed: every chain is looked at. */
	refresh_now(s, VD_REFRESH_WHOLE);
}

static void free_all(vd_store *s)
{
	const char *k;
	void *v;
	size_t it = 0, i;

	if (s->merging)
		vd_scan_result_free(&s->scan_result);
	if (s->watch_passing)
		vd_watch_pass_free(&s->watch_pass);
	vd_changes_free(&s->changes);
	vd_changes_free(&s->scan_changes);
	vd_waiters_free(&s->waiters);     /* its waiters are the core's */
	vd_core_free(&s->core);
	vd_sched_free(&s->sched);
	for (i = 0; i < s->n_unsaved; i++) {
		free(s->unsaved[i].subject);
		free(s->unsaved[i].detail);
	}
	free(s->unsaved);
	while (vd_map_next(&s->env_cache, &it, &k, &v))
		free(v);
	vd_map_free(&s->env_cache);
	vd_keyring_unref(s->keys);
	vd_omskeys_unref(s->oms_keys);
	for (i = 0; i < s->n_ledgers; i++)
		vd_scan_ledger_free(&s->ledgers[i]);
	free(s->ledgers);
	free(s->root);
	it = 0;
	while (vd_map_next(&s->stored, &it, &k, &v))
		free_stored(v);
	vd_map_free(&s->stored);
	vd_map_free(&s->runs);
}

/* The store is freed once its timers are closed and no scan runs. */
static void close_step(vd_store *s)
{
	if (--s->handles_open == 0) {
		free_all(s);
		if (s->on_closed)
			s->on_closed(s->closed_arg);
	}
}

static void handle_closed(uv_handle_t *h)
{
	close_step(h->data);
}

void vd_store_close(vd_store *s, void (*done)(void *), void *arg)
{
	s->closing = 1;
	s->on_closed = done;
	s->closed_arg = arg;
	vd_events_close(s->events);  /* its streams end as the HTTP server stops */
	s->events = NULL;
	vd_waiters_fire_all(&s->waiters);
	vd_pool_stop(s->pool, s->cfg->shutdown_grace * 1000);
	s->pool = NULL;             /* freed once its handle closes */
	vd_watch_close(&s->watch);
	if (vd_core_passing(&s->core))
		pass_some(s, SIZE_MAX);
	retain_catch_up(s);
	vd_state_flush(s->state);
	s->handles_open = 9 + (s->scanning ? 1 : 0);
	s->handles_open += vd_sched_close(&s->sched, handle_closed, s);
	s->handles_open += vd_waiters_close(&s->waiters, handle_closed, s);
	uv_close((uv_handle_t *)&s->merge_idle, handle_closed);
	uv_close((uv_handle_t *)&s->retain_idle, handle_closed);
	uv_close((uv_handle_t *)&s->pass_idle, handle_closed);
	uv_close((uv_handle_t *)&s->flush_check, handle_closed);
	uv_close((uv_handle_t *)&s->flush_prepare, handle_closed);
	uv_close((uv_handle_t *)&s->refresh_timer, handle_closed);
	uv_close((uv_handle_t *)&s->alerts_timer, handle_closed);
	uv_close((uv_handle_t *)&s->debounce, handle_closed);
	uv_close((uv_handle_t *)&s->rescan, handle_closed);
}

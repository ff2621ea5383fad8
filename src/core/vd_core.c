/* The commitments state machine (vd_core.h). */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vd_chunks.h"
#include "vd_core.h"
#include "vd_omsruns.h"
#include "vd_util.h"

void vd_core_init(vd_core *c, vd_mem_persist_fn persist, void *arg)
{
	memset(c, 0, sizeof(*c));
	vd_memory_init(&c->mem);
	vd_lineage_init(&c->lineage);
	vd_lineage_delta_init(&c->delta);
	vd_waitset_init(&c->waiters);
	vd_model_init(&c->model);
	vd_map_init(&c->unreadable);
	vd_plan_init(&c->plan, &c->model);
	c->persist = persist;
	c->persist_arg = arg;
}

void vd_core_slice_passes(vd_core *c, size_t chains)
{
	c->pass_slice = chains;
}

static void paths_clear(vd_core *c);

void vd_core_free(vd_core *c)
{
	vd_lineage_delta_free(&c->delta);
	vd_lineage_free(&c->lineage);
	vd_memory_free(&c->mem);
	free(c->retain_q);
	vd_waitset_free(&c->waiters);
	free(c->answered);
	vd_plan_free(&c->plan);
	vd_retries_free(&c->retries);
	vd_scrub_end(&c->scrub);
	vd_model_free(&c->model);
	vd_map_free(&c->unreadable);
	paths_clear(c);
	free(c->paths);
	memset(c, 0, sizeof(*c));
}

/* Durable, then applied: -EIO when it could not be made durable (the
 * memory is as it was). Applying may run out of memory after the record
 * is durable: it counts from the next start. */
static int commit(vd_core *c, const vd_mem_record *rec, vd_core_output *out)
{
	int rc = vd_memory_commit(&c->mem, rec, c->persist, c->persist_arg);

	if (rc == -ENOMEM)
		out->oom = 1;
	return rc == -EIO ? -EIO : 0;
}

/* ---- retention ---------------------------------------------------------- */

/* An artifact verified and committed is remembered (once), so that its
 * descendants' chains pass through it after its directory is removed. */
static void retain_group(vd_core *c, const vd_group *g, vd_core_output *out)
{
	const vd_copy *cp = NULL;
	vd_mem_record rec;
	vd_retained r;
	size_t i;

	if (!g->committed || vd_map_get(&c->mem.retained, g->hash) != NULL)
		return;
	for (i = 0; i < g->n && cp == NULL; i++)
		if (vd_copy_settled(g->copies[i]) == VD_AS_VERIFIED)
			cp = g->copies[i];
	if (cp == NULL)
		return;
	memset(&r, 0, sizeof(r));
	memcpy(r.hash, g->hash, sizeof(r.hash));
	r.run = cp->run;
	r.round_index = g->round_index;
	r.has_parent = g->has_parent;
	memcpy(r.parent, g->parent, sizeof(r.parent));
	r.verified_at = cp->verified_at;
	if (vd_memory_retain(&c->mem, &r, &rec) == VD_POST_NEW)
		(void)commit(c, &rec, out);     /* not durable: tried at its next refresh */
}

/* A group is looked at as it is when its turn comes: only verdicts and
 * new copies change in between, and one whose verified copy failed
 * meanwhile is not remembered, as a pass after the failure would not. */
static void retain_list(vd_core *c, vd_core_output *out);

static void retain_more(vd_core *c, size_t budget, vd_core_output *out)
{
	const vd_group *g;

	if (c->retain_unlisted)
		retain_list(c, out);
	while (c->retain_next < c->n_retain_q && budget-- > 0)
		if ((g = vd_model_group(&c->model, c->retain_q[c->retain_next++])) != NULL)
			retain_group(c, g, out);
	if (c->retain_next == c->n_retain_q)
		c->n_retain_q = c->retain_next = 0;
}

/* What a whole pass left is remembered before anything reads the memory
 * of retained artifacts or may change what it is taken from. */
static void catch_up(vd_core *c, vd_core_output *out)
{
	if (c->retain_unlisted || c->retain_next < c->n_retain_q)
		retain_more(c, SIZE_MAX, out);
}

/* Every committed group not yet remembered, listed. Only a refresh
 * changes which groups are committed, and every input that changes the
 * memory or removes a group catches up first: listed at the next
 * VD_CORE_RETAIN, the list is the pass's. Out of memory for it, a group
 * is remembered at once. */
static void retain_list(vd_core *c, vd_core_output *out)
{
	vd_group *g;
	void *grown;
	size_t it = 0;

	c->retain_unlisted = 0;
	while ((g = vd_model_next_group(&c->model, &it)) != NULL) {
		if (!g->committed || vd_map_get(&c->mem.retained, g->hash) != NULL)
			continue;
		grown = vd_grow(c->retain_q, &c->cap_retain_q, c->n_retain_q, sizeof(*c->retain_q));
		if (grown == NULL) {
			retain_group(c, g, out);
			continue;
		}
		c->retain_q = grown;
		memcpy(c->retain_q[c->n_retain_q++], g->hash, sizeof(*c->retain_q));
	}
}

/* A whole pass: every committed group not yet remembered is remembered
 * VD_RETAIN_SLICE an input from the next VD_CORE_RETAIN on (the first pass
 * over a store of 16,000 rounds commits them all at once, and its turn is
 * long enough without the list). What the last whole pass left is listed
 * again rather than remembered now: a group is looked at as it is when its
 * turn comes, so the list of this pass holds what that one's would still
 * remember, and a pass right after the first (the verdicts that came in
 * meanwhile) does not remember thousands in one turn. */
static void retain_all(vd_core *c)
{
	c->n_retain_q = c->retain_next = 0;
	c->retain_unlisted = 1;
}

static void retain_committed(vd_core *c, const vd_lineage_delta *d, vd_core_output *out)
{
	size_t i;

	if (d->whole) {
		retain_all(c);
		return;
	}
	for (i = 0; i < d->n_touched; i++)
		retain_group(c, d->touched[i], out);
}

/* ---- lineage ------------------------------------------------------------ */

static void lineage_input(vd_core *c, vd_lineage_input *in)
{
	memset(in, 0, sizeof(*in));
	in->model = &c->model;
	in->policy = c->src.policy;
	in->keys = c->src.keys;
	in->ledgers = c->src.ledgers;
	in->n_ledgers = c->src.n_ledgers;
	vd_lineage_input_memory(in, &c->mem);
	in->scanned = c->src.scanned;
	in->oms_keys = c->src.oms_keys;
	in->slice = c->pass_slice;
}

/* What a whole pass left to remember need not be remembered first: the
 * groups listed have copies, and lineage reads the memory of an artifact
 * only where no copy of it is in the run (a copy's removal catches up);
 * a group listed is looked at as it is when its slice comes. A pass in
 * slices clears the marks when it begins: what changes while it goes on
 * is marked again, for the refresh after it, which a refresh of the model
 * alone waits for. */
static void refresh(vd_core *c, vd_refresh what, vd_core_output *out)
{
	vd_lineage_input in;

	if (vd_lineage_passing(&c->lineage) && what == VD_REFRESH_MODEL && !c->commits_dirty &&
	    !c->whole_dirty) {
		lineage_input(c, &in);
		if (!vd_lineage_pass_changed(&c->lineage, &in))
			return;
	}
	if (c->whole_dirty)
		what = VD_REFRESH_WHOLE;
	else if (what == VD_REFRESH_MODEL && c->commits_dirty)
		what = VD_REFRESH_COMMITS;
	lineage_input(c, &in);
	vd_lineage_refresh(&c->lineage, &in, what, &c->delta);
	vd_model_clear_dirty(&c->model);
	c->model_dirty = c->commits_dirty = c->whole_dirty = 0;
	if (vd_lineage_passing(&c->lineage)) {
		c->pass_what = what;
		return;
	}
	out->delta = &c->delta;
	out->refreshed = what;
	retain_committed(c, &c->delta, out);
}

/* More of the pass under way; at its end, its changes as a refresh's.
 * None under way, the marks left by the last are caught up. What changed
 * since the last slice is taken in first, as a catch-up would: the last
 * slice names the head from every chain, and none may be from before a
 * verdict already in. */
static void pass_more(vd_core *c, size_t budget, vd_core_output *out)
{
	vd_lineage_input in;

	if (vd_core_dirty(c))
		refresh(c, VD_REFRESH_MODEL, out);
	if (!vd_lineage_passing(&c->lineage))
		return;
	lineage_input(c, &in);
	in.slice = budget == SIZE_MAX ? 0 : budget;
	if (!vd_lineage_pass(&c->lineage, &in, &c->delta))
		return;
	out->delta = &c->delta;
	out->refreshed = c->pass_what;
	retain_committed(c, &c->delta, out);
}

/* ---- posts -------------------------------------------------------------- */

/* The statement a signed RoundClose post is. */
static void posted_statement(vd_statement *st, const vd_commitment *cm)
{
	memset(st, 0, sizeof(*st));
	st->kind = VD_STMT_ROUNDCLOSE;
	snprintf(st->run, sizeof(st->run), "%s", cm->run[0] ? cm->run : ".");
	st->schema_version = cm->schema_version;
	st->round_index = cm->round_index;
	memcpy(st->hash, cm->hash, sizeof(st->hash));
}

static void post(vd_core *c, const vd_core_input *in, vd_core_output *out)
{
	const vd_commitment *cm = in->u.post.c;
	vd_statement st;
	vd_mem_record rec;
	int rc;

	catch_up(c, out);
	rc = vd_memory_post(&c->mem, cm, vd_lineage_strong_other(&c->lineage, cm->run,
	    cm->round_index, cm->hash), &rec, out->existing);
	posted_statement(&st, cm);
	vd_memory_post_signers(&c->mem, &st, cm->run, in->u.post.key_ids, in->u.post.n_keys, &rec);
	rec.env = in->env;
	rec.env_len = in->env_len;
	rec.audit = rc == VD_POST_CONFLICT ? NULL : in->audit;
	out->result = commit(c, &rec, out) < 0 ? -EIO : rc;
	vd_mem_record_free(&rec);
	if (out->result >= 0)
		refresh(c, VD_REFRESH_COMMITS, out);
}

static void checkpoint(vd_core *c, const vd_core_input *in, vd_core_output *out)
{
	const vd_statement *st = in->u.checkpoint.st;
	vd_mem_record rec;
	int rc;

	catch_up(c, out);
	if (in->u.checkpoint.n_keys == 0) {
		out->result = -EINVAL;
		return;
	}
	rc = vd_memory_post_checkpoint(&c->mem, st, in->u.checkpoint.key_ids[0], &rec);
	vd_memory_post_signers(&c->mem, st, st->run, in->u.checkpoint.key_ids,
	    in->u.checkpoint.n_keys, &rec);
	out->result = rc;
	if (rec.kind != VD_MEM_NONE) {
		rec.env = in->env;
		rec.env_len = in->env_len;
		rec.audit = rc == VD_POST_NEW ? in->audit : NULL;
		if (commit(c, &rec, out) < 0)
			out->result = -EIO;
		else
			refresh(c, VD_REFRESH_COMMITS, out);
	}
	vd_mem_record_free(&rec);
}

/* A statement accepted from a file is remembered under each of its
 * signers: it counts whatever later happens to the file. Lineage catches
 * up with the next refresh (a scan's merge ends with one). */
static void statement(vd_core *c, const vd_core_input *in, vd_core_output *out)
{
	vd_mem_record rec;
	size_t i;
	int added = 0;

	catch_up(c, out);
	for (i = 0; i < in->u.statement.n_keys; i++) {
		if (vd_memory_remember(&c->mem, in->u.statement.st, in->u.statement.run,
		    in->u.statement.key_ids[i], in->u.statement.where, &rec) == VD_POST_KNOWN)
			continue;
		rec.env = in->env;
		rec.env_len = in->env_len;
		if (commit(c, &rec, out) < 0) {
			out->result = -EIO;
			return;
		}
		added++;
	}
	out->result = added;
}

/* ---- withdrawals by the operator (trust.md section 8) ------------------ */

static void add_source(char *list, size_t n, const char *name)
{
	size_t len = strlen(list);

	if (strstr(list, name) == NULL)
		snprintf(list + len, n - len, "%s%s", len ? "," : "", name);
}

/* Whether a copy's OMS bundle commits (run, round) -> hash. */
static int oms_names(const vd_core *c, const vd_withdrawal *w)
{
	const vd_copy *cp;
	size_t it = 0;

	while ((cp = vd_model_next_copy(&c->model, &it)) != NULL)
		if (vd_oms_commits(cp, c->src.oms_keys) && cp->hdr.round_index - 1 == w->round_index &&
		    strcmp(cp->run, w->run) == 0 && strcmp(cp->hdr.content_hash, w->hash) == 0)
			return 1;
	return 0;
}

static void withdraw(vd_core *c, const vd_core_input *in, vd_core_output *out)
{
	vd_withdrawal *w = in->u.withdraw.w;
	vd_mem_record rec;
	unsigned named;
	int rc;

	catch_up(c, out);
	named = vd_memory_sources(&c->mem, w->run, w->round_index, w->hash);
	w->sources[0] = '\0';
	if (named & VD_MEM_NAMED_TOKEN)
		add_source(w->sources, sizeof(w->sources), vd_commit_source_name(VD_SRC_ROUNDCLOSE));
	if (named & VD_MEM_NAMED_SIGNED)
		add_source(w->sources, sizeof(w->sources), vd_commit_source_name(VD_SRC_SIGNED));
	if (named & VD_MEM_NAMED_LEDGER)
		add_source(w->sources, sizeof(w->sources), vd_commit_source_name(VD_SRC_LEDGER));
	if (oms_names(c, w))
		add_source(w->sources, sizeof(w->sources), vd_commit_source_name(VD_SRC_OMS));
	if ((rc = vd_memory_withdraw(&c->mem, w, in->u.withdraw.now, &rec)) != VD_POST_NEW) {
		out->result = rc;
		return;
	}
	w->at = rec.w.at;
	rec.audit = in->audit;
	if (commit(c, &rec, out) < 0) {
		out->result = -EIO;
		return;
	}
	out->result = VD_POST_NEW;
	refresh(c, VD_REFRESH_COMMITS, out);
}

/* ---- the append-only memory of ledgers ---------------------------------- */

/* Said once: a ledger newly diverged, or diverged elsewhere than before. */
static void note_diverged(const vd_ledger_mem *m, const vd_mem_record *rec, vd_core_output *out)
{
	if (rec->kind != VD_MEM_LEDGER_DIVERGED)
		return;
	if (m != NULL && m->rewritten && strcmp(m->detail, rec->detail) == 0)
		return;
	out->note = VD_CORE_NOTE_REWRITTEN;
	out->seen = m ? m->n : 0;
	snprintf(out->detail, sizeof(out->detail), "%s", rec->detail);
}

/* A ledger as a scan read it: at most budget new records remembered
 * durably (out->more when it holds further ones), or the file no longer
 * extending them noted. A record not durable is read again next scan. */
static void ledger(vd_core *c, const vd_core_input *in, vd_core_output *out)
{
	const vd_scan_ledger *l = in->u.ledger.l;
	const vd_ledger_mem *m = vd_memory_ledger(&c->mem, l->relpath);
	int was_rewritten = m != NULL && m->rewritten;
	vd_mem_record rec;

	if (vd_memory_read_ledger_some(&c->mem, l, in->u.ledger.budget, &rec, &out->more) < 0) {
		vd_mem_record_free(&rec);
		out->result = -ENOMEM;
		out->more = 0;
		return;
	}
	note_diverged(m, &rec, out);
	out->result = (int)(rec.kind == VD_MEM_LEDGER_APPEND ? rec.n : 0);
	if (commit(c, &rec, out) < 0) {
		out->result = -EIO;
		out->more = 0;
	} else if (rec.kind == VD_MEM_LEDGER_APPEND && was_rewritten) {
		out->note = VD_CORE_NOTE_EXTENDS_AGAIN;
	}
	/* What the memory commits changed now, not when the scan's sources
	 * are merged: a reader's catch-up in between must see it. */
	if (rec.kind != VD_MEM_NONE)
		c->commits_dirty = 1;
	vd_mem_record_free(&rec);
}

static void ledger_gone(vd_core *c, const char *relpath, vd_core_output *out)
{
	const vd_ledger_mem *m = vd_memory_ledger(&c->mem, relpath);
	vd_mem_record rec;

	vd_memory_ledger_gone(&c->mem, relpath, &rec);
	note_diverged(m, &rec, out);
	out->result = commit(c, &rec, out);
	if (rec.kind != VD_MEM_NONE)
		c->commits_dirty = 1;
	vd_mem_record_free(&rec);
}

static void forget(vd_core *c, const char *relpath, vd_core_output *out)
{
	vd_mem_record rec;
	size_t n;

	if (vd_memory_forget_ledger(&c->mem, relpath, &rec) < 0) {
		out->result = -ENOENT;
		return;
	}
	n = vd_memory_ledger(&c->mem, relpath)->n;
	out->result = commit(c, &rec, out);
	vd_mem_record_free(&rec);
	if (out->result < 0)
		return;
	out->note = VD_CORE_NOTE_FORGOTTEN;
	out->seen = n;
	refresh(c, VD_REFRESH_COMMITS, out);
}

/* ---- verification jobs ---------------------------------------------------- */

/* The verifier's facts; a failure reached without it (the artifact
 * could not be opened) gets its remediation here. */
static void record_facts(vd_copy *cp, const vd_verdict *verdict)
{
	vd_verdict v;

	if (verdict->code == VD_OK || verdict->facts.remediation[0] != '\0') {
		vd_copy_facts(cp, &verdict->facts);
		return;
	}
	v = *verdict;
	vd_verdict_remediate(&v);
	vd_copy_facts(cp, &v.facts);
}

static void record_verdict(vd_copy *cp, const vd_job_result *r)
{
	cp->has_verdict = 1;
	cp->code = r->verdict->code;
	vd_copy_text(&cp->detail, r->verdict->detail);
	memcpy(cp->recomputed, r->verdict->content_hash, sizeof(cp->recomputed));
	cp->tensors = r->verdict->tensors;
	cp->bytes = r->verdict->bytes;
	cp->verified_at = r->started + r->duration;
	cp->duration_ms = r->duration * 1000.0;
	cp->verdict_fp = r->fp_before;
	record_facts(cp, r->verdict);
	vd_chunkmap_free(cp->chunks);
	cp->chunks = NULL;
	if (r->verdict->code == VD_OK && r->chunks != NULL) {
		cp->chunks = *r->chunks;
		*r->chunks = NULL;
	}
}

/* The worker read header.json too: a directory adopted before any scan,
 * or a header rewritten since, is indexed by what it claims now. */
static void take_header(vd_model *m, vd_copy *cp, vd_hdrinfo *hdr)
{
	if (hdr == NULL || (cp->hdr.code == hdr->code &&
	    strcmp(cp->hdr.content_hash, hdr->content_hash) == 0))
		return;
	vd_model_unindex(m, cp);
	vd_hdrinfo_free(&cp->hdr);
	cp->hdr = *hdr;
	memset(hdr, 0, sizeof(*hdr));
	vd_model_index(m, cp);
}

/* What cp's bundle commits, as text: a change of it changes the
 * commitments, not only the model. */
static void oms_sig(const vd_core *c, const vd_copy *cp, char *out, size_t n)
{
	if (!vd_oms_commits(cp, c->src.oms_keys))
		snprintf(out, n, "-");
	else
		snprintf(out, n, "%s %lld %s", cp->hdr.content_hash, (long long)cp->hdr.round_index,
		    cp->oms->key_id);
}

/* A verification came back: its copy takes what it found, and lineage
 * looks at the copy again. */
static void job_done(vd_core *c, const vd_job_result *r, vd_core_output *out)
{
	char before[VD_HASH_HEX_LEN + VD_KEYID_LEN + 32], after[sizeof(before)];
	vd_model *m = &c->model;
	vd_copy *cp = vd_model_copy(m, r->relpath);

	out->result = VD_JOB_DROPPED;
	if (cp == NULL || vd_plan_returned(&c->plan, cp, r->id) < 0)
		return;
	c->model_dirty = 1;
	out->result = VD_JOB_GONE;
	if (r->abandoned == VD_ABANDON_GONE) {
		cp->fp.ok = 0;
		return;
	}
	oms_sig(c, cp, before, sizeof(before));
	cp->timeouts = r->abandoned == VD_ABANDON_TIME ? cp->timeouts + 1 : 0;
	vd_model_touch(m, cp);
	if (r->abandoned == VD_ABANDON_NONE)
		vd_copy_oms(cp, r->oms_present ? r->oms : NULL);
	if (r->rechecked) {
		cp->verdict_fp = r->fp_before;
		cp->verified_at = r->started + r->duration;
		cp->duration_ms = r->duration * 1000.0;
	} else {
		vd_copy_text(&cp->changed, r->changed);
		record_verdict(cp, r);
	}
	if (!cp->fp.ok)
		cp->fp = r->fp_before;
	take_header(m, cp, r->hdr);
	oms_sig(c, cp, after, sizeof(after));
	if (strcmp(before, after) != 0) {
		c->commits_dirty = 1;
		out->oms_commits_now = vd_oms_commits(cp, c->src.oms_keys);
	}
	/* Bytes that changed under the hash: the verdict describes nothing on
	 * disk, so whoever waits for this run waits for the next one. */
	if (!vd_fingerprint_eq(&r->fp_before, &r->fp_after)) {
		cp->fp = r->fp_after;
		out->result = VD_JOB_CHANGED;
		return;
	}
	cp->done_gen = r->gen;
	out->result = r->abandoned == VD_ABANDON_TIME ? VD_JOB_TIMED_OUT : VD_JOB_JUDGED;
}

static void scrub_next(vd_core *c, vd_core_output *out);

/* A job that cannot finish must not hold a worker again and again: it is
 * tried again later, later each time (out of memory, the next restart or
 * change verifies it). */
static void retry_later(vd_core *c, const vd_copy *cp, const vd_job_result *r,
    vd_core_output *out)
{
	double delay = vd_plan_retry_delay(r->limit, cp->timeouts);

	if (vd_retries_add(&c->retries, cp->relpath, r->now_ms + (uint64_t)(delay * 1000)) == 0)
		out->retry_in = delay;
}

/* What follows from a job: out of time, it is retried later; its bytes
 * changed under it, it runs again (answering what its run was to answer);
 * a run booked meanwhile goes on; and the queue has room for the backlog.
 * A copy gone or replaced is the shell's to scan (its scan verifies what
 * it finds). */
static void job_follow(vd_core *c, const vd_job_result *r, vd_core_output *out)
{
	vd_copy *cp = vd_model_copy(&c->model, r->relpath);

	if (out->result != VD_JOB_DROPPED) {
		if (out->result == VD_JOB_TIMED_OUT)
			retry_later(c, cp, r, out);
		/* A scrub that found its copy changed hands it to background
		 * work: the pass goes on at its own pace, one job at a time. */
		if (out->result == VD_JOB_CHANGED)
			vd_plan_follow_up(&c->plan, cp, r->kind == VD_JOB_SCRUB ? VD_JOB_BACKGROUND :
			    r->kind, r->gen);
		else if ((out->result == VD_JOB_JUDGED || out->result == VD_JOB_TIMED_OUT) && cp->again)
			vd_plan_follow_up(&c->plan, cp, cp->again_kind, cp->again_gen);
	}
	/* The scrub goes on one copy at a time, each after the last returned
	 * (or as soon as there is room for it). */
	if (r->kind == VD_JOB_SCRUB || c->scrub_waits)
		scrub_next(c, out);
	if (out->result != VD_JOB_DROPPED)
		vd_plan_drain(&c->plan);
}

/* ---- jobs that ran out of time, and the scrub ------------------------------ */

/* A retry due finds its copy maybe verified since (its timeouts cleared). */
static void retries_due(vd_core *c, uint64_t now_ms)
{
	vd_copy *cp;
	char *rel;

	while ((rel = vd_retries_take_due(&c->retries, now_ms)) != NULL) {
		if ((cp = vd_model_copy(&c->model, rel)) != NULL && cp->timeouts > 0)
			(void)vd_plan_schedule(&c->plan, cp, VD_JOB_BACKGROUND, NULL);
		free(rel);
	}
}

/* One pass over every copy with a verdict, in path order, one at a time:
 * a scrub never takes more than one worker, and its rate stays scrub_rate. */
static void scrub_begin(vd_core *c, vd_core_output *out)
{
	vd_model *m = &c->model;
	const char **rels;
	const char *k;
	void *v;
	size_t it = 0, n = 0;

	if (c->scrub.active) {
		out->result = -EBUSY;
		return;
	}
	if (!c->src.scanned || !c->src.queue.open) {
		out->result = -EAGAIN;
		return;
	}
	if ((rels = calloc(m->copies.count + 1, sizeof(*rels))) == NULL) {
		out->result = -ENOMEM;
		return;
	}
	while (vd_map_next(&m->copies, &it, &k, &v))
		if (((vd_copy *)v)->has_verdict)
			rels[n++] = k;
	out->result = vd_scrub_begin(&c->scrub, rels, n);
	free(rels);
	if (out->result < 0)
		return;
	out->result = (int)(c->scrub.n < INT_MAX ? c->scrub.n : INT_MAX);
	scrub_next(c, out);
}

/* A copy gone, or being verified anyway (or waiting in the backlog to
 * be), is passed over; one the queue has no room for waits for the next
 * job to return. */
static void scrub_next(vd_core *c, vd_core_output *out)
{
	const char *rel;
	vd_copy *cp;
	int rc;

	c->scrub_waits = 0;
	if (!c->scrub.active)
		return;
	while ((rel = vd_scrub_next(&c->scrub)) != NULL) {
		if ((cp = vd_model_copy(&c->model, rel)) == NULL || cp->backlog)
			continue;
		if ((rc = vd_plan_start(&c->plan, cp, VD_JOB_SCRUB, cp->req_gen + 1)) == 0) {
			cp->req_gen++;
			return;
		}
		if (rc == -EAGAIN || rc == -ENOMEM) {
			vd_scrub_again(&c->scrub);
			c->scrub_waits = 1;
			return;
		}
	}
	vd_scrub_end(&c->scrub);
	out->scrub_ended = 1;
}

static void verify(vd_core *c, const vd_core_input *in, vd_core_output *out)
{
	vd_copy *cp = vd_model_copy(&c->model, in->u.verify.relpath);

	if (cp == NULL) {
		out->result = -ENOENT;
		return;
	}
	out->result = vd_plan_schedule(&c->plan, cp, in->u.verify.kind, &out->gen);
}

/* The shell's answers to the schedule's actions. A scrub's job refused
 * leaves the pass to go on with its next copy. */
static void job_answer(vd_core *c, const vd_core_input *in, vd_core_output *out)
{
	vd_copy *cp = vd_model_copy(&c->model, in->u.action.relpath);
	int scrub;

	if (cp == NULL || cp->inflight != in->u.action.id)
		return;
	if (in->kind == VD_CORE_TAKEN_BACK) {
		vd_plan_taken_back(&c->plan, cp, in->u.action.id);
		return;
	}
	scrub = cp->inflight_kind == VD_JOB_SCRUB;
	vd_plan_unstarted(&c->plan, cp, in->u.action.id);
	if (scrub)
		scrub_next(c, out);
}

/* ---- what scans find ------------------------------------------------------ */

/* After a restart: a copy whose files have the identities a kept verdict
 * was reached on gets that verdict without being hashed again; when those
 * moved, it is pending until verified again (a re-check when the kept
 * digests describe its bytes). */
static void adopt_kept(vd_copy *cp, const vd_kept_verdict *k)
{
	if (!cp->has_verdict) {
		cp->has_verdict = 1;
		cp->code = k->code;
		vd_copy_text(&cp->detail, k->detail);
		snprintf(cp->recomputed, sizeof(cp->recomputed), "%s", k->content_hash);
		cp->tensors = k->tensors;
		cp->bytes = k->bytes;
		cp->verified_at = k->verified_at;
		cp->duration_ms = k->duration_ms;
		vd_copy_facts(cp, k->facts);
		vd_copy_oms(cp, k->oms);
		memcpy(cp->verdict_fp.digest, k->fingerprint, sizeof(cp->verdict_fp.digest));
		cp->verdict_fp.ok = 1;
	}
	if (cp->chunks == NULL && k->code == VD_OK && k->chunks != NULL) {
		cp->chunks = *k->chunks;
		*k->chunks = NULL;
	}
}

static void scanned(vd_core *c, vd_scan_artifact *a, const vd_kept_verdict *kept,
    vd_core_output *out)
{
	vd_model *m = &c->model;
	vd_copy *cp = vd_model_copy(m, a->relpath);

	out->result = VD_SCAN_CHANGED;
	if (cp == NULL) {
		if ((cp = vd_model_add_copy(m, a->relpath, a->run)) == NULL) {
			out->result = -ENOMEM;
			return;
		}
		out->result = VD_SCAN_NEW;
	} else if (vd_fingerprint_eq(&cp->fp, &a->fp) && cp->hdr.code == a->hdr.code &&
	    cp->kind == a->kind) {
		cp->seen = 1;
		out->result = VD_SCAN_SAME;
		return;
	}
	cp->seen = 1;
	/* A path that changed kind (a directory replaced by a tar of it, or
	 * the reverse) has a fingerprint of the other kind: it is verified
	 * again like any change. */
	cp->kind = a->kind;
	out->linked_now = a->fp.linked > 0 && cp->fp.linked == 0;
	vd_model_unindex(m, cp);
	vd_hdrinfo_free(&cp->hdr);
	cp->hdr = a->hdr;
	memset(&a->hdr, 0, sizeof(a->hdr));
	cp->fp = a->fp;
	vd_model_index(m, cp);
	if (kept != NULL)
		adopt_kept(cp, kept);
	out->verify = !cp->has_verdict || !vd_fingerprint_eq(&cp->verdict_fp, &cp->fp) ||
	    vd_oms_stale(cp, c->src.oms_keys);
	if (out->verify)
		(void)vd_plan_schedule(&c->plan, cp, VD_JOB_BACKGROUND, NULL);
}

/* An unreadable copy was not judged: the remediation says so. */
static void unreadable_facts(vd_copy *cp)
{
	vd_verdict v;

	memset(&v, 0, sizeof(v));
	v.code = VD_IO_ERROR;
	vd_verdict_remediate(&v);
	vd_copy_facts(cp, &v.facts);
}

/* A copy at an unreadable path is failed with io_error until it can be
 * read again (and is verified again then, changed or not). */
static void copy_unreadable(vd_core *c, const char *relpath, const char *reason)
{
	char why[VD_DETAIL_MAX];
	vd_copy *cp = vd_model_copy(&c->model, relpath);

	if (cp == NULL)
		return;
	cp->seen = 1;
	vd_model_touch(&c->model, cp);
	cp->has_verdict = 1;
	cp->code = VD_IO_ERROR;
	snprintf(why, sizeof(why), "cannot read the %s: %s",
	    cp->kind == VD_KIND_TAR ? "archive" : "artifact directory", reason);
	vd_copy_text(&cp->detail, why);
	unreadable_facts(cp);
	cp->fp.ok = 0;
	cp->verdict_fp.ok = 0;
}

/* ---- what a scan found of the store's paths ----------------------------- */

/* A note for the shell: NULL out of memory (the note is lost, not the
 * change). */
static vd_path_note *path_note(vd_core *c, vd_path_note_kind kind, const char *relpath)
{
	vd_path_note *grown, *n;

	if (c->n_paths == c->cap_paths) {
		grown = vd_grow(c->paths, &c->cap_paths, c->n_paths, sizeof(*grown));
		if (grown == NULL)
			return NULL;
		c->paths = grown;
	}
	n = &c->paths[c->n_paths];
	memset(n, 0, sizeof(*n));
	if ((n->relpath = strdup(relpath)) == NULL)
		return NULL;
	n->kind = kind;
	c->n_paths++;
	return n;
}

static void paths_clear(vd_core *c)
{
	size_t i;

	for (i = 0; i < c->n_paths; i++)
		free(c->paths[i].relpath);
	c->n_paths = 0;
}

static void adopt(vd_core *c, const char *relpath, vd_artifact_kind kind, vd_core_output *out)
{
	const char *slash = strrchr(relpath, '/');
	char *run;
	vd_copy *cp;

	if (vd_model_copy(&c->model, relpath) != NULL) {
		out->result = VD_SCAN_SAME;
		return;
	}
	run = slash ? strndup(relpath, (size_t)(slash - relpath)) : strdup("");
	cp = run != NULL ? vd_model_add_copy(&c->model, relpath, run) : NULL;
	free(run);
	if (cp == NULL) {
		out->result = -ENOMEM;
		return;
	}
	cp->seen = 1;
	cp->kind = kind;
	out->result = VD_SCAN_NEW;
}

static const char *copy_path(const void *elem)
{
	return ((const vd_copy *)elem)->relpath;
}

static void unsee_one(void *arg, void *elem)
{
	(void)arg;
	((vd_copy *)elem)->seen = 0;
}

/* Only the sweep reads seen, of the copies the scan covers: those are
 * cleared, found by path; every copy when the scan is incomplete or out
 * of memory. */
static void scan_begin(vd_core *c, const vd_cover *cv)
{
	const vd_order *by_path = cv->incomplete ? NULL : vd_model_by_path(&c->model);
	vd_copy *cp;
	size_t it = 0;

	if (by_path != NULL && vd_cover_each(cv, by_path, copy_path, unsee_one, NULL) == 0)
		return;
	while ((cp = vd_model_next_copy(&c->model, &it)) != NULL)
		cp->seen = 0;
}

int vd_core_unreadable_covers(const vd_core *c, const char *relpath, int self)
{
	char *p, *slash;
	int found = 0;

	if (c->unreadable.count == 0)
		return 0;
	if (vd_map_get(&c->unreadable, "") != NULL ||
	    (self && vd_map_get(&c->unreadable, relpath) != NULL))
		return 1;
	if ((p = strdup(relpath)) == NULL)
		return 1;       /* unknown: kept, which loses nothing */
	for (slash = strchr(p, '/'); slash != NULL && !found; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		found = vd_map_get(&c->unreadable, p) != NULL;
		*slash = '/';
	}
	free(p);
	return found;
}

/* Copies the scan did not reach because a directory above them is
 * unreadable keep their verdicts: seen, not swept, not pruned. */
static void keep_covered(vd_core *c)
{
	vd_copy *cp;
	size_t it = 0;

	if (c->unreadable.count == 0)
		return;
	while ((cp = vd_model_next_copy(&c->model, &it)) != NULL)
		if (!cp->seen && vd_core_unreadable_covers(c, cp->relpath, 0))
			cp->seen = 1;
}

/* The directories a scan could not open or search ("relpath\nreason"),
 * each noted once until a scan that looks at it can read it again; what
 * the scan did not look at stays as it was. Out of memory, what is under
 * them could be swept: result -ENOMEM says the sweep must not be made. */
static void unreadable_dirs(vd_core *c, const vd_core_input *in, vd_core_output *out)
{
	const char *k;
	void *v;
	size_t i, it = 0;
	vd_map now;

	vd_map_init(&now);
	for (i = 0; i < in->u.unreadable.n; i++) {
		const char *entry = in->u.unreadable.dirs[i], *nl = strchr(entry, '\n');
		char *rel = nl ? strndup(entry, (size_t)(nl - entry)) : NULL;
		vd_path_note *n;

		if (rel == NULL || vd_map_put(&now, rel, (void *)1) < 0) {
			out->result = -ENOMEM;
			free(rel);
			continue;
		}
		if (vd_map_get(&c->unreadable, rel) == NULL &&
		    (n = path_note(c, VD_PATH_UNREADABLE, rel)) != NULL)
			n->reason = nl + 1;
		copy_unreadable(c, rel, nl + 1);
		free(rel);
	}
	while (vd_map_next(&c->unreadable, &it, &k, &v)) {
		if (vd_map_get(&now, k) != NULL)
			continue;
		if (vd_cover_path(in->u.unreadable.cover, k))
			(void)path_note(c, VD_PATH_READABLE, k);
		else if (vd_map_put(&now, k, (void *)1) < 0)
			out->result = -ENOMEM;
	}
	vd_map_free(&c->unreadable);
	c->unreadable = now;
}

/* The last copy of a remembered artifact going makes it a pruned link
 * (an operator's choice, counted and logged, never an alert). */
static void copy_gone(vd_core *c, const char *relpath, vd_core_output *out)
{
	vd_model *m = &c->model;
	vd_copy *cp = vd_model_copy(m, relpath);
	vd_path_note *n;
	int indexed;

	if (cp == NULL) {
		out->result = -ENOENT;
		return;
	}
	/* Its descendants' chains need it remembered before it goes. */
	catch_up(c, out);
	indexed = cp->hdr.code == VD_OK;
	snprintf(out->hash, sizeof(out->hash), "%s", cp->hdr.content_hash);
	out->round = cp->hdr.round_index;
	if ((n = path_note(c, VD_PATH_GONE, relpath)) != NULL)
		n->artifact = cp->kind;
	if (vd_oms_commits(cp, c->src.oms_keys))
		c->model_dirty = c->commits_dirty = 1;
	/* An in-flight job finds no copy on return and is dropped. */
	vd_plan_forget(&c->plan, cp);
	vd_model_remove_copy(m, cp);
	out->pruned = indexed && vd_model_group(m, out->hash) == NULL &&
	    vd_core_is_retained(c, out->hash);
	if (n != NULL) {
		n->pruned = out->pruned;
		memcpy(n->hash, out->hash, sizeof(n->hash));
		n->round = out->round;
	}
}

typedef struct gone_list {
	vd_copy **v;
	size_t n, cap;
	int failed;
} gone_list;

static void note_gone(void *arg, void *elem)
{
	gone_list *g = arg;
	vd_copy **grown;

	if (((vd_copy *)elem)->seen || g->failed)
		return;
	if ((grown = vd_grow(g->v, &g->cap, g->n, sizeof(*grown))) == NULL) {
		g->failed = 1;
		return;
	}
	g->v = grown;
	g->v[g->n++] = elem;
}

/* Copies gone where the scan looked: those it covers, found in the index
 * by path; out of memory, by a walk of every copy. A copy's removal
 * leaves the index by path as it was until it settles: the list is
 * taken first. */
static void sweep(vd_core *c, const vd_cover *cv, vd_core_output *out)
{
	vd_copy *gone[256], *cp;
	const vd_order *by_path;
	gone_list g = { NULL, 0, 0, 0 };
	size_t it, n, i;

	if (cv->incomplete)
		return;
	keep_covered(c);
	by_path = vd_model_by_path(&c->model);
	if (by_path != NULL && vd_cover_each(cv, by_path, copy_path, note_gone, &g) == 0 &&
	    !g.failed) {
		for (i = 0; i < g.n; i++)
			copy_gone(c, g.v[i]->relpath, out);
		free(g.v);
		return;
	}
	free(g.v);
	do {
		n = 0;
		it = 0;
		while (n < VD_ARRAY_LEN(gone) && (cp = vd_model_next_copy(&c->model, &it)) != NULL)
			if (!cp->seen && vd_cover_path(cv, cp->relpath))
				gone[n++] = cp;
		for (i = 0; i < n; i++)
			copy_gone(c, gone[i]->relpath, out);
	} while (n == VD_ARRAY_LEN(gone));
}

/* ---- clients waiting for verdicts --------------------------------------- */

/* A copy as its waiters see it: a run they must wait for is under way
 * unless it is a scrub (which answers nobody). */
static void wait_copy(const vd_core *c, const char *relpath, vd_wait_copy *st)
{
	const vd_copy *cp = vd_model_copy(&c->model, relpath);

	st->present = cp != NULL;
	st->done_gen = cp ? cp->done_gen : 0;
	st->busy = cp != NULL && cp->inflight != 0 && cp->inflight_kind != VD_JOB_SCRUB;
}

static void wait_add(vd_core *c, const vd_core_input *in, vd_core_output *out)
{
	vd_wait_copy st;
	size_t i;

	out->result = vd_waitset_add(&c->waiters, in->u.wait.relpaths, in->u.wait.gens,
	    in->u.wait.n, in->u.wait.deadline_ms, in->u.wait.user, &out->wait_id);
	/* Where its copies stand; answered at the next check at the earliest. */
	for (i = 0; out->result == 0 && i < in->u.wait.n; i++) {
		wait_copy(c, in->u.wait.relpaths[i], &st);
		vd_waitset_progress(&c->waiters, in->u.wait.relpaths[i], &st);
	}
}

/* Every waiter whose copies are reached is answered; what the others
 * wait for was maybe booked as background work (a change seen since their
 * request): it goes ahead all the same. */
static void wait_check(vd_core *c)
{
	const char *rel;
	vd_wait_copy st;
	vd_copy *cp;
	size_t it = 0;

	if (vd_waitset_pending(&c->waiters) == 0)
		return;
	while (vd_waitset_next_watched(&c->waiters, &it, &rel)) {
		wait_copy(c, rel, &st);
		vd_waitset_progress(&c->waiters, rel, &st);
	}
	vd_waitset_settle(&c->waiters);
	for (it = 0; vd_waitset_next_watched(&c->waiters, &it, &rel); )
		if ((cp = vd_model_copy(&c->model, rel)) != NULL)
			(void)vd_plan_hurry(&c->plan, cp);
}

/* Every answer the input brought, taken into the output. Out of memory
 * for the list, the answers wait for the next input. */
static void take_answers(vd_core *c, vd_core_output *out)
{
	vd_wait_answer *grown;

	out->n_answered = 0;
	for (;;) {
		if (out->n_answered == c->cap_answered) {
			grown = vd_grow(c->answered, &c->cap_answered, out->n_answered, sizeof(*grown));
			if (grown == NULL)
				break;
			c->answered = grown;
		}
		if (!vd_waitset_take(&c->waiters, &c->answered[out->n_answered]))
			break;
		out->n_answered++;
	}
	out->answered = c->answered;
	out->deadline_ms = vd_waitset_deadline(&c->waiters);
	if (vd_retries_next_due(&c->retries) < out->deadline_ms)
		out->deadline_ms = vd_retries_next_due(&c->retries);
}

/* ---- the machine -------------------------------------------------------- */

static void sources(vd_core *c, const vd_core_input *in)
{
	c->src = in->u.sources.src;
	vd_plan_set_queue(&c->plan, &c->src.queue);
	if (in->u.sources.change == VD_REFRESH_WHOLE)
		c->whole_dirty = 1;
	else if (in->u.sources.change == VD_REFRESH_COMMITS)
		c->commits_dirty = 1;
}

/* The memory loaded at start replaces this one. Lineage starts again from
 * nothing (it never points into a memory let go) and its next refresh is
 * whole: until the first scan has read the ledgers, what they no longer
 * extend is not known, so nothing is computed from the memory alone. */
static void restore(vd_core *c, vd_memory *loaded)
{
	vd_memory_free(&c->mem);
	c->mem = *loaded;
	vd_memory_init(loaded);
	vd_lineage_free(&c->lineage);
	vd_lineage_init(&c->lineage);
	c->n_retain_q = c->retain_next = 0;
	c->retain_unlisted = 0;
	c->whole_dirty = 1;
}

void vd_core_step(vd_core *c, const vd_core_input *in, vd_core_output *out)
{
	memset(out, 0, sizeof(*out));
	paths_clear(c);
	vd_plan_begin(&c->plan);
	if (vd_core_pass_first(c, in->kind))
		pass_more(c, SIZE_MAX, out);
	switch (in->kind) {
	case VD_CORE_SOURCES:
		sources(c, in);
		break;
	case VD_CORE_TOUCH:
		c->model_dirty = 1;
		c->commits_dirty |= in->u.commits;
		break;
	case VD_CORE_REFRESH:
		refresh(c, in->u.refresh, out);
		break;
	case VD_CORE_POST:
		post(c, in, out);
		break;
	case VD_CORE_CHECKPOINT:
		checkpoint(c, in, out);
		break;
	case VD_CORE_STATEMENT:
		statement(c, in, out);
		break;
	case VD_CORE_WITHDRAW:
		withdraw(c, in, out);
		break;
	case VD_CORE_LEDGER:
		ledger(c, in, out);
		break;
	case VD_CORE_LEDGER_GONE:
		ledger_gone(c, in->u.relpath, out);
		break;
	case VD_CORE_LEDGER_FORGET:
		forget(c, in->u.relpath, out);
		break;
	case VD_CORE_RETAIN:
		retain_more(c, in->u.budget, out);
		break;
	case VD_CORE_RESTORE:
		restore(c, in->u.restore);
		break;
	case VD_CORE_VERIFY:
		verify(c, in, out);
		break;
	case VD_CORE_TAKEN_BACK:
	case VD_CORE_UNSTARTED:
		job_answer(c, in, out);
		break;
	case VD_CORE_INTEREST:
		vd_plan_promote_group(&c->plan, in->u.hash);
		break;
	case VD_CORE_SCRUB:
		scrub_begin(c, out);
		break;
	case VD_CORE_JOB_DONE:
		job_done(c, in->u.job, out);
		job_follow(c, in->u.job, out);
		break;
	case VD_CORE_ADOPT:
		adopt(c, in->u.adopt.relpath, in->u.adopt.kind, out);
		break;
	case VD_CORE_SCAN_BEGIN:
		scan_begin(c, in->u.cover);
		break;
	case VD_CORE_SCANNED:
		scanned(c, in->u.scanned.a, in->u.scanned.kept, out);
		break;
	case VD_CORE_UNREADABLE:
		unreadable_dirs(c, in, out);
		break;
	case VD_CORE_SWEEP:
		sweep(c, in->u.cover, out);
		break;
	case VD_CORE_COPY_GONE:
		copy_gone(c, in->u.relpath, out);
		break;
	case VD_CORE_WAIT:
		wait_add(c, in, out);
		break;
	case VD_CORE_WAIT_CANCEL:
		out->result = vd_waitset_cancel(&c->waiters, in->u.wait_id);
		break;
	case VD_CORE_WAIT_CHECK:
		wait_check(c);
		break;
	case VD_CORE_TICK:
		vd_waitset_tick(&c->waiters, in->u.now_ms);
		retries_due(c, in->u.now_ms);
		break;
	case VD_CORE_WAIT_FIRE_ALL:
		vd_waitset_fire_all(&c->waiters);
		break;
	case VD_CORE_PASS:
		pass_more(c, in->u.budget, out);
		break;
	}
	take_answers(c, out);
	out->retaining = vd_core_retaining(c);
	out->actions = c->plan.acts;
	out->n_actions = c->plan.n_acts;
	out->paths = c->paths;
	out->n_paths = c->n_paths;
	out->passing = vd_core_passing(c);
}

/* ---- reading ------------------------------------------------------------ */

const vd_model *vd_core_model(const vd_core *c)
{
	return &c->model;
}

const vd_copy *vd_core_copy(const vd_core *c, const char *relpath)
{
	return vd_model_copy(&c->model, relpath);
}

const vd_group *vd_core_group(const vd_core *c, const char *hash)
{
	return vd_model_group(&c->model, hash);
}

size_t vd_core_unreadable_count(const vd_core *c)
{
	return c->unreadable.count;
}

const vd_order *vd_core_by_hash(vd_core *c)
{
	return vd_model_by_hash(&c->model);
}

const vd_order *vd_core_by_run(vd_core *c)
{
	return vd_model_by_run(&c->model);
}

const vd_memory *vd_core_memory(const vd_core *c)
{
	return &c->mem;
}

const vd_lineage *vd_core_lineage(const vd_core *c)
{
	return &c->lineage;
}

int vd_core_dirty(const vd_core *c)
{
	return c->model_dirty || c->commits_dirty || c->whole_dirty;
}

int vd_core_passing(const vd_core *c)
{
	return vd_lineage_passing(&c->lineage);
}

int vd_core_pass_first(const vd_core *c, vd_core_in_kind kind)
{
	switch (kind) {
	case VD_CORE_POST:
	case VD_CORE_CHECKPOINT:
	case VD_CORE_STATEMENT:
	case VD_CORE_WITHDRAW:
	case VD_CORE_LEDGER:
	case VD_CORE_LEDGER_GONE:
	case VD_CORE_LEDGER_FORGET:
	case VD_CORE_RESTORE:
	case VD_CORE_SWEEP:
	case VD_CORE_COPY_GONE:
		return vd_core_passing(c);
	default:
		return 0;
	}
}

int vd_core_retaining(const vd_core *c)
{
	return c->retain_unlisted || c->retain_next < c->n_retain_q;
}

const vd_order *vd_core_retained_order(vd_core *c)
{
	return vd_memory_retained_order(&c->mem);
}

int vd_core_is_retained(const vd_core *c, const char *hash)
{
	return vd_map_get(&c->mem.retained, hash) != NULL;
}

int vd_core_round_mismatch(const vd_core *c, const char *run, int64_t round,
    const char *hash, int64_t *header_round)
{
	return vd_round_mismatch(&c->model, &c->mem.retained, run, round, hash, header_round);
}

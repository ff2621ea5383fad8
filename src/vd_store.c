#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vd_chunks.h"
#include "vd_log.h"
#include "vd_state.h"
#include "vd_store.h"

#define SCAN_SETTLE_MAX_MS 1000   /* a stream of events delays a scan at most this */

struct vd_waiter {
	vd_waiter *next, **prevp;
	vd_store *store;
	char **relpaths;
	uint64_t *gens;
	size_t n;
	uv_timer_t timer;
	vd_wait_fn fn;
	void *arg;
};

static void check_waiters(vd_store *s);
static void close_step(vd_store *s);
static void scrub_next(vd_store *s);


#define refresh vd_store_refresh

const char *vd_astate_name(vd_astate st)
{
	static const char *const names[] = { "pending", "verifying", "verified", "failed" };

	return (unsigned)st < 4 ? names[st] : "unknown";
}

static double wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

vd_astate vd_copy_state(const vd_copy *c)
{
	/* A scrub re-checks a known verdict: the verdict stands meanwhile. */
	if (c->inflight != NULL && c->inflight_kind != VD_JOB_SCRUB)
		return c->has_verdict || c->inflight_kind == VD_JOB_EXPLICIT ?
		    VD_AS_VERIFYING : VD_AS_PENDING;
	if (!c->has_verdict || !vd_fingerprint_eq(&c->verdict_fp, &c->fp))
		return c->has_verdict && c->code != VD_OK ? VD_AS_FAILED : VD_AS_PENDING;
	return c->code == VD_OK ? VD_AS_VERIFIED : VD_AS_FAILED;
}

vd_astate vd_copy_settled(const vd_copy *c)
{
	if (!c->has_verdict)
		return VD_AS_PENDING;
	return c->code == VD_OK ? VD_AS_VERIFIED : VD_AS_FAILED;
}

vd_astate vd_group_settled(const vd_group *g)
{
	vd_astate st = VD_AS_VERIFIED;
	size_t i;

	for (i = 0; i < g->n; i++) {
		if (vd_copy_settled(g->copies[i]) == VD_AS_FAILED)
			return VD_AS_FAILED;
		if (vd_copy_settled(g->copies[i]) == VD_AS_PENDING)
			st = VD_AS_PENDING;
	}
	return st;
}

vd_astate vd_group_state(const vd_group *g)
{
	vd_astate worst = VD_AS_VERIFIED, st;
	size_t i;

	for (i = 0; i < g->n; i++) {
		st = vd_copy_state(g->copies[i]);
		if (st == VD_AS_FAILED)
			return VD_AS_FAILED;
		if (st == VD_AS_VERIFYING || (st == VD_AS_PENDING && worst != VD_AS_VERIFYING))
			worst = st;
	}
	return worst;
}

/* ---- the hash index ---------------------------------------------------- */

static void index_remove(vd_store *s, vd_copy *c)
{
	vd_group *g;
	size_t i;

	if (c->hdr.code != VD_OK || (g = vd_map_get(&s->groups, c->hdr.content_hash)) == NULL)
		return;
	for (i = 0; i < g->n; i++) {
		if (g->copies[i] == c) {
			g->copies[i] = g->copies[--g->n];
			break;
		}
	}
	if (g->n == 0) {
		vd_map_del(&s->groups, g->hash);
		free(g->copies);
		free(g);
	}
}

static int copy_order(const void *a, const void *b)
{
	return strcmp((*(vd_copy *const *)a)->relpath, (*(vd_copy *const *)b)->relpath);
}

static void index_add(vd_store *s, vd_copy *c)
{
	vd_group *g;
	vd_copy **grown;

	if (c->hdr.code != VD_OK)
		return;
	g = vd_map_get(&s->groups, c->hdr.content_hash);
	if (g == NULL) {
		if ((g = calloc(1, sizeof(*g))) == NULL)
			return;
		memcpy(g->hash, c->hdr.content_hash, sizeof(g->hash));
		if (vd_map_put(&s->groups, g->hash, g) < 0) {
			free(g);
			return;
		}
	}
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 2;
		if ((grown = realloc(g->copies, cap * sizeof(*grown))) == NULL)
			return;
		g->copies = grown;
		g->cap = cap;
	}
	g->copies[g->n++] = c;
	/* Copies listed in path order: answers do not depend on scan order. */
	qsort(g->copies, g->n, sizeof(*g->copies), copy_order);
}

vd_group *vd_store_group(vd_store *s, const char *hash)
{
	return vd_map_get(&s->groups, hash);
}

vd_copy *vd_store_copy(vd_store *s, const char *relpath)
{
	return vd_map_get(&s->copies, relpath);
}

/* ---- scheduling ------------------------------------------------------- */

static int submit(vd_store *s, vd_copy *c, vd_job_kind kind, uint64_t gen)
{
	vd_job *j;
	int rc;

	if (s->pool == NULL)
		return -ESHUTDOWN;
	if ((j = vd_job_new(kind, c->relpath)) == NULL)
		return -ENOMEM;
	j->gen = gen;
	j->max_header_len = s->cfg->max_header_len;
	/* A verified copy is re-checked chunk by chunk on all workers; only a
	 * changed chunk, or a client asking, costs the full canonical pass. */
	if (kind != VD_JOB_EXPLICIT && c->chunks != NULL && c->has_verdict && c->code == VD_OK)
		j->recheck = vd_chunkmap_dup(c->chunks);
	j->rate = kind == VD_JOB_SCRUB ? s->cfg->scrub_rate : 0;
	if ((rc = vd_pool_submit(s->pool, j, s->cfg->queue_max)) < 0) {
		vd_job_free(j);
		return rc;
	}
	c->inflight = j;
	c->inflight_kind = kind;
	return 0;
}

/* Verify c (again). While a job for it is in flight, one more run is
 * booked for when it returns, at the most urgent kind asked for. */
static int schedule(vd_store *s, vd_copy *c, vd_job_kind kind, uint64_t *gen)
{
	int rc;

	if (c->inflight != NULL) {
		if (!c->again || kind < c->again_kind)
			c->again_kind = kind;
		if (!c->again)
			c->again_gen = ++c->req_gen;
		c->again = 1;
		if (gen)
			*gen = c->again_gen;
		return 0;
	}
	rc = submit(s, c, kind, c->req_gen + 1);
	if (rc < 0) {
		if (!c->backlog && kind != VD_JOB_EXPLICIT) {
			c->backlog = 1;
			s->backlog++;
		}
		return rc;
	}
	c->req_gen++;
	if (gen)
		*gen = c->req_gen;
	if (c->backlog) {
		c->backlog = 0;
		s->backlog--;
	}
	return 0;
}

int vd_store_verify_now(vd_store *s, vd_copy *c, uint64_t *gen)
{
	return schedule(s, c, VD_JOB_EXPLICIT, gen);
}

static void drain_backlog(vd_store *s)
{
	const char *k;
	void *v;
	size_t it = 0;

	while (s->backlog > 0 && vd_map_next(&s->copies, &it, &k, &v)) {
		vd_copy *c = v;
		if (c->backlog && c->inflight == NULL &&
		    schedule(s, c, VD_JOB_BACKGROUND, NULL) == -EAGAIN)
			return;
	}
}

static void log_verdict(const vd_copy *c, const vd_job *j)
{
	if (j->verdict.code == VD_OK)
		log_info("verified %s: %s (%llu tensors, %llu bytes, %.3f s)", c->relpath,
		    j->verdict.content_hash, (unsigned long long)j->verdict.tensors,
		    (unsigned long long)j->verdict.bytes, j->duration);
	else
		log_info("verification of %s failed: %s: %s", c->relpath,
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
	snprintf(v.detail, sizeof(v.detail), "%s", c->detail);
	memcpy(v.content_hash, c->recomputed, sizeof(v.content_hash));
	v.tensors = c->tensors;
	v.bytes = c->bytes;
	v.verified_at = c->verified_at;
	v.duration_ms = c->duration_ms;
	vd_buf_init(&blob);
	if (c->chunks != NULL && c->code == VD_OK && vd_chunkmap_serialize(c->chunks, &blob) == 0) {
		v.chunks = blob.p;
		v.chunks_len = blob.len;
	}
	vd_state_put_verdict(s->state, &v);
	vd_buf_free(&blob);
}

static void record_verdict(vd_copy *c, const vd_job *j)
{
	c->has_verdict = 1;
	c->code = j->verdict.code;
	snprintf(c->detail, sizeof(c->detail), "%s", j->verdict.detail);
	memcpy(c->recomputed, j->verdict.content_hash, sizeof(c->recomputed));
	c->tensors = j->verdict.tensors;
	c->bytes = j->verdict.bytes;
	c->verified_at = j->started + j->duration;
	c->duration_ms = j->duration * 1000.0;
	c->verdict_fp = j->fp_before;
}

/* Run c once more: for a booked request (again), or because its bytes
 * changed under the last run (kind, gen of that run), whichever is more
 * urgent and later. */
static void follow_up(vd_store *s, vd_copy *c, vd_job_kind kind, uint64_t gen)
{
	if (c->again) {
		if (c->again_kind < kind)
			kind = c->again_kind;
		if (c->again_gen > gen)
			gen = c->again_gen;
		c->again = 0;
	}
	if (submit(s, c, kind, gen) < 0 && !c->backlog) {
		c->backlog = 1;
		s->backlog++;
	}
}

/* The worker read header.json too: a directory adopted before any scan,
 * or a header rewritten since, is indexed by what it claims now. */
static void take_header(vd_store *s, vd_copy *c, vd_job *j)
{
	if (c->hdr.code == j->hdr.code &&
	    strcmp(c->hdr.content_hash, j->hdr.content_hash) == 0)
		return;
	index_remove(s, c);
	vd_hdrinfo_free(&c->hdr);
	c->hdr = j->hdr;
	memset(&j->hdr, 0, sizeof(j->hdr));
	index_add(s, c);
}

static void on_job_done(vd_job *j, void *arg)
{
	vd_store *s = arg;
	vd_copy *c = vd_map_get(&s->copies, j->relpath);
	int changed;

	vd_metrics_verified(s->metrics, j->verdict.code, j->hashed, j->duration);
	if (c == NULL || c->inflight != j) {
		if (j->kind == VD_JOB_SCRUB)
			scrub_next(s);
		vd_job_free(j);     /* the directory went away meanwhile */
		check_waiters(s);
		return;
	}
	c->inflight = NULL;
	if (j->rechecked) {
		log_info("re-checked %s chunk by chunk: unchanged (%.3f s)", c->relpath, j->duration);
		c->verdict_fp = j->fp_before;
		c->verified_at = j->started + j->duration;
		c->duration_ms = j->duration * 1000.0;
	} else {
		if (j->changed[0])
			log_warn("%s: %s; verifying it in full", c->relpath, j->changed);
		snprintf(c->changed, sizeof(c->changed), "%s", j->changed);
		if (j->kind == VD_JOB_SCRUB && j->verdict.code == VD_OK && c->has_verdict)
			log_debug("scrubbed %s: unchanged", c->relpath);
		else
			log_verdict(c, j);
		record_verdict(c, j);
		vd_chunkmap_free(c->chunks);
		c->chunks = NULL;
		if (j->verdict.code == VD_OK) {
			c->chunks = j->chunks;
			j->chunks = NULL;   /* vd_job_free frees a failed pass's map */
		}
	}
	if (!c->fp.ok)
		c->fp = j->fp_before;
	take_header(s, c, j);
	/* Bytes that changed under the hash: the verdict describes nothing on
	 * disk, so whoever waits for this run waits for the next one. */
	changed = !vd_fingerprint_eq(&j->fp_before, &j->fp_after);
	if (changed) {
		c->fp = j->fp_after;
		follow_up(s, c, j->kind, j->gen);
		vd_store_scan(s);
	} else {
		c->done_gen = j->gen;
		persist_verdict(s, c);
		if (c->again)
			follow_up(s, c, c->again_kind, c->again_gen);
	}
	if (j->kind == VD_JOB_SCRUB)
		scrub_next(s);
	vd_job_free(j);
	drain_backlog(s);
	refresh(s);
	check_waiters(s);
}

/* ---- scanning ---------------------------------------------------------- */

static void free_copy(vd_copy *c)
{
	vd_chunkmap_free(c->chunks);
	vd_hdrinfo_free(&c->hdr);
	free(c->relpath);
	free(c->run);
	free(c);
}

static vd_copy *new_copy(vd_store *s, const char *relpath, const char *run)
{
	vd_copy *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->relpath = strdup(relpath);
	c->run = strdup(run);
	c->hdr.code = VD_ARTIFACT_INVALID;
	if (c->relpath == NULL || c->run == NULL || vd_map_put(&s->copies, relpath, c) < 0) {
		free_copy(c);
		return NULL;
	}
	return c;
}

static void remove_copy(vd_store *s, vd_copy *c)
{
	log_info("artifact directory %s is gone", c->relpath);
	if (s->state)
		vd_state_forget_verdict(s->state, c->relpath);
	index_remove(s, c);
	vd_map_del(&s->copies, c->relpath);
	if (c->backlog)
		s->backlog--;
	/* An in-flight job finds no copy on return and is dropped. */
	free_copy(c);
}

typedef struct stored {
	vd_stored_verdict v;
	vd_chunkmap *chunks;
} stored;

static void free_stored(void *p)
{
	stored *st = p;

	if (st != NULL) {
		vd_chunkmap_free(st->chunks);
		free(st);
	}
}

/* After a restart: a directory whose files have the identities a stored
 * verdict was reached on gets that verdict without being hashed again. */
static void adopt_stored(vd_store *s, vd_copy *c)
{
	stored *st = vd_map_get(&s->stored, c->relpath);
	vd_stored_verdict *v = st ? &st->v : NULL;

	if (v == NULL)
		return;
	/* The verdict holds for the identities it was reached on: when those
	 * moved, the copy is pending until re-verified (a re-check when the
	 * stored digests describe its bytes). */
	if (!c->has_verdict) {
		c->has_verdict = 1;
		c->code = v->code;
		snprintf(c->detail, sizeof(c->detail), "%s", v->detail);
		memcpy(c->recomputed, v->content_hash, sizeof(c->recomputed));
		c->tensors = v->tensors;
		c->bytes = v->bytes;
		c->verified_at = v->verified_at;
		c->duration_ms = v->duration_ms;
		memcpy(c->verdict_fp.digest, v->fingerprint, sizeof(c->verdict_fp.digest));
		c->verdict_fp.ok = 1;
		if (vd_fingerprint_eq(&c->verdict_fp, &c->fp))
			log_debug("%s unchanged since its stored verdict: not hashed again", c->relpath);
	}
	if (c->chunks == NULL && v->code == VD_OK) {
		c->chunks = st->chunks;
		st->chunks = NULL;
	}
	free_stored(vd_map_del(&s->stored, c->relpath));
}

static void merge_artifact(vd_store *s, vd_scan_artifact *a)
{
	vd_copy *c = vd_map_get(&s->copies, a->relpath);

	if (c == NULL) {
		if ((c = new_copy(s, a->relpath, a->run)) == NULL)
			return;
		log_debug("found artifact directory %s", a->relpath);
	} else if (vd_fingerprint_eq(&c->fp, &a->fp) && c->hdr.code == a->hdr.code) {
		c->seen = 1;
		return;
	}
	c->seen = 1;
	/* Written through another link, a file changes without an event in
	 * this directory: only the periodic rescan (ctime) sees it. */
	if (a->fp.linked > 0 && c->fp.linked == 0)
		log_warn("%s: %zu file(s) have other hard links; changes made through them are seen at the next rescan (rescan_interval)",
		    a->relpath, a->fp.linked);
	index_remove(s, c);
	vd_hdrinfo_free(&c->hdr);
	c->hdr = a->hdr;            /* moved out of the scan result */
	memset(&a->hdr, 0, sizeof(a->hdr));
	c->fp = a->fp;
	index_add(s, c);
	adopt_stored(s, c);
	if (!c->has_verdict || !vd_fingerprint_eq(&c->verdict_fp, &c->fp))
		schedule(s, c, VD_JOB_BACKGROUND, NULL);
}

/* A directory that cannot be opened: a known artifact stays listed, failed
 * with io_error, until it can be read again; each is reported once. */
static void merge_unreadable(vd_store *s, vd_scan_result *r)
{
	const char *k;
	void *v;
	size_t i, it = 0;
	vd_map now;

	vd_map_init(&now);
	for (i = 0; i < r->n_unreadable; i++) {
		char *nl = strchr(r->unreadable[i], '\n'), rel[1024];
		vd_copy *c;
		if (nl == NULL || (size_t)(nl - r->unreadable[i]) >= sizeof(rel))
			continue;
		memcpy(rel, r->unreadable[i], (size_t)(nl - r->unreadable[i]));
		rel[nl - r->unreadable[i]] = '\0';
		vd_map_put(&now, rel, (void *)1);
		if (vd_map_get(&s->unreadable, rel) == NULL)
			log_warn("cannot read the directory %s: %s", rel, nl + 1);
		if ((c = vd_map_get(&s->copies, rel)) == NULL)
			continue;
		c->seen = 1;
		c->has_verdict = 1;
		c->code = VD_IO_ERROR;
		snprintf(c->detail, sizeof(c->detail), "cannot read the artifact directory: %s", nl + 1);
		/* This verdict describes no contents: once readable the
		 * directory is verified again, changed or not. */
		c->fp.ok = 0;
		c->verdict_fp.ok = 0;
	}
	while (vd_map_next(&s->unreadable, &it, &k, &v))
		if (vd_map_get(&now, k) == NULL)
			log_info("the directory %s is readable again", k);
	vd_map_free(&s->unreadable);
	s->unreadable = now;
}

/* Verdicts stored for directories that are gone since the last run. */
static void prune_stored(vd_store *s)
{
	const char *k;
	void *v;
	size_t it = 0;

	while (vd_map_next(&s->stored, &it, &k, &v)) {
		if (s->state)
			vd_state_forget_verdict(s->state, k);
		free_stored(v);
	}
	vd_map_free(&s->stored);
	vd_map_init(&s->stored);
}

static void merge_ledgers(vd_store *s, vd_scan_result *r)
{
	size_t i;

	for (i = 0; i < s->n_ledgers; i++)
		vd_scan_ledger_free(&s->ledgers[i]);
	free(s->ledgers);
	s->ledgers = r->ledgers;
	s->n_ledgers = r->n_ledgers;
	r->ledgers = NULL;
	r->n_ledgers = r->cap_ledgers = 0;
}

static void sweep(vd_store *s)
{
	vd_copy *gone[256];
	const char *k;
	void *v;
	size_t it, n, i;

	do {
		n = 0;
		it = 0;
		while (n < VD_ARRAY_LEN(gone) && vd_map_next(&s->copies, &it, &k, &v))
			if (!((vd_copy *)v)->seen)
				gone[n++] = v;
		for (i = 0; i < n; i++)
			remove_copy(s, gone[i]);
	} while (n == VD_ARRAY_LEN(gone));
}

static void scan_thread(uv_work_t *req)
{
	vd_store *s = req->data;

	vd_scan_store(s->root, s->scan_depth, &s->scan_result);
}

static void after_scan(uv_work_t *req, int status)
{
	vd_store *s = req->data;
	vd_scan_result *r = &s->scan_result;
	const char *k;
	void *v;
	size_t it = 0, i;

	s->scanning = 0;
	if (s->closing) {
		vd_scan_result_free(r);
		close_step(s);
		return;
	}
	if (!r->root_ok) {
		if (s->root_ok || !s->scanned_once)
			log_error("%s; keeping the last known state until it is back", r->root_error);
		s->root_ok = 0;
		goto done;
	}
	if (!s->root_ok && s->scanned_once)
		log_info("the store %s is back", s->cfg->store);
	s->root_ok = 1;
	if (r->truncated)
		log_warn("the store holds more than %d artifacts; the rest are ignored",
		    VD_SCAN_MAX_ARTIFACTS);
	while (vd_map_next(&s->copies, &it, &k, &v))
		((vd_copy *)v)->seen = 0;
	for (i = 0; i < r->n_artifacts; i++)
		merge_artifact(s, &r->artifacts[i]);
	merge_unreadable(s, r);
	sweep(s);
	if (!s->scanned_once)
		prune_stored(s);
	merge_ledgers(s, r);
	vd_watch_sync(&s->watch, r->dirs, r->n_dirs);
	s->last_scan = wall_now();
	s->scanned_once = 1;
	refresh(s);
	check_waiters(s);
done:
	vd_scan_result_free(r);
	if (s->scan_again) {
		s->scan_again = 0;
		vd_store_scan(s);
	}
}

void vd_store_scan(vd_store *s)
{
	if (s->closing)
		return;
	if (s->scanning) {
		s->scan_again = 1;
		return;
	}
	s->scanning = 1;
	s->scan_depth = s->cfg->scan_depth;
	s->scan_work.data = s;
	if (uv_queue_work(s->loop, &s->scan_work, scan_thread, after_scan) < 0)
		s->scanning = 0;
}

static void on_debounce(uv_timer_t *t)
{
	vd_store *s = t->data;

	s->first_event_ms = 0;
	vd_store_scan(s);
}

/* Coalesce bursts of events into one scan, but never wait forever. */
static void on_fs_event(void *arg, const char *dir, const char *name, int overflow)
{
	vd_store *s = arg;
	uint64_t now = uv_now(s->loop);

	log_debug("change in %s%s%s", dir[0] ? dir : ".", name[0] ? "/" : "", name);
	if (s->first_event_ms == 0)
		s->first_event_ms = now;
	if (overflow || now - s->first_event_ms >= SCAN_SETTLE_MAX_MS) {
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

/* ---- waiters ---------------------------------------------------------- */

static int waiter_done(vd_store *s, const vd_waiter *w)
{
	size_t i;

	/* Done when the asked-for run finished and no newer one (for a change
	 * seen since) is under way: the answer then describes the bytes on
	 * disk. A scrub does not hold an answer back. */
	for (i = 0; i < w->n; i++) {
		vd_copy *c = vd_map_get(&s->copies, w->relpaths[i]);
		if (c == NULL)
			continue;
		if (c->done_gen < w->gens[i] ||
		    (c->inflight != NULL && c->inflight_kind != VD_JOB_SCRUB))
			return 0;
	}
	return 1;
}

static void waiter_closed(uv_handle_t *h)
{
	vd_waiter *w = h->data;
	size_t i;

	for (i = 0; i < w->n; i++)
		free(w->relpaths[i]);
	free(w->relpaths);
	free(w->gens);
	free(w);
}

static void waiter_unlink(vd_waiter *w)
{
	if (w->prevp == NULL)
		return;
	*w->prevp = w->next;
	if (w->next)
		w->next->prevp = w->prevp;
	w->prevp = NULL;
	uv_timer_stop(&w->timer);
	uv_close((uv_handle_t *)&w->timer, waiter_closed);
}

static void waiter_fire(vd_waiter *w, int timed_out)
{
	vd_wait_fn fn = w->fn;
	void *arg = w->arg;

	waiter_unlink(w);
	fn(arg, timed_out);
}

static void check_waiters(vd_store *s)
{
	vd_waiter *w, *next;

	for (w = s->waiters; w != NULL; w = next) {
		next = w->next;
		if (waiter_done(s, w))
			waiter_fire(w, 0);
	}
}

static void on_wait_timeout(uv_timer_t *t)
{
	waiter_fire(t->data, 1);
}

vd_waiter *vd_store_wait(vd_store *s, char **relpaths, const uint64_t *gens,
    size_t n, uint64_t timeout_ms, vd_wait_fn fn, void *arg)
{
	vd_waiter *w = calloc(1, sizeof(*w));
	size_t i;

	if (w == NULL)
		return NULL;
	w->relpaths = calloc(n ? n : 1, sizeof(char *));
	w->gens = calloc(n ? n : 1, sizeof(uint64_t));
	if (w->relpaths == NULL || w->gens == NULL) {
		free(w->relpaths);
		free(w->gens);
		free(w);
		return NULL;
	}
	for (i = 0; i < n; i++) {
		w->relpaths[i] = strdup(relpaths[i]);
		w->gens[i] = gens[i];
	}
	w->n = n;
	w->store = s;
	w->fn = fn;
	w->arg = arg;
	uv_timer_init(s->loop, &w->timer);
	w->timer.data = w;
	uv_timer_start(&w->timer, on_wait_timeout, timeout_ms, 0);
	w->next = s->waiters;
	if (s->waiters)
		s->waiters->prevp = &w->next;
	s->waiters = w;
	w->prevp = &s->waiters;
	return w;
}

void vd_store_wait_cancel(vd_waiter *w)
{
	waiter_unlink(w);
}

vd_copy *vd_store_adopt(vd_store *s, const char *relpath)
{
	vd_copy *c = vd_map_get(&s->copies, relpath);
	const char *slash;
	char *run;

	if (c != NULL)
		return c;
	slash = strrchr(relpath, '/');
	run = slash ? strndup(relpath, (size_t)(slash - relpath)) : strdup("");
	if (run == NULL)
		return NULL;
	c = new_copy(s, relpath, run);
	free(run);
	if (c != NULL)
		c->seen = 1;
	vd_store_scan(s);           /* fills in its header */
	return c;
}

/* ---- scrub ------------------------------------------------------------- */

static int relpath_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One pass: every copy with a verdict, in path order, one at a time so a
 * scrub never takes more than one worker and its rate stays scrub_rate. */
static void scrub_start(uv_timer_t *t)
{
	vd_store *s = t->data;
	const char *k;
	void *v;
	size_t it = 0;

	if (s->scrubbing || s->closing || !s->scanned_once)
		return;
	s->scrub_list = calloc(s->copies.count + 1, sizeof(char *));
	if (s->scrub_list == NULL)
		return;
	s->scrub_n = s->scrub_next = 0;
	while (vd_map_next(&s->copies, &it, &k, &v))
		if (((vd_copy *)v)->has_verdict)
			s->scrub_list[s->scrub_n++] = strdup(k);
	qsort(s->scrub_list, s->scrub_n, sizeof(char *), relpath_cmp);
	s->scrubbing = 1;
	log_info("scrub: re-hashing %zu artifacts at up to %llu bytes/s", s->scrub_n,
	    (unsigned long long)s->cfg->scrub_rate);
	scrub_next(s);
}

static void scrub_next(vd_store *s)
{
	vd_copy *c;
	size_t i;

	while (s->scrubbing && s->scrub_next < s->scrub_n) {
		c = vd_map_get(&s->copies, s->scrub_list[s->scrub_next++]);
		if (c == NULL || c->inflight != NULL)
			continue;      /* gone, or being verified anyway */
		if (submit(s, c, VD_JOB_SCRUB, c->req_gen + 1) == 0) {
			c->req_gen++;
			return;
		}
	}
	if (!s->scrubbing)
		return;
	for (i = 0; i < s->scrub_n; i++)
		free(s->scrub_list[i]);
	free(s->scrub_list);
	s->scrub_list = NULL;
	s->scrub_n = s->scrub_next = 0;
	s->scrubbing = 0;
	s->last_scrub = wall_now();
	log_info("scrub: pass finished");
}

static void arm_scrub(vd_store *s)
{
	uint64_t ms = (uint64_t)s->cfg->scrub_interval * 1000;

	if (ms == 0)
		uv_timer_stop(&s->scrub_timer);
	else
		uv_timer_start(&s->scrub_timer, scrub_start, ms, ms);
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
	if (v->chunks != NULL && v->code == VD_OK)
		copy->chunks = vd_chunkmap_parse(v->chunks, v->chunks_len);
	free_stored(vd_map_del(&s->stored, v->relpath));
	if (vd_map_put(&s->stored, v->relpath, copy) < 0)
		free_stored(copy);
}

static int push_commitment(vd_commitment **arr, size_t *n, size_t *cap,
    const vd_commitment *c)
{
	vd_commitment *grown;

	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		if ((grown = realloc(*arr, nc * sizeof(*grown))) == NULL)
			return -1;
		*arr = grown;
		*cap = nc;
	}
	(*arr)[(*n)++] = *c;
	return 0;
}

static void load_posted(const vd_commitment *c, void *arg)
{
	vd_store *s = arg;

	push_commitment(&s->posted, &s->n_posted, &s->cap_posted, c);
}

static void load_equiv(const vd_commitment *c, void *arg)
{
	vd_store *s = arg;

	push_commitment(&s->equivs, &s->n_equivs, &s->cap_equivs, c);
}

int vd_store_attach_state(vd_store *s, vd_state *st)
{
	s->state = st;
	if (vd_state_load_verdicts(st, load_verdict, s) < 0 ||
	    vd_state_load_commitments(st, load_posted, s) < 0 ||
	    vd_state_load_equivocations(st, load_equiv, s) < 0)
		return -1;
	log_info("state: %zu stored verdicts, %zu posted commitments", s->stored.count,
	    s->n_posted);
	vd_store_scan(s);
	return 0;
}

/* The ledger's trusted record for (run, round), if any. */
static const char *ledger_hash(vd_store *s, const char *run, int64_t round)
{
	size_t i, j;

	for (i = 0; i < s->n_ledgers; i++) {
		const vd_scan_ledger *l = &s->ledgers[i];
		if (strcmp(l->run, run) != 0 || !l->read_ok)
			continue;
		for (j = 0; j < l->n_entries; j++)
			if (l->entries[j].trusted && l->entries[j].round_index == round)
				return l->entries[j].global_model_hash;
	}
	return NULL;
}

int vd_store_post_commitment(vd_store *s, const char *run, int64_t round,
    const char *hash, int64_t schema_version, char *existing_hash)
{
	vd_commitment c, old;
	const char *ledger = ledger_hash(s, run, round);
	int rc;

	memset(&c, 0, sizeof(c));
	snprintf(c.run, sizeof(c.run), "%s", run);
	c.round_index = round;
	memcpy(c.hash, hash, sizeof(c.hash));
	c.schema_version = schema_version;
	if (ledger != NULL && strcmp(ledger, hash) != 0) {
		/* The ledger already commits another hash for this round. */
		memcpy(existing_hash, ledger, VD_HASH_HEX_LEN + 1);
		rc = 2;
	} else if (s->state == NULL) {
		return -1;
	} else {
		rc = vd_state_post_commitment(s->state, &c, &old);
		if (rc == 2)
			memcpy(existing_hash, old.hash, VD_HASH_HEX_LEN + 1);
	}
	if (rc == 0)
		push_commitment(&s->posted, &s->n_posted, &s->cap_posted, &c);
	if (rc == 2) {
		if (s->state)
			vd_state_record_equivocation(s->state, run, round, existing_hash, hash, "roundclose");
		push_commitment(&s->equivs, &s->n_equivs, &s->cap_equivs, &c);
	}
	if (rc >= 0)
		refresh(s);
	return rc;
}

/* ---- life cycle ------------------------------------------------------- */

void vd_store_gauges(vd_store *s, vd_gauges *g)
{
	const char *k;
	void *v;
	size_t it = 0;

	while (vd_map_next(&s->copies, &it, &k, &v))
		g->artifacts[vd_copy_state(v)]++;
	memcpy(g->alerts, s->alert_counts, sizeof(g->alerts));
	g->committed_head_round = s->head_round;
	if (s->pool != NULL) {
		g->queue_depth = vd_pool_queued(s->pool);
		g->workers_busy = vd_pool_busy(s->pool);
		g->workers = vd_pool_threads(s->pool);
	}
	g->last_scan = s->last_scan;
	g->last_scrub = s->last_scrub;
}

/* CPUs this process may run on (affinity, cgroup quota); unlike counting
 * /proc/stat it works under systemd's ProcSubset=pid. */
static unsigned default_workers(void)
{
	unsigned n = uv_available_parallelism();

	return n > 0 ? n : 1;
}

int vd_store_init(vd_store *s, uv_loop_t *loop, const vd_config *cfg,
    vd_metrics *metrics)
{
	int rc;

	memset(s, 0, sizeof(*s));
	s->loop = loop;
	s->cfg = cfg;
	s->metrics = metrics;
	s->root_ok = 1;
	vd_map_init(&s->copies);
	vd_map_init(&s->groups);
	vd_map_init(&s->stored);
	vd_map_init(&s->unreadable);
	vd_map_init(&s->commits);
	vd_map_init(&s->alerts);
	s->head_round = -1;
	if ((s->root = strdup(cfg->store)) == NULL)
		return -ENOMEM;
	rc = vd_pool_new(loop, cfg->workers ? cfg->workers : default_workers(), s->root,
	    on_job_done, s, &s->pool);
	if (rc < 0) {
		free(s->root);
		return rc;
	}
	if ((rc = vd_watch_init(&s->watch, loop, cfg->store, on_fs_event, s)) < 0)
		log_warn("inotify is unavailable (%s); relying on the periodic rescan",
		    uv_strerror(rc));
	uv_timer_init(loop, &s->debounce);
	uv_timer_init(loop, &s->rescan);
	s->debounce.data = s->rescan.data = s;
	uv_timer_start(&s->rescan, on_rescan, (uint64_t)cfg->rescan_interval * 1000,
	    (uint64_t)cfg->rescan_interval * 1000);
	uv_timer_init(loop, &s->scrub_timer);
	s->scrub_timer.data = s;
	arm_scrub(s);
	return 0;
}

void vd_store_set_config(vd_store *s, const vd_config *cfg)
{
	s->cfg = cfg;
	uv_timer_start(&s->rescan, on_rescan, (uint64_t)cfg->rescan_interval * 1000,
	    (uint64_t)cfg->rescan_interval * 1000);
	arm_scrub(s);
	refresh(s);         /* the pinned genesis may have changed */
}

static void free_all(vd_store *s)
{
	const char *k;
	void *v;
	size_t it = 0, i;

	while (vd_map_next(&s->copies, &it, &k, &v))
		free_copy(v);
	it = 0;
	while (vd_map_next(&s->groups, &it, &k, &v)) {
		free(((vd_group *)v)->copies);
		free(v);
	}
	vd_map_free(&s->copies);
	vd_map_free(&s->groups);
	for (i = 0; i < s->n_ledgers; i++)
		vd_scan_ledger_free(&s->ledgers[i]);
	free(s->ledgers);
	free(s->root);
	it = 0;
	while (vd_map_next(&s->stored, &it, &k, &v))
		free_stored(v);
	vd_map_free(&s->stored);
	vd_map_free(&s->unreadable);
	free(s->posted);
	free(s->equivs);
	for (i = 0; i < s->scrub_n; i++)
		free(s->scrub_list[i]);
	free(s->scrub_list);
	vd_lineage_free(s);
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
	vd_waiter *w;

	s->closing = 1;
	s->on_closed = done;
	s->closed_arg = arg;
	while ((w = s->waiters) != NULL)
		waiter_fire(w, 1);
	vd_pool_stop(s->pool, s->cfg->shutdown_grace * 1000);
	s->pool = NULL;             /* freed once its handle closes */
	vd_watch_close(&s->watch);
	s->handles_open = 3 + (s->scanning ? 1 : 0);
	uv_close((uv_handle_t *)&s->scrub_timer, handle_closed);
	uv_close((uv_handle_t *)&s->debounce, handle_closed);
	uv_close((uv_handle_t *)&s->rescan, handle_closed);
}

#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vd_jsonw.h"
#include "vd_omskeys.h"
#include "vd_utf8.h"
#include "vd_views.h"

/* ---- building with json-c, every allocation checked -------------------
 *
 * Every value goes through these. A constructor's NULL sets *oom; a NULL
 * passed on purpose (a member that is null) does not. Whatever is added
 * belongs to its parent, or is freed when it cannot be added, so a child
 * is filled before it is added, never after. */

static json_object *mark(int *oom, json_object *v)
{
	if (v == NULL)
		*oom = 1;
	return v;
}

static json_object *jobj(int *oom)
{
	return mark(oom, json_object_new_object());
}

static json_object *jarr(int *oom)
{
	return mark(oom, json_object_new_array());
}

/* s NULL: a JSON null. */
static json_object *jstr(int *oom, const char *s)
{
	return s != NULL ? mark(oom, json_object_new_string(s)) : NULL;
}

static json_object *ji64(int *oom, int64_t v)
{
	return mark(oom, json_object_new_int64(v));
}

static json_object *ju64(int *oom, uint64_t v)
{
	return mark(oom, json_object_new_uint64(v));
}

static json_object *jbool(int *oom, int v)
{
	return mark(oom, json_object_new_boolean(v));
}

static json_object *jdouble(int *oom, double v)
{
	return mark(oom, json_object_new_double(v));
}

/* key: v in o; v NULL is a null member. */
static void add(int *oom, json_object *o, const char *key, json_object *v)
{
	if (o != NULL && json_object_object_add(o, key, v) == 0)
		return;
	json_object_put(v);
	*oom = 1;
}

/* An element is never null: a NULL one is one that could not be made. */
static void push(int *oom, json_object *a, json_object *v)
{
	if (a != NULL && v != NULL && json_object_array_add(a, v) == 0)
		return;
	json_object_put(v);
	*oom = 1;
}

static json_object *done(int oom, json_object *o)
{
	if (!oom)
		return o;
	json_object_put(o);
	return NULL;
}

static json_object *jstr_or_null(int *oom, const char *s)
{
	return jstr(oom, s && s[0] ? s : NULL);
}

static json_object *jtime(int *oom, double t)
{
	char when[40];

	vd_rfc3339(t, when, sizeof(when));
	return jstr(oom, when);
}

/* Text from the database (a path, a subject) as a JSON string; bytes
 * that are not UTF-8 are replaced. */
static json_object *jstr_clean(int *oom, const char *s)
{
	json_object *o;
	char *copy;

	if (vd_utf8_valid((const uint8_t *)s, strlen(s)))
		return jstr(oom, s);
	if ((copy = strdup(s)) == NULL) {
		*oom = 1;
		return NULL;
	}
	vd_utf8_sanitize(copy);
	o = jstr(oom, copy);
	free(copy);
	return o;
}

/* ---- the status object ------------------------------------------------ */

/* A fact that applies; one that does not is left out, never null. */
static void add_fact(int *oom, json_object *o, const char *key, const char *value)
{
	if (value[0] != '\0')
		add(oom, o, key, jstr(oom, value));
}

/* The facts behind a failed verdict (vd_facts). The recomputed hash is
 * the copy's recomputed_hash, given whenever one was reached. */
static void facts_json(int *oom, json_object *o, const vd_facts *f)
{
	add_fact(oom, o, "expected_hash", f->expected_hash);
	if (f->has_file_schema_version)
		add(oom, o, "file_schema_version", ji64(oom, f->file_schema_version));
	if (f->reader_max_version > 0)
		add(oom, o, "reader_max_version", ji64(oom, f->reader_max_version));
	add_fact(oom, o, "tensor", f->tensor);
	add_fact(oom, o, "file", f->file);
	add_fact(oom, o, "remediation", f->remediation);
}

/* The copy's OMS bundle as checked; null when it has none. */
static json_object *oms_json(int *oom, const vd_oms_status *m)
{
	json_object *o;

	if (m == NULL)
		return NULL;
	o = jobj(oom);
	add(oom, o, "present", jbool(oom, 1));
	add(oom, o, "verified", jbool(oom, m->verified));
	add(oom, o, "method", m->method[0] ? jstr(oom, m->method) : NULL);
	add(oom, o, "key_id", m->key_id[0] ? jstr(oom, m->key_id) : NULL);
	add(oom, o, "code", jstr(oom, vd_oms_code_name(m->code)));
	add(oom, o, "detail", m->detail[0] ? jstr_clean(oom, m->detail) : NULL);
	return o;
}

static json_object *copy_json(int *oom, const vd_copy *c, const vd_group *g)
{
	json_object *o = jobj(oom);
	vd_astate st = vd_copy_state(c);
	int show = c->has_verdict && (st == VD_AS_VERIFIED || st == VD_AS_FAILED);
	int bad = show && c->code != VD_OK;
	char when[40];

	add(oom, o, "path", jstr(oom, c->relpath));
	add(oom, o, "kind", jstr(oom, vd_kind_name(c->kind)));
	add(oom, o, "state", jstr(oom, vd_astate_name(st)));
	add(oom, o, "code", bad ? jstr(oom, vd_code_name(c->code)) : NULL);
	add(oom, o, "detail", bad ? jstr(oom, VD_COPY_TEXT(c->detail)) : NULL);
	vd_rfc3339(c->verified_at, when, sizeof(when));
	add(oom, o, "verified_at", c->has_verdict ? jstr(oom, when) : NULL);
	add(oom, o, "duration_ms", c->has_verdict ? jdouble(oom, c->duration_ms) : NULL);
	if (bad && c->recomputed[0])
		add(oom, o, "recomputed_hash", jstr(oom, c->recomputed));
	if (bad && c->changed != NULL)
		add(oom, o, "changed", jstr(oom, c->changed));
	if (bad && c->facts != NULL)
		facts_json(oom, o, c->facts);
	add(oom, o, "oms", oms_json(oom, c->oms));
	/* Each copy its own bit: a good copy beside a bad one can be loaded. */
	add(oom, o, "trusted", jbool(oom, g != NULL && vd_copy_trusted(c, g)));
	return o;
}

static json_object *header_json(int *oom, const vd_hdrinfo *h)
{
	json_object *o = jobj(oom), *groups = jarr(oom);
	size_t i;

	add(oom, o, "schema_version", ji64(oom, h->schema_version));
	add(oom, o, "round_index", ji64(oom, h->round_index));
	add(oom, o, "parent_hash", h->has_parent ? jstr(oom, h->parent_hash) : NULL);
	/* A header field: "" is a value the header holds, not an absence. */
	add(oom, o, "wmcp_version", jstr(oom, h->wmcp_version));
	add(oom, o, "config_hash", jstr(oom, h->config_hash));
	for (i = 0; i < h->n_param_groups; i++)
		push(oom, groups, jstr(oom, h->param_groups[i]));
	add(oom, o, "param_groups", groups);
	add(oom, o, "created_at", jstr(oom, h->created_at));
	return o;
}

static json_object *chain_json(int *oom, const vd_group *g)
{
	json_object *o = jobj(oom), *breaks = jarr(oom), *b;
	size_t i;

	add(oom, o, "status", jstr(oom, vd_chain_status_name(g->chain)));
	add(oom, o, "length", ju64(oom, g->chain_len));
	add(oom, o, "pruned", ju64(oom, g->pruned));
	add(oom, o, "root", jstr_or_null(oom, g->root));
	for (i = 0; i < g->n_breaks; i++) {
		b = jobj(oom);
		add(oom, b, "content_hash", jstr(oom, g->breaks[i].hash));
		add(oom, b, "round_index", ji64(oom, g->breaks[i].round_index));
		add(oom, b, "reason", jstr(oom, vd_break_name(g->breaks[i].reason)));
		push(oom, breaks, b);
	}
	add(oom, o, "breaks", breaks);
	if (g->breaks_total > g->n_breaks)
		add(oom, o, "breaks_not_listed", ju64(oom, g->breaks_total - g->n_breaks));
	return o;
}

/* NULL, without *oom set, when nothing commits the group's round. A slot
 * holding only noted hashes (what an equivocation's other side named) has
 * no entry to show: its source is null. */
static json_object *commitment_json(int *oom, const vd_group *g)
{
	const vd_commit_slot *sl = g->commit;
	const vd_commit_entry *e = vd_slot_entry(sl, g->commit_source);
	json_object *o;

	if (sl == NULL)
		return NULL;
	o = jobj(oom);
	add(oom, o, "round_index", sl->round_index < 0 ? NULL : ji64(oom, sl->round_index));
	add(oom, o, "source", e ? jstr(oom, vd_commit_source_name((vd_commit_source)g->commit_source)) : NULL);
	add(oom, o, "where", e && e->where ? jstr(oom, e->where) : NULL);
	if (e && g->commit_source == VD_SRC_LEDGER)
		add(oom, o, "line", ju64(oom, e->line));
	add(oom, o, "global_model_hash", e ? jstr(oom, e->hash) : NULL);
	add(oom, o, "matches", jbool(oom, g->committed));
	add(oom, o, "signed", jbool(oom, e && e->is_signed));
	if (e && e->is_signed)
		add(oom, o, "key_id", jstr(oom, e->key_id));
	if (sl->other_hash[0])
		add(oom, o, "equivocation", jbool(oom, 1));
	return o;
}

static json_object *pending_chain(int *oom)
{
	json_object *o = jobj(oom);

	add(oom, o, "status", jstr(oom, "pending"));
	add(oom, o, "length", ji64(oom, 0));
	add(oom, o, "root", NULL);
	add(oom, o, "breaks", jarr(oom));
	return o;
}

/* The first failed copy speaks for the hash; a verified copy gives sizes. */
static void summary(const vd_group *g, const vd_copy **failed, const vd_copy **good)
{
	size_t i;

	*failed = *good = NULL;
	for (i = 0; i < g->n; i++) {
		vd_astate st = vd_copy_state(g->copies[i]);
		if (st == VD_AS_FAILED && *failed == NULL)
			*failed = g->copies[i];
		if (st == VD_AS_VERIFIED && *good == NULL)
			*good = g->copies[i];
	}
}

/* The legacy label and the reason for distrust, each only where it
 * applies. */
static void trust_json(int *oom, json_object *o, int64_t migrated_from, const char *reason)
{
	add(oom, o, "legacy", jbool(oom, migrated_from > 0));
	if (migrated_from > 0)
		add(oom, o, "migrated_from", ji64(oom, migrated_from));
	if (reason != NULL)
		add(oom, o, "untrusted_reason", jstr(oom, reason));
}

static json_object *group_json(int *oom, const vd_group *g)
{
	json_object *o = jobj(oom), *copies = jarr(oom);
	const vd_copy *failed, *good;
	size_t i;

	summary(g, &failed, &good);
	add(oom, o, "content_hash", jstr(oom, g->hash));
	add(oom, o, "state", jstr(oom, vd_astate_name(vd_group_state(g))));
	add(oom, o, "code", failed ? jstr(oom, vd_code_name(failed->code)) : NULL);
	add(oom, o, "detail", failed ? jstr(oom, failed->detail) : NULL);
	for (i = 0; i < g->n; i++)
		push(oom, copies, copy_json(oom, g->copies[i], g));
	add(oom, o, "copies", copies);
	add(oom, o, "header", header_json(oom, &g->copies[0]->hdr));
	add(oom, o, "tensors", good ? ju64(oom, good->tensors) : NULL);
	add(oom, o, "bytes", good ? ju64(oom, good->bytes) : NULL);
	add(oom, o, "commitment", commitment_json(oom, g));
	add(oom, o, "chain", chain_json(oom, g));
	add(oom, o, "trusted", jbool(oom, vd_group_trusted(g)));
	trust_json(oom, o, vd_group_migrated_from(g), vd_group_untrusted_reason(g));
	return o;
}

/* A copy whose header cannot be read claims no hash. */
static json_object *headerless_json(int *oom, const vd_copy *c)
{
	json_object *o = jobj(oom), *copies = jarr(oom);
	vd_astate st = vd_copy_state(c);
	int show = st == VD_AS_FAILED;

	add(oom, o, "content_hash", NULL);
	add(oom, o, "state", jstr(oom, vd_astate_name(st)));
	add(oom, o, "code", show ? jstr(oom, vd_code_name(c->code)) : NULL);
	add(oom, o, "detail", show ? jstr(oom, VD_COPY_TEXT(c->detail)) : NULL);
	push(oom, copies, copy_json(oom, c, NULL));
	add(oom, o, "copies", copies);
	add(oom, o, "header", NULL);
	add(oom, o, "tensors", NULL);
	add(oom, o, "bytes", NULL);
	add(oom, o, "commitment", NULL);
	add(oom, o, "chain", pending_chain(oom));
	add(oom, o, "trusted", jbool(oom, 0));
	trust_json(oom, o, 0, show ? "failed" : "unverified");
	return o;
}

int vd_view_status(vd_store *s, const char *hash, json_object **out)
{
	const vd_group *g = vd_store_group(s, hash);
	json_object *o;
	int oom = 0;

	*out = NULL;
	if (g == NULL)
		return -ENOENT;
	o = group_json(&oom, g);
	if ((*out = done(oom, o)) == NULL)
		return -ENOMEM;
	return 0;
}

/* ---- GET /artifacts --------------------------------------------------- */

/* A cursor sorts before the hashes above it, after the rest. */
static int hash_above(const void *after, const void *g)
{
	return strcmp(after, ((const vd_group *)g)->hash) < 0 ? -1 : 1;
}

/* Read from the model's index by hash, from the cursor on. */
json_object *vd_view_artifacts(vd_store *s, int want, const char *after, size_t limit)
{
	json_object *list, *o;
	const vd_order *by = vd_core_by_hash(&s->core);
	vd_group *const *groups;
	const vd_copy *c;
	size_t it = 0, n, i, shown = 0;
	const char *next = NULL, *last = NULL;
	int more = 0, oom = 0;

	if (by == NULL)
		return NULL;
	groups = (vd_group *const *)by->v;
	n = by->n;
	list = jarr(&oom);
	for (i = after != NULL ? vd_order_lower(by, after, hash_above) : 0; i < n && !oom; i++) {
		if (want >= 0 && (int)vd_group_state(groups[i]) != want)
			continue;
		if (limit > 0 && shown == limit) {
			more = 1;
			break;
		}
		push(&oom, list, group_json(&oom, groups[i]));
		last = groups[i]->hash;
		shown++;
	}
	next = more ? last : NULL;
	it = 0;
	while (next == NULL && !oom && (c = vd_model_next_headerless(vd_store_model(s), &it)) != NULL) {
		if (want < 0 || (int)vd_copy_state(c) == want)
			push(&oom, list, headerless_json(&oom, c));
	}
	o = jobj(&oom);
	add(&oom, o, "artifacts", list);
	if (limit > 0)
		add(&oom, o, "next", jstr(&oom, next));
	return done(oom, o);
}

/* ---- POST /verify ----------------------------------------------------- */

static json_object *path_status(int *oom, vd_store *s, const vd_copy *c)
{
	const vd_group *g = c->hdr.code == VD_OK ? vd_store_group(s, c->hdr.content_hash) : NULL;

	return g != NULL ? group_json(oom, g) : headerless_json(oom, c);
}

/* Why a verdict is "fail": each reason one sentence. */
static void add_reason(int *oom, json_object *reasons, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void add_reason(int *oom, json_object *reasons, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	push(oom, reasons, jstr(oom, buf));
}

static void copy_reasons(int *oom, const vd_copy *c, json_object *reasons)
{
	vd_astate st = vd_copy_state(c);

	if (st == VD_AS_FAILED)
		add_reason(oom, reasons, "%s: %s: %s", c->relpath, vd_code_name(c->code),
		    VD_COPY_TEXT(c->detail));
	else if (st != VD_AS_VERIFIED)
		add_reason(oom, reasons, "%s is still %s", c->relpath, vd_astate_name(st));
}

static void group_reasons(int *oom, vd_store *s, const vd_verify_req *vr, json_object *reasons)
{
	const vd_group *g = vd_store_group(s, vr->hash);
	size_t i;

	if (g == NULL) {
		add_reason(oom, reasons, "no artifact claims %s any more", vr->hash);
		return;
	}
	for (i = 0; i < g->n; i++) {
		copy_reasons(oom, g->copies[i], reasons);
		if (vr->form == VD_VERIFY_ROUNDCLOSE &&
		    g->copies[i]->hdr.round_index != vr->rc.round_index + 1)
			add_reason(oom, reasons,
			    "%s has round_index %lld, but RoundClose for round %lld commits the artifact of round %lld",
			    g->copies[i]->relpath, (long long)g->copies[i]->hdr.round_index,
			    (long long)vr->rc.round_index, (long long)vr->rc.round_index + 1);
	}
}

json_object *vd_view_verdict(vd_store *s, const vd_verify_req *vr, const char *relpath)
{
	json_object *o, *reasons;
	const vd_group *g;
	const vd_copy *c;
	int oom = 0;

	reasons = jarr(&oom);
	if (vr->form == VD_VERIFY_PATH) {
		c = vd_store_copy(s, relpath);
		if (c == NULL) {
			o = jobj(&oom);
			add_reason(&oom, reasons, "%s is no longer in the store", relpath);
		} else {
			o = path_status(&oom, s, c);
			copy_reasons(&oom, c, reasons);
			if (vr->has_expected && vd_copy_state(c) == VD_AS_VERIFIED &&
			    strcmp(c->recomputed, vr->expected) != 0)
				add_reason(&oom, reasons, "the artifact hash %s is not the expected %s",
				    c->recomputed, vr->expected);
		}
	} else {
		g = vd_store_group(s, vr->hash);
		o = g != NULL ? group_json(&oom, g) : jobj(&oom);
		group_reasons(&oom, s, vr, reasons);
	}
	add(&oom, o, "verdict", jstr(&oom, reasons != NULL &&
	    json_object_array_length(reasons) == 0 ? "ok" : "fail"));
	add(&oom, o, "reasons", reasons);
	return done(oom, o);
}

json_object *vd_view_accepted(const char *hash, const char *location)
{
	json_object *o;
	int oom = 0;

	o = jobj(&oom);
	add(&oom, o, "state", jstr(&oom, "verifying"));
	add(&oom, o, "content_hash", jstr_or_null(&oom, hash));
	if (location != NULL)
		add(&oom, o, "location", jstr(&oom, location));
	return done(oom, o);
}

/* ---- answers to posts ------------------------------------------------- */

json_object *vd_view_commitment_posted(const char *run, const vd_roundclose *rc,
    const char *key_id, int created)
{
	json_object *o;
	int oom = 0;

	o = jobj(&oom);
	add(&oom, o, "run", jstr(&oom, vd_run_name(run)));
	add(&oom, o, "round_index", ji64(&oom, rc->round_index));
	add(&oom, o, "global_model_hash", jstr(&oom, rc->global_model_hash));
	add(&oom, o, "source", jstr(&oom, key_id ? "signed" : "roundclose"));
	add(&oom, o, "signed", jbool(&oom, key_id != NULL));
	if (key_id)
		add(&oom, o, "key_id", jstr(&oom, key_id));
	add(&oom, o, "created", jbool(&oom, created));
	return done(oom, o);
}

json_object *vd_view_checkpoint_posted(const vd_statement *st, const char *key_id, int created)
{
	json_object *o;
	int oom = 0;

	o = jobj(&oom);
	add(&oom, o, "run", jstr(&oom, vd_run_name(st->run)));
	add(&oom, o, "records", ju64(&oom, st->records));
	add(&oom, o, "head_record_hash", jstr(&oom, st->head_record_hash));
	add(&oom, o, "source", jstr(&oom, "signed"));
	add(&oom, o, "key_id", jstr(&oom, key_id));
	add(&oom, o, "created", jbool(&oom, created));
	return done(oom, o);
}

json_object *vd_view_ledger_forgotten(const char *path)
{
	json_object *o;
	int oom = 0;

	o = jobj(&oom);
	add(&oom, o, "path", jstr(&oom, path));
	add(&oom, o, "forgotten", jbool(&oom, 1));
	return done(oom, o);
}

json_object *vd_view_withdrawn(const vd_withdrawal *w, int created)
{
	json_object *o, *d;
	int oom = 0;

	o = jobj(&oom);
	add(&oom, o, "run", jstr_clean(&oom, vd_run_name(w->run)));
	add(&oom, o, "round_index", ji64(&oom, w->round_index));
	add(&oom, o, "global_model_hash", jstr(&oom, w->hash));
	add(&oom, o, "created", jbool(&oom, created));
	if (created) {
		d = jobj(&oom);
		add(&oom, d, "at", jtime(&oom, w->at));
		add(&oom, d, "reason", jstr_clean(&oom, w->reason));
		add(&oom, d, "sources", jstr(&oom, w->sources));
		add(&oom, o, "withdrawn", d);
	}
	return done(oom, o);
}

json_object *vd_view_key(const char *key_id, const char *pem, const char *oms_key_id,
    const char *oms_pem)
{
	json_object *o;
	int oom = 0;

	o = jobj(&oom);
	add(&oom, o, "keyid", jstr(&oom, key_id));
	add(&oom, o, "public_key", jstr(&oom, pem));
	add(&oom, o, "oms_public_key", oms_pem ? jstr(&oom, oms_pem) : NULL);
	add(&oom, o, "oms_key_id", oms_key_id ? jstr(&oom, oms_key_id) : NULL);
	return done(oom, o);
}

int vd_view_trusted_copy(vd_store *s, const char *hash, const vd_copy **out)
{
	const vd_group *g = vd_store_group(s, hash);
	size_t i;

	*out = NULL;
	if (g == NULL)
		return -ENOENT;
	/* The artifact first: a copy that verified says nothing while another
	 * copy of the same hash failed or is not verified yet. */
	if (!vd_group_trusted(g))
		return -EPERM;
	for (i = 0; i < g->n; i++)
		if (vd_copy_trusted(g->copies[i], g) &&
		    (*out == NULL || ((*out)->kind == VD_KIND_TAR && g->copies[i]->kind == VD_KIND_DIR)))
			*out = g->copies[i];
	return *out != NULL ? 0 : -EPERM;
}

int vd_view_copy_still_trusted(vd_store *s, const char *hash, const char *relpath,
    const vd_fingerprint *fp)
{
	const vd_group *g = vd_store_group(s, hash);
	const vd_copy *c = vd_store_copy(s, relpath);

	return g != NULL && c != NULL && strcmp(c->hdr.content_hash, hash) == 0 &&
	    vd_group_trusted(g) && vd_copy_trusted(c, g) && vd_fingerprint_eq(&c->verdict_fp, fp);
}

/* ---- GET /chain ------------------------------------------------------- */

static json_object *head_json(int *oom, int64_t round, const char *hash)
{
	json_object *o = jobj(oom);

	add(oom, o, "round_index", ji64(oom, round));
	add(oom, o, "content_hash", jstr(oom, hash));
	return o;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One run's part of /chain, filled in one pass over the groups. */
typedef struct run_acc {
	const char *run;            /* first: sorted by str_cmp */
	const vd_group *best;       /* its newest trusted artifact */
	json_object *heads;
} run_acc;

/* Whether a verified child of g sits in run: then g is not a head there. */
static int verified_child_in(const vd_model *m, const vd_group *g, const char *run)
{
	const vd_group *c;

	for (c = vd_model_first_child(m, g->hash); c != NULL; c = c->next_child)
		if (vd_group_state(c) == VD_AS_VERIFIED && vd_group_in_run(c, run))
			return 1;
	return 0;
}

static void acc_group(int *oom, vd_map *accs, const vd_model *m, const vd_group *g)
{
	size_t i, j;

	for (i = 0; i < g->n; i++) {
		run_acc *a = vd_map_get(accs, g->copies[i]->run);
		for (j = 0; j < i && strcmp(g->copies[j]->run, g->copies[i]->run) != 0; j++)
			;
		if (a == NULL || j < i)
			continue;       /* counted once per run */
		if (vd_group_trusted(g) && (a->best == NULL || g->round_index > a->best->round_index))
			a->best = g;
		if (!verified_child_in(m, g, a->run))
			push(oom, a->heads, head_json(oom, g->round_index, g->hash));
	}
}

/* Takes a->heads. */
static json_object *acc_json(int *oom, const run_acc *a)
{
	json_object *o = jobj(oom);

	add(oom, o, "run", jstr(oom, vd_run_name(a->run)));
	add(oom, o, "committed_head", a->best ?
	    head_json(oom, a->best->round_index, a->best->hash) : NULL);
	add(oom, o, "heads", a->heads);
	return o;
}

/* The runs: a directory holding a ledger or an artifact, each once. */
static int run_names(vd_store *s, vd_map *accs)
{
	const vd_copy *c;
	size_t it = 0, i;

	for (i = 0; i < s->n_ledgers; i++)
		if (vd_map_put(accs, s->ledgers[i].run, NULL) < 0)
			return -ENOMEM;
	while ((c = vd_model_next_copy(vd_store_model(s), &it)) != NULL)
		if (vd_map_put(accs, c->run, NULL) < 0)
			return -ENOMEM;
	return 0;
}

/* Every run in name order, each with its committed head and its heads:
 * linear in the store. */
static json_object *runs_json(int *oom, vd_store *s)
{
	json_object *list = jarr(oom);
	run_acc *arr = NULL;
	vd_map accs;
	const vd_group *g;
	const char *k;
	void *v;
	size_t it = 0, n = 0, i;

	vd_map_init(&accs);
	if (run_names(s, &accs) < 0 || (arr = calloc(accs.count + 1, sizeof(*arr))) == NULL) {
		*oom = 1;
		goto out;
	}
	/* Replacing the value of a key already there: the map stays as it is. */
	while (vd_map_next(&accs, &it, &k, &v)) {
		arr[n].run = k;
		arr[n].heads = jarr(oom);
		vd_map_put(&accs, k, &arr[n++]);
	}
	it = 0;
	while ((g = vd_model_next_group(vd_store_model(s), &it)) != NULL)
		if (vd_group_state(g) == VD_AS_VERIFIED)
			acc_group(oom, &accs, vd_store_model(s), g);
	qsort(arr, n, sizeof(*arr), str_cmp);
	/* Every acc_json, out of memory or not: each takes its heads. */
	for (i = 0; i < n; i++)
		push(oom, list, acc_json(oom, &arr[i]));
out:
	free(arr);
	vd_map_free(&accs);
	return list;
}

/* Each fork alert's parent with its verified children. */
static json_object *forks_json(int *oom, vd_store *s)
{
	json_object *forks = jarr(oom), *children, *f;
	const vd_group *c;
	const vd_alert *a;
	size_t it = 0;

	while ((a = vd_lineage_next_alert(vd_core_lineage(&s->core), &it)) != NULL) {
		if (a->kind != VD_ALERT_FORK)
			continue;
		children = jarr(oom);
		for (c = vd_model_first_child(vd_store_model(s), a->subject); c != NULL; c = c->next_child)
			if (vd_group_state(c) == VD_AS_VERIFIED)
				push(oom, children, jstr(oom, c->hash));
		f = jobj(oom);
		add(oom, f, "parent", jstr(oom, a->subject));
		add(oom, f, "children", children);
		push(oom, forks, f);
	}
	return forks;
}

static json_object *ledger_json(int *oom, const vd_scan_ledger *l, const vd_ledger_mem *m)
{
	json_object *o = jobj(oom), *b = NULL;
	int valid = l->read_ok && l->result.brk == VD_LEDGER_INTACT;
	size_t i, suspect = 0;

	add(oom, o, "path", jstr(oom, l->relpath));
	add(oom, o, "run", jstr(oom, vd_run_name(l->run)));
	add(oom, o, "records", ju64(oom, l->result.records));
	add(oom, o, "trusted_records", ju64(oom, l->result.trusted));
	add(oom, o, "chain_valid", jbool(oom, valid));
	if (!l->read_ok) {
		b = jobj(oom);
		add(oom, b, "line", NULL);
		add(oom, b, "reason", jstr(oom, "unreadable"));
		add(oom, b, "detail", jstr(oom, l->read_error));
	} else if (!valid) {
		b = jobj(oom);
		add(oom, b, "line", ju64(oom, l->result.break_line));
		add(oom, b, "reason", jstr(oom, vd_ledger_break_name(l->result.brk)));
		add(oom, b, "detail", jstr(oom, l->result.break_detail));
		/* The last good record before the break may be the rewritten one. */
		for (i = 0; i < l->n_entries; i++)
			if (l->entries[i].line < l->result.break_line)
				suspect = l->entries[i].line;
	}
	add(oom, o, "first_break", b);
	add(oom, o, "remembered_records", ju64(oom, m ? m->n : 0));
	add(oom, o, "rewritten", jbool(oom, m && m->rewritten));
	add(oom, o, "rewritten_detail", m && m->rewritten ? jstr(oom, m->detail) : NULL);
	add(oom, o, "suspect_line", suspect ? ju64(oom, suspect) : NULL);
	return o;
}

/* A string from the store (a path, a run) as JSON text; bytes that are
 * not UTF-8 are replaced, as json-c's answers elsewhere would carry them. */
static void text_json(vd_buf *b, const char *str)
{
	char clean[2 * VD_RUN_MAX];   /* a run, or a file path in one */

	if (vd_utf8_valid((const uint8_t *)str, strlen(str))) {
		vd_jw_string(b, str, strlen(str), VD_JW_UTF8);
		return;
	}
	snprintf(clean, sizeof(clean), "%s", str);
	vd_utf8_sanitize(clean);
	vd_jw_string(b, clean, strlen(clean), VD_JW_UTF8);
}

static void field(vd_buf *b, const char *key)
{
	vd_buf_printf(b, ",\"%s\":", key);
}

static void commitment_text(vd_buf *b, vd_store *s, const vd_commit_slot *sl,
    vd_commit_source src, int policy)
{
	const vd_commit_entry *e = vd_slot_entry(sl, src);
	const vd_group *g;

	if (e == NULL)
		return;
	g = vd_store_group(s, e->hash);

	/* The bare genesis pin applies to every run: shown as the root's. */
	vd_buf_puts(b, "{\"run\":");
	text_json(b, strcmp(sl->run, "*") == 0 ? "." : vd_run_name(sl->run));
	field(b, "round_index");
	if (sl->round_index < 0)
		vd_buf_puts(b, "null");
	else
		vd_jw_int(b, sl->round_index);
	vd_buf_printf(b, ",\"global_model_hash\":\"%s\",\"source\":\"%s\"", e->hash,
	    vd_commit_source_name(src));
	field(b, "where");
	text_json(b, e->where ? e->where : "?");
	vd_buf_printf(b, ",\"signed\":%s", e->is_signed ? "true" : "false");
	if (e->is_signed) {
		field(b, "key_id");
		text_json(b, e->key_id);
	}
	vd_buf_printf(b, ",\"counts\":%s,\"artifact_state\":\"%s\"}",
	    vd_commit_counts(e, src, policy) ? "true" : "false",
	    g ? vd_astate_name(vd_group_state(g)) : "missing");
}

static int slot_cmp(const void *a, const void *b)
{
	const vd_commit_slot *x = *(const vd_commit_slot *const *)a;
	const vd_commit_slot *y = *(const vd_commit_slot *const *)b;
	int c = strcmp(x->run, y->run);

	if (c != 0)
		return c;
	return (x->round_index > y->round_index) - (x->round_index < y->round_index);
}

/* Every commitment, by run and round, each source on its own: written
 * straight as text, since a long run holds one per round. */
static void commitments_text(vd_buf *b, vd_store *s)
{
	const vd_commit_slot **slots = calloc(vd_lineage_slot_count(vd_core_lineage(&s->core)) + 1, sizeof(*slots));
	int policy = vd_config_policy(s->cfg), src, first = 1;
	size_t it = 0, n = 0, i;

	if (slots == NULL) {
		b->oom = 1;
		return;
	}
	while ((slots[n] = vd_lineage_next_slot(vd_core_lineage(&s->core), &it)) != NULL)
		n++;
	qsort(slots, n, sizeof(*slots), slot_cmp);
	vd_buf_putc(b, '[');
	for (i = 0; i < n && !b->oom; i++)
		for (src = 0; src < VD_SRC_COUNT; src++) {
			if (vd_slot_entry(slots[i], src) == NULL)
				continue;
			if (!first)
				vd_buf_putc(b, ',');
			first = 0;
			commitment_text(b, s, slots[i], (vd_commit_source)src, policy);
		}
	vd_buf_putc(b, ']');
	free(slots);
}

/* Where a run's rounds from round on start in an index by (run, round,
 * ...), or (end) where the run ends. */
typedef struct run_key {
	const char *run;
	int64_t round;
	int end;
} run_key;

static int run_key_cmp(const run_key *k, const char *run, int64_t round)
{
	int c = strcmp(k->run, run);

	if (c != 0)
		return c;
	if (k->end)
		return 1;
	return k->round <= round ? -1 : 1;
}

static int copy_key_cmp(const void *key, const void *c)
{
	return run_key_cmp(key, ((const vd_copy *)c)->run, ((const vd_copy *)c)->run_round);
}

static int retained_key_cmp(const void *key, const void *r)
{
	return run_key_cmp(key, ((const vd_retained *)r)->run, ((const vd_retained *)r)->round_index);
}

/* [from, to) of the index: the run's rounds above after, to until
 * (-1: to the run's end). */
static void run_span(const vd_order *by, int (*cmp)(const void *, const void *),
    const char *run, long long after, int64_t until, size_t *from, size_t *to)
{
	run_key k = { run, 0, 0 };

	if (after >= INT64_MAX) {     /* no round above it */
		*from = *to = 0;
		return;
	}
	k.round = (int64_t)after + 1;
	*from = vd_order_lower(by, &k, cmp);
	k.end = until < 0 || until == INT64_MAX;
	k.round = k.end ? 0 : until + 1;
	*to = vd_order_lower(by, &k, cmp);
}

static json_object *link_json(int *oom, const vd_group *g)
{
	json_object *o = jobj(oom), *c = jobj(oom);

	add(oom, o, "round_index", ji64(oom, g->round_index));
	add(oom, o, "content_hash", jstr(oom, g->hash));
	add(oom, o, "parent_hash", g->has_parent ? jstr(oom, g->parent) : NULL);
	add(oom, o, "state", jstr(oom, vd_astate_name(vd_group_state(g))));
	add(oom, o, "trusted", jbool(oom, vd_group_trusted(g)));
	add(oom, c, "status", jstr(oom, vd_chain_status_name(g->chain)));
	add(oom, c, "length", ju64(oom, g->chain_len));
	add(oom, c, "pruned", ju64(oom, g->pruned));
	add(oom, o, "chain", c);
	return o;
}

/* The run's pruned links (remembered rounds whose directories are gone)
 * of the rounds above after, up to and including until (-1: no end): the
 * same span as the page's artifacts. */
static json_object *pruned_json(int *oom, vd_store *s, const char *run, long long after,
    int64_t until)
{
	json_object *list = jarr(oom), *o;
	const vd_order *by = vd_store_retained_order(s);
	vd_retained *const *rs;
	size_t i, n;

	if (by == NULL) {
		*oom = 1;
		return list;
	}
	rs = (vd_retained *const *)by->v;
	run_span(by, retained_key_cmp, run, after, until, &i, &n);
	for (; i < n && !*oom; i++) {
		if (vd_model_group(vd_store_model(s), rs[i]->hash) != NULL)
			continue;
		o = jobj(oom);
		add(oom, o, "round_index", ji64(oom, rs[i]->round_index));
		add(oom, o, "content_hash", jstr(oom, rs[i]->hash));
		add(oom, o, "parent_hash", rs[i]->has_parent ? jstr(oom, rs[i]->parent) : NULL);
		add(oom, o, "verified_at", jtime(oom, rs[i]->verified_at));
		push(oom, list, o);
	}
	return list;
}

/* The run's committed head: its trusted group of the highest round (of
 * the highest hash within it), looked for from the run's end down. */
static const vd_group *run_head(const vd_order *by, const char *run)
{
	vd_copy *const *cs = (vd_copy *const *)by->v;
	size_t from, to;

	run_span(by, copy_key_cmp, run, -1, -1, &from, &to);
	while (to > from)
		if (vd_group_trusted(cs[--to]->run_group))
			return cs[to]->run_group;
	return NULL;
}

/* Read from the model's index by run and round, from the cursor on: the
 * copies of a group in the run are side by side. */
json_object *vd_view_run_chain(vd_store *s, const char *run, long long after, size_t limit)
{
	json_object *o, *list;
	const vd_order *by = vd_core_by_run(&s->core);
	vd_copy *const *cs;
	const vd_group *best, *g, *prev = NULL;
	size_t i, n, shown = 0;
	int64_t last = -1;
	int more = 0, oom = 0;

	if (by == NULL)
		return NULL;
	cs = (vd_copy *const *)by->v;
	best = run_head(by, run);
	run_span(by, copy_key_cmp, run, after, -1, &i, &n);
	list = jarr(&oom);
	for (; i < n && !oom; i++) {
		if ((g = cs[i]->run_group) == prev)
			continue;
		prev = g;
		/* A page ends between rounds, never inside one (a fork's
		 * siblings), so that after=ROUND misses nothing. */
		if (limit > 0 && shown >= limit && g->round_index != last) {
			more = 1;
			break;
		}
		push(&oom, list, link_json(&oom, g));
		last = g->round_index;
		shown++;
	}
	o = jobj(&oom);
	add(&oom, o, "run", jstr(&oom, vd_run_name(run)));
	add(&oom, o, "committed_head", best ? head_json(&oom, best->round_index, best->hash) : NULL);
	add(&oom, o, "artifacts", list);
	add(&oom, o, "pruned", pruned_json(&oom, s, run, after, more ? last : -1));
	add(&oom, o, "next", more ? ji64(&oom, last) : NULL);
	return done(oom, o);
}

static json_object *chain_object(int *oom, vd_store *s)
{
	json_object *o = jobj(oom), *head = NULL, *ledgers = jarr(oom);
	const char *hash, *run;
	int64_t round;
	size_t i;

	add(oom, o, "runs", runs_json(oom, s));
	if ((round = vd_lineage_head(vd_core_lineage(&s->core), &hash, &run)) >= 0) {
		head = head_json(oom, round, hash);
		add(oom, head, "run", jstr(oom, vd_run_name(run)));
	}
	add(oom, o, "committed_head", head);
	add(oom, o, "forks", forks_json(oom, s));
	for (i = 0; i < s->n_ledgers; i++)
		push(oom, ledgers, ledger_json(oom, &s->ledgers[i],
		    vd_store_ledger_mem(s, s->ledgers[i].relpath)));
	add(oom, o, "ledgers", ledgers);
	return o;
}

/* The object with the commitments list appended as its last member, in
 * one buffer handed to the server as it is. */
int vd_view_chain(vd_store *s, vd_buf *b)
{
	const char *head = NULL;
	json_object *o;
	size_t len = 0;
	int oom = 0;

	vd_buf_init(b);
	o = chain_object(&oom, s);
	if (!oom)
		head = json_object_to_json_string_length(o, VD_VIEW_JSON, &len);
	if (head == NULL || len == 0)
		b->oom = 1;
	else
		vd_buf_put(b, head, len - 1);  /* without its closing brace */
	json_object_put(o);
	vd_buf_puts(b, ",\"commitments\":");
	if (!b->oom)
		commitments_text(b, s);
	vd_buf_putc(b, '}');
	if (b->oom) {
		vd_buf_free(b);
		return -ENOMEM;
	}
	return 0;
}

/* ---- GET /alerts and GET /commitments --------------------------------- */

int vd_view_rows_init(vd_view_rows *rows)
{
	rows->oom = 0;
	rows->list = json_object_new_array();
	return rows->list != NULL ? 0 : -ENOMEM;
}

void vd_view_rows_free(vd_view_rows *rows)
{
	json_object_put(rows->list);
	rows->list = NULL;
}

void vd_view_alert_row(const vd_alert_row *a, void *arg)
{
	vd_view_rows *rows = arg;
	int *oom = &rows->oom;
	json_object *o;

	if (*oom)
		return;         /* the page is lost already */
	o = jobj(oom);
	add(oom, o, "id", ji64(oom, a->id));
	add(oom, o, "kind", jstr(oom, a->kind));
	add(oom, o, "subject", jstr_clean(oom, a->subject));
	add(oom, o, "detail", jstr_clean(oom, a->detail));
	add(oom, o, "raised_at", jtime(oom, a->raised_at));
	add(oom, o, "cleared_at", a->cleared_at > 0 ? jtime(oom, a->cleared_at) : NULL);
	push(oom, rows->list, o);
}

void vd_view_audit_row(const vd_audit *a, void *arg)
{
	vd_view_rows *rows = arg;
	int *oom = &rows->oom;
	int cp = strcmp(a->kind, VD_AUDIT_CHECKPOINT) == 0;
	json_object *o;

	if (*oom)
		return;
	o = jobj(oom);
	add(oom, o, "id", ji64(oom, a->id));
	add(oom, o, "run", jstr_clean(oom, vd_run_name(a->run)));
	add(oom, o, "kind", jstr(oom, a->kind));
	/* An OMS bundle of a round-0 artifact commits round -1: the genesis,
	 * which GET /chain shows with round_index null too. */
	add(oom, o, "round_index", cp || a->number < 0 ? NULL : ji64(oom, a->number));
	add(oom, o, "global_model_hash", cp ? NULL : jstr(oom, a->hash));
	add(oom, o, "records", cp ? ji64(oom, a->number) : NULL);
	add(oom, o, "head_record_hash", cp ? jstr(oom, a->hash) : NULL);
	add(oom, o, "source", jstr(oom, a->source));
	add(oom, o, "by", jstr(oom, a->author));
	add(oom, o, "key_id", jstr_or_null(oom, a->key_id));
	add(oom, o, "via", jstr(oom, a->file[0] ? "file" : "post"));
	add(oom, o, "from", a->file[0] ? jstr_clean(oom, a->file) : jstr_or_null(oom, a->peer));
	add(oom, o, "line", a->line > 0 ? ji64(oom, a->line) : NULL);
	add(oom, o, "first_seen", jtime(oom, a->first_seen));
	if (a->withdrawn_at > 0) {
		json_object *w = jobj(oom);
		add(oom, w, "at", jtime(oom, a->withdrawn_at));
		add(oom, w, "reason", jstr_clean(oom, a->withdrawn_reason ? a->withdrawn_reason : ""));
		add(oom, o, "withdrawn", w);
	}
	push(oom, rows->list, o);
}

json_object *vd_view_history(const char *name, vd_view_rows *rows, const vd_page *pg)
{
	json_object *o;
	int oom = rows->oom;

	o = jobj(&oom);
	add(&oom, o, name, rows->list);
	rows->list = NULL;
	add(&oom, o, "next", pg->next > 0 ? ji64(&oom, pg->next) : NULL);
	return done(oom, o);
}

#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "vd_api.h"
#include "vd_attest.h"
#include "vd_dsse.h"
#include "vd_events.h"
#include "vd_hash.h"
#include "vd_json.h"
#include "vd_jsonw.h"
#include "vd_log.h"
#include "vd_reqparse.h"
#include "vd_utf8.h"
#include "vd_util.h"

#include <openssl/crypto.h>

#define JSON_OUT (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
#define PEER_MAX INET6_ADDRSTRLEN

typedef struct verify_wait {
	vd_api *api;
	vd_req *req;
	vd_waiter *waiter;
	vd_verify_req vr;
	char relpath[VD_REQ_PATH_MAX];   /* the copy, for the path form */
} verify_wait;

static json_object *jstr_or_null(const char *s)
{
	return s && s[0] ? json_object_new_string(s) : NULL;
}

/* A header field: "" is a value the header holds, not an absence. */
static json_object *jstr_keep_empty(const char *s)
{
	return s ? json_object_new_string(s) : NULL;
}

/* A fact that applies; one that does not is left out, never null. */
static void add_fact(json_object *o, const char *key, const char *value)
{
	if (value[0] != '\0')
		json_object_object_add(o, key, json_object_new_string(value));
}

/* The facts behind a failed verdict (vd_facts). The recomputed hash is
 * the copy's recomputed_hash, given whenever one was reached. */
static void facts_json(json_object *o, const vd_facts *f)
{
	add_fact(o, "expected_hash", f->expected_hash);
	if (f->has_file_schema_version)
		json_object_object_add(o, "file_schema_version",
		    json_object_new_int64(f->file_schema_version));
	if (f->reader_max_version > 0)
		json_object_object_add(o, "reader_max_version",
		    json_object_new_int64(f->reader_max_version));
	add_fact(o, "tensor", f->tensor);
	add_fact(o, "file", f->file);
	add_fact(o, "remediation", f->remediation);
}

static json_object *copy_json(const vd_copy *c, const vd_group *g)
{
	json_object *o = json_object_new_object();
	vd_astate st = vd_copy_state(c);
	int show = c->has_verdict && (st == VD_AS_VERIFIED || st == VD_AS_FAILED);
	char when[40];

	json_object_object_add(o, "path", json_object_new_string(c->relpath));
	json_object_object_add(o, "kind", json_object_new_string(vd_kind_name(c->kind)));
	json_object_object_add(o, "state", json_object_new_string(vd_astate_name(st)));
	json_object_object_add(o, "code", show && c->code != VD_OK ?
	    json_object_new_string(vd_code_name(c->code)) : NULL);
	json_object_object_add(o, "detail", show && c->code != VD_OK ?
	    json_object_new_string(VD_COPY_TEXT(c->detail)) : NULL);
	vd_rfc3339(c->verified_at, when, sizeof(when));
	json_object_object_add(o, "verified_at", c->has_verdict ? json_object_new_string(when) : NULL);
	json_object_object_add(o, "duration_ms", c->has_verdict ?
	    json_object_new_double(c->duration_ms) : NULL);
	if (show && c->recomputed[0] && c->code != VD_OK)
		json_object_object_add(o, "recomputed_hash", json_object_new_string(c->recomputed));
	if (show && c->code != VD_OK && c->changed != NULL)
		json_object_object_add(o, "changed", json_object_new_string(c->changed));
	if (show && c->code != VD_OK && c->facts != NULL)
		facts_json(o, c->facts);
	/* Each copy its own bit: a good copy beside a bad one can be loaded. */
	json_object_object_add(o, "trusted", json_object_new_boolean(g != NULL &&
	    st == VD_AS_VERIFIED && g->chain == VD_CHAIN_INTACT && g->committed &&
	    !g->legacy_untrusted));
	return o;
}

static json_object *header_json(const vd_hdrinfo *h)
{
	json_object *o = json_object_new_object(), *groups = json_object_new_array();
	size_t i;

	json_object_object_add(o, "schema_version", json_object_new_int64(h->schema_version));
	json_object_object_add(o, "round_index", json_object_new_int64(h->round_index));
	json_object_object_add(o, "parent_hash", h->has_parent ?
	    json_object_new_string(h->parent_hash) : NULL);
	json_object_object_add(o, "wmcp_version", jstr_keep_empty(h->wmcp_version));
	json_object_object_add(o, "config_hash", jstr_keep_empty(h->config_hash));
	for (i = 0; i < h->n_param_groups; i++)
		json_object_array_add(groups, json_object_new_string(h->param_groups[i]));
	json_object_object_add(o, "param_groups", groups);
	json_object_object_add(o, "created_at", jstr_keep_empty(h->created_at));
	return o;
}

static json_object *chain_json(const vd_group *g)
{
	json_object *o = json_object_new_object(), *breaks = json_object_new_array();
	size_t i;

	json_object_object_add(o, "status", json_object_new_string(vd_chain_status_name(g->chain)));
	json_object_object_add(o, "length", json_object_new_uint64(g->chain_len));
	json_object_object_add(o, "pruned", json_object_new_uint64(g->pruned));
	json_object_object_add(o, "root", jstr_or_null(g->root));
	for (i = 0; i < g->n_breaks; i++) {
		json_object *b = json_object_new_object();
		json_object_object_add(b, "content_hash", json_object_new_string(g->breaks[i].hash));
		json_object_object_add(b, "round_index", json_object_new_int64(g->breaks[i].round_index));
		json_object_object_add(b, "reason", json_object_new_string(vd_break_name(g->breaks[i].reason)));
		json_object_array_add(breaks, b);
	}
	json_object_object_add(o, "breaks", breaks);
	if (g->breaks_total > g->n_breaks)
		json_object_object_add(o, "breaks_not_listed",
		    json_object_new_uint64(g->breaks_total - g->n_breaks));
	return o;
}

static json_object *commitment_json(const vd_group *g)
{
	const vd_commit_slot *sl = g->commit;
	const vd_commit_entry *e;
	json_object *o;

	if (sl == NULL)
		return NULL;
	e = &sl->src[g->commit_source];
	o = json_object_new_object();
	json_object_object_add(o, "round_index", sl->round_index < 0 ?
	    NULL : json_object_new_int64(sl->round_index));
	json_object_object_add(o, "source", json_object_new_string(
	    vd_commit_source_name((vd_commit_source)g->commit_source)));
	json_object_object_add(o, "where", json_object_new_string(e->where ? e->where : "?"));
	if (g->commit_source == VD_SRC_LEDGER)
		json_object_object_add(o, "line", json_object_new_uint64(e->line));
	json_object_object_add(o, "global_model_hash", json_object_new_string(e->hash));
	json_object_object_add(o, "matches", json_object_new_boolean(g->committed));
	json_object_object_add(o, "signed", json_object_new_boolean(e->is_signed));
	if (e->is_signed)
		json_object_object_add(o, "key_id", json_object_new_string(e->key_id));
	if (sl->other_hash[0])
		json_object_object_add(o, "equivocation", json_object_new_boolean(1));
	return o;
}

static json_object *pending_chain(void)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "status", json_object_new_string("pending"));
	json_object_object_add(o, "length", json_object_new_int(0));
	json_object_object_add(o, "root", NULL);
	json_object_object_add(o, "breaks", json_object_new_array());
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

/* Why a hash is not trusted: the first condition of trusted (lineage)
 * it misses; NULL when trusted. A chain lineage has not looked at since
 * the last verdict is pending. */
static const char *untrusted_reason(const vd_group *g)
{
	if (g->trusted)
		return NULL;
	switch (vd_group_state(g)) {
	case VD_AS_FAILED:
		return "failed";
	case VD_AS_VERIFIED:
		break;
	default:
		return "unverified";
	}
	if (g->chain == VD_CHAIN_BROKEN)
		return "chain_broken";
	if (g->chain != VD_CHAIN_INTACT)
		return "chain_pending";
	if (!g->committed)
		return "uncommitted";
	return g->legacy_untrusted ? "legacy" : "chain_pending";
}

/* The legacy label and the reason for distrust, each only where it
 * applies. */
static void trust_json(json_object *o, int64_t migrated_from, const char *reason)
{
	json_object_object_add(o, "legacy", json_object_new_boolean(migrated_from > 0));
	if (migrated_from > 0)
		json_object_object_add(o, "migrated_from", json_object_new_int64(migrated_from));
	if (reason != NULL)
		json_object_object_add(o, "untrusted_reason", json_object_new_string(reason));
}

static json_object *group_json(const vd_group *g)
{
	json_object *o = json_object_new_object(), *copies = json_object_new_array();
	const vd_copy *failed, *good;
	size_t i;

	summary(g, &failed, &good);
	json_object_object_add(o, "content_hash", json_object_new_string(g->hash));
	json_object_object_add(o, "state", json_object_new_string(vd_astate_name(vd_group_state(g))));
	json_object_object_add(o, "code", failed ? json_object_new_string(vd_code_name(failed->code)) : NULL);
	json_object_object_add(o, "detail", failed ? json_object_new_string(failed->detail) : NULL);
	for (i = 0; i < g->n; i++)
		json_object_array_add(copies, copy_json(g->copies[i], g));
	json_object_object_add(o, "copies", copies);
	json_object_object_add(o, "header", header_json(&g->copies[0]->hdr));
	json_object_object_add(o, "tensors", good ? json_object_new_uint64(good->tensors) : NULL);
	json_object_object_add(o, "bytes", good ? json_object_new_uint64(good->bytes) : NULL);
	json_object_object_add(o, "commitment", commitment_json(g));
	json_object_object_add(o, "chain", chain_json(g));
	json_object_object_add(o, "trusted", json_object_new_boolean(g->trusted));
	trust_json(o, vd_group_migrated_from(g), untrusted_reason(g));
	return o;
}

/* A directory whose header.json cannot be read claims no hash. */
static json_object *headerless_json(const vd_copy *c)
{
	json_object *o = json_object_new_object(), *copies = json_object_new_array();
	vd_astate st = vd_copy_state(c);
	int show = st == VD_AS_FAILED;

	json_object_object_add(o, "content_hash", NULL);
	json_object_object_add(o, "state", json_object_new_string(vd_astate_name(st)));
	json_object_object_add(o, "code", show ? json_object_new_string(vd_code_name(c->code)) : NULL);
	json_object_object_add(o, "detail", show ? json_object_new_string(VD_COPY_TEXT(c->detail)) : NULL);
	json_object_array_add(copies, copy_json(c, NULL));
	json_object_object_add(o, "copies", copies);
	json_object_object_add(o, "header", NULL);
	json_object_object_add(o, "tensors", NULL);
	json_object_object_add(o, "bytes", NULL);
	json_object_object_add(o, "commitment", NULL);
	json_object_object_add(o, "chain", pending_chain());
	json_object_object_add(o, "trusted", json_object_new_boolean(0));
	trust_json(o, 0, show ? "failed" : "unverified");
	return o;
}

json_object *vd_api_status(vd_api *api, const char *hash)
{
	vd_group *g = vd_store_group(api->store, hash);

	return g ? group_json(g) : NULL;
}

static void send_json(vd_req *r, unsigned status, json_object *o,
    const char *const *extra)
{
	const char *s = json_object_to_json_string_ext(o, JSON_OUT);

	vd_http_respond(r, status, "application/json", s, strlen(s), extra);
	json_object_put(o);
}

static void not_allowed(vd_req *r, const char *allow)
{
	char detail[96];

	snprintf(detail, sizeof(detail), "%s is not allowed here; use %s", r->method, allow);
	vd_http_error(r, 405, "method_not_allowed", detail,
	    (const char *const[]){ "Allow", allow, NULL });
}

/* ---- GET routes ------------------------------------------------------- */

static void get_artifact(vd_api *api, vd_req *r, const char *hash)
{
	json_object *o;

	if (!vd_is_hex64((vd_str){ hash, strlen(hash) })) {
		vd_http_error(r, 400, "bad_request",
		    "an artifact is named by its content hash: 64 lowercase hex characters", NULL);
		return;
	}
	if ((o = vd_api_status(api, hash)) == NULL) {
		vd_http_error(r, 404, "not_found", "no artifact directory in the store claims this hash", NULL);
		return;
	}
	send_json(r, 200, o, NULL);
}

static int parse_state(const char *s, int *out)
{
	int i;

	for (i = 0; i < 4; i++) {
		if (strcmp(s, vd_astate_name((vd_astate)i)) == 0) {
			*out = i;
			return 0;
		}
	}
	return -1;
}

static int group_cmp(const void *a, const void *b)
{
	return strcmp((*(vd_group *const *)a)->hash, (*(vd_group *const *)b)->hash);
}

/* ?limit=N (1 to VD_PAGE_MAX; absent: no limit, 0 here). */
static int parse_limit(vd_req *r, size_t *out)
{
	const char *q = vd_req_query(r, "limit");
	char *end;
	unsigned long v;

	*out = 0;
	if (q == NULL)
		return 0;
	v = strtoul(q, &end, 10);
	if (q[0] < '0' || q[0] > '9' || *end != '\0' || v < 1 || v > VD_PAGE_MAX)
		return -1;
	*out = v;
	return 0;
}

static void bad_limit(vd_req *r)
{
	char detail[96];

	snprintf(detail, sizeof(detail), "limit must be a whole number from 1 to %d", VD_PAGE_MAX);
	vd_http_error(r, 400, "bad_request", detail, NULL);
}

/* GET /artifacts: by content hash; ?limit=&after=HASH pages through them
 * with a "next" cursor (directories without a valid header, which claim
 * no hash, come on the last page). */
static void get_artifacts(vd_api *api, vd_req *r)
{
	const char *q = vd_req_query(r, "state"), *after = vd_req_query(r, "after"), *k;
	json_object *list = json_object_new_array(), *o;
	vd_group **groups;
	size_t it = 0, n = 0, i, limit, shown = 0;
	const char *next = NULL, *last = NULL;
	void *v;
	int want = -1, more = 0;

	if (q != NULL && parse_state(q, &want) < 0) {
		json_object_put(list);
		vd_http_error(r, 400, "bad_request",
		    "state must be pending, verifying, verified or failed", NULL);
		return;
	}
	if (parse_limit(r, &limit) < 0 || (after != NULL && !vd_is_hex64((vd_str){ after, strlen(after) }))) {
		json_object_put(list);
		if (after != NULL && !vd_is_hex64((vd_str){ after, strlen(after) }))
			vd_http_error(r, 400, "bad_request", "after is a content hash: 64 lowercase hex characters", NULL);
		else
			bad_limit(r);
		return;
	}
	groups = calloc(api->store->model.groups.count + 1, sizeof(*groups));
	while (groups && vd_map_next(&api->store->model.groups, &it, &k, &v))
		groups[n++] = v;
	if (groups)
		qsort(groups, n, sizeof(*groups), group_cmp);
	for (i = 0; i < n; i++) {
		if ((after != NULL && strcmp(groups[i]->hash, after) <= 0) ||
		    (want >= 0 && (int)vd_group_state(groups[i]) != want))
			continue;
		if (limit > 0 && shown == limit) {
			more = 1;
			break;
		}
		json_object_array_add(list, group_json(groups[i]));
		last = groups[i]->hash;
		shown++;
	}
	next = more ? last : NULL;
	it = 0;
	while (next == NULL && vd_map_next(&api->store->model.copies, &it, &k, &v)) {
		vd_copy *c = v;
		if (c->hdr.code != VD_OK && (want < 0 || (int)vd_copy_state(c) == want))
			json_object_array_add(list, headerless_json(c));
	}
	o = json_object_new_object();
	json_object_object_add(o, "artifacts", list);
	if (limit > 0)
		json_object_object_add(o, "next", next ? json_object_new_string(next) : NULL);
	free(groups);
	send_json(r, 200, o, NULL);
}

static void get_metrics(vd_api *api, vd_req *r)
{
	vd_gauges g;
	vd_buf b;

	memset(&g, 0, sizeof(g));
	g.committed_head_round = -1;
	g.start_time = api->start_time;
	vd_store_gauges(api->store, &g);
	g.http_connections = vd_http_connections(api->http);
	g.http_connections_limit = vd_http_connection_limit(api->http);
	vd_buf_init(&b);
	if (vd_metrics_render(api->metrics, &g, &b) < 0) {
		vd_buf_free(&b);
		vd_http_error(r, 500, "internal", "out of memory rendering metrics", NULL);
		return;
	}
	vd_http_respond(r, 200, "text/plain; version=0.0.4; charset=utf-8",
	    (const char *)b.p, b.len, NULL);
	vd_buf_free(&b);
}

static void get_readyz(vd_api *api, vd_req *r)
{
	if (!api->store->scanned_once || !api->state_ready) {
		vd_http_error(r, 503, "not_ready",
		    api->store->scanned_once ? "the state database is not loaded yet" :
		    "the first store scan has not finished", (const char *const[]){
		    "Retry-After", "1", NULL });
		return;
	}
	vd_http_respond(r, 200, "application/json", "{\"ready\":true}", 14, NULL);
}

/* ---- POST /verify ------------------------------------------------------ */

static json_object *path_status(vd_api *api, const vd_copy *c)
{
	json_object *o = NULL;

	if (c->hdr.code == VD_OK)
		o = vd_api_status(api, c->hdr.content_hash);
	return o ? o : headerless_json(c);
}

/* Why a verdict is "fail": each reason one sentence. */
static void add_reason(json_object *reasons, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void add_reason(json_object *reasons, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	json_object_array_add(reasons, json_object_new_string(buf));
}

static void copy_reasons(const vd_copy *c, json_object *reasons)
{
	vd_astate st = vd_copy_state(c);

	if (st == VD_AS_FAILED)
		add_reason(reasons, "%s: %s: %s", c->relpath, vd_code_name(c->code), VD_COPY_TEXT(c->detail));
	else if (st != VD_AS_VERIFIED)
		add_reason(reasons, "%s is still %s", c->relpath, vd_astate_name(st));
}

static void verdict_for_group(vd_api *api, verify_wait *vw, json_object *o,
    json_object *reasons)
{
	vd_group *g = vd_store_group(api->store, vw->vr.hash);
	size_t i;

	if (g == NULL) {
		add_reason(reasons, "no artifact directory claims %s any more", vw->vr.hash);
		return;
	}
	for (i = 0; i < g->n; i++) {
		copy_reasons(g->copies[i], reasons);
		if (vw->vr.form == VD_VERIFY_ROUNDCLOSE &&
		    g->copies[i]->hdr.round_index != vw->vr.rc.round_index + 1)
			add_reason(reasons,
			    "%s has round_index %lld, but RoundClose for round %lld commits the artifact of round %lld",
			    g->copies[i]->relpath, (long long)g->copies[i]->hdr.round_index,
			    (long long)vw->vr.rc.round_index, (long long)vw->vr.rc.round_index + 1);
	}
}

static json_object *verify_answer(vd_api *api, verify_wait *vw)
{
	json_object *o, *reasons = json_object_new_array();
	vd_copy *c;

	if (vw->vr.form == VD_VERIFY_PATH) {
		c = vd_store_copy(api->store, vw->relpath);
		if (c == NULL) {
			o = json_object_new_object();
			add_reason(reasons, "%s is no longer in the store", vw->relpath);
		} else {
			o = path_status(api, c);
			copy_reasons(c, reasons);
			if (vw->vr.has_expected && vd_copy_state(c) == VD_AS_VERIFIED &&
			    strcmp(c->recomputed, vw->vr.expected) != 0)
				add_reason(reasons, "the artifact hash %s is not the expected %s",
				    c->recomputed, vw->vr.expected);
		}
	} else {
		o = vd_api_status(api, vw->vr.hash);
		if (o == NULL)
			o = json_object_new_object();
		verdict_for_group(api, vw, o, reasons);
	}
	json_object_object_add(o, "verdict", json_object_new_string(
	    json_object_array_length(reasons) == 0 ? "ok" : "fail"));
	json_object_object_add(o, "reasons", reasons);
	return o;
}

static void accepted(verify_wait *vw)
{
	vd_copy *c = vw->vr.form == VD_VERIFY_PATH ? vd_store_copy(vw->api->store, vw->relpath) : NULL;
	const char *hash = vw->vr.form != VD_VERIFY_PATH ? vw->vr.hash :
	    (c && c->hdr.code == VD_OK ? c->hdr.content_hash : NULL);
	char loc[128];
	json_object *o = json_object_new_object();

	json_object_object_add(o, "state", json_object_new_string("verifying"));
	json_object_object_add(o, "content_hash", jstr_or_null(hash));
	if (hash == NULL) {
		send_json(vw->req, 202, o, NULL);
		return;
	}
	snprintf(loc, sizeof(loc), "/artifact/%s", hash);
	json_object_object_add(o, "location", json_object_new_string(loc));
	send_json(vw->req, 202, o, (const char *const[]){ "Location", loc, NULL });
}

static void on_verified(void *arg, int timed_out)
{
	verify_wait *vw = arg;

	vw->waiter = NULL;
	vw->req->cancel = NULL;
	if (timed_out)
		accepted(vw);
	else
		send_json(vw->req, 200, verify_answer(vw->api, vw), NULL);
	free(vw);
}

static void on_verify_cancel(vd_req *r)
{
	verify_wait *vw = r->handler_state;

	if (vw->waiter)
		vd_store_wait_cancel(vw->waiter);
	free(vw);
}

static int parse_wait(vd_req *r, unsigned max, unsigned *out)
{
	const char *q = vd_req_query(r, "wait");
	char *end;
	unsigned long v;

	*out = VD_API_DEFAULT_WAIT < max ? VD_API_DEFAULT_WAIT : max;
	if (q == NULL)
		return 0;
	v = strtoul(q, &end, 10);
	if (q[0] < '0' || q[0] > '9' || *end != '\0' || v > VD_API_MAX_WAIT)
		return -1;
	*out = v < max ? (unsigned)v : max;
	return 0;
}

/* A path the client named: relative to the store root, or absolute inside it. */
static int store_relpath(vd_api *api, const char *p, char *out, size_t n)
{
	size_t rl = strlen(api->cfg->store);

	if (p[0] == '/') {
		if (strncmp(p, api->cfg->store, rl) != 0 || p[rl] != '/')
			return -1;
		p += rl + 1;
	}
	if (!vd_relpath_ok(p) || strlen(p) >= n)
		return -1;
	snprintf(out, n, "%s", p);
	return 0;
}

/* An artifact directory or tar at relpath: its kind, or -1. */
static int artifact_kind(vd_api *api, const char *relpath)
{
	int root = open(api->cfg->store, O_RDONLY | O_DIRECTORY | O_CLOEXEC), kind;

	if (root < 0)
		return -1;
	kind = vd_artifact_kind_at(root, relpath);
	close(root);
	return kind;
}

/* Find the copies a request names; 0, or an HTTP status already sent. */
static int verify_targets(vd_api *api, verify_wait *vw, vd_copy ***out, size_t *n)
{
	vd_group *g;
	vd_copy *c;
	int kind;

	if (vw->vr.form == VD_VERIFY_PATH) {
		if (store_relpath(api, vw->vr.path, vw->relpath, sizeof(vw->relpath)) < 0) {
			vd_http_error(vw->req, 400, "bad_request",
			    "path must name a directory inside the store, without \"..\" or hidden parts", NULL);
			return 400;
		}
		c = vd_store_copy(api->store, vw->relpath);
		if (c == NULL && (kind = artifact_kind(api, vw->relpath)) >= 0)
			c = vd_store_adopt(api->store, vw->relpath, (vd_artifact_kind)kind);
		if (c == NULL) {
			vd_http_error(vw->req, 404, "not_found", "no artifact directory at that path", NULL);
			return 404;
		}
		*out = malloc(sizeof(**out));
		(*out)[0] = c;
		*n = 1;
		return 0;
	}
	if ((g = vd_store_group(api->store, vw->vr.hash)) == NULL) {
		vd_http_error(vw->req, 404, "not_found", "no artifact directory in the store claims this hash", NULL);
		return 404;
	}
	*out = malloc(g->n * sizeof(**out));
	memcpy(*out, g->copies, g->n * sizeof(**out));
	*n = g->n;
	return 0;
}

static int start_verifications(vd_api *api, verify_wait *vw, unsigned wait)
{
	vd_copy **targets = NULL;
	char **paths;
	uint64_t *gens;
	size_t n = 0, i;
	int rc = 0;

	if (verify_targets(api, vw, &targets, &n) != 0)
		return -1;
	paths = calloc(n, sizeof(*paths));
	gens = calloc(n, sizeof(*gens));
	for (i = 0; i < n && rc == 0; i++) {
		paths[i] = targets[i]->relpath;
		rc = vd_store_verify_now(api->store, targets[i], &gens[i]);
	}
	if (rc == 0 && wait > 0)
		vw->waiter = vd_store_wait(api->store, paths, gens, n, (uint64_t)wait * 1000,
		    on_verified, vw);
	free(paths);
	free(gens);
	free(targets);
	if (rc < 0) {
		vd_http_error(vw->req, 503, "overloaded",
		    "the verification queue is full; try again later",
		    (const char *const[]){ "Retry-After", VD_API_RETRY_AFTER, NULL });
		return -1;
	}
	return 0;
}

static void post_verify(vd_api *api, vd_req *r)
{
	verify_wait *vw;
	char err[256];
	unsigned wait;

	if (!vd_is_json_content_type(vd_req_header(r, "Content-Type"))) {
		vd_http_error(r, 415, "unsupported_media_type", "the body must be application/json", NULL);
		return;
	}
	if (parse_wait(r, api->cfg->max_wait, &wait) < 0) {
		vd_http_error(r, 400, "bad_request", "wait must be a whole number of seconds from 0 to 300", NULL);
		return;
	}
	if ((vw = calloc(1, sizeof(*vw))) == NULL) {
		vd_http_error(r, 503, "overloaded", "out of memory", NULL);
		return;
	}
	vw->api = api;
	vw->req = r;
	if (vd_parse_verify(r->body.p ? r->body.p : (const uint8_t *)"", r->body.len,
	    api->cfg->max_json_depth, &vw->vr, err, sizeof(err)) < 0) {
		vd_http_error(r, 400, "bad_request", err, NULL);
		free(vw);
		return;
	}
	if (start_verifications(api, vw, wait) < 0) {
		free(vw);
		return;
	}
	if (vw->waiter == NULL) {
		accepted(vw);
		free(vw);
		return;
	}
	r->handler_state = vw;
	r->cancel = on_verify_cancel;
	vd_http_suspend(r);
}

/* ---- POST /roundclose -------------------------------------------------- */

/* One token file: a line of VD_TOKEN_MIN to VD_TOKEN_MAX printable
 * characters. An unreadable file keeps the token read before. */
static void read_token(const char *path, vd_token *t)
{
	char buf[VD_TOKEN_MAX + 2];
	size_t n = 0, i;
	FILE *f;

	t->error[0] = '\0';
	if ((f = fopen(path, "re")) == NULL) {
		snprintf(t->error, sizeof(t->error), "cannot read the token file %s: %s", path,
		    strerror(errno));
		log_error("%s; %s", t->error, t->len ? "keeping the token read before" :
		    "commitments with it are refused until it can be read");
		return;
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	for (i = 0; i < n && buf[i] > ' ' && buf[i] < 0x7f; i++)
		;
	if (n < VD_TOKEN_MIN || n > VD_TOKEN_MAX || i != n) {
		snprintf(t->error, sizeof(t->error),
		    "the token file %s must hold one token of %d to %d printable characters",
		    path, VD_TOKEN_MIN, VD_TOKEN_MAX);
		log_error("%s", t->error);
		t->len = 0;
	} else {
		memcpy(t->value, buf, n + 1);
		t->len = n;
	}
	explicit_bzero(buf, sizeof(buf));
}

void vd_api_load_token(vd_api *api)
{
	const vd_config *c = api->cfg;
	vd_token old[VD_CONFIG_MAX_RUN_TOKENS];
	size_t i, j, n = api->n_run_tokens;

	if (c->token_file[0] == '\0')
		memset(&api->token, 0, sizeof(api->token));
	else
		read_token(c->token_file, &api->token);
	/* A run keeps the token read before when its file cannot be read. */
	memcpy(old, api->run_tokens, sizeof(old));
	memset(api->run_tokens, 0, sizeof(api->run_tokens));
	for (i = 0; i < c->n_run_tokens; i++) {
		for (j = 0; j < n && strcmp(old[j].run, c->run_tokens[i].run) != 0; j++)
			;
		if (j < n)
			api->run_tokens[i] = old[j];
		snprintf(api->run_tokens[i].run, sizeof(api->run_tokens[i].run), "%s", c->run_tokens[i].run);
		read_token(c->run_tokens[i].file, &api->run_tokens[i]);
	}
	api->n_run_tokens = c->n_run_tokens;
	explicit_bzero(old, sizeof(old));
}

/* Compare digests, so neither the bytes nor the length leak through time. */
static int token_ok(const vd_token *t, const char *given, size_t len)
{
	char ha[VD_HASH_HEX_LEN + 1], hb[VD_HASH_HEX_LEN + 1];

	if (t->len == 0 || vd_sha256_hex(given, len, ha) < 0 || vd_sha256_hex(t->value, t->len, hb) < 0)
		return 0;
	return CRYPTO_memcmp(ha, hb, VD_HASH_HEX_LEN) == 0;
}

static const vd_token *run_token(vd_api *api, const char *run)
{
	size_t i;

	for (i = 0; run != NULL && i < api->n_run_tokens; i++)
		if (strcmp(api->run_tokens[i].run, run) == 0)
			return &api->run_tokens[i];
	return NULL;
}

/* The operator token commits for every run; a run's own token (when run
 * is given) for that run only, so one coordinator's token cannot commit
 * for another. */
static int authorized_for(vd_api *api, vd_req *r, const char *run)
{
	const char *h = vd_req_header(r, "Authorization");
	const vd_token *rt = run_token(api, run);

	if (api->token.len == 0 && (rt == NULL || rt->len == 0)) {
		vd_http_error(r, 403, "forbidden", rt && rt->error[0] ? rt->error : api->token.error[0] ?
		    api->token.error : "no operator token is configured (token_file), so commitments cannot be posted", NULL);
		return 0;
	}
	if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0 ||
	    !(token_ok(&api->token, h + 7, strlen(h + 7)) ||
	    (rt != NULL && token_ok(rt, h + 7, strlen(h + 7))))) {
		vd_http_error(r, 401, "unauthorized", "a valid operator token is required: Authorization: Bearer <token>",
		    (const char *const[]){ "WWW-Authenticate", "Bearer realm=\"lensemble-verifyd\"", NULL });
		return 0;
	}
	return 1;
}

static int authorized(vd_api *api, vd_req *r)
{
	return authorized_for(api, r, NULL);
}

static int run_param(vd_req *r, char *out, size_t n)
{
	const char *q = vd_req_query(r, "run");

	if (q == NULL || q[0] == '\0' || strcmp(q, ".") == 0) {
		out[0] = '\0';
		return 0;
	}
	if (!vd_relpath_ok(q) || strlen(q) >= n)
		return -1;
	snprintf(out, n, "%s", q);
	return 0;
}

/* On the headers, before the body is read (vd_http_on_headers): a request
 * that needs a token is refused without a valid one, so a wrong token is
 * 401 whatever the size of the body. A POST /roundclose with no token and
 * a JSON body may be a signed envelope, which needs its body. */
int vd_api_early(vd_req *r, void *arg)
{
	vd_api *api = arg;
	char run[VD_RUN_MAX];

	if (strcmp(r->url, "/ledger") == 0 && strcmp(r->method, "DELETE") == 0) {
		r->route = "/ledger";
		return !authorized(api, r);
	}
	if (strcmp(r->url, "/roundclose") != 0 || strcmp(r->method, "POST") != 0)
		return 0;
	r->route = "/roundclose";
	if (vd_req_header(r, "Authorization") == NULL &&
	    vd_is_json_content_type(vd_req_header(r, "Content-Type")))
		return 0;
	if (run_param(r, run, sizeof(run)) < 0)
		return 0;            /* post_roundclose answers 400 */
	return !authorized_for(api, r, run);
}

/* The client's address, as the audit of commitments keeps it. A
 * dual-stack listener sees an IPv4 client as ::ffff:a.b.c.d: shown as
 * a.b.c.d, as an IPv4 listener would. */
static void peer_address(vd_req *r, char *out, size_t n)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn,
	    MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci != NULL ? ci->client_addr : NULL;
	const struct in6_addr *a6;

	out[0] = '\0';
	if (sa != NULL && sa->sa_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out, (socklen_t)n);
	} else if (sa != NULL && sa->sa_family == AF_INET6) {
		a6 = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(a6))
			inet_ntop(AF_INET, &a6->s6_addr[12], out, (socklen_t)n);
		else
			inet_ntop(AF_INET6, a6, out, (socklen_t)n);
	}
}

/* Which token let a post through (authorized_for): the operator's, else
 * the run's own. Named, never echoed. */
static const char *token_holder(vd_api *api, vd_req *r)
{
	const char *h = vd_req_header(r, "Authorization");

	if (h != NULL && strncasecmp(h, "Bearer ", 7) == 0 && token_ok(&api->token, h + 7, strlen(h + 7)))
		return VD_AUDIT_OPERATOR;
	return VD_AUDIT_RUN_TOKEN;
}

/* A RoundClose accepted, in the audit: who, from where, when first. */
static int audit_post(vd_api *api, vd_req *r, const char *run, const vd_roundclose *rc,
    const char *key_id)
{
	char peer[PEER_MAX];
	vd_audit a = {
		.run = run, .kind = VD_AUDIT_ROUND_CLOSE, .number = rc->round_index,
		.hash = rc->global_model_hash,
		.source = vd_commit_source_name(key_id ? VD_SRC_SIGNED : VD_SRC_ROUNDCLOSE),
		.author = key_id ? VD_AUDIT_KEY : token_holder(api, r), .key_id = key_id, .peer = peer,
	};

	peer_address(r, peer, sizeof(peer));
	return vd_state_audit(api->store->state, &a);
}

/* Record (run, round) -> hash and answer as trust.md section 3 says. A
 * commitment is in the audit before it is answered: when that fails the
 * client is told to try again, and the repeat is recorded. */
static void answer_post(vd_api *api, vd_req *r, const char *run, const vd_roundclose *rc,
    const char *key_id, const uint8_t *env, size_t env_len)
{
	char existing[VD_HASH_HEX_LEN + 1], detail[400];
	vd_log_fields f = { .run = vd_run_name(run), .content_hash = rc->global_model_hash };
	json_object *o;
	int res;

	res = vd_store_post_commitment(api->store, run, rc->round_index, rc->global_model_hash,
	    rc->schema_version, key_id, env, env_len, existing);
	if (res < 0 || (res != 2 && audit_post(api, r, run, rc, key_id) < 0)) {
		vd_http_error(r, 503, "overloaded", "the commitment could not be stored durably; try again",
		    (const char *const[]){ "Retry-After", VD_API_RETRY_AFTER, NULL });
		return;
	}
	if (res == 2) {
		f.code = "commitment_conflict";
		vd_logf(VD_LOG_WARN, &f, "RoundClose for run %s round %lld names %s, but %s is already committed",
		    vd_run_name(run), (long long)rc->round_index, rc->global_model_hash, existing);
		snprintf(detail, sizeof(detail), "round %lld of run %s is already committed to %s",
		    (long long)rc->round_index, vd_run_name(run), existing);
		vd_http_error(r, 409, "commitment_conflict", detail, NULL);
		return;
	}
	if (res == 0)
		vd_logf(VD_LOG_INFO, &f, "commitment recorded: run %s round %lld -> %s (%s%s)", vd_run_name(run),
		    (long long)rc->round_index, rc->global_model_hash, key_id ? "key " :
		    strcmp(token_holder(api, r), VD_AUDIT_OPERATOR) == 0 ? "operator token" : "run token",
		    key_id ? key_id : "");
	o = json_object_new_object();
	json_object_object_add(o, "run", json_object_new_string(vd_run_name(run)));
	json_object_object_add(o, "round_index", json_object_new_int64(rc->round_index));
	json_object_object_add(o, "global_model_hash", json_object_new_string(rc->global_model_hash));
	json_object_object_add(o, "source", json_object_new_string(key_id ? "signed" : "roundclose"));
	json_object_object_add(o, "signed", json_object_new_boolean(key_id != NULL));
	if (key_id)
		json_object_object_add(o, "key_id", json_object_new_string(key_id));
	json_object_object_add(o, "created", json_object_new_boolean(res == 0));
	send_json(r, res == 0 ? 201 : 200, o, NULL);
}

/* A commitment names a run the store holds: a run directory seen by the
 * last scan (not a file, FIFO, symbolic link or artifact directory). */
static int known_run(vd_api *api, vd_req *r, const char *run)
{
	char detail[VD_RUN_MAX + 128];

	if (vd_store_run_known(api->store, run))
		return 1;
	snprintf(detail, sizeof(detail), "run %s is not a run directory of the store (none, or not a plain directory)",
	    vd_run_name(run));
	vd_http_error(r, 400, "bad_request", detail, NULL);
	return 0;
}

/* A body whose top-level object has "payloadType" is a DSSE envelope. */
static int is_envelope(const uint8_t *p, size_t len)
{
	vd_json_opts opts = { VD_DSSE_MAX_DEPTH, 0 };
	vd_jdoc doc;
	char msg[64];
	int yes;

	if (len > VD_DSSE_MAX_BYTES)
		return memmem(p, len, "\"payloadType\"", 13) != NULL;
	if (vd_json_parse(p, len, &opts, &doc, msg, sizeof(msg)) < 0)
		return 0;
	yes = doc.root->type == VD_JOBJ && vd_json_get(doc.root, "payloadType") != NULL;
	vd_jdoc_free(&doc);
	return yes;
}

static void refuse_envelope(vd_api *api, vd_req *r, vd_env_reason why, const char *detail)
{
	int auth = why == VD_ENV_NO_SIGNATURE || why == VD_ENV_UNKNOWN_KEY ||
	    why == VD_ENV_BAD_SIGNATURE;

	vd_metrics_envelope_rejected(api->metrics, why);
	vd_logf(VD_LOG_WARN, &(vd_log_fields){ .code = vd_env_reason_name(why) },
	    "signed statement refused (%s): %s", vd_env_reason_name(why), detail);
	vd_http_error(r, auth ? 403 : 400, auth ? "forbidden" : "bad_request", detail, NULL);
}

static void post_checkpoint(vd_api *api, vd_req *r, const vd_statement *st, const char *key_id)
{
	json_object *o;
	char peer[PEER_MAX];
	int res = vd_store_post_checkpoint(api->store, st, key_id, r->body.p, r->body.len);

	peer_address(r, peer, sizeof(peer));
	if (res < 0 || vd_state_audit_signed(api->store->state, st, st->run, key_id, peer, NULL) < 0) {
		vd_http_error(r, 503, "overloaded", "the checkpoint could not be stored durably; try again",
		    (const char *const[]){ "Retry-After", VD_API_RETRY_AFTER, NULL });
		return;
	}
	if (res == 0)
		vd_logf(VD_LOG_INFO, &(vd_log_fields){ .run = vd_run_name(st->run) },
		    "ledger checkpoint recorded: run %s records 1..%llu (key %s)",
		    vd_run_name(st->run), (unsigned long long)st->records, key_id);
	o = json_object_new_object();
	json_object_object_add(o, "run", json_object_new_string(vd_run_name(st->run)));
	json_object_object_add(o, "records", json_object_new_uint64(st->records));
	json_object_object_add(o, "head_record_hash", json_object_new_string(st->head_record_hash));
	json_object_object_add(o, "source", json_object_new_string("signed"));
	json_object_object_add(o, "key_id", json_object_new_string(key_id));
	json_object_object_add(o, "created", json_object_new_boolean(res == 0));
	send_json(r, res == 0 ? 201 : 200, o, NULL);
}

/* A signed statement needs no token: the key is the authority. */
static void post_envelope(vd_api *api, vd_req *r, const char *qrun)
{
	char why[VD_DETAIL_MAX], key_id[VD_KEYID_LEN + 1];
	vd_dsse env;
	vd_statement st;
	const vd_key *signer;
	vd_env_reason rc;
	vd_roundclose msg;

	if ((rc = vd_dsse_parse(r->body.p, r->body.len, &env, why, sizeof(why))) != VD_ENV_OK) {
		refuse_envelope(api, r, rc, why);
		return;
	}
	rc = vd_statement_parse(env.payload_type, env.payload, env.payload_len, &st, why, sizeof(why));
	if (rc == VD_ENV_OK && (rc = vd_dsse_verify(&env, api->store->keys, &signer)) != VD_ENV_OK)
		snprintf(why, sizeof(why), "%s", rc == VD_ENV_BAD_SIGNATURE ?
		    "a trusted key's signature does not verify" :
		    "no signature by a key in trusted_keys");
	vd_dsse_free(&env);
	if (rc != VD_ENV_OK) {
		refuse_envelope(api, r, rc, why);
		return;
	}
	if (strcmp(st.run, ".") != 0 && !vd_relpath_ok(st.run)) {
		refuse_envelope(api, r, VD_ENV_PAYLOAD, "the statement's run must name a directory inside the store, without \"..\" or hidden parts");
		return;
	}
	if (strcmp(st.run, ".") == 0)
		st.run[0] = '\0';
	if (qrun != NULL && strcmp(qrun, st.run) != 0) {
		refuse_envelope(api, r, VD_ENV_WRONG_RUN, "the statement names another run than ?run=");
		return;
	}
	if (!known_run(api, r, st.run))
		return;
	snprintf(key_id, sizeof(key_id), "%s", vd_key_id(signer));
	if (st.kind == VD_STMT_CHECKPOINT) {
		post_checkpoint(api, r, &st, key_id);
		return;
	}
	memset(&msg, 0, sizeof(msg));
	msg.schema_version = st.schema_version;
	msg.round_index = st.round_index;
	memcpy(msg.global_model_hash, st.hash, sizeof(msg.global_model_hash));
	answer_post(api, r, st.run, &msg, key_id, r->body.p, r->body.len);
}

static void post_roundclose(vd_api *api, vd_req *r)
{
	char err[256], run[1024];
	const uint8_t *body = r->body.p ? r->body.p : (const uint8_t *)"";
	vd_roundclose rc;
	int token = vd_req_header(r, "Authorization") != NULL;

	/* A token, when given, is checked first: a wrong one is 401 whatever
	 * the body. Without one, only a signed envelope is accepted. */
	int json = vd_is_json_content_type(vd_req_header(r, "Content-Type"));

	if (run_param(r, run, sizeof(run)) < 0) {
		vd_http_error(r, 400, "bad_request", "run must name a directory inside the store, without \"..\" or hidden parts", NULL);
		return;
	}
	if ((token || !json || !is_envelope(body, r->body.len)) && !authorized_for(api, r, run))
		return;
	if (!json) {
		vd_http_error(r, 415, "unsupported_media_type", "the body must be application/json", NULL);
		return;
	}
	if (is_envelope(body, r->body.len)) {
		post_envelope(api, r, vd_req_query(r, "run") ? run : NULL);
		return;
	}
	if (!known_run(api, r, run))
		return;
	if (vd_parse_roundclose(body, r->body.len, api->cfg->max_json_depth, &rc, err,
	    sizeof(err)) < 0) {
		vd_http_error(r, 400, "bad_request", err, NULL);
		return;
	}
	answer_post(api, r, run, &rc, NULL, NULL, 0);
}

/* DELETE /ledger?path=: forget what was remembered of one ledger, so that
 * it is learned again from the file as it is now (trust.md section 5). */
static void delete_ledger(vd_api *api, vd_req *r)
{
	const char *path = vd_req_query(r, "path");
	json_object *o;
	int rc;

	if (!authorized(api, r))
		return;
	if (path == NULL || !vd_relpath_ok(path)) {
		vd_http_error(r, 400, "bad_request", "path must name a ledger file inside the store, as /chain lists it", NULL);
		return;
	}
	if ((rc = vd_store_forget_ledger(api->store, path)) == -ENOENT) {
		vd_http_error(r, 404, "not_found", "no ledger with that path is remembered", NULL);
		return;
	}
	if (rc < 0) {
		vd_http_error(r, 503, "overloaded", "the ledger's memory could not be removed; try again",
		    (const char *const[]){ "Retry-After", VD_API_RETRY_AFTER, NULL });
		return;
	}
	o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "forgotten", json_object_new_boolean(1));
	send_json(r, 200, o, NULL);
}

/* ---- GET /chain -------------------------------------------------------- */

static json_object *head_json(int64_t round, const char *hash)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "round_index", json_object_new_int64(round));
	json_object_object_add(o, "content_hash", json_object_new_string(hash));
	return o;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One run's part of /chain, filled in one pass over the groups. */
typedef struct run_acc {
	const char *run;
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

static void acc_group(vd_map *accs, const vd_model *m, const vd_group *g)
{
	size_t i, j;

	for (i = 0; i < g->n; i++) {
		run_acc *a = vd_map_get(accs, g->copies[i]->run);
		for (j = 0; j < i && strcmp(g->copies[j]->run, g->copies[i]->run) != 0; j++)
			;
		if (a == NULL || j < i)
			continue;       /* counted once per run */
		if (g->trusted && (a->best == NULL || g->round_index > a->best->round_index))
			a->best = g;
		if (!verified_child_in(m, g, a->run))
			json_object_array_add(a->heads, head_json(g->round_index, g->hash));
	}
}

static json_object *acc_json(const run_acc *a)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "run", json_object_new_string(vd_run_name(a->run)));
	json_object_object_add(o, "committed_head", a->best ?
	    head_json(a->best->round_index, a->best->hash) : NULL);
	json_object_object_add(o, "heads", a->heads);
	return o;
}

/* Every run (a directory holding a ledger or an artifact), in name
 * order, each with its committed head and its heads: linear in the
 * store. */
static json_object *runs_json(vd_store *s)
{
	json_object *list = json_object_new_array();
	vd_map accs;
	run_acc *arr;
	const char *k;
	void *v;
	size_t it = 0, n = 0, i;

	vd_map_init(&accs);
	for (i = 0; i < s->n_ledgers; i++)
		vd_map_put(&accs, s->ledgers[i].run, NULL);
	while (vd_map_next(&s->model.copies, &it, &k, &v))
		vd_map_put(&accs, ((vd_copy *)v)->run, NULL);
	arr = calloc(accs.count + 1, sizeof(*arr));
	it = 0;
	while (arr && vd_map_next(&accs, &it, &k, &v)) {
		arr[n].run = k;
		arr[n].heads = json_object_new_array();
		vd_map_put(&accs, k, &arr[n++]);
	}
	it = 0;
	while (arr && vd_map_next(&s->model.groups, &it, &k, &v))
		if (vd_group_state(v) == VD_AS_VERIFIED)
			acc_group(&accs, &s->model, v);
	if (arr)
		qsort(arr, n, sizeof(*arr), str_cmp);
	for (i = 0; i < n; i++)
		json_object_array_add(list, acc_json(&arr[i]));
	free(arr);
	vd_map_free(&accs);
	return list;
}

/* Each fork alert's parent with its verified children. */
static json_object *forks_json(vd_store *s)
{
	json_object *forks = json_object_new_array(), *children, *f;
	const vd_group *c;
	const char *k;
	void *v;
	size_t it = 0;

	while (vd_map_next(&s->lineage.alerts, &it, &k, &v)) {
		vd_alert *a = v;
		if (a->kind != VD_ALERT_FORK)
			continue;
		f = json_object_new_object();
		children = json_object_new_array();
		json_object_object_add(f, "parent", json_object_new_string(a->subject));
		json_object_object_add(f, "children", children);
		json_object_array_add(forks, f);
		for (c = vd_model_first_child(&s->model, a->subject); c != NULL; c = c->next_child)
			if (vd_group_state(c) == VD_AS_VERIFIED)
				json_object_array_add(children, json_object_new_string(c->hash));
	}
	return forks;
}

static json_object *ledger_json(const vd_scan_ledger *l, const vd_ledger_mem *m)
{
	json_object *o = json_object_new_object(), *b = NULL;
	int valid = l->read_ok && l->result.brk == VD_LEDGER_INTACT;
	size_t i, suspect = 0;

	json_object_object_add(o, "path", json_object_new_string(l->relpath));
	json_object_object_add(o, "run", json_object_new_string(vd_run_name(l->run)));
	json_object_object_add(o, "records", json_object_new_uint64(l->result.records));
	json_object_object_add(o, "trusted_records", json_object_new_uint64(l->result.trusted));
	json_object_object_add(o, "chain_valid", json_object_new_boolean(valid));
	if (!l->read_ok) {
		b = json_object_new_object();
		json_object_object_add(b, "line", NULL);
		json_object_object_add(b, "reason", json_object_new_string("unreadable"));
		json_object_object_add(b, "detail", json_object_new_string(l->read_error));
	} else if (!valid) {
		b = json_object_new_object();
		json_object_object_add(b, "line", json_object_new_uint64(l->result.break_line));
		json_object_object_add(b, "reason", json_object_new_string(vd_ledger_break_name(l->result.brk)));
		json_object_object_add(b, "detail", json_object_new_string(l->result.break_detail));
		/* The last good record before the break may be the rewritten one. */
		for (i = 0; i < l->n_entries; i++)
			if (l->entries[i].line < l->result.break_line)
				suspect = l->entries[i].line;
	}
	json_object_object_add(o, "first_break", b);
	json_object_object_add(o, "remembered_records", json_object_new_uint64(m ? m->n : 0));
	json_object_object_add(o, "rewritten", json_object_new_boolean(m && m->rewritten));
	json_object_object_add(o, "rewritten_detail", m && m->rewritten ?
	    json_object_new_string(m->detail) : NULL);
	json_object_object_add(o, "suspect_line", suspect ? json_object_new_uint64(suspect) : NULL);
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
	const vd_commit_entry *e = &sl->src[src];
	vd_group *g = vd_store_group(s, e->hash);

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
	const vd_map *commits = &s->lineage.commits;
	vd_commit_slot **slots = calloc(commits->count + 1, sizeof(*slots));
	int policy = vd_config_policy(s->cfg), src, first = 1;
	const char *k;
	void *v;
	size_t it = 0, n = 0, i;

	if (slots == NULL) {
		b->oom = 1;
		return;
	}
	while (vd_map_next(commits, &it, &k, &v))
		slots[n++] = v;
	qsort(slots, n, sizeof(*slots), slot_cmp);
	vd_buf_putc(b, '[');
	for (i = 0; i < n; i++)
		for (src = 0; src < VD_SRC_COUNT; src++) {
			if (!slots[i]->src[src].has)
				continue;
			if (!first)
				vd_buf_putc(b, ',');
			first = 0;
			commitment_text(b, s, slots[i], (vd_commit_source)src, policy);
		}
	vd_buf_putc(b, ']');
	free(slots);
}

static int round_cmp(const void *a, const void *b)
{
	const vd_group *x = *(const vd_group *const *)a, *y = *(const vd_group *const *)b;

	if (x->round_index != y->round_index)
		return x->round_index < y->round_index ? -1 : 1;
	return strcmp(x->hash, y->hash);
}

static json_object *link_json(const vd_group *g)
{
	json_object *o = json_object_new_object(), *c = json_object_new_object();

	json_object_object_add(o, "round_index", json_object_new_int64(g->round_index));
	json_object_object_add(o, "content_hash", json_object_new_string(g->hash));
	json_object_object_add(o, "parent_hash", g->has_parent ? json_object_new_string(g->parent) : NULL);
	json_object_object_add(o, "state", json_object_new_string(vd_astate_name(vd_group_state(g))));
	json_object_object_add(o, "trusted", json_object_new_boolean(g->trusted));
	json_object_object_add(c, "status", json_object_new_string(vd_chain_status_name(g->chain)));
	json_object_object_add(c, "length", json_object_new_uint64(g->chain_len));
	json_object_object_add(c, "pruned", json_object_new_uint64(g->pruned));
	json_object_object_add(o, "chain", c);
	return o;
}

/* GET /chain?run=R[&limit=N&after=ROUND]: one run's artifacts in round
 * order, a page at a time, with a "next" cursor (the last round shown). */
static void get_run_chain(vd_api *api, vd_req *r, const char *run)
{
	const char *q = vd_req_query(r, "after"), *k;
	json_object *o, *list;
	vd_group **gs, *best = NULL;
	size_t n = 0, i, limit, shown = 0, it = 0;
	long long after = -1;
	int64_t last = -1;
	char *end;
	void *v;
	int more = 0;

	if (parse_limit(r, &limit) < 0) {
		bad_limit(r);
		return;
	}
	if (q != NULL && (q[0] < '0' || q[0] > '9' || (after = strtoll(q, &end, 10)) < 0 || *end != '\0')) {
		vd_http_error(r, 400, "bad_request", "after is a round index: a whole number", NULL);
		return;
	}
	gs = calloc(api->store->model.groups.count + 1, sizeof(*gs));
	while (gs && vd_map_next(&api->store->model.groups, &it, &k, &v))
		if (vd_group_in_run(v, run))
			gs[n++] = v;
	if (gs)
		qsort(gs, n, sizeof(*gs), round_cmp);
	list = json_object_new_array();
	for (i = 0; i < n; i++) {
		if (gs[i]->trusted && (best == NULL || gs[i]->round_index >= best->round_index))
			best = gs[i];
		if (gs[i]->round_index <= after || more)
			continue;
		/* A page ends between rounds, never inside one (a fork's
		 * siblings), so that after=ROUND misses nothing. */
		if (limit > 0 && shown >= limit && gs[i]->round_index != last) {
			more = 1;
			continue;
		}
		json_object_array_add(list, link_json(gs[i]));
		last = gs[i]->round_index;
		shown++;
	}
	o = json_object_new_object();
	json_object_object_add(o, "run", json_object_new_string(vd_run_name(run)));
	json_object_object_add(o, "committed_head", best ? head_json(best->round_index, best->hash) : NULL);
	json_object_object_add(o, "artifacts", list);
	json_object_object_add(o, "next", more ? json_object_new_int64(last) : NULL);
	free(gs);
	send_json(r, 200, o, NULL);
}

/* The answer o with the commitments list appended as its last member,
 * in one buffer handed to the server as it is. */
static void send_with_commitments(vd_req *r, json_object *o, vd_store *s)
{
	size_t len;
	const char *head = json_object_to_json_string_length(o, JSON_OUT, &len);
	vd_buf b;

	vd_buf_init(&b);
	if (head == NULL || len == 0)
		b.oom = 1;
	else
		vd_buf_put(&b, head, len - 1);  /* without its closing brace */
	json_object_put(o);
	vd_buf_puts(&b, ",\"commitments\":");
	commitments_text(&b, s);
	vd_buf_putc(&b, '}');
	if (b.oom) {
		vd_buf_free(&b);
		vd_http_error(r, 503, "unavailable", "out of memory building the answer; try again, or page through one run with /chain?run=", NULL);
		return;
	}
	vd_http_respond_owned(r, 200, "application/json", (char *)b.p, b.len, NULL);
}

static void get_chain(vd_api *api, vd_req *r)
{
	vd_store *s = api->store;
	json_object *o, *head = NULL, *ledgers;
	char run[VD_RUN_MAX];
	size_t i;

	if (vd_req_query(r, "run") != NULL) {
		if (run_param(r, run, sizeof(run)) < 0)
			vd_http_error(r, 400, "bad_request", "run must name a directory inside the store, without \"..\" or hidden parts", NULL);
		else
			get_run_chain(api, r, run);
		return;
	}
	if (vd_req_query(r, "limit") != NULL || vd_req_query(r, "after") != NULL) {
		vd_http_error(r, 400, "bad_request", "limit and after page through one run: give run= too", NULL);
		return;
	}
	o = json_object_new_object();
	ledgers = json_object_new_array();

	json_object_object_add(o, "runs", runs_json(s));
	if (s->lineage.head_round >= 0) {
		head = head_json(s->lineage.head_round, s->lineage.head_hash);
		json_object_object_add(head, "run", json_object_new_string(vd_run_name(s->lineage.head_run)));
	}
	json_object_object_add(o, "committed_head", head);
	json_object_object_add(o, "forks", forks_json(s));
	for (i = 0; i < s->n_ledgers; i++)
		json_object_array_add(ledgers, ledger_json(&s->ledgers[i],
		    vd_store_ledger_mem(s, s->ledgers[i].relpath)));
	json_object_object_add(o, "ledgers", ledgers);
	send_with_commitments(r, o, s);
}

/* ---- routing ---------------------------------------------------------- */

typedef void (*route_fn)(vd_api *api, vd_req *r);

static void get_healthz(vd_api *api, vd_req *r)
{
	vd_http_respond(r, 200, "text/plain; charset=utf-8", "ok\n", 3, NULL);
}

/* GET /artifact/<hash>/attestation: the verdict as it stands now, signed
 * by the daemon's key (trust.md section 6). */
static void get_attestation(vd_api *api, vd_req *r, const char *hash)
{
	json_object *status;
	vd_buf payload, env;

	if (!vd_is_hex64((vd_str){ hash, strlen(hash) })) {
		vd_http_error(r, 400, "bad_request",
		    "an artifact is named by its content hash: 64 lowercase hex characters", NULL);
		return;
	}
	if ((status = vd_api_status(api, hash)) == NULL) {
		vd_http_error(r, 404, "not_found", "no artifact directory in the store claims this hash", NULL);
		return;
	}
	if (strcmp(json_object_get_string(json_object_object_get(status, "state")), "verified") != 0) {
		json_object_put(status);
		vd_http_error(r, 409, "not_verified",
		    "the artifact is not verified (yet): only a verified artifact's verdict is signed", NULL);
		return;
	}
	vd_buf_init(&payload);
	vd_buf_init(&env);
	if (vd_attest_statement(status, vd_wall_now(), &payload) < 0 ||
	    vd_dsse_sign(VD_PT_INTOTO, payload.p, payload.len, api->signing_key, &env) < 0)
		vd_http_error(r, 500, "internal", "the attestation could not be signed", NULL);
	else
		vd_http_respond(r, 200, "application/json", (const char *)env.p, env.len, NULL);
	json_object_put(status);
	vd_buf_free(&payload);
	vd_buf_free(&env);
}

static void get_artifact_route(vd_api *api, vd_req *r)
{
	const char *rest = r->url + strlen("/artifact/");
	const char *slash = strchr(rest, '/');
	char hash[VD_HASH_HEX_LEN + 1];

	if (slash == NULL) {
		get_artifact(api, r, rest);
	} else if (strcmp(slash, "/attestation") == 0 && slash - rest == VD_HASH_HEX_LEN) {
		memcpy(hash, rest, VD_HASH_HEX_LEN);
		hash[VD_HASH_HEX_LEN] = '\0';
		get_attestation(api, r, hash);
	} else {
		vd_http_error(r, 404, "not_found", "no such endpoint", NULL);
	}
}

/* GET /key: the public half of the key that signs verdicts. */
static void get_key(vd_api *api, vd_req *r)
{
	json_object *o = json_object_new_object();
	vd_buf pem;

	vd_buf_init(&pem);
	if (vd_key_public_pem(api->signing_key, &pem) < 0) {
		json_object_put(o);
		vd_buf_free(&pem);
		vd_http_error(r, 500, "internal", "the public key could not be written", NULL);
		return;
	}
	json_object_object_add(o, "keyid", json_object_new_string(vd_key_id(api->signing_key)));
	json_object_object_add(o, "public_key", json_object_new_string((const char *)pem.p));
	vd_buf_free(&pem);
	send_json(r, 200, o, NULL);
}

/* GET /events: Server-Sent Events (vd_events.h). Last-Event-ID resumes;
 * ?last_event_id= does for a client that cannot set headers, but the
 * header wins: EventSource sends it on reconnecting, to the same URL. */
static void get_events(vd_api *api, vd_req *r)
{
	const char *h = vd_req_header(r, "Last-Event-ID"), *q = vd_req_query(r, "last_event_id");
	const char *given = h != NULL && h[0] != '\0' ? h : q;
	uint64_t after = 0;

	if (given != NULL && vd_events_parse_id(given, &after) < 0) {
		vd_http_error(r, 400, "bad_request",
		    "Last-Event-ID (or last_event_id) is an event id: a whole number", NULL);
		return;
	}
	if (strcmp(r->method, "HEAD") == 0) {
		vd_http_respond(r, 200, "text/event-stream", "", 0, NULL);
		return;
	}
	if (vd_events_open(api->store->events, r, given != NULL, after) < 0)
		vd_http_error(r, 503, "overloaded",
		    "no event stream can be opened now (max_event_streams are open, or the daemon is stopping)",
		    (const char *const[]){ "Retry-After", VD_API_RETRY_AFTER, NULL });
}

/* ---- GET /alerts and GET /commitments: histories in the state database -- */

/* Text from the database (a path, a subject) as a JSON string; bytes
 * that are not UTF-8 are replaced. */
static json_object *jstr_clean(const char *s)
{
	json_object *o;
	char *copy;

	if (vd_utf8_valid((const uint8_t *)s, strlen(s)) || (copy = strdup(s)) == NULL)
		return json_object_new_string(s);
	vd_utf8_sanitize(copy);
	o = json_object_new_string(copy);
	free(copy);
	return o;
}

static json_object *jtime(double t)
{
	char when[40];

	vd_rfc3339(t, when, sizeof(when));
	return json_object_new_string(when);
}

/* ?limit=&after= of a history, newest first: after is the next of the
 * page before (an id). Without limit, a page of VD_PAGE_MAX. 0, or -1
 * with the 400 sent. */
static int history_page(vd_req *r, vd_page *pg)
{
	const char *q = vd_req_query(r, "after");
	char *end;
	long long v = 0;

	memset(pg, 0, sizeof(*pg));
	if (parse_limit(r, &pg->limit) < 0) {
		bad_limit(r);
		return -1;
	}
	if (pg->limit == 0)
		pg->limit = VD_PAGE_MAX;
	errno = 0;
	if (q != NULL && (q[0] < '1' || q[0] > '9' || (v = strtoll(q, &end, 10)) < 1 ||
	    *end != '\0' || errno != 0)) {
		vd_http_error(r, 400, "bad_request",
		    "after is the next of the page before: a whole number above 0", NULL);
		return -1;
	}
	pg->before = v;
	return 0;
}

/* The history is in the state database, loaded after the first start. */
static vd_state *history_state(vd_api *api, vd_req *r)
{
	if (!api->state_ready || api->store->state == NULL) {
		vd_http_error(r, 503, "not_ready", "the state database is not loaded yet",
		    (const char *const[]){ "Retry-After", VD_API_RETRY_AFTER, NULL });
		return NULL;
	}
	return api->store->state;
}

static void send_history(vd_req *r, const char *name, json_object *list, int rc,
    const vd_page *pg)
{
	json_object *o;

	if (rc < 0) {
		json_object_put(list);
		vd_http_error(r, 503, "overloaded", "the state database could not be read; try again",
		    (const char *const[]){ "Retry-After", VD_API_RETRY_AFTER, NULL });
		return;
	}
	o = json_object_new_object();
	json_object_object_add(o, name, list);
	json_object_object_add(o, "next", pg->next > 0 ? json_object_new_int64(pg->next) : NULL);
	send_json(r, 200, o, NULL);
}

static void alert_item(const vd_alert_row *a, void *arg)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "id", json_object_new_int64(a->id));
	json_object_object_add(o, "kind", json_object_new_string(a->kind));
	json_object_object_add(o, "subject", jstr_clean(a->subject));
	json_object_object_add(o, "detail", jstr_clean(a->detail));
	json_object_object_add(o, "raised_at", jtime(a->raised_at));
	json_object_object_add(o, "cleared_at", a->cleared_at > 0 ? jtime(a->cleared_at) : NULL);
	json_object_array_add(arg, o);
}

/* GET /alerts[?active=1|0][&limit=N&after=ID]: every alert raised, newest
 * first, with when it was raised and cleared (null while raised). */
static void get_alerts(vd_api *api, vd_req *r)
{
	const char *q = vd_req_query(r, "active");
	vd_state *st;
	json_object *list;
	vd_page pg;
	int active = -1;

	if (q != NULL && strcmp(q, "1") != 0 && strcmp(q, "0") != 0) {
		vd_http_error(r, 400, "bad_request",
		    "active is 1 (only alerts still raised) or 0 (only cleared ones)", NULL);
		return;
	}
	if (q != NULL)
		active = q[0] == '1';
	if (history_page(r, &pg) < 0 || (st = history_state(api, r)) == NULL)
		return;
	list = json_object_new_array();
	send_history(r, "alerts", list, vd_state_list_alerts(st, active, &pg, alert_item, list), &pg);
}

static void audit_item(const vd_audit *a, void *arg)
{
	json_object *o = json_object_new_object();
	int cp = strcmp(a->kind, VD_AUDIT_CHECKPOINT) == 0;

	json_object_object_add(o, "id", json_object_new_int64(a->id));
	json_object_object_add(o, "run", jstr_clean(vd_run_name(a->run)));
	json_object_object_add(o, "kind", json_object_new_string(a->kind));
	json_object_object_add(o, "round_index", cp ? NULL : json_object_new_int64(a->number));
	json_object_object_add(o, "global_model_hash", cp ? NULL : json_object_new_string(a->hash));
	json_object_object_add(o, "records", cp ? json_object_new_int64(a->number) : NULL);
	json_object_object_add(o, "head_record_hash", cp ? json_object_new_string(a->hash) : NULL);
	json_object_object_add(o, "source", json_object_new_string(a->source));
	json_object_object_add(o, "by", json_object_new_string(a->author));
	json_object_object_add(o, "key_id", jstr_or_null(a->key_id));
	json_object_object_add(o, "via", json_object_new_string(a->file[0] ? "file" : "post"));
	json_object_object_add(o, "from", a->file[0] ? jstr_clean(a->file) : jstr_or_null(a->peer));
	json_object_object_add(o, "line", a->line > 0 ? json_object_new_int64(a->line) : NULL);
	json_object_object_add(o, "first_seen", jtime(a->first_seen));
	json_object_array_add(arg, o);
}

/* GET /commitments[?run=R][&limit=N&after=ID]: the audit of every
 * commitment accepted (of one run with run=), newest first. */
static void get_commitments(vd_api *api, vd_req *r)
{
	char run[VD_RUN_MAX];
	int one_run = vd_req_query(r, "run") != NULL;
	vd_state *st;
	json_object *list;
	vd_page pg;

	if (one_run && run_param(r, run, sizeof(run)) < 0) {
		vd_http_error(r, 400, "bad_request", "run must name a directory inside the store, without \"..\" or hidden parts", NULL);
		return;
	}
	if (history_page(r, &pg) < 0 || (st = history_state(api, r)) == NULL)
		return;
	list = json_object_new_array();
	send_history(r, "commitments", list,
	    vd_state_list_audit(st, one_run ? run : NULL, &pg, audit_item, list), &pg);
}

static const struct route {
	const char *path;
	int prefix;
	const char *method;      /* GET routes answer HEAD too */
	route_fn fn;
} routes[] = {
	{ "/artifact/", 1, "GET", get_artifact_route },
	{ "/verify", 0, "POST", post_verify },
	{ "/roundclose", 0, "POST", post_roundclose },
	{ "/ledger", 0, "DELETE", delete_ledger },
	{ "/chain", 0, "GET", get_chain },
	{ "/key", 0, "GET", get_key },
	{ "/artifacts", 0, "GET", get_artifacts },
	{ "/metrics", 0, "GET", get_metrics },
	{ "/healthz", 0, "GET", get_healthz },
	{ "/readyz", 0, "GET", get_readyz },
	{ "/events", 0, "GET", get_events },
	{ "/alerts", 0, "GET", get_alerts },
	{ "/commitments", 0, "GET", get_commitments },
};

static int method_ok(const struct route *rt, const char *m)
{
	if (strcmp(rt->method, "GET") == 0 && strcmp(m, "HEAD") == 0)
		return 1;
	return strcmp(rt->method, m) == 0;
}

void vd_api_handle(vd_req *r, void *arg)
{
	vd_api *api = arg;
	const struct route *rt;
	size_t i, n;

	for (i = 0; i < VD_ARRAY_LEN(routes); i++) {
		rt = &routes[i];
		n = strlen(rt->path);
		if (rt->prefix ? strncmp(r->url, rt->path, n) != 0 : strcmp(r->url, rt->path) != 0)
			continue;
		/* Label by route, never by the raw path: a hash is not a label. */
		r->route = rt->prefix ? "/artifact" : rt->path;
		if (!method_ok(rt, r->method)) {
			not_allowed(r, strcmp(rt->method, "GET") == 0 ? "GET, HEAD" : rt->method);
		} else {
			vd_store_sync(api->store);
			rt->fn(api, r);
		}
		return;
	}
	vd_http_error(r, 404, "not_found", "no such endpoint", NULL);
}

void vd_api_done(vd_req *r, double seconds, void *arg)
{
	vd_api *api = arg;

	vd_metrics_http(api->metrics, r->route, r->status, seconds);
	/* Every answer is counted in /metrics. A line for each at info would
	 * take a sixth of the loop's rate under load and flood the journal,
	 * so info keeps the refusals and errors, debug all of them. */
	if (r->status >= 400)
		log_info("%s %s %u %.1f ms", r->method, r->route, r->status, seconds * 1000.0);
	else
		log_debug("%s %s %u %.1f ms", r->method, r->route, r->status, seconds * 1000.0);
}

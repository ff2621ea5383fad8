#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "vd_page.h"
#include "vd_views.h"

/* The files of src/daemon/page/, embedded at build time (src/daemon/page/embed.sh). */
extern const unsigned char vd_page_index_html[], vd_page_status_css[], vd_page_status_js[],
    vd_page_status_svg[];
extern const size_t vd_page_index_html_len, vd_page_status_css_len, vd_page_status_js_len,
    vd_page_status_svg_len;

/* The page and its assets come from this daemon only: no inline script or
 * style, no framing, nothing fetched elsewhere. Strings from the store are
 * written into the page as text by status.js; this is the second wall. */
static const char *const page_headers[] = {
	"Content-Security-Policy", "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"Referrer-Policy", "no-referrer",
	NULL
};

static void send_asset(vd_req *r, const char *type, const unsigned char *p, size_t len)
{
	vd_http_respond(r, 200, type, (const char *)p, len, page_headers);
}

void vd_page_index(vd_req *r)
{
	send_asset(r, "text/html; charset=utf-8", vd_page_index_html, vd_page_index_html_len);
}

void vd_page_css(vd_req *r)
{
	send_asset(r, "text/css; charset=utf-8", vd_page_status_css, vd_page_status_css_len);
}

void vd_page_js(vd_req *r)
{
	send_asset(r, "text/javascript; charset=utf-8", vd_page_status_js, vd_page_status_js_len);
}

void vd_page_icon(vd_req *r)
{
	send_asset(r, "image/svg+xml; charset=utf-8", vd_page_status_svg, vd_page_status_svg_len);
}

/* ---- GET /summary -------------------------------------------------------- */

/* Whole-store and ledger conditions first: an operator reads them before
 * the per-artifact ones, which can number one per round above a break. */
static int alert_rank(int kind)
{
	static const int rank[VD_ALERT_COUNT] = {
		[VD_ALERT_LEDGER_REWRITTEN] = 0, [VD_ALERT_LEDGER_BROKEN] = 1,
		[VD_ALERT_EQUIVOCATION] = 2, [VD_ALERT_COMMITMENT_MISMATCH] = 3,
		[VD_ALERT_FORK] = 4, [VD_ALERT_ARTIFACT_FAILED] = 5, [VD_ALERT_CHAIN_BROKEN] = 6,
		[VD_ALERT_OMS_MISMATCH] = 7,
	};

	return kind >= 0 && kind < VD_ALERT_COUNT ? rank[kind] : VD_ALERT_COUNT;
}

static int alert_cmp(const void *a, const void *b)
{
	const vd_alert *x = *(const vd_alert *const *)a, *y = *(const vd_alert *const *)b;
	int d = alert_rank(x->kind) - alert_rank(y->kind);

	return d != 0 ? d : strcmp(x->subject, y->subject);
}

/* Constructors that note a failed allocation in *oom (a NULL v is one). */
static void put(int *oom, json_object *o, const char *key, json_object *v)
{
	if (v == NULL || json_object_object_add(o, key, v) != 0) {
		json_object_put(v);
		*oom = 1;
	}
}

static void push(int *oom, json_object *a, json_object *v)
{
	if (v == NULL || json_object_array_add(a, v) != 0) {
		json_object_put(v);
		*oom = 1;
	}
}

static json_object *alert_json(int *oom, const vd_alert *a)
{
	json_object *o = json_object_new_object();

	if (o == NULL) {
		*oom = 1;
		return NULL;
	}
	put(oom, o, "kind", json_object_new_string(vd_alert_name((vd_alert_kind)a->kind)));
	put(oom, o, "subject", json_object_new_string(a->subject));
	put(oom, o, "detail", json_object_new_string(a->detail));
	return o;
}

/* The alerts raised now, from memory (no read of the state database),
 * sorted, at most VD_SUMMARY_ALERTS_MAX of them. */
static json_object *alerts_json(int *oom, const vd_lineage *l, size_t *total)
{
	json_object *arr = json_object_new_array();
	const vd_alert **all;
	size_t it = 0, n = 0, i;

	*total = vd_lineage_alert_count(l);
	all = calloc(*total + 1, sizeof(*all));
	if (arr == NULL || all == NULL) {
		free(all);
		*oom = 1;
		return arr;
	}
	while (n < *total && (all[n] = vd_lineage_next_alert(l, &it)) != NULL)
		n++;
	qsort(all, n, sizeof(*all), alert_cmp);
	for (i = 0; i < n && i < VD_SUMMARY_ALERTS_MAX; i++)
		push(oom, arr, alert_json(oom, all[i]));
	free(all);
	return arr;
}

static json_object *trusted_keys_json(int *oom, const vd_keyring *kr)
{
	json_object *arr = json_object_new_array();
	size_t i;

	if (arr == NULL) {
		*oom = 1;
		return NULL;
	}
	for (i = 0; kr != NULL && i < kr->n; i++)
		push(oom, arr, json_object_new_string(vd_key_id(kr->keys[i])));
	return arr;
}

static json_object *summary_json(const vd_page_facts *f)
{
	json_object *o = json_object_new_object();
	const char *why = f->not_ready;
	size_t total = 0;
	int oom = o == NULL;

	if (oom)
		return NULL;
	put(&oom, o, "version", json_object_new_string(PACKAGE_VERSION));
	put(&oom, o, "ready", json_object_new_boolean(why == NULL));
	if (why != NULL)
		put(&oom, o, "not_ready", json_object_new_string(why));
	else if (json_object_object_add(o, "not_ready", NULL) != 0)
		oom = 1;
	put(&oom, o, "commitment_policy", json_object_new_string(vd_policy_name(vd_config_policy(f->cfg))));
	put(&oom, o, "legacy_policy", json_object_new_string(vd_legacy_policy_name(f->cfg->legacy_policy)));
	put(&oom, o, "signing_key_id", json_object_new_string(vd_key_id(f->signing_key)));
	put(&oom, o, "trusted_keys", trusted_keys_json(&oom, f->trusted));
	put(&oom, o, "alerts", alerts_json(&oom, f->lineage, &total));
	put(&oom, o, "alerts_total", json_object_new_uint64(total));
	if (oom) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

void vd_page_summary(vd_req *r, const vd_page_facts *f)
{
	json_object *o = summary_json(f);
	const char *s = o ? json_object_to_json_string_ext(o, VD_VIEW_JSON) : NULL;

	if (s == NULL)
		vd_http_error(r, 503, "overloaded", "out of memory while building the summary",
		    (const char *const[]){ "Retry-After", f->retry_after, NULL });
	else
		vd_http_respond(r, 200, "application/json", s, strlen(s), NULL);
	json_object_put(o);
}

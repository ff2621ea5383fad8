#include "config.h"

#include <stdio.h>
#include <string.h>

#include "vd_hash.h"
#include "vd_json.h"
#include "vd_jsonw.h"
#include "vd_ledger.h"

const char *vd_ledger_break_name(vd_ledger_break b)
{
	switch (b) {
	case VD_LEDGER_INTACT: return "intact";
	case VD_LEDGER_MALFORMED: return "malformed_record";
	case VD_LEDGER_PREV_MISMATCH: return "prev_hash_mismatch";
	case VD_LEDGER_ROUND_ORDER: return "round_not_increasing";
	case VD_LEDGER_NO_ROUND_0: return "first_record_not_round_0";
	}
	return "unknown";
}

static int why_fail(char *why, size_t n, const char *msg)
{
	snprintf(why, n, "%s", msg);
	return -1;
}

static int all_strings(const vd_jval *v)
{
	const vd_jval *c;

	for (c = v->child; c != NULL; c = c->next)
		if (c->type != VD_JSTR)
			return 0;
	return 1;
}

static int check_fields(const vd_jval *root, vd_ledger_record *r, char *why, size_t n)
{
	static const char *const known[] = { "schema_version", "round_index",
		"participants", "dataset_roots", "global_model_hash", "prev_record_hash" };
	const vd_jval *c, *v;
	size_t i;

	for (c = root->child; c != NULL; c = c->next) {
		for (i = 0; i < VD_ARRAY_LEN(known) && !vd_str_eq(c->key, known[i]); i++)
			;
		if (i == VD_ARRAY_LEN(known))
			return why_fail(why, n, "the record has an unknown field");
	}
	if (!vd_json_int64(vd_json_get(root, "schema_version"), &r->schema_version))
		return why_fail(why, n, "schema_version is missing or not an integer");
	if (r->schema_version != VD_LEDGER_SCHEMA)
		return why_fail(why, n, "schema_version is not 1");
	if (!vd_json_int64(vd_json_get(root, "round_index"), &r->round_index) ||
	    r->round_index < 0)
		return why_fail(why, n, "round_index is missing or not a non-negative integer");
	v = vd_json_get(root, "participants");
	if (v == NULL || v->type != VD_JARR || !all_strings(v))
		return why_fail(why, n, "participants is not an array of strings");
	v = vd_json_get(root, "dataset_roots");
	if (v == NULL || v->type != VD_JOBJ || !all_strings(v))
		return why_fail(why, n, "dataset_roots is not an object of strings");
	v = vd_json_get(root, "global_model_hash");
	if (v == NULL || v->type != VD_JSTR || !vd_is_hex64(v->str))
		return why_fail(why, n, "global_model_hash is not 64 lowercase hex characters");
	memcpy(r->global_model_hash, v->str.p, VD_HASH_HEX_LEN + 1);
	v = vd_json_get(root, "prev_record_hash");
	if (v == NULL || (v->type != VD_JNULL && (v->type != VD_JSTR || !vd_is_hex64(v->str))))
		return why_fail(why, n, "prev_record_hash is neither null nor 64 lowercase hex characters");
	if ((r->has_prev = v->type == VD_JSTR))
		memcpy(r->prev_record_hash, v->str.p, VD_HASH_HEX_LEN + 1);
	return 0;
}

/* The record's own hash: domain, NUL, compact sorted raw-UTF-8 JSON. */
static int record_hash(const vd_jval *root, char hex[VD_HASH_HEX_LEN + 1])
{
	vd_buf b;
	int rc = -1;

	vd_buf_init(&b);
	vd_buf_put(&b, VD_LEDGER_DOMAIN, sizeof(VD_LEDGER_DOMAIN));   /* with the NUL */
	if (vd_jw_value(&b, root, VD_JW_UTF8) == 0 && !b.oom)
		rc = vd_sha256_hex(b.p, b.len, hex);
	vd_buf_free(&b);
	return rc;
}

int vd_ledger_parse_record(const uint8_t *line, size_t len,
    vd_ledger_record *out, char *why, size_t whylen)
{
	char msg[128];
	vd_jdoc doc;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (len > VD_LEDGER_MAX_LINE)
		return why_fail(why, whylen, "the line is longer than a record may be");
	if (vd_json_parse(line, len, NULL, &doc, msg, sizeof(msg)) < 0) {
		snprintf(why, whylen, "not valid JSON (%s)", msg);
		return -1;
	}
	if (doc.root->type != VD_JOBJ)
		why_fail(why, whylen, "the line is not a JSON object");
	else if (check_fields(doc.root, out, why, whylen) == 0) {
		if (record_hash(doc.root, out->record_hash) < 0)
			why_fail(why, whylen, "the record cannot be serialized canonically");
		else
			rc = 0;
	}
	vd_jdoc_free(&doc);
	return rc;
}

static int blank(const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
			return 0;
	return 1;
}

static void set_break(vd_ledger_result *res, vd_ledger_break b, size_t line,
    const char *detail)
{
	if (res->brk != VD_LEDGER_INTACT)
		return;
	res->brk = b;
	res->break_line = line;
	snprintf(res->break_detail, sizeof(res->break_detail), "line %zu: %s", line, detail);
}

/* Check one parsed record against the last good one. */
static void link_record(vd_ledger_result *res, const vd_ledger_record *prev,
    const vd_ledger_record *r, size_t line)
{
	if (prev == NULL && r->has_prev)
		set_break(res, VD_LEDGER_PREV_MISMATCH, line,
		    "the first record names a previous record");
	/* A ledger is read from its beginning: one that starts later could
	 * be grafted onto another run's history. */
	else if (prev == NULL && r->round_index != 0)
		set_break(res, VD_LEDGER_NO_ROUND_0, line,
		    "the ledger does not begin with its round-0 record, so it commits nothing");
	else if (prev != NULL && (!r->has_prev ||
	    strcmp(r->prev_record_hash, prev->record_hash) != 0))
		set_break(res, VD_LEDGER_PREV_MISMATCH, line,
		    "prev_record_hash is not the hash of the record before it");
	else if (prev != NULL && r->round_index <= prev->round_index)
		set_break(res, VD_LEDGER_ROUND_ORDER, line,
		    "round_index does not increase");
}

void vd_ledger_verify(const uint8_t *buf, size_t len, vd_ledger_fn fn,
    void *arg, vd_ledger_result *res)
{
	vd_ledger_record prev, cur;
	const uint8_t *p = buf, *end = buf + len, *nl;
	size_t line = 0;
	int have_prev = 0;
	char why[160];

	memset(res, 0, sizeof(*res));
	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		line++;
		if (!blank(p, n)) {
			res->records++;
			if (vd_ledger_parse_record(p, n, &cur, why, sizeof(why)) < 0) {
				set_break(res, VD_LEDGER_MALFORMED, line, why);
			} else {
				if (res->brk == VD_LEDGER_INTACT)
					link_record(res, have_prev ? &prev : NULL, &cur, line);
				if (res->brk == VD_LEDGER_INTACT)
					res->trusted++;
				if (fn != NULL)
					fn(&cur, line, res->brk == VD_LEDGER_INTACT, arg);
				prev = cur;
				have_prev = 1;
			}
		}
		p += n + (nl != NULL);
	}
}

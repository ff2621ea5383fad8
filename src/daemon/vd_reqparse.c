#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "vd_json.h"
#include "vd_reqparse.h"
#include "vd_utf8.h"

static int fail(char *err, size_t n, const char *msg)
{
	snprintf(err, n, "%s", msg);
	vd_utf8_sanitize(err);
	return -EINVAL;
}

static int only_keys(const vd_jval *o, const char *const *keys, size_t nkeys,
    char *err, size_t n)
{
	const vd_jval *c;
	size_t i;

	for (c = o->child; c != NULL; c = c->next) {
		for (i = 0; i < nkeys && !vd_str_eq(c->key, keys[i]); i++)
			;
		if (i == nkeys) {
			snprintf(err, n, "unknown field \"%.64s\"", c->key.p);
			vd_utf8_sanitize(err);
			return -EINVAL;
		}
	}
	return 0;
}

static int get_hash(const vd_jval *o, const char *key, char *out, char *err, size_t n)
{
	const vd_jval *v = vd_json_get(o, key);

	if (v == NULL || v->type != VD_JSTR || !vd_is_hex64(v->str)) {
		snprintf(err, n, "%s must be 64 lowercase hex characters", key);
		return -EINVAL;
	}
	memcpy(out, v->str.p, VD_HASH_HEX_LEN + 1);
	return 0;
}

static int parse_doc(const uint8_t *body, size_t len, unsigned max_depth,
    vd_jdoc *doc, char *err, size_t n)
{
	vd_json_opts opts = { max_depth, 0 };
	char msg[128];

	if (vd_json_parse(body, len, &opts, doc, msg, sizeof(msg)) < 0) {
		snprintf(err, n, "the body is not valid JSON: %s", msg);
		return -EINVAL;
	}
	if (doc->root->type != VD_JOBJ) {
		vd_jdoc_free(doc);
		return fail(err, n, "the body is not a JSON object");
	}
	return 0;
}

static int roundclose_from(const vd_jval *o, vd_roundclose *out, char *err, size_t n)
{
	static const char *const keys[] = { "schema_version", "kind", "round_index",
		"global_model_hash" };
	const vd_jval *v = vd_json_get(o, "schema_version");

	if (v == NULL || v->type != VD_JINT || !vd_json_int64(v, &out->schema_version))
		return fail(err, n, "schema_version is missing or not an integer");
	if (out->schema_version < VD_ROUNDCLOSE_SCHEMA_MIN ||
	    out->schema_version > VD_ROUNDCLOSE_SCHEMA_MAX)
		return fail(err, n, "schema_version must be 1 or 2");
	v = vd_json_get(o, "kind");
	if (v == NULL || v->type != VD_JSTR || !vd_str_eq(v->str, "round_close"))
		return fail(err, n, "kind must be \"round_close\"");
	if (only_keys(o, keys, VD_ARRAY_LEN(keys), err, n) < 0)
		return -EINVAL;
	v = vd_json_get(o, "round_index");
	if (v == NULL || !vd_json_int64(v, &out->round_index) || out->round_index < 0)
		return fail(err, n, "round_index must be a non-negative integer");
	return get_hash(o, "global_model_hash", out->global_model_hash, err, n);
}

int vd_parse_roundclose(const uint8_t *body, size_t len, unsigned max_depth,
    vd_roundclose *out, char *err, size_t errlen)
{
	vd_jdoc doc;
	int rc;

	memset(out, 0, sizeof(*out));
	if (parse_doc(body, len, max_depth, &doc, err, errlen) < 0)
		return -EINVAL;
	rc = roundclose_from(doc.root, out, err, errlen);
	vd_jdoc_free(&doc);
	return rc;
}

static int path_form(const vd_jval *o, vd_verify_req *out, char *err, size_t n)
{
	static const char *const keys[] = { "path", "expected_hash" };
	const vd_jval *v = vd_json_get(o, "path");

	if (only_keys(o, keys, VD_ARRAY_LEN(keys), err, n) < 0)
		return -EINVAL;
	if (v == NULL || v->type != VD_JSTR || v->str.len == 0 ||
	    v->str.len >= sizeof(out->path) || memchr(v->str.p, '\0', v->str.len))
		return fail(err, n, "path must be a non-empty string without NUL bytes");
	memcpy(out->path, v->str.p, v->str.len + 1);
	out->form = VD_VERIFY_PATH;
	if (vd_json_get(o, "expected_hash") == NULL ||
	    vd_json_get(o, "expected_hash")->type == VD_JNULL)
		return 0;
	out->has_expected = 1;
	return get_hash(o, "expected_hash", out->expected, err, n);
}

static int verify_from(const vd_jval *o, vd_verify_req *out, char *err, size_t n)
{
	static const char *const hash_keys[] = { "content_hash" };

	if (vd_json_get(o, "kind") != NULL || vd_json_get(o, "schema_version") != NULL) {
		out->form = VD_VERIFY_ROUNDCLOSE;
		return roundclose_from(o, &out->rc, err, n);
	}
	if (vd_json_get(o, "content_hash") != NULL) {
		out->form = VD_VERIFY_HASH;
		if (only_keys(o, hash_keys, 1, err, n) < 0)
			return -EINVAL;
		return get_hash(o, "content_hash", out->hash, err, n);
	}
	if (vd_json_get(o, "path") != NULL)
		return path_form(o, out, err, n);
	return fail(err, n, "the body must be a RoundClose message, {\"content_hash\": ...} or {\"path\": ...}");
}

int vd_parse_verify(const uint8_t *body, size_t len, unsigned max_depth,
    vd_verify_req *out, char *err, size_t errlen)
{
	vd_jdoc doc;
	int rc;

	memset(out, 0, sizeof(*out));
	if (parse_doc(body, len, max_depth, &doc, err, errlen) < 0)
		return -EINVAL;
	rc = verify_from(doc.root, out, err, errlen);
	vd_jdoc_free(&doc);
	if (rc == 0 && out->form == VD_VERIFY_ROUNDCLOSE)
		memcpy(out->hash, out->rc.global_model_hash, sizeof(out->hash));
	return rc;
}

int vd_is_json_content_type(const char *ct)
{
	size_t n = strlen("application/json");

	if (ct == NULL || strncasecmp(ct, "application/json", n) != 0)
		return 0;
	for (ct += n; *ct == ' ' || *ct == '\t'; ct++)
		;
	return *ct == '\0' || *ct == ';';
}

static int has_ctl(const char *s, size_t len, int allow_tab)
{
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if ((c < 0x20 && !(allow_tab && c == '\t')) || c == 0x7f)
			return 1;
	}
	return 0;
}

int vd_http_field_ok(const char *s, size_t len)
{
	return s != NULL && !has_ctl(s, len, 1);
}

int vd_query_check(const vd_query_arg *args, size_t n, char *err, size_t errlen)
{
	size_t i, j;

	if (n > VD_REQ_QUERY_MAX_ARGS) {
		snprintf(err, errlen, "the query has more than %d parameters", VD_REQ_QUERY_MAX_ARGS);
		return -EINVAL;
	}
	for (i = 0; i < n; i++) {
		const vd_query_arg *a = &args[i];

		if (a->key_len > VD_REQ_QUERY_KEY_MAX) {
			snprintf(err, errlen, "a query parameter name is longer than %d bytes",
			    VD_REQ_QUERY_KEY_MAX);
			return -EINVAL;
		}
		/* Quoted below: printable, so the sentence stays one line. */
		if (memchr(a->key, '\0', a->key_len) != NULL || has_ctl(a->key, a->key_len, 0)) {
			snprintf(err, errlen, "a query parameter name holds a control character");
			return -EINVAL;
		}
		if (a->value != NULL && memchr(a->value, '\0', a->value_len) != NULL) {
			snprintf(err, errlen, "the query parameter \"%.*s\" holds a NUL byte (%%00)",
			    (int)a->key_len, a->key);
			vd_utf8_sanitize(err);
			return -EINVAL;
		}
		if (a->value != NULL && a->value_len > VD_REQ_QUERY_VALUE_MAX) {
			snprintf(err, errlen, "the query parameter \"%.*s\" is too long: %zu bytes, at most %d",
			    (int)a->key_len, a->key, a->value_len, VD_REQ_QUERY_VALUE_MAX);
			vd_utf8_sanitize(err);
			return -EINVAL;
		}
		for (j = 0; j < i; j++) {
			if (args[j].key_len == a->key_len && memcmp(args[j].key, a->key, a->key_len) == 0) {
				snprintf(err, errlen, "the query parameter \"%.*s\" is given more than once",
				    (int)a->key_len, a->key);
				vd_utf8_sanitize(err);
				return -EINVAL;
			}
		}
	}
	return 0;
}

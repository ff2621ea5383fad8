/*
 * Request bodies: the three forms of POST /verify and the RoundClose
 * message. Anything a second reader could take differently (unknown
 * fields, duplicate keys, loose types) is refused, the way Lensemble's own
 * parse_control_message refuses it.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "vd_json.h"
#include "vd_reqparse.h"
#include "vd_utf8.h"

#define H "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define H2 "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"
#define DEPTH 16

/* Bodies that may hold NUL bytes: pass the literal and its length. */
#define B(s) (const uint8_t *)(s), sizeof(s) - 1

static void verify_ok(const char *body, vd_verify_req *r)
{
	char err[256] = "";

	if (vd_parse_verify((const uint8_t *)body, strlen(body), DEPTH, r, err, sizeof(err)) != 0)
		fail_msg("refused %s: %s", body, err);
}

static void rc_ok(const char *body, vd_roundclose *rc)
{
	char err[256] = "";

	if (vd_parse_roundclose((const uint8_t *)body, strlen(body), DEPTH, rc, err, sizeof(err)) != 0)
		fail_msg("refused %s: %s", body, err);
}

/* Refused with a message, which must mention needle when one is given. */
static void verify_refused_n(const uint8_t *body, size_t len, unsigned depth, const char *needle)
{
	char err[256] = "";
	vd_verify_req r;

	if (vd_parse_verify(body, len, depth, &r, err, sizeof(err)) == 0)
		fail_msg("accepted %.*s", (int)len, (const char *)body);
	if (err[0] == '\0')
		fail_msg("no message for %.*s", (int)len, (const char *)body);
	if (needle != NULL && strstr(err, needle) == NULL)
		fail_msg("\"%s\" does not mention \"%s\" for %.*s", err, needle, (int)len,
		    (const char *)body);
}

static void verify_refused(const char *body, const char *needle)
{
	verify_refused_n((const uint8_t *)body, strlen(body), DEPTH, needle);
}

static void rc_refused_n(const uint8_t *body, size_t len, unsigned depth, const char *needle)
{
	char err[256] = "";
	vd_roundclose rc;

	if (vd_parse_roundclose(body, len, depth, &rc, err, sizeof(err)) == 0)
		fail_msg("accepted %.*s", (int)len, (const char *)body);
	if (err[0] == '\0')
		fail_msg("no message for %.*s", (int)len, (const char *)body);
	if (needle != NULL && strstr(err, needle) == NULL)
		fail_msg("\"%s\" does not mention \"%s\" for %.*s", err, needle, (int)len,
		    (const char *)body);
}

/* A RoundClose body is refused the same way by both entry points. */
static void roundclose_refused(const char *body, const char *needle)
{
	rc_refused_n((const uint8_t *)body, strlen(body), DEPTH, needle);
	verify_refused(body, needle);
}

static void test_verify_roundclose(void **state)
{
	(void)state;
	vd_verify_req r;

	verify_ok("{\"schema_version\":2,\"kind\":\"round_close\",\"round_index\":7,"
	    "\"global_model_hash\":\"" H "\"}", &r);
	assert_int_equal(r.form, VD_VERIFY_ROUNDCLOSE);
	assert_int_equal(r.rc.schema_version, 2);
	assert_int_equal(r.rc.round_index, 7);
	assert_string_equal(r.rc.global_model_hash, H);
	/* The hash to look up is the one the message commits to. */
	assert_string_equal(r.hash, H);
	assert_int_equal(r.has_expected, 0);

	verify_ok(" { \"global_model_hash\" : \"" H2 "\" , \"round_index\" : 0 ,"
	    " \"kind\" : \"round_close\" , \"schema_version\" : 1 } \n", &r);
	assert_int_equal(r.form, VD_VERIFY_ROUNDCLOSE);
	assert_int_equal(r.rc.schema_version, 1);
	assert_int_equal(r.rc.round_index, 0);
	assert_string_equal(r.hash, H2);
}

static void test_verify_hash(void **state)
{
	(void)state;
	vd_verify_req r;

	verify_ok("{\"content_hash\":\"" H "\"}", &r);
	assert_int_equal(r.form, VD_VERIFY_HASH);
	assert_string_equal(r.hash, H);
	assert_int_equal(r.has_expected, 0);
	assert_string_equal(r.path, "");
}

static void test_verify_path(void **state)
{
	(void)state;
	vd_verify_req r;

	verify_ok("{\"path\":\"run-a/round-00003\"}", &r);
	assert_int_equal(r.form, VD_VERIFY_PATH);
	assert_string_equal(r.path, "run-a/round-00003");
	assert_int_equal(r.has_expected, 0);

	verify_ok("{\"path\":\"round-00001\",\"expected_hash\":\"" H "\"}", &r);
	assert_int_equal(r.form, VD_VERIFY_PATH);
	assert_string_equal(r.path, "round-00001");
	assert_int_equal(r.has_expected, 1);
	assert_string_equal(r.expected, H);

	verify_ok("{\"expected_hash\":\"" H "\",\"path\":\"x\"}", &r);
	assert_int_equal(r.form, VD_VERIFY_PATH);
	assert_int_equal(r.has_expected, 1);

	/* null is how JSON writers spell "not given". */
	verify_ok("{\"path\":\"round-00001\",\"expected_hash\":null}", &r);
	assert_int_equal(r.form, VD_VERIFY_PATH);
	assert_int_equal(r.has_expected, 0);
	assert_string_equal(r.expected, "");

	verify_ok("{\"path\":\"r\\u00e9sum\\u00e9/\\ud83d\\ude00\"}", &r);
	assert_string_equal(r.path, "r\xc3\xa9sum\xc3\xa9/\xf0\x9f\x98\x80");
}

static void test_roundclose(void **state)
{
	(void)state;
	vd_roundclose rc;

	rc_ok("{\"schema_version\":2,\"kind\":\"round_close\",\"round_index\":41,"
	    "\"global_model_hash\":\"" H "\"}", &rc);
	assert_int_equal(rc.schema_version, 2);
	assert_int_equal(rc.round_index, 41);
	assert_string_equal(rc.global_model_hash, H);

	rc_ok("{\"schema_version\":1,\"kind\":\"round_close\",\"round_index\":0,"
	    "\"global_model_hash\":\"" H2 "\"}", &rc);
	assert_int_equal(rc.schema_version, 1);
	assert_int_equal(rc.round_index, 0);
	assert_string_equal(rc.global_model_hash, H2);

	rc_ok("{\"schema_version\":2,\"kind\":\"round_close\",\"round_index\":9223372036854775807,"
	    "\"global_model_hash\":\"" H "\"}", &rc);
	assert_true(rc.round_index == INT64_MAX);
}

#define RC_TAIL ",\"kind\":\"round_close\",\"round_index\":1,\"global_model_hash\":\"" H "\"}"

static void test_schema_version(void **state)
{
	(void)state;
	roundclose_refused("{\"schema_version\":0" RC_TAIL, "schema_version");
	roundclose_refused("{\"schema_version\":3" RC_TAIL, "schema_version");
	roundclose_refused("{\"schema_version\":-1" RC_TAIL, "schema_version");
	roundclose_refused("{\"schema_version\":true" RC_TAIL, "schema_version");
	roundclose_refused("{\"schema_version\":\"2\"" RC_TAIL, "schema_version");
	roundclose_refused("{\"schema_version\":2.0" RC_TAIL, "schema_version");
	roundclose_refused("{\"schema_version\":2e0" RC_TAIL, "schema_version");
	roundclose_refused("{\"schema_version\":null" RC_TAIL, "schema_version");
	roundclose_refused("{\"schema_version\":[2]" RC_TAIL, "schema_version");
	roundclose_refused("{\"schema_version\":18446744073709551618" RC_TAIL, "schema_version");
	roundclose_refused("{\"kind\":\"round_close\",\"round_index\":1,"
	    "\"global_model_hash\":\"" H "\"}", "schema_version");

	/* A future schema may rename kind: its version is judged first. */
	roundclose_refused("{\"schema_version\":3,\"kind\":\"round_closed\",\"round_index\":1,"
	    "\"global_model_hash\":\"" H "\"}", "schema_version");
	roundclose_refused("{\"kind\":\"other\",\"schema_version\":true}", "schema_version");
	roundclose_refused("{\"kind\":\"other\",\"schema_version\":3,\"extra\":1}", "schema_version");
	roundclose_refused("{\"kind\":\"round_close\"}", "schema_version");
}

static void test_kind(void **state)
{
	(void)state;
	roundclose_refused("{\"schema_version\":2,\"kind\":\"round_open\",\"round_index\":1,"
	    "\"global_model_hash\":\"" H "\"}", "kind");
	roundclose_refused("{\"schema_version\":2,\"kind\":\"ROUND_CLOSE\",\"round_index\":1,"
	    "\"global_model_hash\":\"" H "\"}", "kind");
	roundclose_refused("{\"schema_version\":2,\"kind\":\"round_close \",\"round_index\":1,"
	    "\"global_model_hash\":\"" H "\"}", "kind");
	roundclose_refused("{\"schema_version\":2,\"kind\":1,\"round_index\":1,"
	    "\"global_model_hash\":\"" H "\"}", "kind");
	roundclose_refused("{\"schema_version\":2,\"kind\":null,\"round_index\":1,"
	    "\"global_model_hash\":\"" H "\"}", "kind");
	roundclose_refused("{\"schema_version\":2,\"round_index\":1,"
	    "\"global_model_hash\":\"" H "\"}", "kind");
	rc_refused_n(B("{\"schema_version\":2,\"kind\":\"round_close\\u0000\",\"round_index\":1,"
	    "\"global_model_hash\":\"" H "\"}"), DEPTH, "kind");
	/* Kind is judged before the other fields. */
	roundclose_refused("{\"schema_version\":2,\"kind\":\"ping\",\"extra\":1}", "kind");
}

static void test_unknown_fields(void **state)
{
	(void)state;
	roundclose_refused("{\"schema_version\":2,\"kind\":\"round_close\",\"round_index\":1,"
	    "\"global_model_hash\":\"" H "\",\"signature\":\"x\"}", "signature");
	roundclose_refused("{\"schema_version\":2,\"kind\":\"round_close\",\"round_index\":1,"
	    "\"global_model_hash\":\"" H "\",\"extra\":null}", "unknown field");
	roundclose_refused("{\"schema_version\":2,\"kind\":\"round_close\",\"round_index\":1,"
	    "\"global_model_hash\":\"" H "\",\"content_hash\":\"" H "\"}", "content_hash");
	verify_refused("{\"content_hash\":\"" H "\",\"extra\":1}", "extra");
	verify_refused("{\"content_hash\":\"" H "\",\"expected_hash\":\"" H "\"}", "expected_hash");
	verify_refused("{\"content_hash\":\"" H "\",\"path\":\"x\"}", NULL);
	verify_refused("{\"path\":\"x\",\"extra\":1}", "extra");
	verify_refused("{\"path\":\"x\",\"expected_hash\":null,\"wait\":5}", "wait");
	verify_refused("{\"path\":\"x\",\"Path\":\"y\"}", "Path");
	/* None of the forms. */
	verify_refused("{}", NULL);
	verify_refused("{\"expected_hash\":\"" H "\"}", NULL);
	verify_refused("{\"hash\":\"" H "\"}", NULL);
}

#define RC_HEAD "{\"schema_version\":2,\"kind\":\"round_close\",\"global_model_hash\":\"" H "\",\"round_index\":"

static void test_round_index(void **state)
{
	(void)state;
	roundclose_refused(RC_HEAD "-1}", "round_index");
	roundclose_refused(RC_HEAD "-9223372036854775808}", "round_index");
	roundclose_refused(RC_HEAD "1.0}", "round_index");
	roundclose_refused(RC_HEAD "1.5}", "round_index");
	roundclose_refused(RC_HEAD "1e2}", "round_index");
	roundclose_refused(RC_HEAD "true}", "round_index");
	roundclose_refused(RC_HEAD "false}", "round_index");
	roundclose_refused(RC_HEAD "\"1\"}", "round_index");
	roundclose_refused(RC_HEAD "null}", "round_index");
	roundclose_refused(RC_HEAD "[1]}", "round_index");
	roundclose_refused(RC_HEAD "9223372036854775808}", "round_index");
	roundclose_refused("{\"schema_version\":2,\"kind\":\"round_close\","
	    "\"global_model_hash\":\"" H "\"}", "round_index");
}

static void test_hashes(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"\"00112233445566778899AABBCCDDEEFF00112233445566778899AABBCCDDEEFF\"",
		"\"00112233445566778899aabbccddeeff00112233445566778899aabbccddeefF\"",
		"\"00112233445566778899aabbccddeeff00112233445566778899aabbccddeef\"",
		"\"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff0\"",
		"\"0g112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\"",
		"\" 0112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\"",
		"\"\"",
		"1234",
		"true",
		"[\"" H "\"]",
		"{\"hex\":\"" H "\"}",
	};
	char body[512];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(body, sizeof(body), "{\"schema_version\":2,\"kind\":\"round_close\","
		    "\"round_index\":1,\"global_model_hash\":%s}", bad[i]);
		roundclose_refused(body, "global_model_hash");
		snprintf(body, sizeof(body), "{\"content_hash\":%s}", bad[i]);
		verify_refused(body, "content_hash");
		snprintf(body, sizeof(body), "{\"path\":\"x\",\"expected_hash\":%s}", bad[i]);
		verify_refused(body, "expected_hash");
	}
	roundclose_refused("{\"schema_version\":2,\"kind\":\"round_close\",\"round_index\":1,"
	    "\"global_model_hash\":null}", "global_model_hash");
	roundclose_refused("{\"schema_version\":2,\"kind\":\"round_close\",\"round_index\":1}",
	    "global_model_hash");
	verify_refused("{\"content_hash\":null}", "content_hash");
	/* A NUL after 63 hex digits still makes 64 characters. */
	verify_refused_n(B("{\"content_hash\":\"00112233445566778899aabbccddeeff00112233445566778899aabbccddeef\\u0000\"}"),
	    DEPTH, "content_hash");
}

static void test_path(void **state)
{
	(void)state;
	char body[VD_REQ_PATH_MAX + 64], name[VD_REQ_PATH_MAX + 1];
	vd_verify_req r;

	verify_refused("{\"path\":\"\"}", "path");
	verify_refused("{\"path\":5}", "path");
	verify_refused("{\"path\":null}", "path");
	verify_refused("{\"path\":true}", "path");
	verify_refused("{\"path\":[\"x\"]}", "path");
	verify_refused("{\"path\":{}}", "path");
	verify_refused("{\"path\":\"a\\u0000b\"}", "path");
	verify_refused("{\"path\":\"\\u0000\"}", "path");
	verify_refused("{\"path\":\"x\\u0000\"}", "path");
	verify_refused("{\"path\":null,\"expected_hash\":\"" H "\"}", "path");

	/* The longest path that fits, and one byte more. */
	memset(name, 'a', sizeof(name));
	name[VD_REQ_PATH_MAX - 1] = '\0';
	snprintf(body, sizeof(body), "{\"path\":\"%s\"}", name);
	verify_ok(body, &r);
	assert_string_equal(r.path, name);
	name[VD_REQ_PATH_MAX - 1] = 'a';
	name[VD_REQ_PATH_MAX] = '\0';
	snprintf(body, sizeof(body), "{\"path\":\"%s\"}", name);
	verify_refused(body, "path");
}

static void test_duplicate_keys(void **state)
{
	(void)state;
	roundclose_refused("{\"schema_version\":2,\"kind\":\"round_close\",\"round_index\":1,"
	    "\"round_index\":2,\"global_model_hash\":\"" H "\"}", NULL);
	roundclose_refused("{\"schema_version\":2,\"schema_version\":2,\"kind\":\"round_close\","
	    "\"round_index\":1,\"global_model_hash\":\"" H "\"}", NULL);
	roundclose_refused("{\"schema_version\":2,\"kind\":\"round_close\",\"round_index\":1,"
	    "\"global_model_hash\":\"" H "\",\"global_model_hash\":\"" H2 "\"}", NULL);
	verify_refused("{\"content_hash\":\"" H "\",\"content_hash\":\"" H "\"}", NULL);
	verify_refused("{\"path\":\"a\",\"path\":\"b\"}", NULL);
	verify_refused("{\"path\":\"a\",\"expected_hash\":null,\"expected_hash\":\"" H "\"}", NULL);
	/* The same key spelled with an escape is still the same key. */
	verify_refused("{\"path\":\"a\",\"p\\u0061th\":\"b\"}", NULL);
}

static void test_not_json(void **state)
{
	(void)state;
	verify_refused_n(B(""), DEPTH, NULL);
	verify_refused_n(B("{"), DEPTH, NULL);
	verify_refused("{\"path\":\"x\"", NULL);
	verify_refused("{\"path\":\"x\"} {}", NULL);
	verify_refused("{\"path\":\"x\"}x", NULL);
	verify_refused("{'path':'x'}", NULL);
	verify_refused("{path:\"x\"}", NULL);
	verify_refused("{\"path\":\"x\",}", NULL);
	verify_refused_n(B("{\"path\":\"\xff\"}"), DEPTH, NULL);
	verify_refused_n(B("{\"path\":\"x\"}\0"), DEPTH, NULL);
	verify_refused("{\"path\":\"\\ud800\"}", NULL);
	rc_refused_n(B("{\"schema_version\":2,"), DEPTH, NULL);

	/* Valid JSON, but not an object. */
	verify_refused("[{\"path\":\"x\"}]", "object");
	verify_refused("\"x\"", "object");
	verify_refused("42", "object");
	verify_refused("null", "object");
	verify_refused("true", "object");
	rc_refused_n(B("[]"), DEPTH, "object");
}

static void test_depth(void **state)
{
	(void)state;
	char *deep;
	size_t i, n = 4000;
	vd_verify_req r;
	char err[256];

	/* Every accepted body is one flat object. */
	assert_int_equal(vd_parse_verify(B("{\"path\":\"x\"}"), 1, &r, err, sizeof(err)), 0);
	verify_refused_n(B("{\"path\":[\"x\"]}"), 1, NULL);
	verify_refused_n(B("{\"path\":{\"a\":{\"b\":{}}}}"), 3, NULL);
	rc_refused_n(B("{\"schema_version\":[[2]],\"kind\":\"round_close\"}"), 2, NULL);

	/* Far past the limit: refused, not a stack overflow. */
	deep = malloc(n * 2 + 32);
	assert_non_null(deep);
	memcpy(deep, "{\"path\":", 8);
	for (i = 0; i < n; i++)
		deep[8 + i] = '[';
	for (i = 0; i < n; i++)
		deep[8 + n + i] = ']';
	deep[8 + 2 * n] = '}';
	verify_refused_n((const uint8_t *)deep, 8 + 2 * n + 1, DEPTH, NULL);
	free(deep);
}

/* Refusals leave no previous request's fields behind. */
static void test_output_reset(void **state)
{
	(void)state;
	vd_verify_req r;
	char err[256];

	verify_ok("{\"path\":\"a\",\"expected_hash\":\"" H "\"}", &r);
	assert_int_equal(r.has_expected, 1);
	verify_ok("{\"content_hash\":\"" H2 "\"}", &r);
	assert_int_equal(r.form, VD_VERIFY_HASH);
	assert_int_equal(r.has_expected, 0);
	assert_string_equal(r.path, "");
	assert_string_equal(r.expected, "");
	assert_int_equal(vd_parse_verify(B("{"), DEPTH, &r, err, sizeof(err)), -EINVAL);
	assert_string_equal(r.hash, "");
}

/* Refusal messages become the detail of a JSON error body, so they must
 * stay valid UTF-8 even when they quote a long field name cut to length. */
static void test_message_utf8(void **state)
{
	(void)state;
	char body[512], err[256], name[128];
	vd_verify_req r;
	size_t pad;

	/* Every cut point through 2-, 3- and 4-byte characters. */
	for (pad = 56; pad < 72; pad++) {
		memset(name, 'k', pad);
		snprintf(name + pad, sizeof(name) - pad, "%s", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
		snprintf(body, sizeof(body), "{\"path\":\"x\",\"%s\":1}", name);
		err[0] = '\0';
		assert_int_equal(vd_parse_verify((const uint8_t *)body, strlen(body), DEPTH, &r,
		    err, sizeof(err)), -EINVAL);
		if (!vd_utf8_valid((const uint8_t *)err, strlen(err)))
			fail_msg("message for a %zu-byte prefix is not UTF-8: %s", pad, err);
	}
}

static void test_content_type(void **state)
{
	(void)state;
	assert_true(vd_is_json_content_type("application/json"));
	assert_true(vd_is_json_content_type("application/json; charset=utf-8"));
	assert_true(vd_is_json_content_type("application/json;charset=UTF-8"));
	assert_true(vd_is_json_content_type("Application/JSON"));
	assert_true(vd_is_json_content_type("APPLICATION/JSON; charset=utf-8"));
	assert_true(vd_is_json_content_type("application/json ; charset=utf-8"));

	assert_false(vd_is_json_content_type("application/jsonx"));
	assert_false(vd_is_json_content_type("application/json-patch+json"));
	assert_false(vd_is_json_content_type("application/jso"));
	assert_false(vd_is_json_content_type("text/json"));
	assert_false(vd_is_json_content_type("text/plain"));
	assert_false(vd_is_json_content_type("application/x-www-form-urlencoded"));
	assert_false(vd_is_json_content_type("multipart/form-data"));
	assert_false(vd_is_json_content_type(""));
	assert_false(vd_is_json_content_type(NULL));
}

/* ---- the query string and header fields ---------------------------- */

#define Q(k, v) { (k), sizeof(k) - 1, (v), (v) ? sizeof(v) - 1 : 0 }

static void query_refused(const vd_query_arg *a, size_t n, const char *needle)
{
	char err[256] = "";

	if (vd_query_check(a, n, err, sizeof(err)) == 0)
		fail_msg("accepted a query of %zu parameters (expected \"%s\")", n, needle);
	if (strstr(err, needle) == NULL)
		fail_msg("\"%s\" does not mention \"%s\"", err, needle);
	assert_true(vd_utf8_valid((const uint8_t *)err, strlen(err)));
}

static void test_query(void **state)
{
	(void)state;
	char err[256];
	static char longv[VD_REQ_QUERY_VALUE_MAX + 2], longk[VD_REQ_QUERY_KEY_MAX + 2];
	vd_query_arg many[VD_REQ_QUERY_MAX_ARGS + 1];
	static char names[VD_REQ_QUERY_MAX_ARGS + 1][8];
	size_t i;

	{
		vd_query_arg a[] = { Q("state", "verified"), Q("wait", "3"), Q("flag", NULL) };
		assert_int_equal(vd_query_check(a, 3, err, sizeof(err)), 0);
		assert_int_equal(vd_query_check(a, 0, err, sizeof(err)), 0);
	}
	{	/* ?wait=3&wait=400: a second reader could take either */
		vd_query_arg a[] = { Q("wait", "3"), Q("state", "failed"), Q("wait", "400") };
		query_refused(a, 3, "\"wait\" is given more than once");
	}
	{	/* the same name without a value counts too */
		vd_query_arg a[] = { Q("x", NULL), Q("x", "1") };
		query_refused(a, 2, "more than once");
	}
	{	/* names differing only in length are different */
		vd_query_arg a[] = { Q("run", "a"), Q("runs", "b"), Q("ru", "c") };
		assert_int_equal(vd_query_check(a, 3, err, sizeof(err)), 0);
	}
	{	/* %00 decoded: the length runs past the NUL */
		vd_query_arg a[] = { Q("path", "ledger\0.jsonl") };
		query_refused(a, 1, "NUL");
	}
	{
		vd_query_arg a[] = { Q("pa\0th", "x") };
		query_refused(a, 1, "control character");
	}
	{
		vd_query_arg a[] = { Q("pa\nth", "x") };
		query_refused(a, 1, "control character");
	}

	/* Values: VD_REQ_QUERY_VALUE_MAX bytes, and one more. */
	memset(longv, 'a', sizeof(longv) - 1);
	{
		vd_query_arg a[] = { { "path", 4, longv, VD_REQ_QUERY_VALUE_MAX } };
		assert_int_equal(vd_query_check(a, 1, err, sizeof(err)), 0);
		a[0].value_len++;
		query_refused(a, 1, "\"path\" is too long");
	}
	memset(longk, 'k', sizeof(longk) - 1);
	{
		vd_query_arg a[] = { { longk, VD_REQ_QUERY_KEY_MAX, "1", 1 } };
		assert_int_equal(vd_query_check(a, 1, err, sizeof(err)), 0);
		a[0].key_len++;
		query_refused(a, 1, "longer than");
	}

	/* VD_REQ_QUERY_MAX_ARGS parameters, and one more. */
	for (i = 0; i < VD_ARRAY_LEN(many); i++) {
		snprintf(names[i], sizeof(names[i]), "k%zu", i);
		many[i] = (vd_query_arg){ names[i], strlen(names[i]), "1", 1 };
	}
	assert_int_equal(vd_query_check(many, VD_REQ_QUERY_MAX_ARGS, err, sizeof(err)), 0);
	query_refused(many, VD_REQ_QUERY_MAX_ARGS + 1, "parameters");

	{	/* A name that is not UTF-8 is quoted as valid UTF-8. */
		vd_query_arg a[] = { Q("\xff\xfe", "1"), Q("\xff\xfe", "2") };
		query_refused(a, 2, "more than once");
	}
	{	/* A short buffer cuts the sentence, never past its end. */
		vd_query_arg a[] = { Q("wait", "3"), Q("wait", "4") };
		char small[12];

		memset(small, 0x5a, sizeof(small));
		assert_int_equal(vd_query_check(a, 2, small, 8), -EINVAL);
		assert_int_equal(strlen(small), 7);
		assert_int_equal((unsigned char)small[8], 0x5a);
	}
}

static void test_field(void **state)
{
	(void)state;

	assert_true(vd_http_field_ok("Bearer abc", 10));
	assert_true(vd_http_field_ok("a\tb c", 5));
	assert_true(vd_http_field_ok("", 0));
	assert_true(vd_http_field_ok("caf\xc3\xa9", 5));     /* obs-text is not a control */
	assert_false(vd_http_field_ok("Bearer a\0b", 10));
	assert_false(vd_http_field_ok("Bearer a\x01", 9));
	assert_false(vd_http_field_ok("a\rb", 3));
	assert_false(vd_http_field_ok("a\nb", 3));
	assert_false(vd_http_field_ok("a\x1b[0m", 6));
	assert_false(vd_http_field_ok("a\x7f", 2));
	assert_false(vd_http_field_ok(NULL, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verify_roundclose),
		cmocka_unit_test(test_verify_hash),
		cmocka_unit_test(test_verify_path),
		cmocka_unit_test(test_roundclose),
		cmocka_unit_test(test_schema_version),
		cmocka_unit_test(test_kind),
		cmocka_unit_test(test_unknown_fields),
		cmocka_unit_test(test_round_index),
		cmocka_unit_test(test_hashes),
		cmocka_unit_test(test_path),
		cmocka_unit_test(test_duplicate_keys),
		cmocka_unit_test(test_not_json),
		cmocka_unit_test(test_depth),
		cmocka_unit_test(test_output_reset),
		cmocka_unit_test(test_message_utf8),
		cmocka_unit_test(test_content_type),
		cmocka_unit_test(test_query),
		cmocka_unit_test(test_field),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

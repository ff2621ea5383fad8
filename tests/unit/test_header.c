/*
 * header.json: the schema_version gate before anything else, then exact
 * field types with nothing unknown, missing or repeated; and the hash
 * frame built from a parsed header.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "vd_hash.h"
#include "vd_header.h"
#include "vd_limits.h"

/* tests/data/golden-cases/round-00000/header.json, byte for byte. */
static const char golden[] =
	"{\n"
	"  \"schema_version\": 2,\n"
	"  \"content_hash\": \"4d7ed7dee40f9a70cd8c3601c869bcfbbce35ff92723da1ddd4937b6d8fcc753\",\n"
	"  \"parent_hash\": null,\n"
	"  \"wmcp_version\": \"wmcp-1.0.0\",\n"
	"  \"round_index\": 0,\n"
	"  \"config_hash\": \"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\",\n"
	"  \"param_groups\": [\n"
	"    \"encoder\",\n"
	"    \"predictor\"\n"
	"  ],\n"
	"  \"tensor_manifest\": [\n"
	"    {\n"
	"      \"name\": \"encoder.norm.bias\",\n"
	"      \"group\": \"encoder\",\n"
	"      \"dtype\": \"float32\",\n"
	"      \"shape\": [\n"
	"        4\n"
	"      ]\n"
	"    },\n"
	"    {\n"
	"      \"name\": \"encoder.patch_embed.weight\",\n"
	"      \"group\": \"encoder\",\n"
	"      \"dtype\": \"float32\",\n"
	"      \"shape\": [\n"
	"        4,\n"
	"        3\n"
	"      ]\n"
	"    },\n"
	"    {\n"
	"      \"name\": \"predictor.proj.weight\",\n"
	"      \"group\": \"predictor\",\n"
	"      \"dtype\": \"float32\",\n"
	"      \"shape\": [\n"
	"        4,\n"
	"        4\n"
	"      ]\n"
	"    }\n"
	"  ],\n"
	"  \"weight_files\": [\n"
	"    \"weights.safetensors\"\n"
	"  ],\n"
	"  \"created_at\": \"2026-06-02T12:00:00.123456Z\",\n"
	"  \"model_arch\": null\n"
	"}";

#define HASH_A "4d7ed7dee40f9a70cd8c3601c869bcfbbce35ff92723da1ddd4937b6d8fcc753"
#define HASH_B "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* A valid v2 header, one field a line; hdr_make() edits it. */
static const struct {
	const char *name, *raw;
} base[] = {
	{ "schema_version", "2" },
	{ "content_hash", "\"" HASH_A "\"" },
	{ "parent_hash", "null" },
	{ "wmcp_version", "\"wmcp-1.0.0\"" },
	{ "round_index", "0" },
	{ "config_hash", "\"cfg\"" },
	{ "param_groups", "[\"encoder\",\"predictor\"]" },
	{ "tensor_manifest", "[{\"name\":\"encoder.w\",\"group\":\"encoder\","
	  "\"dtype\":\"float32\",\"shape\":[2,2]}]" },
	{ "weight_files", "[\"weights.safetensors\"]" },
	{ "created_at", "\"2026-06-02T12:00:00Z\"" },
	{ "model_arch", "null" },
};

/* Marks a field to leave out. */
static const char DROP[] = "";

/*
 * The base header with edits: name/raw pairs ending with a NULL name. A
 * field of the base takes the raw value in place (DROP removes it); any
 * other name is appended, in the order given, so a pair naming a base
 * field twice appends a duplicate key.
 */
static char *hdr_make(const char *name, ...)
{
	const char *en[16], *er[16];
	int used[16] = { 0 };
	size_t n = 0, i, j;
	int first = 1;
	va_list ap;
	vd_buf b;

	va_start(ap, name);
	for (; name != NULL; name = va_arg(ap, const char *)) {
		assert_true(n < 16);
		en[n] = name;
		er[n++] = va_arg(ap, const char *);
	}
	va_end(ap);

	vd_buf_init(&b);
	vd_buf_puts(&b, "{");
	for (i = 0; i < VD_ARRAY_LEN(base); i++) {
		const char *raw = base[i].raw;
		for (j = 0; j < n; j++) {
			if (!used[j] && strcmp(en[j], base[i].name) == 0) {
				raw = er[j];
				used[j] = 1;
				break;
			}
		}
		if (raw == DROP)
			continue;
		vd_buf_printf(&b, "%s\n\"%s\":%s", first ? "" : ",", base[i].name, raw);
		first = 0;
	}
	for (j = 0; j < n; j++) {
		if (used[j] || er[j] == DROP)
			continue;
		vd_buf_printf(&b, "%s\n\"%s\":%s", first ? "" : ",", en[j], er[j]);
		first = 0;
	}
	vd_buf_puts(&b, "\n}");
	assert_false(b.oom);
	return (char *)b.p;
}

static vd_code parse_str(const char *s, vd_header *h, vd_err *err)
{
	memset(err, 0, sizeof(*err));
	return vd_header_parse((const uint8_t *)s, strlen(s), NULL, h, err);
}

/* Parse s (freed here) and expect code; a failure leaves nothing held. */
static void expect_code(char *s, vd_code code, const char *why)
{
	vd_header h;
	vd_err err;
	vd_code rc = parse_str(s, &h, &err);

	if (rc != code)
		fail_msg("%s: got %s (%s), want %s", s, vd_code_name(rc), err.msg,
		    vd_code_name(code));
	if (code != VD_OK) {
		print_message("%s\n", err.msg);
		assert_int_equal(err.code, code);
		assert_true(err.msg[0] != '\0');
		if (why != NULL && strstr(err.msg, why) == NULL)
			fail_msg("message \"%s\" lacks \"%s\"", err.msg, why);
		assert_null(h.doc.root);
		assert_null(h.param_groups);
	} else {
		vd_header_free(&h);
	}
	free(s);
}

static char *xstrdup(const char *s)
{
	char *d = strdup(s);

	assert_non_null(d);
	return d;
}

static void test_golden(void **state)
{
	vd_header h;
	vd_err err;

	(void)state;
	assert_int_equal(parse_str(golden, &h, &err), VD_OK);
	assert_int_equal(h.schema_version, 2);
	assert_int_equal(h.migrated_to, 2);
	assert_true(vd_str_eq(h.content_hash, HASH_A));
	assert_int_equal(h.has_parent, 0);
	assert_true(vd_str_eq(h.wmcp_version, "wmcp-1.0.0"));
	assert_int_equal(h.round_index, 0);
	assert_true(vd_str_eq(h.config_hash,
	    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"));
	assert_int_equal(h.n_param_groups, 2);
	assert_true(vd_str_eq(h.param_groups[0], "encoder"));
	assert_true(vd_str_eq(h.param_groups[1], "predictor"));
	assert_int_equal(h.n_manifest, 3);
	assert_true(vd_str_eq(h.manifest[0].name, "encoder.norm.bias"));
	assert_true(vd_str_eq(h.manifest[0].group, "encoder"));
	assert_true(vd_str_eq(h.manifest[0].dtype, "float32"));
	assert_int_equal(h.manifest[0].rank, 1);
	assert_int_equal(h.manifest[0].shape[0], 4);
	assert_true(vd_str_eq(h.manifest[1].name, "encoder.patch_embed.weight"));
	assert_int_equal(h.manifest[1].rank, 2);
	assert_int_equal(h.manifest[1].shape[0], 4);
	assert_int_equal(h.manifest[1].shape[1], 3);
	assert_true(vd_str_eq(h.manifest[2].name, "predictor.proj.weight"));
	assert_true(vd_str_eq(h.manifest[2].group, "predictor"));
	assert_int_equal(h.n_weight_files, 1);
	assert_true(vd_str_eq(h.weight_files[0], "weights.safetensors"));
	assert_true(vd_str_eq(h.created_at, "2026-06-02T12:00:00.123456Z"));
	assert_null(h.model_arch);
	vd_header_free(&h);
	assert_null(h.doc.root);
}

static void expect_frame(const vd_header *h, const char *want, size_t want_len)
{
	vd_buf b;

	vd_buf_init(&b);
	assert_int_equal(vd_hash_frame(&b, h), 0);
	if (b.len != want_len || memcmp(b.p, want, want_len) != 0)
		fail_msg("frame %.*s, want %.*s", (int)b.len, (const char *)b.p,
		    (int)want_len, want);
	vd_buf_free(&b);
}

static void test_frame_golden(void **state)
{
	static const char want[] =
	    "{\"param_groups\":[\"encoder\",\"predictor\"],\"parent_hash\":\"\","
	    "\"round_index\":0,\"schema_version\":2,\"wmcp_version\":\"wmcp-1.0.0\"}";
	vd_header h;
	vd_err err;

	(void)state;
	assert_int_equal(parse_str(golden, &h, &err), VD_OK);
	expect_frame(&h, want, sizeof(want) - 1);
	vd_header_free(&h);
}

static void test_frame_unsorted_non_ascii(void **state)
{
	/* Printed by Python: json.dumps({"param_groups": sorted(groups),
	 * "parent_hash": ..., "round_index": 7, "schema_version": 1,
	 * "wmcp_version": ...}, sort_keys=True, separators=(",", ":")). */
	static const char want[] =
	    "{\"param_groups\":[\"Zeta\",\"a b\",\"encoder\",\"predictor\","
	    "\"\\u00e9t\\u00e9\",\"\\ud83d\\ude00\"],\"parent_hash\":\"" HASH_B "\","
	    "\"round_index\":7,\"schema_version\":1,"
	    "\"wmcp_version\":\"wmcp-\\u00fc-\\ud83d\\ude00-\\\"q\\\"\\\\\\n\\u007f\"}";
	char *s = hdr_make(
	    "schema_version", "1",
	    "model_arch", DROP,
	    "parent_hash", "\"" HASH_B "\"",
	    "round_index", "7",
	    /* Raw UTF-8 and escapes alike: the frame sees decoded strings. */
	    "param_groups", "[\"predictor\",\"encoder\",\"Zeta\",\"\xc3\xa9t\\u00e9\","
	    "\"\\ud83d\\ude00\",\"a b\"]",
	    "wmcp_version", "\"wmcp-\xc3\xbc-\xf0\x9f\x98\x80-\\\"q\\\"\\\\\\n\\u007f\"",
	    (const char *)NULL);
	vd_header h;
	vd_err err;

	(void)state;
	assert_int_equal(parse_str(s, &h, &err), VD_OK);
	expect_frame(&h, want, sizeof(want) - 1);
	/* The header keeps its own order. */
	assert_true(vd_str_eq(h.param_groups[0], "predictor"));
	assert_true(vd_str_eq(h.param_groups[1], "encoder"));
	assert_true(vd_str_eq(h.param_groups[5], "a b"));
	assert_int_equal(h.has_parent, 1);
	assert_true(vd_str_eq(h.parent_hash, HASH_B));
	assert_int_equal(h.schema_version, 1);
	assert_int_equal(h.migrated_to, 2);
	vd_header_free(&h);
	free(s);
}

static void test_frame_empty_groups(void **state)
{
	static const char want[] =
	    "{\"param_groups\":[],\"parent_hash\":\"\",\"round_index\":3,"
	    "\"schema_version\":2,\"wmcp_version\":\"\"}";
	char *s = hdr_make("param_groups", "[]", "round_index", "3",
	    "wmcp_version", "\"\"", (const char *)NULL);
	vd_header h;
	vd_err err;

	(void)state;
	assert_int_equal(parse_str(s, &h, &err), VD_OK);
	expect_frame(&h, want, sizeof(want) - 1);
	vd_header_free(&h);
	free(s);
}

static void test_base_valid(void **state)
{
	(void)state;
	/* The builder's own output must be valid, or every refusal below
	 * proves nothing. */
	expect_code(hdr_make((const char *)NULL), VD_OK, NULL);
	expect_code(xstrdup(golden), VD_OK, NULL);
}

static void test_schema_gate(void **state)
{
	static const char *const bad[] = {
		"true", "false", "null", "\"2\"", "2.0", "2e0", "0", "-1", "3", "999",
		"-9223372036854775808", "9223372036854775808", "18446744073709551616",
		"[2]", "{\"v\":2}",
	};
	size_t i;

	(void)state;
	for (i = 0; i < VD_ARRAY_LEN(bad); i++) {
		/* Alone, and with other fields broken: the gate decides first. */
		expect_code(hdr_make("schema_version", bad[i], (const char *)NULL),
		    VD_SCHEMA_VERSION_MISMATCH, "schema_version");
		expect_code(hdr_make("schema_version", bad[i], "round_index", "-1",
		    "content_hash", "1", "bogus", "1", "model_arch", "7",
		    "weight_files", DROP, (const char *)NULL),
		    VD_SCHEMA_VERSION_MISMATCH, "schema_version");
	}
	expect_code(hdr_make("schema_version", DROP, (const char *)NULL),
	    VD_SCHEMA_VERSION_MISMATCH, "no schema_version");
	expect_code(hdr_make("schema_version", DROP, "bogus", "1",
	    "round_index", "true", (const char *)NULL),
	    VD_SCHEMA_VERSION_MISMATCH, "no schema_version");
	/* The gate does not depend on where the field sits. */
	expect_code(xstrdup("{\"bogus\":1,\"round_index\":-1,\"schema_version\":3}"),
	    VD_SCHEMA_VERSION_MISMATCH, NULL);
	expect_code(xstrdup("{\"bogus\":1,\"round_index\":-1,\"schema_version\":true}"),
	    VD_SCHEMA_VERSION_MISMATCH, NULL);
	expect_code(xstrdup("{\"bogus\":1}"), VD_SCHEMA_VERSION_MISMATCH, NULL);
	expect_code(xstrdup("{}"), VD_SCHEMA_VERSION_MISMATCH, NULL);
	/* Keys are exact. */
	expect_code(hdr_make("schema_version", DROP, "Schema_version", "2",
	    (const char *)NULL), VD_SCHEMA_VERSION_MISMATCH, NULL);
}

static void test_versions(void **state)
{
	vd_header h;
	vd_err err;
	char *s;

	(void)state;
	/* v1 has no model_arch, not even null. */
	expect_code(hdr_make("schema_version", "1", (const char *)NULL),
	    VD_ARTIFACT_INVALID, "model_arch");
	expect_code(hdr_make("schema_version", "1", "model_arch", "{}", (const char *)NULL),
	    VD_ARTIFACT_INVALID, "model_arch");

	s = hdr_make("schema_version", "1", "model_arch", DROP, (const char *)NULL);
	assert_int_equal(parse_str(s, &h, &err), VD_OK);
	assert_int_equal(h.schema_version, 1);
	assert_int_equal(h.migrated_to, 2);
	assert_null(h.model_arch);
	vd_header_free(&h);
	free(s);

	/* v2: model_arch is optional, an object or null. */
	s = hdr_make("model_arch", "{\"layers\":12,\"heads\":[1.5,null],\"x\":{}}",
	    (const char *)NULL);
	assert_int_equal(parse_str(s, &h, &err), VD_OK);
	assert_int_equal(h.migrated_to, 2);
	assert_non_null(h.model_arch);
	assert_int_equal(h.model_arch->type, VD_JOBJ);
	assert_int_equal(h.model_arch->count, 3);
	vd_header_free(&h);
	free(s);

	s = hdr_make("model_arch", DROP, (const char *)NULL);
	assert_int_equal(parse_str(s, &h, &err), VD_OK);
	assert_null(h.model_arch);
	vd_header_free(&h);
	free(s);

	expect_code(hdr_make("model_arch", "{}", (const char *)NULL), VD_OK, NULL);
	expect_code(hdr_make("model_arch", "\"vit\"", (const char *)NULL),
	    VD_ARTIFACT_INVALID, "model_arch");
	expect_code(hdr_make("model_arch", "[]", (const char *)NULL),
	    VD_ARTIFACT_INVALID, "model_arch");
	expect_code(hdr_make("model_arch", "0", (const char *)NULL),
	    VD_ARTIFACT_INVALID, "model_arch");
	expect_code(hdr_make("model_arch", "false", (const char *)NULL),
	    VD_ARTIFACT_INVALID, "model_arch");
}

static void test_unknown_and_missing(void **state)
{
	size_t i;

	(void)state;
	expect_code(hdr_make("extra", "1", (const char *)NULL), VD_ARTIFACT_INVALID,
	    "unknown field \"extra\"");
	expect_code(hdr_make("extra", "null", (const char *)NULL), VD_ARTIFACT_INVALID,
	    "unknown field");
	expect_code(hdr_make("Round_index", "0", (const char *)NULL), VD_ARTIFACT_INVALID,
	    "unknown field");
	expect_code(hdr_make("round_index\\u0000", "0", (const char *)NULL),
	    VD_ARTIFACT_INVALID, "unknown field");
	expect_code(hdr_make("", "0", (const char *)NULL), VD_ARTIFACT_INVALID,
	    "unknown field");

	for (i = 1; i < VD_ARRAY_LEN(base); i++) {
		if (strcmp(base[i].name, "model_arch") == 0)
			continue;
		print_message("without %s\n", base[i].name);
		expect_code(hdr_make(base[i].name, DROP, (const char *)NULL),
		    VD_ARTIFACT_INVALID, base[i].name);
	}
}

static void test_wrong_types(void **state)
{
	static const struct {
		const char *field, *raw;
	} bad[] = {
		{ "round_index", "true" },
		{ "round_index", "-1" },
		{ "round_index", "1.0" },
		{ "round_index", "0e0" },
		{ "round_index", "\"0\"" },
		{ "round_index", "null" },
		{ "round_index", "9223372036854775808" },
		{ "round_index", "18446744073709551616" },
		{ "round_index", "-9223372036854775808" },
		{ "content_hash", "\"4D7ED7DEE40F9A70CD8C3601C869BCFBBCE35FF92723DA1DDD4937B6D8FCC753\"" },
		{ "content_hash", "\"4d7ed7dee40f9a70cd8c3601c869bcfbbce35ff92723da1ddd4937b6d8fcc75\"" },
		{ "content_hash", "\"4d7ed7dee40f9a70cd8c3601c869bcfbbce35ff92723da1ddd4937b6d8fcc7530\"" },
		{ "content_hash", "\"4d7ed7dee40f9a70cd8c3601c869bcfbbce35ff92723da1ddd4937b6d8fcc75g\"" },
		{ "content_hash", "\" 4d7ed7dee40f9a70cd8c3601c869bcfbbce35ff92723da1ddd4937b6d8fcc75\"" },
		{ "content_hash", "null" },
		{ "content_hash", "\"\"" },
		{ "content_hash", "1" },
		{ "parent_hash", "\"0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\"" },
		{ "parent_hash", "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\"" },
		{ "parent_hash", "\"\"" },
		{ "parent_hash", "false" },
		{ "parent_hash", "0" },
		{ "parent_hash", "[]" },
		{ "wmcp_version", "1" },
		{ "wmcp_version", "null" },
		{ "wmcp_version", "[\"wmcp-1.0.0\"]" },
		{ "config_hash", "null" },
		{ "config_hash", "1" },
		{ "config_hash", "{}" },
		{ "param_groups", "\"encoder\"" },
		{ "param_groups", "null" },
		{ "param_groups", "{}" },
		{ "param_groups", "[1]" },
		{ "param_groups", "[\"encoder\",null]" },
		{ "param_groups", "[[\"encoder\"]]" },
		{ "tensor_manifest", "{}" },
		{ "tensor_manifest", "null" },
		{ "tensor_manifest", "\"x\"" },
		{ "weight_files", "\"weights.safetensors\"" },
		{ "weight_files", "null" },
		{ "weight_files", "[1]" },
		{ "weight_files", "[\"weights.safetensors\",false]" },
		{ "created_at", "0" },
		{ "created_at", "null" },
		{ "created_at", "1780401600" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < VD_ARRAY_LEN(bad); i++) {
		print_message("%s = %s\n", bad[i].field, bad[i].raw);
		expect_code(hdr_make(bad[i].field, bad[i].raw, (const char *)NULL),
		    VD_ARTIFACT_INVALID, NULL);
	}
}

static void test_good_values(void **state)
{
	vd_header h;
	vd_err err;
	char *s;

	(void)state;
	s = hdr_make("parent_hash", "\"" HASH_B "\"", "round_index", "9223372036854775807",
	    "config_hash", "\"\"", "wmcp_version", "\"\\u0000\"", "param_groups", "[]",
	    "tensor_manifest", "[]", (const char *)NULL);
	assert_int_equal(parse_str(s, &h, &err), VD_OK);
	assert_int_equal(h.has_parent, 1);
	assert_true(vd_str_eq(h.parent_hash, HASH_B));
	assert_true(h.round_index == INT64_MAX);
	assert_int_equal(h.config_hash.len, 0);
	assert_int_equal(h.wmcp_version.len, 1);
	assert_int_equal(h.n_param_groups, 0);
	assert_int_equal(h.n_manifest, 0);
	vd_header_free(&h);
	free(s);

	/* round_index > 0 with a null parent parses: the chain judges it. */
	s = hdr_make("round_index", "5", (const char *)NULL);
	assert_int_equal(parse_str(s, &h, &err), VD_OK);
	assert_int_equal(h.round_index, 5);
	assert_int_equal(h.has_parent, 0);
	vd_header_free(&h);
	free(s);

	/* Field order is free. */
	expect_code(xstrdup("{\"model_arch\":null,\"created_at\":\"2026-06-02T12:00:00Z\","
	    "\"weight_files\":[\"w\"],\"tensor_manifest\":[],\"param_groups\":[],"
	    "\"config_hash\":\"\",\"round_index\":1,\"wmcp_version\":\"\","
	    "\"parent_hash\":null,\"content_hash\":\"" HASH_A "\",\"schema_version\":2}"),
	    VD_OK, NULL);
}

static void test_duplicates_and_bytes(void **state)
{
	(void)state;
	expect_code(hdr_make("round_index", "0", "round_index", "0", (const char *)NULL),
	    VD_ARTIFACT_INVALID, "duplicate");
	expect_code(hdr_make("schema_version", "2", "schema_version", "2", (const char *)NULL),
	    VD_ARTIFACT_INVALID, "duplicate");
	expect_code(hdr_make("model_arch", "{\"a\":1,\"a\":2}", (const char *)NULL),
	    VD_ARTIFACT_INVALID, "duplicate");
	expect_code(hdr_make("tensor_manifest", "[{\"name\":\"encoder.w\",\"name\":\"encoder.v\","
	    "\"group\":\"encoder\",\"dtype\":\"float32\",\"shape\":[2,2]}]", (const char *)NULL),
	    VD_ARTIFACT_INVALID, "duplicate");

	/* Not UTF-8, inside a string or out of one. */
	expect_code(hdr_make("wmcp_version", "\"wmcp-\xff\"", (const char *)NULL),
	    VD_ARTIFACT_INVALID, "UTF-8");
	expect_code(hdr_make("wmcp_version", "\"\xc0\xae\"", (const char *)NULL),
	    VD_ARTIFACT_INVALID, "UTF-8");
	expect_code(hdr_make("wmcp_version", "\"\xed\xa0\x80\"", (const char *)NULL),
	    VD_ARTIFACT_INVALID, "UTF-8");
	expect_code(hdr_make("config_hash", "\"\xe9t\xe9\"", (const char *)NULL),
	    VD_ARTIFACT_INVALID, "UTF-8");
	expect_code(hdr_make("extra\xfe", "1", (const char *)NULL),
	    VD_ARTIFACT_INVALID, "UTF-8");
	expect_code(hdr_make("wmcp_version", "\"\\udc00\"", (const char *)NULL),
	    VD_ARTIFACT_INVALID, "surrogate");

	/* Not a JSON object. */
	expect_code(xstrdup("[]"), VD_ARTIFACT_INVALID, "not an object");
	expect_code(xstrdup("[{\"schema_version\":2}]"), VD_ARTIFACT_INVALID, "not an object");
	expect_code(xstrdup("\"header\""), VD_ARTIFACT_INVALID, "not an object");
	expect_code(xstrdup("2"), VD_ARTIFACT_INVALID, "not an object");
	expect_code(xstrdup("null"), VD_ARTIFACT_INVALID, "not an object");
	expect_code(xstrdup(""), VD_ARTIFACT_INVALID, "not valid JSON");
	expect_code(xstrdup("schema_version: 2"), VD_ARTIFACT_INVALID, "not valid JSON");
	expect_code(xstrdup("{\"schema_version\":2,}"), VD_ARTIFACT_INVALID, "not valid JSON");
	expect_code(xstrdup("{\"schema_version\":NaN}"), VD_ARTIFACT_INVALID, "not valid JSON");
	expect_code(xstrdup("{\"schema_version\":2} {}"), VD_ARTIFACT_INVALID, "not valid JSON");
	expect_code(xstrdup("\xef\xbb\xbf{}"), VD_ARTIFACT_INVALID, "not valid JSON");
}

static void test_nul_byte_input(void **state)
{
	/* A raw NUL ends nothing: the length given is the document. */
	static const char s[] = "{\"schema_version\":2}\0garbage";
	vd_header h;
	vd_err err;

	(void)state;
	memset(&err, 0, sizeof(err));
	assert_int_equal(vd_header_parse((const uint8_t *)s, sizeof(s) - 1, NULL, &h, &err),
	    VD_ARTIFACT_INVALID);
}

static void test_weight_files(void **state)
{
	static const char *const bad[] = {
		"[]",
		"[\"a/b\"]",
		"[\"/weights.safetensors\"]",
		"[\"weights.safetensors/\"]",
		"[\"../weights.safetensors\"]",
		"[\"..\"]",
		"[\".\"]",
		"[\"\"]",
		"[\"weights\\u0000.safetensors\"]",
		"[\"\\u0000\"]",
		"[\"weights.safetensors\",\"weights.safetensors\"]",
		"[\"a\",\"b\",\"a\"]",
		"[\"weights\\/x\"]",
	};
	static const char *const good[] = {
		"[\"weights.safetensors\"]",
		("[\"weights-00000-of-00003.safetensors\",\"weights-00001-of-00003.safetensors\","
		 "\"weights-00002-of-00003.safetensors\"]"),
		"[\"...\"]",
		"[\".hidden\"]",
		"[\"a\",\"A\"]",
		"[\"a\\\\b\"]",
		"[\"w\\u00e9ights\"]",
	};
	vd_header h;
	vd_err err;
	size_t i;
	char *s;

	(void)state;
	for (i = 0; i < VD_ARRAY_LEN(bad); i++) {
		print_message("weight_files %s\n", bad[i]);
		expect_code(hdr_make("weight_files", bad[i], (const char *)NULL),
		    VD_ARTIFACT_INVALID, "weight");
	}
	for (i = 0; i < VD_ARRAY_LEN(good); i++)
		expect_code(hdr_make("weight_files", good[i], (const char *)NULL), VD_OK, NULL);

	s = hdr_make("weight_files", good[1], (const char *)NULL);
	assert_int_equal(parse_str(s, &h, &err), VD_OK);
	assert_int_equal(h.n_weight_files, 3);
	assert_true(vd_str_eq(h.weight_files[2], "weights-00002-of-00003.safetensors"));
	vd_header_free(&h);
	free(s);
}

static void test_created_at(void **state)
{
	static const char *const good[] = {
		"2026-06-02T12:00:00Z",
		"2026-06-02T12:00:00.123456Z",
		"2026-06-02T12:00:00.1Z",
		"2026-06-02T12:00:00+00:00",
		"2026-06-02T12:00:00.999999999+00:00",
		"2026-06-02t12:00:00z",
		"2016-12-31T23:59:60Z",
		"0001-01-01T00:00:00Z",
		"9999-12-31T23:59:59Z",
		"2024-02-29T00:00:00Z",
	};
	static const char *const bad[] = {
		"",
		"2026-06-02T12:00:00+01:00",
		"2026-06-02T12:00:00-05:00",
		"2026-06-02T12:00:00-00:00",
		"2026-06-02T12:00:00+00",
		"2026-06-02T12:00:00+0000",
		"2026-06-02T12:00Z",
		"2026-06-02T12:00:00",
		"2026-06-02",
		"2026-13-02T12:00:00Z",
		"2026-00-02T12:00:00Z",
		"2026-06-00T12:00:00Z",
		"2026-06-32T12:00:00Z",
		"2026-06-02T24:00:00Z",
		"2026-06-02T12:60:00Z",
		"2026-06-02T12:00:61Z",
		"2026-06-02T12:00:00.Z",
		"2026-06-02T12:00:00ZZ",
		"2026-06-02T12:00:00Z ",
		" 2026-06-02T12:00:00Z",
		"2026-06-02 12:00:00Z",
		"2026-6-2T12:00:00Z",
		"26-06-02T12:00:00Z",
		"2026/06/02T12:00:00Z",
		"2026-06-02T12.00.00Z",
		"+2026-06-02T12:00:00Z",
		"2026-06-02T12:00:00,5Z",
		"2026-06-02T12:00:00.5",
		"2026-06-02T1a:00:00Z",
		"2026-06-02T12:00:00\\u0000Z",
	};
	size_t i;
	char raw[128];

	(void)state;
	for (i = 0; i < VD_ARRAY_LEN(good); i++) {
		vd_str s = { good[i], strlen(good[i]) };
		if (!vd_rfc3339_utc(s))
			fail_msg("refused %s", good[i]);
		snprintf(raw, sizeof(raw), "\"%s\"", good[i]);
		expect_code(hdr_make("created_at", raw, (const char *)NULL), VD_OK, NULL);
	}
	for (i = 0; i < VD_ARRAY_LEN(bad); i++) {
		vd_str s = { bad[i], strlen(bad[i]) };
		if (strchr(bad[i], '\\') == NULL && vd_rfc3339_utc(s))
			fail_msg("accepted %s", bad[i]);
		snprintf(raw, sizeof(raw), "\"%s\"", bad[i]);
		expect_code(hdr_make("created_at", raw, (const char *)NULL),
		    VD_ARTIFACT_INVALID, "created_at");
	}
}

static void test_created_at_calendar(void **state)
{
	/* RFC 3339 5.7: the day must exist in its month and year. */
	static const char *const bad[] = {
		"2026-02-30T12:00:00Z",
		"2026-02-31T12:00:00Z",
		"2025-02-29T12:00:00Z",
		"1900-02-29T12:00:00Z",
		"2026-04-31T12:00:00Z",
		"2026-06-31T12:00:00Z",
		"2026-09-31T12:00:00Z",
		"2026-11-31T12:00:00Z",
	};
	static const char *const good[] = {
		"2000-02-29T12:00:00Z",
		"2026-01-31T12:00:00Z",
		"2026-12-31T12:00:00Z",
		"2026-04-30T12:00:00Z",
	};
	size_t i;

	(void)state;
	for (i = 0; i < VD_ARRAY_LEN(good); i++) {
		vd_str s = { good[i], strlen(good[i]) };
		if (!vd_rfc3339_utc(s))
			fail_msg("refused %s", good[i]);
	}
	for (i = 0; i < VD_ARRAY_LEN(bad); i++) {
		vd_str s = { bad[i], strlen(bad[i]) };
		if (vd_rfc3339_utc(s))
			fail_msg("accepted %s, a day its month does not have", bad[i]);
	}
}

static void test_rfc3339_bounds(void **state)
{
	/* The length, not a NUL, ends the string: a valid prefix is not enough. */
	static const char s[] = "2026-06-02T12:00:00Z+00:00";
	vd_str v;

	(void)state;
	v.p = s;
	v.len = 20;
	assert_int_equal(vd_rfc3339_utc(v), 1);
	v.len = 19;
	assert_int_equal(vd_rfc3339_utc(v), 0);
	v.len = sizeof(s) - 1;
	assert_int_equal(vd_rfc3339_utc(v), 0);
	v.len = 0;
	assert_int_equal(vd_rfc3339_utc(v), 0);
}

static void test_plain_filename(void **state)
{
	static const struct {
		const char *s;
		size_t len;
		int ok;
	} cases[] = {
		{ "weights.safetensors", 19, 1 },
		{ "a", 1, 1 },
		{ "...", 3, 1 },
		{ ".hidden", 7, 1 },
		{ "a b", 3, 1 },
		{ "a\\b", 3, 1 },
		{ "\xc3\xa9", 2, 1 },
		{ "", 0, 0 },
		{ ".", 1, 0 },
		{ "..", 2, 0 },
		{ "/", 1, 0 },
		{ "a/b", 3, 0 },
		{ "/a", 2, 0 },
		{ "a/", 2, 0 },
		{ "../a", 4, 0 },
		{ "a\0b", 3, 0 },
		{ "\0", 1, 0 },
		{ "a\0", 2, 0 },
		{ ".\0", 2, 0 },
	};
	size_t i;

	(void)state;
	for (i = 0; i < VD_ARRAY_LEN(cases); i++) {
		vd_str s = { cases[i].s, cases[i].len };
		if (vd_plain_filename(s) != cases[i].ok)
			fail_msg("case %zu: expected %d", i, cases[i].ok);
	}
}

static void test_manifest(void **state)
{
	static const char *const bad[] = {
		"[{\"name\":\"encoder.w\",\"group\":\"encoder\",\"dtype\":\"float32\",\"shape\":[2],\"offset\":0}]",
		"[{\"name\":\"encoder.w\",\"group\":\"encoder\",\"dtype\":\"float32\",\"shape\":[2],\"Name\":\"x\"}]",
		"[{\"group\":\"encoder\",\"dtype\":\"float32\",\"shape\":[2]}]",
		"[{\"name\":\"encoder.w\",\"dtype\":\"float32\",\"shape\":[2]}]",
		"[{\"name\":\"encoder.w\",\"group\":\"encoder\",\"shape\":[2]}]",
		"[{\"name\":\"encoder.w\",\"group\":\"encoder\",\"dtype\":\"float32\"}]",
		"[{}]",
		"[{\"name\":1,\"group\":\"encoder\",\"dtype\":\"float32\",\"shape\":[2]}]",
		"[{\"name\":\"encoder.w\",\"group\":null,\"dtype\":\"float32\",\"shape\":[2]}]",
		"[{\"name\":\"encoder.w\",\"group\":\"encoder\",\"dtype\":32,\"shape\":[2]}]",
		"[{\"name\":\"encoder.w\",\"group\":\"encoder\",\"dtype\":\"float32\",\"shape\":[-1]}]",
		"[{\"name\":\"encoder.w\",\"group\":\"encoder\",\"dtype\":\"float32\",\"shape\":[2.0]}]",
		"[{\"name\":\"encoder.w\",\"group\":\"encoder\",\"dtype\":\"float32\",\"shape\":[\"2\"]}]",
		"[{\"name\":\"encoder.w\",\"group\":\"encoder\",\"dtype\":\"float32\",\"shape\":[true]}]",
		"[{\"name\":\"encoder.w\",\"group\":\"encoder\",\"dtype\":\"float32\",\"shape\":[[2]]}]",
		"[{\"name\":\"encoder.w\",\"group\":\"encoder\",\"dtype\":\"float32\",\"shape\":[null]}]",
		"[{\"name\":\"encoder.w\",\"group\":\"encoder\",\"dtype\":\"float32\",\"shape\":[18446744073709551616]}]",
		"[{\"name\":\"encoder.w\",\"group\":\"encoder\",\"dtype\":\"float32\",\"shape\":2}]",
		"[{\"name\":\"encoder.w\",\"group\":\"encoder\",\"dtype\":\"float32\",\"shape\":null}]",
		"[{\"name\":\"encoder.w\",\"group\":\"encoder\",\"dtype\":\"float32\",\"shape\":{}}]",
		"[\"encoder.w\"]",
		"[null]",
		"[[\"encoder.w\",\"encoder\",\"float32\",[2]]]",
		"[{\"name\":\"encoder.a\",\"group\":\"encoder\",\"dtype\":\"float32\",\"shape\":[1]},1]",
	};
	vd_header h;
	vd_err err;
	size_t i;
	char *s;

	(void)state;
	for (i = 0; i < VD_ARRAY_LEN(bad); i++) {
		print_message("tensor_manifest %s\n", bad[i]);
		expect_code(hdr_make("tensor_manifest", bad[i], (const char *)NULL),
		    VD_ARTIFACT_INVALID, "manifest");
	}

	/* Rank 0, a zero dimension, and the largest dimension a u64 holds. */
	s = hdr_make("tensor_manifest",
	    "[{\"shape\":[],\"dtype\":\"float32\",\"group\":\"encoder\",\"name\":\"encoder.s\"},"
	    "{\"name\":\"encoder.e\",\"group\":\"encoder\",\"dtype\":\"bfloat16\",\"shape\":[0,3]},"
	    "{\"name\":\"x\",\"group\":\"\",\"dtype\":\"\",\"shape\":[18446744073709551615]}]",
	    (const char *)NULL);
	assert_int_equal(parse_str(s, &h, &err), VD_OK);
	assert_int_equal(h.n_manifest, 3);
	assert_true(vd_str_eq(h.manifest[0].name, "encoder.s"));
	assert_int_equal(h.manifest[0].rank, 0);
	assert_true(vd_str_eq(h.manifest[1].dtype, "bfloat16"));
	assert_int_equal(h.manifest[1].rank, 2);
	assert_int_equal(h.manifest[1].shape[0], 0);
	assert_int_equal(h.manifest[1].shape[1], 3);
	assert_true(h.manifest[2].shape[0] == UINT64_MAX);
	vd_header_free(&h);
	free(s);
}

/* A tensor_manifest of n entries, as a JSON array: the caller frees it. */
static char *manifest_of(size_t n)
{
	vd_buf b;
	size_t i;

	vd_buf_init(&b);
	vd_buf_puts(&b, "[");
	for (i = 0; i < n; i++)
		vd_buf_printf(&b, "%s{\"name\":\"encoder.t%06zu\",\"group\":\"encoder\","
		    "\"dtype\":\"float32\",\"shape\":[0]}", i ? "," : "", i);
	vd_buf_puts(&b, "]");
	assert_false(b.oom);
	return (char *)b.p;
}

static vd_code parse_within(const char *s, const vd_parse_bounds *b, vd_header *h,
    vd_err *err)
{
	memset(err, 0, sizeof(*err));
	return vd_header_parse((const uint8_t *)s, strlen(s), b, h, err);
}

/* The manifest lists one entry per tensor: at max_tensors it parses, one
 * more is refused naming the bound, counted as the JSON is read. */
static void test_bound_manifest(void **state)
{
	char *m = manifest_of(5), *s = hdr_make("tensor_manifest", m, NULL);
	vd_budget budget;
	vd_parse_bounds b = { 5, 0, &budget };
	vd_header h;
	vd_err err;

	(void)state;
	vd_budget_init(&budget, 0);
	assert_int_equal(parse_within(s, &b, &h, &err), VD_OK);
	assert_int_equal(h.n_manifest, 5);
	vd_header_free(&h);
	b.max_tensors = 4;
	assert_int_equal(parse_within(s, &b, &h, &err), VD_ARTIFACT_INVALID);
	assert_string_equal(err.msg, "header.json declares more than 4 tensors (max_tensors)");
	assert_int_equal(budget.used, 0);
	/* Other arrays are not tensors: a long param_groups is not counted. */
	free(s);
	s = hdr_make("param_groups", "[\"encoder\",\"a\",\"b\",\"c\",\"d\",\"e\",\"f\"]", NULL);
	b.max_tensors = 1;
	assert_int_equal(parse_within(s, &b, &h, &err), VD_OK);
	vd_header_free(&h);
	free(s);
	free(m);

	/* Far over the bound: refused within the arena's first chunk. */
	m = manifest_of(100000);
	s = hdr_make("tensor_manifest", m, NULL);
	b.max_tensors = 10;
	assert_int_equal(parse_within(s, &b, &h, &err), VD_ARTIFACT_INVALID);
	assert_non_null(strstr(err.msg, "(max_tensors)"));
	assert_true(budget.peak <= 65 * 1024);
	assert_int_equal(budget.used, 0);
	free(s);
	free(m);
}

/* header.json's document, manifest and shapes are charged to the budget:
 * short of what it needs the header is refused naming max_job_memory. */
static void test_bound_memory(void **state)
{
	char *m = manifest_of(3000), *s = hdr_make("tensor_manifest", m, NULL);
	vd_budget budget;
	vd_parse_bounds b = { 0, 0, &budget };
	vd_header h;
	vd_err err;
	size_t peak, limit;
	char want[128];

	(void)state;
	vd_budget_init(&budget, 0);
	assert_int_equal(parse_within(s, &b, &h, &err), VD_OK);
	peak = budget.peak;
	assert_true(h.doc.arena.used_total >= 3000 * (sizeof(vd_manifest_entry) + sizeof(vd_jval)));
	assert_true(budget.used >= h.doc.arena.used_total);
	vd_header_free(&h);
	assert_int_equal(budget.used, 0);
	for (limit = 2048; limit < peak; limit += (peak - 2048) / 5) {
		vd_budget_init(&budget, limit);
		assert_int_equal(parse_within(s, &b, &h, &err), VD_ARTIFACT_INVALID);
		snprintf(want, sizeof(want),
		    "header.json needs more than %zu bytes to parse (max_job_memory)", limit);
		assert_string_equal(err.msg, want);
		assert_true(budget.peak <= limit);
		assert_int_equal(budget.used, 0);
		/* The refusal is no schema verdict: nothing of the header kept. */
		assert_int_equal(h.n_manifest, 0);
	}
	vd_budget_init(&budget, peak);
	assert_int_equal(parse_within(s, &b, &h, &err), VD_OK);
	assert_int_equal(h.n_manifest, 3000);
	vd_header_free(&h);
	free(s);
	free(m);
}

/* The golden header parses within the default bounds as without them,
 * and gives back what it charged. */
static void test_bound_defaults_golden(void **state)
{
	vd_budget budget;
	vd_parse_bounds b = { VD_MAX_TENSORS_DEFAULT, 0, &budget };
	vd_header h;
	vd_err err;

	(void)state;
	vd_budget_init(&budget, VD_MAX_JOB_MEMORY_DEFAULT);
	assert_int_equal(parse_within(golden, &b, &h, &err), VD_OK);
	assert_int_equal(h.n_manifest, 3);
	assert_string_equal(h.manifest[1].name.p, "encoder.patch_embed.weight");
	assert_true(budget.used > 0);
	vd_header_free(&h);
	assert_int_equal(budget.used, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden),
		cmocka_unit_test(test_frame_golden),
		cmocka_unit_test(test_frame_unsorted_non_ascii),
		cmocka_unit_test(test_frame_empty_groups),
		cmocka_unit_test(test_base_valid),
		cmocka_unit_test(test_schema_gate),
		cmocka_unit_test(test_versions),
		cmocka_unit_test(test_unknown_and_missing),
		cmocka_unit_test(test_wrong_types),
		cmocka_unit_test(test_good_values),
		cmocka_unit_test(test_duplicates_and_bytes),
		cmocka_unit_test(test_nul_byte_input),
		cmocka_unit_test(test_weight_files),
		cmocka_unit_test(test_created_at),
		cmocka_unit_test(test_created_at_calendar),
		cmocka_unit_test(test_rfc3339_bounds),
		cmocka_unit_test(test_plain_filename),
		cmocka_unit_test(test_manifest),
		cmocka_unit_test(test_bound_manifest),
		cmocka_unit_test(test_bound_memory),
		cmocka_unit_test(test_bound_defaults_golden),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

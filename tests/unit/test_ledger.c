/*
 * ledger.jsonl: the record parser (strict fields, and the record hash over
 * compact sorted raw-UTF-8 JSON) and the chain verifier (first break,
 * trusted counts). The records are tests/data/store-basic/ledger.jsonl;
 * every hash was computed with Python as
 * sha256(b"lensemble/provenance/ledger-record/v1\0" + json.dumps(rec,
 * sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).
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

#include "vd_ledger.h"
#include "vd_util.h"

#define ROOTS "{\"site-a\":\"1111111111111111111111111111111111111111111111111111111111111111\"," \
	"\"site-b\":\"2222222222222222222222222222222222222222222222222222222222222222\"}"
#define GMH1 "24a5fd1e9f42479a360fd5e561017e25a773df29262f1201407fb5b368744915"
#define GMH2 "c3eaa23b9433b29ff174122f7aafdeff518f944e32c6123f2d83340ebb81d1c5"
#define GMH3 "0a180a891c6e40afe74b71a0f047a2f08ff387a88554a40a2460f72d55fea8b7"
#define GMH4 "31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e"
#define H1 "3b886c695b77668e09412ce86344ee5afd9ac9b5d8bb360f3bcc31b487c102b2"
#define H2 "f46ef2207e2c77c822342dda10decb9d067f75c93cddf1f4cabd2597e463e329"
#define H3 "f1b192b6b310fb93c950fab217e34c8c21b4085fe8913ac9d902c67459ca47f0"
#define H4 "3fd4e7a216fe10cb94d96ff60795951ec669f1d648fc4c3ba090ed4ad98bc276"

#define LINE(round, gmh, prev) "{\"schema_version\":1,\"round_index\":" #round "," \
	"\"participants\":[\"site-a\",\"site-b\"],\"dataset_roots\":" ROOTS "," \
	"\"global_model_hash\":\"" gmh "\",\"prev_record_hash\":" prev "}"

static const char L1[] = LINE(0, GMH1, "null");
static const char L2[] = LINE(1, GMH2, "\"" H1 "\"");
static const char L3[] = LINE(2, GMH3, "\"" H2 "\"");
static const char L4[] = LINE(3, GMH4, "\"" H3 "\"");

/* Line 1 of the ledger file, verbatim. */
static const char L1_FILE[] =
	"{\"schema_version\":1,\"round_index\":0,\"participants\":[\"site-a\",\"site-b\"],"
	"\"dataset_roots\":{\"site-a\":\"1111111111111111111111111111111111111111111111111111111111111111\","
	"\"site-b\":\"2222222222222222222222222222222222222222222222222222222222222222\"},"
	"\"global_model_hash\":\"24a5fd1e9f42479a360fd5e561017e25a773df29262f1201407fb5b368744915\","
	"\"prev_record_hash\":null}";

static int parse(const char *s, size_t len, vd_ledger_record *r, char *why, size_t n)
{
	memset(why, 0, n);
	return vd_ledger_parse_record((const uint8_t *)s, len, r, why, n);
}

static void expect_hash(const char *s, const char *hash)
{
	vd_ledger_record r;
	char why[160];

	if (parse(s, strlen(s), &r, why, sizeof(why)) != 0)
		fail_msg("refused %s: %s", s, why);
	assert_string_equal(r.record_hash, hash);
}

static void test_parse_line1(void **state)
{
	vd_ledger_record r;
	char why[160];

	(void)state;
	assert_string_equal(L1, L1_FILE);
	assert_int_equal(parse(L1_FILE, strlen(L1_FILE), &r, why, sizeof(why)), 0);
	assert_int_equal(r.schema_version, 1);
	assert_int_equal(r.round_index, 0);
	assert_string_equal(r.global_model_hash, GMH1);
	assert_int_equal(r.has_prev, 0);
	assert_string_equal(r.prev_record_hash, "");
	/* What line 2 names as its predecessor. */
	assert_string_equal(r.record_hash, H1);
}

static void test_parse_chain_hashes(void **state)
{
	vd_ledger_record r;
	char why[160];

	(void)state;
	assert_int_equal(parse(L2, strlen(L2), &r, why, sizeof(why)), 0);
	assert_int_equal(r.round_index, 1);
	assert_int_equal(r.has_prev, 1);
	assert_string_equal(r.prev_record_hash, H1);
	assert_string_equal(r.global_model_hash, GMH2);
	assert_string_equal(r.record_hash, H2);
	expect_hash(L3, H3);
	expect_hash(L4, H4);
}

static void test_hash_is_canonical(void **state)
{
	(void)state;
	/* Key order, whitespace and escapes of the line do not matter: the
	 * hash is over the canonical form of the value. */
	expect_hash("{\"prev_record_hash\":null,\"global_model_hash\":\"" GMH1 "\","
	    "\"dataset_roots\":" ROOTS ",\"participants\":[\"site-a\",\"site-b\"],"
	    "\"round_index\":0,\"schema_version\":1}", H1);
	expect_hash(" { \"schema_version\" : 1 ,\t\"round_index\" : 0 , \"participants\" :"
	    " [ \"site-a\" , \"site-b\" ] , \"dataset_roots\" : " ROOTS " ,\r\n"
	    " \"global_model_hash\" : \"" GMH1 "\" , \"prev_record_hash\" : null } \r", H1);
	expect_hash("{\"schema_version\":1,\"round_index\":0,"
	    "\"participants\":[\"\\u0073ite-a\",\"site\\u002db\"],\"dataset_roots\":" ROOTS ","
	    "\"global_model_hash\":\"" GMH1 "\",\"prev_record_hash\":null}", H1);
	/* -0 is 0, as Python reads it. */
	expect_hash("{\"schema_version\":1,\"round_index\":-0,"
	    "\"participants\":[\"site-a\",\"site-b\"],\"dataset_roots\":" ROOTS ","
	    "\"global_model_hash\":\"" GMH1 "\",\"prev_record_hash\":null}", H1);
}

static void test_hash_raw_utf8(void **state)
{
	/* participants ["Zoë", "東京", "😀", "tab\there", "del\x7f", "q\"b\\"]:
	 * written with ensure_ascii=True and with ensure_ascii=False. */
	static const char ascii_line[] =
	    "{\"schema_version\":1,\"round_index\":5,\"participants\":[\"Zo\\u00eb\","
	    "\"\\u6771\\u4eac\",\"\\ud83d\\ude00\",\"tab\\there\",\"del\\u007f\",\"q\\\"b\\\\\"],"
	    "\"dataset_roots\":{\"Zo\\u00eb\":\"1111111111111111111111111111111111111111111111111111111111111111\","
	    "\"\\u6771\\u4eac\":\"x\"},\"global_model_hash\":"
	    "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"prev_record_hash\":null}";
	static const char utf8_line[] =
	    "{\"schema_version\":1,\"round_index\":5,\"participants\":[\"Zo\303\253\","
	    "\"\346\235\261\344\272\254\",\"\360\237\230\200\",\"tab\\there\",\"del\177\",\"q\\\"b\\\\\"],"
	    "\"dataset_roots\":{\"Zo\303\253\":\"1111111111111111111111111111111111111111111111111111111111111111\","
	    "\"\346\235\261\344\272\254\":\"x\"},\"global_model_hash\":"
	    "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"prev_record_hash\":null}";
	/* The same record hashed over ASCII-escaped JSON: what must not come out. */
	static const char ascii_hash[] =
	    "4190933d0a98b85fbd34107322bed686f5cf6e0e79f8b3f8e3d95de6b20c4551";
	static const char want[] =
	    "c943f86e8bd369b7502360aaa45a5ff14f1924fa792970299dbf53ba885a9df4";
	vd_ledger_record r;
	char why[160];

	(void)state;
	assert_int_equal(parse(ascii_line, strlen(ascii_line), &r, why, sizeof(why)), 0);
	assert_string_not_equal(r.record_hash, ascii_hash);
	assert_string_equal(r.record_hash, want);
	assert_int_equal(r.round_index, 5);
	assert_int_equal(parse(utf8_line, strlen(utf8_line), &r, why, sizeof(why)), 0);
	assert_string_equal(r.record_hash, want);
}

/* Line 1 with edits: name/raw pairs ending with a NULL name; a raw NULL
 * drops the field, a name not in the record is appended. */
static char *rec_make(const char *name, ...)
{
	static const struct {
		const char *name, *raw;
	} base[] = {
		{ "schema_version", "1" },
		{ "round_index", "0" },
		{ "participants", "[\"site-a\",\"site-b\"]" },
		{ "dataset_roots", ROOTS },
		{ "global_model_hash", "\"" GMH1 "\"" },
		{ "prev_record_hash", "null" },
	};
	const char *en[8], *er[8];
	int used[8] = { 0 }, first = 1, dropped;
	size_t n = 0, i, j;
	va_list ap;
	vd_buf b;

	va_start(ap, name);
	for (; name != NULL; name = va_arg(ap, const char *)) {
		assert_true(n < 8);
		en[n] = name;
		er[n++] = va_arg(ap, const char *);
	}
	va_end(ap);
	vd_buf_init(&b);
	vd_buf_putc(&b, '{');
	for (i = 0; i < VD_ARRAY_LEN(base); i++) {
		const char *raw = base[i].raw;
		dropped = 0;
		for (j = 0; j < n; j++) {
			if (!used[j] && strcmp(en[j], base[i].name) == 0) {
				used[j] = 1;
				raw = er[j];
				dropped = raw == NULL;
				break;
			}
		}
		if (dropped)
			continue;
		vd_buf_printf(&b, "%s\"%s\":%s", first ? "" : ",", base[i].name, raw);
		first = 0;
	}
	for (j = 0; j < n; j++) {
		if (!used[j] && er[j] != NULL) {
			vd_buf_printf(&b, "%s\"%s\":%s", first ? "" : ",", en[j], er[j]);
			first = 0;
		}
	}
	vd_buf_putc(&b, '}');
	assert_false(b.oom);
	return (char *)b.p;
}

static void expect_refused(char *s, const char *what)
{
	vd_ledger_record r;
	char why[160];

	if (parse(s, strlen(s), &r, why, sizeof(why)) != -1)
		fail_msg("accepted %s", s);
	print_message("%s\n", why);
	if (strstr(why, what) == NULL)
		fail_msg("%s: reason \"%s\" lacks \"%s\"", s, why, what);
	free(s);
}

static char *xstrdup(const char *s)
{
	char *d = strdup(s);

	assert_non_null(d);
	return d;
}

static void test_builder(void **state)
{
	char *s = rec_make((const char *)NULL);

	(void)state;
	assert_string_equal(s, L1);
	free(s);
}

static void test_refusals(void **state)
{
	static const struct {
		const char *name, *raw, *what;
	} cases[] = {
		{ "extra", "1", "unknown field" },
		{ "extra", "null", "unknown field" },
		{ "Round_index", "0", "unknown field" },
		{ "x", "1.5", "unknown field" },
		{ "schema_version", "2", "schema_version" },
		{ "schema_version", "0", "schema_version" },
		{ "schema_version", "\"1\"", "schema_version" },
		{ "schema_version", "1.0", "schema_version" },
		{ "schema_version", "true", "schema_version" },
		{ "schema_version", "null", "schema_version" },
		{ "schema_version", NULL, "schema_version" },
		{ "round_index", "-1", "round_index" },
		{ "round_index", "1.5", "round_index" },
		{ "round_index", "0.0", "round_index" },
		{ "round_index", "1e2", "round_index" },
		{ "round_index", "\"0\"", "round_index" },
		{ "round_index", "true", "round_index" },
		{ "round_index", "9223372036854775808", "round_index" },
		{ "round_index", NULL, "round_index" },
		{ "participants", "[1]", "participants" },
		{ "participants", "[1.5]", "participants" },
		{ "participants", "[\"site-a\",null]", "participants" },
		{ "participants", "[[\"site-a\"]]", "participants" },
		{ "participants", "\"site-a\"", "participants" },
		{ "participants", "{\"site-a\":\"x\"}", "participants" },
		{ "participants", "null", "participants" },
		{ "participants", NULL, "participants" },
		{ "dataset_roots", "{\"site-a\":1}", "dataset_roots" },
		{ "dataset_roots", "{\"site-a\":1.5}", "dataset_roots" },
		{ "dataset_roots", "{\"site-a\":null}", "dataset_roots" },
		{ "dataset_roots", "{\"site-a\":{}}", "dataset_roots" },
		{ "dataset_roots", "{\"site-a\":[\"x\"]}", "dataset_roots" },
		{ "dataset_roots", "[\"x\"]", "dataset_roots" },
		{ "dataset_roots", "\"x\"", "dataset_roots" },
		{ "dataset_roots", NULL, "dataset_roots" },
		{ "global_model_hash", "\"24A5FD1E9F42479A360FD5E561017E25A773DF29262F1201407FB5B368744915\"",
		  "global_model_hash" },
		{ "global_model_hash", "\"24a5fd1e9f42479a360fd5e561017e25a773df29262f1201407fb5b36874491\"",
		  "global_model_hash" },
		{ "global_model_hash", "\"24a5fd1e9f42479a360fd5e561017e25a773df29262f1201407fb5b3687449150\"",
		  "global_model_hash" },
		{ "global_model_hash", "\"\"", "global_model_hash" },
		{ "global_model_hash", "null", "global_model_hash" },
		{ "global_model_hash", "1.5", "global_model_hash" },
		{ "global_model_hash", NULL, "global_model_hash" },
		{ "prev_record_hash", "\"\"", "prev_record_hash" },
		{ "prev_record_hash", "\"3B886C695B77668E09412CE86344EE5AFD9AC9B5D8BB360F3BCC31B487C102B2\"",
		  "prev_record_hash" },
		{ "prev_record_hash", "\"3b886c695b77668e09412ce86344ee5afd9ac9b5d8bb360f3bcc31b487c102b\"",
		  "prev_record_hash" },
		{ "prev_record_hash", "0", "prev_record_hash" },
		{ "prev_record_hash", "0.0", "prev_record_hash" },
		{ "prev_record_hash", "false", "prev_record_hash" },
		{ "prev_record_hash", NULL, "prev_record_hash" },
		/* A repeated field is not a record. */
		{ "round_index", "0", "not valid JSON" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < VD_ARRAY_LEN(cases); i++) {
		print_message("%s = %s\n", cases[i].name, cases[i].raw ? cases[i].raw : "(none)");
		if (strcmp(cases[i].what, "not valid JSON") == 0)
			expect_refused(rec_make("round_index", "0", cases[i].name, cases[i].raw,
			    (const char *)NULL), cases[i].what);
		else
			expect_refused(rec_make(cases[i].name, cases[i].raw, (const char *)NULL),
			    cases[i].what);
	}
}

static void test_not_records(void **state)
{
	(void)state;
	expect_refused(xstrdup("[]"), "not a JSON object");
	expect_refused(xstrdup("[" LINE(0, GMH1, "null") "]"), "not a JSON object");
	expect_refused(xstrdup("\"record\""), "not a JSON object");
	expect_refused(xstrdup("1"), "not a JSON object");
	expect_refused(xstrdup("null"), "not a JSON object");
	expect_refused(xstrdup("{}"), "schema_version");
	expect_refused(xstrdup(""), "not valid JSON");
	expect_refused(xstrdup("{"), "not valid JSON");
	expect_refused(xstrdup("{\"schema_version\":NaN}"), "not valid JSON");
	expect_refused(xstrdup(LINE(0, GMH1, "null") "x"), "not valid JSON");
	expect_refused(xstrdup(LINE(0, GMH1, "null") LINE(0, GMH1, "null")), "not valid JSON");
	expect_refused(xstrdup("{\"schema_version\":1,\"round_index\":0,"
	    "\"participants\":[\"site-\xff\"],\"dataset_roots\":{},"
	    "\"global_model_hash\":\"" GMH1 "\",\"prev_record_hash\":null}"), "not valid JSON");
}

static void test_valid_variants(void **state)
{
	vd_ledger_record r;
	char why[160];
	char *s;

	(void)state;
	s = rec_make("participants", "[]", "dataset_roots", "{}", "round_index",
	    "9223372036854775807", "prev_record_hash", "\"" H4 "\"", (const char *)NULL);
	assert_int_equal(parse(s, strlen(s), &r, why, sizeof(why)), 0);
	assert_true(r.round_index == INT64_MAX);
	assert_int_equal(r.has_prev, 1);
	assert_string_equal(r.prev_record_hash, H4);
	free(s);
}

static void test_line_limit(void **state)
{
	vd_ledger_record r;
	char why[160];
	size_t n = VD_LEDGER_MAX_LINE + 1, l1 = strlen(L1);
	char *s = malloc(n);

	(void)state;
	assert_non_null(s);
	/* Line 1 padded with spaces to exactly the limit, then one byte over. */
	memcpy(s, L1, l1);
	memset(s + l1, ' ', n - l1);
	assert_int_equal(parse(s, VD_LEDGER_MAX_LINE, &r, why, sizeof(why)), 0);
	assert_string_equal(r.record_hash, H1);
	assert_int_equal(parse(s, VD_LEDGER_MAX_LINE + 1, &r, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "longer"));
	free(s);
}

#define MAX_SEEN 16

struct seen {
	size_t n;
	size_t line[MAX_SEEN];
	int trusted[MAX_SEEN];
	int64_t round[MAX_SEEN];
	char hash[MAX_SEEN][VD_HASH_HEX_LEN + 1];
};

static void on_record(const vd_ledger_record *rec, size_t line, int trusted, void *arg)
{
	struct seen *s = arg;

	assert_true(s->n < MAX_SEEN);
	s->line[s->n] = line;
	s->trusted[s->n] = trusted;
	s->round[s->n] = rec->round_index;
	memcpy(s->hash[s->n], rec->record_hash, sizeof(s->hash[0]));
	s->n++;
}

static void verify(const char *buf, vd_ledger_result *res, struct seen *s)
{
	memset(s, 0, sizeof(*s));
	memset(res, 0x5a, sizeof(*res));
	vd_ledger_verify((const uint8_t *)buf, strlen(buf), on_record, s, res);
}

static void test_verify_intact(void **state)
{
	static const char buf[] = LINE(0, GMH1, "null") "\n" LINE(1, GMH2, "\"" H1 "\"") "\n"
	    LINE(2, GMH3, "\"" H2 "\"") "\n" LINE(3, GMH4, "\"" H3 "\"") "\n";
	static const char *const hashes[] = { H1, H2, H3, H4 };
	vd_ledger_result res;
	struct seen s;
	size_t i;

	(void)state;
	verify(buf, &res, &s);
	assert_int_equal(res.brk, VD_LEDGER_INTACT);
	assert_int_equal(res.break_line, 0);
	assert_int_equal(res.records, 4);
	assert_int_equal(res.trusted, 4);
	assert_string_equal(res.break_detail, "");
	assert_int_equal(s.n, 4);
	for (i = 0; i < 4; i++) {
		assert_int_equal(s.line[i], i + 1);
		assert_int_equal(s.trusted[i], 1);
		assert_int_equal(s.round[i], (int64_t)i);
		assert_string_equal(s.hash[i], hashes[i]);
	}

	/* No callback is fine too. */
	memset(&res, 0, sizeof(res));
	vd_ledger_verify((const uint8_t *)buf, strlen(buf), NULL, NULL, &res);
	assert_int_equal(res.trusted, 4);
}

static void test_verify_blank_and_crlf(void **state)
{
	static const char blanks[] = "\n" LINE(0, GMH1, "null") "\n\n   \n\t\r\n"
	    LINE(1, GMH2, "\"" H1 "\"") "\n\n" LINE(2, GMH3, "\"" H2 "\"");
	static const char crlf[] = LINE(0, GMH1, "null") "\r\n" LINE(1, GMH2, "\"" H1 "\"")
	    "\r\n\r\n" LINE(2, GMH3, "\"" H2 "\"") "\r\n";
	vd_ledger_result res;
	struct seen s;

	(void)state;
	verify(blanks, &res, &s);
	assert_int_equal(res.brk, VD_LEDGER_INTACT);
	assert_int_equal(res.records, 3);
	assert_int_equal(res.trusted, 3);
	assert_int_equal(s.n, 3);
	assert_int_equal(s.line[0], 2);
	assert_int_equal(s.line[1], 6);
	assert_int_equal(s.line[2], 8);

	verify(crlf, &res, &s);
	assert_int_equal(res.brk, VD_LEDGER_INTACT);
	assert_int_equal(res.records, 3);
	assert_int_equal(res.trusted, 3);
	assert_int_equal(s.line[2], 4);
	assert_string_equal(s.hash[2], H3);

	/* Nothing at all, or only blank lines: an intact empty chain. */
	verify("", &res, &s);
	assert_int_equal(res.brk, VD_LEDGER_INTACT);
	assert_int_equal(res.records, 0);
	assert_int_equal(res.trusted, 0);
	assert_int_equal(s.n, 0);
	verify("\n\r\n  \n", &res, &s);
	assert_int_equal(res.brk, VD_LEDGER_INTACT);
	assert_int_equal(res.records, 0);
}

static void test_verify_first_has_prev(void **state)
{
	static const char buf[] = LINE(1, GMH2, "\"" H1 "\"") "\n" LINE(2, GMH3, "\"" H2 "\"") "\n";
	vd_ledger_result res;
	struct seen s;

	(void)state;
	verify(buf, &res, &s);
	assert_int_equal(res.brk, VD_LEDGER_PREV_MISMATCH);
	assert_int_equal(res.break_line, 1);
	assert_int_equal(res.records, 2);
	assert_int_equal(res.trusted, 0);
	assert_non_null(strstr(res.break_detail, "line 1"));
	/* Past a break nothing is trusted, even a record that links. */
	assert_int_equal(s.n, 2);
	assert_int_equal(s.trusted[0], 0);
	assert_int_equal(s.trusted[1], 0);
}

static void test_verify_round_order(void **state)
{
	/* Line 2 links to line 1 but repeats its round. */
	static const char same[] = LINE(0, GMH1, "null") "\n" LINE(0, GMH2, "\"" H1 "\"") "\n";
	/* Line 3 links to line 2 and goes back to round 1. */
	static const char back[] = LINE(0, GMH1, "null") "\n" LINE(1, GMH2, "\"" H1 "\"") "\n"
	    LINE(1, GMH3, "\"" H2 "\"") "\n" LINE(3, GMH4, "\"" H3 "\"") "\n";
	/* A gap in rounds is no break: they only have to increase. */
	static const char gap[] = LINE(0, GMH1, "null") "\n" LINE(7, GMH2, "\"" H1 "\"") "\n";
	vd_ledger_result res;
	struct seen s;

	(void)state;
	verify(same, &res, &s);
	assert_int_equal(res.brk, VD_LEDGER_ROUND_ORDER);
	assert_int_equal(res.break_line, 2);
	assert_int_equal(res.trusted, 1);
	assert_int_equal(s.trusted[0], 1);
	assert_int_equal(s.trusted[1], 0);

	verify(back, &res, &s);
	assert_int_equal(res.brk, VD_LEDGER_ROUND_ORDER);
	assert_int_equal(res.break_line, 3);
	assert_int_equal(res.records, 4);
	assert_int_equal(res.trusted, 2);
	assert_int_equal(s.n, 4);
	assert_int_equal(s.trusted[1], 1);
	assert_int_equal(s.trusted[2], 0);
	assert_int_equal(s.trusted[3], 0);

	verify(gap, &res, &s);
	assert_int_equal(res.brk, VD_LEDGER_INTACT);
	assert_int_equal(res.trusted, 2);
}

static void test_verify_prev_mismatch(void **state)
{
	/* Line 2 edited after line 3 bound it: line 3 breaks. */
	static const char edited[] = LINE(0, GMH1, "null") "\n"
	    "{\"schema_version\":1,\"round_index\":1,\"participants\":[\"site-a\"],"
	    "\"dataset_roots\":" ROOTS ",\"global_model_hash\":\"" GMH2 "\","
	    "\"prev_record_hash\":\"" H1 "\"}\n"
	    LINE(2, GMH3, "\"" H2 "\"") "\n" LINE(3, GMH4, "\"" H3 "\"") "\n";
	/* A second record that names no predecessor. */
	static const char no_prev[] = LINE(0, GMH1, "null") "\n" LINE(1, GMH2, "null") "\n";
	/* Line 2 dropped. */
	static const char dropped[] = LINE(0, GMH1, "null") "\n" LINE(2, GMH3, "\"" H2 "\"") "\n";
	/* The same record twice. */
	static const char twice[] = LINE(0, GMH1, "null") "\n" LINE(0, GMH1, "null") "\n";
	vd_ledger_result res;
	struct seen s;

	(void)state;
	verify(edited, &res, &s);
	assert_int_equal(res.brk, VD_LEDGER_PREV_MISMATCH);
	assert_int_equal(res.break_line, 3);
	assert_int_equal(res.records, 4);
	assert_int_equal(res.trusted, 2);
	assert_int_equal(s.trusted[1], 1);
	assert_int_equal(s.trusted[2], 0);
	assert_int_equal(s.trusted[3], 0);
	assert_non_null(strstr(res.break_detail, "line 3"));

	verify(no_prev, &res, &s);
	assert_int_equal(res.brk, VD_LEDGER_PREV_MISMATCH);
	assert_int_equal(res.break_line, 2);
	assert_int_equal(res.trusted, 1);

	verify(dropped, &res, &s);
	assert_int_equal(res.brk, VD_LEDGER_PREV_MISMATCH);
	assert_int_equal(res.break_line, 2);

	verify(twice, &res, &s);
	assert_int_equal(res.brk, VD_LEDGER_PREV_MISMATCH);
	assert_int_equal(res.break_line, 2);
}

static void test_verify_malformed(void **state)
{
	static const char buf[] = LINE(0, GMH1, "null") "\n{\"schema_version\":1,oops}\n"
	    LINE(1, GMH2, "\"" H1 "\"") "\n";
	static const char floats[] = LINE(0, GMH1, "null") "\n" LINE(1.0, GMH2, "\"" H1 "\"") "\n";
	vd_ledger_result res;
	struct seen s;
	vd_buf b;

	(void)state;
	verify(buf, &res, &s);
	assert_int_equal(res.brk, VD_LEDGER_MALFORMED);
	assert_int_equal(res.break_line, 2);
	assert_int_equal(res.records, 3);
	assert_int_equal(res.trusted, 1);
	assert_non_null(strstr(res.break_detail, "line 2"));
	/* The malformed line is no record: the callback skips it. */
	assert_int_equal(s.n, 2);
	assert_int_equal(s.line[0], 1);
	assert_int_equal(s.trusted[0], 1);
	assert_int_equal(s.line[1], 3);
	assert_int_equal(s.trusted[1], 0);

	verify(floats, &res, &s);
	assert_int_equal(res.brk, VD_LEDGER_MALFORMED);
	assert_int_equal(res.break_line, 2);
	assert_int_equal(res.trusted, 1);

	/* The first break is the one reported. */
	verify(LINE(1, GMH2, "\"" H1 "\"") "\n[]\n", &res, &s);
	assert_int_equal(res.brk, VD_LEDGER_PREV_MISMATCH);
	assert_int_equal(res.break_line, 1);
	assert_int_equal(res.records, 2);

	/* An overlong line, even padding around a valid record, is malformed. */
	vd_buf_init(&b);
	vd_buf_puts(&b, L1);
	vd_buf_putc(&b, '\n');
	vd_buf_puts(&b, L2);
	while (b.len < strlen(L1) + 1 + VD_LEDGER_MAX_LINE + 1 && !b.oom)
		vd_buf_putc(&b, ' ');
	vd_buf_putc(&b, '\n');
	assert_false(b.oom);
	memset(&s, 0, sizeof(s));
	vd_ledger_verify(b.p, b.len, on_record, &s, &res);
	assert_int_equal(res.brk, VD_LEDGER_MALFORMED);
	assert_int_equal(res.break_line, 2);
	assert_int_equal(res.trusted, 1);
	vd_buf_free(&b);
}

static void test_break_names(void **state)
{
	(void)state;
	assert_string_equal(vd_ledger_break_name(VD_LEDGER_INTACT), "intact");
	assert_string_equal(vd_ledger_break_name(VD_LEDGER_MALFORMED), "malformed_record");
	assert_string_equal(vd_ledger_break_name(VD_LEDGER_PREV_MISMATCH), "prev_hash_mismatch");
	assert_string_equal(vd_ledger_break_name(VD_LEDGER_ROUND_ORDER), "round_not_increasing");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_line1),
		cmocka_unit_test(test_parse_chain_hashes),
		cmocka_unit_test(test_hash_is_canonical),
		cmocka_unit_test(test_hash_raw_utf8),
		cmocka_unit_test(test_builder),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_not_records),
		cmocka_unit_test(test_valid_variants),
		cmocka_unit_test(test_line_limit),
		cmocka_unit_test(test_verify_intact),
		cmocka_unit_test(test_verify_blank_and_crlf),
		cmocka_unit_test(test_verify_first_has_prev),
		cmocka_unit_test(test_verify_round_order),
		cmocka_unit_test(test_verify_prev_mismatch),
		cmocka_unit_test(test_verify_malformed),
		cmocka_unit_test(test_break_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

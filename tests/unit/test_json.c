/*
 * The strict JSON parser: every value type, exact integers, and the inputs
 * it must refuse because two readers could disagree on them (duplicate
 * keys, invalid UTF-8, lone surrogates, trailing data, NaN).
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

#include "vd_json.h"
#include "vd_utf8.h"

/* Byte strings that may hold NULs: pass the literal and its length. */
#define B(s) (const uint8_t *)(s), sizeof(s) - 1

static int parse(const uint8_t *p, size_t n, vd_jdoc *doc, char *err, size_t errlen)
{
	return vd_json_parse(p, n, NULL, doc, err, errlen);
}

static const vd_jval *parse_ok(const char *s, vd_jdoc *doc)
{
	char err[128];

	if (vd_json_parse((const uint8_t *)s, strlen(s), NULL, doc, err, sizeof(err)) != 0)
		fail_msg("refused %s: %s", s, err);
	assert_non_null(doc->root);
	return doc->root;
}

static void test_scalars(void **state)
{
	vd_jdoc doc;
	const vd_jval *v;

	(void)state;
	v = parse_ok("null", &doc);
	assert_int_equal(v->type, VD_JNULL);
	vd_jdoc_free(&doc);

	v = parse_ok("true", &doc);
	assert_int_equal(v->type, VD_JBOOL);
	assert_int_equal(v->boolean, 1);
	vd_jdoc_free(&doc);

	v = parse_ok("false", &doc);
	assert_int_equal(v->type, VD_JBOOL);
	assert_int_equal(v->boolean, 0);
	vd_jdoc_free(&doc);

	v = parse_ok("\"hi\"", &doc);
	assert_int_equal(v->type, VD_JSTR);
	assert_int_equal(v->str.len, 2);
	assert_string_equal(v->str.p, "hi");
	vd_jdoc_free(&doc);

	v = parse_ok("\"\"", &doc);
	assert_int_equal(v->type, VD_JSTR);
	assert_int_equal(v->str.len, 0);
	assert_string_equal(v->str.p, "");
	vd_jdoc_free(&doc);

	/* JSON whitespace is exactly space, tab, LF and CR, on either side. */
	v = parse_ok(" \t\r\n 42 \t\r\n", &doc);
	assert_int_equal(v->type, VD_JINT);
	assert_int_equal(v->mag, 42);
	assert_int_equal(v->offset, 5);
	vd_jdoc_free(&doc);
}

static void test_integers(void **state)
{
	static const struct {
		const char *in;
		int neg, big, fits;
		uint64_t mag;
		int64_t val;
	} cases[] = {
		{ "0", 0, 0, 1, 0, 0 },
		{ "-0", 1, 0, 1, 0, 0 },
		{ "7", 0, 0, 1, 7, 7 },
		{ "-7", 1, 0, 1, 7, -7 },
		{ "9223372036854775807", 0, 0, 1, UINT64_C(9223372036854775807), INT64_MAX },
		{ "-9223372036854775808", 1, 0, 1, UINT64_C(9223372036854775808), INT64_MIN },
		{ "9223372036854775808", 0, 0, 0, UINT64_C(9223372036854775808), 0 },
		{ "-9223372036854775809", 1, 0, 0, UINT64_C(9223372036854775809), 0 },
		{ "18446744073709551615", 0, 0, 0, UINT64_MAX, 0 },
		{ "18446744073709551616", 0, 1, 0, 0, 0 },
		{ "-18446744073709551616", 1, 1, 0, 0, 0 },
		{ "100000000000000000000000000000", 0, 1, 0, 0, 0 },
	};
	size_t i;

	(void)state;
	for (i = 0; i < VD_ARRAY_LEN(cases); i++) {
		vd_jdoc doc;
		const vd_jval *v = parse_ok(cases[i].in, &doc);
		int64_t x = 12345;

		print_message("%s\n", cases[i].in);
		assert_int_equal(v->type, VD_JINT);
		assert_int_equal(v->neg, cases[i].neg);
		assert_int_equal(v->big, cases[i].big);
		if (!cases[i].big)
			assert_true(v->mag == cases[i].mag);
		assert_int_equal(vd_json_int64(v, &x), cases[i].fits);
		if (cases[i].fits) {
			assert_true(x == cases[i].val);
			assert_int_equal(vd_json_is_nonneg_int(v), x >= 0);
		} else {
			assert_true(x == 12345);
			assert_int_equal(vd_json_is_nonneg_int(v), 0);
		}
		vd_jdoc_free(&doc);
	}
}

static void test_floats(void **state)
{
	static const char *const cases[] = {
		"1.5", "-0.0", "0.0", "1e3", "1E3", "1e+3", "1e-3", "-2.5E-10",
		"0e0", "123456789012345678901234567890.5", "1e400",
	};
	size_t i;

	(void)state;
	for (i = 0; i < VD_ARRAY_LEN(cases); i++) {
		vd_jdoc doc;
		const vd_jval *v = parse_ok(cases[i], &doc);
		int64_t x;

		assert_int_equal(v->type, VD_JNUM);
		/* A float is never an integer, not even 1.0. */
		assert_int_equal(vd_json_int64(v, &x), 0);
		assert_int_equal(vd_json_is_nonneg_int(v), 0);
		vd_jdoc_free(&doc);
	}
}

static void test_int64_non_integers(void **state)
{
	vd_jdoc doc;
	const vd_jval *v;
	int64_t x;

	(void)state;
	assert_int_equal(vd_json_int64(NULL, &x), 0);
	assert_int_equal(vd_json_is_nonneg_int(NULL), 0);
	v = parse_ok("[\"1\",true,null,[1],{\"a\":1},1.0]", &doc);
	for (v = v->child; v != NULL; v = v->next) {
		assert_int_equal(vd_json_int64(v, &x), 0);
		assert_int_equal(vd_json_is_nonneg_int(v), 0);
	}
	vd_jdoc_free(&doc);
}

static void test_containers(void **state)
{
	vd_jdoc doc;
	const vd_jval *root, *a, *o, *c;

	(void)state;
	root = parse_ok("{ \"arr\" : [ 1 , \"two\" , [ ] , { } , null ] ,"
	    " \"obj\" : { \"k\" : false } , \"e\" : {} }", &doc);
	assert_int_equal(root->type, VD_JOBJ);
	assert_int_equal(root->count, 3);
	assert_int_equal(root->offset, 0);

	/* Members keep document order and their keys. */
	c = root->child;
	assert_string_equal(c->key.p, "arr");
	assert_string_equal(c->next->key.p, "obj");
	assert_string_equal(c->next->next->key.p, "e");
	assert_null(c->next->next->next);

	a = vd_json_get(root, "arr");
	assert_ptr_equal(a, root->child);
	assert_int_equal(a->type, VD_JARR);
	assert_int_equal(a->count, 5);
	c = a->child;
	assert_int_equal(c->type, VD_JINT);
	assert_int_equal(c->mag, 1);
	c = c->next;
	assert_int_equal(c->type, VD_JSTR);
	assert_string_equal(c->str.p, "two");
	c = c->next;
	assert_int_equal(c->type, VD_JARR);
	assert_int_equal(c->count, 0);
	assert_null(c->child);
	c = c->next;
	assert_int_equal(c->type, VD_JOBJ);
	assert_int_equal(c->count, 0);
	c = c->next;
	assert_int_equal(c->type, VD_JNULL);
	assert_null(c->next);

	o = vd_json_get(root, "obj");
	assert_int_equal(o->type, VD_JOBJ);
	assert_int_equal(o->count, 1);
	c = vd_json_get(o, "k");
	assert_non_null(c);
	assert_int_equal(c->type, VD_JBOOL);
	assert_int_equal(c->boolean, 0);

	assert_non_null(vd_json_get(root, "e"));
	assert_int_equal(vd_json_get(root, "e")->count, 0);
	vd_jdoc_free(&doc);

	root = parse_ok("[]", &doc);
	assert_int_equal(root->type, VD_JARR);
	assert_int_equal(root->count, 0);
	vd_jdoc_free(&doc);

	root = parse_ok("[[[[\"deep\"]]]]", &doc);
	assert_string_equal(root->child->child->child->child->str.p, "deep");
	vd_jdoc_free(&doc);
}

static void test_get(void **state)
{
	vd_jdoc doc;
	const vd_jval *root, *v;

	(void)state;
	root = parse_ok("{\"a\":1,\"ab\":2,\"a\\u0000b\":3,\"\":4,\"\\u00e9\":5}", &doc);
	assert_int_equal(vd_json_get(root, "a")->mag, 1);
	assert_int_equal(vd_json_get(root, "ab")->mag, 2);
	assert_int_equal(vd_json_get(root, "")->mag, 4);
	assert_int_equal(vd_json_get(root, "\xc3\xa9")->mag, 5);
	assert_null(vd_json_get(root, "b"));
	assert_null(vd_json_get(root, "A"));
	assert_null(vd_json_get(root, "abc"));
	assert_null(vd_json_get(NULL, "a"));
	/* Only objects have members. */
	v = vd_json_get(root, "a");
	assert_null(vd_json_get(v, "a"));
	vd_jdoc_free(&doc);

	root = parse_ok("[{\"a\":1}]", &doc);
	assert_null(vd_json_get(root, "a"));
	vd_jdoc_free(&doc);
}

static void test_string_escapes(void **state)
{
	vd_jdoc doc;
	const vd_jval *v;

	(void)state;
	v = parse_ok("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0041\\u00e9\\u20AC\\uFFFF\"", &doc);
	assert_int_equal(v->type, VD_JSTR);
	assert_int_equal(v->str.len, 8 + 1 + 2 + 3 + 3);
	assert_memory_equal(v->str.p,
	    "\"\\/\b\f\n\r\tA\xc3\xa9\xe2\x82\xac\xef\xbf\xbf", v->str.len + 1);
	vd_jdoc_free(&doc);

	/* \u0000 decodes to a real NUL that the length counts. */
	v = parse_ok("\"a\\u0000b\"", &doc);
	assert_int_equal(v->str.len, 3);
	assert_memory_equal(v->str.p, "a\0b", 4);
	vd_jdoc_free(&doc);

	/* A surrogate pair is one code point: four bytes of UTF-8. */
	v = parse_ok("\"\\ud83d\\ude00\"", &doc);
	assert_int_equal(v->str.len, 4);
	assert_memory_equal(v->str.p, "\xf0\x9f\x98\x80", 5);
	vd_jdoc_free(&doc);

	v = parse_ok("\"\\uD800\\uDC00|\\udbff\\udfff\"", &doc);
	assert_int_equal(v->str.len, 9);
	assert_memory_equal(v->str.p, "\xf0\x90\x80\x80|\xf4\x8f\xbf\xbf", 10);
	vd_jdoc_free(&doc);

	/* Raw UTF-8 of every length passes through unchanged; DEL is no control. */
	v = parse_ok("\"\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80"
	    "\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\"", &doc);
	assert_int_equal(v->str.len, 1 + 2 + 2 + 3 + 3 + 3 + 4 + 4);
	assert_memory_equal(v->str.p, "\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf"
	    "\xee\x80\x80\xf0\x90\x80\x80\xf4\x8f\xbf\xbf", v->str.len);
	vd_jdoc_free(&doc);
}

static void test_nul_keys_distinct(void **state)
{
	vd_jdoc doc;
	const vd_jval *root;

	(void)state;
	/* Keys equal up to an escaped NUL are still different keys. */
	root = parse_ok("{\"a\\u0000b\":1,\"a\\u0000c\":2}", &doc);
	assert_int_equal(root->count, 2);
	vd_jdoc_free(&doc);
	root = parse_ok("{\"a\":1,\"a\\u0000\":2,\"a\\u0000\\u0000\":3}", &doc);
	assert_int_equal(root->count, 3);
	assert_int_equal(vd_json_get(root, "a")->mag, 1);
	vd_jdoc_free(&doc);
	root = parse_ok("{\"\\u0000\":1,\"\":2}", &doc);
	assert_int_equal(root->count, 2);
	vd_jdoc_free(&doc);
	/* Case differs: different keys. */
	root = parse_ok("{\"a\":1,\"A\":2}", &doc);
	assert_int_equal(root->count, 2);
	vd_jdoc_free(&doc);
	/* The same key in sibling objects is no duplicate. */
	root = parse_ok("[{\"a\":1},{\"a\":2},{\"x\":{\"a\":3}}]", &doc);
	assert_int_equal(root->count, 3);
	vd_jdoc_free(&doc);
}

struct bad {
	const uint8_t *in;
	size_t len;
	const char *why;     /* a part of the message */
};

static void check_refused(const struct bad *cases, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		vd_jdoc doc;
		char err[128];

		memset(&doc, 0xa5, sizeof(doc));
		memset(err, 0, sizeof(err));
		if (parse(cases[i].in, cases[i].len, &doc, err, sizeof(err)) != -1)
			fail_msg("case %zu accepted: %.*s", i, (int)cases[i].len,
			    (const char *)cases[i].in);
		print_message("case %zu: %s\n", i, err);
		assert_null(doc.root);
		assert_null(doc.arena.head);
		if (strstr(err, cases[i].why) == NULL)
			fail_msg("case %zu: message \"%s\" lacks \"%s\"", i, err, cases[i].why);
		assert_non_null(strstr(err, " at byte "));
	}
}

static void test_duplicate_keys(void **state)
{
	static const struct bad cases[] = {
		{ B("{\"a\":1,\"a\":2}"), "duplicate object key" },
		{ B("{\"a\":1,\"b\":2,\"a\":1}"), "duplicate object key" },
		{ B("{\"a\":{},\"a\":{}}"), "duplicate object key" },
		{ B("{\"x\":[{\"b\":1,\"c\":2,\"b\":3}]}"), "duplicate object key" },
		{ B("[[[{\"k\":{\"z\":0,\"z\":0}}]]]"), "duplicate object key" },
		/* Escapes decode first: these spell the same key. */
		{ B("{\"a\":1,\"\\u0061\":2}"), "duplicate object key" },
		{ B("{\"/\":1,\"\\/\":2}"), "duplicate object key" },
		{ B("{\"\\u00e9\":1,\"\xc3\xa9\":2}"), "duplicate object key" },
		{ B("{\"a\\u0000b\":1,\"a\\u0000b\":2}"), "duplicate object key" },
		{ B("{\"\":1,\"\":2}"), "duplicate object key" },
	};

	(void)state;
	check_refused(cases, VD_ARRAY_LEN(cases));
}

static void test_duplicate_key_offset(void **state)
{
	vd_jdoc doc;
	char err[128];

	(void)state;
	/* The message points at the second occurrence's value. */
	assert_int_equal(parse(B("{\"a\":1,\"a\":22}"), &doc, err, sizeof(err)), -1);
	assert_string_equal(err, "duplicate object key at byte 11");
}

static void test_trailing_garbage(void **state)
{
	static const struct bad cases[] = {
		{ B("{} x"), "trailing data" },
		{ B("{}}"), "trailing data" },
		{ B("[]]"), "trailing data" },
		{ B("1 2"), "trailing data" },
		{ B("nulll"), "trailing data" },
		{ B("\"a\"\"b\""), "trailing data" },
		{ B("{}\0"), "trailing data" },
		{ B("{},{}"), "trailing data" },
		{ B("0x10"), "trailing data" },
		{ B("1.5.2"), "trailing data" },
		{ B("truefalse"), "trailing data" },
	};

	(void)state;
	check_refused(cases, VD_ARRAY_LEN(cases));
}

static void test_bad_numbers(void **state)
{
	static const struct bad cases[] = {
		{ B("01"), "leading zero" },
		{ B("-01"), "leading zero" },
		{ B("00"), "leading zero" },
		{ B("[012]"), "leading zero" },
		{ B("{\"a\":007}"), "leading zero" },
		{ B("NaN"), "unexpected character" },
		{ B("nan"), "invalid literal" },
		{ B("Infinity"), "unexpected character" },
		{ B("-Infinity"), "invalid number" },
		{ B("[1,NaN]"), "unexpected character" },
		{ B("+1"), "unexpected character" },
		{ B(".5"), "unexpected character" },
		{ B("-"), "invalid number" },
		{ B("-a"), "invalid number" },
		{ B("1."), "invalid number" },
		{ B("1.e5"), "invalid number" },
		{ B("1e"), "invalid number" },
		{ B("1e+"), "invalid number" },
		{ B("1E-x"), "invalid number" },
	};

	(void)state;
	check_refused(cases, VD_ARRAY_LEN(cases));
}

static void test_bad_strings(void **state)
{
	static const struct bad cases[] = {
		{ B("\""), "unterminated string" },
		{ B("\"abc"), "unterminated string" },
		{ B("\"abc\\\""), "unterminated string" },
		{ B("\"\\"), "unterminated string" },
		{ B("{\"a"), "unterminated string" },
		{ B("{\"a\":\"b}"), "unterminated string" },
		{ B("[\"a\\u00"), "unterminated string" },
		/* Raw controls must be escaped. */
		{ B("\"a\tb\""), "control character in string" },
		{ B("\"a\nb\""), "control character in string" },
		{ B("\"\r\""), "control character in string" },
		{ B("\"\x01\""), "control character in string" },
		{ B("\"\x1f\""), "control character in string" },
		{ B("\"\0\""), "control character in string" },
		{ B("{\"k\x02\":1}"), "control character in string" },
		{ B("\"\\x41\""), "invalid escape" },
		{ B("\"\\U0041\""), "invalid escape" },
		{ B("\"\\'\""), "invalid escape" },
		{ B("\"\\ \""), "invalid escape" },
		{ B("\"\\u12\""), "bad \\u escape" },
		{ B("\"\\u12g4\""), "bad \\u escape" },
		{ B("\"\\u-123\""), "bad \\u escape" },
	};

	(void)state;
	check_refused(cases, VD_ARRAY_LEN(cases));
}

static void test_bad_utf8(void **state)
{
	static const struct bad cases[] = {
		/* Overlong forms. */
		{ B("\"\xc0\x80\""), "invalid UTF-8" },
		{ B("\"\xc1\xbf\""), "invalid UTF-8" },
		{ B("\"\xe0\x80\x80\""), "invalid UTF-8" },
		{ B("\"\xe0\x9f\xbf\""), "invalid UTF-8" },
		{ B("\"\xf0\x80\x80\x80\""), "invalid UTF-8" },
		{ B("\"\xf0\x8f\xbf\xbf\""), "invalid UTF-8" },
		/* Surrogates encoded directly. */
		{ B("\"\xed\xa0\x80\""), "invalid UTF-8" },
		{ B("\"\xed\xbf\xbf\""), "invalid UTF-8" },
		{ B("\"\xed\xa0\xbd\xed\xb8\x80\""), "invalid UTF-8" },
		/* Beyond U+10FFFF. */
		{ B("\"\xf4\x90\x80\x80\""), "invalid UTF-8" },
		{ B("\"\xf5\x80\x80\x80\""), "invalid UTF-8" },
		{ B("\"\xf7\xbf\xbf\xbf\""), "invalid UTF-8" },
		{ B("\"\xf8\x88\x80\x80\x80\""), "invalid UTF-8" },
		/* Truncated sequences. */
		{ B("\"\xc3\""), "invalid UTF-8" },
		{ B("\"\xe2\x82\""), "invalid UTF-8" },
		{ B("\"\xf0\x9f\x98\""), "invalid UTF-8" },
		{ B("\"\xe2\x82x\""), "invalid UTF-8" },
		/* Stray continuation and bytes never in UTF-8. */
		{ B("\"\x80\""), "invalid UTF-8" },
		{ B("\"a\xbf\""), "invalid UTF-8" },
		{ B("\"\xfe\""), "invalid UTF-8" },
		{ B("\"\xff\""), "invalid UTF-8" },
		{ B("{\"\xff\":1}"), "invalid UTF-8" },
		/* Outside a string a non-ASCII byte is just unexpected. */
		{ B("\xef\xbb\xbf{}"), "unexpected character" },
	};

	(void)state;
	check_refused(cases, VD_ARRAY_LEN(cases));
}

static void test_lone_surrogates(void **state)
{
	static const struct bad cases[] = {
		{ B("\"\\ud800\""), "lone high surrogate" },
		{ B("\"\\ud83dx\""), "lone high surrogate" },
		{ B("\"\\ud83d\\u0041\""), "lone high surrogate" },
		{ B("\"\\ud800\\ud800\""), "lone high surrogate" },
		{ B("\"\\udbff\\n\""), "lone high surrogate" },
		{ B("\"\\ud800\\ue000\""), "lone high surrogate" },
		{ B("\"\\ud800\\u\""), "lone high surrogate" },
		{ B("\"\\udc00\""), "lone low surrogate" },
		{ B("\"\\udfff\""), "lone low surrogate" },
		{ B("\"\\ude00\\ud83d\""), "lone low surrogate" },
		{ B("{\"\\udc00\":1}"), "lone low surrogate" },
	};

	(void)state;
	check_refused(cases, VD_ARRAY_LEN(cases));
}

static void test_bad_structure(void **state)
{
	static const struct bad cases[] = {
		{ B(""), "unexpected end of input" },
		{ B(" \t\r\n"), "unexpected end of input" },
		{ B("["), "unexpected end of input" },
		{ B("[1,"), "unexpected end of input" },
		{ B("{\"a\":"), "unexpected end of input" },
		{ B("{"), "expected a string key" },
		{ B("[1,]"), "unexpected character" },
		{ B("[,1]"), "unexpected character" },
		{ B("[1 2]"), "expected ',' or ']'" },
		{ B("[1"), "expected ',' or ']'" },
		{ B("{\"a\":1,}"), "expected a string key" },
		{ B("{a:1}"), "expected a string key" },
		{ B("{'a':1}"), "expected a string key" },
		{ B("{1:1}"), "expected a string key" },
		{ B("{\"a\" 1}"), "expected ':'" },
		{ B("{\"a\"}"), "expected ':'" },
		{ B("{\"a\":1 \"b\":2}"), "expected ',' or '}'" },
		{ B("{\"a\":1]"), "expected ',' or '}'" },
		{ B("[}"), "unexpected character" },
		{ B("tru"), "invalid literal" },
		{ B("True"), "unexpected character" },
		{ B("nul"), "invalid literal" },
		{ B("fals"), "invalid literal" },
		{ B("undefined"), "unexpected character" },
		/* Only the four JSON whitespace bytes separate tokens. */
		{ B("\v1"), "unexpected character" },
		{ B("\f1"), "unexpected character" },
		{ B("[1,\xc2\xa0""2]"), "unexpected character" },
		{ B("\0"), "unexpected character" },
		{ B("// c\n1"), "unexpected character" },
	};

	(void)state;
	check_refused(cases, VD_ARRAY_LEN(cases));
}

static void test_error_offset(void **state)
{
	vd_jdoc doc;
	char err[128];

	(void)state;
	assert_int_equal(parse(B("[1,2,x]"), &doc, err, sizeof(err)), -1);
	assert_string_equal(err, "unexpected character at byte 5");
	assert_int_equal(parse(B("{} x"), &doc, err, sizeof(err)), -1);
	assert_string_equal(err, "trailing data after the JSON value at byte 3");
	assert_int_equal(parse(B("\"ab\xff\""), &doc, err, sizeof(err)), -1);
	assert_string_equal(err, "invalid UTF-8 in string at byte 3");

	/* A short buffer truncates the sentence; a zero-length one is untouched. */
	memset(err, 'x', sizeof(err));
	assert_int_equal(parse(B("[1,2,x]"), &doc, err, 6), -1);
	assert_string_equal(err, "unexp");
	assert_int_equal(parse(B("[1,2,x]"), &doc, NULL, 0), -1);
	assert_null(doc.root);
}

static char *nested(unsigned depth, char open, char close)
{
	char *s = malloc(2 * (size_t)depth + 1);
	unsigned i;

	assert_non_null(s);
	for (i = 0; i < depth; i++) {
		s[i] = open;
		s[2 * depth - 1 - i] = close;
	}
	s[2 * depth] = '\0';
	return s;
}

static void test_depth(void **state)
{
	vd_json_opts opts = { .max_depth = 3, .max_memory = 0 };
	vd_jdoc doc;
	char err[128];
	char *s;

	(void)state;
	assert_int_equal(vd_json_parse(B("[[[]]]"), &opts, &doc, err, sizeof(err)), 0);
	vd_jdoc_free(&doc);
	assert_int_equal(vd_json_parse(B("[[[[]]]]"), &opts, &doc, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "nesting too deep"));
	assert_null(doc.root);
	assert_int_equal(vd_json_parse(B("{\"a\":{\"b\":[1]}}"), &opts, &doc, err, sizeof(err)), 0);
	vd_jdoc_free(&doc);
	assert_int_equal(vd_json_parse(B("{\"a\":{\"b\":[{}]}}"), &opts, &doc, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "nesting too deep"));
	/* Depth is nesting, not the number of containers. */
	assert_int_equal(vd_json_parse(B("[[[]],[[]],{\"a\":[]},[[]]]"), &opts, &doc, err,
	    sizeof(err)), 0);
	vd_jdoc_free(&doc);
	/* Scalars add no depth. */
	opts.max_depth = 1;
	assert_int_equal(vd_json_parse(B("[1,\"a\",null]"), &opts, &doc, err, sizeof(err)), 0);
	vd_jdoc_free(&doc);
	assert_int_equal(vd_json_parse(B("7"), &opts, &doc, err, sizeof(err)), 0);
	vd_jdoc_free(&doc);

	/* The default. */
	s = nested(VD_JSON_MAX_DEPTH_DEFAULT, '[', ']');
	assert_int_equal(vd_json_parse((uint8_t *)s, strlen(s), NULL, &doc, err, sizeof(err)), 0);
	vd_jdoc_free(&doc);
	free(s);
	s = nested(VD_JSON_MAX_DEPTH_DEFAULT + 1, '[', ']');
	assert_int_equal(vd_json_parse((uint8_t *)s, strlen(s), NULL, &doc, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "nesting too deep"));
	free(s);
	/* Far deeper than any stack should allow: refused, not a crash. */
	s = nested(1000000, '[', ']');
	assert_int_equal(vd_json_parse((uint8_t *)s, strlen(s), NULL, &doc, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "nesting too deep"));
	free(s);
}

static void test_memory_limit(void **state)
{
	vd_json_opts opts = { .max_depth = 0, .max_memory = 1024 };
	vd_jdoc doc;
	char err[128];
	char buf[4096];
	size_t n = 0;
	int i;

	(void)state;
	n += (size_t)snprintf(buf + n, sizeof(buf) - n, "[");
	for (i = 0; i < 200; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%d", i ? "," : "", i);
	n += (size_t)snprintf(buf + n, sizeof(buf) - n, "]");

	assert_int_equal(vd_json_parse((uint8_t *)buf, n, &opts, &doc, err, sizeof(err)),
	    VD_JSON_EMEMORY);
	assert_non_null(strstr(err, "memory limit"));
	assert_null(doc.root);
	assert_null(doc.arena.head);

	/* A long string is charged too. */
	memset(buf, 'a', sizeof(buf));
	buf[0] = '"';
	buf[sizeof(buf) - 1] = '"';
	assert_int_equal(vd_json_parse((uint8_t *)buf, sizeof(buf), &opts, &doc, err,
	    sizeof(err)), VD_JSON_EMEMORY);
	assert_non_null(strstr(err, "memory limit"));

	/* The same documents within a larger limit, or the default one. */
	opts.max_memory = 1 << 20;
	assert_int_equal(vd_json_parse((uint8_t *)buf, sizeof(buf), &opts, &doc, err,
	    sizeof(err)), 0);
	assert_int_equal(doc.root->str.len, sizeof(buf) - 2);
	vd_jdoc_free(&doc);
	assert_int_equal(vd_json_parse((uint8_t *)buf, sizeof(buf), NULL, &doc, err,
	    sizeof(err)), 0);
	vd_jdoc_free(&doc);
	/* Freeing twice is harmless. */
	vd_jdoc_free(&doc);
}

static void test_utf8_valid(void **state)
{
	static const struct {
		const char *s;
		size_t len;
		int ok;
	} cases[] = {
		{ "", 0, 1 },
		{ "plain ascii \x01\x7f", 14, 1 },
		{ "\0", 1, 1 },
		{ "\xc2\x80", 2, 1 },
		{ "\xdf\xbf", 2, 1 },
		{ "\xe0\xa0\x80", 3, 1 },
		{ "\xed\x9f\xbf", 3, 1 },
		{ "\xee\x80\x80", 3, 1 },
		{ "\xef\xbf\xbf", 3, 1 },
		{ "\xf0\x90\x80\x80", 4, 1 },
		{ "\xf0\x9f\x98\x80", 4, 1 },
		{ "\xf4\x8f\xbf\xbf", 4, 1 },
		{ "\xc0\x80", 2, 0 },
		{ "\xc1\xbf", 2, 0 },
		{ "\xe0\x80\xaf", 3, 0 },
		{ "\xe0\x9f\xbf", 3, 0 },
		{ "\xf0\x80\x80\xaf", 4, 0 },
		{ "\xf0\x8f\xbf\xbf", 4, 0 },
		{ "\xed\xa0\x80", 3, 0 },
		{ "\xed\xbf\xbf", 3, 0 },
		{ "\xf4\x90\x80\x80", 4, 0 },
		{ "\xf5\x80\x80\x80", 4, 0 },
		{ "\xff", 1, 0 },
		{ "\xfe", 1, 0 },
		{ "\x80", 1, 0 },
		{ "a\xc3", 2, 0 },
		{ "\xe2\x82", 2, 0 },
		{ "\xf0\x9f\x98", 3, 0 },
		{ "\xc3(", 2, 0 },
		{ "\xe2(\xa1", 3, 0 },
		{ "\xf0\x9f(\x80", 4, 0 },
	};
	size_t i;

	(void)state;
	for (i = 0; i < VD_ARRAY_LEN(cases); i++) {
		if (vd_utf8_valid((const uint8_t *)cases[i].s, cases[i].len) != cases[i].ok)
			fail_msg("case %zu: expected %d", i, cases[i].ok);
	}
	/* The length bounds the check: a truncated view of a valid sequence fails. */
	assert_int_equal(vd_utf8_valid((const uint8_t *)"\xf0\x9f\x98\x80", 3), 0);
	assert_int_equal(vd_utf8_valid((const uint8_t *)"ab\xff", 2), 1);
}

static void test_jtype_names(void **state)
{
	(void)state;
	assert_string_equal(vd_jtype_name(VD_JNULL), "null");
	assert_string_equal(vd_jtype_name(VD_JBOOL), "a boolean");
	assert_string_equal(vd_jtype_name(VD_JINT), "an integer");
	assert_string_equal(vd_jtype_name(VD_JNUM), "a number");
	assert_string_equal(vd_jtype_name(VD_JSTR), "a string");
	assert_string_equal(vd_jtype_name(VD_JARR), "an array");
	assert_string_equal(vd_jtype_name(VD_JOBJ), "an object");
}

static void test_not_nul_terminated(void **state)
{
	/* The parser reads only [buf, buf+len): a value cut short is refused
	 * even when the bytes after it would complete it. */
	static const char s[] = "[1,2]  trailing";
	vd_jdoc doc;
	char err[128];

	(void)state;
	assert_int_equal(vd_json_parse((const uint8_t *)s, 5, NULL, &doc, err, sizeof(err)), 0);
	assert_int_equal(doc.root->count, 2);
	vd_jdoc_free(&doc);
	assert_int_equal(vd_json_parse((const uint8_t *)s, 4, NULL, &doc, err, sizeof(err)), -1);
	assert_int_equal(vd_json_parse((const uint8_t *)"\"abc\"", 4, NULL, &doc, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "unterminated string"));
	assert_int_equal(vd_json_parse((const uint8_t *)"true", 3, NULL, &doc, err,
	    sizeof(err)), -1);
	assert_int_equal(vd_json_parse((const uint8_t *)"12345", 2, NULL, &doc, err,
	    sizeof(err)), 0);
	assert_int_equal(doc.root->mag, 12);
	vd_jdoc_free(&doc);
	assert_int_equal(vd_json_parse((const uint8_t *)"\"\\ud83d\\ude00\"", 8, NULL, &doc,
	    err, sizeof(err)), -1);
}

/* An array of n small integers, "[0,1,...]": the caller frees it. */
static char *int_array(size_t n, size_t *len)
{
	char *s = malloc(n * 12 + 3);
	size_t i, k = 0;

	assert_non_null(s);
	s[k++] = '[';
	for (i = 0; i < n; i++)
		k += (size_t)sprintf(s + k, "%s%zu", i ? "," : "", i % 1000);
	s[k++] = ']';
	s[k] = '\0';
	*len = k;
	return s;
}

static int parse_bounded(const char *s, const vd_json_bounds *b, vd_jdoc *doc, char *err)
{
	return vd_json_parse_bounded((const uint8_t *)s, strlen(s), NULL, b, doc, err, 128);
}

/* max_items counts the root, or the root object's member items_key: not
 * a member of that name deeper down, and objects as well as arrays. */
static void test_items_counted(void **state)
{
	vd_json_bounds root = { .max_items = 3 }, member = { .max_items = 2, .items_key = "m" };
	vd_jdoc doc;
	char err[128];

	(void)state;
	assert_int_equal(parse_bounded("[1,2,3]", &root, &doc, err), 0);
	assert_int_equal(doc.root->count, 3);
	vd_jdoc_free(&doc);
	assert_int_equal(parse_bounded("[1,2,3,4]", &root, &doc, err), VD_JSON_EITEMS);
	assert_null(doc.root);
	assert_non_null(strstr(err, "byte 7"));
	assert_int_equal(parse_bounded("{\"a\":1,\"b\":2,\"c\":3,\"d\":4}", &root, &doc, err),
	    VD_JSON_EITEMS);
	/* Only the root: a nested array of any length is not counted. */
	assert_int_equal(parse_bounded("[[1,2,3,4,5],2]", &root, &doc, err), 0);
	vd_jdoc_free(&doc);

	assert_int_equal(parse_bounded("{\"x\":[1,2,3],\"m\":[1,2]}", &member, &doc, err), 0);
	vd_jdoc_free(&doc);
	assert_int_equal(parse_bounded("{\"x\":[1,2,3],\"m\":[1,2,3]}", &member, &doc, err),
	    VD_JSON_EITEMS);
	assert_int_equal(parse_bounded("{\"m\":{\"a\":1,\"b\":2,\"c\":3}}", &member, &doc, err),
	    VD_JSON_EITEMS);
	assert_int_equal(parse_bounded("{\"y\":{\"m\":[1,2,3]}}", &member, &doc, err), 0);
	vd_jdoc_free(&doc);
	assert_int_equal(parse_bounded("[[1,2,3]]", &member, &doc, err), 0);
	vd_jdoc_free(&doc);
	/* The root itself is not the member. */
	assert_int_equal(parse_bounded("[1,2,3,4]", &member, &doc, err), 0);
	vd_jdoc_free(&doc);
}

/* A document that lists too much is refused as the count is passed, not
 * after it is built: the memory it took stays that of the first items. */
static void test_items_refused_early(void **state)
{
	vd_budget budget;
	vd_json_bounds b = { .budget = &budget, .max_items = 10 };
	vd_jdoc doc;
	char err[128];
	size_t len;
	char *s = int_array(200000, &len);

	(void)state;
	vd_budget_init(&budget, 0);
	assert_int_equal(vd_json_parse_bounded((uint8_t *)s, len, NULL, &b, &doc, err,
	    sizeof(err)), VD_JSON_EITEMS);
	assert_true(budget.peak <= 64 * 1024);
	assert_int_equal(budget.used, 0);
	/* Unbounded, the same document takes megabytes. */
	b.max_items = 0;
	assert_int_equal(vd_json_parse_bounded((uint8_t *)s, len, NULL, &b, &doc, err,
	    sizeof(err)), 0);
	assert_true(budget.used > 200000 * sizeof(vd_jval));
	vd_jdoc_free(&doc);
	assert_int_equal(budget.used, 0);
	free(s);
}

/* The budget is charged for every chunk: past it the parse fails as out
 * of memory, with the budget marked exhausted, and holds nothing after. */
static void test_budget_exhausted(void **state)
{
	vd_budget budget;
	vd_json_bounds b = { .budget = &budget };
	vd_jdoc doc;
	char err[128];
	size_t len, need;
	char *s = int_array(20000, &len);

	(void)state;
	vd_budget_init(&budget, 0);
	assert_int_equal(vd_json_parse_bounded((uint8_t *)s, len, NULL, &b, &doc, err,
	    sizeof(err)), 0);
	/* What the values take, without the slack of the chunks. */
	need = doc.arena.used_total;
	assert_true(need >= 20000 * sizeof(vd_jval));
	assert_true(budget.used >= need);
	assert_true(budget.peak >= budget.used);
	vd_jdoc_free(&doc);
	assert_int_equal(budget.used, 0);

	/* Short of what it needs by a little: refused. */
	vd_budget_init(&budget, need - need / 8);
	assert_int_equal(vd_json_parse_bounded((uint8_t *)s, len, NULL, &b, &doc, err,
	    sizeof(err)), VD_JSON_EMEMORY);
	assert_true(budget.exhausted);
	assert_true(budget.peak <= budget.limit);
	assert_int_equal(budget.used, 0);
	assert_null(doc.root);
	assert_non_null(strstr(err, "memory limit"));

	/* Enough: it parses, and the last chunk is cut to what the budget has
	 * left rather than refused for its slack. */
	vd_budget_init(&budget, need + need / 64);
	assert_int_equal(vd_json_parse_bounded((uint8_t *)s, len, NULL, &b, &doc, err,
	    sizeof(err)), 0);
	assert_false(budget.exhausted);
	vd_jdoc_free(&doc);
	free(s);
}

/* One budget for several documents: the second is refused for what the
 * first holds, though it would fit on its own. */
static void test_budget_shared(void **state)
{
	vd_budget budget;
	vd_json_bounds b = { .budget = &budget };
	vd_jdoc one, two;
	char err[128];
	size_t len, need;
	char *s = int_array(5000, &len);

	(void)state;
	vd_budget_init(&budget, 0);
	assert_int_equal(vd_json_parse_bounded((uint8_t *)s, len, NULL, &b, &one, err,
	    sizeof(err)), 0);
	need = budget.used;
	vd_jdoc_free(&one);
	vd_budget_init(&budget, need + need / 2);
	assert_int_equal(vd_json_parse_bounded((uint8_t *)s, len, NULL, &b, &one, err,
	    sizeof(err)), 0);
	assert_int_equal(vd_json_parse_bounded((uint8_t *)s, len, NULL, &b, &two, err,
	    sizeof(err)), VD_JSON_EMEMORY);
	assert_true(budget.exhausted);
	vd_jdoc_free(&one);
	assert_int_equal(budget.used, 0);
	budget.exhausted = 0;
	assert_int_equal(vd_json_parse_bounded((uint8_t *)s, len, NULL, &b, &two, err,
	    sizeof(err)), 0);
	vd_jdoc_free(&two);
	assert_int_equal(budget.used, 0);
	free(s);
}

/* The duplicate-key check's array is charged as well: an object of many
 * members needs room for one pointer per member beside its values. */
static void test_budget_duplicate_check(void **state)
{
	vd_budget budget;
	vd_json_bounds b = { .budget = &budget };
	vd_jdoc doc;
	char err[128], *s;
	size_t i, k = 0, n = 50000, built;

	(void)state;
	s = malloc(n * 16 + 3);
	assert_non_null(s);
	s[k++] = '{';
	for (i = 0; i < n; i++)
		k += (size_t)sprintf(s + k, "%s\"%zu\":0", i ? "," : "", i);
	s[k++] = '}';
	s[k] = '\0';
	vd_budget_init(&budget, 0);
	assert_int_equal(parse_bounded(s, &b, &doc, err), 0);
	built = budget.used;
	/* The check ran with the whole object built: its array came on top. */
	assert_true(budget.peak >= built + n * sizeof(void *));
	vd_jdoc_free(&doc);
	vd_budget_init(&budget, built + n * sizeof(void *) / 2);
	assert_int_equal(parse_bounded(s, &b, &doc, err), VD_JSON_EMEMORY);
	assert_true(budget.exhausted);
	assert_int_equal(budget.used, 0);
	free(s);
}

/* The arena on its own: a limit of 0 charges nothing; chunks beyond the
 * first are mapped and given back; the budget is never overdrawn. */
static void test_arena_budget(void **state)
{
	vd_budget budget;
	vd_arena a;
	size_t got = 0, i;
	unsigned char *p;

	(void)state;
	vd_budget_init(&budget, 1u << 20);
	vd_arena_init(&a, 0);
	a.budget = &budget;
	while ((p = vd_arena_alloc(&a, 1000)) != NULL) {
		for (i = 0; i < 1000; i++)
			assert_int_equal(p[i], 0);
		memset(p, 0xa5, 1000);
		got += 1000;
	}
	assert_true(budget.exhausted);
	assert_true(budget.used <= budget.limit);
	/* No chunk is refused for slack: all but the chunk headers and the
	 * tail of each chunk went to allocations. */
	assert_true(got >= budget.limit - 64 * 1024);
	assert_int_equal(a.chunks, budget.used);
	vd_arena_free(&a);
	assert_int_equal(budget.used, 0);
	assert_int_equal(a.chunks, 0);

	/* One allocation larger than any chunk gets a chunk of its own. */
	vd_budget_init(&budget, 0);
	vd_arena_init(&a, 0);
	a.budget = &budget;
	assert_non_null(p = vd_arena_alloc(&a, 8u << 20));
	assert_int_equal(p[(8u << 20) - 1], 0);
	assert_true(budget.used >= 8u << 20);
	vd_arena_free(&a);
	assert_int_equal(budget.used, 0);
}

static void test_mem_alloc(void **state)
{
	size_t sizes[] = { 1, 100, VD_MEM_MAP_MIN - 1, VD_MEM_MAP_MIN, 3 * VD_MEM_MAP_MIN + 5 };
	vd_budget budget;
	unsigned char *p;
	size_t i, j;

	(void)state;
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		assert_non_null(p = vd_mem_alloc(sizes[i]));
		for (j = 0; j < sizes[i]; j += 997)
			assert_int_equal(p[j], 0);
		memset(p, 1, sizes[i]);
		vd_mem_free(p, sizes[i]);
	}
	vd_budget_init(&budget, 1000);
	assert_null(vd_budget_alloc(&budget, 1001));
	assert_true(budget.exhausted);
	assert_int_equal(budget.used, 0);
	assert_non_null(p = vd_budget_alloc(&budget, 1000));
	assert_int_equal(budget.used, 1000);
	assert_null(vd_budget_alloc(&budget, 1));
	vd_budget_free(&budget, p, 1000);
	assert_int_equal(budget.used, 0);
	assert_int_equal(budget.peak, 1000);
	/* No budget: nothing charged, nothing refused. */
	assert_int_equal(vd_budget_charge(NULL, SIZE_MAX), 0);
	assert_non_null(p = vd_budget_alloc(NULL, 10));
	vd_budget_free(NULL, p, 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scalars),
		cmocka_unit_test(test_integers),
		cmocka_unit_test(test_floats),
		cmocka_unit_test(test_int64_non_integers),
		cmocka_unit_test(test_containers),
		cmocka_unit_test(test_get),
		cmocka_unit_test(test_string_escapes),
		cmocka_unit_test(test_nul_keys_distinct),
		cmocka_unit_test(test_duplicate_keys),
		cmocka_unit_test(test_duplicate_key_offset),
		cmocka_unit_test(test_trailing_garbage),
		cmocka_unit_test(test_bad_numbers),
		cmocka_unit_test(test_bad_strings),
		cmocka_unit_test(test_bad_utf8),
		cmocka_unit_test(test_lone_surrogates),
		cmocka_unit_test(test_bad_structure),
		cmocka_unit_test(test_error_offset),
		cmocka_unit_test(test_depth),
		cmocka_unit_test(test_memory_limit),
		cmocka_unit_test(test_utf8_valid),
		cmocka_unit_test(test_jtype_names),
		cmocka_unit_test(test_not_nul_terminated),
		cmocka_unit_test(test_items_counted),
		cmocka_unit_test(test_items_refused_early),
		cmocka_unit_test(test_budget_exhausted),
		cmocka_unit_test(test_budget_shared),
		cmocka_unit_test(test_budget_duplicate_check),
		cmocka_unit_test(test_arena_budget),
		cmocka_unit_test(test_mem_alloc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

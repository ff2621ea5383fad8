/*
 * The canonical JSON writer against Python's own output. Every expected
 * string below was printed by CPython 3.11's
 * json.dumps(obj, sort_keys=True, separators=(",", ":")) with
 * ensure_ascii=True and with ensure_ascii=False; the hash frame and the
 * ledger chain are only as right as this byte-for-byte agreement.
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
#include "vd_jsonw.h"

/* A literal that may hold NULs, with its length. */
#define L(s) (s), sizeof(s) - 1

static void check_string(const char *in, size_t len, vd_jw_mode mode,
    const char *want, size_t want_len)
{
	vd_buf b;

	vd_buf_init(&b);
	assert_int_equal(vd_jw_string(&b, in, len, mode), 0);
	if (b.len != want_len || memcmp(b.p, want, want_len) != 0)
		fail_msg("mode %s: got %.*s, want %.*s",
		    mode == VD_JW_ASCII ? "ascii" : "utf8", (int)b.len, (const char *)b.p,
		    (int)want_len, want);
	vd_buf_free(&b);
}

static void test_controls(void **state)
{
	/* All of U+0000..U+001F, then '"', '\\', '/', DEL, 'a'. */
	static const char in[] =
	    "\000\001\002\003\004\005\006\007\010\011\012\013\014\015\016\017"
	    "\020\021\022\023\024\025\026\027\030\031\032\033\034\035\036\037"
	    "\"\\/\177a";
	static const char ascii[] =
	    "\"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n"
	    "\\u000b\\f\\r\\u000e\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015"
	    "\\u0016\\u0017\\u0018\\u0019\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f"
	    "\\\"\\\\/\\u007fa\"";
	static const char utf8[] =
	    "\"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n"
	    "\\u000b\\f\\r\\u000e\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015"
	    "\\u0016\\u0017\\u0018\\u0019\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f"
	    "\\\"\\\\/\177a\"";

	(void)state;
	check_string(L(in), VD_JW_ASCII, L(ascii));
	check_string(L(in), VD_JW_UTF8, L(utf8));
}

static void test_each_escape(void **state)
{
	static const struct {
		const char *in, *ascii, *utf8;
	} cases[] = {
		{ "\"", "\"\\\"\"", "\"\\\"\"" },
		{ "\\", "\"\\\\\"", "\"\\\\\"" },
		{ "\n", "\"\\n\"", "\"\\n\"" },
		{ "\r", "\"\\r\"", "\"\\r\"" },
		{ "\t", "\"\\t\"", "\"\\t\"" },
		{ "\b", "\"\\b\"", "\"\\b\"" },
		{ "\f", "\"\\f\"", "\"\\f\"" },
		{ "\v", "\"\\u000b\"", "\"\\u000b\"" },
		{ "\033", "\"\\u001b\"", "\"\\u001b\"" },
		{ "\037", "\"\\u001f\"", "\"\\u001f\"" },
		{ "\177", "\"\\u007f\"", "\"\177\"" },
		/* Python leaves '/' and the rest of printable ASCII alone. */
		{ "/", "\"/\"", "\"/\"" },
		{ " ~'<>&", "\" ~'<>&\"", "\" ~'<>&\"" },
		{ "", "\"\"", "\"\"" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < VD_ARRAY_LEN(cases); i++) {
		size_t n = strlen(cases[i].in);
		check_string(cases[i].in, n, VD_JW_ASCII, cases[i].ascii,
		    strlen(cases[i].ascii));
		check_string(cases[i].in, n, VD_JW_UTF8, cases[i].utf8,
		    strlen(cases[i].utf8));
	}
	/* NUL inside the string: the length, not a terminator, bounds it. */
	check_string(L("a\0b"), VD_JW_ASCII, L("\"a\\u0000b\""));
	check_string(L("a\0b"), VD_JW_UTF8, L("\"a\\u0000b\""));
}

static void test_non_ascii(void **state)
{
	/* U+00E9 U+20AC U+FFFF U+1F600 U+10000 U+10FFFF U+0800 U+07FF U+0080 */
	static const char in[] =
	    "\303\251\342\202\254\357\277\277\360\237\230\200\360\220\200\200"
	    "\364\217\277\277\340\240\200\337\277\302\200";
	static const char ascii[] =
	    "\"\\u00e9\\u20ac\\uffff\\ud83d\\ude00\\ud800\\udc00\\udbff\\udfff"
	    "\\u0800\\u07ff\\u0080\"";
	static const char utf8[] =
	    "\"\303\251\342\202\254\357\277\277\360\237\230\200\360\220\200\200"
	    "\364\217\277\277\340\240\200\337\277\302\200\"";

	(void)state;
	check_string(L(in), VD_JW_ASCII, L(ascii));
	check_string(L(in), VD_JW_UTF8, L(utf8));

	check_string(L("\360\237\230\200"), VD_JW_ASCII, L("\"\\ud83d\\ude00\""));
	check_string(L("caf\303\251"), VD_JW_ASCII, L("\"caf\\u00e9\""));
	check_string(L("caf\303\251"), VD_JW_UTF8, L("\"caf\303\251\""));
	/* Escaping hex is lowercase, with zero padding. */
	check_string(L("\302\240\303\277\304\200\352\257\215"), VD_JW_ASCII,
	    L("\"\\u00a0\\u00ff\\u0100\\uabcd\""));
	/* Mixed with escapes in UTF-8 mode: controls escaped, the rest raw. */
	check_string(L("\"\303\251\n\360\237\230\200\\"), VD_JW_UTF8,
	    L("\"\\\"\303\251\\n\360\237\230\200\\\\\""));
}

static void test_appends(void **state)
{
	vd_buf b;

	(void)state;
	vd_buf_init(&b);
	vd_buf_puts(&b, "x=");
	assert_int_equal(vd_jw_string(&b, "a", 1, VD_JW_ASCII), 0);
	assert_int_equal(vd_jw_int(&b, -5), 0);
	assert_int_equal(b.len, 7);
	assert_string_equal((const char *)b.p, "x=\"a\"-5");
	vd_buf_free(&b);
}

static void test_ints(void **state)
{
	static const struct {
		int64_t v;
		const char *s;
	} cases[] = {
		{ 0, "0" }, { 1, "1" }, { -1, "-1" }, { 1000000, "1000000" },
		{ INT64_MAX, "9223372036854775807" },
		{ INT64_MIN, "-9223372036854775808" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < VD_ARRAY_LEN(cases); i++) {
		vd_buf b;

		vd_buf_init(&b);
		assert_int_equal(vd_jw_int(&b, cases[i].v), 0);
		assert_string_equal((const char *)b.p, cases[i].s);
		vd_buf_free(&b);
	}
}

static void check_value(const char *json, vd_jw_mode mode, const char *want,
    size_t want_len)
{
	vd_jdoc doc;
	vd_buf b;
	char err[128];

	if (vd_json_parse((const uint8_t *)json, strlen(json), NULL, &doc, err,
	    sizeof(err)) != 0)
		fail_msg("refused %s: %s", json, err);
	vd_buf_init(&b);
	assert_int_equal(vd_jw_value(&b, doc.root, mode), 0);
	if (b.len != want_len || memcmp(b.p, want, want_len) != 0)
		fail_msg("%s: got %.*s, want %.*s", json, (int)b.len,
		    (const char *)b.p, (int)want_len, want);
	vd_buf_free(&b);
	vd_jdoc_free(&doc);
}

static void test_value_sorted(void **state)
{
	static const char src[] =
	    "{\"z\":[1,-0,true,false,null,\"\\u00e9\\/\\n\",{},[]],"
	    "\"B\":{\"y\":{\"b\":2,\"a\":1},\"x\":[{\"d\":4,\"c\":3}]},"
	    "\"a\":\"\\ud83d\\ude00\",\"\\u00e9\":-9223372036854775808,"
	    "\"\\ud83d\\ude00\":9223372036854775807,\"\":\"\\u0000\\u007f\","
	    "\"ab\":\"x\",\"\\uffff\":[[[]]],\"\\u0100\":0,\"\\u00ff\":1}";
	static const char ascii[] =
	    "{\"\":\"\\u0000\\u007f\",\"B\":{\"x\":[{\"c\":3,\"d\":4}],"
	    "\"y\":{\"a\":1,\"b\":2}},\"a\":\"\\ud83d\\ude00\",\"ab\":\"x\","
	    "\"z\":[1,0,true,false,null,\"\\u00e9/\\n\",{},[]],"
	    "\"\\u00e9\":-9223372036854775808,\"\\u00ff\":1,\"\\u0100\":0,"
	    "\"\\uffff\":[[[]]],\"\\ud83d\\ude00\":9223372036854775807}";
	static const char utf8[] =
	    "{\"\":\"\\u0000\177\",\"B\":{\"x\":[{\"c\":3,\"d\":4}],"
	    "\"y\":{\"a\":1,\"b\":2}},\"a\":\"\360\237\230\200\",\"ab\":\"x\","
	    "\"z\":[1,0,true,false,null,\"\303\251/\\n\",{},[]],"
	    "\"\303\251\":-9223372036854775808,\"\303\277\":1,\"\304\200\":0,"
	    "\"\357\277\277\":[[[]]],\"\360\237\230\200\":9223372036854775807}";

	(void)state;
	check_value(src, VD_JW_ASCII, L(ascii));
	check_value(src, VD_JW_UTF8, L(utf8));
}

static void test_key_order(void **state)
{
	/* Code point order, not UTF-16 order: U+FFFF sorts before U+1F600,
	 * although its UTF-16 unit 0xffff is above the surrogate 0xd83d; a
	 * prefix sorts first, even when the longer key continues with NUL. */
	static const char src[] =
	    "{\"\\ud83d\\ude00\":1,\"\\u00e9\":2,\"B\":3,\"a\":4,\"\":5,"
	    "\"a\\u0000\":6,\"ab\":7,\"\\uffff\":8,\"~\":9}";
	static const char ascii[] =
	    "{\"\":5,\"B\":3,\"a\":4,\"a\\u0000\":6,\"ab\":7,\"~\":9,"
	    "\"\\u00e9\":2,\"\\uffff\":8,\"\\ud83d\\ude00\":1}";
	static const char utf8[] =
	    "{\"\":5,\"B\":3,\"a\":4,\"a\\u0000\":6,\"ab\":7,\"~\":9,"
	    "\"\303\251\":2,\"\357\277\277\":8,\"\360\237\230\200\":1}";

	(void)state;
	check_value(src, VD_JW_ASCII, L(ascii));
	check_value(src, VD_JW_UTF8, L(utf8));
	check_value("{\"\\ud83d\\ude00\":0,\"\\u00e9\":0,\"B\":0,\"a\":0}", VD_JW_ASCII,
	    L("{\"B\":0,\"a\":0,\"\\u00e9\":0,\"\\ud83d\\ude00\":0}"));
}

static void test_value_scalars(void **state)
{
	(void)state;
	check_value("null", VD_JW_ASCII, L("null"));
	check_value("true", VD_JW_ASCII, L("true"));
	check_value("false", VD_JW_UTF8, L("false"));
	check_value("-0", VD_JW_ASCII, L("0"));
	check_value("  42  ", VD_JW_ASCII, L("42"));
	check_value("-9223372036854775808", VD_JW_ASCII, L("-9223372036854775808"));
	check_value("\"\\u00E9\"", VD_JW_ASCII, L("\"\\u00e9\""));
	check_value("[ ]", VD_JW_ASCII, L("[]"));
	check_value("{ }", VD_JW_ASCII, L("{}"));
	check_value("[ [ 1 , 2 ] , { \"k\" : [ ] } ]", VD_JW_UTF8, L("[[1,2],{\"k\":[]}]"));
}

static void check_refused(const char *json)
{
	vd_jdoc doc;
	vd_buf b;
	char err[128];

	if (vd_json_parse((const uint8_t *)json, strlen(json), NULL, &doc, err,
	    sizeof(err)) != 0)
		fail_msg("refused %s: %s", json, err);
	vd_buf_init(&b);
	if (vd_jw_value(&b, doc.root, VD_JW_ASCII) != -1)
		fail_msg("ascii wrote %s", json);
	vd_buf_free(&b);
	vd_buf_init(&b);
	if (vd_jw_value(&b, doc.root, VD_JW_UTF8) != -1)
		fail_msg("utf8 wrote %s", json);
	vd_buf_free(&b);
	vd_jdoc_free(&doc);
}

static void test_value_refusals(void **state)
{
	static const char *const cases[] = {
		"1.0", "1e3", "-0.0", "[1,2.5]", "{\"a\":{\"b\":[0.1]}}",
		"{\"a\":1,\"b\":1E-3}",
		"9223372036854775808", "-9223372036854775809",
		"18446744073709551615", "18446744073709551616",
		"[0,{\"k\":99999999999999999999999}]",
	};
	size_t i;

	(void)state;
	for (i = 0; i < VD_ARRAY_LEN(cases); i++)
		check_refused(cases[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_controls),
		cmocka_unit_test(test_each_escape),
		cmocka_unit_test(test_non_ascii),
		cmocka_unit_test(test_appends),
		cmocka_unit_test(test_ints),
		cmocka_unit_test(test_value_sorted),
		cmocka_unit_test(test_key_order),
		cmocka_unit_test(test_value_scalars),
		cmocka_unit_test(test_value_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

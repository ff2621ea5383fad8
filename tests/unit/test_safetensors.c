/*
 * The safetensors container, from bytes built in memory: what a valid
 * file may look like, and every structural fault being refused as
 * checkpoint_integrity ("not a safetensors artifact").
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

#include "vd_limits.h"
#include "vd_safetensors.h"

#define NOT_ST "not a safetensors artifact: "

/* 8-byte little-endian length, the header, `pad` spaces, data_len bytes. */
static uint8_t *st_build(const char *hdr, size_t pad, uint64_t data_len, size_t *len)
{
	size_t h = strlen(hdr), n = 8 + h + pad + (size_t)data_len, i;
	uint64_t hl = h + pad;
	uint8_t *b = malloc(n ? n : 1);

	assert_non_null(b);
	for (i = 0; i < 8; i++)
		b[i] = (uint8_t)(hl >> (8 * i));
	memcpy(b + 8, hdr, h);
	memset(b + 8 + h, ' ', pad);
	for (i = 8 + h + pad; i < n; i++)
		b[i] = (uint8_t)i;
	*len = n;
	return b;
}

/* The whole file path: header length, then the header against the rest. */
static vd_code st_load(const char *hdr, size_t pad, uint64_t data_len,
    uint32_t file_index, vd_st_file *f, vd_err *err)
{
	size_t len;
	uint8_t *b = st_build(hdr, pad, data_len, &len);
	uint64_t hlen = 0;
	vd_code rc;

	memset(err, 0, sizeof(*err));
	rc = vd_st_header_len(b, len, 0, &hlen, err);
	if (rc == VD_OK) {
		assert_true(hlen == strlen(hdr) + pad);
		rc = vd_st_parse(b + 8, (size_t)hlen, len - 8 - hlen, file_index, NULL, f, err);
	}
	free(b);
	return rc;
}

static void load_ok(const char *hdr, size_t pad, uint64_t data_len, vd_st_file *f)
{
	vd_err err;

	if (st_load(hdr, pad, data_len, 0, f, &err) != VD_OK)
		fail_msg("refused %s: %s", hdr, err.msg);
	assert_int_equal(err.code, VD_OK);
}

static void test_valid_basic(void **state)
{
	static const char hdr[] =
	    "{\"a.w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}";
	vd_st_file f;
	vd_err err;

	(void)state;
	assert_int_equal(st_load(hdr, 0, 24, 5, &f, &err), VD_OK);
	assert_int_equal(f.count, 1);
	assert_int_equal(f.tensors[0].name.len, 3);
	assert_memory_equal(f.tensors[0].name.p, "a.w", 3);
	assert_int_equal(f.tensors[0].dtype, VD_DT_F32);
	assert_int_equal(f.tensors[0].rank, 2);
	assert_int_equal(f.tensors[0].shape[0], 2);
	assert_int_equal(f.tensors[0].shape[1], 3);
	assert_int_equal(f.tensors[0].begin, 0);
	assert_int_equal(f.tensors[0].end, 24);
	assert_int_equal(f.tensors[0].file, 5);
	assert_int_equal(f.data_start, 8 + strlen(hdr));
	assert_int_equal(f.data_len, 24);
	vd_st_free(&f);
	assert_int_equal(f.count, 0);
	assert_null(f.tensors);
}

static void test_valid_any_order(void **state)
{
	/* Stored back to front; the result keeps the file's order. */
	static const char hdr[] =
	    "{\"z\":{\"data_offsets\":[12,16],\"shape\":[2],\"dtype\":\"F16\"},"
	    "\"m\":{\"dtype\":\"BF16\",\"data_offsets\":[4,12],\"shape\":[2,2]},"
	    "\"a\":{\"shape\":[1],\"dtype\":\"F32\",\"data_offsets\":[0,4]}}";
	vd_st_file f;

	(void)state;
	load_ok(hdr, 0, 16, &f);
	assert_int_equal(f.count, 3);
	assert_string_equal(f.tensors[0].name.p, "z");
	assert_int_equal(f.tensors[0].dtype, VD_DT_F16);
	assert_int_equal(f.tensors[0].begin, 12);
	assert_string_equal(f.tensors[1].name.p, "m");
	assert_int_equal(f.tensors[1].dtype, VD_DT_BF16);
	assert_string_equal(f.tensors[2].name.p, "a");
	assert_int_equal(f.tensors[2].end, 4);
	vd_st_free(&f);
}

static void test_valid_zero_length(void **state)
{
	/* Empty tensors at the start, in the middle and at the end. */
	static const char hdr[] =
	    "{\"e1\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[0,0]},"
	    "\"w\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,6]},"
	    "\"e2\":{\"dtype\":\"BF16\",\"shape\":[2,0,5],\"data_offsets\":[6,6]},"
	    "\"v\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[6,10]},"
	    "\"e3\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[10,10]}}";
	vd_st_file f;

	(void)state;
	load_ok(hdr, 0, 10, &f);
	assert_int_equal(f.count, 5);
	assert_int_equal(f.tensors[0].rank, 2);
	assert_int_equal(f.tensors[0].shape[0], 0);
	assert_int_equal(f.tensors[2].rank, 3);
	vd_st_free(&f);

	/* Only empty tensors: an empty data buffer. */
	load_ok("{\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
	    "\"f\":{\"dtype\":\"F16\",\"shape\":[7,0],\"data_offsets\":[0,0]}}", 0, 0, &f);
	assert_int_equal(f.count, 2);
	vd_st_free(&f);
}

static void test_valid_zero_dim_large_other(void **state)
{
	/* A zero dimension makes the tensor empty whatever the other
	 * dimensions are: element_size * product(shape) is 0. */
	vd_st_file f;
	vd_err err;

	(void)state;
	load_ok("{\"e\":{\"dtype\":\"F32\",\"shape\":[0,4611686018427387904],"
	    "\"data_offsets\":[0,0]}}", 0, 0, &f);
	vd_st_free(&f);
	if (st_load("{\"e\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,0],"
	    "\"data_offsets\":[0,0]}}", 0, 0, 0, &f, &err) != VD_OK)
		fail_msg("a zero-size tensor refused: %s", err.msg);
	vd_st_free(&f);
}

static void test_valid_scalar(void **state)
{
	vd_st_file f;

	(void)state;
	load_ok("{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
	    "\"h\":{\"dtype\":\"F16\",\"shape\":[],\"data_offsets\":[4,6]}}", 0, 6, &f);
	assert_int_equal(f.count, 2);
	assert_int_equal(f.tensors[0].rank, 0);
	assert_non_null(f.tensors[0].shape);
	assert_int_equal(f.tensors[1].rank, 0);
	assert_int_equal(f.tensors[1].end, 6);
	vd_st_free(&f);
}

static void test_valid_metadata_padding(void **state)
{
	static const char hdr[] =
	    "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
	    "\"__metadata__\":{\"format\":\"pt\",\"empty\":\"\",\"\\u00e9\":\"\\u00e9\"},"
	    "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}";
	vd_st_file f;
	size_t pad;

	(void)state;
	/* Writers pad the header with spaces, usually to a multiple of 8. */
	for (pad = 0; pad < 9; pad++) {
		load_ok(hdr, pad, 8, &f);
		assert_int_equal(f.count, 2);
		assert_string_equal(f.tensors[0].name.p, "a");
		assert_string_equal(f.tensors[1].name.p, "b");
		assert_int_equal(f.data_start, 8 + strlen(hdr) + pad);
		vd_st_free(&f);
	}
	load_ok("{\"__metadata__\":{}}", 0, 0, &f);
	assert_int_equal(f.count, 0);
	vd_st_free(&f);
	load_ok("{}", 6, 0, &f);
	assert_int_equal(f.count, 0);
	assert_int_equal(f.data_start, 16);
	vd_st_free(&f);
	/* Whitespace inside the JSON is JSON's business. */
	load_ok("{ \"a\" : { \"dtype\" : \"F16\" , \"shape\" : [ 2 ] ,\n"
	    "\"data_offsets\" : [ 0 , 4 ] } }", 3, 4, &f);
	assert_int_equal(f.count, 1);
	vd_st_free(&f);
}

static void test_valid_names(void **state)
{
	vd_st_file f;

	(void)state;
	load_ok("{\"\\u00e9t\\u00e9.\\ud83d\\ude00\":{\"dtype\":\"F32\",\"shape\":[1],"
	    "\"data_offsets\":[0,4]}}", 0, 4, &f);
	assert_int_equal(f.tensors[0].name.len, 10);
	assert_memory_equal(f.tensors[0].name.p, "\xc3\xa9t\xc3\xa9.\xf0\x9f\x98\x80", 10);
	vd_st_free(&f);
}

static void test_valid_all_dtypes(void **state)
{
	vd_buf b;
	vd_st_file f;
	uint64_t pos = 0;
	unsigned d;

	(void)state;
	vd_buf_init(&b);
	vd_buf_putc(&b, '{');
	for (d = 0; d < VD_DT_COUNT; d++) {
		uint64_t n = 3ull * vd_dtype_size((vd_dtype)d);
		vd_buf_printf(&b, "%s\"t%u\":{\"dtype\":\"%s\",\"shape\":[3],"
		    "\"data_offsets\":[%llu,%llu]}", d ? "," : "", d,
		    vd_dtype_name((vd_dtype)d), (unsigned long long)pos,
		    (unsigned long long)(pos + n));
		pos += n;
	}
	vd_buf_putc(&b, '}');
	assert_false(b.oom);
	load_ok((const char *)b.p, 0, pos, &f);
	assert_int_equal(f.count, VD_DT_COUNT);
	for (d = 0; d < VD_DT_COUNT; d++)
		assert_int_equal(f.tensors[d].dtype, d);
	vd_st_free(&f);
	vd_buf_free(&b);
}

static void test_valid_max_rank(void **state)
{
	vd_buf b;
	vd_st_file f;
	vd_err err;
	int i;

	(void)state;
	vd_buf_init(&b);
	vd_buf_puts(&b, "{\"r\":{\"dtype\":\"F32\",\"data_offsets\":[0,4],\"shape\":[1");
	for (i = 1; i < VD_ST_MAX_RANK; i++)
		vd_buf_puts(&b, ",1");
	vd_buf_puts(&b, "]}}");
	load_ok((const char *)b.p, 0, 4, &f);
	assert_int_equal(f.tensors[0].rank, VD_ST_MAX_RANK);
	vd_st_free(&f);
	vd_buf_free(&b);

	/* One more dimension is refused. */
	vd_buf_init(&b);
	vd_buf_puts(&b, "{\"r\":{\"dtype\":\"F32\",\"data_offsets\":[0,4],\"shape\":[1");
	for (i = 0; i < VD_ST_MAX_RANK; i++)
		vd_buf_puts(&b, ",1");
	vd_buf_puts(&b, "]}}");
	assert_int_equal(st_load((const char *)b.p, 0, 4, 0, &f, &err),
	    VD_CHECKPOINT_INTEGRITY);
	assert_non_null(strstr(err.msg, "rank 65"));
	vd_buf_free(&b);
}

static void test_header_len(void **state)
{
	uint8_t pre[8];
	uint64_t hlen;
	vd_err err;
	int i;

#define SET_LEN(v) do { for (i = 0; i < 8; i++) pre[i] = (uint8_t)((uint64_t)(v) >> (8 * i)); } while (0)
#define EXPECT(fsize, cap, want) do { memset(&err, 0, sizeof(err)); hlen = 777; \
	assert_int_equal(vd_st_header_len(pre, (fsize), (cap), &hlen, &err), (want)); \
	if ((want) != VD_OK) { \
		assert_int_equal(err.code, (want)); \
		assert_int_equal(strncmp(err.msg, NOT_ST, strlen(NOT_ST)), 0); \
		assert_int_equal(hlen, 777); } } while (0)

	(void)state;
	SET_LEN(2);
	EXPECT(10, 0, VD_OK);
	assert_int_equal(hlen, 2);
	EXPECT(1000, 0, VD_OK);
	/* A file shorter than the length prefix itself. */
	EXPECT(7, 0, VD_CHECKPOINT_INTEGRITY);
	EXPECT(0, 0, VD_CHECKPOINT_INTEGRITY);
	/* Past the end of the file. */
	EXPECT(9, 0, VD_CHECKPOINT_INTEGRITY);
	assert_non_null(strstr(err.msg, "past the end"));
	SET_LEN(100);
	EXPECT(107, 0, VD_CHECKPOINT_INTEGRITY);
	EXPECT(108, 0, VD_OK);
	SET_LEN(UINT64_MAX);
	EXPECT(UINT64_MAX, 0, VD_CHECKPOINT_INTEGRITY);
	SET_LEN(UINT64_MAX - 8);
	EXPECT(UINT64_MAX, UINT64_MAX, VD_OK);
	SET_LEN(UINT64_MAX - 7);
	EXPECT(UINT64_MAX, UINT64_MAX, VD_CHECKPOINT_INTEGRITY);
	/* Too short for "{}". */
	SET_LEN(0);
	EXPECT(100, 0, VD_CHECKPOINT_INTEGRITY);
	assert_non_null(strstr(err.msg, "too short"));
	SET_LEN(1);
	EXPECT(100, 0, VD_CHECKPOINT_INTEGRITY);
	/* The cap: the default, and one given by the caller. */
	SET_LEN(VD_ST_MAX_HEADER_DEFAULT);
	EXPECT(VD_ST_MAX_HEADER_DEFAULT + 8, 0, VD_OK);
	SET_LEN(VD_ST_MAX_HEADER_DEFAULT + 1);
	EXPECT(VD_ST_MAX_HEADER_DEFAULT + 100, 0, VD_CHECKPOINT_INTEGRITY);
	assert_non_null(strstr(err.msg, "exceeds the limit"));
	EXPECT(VD_ST_MAX_HEADER_DEFAULT + 100, VD_ST_MAX_HEADER_DEFAULT + 1, VD_OK);
	SET_LEN(17);
	EXPECT(1000, 16, VD_CHECKPOINT_INTEGRITY);
	EXPECT(1000, 17, VD_OK);
	/* Little-endian: the first byte is the least significant. */
	pre[0] = 0x34; pre[1] = 0x12;
	for (i = 2; i < 8; i++)
		pre[i] = 0;
	EXPECT(0x2000, 0, VD_OK);
	assert_int_equal(hlen, 0x1234);
#undef EXPECT
#undef SET_LEN
}

struct fault {
	const char *hdr;
	uint64_t data_len;
	const char *why;    /* part of the message */
};

static void check_faults(const struct fault *cases, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		vd_st_file f;
		vd_err err;
		vd_code rc;

		memset(&f, 0, sizeof(f));
		rc = st_load(cases[i].hdr, 0, cases[i].data_len, 0, &f, &err);
		print_message("case %zu: %s\n", i, err.msg);
		if (rc != VD_CHECKPOINT_INTEGRITY)
			fail_msg("case %zu (%s): code %d, want checkpoint_integrity",
			    i, cases[i].hdr, (int)rc);
		assert_int_equal(err.code, VD_CHECKPOINT_INTEGRITY);
		assert_int_equal(strncmp(err.msg, NOT_ST, strlen(NOT_ST)), 0);
		if (strstr(err.msg, cases[i].why) == NULL)
			fail_msg("case %zu: message \"%s\" lacks \"%s\"", i, err.msg,
			    cases[i].why);
		/* Nothing is left to free. */
		assert_null(f.tensors);
		assert_int_equal(f.count, 0);
		assert_null(f.doc.root);
		vd_st_free(&f);
	}
}

#define F32_A(off) "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":" off "}"

static void test_fault_json(void **state)
{
	static const struct fault cases[] = {
		{ "[]", 0, "does not start with '{'" },
		{ " {}", 0, "does not start with '{'" },
		{ "\"{}\"", 0, "does not start with '{'" },
		{ "\x80\x03}.", 0, "does not start with '{'" },
		{ "{\"a\":}", 0, "not valid JSON" },
		{ "{\"a\":1", 0, "not valid JSON" },
		{ "{}x", 0, "not valid JSON" },
		{ "{}\n{}", 0, "not valid JSON" },
		{ "{\"\xff\":{}}", 0, "not valid JSON" },
		{ "{" F32_A("[0,4]") "," F32_A("[4,8]") "}", 8, "duplicate object key" },
		{ "{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate object key" },
		{ "{\"a\":1,\"b\":NaN}", 0, "not valid JSON" },
	};

	(void)state;
	check_faults(cases, VD_ARRAY_LEN(cases));
}

static void test_fault_padding_not_space(void **state)
{
	/* Only spaces may follow the JSON; a NUL pad is garbage. */
	static const char hdr[] = "{}\0\0\0\0\0\0";
	uint8_t b[8 + sizeof(hdr) - 1];
	vd_st_file f;
	vd_err err;

	(void)state;
	memset(b, 0, sizeof(b));
	b[0] = sizeof(hdr) - 1;
	memcpy(b + 8, hdr, sizeof(hdr) - 1);
	memset(&err, 0, sizeof(err));
	assert_int_equal(vd_st_parse(b + 8, sizeof(hdr) - 1, 0, 0, NULL, &f, &err),
	    VD_CHECKPOINT_INTEGRITY);
	memset(&err, 0, sizeof(err));
	assert_int_equal(vd_st_parse(b + 8, 0, 0, 0, NULL, &f, &err), VD_CHECKPOINT_INTEGRITY);
}

static void test_fault_dtype(void **state)
{
	static const struct fault cases[] = {
		{ "{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype" },
		{ "{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype" },
		{ "{\"a\":{\"dtype\":\"float32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype" },
		{ "{\"a\":{\"dtype\":\"F32 \",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype" },
		{ "{\"a\":{\"dtype\":\"F32\\u0000\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype" },
		{ "{\"a\":{\"dtype\":\"\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype" },
		{ "{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype" },
		{ "{\"a\":{\"dtype\":null,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype" },
		{ "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype" },
	};

	(void)state;
	check_faults(cases, VD_ARRAY_LEN(cases));
}

static void test_fault_shape(void **state)
{
	static const struct fault cases[] = {
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
		  "not a non-negative integer" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,-2],\"data_offsets\":[0,16]}}", 16,
		  "not a non-negative integer" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4,
		  "not a non-negative integer" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1e0],\"data_offsets\":[0,4]}}", 4,
		  "not a non-negative integer" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4,
		  "not a non-negative integer" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[[1]],\"data_offsets\":[0,4]}}", 4,
		  "not a non-negative integer" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[true],\"data_offsets\":[0,4]}}", 4,
		  "not a non-negative integer" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[18446744073709551616],\"data_offsets\":[0,4]}}",
		  4, "not a non-negative integer" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", 4, "no shape" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":null,\"data_offsets\":[0,4]}}", 4, "no shape" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,4]}}", 4, "no shape" },
		{ "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "no shape" },
		/* 4 * 2^32 * 2^32 does not fit in 64 bits. */
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
		  "\"data_offsets\":[0,0]}}", 0, "overflows" },
		{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[18446744073709551615,2],"
		  "\"data_offsets\":[0,0]}}", 0, "overflows" },
		{ "{\"a\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952],"
		  "\"data_offsets\":[0,0]}}", 0, "overflows" },
		/* As the reference library counts: elements first, so a product
		 * that overflows before a later zero dimension is refused. */
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,0],"
		  "\"data_offsets\":[0,0]}}", 0, "overflows" },
	};

	(void)state;
	check_faults(cases, VD_ARRAY_LEN(cases));
}

static void test_fault_offsets(void **state)
{
	static const struct fault cases[] = {
		{ "{" F32_A("[0]") "}", 4, "data_offsets" },
		{ "{" F32_A("[]") "}", 4, "data_offsets" },
		{ "{" F32_A("[0,4,8]") "}", 8, "data_offsets" },
		{ "{" F32_A("{\"begin\":0,\"end\":4}") "}", 4, "data_offsets" },
		{ "{" F32_A("null") "}", 4, "data_offsets" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "data_offsets" },
		{ "{" F32_A("[4,0]") "}", 4, "ends before it begins" },
		{ "{" F32_A("[0.0,4]") "}", 4, "not non-negative integers" },
		{ "{" F32_A("[0,4.0]") "}", 4, "not non-negative integers" },
		{ "{" F32_A("[\"0\",\"4\"]") "}", 4, "not non-negative integers" },
		{ "{" F32_A("[-4,0]") "}", 4, "not non-negative integers" },
		{ "{" F32_A("[0,null]") "}", 4, "not non-negative integers" },
		{ "{" F32_A("[0,18446744073709551620]") "}", 4, "not non-negative integers" },
	};

	(void)state;
	check_faults(cases, VD_ARRAY_LEN(cases));
}

#define F32_T(name, b, e) "\"" name "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" #b "," #e "]}"

static void test_fault_coverage(void **state)
{
	static const struct fault cases[] = {
		/* A hole between, before and after. */
		{ "{" F32_T("a", 0, 4) "," F32_T("b", 8, 12) "}", 12, "hole" },
		{ "{" F32_T("a", 4, 8) "}", 8, "hole" },
		{ "{" F32_T("a", 0, 4) "}", 8, "cover 4 of the 8" },
		{ "{" F32_T("a", 0, 4) ",\"e\":{\"dtype\":\"F32\",\"shape\":[0],"
		  "\"data_offsets\":[9,9]}}", 4, "hole" },
		/* Overlaps. */
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "overlap" },
		{ "{" F32_T("a", 0, 4) "," F32_T("b", 0, 4) "}", 4, "overlap" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
		  F32_T("b", 4, 8) "}", 16, "overlap" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		  "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}", 8, "overlap" },
		/* Trailing bytes, and tensors past the data. */
		{ "{" F32_T("a", 0, 4) "}", 5, "cover 4 of the 5" },
		{ "{}", 1, "cover 0 of the 1" },
		{ "{\"__metadata__\":{\"k\":\"v\"}}", 3, "cover 0 of the 3" },
		{ "{" F32_T("a", 0, 4) "," F32_T("b", 4, 8) "}", 4, "cover 8 of the 4" },
		{ "{" F32_T("a", 0, 4) "}", 0, "cover 4 of the 0" },
	};

	(void)state;
	check_faults(cases, VD_ARRAY_LEN(cases));
}

static void test_fault_size_mismatch(void **state)
{
	static const struct fault cases[] = {
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4,
		  "spans 4 bytes but its F32 shape needs 8" },
		{ "{\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
		  "spans 8 bytes but its F16 shape needs 4" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,0]}}", 0,
		  "needs 4" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,4]}}", 4,
		  "needs 0" },
		{ "{\"a\":{\"dtype\":\"BF16\",\"shape\":[3,3],\"data_offsets\":[0,17]}}", 17,
		  "needs 18" },
	};

	(void)state;
	check_faults(cases, VD_ARRAY_LEN(cases));
}

static void test_fault_entries(void **state)
{
	static const struct fault cases[] = {
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":1}}", 4,
		  "unknown field \"extra\"" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"Dtype\":\"F32\"}}",
		  4, "unknown field" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"dtype\":\"F32\"}}",
		  4, "duplicate object key" },
		{ "{\"a\":[\"F32\",[1],[0,4]]}", 4, "not described by an object" },
		{ "{\"a\":\"F32\"}", 4, "not described by an object" },
		{ "{\"a\":null}", 0, "not described by an object" },
		{ "{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ value \"k\" is not a string" },
		{ "{\"__metadata__\":{\"k\":null}}", 0, "is not a string" },
		{ "{\"__metadata__\":{\"a\":\"x\",\"k\":{}}}", 0, "is not a string" },
		{ "{\"__metadata__\":{\"k\":[\"v\"]}}", 0, "is not a string" },
		{ "{\"__metadata__\":\"format=pt\"}", 0, "__metadata__ is not an object" },
		{ "{\"__metadata__\":null}", 0, "__metadata__ is not an object" },
		{ "{\"__metadata__\":[]}", 0, "__metadata__ is not an object" },
	};

	(void)state;
	check_faults(cases, VD_ARRAY_LEN(cases));
}

static void test_dtypes(void **state)
{
	static const struct {
		vd_dtype d;
		const char *name;
		unsigned size;
		const char *token;
	} cases[] = {
		{ VD_DT_BOOL, "BOOL", 1, NULL },
		{ VD_DT_U8, "U8", 1, NULL },
		{ VD_DT_I8, "I8", 1, NULL },
		{ VD_DT_F8_E5M2, "F8_E5M2", 1, NULL },
		{ VD_DT_F8_E4M3, "F8_E4M3", 1, NULL },
		{ VD_DT_I16, "I16", 2, NULL },
		{ VD_DT_U16, "U16", 2, NULL },
		{ VD_DT_F16, "F16", 2, "float16" },
		{ VD_DT_BF16, "BF16", 2, "bfloat16" },
		{ VD_DT_I32, "I32", 4, NULL },
		{ VD_DT_U32, "U32", 4, NULL },
		{ VD_DT_F32, "F32", 4, "float32" },
		{ VD_DT_F64, "F64", 8, NULL },
		{ VD_DT_I64, "I64", 8, NULL },
		{ VD_DT_U64, "U64", 8, NULL },
	};
	size_t i;

	(void)state;
	assert_int_equal(VD_ARRAY_LEN(cases), VD_DT_COUNT);
	for (i = 0; i < VD_ARRAY_LEN(cases); i++) {
		assert_string_equal(vd_dtype_name(cases[i].d), cases[i].name);
		assert_int_equal(vd_dtype_size(cases[i].d), cases[i].size);
		if (cases[i].token == NULL)
			assert_null(vd_dtype_token(cases[i].d));
		else
			assert_string_equal(vd_dtype_token(cases[i].d), cases[i].token);
	}
	assert_int_equal(vd_dtype_size(VD_DT_COUNT), 0);
	assert_null(vd_dtype_token(VD_DT_COUNT));
	assert_string_equal(vd_dtype_name(VD_DT_COUNT), "?");
}

/* A header of n zero-size tensors "t000000".. (and __metadata__ first
 * when meta): the attack of many empty entries, in miniature. */
static char *empty_tensors(size_t n, int meta)
{
	char *s = malloc(n * 64 + 64);
	size_t i, k = 0;

	assert_non_null(s);
	k += (size_t)sprintf(s + k, "{%s", meta ? "\"__metadata__\":{\"format\":\"pt\"}" : "");
	for (i = 0; i < n; i++)
		k += (size_t)sprintf(s + k, "%s\"t%06zu\":{\"dtype\":\"F32\",\"shape\":[0],"
		    "\"data_offsets\":[0,0]}", i || meta ? "," : "", i);
	sprintf(s + k, "}");
	return s;
}

static vd_code parse_within(const char *hdr, const vd_parse_bounds *b, vd_st_file *f,
    vd_err *err)
{
	memset(err, 0, sizeof(*err));
	return vd_st_parse((const uint8_t *)hdr, strlen(hdr), 0, 0, b, f, err);
}

/* max_tensors counts the tensors, not __metadata__, together with those
 * of the files before: at the bound it parses, one past it is refused
 * naming the bound. */
static void test_bound_tensors(void **state)
{
	char *five = empty_tensors(5, 0), *five_meta = empty_tensors(5, 1);
	vd_parse_bounds b = { 5, 0, NULL };
	vd_st_file f;
	vd_err err;

	(void)state;
	assert_int_equal(parse_within(five, &b, &f, &err), VD_OK);
	assert_int_equal(f.count, 5);
	vd_st_free(&f);
	assert_int_equal(parse_within(five_meta, &b, &f, &err), VD_OK);
	assert_int_equal(f.count, 5);
	vd_st_free(&f);

	b.max_tensors = 4;
	assert_int_equal(parse_within(five, &b, &f, &err), VD_ARTIFACT_INVALID);
	assert_string_equal(err.msg, "declares more than 4 tensors (max_tensors)");
	assert_null(f.tensors);
	assert_int_equal(parse_within(five_meta, &b, &f, &err), VD_ARTIFACT_INVALID);
	assert_string_equal(err.msg, "declares more than 4 tensors (max_tensors)");

	/* Files before this one hold 3 of the 7 allowed. */
	b.max_tensors = 7;
	b.tensors_before = 3;
	assert_int_equal(parse_within(five, &b, &f, &err), VD_ARTIFACT_INVALID);
	assert_string_equal(err.msg,
	    "declares more than 7 tensors together with the weight files before it (max_tensors)");
	b.tensors_before = 2;
	assert_int_equal(parse_within(five, &b, &f, &err), VD_OK);
	vd_st_free(&f);
	/* The earlier files used them all: one tensor more is too many. */
	b.tensors_before = 7;
	assert_int_equal(parse_within(five, &b, &f, &err), VD_ARTIFACT_INVALID);
	assert_int_equal(parse_within("{\"__metadata__\":{}}", &b, &f, &err), VD_OK);
	assert_int_equal(f.count, 0);
	vd_st_free(&f);
	/* 0: no bound. */
	b.max_tensors = 0;
	assert_int_equal(parse_within(five, &b, &f, &err), VD_OK);
	vd_st_free(&f);
	free(five);
	free(five_meta);
}

/* Counted while the JSON is read: a header of many tensors over the
 * bound is refused having built no more than the first few. */
static void test_bound_tensors_early(void **state)
{
	char *many = empty_tensors(100000, 0);
	vd_budget budget;
	vd_parse_bounds b = { 10, 0, &budget };
	vd_st_file f;
	vd_err err;

	(void)state;
	vd_budget_init(&budget, 0);
	assert_int_equal(parse_within(many, &b, &f, &err), VD_ARTIFACT_INVALID);
	assert_non_null(strstr(err.msg, "(max_tensors)"));
	/* The arena's first chunk, and the duplicate check of one entry. */
	assert_true(budget.peak <= 65 * 1024);
	assert_int_equal(budget.used, 0);
	/* Built whole, the same header takes more than a thousand times that. */
	b.max_tensors = 0;
	assert_int_equal(parse_within(many, &b, &f, &err), VD_OK);
	assert_int_equal(f.count, 100000);
	assert_true(budget.used > 1000 * 64 * 1024);
	vd_st_free(&f);
	assert_int_equal(budget.used, 0);
	free(many);
}

/* Everything the parse allocates is charged: the JSON, the tensor array,
 * the shapes and the sorted ranges. Short of what a header needs, it is
 * refused naming max_job_memory, and nothing stays charged. */
static void test_bound_memory(void **state)
{
	char *hdr = empty_tensors(2000, 1);
	vd_budget budget;
	vd_parse_bounds b = { 0, 0, &budget };
	vd_st_file f;
	vd_err err;
	size_t held, peak, limit;
	char want[128];

	(void)state;
	vd_budget_init(&budget, 0);
	assert_int_equal(parse_within(hdr, &b, &f, &err), VD_OK);
	held = budget.used;
	peak = budget.peak;
	/* The tensors and their shapes are held beside the document. */
	assert_true(held >= f.doc.arena.used_total);
	assert_true(f.doc.arena.used_total >= 2000 * (sizeof(vd_st_tensor) + sizeof(vd_jval)));
	/* The range check's array came and went on top of it. */
	assert_true(peak >= held + 2000 * sizeof(void *));
	vd_st_free(&f);
	assert_int_equal(budget.used, 0);

	for (limit = 4096; limit < peak; limit += (peak - 4096) / 7) {
		vd_budget_init(&budget, limit);
		assert_int_equal(parse_within(hdr, &b, &f, &err), VD_ARTIFACT_INVALID);
		snprintf(want, sizeof(want), "needs more than %zu bytes to parse (max_job_memory)",
		    limit);
		assert_string_equal(err.msg, want);
		assert_true(budget.exhausted);
		assert_true(budget.peak <= limit);
		assert_int_equal(budget.used, 0);
		assert_null(f.tensors);
	}
	vd_budget_init(&budget, peak);
	assert_int_equal(parse_within(hdr, &b, &f, &err), VD_OK);
	assert_int_equal(f.count, 2000);
	vd_st_free(&f);
	free(hdr);
}

/* An ordinary header parses within the default bounds as it does without. */
static void test_bound_defaults_ordinary(void **state)
{
	static const char hdr[] =
	    "{\"__metadata__\":{\"format\":\"pt\"},"
	    "\"encoder.w\":{\"dtype\":\"BF16\",\"shape\":[4,4],\"data_offsets\":[0,32]},"
	    "\"encoder.b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[32,48]}}";
	vd_budget budget;
	vd_parse_bounds b = { VD_MAX_TENSORS_DEFAULT, 0, &budget };
	vd_st_file f;
	vd_err err;

	(void)state;
	vd_budget_init(&budget, VD_MAX_JOB_MEMORY_DEFAULT);
	memset(&err, 0, sizeof(err));
	assert_int_equal(vd_st_parse((const uint8_t *)hdr, strlen(hdr), 48, 1, &b, &f, &err),
	    VD_OK);
	assert_int_equal(f.count, 2);
	assert_string_equal(f.tensors[1].name.p, "encoder.b");
	assert_int_equal(f.tensors[1].file, 1);
	assert_true(budget.used > 0 && budget.used <= 64 * 1024);
	vd_st_free(&f);
	assert_int_equal(budget.used, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_basic),
		cmocka_unit_test(test_valid_any_order),
		cmocka_unit_test(test_valid_zero_length),
		cmocka_unit_test(test_valid_zero_dim_large_other),
		cmocka_unit_test(test_valid_scalar),
		cmocka_unit_test(test_valid_metadata_padding),
		cmocka_unit_test(test_valid_names),
		cmocka_unit_test(test_valid_all_dtypes),
		cmocka_unit_test(test_valid_max_rank),
		cmocka_unit_test(test_header_len),
		cmocka_unit_test(test_fault_json),
		cmocka_unit_test(test_fault_padding_not_space),
		cmocka_unit_test(test_fault_dtype),
		cmocka_unit_test(test_fault_shape),
		cmocka_unit_test(test_fault_offsets),
		cmocka_unit_test(test_fault_coverage),
		cmocka_unit_test(test_fault_size_mismatch),
		cmocka_unit_test(test_fault_entries),
		cmocka_unit_test(test_dtypes),
		cmocka_unit_test(test_bound_tensors),
		cmocka_unit_test(test_bound_tensors_early),
		cmocka_unit_test(test_bound_memory),
		cmocka_unit_test(test_bound_defaults_ordinary),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Malformed artifacts: every way an artifact can be broken gets the exact
 * code canonical-hash.md gives it, with a one-sentence detail naming what
 * is wrong, and a multiply-broken artifact gets the code of the first check
 * in the spec's order. Artifacts are built byte by byte at run time, so each
 * case shows exactly which bytes make it fail; the valid variants beside
 * them show the builders themselves produce artifacts the verifier accepts.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "lensemble/verify.h"
#include "vd_artifact.h"

/* round-00000 of the golden cases: the hash the reference gave the base
 * artifact below, whose tensors, data and frame are that case's. */
#define GOLDEN_HASH "4d7ed7dee40f9a70cd8c3601c869bcfbbce35ff92723da1ddd4937b6d8fcc753"
#define ZERO_HASH "0000000000000000000000000000000000000000000000000000000000000000"
#define CONFIG_HASH "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define BASE_DATA_LEN 128
#define HEADER_CAP (16u * 1024 * 1024)
#define SHARD0 "weights-00000-of-00002.safetensors"
#define SHARD1 "weights-00001-of-00002.safetensors"

/* One safetensors header entry; shape is a JSON array literal. */
#define T(name, dtype, shape, b, e) \
	"\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape \
	",\"data_offsets\":[" #b "," #e "]}"
#define BIAS(b, e) T("encoder.norm.bias", "F32", "[4]", b, e)
#define PATCH(b, e) T("encoder.patch_embed.weight", "F32", "[4,3]", b, e)
#define PROJ(b, e) T("predictor.proj.weight", "F32", "[4,4]", b, e)
#define ST_BASE "{" BIAS(0, 16) "," PATCH(16, 64) "," PROJ(64, 128) "}"

/* One tensor_manifest entry. */
#define M(name, group, dtype, shape) \
	"{\"name\":\"" name "\",\"group\":\"" group "\",\"dtype\":\"" dtype \
	"\",\"shape\":" shape "}"
#define M_BIAS M("encoder.norm.bias", "encoder", "float32", "[4]")
#define M_PATCH M("encoder.patch_embed.weight", "encoder", "float32", "[4,3]")
#define M_PROJ M("predictor.proj.weight", "predictor", "float32", "[4,4]")
#define MANIFEST "[" M_BIAS "," M_PATCH "," M_PROJ "]"

enum hfield {
	H_SCHEMA, H_HASH, H_PARENT, H_WMCP, H_ROUND, H_CONFIG, H_GROUPS,
	H_MANIFEST, H_FILES, H_CREATED, H_ARCH, H_COUNT
};

static const char *const hkeys[H_COUNT] = {
	"schema_version", "content_hash", "parent_hash", "wmcp_version",
	"round_index", "config_hash", "param_groups", "tensor_manifest",
	"weight_files", "created_at", "model_arch",
};

/* header.json as raw JSON values per field (NULL: field left out), plus
 * raw members appended after them. */
struct hdr {
	const char *v[H_COUNT];
	const char *extra;
};

struct fx {
	char base[4096];        /* fresh per case; removed afterwards */
	char dir[4200];         /* the artifact: base/art */
	char path[4400];
	char hash_json[VD_HASH_HEX_LEN + 3];
};

static char root[4096];
static unsigned case_seq;
/* The golden round-00000 tensor data, then filler for longer buffers. */
static uint8_t pool[1024];

static const char *datadir(void)
{
	const char *s = getenv("top_srcdir");
	static char path[4096];

	snprintf(path, sizeof(path), "%s/tests/data", s ? s : ".");
	return path;
}

static int slurp(const char *path, uint8_t **buf, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	long n;

	if (fp == NULL)
		return -1;
	if (fseek(fp, 0, SEEK_END) != 0 || (n = ftell(fp)) < 0) {
		fclose(fp);
		return -1;
	}
	rewind(fp);
	*buf = malloc((size_t)n + 1);
	if (*buf == NULL || fread(*buf, 1, (size_t)n, fp) != (size_t)n) {
		free(*buf);
		fclose(fp);
		return -1;
	}
	fclose(fp);
	*len = (size_t)n;
	return 0;
}

static int group_setup(void **state)
{
	char path[4200];
	const char *tmp = getenv("TMPDIR");
	uint8_t *buf;
	uint64_t hlen = 0;
	size_t len, i;
	int k;

	snprintf(path, sizeof(path), "%s/golden-cases/round-00000/weights.safetensors",
	    datadir());
	if (slurp(path, &buf, &len) < 0 || len < 8)
		return -1;
	for (k = 7; k >= 0; k--)
		hlen = (hlen << 8) | buf[k];
	if (hlen != strlen(ST_BASE) + 1 || len != 8 + hlen + BASE_DATA_LEN) {
		free(buf);
		return -1;
	}
	memcpy(pool, buf + 8 + hlen, BASE_DATA_LEN);
	free(buf);
	for (i = BASE_DATA_LEN; i < sizeof(pool); i++)
		pool[i] = (uint8_t)(i * 37 + 11);

	snprintf(root, sizeof(root), "%s/vd-malformed-XXXXXX",
	    tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
	return mkdtemp(root) == NULL ? -1 : 0;
}

static int group_teardown(void **state)
{
	return rmdir(root);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	snprintf(f->base, sizeof(f->base), "%s/case-%03u", root, ++case_seq);
	snprintf(f->dir, sizeof(f->dir), "%s/art", f->base);
	if (mkdir(f->base, 0700) < 0 || mkdir(f->dir, 0700) < 0) {
		free(f);
		return -1;
	}
	/* A verifier that blocks (say, opening a FIFO) fails the run instead
	 * of hanging it. */
	alarm(60);
	*state = f;
	return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static int teardown(void **state)
{
	struct fx *f = *state;
	int rc;

	alarm(0);
	rc = nftw(f->base, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return rc;
}

static const char *at(struct fx *f, const char *name)
{
	snprintf(f->path, sizeof(f->path), "%s/%s", f->dir, name);
	return f->path;
}

static void put_file(struct fx *f, const char *name, const void *p, size_t n)
{
	FILE *fp = fopen(at(f, name), "wb");

	assert_non_null(fp);
	if (n)
		assert_int_equal(fwrite(p, 1, n, fp), n);
	assert_int_equal(fclose(fp), 0);
}

/* A safetensors file whose length prefix says hlen, whatever the JSON's
 * real length: a prefix that lies is a case of its own. */
static void put_st_raw(struct fx *f, const char *name, uint64_t hlen,
    const char *json, const uint8_t *data, size_t dlen)
{
	size_t jlen = strlen(json);
	uint8_t *buf = malloc(8 + jlen + dlen + 1);
	int i;

	assert_non_null(buf);
	for (i = 0; i < 8; i++)
		buf[i] = (uint8_t)(hlen >> (8 * i));
	memcpy(buf + 8, json, jlen);
	if (dlen)
		memcpy(buf + 8 + jlen, data, dlen);
	put_file(f, name, buf, 8 + jlen + dlen);
	free(buf);
}

static void put_st(struct fx *f, const char *name, const char *json,
    const uint8_t *data, size_t dlen)
{
	put_st_raw(f, name, strlen(json), json, data, dlen);
}

static struct hdr hdr_base(void)
{
	struct hdr h = { {
		[H_SCHEMA] = "2",
		[H_HASH] = "\"" GOLDEN_HASH "\"",
		[H_PARENT] = "null",
		[H_WMCP] = "\"wmcp-1.0.0\"",
		[H_ROUND] = "0",
		[H_CONFIG] = "\"" CONFIG_HASH "\"",
		[H_GROUPS] = "[\"encoder\", \"predictor\"]",
		[H_MANIFEST] = MANIFEST,
		[H_FILES] = "[\"weights.safetensors\"]",
		[H_CREATED] = "\"2026-06-02T12:00:00.123456Z\"",
		[H_ARCH] = "null",
	}, NULL };

	return h;
}

static void put_header_as(struct fx *f, const char *name, const struct hdr *h)
{
	FILE *fp = fopen(at(f, name), "wb");
	const char *sep = "";
	int i;

	assert_non_null(fp);
	fputs("{\n", fp);
	for (i = 0; i < H_COUNT; i++) {
		if (h->v[i] == NULL)
			continue;
		fprintf(fp, "%s  \"%s\": %s", sep, hkeys[i], h->v[i]);
		sep = ",\n";
	}
	if (h->extra != NULL)
		fprintf(fp, "%s  %s", sep, h->extra);
	fputs("\n}\n", fp);
	assert_int_equal(fclose(fp), 0);
}

static void put_header(struct fx *f, const struct hdr *h)
{
	put_header_as(f, "header.json", h);
}

/* Give h the artifact's own content hash: the verifier recomputes it even
 * when the claimed one differs, so one run with a placeholder yields it. */
static void seal(struct fx *f, struct hdr *h)
{
	vd_verdict v;

	h->v[H_HASH] = "\"" ZERO_HASH "\"";
	put_header(f, h);
	vd_verify_artifact(f->dir, NULL, &v);
	if (v.code != VD_CHECKPOINT_INTEGRITY || strlen(v.content_hash) != VD_HASH_HEX_LEN)
		fail_msg("cannot seal an artifact that fails before hashing: %s: %s",
		    vd_code_name(v.code), v.detail);
	snprintf(f->hash_json, sizeof(f->hash_json), "\"%s\"", v.content_hash);
	h->v[H_HASH] = f->hash_json;
	put_header(f, h);
}

static void base_weights(struct fx *f)
{
	put_st(f, "weights.safetensors", ST_BASE, pool, BASE_DATA_LEN);
}

static void base_artifact(struct fx *f)
{
	struct hdr h = hdr_base();

	base_weights(f);
	put_header(f, &h);
}

/* bias and patch in shard 0, proj in shard 1, as the reference shards. */
static void sharded_artifact(struct fx *f)
{
	struct hdr h = hdr_base();

	put_st(f, SHARD0, "{" BIAS(0, 16) "," PATCH(16, 64) "}", pool, 64);
	put_st(f, SHARD1, "{" PROJ(0, 64) "}", pool + 64, 64);
	h.v[H_FILES] = "[\"" SHARD0 "\", \"" SHARD1 "\"]";
	put_header(f, &h);
}

static void put_index(struct fx *f, const char *weight_map)
{
	char buf[2048];

	snprintf(buf, sizeof(buf),
	    "{\"metadata\": {\"total_size\": 128}, \"weight_map\": %s}\n", weight_map);
	put_file(f, "weights.index.json", buf, strlen(buf));
}

/* Grow a file with spaces, which JSON ignores at the end. */
static void pad_to(struct fx *f, const char *name, size_t size)
{
	static char spaces[65536];
	FILE *fp = fopen(at(f, name), "ab");
	long have;

	assert_non_null(fp);
	memset(spaces, ' ', sizeof(spaces));
	assert_int_equal(fseek(fp, 0, SEEK_END), 0);
	have = ftell(fp);
	assert_true(have >= 0 && (size_t)have <= size);
	while ((size_t)have < size) {
		size_t n = size - (size_t)have;
		if (n > sizeof(spaces))
			n = sizeof(spaces);
		assert_int_equal(fwrite(spaces, 1, n, fp), n);
		have += (long)n;
	}
	assert_int_equal(fclose(fp), 0);
}

/* One sentence: text, no line break, not empty, not just a word. */
static void assert_sentence(const char *s)
{
	size_t n = strlen(s);

	if (n < 12 || strchr(s, ' ') == NULL || strchr(s, '\n') != NULL || s[0] == ' ' ||
	    s[n - 1] == ' ')
		fail_msg("detail \"%s\" is not a one-line sentence", s);
}

/* Check the code and that the detail names every needle (a
 * NULL-terminated list). */
static void check_verdict(vd_code rc, const vd_verdict *v, vd_code want,
    const char *needle, va_list ap)
{
	print_message("  %-24s %s\n", vd_code_name(rc), v->detail);
	if (rc != want || v->code != want)
		fail_msg("expected %s, got %s: %s", vd_code_name(want), vd_code_name(rc),
		    v->detail);
	if (want == VD_OK) {
		assert_string_equal(v->detail, "");
		assert_string_equal(v->facts.remediation, "");
		return;
	}
	assert_sentence(v->detail);
	/* Every failure says what to do about it. */
	assert_sentence(v->facts.remediation);
	for (; needle != NULL; needle = va_arg(ap, const char *))
		if (strstr(v->detail, needle) == NULL)
			fail_msg("detail \"%s\" does not mention \"%s\"", v->detail, needle);
}

static void expect_(struct fx *f, const vd_options *opt, vd_code want,
    const char *needle, ...)
{
	vd_verdict v;
	vd_code rc;
	va_list ap;

	rc = vd_verify_artifact(f->dir, opt, &v);
	va_start(ap, needle);
	check_verdict(rc, &v, want, needle, ap);
	va_end(ap);
}

#define EXPECT(f, opt, code, ...) expect_((f), (opt), (code), __VA_ARGS__, (const char *)NULL)
#define EXPECT_OK(f, opt) expect_((f), (opt), VD_OK, (const char *)NULL)

/* Verify within bounds, as the daemon does. */
static vd_code verify_within(struct fx *f, const vd_bounds *b, vd_verdict *v)
{
	int fd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	vd_code rc;

	assert_true(fd >= 0);
	rc = vd_artifact_verify_ex(fd, NULL, b, v, NULL, NULL);
	close(fd);
	return rc;
}

static void expect_within_(struct fx *f, const vd_bounds *b, vd_code want,
    const char *needle, ...)
{
	vd_verdict v;
	vd_code rc;
	va_list ap;

	rc = verify_within(f, b, &v);
	va_start(ap, needle);
	check_verdict(rc, &v, want, needle, ap);
	va_end(ap);
}

#define EXPECT_WITHIN(f, b, code, ...) \
	expect_within_((f), (b), (code), __VA_ARGS__, (const char *)NULL)
#define EXPECT_WITHIN_OK(f, b) expect_within_((f), (b), VD_OK, (const char *)NULL)

static void expect_ok_hash(struct fx *f, const char *hash)
{
	vd_verdict v;

	EXPECT_OK(f, NULL);
	vd_verify_artifact(f->dir, NULL, &v);
	assert_string_equal(v.content_hash, hash);
}

/* ---- truncated weight files ------------------------------------------ */

static void test_truncated_mid_data(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, "weights.safetensors", ST_BASE, pool, BASE_DATA_LEN - 10);
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "weights.safetensors",
	    "not a safetensors artifact");
}

static void test_truncated_mid_header(void **state)
{
	struct fx *f = *state;

	base_artifact(f);
	assert_int_equal(truncate(at(f, "weights.safetensors"), 8 + 100), 0);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "weights.safetensors", "past the end");
}

static void test_truncated_in_length_prefix(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_file(f, "weights.safetensors", "\xe8\x00\x00\x00\x00", 5);
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "weights.safetensors", "8-byte");
}

static void test_empty_weight_file(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_file(f, "weights.safetensors", "", 0);
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "weights.safetensors", "0 bytes");
}

/* ---- the header length prefix ---------------------------------------- */

static void test_header_len_u64_max(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st_raw(f, "weights.safetensors", UINT64_MAX, ST_BASE, pool, BASE_DATA_LEN);
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "weights.safetensors", "header length");
}

static void test_header_len_past_eof(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st_raw(f, "weights.safetensors", strlen(ST_BASE) + BASE_DATA_LEN + 1, ST_BASE,
	    pool, BASE_DATA_LEN);
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "weights.safetensors", "past the end");
}

static void test_header_len_above_cap(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st_raw(f, "weights.safetensors", 100000001, ST_BASE, pool, BASE_DATA_LEN);
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "100000001", "limit of 100000000");
}

/* The cap is inclusive: a length of exactly 100,000,000 is refused only
 * because this file is far shorter. */
static void test_header_len_at_cap(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st_raw(f, "weights.safetensors", 100000000, ST_BASE, pool, BASE_DATA_LEN);
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "100000000", "past the end");
}

static void test_header_len_option_cap(void **state)
{
	struct fx *f = *state;
	vd_options opt = { 0 };

	base_artifact(f);
	opt.max_header_len = 64;
	EXPECT(f, &opt, VD_CHECKPOINT_INTEGRITY, "weights.safetensors", "limit of 64");
	opt.max_header_len = strlen(ST_BASE);
	EXPECT_OK(f, &opt);
}

/* ---- data_offsets ----------------------------------------------------- */

static void test_offsets_overlap(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, "weights.safetensors", "{" BIAS(0, 16) "," PATCH(8, 56) "," PROJ(56, 120) "}",
	    pool, 120);
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "encoder.patch_embed.weight", "overlap");
}

static void test_offsets_hole(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, "weights.safetensors", "{" BIAS(0, 16) "," PATCH(20, 68) "," PROJ(68, 132) "}",
	    pool, 132);
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "encoder.patch_embed.weight", "hole");
}

static void test_offsets_reversed(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, "weights.safetensors", "{" BIAS(16, 0) "," PATCH(16, 64) "," PROJ(64, 128) "}",
	    pool, BASE_DATA_LEN);
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "encoder.norm.bias", "ends before it begins");
}

static void test_offsets_past_end(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	/* The offsets are self-consistent; only the buffer is too short. */
	put_st(f, "weights.safetensors", ST_BASE, pool, 64);
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "weights.safetensors", "128 of the 64");
}

static void test_trailing_bytes(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, "weights.safetensors", ST_BASE, pool, BASE_DATA_LEN + 4);
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "weights.safetensors", "128 of the 132");
}

/* ---- shapes and dtypes ------------------------------------------------ */

static void test_shape_product_overflow(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	/* 4 * (2^62 + 1) * 4 = 2^66 + 16: wrapped to 64 bits it is exactly the
	 * 16-byte span, so only a checked product refuses it. */
	put_st(f, "weights.safetensors",
	    "{" T("encoder.norm.bias", "F32", "[4611686018427387905,4]", 0, 16) ","
	    PATCH(16, 64) "," PROJ(64, 128) "}", pool, BASE_DATA_LEN);
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "encoder.norm.bias", "overflow");
}

static void test_bytes_shape_mismatch(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, "weights.safetensors",
	    "{" T("encoder.norm.bias", "F32", "[5]", 0, 16) "," PATCH(16, 64) ","
	    PROJ(64, 128) "}", pool, BASE_DATA_LEN);
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "encoder.norm.bias", "16 bytes", "20");
}

/* "float32" is the canonical token, not a safetensors dtype. */
static void test_dtype_unknown(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, "weights.safetensors",
	    "{" T("encoder.norm.bias", "float32", "[4]", 0, 16) "," PATCH(16, 64) ","
	    PROJ(64, 128) "}", pool, BASE_DATA_LEN);
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "encoder.norm.bias", "dtype");
}

static void test_dtype_i64(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, "weights.safetensors",
	    "{" T("encoder.norm.bias", "I64", "[2]", 0, 16) "," PATCH(16, 64) ","
	    PROJ(64, 128) "}", pool, BASE_DATA_LEN);
	put_header(f, &h);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "encoder.norm.bias", "I64");
}

static void test_dtype_f64(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, "weights.safetensors",
	    "{" BIAS(0, 16) "," PATCH(16, 64) ","
	    T("predictor.proj.weight", "F64", "[8]", 64, 128) "}", pool, BASE_DATA_LEN);
	put_header(f, &h);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "predictor.proj.weight", "F64");
}

/* ---- duplicates ------------------------------------------------------- */

static void test_duplicate_tensor_in_file(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, "weights.safetensors",
	    "{" BIAS(0, 16) "," PATCH(16, 64) "," PROJ(64, 128) "," BIAS(0, 16) "}",
	    pool, BASE_DATA_LEN);
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "weights.safetensors", "duplicate");
}

static void test_duplicate_key_in_header(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	h.extra = "\"round_index\": 0";
	put_header(f, &h);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "header.json", "duplicate");
}

static void test_tensor_in_two_shards(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();
	uint8_t data[80];

	memcpy(data, pool, 16);
	memcpy(data + 16, pool + 64, 64);
	put_st(f, SHARD0, "{" BIAS(0, 16) "," PATCH(16, 64) "}", pool, 64);
	put_st(f, SHARD1, "{" BIAS(0, 16) "," PROJ(16, 80) "}", data, sizeof(data));
	h.v[H_FILES] = "[\"" SHARD0 "\", \"" SHARD1 "\"]";
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "encoder.norm.bias", SHARD0, SHARD1);
}

/* ---- weights.index.json ----------------------------------------------- */

static void test_index_wrong_file(void **state)
{
	struct fx *f = *state;

	sharded_artifact(f);
	put_index(f, "{\"encoder.norm.bias\": \"" SHARD0 "\", "
	    "\"encoder.patch_embed.weight\": \"" SHARD0 "\", "
	    "\"predictor.proj.weight\": \"" SHARD0 "\"}");
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "weights.index.json",
	    "predictor.proj.weight", SHARD1);
}

static void test_index_missing_tensor(void **state)
{
	struct fx *f = *state;

	sharded_artifact(f);
	put_index(f, "{\"encoder.norm.bias\": \"" SHARD0 "\", "
	    "\"encoder.patch_embed.weight\": \"" SHARD0 "\"}");
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "weights.index.json", "2 tensors");
}

static void test_index_extra_tensor(void **state)
{
	struct fx *f = *state;

	sharded_artifact(f);
	put_index(f, "{\"encoder.norm.bias\": \"" SHARD0 "\", "
	    "\"encoder.patch_embed.weight\": \"" SHARD0 "\", "
	    "\"encoder.ghost\": \"" SHARD1 "\", "
	    "\"predictor.proj.weight\": \"" SHARD1 "\"}");
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "weights.index.json", "encoder.ghost");
}

static void test_index_not_json(void **state)
{
	struct fx *f = *state;

	sharded_artifact(f);
	put_file(f, "weights.index.json", "{\"weight_map\": {", 16);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "weights.index.json", "JSON");
}

/* ---- tensor_manifest against the weights ------------------------------ */

static void test_manifest_missing_tensor(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	h.v[H_MANIFEST] = "[" M_BIAS "," M_PATCH "]";
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "manifest", "2 tensors");
}

static void test_manifest_wrong_dtype(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	h.v[H_MANIFEST] = "[" M("encoder.norm.bias", "encoder", "float16", "[4]") ","
	    M_PATCH "," M_PROJ "]";
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "encoder.norm.bias", "dtype");
}

static void test_manifest_wrong_shape(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	h.v[H_MANIFEST] = "[" M_BIAS ","
	    M("encoder.patch_embed.weight", "encoder", "float32", "[3,4]") "," M_PROJ "]";
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "encoder.patch_embed.weight", "shape");
}

static void test_manifest_wrong_group(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	h.v[H_MANIFEST] = "[" M_BIAS "," M_PATCH ","
	    M("predictor.proj.weight", "encoder", "float32", "[4,4]") "]";
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "predictor.proj.weight", "group");
}

static void test_manifest_unsorted(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	h.v[H_MANIFEST] = "[" M_PATCH "," M_BIAS "," M_PROJ "]";
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "manifest", "encoder.patch_embed.weight");
}

/* ---- groups and residency --------------------------------------------- */

static void test_group_not_in_param_groups(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	h.v[H_GROUPS] = "[\"encoder\"]";
	put_header(f, &h);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "predictor.proj.weight", "param_groups");
}

static void test_residency_tensor(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, "weights.safetensors", "{" BIAS(0, 16) "," PATCH(16, 64) ","
	    T("head.fc.weight", "F32", "[2]", 128, 136) "," PROJ(64, 128) "}",
	    pool, 136);
	h.v[H_MANIFEST] = "[" M_BIAS "," M_PATCH ","
	    M("head.fc.weight", "head", "float32", "[2]") "," M_PROJ "]";
	put_header(f, &h);
	EXPECT(f, NULL, VD_RESIDENCY_VIOLATION, "head.fc.weight");
}

static void test_residency_param_group(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	h.v[H_GROUPS] = "[\"action_head\", \"encoder\", \"predictor\"]";
	put_header(f, &h);
	EXPECT(f, NULL, VD_RESIDENCY_VIOLATION, "action_head");
}

/* ---- weight_files names and file types -------------------------------- */

static void test_weight_file_parent(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();
	char path[4300];

	/* A valid weight file really is there, one level up. */
	base_weights(f);
	snprintf(path, sizeof(path), "%s/x", f->base);
	assert_int_equal(rename(at(f, "weights.safetensors"), path), 0);
	h.v[H_FILES] = "[\"../x\"]";
	put_header(f, &h);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "../x");
}

static void test_weight_file_subdir(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	assert_int_equal(mkdir(at(f, "a"), 0700), 0);
	put_st(f, "a/b", ST_BASE, pool, BASE_DATA_LEN);
	h.v[H_FILES] = "[\"a/b\"]";
	put_header(f, &h);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "a/b");
}

static void test_weight_file_dot(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	h.v[H_FILES] = "[\".\"]";
	put_header(f, &h);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "\".\"");
}

static void test_weight_file_absent(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	h.v[H_FILES] = "[\"weights.safetensors\", \"weights-extra.safetensors\"]";
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "weights-extra.safetensors", "missing");
}

static void test_weight_file_symlink(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, "real.bin", ST_BASE, pool, BASE_DATA_LEN);
	assert_int_equal(symlink("real.bin", at(f, "weights.safetensors")), 0);
	put_header(f, &h);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "weights.safetensors", "symbolic link");
}

static void test_weight_file_fifo(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	assert_int_equal(mkfifo(at(f, "weights.safetensors"), 0600), 0);
	put_header(f, &h);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "weights.safetensors", "regular file");
}

static void test_weight_file_directory(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	assert_int_equal(mkdir(at(f, "weights.safetensors"), 0700), 0);
	put_header(f, &h);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "weights.safetensors", "regular file");
}

static void test_weight_file_device_symlink(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	assert_int_equal(symlink("/dev/null", at(f, "weights.safetensors")), 0);
	put_header(f, &h);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "weights.safetensors", "symbolic link");
}

/* ---- header.json ------------------------------------------------------ */

static void test_header_missing(void **state)
{
	struct fx *f = *state;

	base_weights(f);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "header.json", "missing");
}

static void test_header_symlink(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	put_header_as(f, "real.json", &h);
	assert_int_equal(symlink("real.json", at(f, "header.json")), 0);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "header.json", "symbolic link");
}

static void test_header_fifo(void **state)
{
	struct fx *f = *state;

	base_weights(f);
	assert_int_equal(mkfifo(at(f, "header.json"), 0600), 0);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "header.json", "regular file");
}

static void test_header_not_json(void **state)
{
	struct fx *f = *state;
	static const char text[] = "schema_version = 2\nround_index = 0\n";

	base_weights(f);
	put_file(f, "header.json", text, sizeof(text) - 1);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "header.json", "JSON");
}

static void test_header_empty(void **state)
{
	struct fx *f = *state;

	base_weights(f);
	put_file(f, "header.json", "", 0);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "header.json", "JSON");
}

static void test_header_not_utf8(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	h.v[H_WMCP] = "\"wmcp-\xff\xfe\"";
	put_header(f, &h);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "header.json", "UTF-8");
}

static void test_header_too_large(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	put_header(f, &h);
	pad_to(f, "header.json", (size_t)HEADER_CAP + 1);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "header.json", "limit");
}

static void test_header_at_size_limit(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	put_header(f, &h);
	pad_to(f, "header.json", HEADER_CAP);
	expect_ok_hash(f, GOLDEN_HASH);
}

static void test_header_unknown_field(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	h.extra = "\"signature\": \"\"";
	put_header(f, &h);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "header.json", "signature");
}

static void test_header_v1_with_model_arch(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	h.v[H_SCHEMA] = "1";
	put_header(f, &h);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "header.json", "model_arch");
}

static void test_header_hash_uppercase(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	h.v[H_HASH] = "\"4D7ED7DEE40F9A70CD8C3601C869BCFBBCE35FF92723DA1DDD4937B6D8FCC753\"";
	put_header(f, &h);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "content_hash");
}

static void test_header_round_negative(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	h.v[H_ROUND] = "-1";
	put_header(f, &h);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "round_index");
}

static void test_header_directory(void **state)
{
	struct fx *f = *state;

	base_weights(f);
	assert_int_equal(mkdir(at(f, "header.json"), 0700), 0);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "header.json", "regular file");
}

static void test_weight_file_listed_twice(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	h.v[H_FILES] = "[\"weights.safetensors\", \"weights.safetensors\"]";
	put_header(f, &h);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "weights.safetensors", "twice");
}

static void test_metadata_not_strings(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, "weights.safetensors", "{\"__metadata__\":{\"step\":7},"
	    BIAS(0, 16) "," PATCH(16, 64) "," PROJ(64, 128) "}", pool, BASE_DATA_LEN);
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "__metadata__", "step");
}

static void test_index_value_not_file_name(void **state)
{
	struct fx *f = *state;

	sharded_artifact(f);
	put_index(f, "{\"encoder.norm.bias\": \"" SHARD0 "\", "
	    "\"encoder.patch_embed.weight\": 0, "
	    "\"predictor.proj.weight\": \"" SHARD1 "\"}");
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "weights.index.json",
	    "encoder.patch_embed.weight");
}

static void test_index_no_weight_map(void **state)
{
	struct fx *f = *state;
	static const char text[] = "{\"metadata\": {}}";

	sharded_artifact(f);
	put_file(f, "weights.index.json", text, sizeof(text) - 1);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "weights.index.json", "weight_map");
}

/* ---- the schema_version gate ------------------------------------------ */

static void schema_case(struct fx *f, const char *value)
{
	struct hdr h = hdr_base();

	base_weights(f);
	h.v[H_SCHEMA] = value;
	put_header(f, &h);
	EXPECT(f, NULL, VD_SCHEMA_VERSION_MISMATCH, "schema_version");
}

static void test_schema_bool(void **state)
{
	schema_case(*state, "true");
}

static void test_schema_float(void **state)
{
	schema_case(*state, "2.0");
}

static void test_schema_string(void **state)
{
	schema_case(*state, "\"2\"");
}

static void test_schema_zero(void **state)
{
	schema_case(*state, "0");
}

static void test_schema_three(void **state)
{
	schema_case(*state, "3");
}

static void test_schema_null(void **state)
{
	schema_case(*state, "null");
}

static void test_schema_missing(void **state)
{
	schema_case(*state, NULL);
}

/* ---- check order -------------------------------------------------------- */

static void test_order_schema_before_fields(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	h.v[H_SCHEMA] = "3";
	h.v[H_CREATED] = NULL;
	put_header(f, &h);
	EXPECT(f, NULL, VD_SCHEMA_VERSION_MISMATCH, "schema_version");
}

/* Shard 0's I64 is found only after every file's structure is checked,
 * so shard 1's truncation decides. */
static void test_order_structure_before_dtype(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, SHARD0, "{" T("encoder.norm.bias", "I64", "[2]", 0, 16) ","
	    PATCH(16, 64) "}", pool, 64);
	put_st(f, SHARD1, "{" PROJ(0, 64) "}", pool + 64, 40);
	h.v[H_FILES] = "[\"" SHARD0 "\", \"" SHARD1 "\"]";
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, SHARD1, "not a safetensors artifact");
}

static void test_order_file_types_before_structure(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, SHARD0, "{" BIAS(0, 16) "," PATCH(16, 64) "}", pool, 30);
	put_st(f, "shard1.bin", "{" PROJ(0, 64) "}", pool + 64, 64);
	assert_int_equal(symlink("shard1.bin", at(f, SHARD1)), 0);
	h.v[H_FILES] = "[\"" SHARD0 "\", \"" SHARD1 "\"]";
	put_header(f, &h);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, SHARD1, "symbolic link");
}

static void test_order_dtype_before_residency(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, "weights.safetensors", "{" BIAS(0, 16) "," PATCH(16, 64) ","
	    T("head.fc.weight", "I64", "[1]", 128, 136) "," PROJ(64, 128) "}",
	    pool, 136);
	put_header(f, &h);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "head.fc.weight", "I64");
}

/* head.fc.weight is neither in the manifest nor in param_groups: the
 * residency check comes before both. */
static void test_order_residency_before_manifest(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, "weights.safetensors", "{" BIAS(0, 16) "," PATCH(16, 64) ","
	    T("head.fc.weight", "F32", "[2]", 128, 136) "," PROJ(64, 128) "}",
	    pool, 136);
	put_header(f, &h);
	EXPECT(f, NULL, VD_RESIDENCY_VIOLATION, "head.fc.weight");
}

static void test_order_groups_before_manifest(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	h.v[H_GROUPS] = "[\"encoder\"]";
	h.v[H_MANIFEST] = "[" M_BIAS "," M_PATCH "]";
	put_header(f, &h);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "predictor.proj.weight", "param_groups");
}

static void test_order_index_before_hash(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, SHARD0, "{" BIAS(0, 16) "," PATCH(16, 64) "}", pool, 64);
	put_st(f, SHARD1, "{" PROJ(0, 64) "}", pool + 64, 64);
	h.v[H_FILES] = "[\"" SHARD0 "\", \"" SHARD1 "\"]";
	h.v[H_HASH] = "\"" ZERO_HASH "\"";
	put_header(f, &h);
	put_index(f, "{\"encoder.norm.bias\": \"" SHARD1 "\", "
	    "\"encoder.patch_embed.weight\": \"" SHARD0 "\", "
	    "\"predictor.proj.weight\": \"" SHARD1 "\"}");
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "weights.index.json", "encoder.norm.bias");
}

/* ---- hashes ------------------------------------------------------------- */

static void test_hash_differs(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();
	uint8_t data[BASE_DATA_LEN];
	vd_verdict v;

	memcpy(data, pool, sizeof(data));
	data[100] ^= 0x01;
	put_st(f, "weights.safetensors", ST_BASE, data, sizeof(data));
	put_header(f, &h);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "content_hash", GOLDEN_HASH);
	vd_verify_artifact(f->dir, NULL, &v);
	assert_string_equal(v.claimed_hash, GOLDEN_HASH);
	assert_int_equal(strlen(v.content_hash), VD_HASH_HEX_LEN);
	assert_string_not_equal(v.content_hash, GOLDEN_HASH);
}

static void test_expected_hash_differs(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();
	uint8_t data[BASE_DATA_LEN];
	vd_options opt = { 0 };

	memcpy(data, pool, sizeof(data));
	data[0] ^= 0x80;
	put_st(f, "weights.safetensors", ST_BASE, data, sizeof(data));
	seal(f, &h);
	EXPECT_OK(f, NULL);
	opt.expected_hash = GOLDEN_HASH;
	EXPECT(f, &opt, VD_CHECKPOINT_INTEGRITY, "committed", GOLDEN_HASH);
}

/* The header is compared before the caller's commitment. */
static void test_hash_header_before_committed(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();
	vd_options opt = { 0 };

	base_weights(f);
	h.v[H_HASH] = "\"" ZERO_HASH "\"";
	put_header(f, &h);
	opt.expected_hash = ZERO_HASH;
	EXPECT(f, &opt, VD_CHECKPOINT_INTEGRITY, "header.json content_hash");
}

/* ---- valid variants ----------------------------------------------------- */

static void test_valid_golden_copy(void **state)
{
	struct fx *f = *state;
	static const char *const names[] = { "header.json", "weights.safetensors" };
	char path[4200];
	uint8_t *buf;
	size_t len, i;

	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/golden-cases/round-00000/%s", datadir(),
		    names[i]);
		assert_int_equal(slurp(path, &buf, &len), 0);
		put_file(f, names[i], buf, len);
		free(buf);
	}
	expect_ok_hash(f, GOLDEN_HASH);
}

static void test_valid_built_base(void **state)
{
	struct fx *f = *state;

	base_artifact(f);
	expect_ok_hash(f, GOLDEN_HASH);
}

/* Listed proj, bias, patch and laid out proj, patch, bias: the hash
 * follows names, not file order. */
static void test_valid_any_order(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();
	uint8_t data[BASE_DATA_LEN];

	memcpy(data, pool + 64, 64);
	memcpy(data + 64, pool + 16, 48);
	memcpy(data + 112, pool, 16);
	put_st(f, "weights.safetensors", "{" PROJ(0, 64) "," BIAS(112, 128) ","
	    PATCH(64, 112) "}", data, sizeof(data));
	put_header(f, &h);
	expect_ok_hash(f, GOLDEN_HASH);
}

static void test_valid_sharded_index(void **state)
{
	struct fx *f = *state;
	vd_verdict v;

	sharded_artifact(f);
	put_index(f, "{\"encoder.norm.bias\": \"" SHARD0 "\", "
	    "\"encoder.patch_embed.weight\": \"" SHARD0 "\", "
	    "\"predictor.proj.weight\": \"" SHARD1 "\"}");
	expect_ok_hash(f, GOLDEN_HASH);
	vd_verify_artifact(f->dir, NULL, &v);
	assert_int_equal(v.tensors, 3);
	assert_int_equal(v.bytes, BASE_DATA_LEN);
}

static void test_valid_padded_header(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, "weights.safetensors", ST_BASE "                           ", pool,
	    BASE_DATA_LEN);
	put_header(f, &h);
	expect_ok_hash(f, GOLDEN_HASH);
}

static void test_valid_metadata(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, "weights.safetensors", "{\"__metadata__\":{\"format\":\"pt\"},"
	    BIAS(0, 16) "," PATCH(16, 64) "," PROJ(64, 128) "}", pool, BASE_DATA_LEN);
	put_header(f, &h);
	expect_ok_hash(f, GOLDEN_HASH);
}

/* F16, BF16, a scalar and an empty tensor: every stored dtype and the
 * rank and size edge cases verify once the header binds their hash. */
static void test_valid_sealed_dtypes(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, "weights.safetensors", "{"
	    T("encoder.a", "F16", "[2,3]", 0, 12) ","
	    T("encoder.b", "BF16", "[]", 12, 14) ","
	    T("predictor.c", "F32", "[0,5]", 14, 14) ","
	    T("predictor.d", "F32", "[1]", 14, 18) "}", pool, 18);
	h.v[H_MANIFEST] = "["
	    M("encoder.a", "encoder", "float16", "[2,3]") ","
	    M("encoder.b", "encoder", "bfloat16", "[]") ","
	    M("predictor.c", "predictor", "float32", "[0,5]") ","
	    M("predictor.d", "predictor", "float32", "[1]") "]";
	seal(f, &h);
	EXPECT_OK(f, NULL);
}

/* A zero dimension makes the element count 0 whatever the other
 * dimensions are: spec section 3 asks for element_size * product(shape),
 * here 0, not for a product computed left to right in 64 bits. */
static void test_valid_zero_dim_with_huge_dim(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, "weights.safetensors", "{" BIAS(0, 16) "," PATCH(16, 64) ","
	    T("encoder.zz", "F32", "[4611686018427387904,0]", 128, 128) ","
	    PROJ(64, 128) "}", pool, BASE_DATA_LEN);
	h.v[H_MANIFEST] = "[" M_BIAS "," M_PATCH ","
	    M("encoder.zz", "encoder", "float32", "[4611686018427387904,0]") ","
	    M_PROJ "]";
	seal(f, &h);
	EXPECT_OK(f, NULL);
}

/* RFC 3339 bounds the day by its month: there is no 30 February. */
static void test_header_created_at_impossible_date(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	h.v[H_CREATED] = "\"2026-02-30T12:00:00Z\"";
	put_header(f, &h);
	EXPECT(f, NULL, VD_ARTIFACT_INVALID, "created_at");
}

/* ---- the facts behind a failure ------------------------------------------ */

/* The verdict on f's artifact, which must have code want. */
static void verdict_of(struct fx *f, const vd_options *opt, vd_code want, vd_verdict *v)
{
	vd_verify_artifact(f->dir, opt, v);
	print_message("  %-24s %s (%s)\n", vd_code_name(v->code), v->detail, v->facts.remediation);
	if (v->code != want)
		fail_msg("expected %s, got %s: %s", vd_code_name(want), vd_code_name(v->code), v->detail);
}

/* A string fact: want NULL means it does not apply, so it is "". */
static void assert_fact(const char *what, const char *got, const char *want)
{
	if (want == NULL ? got[0] != '\0' : strcmp(got, want) != 0)
		fail_msg("%s is \"%s\", expected \"%s\"", what, got, want ? want : "");
}

/* A failure that names a tensor and a file (NULL: none) and nothing else. */
static void expect_names(struct fx *f, vd_code want, const char *tensor, const char *file)
{
	vd_verdict v;

	verdict_of(f, NULL, want, &v);
	assert_fact("tensor", v.facts.tensor, tensor);
	assert_fact("file", v.facts.file, file);
	assert_fact("expected_hash", v.facts.expected_hash, NULL);
	assert_fact("recomputed_hash", v.facts.recomputed_hash, NULL);
	assert_int_equal(v.facts.has_file_schema_version, 0);
	assert_int_equal(v.facts.reader_max_version, 0);
	assert_sentence(v.facts.remediation);
}

static void test_facts_dtype(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, "weights.safetensors",
	    "{" T("encoder.norm.bias", "I64", "[2]", 0, 16) "," PATCH(16, 64) ","
	    PROJ(64, 128) "}", pool, BASE_DATA_LEN);
	put_header(f, &h);
	expect_names(f, VD_ARTIFACT_INVALID, "encoder.norm.bias", "weights.safetensors");
}

static void test_facts_residency(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();
	vd_verdict v;

	put_st(f, "weights.safetensors", "{" BIAS(0, 16) "," PATCH(16, 64) ","
	    T("head.fc.weight", "F32", "[2]", 128, 136) "," PROJ(64, 128) "}",
	    pool, 136);
	put_header(f, &h);
	expect_names(f, VD_RESIDENCY_VIOLATION, "head.fc.weight", "weights.safetensors");
	verdict_of(f, NULL, VD_RESIDENCY_VIOLATION, &v);
	assert_non_null(strstr(v.facts.remediation, "round-00000"));
	assert_non_null(strstr(v.facts.remediation, "encoder and predictor"));
}

/* A group at fault names a tensor of it when the weights hold one. */
static void test_facts_residency_group(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	base_weights(f);
	h.v[H_GROUPS] = "[\"action_head\", \"encoder\", \"predictor\"]";
	put_header(f, &h);
	expect_names(f, VD_RESIDENCY_VIOLATION, NULL, NULL);
	put_st(f, "weights.safetensors", "{" BIAS(0, 16) "," PATCH(16, 64) ","
	    T("action_head.fc", "F32", "[2]", 128, 136) "," PROJ(64, 128) "}", pool, 136);
	expect_names(f, VD_RESIDENCY_VIOLATION, "action_head.fc", "weights.safetensors");
}

/* The second file that stores a tensor is the one at fault. */
static void test_facts_two_shards(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();
	uint8_t data[80];

	memcpy(data, pool, 16);
	memcpy(data + 16, pool + 64, 64);
	put_st(f, SHARD0, "{" BIAS(0, 16) "," PATCH(16, 64) "}", pool, 64);
	put_st(f, SHARD1, "{" BIAS(0, 16) "," PROJ(16, 80) "}", data, sizeof(data));
	h.v[H_FILES] = "[\"" SHARD0 "\", \"" SHARD1 "\"]";
	put_header(f, &h);
	expect_names(f, VD_CHECKPOINT_INTEGRITY, "encoder.norm.bias", SHARD1);
}

static void test_facts_files(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	put_st(f, "weights.safetensors", ST_BASE, pool, BASE_DATA_LEN - 10);
	put_header(f, &h);
	expect_names(f, VD_CHECKPOINT_INTEGRITY, NULL, "weights.safetensors");
	base_weights(f);
	h.v[H_FILES] = "[\"weights.safetensors\", \"weights-extra.safetensors\"]";
	put_header(f, &h);
	expect_names(f, VD_CHECKPOINT_INTEGRITY, NULL, "weights-extra.safetensors");
}

static void test_facts_index_and_manifest(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();

	sharded_artifact(f);
	put_index(f, "{\"encoder.norm.bias\": \"" SHARD0 "\", "
	    "\"encoder.patch_embed.weight\": \"" SHARD0 "\", "
	    "\"predictor.proj.weight\": \"" SHARD0 "\"}");
	/* The file that does hold the tensor the index places elsewhere. */
	expect_names(f, VD_CHECKPOINT_INTEGRITY, "predictor.proj.weight", SHARD1);
	put_index(f, "{\"encoder.norm.bias\": \"" SHARD0 "\", "
	    "\"encoder.patch_embed.weight\": \"" SHARD0 "\", \"encoder.gone\": \"" SHARD0 "\"}");
	expect_names(f, VD_CHECKPOINT_INTEGRITY, "encoder.gone", NULL);
	assert_int_equal(unlink(at(f, "weights.index.json")), 0);
	h.v[H_FILES] = "[\"" SHARD0 "\", \"" SHARD1 "\"]";
	h.v[H_MANIFEST] = "[" M("encoder.norm.bias", "encoder", "float16", "[4]") ","
	    M_PATCH "," M_PROJ "]";
	put_header(f, &h);
	expect_names(f, VD_CHECKPOINT_INTEGRITY, "encoder.norm.bias", SHARD0);
}

static void test_facts_hashes(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();
	uint8_t data[BASE_DATA_LEN];
	vd_options opt = { 0 };
	vd_verdict v;

	memcpy(data, pool, sizeof(data));
	data[100] ^= 0x01;
	put_st(f, "weights.safetensors", ST_BASE, data, sizeof(data));
	put_header(f, &h);
	verdict_of(f, NULL, VD_CHECKPOINT_INTEGRITY, &v);
	assert_string_equal(v.facts.expected_hash, GOLDEN_HASH);
	assert_string_equal(v.facts.recomputed_hash, v.content_hash);
	assert_string_not_equal(v.facts.recomputed_hash, GOLDEN_HASH);
	assert_fact("tensor", v.facts.tensor, NULL);
	assert_fact("file", v.facts.file, NULL);
	assert_string_equal(v.facts.remediation,
	    "re-download round-00000 from the coordinator; do not load it");

	/* Consistent in itself, but not the committed artifact: the
	 * commitment is the hash it must have. */
	seal(f, &h);
	opt.expected_hash = GOLDEN_HASH;
	verdict_of(f, &opt, VD_CHECKPOINT_INTEGRITY, &v);
	assert_string_equal(v.facts.expected_hash, GOLDEN_HASH);
	assert_string_equal(v.facts.recomputed_hash, v.content_hash);
	assert_memory_equal(v.facts.recomputed_hash, f->hash_json + 1, VD_HASH_HEX_LEN);
}

static void schema_facts(struct fx *f, const char *value, int has, int64_t version,
    const char *needle)
{
	struct hdr h = hdr_base();
	vd_verdict v;

	base_weights(f);
	h.v[H_SCHEMA] = value;
	put_header(f, &h);
	verdict_of(f, NULL, VD_SCHEMA_VERSION_MISMATCH, &v);
	assert_int_equal(v.facts.has_file_schema_version, has);
	assert_int_equal(v.facts.file_schema_version, version);
	assert_int_equal(v.facts.reader_max_version, 2);
	assert_fact("tensor", v.facts.tensor, NULL);
	assert_fact("file", v.facts.file, NULL);
	assert_fact("expected_hash", v.facts.expected_hash, NULL);
	assert_sentence(v.facts.remediation);
	if (strstr(v.facts.remediation, needle) == NULL)
		fail_msg("remediation \"%s\" does not mention \"%s\"", v.facts.remediation, needle);
	assert_int_equal(v.legacy, 0);
}

static void test_facts_schema(void **state)
{
	struct fx *f = *state;

	schema_facts(f, "3", 1, 3,
	    "upgrade the verifier: this artifact uses schema version 3, newer than the 2 it reads");
	schema_facts(f, "0", 1, 0, "older than any");
	schema_facts(f, "-7", 1, -7, "older than any");
	schema_facts(f, "\"2\"", 0, 0, "no integer schema_version");
	schema_facts(f, NULL, 0, 0, "no integer schema_version");
	schema_facts(f, "18446744073709551616", 0, 0, "no integer schema_version");
}

/* An older schema_version verifies through the migration, and says so. */
static void test_facts_legacy(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();
	vd_verdict v;

	base_weights(f);
	h.v[H_SCHEMA] = "1";
	h.v[H_ARCH] = NULL;
	seal(f, &h);
	verdict_of(f, NULL, VD_OK, &v);
	assert_int_equal(v.legacy, 1);
	assert_int_equal(v.migrated_from, 1);
	assert_int_equal(v.schema_version, 1);
	assert_string_equal(v.facts.remediation, "");

	/* Legacy or not is told of failures too, once the header was read. */
	h.v[H_HASH] = "\"" GOLDEN_HASH "\"";
	put_header(f, &h);
	verdict_of(f, NULL, VD_CHECKPOINT_INTEGRITY, &v);
	assert_int_equal(v.legacy, 1);
	assert_int_equal(v.migrated_from, 1);

	h = hdr_base();
	put_header(f, &h);
	verdict_of(f, NULL, VD_OK, &v);
	assert_int_equal(v.legacy, 0);
	assert_int_equal(v.migrated_from, 0);
}

/* A name longer than a fact holds is cut before a character, not inside
 * one: "\xc3\xa9" straddles the cut here. */
static void test_facts_long_name(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();
	char name[300], json[1024], want[VD_NAME_MAX];
	vd_verdict v;

	memcpy(name, "head.", 5);
	memset(name + 5, 'a', 249);
	snprintf(name + 254, sizeof(name) - 254, "\xc3\xa9tail");
	snprintf(json, sizeof(json), "{" BIAS(0, 16) "," PATCH(16, 64) ","
	    "\"%s\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[128,136]},"
	    PROJ(64, 128) "}", name);
	put_st(f, "weights.safetensors", json, pool, 136);
	put_header(f, &h);
	verdict_of(f, NULL, VD_RESIDENCY_VIOLATION, &v);
	memcpy(want, name, 254);
	want[254] = '\0';
	assert_string_equal(v.facts.tensor, want);
}

/* ---- what one verification may spend (vd_bounds) ---------------------- */

/* header.json lists one manifest entry per tensor: over max_tensors it
 * is refused there, before any weight file is opened. */
static void test_bound_tensors_header(void **state)
{
	struct fx *f = *state;
	vd_bounds b = { .max_tensors = 2 };
	vd_verdict v;

	base_artifact(f);
	EXPECT_WITHIN(f, &b, VD_ARTIFACT_INVALID,
	    "header.json declares more than 2 tensors (max_tensors)");
	b.max_tensors = 3;
	EXPECT_WITHIN_OK(f, &b);
	assert_int_equal(verify_within(f, &b, &v), VD_OK);
	assert_int_equal(v.tensors, 3);
}

/* The weight files' tensors count together: the file that passes the
 * bound is the one named. */
static void test_bound_tensors_weights(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();
	vd_bounds b = { .max_tensors = 2 };
	vd_verdict v;

	h.v[H_MANIFEST] = "[]";
	base_weights(f);
	put_header(f, &h);
	EXPECT_WITHIN(f, &b, VD_ARTIFACT_INVALID,
	    "weights.safetensors declares more than 2 tensors (max_tensors)");
	assert_int_equal(verify_within(f, &b, &v), VD_ARTIFACT_INVALID);
	assert_string_equal(v.facts.file, "weights.safetensors");

	/* Two and one in two shards: the second is one too many. */
	put_st(f, SHARD0, "{" BIAS(0, 16) "," PATCH(16, 64) "}", pool, 64);
	put_st(f, SHARD1, "{" PROJ(0, 64) "}", pool + 64, 64);
	h.v[H_FILES] = "[\"" SHARD0 "\", \"" SHARD1 "\"]";
	put_header(f, &h);
	EXPECT_WITHIN(f, &b, VD_ARTIFACT_INVALID, SHARD1 " declares more than 2 tensors",
	    "together with the weight files before it (max_tensors)");
	/* Within the bound, the manifest is what fails. */
	b.max_tensors = 3;
	EXPECT_WITHIN(f, &b, VD_CHECKPOINT_INTEGRITY, "manifest lists 0 tensors");
	h.v[H_MANIFEST] = MANIFEST;
	put_header(f, &h);
	EXPECT_WITHIN_OK(f, &b);
}

/* The smallest budget a verification passes with: every smaller one
 * refuses it naming max_job_memory and the document that ran out. */
static uint64_t least_memory(struct fx *f)
{
	uint64_t lo = 1, hi = VD_MAX_JOB_MEMORY_DEFAULT;
	vd_bounds b = { 0 };
	vd_verdict v;

	b.max_job_memory = hi;
	assert_int_equal(verify_within(f, &b, &v), VD_OK);
	while (lo < hi) {
		b.max_job_memory = lo + (hi - lo) / 2;
		if (verify_within(f, &b, &v) == VD_OK)
			hi = b.max_job_memory;
		else
			lo = b.max_job_memory + 1;
	}
	return lo;
}

static void expect_memory_steps(struct fx *f, uint64_t least, const char *const *docs,
    size_t ndocs)
{
	vd_bounds b = { 0 };
	vd_verdict v;
	char want[64];
	unsigned seen = 0;
	size_t i;

	for (b.max_job_memory = 1; b.max_job_memory < least;
	    b.max_job_memory += least / 200 + 1) {
		assert_int_equal(verify_within(f, &b, &v), VD_ARTIFACT_INVALID);
		snprintf(want, sizeof(want), " needs more than %llu bytes to parse",
		    (unsigned long long)b.max_job_memory);
		if (strstr(v.detail, want) == NULL || strstr(v.detail, "(max_job_memory)") == NULL)
			fail_msg("a budget of %llu: \"%s\"", (unsigned long long)b.max_job_memory,
			    v.detail);
		for (i = 0; i < ndocs; i++)
			if (strncmp(v.detail, docs[i], strlen(docs[i])) == 0)
				seen |= 1u << i;
	}
	b.max_job_memory = least - 1;
	assert_int_equal(verify_within(f, &b, &v), VD_ARTIFACT_INVALID);
	b.max_job_memory = least;
	assert_int_equal(verify_within(f, &b, &v), VD_OK);
	/* Each document was the one to run out at some budget: each is charged. */
	for (i = 0; i < ndocs; i++)
		if (!(seen & (1u << i)))
			fail_msg("no budget below %llu ran out in %s", (unsigned long long)least,
			    docs[i]);
}

static void test_bound_memory(void **state)
{
	static const char *const docs[] = { "header.json ", "weights.safetensors " };
	struct fx *f = *state;
	uint64_t least;

	base_artifact(f);
	least = least_memory(f);
	print_message("  the base artifact verifies from %llu bytes\n", (unsigned long long)least);
	/* More than the three tensors' documents, far below the default. */
	assert_true(least > 4096 && least < 1024 * 1024);
	expect_memory_steps(f, least, docs, VD_ARRAY_LEN(docs));
}

/* The shards and the index share one budget with header.json. */
static void test_bound_memory_shared(void **state)
{
	static const char *const docs[] = { "header.json ", SHARD0 " ", SHARD1 " ",
		"weights.index.json " };
	struct fx *f = *state;
	uint64_t alone, least;

	sharded_artifact(f);
	alone = least_memory(f);
	put_index(f, "{\"encoder.norm.bias\": \"" SHARD0 "\", "
	    "\"encoder.patch_embed.weight\": \"" SHARD0 "\", "
	    "\"predictor.proj.weight\": \"" SHARD1 "\"}");
	least = least_memory(f);
	assert_true(least > alone);
	expect_memory_steps(f, least, docs, VD_ARRAY_LEN(docs));
}

/* The weight files' sizes together, before anything is parsed. */
static void test_bound_artifact_bytes(void **state)
{
	struct fx *f = *state;
	uint64_t size = 8 + strlen(ST_BASE) + BASE_DATA_LEN;
	vd_bounds b = { 0 };
	char want[128];

	base_artifact(f);
	b.max_artifact_bytes = size - 1;
	snprintf(want, sizeof(want), "the weight files hold %llu bytes, more than %llu (max_artifact_bytes)",
	    (unsigned long long)size, (unsigned long long)size - 1);
	EXPECT_WITHIN(f, &b, VD_ARTIFACT_INVALID, want);
	b.max_artifact_bytes = size;
	EXPECT_WITHIN_OK(f, &b);

	/* Two shards of 8 + header + 64 bytes each. */
	sharded_artifact(f);
	size = 8 + strlen("{" BIAS(0, 16) "," PATCH(16, 64) "}") + 64 +
	    8 + strlen("{" PROJ(0, 64) "}") + 64;
	b.max_artifact_bytes = size - 1;
	EXPECT_WITHIN(f, &b, VD_ARTIFACT_INVALID, "(max_artifact_bytes)");
	b.max_artifact_bytes = size;
	EXPECT_WITHIN_OK(f, &b);
}

/* A sparse weight file claiming more than an artifact may hold is
 * refused at once, never hashed: at the default bound, 1 TiB. */
static void test_bound_artifact_bytes_sparse(void **state)
{
	struct fx *f = *state;
	struct hdr h = hdr_base();
	uint64_t size = VD_MAX_ARTIFACT_BYTES_DEFAULT + 1;
	struct timespec t0, t1;
	vd_verdict v;
	int fd;

	base_weights(f);
	put_header(f, &h);
	fd = open(at(f, "weights.safetensors"), O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	if (ftruncate(fd, (off_t)size) < 0) {
		close(fd);
		skip();         /* a file system without room for the hole */
	}
	close(fd);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(vd_verify_artifact(f->dir, NULL, &v), VD_ARTIFACT_INVALID);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_non_null(strstr(v.detail, "more than 1099511627776 (max_artifact_bytes)"));
	assert_string_equal(v.content_hash, "");
	/* Hashing a terabyte would take the better part of an hour. */
	assert_true(t1.tv_sec - t0.tv_sec < 5);
	/* Within the bound the same file is parsed, and fails as one whose
	 * tensors do not cover its data: the bound was what refused it. */
	assert_int_equal(truncate(at(f, "weights.safetensors"), 1 << 20), 0);
	EXPECT(f, NULL, VD_CHECKPOINT_INTEGRITY, "weights.safetensors", "tensors cover 128");
}

/* An ordinary artifact verifies within the default bounds, in memory too. */
static void test_bound_defaults_ordinary(void **state)
{
	struct fx *f = *state;
	vd_loaded l;
	vd_verdict v;

	sharded_artifact(f);
	EXPECT_WITHIN_OK(f, NULL);
	assert_int_equal(vd_load_verified(f->dir, NULL, 0, &l, &v), VD_OK);
	assert_int_equal(l.n_tensors, 3);
	assert_non_null(vd_loaded_tensor(&l, "predictor.proj.weight"));
	vd_loaded_free(&l);
}

#define CASE(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		CASE(test_truncated_mid_data),
		CASE(test_truncated_mid_header),
		CASE(test_truncated_in_length_prefix),
		CASE(test_empty_weight_file),
		CASE(test_header_len_u64_max),
		CASE(test_header_len_past_eof),
		CASE(test_header_len_above_cap),
		CASE(test_header_len_at_cap),
		CASE(test_header_len_option_cap),
		CASE(test_offsets_overlap),
		CASE(test_offsets_hole),
		CASE(test_offsets_reversed),
		CASE(test_offsets_past_end),
		CASE(test_trailing_bytes),
		CASE(test_shape_product_overflow),
		CASE(test_bytes_shape_mismatch),
		CASE(test_dtype_unknown),
		CASE(test_dtype_i64),
		CASE(test_dtype_f64),
		CASE(test_duplicate_tensor_in_file),
		CASE(test_duplicate_key_in_header),
		CASE(test_tensor_in_two_shards),
		CASE(test_index_wrong_file),
		CASE(test_index_missing_tensor),
		CASE(test_index_extra_tensor),
		CASE(test_index_not_json),
		CASE(test_manifest_missing_tensor),
		CASE(test_manifest_wrong_dtype),
		CASE(test_manifest_wrong_shape),
		CASE(test_manifest_wrong_group),
		CASE(test_manifest_unsorted),
		CASE(test_group_not_in_param_groups),
		CASE(test_residency_tensor),
		CASE(test_residency_param_group),
		CASE(test_weight_file_parent),
		CASE(test_weight_file_subdir),
		CASE(test_weight_file_dot),
		CASE(test_weight_file_absent),
		CASE(test_weight_file_symlink),
		CASE(test_weight_file_fifo),
		CASE(test_weight_file_directory),
		CASE(test_weight_file_device_symlink),
		CASE(test_header_missing),
		CASE(test_header_symlink),
		CASE(test_header_fifo),
		CASE(test_header_not_json),
		CASE(test_header_empty),
		CASE(test_header_not_utf8),
		CASE(test_header_too_large),
		CASE(test_header_at_size_limit),
		CASE(test_header_unknown_field),
		CASE(test_header_v1_with_model_arch),
		CASE(test_header_hash_uppercase),
		CASE(test_header_round_negative),
		CASE(test_header_directory),
		CASE(test_weight_file_listed_twice),
		CASE(test_metadata_not_strings),
		CASE(test_index_value_not_file_name),
		CASE(test_index_no_weight_map),
		CASE(test_schema_bool),
		CASE(test_schema_float),
		CASE(test_schema_string),
		CASE(test_schema_zero),
		CASE(test_schema_three),
		CASE(test_schema_null),
		CASE(test_schema_missing),
		CASE(test_order_schema_before_fields),
		CASE(test_order_structure_before_dtype),
		CASE(test_order_file_types_before_structure),
		CASE(test_order_dtype_before_residency),
		CASE(test_order_residency_before_manifest),
		CASE(test_order_groups_before_manifest),
		CASE(test_order_index_before_hash),
		CASE(test_hash_differs),
		CASE(test_expected_hash_differs),
		CASE(test_hash_header_before_committed),
		CASE(test_valid_golden_copy),
		CASE(test_valid_built_base),
		CASE(test_valid_any_order),
		CASE(test_valid_sharded_index),
		CASE(test_valid_padded_header),
		CASE(test_valid_metadata),
		CASE(test_valid_sealed_dtypes),
		CASE(test_valid_zero_dim_with_huge_dim),
		CASE(test_header_created_at_impossible_date),
		CASE(test_facts_dtype),
		CASE(test_facts_residency),
		CASE(test_facts_residency_group),
		CASE(test_facts_two_shards),
		CASE(test_facts_files),
		CASE(test_facts_index_and_manifest),
		CASE(test_facts_hashes),
		CASE(test_facts_schema),
		CASE(test_facts_legacy),
		CASE(test_facts_long_name),
		CASE(test_bound_tensors_header),
		CASE(test_bound_tensors_weights),
		CASE(test_bound_memory),
		CASE(test_bound_memory_shared),
		CASE(test_bound_artifact_bytes),
		CASE(test_bound_artifact_bytes_sparse),
		CASE(test_bound_defaults_ordinary),
	};

	return cmocka_run_group_tests_name("malformed", tests, group_setup, group_teardown);
}

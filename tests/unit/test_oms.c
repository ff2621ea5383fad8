/*
 * OMS bundles and statements (vd_oms.h): the parsers over bytes and the
 * path rules, on the v1.1.0 bundle model_signing wrote for the key method
 * (tests/data/oms) and on statements built here.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "vd_hash.h"
#include "vd_oms.h"
#include "vd_util.h"

#define WHY 256
#define HINT "e8450dec4eb99dae995da9af1bc2cc9f76ed669ee2e744f57abba763df3e3f8e"
#define D1 "bc9a717db6064a32cbe9eae6fc40651dd6d36ef1757183f590eff2b1765d7ebc"
#define D2 "32dcb1f8e1ae52d5963e56a6ba06ab58b424c15ed2a6b70d2feca1d089370028"
#define ROOT12 "92745110b1ab4368471cbe31664e10174e954b113a3df333db860317b2c6dec4"

static char *read_data(const char *rel, size_t *len)
{
	char path[4096];
	vd_buf b;

	snprintf(path, sizeof(path), "%s/tests/data/oms/%s", getenv("top_srcdir") ?
	    getenv("top_srcdir") : ".", rel);
	vd_buf_init(&b);
	assert_int_equal(vd_read_file(path, VD_OMS_MAX_BYTES, &b), 0);
	*len = b.len;
	return (char *)b.p;
}

/* A statement over (name, digest) pairs with the right root digest. */
static char *statement(const char *ser, const char *const *names, const char *const *digests,
    size_t n)
{
	vd_hasher *h = vd_hasher_new();
	char root[VD_HASH_HEX_LEN + 1];
	uint8_t raw[32];
	size_t i, j;
	vd_buf b;

	for (i = 0; i < n; i++) {
		for (j = 0; j < 32; j++)
			sscanf(digests[i] + 2 * j, "%2hhx", &raw[j]);
		vd_hasher_update(h, raw, 32);
	}
	vd_hasher_final(h, root);
	vd_hasher_free(h);
	vd_buf_init(&b);
	vd_buf_printf(&b, "{\"_type\":\"https://in-toto.io/Statement/v1\",\"subject\":[{\"name\":"
	    "\"m\",\"digest\":{\"sha256\":\"%s\"}}],\"predicateType\":"
	    "\"https://model_signing/signature/v1.0\",\"predicate\":{\"serialization\":%s,"
	    "\"resources\":[", root, ser);
	for (i = 0; i < n; i++)
		vd_buf_printf(&b, "%s{\"name\":\"%s\",\"algorithm\":\"sha256\",\"digest\":\"%s\","
		    "\"annotations\":{}}", i ? "," : "", names[i], digests[i]);
	vd_buf_puts(&b, "]}}");
	return (char *)b.p;
}

#define FILES "{\"method\":\"files\",\"hash_type\":\"sha256\",\"allow_symlinks\":false}"
#define SHARDS(n) "{\"method\":\"shards\",\"hash_type\":\"sha256\",\"shard_size\":" #n \
	",\"allow_symlinks\":false,\"ignore_paths\":[\"model.sig\",\".git\"]}"

static vd_oms_code parse(const char *ser, const char *const *names, size_t n,
    vd_oms_statement *s, char *why)
{
	static const char *const digests[] = { D1, D2, D1, D2, D1, D2 };
	char *p = statement(ser, names, digests, n);
	vd_oms_code c = vd_oms_statement_parse((const uint8_t *)p, strlen(p), s, why, WHY);

	free(p);
	return c;
}

static void test_bundle_v110(void **state)
{
	char why[WHY], *buf;
	vd_oms_bundle b;
	vd_oms_statement s;
	size_t len;

	(void)state;
	buf = read_data("v1.1.0-elliptic-key/model.sig", &len);
	assert_int_equal(vd_oms_bundle_parse((uint8_t *)buf, len, &b, why, WHY), VD_OMS_OK);
	assert_int_equal(b.method, VD_OMS_METHOD_KEY);
	assert_string_equal(b.hint, HINT);
	assert_int_equal(b.raw_key.len, 0);
	assert_in_range(b.sig.len, 64, 110);
	assert_int_equal(vd_oms_statement_parse(b.payload.p, b.payload.len, &s, why, WHY), VD_OMS_OK);
	assert_string_equal(s.subject, "v1.1.0-elliptic-key");
	assert_string_equal(s.root_digest, ROOT12);
	assert_int_equal(s.n_res, 2);
	assert_string_equal(s.res[1].name, "signme-2");
	assert_int_equal(s.shards, 0);
	assert_int_equal(s.n_ignore, 6);
	vd_oms_statement_free(&s);
	vd_oms_bundle_free(&b);
	free(buf);
}

static void test_bundle_certificate(void **state)
{
	char why[WHY], *buf;
	vd_oms_bundle b;
	size_t len;

	(void)state;
	buf = read_data("v0.3.1-certificate/model.sig", &len);
	assert_int_equal(vd_oms_bundle_parse((uint8_t *)buf, len, &b, why, WHY), VD_OMS_OK);
	assert_int_equal(b.method, VD_OMS_METHOD_CERTIFICATE);
	assert_int_equal(b.n_certs, 2);
	assert_int_equal(b.certs[0].p[0], 0x30);       /* DER SEQUENCE */
	vd_oms_bundle_free(&b);
	free(buf);
}

static void refuse_bundle(const char *json, vd_oms_code want, const char *phrase)
{
	char why[WHY];
	vd_oms_bundle b;

	assert_int_equal(vd_oms_bundle_parse((const uint8_t *)json, strlen(json), &b, why, WHY), want);
	if (strstr(why, phrase) == NULL)
		fail_msg("\"%s\" not in \"%s\"", phrase, why);
	assert_null(b.payload.p);
}

#define ENV "\"dsseEnvelope\":{\"payload\":\"e30=\",\"payloadType\":\"application/vnd.in-toto+json\"," \
	"\"signatures\":[{\"sig\":\"AAAA\",\"keyid\":null}]}"
#define MT "\"mediaType\":\"application/vnd.dev.sigstore.bundle.v0.3+json\""
#define PK "\"verificationMaterial\":{\"publicKey\":{\"hint\":\"" HINT "\"}}"

static void test_bundle_refusals(void **state)
{
	(void)state;
	refuse_bundle("{" MT "," PK "," ENV "}x", VD_OMS_MALFORMED, "not valid JSON");
	refuse_bundle("{\"mediaType\":\"application/vnd.dev.sigstore.bundle.v0.1+json\"," PK ","
	    ENV "}", VD_OMS_MALFORMED, "mediaType");
	refuse_bundle("{" MT ",\"verificationMaterial\":{\"certificate\":{\"rawBytes\":\"AA==\"},"
	    "\"tlogEntries\":[{}]}," ENV "}", VD_OMS_UNSUPPORTED, "sigstore (keyless)");
	refuse_bundle("{" MT ",\"verificationMaterial\":{}," ENV "}", VD_OMS_MALFORMED,
	    "exactly one of publicKey and x509CertificateChain");
	refuse_bundle("{" MT "," PK "," ENV ",\"extra\":1}", VD_OMS_MALFORMED, "unknown field \"extra\"");
	refuse_bundle("{" MT ",\"verificationMaterial\":{\"publicKey\":{\"hint\":\"ABC\"}}," ENV "}",
	    VD_OMS_MALFORMED, "hint");
	refuse_bundle("{" MT "," PK ",\"dsseEnvelope\":{\"payload\":\"e30=\",\"payloadType\":"
	    "\"text/plain\",\"signatures\":[{\"sig\":\"AAAA\"}]}}", VD_OMS_MALFORMED, "payloadType");
	refuse_bundle("{" MT "," PK ",\"dsseEnvelope\":{\"payload\":\"e30=\",\"payloadType\":"
	    "\"application/vnd.in-toto+json\",\"signatures\":[{\"sig\":\"AAAA\"},{\"sig\":\"AAAA\"}]}}",
	    VD_OMS_MALFORMED, "2 signatures");
	refuse_bundle("{" MT "," PK ",\"dsseEnvelope\":{\"payload\":\"e30\",\"payloadType\":"
	    "\"application/vnd.in-toto+json\",\"signatures\":[{\"sig\":\"AAAA\"}]}}",
	    VD_OMS_MALFORMED, "base64");
	refuse_bundle("{" MT "," PK ",\"dsseEnvelope\":{\"payload\":\"e30=\",\"payloadType\":"
	    "\"application/vnd.in-toto+json\",\"signatures\":[{\"sig\":\"AAAA\",\"keyid\":1}]}}",
	    VD_OMS_MALFORMED, "keyid");
}

static void accepts(const char *ser, const char *const *names, size_t n)
{
	char why[WHY];
	vd_oms_statement s;

	if (parse(ser, names, n, &s, why) != VD_OMS_OK)
		fail_msg("refused: %s", why);
	vd_oms_statement_free(&s);
}

static void refuses(const char *ser, const char *const *names, size_t n, vd_oms_code want,
    const char *phrase)
{
	char why[WHY];
	vd_oms_statement s;

	assert_int_equal(parse(ser, names, n, &s, why), want);
	if (strstr(why, phrase) == NULL)
		fail_msg("\"%s\" not in \"%s\"", phrase, why);
	assert_null(s.res);
}

static void test_manifest_names(void **state)
{
	static const char *const ok[] = { "a/b", "a-b", "z" };
	static const char *const ms_order[] = { "a/b", "a-b" };   /* components: a < a-b */
	static const char *const dot[] = { "." };
	static const char *const dotdot[] = { "../a" };
	static const char *const abs[] = { "/a" };
	static const char *const inner[] = { "a/./b" };
	static const char *const empty[] = { "a//b" };
	static const char *const trail[] = { "a/" };
	static const char *const twice[] = { "a", "a" };
	static const char *const unsorted[] = { "b", "a" };
	static const char *const dot_beside[] = { ".", "a" };

	(void)state;
	accepts(FILES, ok + 1, 2);
	accepts(FILES, ms_order, 2);
	accepts(FILES, dot, 1);
	refuses(FILES, dotdot, 1, VD_OMS_MALFORMED, "canonical");
	refuses(FILES, abs, 1, VD_OMS_MALFORMED, "canonical");
	refuses(FILES, inner, 1, VD_OMS_MALFORMED, "canonical");
	refuses(FILES, empty, 1, VD_OMS_MALFORMED, "canonical");
	refuses(FILES, trail, 1, VD_OMS_MALFORMED, "canonical");
	refuses(FILES, twice, 2, VD_OMS_MALFORMED, "listed twice");
	refuses(FILES, unsorted, 2, VD_OMS_MALFORMED, "not sorted");
	refuses(FILES, dot_beside, 2, VD_OMS_MALFORMED, "beside other files");
}

static void test_manifest_shards(void **state)
{
	static const char *const ok[] = { "w:0:10", "w:10:15", "x:0:3" };
	/* model_signing sorts offsets as numbers (0, 5, 10), not by code
	 * point (0, 10, 5). */
	static const char *const numeric[] = { "w:0:5", "w:5:10", "w:10:12" };
	static const char *const gap[] = { "w:0:10", "w:11:15" };
	static const char *const late[] = { "w:10:15" };
	static const char *const short_mid[] = { "w:0:5", "w:5:15" };
	static const char *const bad[] = { "w:0:010" };
	static const char *const colon[] = { "a:b:0:4" };

	(void)state;
	accepts(SHARDS(10), ok, 3);
	accepts(SHARDS(5), numeric, 3);
	accepts(SHARDS(10), colon, 1);
	refuses(SHARDS(10), gap, 2, VD_OMS_MALFORMED, "does not follow");
	refuses(SHARDS(10), late, 1, VD_OMS_MALFORMED, "does not follow");
	refuses(SHARDS(10), short_mid, 2, VD_OMS_MALFORMED, "does not follow");
	refuses(SHARDS(10), bad, 1, VD_OMS_MALFORMED, "PATH:START:END");
}

static void test_serialization(void **state)
{
	static const char *const one[] = { "a" };

	(void)state;
	refuses("{\"method\":\"files\",\"hash_type\":\"blake3\",\"allow_symlinks\":false}", one, 1,
	    VD_OMS_UNSUPPORTED, "blake3");
	refuses("{\"method\":\"files\",\"hash_type\":\"md5\",\"allow_symlinks\":false}", one, 1,
	    VD_OMS_MALFORMED, "registry");
	refuses("{\"method\":\"files\",\"hash_type\":\"sha256\"}", one, 1, VD_OMS_MALFORMED,
	    "allow_symlinks");
	refuses("{\"method\":\"shards\",\"hash_type\":\"sha256\",\"allow_symlinks\":false}", one, 1,
	    VD_OMS_MALFORMED, "shard_size");
	refuses("{\"method\":\"files\",\"hash_type\":\"sha256\",\"shard_size\":4,"
	    "\"allow_symlinks\":false}", one, 1, VD_OMS_MALFORMED, "no shard_size");
	refuses("{\"method\":\"files\",\"hash_type\":\"sha256\",\"allow_symlinks\":false,"
	    "\"ignore_paths\":[\"*.bin\"]}", one, 1, VD_OMS_MALFORMED, "glob");
	refuses("{\"method\":\"files\",\"hash_type\":\"sha256\",\"allow_symlinks\":false,"
	    "\"ignore_paths\":[\"../x\"]}", one, 1, VD_OMS_MALFORMED, "ignore path");
	refuses("{\"method\":\"tree\",\"hash_type\":\"sha256\",\"allow_symlinks\":false}", one, 1,
	    VD_OMS_UNSUPPORTED, "serialization method");
}

static void test_root_digest(void **state)
{
	char *p = statement(FILES, (const char *const[]){ "a" }, (const char *const[]){ D1 }, 1);
	char why[WHY], *at = strstr(p, "sha256\":\"") + 9;
	vd_oms_statement s;

	(void)state;
	at[0] = at[0] == '0' ? '1' : '0';
	assert_int_equal(vd_oms_statement_parse((uint8_t *)p, strlen(p), &s, why, WHY),
	    VD_OMS_MALFORMED);
	assert_non_null(strstr(why, "root digest"));
	free(p);
}

static void test_paths(void **state)
{
	char c1[] = "cache", c2[] = "a/b";
	char *ign[] = { c1, c2 };
	uint64_t st, en;
	size_t pl;

	(void)state;
	assert_true(vd_oms_ignored("cache", ign, 2));
	assert_true(vd_oms_ignored("cache/x", ign, 2));
	assert_false(vd_oms_ignored("cache2", ign, 2));
	assert_false(vd_oms_ignored("sub/cache", ign, 2));
	assert_true(vd_oms_ignored("a/b/c", ign, 2));
	assert_false(vd_oms_ignored("a", ign, 2));
	assert_true(vd_oms_ignore_valid("a/b", 3));
	assert_false(vd_oms_ignore_valid("a?", 2));
	assert_false(vd_oms_path_valid("a\0b", 3));
	assert_false(vd_oms_path_valid("\xff", 1));
	assert_false(vd_oms_path_valid("..", 2));
	assert_int_equal(vd_oms_shard_split("a:1:2:3", 7, &pl, &st, &en), 0);
	assert_int_equal(pl, 3);
	assert_int_equal(st, 2);
	assert_int_equal(en, 3);
	assert_int_equal(vd_oms_shard_split("a:3:3", 5, &pl, &st, &en), -1);
	assert_int_equal(vd_oms_shard_split("a:-1:3", 6, &pl, &st, &en), -1);
	assert_int_equal(vd_oms_shard_split("a:0:99999999999999999999", 24, &pl, &st, &en), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bundle_v110),
		cmocka_unit_test(test_bundle_certificate),
		cmocka_unit_test(test_bundle_refusals),
		cmocka_unit_test(test_manifest_names),
		cmocka_unit_test(test_manifest_shards),
		cmocka_unit_test(test_serialization),
		cmocka_unit_test(test_root_digest),
		cmocka_unit_test(test_paths),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

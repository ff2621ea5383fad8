/*
 * Ed25519 keys, DSSE envelopes and signed statements (trust.md sections 2
 * and 3). The key below was made with `openssl genpkey -algorithm
 * ed25519`; its id was computed with
 *   openssl pkey -pubin -in k.pub -outform DER | tail -c 32 | sha256sum
 * and OPENSSL_ENV was signed with the command line alone:
 *   printf 'DSSEv1 %d %s %d %s' ${#T} "$T" ${#P} "$P" > pae.bin
 *   openssl pkeyutl -sign -rawin -inkey k.key -in pae.bin | base64 -w0
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "vd_dsse.h"
#include "vd_keys.h"
#include "vd_util.h"

static const char K1_PRIV[] =
	"-----BEGIN PRIVATE KEY-----\n"
	"MC4CAQAwBQYDK2VwBCIEILReI5Q2uzmGg0PlZ3kvVKRO+ZtIO5HjVghUoVsBTxmh\n"
	"-----END PRIVATE KEY-----\n";
static const char K1_PUB[] =
	"-----BEGIN PUBLIC KEY-----\n"
	"MCowBQYDK2VwAyEArqzod6bJUGr758O1j559NUbO0rPR2Qzfvvxeix2fT7Q=\n"
	"-----END PUBLIC KEY-----\n";
#define K1_ID "f265f355d6f1e4bb03d3feeadca77570bbfdb7d7ee871528c52c3cf4c58f8567"

static const char K2_PUB[] =
	"-----BEGIN PUBLIC KEY-----\n"
	"MCowBQYDK2VwAyEAhoO4vUkWQikw5lEtHJXwUMIKkcvO7O9Qh1rJxiQt98s=\n"
	"-----END PUBLIC KEY-----\n";
#define K2_ID "b00ec69306dbfce0fb4858cbfc0c6c529b645a82ba9d5c24e7bb34078b4af2cd"

static const char EC_PUB[] =
	"-----BEGIN PUBLIC KEY-----\n"
	"MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAElrkpMogJoZGYNeOtnwcylDPlfJiK\n"
	"9spaw8Y6MpqDt1d+jotuFcL5s6sQKOfJ/wSSgVYobSn8Rgf0ocshz7mlRQ==\n"
	"-----END PUBLIC KEY-----\n";

#define H4 "31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e"
#define RC_PAYLOAD "{\"schema_version\":2,\"kind\":\"round_close\",\"run\":\".\"," \
	"\"round_index\":3,\"global_model_hash\":\"" H4 "\"}"
#define RC_PAYLOAD_B64 \
	"eyJzY2hlbWFfdmVyc2lvbiI6Miwia2luZCI6InJvdW5kX2Nsb3NlIiwicnVuIjoiLiIsInJvdW5kX2luZGV4IjozLCJn" \
	"bG9iYWxfbW9kZWxfaGFzaCI6IjMxY2ViNDM2NjI3YWZjZmZhZGM5YWRhYTllYmFmN2I4NjAyOTk1NWMxZmM0OTIzNjk5" \
	"OWEyOGFiMzNjYjIzNWUifQ=="
#define RC_SIG_B64 \
	"BF8az/D3NYdPNP9b9Rt0ml8pUFRiwNxdoyVLkZ4VKt40m40kwxp7OqmtI7ccbER9DApe5xQOAprF6yBcbeXGCg=="
/* Made by openssl pkeyutl, not by this project. */
static const char OPENSSL_ENV[] =
	"{\"payloadType\":\"" VD_PT_ROUNDCLOSE "\",\"payload\":\"" RC_PAYLOAD_B64 "\","
	"\"signatures\":[{\"keyid\":\"" K1_ID "\",\"sig\":\"" RC_SIG_B64 "\"}]}\n";

/* 64 bytes of 0x01: the right length, by no key. */
#define JUNK_SIG_B64 \
	"AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQ=="

static vd_key *key_from(const char *pem, int priv)
{
	char err[VD_DETAIL_MAX];
	vd_key *k = NULL;

	assert_int_equal(vd_key_from_pem((const uint8_t *)pem, strlen(pem), priv, &k,
	    err, sizeof(err)), 0);
	assert_non_null(k);
	return k;
}

static vd_keyring *ring_of(const char *pem1, const char *pem2)
{
	vd_keyring *kr = calloc(1, sizeof(*kr));

	assert_non_null(kr);
	kr->keys = calloc(2, sizeof(*kr->keys));
	assert_non_null(kr->keys);
	kr->refs = 1;
	kr->keys[kr->n++] = key_from(pem1, 0);
	if (pem2 != NULL)
		kr->keys[kr->n++] = key_from(pem2, 0);
	return kr;
}

static vd_env_reason parse_str(const char *s, vd_dsse *e, char *why, size_t n)
{
	memset(why, 0, n);
	return vd_dsse_parse((const uint8_t *)s, strlen(s), e, why, n);
}

/* Parse, then verify under kr: the first reason that is not OK. */
static vd_env_reason check_env(const char *s, const vd_keyring *kr)
{
	char why[VD_DETAIL_MAX];
	const vd_key *signer;
	vd_env_reason r;
	vd_dsse e;

	r = parse_str(s, &e, why, sizeof(why));
	if (r != VD_ENV_OK) {
		assert_true(why[0] != '\0');
		assert_null(e.payload);
		return r;
	}
	r = vd_dsse_verify(&e, kr, &signer);
	assert_true(r == VD_ENV_OK ? signer != NULL : signer == NULL);
	vd_dsse_free(&e);
	return r;
}

/* An envelope from its three raw JSON values. */
static char *env3(const char *type, const char *payload, const char *sigs)
{
	vd_buf b;

	vd_buf_init(&b);
	vd_buf_printf(&b, "{\"payloadType\":%s,\"payload\":%s,\"signatures\":%s}",
	    type, payload, sigs);
	assert_false(b.oom);
	return (char *)b.p;
}

static char *sign_payload(const char *type, const char *payload, const vd_key *k)
{
	vd_buf b;

	vd_buf_init(&b);
	assert_int_equal(vd_dsse_sign(type, (const uint8_t *)payload, strlen(payload), k, &b), 0);
	return (char *)b.p;
}

/* s with the first occurrence of from replaced by to, malloc'd. */
static char *replace(const char *s, const char *from, const char *to)
{
	const char *at = strstr(s, from);
	vd_buf b;

	assert_non_null(at);
	vd_buf_init(&b);
	vd_buf_put(&b, s, (size_t)(at - s));
	vd_buf_puts(&b, to);
	vd_buf_puts(&b, at + strlen(from));
	assert_false(b.oom);
	return (char *)b.p;
}

static char *concat(const char *a, const char *b)
{
	vd_buf buf;

	vd_buf_init(&buf);
	vd_buf_puts(&buf, a);
	vd_buf_puts(&buf, b);
	assert_false(buf.oom);
	return (char *)buf.p;
}

/* ---- keys -------------------------------------------------------------- */

static void test_key_id(void **state)
{
	vd_key *pub = key_from(K1_PUB, 0), *priv = key_from(K1_PRIV, 1), *k2 = key_from(K2_PUB, 0);

	(void)state;
	assert_string_equal(vd_key_id(pub), K1_ID);
	assert_string_equal(vd_key_id(priv), K1_ID);
	assert_string_equal(vd_key_id(k2), K2_ID);
	assert_false(vd_key_has_private(pub));
	assert_true(vd_key_has_private(priv));
	vd_key_free(pub);
	vd_key_free(priv);
	vd_key_free(k2);
}

/* What the key writes is what openssl wrote. */
static void test_key_pem(void **state)
{
	vd_key *priv = key_from(K1_PRIV, 1), *pub = key_from(K1_PUB, 0), *gen;
	vd_buf b;

	(void)state;
	vd_buf_init(&b);
	assert_int_equal(vd_key_public_pem(priv, &b), 0);
	assert_string_equal((char *)b.p, K1_PUB);
	vd_buf_free(&b);
	assert_int_equal(vd_key_private_pem(priv, &b), 0);
	assert_string_equal((char *)b.p, K1_PRIV);
	vd_buf_free(&b);
	assert_int_equal(vd_key_private_pem(pub, &b), -1);
	vd_buf_free(&b);

	assert_int_equal(vd_key_generate(&gen), 0);
	assert_true(vd_key_has_private(gen));
	assert_int_equal(strlen(vd_key_id(gen)), VD_KEYID_LEN);
	assert_string_not_equal(vd_key_id(gen), K1_ID);
	vd_key_free(gen);
	vd_key_free(priv);
	vd_key_free(pub);
}

static void expect_pem_refused(const char *pem, size_t len, int priv, const char *says)
{
	char err[VD_DETAIL_MAX] = "";
	vd_key *k = (vd_key *)1;

	assert_int_equal(vd_key_from_pem((const uint8_t *)pem, len, priv, &k, err, sizeof(err)), -1);
	assert_null(k);
	if (strstr(err, says) == NULL)
		fail_msg("expected \"%s\" in \"%s\"", says, err);
}

static void test_key_refusals(void **state)
{
	char *big = malloc(VD_KEY_FILE_MAX + 2), *two;

	(void)state;
	expect_pem_refused(K1_PRIV, strlen(K1_PRIV), 0, "private key");
	expect_pem_refused(K1_PUB, strlen(K1_PUB), 1, "not an unencrypted PKCS#8");
	expect_pem_refused(EC_PUB, strlen(EC_PUB), 0, "not an Ed25519 key");
	expect_pem_refused("hello", 5, 0, "not a PEM public key");
	expect_pem_refused("", 0, 0, "not a PEM public key");
	/* A cut block. */
	expect_pem_refused(K1_PUB, 40, 0, "not a PEM public key");
	/* Something before the block: OpenSSL would skip to the key. */
	two = concat("junk\n", K1_PUB);
	expect_pem_refused(two, strlen(two), 0, "not a PEM public key");
	free(two);
	/* A second key after the first. */
	two = concat(K1_PUB, K2_PUB);
	expect_pem_refused(two, strlen(two), 0, "follows the PEM key");
	free(two);
	assert_non_null(big);
	memset(big, '\n', VD_KEY_FILE_MAX + 2);
	memcpy(big, K1_PUB, strlen(K1_PUB));
	expect_pem_refused(big, VD_KEY_FILE_MAX + 1, 0, "larger");
	free(big);
	{
		/* Blank lines around the key are fine. */
		vd_key *k = key_from("\n\n" "-----BEGIN PUBLIC KEY-----\n"
		    "MCowBQYDK2VwAyEArqzod6bJUGr758O1j559NUbO0rPR2Qzfvvxeix2fT7Q=\n"
		    "-----END PUBLIC KEY-----\n\n", 0);

		assert_string_equal(vd_key_id(k), K1_ID);
		vd_key_free(k);
	}
}

static char tmpdir[64];

static void write_file(const char *name, const char *text, size_t len, mode_t mode)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static void rm_tree(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	assert_int_equal(system(cmd), 0);
}

static void load_expect(const char *name, int priv, int strict, const char *says)
{
	char path[256], err[VD_DETAIL_MAX] = "";
	vd_key *k = NULL;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	rc = vd_key_load(path, priv, strict, &k, err, sizeof(err));
	if (says == NULL) {
		assert_int_equal(rc, 0);
		assert_string_equal(vd_key_id(k), K1_ID);
		vd_key_free(k);
		return;
	}
	assert_int_equal(rc, -1);
	assert_null(k);
	if (strstr(err, says) == NULL || strstr(err, name) == NULL)
		fail_msg("expected \"%s\" and the file name in \"%s\"", says, err);
}

static void test_key_load(void **state)
{
	char *big = malloc(VD_KEY_FILE_MAX + 1), path[256];

	(void)state;
	strcpy(tmpdir, "/tmp/test_dsse.XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	write_file("k.key", K1_PRIV, strlen(K1_PRIV), 0600);
	write_file("open.key", K1_PRIV, strlen(K1_PRIV), 0640);
	write_file("k.pub", K1_PUB, strlen(K1_PUB), 0644);
	assert_non_null(big);
	memset(big, '\n', VD_KEY_FILE_MAX + 1);
	memcpy(big, K1_PUB, strlen(K1_PUB));
	write_file("big.pub", big, VD_KEY_FILE_MAX + 1, 0644);
	write_file("max.pub", big, VD_KEY_FILE_MAX, 0644);
	free(big);
	snprintf(path, sizeof(path), "%s/link.pub", tmpdir);
	assert_int_equal(symlink("k.pub", path), 0);
	snprintf(path, sizeof(path), "%s/dir.pub", tmpdir);
	assert_int_equal(mkdir(path, 0755), 0);

	load_expect("k.key", 1, 1, NULL);
	load_expect("open.key", 1, 0, NULL);
	load_expect("open.key", 1, 1, "group or others");
	load_expect("k.pub", 0, 1, NULL);      /* strictness is for private keys */
	load_expect("max.pub", 0, 0, NULL);
	load_expect("big.pub", 0, 0, "larger than");
	load_expect("link.pub", 0, 0, "symbolic link");
	load_expect("dir.pub", 0, 0, "not a regular file");
	load_expect("none.pub", 0, 0, "No such file");
	load_expect("k.key", 0, 0, "private key");
	rm_tree();
}

struct bad_list {
	char names[16][32];
	size_t n;
};

static void on_bad(const char *file, const char *why, void *arg)
{
	struct bad_list *bl = arg;

	assert_true(why[0] != '\0');
	assert_true(bl->n < 16);
	snprintf(bl->names[bl->n++], sizeof(bl->names[0]), "%s", file);
}

static void test_keyring_dir(void **state)
{
	static const char *const want_bad[] = { "bad.pub", "d.pub", "ec.pub",
		"link.pub", "priv.pub" };
	struct bad_list bl = { .n = 0 };
	char err[VD_DETAIL_MAX] = "", path[256];
	vd_keyring *kr;
	size_t i;

	(void)state;
	strcpy(tmpdir, "/tmp/test_dsse.XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	write_file("a.pub", K1_PUB, strlen(K1_PUB), 0644);
	write_file("b.pub", K2_PUB, strlen(K2_PUB), 0644);
	write_file("c.pub", K1_PUB, strlen(K1_PUB), 0644);      /* a duplicate */
	write_file(".hidden.pub", K1_PUB, strlen(K1_PUB), 0644);
	write_file("notes.txt", "not a key", 9, 0644);
	write_file("k.pub.bak", "not a key", 9, 0644);
	write_file("bad.pub", "not a key", 9, 0644);
	write_file("ec.pub", EC_PUB, strlen(EC_PUB), 0644);
	write_file("priv.pub", K1_PRIV, strlen(K1_PRIV), 0600);
	snprintf(path, sizeof(path), "%s/link.pub", tmpdir);
	assert_int_equal(symlink("b.pub", path), 0);
	snprintf(path, sizeof(path), "%s/d.pub", tmpdir);
	assert_int_equal(mkdir(path, 0755), 0);

	kr = vd_keyring_load_dir(tmpdir, on_bad, &bl, err, sizeof(err));
	assert_non_null(kr);
	assert_int_equal(kr->n, 2);
	assert_int_equal(kr->refs, 1);
	assert_string_equal(vd_key_id(kr->keys[0]), K1_ID);
	assert_string_equal(vd_key_id(kr->keys[1]), K2_ID);
	assert_ptr_equal(vd_keyring_find(kr, K2_ID), kr->keys[1]);
	assert_null(vd_keyring_find(kr, ""));
	assert_null(vd_keyring_find(NULL, K1_ID));
	assert_int_equal(bl.n, VD_ARRAY_LEN(want_bad));
	for (i = 0; i < bl.n; i++)
		assert_string_equal(bl.names[i], want_bad[i]);
	assert_ptr_equal(vd_keyring_ref(kr), kr);
	assert_int_equal(kr->refs, 2);
	vd_keyring_unref(kr);
	vd_keyring_unref(kr);
	vd_keyring_unref(NULL);

	/* A callback is optional. */
	kr = vd_keyring_load_dir(tmpdir, NULL, NULL, err, sizeof(err));
	assert_non_null(kr);
	assert_int_equal(kr->n, 2);
	vd_keyring_unref(kr);
	rm_tree();

	kr = vd_keyring_load_dir(tmpdir, on_bad, &bl, err, sizeof(err));
	assert_null(kr);
	assert_non_null(strstr(err, "cannot read the trusted keys directory"));
}

static void test_keyring_cap(void **state)
{
	char err[VD_DETAIL_MAX] = "", name[32];
	struct bad_list bl = { .n = 0 };
	vd_keyring *kr;
	vd_buf b;
	vd_key *k;
	size_t i;

	(void)state;
	strcpy(tmpdir, "/tmp/test_dsse.XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	for (i = 0; i < VD_KEYRING_MAX + 1; i++) {
		assert_int_equal(vd_key_generate(&k), 0);
		vd_buf_init(&b);
		assert_int_equal(vd_key_public_pem(k, &b), 0);
		snprintf(name, sizeof(name), "k%04zu.pub", i);
		write_file(name, (char *)b.p, b.len, 0644);
		vd_buf_free(&b);
		vd_key_free(k);
	}
	kr = vd_keyring_load_dir(tmpdir, on_bad, &bl, err, sizeof(err));
	assert_non_null(kr);
	assert_int_equal(kr->n, VD_KEYRING_MAX);
	assert_int_equal(bl.n, 1);
	snprintf(name, sizeof(name), "k%04u.pub", VD_KEYRING_MAX);
	assert_string_equal(bl.names[0], name);
	vd_keyring_unref(kr);
	rm_tree();
}

/* ---- base64 and PAE ------------------------------------------------------ */

static void test_b64_vectors(void **state)
{
	/* RFC 4648 section 10. */
	static const char *const plain[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
	static const char *const enc[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==",
		"Zm9vYmE=", "Zm9vYmFy" };
	uint8_t out[16];
	size_t i, n;
	vd_buf b;

	(void)state;
	for (i = 0; i < VD_ARRAY_LEN(plain); i++) {
		vd_buf_init(&b);
		vd_b64_encode((const uint8_t *)plain[i], strlen(plain[i]), &b);
		vd_buf_putc(&b, 0);
		assert_string_equal((char *)b.p, enc[i]);
		vd_buf_free(&b);
		assert_int_equal(vd_b64_decode(enc[i], strlen(enc[i]), out, sizeof(out), &n), 0);
		assert_int_equal(n, strlen(plain[i]));
		assert_memory_equal(out, plain[i], n);
	}
	/* Every byte value and the two last characters of the alphabet. */
	{
		uint8_t all[256], back[256];

		for (i = 0; i < 256; i++)
			all[i] = (uint8_t)i;
		vd_buf_init(&b);
		vd_b64_encode(all, sizeof(all), &b);
		assert_non_null(memchr(b.p, '+', b.len));
		assert_non_null(memchr(b.p, '/', b.len));
		assert_int_equal(vd_b64_decode((char *)b.p, b.len, back, sizeof(back), &n), 0);
		assert_int_equal(n, 256);
		assert_memory_equal(all, back, 256);
		assert_int_equal(vd_b64_decode((char *)b.p, b.len, back, 255, &n), -1);
		vd_buf_free(&b);
	}
}

static void test_b64_refusals(void **state)
{
	static const char *const bad[] = {
		"Zm9-", "Zm9_", "Zm9v!AAA", "Zm9\x80",          /* not the alphabet */
		"Zg", "Zm8", "Zm9vYg", "Zm9vYg=",               /* padding missing */
		"Zm9v\n", "Zm 9v", " Zm9v", "Zm9v\r\n", "Zm9\t",  /* white space */
		"Zh==", "Zm9=", "Zm9vYh==", "Zm9vYmF=",         /* trailing bits */
		"=", "====", "Z===", "Zg==Zg==", "Z=g=", "Zm=v", "Zg=A",  /* '=' misplaced */
	};
	uint8_t out[16];
	size_t i, n;

	(void)state;
	for (i = 0; i < VD_ARRAY_LEN(bad); i++)
		if (vd_b64_decode(bad[i], strlen(bad[i]), out, sizeof(out), &n) != -1)
			fail_msg("\"%s\" was accepted", bad[i]);
	/* A NUL inside is not base64 either. */
	assert_int_equal(vd_b64_decode("Zm\0v", 4, out, sizeof(out), &n), -1);
	/* Over the cap. */
	assert_int_equal(vd_b64_decode("Zm9v", 4, out, 2, &n), -1);
}

static void test_pae(void **state)
{
	static const char want[] = "DSSEv1 29 http://example.com/HelloWorld 11 hello world";
	vd_buf b;

	(void)state;
	vd_buf_init(&b);
	assert_int_equal(vd_dsse_pae("http://example.com/HelloWorld",
	    (const uint8_t *)"hello world", 11, &b), 0);
	assert_int_equal(b.len, strlen(want));
	assert_memory_equal(b.p, want, b.len);
	vd_buf_free(&b);
	/* Binary payloads go in as they are; the length is in bytes. */
	assert_int_equal(vd_dsse_pae("t", (const uint8_t *)"a\0b\n", 4, &b), 0);
	assert_int_equal(b.len, 17);
	assert_memory_equal(b.p, "DSSEv1 1 t 4 a\0b\n", 17);
	vd_buf_free(&b);
	assert_int_equal(vd_dsse_pae("", (const uint8_t *)"", 0, &b), 0);
	assert_string_equal((char *)b.p, "DSSEv1 0  0 ");
	vd_buf_free(&b);
}

/* ---- envelopes --------------------------------------------------------- */

static void test_openssl_envelope(void **state)
{
	vd_keyring *kr = ring_of(K2_PUB, K1_PUB);
	char why[VD_DETAIL_MAX];
	const vd_key *signer;
	vd_statement st;
	vd_dsse e;

	(void)state;
	assert_int_equal(parse_str(OPENSSL_ENV, &e, why, sizeof(why)), VD_ENV_OK);
	assert_string_equal(e.payload_type, VD_PT_ROUNDCLOSE);
	assert_int_equal(e.payload_len, strlen(RC_PAYLOAD));
	assert_memory_equal(e.payload, RC_PAYLOAD, e.payload_len);
	assert_int_equal(e.payload[e.payload_len], 0);
	assert_int_equal(e.n_sigs, 1);
	assert_string_equal(e.sigs[0].keyid, K1_ID);
	assert_int_equal(e.sigs[0].siglen, VD_ED25519_SIG_LEN);
	assert_int_equal(vd_dsse_verify(&e, kr, &signer), VD_ENV_OK);
	assert_ptr_equal(signer, kr->keys[1]);
	assert_int_equal(vd_statement_parse(e.payload_type, e.payload, e.payload_len,
	    &st, why, sizeof(why)), VD_ENV_OK);
	assert_int_equal(st.kind, VD_STMT_ROUNDCLOSE);
	assert_int_equal(st.schema_version, 2);
	assert_int_equal(st.round_index, 3);
	assert_string_equal(st.run, ".");
	assert_string_equal(st.hash, H4);
	vd_dsse_free(&e);
	vd_keyring_unref(kr);
}

/* Ed25519 is deterministic: signing the same payload with the same key
 * gives openssl's envelope byte for byte. */
static void test_sign_matches_openssl(void **state)
{
	vd_key *k = key_from(K1_PRIV, 1);
	char *env = sign_payload(VD_PT_ROUNDCLOSE, RC_PAYLOAD, k);

	(void)state;
	assert_string_equal(env, OPENSSL_ENV);
	free(env);
	vd_key_free(k);
}

static void test_sign_verify(void **state)
{
	vd_keyring *kr = ring_of(K1_PUB, NULL), *other = ring_of(K2_PUB, NULL);
	char why[VD_DETAIL_MAX], *env;
	vd_statement st = { 0 }, back;
	const vd_key *signer;
	vd_key *gen, *k = key_from(K1_PRIV, 1);
	vd_dsse e;
	vd_buf b;

	(void)state;
	st.kind = VD_STMT_CHECKPOINT;
	strcpy(st.run, "runs/a");
	st.records = 4;
	strcpy(st.head_record_hash, H4);
	vd_buf_init(&b);
	assert_int_equal(vd_statement_write(&st, &b), 0);
	assert_string_equal((char *)b.p, "{\"kind\":\"ledger_checkpoint\",\"run\":\"runs/a\","
	    "\"records\":4,\"head_record_hash\":\"" H4 "\"}");
	env = sign_payload(VD_PT_CHECKPOINT, (char *)b.p, k);
	assert_int_equal(env[strlen(env) - 1], '\n');
	assert_ptr_equal(strchr(env, '\n'), env + strlen(env) - 1);     /* one line */

	assert_int_equal(parse_str(env, &e, why, sizeof(why)), VD_ENV_OK);
	assert_int_equal(vd_dsse_verify(&e, kr, &signer), VD_ENV_OK);
	assert_string_equal(vd_key_id(signer), K1_ID);
	assert_int_equal(vd_dsse_verify(&e, other, &signer), VD_ENV_UNKNOWN_KEY);
	assert_null(signer);
	assert_int_equal(vd_dsse_verify(&e, NULL, NULL), VD_ENV_UNKNOWN_KEY);
	assert_int_equal(vd_statement_parse(e.payload_type, e.payload, e.payload_len,
	    &back, why, sizeof(why)), VD_ENV_OK);
	assert_int_equal(back.kind, VD_STMT_CHECKPOINT);
	assert_int_equal(back.records, 4);
	assert_string_equal(back.run, "runs/a");
	assert_string_equal(back.head_record_hash, H4);
	vd_dsse_free(&e);
	free(env);
	vd_buf_free(&b);

	/* A fresh key signs; a public key cannot. */
	assert_int_equal(vd_key_generate(&gen), 0);
	env = sign_payload("x/y", "{}", gen);
	assert_int_equal(check_env(env, kr), VD_ENV_UNKNOWN_KEY);
	free(env);
	vd_buf_init(&b);
	assert_int_equal(vd_dsse_sign("x/y", (const uint8_t *)"{}", 2, kr->keys[0], &b), -1);
	vd_buf_free(&b);
	vd_key_free(gen);
	vd_key_free(k);
	vd_keyring_unref(kr);
	vd_keyring_unref(other);
}

/* Each malformed shape is refused by the parser with its reason. */
static void test_envelope_malformed(void **state)
{
	static const struct { const char *env; vd_env_reason want; } cases[] = {
		{ "", VD_ENV_MALFORMED },
		{ "not json", VD_ENV_MALFORMED },
		{ "[]", VD_ENV_MALFORMED },
		{ "\"a\"", VD_ENV_MALFORMED },
		{ "{}", VD_ENV_MALFORMED },
		/* a missing field */
		{ "{\"payload\":\"\",\"signatures\":[]}", VD_ENV_MALFORMED },
		{ "{\"payloadType\":\"t\",\"signatures\":[]}", VD_ENV_MALFORMED },
		{ "{\"payloadType\":\"t\",\"payload\":\"\"}", VD_ENV_MALFORMED },
		/* an unknown envelope field */
		{ "{\"payloadType\":\"t\",\"payload\":\"\",\"signatures\":[],\"x\":1}", VD_ENV_MALFORMED },
		{ "{\"payloadType\":\"t\",\"payload\":\"\",\"signatures\":[],\"payloadtype\":\"t\"}",
		  VD_ENV_MALFORMED },
		/* duplicate keys */
		{ "{\"payloadType\":\"t\",\"payload\":\"\",\"payload\":\"\",\"signatures\":[]}",
		  VD_ENV_MALFORMED },
		{ "{\"payloadType\":\"t\",\"payload\":\"\",\"signatures\":[{\"keyid\":\"\","
		  "\"keyid\":\"\",\"sig\":\"\"}]}", VD_ENV_MALFORMED },
		{ "{\"payloadType\":\"t\",\"pay\\u006coad\":\"\",\"payload\":\"\",\"signatures\":[]}",
		  VD_ENV_MALFORMED },
		/* wrong types */
		{ "{\"payloadType\":1,\"payload\":\"\",\"signatures\":[]}", VD_ENV_MALFORMED },
		{ "{\"payloadType\":\"t\",\"payload\":null,\"signatures\":[]}", VD_ENV_MALFORMED },
		{ "{\"payloadType\":\"t\",\"payload\":\"\",\"signatures\":{}}", VD_ENV_MALFORMED },
		{ "{\"payloadType\":\"t\",\"payload\":\"\",\"signatures\":[\"x\"]}", VD_ENV_MALFORMED },
		{ "{\"payloadType\":\"t\",\"payload\":\"\",\"signatures\":[{\"keyid\":1,\"sig\":\"\"}]}",
		  VD_ENV_MALFORMED },
		{ "{\"payloadType\":\"t\",\"payload\":\"\",\"signatures\":[{\"keyid\":\"\",\"sig\":[]}]}",
		  VD_ENV_MALFORMED },
		/* signature fields: unknown, missing */
		{ "{\"payloadType\":\"t\",\"payload\":\"\",\"signatures\":[{\"keyid\":\"\",\"sig\":\"\","
		  "\"cert\":\"\"}]}", VD_ENV_MALFORMED },
		{ "{\"payloadType\":\"t\",\"payload\":\"\",\"signatures\":[{\"keyid\":\"\"}]}",
		  VD_ENV_MALFORMED },
		{ "{\"payloadType\":\"t\",\"payload\":\"\",\"signatures\":[{\"sig\":\"\"}]}",
		  VD_ENV_MALFORMED },
		/* bad base64: payload and sig */
		{ "{\"payloadType\":\"t\",\"payload\":\"Zm9-\",\"signatures\":[]}", VD_ENV_MALFORMED },
		{ "{\"payloadType\":\"t\",\"payload\":\"Zm9_\",\"signatures\":[]}", VD_ENV_MALFORMED },
		{ "{\"payloadType\":\"t\",\"payload\":\"Zg\",\"signatures\":[]}", VD_ENV_MALFORMED },
		{ "{\"payloadType\":\"t\",\"payload\":\"Zm9v\\n\",\"signatures\":[]}", VD_ENV_MALFORMED },
		{ "{\"payloadType\":\"t\",\"payload\":\"Zm 9v\",\"signatures\":[]}", VD_ENV_MALFORMED },
		{ "{\"payloadType\":\"t\",\"payload\":\"Zh==\",\"signatures\":[]}", VD_ENV_MALFORMED },
		{ "{\"payloadType\":\"t\",\"payload\":\"\",\"signatures\":[{\"keyid\":\"\",\"sig\":\"AQ\"}]}",
		  VD_ENV_MALFORMED },
		{ "{\"payloadType\":\"t\",\"payload\":\"\",\"signatures\":[{\"keyid\":\"\",\"sig\":\"AR==\"}]}",
		  VD_ENV_MALFORMED },
		/* payloadType: empty, control characters */
		{ "{\"payloadType\":\"\",\"payload\":\"\",\"signatures\":[]}", VD_ENV_PAYLOAD_TYPE },
		{ "{\"payloadType\":\"a\\nb\",\"payload\":\"\",\"signatures\":[]}", VD_ENV_PAYLOAD_TYPE },
		{ "{\"payloadType\":\"\\u00e9\",\"payload\":\"\",\"signatures\":[]}", VD_ENV_PAYLOAD_TYPE },
		/* strict JSON */
		{ "{\"payloadType\":\"t\",\"payload\":\"\",\"signatures\":[]} x", VD_ENV_MALFORMED },
		{ "{\"payloadType\":\"t\",\"payload\":\"\",\"signatures\":[],}", VD_ENV_MALFORMED },
		{ "{\"payloadType\":\"t\",\"payload\":\"\",\"signatures\":[[[[[[[[[]]]]]]]]]}",
		  VD_ENV_MALFORMED },
	};
	char why[VD_DETAIL_MAX];
	vd_dsse e;
	size_t i;

	(void)state;
	for (i = 0; i < VD_ARRAY_LEN(cases); i++) {
		vd_env_reason r = parse_str(cases[i].env, &e, why, sizeof(why));

		if (r != cases[i].want)
			fail_msg("case %zu (%s): %s, want %s (%s)", i, cases[i].env,
			    vd_env_reason_name(r), vd_env_reason_name(cases[i].want), why);
		assert_true(why[0] != '\0');
		assert_null(e.payload);
		assert_int_equal(e.n_sigs, 0);
	}
}

static void test_envelope_limits(void **state)
{
	vd_keyring *kr = ring_of(K1_PUB, NULL);
	char *env, type[VD_DSSE_MAX_TYPE + 4], why[VD_DETAIL_MAX];
	vd_buf b;
	vd_dsse e;
	size_t i;

	(void)state;
	/* Exactly the cap parses; one byte more is refused before parsing. */
	vd_buf_init(&b);
	vd_buf_puts(&b, OPENSSL_ENV);
	while (b.len < VD_DSSE_MAX_BYTES)
		vd_buf_putc(&b, ' ');
	assert_int_equal(vd_dsse_parse(b.p, b.len, &e, why, sizeof(why)), VD_ENV_OK);
	assert_int_equal(vd_dsse_verify(&e, kr, NULL), VD_ENV_OK);
	vd_dsse_free(&e);
	vd_buf_putc(&b, ' ');
	assert_int_equal(vd_dsse_parse(b.p, b.len, &e, why, sizeof(why)), VD_ENV_TOO_LARGE);
	assert_non_null(strstr(why, "larger"));
	/* Even when it is not JSON at all: the size is checked first. */
	memset(b.p, '!', b.len);
	assert_int_equal(vd_dsse_parse(b.p, b.len, &e, why, sizeof(why)), VD_ENV_TOO_LARGE);
	vd_buf_free(&b);

	/* No signatures parses, and verifies as none. */
	assert_int_equal(check_env("{\"payloadType\":\"t\",\"payload\":\"\",\"signatures\":[]}", kr),
	    VD_ENV_NO_SIGNATURE);

	/* VD_DSSE_MAX_SIGS signatures parse; one more is refused. */
	vd_buf_init(&b);
	vd_buf_puts(&b, "[");
	for (i = 0; i < VD_DSSE_MAX_SIGS; i++)
		vd_buf_printf(&b, "%s{\"keyid\":\"%zu\",\"sig\":\"" JUNK_SIG_B64 "\"}", i ? "," : "", i);
	vd_buf_puts(&b, "]");
	env = env3("\"t\"", "\"\"", (char *)b.p);
	assert_int_equal(parse_str(env, &e, why, sizeof(why)), VD_ENV_OK);
	assert_int_equal(e.n_sigs, VD_DSSE_MAX_SIGS);
	vd_dsse_free(&e);
	free(env);
	b.len--;
	vd_buf_puts(&b, ",{\"keyid\":\"x\",\"sig\":\"\"}]");
	env = env3("\"t\"", "\"\"", (char *)b.p);
	assert_int_equal(parse_str(env, &e, why, sizeof(why)), VD_ENV_MALFORMED);
	assert_non_null(strstr(why, "signatures"));
	free(env);
	vd_buf_free(&b);

	/* payloadType: VD_DSSE_MAX_TYPE bytes parse, one more does not. */
	type[0] = '"';
	memset(type + 1, 'a', VD_DSSE_MAX_TYPE);
	strcpy(type + 1 + VD_DSSE_MAX_TYPE, "\"");
	env = env3(type, "\"\"", "[]");
	assert_int_equal(parse_str(env, &e, why, sizeof(why)), VD_ENV_OK);
	assert_int_equal(strlen(e.payload_type), VD_DSSE_MAX_TYPE);
	vd_dsse_free(&e);
	free(env);
	type[VD_DSSE_MAX_TYPE + 1] = 'a';
	strcpy(type + VD_DSSE_MAX_TYPE + 2, "\"");
	env = env3(type, "\"\"", "[]");
	assert_int_equal(parse_str(env, &e, why, sizeof(why)), VD_ENV_PAYLOAD_TYPE);
	free(env);
	vd_keyring_unref(kr);
}

/* Signatures by unknown keys, bad signatures and changes after signing. */
static void test_envelope_signatures(void **state)
{
	vd_keyring *kr = ring_of(K1_PUB, NULL), *both = ring_of(K2_PUB, K1_PUB),
	    *other = ring_of(K2_PUB, NULL);
	char *env, *env2, bad_sig[] = RC_SIG_B64, longid[101];
	vd_buf sigs, rsa;
	size_t i;
	vd_key *k = key_from(K1_PRIV, 1);
	vd_dsse e;
	char why[VD_DETAIL_MAX];

	(void)state;
	assert_int_equal(check_env(OPENSSL_ENV, kr), VD_ENV_OK);
	/* By an unknown key only. */
	assert_int_equal(check_env(OPENSSL_ENV, other), VD_ENV_UNKNOWN_KEY);
	env = replace(OPENSSL_ENV, K1_ID, K2_ID);
	assert_int_equal(check_env(env, kr), VD_ENV_UNKNOWN_KEY);
	/* A trusted keyid whose signature is another key's: it fails. */
	assert_int_equal(check_env(env, both), VD_ENV_BAD_SIGNATURE);
	free(env);
	/* A signature that does not verify: one bit changed. */
	bad_sig[10] = bad_sig[10] == 'A' ? 'B' : 'A';
	env = replace(OPENSSL_ENV, RC_SIG_B64, bad_sig);
	assert_int_equal(check_env(env, kr), VD_ENV_BAD_SIGNATURE);
	free(env);
	/* The wrong length. */
	env = replace(OPENSSL_ENV, RC_SIG_B64, "AQEB");
	assert_int_equal(check_env(env, kr), VD_ENV_BAD_SIGNATURE);
	free(env);
	env = replace(OPENSSL_ENV, RC_SIG_B64, "");
	assert_int_equal(check_env(env, kr), VD_ENV_BAD_SIGNATURE);
	free(env);
	/* The payload swapped after signing. */
	env2 = sign_payload(VD_PT_ROUNDCLOSE, "{\"x\":1}", k);
	env = replace(OPENSSL_ENV, RC_PAYLOAD_B64, "eyJ4IjoxfQ==");
	assert_int_equal(check_env(env, kr), VD_ENV_BAD_SIGNATURE);
	assert_int_equal(check_env(env2, kr), VD_ENV_OK);
	free(env);
	free(env2);
	/* The payloadType swapped after signing: PAE binds it. */
	env = replace(OPENSSL_ENV, VD_PT_ROUNDCLOSE, VD_PT_CHECKPOINT);
	assert_int_equal(check_env(env, kr), VD_ENV_BAD_SIGNATURE);
	free(env);

	/* Unknown signers are ignored, whatever their keyid or signature
	 * length; a trusted one that fails does not stop a later one. */
	memset(longid, 'f', 100);
	longid[100] = '\0';
	vd_buf_init(&rsa);
	for (i = 0; i < 86; i++)        /* 258 bytes, as long as an RSA-2048 one and more */
		vd_buf_puts(&rsa, "AQEB");
	vd_buf_init(&sigs);
	vd_buf_printf(&sigs, "[{\"keyid\":\"%s\",\"sig\":\"%s\"},"
	    "{\"keyid\":\"\",\"sig\":\"%s\"},"
	    "{\"keyid\":\"" K1_ID "\",\"sig\":\"" JUNK_SIG_B64 "\"},"
	    "{\"keyid\":\"" K1_ID "\",\"sig\":\"" RC_SIG_B64 "\"}]",
	    longid, RC_SIG_B64, (char *)rsa.p);
	env = env3("\"" VD_PT_ROUNDCLOSE "\"", "\"" RC_PAYLOAD_B64 "\"", (char *)sigs.p);
	vd_buf_free(&sigs);
	assert_int_equal(check_env(env, kr), VD_ENV_OK);
	assert_int_equal(parse_str(env, &e, why, sizeof(why)), VD_ENV_OK);
	assert_string_equal(e.sigs[0].keyid, "");          /* too long to name a key */
	assert_string_equal(e.sigs[1].keyid, "");
	assert_int_equal(e.sigs[1].siglen, 258);        /* kept, unverifiable */
	assert_int_equal(e.sigs[2].siglen, VD_ED25519_SIG_LEN);
	vd_dsse_free(&e);
	vd_buf_free(&rsa);
	free(env);
	/* A keyid with a NUL names no key, even if it starts like one. */
	env = replace(OPENSSL_ENV, K1_ID, K1_ID "\\u0000");
	assert_int_equal(check_env(env, kr), VD_ENV_UNKNOWN_KEY);
	free(env);
	env = replace(OPENSSL_ENV, K1_ID, "F265F355D6F1E4BB03D3FEEADCA77570BBFDB7D7EE871528C52C3CF4C58F8567");
	assert_int_equal(check_env(env, kr), VD_ENV_UNKNOWN_KEY);
	free(env);

	vd_key_free(k);
	vd_keyring_unref(kr);
	vd_keyring_unref(both);
	vd_keyring_unref(other);
}

/* ---- statements ---------------------------------------------------------- */

static vd_env_reason stmt(const char *type, const char *payload, vd_statement *st,
    char *why, size_t n)
{
	memset(why, 0, n);
	return vd_statement_parse(type, (const uint8_t *)payload, strlen(payload), st, why, n);
}

static void test_statement_valid(void **state)
{
	static const struct { const char *type, *p; } ok[] = {
		{ VD_PT_ROUNDCLOSE, RC_PAYLOAD },
		{ VD_PT_ROUNDCLOSE, "{\"schema_version\":1,\"kind\":\"round_close\",\"run\":\"r1\","
		  "\"round_index\":0,\"global_model_hash\":\"" H4 "\"}" },
		{ VD_PT_ROUNDCLOSE, "{\"schema_version\":2,\"kind\":\"round_close\",\"run\":\"a/b c/\u00e9\","
		  "\"round_index\":9223372036854775807,\"global_model_hash\":\"" H4 "\"}" },
		{ VD_PT_CHECKPOINT, "{\"kind\":\"ledger_checkpoint\",\"run\":\".\",\"records\":1,"
		  "\"head_record_hash\":\"" H4 "\"}" },
		{ VD_PT_CHECKPOINT, "{\"kind\":\"ledger_checkpoint\",\"run\":\"x\\\"y\",\"records\":7,"
		  "\"head_record_hash\":\"" H4 "\"}" },
	};
	char why[VD_DETAIL_MAX];
	vd_statement st;
	vd_buf b;
	size_t i;

	(void)state;
	/* Canonical payloads read back to themselves. */
	for (i = 0; i < VD_ARRAY_LEN(ok); i++) {
		if (stmt(ok[i].type, ok[i].p, &st, why, sizeof(why)) != VD_ENV_OK)
			fail_msg("case %zu refused: %s", i, why);
		vd_buf_init(&b);
		assert_int_equal(vd_statement_write(&st, &b), 0);
		assert_string_equal((char *)b.p, ok[i].p);
		vd_buf_free(&b);
	}
	/* Spacing and order do not matter to the reader. */
	assert_int_equal(stmt(VD_PT_CHECKPOINT, " {\"head_record_hash\" : \"" H4 "\", "
	    "\"records\":2,\"run\":\"r\",\"kind\":\"ledger_checkpoint\"}\n", &st, why,
	    sizeof(why)), VD_ENV_OK);
	assert_int_equal(st.records, 2);
	/* The writer refuses what the reader would. */
	vd_buf_init(&b);
	st.records = 0;
	assert_int_equal(vd_statement_write(&st, &b), -1);
	st.records = 1;
	strcpy(st.run, "../x");
	assert_int_equal(vd_statement_write(&st, &b), -1);
	vd_buf_free(&b);
}

static void test_statement_refusals(void **state)
{
#define RC(fields) "{\"schema_version\":2,\"kind\":\"round_close\"," fields "}"
#define RCF(run, round, hash) RC("\"run\":" run ",\"round_index\":" round \
	",\"global_model_hash\":" hash)
#define CP(run, records, hash) "{\"kind\":\"ledger_checkpoint\",\"run\":" run \
	",\"records\":" records ",\"head_record_hash\":" hash "}"
#define HQ "\"" H4 "\""
	static const struct { const char *type, *p, *says; } bad[] = {
		/* unknown and missing fields */
		{ VD_PT_ROUNDCLOSE, RC("\"run\":\".\",\"round_index\":1,\"global_model_hash\":" HQ
		  ",\"participants\":[]"), "unknown field \"participants\"" },
		{ VD_PT_ROUNDCLOSE, RC("\"round_index\":1,\"global_model_hash\":" HQ), "no field \"run\"" },
		{ VD_PT_ROUNDCLOSE, RC("\"run\":\".\",\"global_model_hash\":" HQ), "no field \"round_index\"" },
		{ VD_PT_ROUNDCLOSE, RC("\"run\":\".\",\"round_index\":1"), "no field \"global_model_hash\"" },
		{ VD_PT_ROUNDCLOSE, "{\"kind\":\"round_close\",\"run\":\".\",\"round_index\":1,"
		  "\"global_model_hash\":" HQ "}", "no field \"schema_version\"" },
		{ VD_PT_CHECKPOINT, CP("\".\"", "1", HQ), NULL },     /* the base of those below */
		{ VD_PT_CHECKPOINT, "{\"kind\":\"ledger_checkpoint\",\"run\":\".\",\"records\":1,"
		  "\"head_record_hash\":" HQ ",\"extra\":null}", "unknown field \"extra\"" },
		{ VD_PT_CHECKPOINT, "{\"kind\":\"ledger_checkpoint\",\"run\":\".\",\"records\":1}",
		  "no field \"head_record_hash\"" },
		{ VD_PT_CHECKPOINT, "{\"run\":\".\",\"records\":1,\"head_record_hash\":" HQ "}",
		  "no field \"kind\"" },
		/* the other statement's fields */
		{ VD_PT_CHECKPOINT, RCF("\".\"", "1", HQ), "unknown field" },
		{ VD_PT_ROUNDCLOSE, CP("\".\"", "1", HQ), "unknown field" },
		/* wrong types and values */
		{ VD_PT_ROUNDCLOSE, "{\"schema_version\":\"2\",\"kind\":\"round_close\",\"run\":\".\","
		  "\"round_index\":1,\"global_model_hash\":" HQ "}", "schema_version" },
		{ VD_PT_ROUNDCLOSE, "{\"schema_version\":3,\"kind\":\"round_close\",\"run\":\".\","
		  "\"round_index\":1,\"global_model_hash\":" HQ "}", "schema_version" },
		{ VD_PT_ROUNDCLOSE, "{\"schema_version\":2.0,\"kind\":\"round_close\",\"run\":\".\","
		  "\"round_index\":1,\"global_model_hash\":" HQ "}", "schema_version" },
		{ VD_PT_ROUNDCLOSE, "{\"schema_version\":2,\"kind\":\"ledger_checkpoint\",\"run\":\".\","
		  "\"round_index\":1,\"global_model_hash\":" HQ "}", "kind" },
		{ VD_PT_ROUNDCLOSE, RCF("\".\"", "-1", HQ), "round_index" },
		{ VD_PT_ROUNDCLOSE, RCF("\".\"", "\"1\"", HQ), "round_index" },
		{ VD_PT_ROUNDCLOSE, RCF("\".\"", "1.5", HQ), "round_index" },
		{ VD_PT_ROUNDCLOSE, RCF("\".\"", "1e3", HQ), "round_index" },
		{ VD_PT_ROUNDCLOSE, RCF("\".\"", "9223372036854775808", HQ), "round_index" },
		{ VD_PT_ROUNDCLOSE, RCF("\".\"", "null", HQ), "round_index" },
		{ VD_PT_ROUNDCLOSE, RCF("1", "1", HQ), "run" },
		{ VD_PT_ROUNDCLOSE, RCF("\"\"", "1", HQ), "run" },
		{ VD_PT_ROUNDCLOSE, RCF("\"../x\"", "1", HQ), "run" },
		{ VD_PT_ROUNDCLOSE, RCF("\"/srv/x\"", "1", HQ), "run" },
		{ VD_PT_ROUNDCLOSE, RCF("\"a//b\"", "1", HQ), "run" },
		{ VD_PT_ROUNDCLOSE, RCF("\"a/\"", "1", HQ), "run" },
		{ VD_PT_ROUNDCLOSE, RCF("\"./a\"", "1", HQ), "run" },
		{ VD_PT_ROUNDCLOSE, RCF("\"a\\u0000b\"", "1", HQ), "run" },
		/* bad hashes */
		{ VD_PT_ROUNDCLOSE, RCF("\".\"", "1", "\"31CEB436627AFCFFADC9ADAA9EBAF7B86029955C1FC49236999A28AB33CB235E\""),
		  "global_model_hash" },
		{ VD_PT_ROUNDCLOSE, RCF("\".\"", "1", "\"31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235\""),
		  "global_model_hash" },
		{ VD_PT_ROUNDCLOSE, RCF("\".\"", "1", "\"31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e0\""),
		  "global_model_hash" },
		{ VD_PT_ROUNDCLOSE, RCF("\".\"", "1", "null"), "global_model_hash" },
		{ VD_PT_CHECKPOINT, CP("\".\"", "1", "\"sha256:" H4 "\""), "head_record_hash" },
		{ VD_PT_CHECKPOINT, CP("\".\"", "0", HQ), "records" },
		{ VD_PT_CHECKPOINT, CP("\".\"", "-4", HQ), "records" },
		{ VD_PT_CHECKPOINT, CP("\".\"", "\"4\"", HQ), "records" },
		{ VD_PT_CHECKPOINT, CP("\".\"", "4.0", HQ), "records" },
		{ VD_PT_CHECKPOINT, CP("[\".\"]", "4", HQ), "run" },
		/* duplicate keys, not an object, not JSON */
		{ VD_PT_ROUNDCLOSE, RC("\"run\":\".\",\"run\":\".\",\"round_index\":1,"
		  "\"global_model_hash\":" HQ), "duplicate" },
		{ VD_PT_CHECKPOINT, "{\"kind\":\"ledger_checkpoint\",\"run\":\".\",\"records\":1,"
		  "\"records\":2,\"head_record_hash\":" HQ "}", "duplicate" },
		{ VD_PT_ROUNDCLOSE, "[]", "not a JSON object" },
		{ VD_PT_ROUNDCLOSE, "", "not valid JSON" },
		{ VD_PT_ROUNDCLOSE, RCF("\".\"", "1", HQ) "x", "not valid JSON" },
		{ VD_PT_ROUNDCLOSE, "{\"schema_version\":2,\"kind\":\"round_close\",\"run\":\".\","
		  "\"round_index\":1,\"global_model_hash\":" HQ "}{}", "not valid JSON" },
	};
	char why[VD_DETAIL_MAX];
	vd_statement st;
	vd_env_reason r;
	size_t i;

	(void)state;
	for (i = 0; i < VD_ARRAY_LEN(bad); i++) {
		r = stmt(bad[i].type, bad[i].p, &st, why, sizeof(why));
		if (bad[i].says == NULL) {
			assert_int_equal(r, VD_ENV_OK);    /* the well-formed base of its neighbours */
			continue;
		}
		if (r != VD_ENV_PAYLOAD || strstr(why, bad[i].says) == NULL)
			fail_msg("case %zu (%s): %s \"%s\", want payload \"%s\"", i, bad[i].p,
			    vd_env_reason_name(r), why, bad[i].says);
	}
	/* A payloadType that carries no statement. */
	assert_int_equal(stmt("application/json", RC_PAYLOAD, &st, why, sizeof(why)),
	    VD_ENV_PAYLOAD_TYPE);
	assert_non_null(strstr(why, "application/json"));
	assert_int_equal(stmt(VD_PT_INTOTO, RC_PAYLOAD, &st, why, sizeof(why)),
	    VD_ENV_PAYLOAD_TYPE);
#undef RC
#undef RCF
#undef CP
#undef HQ
}

static void test_run_names(void **state)
{
	static const char *const good[] = { ".", "a", "a/b", "run 1", "..a", "a..", ".a/b.",
		"a/.b" };
	static const char *const bad[] = { "", "/", "/a", "a/", "a//b", "./a", "a/.", "..",
		"a/../b", "a/./b", "../a" };
	size_t i;

	(void)state;
	for (i = 0; i < VD_ARRAY_LEN(good); i++)
		if (!vd_run_name_valid(good[i], strlen(good[i])))
			fail_msg("\"%s\" refused", good[i]);
	for (i = 0; i < VD_ARRAY_LEN(bad); i++)
		if (vd_run_name_valid(bad[i], strlen(bad[i])))
			fail_msg("\"%s\" accepted", bad[i]);
	assert_false(vd_run_name_valid("a\0b", 3));
}

static void test_reason_names(void **state)
{
	vd_env_reason r;

	(void)state;
	assert_string_equal(vd_env_reason_name(VD_ENV_OK), "ok");
	assert_string_equal(vd_env_reason_name(VD_ENV_BAD_SIGNATURE), "bad_signature");
	assert_string_equal(vd_env_reason_name(VD_ENV_UNKNOWN_KEY), "unknown_key");
	for (r = VD_ENV_OK; r < VD_ENV_REASON_COUNT; r++)
		assert_string_not_equal(vd_env_reason_name(r), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_key_id),
		cmocka_unit_test(test_key_pem),
		cmocka_unit_test(test_key_refusals),
		cmocka_unit_test(test_key_load),
		cmocka_unit_test(test_keyring_dir),
		cmocka_unit_test(test_keyring_cap),
		cmocka_unit_test(test_b64_vectors),
		cmocka_unit_test(test_b64_refusals),
		cmocka_unit_test(test_pae),
		cmocka_unit_test(test_openssl_envelope),
		cmocka_unit_test(test_sign_matches_openssl),
		cmocka_unit_test(test_sign_verify),
		cmocka_unit_test(test_envelope_malformed),
		cmocka_unit_test(test_envelope_limits),
		cmocka_unit_test(test_envelope_signatures),
		cmocka_unit_test(test_statement_valid),
		cmocka_unit_test(test_statement_refusals),
		cmocka_unit_test(test_run_names),
		cmocka_unit_test(test_reason_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

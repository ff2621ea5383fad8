/*
 * OMS bundles and statements: pure parsers over bytes (see vd_oms.h).
 * The bundle layer is strict (a field this reader does not know is
 * refused: it could change what is signed or by whom); the statement
 * layer ignores fields it does not know, as OMS 5.2.1 requires.
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vd_dsse.h"
#include "vd_hash.h"
#include "vd_json.h"
#include "vd_oms.h"
#include "vd_utf8.h"

#define MEDIA_TYPE_ALT "application/vnd.dev.sigstore.bundle+json;version=0.3"
#define PREDICATE_V01 "https://model_signing/Digests/v0.1"
#define QUOTE_MAX 80           /* bytes of an untrusted string quoted in a sentence */
#define DIGITS_MAX 20          /* decimal digits of a uint64_t */

const char *vd_oms_code_name(vd_oms_code c)
{
	switch (c) {
	case VD_OMS_OK: return "ok";
	case VD_OMS_MALFORMED: return "malformed";
	case VD_OMS_UNSUPPORTED: return "unsupported";
	case VD_OMS_KEY_MISMATCH: return "key_mismatch";
	case VD_OMS_UNTRUSTED: return "untrusted";
	case VD_OMS_BAD_SIGNATURE: return "bad_signature";
	case VD_OMS_MISMATCH: return "mismatch";
	case VD_OMS_UNREADABLE: return "unreadable";
	case VD_OMS_CODE_COUNT: break;
	}
	return "unknown";
}

/* Sentences quote untrusted bytes: cut to valid UTF-8 so that they can go
 * into JSON or a log line as they are. */
static vd_oms_code say(vd_oms_code c, char *why, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static vd_oms_code say(vd_oms_code c, char *why, size_t n, const char *fmt, ...)
{
	va_list ap;

	if (n == 0)
		return c;
	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
	vd_utf8_sanitize(why);
	return c;
}

static int qlen(size_t len)
{
	return (int)(len < QUOTE_MAX ? len : QUOTE_MAX);
}

/* ---- paths (OMS 6.1.2, 6.2.1) -------------------------------------------- */

int vd_oms_path_valid(const char *s, size_t len)
{
	size_t i, start = 0, clen;

	if (len == 0 || len > VD_OMS_MAX_NAME || memchr(s, '\0', len) != NULL ||
	    !vd_utf8_valid((const uint8_t *)s, len))
		return 0;
	for (i = 0; i <= len; i++) {
		if (i < len && s[i] != '/')
			continue;
		clen = i - start;
		if (clen == 0 || (clen == 1 && s[start] == '.') ||
		    (clen == 2 && s[start] == '.' && s[start + 1] == '.'))
			return 0;
		start = i + 1;
	}
	return 1;
}

int vd_oms_ignore_valid(const char *s, size_t len)
{
	return vd_oms_path_valid(s, len) && memchr(s, '*', len) == NULL &&
	    memchr(s, '?', len) == NULL && memchr(s, '[', len) == NULL;
}

/* Decimal without sign or leading zeros: 0, or -1. */
static int parse_offset(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (len == 0 || len > DIGITS_MAX || (len > 1 && s[0] == '0'))
		return -1;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9' ||
		    vd_mul_u64(v, 10, &v) < 0 || vd_add_u64(v, (uint64_t)(s[i] - '0'), &v) < 0)
			return -1;
	}
	*out = v;
	return 0;
}

int vd_oms_shard_split(const char *name, size_t len, size_t *path_len,
    uint64_t *start, uint64_t *end)
{
	size_t c2 = len, c1;

	while (c2 > 0 && name[c2 - 1] != ':')
		c2--;
	if (c2 == 0)
		return -1;
	c1 = c2 - 1;
	while (c1 > 0 && name[c1 - 1] != ':')
		c1--;
	if (c1 == 0)
		return -1;
	/* name[c1 - 1] and name[c2 - 1] are the last two colons. */
	if (parse_offset(name + c1, c2 - 1 - c1, start) < 0 ||
	    parse_offset(name + c2, len - c2, end) < 0 || *start >= *end)
		return -1;
	*path_len = c1 - 1;
	return 0;
}

int vd_oms_ignored(const char *rel, char *const *ignore, size_t n)
{
	size_t i, len;

	for (i = 0; i < n; i++) {
		len = strlen(ignore[i]);
		if (strncmp(rel, ignore[i], len) == 0 && (rel[len] == '\0' || rel[len] == '/'))
			return 1;
	}
	return 0;
}

/* ---- JSON helpers -------------------------------------------------------- */

static vd_oms_code only_keys(const vd_jval *o, const char *const *keys, size_t nkeys,
    const char *what, char *why, size_t n)
{
	const vd_jval *c;
	size_t i;

	for (c = o->child; c != NULL; c = c->next) {
		for (i = 0; i < nkeys && !vd_str_eq(c->key, keys[i]); i++)
			;
		if (i == nkeys)
			return say(VD_OMS_MALFORMED, why, n, "%s has an unknown field \"%.*s\"",
			    what, qlen(c->key.len), c->key.p);
	}
	return VD_OMS_OK;
}

/* Member key of o, of type t: NULL when absent; *bad when of another type. */
static const vd_jval *member(const vd_jval *o, const char *key, vd_jtype t, int *bad)
{
	const vd_jval *v = vd_json_get(o, key);

	*bad = v != NULL && v->type != t;
	return *bad ? NULL : v;
}

static vd_oms_code need(const vd_jval *o, const char *key, vd_jtype t, const char *what,
    const vd_jval **out, char *why, size_t n)
{
	int bad;

	if ((*out = member(o, key, t, &bad)) != NULL)
		return VD_OMS_OK;
	if (bad)
		return say(VD_OMS_MALFORMED, why, n, "%s: \"%s\" is not of type %s", what, key,
		    vd_jtype_name(t));
	return say(VD_OMS_MALFORMED, why, n, "%s has no \"%s\"", what, key);
}

static int str_is(const vd_jval *v, const char *s)
{
	return v != NULL && v->type == VD_JSTR && vd_str_eq(v->str, s);
}

static int b64_bytes(const vd_jval *v, size_t cap, vd_oms_bytes *out)
{
	if ((out->p = malloc(cap + 1)) == NULL)
		return -1;
	if (vd_b64_decode(v->str.p, v->str.len, out->p, cap, &out->len) < 0) {
		free(out->p);
		out->p = NULL;
		out->len = 0;
		return -1;
	}
	out->p[out->len] = '\0';
	return 0;
}

static int parse_json(const uint8_t *buf, size_t len, vd_jdoc *doc, char *err, size_t n)
{
	vd_json_opts opts = { .max_depth = VD_OMS_MAX_DEPTH, .max_memory = 0 };

	return vd_json_parse(buf, len, &opts, doc, err, n);
}

/* ---- the bundle ---------------------------------------------------------- */

void vd_oms_bundle_free(vd_oms_bundle *b)
{
	size_t i;

	if (b == NULL)
		return;
	free(b->raw_key.p);
	for (i = 0; i < b->n_certs; i++)
		free(b->certs[i].p);
	free(b->payload.p);
	free(b->sig.p);
	memset(b, 0, sizeof(*b));
}

static vd_oms_code parse_public_key(const vd_jval *pk, vd_oms_bundle *out, char *why, size_t n)
{
	static const char *const keys[] = { "hint", "rawBytes", "keyDetails" };
	const vd_jval *hint, *raw;
	vd_oms_code c;
	int bad;

	if ((c = only_keys(pk, keys, VD_ARRAY_LEN(keys), "publicKey", why, n)) != VD_OMS_OK)
		return c;
	out->method = VD_OMS_METHOD_KEY;
	hint = member(pk, "hint", VD_JSTR, &bad);
	if (bad || (hint != NULL && hint->str.len > 0 && !vd_is_hex64(hint->str)))
		return say(VD_OMS_MALFORMED, why, n, "publicKey.hint is not a SHA-256 in lowercase hex");
	if (hint != NULL)
		memcpy(out->hint, hint->str.p, hint->str.len + 1);
	raw = member(pk, "rawBytes", VD_JSTR, &bad);
	if (bad || (raw != NULL && b64_bytes(raw, VD_KEY_FILE_MAX, &out->raw_key) < 0))
		return say(VD_OMS_MALFORMED, why, n, "publicKey.rawBytes is not a base64 key");
	(void)member(pk, "keyDetails", VD_JSTR, &bad);
	if (bad)
		return say(VD_OMS_MALFORMED, why, n, "publicKey.keyDetails is not a string");
	return VD_OMS_OK;
}

static vd_oms_code parse_chain(const vd_jval *ch, vd_oms_bundle *out, char *why, size_t n)
{
	static const char *const keys[] = { "certificates" };
	static const char *const cert_keys[] = { "rawBytes" };
	const vd_jval *certs, *c, *raw;
	vd_oms_code r;

	if ((r = only_keys(ch, keys, 1, "x509CertificateChain", why, n)) != VD_OMS_OK ||
	    (r = need(ch, "certificates", VD_JARR, "x509CertificateChain", &certs, why, n)) != VD_OMS_OK)
		return r;
	out->method = VD_OMS_METHOD_CERTIFICATE;
	if (certs->count == 0 || certs->count > VD_OMS_MAX_CERTS)
		return say(VD_OMS_MALFORMED, why, n, "the certificate chain holds %zu certificates, "
		    "not 1 to %u", certs->count, VD_OMS_MAX_CERTS);
	for (c = certs->child; c != NULL; c = c->next) {
		if (c->type != VD_JOBJ ||
		    (r = only_keys(c, cert_keys, 1, "a certificate", why, n)) != VD_OMS_OK ||
		    (r = need(c, "rawBytes", VD_JSTR, "a certificate", &raw, why, n)) != VD_OMS_OK)
			return c->type != VD_JOBJ ? say(VD_OMS_MALFORMED, why, n,
			    "a certificate of the chain is not an object") : r;
		if (b64_bytes(raw, VD_OMS_MAX_CERT_BYTES, &out->certs[out->n_certs]) < 0)
			return say(VD_OMS_MALFORMED, why, n, "certificate %zu of the chain is not "
			    "base64 of at most %u bytes", out->n_certs + 1, VD_OMS_MAX_CERT_BYTES);
		out->n_certs++;
	}
	return VD_OMS_OK;
}

static vd_oms_code parse_material(const vd_jval *vm, vd_oms_bundle *out, char *why, size_t n)
{
	static const char *const keys[] = { "publicKey", "x509CertificateChain", "certificate",
	    "tlogEntries", "timestampVerificationData" };
	const vd_jval *pk, *ch, *tl;
	vd_oms_code c;
	int bad_pk, bad_ch, bad_tl;

	if ((c = only_keys(vm, keys, VD_ARRAY_LEN(keys), "verificationMaterial", why, n)) != VD_OMS_OK)
		return c;
	if (vd_json_get(vm, "certificate") != NULL)
		return say(VD_OMS_UNSUPPORTED, why, n, "the bundle is signed with the sigstore "
		    "(keyless) method; only the key and certificate methods are verified here");
	pk = member(vm, "publicKey", VD_JOBJ, &bad_pk);
	ch = member(vm, "x509CertificateChain", VD_JOBJ, &bad_ch);
	tl = member(vm, "tlogEntries", VD_JARR, &bad_tl);
	(void)tl;
	if (bad_pk || bad_ch || bad_tl)
		return say(VD_OMS_MALFORMED, why, n, "verificationMaterial: publicKey, "
		    "x509CertificateChain or tlogEntries is not of the right type");
	if ((pk == NULL) == (ch == NULL))
		return say(VD_OMS_MALFORMED, why, n, "verificationMaterial must hold exactly one "
		    "of publicKey and x509CertificateChain");
	return pk != NULL ? parse_public_key(pk, out, why, n) : parse_chain(ch, out, why, n);
}

static vd_oms_code parse_signature(const vd_jval *sigs, vd_oms_bundle *out, char *why, size_t n)
{
	static const char *const keys[] = { "sig", "keyid" };
	const vd_jval *s = sigs->child, *sig, *kid;
	vd_oms_code c;

	/* model_signing writes one and checks the first: a second one would
	 * be a signature nobody checks. */
	if (sigs->count != 1)
		return say(VD_OMS_MALFORMED, why, n, "the envelope holds %zu signatures; an OMS "
		    "bundle has exactly one", sigs->count);
	if (s->type != VD_JOBJ)
		return say(VD_OMS_MALFORMED, why, n, "the signature is not an object");
	if ((c = only_keys(s, keys, 2, "the signature", why, n)) != VD_OMS_OK ||
	    (c = need(s, "sig", VD_JSTR, "the signature", &sig, why, n)) != VD_OMS_OK)
		return c;
	/* keyid is not used (OMS 4.1): absent, "", null or any string. */
	kid = vd_json_get(s, "keyid");
	if (kid != NULL && kid->type != VD_JSTR && kid->type != VD_JNULL)
		return say(VD_OMS_MALFORMED, why, n, "the signature's keyid is neither a string nor null");
	if (b64_bytes(sig, VD_OMS_MAX_SIG_BYTES, &out->sig) < 0 || out->sig.len == 0)
		return say(VD_OMS_MALFORMED, why, n, "the signature is not base64 of 1 to %u bytes",
		    VD_OMS_MAX_SIG_BYTES);
	return VD_OMS_OK;
}

static vd_oms_code parse_envelope(const vd_jval *env, size_t cap, vd_oms_bundle *out,
    char *why, size_t n)
{
	static const char *const keys[] = { "payload", "payloadType", "signatures" };
	const vd_jval *payload, *type, *sigs;
	vd_oms_code c;

	if ((c = only_keys(env, keys, 3, "dsseEnvelope", why, n)) != VD_OMS_OK ||
	    (c = need(env, "payloadType", VD_JSTR, "dsseEnvelope", &type, why, n)) != VD_OMS_OK ||
	    (c = need(env, "payload", VD_JSTR, "dsseEnvelope", &payload, why, n)) != VD_OMS_OK ||
	    (c = need(env, "signatures", VD_JARR, "dsseEnvelope", &sigs, why, n)) != VD_OMS_OK)
		return c;
	if (!vd_str_eq(type->str, VD_PT_INTOTO))
		return say(VD_OMS_MALFORMED, why, n, "payloadType is \"%.*s\", not \"%s\"",
		    qlen(type->str.len), type->str.p, VD_PT_INTOTO);
	if (b64_bytes(payload, cap, &out->payload) < 0)
		return say(VD_OMS_MALFORMED, why, n, "the payload is not standard padded base64");
	return parse_signature(sigs, out, why, n);
}

static vd_oms_code parse_bundle_root(const vd_jval *root, size_t len, vd_oms_bundle *out,
    char *why, size_t n)
{
	static const char *const keys[] = { "mediaType", "verificationMaterial", "dsseEnvelope" };
	const vd_jval *mt, *vm, *env;
	vd_oms_code c;

	if (root->type != VD_JOBJ)
		return say(VD_OMS_MALFORMED, why, n, "the bundle is not a JSON object");
	if (vd_json_get(root, "messageSignature") != NULL)
		return say(VD_OMS_MALFORMED, why, n, "the bundle signs a message, not a DSSE envelope");
	if ((c = only_keys(root, keys, 3, "the bundle", why, n)) != VD_OMS_OK ||
	    (c = need(root, "mediaType", VD_JSTR, "the bundle", &mt, why, n)) != VD_OMS_OK ||
	    (c = need(root, "verificationMaterial", VD_JOBJ, "the bundle", &vm, why, n)) != VD_OMS_OK ||
	    (c = need(root, "dsseEnvelope", VD_JOBJ, "the bundle", &env, why, n)) != VD_OMS_OK)
		return c;
	if (!str_is(mt, VD_OMS_MEDIA_TYPE) && !str_is(mt, MEDIA_TYPE_ALT))
		return say(VD_OMS_MALFORMED, why, n, "mediaType is \"%.*s\", not a Sigstore bundle "
		    "v0.3 (\"%s\")", qlen(mt->str.len), mt->str.p, VD_OMS_MEDIA_TYPE);
	if ((c = parse_material(vm, out, why, n)) != VD_OMS_OK)
		return c;
	return parse_envelope(env, len, out, why, n);
}

vd_oms_code vd_oms_bundle_parse(const uint8_t *buf, size_t len, vd_oms_bundle *out,
    char *why, size_t n)
{
	char err[VD_DETAIL_MAX];
	vd_oms_code c;
	vd_jdoc doc;

	memset(out, 0, sizeof(*out));
	if (len > VD_OMS_MAX_BYTES)
		return say(VD_OMS_MALFORMED, why, n, "the bundle is larger than %u bytes",
		    VD_OMS_MAX_BYTES);
	if (parse_json(buf, len, &doc, err, sizeof(err)) < 0)
		return say(VD_OMS_MALFORMED, why, n, "the bundle is not valid JSON: %s", err);
	c = parse_bundle_root(doc.root, len, out, why, n);
	vd_jdoc_free(&doc);
	if (c != VD_OMS_OK)
		vd_oms_bundle_free(out);
	return c;
}

/* ---- the statement ------------------------------------------------------- */

void vd_oms_statement_free(vd_oms_statement *s)
{
	size_t i;

	if (s == NULL)
		return;
	free(s->subject);
	for (i = 0; i < s->n_ignore; i++)
		free(s->ignore[i]);
	free(s->ignore);
	for (i = 0; i < s->n_res; i++)
		free(s->res[i].name);
	free(s->res);
	memset(s, 0, sizeof(*s));
}

static char *dup_str(vd_str s)
{
	char *p = malloc(s.len + 1);

	if (p != NULL) {
		memcpy(p, s.p, s.len);
		p[s.len] = '\0';
	}
	return p;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Lowercase hex of exactly want bytes. */
static int unhex(vd_str s, uint8_t *out, size_t want)
{
	size_t i;
	int hi, lo;

	if (s.len != 2 * want)
		return -1;
	for (i = 0; i < want; i++) {
		if ((hi = hex_value(s.p[2 * i])) < 0 || (lo = hex_value(s.p[2 * i + 1])) < 0)
			return -1;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

static vd_oms_code parse_subject(const vd_jval *subj, vd_oms_statement *out, char *why, size_t n)
{
	const vd_jval *s = subj->child, *name, *digest, *sha;
	vd_oms_code c;

	if (subj->count != 1 || s->type != VD_JOBJ)
		return say(VD_OMS_MALFORMED, why, n, "the statement must have exactly one subject, "
		    "an object");
	if ((c = need(s, "name", VD_JSTR, "the subject", &name, why, n)) != VD_OMS_OK ||
	    (c = need(s, "digest", VD_JOBJ, "the subject", &digest, why, n)) != VD_OMS_OK ||
	    (c = need(digest, "sha256", VD_JSTR, "the subject's digest", &sha, why, n)) != VD_OMS_OK)
		return c;
	if (name->str.len == 0 || name->str.len >= VD_NAME_MAX ||
	    memchr(name->str.p, '\0', name->str.len) != NULL)
		return say(VD_OMS_MALFORMED, why, n, "the subject's name must be 1 to %d bytes "
		    "without NUL", VD_NAME_MAX - 1);
	if (!vd_is_hex64(sha->str))
		return say(VD_OMS_MALFORMED, why, n, "the subject's sha256 is not 64 lowercase hex digits");
	memcpy(out->root_digest, sha->str.p, VD_KEYID_LEN + 1);
	if ((out->subject = dup_str(name->str)) == NULL)
		return say(VD_OMS_UNREADABLE, why, n, "out of memory");
	return VD_OMS_OK;
}

static size_t digest_len(vd_oms_hash h)
{
	return h == VD_OMS_BLAKE2B ? 64 : 32;
}

static vd_oms_code parse_hash_type(const vd_jval *ht, vd_oms_statement *out, char *why, size_t n)
{
	if (str_is(ht, "sha256"))
		out->hash = VD_OMS_SHA256;
	/* "blake2b" in the OMS registry; "blake2" is what model_signing's
	 * command line calls it. */
	else if (str_is(ht, "blake2b") || str_is(ht, "blake2"))
		out->hash = VD_OMS_BLAKE2B;
	else if (str_is(ht, "blake3"))
		return say(VD_OMS_UNSUPPORTED, why, n, "the files are hashed with blake3, which "
		    "this verifier does not have");
	else
		return say(VD_OMS_MALFORMED, why, n, "hash_type \"%.*s\" is not in the OMS registry",
		    qlen(ht->str.len), ht->str.p);
	return VD_OMS_OK;
}

static vd_oms_code parse_ignore(const vd_jval *arr, vd_oms_statement *out, char *why, size_t n)
{
	const vd_jval *c;

	if (arr->count > VD_OMS_MAX_IGNORE)
		return say(VD_OMS_MALFORMED, why, n, "ignore_paths holds %zu paths, more than %u",
		    arr->count, VD_OMS_MAX_IGNORE);
	if ((out->ignore = calloc(arr->count + 1, sizeof(*out->ignore))) == NULL)
		return say(VD_OMS_UNREADABLE, why, n, "out of memory");
	for (c = arr->child; c != NULL; c = c->next) {
		if (c->type != VD_JSTR || !vd_oms_ignore_valid(c->str.p, c->str.len))
			return say(VD_OMS_MALFORMED, why, n, "ignore path \"%.*s\" is not a relative "
			    "path in canonical form without glob characters",
			    c->type == VD_JSTR ? qlen(c->str.len) : 0, c->type == VD_JSTR ? c->str.p : "");
		if ((out->ignore[out->n_ignore] = dup_str(c->str)) == NULL)
			return say(VD_OMS_UNREADABLE, why, n, "out of memory");
		out->n_ignore++;
	}
	return VD_OMS_OK;
}

static vd_oms_code parse_serialization(const vd_jval *ser, vd_oms_statement *out,
    const vd_jval **hash_type, char *why, size_t n)
{
	const vd_jval *method, *sym, *size, *ign;
	vd_oms_code c;
	int bad;

	if ((c = need(ser, "method", VD_JSTR, "serialization", &method, why, n)) != VD_OMS_OK ||
	    (c = need(ser, "hash_type", VD_JSTR, "serialization", hash_type, why, n)) != VD_OMS_OK ||
	    (c = need(ser, "allow_symlinks", VD_JBOOL, "serialization", &sym, why, n)) != VD_OMS_OK ||
	    (c = parse_hash_type(*hash_type, out, why, n)) != VD_OMS_OK)
		return c;
	out->allow_symlinks = sym->boolean;
	if (!str_is(method, "files") && !str_is(method, "shards"))
		return say(VD_OMS_UNSUPPORTED, why, n, "serialization method \"%.*s\" is neither "
		    "files nor shards", qlen(method->str.len), method->str.p);
	out->shards = str_is(method, "shards");
	size = vd_json_get(ser, "shard_size");
	if (out->shards && (size == NULL || !vd_json_is_nonneg_int(size) || size->mag == 0))
		return say(VD_OMS_MALFORMED, why, n, "shards serialization needs a positive "
		    "integer shard_size");
	if (!out->shards && size != NULL)
		return say(VD_OMS_MALFORMED, why, n, "files serialization has no shard_size");
	out->shard_size = out->shards ? size->mag : 0;
	ign = member(ser, "ignore_paths", VD_JARR, &bad);
	if (bad)
		return say(VD_OMS_MALFORMED, why, n, "ignore_paths is not an array");
	return ign != NULL ? parse_ignore(ign, out, why, n) : VD_OMS_OK;
}

static vd_oms_code parse_resource(const vd_jval *o, const vd_jval *hash_type,
    vd_oms_statement *s, char *why, size_t n)
{
	vd_oms_resource *r = &s->res[s->n_res];
	const vd_jval *name, *digest, *alg;
	vd_oms_code c;
	char what[48];

	snprintf(what, sizeof(what), "resource %zu", s->n_res + 1);
	if (o->type != VD_JOBJ)
		return say(VD_OMS_MALFORMED, why, n, "%s is not an object", what);
	if ((c = need(o, "name", VD_JSTR, what, &name, why, n)) != VD_OMS_OK ||
	    (c = need(o, "digest", VD_JSTR, what, &digest, why, n)) != VD_OMS_OK ||
	    (c = need(o, "algorithm", VD_JSTR, what, &alg, why, n)) != VD_OMS_OK)
		return c;
	if (alg->str.len != hash_type->str.len ||
	    memcmp(alg->str.p, hash_type->str.p, alg->str.len) != 0)
		return say(VD_OMS_MALFORMED, why, n, "%s (\"%.*s\") has algorithm \"%.*s\", not the "
		    "hash_type", what, qlen(name->str.len), name->str.p, qlen(alg->str.len), alg->str.p);
	r->digest_len = digest_len(s->hash);
	if (unhex(digest->str, r->digest, r->digest_len) < 0)
		return say(VD_OMS_MALFORMED, why, n, "%s (\"%.*s\"): the digest is not %zu lowercase "
		    "hex digits", what, qlen(name->str.len), name->str.p, 2 * r->digest_len);
	r->path_len = name->str.len;
	if (s->shards && vd_oms_shard_split(name->str.p, name->str.len, &r->path_len,
	    &r->start, &r->end) < 0)
		return say(VD_OMS_MALFORMED, why, n, "%s: \"%.*s\" is not PATH:START:END", what,
		    qlen(name->str.len), name->str.p);
	if (!vd_oms_path_valid(name->str.p, r->path_len) &&
	    !(r->path_len == 1 && name->str.p[0] == '.'))
		return say(VD_OMS_MALFORMED, why, n, "%s: \"%.*s\" is not a relative path in "
		    "canonical form (no '..', '.', empty components or leading '/')", what,
		    qlen(name->str.len), name->str.p);
	if ((r->name = dup_str(name->str)) == NULL)
		return say(VD_OMS_UNREADABLE, why, n, "out of memory");
	s->n_res++;
	return VD_OMS_OK;
}

static int path_cmp(const vd_oms_resource *a, const vd_oms_resource *b)
{
	size_t m = a->path_len < b->path_len ? a->path_len : b->path_len;
	int c = memcmp(a->name, b->name, m);

	return c != 0 ? c : (a->path_len > b->path_len) - (a->path_len < b->path_len);
}

/* model_signing's order: pathlib compares paths component by component. */
static int components_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t i = 0, j = 0, ea, eb, m;
	int c;

	while (i < alen && j < blen) {
		for (ea = i; ea < alen && a[ea] != '/'; ea++)
			;
		for (eb = j; eb < blen && b[eb] != '/'; eb++)
			;
		m = ea - i < eb - j ? ea - i : eb - j;
		if ((c = memcmp(a + i, b + j, m)) != 0)
			return c;
		if (ea - i != eb - j)
			return ea - i < eb - j ? -1 : 1;
		i = ea + 1;
		j = eb + 1;
	}
	return (i < alen) - (j < blen);
}

static int u64_cmp(uint64_t a, uint64_t b)
{
	return (a > b) - (a < b);
}

static int ms_cmp(const vd_oms_resource *a, const vd_oms_resource *b, int shards)
{
	int c = components_cmp(a->name, a->path_len, b->name, b->path_len);

	if (c != 0 || !shards)
		return c;
	return (c = u64_cmp(a->start, b->start)) != 0 ? c : u64_cmp(a->end, b->end);
}

/* Sorted by code point (OMS 6.4), or as model_signing sorts: strictly,
 * so that no resource is listed twice. */
static vd_oms_code check_order(const vd_oms_statement *s, char *why, size_t n)
{
	int by_code_point = 1, by_components = 1;
	size_t i;

	for (i = 1; i < s->n_res; i++) {
		const vd_oms_resource *a = &s->res[i - 1], *b = &s->res[i];

		if (strcmp(a->name, b->name) == 0)
			return say(VD_OMS_MALFORMED, why, n, "resource \"%.*s\" is listed twice",
			    qlen(strlen(a->name)), a->name);
		by_code_point &= strcmp(a->name, b->name) < 0;
		by_components &= ms_cmp(a, b, s->shards) < 0;
	}
	if (!by_code_point && !by_components)
		return say(VD_OMS_MALFORMED, why, n, "the resources are not sorted by name");
	return VD_OMS_OK;
}

static int by_path_start(const void *x, const void *y)
{
	const vd_oms_resource *a = *(vd_oms_resource *const *)x, *b = *(vd_oms_resource *const *)y;
	int c = path_cmp(a, b);

	return c != 0 ? c : u64_cmp(a->start, b->start);
}

/* Every file's shards follow each other from offset 0, each shard_size
 * long but the last: a gap or an overlap is not what a signer wrote. */
static vd_oms_code check_shards(const vd_oms_statement *s, char *why, size_t n)
{
	vd_oms_resource **ix = malloc(s->n_res * sizeof(*ix));
	vd_oms_code c = VD_OMS_OK;
	size_t i;

	if (ix == NULL)
		return say(VD_OMS_UNREADABLE, why, n, "out of memory");
	for (i = 0; i < s->n_res; i++)
		ix[i] = &s->res[i];
	qsort(ix, s->n_res, sizeof(*ix), by_path_start);
	for (i = 0; i < s->n_res && c == VD_OMS_OK; i++) {
		int first = i == 0 || path_cmp(ix[i - 1], ix[i]) != 0;
		int last = i + 1 == s->n_res || path_cmp(ix[i], ix[i + 1]) != 0;

		if ((first ? ix[i]->start != 0 : ix[i]->start != ix[i - 1]->end) ||
		    ix[i]->end - ix[i]->start > s->shard_size ||
		    (!last && ix[i]->end - ix[i]->start != s->shard_size))
			c = say(VD_OMS_MALFORMED, why, n, "shard \"%.*s\" does not follow the one "
			    "before it by shard_size %" PRIu64 " bytes", qlen(strlen(ix[i]->name)),
			    ix[i]->name, s->shard_size);
	}
	free(ix);
	return c;
}

/* "." names the file of a one-file model; it cannot stand beside others. */
static vd_oms_code check_dot(const vd_oms_statement *s, char *why, size_t n)
{
	size_t i, dots = 0;

	for (i = 0; i < s->n_res; i++)
		dots += s->res[i].path_len == 1 && s->res[i].name[0] == '.';
	if (dots > 0 && (dots != s->n_res || (!s->shards && s->n_res != 1)))
		return say(VD_OMS_MALFORMED, why, n, "resource \".\" (a one-file model) is listed "
		    "beside other files");
	return VD_OMS_OK;
}

/* OMS 6.5: SHA-256 over the raw digests in the order listed. */
static vd_oms_code check_root(const vd_oms_statement *s, char *why, size_t n)
{
	vd_hasher *h = vd_hasher_new();
	char hex[VD_HASH_HEX_LEN + 1];
	size_t i;
	int rc = h != NULL ? 0 : -1;

	for (i = 0; i < s->n_res && rc == 0; i++)
		rc = vd_hasher_update(h, s->res[i].digest, s->res[i].digest_len);
	if (rc < 0 || vd_hasher_final(h, hex) < 0) {
		vd_hasher_free(h);
		return say(VD_OMS_UNREADABLE, why, n, "out of memory");
	}
	vd_hasher_free(h);
	if (strcmp(hex, s->root_digest) != 0)
		return say(VD_OMS_MALFORMED, why, n, "the subject's root digest %s is not the "
		    "digest of the resources' digests, %s", s->root_digest, hex);
	return VD_OMS_OK;
}

static vd_oms_code parse_resources(const vd_jval *arr, const vd_jval *hash_type,
    vd_oms_statement *s, char *why, size_t n)
{
	const vd_jval *c;
	vd_oms_code r;

	if (arr->count == 0 || arr->count > VD_OMS_MAX_RESOURCES)
		return say(VD_OMS_MALFORMED, why, n, "the predicate lists %zu resources, not 1 to %u",
		    arr->count, VD_OMS_MAX_RESOURCES);
	if ((s->res = calloc(arr->count, sizeof(*s->res))) == NULL)
		return say(VD_OMS_UNREADABLE, why, n, "out of memory");
	for (c = arr->child; c != NULL; c = c->next)
		if ((r = parse_resource(c, hash_type, s, why, n)) != VD_OMS_OK)
			return r;
	if ((r = check_dot(s, why, n)) != VD_OMS_OK || (r = check_order(s, why, n)) != VD_OMS_OK)
		return r;
	if (s->shards && (r = check_shards(s, why, n)) != VD_OMS_OK)
		return r;
	return check_root(s, why, n);
}

static vd_oms_code parse_statement_root(const vd_jval *root, vd_oms_statement *out,
    char *why, size_t n)
{
	const vd_jval *type, *ptype, *subj, *pred, *ser, *res, *hash_type;
	vd_oms_code c;

	if (root->type != VD_JOBJ)
		return say(VD_OMS_MALFORMED, why, n, "the payload is not a JSON object");
	if ((c = need(root, "_type", VD_JSTR, "the statement", &type, why, n)) != VD_OMS_OK ||
	    (c = need(root, "predicateType", VD_JSTR, "the statement", &ptype, why, n)) != VD_OMS_OK)
		return c;
	if (!vd_str_eq(type->str, VD_OMS_STATEMENT_TYPE))
		return say(VD_OMS_MALFORMED, why, n, "_type is \"%.*s\", not an in-toto Statement v1",
		    qlen(type->str.len), type->str.p);
	if (vd_str_eq(ptype->str, PREDICATE_V01))
		return say(VD_OMS_UNSUPPORTED, why, n, "the predicate is model_signing v0.2's "
		    "%s, which OMS deprecates", PREDICATE_V01);
	if (!vd_str_eq(ptype->str, VD_OMS_PREDICATE_TYPE))
		return say(VD_OMS_MALFORMED, why, n, "predicateType is \"%.*s\", not \"%s\"",
		    qlen(ptype->str.len), ptype->str.p, VD_OMS_PREDICATE_TYPE);
	if ((c = need(root, "subject", VD_JARR, "the statement", &subj, why, n)) != VD_OMS_OK ||
	    (c = need(root, "predicate", VD_JOBJ, "the statement", &pred, why, n)) != VD_OMS_OK ||
	    (c = need(pred, "serialization", VD_JOBJ, "the predicate", &ser, why, n)) != VD_OMS_OK ||
	    (c = need(pred, "resources", VD_JARR, "the predicate", &res, why, n)) != VD_OMS_OK ||
	    (c = parse_subject(subj, out, why, n)) != VD_OMS_OK ||
	    (c = parse_serialization(ser, out, &hash_type, why, n)) != VD_OMS_OK)
		return c;
	return parse_resources(res, hash_type, out, why, n);
}

vd_oms_code vd_oms_statement_parse(const uint8_t *p, size_t len, vd_oms_statement *out,
    char *why, size_t n)
{
	char err[VD_DETAIL_MAX];
	vd_oms_code c;
	vd_jdoc doc;

	memset(out, 0, sizeof(*out));
	if (len > VD_OMS_MAX_BYTES)
		return say(VD_OMS_MALFORMED, why, n, "the payload is larger than %u bytes",
		    VD_OMS_MAX_BYTES);
	if (parse_json(p, len, &doc, err, sizeof(err)) < 0)
		return say(VD_OMS_MALFORMED, why, n, "the payload is not valid JSON: %s", err);
	c = parse_statement_root(doc.root, out, why, n);
	vd_jdoc_free(&doc);
	if (c != VD_OMS_OK)
		vd_oms_statement_free(out);
	return c;
}

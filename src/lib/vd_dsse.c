#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vd_dsse.h"
#include "vd_json.h"
#include "vd_jsonw.h"
#include "vd_utf8.h"

#define PAE_PREFIX "DSSEv1"
#define KIND_ROUNDCLOSE "round_close"
#define KIND_CHECKPOINT "ledger_checkpoint"
#define ROUNDCLOSE_SCHEMA_MIN 1
#define ROUNDCLOSE_SCHEMA_MAX 2
#define QUOTE_MAX 64        /* bytes of a field name quoted in a sentence */

const char *vd_env_reason_name(vd_env_reason r)
{
	switch (r) {
	case VD_ENV_OK: return "ok";
	case VD_ENV_TOO_LARGE: return "too_large";
	case VD_ENV_MALFORMED: return "malformed";
	case VD_ENV_PAYLOAD_TYPE: return "payload_type";
	case VD_ENV_PAYLOAD: return "payload";
	case VD_ENV_NO_SIGNATURE: return "no_signature";
	case VD_ENV_UNKNOWN_KEY: return "unknown_key";
	case VD_ENV_BAD_SIGNATURE: return "bad_signature";
	case VD_ENV_WRONG_RUN: return "wrong_run";
	case VD_ENV_ROUND_MISMATCH: return "round_mismatch";
	case VD_ENV_REASON_COUNT: break;
	}
	return "unknown";
}

/* Messages quote untrusted bytes: cut to valid UTF-8 so they can go into
 * a JSON answer or a log line as they are. */
static vd_env_reason say(vd_env_reason r, char *why, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static vd_env_reason say(vd_env_reason r, char *why, size_t n, const char *fmt, ...)
{
	va_list ap;

	if (n == 0)
		return r;
	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
	vd_utf8_sanitize(why);
	return r;
}

/* ---- base64 (RFC 4648 section 4, padded) -------------------------------- */

static const char b64_alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

void vd_b64_encode(const uint8_t *in, size_t len, vd_buf *b)
{
	char q[4];
	size_t i;

	for (i = 0; i + 2 < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];

		q[0] = b64_alphabet[v >> 18];
		q[1] = b64_alphabet[(v >> 12) & 63];
		q[2] = b64_alphabet[(v >> 6) & 63];
		q[3] = b64_alphabet[v & 63];
		vd_buf_put(b, q, 4);
	}
	if (i < len) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0);

		q[0] = b64_alphabet[v >> 18];
		q[1] = b64_alphabet[(v >> 12) & 63];
		q[2] = i + 1 < len ? b64_alphabet[(v >> 6) & 63] : '=';
		q[3] = '=';
		vd_buf_put(b, q, 4);
	}
}

/* The decoded length of a well-formed encoding, or -1. One spelling per
 * byte string: padding is required, '=' only at the very end, and the bits
 * a short final group leaves over must be zero. */
static int b64_check(const char *in, size_t len, size_t *outlen)
{
	size_t i, pad = 0;

	if (len % 4 != 0)
		return -1;
	if (len > 0 && in[len - 1] == '=')
		pad = in[len - 2] == '=' ? 2 : 1;
	for (i = 0; i < len - pad; i++)
		if (b64_value(in[i]) < 0)
			return -1;
	if (pad == 2 && (b64_value(in[len - 3]) & 0x0f) != 0)
		return -1;
	if (pad == 1 && (b64_value(in[len - 2]) & 0x03) != 0)
		return -1;
	*outlen = len / 4 * 3 - pad;
	return 0;
}

int vd_b64_decode(const char *in, size_t len, uint8_t *out, size_t cap,
    size_t *outlen)
{
	size_t i, o = 0, n;
	uint32_t v = 0;
	unsigned bits = 0;

	if (b64_check(in, len, &n) < 0 || n > cap)
		return -1;
	for (i = 0; i < len && in[i] != '='; i++) {
		v = v << 6 | (uint32_t)b64_value(in[i]);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (uint8_t)(v >> bits);
			v &= (1u << bits) - 1;
		}
	}
	*outlen = o;
	return 0;
}

/* ---- the envelope ------------------------------------------------------ */

void vd_dsse_free(vd_dsse *e)
{
	if (e == NULL)
		return;
	free(e->payload);
	e->payload = NULL;
	e->payload_len = 0;
}

/* Every member of o is one of keys (each at most once: the parser already
 * refused duplicates), and every one of keys is present. */
static vd_env_reason exact_keys(const vd_jval *o, const char *const *keys,
    size_t nkeys, vd_env_reason r, const char *what, char *why, size_t n)
{
	const vd_jval *c;
	size_t i;

	for (c = o->child; c != NULL; c = c->next) {
		for (i = 0; i < nkeys && !vd_str_eq(c->key, keys[i]); i++)
			;
		if (i == nkeys)
			return say(r, why, n, "%s has an unknown field \"%.*s\"", what,
			    (int)(c->key.len < QUOTE_MAX ? c->key.len : QUOTE_MAX), c->key.p);
	}
	for (i = 0; i < nkeys; i++)
		if (vd_json_get(o, keys[i]) == NULL)
			return say(r, why, n, "%s has no field \"%s\"", what, keys[i]);
	return VD_ENV_OK;
}

static vd_env_reason parse_type(const vd_jval *v, vd_dsse *out, char *why, size_t n)
{
	size_t i;

	if (v->type != VD_JSTR)
		return say(VD_ENV_MALFORMED, why, n, "payloadType is not a string");
	if (v->str.len == 0 || v->str.len > VD_DSSE_MAX_TYPE)
		return say(VD_ENV_PAYLOAD_TYPE, why, n,
		    "payloadType must be 1 to %u bytes long", VD_DSSE_MAX_TYPE);
	/* A media type is printable ASCII; anything else is no type we take. */
	for (i = 0; i < v->str.len; i++)
		if ((unsigned char)v->str.p[i] < 0x20 || (unsigned char)v->str.p[i] > 0x7e)
			return say(VD_ENV_PAYLOAD_TYPE, why, n,
			    "payloadType holds a character that is not printable ASCII");
	memcpy(out->payload_type, v->str.p, v->str.len);
	out->payload_type[v->str.len] = '\0';
	return VD_ENV_OK;
}

static vd_env_reason parse_payload(const vd_jval *v, vd_dsse *out, char *why, size_t n)
{
	size_t cap = v->type == VD_JSTR ? v->str.len / 4 * 3 : 0;

	if (v->type != VD_JSTR)
		return say(VD_ENV_MALFORMED, why, n, "payload is not a string");
	if ((out->payload = malloc(cap + 1)) == NULL)
		return say(VD_ENV_MALFORMED, why, n, "out of memory for the payload");
	if (vd_b64_decode(v->str.p, v->str.len, out->payload, cap, &out->payload_len) < 0)
		return say(VD_ENV_MALFORMED, why, n,
		    "payload is not standard padded base64");
	out->payload[out->payload_len] = '\0';
	return VD_ENV_OK;
}

/* A keyid that cannot name a key (too long for one, or with a NUL) is
 * kept as "": its signature is one by an unknown key, which the envelope
 * may carry. A signature of another length likewise stays, unverifiable. */
static vd_env_reason parse_sig(const vd_jval *o, vd_dsse_sig *s, size_t idx,
    char *why, size_t n)
{
	static const char *const keys[] = { "keyid", "sig" };
	const vd_jval *kid, *sig;
	size_t len;
	char what[48];
	vd_env_reason r;

	snprintf(what, sizeof(what), "signature %zu", idx + 1);
	if (o->type != VD_JOBJ)
		return say(VD_ENV_MALFORMED, why, n, "%s is not an object", what);
	if ((r = exact_keys(o, keys, 2, VD_ENV_MALFORMED, what, why, n)) != VD_ENV_OK)
		return r;
	kid = vd_json_get(o, "keyid");
	sig = vd_json_get(o, "sig");
	if (kid->type != VD_JSTR || sig->type != VD_JSTR)
		return say(VD_ENV_MALFORMED, why, n, "%s: keyid and sig must be strings", what);
	if (kid->str.len <= VD_KEYID_LEN && memchr(kid->str.p, '\0', kid->str.len) == NULL)
		memcpy(s->keyid, kid->str.p, kid->str.len + 1);
	if (b64_check(sig->str.p, sig->str.len, &len) < 0)
		return say(VD_ENV_MALFORMED, why, n, "%s: sig is not standard padded base64", what);
	s->siglen = len;
	if (len <= sizeof(s->sig))
		vd_b64_decode(sig->str.p, sig->str.len, s->sig, sizeof(s->sig), &s->siglen);
	return VD_ENV_OK;
}

static vd_env_reason parse_sigs(const vd_jval *v, vd_dsse *out, char *why, size_t n)
{
	const vd_jval *c;
	vd_env_reason r;

	if (v->type != VD_JARR)
		return say(VD_ENV_MALFORMED, why, n, "signatures is not an array");
	if (v->count > VD_DSSE_MAX_SIGS)
		return say(VD_ENV_MALFORMED, why, n, "the envelope has %zu signatures, more "
		    "than the %u allowed", v->count, VD_DSSE_MAX_SIGS);
	for (c = v->child; c != NULL; c = c->next) {
		r = parse_sig(c, &out->sigs[out->n_sigs], out->n_sigs, why, n);
		if (r != VD_ENV_OK)
			return r;
		out->n_sigs++;
	}
	return VD_ENV_OK;
}

static vd_env_reason parse_envelope(const vd_jval *root, vd_dsse *out, char *why, size_t n)
{
	static const char *const keys[] = { "payloadType", "payload", "signatures" };
	vd_env_reason r;

	if (root->type != VD_JOBJ)
		return say(VD_ENV_MALFORMED, why, n, "the envelope is not a JSON object");
	if ((r = exact_keys(root, keys, 3, VD_ENV_MALFORMED, "the envelope", why, n)) != VD_ENV_OK)
		return r;
	if ((r = parse_type(vd_json_get(root, "payloadType"), out, why, n)) != VD_ENV_OK)
		return r;
	if ((r = parse_payload(vd_json_get(root, "payload"), out, why, n)) != VD_ENV_OK)
		return r;
	return parse_sigs(vd_json_get(root, "signatures"), out, why, n);
}

vd_env_reason vd_dsse_parse(const uint8_t *buf, size_t len, vd_dsse *out,
    char *why, size_t whylen)
{
	vd_json_opts opts = { VD_DSSE_MAX_DEPTH, 0 };
	char msg[128];
	vd_env_reason r;
	vd_jdoc doc;

	memset(out, 0, sizeof(*out));
	if (len > VD_DSSE_MAX_BYTES)
		return say(VD_ENV_TOO_LARGE, why, whylen, "the envelope is larger than %u bytes",
		    VD_DSSE_MAX_BYTES);
	if (vd_json_parse(buf, len, &opts, &doc, msg, sizeof(msg)) < 0)
		return say(VD_ENV_MALFORMED, why, whylen, "the envelope is not valid JSON: %s", msg);
	r = parse_envelope(doc.root, out, why, whylen);
	vd_jdoc_free(&doc);
	if (r != VD_ENV_OK) {
		vd_dsse_free(out);
		memset(out, 0, sizeof(*out));
	}
	return r;
}

int vd_dsse_pae(const char *type, const uint8_t *payload, size_t len, vd_buf *b)
{
	vd_buf_printf(b, PAE_PREFIX " %zu %s %zu ", strlen(type), type, len);
	vd_buf_put(b, payload, len);
	return b->oom ? -1 : 0;
}

vd_env_reason vd_dsse_verify_all(const vd_dsse *e, const vd_keyring *kr,
    const vd_key **signers, size_t cap, size_t *n)
{
	vd_env_reason r = VD_ENV_UNKNOWN_KEY;
	const vd_key *k;
	vd_buf pae;
	size_t i, j;

	*n = 0;
	if (e->n_sigs == 0)
		return VD_ENV_NO_SIGNATURE;
	vd_buf_init(&pae);
	/* Out of memory: nothing verified, so the answer is a refusal. */
	if (vd_dsse_pae(e->payload_type, e->payload, e->payload_len, &pae) < 0) {
		vd_buf_free(&pae);
		return VD_ENV_BAD_SIGNATURE;
	}
	for (i = 0; i < e->n_sigs && *n < cap; i++) {
		if ((k = vd_keyring_find(kr, e->sigs[i].keyid)) == NULL)
			continue;
		if (r != VD_ENV_OK)
			r = VD_ENV_BAD_SIGNATURE;
		if (vd_key_verify(k, pae.p, pae.len, e->sigs[i].sig, e->sigs[i].siglen) != 1)
			continue;
		r = VD_ENV_OK;
		for (j = 0; j < *n && signers[j] != k; j++)
			;
		if (j == *n)
			signers[(*n)++] = k;   /* a key's second signature adds nothing */
	}
	vd_buf_free(&pae);
	return r;
}

vd_env_reason vd_dsse_verify(const vd_dsse *e, const vd_keyring *kr,
    const vd_key **signer)
{
	const vd_key *all[VD_DSSE_MAX_SIGS];
	size_t n;
	vd_env_reason r = vd_dsse_verify_all(e, kr, all, VD_DSSE_MAX_SIGS, &n);

	if (signer != NULL)
		*signer = r == VD_ENV_OK ? all[0] : NULL;
	return r;
}

int vd_dsse_sign(const char *type, const uint8_t *payload, size_t len,
    const vd_key *k, vd_buf *b)
{
	uint8_t sig[VD_ED25519_SIG_LEN];
	vd_buf pae;
	int rc;

	if (!vd_utf8_valid((const uint8_t *)type, strlen(type)))
		return -1;
	vd_buf_init(&pae);
	rc = vd_dsse_pae(type, payload, len, &pae) == 0 ? vd_key_sign(k, pae.p, pae.len, sig) : -1;
	vd_buf_free(&pae);
	if (rc < 0)
		return -1;
	vd_buf_puts(b, "{\"payloadType\":");
	vd_jw_string(b, type, strlen(type), VD_JW_UTF8);
	vd_buf_puts(b, ",\"payload\":\"");
	vd_b64_encode(payload, len, b);
	vd_buf_printf(b, "\",\"signatures\":[{\"keyid\":\"%s\",\"sig\":\"", vd_key_id(k));
	vd_b64_encode(sig, sizeof(sig), b);
	vd_buf_puts(b, "\"}]}\n");
	return b->oom ? -1 : 0;
}

/* ---- statements -------------------------------------------------------- */

/* "." or a relative path in one spelling: no leading or trailing '/', no
 * empty, "." or ".." component. A run is compared by name, so a second
 * spelling of the same directory would silently commit nothing. */
int vd_run_name_valid(const char *s, size_t len)
{
	size_t i = 0, start;

	if (len == 1 && s[0] == '.')
		return 1;
	if (len == 0 || len >= VD_RUN_MAX || memchr(s, '\0', len) != NULL)
		return 0;
	while (i <= len) {
		start = i;
		while (i < len && s[i] != '/')
			i++;
		if (i == start || (i - start == 1 && s[start] == '.') ||
		    (i - start == 2 && s[start] == '.' && s[start + 1] == '.'))
			return 0;
		i++;
	}
	return 1;
}

static vd_env_reason get_run(const vd_jval *o, vd_statement *out, char *why, size_t n)
{
	const vd_jval *v = vd_json_get(o, "run");

	if (v->type != VD_JSTR || !vd_run_name_valid(v->str.p, v->str.len))
		return say(VD_ENV_PAYLOAD, why, n, "run must be \".\" or a relative directory "
		    "path without empty, \".\" or \"..\" components (at most %u bytes)",
		    VD_RUN_MAX - 1);
	memcpy(out->run, v->str.p, v->str.len + 1);
	return VD_ENV_OK;
}

static vd_env_reason get_kind(const vd_jval *o, const char *kind, char *why, size_t n)
{
	const vd_jval *v = vd_json_get(o, "kind");

	if (v->type != VD_JSTR || !vd_str_eq(v->str, kind))
		return say(VD_ENV_PAYLOAD, why, n, "kind must be \"%s\"", kind);
	return VD_ENV_OK;
}

static vd_env_reason get_hex64(const vd_jval *o, const char *key, char *dst,
    char *why, size_t n)
{
	const vd_jval *v = vd_json_get(o, key);

	if (v->type != VD_JSTR || !vd_is_hex64(v->str))
		return say(VD_ENV_PAYLOAD, why, n, "%s must be 64 lowercase hex characters", key);
	memcpy(dst, v->str.p, VD_HASH_HEX_LEN + 1);
	return VD_ENV_OK;
}

static vd_env_reason roundclose_from(const vd_jval *o, vd_statement *out, char *why, size_t n)
{
	static const char *const keys[] = { "schema_version", "kind", "run",
		"round_index", "global_model_hash" };
	vd_env_reason r;

	out->kind = VD_STMT_ROUNDCLOSE;
	if ((r = exact_keys(o, keys, VD_ARRAY_LEN(keys), VD_ENV_PAYLOAD,
	    "the round_close statement", why, n)) != VD_ENV_OK)
		return r;
	if (!vd_json_int64(vd_json_get(o, "schema_version"), &out->schema_version) ||
	    out->schema_version < ROUNDCLOSE_SCHEMA_MIN ||
	    out->schema_version > ROUNDCLOSE_SCHEMA_MAX)
		return say(VD_ENV_PAYLOAD, why, n, "schema_version must be the integer 1 or 2");
	if ((r = get_kind(o, KIND_ROUNDCLOSE, why, n)) != VD_ENV_OK ||
	    (r = get_run(o, out, why, n)) != VD_ENV_OK)
		return r;
	if (!vd_json_int64(vd_json_get(o, "round_index"), &out->round_index) ||
	    out->round_index < 0)
		return say(VD_ENV_PAYLOAD, why, n, "round_index must be a non-negative integer");
	return get_hex64(o, "global_model_hash", out->hash, why, n);
}

static vd_env_reason checkpoint_from(const vd_jval *o, vd_statement *out, char *why, size_t n)
{
	static const char *const keys[] = { "kind", "run", "records", "head_record_hash" };
	vd_env_reason r;
	int64_t records;

	out->kind = VD_STMT_CHECKPOINT;
	if ((r = exact_keys(o, keys, VD_ARRAY_LEN(keys), VD_ENV_PAYLOAD,
	    "the ledger_checkpoint statement", why, n)) != VD_ENV_OK)
		return r;
	if ((r = get_kind(o, KIND_CHECKPOINT, why, n)) != VD_ENV_OK ||
	    (r = get_run(o, out, why, n)) != VD_ENV_OK)
		return r;
	if (!vd_json_int64(vd_json_get(o, "records"), &records) || records < 1)
		return say(VD_ENV_PAYLOAD, why, n, "records must be a positive integer");
	out->records = (uint64_t)records;
	return get_hex64(o, "head_record_hash", out->head_record_hash, why, n);
}

vd_env_reason vd_statement_parse(const char *payload_type, const uint8_t *p,
    size_t len, vd_statement *out, char *why, size_t whylen)
{
	vd_json_opts opts = { VD_DSSE_MAX_DEPTH, 0 };
	int rc_type = strcmp(payload_type, VD_PT_ROUNDCLOSE) == 0 ? 1 :
	    strcmp(payload_type, VD_PT_CHECKPOINT) == 0 ? 2 : 0;
	char msg[128];
	vd_env_reason r;
	vd_jdoc doc;

	memset(out, 0, sizeof(*out));
	if (rc_type == 0)
		return say(VD_ENV_PAYLOAD_TYPE, why, whylen, "payloadType \"%.*s\" is not a "
		    "statement this verifier takes", QUOTE_MAX, payload_type);
	if (vd_json_parse(p, len, &opts, &doc, msg, sizeof(msg)) < 0)
		return say(VD_ENV_PAYLOAD, why, whylen, "the payload is not valid JSON: %s", msg);
	if (doc.root->type != VD_JOBJ)
		r = say(VD_ENV_PAYLOAD, why, whylen, "the payload is not a JSON object");
	else
		r = rc_type == 1 ? roundclose_from(doc.root, out, why, whylen)
		    : checkpoint_from(doc.root, out, why, whylen);
	vd_jdoc_free(&doc);
	if (r != VD_ENV_OK) {
		memset(out, 0, sizeof(*out));
		out->kind = rc_type == 1 ? VD_STMT_ROUNDCLOSE : VD_STMT_CHECKPOINT;
	}
	return r;
}

static int hex64_field(const char *s)
{
	return vd_is_hex64((vd_str){ s, strnlen(s, VD_HASH_HEX_LEN + 1) });
}

/* Only a statement the parser would accept is written: a signer must not
 * sign what every verifier refuses. */
static int statement_valid(const vd_statement *s, size_t runlen)
{
	if (!vd_run_name_valid(s->run, runlen) ||
	    !vd_utf8_valid((const uint8_t *)s->run, runlen))
		return 0;
	if (s->kind == VD_STMT_ROUNDCLOSE)
		return s->schema_version >= ROUNDCLOSE_SCHEMA_MIN &&
		    s->schema_version <= ROUNDCLOSE_SCHEMA_MAX && s->round_index >= 0 &&
		    hex64_field(s->hash);
	return s->kind == VD_STMT_CHECKPOINT && s->records >= 1 &&
	    s->records <= INT64_MAX && hex64_field(s->head_record_hash);
}

int vd_statement_write(const vd_statement *s, vd_buf *b)
{
	size_t runlen = strnlen(s->run, sizeof(s->run));

	if (!statement_valid(s, runlen))
		return -1;
	if (s->kind == VD_STMT_ROUNDCLOSE) {
		vd_buf_printf(b, "{\"schema_version\":%" PRId64 ",\"kind\":\"" KIND_ROUNDCLOSE
		    "\",\"run\":", s->schema_version);
		vd_jw_string(b, s->run, runlen, VD_JW_UTF8);
		vd_buf_printf(b, ",\"round_index\":%" PRId64 ",\"global_model_hash\":\"%.64s\"}",
		    s->round_index, s->hash);
	} else {
		vd_buf_puts(b, "{\"kind\":\"" KIND_CHECKPOINT "\",\"run\":");
		vd_jw_string(b, s->run, runlen, VD_JW_UTF8);
		vd_buf_printf(b, ",\"records\":%" PRIu64 ",\"head_record_hash\":\"%.64s\"}",
		    s->records, s->head_record_hash);
	}
	return b->oom ? -1 : 0;
}

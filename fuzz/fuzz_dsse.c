/*
 * DSSE envelopes and the statements they carry: the input as an envelope
 * (vd_dsse_parse, then vd_dsse_verify under a one-key keyring and
 * vd_statement_parse of its payload), as a bare statement of either
 * payload type, and as base64. The input is handed over without a
 * terminating NUL, so that a read one byte past it is caught.
 *
 * An accepted envelope is well formed and reads back to itself once
 * written out again; only a signature naming the trusted key can verify;
 * an accepted statement writes out as a payload that parses to the same
 * statement; base64 has one spelling per byte string.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vd_dsse.h"
#include "vd_json.h"
#include "vd_jsonw.h"
#include "vd_keys.h"
#include "vd_utf8.h"
#include "vd_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define WHY_LEN 256
/* Guard bytes past the buffer handed over, to see it is not overrun. */
#define GUARD 16

/* The key of the seeds signed with openssl (tests/unit/test_dsse.c). */
static const char TRUSTED_PUB[] =
	"-----BEGIN PUBLIC KEY-----\n"
	"MCowBQYDK2VwAyEArqzod6bJUGr758O1j559NUbO0rPR2Qzfvvxeix2fT7Q=\n"
	"-----END PUBLIC KEY-----\n";
#define TRUSTED_ID "f265f355d6f1e4bb03d3feeadca77570bbfdb7d7ee871528c52c3cf4c58f8567"

static vd_keyring *keyring(void)
{
	static vd_keyring kr;
	static vd_key *keys[1];
	char err[WHY_LEN];

	if (kr.n == 0) {
		if (vd_key_from_pem((const uint8_t *)TRUSTED_PUB, strlen(TRUSTED_PUB), 0,
		    &keys[0], err, sizeof(err)) != 0 || strcmp(vd_key_id(keys[0]), TRUSTED_ID) != 0)
			abort();
		kr.keys = keys;
		kr.n = 1;
		kr.refs = 1;
	}
	return &kr;
}

/* A refusal writes one non-empty UTF-8 sentence inside the buffer and
 * nothing past it. */
static void check_refusal(const char *why)
{
	size_t n = strnlen(why, WHY_LEN), i;

	if (n == WHY_LEN || n == 0 || !vd_utf8_valid((const uint8_t *)why, n))
		abort();
	for (i = WHY_LEN; i < WHY_LEN + GUARD; i++)
		if ((unsigned char)why[i] != 0xa5)
			abort();
}

static int terminated(const char *s, size_t cap)
{
	return memchr(s, '\0', cap) != NULL;
}

static void check_envelope(const vd_dsse *e)
{
	size_t i, tlen = strnlen(e->payload_type, sizeof(e->payload_type));

	if (tlen == 0 || tlen > VD_DSSE_MAX_TYPE || e->payload == NULL ||
	    e->payload[e->payload_len] != '\0' || e->n_sigs > VD_DSSE_MAX_SIGS)
		abort();
	for (i = 0; i < tlen; i++)
		if (e->payload_type[i] < 0x20 || e->payload_type[i] > 0x7e)
			abort();
	for (i = 0; i < e->n_sigs; i++)
		if (!terminated(e->sigs[i].keyid, sizeof(e->sigs[i].keyid)))
			abort();
}

/* Written out again with the encoder, the envelope parses to the same
 * values: the decoder and encoder agree. Signatures too long to keep are
 * left out of both. */
static void check_rewrite(const vd_dsse *e)
{
	char why[WHY_LEN + GUARD];
	size_t i, j = 0;
	vd_dsse back;
	vd_buf b;

	vd_buf_init(&b);
	vd_buf_printf(&b, "{\"signatures\":[");
	for (i = 0; i < e->n_sigs; i++) {
		if (e->sigs[i].siglen > VD_ED25519_SIG_LEN)
			continue;
		vd_buf_printf(&b, "%s{\"sig\":\"", j++ ? "," : "");
		vd_b64_encode(e->sigs[i].sig, e->sigs[i].siglen, &b);
		/* A kept keyid is whole, so valid UTF-8 as the parser saw it. */
		vd_buf_puts(&b, "\",\"keyid\":");
		vd_jw_string(&b, e->sigs[i].keyid, strlen(e->sigs[i].keyid), VD_JW_ASCII);
		vd_buf_puts(&b, "}");
	}
	vd_buf_printf(&b, "],\"payload\":\"");
	vd_b64_encode(e->payload, e->payload_len, &b);
	/* payloadType is printable ASCII: escape only what JSON needs. */
	vd_buf_printf(&b, "\",\"payloadType\":\"");
	for (i = 0; e->payload_type[i] != '\0'; i++) {
		if (e->payload_type[i] == '"' || e->payload_type[i] == '\\')
			vd_buf_putc(&b, '\\');
		vd_buf_putc(&b, (uint8_t)e->payload_type[i]);
	}
	vd_buf_puts(&b, "\"}");
	if (b.oom) {
		vd_buf_free(&b);
		return;
	}
	memset(why, 0xa5, sizeof(why));
	if (b.len > VD_DSSE_MAX_BYTES) {
		vd_buf_free(&b);
		return;     /* \\u escapes of keyids can make it longer */
	}
	if (vd_dsse_parse(b.p, b.len, &back, why, WHY_LEN) != VD_ENV_OK)
		abort();
	if (strcmp(back.payload_type, e->payload_type) != 0 ||
	    back.payload_len != e->payload_len ||
	    memcmp(back.payload, e->payload, e->payload_len) != 0 || back.n_sigs != j)
		abort();
	for (i = 0, j = 0; i < e->n_sigs; i++) {
		if (e->sigs[i].siglen > VD_ED25519_SIG_LEN)
			continue;
		if (back.sigs[j].siglen != e->sigs[i].siglen ||
		    strcmp(back.sigs[j].keyid, e->sigs[i].keyid) != 0 ||
		    memcmp(back.sigs[j].sig, e->sigs[i].sig, e->sigs[i].siglen) != 0)
			abort();
		j++;
	}
	vd_dsse_free(&back);
	vd_buf_free(&b);
}

static void check_verify(const vd_dsse *e)
{
	const vd_key *signer = (const vd_key *)1;
	vd_env_reason r = vd_dsse_verify(e, keyring(), &signer);
	size_t i;
	int named = 0;

	for (i = 0; i < e->n_sigs; i++)
		named |= strcmp(e->sigs[i].keyid, TRUSTED_ID) == 0;
	switch (r) {
	case VD_ENV_OK:
		if (signer != keyring()->keys[0] || !named)
			abort();
		break;
	case VD_ENV_NO_SIGNATURE:
		if (e->n_sigs != 0 || signer != NULL)
			abort();
		break;
	case VD_ENV_UNKNOWN_KEY:
		if (named || e->n_sigs == 0 || signer != NULL)
			abort();
		break;
	case VD_ENV_BAD_SIGNATURE:
		if (!named || signer != NULL)
			abort();
		break;
	default:
		abort();
	}
}

static void check_statement(const char *type, const uint8_t *p, size_t len)
{
	char why[WHY_LEN + GUARD];
	vd_statement st, back;
	vd_env_reason r;
	vd_buf b;

	memset(why, 0xa5, sizeof(why));
	memset(&st, 0x5a, sizeof(st));
	r = vd_statement_parse(type, p, len, &st, why, WHY_LEN);
	if (r != VD_ENV_OK) {
		if (r != VD_ENV_PAYLOAD && r != VD_ENV_PAYLOAD_TYPE)
			abort();
		check_refusal(why);
		return;
	}
	if (!vd_run_name_valid(st.run, strnlen(st.run, sizeof(st.run))) ||
	    (st.kind == VD_STMT_ROUNDCLOSE ? st.round_index < 0 ||
	    st.schema_version < 1 || st.schema_version > 2 ||
	    !vd_is_hex64((vd_str){ st.hash, strnlen(st.hash, sizeof(st.hash)) }) :
	    st.records < 1 || !vd_is_hex64((vd_str){ st.head_record_hash,
	    strnlen(st.head_record_hash, sizeof(st.head_record_hash)) })))
		abort();
	vd_buf_init(&b);
	if (vd_statement_write(&st, &b) != 0) {
		if (!b.oom)
			abort();    /* the writer takes what the reader took */
		vd_buf_free(&b);
		return;
	}
	if (vd_statement_parse(type, b.p, b.len, &back, why, WHY_LEN) != VD_ENV_OK ||
	    memcmp(&st, &back, sizeof(st)) != 0)
		abort();
	vd_buf_free(&b);
}

/* One spelling per byte string: what decodes encodes back to the input. */
static void check_b64(const uint8_t *data, size_t size)
{
	uint8_t *out = malloc(size / 4 * 3 + 1);
	size_t n;
	vd_buf b;

	if (out == NULL)
		return;
	if (vd_b64_decode((const char *)data, size, out, size / 4 * 3, &n) == 0) {
		vd_buf_init(&b);
		vd_b64_encode(out, n, &b);
		if (!b.oom && (b.len != size || (size != 0 && memcmp(b.p, data, size) != 0)))
			abort();
		vd_buf_free(&b);
	}
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[WHY_LEN + GUARD];
	vd_env_reason r;
	vd_dsse e;

	memset(why, 0xa5, sizeof(why));
	memset(&e, 0x5a, sizeof(e));
	r = vd_dsse_parse(data, size, &e, why, WHY_LEN);
	if (r == VD_ENV_OK) {
		check_envelope(&e);
		check_rewrite(&e);
		check_verify(&e);
		check_statement(e.payload_type, e.payload, e.payload_len);
		vd_dsse_free(&e);
	} else {
		if (r != VD_ENV_MALFORMED && r != VD_ENV_TOO_LARGE && r != VD_ENV_PAYLOAD_TYPE)
			abort();
		if (e.payload != NULL || e.n_sigs != 0 || (r == VD_ENV_TOO_LARGE) !=
		    (size > VD_DSSE_MAX_BYTES))
			abort();
		check_refusal(why);
	}
	check_statement(VD_PT_ROUNDCLOSE, data, size);
	check_statement(VD_PT_CHECKPOINT, data, size);
	check_b64(data, size);
	return 0;
}

/*
 * DSSE v1 envelopes (trust.md section 2) and the signed statements they
 * carry (section 3). Pure functions over bytes with explicit bounds: a
 * strict envelope parser, PAE, and the payload parsers. Signature checks
 * take a keyring; nothing here does I/O.
 */
#ifndef VD_DSSE_H
#define VD_DSSE_H

#include <stddef.h>
#include <stdint.h>

#include "vd_keys.h"
#include "vd_limits.h"
#include "vd_util.h"

#define VD_PT_ROUNDCLOSE "application/vnd.lensemble.roundclose+json"
#define VD_PT_CHECKPOINT "application/vnd.lensemble.ledger-checkpoint+json"
#define VD_PT_INTOTO "application/vnd.in-toto+json"

/* Why an envelope was refused: the label of envelopes_rejected_total. */
typedef enum vd_env_reason {
	VD_ENV_OK = 0,
	VD_ENV_TOO_LARGE,      /* over VD_DSSE_MAX_BYTES */
	VD_ENV_MALFORMED,      /* not strict JSON, unknown or missing fields, bad base64 */
	VD_ENV_PAYLOAD_TYPE,   /* a payloadType this daemon does not take */
	VD_ENV_PAYLOAD,        /* the payload is not a valid statement */
	VD_ENV_NO_SIGNATURE,   /* no signatures at all */
	VD_ENV_UNKNOWN_KEY,    /* no signature names a trusted key */
	VD_ENV_BAD_SIGNATURE,  /* a trusted key's signature does not verify */
	VD_ENV_WRONG_RUN,      /* a statement for another run than where it was found */
	VD_ENV_ROUND_MISMATCH, /* a RoundClose naming an artifact of another round */
	VD_ENV_REASON_COUNT
} vd_env_reason;

const char *vd_env_reason_name(vd_env_reason r);

typedef struct vd_dsse_sig {
	char keyid[VD_KEYID_LEN + 1];   /* as given; may be empty or not hex */
	uint8_t sig[VD_ED25519_SIG_LEN];
	size_t siglen;                  /* decoded length; only 64 can verify */
} vd_dsse_sig;

typedef struct vd_dsse {
	char payload_type[VD_DSSE_MAX_TYPE + 1];
	uint8_t *payload;               /* decoded, malloc'd, NUL after the end */
	size_t payload_len;
	vd_dsse_sig sigs[VD_DSSE_MAX_SIGS];
	size_t n_sigs;
} vd_dsse;

/* Strict: one JSON object with exactly payloadType (string), payload
 * (standard base64, padded) and signatures (array of 0 to
 * VD_DSSE_MAX_SIGS objects with exactly keyid and sig); no other field.
 * Returns VD_ENV_OK, or a reason with a sentence in why. */
vd_env_reason vd_dsse_parse(const uint8_t *buf, size_t len, vd_dsse *out,
    char *why, size_t whylen);
void vd_dsse_free(vd_dsse *e);

/* PAE(type, payload) = "DSSEv1" SP LEN(type) SP type SP LEN(payload) SP payload,
 * appended to b. 0 or -1 (out of memory). */
int vd_dsse_pae(const char *type, const uint8_t *payload, size_t len, vd_buf *b);

/* The first signature whose keyid names a key in kr and verifies over
 * PAE: VD_ENV_OK with *signer set; else VD_ENV_NO_SIGNATURE,
 * VD_ENV_UNKNOWN_KEY (no keyid is trusted) or VD_ENV_BAD_SIGNATURE (a
 * trusted keyid's signature fails). */
vd_env_reason vd_dsse_verify(const vd_dsse *e, const vd_keyring *kr,
    const vd_key **signer);
/* Every trusted key whose signature verifies (trust.md section 8: each
 * counts), at most cap, each once, in the envelope's order. The reason
 * is as vd_dsse_verify's: VD_ENV_OK when at least one verifies. */
vd_env_reason vd_dsse_verify_all(const vd_dsse *e, const vd_keyring *kr,
    const vd_key **signers, size_t cap, size_t *n);

/* A signed envelope as compact JSON (one signature by k), appended to b
 * with a trailing newline. 0 or -1. */
int vd_dsse_sign(const char *type, const uint8_t *payload, size_t len,
    const vd_key *k, vd_buf *b);

/* Standard base64 with padding. decode: -1 on any other alphabet,
 * missing padding, non-zero trailing bits or output over cap. */
void vd_b64_encode(const uint8_t *in, size_t len, vd_buf *b);
int vd_b64_decode(const char *in, size_t len, uint8_t *out, size_t cap,
    size_t *outlen);

/* ---- statements (trust.md section 3) ----------------------------------- */

typedef enum vd_stmt_kind { VD_STMT_ROUNDCLOSE, VD_STMT_CHECKPOINT } vd_stmt_kind;

typedef struct vd_statement {
	vd_stmt_kind kind;
	char run[VD_RUN_MAX];           /* as written: "." for the store root */
	/* round_close */
	int64_t schema_version;         /* 1 or 2 */
	int64_t round_index;            /* t: commits the artifact of round t+1 */
	char hash[VD_HASH_HEX_LEN + 1]; /* global_model_hash */
	/* ledger_checkpoint */
	uint64_t records;               /* N >= 1 */
	char head_record_hash[VD_HASH_HEX_LEN + 1];
} vd_statement;

/* Parse a payload of the given payloadType: strict JSON, exactly the
 * fields of trust.md section 3, no other; run a name vd_run_name_valid
 * takes. VD_ENV_OK, VD_ENV_PAYLOAD_TYPE or VD_ENV_PAYLOAD with a sentence. */
vd_env_reason vd_statement_parse(const char *payload_type, const uint8_t *p,
    size_t len, vd_statement *out, char *why, size_t whylen);

/* A run name as a statement holds it: "." or a relative directory path
 * in one spelling (no leading or trailing '/', no empty, "." or ".."
 * component), without NUL, shorter than VD_RUN_MAX. 1 or 0. */
int vd_run_name_valid(const char *s, size_t len);

/* The compact payload for a statement (keys in the order of trust.md),
 * appended to b. 0 or -1. */
int vd_statement_write(const vd_statement *s, vd_buf *b);

#endif

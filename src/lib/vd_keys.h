/*
 * Ed25519 keys through OpenSSL's EVP API (trust.md section 2): PEM public
 * keys (SubjectPublicKeyInfo) and PKCS#8 private keys, the key id (hex
 * SHA-256 of the 32 raw public-key bytes), signing and verification, and
 * a keyring read from a directory of *.pub files. A keyring is an
 * immutable value once loaded; share it by reference counting.
 *
 * The _any functions also take the ECDSA keys OpenSSF Model Signing
 * uses (P-256, P-384, P-521); everything else stays Ed25519 only.
 */
#ifndef VD_KEYS_H
#define VD_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "vd_limits.h"
#include "vd_util.h"

#define VD_KEYID_LEN 64             /* hex characters */
#define VD_ED25519_SIG_LEN 64
#define VD_ED25519_RAW_LEN 32
#define VD_SIG_MAX 144              /* DER ECDSA over P-521 is at most 139 bytes */

typedef enum vd_key_type {
	VD_KEY_ED25519,
	VD_KEY_EC_P256,
	VD_KEY_EC_P384,
	VD_KEY_EC_P521
} vd_key_type;

typedef struct vd_key vd_key;

/* Parse a PEM key: private (PKCS#8) or public (SubjectPublicKeyInfo).
 * Anything but Ed25519 is refused. 0, or -1 with a sentence. */
int vd_key_from_pem(const uint8_t *pem, size_t len, int private_key,
    vd_key **out, char *err, size_t errlen);
/* Read a PEM key file (regular file, at most VD_KEY_FILE_MAX). A private
 * key file readable by group or others is refused when strict_mode. */
int vd_key_load(const char *path, int private_key, int strict_mode,
    vd_key **out, char *err, size_t errlen);
int vd_key_generate(vd_key **out);
void vd_key_free(vd_key *k);

const char *vd_key_id(const vd_key *k);        /* 64 lowercase hex */
int vd_key_has_private(const vd_key *k);

/* PEM text, NUL-terminated, into b (appended). 0 or -1. */
int vd_key_public_pem(const vd_key *k, vd_buf *b);
int vd_key_private_pem(const vd_key *k, vd_buf *b);

/* Ed25519 over msg. sign: 0 or -1 (no private key, OpenSSL failure).
 * verify: 1 valid, 0 not. */
int vd_key_sign(const vd_key *k, const uint8_t *msg, size_t len,
    uint8_t sig[VD_ED25519_SIG_LEN]);
int vd_key_verify(const vd_key *k, const uint8_t *msg, size_t len,
    const uint8_t *sig, size_t siglen);

/* ---- any key type: Ed25519 or ECDSA P-256/P-384/P-521 ------------------ */

/* As vd_key_from_pem and vd_key_load, for any key type. Explanatory text
 * before the block (as certtool writes it) is skipped when no other PEM
 * block precedes it. An EC key's id is its OMS hint (vd_key_pem_hint). */
int vd_key_from_pem_any(const uint8_t *pem, size_t len, int private_key,
    vd_key **out, char *err, size_t errlen);
int vd_key_load_any(const char *path, int private_key, int strict_mode,
    vd_key **out, char *err, size_t errlen);
/* A DER SubjectPublicKeyInfo (a certificate's key), any key type. */
int vd_key_from_spki_der(const uint8_t *der, size_t len, vd_key **out,
    char *err, size_t errlen);
int vd_key_generate_type(vd_key_type type, vd_key **out);
vd_key_type vd_key_get_type(const vd_key *k);
const char *vd_key_type_name(vd_key_type type);    /* "ed25519", "ec-p256", ... */
/* The same public key: 1 or 0. */
int vd_key_equal(const vd_key *a, const vd_key *b);
/* Lowercase hex SHA-256 of the public key's PEM SubjectPublicKeyInfo
 * text, as OpenSSL (and Python's cryptography) write it. 0 or -1. */
int vd_key_pem_hint(const vd_key *k, char hex[VD_KEYID_LEN + 1]);
/* Ed25519: pure. EC: ECDSA with SHA-256, SHA-384 or SHA-512 by curve
 * (P-256, P-384, P-521), a DER signature. sign: 0 or -1, *siglen set
 * (sig holds VD_SIG_MAX bytes). verify: 1 valid, 0 not. */
int vd_key_sign_any(const vd_key *k, const uint8_t *msg, size_t len,
    uint8_t sig[VD_SIG_MAX], size_t *siglen);
int vd_key_verify_any(const vd_key *k, const uint8_t *msg, size_t len,
    const uint8_t *sig, size_t siglen);

/* The trusted public keys. */
typedef struct vd_keyring {
	vd_key **keys;
	size_t n;
	unsigned refs;                  /* starts at 1; owned by the loop thread */
} vd_keyring;

/* Called for each *.pub file that cannot be used: its name and why. */
typedef void (*vd_keyring_bad_fn)(const char *file, const char *why, void *arg);

/* Every regular, non-hidden *.pub file directly in dir (no symbolic
 * links), in name order; a bad file is reported and skipped, a second
 * file with the same key counts once. Returns a keyring (possibly empty)
 * or NULL with a sentence when dir cannot be read. */
vd_keyring *vd_keyring_load_dir(const char *dir, vd_keyring_bad_fn bad,
    void *arg, char *err, size_t errlen);
vd_keyring *vd_keyring_ref(vd_keyring *kr);
void vd_keyring_unref(vd_keyring *kr);     /* NULL is fine */
/* The key with this id, or NULL. kr may be NULL. */
const vd_key *vd_keyring_find(const vd_keyring *kr, const char *keyid);

#endif

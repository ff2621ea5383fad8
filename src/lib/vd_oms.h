/*
 * OpenSSF Model Signing (OMS v1.0): the detached `model.sig` bundles that
 * sigstore's model_signing writes, verified and written for the `key` and
 * `certificate` methods. Two layers:
 *
 *  - pure parsers over bytes with explicit bounds (vd_limits.h): the
 *    Sigstore bundle with its DSSE envelope, the in-toto Statement with
 *    the OMS predicate, and the path rules of OMS sections 6.1.2 and 6.2;
 *  - verification and signing of a model directory or file, which read
 *    the file system (no symbolic link is followed unless the bundle says
 *    allow_symlinks, and then never out of the model root).
 */
#ifndef VD_OMS_H
#define VD_OMS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "vd_keys.h"
#include "vd_limits.h"
#include "vd_util.h"

#define VD_OMS_MEDIA_TYPE "application/vnd.dev.sigstore.bundle.v0.3+json"
#define VD_OMS_STATEMENT_TYPE "https://in-toto.io/Statement/v1"
#define VD_OMS_PREDICATE_TYPE "https://model_signing/signature/v1.0"
#define VD_OMS_SIGNATURE_NAME "model.sig"
#define VD_OMS_DIGEST_MAX 64        /* bytes: BLAKE2b-512 */

/* Why a bundle did not verify: the code names the layer, the detail says
 * what differs. */
typedef enum vd_oms_code {
	VD_OMS_OK = 0,
	VD_OMS_MALFORMED,       /* not an OMS bundle, or not one in canonical form */
	VD_OMS_UNSUPPORTED,     /* keyless sigstore, blake3, an unknown method */
	VD_OMS_KEY_MISMATCH,    /* the bundle names another key than the one given */
	VD_OMS_UNTRUSTED,       /* the chain does not lead to the CA, or a certificate is out of date */
	VD_OMS_BAD_SIGNATURE,   /* the DSSE signature does not verify */
	VD_OMS_MISMATCH,        /* the model's files differ from the manifest */
	VD_OMS_UNREADABLE,      /* the bundle, a key or the model could not be read */
	VD_OMS_CODE_COUNT
} vd_oms_code;

const char *vd_oms_code_name(vd_oms_code c);

typedef enum vd_oms_method { VD_OMS_METHOD_KEY, VD_OMS_METHOD_CERTIFICATE } vd_oms_method;
typedef enum vd_oms_hash { VD_OMS_SHA256, VD_OMS_BLAKE2B } vd_oms_hash;

typedef struct vd_oms_bytes {
	uint8_t *p;
	size_t len;
} vd_oms_bytes;

/* The bundle, its signature not yet checked. */
typedef struct vd_oms_bundle {
	vd_oms_method method;
	char hint[VD_KEYID_LEN + 1];          /* publicKey.hint; "" when absent */
	vd_oms_bytes raw_key;                 /* publicKey.rawBytes (pre-v1.1); len 0 when absent */
	vd_oms_bytes certs[VD_OMS_MAX_CERTS]; /* DER, leaf first */
	size_t n_certs;
	vd_oms_bytes payload;                 /* decoded; NUL after the end */
	vd_oms_bytes sig;                     /* decoded */
} vd_oms_bundle;

typedef struct vd_oms_resource {
	char *name;                 /* as signed, NUL-terminated */
	size_t path_len;            /* name[0..path_len) is the file's path */
	uint64_t start, end;        /* shards: the byte range [start, end) */
	uint8_t digest[VD_OMS_DIGEST_MAX];
	size_t digest_len;
} vd_oms_resource;

typedef struct vd_oms_statement {
	char *subject;                    /* subject[0].name */
	char root_digest[VD_KEYID_LEN + 1];
	int shards;                       /* serialization method "shards" */
	uint64_t shard_size;
	vd_oms_hash hash;
	int allow_symlinks;
	char **ignore;                    /* serialization.ignore_paths, canonical */
	size_t n_ignore;
	vd_oms_resource *res;             /* in the bundle's order */
	size_t n_res;
} vd_oms_statement;

/* A Sigstore bundle v0.3 holding a DSSE envelope with one signature over
 * an in-toto payload; verificationMaterial publicKey (hint or rawBytes)
 * or x509CertificateChain. VD_OMS_OK, VD_OMS_MALFORMED or
 * VD_OMS_UNSUPPORTED with a sentence in why. */
vd_oms_code vd_oms_bundle_parse(const uint8_t *buf, size_t len, vd_oms_bundle *out,
    char *why, size_t whylen);
void vd_oms_bundle_free(vd_oms_bundle *b);

/* The in-toto Statement with the OMS predicate: one subject whose sha256
 * is the root digest of the resources (OMS 6.5); resources with
 * canonical names, each once, sorted (by code point, or in the order
 * model_signing writes: path components, then shard offsets), digests of
 * hash_type; shards contiguous from 0; ignore paths canonical. The single
 * file of a one-file model may be named "." as model_signing names it. */
vd_oms_code vd_oms_statement_parse(const uint8_t *p, size_t len,
    vd_oms_statement *out, char *why, size_t whylen);
void vd_oms_statement_free(vd_oms_statement *s);

/* A resource name or an ignore path in canonical form (OMS 6.1.2): not
 * empty, relative, '/'-separated without empty, "." or ".." components
 * or a trailing '/', no NUL, valid UTF-8, at most VD_OMS_MAX_NAME bytes.
 * 1 or 0. */
int vd_oms_path_valid(const char *s, size_t len);
/* An ignore path as OMS 6.2.1 allows it: canonical and without glob
 * characters. 1 or 0. */
int vd_oms_ignore_valid(const char *s, size_t len);
/* "path:start:end" split at its last two colons, decimal offsets without
 * leading zeros, start < end: 0, or -1. */
int vd_oms_shard_split(const char *name, size_t len, size_t *path_len,
    uint64_t *start, uint64_t *end);
/* Whether rel (a canonical path) lies under one of the ignore paths, an
 * exact path from the model root or one of its ancestors. 1 or 0. */
int vd_oms_ignored(const char *rel, char *const *ignore, size_t n);

/* ---- verification and signing ------------------------------------------- */

typedef struct vd_oms_verify_opts {
	const vd_key *key;           /* key method: the public key; or */
	const char *ca_file;         /* certificate method: PEM trust anchors */
	const char *signature;       /* NULL: <path>/model.sig, path a directory */
	const char *const *ignore;   /* the caller's ignore paths, relative to path */
	size_t n_ignore;
	int ignore_unsigned;         /* files the manifest does not list are fine */
	time_t now;                  /* certificates' validity; 0: time(NULL) */
	unsigned jobs;               /* threads hashing files or shards, the caller's
	                              * included; 0: the caller's alone */
} vd_oms_verify_opts;

typedef struct vd_oms_result {
	vd_oms_code code;
	char detail[VD_DETAIL_MAX];           /* one sentence; "" when ok */
	const char *method;                   /* "key" or "certificate"; "" before known */
	char key_id[VD_KEYID_LEN + 1];        /* the hint of the key that signed */
	char subject[VD_NAME_MAX];
	char root_digest[VD_KEYID_LEN + 1];
	const char *serialization;            /* "files" or "shards" */
	const char *hash_type;
	uint64_t shard_size;
	size_t resources, files;
	uint64_t bytes;                       /* bytes hashed */
	size_t n_diffs;                       /* differences found; the first ones: */
	char diffs[VD_OMS_MAX_DIFFS][VD_DETAIL_MAX];
} vd_oms_result;

/* OMS section 8 with the relaxations of 11.2 for model_signing v0.3.1
 * and later. path: the model directory, or a single file (then the
 * signature must be given). r->code is the return value. */
vd_oms_code vd_oms_verify(const char *path, const vd_oms_verify_opts *o,
    vd_oms_result *r);

typedef struct vd_oms_sign_opts {
	const vd_key *key;           /* a private key */
	const char *signature;       /* where the bundle goes; NULL: <path>/model.sig */
	const char *const *ignore;
	size_t n_ignore;
	uint64_t shard_size;         /* 0: "files" serialization */
	unsigned jobs;               /* as vd_oms_verify_opts.jobs */
} vd_oms_sign_opts;

/* The daemon's check of an artifact's bundle: the signer is looked for
 * among the trusted keys (by the bundle's hint, or its raw key) or must
 * chain to one of the CA sets; the files are compared with the manifest
 * whether or not the signer is trusted, so that a stale or forged bundle
 * shows. r->code is the first problem of the signer, else of the files;
 * *differ is set when the files disagree with the manifest. */
typedef struct vd_oms_signers {
	vd_key *const *keys;
	size_t n_keys;
	struct vd_x509_anchors *const *cas;
	size_t n_cas;
	time_t now;                  /* 0: time(NULL) */
} vd_oms_signers;

vd_oms_code vd_oms_check(const char *path, const char *signature, const vd_oms_signers *t,
    vd_oms_result *r, int *differ);
/* The same on the caller's thread alone, giving up (VD_OMS_UNREADABLE,
 * within one read step) once *cancel is set from another thread. */
vd_oms_code vd_oms_check_until(const char *path, const char *signature,
    const vd_oms_signers *t, const atomic_int *cancel, vd_oms_result *r, int *differ);

/* A key-method bundle over path into b (JSON and a newline): resources
 * sorted by code point, the root digest as subject, the default ignore
 * paths, the caller's and the signature's recorded. */
vd_oms_code vd_oms_sign(const char *path, const vd_oms_sign_opts *o, vd_buf *b,
    vd_oms_result *r);

#endif

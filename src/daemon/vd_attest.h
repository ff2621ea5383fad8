/*
 * Signed verdicts (trust.md section 6): the daemon's own Ed25519 key and
 * the in-toto Statement it signs about an artifact's status as it stands.
 */
#ifndef VD_ATTEST_H
#define VD_ATTEST_H

#include <json-c/json.h>

#include "vd_keys.h"
#include "vd_util.h"

#define VD_SIGNING_KEY_FILE "signing.key"   /* under state_dir by default */
#define VD_OMS_SIGNING_KEY_FILE "oms-signing.key"  /* the same, for OMS bundles */
#define VD_INTOTO_STATEMENT "https://in-toto.io/Statement/v1"
#define VD_VERDICT_PREDICATE "urn:lensemble-verifyd:verdict:v1"

/* Load the PKCS#8 private key at path, refusing one that group or others
 * may read; with create, a missing file is generated (mode 0600, written
 * whole before it appears). 0, or with a sentence -EINVAL (the file is not
 * such a key, or too open), or the -errno of writing a new one. Never logs
 * the key. */
int vd_attest_key_open(const char *path, int create, vd_key **out, char *err, size_t errlen);

/* The same for the EC key that signs OMS bundles: a new one is P-256. */
int vd_attest_oms_key_open(const char *path, int create, vd_key **out, char *err,
    size_t errlen);

/* The in-toto Statement for a status object (vd_view_status), one subject
 * per verified copy, appended to b as compact JSON. 0, -ENOENT when no
 * copy is verified (nothing to attest), or -ENOMEM. */
int vd_attest_statement(json_object *status, double now, vd_buf *b);

#endif

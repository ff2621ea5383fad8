/*
 * The keys and CA certificates that may sign OpenSSF Model Signing
 * bundles for a run (run_oms_keys), as data: each run's set and its
 * digest, and what a copy's bundle was found to be. Reading them is
 * vd_omskeys' (the shell); lineage looks a run's digest up here.
 */
#ifndef VD_OMSRUNS_H
#define VD_OMSRUNS_H

#include <stdatomic.h>
#include <stddef.h>

#include "vd_keys.h"
#include "vd_limits.h"
#include "vd_oms.h"
#include "vd_x509.h"

typedef struct vd_oms_run {
	char run[VD_PIN_RUN_MAX];      /* store form: "" for the root */
	vd_key **keys;                 /* EC public keys, by name of their *.pub */
	size_t n_keys;
	vd_x509_anchors **cas;         /* one set per *.pem */
	size_t n_cas;
	/* What the set holds (key ids and CA files' bytes): a check reached
	 * under another digest is out of date. */
	char digest[VD_HASH_HEX_LEN + 1];
} vd_oms_run;

/* What the daemon found of a copy's bundle. */
typedef struct vd_oms_status {
	int verified;
	int differ;                    /* the files disagree with the manifest */
	vd_oms_code code;
	char method[16];               /* "key", "certificate"; "" when not read */
	char key_id[VD_KEYID_LEN + 1];
	char detail[VD_DETAIL_MAX];
	char trust[VD_HASH_HEX_LEN + 1];  /* the run's digest it was checked under */
} vd_oms_status;

typedef struct vd_omskeys {
	vd_oms_run *runs;
	size_t n;
	atomic_uint refs;              /* jobs drop theirs on any thread */
} vd_omskeys;

/* The run's set, or NULL when run_oms_keys does not name it. */
const vd_oms_run *vd_omskeys_run(const vd_omskeys *k, const char *run);
/* The run's digest, "" when it has no set. */
const char *vd_omskeys_digest(const vd_omskeys *k, const char *run);
/* The run's set as vd_oms_check takes it (none: no signer is trusted). */
void vd_omskeys_signers(const vd_oms_run *r, vd_oms_signers *out);

#endif

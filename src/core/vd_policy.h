/*
 * What the configuration says commitments and trust follow, as plain data
 * for lineage: the commitment policy in force, the legacy policy, and the
 * hashes pinned for a run's round. vd_config parses them.
 */
#ifndef VD_POLICY_H
#define VD_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "vd_limits.h"

/* genesis_hash and anchor entries: a hash pinned for a run's round. */
typedef struct vd_pin {
	char run[VD_PIN_RUN_MAX];   /* store form: "" the root; "*" every run without its own */
	int64_t round_index;        /* 0 for genesis_hash */
	char hash[VD_HASH_HEX_LEN + 1];
} vd_pin;

/* commitment_policy (trust.md section 4). */
enum { VD_POLICY_DEFAULT, VD_POLICY_SIGNED, VD_POLICY_LEDGER };

/* legacy_policy: what an artifact whose schema_version is older than the
 * newest the verifier reads may be. */
enum { VD_LEGACY_ACCEPT, VD_LEGACY_UNTRUSTED };

typedef struct vd_policy {
	int commitment;             /* in force: VD_POLICY_SIGNED or VD_POLICY_LEDGER */
	int legacy;                 /* VD_LEGACY_* */
	const vd_pin *genesis;      /* owned by the configuration */
	size_t n_genesis;
	const vd_pin *anchors;
	size_t n_anchors;
} vd_policy;

#endif

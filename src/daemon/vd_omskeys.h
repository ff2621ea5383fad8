/*
 * The keys and CA certificates that may sign OpenSSF Model Signing
 * bundles for a run (run_oms_keys): read at start and on SIGHUP, and
 * shared by reference with the hasher jobs that check bundles.
 */
#ifndef VD_OMSKEYS_H
#define VD_OMSKEYS_H

#include <stddef.h>

#include "vd_config.h"
#include "vd_keys.h"
#include "vd_oms.h"
#include "vd_omsruns.h"
#include "vd_x509.h"

/* Every run of cfg->run_oms; a bad file is reported and skipped. NULL
 * with a sentence when a directory cannot be read (the configuration is
 * refused). */
vd_omskeys *vd_omskeys_load(const vd_config *cfg, vd_keyring_bad_fn bad, void *arg,
    char *err, size_t errlen);
vd_omskeys *vd_omskeys_ref(vd_omskeys *k);
void vd_omskeys_unref(vd_omskeys *k);     /* NULL is fine */

#endif

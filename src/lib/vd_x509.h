/*
 * X.509 certificate chains for the OMS `certificate` method: a chain of
 * DER certificates (leaf first) validated by OpenSSL against trust anchors
 * read from a PEM file, and the leaf's public key.
 */
#ifndef VD_X509_H
#define VD_X509_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "vd_keys.h"

typedef struct vd_x509_anchors vd_x509_anchors;

/* Every CERTIFICATE block of a PEM file (at most VD_TLS_FILE_MAX bytes,
 * at least one block). NULL with a sentence. */
vd_x509_anchors *vd_x509_anchors_load(const char *path, char *err, size_t errlen);
void vd_x509_anchors_free(vd_x509_anchors *a);

/* Why a chain was refused. */
#define VD_X509_EMALFORMED (-1)  /* a certificate is not DER, or bytes follow it */
#define VD_X509_EUNTRUSTED (-2)  /* no path to an anchor, out of date, not for signing */

/* certs[0] the leaf, the rest intermediates offered by the signer. The
 * chain must lead to an anchor with every certificate valid at now, and
 * the leaf must allow signing (keyUsage digitalSignature or
 * extendedKeyUsage codeSigning). 0 with *leaf_key set (free it), or a
 * VD_X509_E* code with a sentence. */
int vd_x509_verify_chain(const vd_x509_anchors *a, const uint8_t *const *certs,
    const size_t *lens, size_t n, time_t now, vd_key **leaf_key,
    char *why, size_t whylen);

/* A certificate's public key, the certificate not validated: to name
 * the key of a chain that is not trusted. 0, or -1. */
int vd_x509_cert_key(const uint8_t *der, size_t len, vd_key **key);

#endif

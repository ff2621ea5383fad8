#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "vd_limits.h"
#include "vd_util.h"
#include "vd_x509.h"

struct vd_x509_anchors {
	STACK_OF(X509) *certs;
};

void vd_x509_anchors_free(vd_x509_anchors *a)
{
	if (a == NULL)
		return;
	sk_X509_pop_free(a->certs, X509_free);
	free(a);
}

static int read_anchors(BIO *bio, STACK_OF(X509) *sk)
{
	X509 *x;

	while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL)
		if (!sk_X509_push(sk, x)) {
			X509_free(x);
			return -1;
		}
	ERR_clear_error();      /* the end of the file reads as an error */
	return sk_X509_num(sk) > 0 ? 0 : -1;
}

vd_x509_anchors *vd_x509_anchors_load(const char *path, char *err, size_t errlen)
{
	vd_x509_anchors *a = NULL;
	BIO *bio = NULL;
	vd_buf b;

	vd_buf_init(&b);
	if (vd_read_file(path, VD_TLS_FILE_MAX, &b) < 0) {
		snprintf(err, errlen, "cannot read the CA certificates %s", path);
		goto cleanup;
	}
	if ((a = calloc(1, sizeof(*a))) == NULL || (a->certs = sk_X509_new_null()) == NULL ||
	    (bio = BIO_new_mem_buf(b.p, (int)b.len)) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (read_anchors(bio, a->certs) < 0) {
		snprintf(err, errlen, "%s holds no PEM certificate", path);
		goto fail;
	}
	goto cleanup;
fail:
	vd_x509_anchors_free(a);
	a = NULL;
cleanup:
	BIO_free(bio);
	vd_buf_free(&b);
	return a;
}

static X509 *from_der(const uint8_t *der, size_t len)
{
	const unsigned char *p = der;
	X509 *x;

	if (len == 0 || len > VD_OMS_MAX_CERT_BYTES)
		return NULL;
	x = d2i_X509(NULL, &p, (long)len);
	if (x != NULL && p != der + len) {
		X509_free(x);
		return NULL;
	}
	return x;
}

/* model_signing's rule: a leaf that may sign code or data. */
static int leaf_can_sign(X509 *leaf)
{
	uint32_t flags = X509_get_extension_flags(leaf);

	if ((flags & EXFLAG_KUSAGE) && (X509_get_key_usage(leaf) & KU_DIGITAL_SIGNATURE))
		return 1;
	return (flags & EXFLAG_XKUSAGE) && (X509_get_extended_key_usage(leaf) & XKU_CODE_SIGN);
}

static int leaf_key(X509 *leaf, vd_key **out, char *why, size_t n)
{
	unsigned char *der = NULL;
	char err[VD_DETAIL_MAX];
	int len, rc;

	if ((len = i2d_PUBKEY(X509_get0_pubkey(leaf), &der)) <= 0) {
		snprintf(why, n, "the leaf certificate's public key cannot be read");
		return VD_X509_EMALFORMED;
	}
	rc = vd_key_from_spki_der(der, (size_t)len, out, err, sizeof(err));
	OPENSSL_free(der);
	if (rc < 0) {
		snprintf(why, n, "the leaf certificate's key: %s", err);
		return VD_X509_EUNTRUSTED;
	}
	return 0;
}

static int check_chain(const vd_x509_anchors *a, X509 *leaf, STACK_OF(X509) *untrusted,
    time_t now, char *why, size_t n)
{
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	X509_STORE *store = X509_STORE_new();
	int i, rc = VD_X509_EUNTRUSTED;

	if (ctx == NULL || store == NULL) {
		snprintf(why, n, "out of memory");
		goto cleanup;
	}
	for (i = 0; i < sk_X509_num(a->certs); i++)
		X509_STORE_add_cert(store, sk_X509_value(a->certs, i));
	if (X509_STORE_CTX_init(ctx, store, leaf, untrusted) != 1) {
		snprintf(why, n, "out of memory");
		goto cleanup;
	}
	X509_STORE_CTX_set_time(ctx, 0, now);
	if (X509_verify_cert(ctx) == 1) {
		rc = 0;
	} else {
		int e = X509_STORE_CTX_get_error(ctx);

		snprintf(why, n, "the certificate chain does not verify against the CA "
		    "certificates: %s (certificate %d of the chain)",
		    X509_verify_cert_error_string(e), X509_STORE_CTX_get_error_depth(ctx) + 1);
	}
cleanup:
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(store);
	ERR_clear_error();
	return rc;
}

int vd_x509_verify_chain(const vd_x509_anchors *a, const uint8_t *const *certs,
    const size_t *lens, size_t n, time_t now, vd_key **out, char *why, size_t whylen)
{
	STACK_OF(X509) *untrusted = sk_X509_new_null();
	X509 *leaf = NULL, *x;
	int rc = VD_X509_EMALFORMED;
	size_t i;

	*out = NULL;
	if (untrusted == NULL || n == 0) {
		snprintf(why, whylen, n == 0 ? "the certificate chain is empty" : "out of memory");
		goto cleanup;
	}
	for (i = 0; i < n; i++) {
		if ((x = from_der(certs[i], lens[i])) == NULL) {
			snprintf(why, whylen, "certificate %zu of the chain is not one DER certificate", i + 1);
			goto cleanup;
		}
		if (i == 0)
			leaf = x;
		else if (!sk_X509_push(untrusted, x)) {
			X509_free(x);
			snprintf(why, whylen, "out of memory");
			goto cleanup;
		}
	}
	if ((rc = check_chain(a, leaf, untrusted, now, why, whylen)) < 0)
		goto cleanup;
	if (!leaf_can_sign(leaf)) {
		snprintf(why, whylen, "the leaf certificate allows neither digital signatures "
		    "nor code signing");
		rc = VD_X509_EUNTRUSTED;
		goto cleanup;
	}
	rc = leaf_key(leaf, out, why, whylen);
cleanup:
	X509_free(leaf);
	sk_X509_pop_free(untrusted, X509_free);
	ERR_clear_error();
	return rc;
}

int vd_x509_cert_key(const uint8_t *der, size_t len, vd_key **key)
{
	char why[VD_DETAIL_MAX];
	X509 *x = from_der(der, len);
	int rc;

	if (x == NULL)
		return -1;
	rc = leaf_key(x, key, why, sizeof(why));
	X509_free(x);
	return rc < 0 ? -1 : 0;
}

/*
 * OpenSSF Model Signing bundles: the input as a bundle
 * (vd_oms_bundle_parse, then vd_oms_statement_parse of its payload), as a
 * bare statement, and as a resource name and a shard name. The input is
 * handed over without a terminating NUL, so that a read one byte past it
 * is caught.
 *
 * An accepted bundle holds what its method needs within the bounds of
 * vd_limits.h; an accepted statement lists 1 to VD_OMS_MAX_RESOURCES
 * resources with canonical names, each once, whose digests hash to the
 * subject's root digest; a refusal is one UTF-8 sentence in the buffer.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vd_hash.h"
#include "vd_oms.h"
#include "vd_utf8.h"
#include "vd_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define WHY_LEN 256
#define GUARD 16

static void check_refusal(const char *why)
{
	size_t n = strnlen(why, WHY_LEN), i;

	if (n == WHY_LEN || n == 0 || !vd_utf8_valid((const uint8_t *)why, n))
		abort();
	for (i = WHY_LEN; i < WHY_LEN + GUARD; i++)
		if ((unsigned char)why[i] != 0xa5)
			abort();
}

static void check_bundle(const vd_oms_bundle *b)
{
	size_t i;

	if (b->payload.p == NULL || b->payload.p[b->payload.len] != '\0' ||
	    b->sig.len == 0 || b->sig.len > VD_OMS_MAX_SIG_BYTES)
		abort();
	if (b->method == VD_OMS_METHOD_CERTIFICATE) {
		if (b->n_certs == 0 || b->n_certs > VD_OMS_MAX_CERTS || b->hint[0] || b->raw_key.len)
			abort();
		for (i = 0; i < b->n_certs; i++)
			if (b->certs[i].len > VD_OMS_MAX_CERT_BYTES)
				abort();
	} else if (b->n_certs != 0 || (b->hint[0] &&
	    !vd_is_hex64((vd_str){ b->hint, strnlen(b->hint, sizeof(b->hint)) }))) {
		abort();
	}
}

static void check_root(const vd_oms_statement *s)
{
	char hex[VD_HASH_HEX_LEN + 1];
	vd_hasher *h = vd_hasher_new();
	size_t i;

	if (h == NULL)
		return;
	for (i = 0; i < s->n_res; i++)
		vd_hasher_update(h, s->res[i].digest, s->res[i].digest_len);
	if (vd_hasher_final(h, hex) == 0 && strcmp(hex, s->root_digest) != 0)
		abort();
	vd_hasher_free(h);
}

static void check_statement(const uint8_t *p, size_t len)
{
	char why[WHY_LEN + GUARD];
	vd_oms_statement s;
	vd_oms_code c;
	size_t i;

	memset(why, 0xa5, sizeof(why));
	c = vd_oms_statement_parse(p, len, &s, why, WHY_LEN);
	if (c != VD_OMS_OK) {
		if (c != VD_OMS_MALFORMED && c != VD_OMS_UNSUPPORTED && c != VD_OMS_UNREADABLE)
			abort();
		if (s.res != NULL || s.n_res != 0 || s.subject != NULL)
			abort();
		check_refusal(why);
		return;
	}
	if (s.n_res == 0 || s.n_res > VD_OMS_MAX_RESOURCES || s.subject == NULL ||
	    s.n_ignore > VD_OMS_MAX_IGNORE || (s.shards && s.shard_size == 0))
		abort();
	for (i = 0; i < s.n_res; i++) {
		const vd_oms_resource *r = &s.res[i];

		if (!vd_oms_path_valid(r->name, r->path_len) && strncmp(r->name, ".", r->path_len) != 0)
			abort();
		if (s.shards && (r->start >= r->end || r->end - r->start > s.shard_size))
			abort();
		if (i > 0 && strcmp(s.res[i - 1].name, r->name) == 0)
			abort();
	}
	for (i = 0; i < s.n_ignore; i++)
		if (!vd_oms_ignore_valid(s.ignore[i], strlen(s.ignore[i])))
			abort();
	check_root(&s);
	vd_oms_statement_free(&s);
}

/* The path rules alone, on a NUL-terminated copy. */
static void check_names(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	uint64_t start, end;
	size_t plen;

	if (s == NULL)
		return;
	memcpy(s, data, size);
	s[size] = '\0';
	if (vd_oms_ignore_valid(s, size) && !vd_oms_path_valid(s, size))
		abort();
	if (vd_oms_path_valid(s, size) && (s[0] == '/' || strstr(s, "//") != NULL ||
	    strcmp(s, "..") == 0 || strncmp(s, "../", 3) == 0 || strstr(s, "/../") != NULL))
		abort();
	if (vd_oms_shard_split(s, size, &plen, &start, &end) == 0 &&
	    (plen >= size || s[plen] != ':' || start >= end))
		abort();
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[WHY_LEN + GUARD];
	vd_oms_bundle b;
	vd_oms_code c;

	memset(why, 0xa5, sizeof(why));
	c = vd_oms_bundle_parse(data, size, &b, why, WHY_LEN);
	if (c == VD_OMS_OK) {
		check_bundle(&b);
		check_statement(b.payload.p, b.payload.len);
		vd_oms_bundle_free(&b);
	} else {
		if (c != VD_OMS_MALFORMED && c != VD_OMS_UNSUPPORTED && c != VD_OMS_UNREADABLE)
			abort();
		if (b.payload.p != NULL || b.sig.p != NULL || b.n_certs != 0)
			abort();
		check_refusal(why);
	}
	check_statement(data, size);
	check_names(data, size);
	return 0;
}

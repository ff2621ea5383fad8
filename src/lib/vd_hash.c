#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "vd_hash.h"
#include "vd_jsonw.h"

struct vd_hasher {
	EVP_MD_CTX *ctx;
};

vd_hasher *vd_hasher_new(void)
{
	vd_hasher *h = calloc(1, sizeof(*h));

	if (h == NULL)
		return NULL;
	h->ctx = EVP_MD_CTX_new();
	if (h->ctx == NULL || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
		vd_hasher_free(h);
		return NULL;
	}
	return h;
}

void vd_hasher_free(vd_hasher *h)
{
	if (h == NULL)
		return;
	EVP_MD_CTX_free(h->ctx);
	free(h);
}

int vd_hasher_update(vd_hasher *h, const void *p, size_t n)
{
	return EVP_DigestUpdate(h->ctx, p, n) == 1 ? 0 : -1;
}

int vd_hasher_digest(vd_hasher *h, uint8_t out[32])
{
	unsigned int n = 0;

	return EVP_DigestFinal_ex(h->ctx, out, &n) == 1 && n == 32 ? 0 : -1;
}

int vd_hasher_final(vd_hasher *h, char hex[VD_HASH_HEX_LEN + 1])
{
	uint8_t md[32];

	if (vd_hasher_digest(h, md) < 0)
		return -1;
	vd_hex(md, 32, hex);
	return 0;
}

int vd_sha256(const void *p, size_t n, uint8_t out[32])
{
	return EVP_Digest(p, n, out, NULL, EVP_sha256(), NULL) == 1 ? 0 : -1;
}

int vd_sha256_hex(const void *p, size_t n, char hex[VD_HASH_HEX_LEN + 1])
{
	uint8_t md[32];

	if (vd_sha256(p, n, md) < 0)
		return -1;
	vd_hex(md, 32, hex);
	return 0;
}

int vd_hash_begin(vd_hasher *h)
{
	if (vd_hasher_update(h, VD_HASH_DOMAIN, sizeof(VD_HASH_DOMAIN) - 1) < 0)
		return -1;
	return vd_hasher_update(h, VD_HASH_TENSORS_TAG, sizeof(VD_HASH_TENSORS_TAG) - 1);
}

int vd_hash_tensor_frame(vd_hasher *h, vd_str name, const char *token,
    uint32_t rank, const uint64_t *shape)
{
	vd_buf b;
	size_t tlen = strlen(token);
	uint32_t i;
	int rc;

	if (name.len > UINT32_MAX || tlen > UINT8_MAX)
		return -1;
	vd_buf_init(&b);
	vd_buf_put_u32le(&b, (uint32_t)name.len);
	vd_buf_put(&b, name.p, name.len);
	vd_buf_putc(&b, (uint8_t)tlen);
	vd_buf_put(&b, token, tlen);
	vd_buf_put_u32le(&b, rank);
	for (i = 0; i < rank; i++)
		vd_buf_put_u64le(&b, shape[i]);
	rc = b.oom ? -1 : vd_hasher_update(h, b.p, b.len);
	vd_buf_free(&b);
	return rc;
}

static int str_cmp(const void *a, const void *b)
{
	return vd_str_cmp(*(const vd_str *)a, *(const vd_str *)b);
}

int vd_hash_frame(vd_buf *b, const vd_header *hdr)
{
	vd_str *groups = NULL;
	size_t i;

	if (hdr->n_param_groups) {
		groups = malloc(hdr->n_param_groups * sizeof(*groups));
		if (groups == NULL)
			return -1;
		memcpy(groups, hdr->param_groups, hdr->n_param_groups * sizeof(*groups));
		qsort(groups, hdr->n_param_groups, sizeof(*groups), str_cmp);
	}
	vd_buf_puts(b, "{\"param_groups\":[");
	for (i = 0; i < hdr->n_param_groups; i++) {
		if (i)
			vd_buf_putc(b, ',');
		vd_jw_string(b, groups[i].p, groups[i].len, VD_JW_ASCII);
	}
	vd_buf_puts(b, "],\"parent_hash\":");
	if (hdr->has_parent)
		vd_jw_string(b, hdr->parent_hash.p, hdr->parent_hash.len, VD_JW_ASCII);
	else
		vd_buf_puts(b, "\"\"");
	vd_buf_puts(b, ",\"round_index\":");
	vd_jw_int(b, hdr->round_index);
	vd_buf_puts(b, ",\"schema_version\":");
	vd_jw_int(b, hdr->schema_version);
	vd_buf_puts(b, ",\"wmcp_version\":");
	vd_jw_string(b, hdr->wmcp_version.p, hdr->wmcp_version.len, VD_JW_ASCII);
	vd_buf_putc(b, '}');
	free(groups);
	return b->oom ? -1 : 0;
}

int vd_hash_struct(vd_hasher *h, const vd_header *hdr)
{
	vd_buf b, frame;
	int rc = -1;

	vd_buf_init(&b);
	vd_buf_init(&frame);
	if (vd_hash_frame(&frame, hdr) < 0 || frame.len > UINT32_MAX)
		goto out;
	vd_buf_put(&b, VD_HASH_STRUCT_TAG, sizeof(VD_HASH_STRUCT_TAG) - 1);
	vd_buf_put_u32le(&b, (uint32_t)frame.len);
	vd_buf_put(&b, frame.p, frame.len);
	if (!b.oom)
		rc = vd_hasher_update(h, b.p, b.len);
out:
	vd_buf_free(&frame);
	vd_buf_free(&b);
	return rc;
}

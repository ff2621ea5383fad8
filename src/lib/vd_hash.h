/*
 * The canonical content hash stream (canonical-hash.md section 4): domain
 * tag, each tensor's frame and bytes in name order, the structural frame.
 */
#ifndef VD_HASH_H
#define VD_HASH_H

#include <stdint.h>

#include "vd_header.h"
#include "vd_util.h"

#define VD_HASH_DOMAIN "lensemble/artifact/v1"
#define VD_HASH_TENSORS_TAG "\0tensors\0"
#define VD_HASH_STRUCT_TAG "\0struct\0"

typedef struct vd_hasher vd_hasher;

vd_hasher *vd_hasher_new(void);
void vd_hasher_free(vd_hasher *h);
int vd_hasher_update(vd_hasher *h, const void *p, size_t n);
/* The digest, raw or as lowercase hex; h is spent either way. */
int vd_hasher_digest(vd_hasher *h, uint8_t out[32]);
int vd_hasher_final(vd_hasher *h, char hex[VD_HASH_HEX_LEN + 1]);

/* The domain tag and "\0tensors\0". */
int vd_hash_begin(vd_hasher *h);
/* A tensor's frame: name, dtype token, rank, dimensions (its bytes follow). */
int vd_hash_tensor_frame(vd_hasher *h, vd_str name, const char *token,
    uint32_t rank, const uint64_t *shape);
/* "\0struct\0", the frame length and the frame. */
int vd_hash_struct(vd_hasher *h, const vd_header *hdr);

/* The structural frame: compact sorted-key JSON, ASCII-escaped. */
int vd_hash_frame(vd_buf *b, const vd_header *hdr);

/* SHA-256 of a buffer, raw or as lowercase hex: 0 or -1. Every SHA-256
 * of the project goes through these and vd_hasher. */
int vd_sha256(const void *p, size_t n, uint8_t out[32]);
int vd_sha256_hex(const void *p, size_t n, char hex[VD_HASH_HEX_LEN + 1]);

#endif

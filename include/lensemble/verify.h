/*
 * lensemble/verify.h - verify a Lensemble model artifact.
 *
 * The public API of liblensemble-verify: the canonical content hash of an
 * artifact directory (header.json + safetensors weights) and the verdict of
 * checking it, exactly as the Lensemble reference implementation defines it.
 *
 * A verdict is never "could not check, so ok": every path that does not end
 * in a recomputed hash equal to the claimed one carries a failure code.
 */
#ifndef LENSEMBLE_VERIFY_H
#define LENSEMBLE_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VD_HASH_HEX_LEN 64
#define VD_DETAIL_MAX 256

/* The reference implementation's error codes, plus VD_IO_ERROR for an
 * artifact that could not be read (permissions, I/O failure, memory): it is
 * not verified, and a caller may try again later. */
typedef enum vd_code {
	VD_OK = 0,
	VD_SCHEMA_VERSION_MISMATCH,
	VD_ARTIFACT_INVALID,
	VD_RESIDENCY_VIOLATION,
	VD_CHECKPOINT_INTEGRITY,
	VD_IO_ERROR
} vd_code;

typedef struct vd_verdict {
	vd_code code;
	char detail[VD_DETAIL_MAX];        /* one sentence; "" when ok */
	char content_hash[VD_HASH_HEX_LEN + 1]; /* recomputed; "" if not reached */
	char claimed_hash[VD_HASH_HEX_LEN + 1]; /* header.content_hash; "" if unread */
	int have_header;                   /* the fields below are valid */
	int64_t schema_version;
	int64_t round_index;
	int has_parent;
	char parent_hash[VD_HASH_HEX_LEN + 1];
	uint64_t tensors;                  /* tensors hashed */
	uint64_t bytes;                    /* tensor data bytes hashed */
} vd_verdict;

/* Called while hashing; a nonzero return cancels the verification, which
 * then fails with VD_IO_ERROR. */
typedef int (*vd_progress_fn)(uint64_t done, uint64_t total, void *arg);

/* vd_options.flags */
#define VD_VERIFY_KEEP_CACHE_CLEAN 0x1 /* evict the pages this read brought
                                        * into the page cache, keep the rest */

typedef struct vd_options {
	const char *expected_hash;    /* committed hash to match, or NULL */
	unsigned flags;
	uint64_t max_header_len;      /* safetensors header cap; 0: default */
	vd_progress_fn progress;      /* called while hashing, or NULL */
	void *progress_arg;
} vd_options;

/* Verify the artifact directory at path. Fills *out and returns out->code. */
vd_code vd_verify_artifact(const char *path, const vd_options *opt,
    vd_verdict *out);

/* The same for a directory already open as dirfd (not closed). */
vd_code vd_verify_artifact_at(int dirfd, const vd_options *opt,
    vd_verdict *out);

/* "checkpoint_integrity" etc.; "ok" for VD_OK. */
const char *vd_code_name(vd_code code);

#ifdef __cplusplus
}
#endif
#endif

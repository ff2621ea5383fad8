/*
 * The safetensors container, parsed from bytes with explicit bounds: an
 * 8-byte little-endian header length, a JSON header, a data buffer that the
 * tensors must cover exactly. Structural faults are VD_CHECKPOINT_INTEGRITY
 * ("not a safetensors artifact"); which dtypes an artifact may store is the
 * verifier's business, not the container's.
 */
#ifndef VD_SAFETENSORS_H
#define VD_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "vd_json.h"
#include "vd_limits.h"
#include "vd_util.h"

#define VD_ST_PREFIX_LEN 8   /* the header length, u64 little-endian */

typedef enum vd_dtype {
	VD_DT_BOOL, VD_DT_U8, VD_DT_I8, VD_DT_F8_E5M2, VD_DT_F8_E4M3,
	VD_DT_I16, VD_DT_U16, VD_DT_F16, VD_DT_BF16,
	VD_DT_I32, VD_DT_U32, VD_DT_F32,
	VD_DT_F64, VD_DT_I64, VD_DT_U64,
	VD_DT_COUNT
} vd_dtype;

typedef struct vd_st_tensor {
	vd_str name;
	vd_dtype dtype;
	uint32_t rank;
	const uint64_t *shape;
	uint64_t begin, end;        /* relative to the data buffer */
	uint32_t file;              /* index of the file that holds it */
} vd_st_tensor;

typedef struct vd_st_file {
	vd_jdoc doc;                /* owns names and shapes */
	vd_st_tensor *tensors;
	size_t count;
	uint64_t data_start;        /* 8 + header length */
	uint64_t data_len;
} vd_st_file;

/* Read the header length from the first 8 bytes and check it against the
 * file size and the cap. */
vd_code vd_st_header_len(const uint8_t *prefix, uint64_t file_size,
    uint64_t max_header, uint64_t *hlen, vd_err *err);

/* Parse the JSON header (json, hlen bytes) of a file whose data buffer is
 * data_len bytes long, within bounds (NULL: none); tensors come out in
 * the file's order. The tensors are counted as the JSON is read, and all
 * the parse allocates, until vd_st_free, is charged to bounds->budget.
 * A bound exceeded is VD_ARTIFACT_INVALID, and its message a predicate
 * for the file's name to precede: "declares more than 100000 tensors
 * (max_tensors)", "needs more than 67108864 bytes to parse
 * (max_job_memory)". */
vd_code vd_st_parse(const uint8_t *json, size_t hlen, uint64_t data_len,
    uint32_t file_index, const vd_parse_bounds *bounds, vd_st_file *out, vd_err *err);
void vd_st_free(vd_st_file *f);

/* Element size in bytes and name of a dtype. */
unsigned vd_dtype_size(vd_dtype d);
const char *vd_dtype_name(vd_dtype d);
/* The canonical token ("float32") of a dtype the artifact may store, or NULL. */
const char *vd_dtype_token(vd_dtype d);

#endif

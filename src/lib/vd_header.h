/*
 * header.json (the CheckpointHeader), parsed strictly from bytes: the
 * schema_version gate first, then exact types, no unknown, missing or
 * duplicate fields. Fields per version and the migration chain are data.
 */
#ifndef VD_HEADER_H
#define VD_HEADER_H

#include <stddef.h>
#include <stdint.h>

#include "vd_json.h"
#include "vd_limits.h"
#include "vd_util.h"

#define VD_HEADER_SCHEMA_MIN 1
#define VD_HEADER_SCHEMA_MAX 2

typedef struct vd_manifest_entry {
	vd_str name, group, dtype;
	uint32_t rank;
	const uint64_t *shape;
} vd_manifest_entry;

typedef struct vd_header {
	vd_jdoc doc;                 /* owns every string below */
	int64_t schema_version;      /* as written on disk */
	int has_schema_version;      /* the gate read it as an integer */
	int64_t migrated_to;         /* the in-memory model's version */
	vd_str content_hash;
	int has_parent;
	vd_str parent_hash;
	vd_str wmcp_version;
	int64_t round_index;
	vd_str config_hash;
	vd_str *param_groups;
	size_t n_param_groups;
	vd_manifest_entry *manifest;
	size_t n_manifest;
	vd_str *weight_files;
	size_t n_weight_files;
	vd_str created_at;
	const vd_jval *model_arch;   /* NULL when absent or null */
} vd_header;

/* Parse within bounds (NULL: none): the manifest's entries are counted as
 * the JSON is read, against bounds->max_tensors, and all the parse
 * allocates, until vd_header_free, is charged to bounds->budget (which
 * must outlive *out). A bound exceeded is VD_ARTIFACT_INVALID with a
 * detail naming it. On failure *out holds nothing but schema_version and
 * has_schema_version, as far as the gate read them: the facts of a
 * schema_version_mismatch. */
vd_code vd_header_parse(const uint8_t *buf, size_t len, const vd_parse_bounds *bounds,
    vd_header *out, vd_err *err);
void vd_header_free(vd_header *h);

/* A plain file name: no '/', not "." or "..", no NUL, not empty. */
int vd_plain_filename(vd_str s);

/* RFC 3339 date-time in UTC ('Z' or +00:00). */
int vd_rfc3339_utc(vd_str s);

#endif

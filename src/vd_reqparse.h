/*
 * Request bodies, parsed strictly from bytes: the three forms of
 * POST /verify and the RoundClose message (validated like Lensemble's
 * parse_control_message: schema gate first, then kind, no unknown fields).
 */
#ifndef VD_REQPARSE_H
#define VD_REQPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "vd_util.h"

#define VD_ROUNDCLOSE_SCHEMA_MIN 1
#define VD_ROUNDCLOSE_SCHEMA_MAX 2
#define VD_REQ_PATH_MAX 1024

typedef struct vd_roundclose {
	int64_t schema_version;
	int64_t round_index;
	char global_model_hash[VD_HASH_HEX_LEN + 1];
} vd_roundclose;

typedef enum vd_verify_form {
	VD_VERIFY_ROUNDCLOSE,     /* what a participant was told */
	VD_VERIFY_HASH,           /* {"content_hash": h} */
	VD_VERIFY_PATH            /* {"path": p, "expected_hash": h?} */
} vd_verify_form;

typedef struct vd_verify_req {
	vd_verify_form form;
	vd_roundclose rc;
	char hash[VD_HASH_HEX_LEN + 1];
	char path[VD_REQ_PATH_MAX];
	int has_expected;
	char expected[VD_HASH_HEX_LEN + 1];
} vd_verify_req;

/* 0, or -1 with a sentence saying what is wrong. */
int vd_parse_roundclose(const uint8_t *body, size_t len, unsigned max_depth,
    vd_roundclose *out, char *err, size_t errlen);
int vd_parse_verify(const uint8_t *body, size_t len, unsigned max_depth,
    vd_verify_req *out, char *err, size_t errlen);

/* "application/json", optionally with parameters such as charset=utf-8. */
int vd_is_json_content_type(const char *ct);

#endif

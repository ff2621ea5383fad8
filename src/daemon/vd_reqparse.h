/*
 * Request bodies, parsed strictly from bytes: the three forms of
 * POST /verify and the RoundClose message (validated like Lensemble's
 * parse_control_message: schema gate first, then kind, no unknown fields).
 */
#ifndef VD_REQPARSE_H
#define VD_REQPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "vd_limits.h"
#include "vd_util.h"

#define VD_ROUNDCLOSE_SCHEMA_MIN 1
#define VD_ROUNDCLOSE_SCHEMA_MAX 2

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

/* 0, or -EINVAL with a sentence saying what is wrong. */
int vd_parse_roundclose(const uint8_t *body, size_t len, unsigned max_depth,
    vd_roundclose *out, char *err, size_t errlen);
int vd_parse_verify(const uint8_t *body, size_t len, unsigned max_depth,
    vd_verify_req *out, char *err, size_t errlen);

/* One query parameter, decoded: value is NULL for "?key" without "=". The
 * lengths are the decoded ones, so a %00 shows as a length past the NUL. */
typedef struct vd_query_arg {
	const char *key;
	size_t key_len;
	const char *value;
	size_t value_len;
} vd_query_arg;

/* The query as a whole: at most VD_REQ_QUERY_MAX_ARGS parameters, names of
 * at most VD_REQ_QUERY_KEY_MAX bytes, values of at most
 * VD_REQ_QUERY_VALUE_MAX, no NUL byte, and no name given twice (a second
 * reader could take either value). 0, or -EINVAL with a sentence naming the
 * parameter. n may exceed VD_REQ_QUERY_MAX_ARGS: only the count is read
 * past it. */
int vd_query_check(const vd_query_arg *args, size_t n, char *err, size_t errlen);

/* A header field's name or value holds no control character (C0 other
 * than HT, or DEL): such bytes are never part of a valid field (RFC 9110
 * section 5.5) and hide what a logging or comparing reader sees. */
int vd_http_field_ok(const char *s, size_t len);

/* "application/json", optionally with parameters such as charset=utf-8. */
int vd_is_json_content_type(const char *ct);

#endif

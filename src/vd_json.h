/*
 * A strict JSON parser (RFC 8259) over a byte range: no I/O, explicit
 * bounds. Unlike common parsers it refuses duplicate object keys (two
 * readers could take either one), invalid UTF-8, lone surrogates, NaN and
 * trailing garbage, and it keeps integer literals exact.
 */
#ifndef VD_JSON_H
#define VD_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "vd_util.h"

#define VD_JSON_MAX_DEPTH_DEFAULT 64

typedef enum vd_jtype {
	VD_JNULL,
	VD_JBOOL,
	VD_JINT,     /* an integer literal: no fraction, no exponent */
	VD_JNUM,     /* any other number; its value is not kept */
	VD_JSTR,
	VD_JARR,
	VD_JOBJ
} vd_jtype;

typedef struct vd_jval vd_jval;
struct vd_jval {
	vd_jtype type;
	int boolean;
	int neg;            /* VD_JINT: sign */
	int big;            /* VD_JINT: magnitude does not fit in uint64_t */
	uint64_t mag;       /* VD_JINT: magnitude */
	vd_str str;         /* VD_JSTR: decoded UTF-8, NUL-terminated (may hold \0) */
	vd_str key;         /* set when this value is an object member */
	size_t count;       /* VD_JARR / VD_JOBJ: number of children */
	vd_jval *child;     /* first child, in document order */
	vd_jval *next;      /* next sibling */
	size_t offset;      /* byte offset where the value starts */
};

typedef struct vd_json_opts {
	unsigned max_depth;      /* 0: VD_JSON_MAX_DEPTH_DEFAULT */
	size_t max_memory;       /* arena cap; 0: 64 x input size + 64 KiB */
} vd_json_opts;

typedef struct vd_jdoc {
	vd_arena arena;
	vd_jval *root;
} vd_jdoc;

/* Parse buf[0..len). On failure returns -1 and writes a sentence with the
 * byte offset into errmsg; the document is left empty. */
int vd_json_parse(const uint8_t *buf, size_t len, const vd_json_opts *opts,
    vd_jdoc *doc, char *errmsg, size_t errlen);
void vd_jdoc_free(vd_jdoc *doc);

/* Object member by key, or NULL. */
const vd_jval *vd_json_get(const vd_jval *obj, const char *key);

/* A non-negative integer that fits int64_t. */
int vd_json_is_nonneg_int(const vd_jval *v);
/* An integer that fits int64_t; writes it. */
int vd_json_int64(const vd_jval *v, int64_t *out);

const char *vd_jtype_name(vd_jtype t);

/* An array's elements, each a non-negative integer that fits int64_t
 * (a tensor shape), copied into arena a: 0; -1 when a is out of memory;
 * -2 when an element is not such an integer. arr must be an array. */
int vd_json_dims(const vd_jval *arr, vd_arena *a, const uint64_t **out, uint32_t *n);

#endif

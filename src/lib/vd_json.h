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

#include "vd_limits.h"
#include "vd_util.h"

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
	/* Flags in bytes: a document of millions of values is mostly these. */
	unsigned char boolean;
	unsigned char neg;  /* VD_JINT: sign */
	unsigned char big;  /* VD_JINT: magnitude does not fit in uint64_t */
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

/* What a document from an untrusted artifact may cost, beyond the opts. */
typedef struct vd_json_bounds {
	vd_budget *budget;       /* charged for all the parse allocates, until
	                          * vd_jdoc_free: it must outlive the document;
	                          * NULL: nothing charged */
	size_t max_items;        /* children of the container below; 0: no limit */
	const char *items_key;   /* that container: the root object's member of
	                          * this name; NULL: the root itself. Counted as
	                          * it is parsed: a document that lists too much
	                          * is refused before it is built */
} vd_json_bounds;

/* Why vd_json_parse failed. */
#define VD_JSON_EINVALID (-1)   /* not valid JSON, or nested too deep */
#define VD_JSON_EMEMORY (-2)    /* max_memory or the budget ran out */
#define VD_JSON_EITEMS (-3)     /* the counted container holds more than max_items */

typedef struct vd_jdoc {
	vd_arena arena;
	vd_jval *root;
} vd_jdoc;

/* Parse buf[0..len). On failure returns a VD_JSON_E* code (negative) and
 * writes a sentence with the byte offset into errmsg; the document is left
 * empty. */
int vd_json_parse(const uint8_t *buf, size_t len, const vd_json_opts *opts,
    vd_jdoc *doc, char *errmsg, size_t errlen);
/* The same within bounds (NULL: none). */
int vd_json_parse_bounded(const uint8_t *buf, size_t len, const vd_json_opts *opts,
    const vd_json_bounds *bounds, vd_jdoc *doc, char *errmsg, size_t errlen);
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

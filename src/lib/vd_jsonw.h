/*
 * The canonical JSON writer: byte-for-byte what Python's
 * json.dumps(obj, sort_keys=True, separators=(",", ":")) prints, in its
 * two modes: ensure_ascii=True (the hash frame) and ensure_ascii=False
 * (ledger records).
 */
#ifndef VD_JSONW_H
#define VD_JSONW_H

#include "vd_json.h"
#include "vd_util.h"

typedef enum vd_jw_mode {
	VD_JW_ASCII,   /* non-ASCII and DEL as \uXXXX (surrogate pairs above the BMP) */
	VD_JW_UTF8     /* raw UTF-8; only '"', '\\' and controls below 0x20 escaped */
} vd_jw_mode;

/* s must be valid UTF-8. Returns 0, or -1 when out of memory. */
int vd_jw_string(vd_buf *b, const char *s, size_t len, vd_jw_mode mode);
int vd_jw_int(vd_buf *b, int64_t v);

/* A parsed value with object keys sorted by code point. Refuses (-1) a
 * non-integer number or an integer beyond int64, which this writer
 * cannot print the way Python would. */
int vd_jw_value(vd_buf *b, const vd_jval *v, vd_jw_mode mode);

#endif

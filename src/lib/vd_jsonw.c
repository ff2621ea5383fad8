#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "vd_jsonw.h"

static int put_u16(vd_buf *b, unsigned u)
{
	return vd_buf_printf(b, "\\u%04x", u);
}

/* Decode one code point from valid UTF-8; returns its length. */
static size_t utf8_decode(const uint8_t *p, unsigned *cp)
{
	if (p[0] < 0x80) {
		*cp = p[0];
		return 1;
	}
	if (p[0] < 0xe0) {
		*cp = ((unsigned)(p[0] & 0x1f) << 6) | (p[1] & 0x3f);
		return 2;
	}
	if (p[0] < 0xf0) {
		*cp = ((unsigned)(p[0] & 0x0f) << 12) | ((unsigned)(p[1] & 0x3f) << 6) |
		    (p[2] & 0x3f);
		return 3;
	}
	*cp = ((unsigned)(p[0] & 0x07) << 18) | ((unsigned)(p[1] & 0x3f) << 12) |
	    ((unsigned)(p[2] & 0x3f) << 6) | (p[3] & 0x3f);
	return 4;
}

static int put_escaped_ascii(vd_buf *b, uint8_t c)
{
	switch (c) {
	case '"': return vd_buf_puts(b, "\\\"");
	case '\\': return vd_buf_puts(b, "\\\\");
	case '\n': return vd_buf_puts(b, "\\n");
	case '\r': return vd_buf_puts(b, "\\r");
	case '\t': return vd_buf_puts(b, "\\t");
	case '\b': return vd_buf_puts(b, "\\b");
	case '\f': return vd_buf_puts(b, "\\f");
	default:
		return put_u16(b, c);
	}
}

int vd_jw_string(vd_buf *b, const char *s, size_t len, vd_jw_mode mode)
{
	const uint8_t *p = (const uint8_t *)s, *end = p + len;
	unsigned cp;
	size_t n;

	vd_buf_putc(b, '"');
	while (p < end) {
		if (*p == '"' || *p == '\\' || *p < 0x20 ||
		    (mode == VD_JW_ASCII && *p == 0x7f)) {
			put_escaped_ascii(b, *p++);
			continue;
		}
		if (*p < 0x80 || mode == VD_JW_UTF8) {
			/* In UTF-8 mode multi-byte sequences are copied whole. */
			n = *p < 0x80 ? 1 : utf8_decode(p, &cp);
			vd_buf_put(b, p, n);
			p += n;
			continue;
		}
		p += utf8_decode(p, &cp);
		if (cp >= 0x10000) {
			cp -= 0x10000;
			put_u16(b, 0xd800 + (cp >> 10));
			put_u16(b, 0xdc00 + (cp & 0x3ff));
		} else {
			put_u16(b, cp);
		}
	}
	vd_buf_putc(b, '"');
	return b->oom ? -1 : 0;
}

int vd_jw_int(vd_buf *b, int64_t v)
{
	return vd_buf_printf(b, "%" PRId64, v);
}

static int member_cmp(const void *a, const void *c)
{
	const vd_jval *x = *(const vd_jval *const *)a;
	const vd_jval *y = *(const vd_jval *const *)c;

	return vd_str_cmp(x->key, y->key);
}

static int write_object(vd_buf *b, const vd_jval *v, vd_jw_mode mode)
{
	const vd_jval **m, *c;
	size_t i = 0;
	int rc = 0;

	if (v->count == 0)
		return vd_buf_puts(b, "{}");
	m = malloc(v->count * sizeof(*m));
	if (m == NULL)
		return -1;
	for (c = v->child; c != NULL; c = c->next)
		m[i++] = c;
	/* UTF-8 byte order is code point order: what Python's sort gives. */
	qsort(m, v->count, sizeof(*m), member_cmp);
	vd_buf_putc(b, '{');
	for (i = 0; i < v->count && rc == 0; i++) {
		if (i)
			vd_buf_putc(b, ',');
		vd_jw_string(b, m[i]->key.p, m[i]->key.len, mode);
		vd_buf_putc(b, ':');
		rc = vd_jw_value(b, m[i], mode);
	}
	vd_buf_putc(b, '}');
	free(m);
	return rc;
}

int vd_jw_value(vd_buf *b, const vd_jval *v, vd_jw_mode mode)
{
	const vd_jval *c;
	int64_t i;

	switch (v->type) {
	case VD_JNULL: return vd_buf_puts(b, "null");
	case VD_JBOOL: return vd_buf_puts(b, v->boolean ? "true" : "false");
	case VD_JINT:
		if (!vd_json_int64(v, &i))
			return -1;
		return vd_jw_int(b, i);
	case VD_JNUM: return -1;
	case VD_JSTR: return vd_jw_string(b, v->str.p, v->str.len, mode);
	case VD_JARR:
		vd_buf_putc(b, '[');
		for (c = v->child; c != NULL; c = c->next) {
			if (c != v->child)
				vd_buf_putc(b, ',');
			if (vd_jw_value(b, c, mode) < 0)
				return -1;
		}
		return vd_buf_putc(b, ']');
	case VD_JOBJ:
		return write_object(b, v, mode);
	}
	return -1;
}

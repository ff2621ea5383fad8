#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vd_json.h"
#include "vd_utf8.h"

typedef struct parser {
	const uint8_t *p, *end, *start;
	vd_arena *arena;
	vd_budget *budget;
	unsigned depth, max_depth;
	size_t max_items;
	const char *items_key;
	vd_str member;              /* the key of the value parsed next, if any */
	char *errmsg;
	size_t errlen;
	int failed;                 /* 0, or the VD_JSON_E* code */
} parser;

static vd_jval *parse_value(parser *ps);

static int perr_code(parser *ps, int code, const char *what)
{
	if (!ps->failed) {
		ps->failed = code;
		snprintf(ps->errmsg, ps->errlen, "%s at byte %zu", what,
		    (size_t)(ps->p - ps->start));
	}
	return -1;
}

static int perr(parser *ps, const char *what)
{
	return perr_code(ps, VD_JSON_EINVALID, what);
}

static int perr_memory(parser *ps)
{
	return perr_code(ps, VD_JSON_EMEMORY, "document too large for its memory limit");
}

static void skip_ws(parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' ||
	    *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static vd_jval *new_val(parser *ps, vd_jtype t)
{
	vd_jval *v = vd_arena_alloc(ps->arena, sizeof(*v));

	if (v == NULL) {
		perr_memory(ps);
		return NULL;
	}
	v->type = t;
	v->offset = (size_t)(ps->p - ps->start);
	return v;
}

static int hex4(const uint8_t *p, unsigned *out)
{
	unsigned v = 0;
	int i;

	for (i = 0; i < 4; i++) {
		uint8_t c = p[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

static size_t put_utf8(uint8_t *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (uint8_t)(0xc0 | (cp >> 6));
		o[1] = (uint8_t)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (uint8_t)(0xe0 | (cp >> 12));
		o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (uint8_t)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (uint8_t)(0xf0 | (cp >> 18));
	o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (uint8_t)(0x80 | (cp & 0x3f));
	return 4;
}

/* \uXXXX at ps->p (after the backslash-u); handles surrogate pairs. */
static int parse_uescape(parser *ps, unsigned *cp)
{
	unsigned hi, lo;

	if (ps->end - ps->p < 4 || hex4(ps->p, &hi) < 0)
		return perr(ps, "bad \\u escape");
	ps->p += 4;
	if (hi >= 0xdc00 && hi <= 0xdfff)
		return perr(ps, "lone low surrogate in \\u escape");
	if (hi < 0xd800 || hi > 0xdbff) {
		*cp = hi;
		return 0;
	}
	if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u' ||
	    hex4(ps->p + 2, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff)
		return perr(ps, "lone high surrogate in \\u escape");
	ps->p += 6;
	*cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
	return 0;
}

static int parse_escape(parser *ps, uint8_t *o, size_t *olen)
{
	unsigned cp;
	uint8_t c = *ps->p++;

	switch (c) {
	case '"': case '\\': case '/':
		o[0] = c; *olen = 1; return 0;
	case 'b': o[0] = '\b'; *olen = 1; return 0;
	case 'f': o[0] = '\f'; *olen = 1; return 0;
	case 'n': o[0] = '\n'; *olen = 1; return 0;
	case 'r': o[0] = '\r'; *olen = 1; return 0;
	case 't': o[0] = '\t'; *olen = 1; return 0;
	case 'u':
		if (parse_uescape(ps, &cp) < 0)
			return -1;
		*olen = put_utf8(o, cp);
		return 0;
	default:
		ps->p--;
		return perr(ps, "invalid escape in string");
	}
}

/* A string at ps->p (on the opening quote). Decoded output never exceeds
 * the input length, so one allocation of that size suffices. */
static int parse_string(parser *ps, vd_str *out)
{
	const uint8_t *s = ++ps->p;
	uint8_t *buf, *o;
	size_t n;

	while (s < ps->end && *s != '"') {
		if (*s == '\\' && s + 1 < ps->end)
			s++;
		s++;
	}
	if (s >= ps->end)
		return perr(ps, "unterminated string");
	buf = vd_arena_alloc(ps->arena, (size_t)(s - ps->p) + 1);
	if (buf == NULL)
		return perr_memory(ps);
	o = buf;
	while (*ps->p != '"') {
		uint8_t c = *ps->p;
		if (c < 0x20)
			return perr(ps, "control character in string");
		if (c == '\\') {
			ps->p++;
			if (parse_escape(ps, o, &n) < 0)
				return -1;
			o += n;
			continue;
		}
		n = vd_utf8_seq(ps->p, ps->end);
		if (n == 0)
			return perr(ps, "invalid UTF-8 in string");
		memcpy(o, ps->p, n);
		o += n;
		ps->p += n;
	}
	ps->p++;
	*o = '\0';
	out->p = (const char *)buf;
	out->len = (size_t)(o - buf);
	return 0;
}

static int digit(const parser *ps)
{
	return ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9';
}

static vd_jval *parse_number(parser *ps)
{
	vd_jval *v = new_val(ps, VD_JINT);

	if (v == NULL)
		return NULL;
	if (*ps->p == '-') {
		v->neg = 1;
		ps->p++;
	}
	if (!digit(ps))
		return perr(ps, "invalid number"), NULL;
	if (*ps->p == '0' && ps->p + 1 < ps->end && ps->p[1] >= '0' && ps->p[1] <= '9')
		return perr(ps, "number with a leading zero"), NULL;
	while (digit(ps)) {
		unsigned d = (unsigned)(*ps->p++ - '0');
		if (__builtin_mul_overflow(v->mag, 10, &v->mag) ||
		    __builtin_add_overflow(v->mag, d, &v->mag))
			v->big = 1;
	}
	if (ps->p < ps->end && *ps->p == '.') {
		ps->p++;
		v->type = VD_JNUM;
		if (!digit(ps))
			return perr(ps, "invalid number"), NULL;
		while (digit(ps))
			ps->p++;
	}
	if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
		ps->p++;
		v->type = VD_JNUM;
		if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
			ps->p++;
		if (!digit(ps))
			return perr(ps, "invalid number"), NULL;
		while (digit(ps))
			ps->p++;
	}
	return v;
}

static vd_jval *parse_literal(parser *ps, const char *lit, vd_jtype t, int b)
{
	size_t n = strlen(lit);
	vd_jval *v;

	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, lit, n) != 0)
		return perr(ps, "invalid literal"), NULL;
	if ((v = new_val(ps, t)) == NULL)
		return NULL;
	v->boolean = b;
	ps->p += n;
	return v;
}

static int key_cmp(const void *a, const void *b)
{
	const vd_jval *x = *(const vd_jval *const *)a;
	const vd_jval *y = *(const vd_jval *const *)b;

	return vd_str_cmp(x->key, y->key);
}

/* Refuse duplicate keys: sort member pointers and compare neighbours. */
static int check_duplicates(parser *ps, const vd_jval *obj)
{
	const vd_jval **m, *c;
	size_t i = 0, size = obj->count * sizeof(*m);
	int rc = 0;

	if (obj->count < 2)
		return 0;
	if ((m = vd_budget_alloc(ps->budget, size)) == NULL)
		return perr_memory(ps);
	for (c = obj->child; c != NULL; c = c->next)
		m[i++] = c;
	qsort(m, obj->count, sizeof(*m), key_cmp);
	for (i = 1; i < obj->count && rc == 0; i++) {
		if (vd_str_cmp(m[i - 1]->key, m[i]->key) == 0) {
			ps->p = ps->start + m[i]->offset;
			rc = perr(ps, "duplicate object key");
		}
	}
	vd_budget_free(ps->budget, m, size);
	return rc;
}

/* The container whose children max_items bounds: the root, or the root
 * object's member named items_key. */
static int counted(const parser *ps)
{
	if (ps->max_items == 0)
		return 0;
	if (ps->items_key == NULL)
		return ps->depth == 1;
	return ps->depth == 2 && ps->member.p != NULL && vd_str_eq(ps->member, ps->items_key);
}

static vd_jval *parse_container(parser *ps, int is_obj)
{
	vd_jval *v = new_val(ps, is_obj ? VD_JOBJ : VD_JARR), **tail, *c;
	vd_str key = { 0 };
	uint8_t close = is_obj ? '}' : ']';
	size_t max = SIZE_MAX;

	if (v == NULL)
		return NULL;
	if (++ps->depth > ps->max_depth)
		return perr(ps, "nesting too deep"), NULL;
	if (counted(ps))
		max = ps->max_items;
	ps->p++;
	tail = &v->child;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
		ps->depth--;
		return v;
	}
	for (;;) {
		skip_ws(ps);
		if (v->count == max)
			return perr_code(ps, VD_JSON_EITEMS, "more items than the limit"), NULL;
		if (is_obj) {
			if (ps->p >= ps->end || *ps->p != '"')
				return perr(ps, "expected a string key"), NULL;
			if (parse_string(ps, &key) < 0)
				return NULL;
			skip_ws(ps);
			if (ps->p >= ps->end || *ps->p != ':')
				return perr(ps, "expected ':'"), NULL;
			ps->p++;
			skip_ws(ps);
		}
		ps->member = key;
		if ((c = parse_value(ps)) == NULL)
			return NULL;
		c->key = key;
		*tail = c;
		tail = &c->next;
		v->count++;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == close) {
			ps->p++;
			break;
		}
		return perr(ps, is_obj ? "expected ',' or '}'" : "expected ',' or ']'"), NULL;
	}
	ps->depth--;
	if (is_obj && check_duplicates(ps, v) < 0)
		return NULL;
	return v;
}

static vd_jval *parse_value(parser *ps)
{
	vd_jval *v;

	skip_ws(ps);
	if (ps->p >= ps->end)
		return perr(ps, "unexpected end of input"), NULL;
	switch (*ps->p) {
	case '{': return parse_container(ps, 1);
	case '[': return parse_container(ps, 0);
	case '"':
		if ((v = new_val(ps, VD_JSTR)) == NULL || parse_string(ps, &v->str) < 0)
			return NULL;
		return v;
	case 't': return parse_literal(ps, "true", VD_JBOOL, 1);
	case 'f': return parse_literal(ps, "false", VD_JBOOL, 0);
	case 'n': return parse_literal(ps, "null", VD_JNULL, 0);
	default:
		if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9'))
			return parse_number(ps);
		return perr(ps, "unexpected character"), NULL;
	}
}

int vd_json_parse(const uint8_t *buf, size_t len, const vd_json_opts *opts,
    vd_jdoc *doc, char *errmsg, size_t errlen)
{
	return vd_json_parse_bounded(buf, len, opts, NULL, doc, errmsg, errlen);
}

int vd_json_parse_bounded(const uint8_t *buf, size_t len, const vd_json_opts *opts,
    const vd_json_bounds *bounds, vd_jdoc *doc, char *errmsg, size_t errlen)
{
	parser ps;
	size_t limit;

	memset(&ps, 0, sizeof(ps));
	ps.p = ps.start = buf;
	ps.end = buf + len;
	ps.errmsg = errmsg;
	ps.errlen = errlen;
	ps.max_depth = opts && opts->max_depth ? opts->max_depth : VD_JSON_MAX_DEPTH_DEFAULT;
	limit = opts && opts->max_memory ? opts->max_memory :
	    (len > (SIZE_MAX - 65536) / 64 ? SIZE_MAX : len * 64 + 65536);
	if (bounds != NULL) {
		ps.budget = bounds->budget;
		ps.max_items = bounds->max_items;
		ps.items_key = bounds->items_key;
	}
	vd_arena_init(&doc->arena, limit);
	doc->arena.budget = ps.budget;
	ps.arena = &doc->arena;
	if (errlen)
		errmsg[0] = '\0';
	doc->root = parse_value(&ps);
	if (doc->root != NULL) {
		skip_ws(&ps);
		if (ps.p != ps.end)
			perr(&ps, "trailing data after the JSON value");
	}
	if (ps.failed || doc->root == NULL) {
		vd_jdoc_free(doc);
		return ps.failed ? ps.failed : VD_JSON_EINVALID;
	}
	return 0;
}

void vd_jdoc_free(vd_jdoc *doc)
{
	vd_arena_free(&doc->arena);
	doc->root = NULL;
}

const vd_jval *vd_json_get(const vd_jval *obj, const char *key)
{
	const vd_jval *c;

	if (obj == NULL || obj->type != VD_JOBJ)
		return NULL;
	for (c = obj->child; c != NULL; c = c->next)
		if (vd_str_eq(c->key, key))
			return c;
	return NULL;
}

int vd_json_int64(const vd_jval *v, int64_t *out)
{
	if (v == NULL || v->type != VD_JINT || v->big)
		return 0;
	if (v->neg) {
		if (v->mag > (uint64_t)INT64_MAX + 1)
			return 0;
		*out = v->mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v->mag;
		return 1;
	}
	if (v->mag > INT64_MAX)
		return 0;
	*out = (int64_t)v->mag;
	return 1;
}

int vd_json_is_nonneg_int(const vd_jval *v)
{
	int64_t x;

	return vd_json_int64(v, &x) && x >= 0;
}

const char *vd_jtype_name(vd_jtype t)
{
	switch (t) {
	case VD_JNULL: return "null";
	case VD_JBOOL: return "a boolean";
	case VD_JINT: return "an integer";
	case VD_JNUM: return "a number";
	case VD_JSTR: return "a string";
	case VD_JARR: return "an array";
	case VD_JOBJ: return "an object";
	}
	return "unknown";
}

int vd_json_dims(const vd_jval *arr, vd_arena *a, const uint64_t **out, uint32_t *n)
{
	const vd_jval *c;
	uint64_t *dims;
	uint32_t i = 0;

	dims = vd_arena_alloc(a, (arr->count ? arr->count : 1) * sizeof(*dims));
	if (dims == NULL)
		return -1;
	for (c = arr->child; c != NULL; c = c->next) {
		if (c->type != VD_JINT || c->neg || c->big)
			return -2;
		dims[i++] = c->mag;
	}
	*n = i;
	*out = dims;
	return 0;
}

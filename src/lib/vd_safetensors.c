#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "vd_safetensors.h"

static const struct {
	const char *name;
	unsigned size;
	const char *token;      /* stored dtypes an artifact may use */
} dtypes[VD_DT_COUNT] = {
	[VD_DT_BOOL] = { "BOOL", 1, NULL },
	[VD_DT_U8] = { "U8", 1, NULL },
	[VD_DT_I8] = { "I8", 1, NULL },
	[VD_DT_F8_E5M2] = { "F8_E5M2", 1, NULL },
	[VD_DT_F8_E4M3] = { "F8_E4M3", 1, NULL },
	[VD_DT_I16] = { "I16", 2, NULL },
	[VD_DT_U16] = { "U16", 2, NULL },
	[VD_DT_F16] = { "F16", 2, "float16" },
	[VD_DT_BF16] = { "BF16", 2, "bfloat16" },
	[VD_DT_I32] = { "I32", 4, NULL },
	[VD_DT_U32] = { "U32", 4, NULL },
	[VD_DT_F32] = { "F32", 4, "float32" },
	[VD_DT_F64] = { "F64", 8, NULL },
	[VD_DT_I64] = { "I64", 8, NULL },
	[VD_DT_U64] = { "U64", 8, NULL },
};

unsigned vd_dtype_size(vd_dtype d)
{
	return d < VD_DT_COUNT ? dtypes[d].size : 0;
}

const char *vd_dtype_name(vd_dtype d)
{
	return d < VD_DT_COUNT ? dtypes[d].name : "?";
}

const char *vd_dtype_token(vd_dtype d)
{
	return d < VD_DT_COUNT ? dtypes[d].token : NULL;
}

static int dtype_lookup(vd_str s, vd_dtype *out)
{
	unsigned i;

	for (i = 0; i < VD_DT_COUNT; i++) {
		if (vd_str_eq(s, dtypes[i].name)) {
			*out = (vd_dtype)i;
			return 0;
		}
	}
	return -1;
}

#define NOT_ST "not a safetensors artifact: "

static const vd_parse_bounds no_bounds;

/* Tensors the file may still declare; UINT64_MAX: no limit. */
static uint64_t tensors_left(const vd_parse_bounds *b)
{
	if (b->max_tensors == 0)
		return UINT64_MAX;
	return b->tensors_before < b->max_tensors ? b->max_tensors - b->tensors_before : 0;
}

static vd_code over_tensors(const vd_parse_bounds *b, vd_err *err)
{
	if (b->tensors_before > 0)
		return vd_fail(err, VD_ARTIFACT_INVALID,
		    "declares more than %llu tensors together with the weight files before it (max_tensors)",
		    (unsigned long long)b->max_tensors);
	return vd_fail(err, VD_ARTIFACT_INVALID, "declares more than %llu tensors (max_tensors)",
	    (unsigned long long)b->max_tensors);
}

/* An allocation failed: the budget ran out, or the system's memory. */
static vd_code no_memory(const vd_parse_bounds *b, vd_err *err)
{
	if (b->budget != NULL && b->budget->exhausted)
		return vd_fail(err, VD_ARTIFACT_INVALID,
		    "needs more than %zu bytes to parse (max_job_memory)", b->budget->limit);
	return vd_fail(err, VD_IO_ERROR, "out of memory parsing a safetensors header");
}

vd_code vd_st_header_len(const uint8_t *prefix, uint64_t file_size,
    uint64_t max_header, uint64_t *hlen, vd_err *err)
{
	uint64_t n = 0;
	int i;

	if (file_size < VD_ST_PREFIX_LEN)
		return vd_fail(err, VD_CHECKPOINT_INTEGRITY,
		    NOT_ST "the file is %llu bytes, shorter than its 8-byte header length",
		    (unsigned long long)file_size);
	for (i = 7; i >= 0; i--)
		n = (n << 8) | prefix[i];
	if (max_header == 0)
		max_header = VD_ST_MAX_HEADER_DEFAULT;
	if (n > max_header)
		return vd_fail(err, VD_CHECKPOINT_INTEGRITY,
		    NOT_ST "header length %llu exceeds the limit of %llu bytes",
		    (unsigned long long)n, (unsigned long long)max_header);
	if (n > file_size - VD_ST_PREFIX_LEN)
		return vd_fail(err, VD_CHECKPOINT_INTEGRITY,
		    NOT_ST "header length %llu runs past the end of the %llu-byte file",
		    (unsigned long long)n, (unsigned long long)file_size);
	if (n < 2)
		return vd_fail(err, VD_CHECKPOINT_INTEGRITY,
		    NOT_ST "header length %llu is too short for a JSON object",
		    (unsigned long long)n);
	*hlen = n;
	return VD_OK;
}

static vd_code parse_shape(const vd_jval *v, vd_st_file *f, vd_st_tensor *t,
    const vd_parse_bounds *b, vd_err *err)
{
	if (v == NULL || v->type != VD_JARR)
		return vd_fail(err, VD_CHECKPOINT_INTEGRITY,
		    NOT_ST "tensor \"%.64s\" has no shape array", t->name.p);
	if (v->count > VD_ST_MAX_RANK)
		return vd_fail(err, VD_CHECKPOINT_INTEGRITY,
		    NOT_ST "tensor \"%.64s\" has rank %zu, above %d", t->name.p,
		    v->count, VD_ST_MAX_RANK);
	switch (vd_json_dims(v, &f->doc.arena, &t->shape, &t->rank)) {
	case 0:
		return VD_OK;
	case -1:
		return no_memory(b, err);
	default:
		return vd_fail(err, VD_CHECKPOINT_INTEGRITY,
		    NOT_ST "tensor \"%.64s\" has a shape entry that is not a non-negative integer",
		    t->name.p);
	}
}

static vd_code parse_offsets(const vd_jval *v, vd_st_tensor *t, vd_err *err)
{
	const vd_jval *b, *e;

	if (v == NULL || v->type != VD_JARR || v->count != 2)
		return vd_fail(err, VD_CHECKPOINT_INTEGRITY,
		    NOT_ST "tensor \"%.64s\" has no [begin, end] data_offsets", t->name.p);
	b = v->child;
	e = b->next;
	if (b->type != VD_JINT || b->neg || b->big || e->type != VD_JINT ||
	    e->neg || e->big)
		return vd_fail(err, VD_CHECKPOINT_INTEGRITY,
		    NOT_ST "tensor \"%.64s\" has data_offsets that are not non-negative integers",
		    t->name.p);
	t->begin = b->mag;
	t->end = e->mag;
	if (t->end < t->begin)
		return vd_fail(err, VD_CHECKPOINT_INTEGRITY,
		    NOT_ST "tensor \"%.64s\" ends before it begins", t->name.p);
	return VD_OK;
}

/* Elements first, then bytes, as the reference safetensors library
 * computes them: [2^62, 0] is an empty tensor, [2^62, 8, 0] overflows. */
static vd_code check_size(const vd_st_tensor *t, vd_err *err)
{
	uint64_t n = 1;
	uint32_t i;

	for (i = 0; i < t->rank; i++)
		if (vd_mul_u64(n, t->shape[i], &n) < 0)
			goto overflow;
	if (vd_mul_u64(n, vd_dtype_size(t->dtype), &n) < 0)
		goto overflow;
	if (n != t->end - t->begin)
		return vd_fail(err, VD_CHECKPOINT_INTEGRITY,
		    NOT_ST "tensor \"%.64s\" spans %llu bytes but its %s shape needs %llu",
		    t->name.p, (unsigned long long)(t->end - t->begin),
		    vd_dtype_name(t->dtype), (unsigned long long)n);
	return VD_OK;
overflow:
	return vd_fail(err, VD_CHECKPOINT_INTEGRITY,
	    NOT_ST "tensor \"%.64s\" has a shape whose size overflows", t->name.p);
}

static vd_code parse_tensor(const vd_jval *v, vd_st_file *f, vd_st_tensor *t,
    const vd_parse_bounds *b, vd_err *err)
{
	const vd_jval *c;
	vd_code rc;

	t->name = v->key;
	if (v->type != VD_JOBJ)
		return vd_fail(err, VD_CHECKPOINT_INTEGRITY,
		    NOT_ST "tensor \"%.64s\" is not described by an object", t->name.p);
	for (c = v->child; c != NULL; c = c->next)
		if (!vd_str_eq(c->key, "dtype") && !vd_str_eq(c->key, "shape") &&
		    !vd_str_eq(c->key, "data_offsets"))
			return vd_fail(err, VD_CHECKPOINT_INTEGRITY,
			    NOT_ST "tensor \"%.64s\" has an unknown field \"%.32s\"",
			    t->name.p, c->key.p);
	c = vd_json_get(v, "dtype");
	if (c == NULL || c->type != VD_JSTR || dtype_lookup(c->str, &t->dtype) < 0)
		return vd_fail(err, VD_CHECKPOINT_INTEGRITY,
		    NOT_ST "tensor \"%.64s\" has a missing or unknown dtype", t->name.p);
	if ((rc = parse_shape(vd_json_get(v, "shape"), f, t, b, err)) != VD_OK)
		return rc;
	if ((rc = parse_offsets(vd_json_get(v, "data_offsets"), t, err)) != VD_OK)
		return rc;
	return check_size(t, err);
}

static vd_code check_metadata(const vd_jval *v, vd_err *err)
{
	const vd_jval *c;

	if (v->type != VD_JOBJ)
		return vd_fail(err, VD_CHECKPOINT_INTEGRITY,
		    NOT_ST "__metadata__ is not an object");
	for (c = v->child; c != NULL; c = c->next)
		if (c->type != VD_JSTR)
			return vd_fail(err, VD_CHECKPOINT_INTEGRITY,
			    NOT_ST "__metadata__ value \"%.64s\" is not a string", c->key.p);
	return VD_OK;
}

static int range_cmp(const void *a, const void *b)
{
	const vd_st_tensor *x = *(const vd_st_tensor *const *)a;
	const vd_st_tensor *y = *(const vd_st_tensor *const *)b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	return (x->end > y->end) - (x->end < y->end);
}

/* The sorted ranges must tile [0, data_len) exactly. */
static vd_code check_coverage(vd_st_file *f, const vd_parse_bounds *b, vd_err *err)
{
	const vd_st_tensor **s;
	uint64_t pos = 0;
	size_t i, size = (f->count ? f->count : 1) * sizeof(*s);
	vd_code rc = VD_OK;

	if ((s = vd_budget_alloc(b->budget, size)) == NULL)
		return no_memory(b, err);
	for (i = 0; i < f->count; i++)
		s[i] = &f->tensors[i];
	qsort(s, f->count, sizeof(*s), range_cmp);
	for (i = 0; i < f->count && rc == VD_OK; i++) {
		if (s[i]->begin != pos)
			rc = vd_fail(err, VD_CHECKPOINT_INTEGRITY, NOT_ST
			    "tensor \"%.64s\" begins at %llu where %llu was expected (%s)",
			    s[i]->name.p, (unsigned long long)s[i]->begin,
			    (unsigned long long)pos, s[i]->begin < pos ? "overlap" : "hole");
		pos = s[i]->end;
	}
	if (rc == VD_OK && pos != f->data_len)
		rc = vd_fail(err, VD_CHECKPOINT_INTEGRITY, NOT_ST
		    "the tensors cover %llu of the %llu data bytes",
		    (unsigned long long)pos, (unsigned long long)f->data_len);
	vd_budget_free(b->budget, s, size);
	return rc;
}

static vd_code parse_root(const vd_jval *root, vd_st_file *f, uint32_t file_index,
    const vd_parse_bounds *b, vd_err *err)
{
	const vd_jval *c;
	size_t n = 0;
	vd_code rc;

	for (c = root->child; c != NULL; c = c->next)
		n += !vd_str_eq(c->key, "__metadata__");
	/* The JSON left room for __metadata__: one more may have come in. */
	if (n > tensors_left(b))
		return over_tensors(b, err);
	f->tensors = vd_arena_alloc(&f->doc.arena, (n ? n : 1) * sizeof(*f->tensors));
	if (f->tensors == NULL)
		return no_memory(b, err);
	for (c = root->child; c != NULL; c = c->next) {
		if (vd_str_eq(c->key, "__metadata__")) {
			if ((rc = check_metadata(c, err)) != VD_OK)
				return rc;
			continue;
		}
		f->tensors[f->count].file = file_index;
		if ((rc = parse_tensor(c, f, &f->tensors[f->count], b, err)) != VD_OK)
			return rc;
		f->count++;
	}
	return check_coverage(f, b, err);
}

/* The header as a JSON document: its tensors counted while it is read,
 * every byte it takes charged to the budget. */
static vd_code parse_json(const uint8_t *json, size_t hlen, const vd_parse_bounds *b,
    vd_st_file *out, vd_err *err)
{
	vd_json_bounds jb = { .budget = b->budget };
	uint64_t left = tensors_left(b);
	char msg[128];

	/* Room for __metadata__ beside the tensors. */
	if (left < SIZE_MAX)
		jb.max_items = (size_t)left + 1;
	switch (vd_json_parse_bounded(json, hlen, NULL, &jb, &out->doc, msg, sizeof(msg))) {
	case 0:
		return VD_OK;
	case VD_JSON_EITEMS:
		return over_tensors(b, err);
	case VD_JSON_EMEMORY:
		if (b->budget != NULL && b->budget->exhausted)
			return no_memory(b, err);
		break;
	default:
		break;
	}
	return vd_fail(err, VD_CHECKPOINT_INTEGRITY,
	    NOT_ST "the header is not valid JSON (%s)", msg);
}

vd_code vd_st_parse(const uint8_t *json, size_t hlen, uint64_t data_len,
    uint32_t file_index, const vd_parse_bounds *bounds, vd_st_file *out, vd_err *err)
{
	const vd_parse_bounds *b = bounds != NULL ? bounds : &no_bounds;
	vd_code rc;

	memset(out, 0, sizeof(*out));
	out->data_start = VD_ST_PREFIX_LEN + (uint64_t)hlen;
	out->data_len = data_len;
	if (hlen == 0 || json[0] != '{')
		return vd_fail(err, VD_CHECKPOINT_INTEGRITY,
		    NOT_ST "the header does not start with '{'");
	if ((rc = parse_json(json, hlen, b, out, err)) != VD_OK)
		return rc;
	rc = parse_root(out->doc.root, out, file_index, b, err);
	if (rc != VD_OK)
		vd_st_free(out);
	return rc;
}

void vd_st_free(vd_st_file *f)
{
	vd_jdoc_free(&f->doc);
	f->tensors = NULL;
	f->count = 0;
}

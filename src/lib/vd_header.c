#include "config.h"

#include <string.h>

#include "vd_header.h"
#include "vd_utf8.h"

typedef enum field_kind {
	F_INT, F_NONNEG_INT, F_HEX64, F_HEX64_OR_NULL, F_STRING, F_STRINGS,
	F_MANIFEST, F_FILES, F_TIMESTAMP, F_OBJECT_OR_NULL
} field_kind;

/* Every field of every version: a field exists from `since` on. */
static const struct field_spec {
	const char *name;
	field_kind kind;
	int since;
	int required;
} fields[] = {
	{ "schema_version", F_INT, 1, 1 },
	{ "content_hash", F_HEX64, 1, 1 },
	{ "parent_hash", F_HEX64_OR_NULL, 1, 1 },
	{ "wmcp_version", F_STRING, 1, 1 },
	{ "round_index", F_NONNEG_INT, 1, 1 },
	{ "config_hash", F_STRING, 1, 1 },
	{ "param_groups", F_STRINGS, 1, 1 },
	{ "tensor_manifest", F_MANIFEST, 1, 1 },
	{ "weight_files", F_FILES, 1, 1 },
	{ "created_at", F_TIMESTAMP, 1, 1 },
	{ "model_arch", F_OBJECT_OR_NULL, 2, 0 },
};

/* The migration chain: how a header of one version reads as the next.
 * v1 -> v2 adds model_arch (absent reads as null). None of it changes the
 * hash, which binds the version written on disk. */
static const struct migration {
	int from, to;
} migrations[] = {
	{ 1, 2 },       /* adds model_arch */
};

#define INVALID(...) vd_fail(err, VD_ARTIFACT_INVALID, __VA_ARGS__)

static const vd_parse_bounds no_bounds;

/* An allocation failed: the budget ran out, or the system's memory. */
static vd_code no_memory(const vd_parse_bounds *b, vd_err *err)
{
	if (b->budget != NULL && b->budget->exhausted)
		return INVALID("header.json needs more than %zu bytes to parse (max_job_memory)",
		    b->budget->limit);
	return vd_fail(err, VD_IO_ERROR, "out of memory reading header.json");
}

int vd_plain_filename(vd_str s)
{
	if (s.len == 0 || vd_str_eq(s, ".") || vd_str_eq(s, ".."))
		return 0;
	return memchr(s.p, '/', s.len) == NULL && memchr(s.p, '\0', s.len) == NULL;
}

static int digits(const char *p, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (p[i] < '0' || p[i] > '9')
			return 0;
	return 1;
}

static int num(const char *p, int n)
{
	int v = 0, i;

	for (i = 0; i < n; i++)
		v = v * 10 + (p[i] - '0');
	return v;
}

static int days_in_month(int year, int month)
{
	static const int days[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;

	return month == 2 && leap ? 29 : days[month - 1];
}

int vd_rfc3339_utc(vd_str s)
{
	const char *p = s.p;
	size_t i = 19;

	/* YYYY-MM-DDTHH:MM:SS[.frac](Z|+00:00) */
	if (s.len < 20 || !digits(p, 4) || p[4] != '-' || !digits(p + 5, 2) ||
	    p[7] != '-' || !digits(p + 8, 2) || (p[10] != 'T' && p[10] != 't') ||
	    !digits(p + 11, 2) || p[13] != ':' || !digits(p + 14, 2) ||
	    p[16] != ':' || !digits(p + 17, 2))
		return 0;
	if (num(p + 5, 2) < 1 || num(p + 5, 2) > 12 || num(p + 8, 2) < 1 ||
	    num(p + 8, 2) > 31 || num(p + 11, 2) > 23 || num(p + 14, 2) > 59 ||
	    num(p + 17, 2) > 60 || num(p + 8, 2) > days_in_month(num(p, 4), num(p + 5, 2)))
		return 0;
	if (p[i] == '.') {
		size_t start = ++i;
		while (i < s.len && p[i] >= '0' && p[i] <= '9')
			i++;
		if (i == start)
			return 0;
	}
	if (s.len - i == 1)
		return p[i] == 'Z' || p[i] == 'z';
	return s.len - i == 6 && memcmp(p + i, "+00:00", 6) == 0;
}

/* The gate: schema_version decides how to read everything else. */
static vd_code check_version(const vd_jval *root, vd_header *h, vd_err *err)
{
	const vd_jval *v = vd_json_get(root, "schema_version");

	if (v == NULL)
		return vd_fail(err, VD_SCHEMA_VERSION_MISMATCH,
		    "header.json has no schema_version");
	if (v->type != VD_JINT || !vd_json_int64(v, &h->schema_version))
		return vd_fail(err, VD_SCHEMA_VERSION_MISMATCH,
		    "header.json schema_version is %s, not an integer",
		    vd_jtype_name(v->type));
	h->has_schema_version = 1;
	if (h->schema_version < VD_HEADER_SCHEMA_MIN ||
	    h->schema_version > VD_HEADER_SCHEMA_MAX)
		return vd_fail(err, VD_SCHEMA_VERSION_MISMATCH,
		    "header.json schema_version %lld is outside the supported %d..%d",
		    (long long)h->schema_version, VD_HEADER_SCHEMA_MIN,
		    VD_HEADER_SCHEMA_MAX);
	return VD_OK;
}

static const struct field_spec *field_lookup(vd_str key)
{
	size_t i;

	for (i = 0; i < VD_ARRAY_LEN(fields); i++)
		if (vd_str_eq(key, fields[i].name))
			return &fields[i];
	return NULL;
}

static vd_code parse_strings(const vd_jval *v, const char *what, vd_header *h,
    vd_str **out, size_t *n, const vd_parse_bounds *b, vd_err *err)
{
	const vd_jval *c;

	if (v->type != VD_JARR)
		return INVALID("header.json %s is %s, not an array", what,
		    vd_jtype_name(v->type));
	*out = vd_arena_alloc(&h->doc.arena, (v->count ? v->count : 1) * sizeof(**out));
	if (*out == NULL)
		return no_memory(b, err);
	*n = 0;
	for (c = v->child; c != NULL; c = c->next) {
		if (c->type != VD_JSTR)
			return INVALID("header.json %s holds %s, not a string", what,
			    vd_jtype_name(c->type));
		(*out)[(*n)++] = c->str;
	}
	return VD_OK;
}

static vd_code parse_files(const vd_jval *v, vd_header *h, const vd_parse_bounds *b,
    vd_err *err)
{
	vd_code rc;
	size_t i, j;

	rc = parse_strings(v, "weight_files", h, &h->weight_files,
	    &h->n_weight_files, b, err);
	if (rc != VD_OK)
		return rc;
	if (h->n_weight_files == 0)
		return INVALID("header.json weight_files is empty");
	for (i = 0; i < h->n_weight_files; i++) {
		if (!vd_plain_filename(h->weight_files[i]))
			return INVALID("weight file \"%.100s\" is not a plain file name inside the artifact directory",
			    h->weight_files[i].p);
		for (j = 0; j < i; j++)
			if (vd_str_cmp(h->weight_files[i], h->weight_files[j]) == 0)
				return INVALID("weight file \"%.100s\" is listed twice",
				    h->weight_files[i].p);
	}
	return VD_OK;
}

static vd_code parse_shape(const vd_jval *v, vd_header *h,
    vd_manifest_entry *e, const vd_parse_bounds *b, vd_err *err)
{
	if (v->type != VD_JARR)
		return INVALID("manifest entry \"%.64s\" shape is not an array", e->name.p);
	switch (vd_json_dims(v, &h->doc.arena, &e->shape, &e->rank)) {
	case 0:
		return VD_OK;
	case -1:
		return no_memory(b, err);
	default:
		return INVALID("manifest entry \"%.64s\" shape holds a value that is not a non-negative integer",
		    e->name.p);
	}
}

static vd_code parse_entry(const vd_jval *v, vd_header *h, vd_manifest_entry *e,
    const vd_parse_bounds *b, vd_err *err)
{
	static const char *const names[] = { "name", "group", "dtype" };
	vd_str *dst[] = { &e->name, &e->group, &e->dtype };
	const vd_jval *c;
	size_t i;

	if (v->type != VD_JOBJ)
		return INVALID("header.json tensor_manifest holds %s, not an object",
		    vd_jtype_name(v->type));
	for (c = v->child; c != NULL; c = c->next)
		if (!vd_str_eq(c->key, "name") && !vd_str_eq(c->key, "group") &&
		    !vd_str_eq(c->key, "dtype") && !vd_str_eq(c->key, "shape"))
			return INVALID("manifest entry has an unknown field \"%.64s\"", c->key.p);
	for (i = 0; i < VD_ARRAY_LEN(names); i++) {
		c = vd_json_get(v, names[i]);
		if (c == NULL || c->type != VD_JSTR)
			return INVALID("manifest entry lacks a string \"%s\"", names[i]);
		*dst[i] = c->str;
	}
	if ((c = vd_json_get(v, "shape")) == NULL)
		return INVALID("manifest entry \"%.64s\" lacks \"shape\"", e->name.p);
	return parse_shape(c, h, e, b, err);
}

static vd_code parse_manifest(const vd_jval *v, vd_header *h, const vd_parse_bounds *b,
    vd_err *err)
{
	const vd_jval *c;
	vd_code rc;

	if (v->type != VD_JARR)
		return INVALID("header.json tensor_manifest is %s, not an array",
		    vd_jtype_name(v->type));
	h->manifest = vd_arena_alloc(&h->doc.arena,
	    (v->count ? v->count : 1) * sizeof(*h->manifest));
	if (h->manifest == NULL)
		return no_memory(b, err);
	for (c = v->child; c != NULL; c = c->next) {
		rc = parse_entry(c, h, &h->manifest[h->n_manifest], b, err);
		if (rc != VD_OK)
			return rc;
		h->n_manifest++;
	}
	return VD_OK;
}

static vd_code parse_field(const struct field_spec *f, const vd_jval *v,
    vd_header *h, const vd_parse_bounds *b, vd_err *err)
{
	switch (f->kind) {
	case F_INT:
		return VD_OK;       /* schema_version: checked by the gate */
	case F_NONNEG_INT:
		if (v->type != VD_JINT || !vd_json_int64(v, &h->round_index) ||
		    h->round_index < 0)
			return INVALID("header.json %s is not a non-negative integer", f->name);
		return VD_OK;
	case F_HEX64:
	case F_HEX64_OR_NULL:
		if (f->kind == F_HEX64_OR_NULL && v->type == VD_JNULL)
			return VD_OK;
		if (v->type != VD_JSTR || !vd_is_hex64(v->str))
			return INVALID("header.json %s is not 64 lowercase hex characters", f->name);
		if (f->kind == F_HEX64) {
			h->content_hash = v->str;
		} else {
			h->has_parent = 1;
			h->parent_hash = v->str;
		}
		return VD_OK;
	case F_STRING:
		if (v->type != VD_JSTR)
			return INVALID("header.json %s is %s, not a string", f->name,
			    vd_jtype_name(v->type));
		*(strcmp(f->name, "wmcp_version") == 0 ? &h->wmcp_version : &h->config_hash) = v->str;
		return VD_OK;
	case F_STRINGS:
		return parse_strings(v, f->name, h, &h->param_groups, &h->n_param_groups, b, err);
	case F_MANIFEST:
		return parse_manifest(v, h, b, err);
	case F_FILES:
		return parse_files(v, h, b, err);
	case F_TIMESTAMP:
		if (v->type != VD_JSTR || !vd_rfc3339_utc(v->str))
			return INVALID("header.json created_at is not an RFC 3339 UTC timestamp");
		h->created_at = v->str;
		return VD_OK;
	case F_OBJECT_OR_NULL:
		if (v->type != VD_JNULL && v->type != VD_JOBJ)
			return INVALID("header.json %s is %s, not an object or null", f->name,
			    vd_jtype_name(v->type));
		h->model_arch = v->type == VD_JOBJ ? v : NULL;
		return VD_OK;
	}
	return INVALID("header.json field %s has an unknown kind", f->name);
}

static vd_code check_fields(const vd_jval *root, vd_header *h, const vd_parse_bounds *b,
    vd_err *err)
{
	const struct field_spec *f;
	const vd_jval *c;
	size_t i;
	vd_code rc;

	for (c = root->child; c != NULL; c = c->next) {
		f = field_lookup(c->key);
		if (f == NULL || f->since > h->schema_version)
			return INVALID("header.json has an unknown field \"%.64s\" for schema_version %lld",
			    c->key.p, (long long)h->schema_version);
		if ((rc = parse_field(f, c, h, b, err)) != VD_OK)
			return rc;
	}
	for (i = 0; i < VD_ARRAY_LEN(fields); i++)
		if (fields[i].required && fields[i].since <= h->schema_version &&
		    vd_json_get(root, fields[i].name) == NULL)
			return INVALID("header.json lacks the required field %s", fields[i].name);
	return VD_OK;
}

static void migrate(vd_header *h)
{
	size_t i;

	h->migrated_to = h->schema_version;
	for (i = 0; i < VD_ARRAY_LEN(migrations); i++)
		if (migrations[i].from == h->migrated_to)
			h->migrated_to = migrations[i].to;
	/* Fields a migration adds read as absent (model_arch: null). */
}

/* The document, its manifest counted while it is read (a manifest is one
 * entry per tensor) and every byte it takes charged to the budget. */
static vd_code parse_json(const uint8_t *buf, size_t len, const vd_parse_bounds *b,
    vd_header *out, vd_err *err)
{
	vd_json_bounds jb = { .budget = b->budget, .items_key = "tensor_manifest" };
	char msg[128];

	if (b->max_tensors > 0)
		jb.max_items = b->max_tensors < SIZE_MAX ? (size_t)b->max_tensors : SIZE_MAX;
	switch (vd_json_parse_bounded(buf, len, NULL, &jb, &out->doc, msg, sizeof(msg))) {
	case 0:
		return VD_OK;
	case VD_JSON_EITEMS:
		return INVALID("header.json declares more than %llu tensors (max_tensors)",
		    (unsigned long long)b->max_tensors);
	case VD_JSON_EMEMORY:
		if (b->budget != NULL && b->budget->exhausted)
			return no_memory(b, err);
		break;
	default:
		break;
	}
	return INVALID("header.json is not valid JSON (%s)", msg);
}

vd_code vd_header_parse(const uint8_t *buf, size_t len, const vd_parse_bounds *bounds,
    vd_header *out, vd_err *err)
{
	const vd_parse_bounds *b = bounds != NULL ? bounds : &no_bounds;
	const vd_jval *root;
	int64_t version;
	int has_version;
	vd_code rc;

	memset(out, 0, sizeof(*out));
	if (!vd_utf8_valid(buf, len))
		return INVALID("header.json is not valid UTF-8");
	if ((rc = parse_json(buf, len, b, out, err)) != VD_OK)
		return rc;
	root = out->doc.root;
	if (root->type != VD_JOBJ) {
		rc = INVALID("header.json is %s, not an object", vd_jtype_name(root->type));
		goto fail;
	}
	if ((rc = check_version(root, out, err)) != VD_OK)
		goto fail;
	if ((rc = check_fields(root, out, b, err)) != VD_OK)
		goto fail;
	migrate(out);
	return VD_OK;
fail:
	version = out->schema_version;
	has_version = out->has_schema_version;
	vd_header_free(out);
	out->schema_version = version;
	out->has_schema_version = has_version;
	return rc;
}

void vd_header_free(vd_header *h)
{
	vd_jdoc_free(&h->doc);
	memset(h, 0, sizeof(*h));
}

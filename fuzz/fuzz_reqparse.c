/*
 * Request bodies of POST /verify and POST /roundclose, and the
 * Content-Type test in front of them. The first input byte picks the
 * limits the daemon would pass (nesting depth 2..64, the message buffer
 * size); the rest is the body, handed over without a terminating NUL so
 * that a read one byte past it is caught.
 *
 * An accepted body yields exactly the fields its form defines, each well
 * formed; a refused one yields a sentence that can go into a JSON error
 * body as it is. Both entry points must agree on what a RoundClose is.
 *
 * The same bytes, cut at '&' and '=', are a decoded query string for
 * vd_query_check, and a header field for vd_http_field_ok; each is
 * checked against a plain restatement of its rule.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vd_json.h"
#include "vd_reqparse.h"
#include "vd_utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What the daemon passes (vd_api.c). */
#define ERR_FULL 256
/* Guard bytes past the buffer handed over, to see it is not overrun. */
#define GUARD 16

/* Written out rather than taken from vd_is_hex64, so that a fault there
 * cannot hide the same fault here. */
static int hex64_field(const char *s, size_t cap)
{
	size_t i;

	if (cap < VD_HASH_HEX_LEN + 1)
		abort();
	for (i = 0; i < VD_HASH_HEX_LEN; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[VD_HASH_HEX_LEN] == '\0';
}

static int empty_field(const char *s)
{
	return s[0] == '\0';
}

static void check_roundclose(const vd_roundclose *rc)
{
	if (rc->schema_version < VD_ROUNDCLOSE_SCHEMA_MIN ||
	    rc->schema_version > VD_ROUNDCLOSE_SCHEMA_MAX || rc->round_index < 0 ||
	    !hex64_field(rc->global_model_hash, sizeof(rc->global_model_hash)))
		abort();
}

static void check_verify(const vd_verify_req *r)
{
	size_t plen;

	switch (r->form) {
	case VD_VERIFY_ROUNDCLOSE:
		check_roundclose(&r->rc);
		/* The hash looked up is the one the message commits to. */
		if (memcmp(r->hash, r->rc.global_model_hash, sizeof(r->hash)) != 0 ||
		    !empty_field(r->path) || r->has_expected || !empty_field(r->expected))
			abort();
		break;
	case VD_VERIFY_HASH:
		if (!hex64_field(r->hash, sizeof(r->hash)) || !empty_field(r->path) ||
		    r->has_expected || !empty_field(r->expected))
			abort();
		break;
	case VD_VERIFY_PATH:
		plen = strnlen(r->path, sizeof(r->path));
		/* The path goes to the file system and back into JSON
		 * answers: non-empty, terminated inside its array, UTF-8. */
		if (plen == 0 || plen == sizeof(r->path) ||
		    !vd_utf8_valid((const uint8_t *)r->path, plen) || !empty_field(r->hash))
			abort();
		if (r->has_expected ? !hex64_field(r->expected, sizeof(r->expected))
		    : !empty_field(r->expected))
			abort();
		if (r->has_expected != 0 && r->has_expected != 1)
			abort();
		break;
	default:
		abort();
	}
}

/* A refusal fills the buffer with one non-empty UTF-8 sentence, within
 * errlen, and writes nothing past it. */
static void check_refusal(const char *err, size_t errlen)
{
	size_t n = strnlen(err, errlen), i;

	if (n == errlen || n == 0 || !vd_utf8_valid((const uint8_t *)err, n))
		abort();
	for (i = errlen; i < errlen + GUARD; i++)
		if ((unsigned char)err[i] != 0xa5)
			abort();
}

/* RFC 9110 media type "application/json", case-insensitive, optionally
 * followed by blanks and parameters. Kept apart from the code it checks. */
static int json_media_type(const char *ct)
{
	static const char want[] = "application/json";
	size_t i;

	for (i = 0; want[i] != '\0'; i++) {
		char c = ct[i];

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c != want[i])
			return 0;
	}
	while (ct[i] == ' ' || ct[i] == '\t')
		i++;
	return ct[i] == '\0' || ct[i] == ';';
}

static int ctl_byte(unsigned char c, int tab_ok)
{
	return (c < 0x20 && !(tab_ok && c == '\t')) || c == 0x7f;
}

/* What vd_query_check must accept, restated. */
static int query_ok(const vd_query_arg *a, size_t n)
{
	size_t i, j;

	if (n > VD_REQ_QUERY_MAX_ARGS)
		return 0;
	for (i = 0; i < n; i++) {
		if (a[i].key_len > VD_REQ_QUERY_KEY_MAX)
			return 0;
		for (j = 0; j < a[i].key_len; j++)
			if (ctl_byte((unsigned char)a[i].key[j], 0))
				return 0;
		if (a[i].value != NULL) {
			if (a[i].value_len > VD_REQ_QUERY_VALUE_MAX)
				return 0;
			for (j = 0; j < a[i].value_len; j++)
				if (a[i].value[j] == '\0')
					return 0;
		}
		for (j = 0; j < i; j++)
			if (a[j].key_len == a[i].key_len &&
			    memcmp(a[j].key, a[i].key, a[i].key_len) == 0)
				return 0;
	}
	return 1;
}

/* Cut text like a query string: '&' between parameters, the first '='
 * between name and value (none: no value). */
static void check_query(const uint8_t *p, size_t len, size_t errlen)
{
	vd_query_arg args[VD_REQ_QUERY_MAX_ARGS + 8];
	char err[ERR_FULL + GUARD];
	size_t n = 0, start = 0, i;
	int ok;

	for (i = 0; i <= len && n < VD_ARRAY_LEN(args); i++) {
		const char *s = (const char *)p + start, *eq;
		size_t l;

		if (i < len && p[i] != '&')
			continue;
		l = i - start;
		eq = memchr(s, '=', l);
		args[n].key = s;
		args[n].key_len = eq ? (size_t)(eq - s) : l;
		args[n].value = eq ? eq + 1 : NULL;
		args[n].value_len = eq ? l - args[n].key_len - 1 : 0;
		n++;
		start = i + 1;
	}
	memset(err, 0xa5, sizeof(err));
	ok = vd_query_check(args, n, err, errlen) == 0;
	if (ok != query_ok(args, n))
		abort();
	if (!ok)
		check_refusal(err, errlen);
}

static void check_field(const uint8_t *p, size_t len)
{
	size_t i;
	int ok = 1;

	for (i = 0; i < len; i++)
		if (ctl_byte(p[i], 1))
			ok = 0;
	if (vd_http_field_ok((const char *)p, len) != ok)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[ERR_FULL + GUARD], err2[ERR_FULL + GUARD];
	vd_verify_req vr, vr2;
	vd_roundclose rc, rc2;
	const uint8_t *body;
	size_t len, errlen;
	unsigned depth;
	int v_ok, r_ok;
	char *ct;

	if (size == 0)
		return 0;
	depth = 2 + (data[0] & 0x3f) % 63;
	/* Mostly the daemon's buffer; sometimes a short one, which cuts
	 * messages (and the field names they quote) mid-character. */
	errlen = data[0] & 0x40 ? 16 + (data[0] & 0x3f) : ERR_FULL;
	body = data + 1;
	len = size - 1;

	/* Stale content must not survive into a result. */
	memset(&vr, 0x5a, sizeof(vr));
	memset(&rc, 0x5a, sizeof(rc));
	memset(err, 0xa5, sizeof(err));
	v_ok = vd_parse_verify(body, len, depth, &vr, err, errlen) == 0;
	if (v_ok)
		check_verify(&vr);
	else
		check_refusal(err, errlen);

	memset(err, 0xa5, sizeof(err));
	r_ok = vd_parse_roundclose(body, len, depth, &rc, err, errlen) == 0;
	if (r_ok)
		check_roundclose(&rc);
	else
		check_refusal(err, errlen);

	/* /verify takes a RoundClose as one of its forms: the two entry
	 * points accept the same RoundClose bodies and read them alike. */
	if (r_ok != (v_ok && vr.form == VD_VERIFY_ROUNDCLOSE))
		abort();
	if (r_ok && memcmp(&rc, &vr.rc, sizeof(rc)) != 0)
		abort();

	/* Every accepted body is one flat object, so the smallest depth the
	 * daemon allows accepts it too, with the same result. */
	if (v_ok) {
		memset(&vr2, 0, sizeof(vr2));
		memset(err2, 0xa5, sizeof(err2));
		if (vd_parse_verify(body, len, 2, &vr2, err2, ERR_FULL) != 0 ||
		    memcmp(&vr, &vr2, sizeof(vr)) != 0)
			abort();
	}
	if (r_ok) {
		memset(&rc2, 0, sizeof(rc2));
		if (vd_parse_roundclose(body, len, 2, &rc2, err2, ERR_FULL) != 0 ||
		    memcmp(&rc, &rc2, sizeof(rc)) != 0)
			abort();
	}

	check_query(body, len, errlen);
	check_field(body, len);

	/* The header value reaches the check as a C string. */
	ct = malloc(len + 1);
	if (ct == NULL)
		return 0;
	memcpy(ct, body, len);
	ct[len] = '\0';
	if (!vd_is_json_content_type(ct) != !json_media_type(ct))
		abort();
	free(ct);
	return 0;
}

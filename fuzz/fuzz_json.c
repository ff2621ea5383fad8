/*
 * The strict JSON parser and the canonical writer. Whatever parses and can
 * be written canonically must, once written, parse again and write back to
 * the same bytes in either mode; the ASCII and raw UTF-8 forms must denote
 * the same value. The hashes of artifacts and ledger records rest on this.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vd_json.h"
#include "vd_jsonw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The writer refuses exactly these: a fraction or exponent, or an integer
 * beyond int64. Anything else it refuses is a writer bug. */
static int writable(const vd_jval *v)
{
	const vd_jval *c;
	int64_t i;

	if (v->type == VD_JNUM)
		return 0;
	if (v->type == VD_JINT)
		return vd_json_int64(v, &i);
	for (c = v->child; c != NULL; c = c->next)
		if (!writable(c))
			return 0;
	return 1;
}

static void parse_or_die(const vd_buf *b, vd_jdoc *doc)
{
	char msg[128];

	if (vd_json_parse(b->p, b->len, NULL, doc, msg, sizeof(msg)) < 0)
		abort();        /* canonical output the parser refuses */
}

static void write_or_die(const vd_jval *v, vd_jw_mode mode, vd_buf *b)
{
	vd_buf_init(b);
	if (vd_jw_value(b, v, mode) < 0 || b->oom)
		abort();
}

static void check_bytes(const vd_buf *b, vd_jw_mode mode)
{
	size_t i;

	for (i = 0; i < b->len; i++) {
		/* A raw control character is never canonical; in ASCII mode
		 * nothing outside printable ASCII may appear unescaped. */
		if (b->p[i] < 0x20)
			abort();
		if (mode == VD_JW_ASCII && b->p[i] > 0x7e)
			abort();
	}
}

/* Canonical form of v in mode, checked to be a fixed point. */
static void canonical(const vd_jval *v, vd_jw_mode mode, vd_buf *out)
{
	vd_jdoc again;
	vd_buf second;

	write_or_die(v, mode, out);
	check_bytes(out, mode);
	parse_or_die(out, &again);
	write_or_die(again.root, mode, &second);
	if (second.len != out->len || memcmp(second.p, out->p, out->len) != 0)
		abort();        /* writing is not idempotent */
	vd_buf_free(&second);
	vd_jdoc_free(&again);
}

/* Within a budget and a count the parse accepts what it accepted
 * without, or refuses it for the one or the other; it never spends past
 * the budget, and gives back all it charged. */
static void check_bounded(const uint8_t *data, size_t size, int unbounded)
{
	vd_budget budget;
	vd_json_bounds b = { .budget = &budget, .max_items = 1 + size % 4,
	    .items_key = size % 2 ? "a" : NULL };
	vd_jdoc doc;
	char msg[128];
	int rc;

	vd_budget_init(&budget, 1024 + (size % 32) * 1024);
	rc = vd_json_parse_bounded(data, size, NULL, &b, &doc, msg, sizeof(msg));
	if (rc == 0) {
		if (unbounded != 0 || budget.used == 0)
			abort();
		vd_jdoc_free(&doc);
	} else if (rc != unbounded && rc != VD_JSON_EITEMS &&
	    !(rc == VD_JSON_EMEMORY && budget.exhausted)) {
		abort();
	}
	if (budget.used != 0 || budget.peak > budget.limit)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	vd_jdoc doc, from_utf8;
	vd_buf ascii, utf8, cross;
	char msg[128];
	int rc;

	rc = vd_json_parse(data, size, NULL, &doc, msg, sizeof(msg));
	check_bounded(data, size, rc);
	if (rc < 0) {
		if (memchr(msg, '\0', sizeof(msg)) == NULL || msg[0] == '\0')
			abort();    /* a refusal must say why */
		return 0;
	}
	if (!writable(doc.root)) {
		vd_buf_init(&ascii);
		if (vd_jw_value(&ascii, doc.root, VD_JW_ASCII) == 0)
			abort();    /* printed a number it cannot print exactly */
		vd_buf_free(&ascii);
		vd_jdoc_free(&doc);
		return 0;
	}
	canonical(doc.root, VD_JW_ASCII, &ascii);
	canonical(doc.root, VD_JW_UTF8, &utf8);

	/* Both modes must describe one value: the UTF-8 form, re-read and
	 * escaped, gives the ASCII form. */
	parse_or_die(&utf8, &from_utf8);
	write_or_die(from_utf8.root, VD_JW_ASCII, &cross);
	if (cross.len != ascii.len || memcmp(cross.p, ascii.p, ascii.len) != 0)
		abort();

	vd_buf_free(&cross);
	vd_jdoc_free(&from_utf8);
	vd_buf_free(&utf8);
	vd_buf_free(&ascii);
	vd_jdoc_free(&doc);
	return 0;
}

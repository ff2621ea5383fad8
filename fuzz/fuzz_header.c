/*
 * header.json. An accepted header keeps the promises its readers rely on,
 * and its structural hash frame is itself canonical JSON: compact,
 * sorted, ASCII-only, and a fixed point of the canonical writer.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vd_hash.h"
#include "vd_header.h"
#include "vd_json.h"
#include "vd_jsonw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_header(const vd_header *h)
{
	size_t i;

	if (h->schema_version < VD_HEADER_SCHEMA_MIN ||
	    h->schema_version > VD_HEADER_SCHEMA_MAX ||
	    h->migrated_to < h->schema_version ||
	    h->migrated_to > VD_HEADER_SCHEMA_MAX || h->round_index < 0 ||
	    !vd_is_hex64(h->content_hash) ||
	    (h->has_parent && !vd_is_hex64(h->parent_hash)) ||
	    h->wmcp_version.p == NULL || h->config_hash.p == NULL ||
	    h->n_weight_files == 0 || !vd_rfc3339_utc(h->created_at))
		abort();
	for (i = 0; i < h->n_weight_files; i++)
		if (!vd_plain_filename(h->weight_files[i]))
			abort();
	for (i = 0; i < h->n_manifest; i++)
		if (h->manifest[i].name.p == NULL || h->manifest[i].shape == NULL)
			abort();
}

static void check_frame(const vd_buf *frame)
{
	vd_jdoc doc;
	vd_buf again;
	char msg[128];
	size_t i;

	for (i = 0; i < frame->len; i++)
		if (frame->p[i] < 0x20 || frame->p[i] > 0x7e)
			abort();
	if (vd_json_parse(frame->p, frame->len, NULL, &doc, msg, sizeof(msg)) < 0)
		abort();
	vd_buf_init(&again);
	if (vd_jw_value(&again, doc.root, VD_JW_ASCII) < 0 ||
	    again.len != frame->len || memcmp(again.p, frame->p, frame->len) != 0)
		abort();
	vd_buf_free(&again);
	vd_jdoc_free(&doc);
}

/* Within tight bounds the parse accepts what it accepted without, or
 * refuses it naming a bound; it never spends past the budget, and gives
 * back all it charged. */
static void check_bounded(const uint8_t *data, size_t size, vd_code unbounded)
{
	vd_budget budget;
	vd_parse_bounds b = { 1 + size % 5, 0, &budget };
	vd_err err = { 0 };
	vd_header h;
	vd_code rc;

	vd_budget_init(&budget, 4096 + (size % 64) * 1024);
	rc = vd_header_parse(data, size, &b, &h, &err);
	if (rc == VD_OK) {
		if (unbounded != VD_OK || h.n_manifest > b.max_tensors)
			abort();
		vd_header_free(&h);
	} else if (rc != unbounded && rc != VD_ARTIFACT_INVALID) {
		abort();
	}
	if (budget.used != 0 || budget.peak > budget.limit)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	vd_err err = { 0 };
	vd_header h;
	vd_buf frame;
	vd_code rc;

	rc = vd_header_parse(data, size, NULL, &h, &err);
	check_bounded(data, size, rc);
	if (rc != VD_OK) {
		if (err.code != rc || err.msg[0] == '\0')
			abort();
		return 0;
	}
	check_header(&h);
	vd_buf_init(&frame);
	if (vd_hash_frame(&frame, &h) < 0)
		abort();
	check_frame(&frame);
	vd_buf_free(&frame);
	vd_header_free(&h);
	return 0;
}

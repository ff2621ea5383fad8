/*
 * A whole safetensors file image: the 8-byte length prefix, then the JSON
 * header on the bounds the prefix gives. An accepted header must describe
 * tensors that tile the data buffer exactly, each sized by its shape.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vd_safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_tensors(const vd_st_file *f, const uint8_t *data, size_t size)
{
	uint64_t covered = 0, n;
	volatile uint8_t sink = 0;
	size_t i;
	uint32_t d;

	if (f->data_start > size || f->data_len != size - f->data_start)
		abort();
	for (i = 0; i < f->count; i++) {
		const vd_st_tensor *t = &f->tensors[i];

		if (t->dtype >= VD_DT_COUNT || t->rank > VD_ST_MAX_RANK ||
		    t->begin > t->end || t->end > f->data_len)
			abort();
		/* With a zero dimension the tensor is empty whatever the other
		 * dimensions; otherwise every factor is at least 1, so the
		 * product overflows in any order or in none. */
		n = vd_dtype_size(t->dtype);
		for (d = 0; d < t->rank; d++)
			if (t->shape[d] == 0)
				n = 0;
		for (d = 0; d < t->rank && n != 0; d++)
			if (vd_mul_u64(n, t->shape[d], &n) < 0)
				abort();    /* accepted a size that does not fit */
		if (n != t->end - t->begin)
			abort();
		covered += n;
		/* Touch the tensor's bytes so a range past the image shows up
		 * as an ASan report, not a silent wrong answer. */
		if (n)
			sink ^= data[f->data_start + t->begin] ^
			    data[f->data_start + t->end - 1];
		(void)vd_dtype_name(t->dtype);
		(void)vd_dtype_token(t->dtype);
	}
	if (covered != f->data_len)
		abort();        /* holes or overlaps slipped through */
	(void)sink;
}

/* Within tight bounds the parse accepts what it accepted without, or
 * refuses it naming a bound; it never spends past the budget, and gives
 * back all it charged. */
static void check_bounded(const uint8_t *header, size_t hlen, uint64_t data_len,
    vd_code unbounded)
{
	vd_budget budget;
	vd_parse_bounds b = { 1 + hlen % 7, hlen % 3, &budget };
	vd_err err = { 0 };
	vd_st_file f;
	vd_code rc;

	vd_budget_init(&budget, 4096 + (hlen % 64) * 1024);
	rc = vd_st_parse(header, hlen, data_len, 0, &b, &f, &err);
	if (rc == VD_OK) {
		if (unbounded != VD_OK || f.count + b.tensors_before > b.max_tensors)
			abort();
		vd_st_free(&f);
	} else if (rc != unbounded && rc != VD_ARTIFACT_INVALID) {
		abort();
	} else if (rc == VD_ARTIFACT_INVALID && strstr(err.msg, "(max_") == NULL) {
		abort();        /* a bound's refusal names it */
	}
	if (budget.used != 0 || budget.peak > budget.limit)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	vd_err err = { 0 };
	vd_st_file f;
	uint64_t hlen = 0;
	uint8_t *header;
	vd_code rc;

	if (vd_st_header_len(data, size, 0, &hlen, &err) != VD_OK)
		return 0;
	if (hlen < 2 || hlen > size - VD_ST_PREFIX_LEN)
		abort();        /* the bounds check let a bad length through */

	/* The header in a buffer of its own exact size, so reading past it
	 * is caught instead of landing in the data that follows. */
	header = malloc((size_t)hlen);
	if (header == NULL)
		return 0;
	memcpy(header, data + VD_ST_PREFIX_LEN, (size_t)hlen);
	memset(&err, 0, sizeof(err));
	rc = vd_st_parse(header, (size_t)hlen, size - VD_ST_PREFIX_LEN - hlen, 0,
	    NULL, &f, &err);
	if (rc == VD_OK) {
		if (err.code != VD_OK)
			abort();
		check_tensors(&f, data, size);
		vd_st_free(&f);
	} else if (err.code != rc || err.msg[0] == '\0') {
		abort();        /* a failure must carry its code and a sentence */
	}
	check_bounded(header, (size_t)hlen, size - VD_ST_PREFIX_LEN - hlen, rc);
	free(header);
	return 0;
}

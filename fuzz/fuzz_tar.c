/*
 * A whole tar image, parsed twice: by vd_tar_parse over the image, and
 * step by step with every wanted range copied into a heap buffer of
 * exactly its size, so that a read past what the parser asked for is an
 * ASan report rather than a silent read of the next bytes. The two must
 * agree. An accepted archive must give files with plain, unique, sorted
 * names whose data lies in whole blocks inside the image without
 * overlapping; a refusal must carry its code and a sentence.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vd_tar.h"

#define NOT_TAR "not a valid artifact tar: "

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static vd_code parse_stepwise(const uint8_t *data, size_t size, vd_tar_index *out,
    vd_err *err)
{
	vd_tar_parser *ps = malloc(sizeof(*ps));
	uint64_t off, last = 0;
	size_t len, steps = 0;
	vd_code rc;

	if (ps == NULL)
		abort();
	rc = vd_tar_begin(ps, size, err);
	while (rc == VD_OK && vd_tar_want(ps, &off, &len)) {
		uint8_t *b;
		/* Every want lies inside the image, is bounded, and moves on:
		 * the parse ends after at most one feed per block. */
		if (len == 0 || len > VD_TAR_WANT_MAX || off > size || len > size - off ||
		    (steps > 0 && off <= last) || ++steps > size / VD_TAR_BLOCK)
			abort();
		last = off;
		if ((b = malloc(len)) == NULL)
			abort();
		memcpy(b, data + off, len);
		rc = vd_tar_feed(ps, b, err);
		free(b);
	}
	if (rc == VD_OK)
		rc = vd_tar_finish(ps, out, err);
	else
		vd_tar_parser_free(ps);
	free(ps);
	return rc;
}

static int plain_name(const char *s)
{
	return *s != '\0' && strcmp(s, ".") != 0 && strcmp(s, "..") != 0 &&
	    strchr(s, '/') == NULL;
}

static int by_offset(const void *a, const void *b)
{
	const vd_tar_member *x = *(const vd_tar_member *const *)a;
	const vd_tar_member *y = *(const vd_tar_member *const *)b;

	return (x->offset > y->offset) - (x->offset < y->offset);
}

static void check_index(const vd_tar_index *ix, const uint8_t *data, size_t size)
{
	const vd_tar_member **o;
	volatile uint8_t sink = 0;
	size_t i;

	if (ix->count > VD_TAR_MAX_MEMBERS)
		abort();
	for (i = 0; i < ix->count; i++) {
		const vd_tar_member *m = &ix->members[i];
		if (!plain_name(m->name) || strlen(m->name) > VD_TAR_MAX_NAME)
			abort();
		if (i > 0 && strcmp(ix->members[i - 1].name, m->name) >= 0)
			abort();        /* unsorted or twice */
		if (m->offset % VD_TAR_BLOCK != 0 || m->offset < VD_TAR_BLOCK ||
		    m->offset > size || m->size > size - m->offset)
			abort();
		if (vd_tar_find(ix, m->name) != m)
			abort();
		/* Touch the data's ends: a range past the image is an ASan report. */
		if (m->size > 0)
			sink ^= data[m->offset] ^ data[m->offset + m->size - 1];
	}
	if ((o = malloc((ix->count ? ix->count : 1) * sizeof(*o))) == NULL)
		abort();
	for (i = 0; i < ix->count; i++)
		o[i] = &ix->members[i];
	qsort(o, ix->count, sizeof(*o), by_offset);
	/* A header block at least between two members' data. */
	for (i = 1; i < ix->count; i++)
		if (o[i - 1]->offset + o[i - 1]->size + VD_TAR_BLOCK > o[i]->offset)
			abort();
	free(o);
	(void)sink;
}

static void check_refusal(vd_code rc, const vd_err *err)
{
	if (err->code != rc || err->msg[0] == '\0' ||
	    memchr(err->msg, '\0', sizeof(err->msg)) == NULL)
		abort();
	if (rc == VD_ARTIFACT_INVALID) {
		if (strncmp(err->msg, NOT_TAR, strlen(NOT_TAR)) != 0)
			abort();
	} else if (rc != VD_IO_ERROR || strstr(err->msg, "out of memory") == NULL) {
		abort();        /* only memory may fail otherwise */
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	vd_tar_index a, b;
	vd_err ea = { 0 }, eb = { 0 };
	vd_code ra, rb;
	size_t i;

	ra = vd_tar_parse(data, size, &a, &ea);
	rb = parse_stepwise(data, size, &b, &eb);
	if (ra != rb || strcmp(ea.msg, eb.msg) != 0)
		abort();
	if (ra != VD_OK) {
		check_refusal(ra, &ea);
		return 0;
	}
	if (ea.code != VD_OK || a.count != b.count)
		abort();
	for (i = 0; i < a.count; i++)
		if (strcmp(a.members[i].name, b.members[i].name) != 0 ||
		    a.members[i].offset != b.members[i].offset ||
		    a.members[i].size != b.members[i].size)
			abort();
	check_index(&a, data, size);
	vd_tar_index_free(&a);
	vd_tar_index_free(&b);
	return 0;
}

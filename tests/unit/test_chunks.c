/*
 * The chunk-map blob kept in the state database: it round-trips, and the
 * parser refuses every malformed blob rather than trusting a length.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "vd_chunks.h"

static const uint8_t data[40000];

static vd_chunkmap *sample(void)
{
	vd_mapped_file files[2] = {
		{ "weights-00000-of-00002.safetensors", data, 9000 },
		{ "weights-00001-of-00002.safetensors", data, 4096 },
	};
	vd_chunkmap *m = vd_chunkmap_new(files, 2, 4096);
	size_t f, c;

	assert_non_null(m);
	for (f = 0; f < m->n_files; f++)
		for (c = 0; c < m->files[f].n_chunks; c++)
			memset(m->files[f].digests[c], (int)(f * 16 + c + 1), 32);
	memset(m->meta.header, 0xaa, 32);
	m->meta.has_index = 1;
	memset(m->meta.index, 0xbb, 32);
	return m;
}

static void blob(vd_buf *b)
{
	vd_chunkmap *m = sample();

	vd_buf_init(b);
	assert_int_equal(vd_chunkmap_serialize(m, b), 0);
	vd_chunkmap_free(m);
}

static void test_counts(void **state)
{
	assert_int_equal(vd_chunk_count(0, 4096), 0);
	assert_int_equal(vd_chunk_count(1, 4096), 1);
	assert_int_equal(vd_chunk_count(4096, 4096), 1);
	assert_int_equal(vd_chunk_count(4097, 4096), 2);
	assert_int_equal(vd_chunk_count(9000, 4096), 3);
}

static void test_round_trip(void **state)
{
	vd_chunkmap *m;
	vd_buf b;

	blob(&b);
	m = vd_chunkmap_parse(b.p, b.len);
	assert_non_null(m);
	assert_int_equal(m->chunk_size, 4096);
	assert_int_equal(m->n_files, 2);
	assert_string_equal(m->files[1].name, "weights-00001-of-00002.safetensors");
	assert_int_equal(m->files[0].size, 9000);
	assert_int_equal(m->files[0].n_chunks, 3);
	assert_int_equal(m->files[0].digests[2][0], 3);
	assert_int_equal(m->files[1].digests[0][31], 17);
	assert_int_equal(m->meta.has_index, 1);
	assert_int_equal(m->meta.index[0], 0xbb);
	vd_chunkmap_free(m);
	vd_buf_free(&b);
}

static void test_dup(void **state)
{
	vd_chunkmap *m = sample(), *d = vd_chunkmap_dup(m);

	assert_non_null(d);
	assert_memory_equal(d->files[0].digests, m->files[0].digests, 3 * 32);
	vd_chunkmap_free(d);
	vd_chunkmap_free(m);
}

static void test_every_truncation_refused(void **state)
{
	vd_buf b;
	size_t n;

	blob(&b);
	for (n = 0; n < b.len; n++)
		assert_null(vd_chunkmap_parse(b.p, n));
	vd_buf_free(&b);
}

static void test_malformed_refused(void **state)
{
	vd_buf b;
	uint8_t *p;

	blob(&b);
	p = malloc(b.len + 1);
	memcpy(p, b.p, b.len);
	p[b.len] = 0;
	assert_null(vd_chunkmap_parse(p, b.len + 1));        /* trailing byte */
	p[0] = 'X';
	assert_null(vd_chunkmap_parse(p, b.len));            /* magic */
	memcpy(p, b.p, b.len);
	p[5] = 0; p[6] = 1; p[7] = 0; p[8] = 0;              /* chunk size 256 */
	assert_null(vd_chunkmap_parse(p, b.len));
	memcpy(p, b.p, b.len);
	p[5 + 4 + 32] = 2;                                    /* has_index not 0/1 */
	assert_null(vd_chunkmap_parse(p, b.len));
	memcpy(p, b.p, b.len);
	p[5 + 4 + 32 + 1 + 32] = 0;                           /* no files */
	assert_null(vd_chunkmap_parse(p, b.len));
	memcpy(p, b.p, b.len);
	p[5 + 4 + 32 + 1 + 32 + 4 + 4 + 3] = '\0';            /* NUL in a name */
	assert_null(vd_chunkmap_parse(p, b.len));
	memcpy(p, b.p, b.len);
	/* A size claiming more chunks than the blob holds digests for. */
	p[5 + 4 + 32 + 1 + 32 + 4 + 4 + 34 + 2] = 0x7f;
	assert_null(vd_chunkmap_parse(p, b.len));
	free(p);
	vd_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counts),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_dup),
		cmocka_unit_test(test_every_truncation_refused),
		cmocka_unit_test(test_malformed_refused),
	};

	return cmocka_run_group_tests_name("chunks", tests, NULL, NULL);
}

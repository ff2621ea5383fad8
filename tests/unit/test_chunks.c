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
#include <unistd.h>
#include <sys/mman.h>
#include <cmocka.h>
#include <openssl/sha.h>

#include "vd_artifact.h"
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

/* A scratch file of n patterned bytes, mapped; the caller unmaps. */
static uint8_t *map_scratch(size_t n, uint8_t **copy, int *fd)
{
	char path[] = "/tmp/vd-test-chunks.XXXXXX";
	uint8_t *p;
	size_t i;

	*fd = mkstemp(path);
	assert_true(*fd >= 0);
	unlink(path);
	*copy = malloc(n);
	assert_non_null(*copy);
	for (i = 0; i < n; i++)
		(*copy)[i] = (uint8_t)(i * 131u + (i >> 20));
	assert_int_equal(write(*fd, *copy, n), (ssize_t)n);
	p = mmap(NULL, n, PROT_READ, MAP_SHARED, *fd, 0);
	assert_true(p != MAP_FAILED);
	return p;
}

/* Digested in steps: every length around a step boundary gives the digest
 * of the whole range. */
static void test_digest_range_steps(void **state)
{
	const size_t lens[] = { 1, VD_DIGEST_STEP - 1, VD_DIGEST_STEP, VD_DIGEST_STEP + 1,
		3 * VD_DIGEST_STEP + 4097 };
	uint8_t *p, *copy, got[32], want[32];
	size_t i;
	int fd;

	(void)state;
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		p = map_scratch(lens[i], &copy, &fd);
		assert_int_equal(vd_digest_range(p, lens[i], got), 0);
		SHA256(copy, lens[i], want);
		assert_memory_equal(got, want, 32);
		/* Dropped pages come back from the page cache intact. */
		assert_int_equal(vd_digest_range(p, lens[i], got), 0);
		assert_memory_equal(got, want, 32);
		munmap(p, lens[i]);
		free(copy);
		close(fd);
	}
}

/* A file cut short under the mapping fails the digest instead of killing
 * the process. */
static void test_digest_range_truncated(void **state)
{
	size_t n = 2 * VD_DIGEST_STEP;
	uint8_t *p, *copy, out[32];
	int fd;

	(void)state;
	assert_int_equal(vd_artifact_guard_sigbus(), 0);
	p = map_scratch(n, &copy, &fd);
	assert_int_equal(ftruncate(fd, VD_DIGEST_STEP / 2), 0);
	assert_int_equal(vd_digest_range(p, n, out), -1);
	munmap(p, n);
	free(copy);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counts),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_dup),
		cmocka_unit_test(test_every_truncation_refused),
		cmocka_unit_test(test_malformed_refused),
		cmocka_unit_test(test_digest_range_steps),
		cmocka_unit_test(test_digest_range_truncated),
	};

	return cmocka_run_group_tests_name("chunks", tests, NULL, NULL);
}

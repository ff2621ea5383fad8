/* The load's reader: the reader thread and the waiter fill the jobs
 * between them, each byte once and in place, whatever order the waiter
 * asks in; a file that ends early fails its job and no job before it. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "vd_limits.h"
#include "vd_reader.h"

enum { NJOBS = 3 };

/* A file of n pseudo-random bytes, unlinked; its descriptor. */
static int temp_file(uint8_t *bytes, size_t n, unsigned seed)
{
	char path[] = "/tmp/vd-test-reader.XXXXXX";
	int fd = mkstemp(path);
	size_t i;

	assert_true(fd >= 0);
	unlink(path);
	for (i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		bytes[i] = (uint8_t)(seed >> 16);
	}
	assert_int_equal(write(fd, bytes, n), (ssize_t)n);
	return fd;
}

struct fixture {
	int fd;
	uint8_t *file, *dst[NJOBS];
	vd_read_job jobs[NJOBS];
};

/* Three jobs over one file: lengths of several pieces and the lead, not
 * multiples of a piece; the first with its head already there. */
static void setup(struct fixture *f, size_t short_by)
{
	size_t lens[NJOBS] = { 3 * VD_LOAD_READ_PIECE + 17, VD_LOAD_READ_LEAD + 5 * VD_LOAD_READ_PIECE + 3,
		2 * VD_LOAD_READ_PIECE - 1 };
	size_t total = lens[0] + lens[1] + lens[2], off = 0;
	int i;

	f->file = malloc(total);
	assert_non_null(f->file);
	f->fd = temp_file(f->file, total - short_by, 7);
	for (i = 0; i < NJOBS; i++) {
		f->dst[i] = calloc(1, lens[i]);
		assert_non_null(f->dst[i]);
		f->jobs[i] = (vd_read_job){ f->fd, off, f->dst[i], lens[i], 0 };
		off += lens[i];
	}
	memcpy(f->dst[0], f->file, 100);
	f->jobs[0].have = 100;
}

static void teardown(struct fixture *f)
{
	int i;

	for (i = 0; i < NJOBS; i++)
		free(f->dst[i]);
	free(f->file);
	close(f->fd);
}

static void check_job(const struct fixture *f, int i)
{
	assert_memory_equal(f->dst[i], f->file + f->jobs[i].file_off, f->jobs[i].len);
}

/* Asked for the last job first, whole, at once: the waiter reads what
 * the reader has not taken, and every job ends up whole and right. */
static void test_out_of_order(void **state)
{
	struct fixture f;
	vd_reader *r;
	size_t failed;
	int err, i;

	(void)state;
	setup(&f, 0);
	r = vd_reader_start(f.jobs, NJOBS);
	assert_non_null(r);
	assert_int_equal(vd_reader_wait(r, 2, f.jobs[2].len, &failed, &err), 0);
	assert_int_equal(vd_reader_wait(r, 0, 1, &failed, &err), 0);
	assert_int_equal(vd_reader_wait(r, 1, f.jobs[1].len, &failed, &err), 0);
	assert_int_equal(vd_reader_wait(r, 0, f.jobs[0].len, &failed, &err), 0);
	assert_int_equal(failed, NJOBS);
	vd_reader_stop(r);
	for (i = 0; i < NJOBS; i++)
		check_job(&f, i);
	teardown(&f);
}

/* Asked piece by piece in order, as the hash asks: the same bytes. */
static void test_in_order(void **state)
{
	struct fixture f;
	vd_reader *r;
	size_t failed, want;
	int err, i;

	(void)state;
	setup(&f, 0);
	r = vd_reader_start(f.jobs, NJOBS);
	assert_non_null(r);
	for (i = 0; i < NJOBS; i++)
		for (want = 4096; want < f.jobs[i].len + 4096; want += 100000)
			assert_int_equal(vd_reader_wait(r, (size_t)i,
			    want < f.jobs[i].len ? want : f.jobs[i].len, &failed, &err), 0);
	vd_reader_stop(r);
	for (i = 0; i < NJOBS; i++)
		check_job(&f, i);
	teardown(&f);
}

/* The file ends inside the last job: that job fails, as a short file
 * (err 0), and the jobs before it are whole. */
static void test_short_file(void **state)
{
	struct fixture f;
	vd_reader *r;
	size_t failed = 0;
	int err = -1;

	(void)state;
	setup(&f, 1000);
	r = vd_reader_start(f.jobs, NJOBS);
	assert_non_null(r);
	assert_int_equal(vd_reader_wait(r, 2, f.jobs[2].len, &failed, &err), -1);
	assert_int_equal(failed, 2);
	assert_int_equal(err, 0);
	assert_int_equal(vd_reader_wait(r, 0, f.jobs[0].len, &failed, &err), 0);
	assert_int_equal(vd_reader_wait(r, 1, f.jobs[1].len, &failed, &err), 0);
	vd_reader_stop(r);
	check_job(&f, 0);
	check_job(&f, 1);
	teardown(&f);
}

/* Stopped before anything is asked: the reader, held back by its lead,
 * is woken and joined. */
static void test_stop_early(void **state)
{
	struct fixture f;
	vd_reader *r;

	(void)state;
	setup(&f, 0);
	r = vd_reader_start(f.jobs, NJOBS);
	assert_non_null(r);
	vd_reader_stop(r);
	teardown(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_out_of_order),
		cmocka_unit_test(test_in_order),
		cmocka_unit_test(test_short_file),
		cmocka_unit_test(test_stop_early),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

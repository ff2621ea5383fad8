/*
 * Times vd_load_verified alone, for bench/verify-throughput: the call's
 * wall-clock seconds, the process's CPU seconds during it (the calling
 * thread and the library's reader), and the calling thread's own CPU
 * seconds (the hash, and the pieces it read itself). Freeing the loaded
 * copy afterwards is not counted: it is the caller's, whatever the load
 * does. Not installed.
 *
 *   vd-loadtime [--expect HASH] ARTIFACT
 *
 * Prints "wall CPU THREAD_CPU BYTES CODE" on one line; exits 0 on VD_OK.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "lensemble/verify.h"

static double clock_s(clockid_t id)
{
	struct timespec t;

	clock_gettime(id, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double process_cpu(void)
{
	struct rusage r;

	getrusage(RUSAGE_SELF, &r);
	return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
	    (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

int main(int argc, char **argv)
{
	vd_options opt = { 0 };
	vd_loaded loaded;
	vd_verdict v;
	uint64_t bytes = 0;
	double w0, c0, t0, w, c, t;
	size_t i;
	int a = 1;

	if (argc == 4 && strcmp(argv[1], "--expect") == 0) {
		opt.expected_hash = argv[2];
		a = 3;
	}
	if (argc != a + 1) {
		fprintf(stderr, "usage: vd-loadtime [--expect HASH] ARTIFACT\n");
		return 2;
	}
	w0 = clock_s(CLOCK_MONOTONIC);
	c0 = process_cpu();
	t0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
	vd_load_verified(argv[a], &opt, 0, &loaded, &v);
	w = clock_s(CLOCK_MONOTONIC) - w0;
	c = process_cpu() - c0;
	t = clock_s(CLOCK_THREAD_CPUTIME_ID) - t0;
	for (i = 0; i < loaded.n_files; i++)
		bytes += loaded.files[i].len;
	printf("%.4f %.4f %.4f %llu %s\n", w, c, t, (unsigned long long)bytes, vd_code_name(v.code));
	vd_loaded_free(&loaded);
	return v.code == VD_OK ? 0 : 1;
}

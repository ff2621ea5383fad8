/*
 * What vd_tar hands the verifier, for fuzz/tar_diff.py to hold against
 * what GNU tar and Python's tarfile extract. One archive path per line on
 * standard input, one answer line per path on standard output:
 *
 *   ok N NAME SIZE SHA256 ...   accepted: N files, each its name in hex,
 *                               the size and the SHA-256 of the very
 *                               bytes the verifier would hash
 *   no SENTENCE                 refused, with vd_tar's sentence (control
 *                               characters in it as '?')
 *   unread ERRNO                the file could not be read
 *
 * Names are in hex so that no byte of a name can break the line.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vd_hash.h"
#include "vd_tar.h"
#include "vd_util.h"

/* Larger than any archive the differential fuzzer writes. */
#define TAR_DUMP_MAX_BYTES (64u << 20)

static void put_hex(const void *p, size_t n)
{
	const uint8_t *b = p;
	size_t i;

	if (n == 0)
		fputs("-", stdout);     /* an empty field would merge with the next */
	for (i = 0; i < n; i++)
		printf("%02x", b[i]);
}

/* A sentence quotes member names, which may hold a newline: the answer
 * stays one line, or the answers after it would be taken for others'. */
static void one_line(char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < ' ')
			*s = '?';
}

static void dump_index(const vd_tar_index *ix, const uint8_t *data)
{
	uint8_t d[32];
	size_t i;

	printf("ok %zu", ix->count);
	for (i = 0; i < ix->count; i++) {
		const vd_tar_member *m = &ix->members[i];
		if (vd_sha256(data + m->offset, (size_t)m->size, d) < 0)
			abort();
		putchar(' ');
		put_hex(m->name, strlen(m->name));
		printf(" %llu ", (unsigned long long)m->size);
		put_hex(d, sizeof(d));
	}
	putchar('\n');
}

static void dump(const char *path)
{
	vd_tar_index ix;
	vd_err err = { 0 };
	vd_buf b;
	int rc;

	vd_buf_init(&b);
	if ((rc = vd_read_file(path, TAR_DUMP_MAX_BYTES, &b)) < 0) {
		printf("unread %d\n", -rc);
	} else if (vd_tar_parse(b.p, b.len, &ix, &err) != VD_OK) {
		one_line(err.msg);
		printf("no %s\n", err.msg);
	} else {
		dump_index(&ix, b.p);
		vd_tar_index_free(&ix);
	}
	vd_buf_free(&b);
	fflush(stdout);
}

int main(void)
{
	char line[4096];
	size_t n;

	while (fgets(line, sizeof(line), stdin) != NULL) {
		n = strlen(line);
		if (n > 0 && line[n - 1] == '\n')
			line[--n] = '\0';
		if (n > 0)
			dump(line);
	}
	return 0;
}

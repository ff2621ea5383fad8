/*
 * Tar artifacts: the parser over archives built byte by byte here (valid
 * forms of every header kind GNU tar and Python's tarfile write, and every
 * malformed form, each refused as artifact_invalid with a sentence naming
 * what is wrong), then the verifier over tars of the golden cases, which
 * must give the directory's verdict and hash, by path and by fd, mapped
 * and read into memory.
 */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <cmocka.h>

#include "lensemble/verify.h"
#include "vd_artifact.h"
#include "vd_tar.h"

#define BLK VD_TAR_BLOCK
#define RECORD (20 * BLK)      /* GNU tar's and tarfile's default record */
#define GOLDEN_HASH "4d7ed7dee40f9a70cd8c3601c869bcfbbce35ff92723da1ddd4937b6d8fcc753"
#define PREFIX "not a valid artifact tar: "

/* ---- a tar writer ------------------------------------------------------- */

typedef struct tarw {
	uint8_t *p;
	size_t len, cap;
} tarw;

static uint8_t *tw_grow(tarw *t, size_t n)
{
	uint8_t *at;

	if (t->len + n > t->cap) {
		t->cap = (t->len + n) * 2;
		t->p = realloc(t->p, t->cap);
		assert_non_null(t->p);
	}
	at = t->p + t->len;
	memset(at, 0, n);
	t->len += n;
	return at;
}

/* n bytes, then zeros up to the block. */
static void tw_data(tarw *t, const void *p, size_t n)
{
	size_t padded = (n + BLK - 1) / BLK * BLK;
	uint8_t *at = tw_grow(t, padded);

	if (n > 0)
		memcpy(at, p, n);
}

static void set_octal(uint8_t *f, size_t len, uint64_t v)
{
	char tmp[32];

	snprintf(tmp, sizeof(tmp), "%0*llo", (int)(len - 1), (unsigned long long)v);
	memcpy(f, tmp, len - 1);
	f[len - 1] = '\0';
}

static void set_checksum(uint8_t *h)
{
	unsigned sum = 0;
	char tmp[16];
	int i;

	memset(h + 148, ' ', 8);
	for (i = 0; i < BLK; i++)
		sum += h[i];
	snprintf(tmp, sizeof(tmp), "%06o", sum);
	memcpy(h + 148, tmp, 6);
	h[154] = '\0';
	h[155] = ' ';
}

/* A ustar header (GNU's magic when gnu), checksummed. */
static void make_header(uint8_t *h, const char *name, char type, uint64_t size, int gnu)
{
	size_t n = strlen(name);

	memset(h, 0, BLK);
	memcpy(h, name, n > 100 ? 100 : n);
	set_octal(h + 100, 8, 0644);
	set_octal(h + 108, 8, 1000);
	set_octal(h + 116, 8, 1000);
	set_octal(h + 124, 12, size);
	set_octal(h + 136, 12, 1700000000);
	h[156] = (uint8_t)type;
	memcpy(h + 257, gnu ? "ustar  \0" : "ustar\0" "00", 8);
	memcpy(h + 265, "user", 4);
	memcpy(h + 297, "group", 5);
	set_checksum(h);
}

static void tw_header(tarw *t, const uint8_t *h)
{
	memcpy(tw_grow(t, BLK), h, BLK);
}

static void tw_entry(tarw *t, const char *name, char type, const void *data, size_t n)
{
	uint8_t h[BLK];

	make_header(h, name, type, n, 0);
	tw_header(t, h);
	tw_data(t, data, n);
}

static void tw_file(tarw *t, const char *name, const char *data)
{
	tw_entry(t, name, '0', data, strlen(data));
}

static void tw_dir(tarw *t, const char *name)
{
	tw_entry(t, name, '5', NULL, 0);
}

/* An extended header of type 'x', 'g' or 'L' with n bytes of data. */
static void tw_ext(tarw *t, char type, const void *data, size_t n)
{
	uint8_t h[BLK];

	make_header(h, type == 'L' ? "././@LongLink" : "././@PaxHeader", type, n, type == 'L');
	tw_header(t, h);
	tw_data(t, data, n);
}

/* One pax record "LEN key=value\n", LEN counting itself. */
static size_t pax_record(char *out, size_t cap, const char *key, const char *value)
{
	size_t body = strlen(key) + strlen(value) + 3, len = body + 1;

	while (snprintf(NULL, 0, "%zu", len) + body != len)
		len++;
	snprintf(out, cap, "%zu %s=%s\n", len, key, value);
	return len;
}

static void tw_pax(tarw *t, char type, const char *key, const char *value)
{
	char rec[16384];
	size_t n = pax_record(rec, sizeof(rec), key, value);

	tw_ext(t, type, rec, n);
}

static void tw_long(tarw *t, const char *name)
{
	tw_ext(t, 'L', name, strlen(name) + 1);
}

/* The end marker, padded to a record as GNU tar and tarfile do. */
static void tw_end(tarw *t)
{
	tw_grow(t, 2 * BLK);
	if (t->len % RECORD)
		tw_grow(t, RECORD - t->len % RECORD);
}

static void tw_free(tarw *t)
{
	free(t->p);
	memset(t, 0, sizeof(*t));
}

/* ---- parsing -------------------------------------------------------------- */

/* The incremental parse, each want in a heap buffer of exactly its size
 * (a read past it is caught by the sanitizers): it must agree with
 * vd_tar_parse. */
static vd_code parse_stepwise(const uint8_t *p, size_t n, vd_tar_index *out, vd_err *err)
{
	vd_tar_parser *ps = malloc(sizeof(*ps));
	uint64_t off;
	size_t len;
	vd_code rc;

	assert_non_null(ps);
	rc = vd_tar_begin(ps, n, err);
	while (rc == VD_OK && vd_tar_want(ps, &off, &len)) {
		uint8_t *b = malloc(len);
		assert_non_null(b);
		assert_true(len > 0 && len <= VD_TAR_WANT_MAX && off + len <= n);
		memcpy(b, p + off, len);
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

static vd_code parse(const tarw *t, vd_tar_index *ix, vd_err *err)
{
	vd_tar_index ix2;
	vd_err err2 = { 0 };
	vd_code rc, rc2;
	size_t i;

	memset(err, 0, sizeof(*err));
	rc = vd_tar_parse(t->p, t->len, ix, err);
	rc2 = parse_stepwise(t->p, t->len, &ix2, &err2);
	assert_int_equal(rc, rc2);
	assert_string_equal(err->msg, err2.msg);
	if (rc2 == VD_OK) {
		assert_int_equal(ix->count, ix2.count);
		for (i = 0; i < ix->count; i++) {
			assert_string_equal(ix->members[i].name, ix2.members[i].name);
			assert_int_equal(ix->members[i].offset, ix2.members[i].offset);
			assert_int_equal(ix->members[i].size, ix2.members[i].size);
		}
		vd_tar_index_free(&ix2);
	}
	return rc;
}

static void expect_invalid(tarw *t, const char *needle)
{
	vd_tar_index ix;
	vd_err err;
	vd_code rc = parse(t, &ix, &err);

	print_message("    %s\n", err.msg);
	if (rc == VD_OK)
		vd_tar_index_free(&ix);
	assert_int_equal(rc, VD_ARTIFACT_INVALID);
	assert_int_equal(err.code, VD_ARTIFACT_INVALID);
	assert_int_equal(strncmp(err.msg, PREFIX, strlen(PREFIX)), 0);
	if (strstr(err.msg, needle) == NULL)
		fail_msg("\"%s\" does not say \"%s\"", err.msg, needle);
	tw_free(t);
}

/* The member called name, with this data. */
static void expect_member(const tarw *t, const vd_tar_index *ix, const char *name,
    const char *data)
{
	const vd_tar_member *m = vd_tar_find(ix, name);

	if (m == NULL)
		fail_msg("no member %s", name);
	assert_int_equal(m->offset % BLK, 0);
	assert_int_equal(m->size, strlen(data));
	assert_memory_equal(t->p + m->offset, data, m->size);
}

static void parse_ok(const tarw *t, vd_tar_index *ix)
{
	vd_err err;

	if (parse(t, ix, &err) != VD_OK)
		fail_msg("refused: %s", err.msg);
}

static void test_flat(void **state)
{
	tarw t = { 0 };
	vd_tar_index ix;

	tw_file(&t, "header.json", "{}");
	tw_file(&t, "weights.safetensors", "0123456789");
	tw_file(&t, "README", "");
	tw_end(&t);
	assert_int_equal(t.len, RECORD);
	parse_ok(&t, &ix);
	assert_int_equal(ix.count, 3);
	/* In name order, for the lookup. */
	assert_string_equal(ix.members[0].name, "README");
	assert_string_equal(ix.members[1].name, "header.json");
	assert_string_equal(ix.members[2].name, "weights.safetensors");
	expect_member(&t, &ix, "header.json", "{}");
	expect_member(&t, &ix, "weights.safetensors", "0123456789");
	assert_int_equal(ix.members[1].offset, BLK);
	assert_null(vd_tar_find(&ix, "weights"));
	assert_null(vd_tar_find(&ix, "header.json/"));
	vd_tar_index_free(&ix);
	tw_free(&t);
}

/* tar -C parent -cf x.tar round-00000: the directory's own entry first. */
static void test_one_dir(void **state)
{
	tarw t = { 0 };
	vd_tar_index ix;

	tw_dir(&t, "round-00000/");
	tw_file(&t, "round-00000/header.json", "{\"a\":1}");
	tw_file(&t, "round-00000//weights.safetensors", "w");
	tw_end(&t);
	parse_ok(&t, &ix);
	assert_int_equal(ix.count, 2);
	expect_member(&t, &ix, "header.json", "{\"a\":1}");
	expect_member(&t, &ix, "weights.safetensors", "w");
	vd_tar_index_free(&ix);
	tw_free(&t);

	/* Without the directory's entry, as a list of files writes it. */
	tw_file(&t, "./d/header.json", "h");
	tw_file(&t, "d/./w", "w");
	tw_end(&t);
	parse_ok(&t, &ix);
	expect_member(&t, &ix, "header.json", "h");
	expect_member(&t, &ix, "w", "w");
	vd_tar_index_free(&ix);
	tw_free(&t);
}

/* tar -C dir -cf x.tar . : "./" and "./name". */
static void test_dot_root(void **state)
{
	tarw t = { 0 };
	vd_tar_index ix;

	tw_dir(&t, "./");
	tw_file(&t, "./header.json", "h");
	tw_file(&t, "./weights.safetensors", "ww");
	tw_end(&t);
	parse_ok(&t, &ix);
	assert_int_equal(ix.count, 2);
	expect_member(&t, &ix, "header.json", "h");
	expect_member(&t, &ix, "weights.safetensors", "ww");
	vd_tar_index_free(&ix);
	tw_free(&t);
}

/* pax: a path beyond 100 bytes, a size overriding the header's, and
 * keywords with no bearing on the bytes (mtime, uname) ignored. */
static void test_pax(void **state)
{
	char name[300], rec[1024];
	uint8_t h[BLK];
	tarw t = { 0 };
	vd_tar_index ix;
	size_t n;

	memset(name, 'd', 120);
	strcpy(name + 120, "/header.json");
	tw_ext(&t, 'g', "", 0);             /* an empty global header */
	tw_pax(&t, 'x', "path", name);
	tw_entry(&t, "truncated-name", '0', "hh", 2);
	name[120] = '\0';
	strcat(name, "/w");
	n = pax_record(rec, sizeof(rec), "size", "3");
	n += pax_record(rec + n, sizeof(rec) - n, "mtime", "1796052785.126624931");
	n += pax_record(rec + n, sizeof(rec) - n, "path", name);
	n += pax_record(rec + n, sizeof(rec) - n, "uname", "someone");
	tw_ext(&t, 'x', rec, n);
	make_header(h, name, '0', 0, 0);     /* the header's size is 0 */
	tw_header(&t, h);
	tw_data(&t, "www", 3);
	tw_end(&t);
	parse_ok(&t, &ix);
	assert_int_equal(ix.count, 2);
	expect_member(&t, &ix, "header.json", "hh");
	expect_member(&t, &ix, "w", "www");
	vd_tar_index_free(&ix);
	tw_free(&t);
}

/* A global pax header of metadata, as tarfile writes one given
 * pax_headers, and the keywords GNU tar and libarchive add: taken, and
 * of no effect on names or sizes. */
static void test_pax_global(void **state)
{
	char rec[1024];
	uint8_t h[BLK];
	tarw t = { 0 };
	vd_tar_index ix;
	size_t n;

	n = pax_record(rec, sizeof(rec), "comment", "round 4");
	n += pax_record(rec + n, sizeof(rec) - n, "mtime", "-12.5");
	tw_ext(&t, 'g', rec, n);
	n = pax_record(rec, sizeof(rec), "atime", "1796052785");
	n += pax_record(rec + n, sizeof(rec) - n, "SCHILY.xattr.user.origin", "a=b c");
	n += pax_record(rec + n, sizeof(rec) - n, "uid", "4294967296");
	n += pax_record(rec + n, sizeof(rec) - n, "SCHILY.nlink", "1");
	tw_ext(&t, 'x', rec, n);
	make_header(h, "a", '0', 2, 0);
	tw_header(&t, h);
	tw_data(&t, "aa", 2);
	tw_file(&t, "b", "bbb");
	tw_end(&t);
	parse_ok(&t, &ix);
	expect_member(&t, &ix, "a", "aa");
	expect_member(&t, &ix, "b", "bbb");
	vd_tar_index_free(&ix);
	tw_free(&t);
}

static void test_gnu_long_name(void **state)
{
	char name[300];
	uint8_t h[BLK];
	tarw t = { 0 };
	vd_tar_index ix;

	memset(name, 'r', 150);
	strcpy(name + 150, "/");
	tw_long(&t, name);
	make_header(h, name, '5', 0, 1);
	tw_header(&t, h);
	strcpy(name + 150, "/weights.safetensors");
	tw_long(&t, name);
	make_header(h, name, '0', 4, 1);
	tw_header(&t, h);
	tw_data(&t, "wwww", 4);
	tw_end(&t);
	parse_ok(&t, &ix);
	assert_int_equal(ix.count, 1);
	expect_member(&t, &ix, "weights.safetensors", "wwww");
	vd_tar_index_free(&ix);
	tw_free(&t);
}

/* ustar's prefix field holds the directory part of a long name. */
static void test_ustar_prefix(void **state)
{
	uint8_t h[BLK];
	tarw t = { 0 };
	vd_tar_index ix;

	make_header(h, "header.json", '0', 1, 0);
	memcpy(h + 345, "artifact", 8);
	set_checksum(h);
	tw_header(&t, h);
	tw_data(&t, "h", 1);
	tw_end(&t);
	parse_ok(&t, &ix);
	expect_member(&t, &ix, "header.json", "h");
	vd_tar_index_free(&ix);
	tw_free(&t);
}

/* Numbers: GNU base-256, octal with blanks around it, a full field
 * without a terminator; '7' is a regular file. */
static void test_numbers_and_types(void **state)
{
	uint8_t h[BLK];
	tarw t = { 0 };
	vd_tar_index ix;

	make_header(h, "a", '0', 0, 1);
	memset(h + 124, 0, 12);
	h[124] = 0x80;
	h[135] = 3;
	/* A uid and a negative mtime in base-256, as tarfile's GNU format
	 * writes them, are numbers to both readers. */
	memset(h + 108, 0, 8);
	h[108] = 0x80;
	h[115] = 1;
	memset(h + 136, 0xff, 12);
	set_checksum(h);
	tw_header(&t, h);
	tw_data(&t, "aaa", 3);
	make_header(h, "b", '0', 0, 0);
	memcpy(h + 124, "     2 \0\0\0\0\0", 12);
	set_checksum(h);
	tw_header(&t, h);
	tw_data(&t, "bb", 2);
	make_header(h, "c", '0', 0, 0);
	memcpy(h + 124, "000000000001", 12);
	set_checksum(h);
	tw_header(&t, h);
	tw_data(&t, "c", 1);
	tw_entry(&t, "d", '7', "dddd", 4);
	tw_entry(&t, "e", '\0', "e", 1);
	tw_end(&t);
	parse_ok(&t, &ix);
	assert_int_equal(ix.count, 5);
	expect_member(&t, &ix, "a", "aaa");
	expect_member(&t, &ix, "b", "bb");
	expect_member(&t, &ix, "c", "c");
	expect_member(&t, &ix, "d", "dddd");
	expect_member(&t, &ix, "e", "e");
	vd_tar_index_free(&ix);
	tw_free(&t);
}

/* The end marker alone, and with or without padding after it. */
static void test_end_forms(void **state)
{
	tarw t = { 0 };
	vd_tar_index ix;

	tw_grow(&t, 2 * BLK);
	parse_ok(&t, &ix);
	assert_int_equal(ix.count, 0);
	assert_null(vd_tar_find(&ix, "header.json"));
	vd_tar_index_free(&ix);
	tw_free(&t);

	tw_file(&t, "a", "a");
	tw_grow(&t, 2 * BLK);
	parse_ok(&t, &ix);
	vd_tar_index_free(&ix);
	tw_grow(&t, 200 * BLK);    /* more zeros than one step of the parse */
	parse_ok(&t, &ix);
	assert_int_equal(ix.count, 1);
	vd_tar_index_free(&ix);
	tw_free(&t);
}

/* The most members allowed parse, the names are copied out. */
static void test_member_limit_ok(void **state)
{
	tarw t = { 0 };
	vd_tar_index ix;
	char name[32];
	int i;

	for (i = 0; i < VD_TAR_MAX_MEMBERS; i++) {
		snprintf(name, sizeof(name), "f%05d", i);
		tw_entry(&t, name, '0', NULL, 0);
	}
	tw_end(&t);
	parse_ok(&t, &ix);
	assert_int_equal(ix.count, VD_TAR_MAX_MEMBERS);
	assert_non_null(vd_tar_find(&ix, "f08191"));
	vd_tar_index_free(&ix);
	tw_free(&t);
}

/* ---- malformed archives: artifact_invalid, and why --------------------- */

#define MALFORMED(fn, needle) \
	static void fn##_build(tarw *t); \
	static void fn(void **state) \
	{ \
		tarw t = { 0 }; \
		fn##_build(&t); \
		expect_invalid(&t, needle); \
	} \
	static void fn##_build(tarw *t)

/* A header whose bytes at off are replaced by s (n bytes), re-checksummed. */
static void tw_patched(tarw *t, const char *name, char type, size_t off, const void *s,
    size_t n, const char *data)
{
	uint8_t h[BLK];

	make_header(h, name, type, strlen(data), 0);
	memcpy(h + off, s, n);
	set_checksum(h);
	tw_header(t, h);
	tw_data(t, data, strlen(data));
}

MALFORMED(test_empty_file, "the file is empty")
{
	(void)t;
}

MALFORMED(test_not_whole_blocks, "not a whole number of 512-byte blocks")
{
	tw_file(t, "a", "a");
	tw_end(t);
	t->len -= 100;
}

MALFORMED(test_too_short, "too short for the end marker")
{
	tw_grow(t, BLK);
}

MALFORMED(test_bad_checksum, "bad checksum")
{
	tw_file(t, "header.json", "{}");
	tw_end(t);
	t->p[0] = 'H';
}

MALFORMED(test_checksum_not_octal, "checksum field that is not octal")
{
	tw_file(t, "a", "a");
	tw_end(t);
	memcpy(t->p + 148, "01234x\0 ", 8);
}

MALFORMED(test_not_ustar, "not a ustar, pax or GNU header")
{
	uint8_t h[BLK];

	/* A pre-POSIX (v7) header: no magic. */
	make_header(h, "a", '0', 1, 0);
	memset(h + 257, 0, 8);
	set_checksum(h);
	tw_header(t, h);
	tw_data(t, "a", 1);
	tw_end(t);
}

MALFORMED(test_size_not_octal, "size field that is not a valid octal or base-256 number")
{
	tw_patched(t, "a", '0', 124, "0000000001x\0", 12, "a");
	tw_end(t);
}

MALFORMED(test_size_digit_8, "size field that is not a valid octal or base-256 number")
{
	tw_patched(t, "a", '0', 124, "00000000008\0", 12, "a");
	tw_end(t);
}

MALFORMED(test_size_empty, "size field that is not a valid octal or base-256 number")
{
	tw_patched(t, "a", '0', 124, "\0\0\0\0\0\0\0\0\0\0\0\0", 12, "");
	tw_end(t);
}

MALFORMED(test_size_negative_base256, "size field that is not a valid octal or base-256 number")
{
	static const uint8_t neg[12] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	    0xff, 0xff, 0xff, 0xff, 0xff, 0xfe };

	tw_patched(t, "a", '0', 124, neg, 12, "");
	tw_end(t);
}

MALFORMED(test_size_base256_overflow, "size field that is not a valid octal or base-256 number")
{
	static const uint8_t big[12] = { 0x80, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0 };

	tw_patched(t, "a", '0', 124, big, 12, "");
	tw_end(t);
}

MALFORMED(test_absolute_name, "has an absolute name")
{
	tw_file(t, "/etc/header.json", "{}");
	tw_end(t);
}

MALFORMED(test_dotdot_name, "has a \"..\" component")
{
	tw_file(t, "../header.json", "{}");
	tw_end(t);
}

MALFORMED(test_dotdot_inside, "has a \"..\" component")
{
	tw_file(t, "d/../../x/header.json", "{}");
	tw_end(t);
}

MALFORMED(test_hard_link, "is a hard link")
{
	tw_file(t, "header.json", "{}");
	tw_entry(t, "weights.safetensors", '1', NULL, 0);
	tw_end(t);
}

MALFORMED(test_symlink, "is a symbolic link")
{
	tw_file(t, "header.json", "{}");
	tw_entry(t, "weights.safetensors", '2', NULL, 0);
	tw_end(t);
}

MALFORMED(test_gnu_long_link, "GNU long link name")
{
	tw_ext(t, 'K', "/etc/passwd", 12);
	tw_entry(t, "weights.safetensors", '2', NULL, 0);
	tw_end(t);
}

MALFORMED(test_char_device, "is a character device")
{
	tw_entry(t, "weights.safetensors", '3', NULL, 0);
	tw_end(t);
}

MALFORMED(test_block_device, "is a block device")
{
	tw_entry(t, "weights.safetensors", '4', NULL, 0);
	tw_end(t);
}

MALFORMED(test_fifo, "is a FIFO")
{
	tw_entry(t, "weights.safetensors", '6', NULL, 0);
	tw_end(t);
}

MALFORMED(test_gnu_sparse, "is a sparse file")
{
	tw_entry(t, "weights.safetensors", 'S', "x", 1);
	tw_end(t);
}

MALFORMED(test_pax_sparse, "sparse file (GNU.sparse.major)")
{
	tw_pax(t, 'x', "GNU.sparse.major", "1");
	tw_file(t, "weights.safetensors", "x");
	tw_end(t);
}

MALFORMED(test_pax_global_sparse, "sparse file (GNU.sparse.size)")
{
	tw_pax(t, 'g', "GNU.sparse.size", "100");
	tw_file(t, "weights.safetensors", "x");
	tw_end(t);
}

MALFORMED(test_other_type, "has a type other than file or directory")
{
	tw_entry(t, "volume", 'V', NULL, 0);
	tw_end(t);
}

MALFORMED(test_other_type_binary, "(type 0x01)")
{
	tw_entry(t, "x", '\001', NULL, 0);
	tw_end(t);
}

MALFORMED(test_duplicate, "member \"header.json\" appears twice")
{
	tw_file(t, "header.json", "{}");
	tw_file(t, "weights.safetensors", "w");
	tw_file(t, "header.json", "{\"other\":1}");
	tw_end(t);
}

MALFORMED(test_duplicate_normalised, "member \"d/w\" appears twice")
{
	tw_file(t, "d/w", "1");
	tw_file(t, "./d//./w", "2");
	tw_end(t);
}

MALFORMED(test_duplicate_root, "member \".\" appears twice")
{
	tw_dir(t, "./");
	tw_dir(t, ".");
	tw_file(t, "a", "a");
	tw_end(t);
}

MALFORMED(test_two_top_dirs, "more than one top directory (\"a\" and \"b\")")
{
	tw_file(t, "a/header.json", "{}");
	tw_file(t, "b/weights.safetensors", "w");
	tw_end(t);
}

MALFORMED(test_two_top_dir_entries, "more than one top directory")
{
	tw_dir(t, "a/");
	tw_dir(t, "b/");
	tw_end(t);
}

MALFORMED(test_nested, "\"d/sub/w\" is nested deeper than one directory")
{
	tw_file(t, "d/header.json", "{}");
	tw_file(t, "d/sub/w", "w");
	tw_end(t);
}

MALFORMED(test_nested_dir, "\"d/sub\" is nested deeper")
{
	tw_dir(t, "d/");
	tw_dir(t, "d/sub/");
	tw_file(t, "d/header.json", "{}");
	tw_end(t);
}

MALFORMED(test_mixed_levels, "\"d/w\" is in a directory while files lie at the top level")
{
	tw_file(t, "header.json", "{}");
	tw_file(t, "d/w", "w");
	tw_end(t);
}

MALFORMED(test_subdir_beside_files, "\"sub\" is in a directory while files")
{
	tw_file(t, "header.json", "{}");
	tw_dir(t, "sub/");
	tw_end(t);
}

/* The archive cut inside a member's data. */
MALFORMED(test_data_truncated, "has 1000 bytes of data but the archive ends 512 bytes after its header")
{
	uint8_t h[BLK];

	make_header(h, "weights.safetensors", '0', 1000, 0);
	tw_header(t, h);
	tw_grow(t, BLK);
}

MALFORMED(test_data_past_end, "bytes of data but the archive ends")
{
	uint8_t h[BLK];

	tw_file(t, "header.json", "{}");
	make_header(h, "weights.safetensors", '0', 100000, 0);
	tw_header(t, h);
	tw_end(t);
}

MALFORMED(test_no_end_marker, "without its end marker (two zero blocks)")
{
	tw_file(t, "header.json", "{}");
	tw_file(t, "weights.safetensors", "w");
}

MALFORMED(test_one_zero_block, "ends after one zero block")
{
	tw_file(t, "header.json", "{}");
	tw_grow(t, BLK);
}

MALFORMED(test_zero_block_then_header, "a single zero block at offset 1024 is followed by more headers")
{
	tw_file(t, "header.json", "{}");
	tw_grow(t, BLK);
	tw_file(t, "weights.safetensors", "w");
	tw_end(t);
}

MALFORMED(test_trailing_garbage, "bytes other than zero follow the end marker")
{
	tw_file(t, "header.json", "{}");
	tw_end(t);
	t->p[t->len - 1] = 1;
}

MALFORMED(test_trailing_member, "bytes other than zero follow the end marker")
{
	/* A second archive appended (tar -A would merge them instead). */
	tw_file(t, "header.json", "{}");
	tw_grow(t, 2 * BLK);
	tw_file(t, "weights.safetensors", "w");
	tw_end(t);
}

MALFORMED(test_pax_bad_length, "malformed record")
{
	tw_ext(t, 'x', "99 path=header.json\n", 20);
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_no_newline, "malformed record")
{
	tw_ext(t, 'x', "20 path=header.json!", 20);
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_no_length, "malformed record")
{
	tw_ext(t, 'x', "path=header.json\n", 17);
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_huge_length, "malformed record")
{
	tw_ext(t, 'x', "99999999999999999999999999 path=x\n", 34);
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_trailing_bytes, "malformed record")
{
	tw_ext(t, 'x', "9 size=1\n\0\0", 11);
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_no_keyword, "record without a keyword")
{
	tw_ext(t, 'x', "9 =value\n", 9);
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_no_equals, "record without a keyword")
{
	tw_ext(t, 'x', "9 abcdef\n", 9);
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_path_too_long, "has a path of 4097 bytes, above the limit of 4096")
{
	static char name[VD_TAR_MAX_NAME + 2];

	memset(name, 'a', VD_TAR_MAX_NAME + 1);
	tw_pax(t, 'x', "path", name);
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_path_nul, "has a NUL byte in its name")
{
	tw_ext(t, 'x', "20 path=head\0r.json\n", 20);
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_size_not_decimal, "has a size that is not a decimal number that fits")
{
	tw_pax(t, 'x', "size", "0x10");
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_size_overflow, "has a size that is not a decimal number that fits")
{
	tw_pax(t, 'x', "size", "18446744073709551616");
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_size_past_end, "bytes of data but the archive ends")
{
	tw_pax(t, 'x', "size", "18446744073709551615");
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_too_big, "above the limit of 65536")
{
	uint8_t h[BLK];

	make_header(h, "././@PaxHeader", 'x', VD_TAR_MAX_EXT + 1, 0);
	tw_header(t, h);
	tw_grow(t, VD_TAR_MAX_EXT + BLK);
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_ext_past_end, "runs past the end of the archive")
{
	uint8_t h[BLK];

	make_header(h, "././@PaxHeader", 'x', 4000, 0);
	tw_header(t, h);
	tw_grow(t, 2 * BLK);
}

MALFORMED(test_two_pax_in_a_row, "two pax extended headers in a row at offset 1024")
{
	tw_pax(t, 'x', "path", "a");
	tw_pax(t, 'x', "path", "b");
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_two_long_names, "two GNU long names in a row")
{
	tw_long(t, "a");
	tw_long(t, "b");
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_and_long_name, "has both a pax path and a GNU long name")
{
	tw_pax(t, 'x', "path", "a");
	tw_long(t, "b");
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_then_end, "describes no member")
{
	tw_file(t, "header.json", "{}");
	tw_pax(t, 'x', "path", "a");
	tw_end(t);
}

MALFORMED(test_long_name_then_end, "describes no member")
{
	tw_long(t, "header.json");
	tw_end(t);
}

MALFORMED(test_long_name_empty, "the GNU long name at offset 0 is empty")
{
	tw_ext(t, 'L', "\0\0", 2);
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_long_name_too_long, "above the limit of 4097")
{
	static char name[VD_TAR_MAX_NAME + 2];

	memset(name, 'a', VD_TAR_MAX_NAME + 1);
	tw_long(t, name);
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_dir_with_data, "directory member \"d/\" has 3 bytes of data")
{
	tw_entry(t, "d/", '5', "abc", 3);
	tw_end(t);
}

MALFORMED(test_file_with_slash, "member \"header.json\" ends in '/' but is not a directory")
{
	tw_file(t, "header.json/", "{}");
	tw_end(t);
}

MALFORMED(test_file_named_dot, "names no file")
{
	tw_file(t, ".", "x");
	tw_end(t);
}

MALFORMED(test_empty_name, "a member has an empty name")
{
	tw_file(t, "", "x");
	tw_end(t);
}

MALFORMED(test_too_many_members, "more than 8192 members")
{
	char name[32];
	int i;

	for (i = 0; i <= VD_TAR_MAX_MEMBERS; i++) {
		snprintf(name, sizeof(name), "f%05d", i);
		tw_entry(t, name, '0', NULL, 0);
	}
	tw_end(t);
}

MALFORMED(test_names_too_long_together, "member names add up to more than 1048576 bytes")
{
	static char name[VD_TAR_MAX_NAME + 1];
	int i;

	memset(name, 'n', VD_TAR_MAX_NAME - 8);
	for (i = 0; i < 300; i++) {
		snprintf(name + VD_TAR_MAX_NAME - 8, 9, "%08d", i);
		tw_pax(t, 'x', "path", name);
		tw_file(t, "x", "");
	}
	tw_end(t);
}

/* A compressed tar is not a tar. */
MALFORMED(test_gzip, "checksum field that is not octal")
{
	static const uint8_t gz[BLK * 2] = { 0x1f, 0x8b, 0x08, 0x00 };

	memcpy(tw_grow(t, sizeof(gz)), gz, sizeof(gz));
	tw_grow(t, RECORD - sizeof(gz));
}

/* ---- shapes GNU tar and Python's tarfile read two ways ------------------ */

/* A genuine artifact, then a member whose data is a second weight file:
 * to tarfile an empty size is 0, so it reads the second one. */
MALFORMED(test_pax_size_empty, "has an empty size record")
{
	tarw inner = { 0 };

	tw_file(t, "header.json", "{}");
	tw_file(t, "weights.safetensors", "genuine");
	tw_ext(t, 'x', "8 size=\n", 8);
	tw_file(&inner, "weights.safetensors", "changed");
	tw_entry(t, "notes.txt", '0', inner.p, inner.len);
	tw_free(&inner);
	tw_end(t);
}

/* The same with the length one too long, the record's last byte a NUL:
 * tarfile reads a size of "\n", which is 0 to it as well. */
MALFORMED(test_pax_size_empty_long, "malformed record")
{
	tw_file(t, "header.json", "{}");
	tw_ext(t, 'x', "9 size=\n", 9);
	tw_file(t, "notes.txt", "w");
	tw_end(t);
}

MALFORMED(test_pax_path_empty, "has an empty path record")
{
	tw_ext(t, 'x', "8 path=\n", 8);
	tw_file(t, "header.json", "{}");
	tw_end(t);
}

MALFORMED(test_pax_mtime_empty, "has an empty mtime record")
{
	tw_ext(t, 'x', "10 mtime=\n", 10);
	tw_file(t, "header.json", "{}");
	tw_end(t);
}

MALFORMED(test_pax_global_size_empty, "has an empty size record")
{
	tw_ext(t, 'g', "8 size=\n", 8);
	tw_file(t, "header.json", "{}");
	tw_end(t);
}

/* tarfile applies a global size or path only to members with a pax header
 * of their own, GNU tar to all. */
MALFORMED(test_pax_global_size, "the global pax header at offset 0 sets size")
{
	uint8_t h[BLK];

	tw_pax(t, 'g', "size", "2");
	make_header(h, "a", '0', 0, 0);
	tw_header(t, h);
	tw_data(t, "aa", 2);
	tw_end(t);
}

MALFORMED(test_pax_global_path, "the global pax header at offset 0 sets path")
{
	tw_pax(t, 'g', "path", "header.json");
	tw_file(t, "x", "{}");
	tw_end(t);
}

MALFORMED(test_pax_global_between, "a global pax header at offset 1024 comes between")
{
	tw_pax(t, 'x', "path", "header.json");
	tw_pax(t, 'g', "comment", "c");
	tw_file(t, "x", "{}");
	tw_end(t);
}

/* tarfile reads a global header with the header after it, and fails
 * when that is the end marker. */
MALFORMED(test_pax_global_then_end, "the extended header before offset 2048 describes no member")
{
	tw_file(t, "header.json", "{}");
	tw_pax(t, 'g', "comment", "c");
	tw_end(t);
}

MALFORMED(test_pax_size_leading_zero, "has a size that is not a decimal number")
{
	tw_pax(t, 'x', "size", "01");
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_size_sign, "has a size that is not a decimal number")
{
	tw_pax(t, 'x', "size", "+1");
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_size_blank, "has a size that is not a decimal number")
{
	tw_pax(t, 'x', "size", " 1");
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_size_twice, "has two size records")
{
	tw_ext(t, 'x', "9 size=1\n9 size=0\n", 18);
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_path_twice, "has two path records")
{
	tw_ext(t, 'x', "11 path=ab\n10 path=a\n", 21);
	tw_file(t, "x", "x");
	tw_end(t);
}

/* GNU tar reads these lengths; tarfile does or does not, or splits the
 * records elsewhere. */
MALFORMED(test_pax_length_leading_zero, "malformed record")
{
	tw_ext(t, 'x', "011 size=1\n", 11);
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_length_zero, "malformed record")
{
	tw_ext(t, 'x', "0 size=1\n", 9);
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_blank_before_length, "malformed record")
{
	tw_ext(t, 'x', " 10 size=1\n", 11);
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_two_blanks, "keyword with a blank or a control character")
{
	tw_ext(t, 'x', "11  size=1\n", 11);
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_key_control, "keyword with a blank or a control character")
{
	tw_ext(t, 'x', "11 \001size=1\n", 11);
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_length_short, "malformed record")
{
	tw_ext(t, 'x', "8 size=1\n", 9);
	tw_file(t, "x", "x");
	tw_end(t);
}

/* The records fill the header's size; tarfile reads on to the block's
 * end, so a record hidden in the padding would be its alone. */
MALFORMED(test_pax_record_in_padding, "bytes other than zero after its data")
{
	uint8_t h[BLK];
	uint8_t *at;

	make_header(h, "././@PaxHeader", 'x', 9, 0);
	tw_header(t, h);
	at = tw_grow(t, BLK);
	memcpy(at, "9 size=1\n9 size=0\n", 18);
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_linkpath, "has keyword \"linkpath\"")
{
	tw_pax(t, 'x', "linkpath", "weights.safetensors");
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_hdrcharset, "has keyword \"hdrcharset\"")
{
	tw_pax(t, 'x', "hdrcharset", "BINARY");
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_unknown_keyword, "has keyword \"SCHILY.realsize\"")
{
	tw_pax(t, 'x', "SCHILY.realsize", "10");
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_volume_keyword, "has keyword \"GNU.volume.offset\"")
{
	tw_pax(t, 'g', "GNU.volume.offset", "10");
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_bad_mtime, "has a mtime that is not a decimal time")
{
	tw_pax(t, 'x', "mtime", "1e9");
	tw_file(t, "x", "x");
	tw_end(t);
}

MALFORMED(test_pax_bad_uid, "has a uid that is not a decimal number")
{
	tw_pax(t, 'x', "uid", "-1");
	tw_file(t, "x", "x");
	tw_end(t);
}

/* tarfile reads a long name to its first NUL in the whole block, GNU tar
 * within the header's size: only a name and one NUL read alike. */
MALFORMED(test_long_name_no_nul, "is not a name ended by its only NUL byte")
{
	tw_ext(t, 'L', "header.json", 11);
	tw_file(t, "x", "{}");
	tw_end(t);
}

MALFORMED(test_long_name_two_names, "is not a name ended by its only NUL byte")
{
	tw_ext(t, 'L', "header.json\0x\0", 14);
	tw_file(t, "x", "{}");
	tw_end(t);
}

MALFORMED(test_long_name_padding, "bytes other than zero after its data")
{
	uint8_t h[BLK];
	uint8_t *at;

	make_header(h, "././@LongLink", 'L', 2, 1);
	tw_header(t, h);
	at = tw_grow(t, BLK);
	memcpy(at, "a\0header.json", 13);
	tw_file(t, "x", "{}");
	tw_end(t);
}

/* tarfile makes a type-NUL member whose name field ends in '/' a
 * directory, and does not skip its data. */
MALFORMED(test_long_name_over_dir_field, "is not a directory but its header's name field ends in '/'")
{
	tw_long(t, "header.json");
	tw_entry(t, "d/", '\0', "{}", 2);
	tw_end(t);
}

MALFORMED(test_pax_path_over_dir_field, "is not a directory but its header's name field ends in '/'")
{
	tw_pax(t, 'x', "path", "header.json");
	tw_entry(t, "d/", '\0', "{}", 2);
	tw_end(t);
}

MALFORMED(test_file_dot_component, "ends in a \".\" component")
{
	tw_file(t, "header.json/.", "{}");
	tw_end(t);
}

/* GNU headers keep times where ustar has its prefix; tarfile reads a
 * prefix there anyway. */
MALFORMED(test_gnu_prefix_bytes, "has bytes where ustar keeps a name prefix")
{
	uint8_t h[BLK];

	make_header(h, "header.json", '0', 1, 1);
	memcpy(h + 345, "12345670", 8);
	set_checksum(h);
	tw_header(t, h);
	tw_data(t, "h", 1);
	tw_end(t);
}

/* tarfile ends the archive at a header with a field that is no number. */
MALFORMED(test_mode_not_number, "at offset 1024 has a mode field that GNU tar or Python's tarfile cannot read")
{
	tw_file(t, "header.json", "{}");
	tw_patched(t, "weights.safetensors", '0', 100, "0000x44\0", 8, "w");
	tw_end(t);
}

MALFORMED(test_mtime_blank, "has a mtime field that GNU tar or Python's tarfile cannot read")
{
	tw_patched(t, "header.json", '0', 136, "            ", 12, "{}");
	tw_end(t);
}

MALFORMED(test_devminor_not_number, "has a devminor field that GNU tar or Python's tarfile cannot read")
{
	tw_patched(t, "header.json", '0', 337, "-1\0\0\0\0\0\0", 8, "{}");
	tw_end(t);
}

/* GNU tar refuses a negative owner; tarfile takes it. */
MALFORMED(test_gid_negative, "has a gid field that GNU tar or Python's tarfile cannot read")
{
	static const uint8_t minus_one[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

	tw_patched(t, "header.json", '0', 116, minus_one, 8, "{}");
	tw_end(t);
}

MALFORMED(test_ext_header_uid, "the header at offset 0 has a uid field that GNU tar or Python's tarfile cannot read")
{
	uint8_t h[BLK];

	make_header(h, "././@PaxHeader", 'x', 0, 0);
	memcpy(h + 108, "uid\0\0\0\0\0", 8);
	set_checksum(h);
	tw_header(t, h);
	tw_file(t, "x", "x");
	tw_end(t);
}

/* A pax size replaces the header's, which must still be a number. */
MALFORMED(test_size_field_under_pax, "size field that is not a valid octal or base-256 number")
{
	tw_pax(t, 'x', "size", "1");
	tw_patched(t, "x", '0', 124, "abc\0\0\0\0\0\0\0\0\0", 12, "x");
	tw_end(t);
}

/* ---- the verifier over tars --------------------------------------------- */

static const char *datadir(void)
{
	const char *s = getenv("top_srcdir");
	static char path[4096];

	snprintf(path, sizeof(path), "%s/tests/data", s ? s : ".");
	return path;
}

static char tmpdir[4096];

static int setup_tmp(void **state)
{
	const char *t = getenv("TMPDIR");

	snprintf(tmpdir, sizeof(tmpdir), "%s/vd-test-tar.XXXXXX", t && *t ? t : "/tmp");
	return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int teardown_tmp(void **state)
{
	char path[4200];
	DIR *d = opendir(tmpdir);
	struct dirent *e;

	while (d != NULL && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", tmpdir, e->d_name);
		unlink(path);
	}
	if (d != NULL)
		closedir(d);
	return rmdir(tmpdir);
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The regular files of a golden case, into t under prefix ("" or "dir/"). */
/* The files of dir, named prefix + name, without the end marker. */
static void tar_files(tarw *t, const char *dir, const char *prefix)
{
	char *names[64], path[4200], member[512];
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0, i, len;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.' && n < 64)
			names[n++] = strdup(e->d_name);
	closedir(d);
	qsort(names, n, sizeof(*names), name_cmp);
	if (*prefix)
		tw_dir(t, prefix);
	for (i = 0; i < n; i++) {
		char *data;
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		data = slurp(path, &len);
		snprintf(member, sizeof(member), "%s%s", prefix, names[i]);
		tw_entry(t, member, '0', data, len);
		free(data);
		free(names[i]);
	}
}

static void tar_dir(tarw *t, const char *dir, const char *prefix)
{
	tar_files(t, dir, prefix);
	tw_end(t);
}

static void write_file(const char *path, const tarw *t)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	if (t->len > 0)
		assert_int_equal(fwrite(t->p, 1, t->len, f), t->len);
	assert_int_equal(fclose(f), 0);
}

/* A tar of a golden case, at top level or in one directory. */
static void golden_tar(const char *name, int in_dir, char *out, size_t n)
{
	char dir[4200], prefix[256];
	tarw t = { 0 };

	snprintf(dir, sizeof(dir), "%s/golden-cases/%s", datadir(), name);
	snprintf(prefix, sizeof(prefix), "%s/", name);
	tar_dir(&t, dir, in_dir ? prefix : "");
	snprintf(out, n, "%s/%s%s.tar", tmpdir, name, in_dir ? "-dir" : "");
	write_file(out, &t);
	tw_free(&t);
}

static void same_verdict(const vd_verdict *a, const vd_verdict *b)
{
	assert_int_equal(a->code, b->code);
	assert_string_equal(a->detail, b->detail);
	assert_string_equal(a->content_hash, b->content_hash);
	assert_string_equal(a->claimed_hash, b->claimed_hash);
	assert_int_equal(a->tensors, b->tensors);
	assert_int_equal(a->bytes, b->bytes);
	assert_int_equal(a->round_index, b->round_index);
}

static const char *const golden[] = {
	"round-00000", "round-00000-sharded", "round-00001", "round-00002",
	"scalar-and-empty", "schema-v1", "tamper-weight-byte", "tamper-header-hash",
	"pickle-payload", "schema-too-new", "action-head", "header-missing-field",
	"weight-file-escapes",
};

/* Every golden case: the tar's verdict is the directory's, mapped and
 * read into memory alike. */
static void test_golden_tars(void **state)
{
	char dir[4200], tar[4200];
	vd_verdict vd, vt, vl;
	vd_loaded loaded;
	size_t i;
	int in_dir;

	for (i = 0; i < VD_ARRAY_LEN(golden); i++) {
		snprintf(dir, sizeof(dir), "%s/golden-cases/%s", datadir(), golden[i]);
		vd_verify_artifact(dir, NULL, &vd);
		for (in_dir = 0; in_dir < 2; in_dir++) {
			golden_tar(golden[i], in_dir, tar, sizeof(tar));
			vd_verify_artifact(tar, NULL, &vt);
			print_message("%-22s %s %-22s %s\n", golden[i], in_dir ? "dir" : "top",
			    vd_code_name(vt.code), vt.detail);
			same_verdict(&vd, &vt);
			vd_load_verified(tar, NULL, 0, &loaded, &vl);
			same_verdict(&vd, &vl);
			if (vl.code == VD_OK) {
				assert_int_equal(loaded.n_tensors, vl.tensors);
				assert_ptr_equal(vd_loaded_tensor(&loaded, loaded.tensors[0].name),
				    &loaded.tensors[0]);
				vd_loaded_free(&loaded);
			}
		}
	}
}

/* The fd entries: the public one, and the daemon's with the identities. */
static void test_fd_entries(void **state)
{
	char tar[4200];
	vd_file_ids ids = { 0 };
	vd_options opt = { 0 };
	vd_loaded loaded;
	vd_verdict v;
	struct stat st;
	int fd;

	golden_tar("round-00001", 1, tar, sizeof(tar));
	fd = open(tar, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(vd_verify_artifact_at(fd, NULL, &v), VD_OK);
	assert_string_equal(v.content_hash,
	    "a9cad4759c6eb63aa18ec57db6cffbcf6fe9614908908057194fc7077fe58c5d");
	assert_int_equal(vd_load_verified_at(fd, NULL, 0, &loaded, &v), VD_OK);
	assert_int_equal(loaded.n_files, 1);
	assert_string_equal(loaded.files[0].name, "weights.safetensors");
	vd_loaded_free(&loaded);
	opt.flags = VD_VERIFY_KEEP_CACHE_CLEAN;
	opt.expected_hash = "a9cad4759c6eb63aa18ec57db6cffbcf6fe9614908908057194fc7077fe58c5d";
	assert_int_equal(vd_artifact_verify_tar_ex(fd, &opt, NULL, &v, &ids, NULL), VD_OK);
	assert_int_equal(ids.count, 1);
	assert_string_equal(ids.ids[0].name, ".");
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(ids.ids[0].ino, st.st_ino);
	assert_int_equal(ids.ids[0].size, st.st_size);
	vd_file_ids_free(&ids);
	opt.expected_hash = GOLDEN_HASH;
	assert_int_equal(vd_verify_artifact_at(fd, &opt, &v), VD_CHECKPOINT_INTEGRITY);
	assert_non_null(strstr(v.detail, "committed"));
	/* The fd is the caller's: still open. */
	assert_int_equal(fstat(fd, &st), 0);
	close(fd);
}

static void test_read_header(void **state)
{
	char tar[4200];
	vd_header h;
	vd_file_id id;
	vd_err err = { 0 };
	struct stat st;
	int fd;

	golden_tar("round-00002", 0, tar, sizeof(tar));
	fd = open(tar, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(vd_artifact_read_header_tar(fd, NULL, &h, &id, &err), VD_OK);
	assert_int_equal(h.round_index, 2);
	assert_int_equal(strncmp(h.content_hash.p, "f0c0a46e", 8), 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(id.ino, st.st_ino);
	vd_header_free(&h);
	close(fd);

	/* A broken archive says why. */
	golden_tar("round-00002", 0, tar, sizeof(tar));
	assert_int_equal(truncate(tar, 5 * BLK), 0);
	fd = open(tar, O_RDONLY);
	assert_int_equal(vd_artifact_read_header_tar(fd, NULL, &h, &id, &err), VD_ARTIFACT_INVALID);
	assert_non_null(strstr(err.msg, PREFIX));
	close(fd);
}

/* What the directory verifier says of a missing file, the tar says too. */
static void test_missing_members(void **state)
{
	char dir[4200], path[4200], tar[4200];
	tarw t = { 0 };
	vd_verdict v;
	size_t len;
	char *data;

	snprintf(dir, sizeof(dir), "%s/golden-cases/round-00000", datadir());
	snprintf(path, sizeof(path), "%s/header.json", dir);
	data = slurp(path, &len);
	tw_entry(&t, "header.json", '0', data, len);
	tw_end(&t);
	snprintf(tar, sizeof(tar), "%s/no-weights.tar", tmpdir);
	write_file(tar, &t);
	tw_free(&t);
	free(data);
	assert_int_equal(vd_verify_artifact(tar, NULL, &v), VD_CHECKPOINT_INTEGRITY);
	assert_string_equal(v.detail, "weights.safetensors is missing");
	assert_string_equal(v.claimed_hash, GOLDEN_HASH);

	tw_file(&t, "README", "nothing here");
	tw_end(&t);
	write_file(tar, &t);
	tw_free(&t);
	assert_int_equal(vd_verify_artifact(tar, NULL, &v), VD_ARTIFACT_INVALID);
	assert_string_equal(v.detail, "header.json is missing");
}

/* A member the verifier does not read is refused, even one GNU tar and
 * tarfile both read alike: extracted, its bytes would be unverified. Its
 * directory would verify, extra file and all. */
static void test_extra_member(void **state)
{
	char dir[4200], tar[4200];
	tarw t = { 0 }, inner = { 0 };
	vd_loaded loaded;
	vd_verdict v;

	snprintf(dir, sizeof(dir), "%s/golden-cases/round-00000", datadir());
	assert_int_equal(vd_verify_artifact(dir, NULL, &v), VD_OK);
	tar_files(&t, dir, "");
	tw_file(&inner, "weights.safetensors", "not the weights");
	tw_entry(&t, "notes.txt", '0', inner.p, inner.len);
	tw_end(&t);
	snprintf(tar, sizeof(tar), "%s/extra.tar", tmpdir);
	write_file(tar, &t);
	assert_int_equal(vd_verify_artifact(tar, NULL, &v), VD_ARTIFACT_INVALID);
	assert_string_equal(v.detail, PREFIX "member \"notes.txt\" is neither header.json, "
	    "weights.index.json nor a weight file header.json lists");
	assert_string_equal(v.content_hash, "");
	assert_int_equal(vd_load_verified(tar, NULL, 0, &loaded, &v), VD_ARTIFACT_INVALID);
	assert_null(loaded.files);
	tw_free(&inner);
	tw_free(&t);

	/* The index is read, so it may be there. */
	tar_files(&t, dir, "");
	tw_file(&t, "weights.index.json", "{\"metadata\": {}, \"weight_map\": {"
	    "\"encoder.norm.bias\": \"weights.safetensors\", "
	    "\"encoder.patch_embed.weight\": \"weights.safetensors\", "
	    "\"predictor.proj.weight\": \"weights.safetensors\"}}");
	tw_end(&t);
	write_file(tar, &t);
	tw_free(&t);
	assert_int_equal(vd_verify_artifact(tar, NULL, &v), VD_OK);
	assert_string_equal(v.content_hash, GOLDEN_HASH);
}

/* An archive the parser refuses is refused by every entry, with its
 * sentence. */
static void test_invalid_through_api(void **state)
{
	char tar[4200];
	tarw t = { 0 };
	vd_loaded loaded;
	vd_verdict v;

	tw_file(&t, "header.json", "{}");
	tw_entry(&t, "weights.safetensors", '2', NULL, 0);
	tw_end(&t);
	snprintf(tar, sizeof(tar), "%s/link.tar", tmpdir);
	write_file(tar, &t);
	tw_free(&t);
	assert_int_equal(vd_verify_artifact(tar, NULL, &v), VD_ARTIFACT_INVALID);
	assert_string_equal(v.detail, PREFIX "member \"weights.safetensors\" is a symbolic link "
	    "(type '2'); an artifact tar holds only regular files and directories");
	assert_string_equal(v.content_hash, "");
	assert_int_equal(v.have_header, 0);
	assert_int_equal(vd_load_verified(tar, NULL, 0, &loaded, &v), VD_ARTIFACT_INVALID);
	assert_null(loaded.files);

	snprintf(tar, sizeof(tar), "%s/empty.tar", tmpdir);
	write_file(tar, &t);
	assert_int_equal(vd_verify_artifact(tar, NULL, &v), VD_ARTIFACT_INVALID);
	assert_string_equal(v.detail, PREFIX "the file is empty");
	assert_int_equal(vd_load_verified(tar, NULL, 0, &loaded, &v), VD_ARTIFACT_INVALID);

	snprintf(tar, sizeof(tar), "%s/missing.tar", tmpdir);
	assert_int_equal(vd_verify_artifact(tar, NULL, &v), VD_ARTIFACT_INVALID);
	assert_non_null(strstr(v.detail, "cannot open the artifact"));

	snprintf(tar, sizeof(tar), "%s/fifo", tmpdir);
	assert_int_equal(mkfifo(tar, 0600), 0);
	assert_int_equal(vd_verify_artifact(tar, NULL, &v), VD_ARTIFACT_INVALID);
	assert_non_null(strstr(v.detail, "neither a directory nor a tar file"));
}

/* The load limit counts the weight files, not the archive's padding. */
static void test_load_limit(void **state)
{
	char tar[4200];
	vd_loaded loaded;
	vd_verdict v;

	golden_tar("round-00000", 0, tar, sizeof(tar));
	assert_int_equal(vd_load_verified(tar, NULL, 916 + 368, &loaded, &v), VD_OK);
	vd_loaded_free(&loaded);
	assert_int_equal(vd_load_verified(tar, NULL, 916 + 367, &loaded, &v), VD_IO_ERROR);
	assert_non_null(strstr(v.detail, "above the load limit"));
}

/* A tar touched while it is hashed: its identity differs afterwards. */
static int touch_tar(uint64_t done, uint64_t total, void *arg)
{
	/* A time long past: "now" may fall in the tick the file was written in. */
	struct timespec ts[2] = { { 1, 0 }, { 1, 0 } };

	futimens(*(int *)arg, ts);
	return 0;
}

static void test_changed_while_hashed(void **state)
{
	char tar[4200];
	vd_options opt = { 0 };
	vd_loaded loaded;
	vd_verdict v;
	int fd;

	golden_tar("round-00000", 1, tar, sizeof(tar));
	fd = open(tar, O_RDWR);
	assert_true(fd >= 0);
	opt.progress = touch_tar;
	opt.progress_arg = &fd;
	assert_int_equal(vd_verify_artifact(tar, &opt, &v), VD_IO_ERROR);
	assert_string_equal(v.detail, "the archive changed while it was being verified");
	assert_int_equal(vd_load_verified(tar, &opt, 0, &loaded, &v), VD_IO_ERROR);
	assert_null(loaded.files);
	close(fd);
}

/* A tar cut short while its mapping is hashed: the SIGBUS guard covers
 * the archive's mapping, and the verification fails instead of the
 * program. */
static int cut_tar(uint64_t done, uint64_t total, void *arg)
{
	return ftruncate(*(int *)arg, 0) < 0 ? 1 : 0;
}

static void test_truncated_while_hashed(void **state)
{
	char tar[4200];
	vd_options opt = { 0 };
	vd_verdict v;
	int fd;

	golden_tar("round-00000-sharded", 1, tar, sizeof(tar));
	fd = open(tar, O_RDWR);
	assert_true(fd >= 0);
	/* cmocka puts its own SIGBUS handler in front for each test. */
	assert_int_equal(vd_artifact_guard_sigbus(), 0);
	opt.progress = cut_tar;
	opt.progress_arg = &fd;
	assert_int_equal(vd_verify_artifact(tar, &opt, &v), VD_CHECKPOINT_INTEGRITY);
	assert_string_equal(v.detail, "the archive shrank while it was being read");
	assert_string_equal(v.content_hash, "");
	close(fd);
}

#define TMP(fn) cmocka_unit_test_setup_teardown(fn, setup_tmp, teardown_tmp)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flat),
		cmocka_unit_test(test_one_dir),
		cmocka_unit_test(test_dot_root),
		cmocka_unit_test(test_pax),
		cmocka_unit_test(test_pax_global),
		cmocka_unit_test(test_gnu_long_name),
		cmocka_unit_test(test_ustar_prefix),
		cmocka_unit_test(test_numbers_and_types),
		cmocka_unit_test(test_end_forms),
		cmocka_unit_test(test_member_limit_ok),

		cmocka_unit_test(test_empty_file),
		cmocka_unit_test(test_not_whole_blocks),
		cmocka_unit_test(test_too_short),
		cmocka_unit_test(test_bad_checksum),
		cmocka_unit_test(test_checksum_not_octal),
		cmocka_unit_test(test_not_ustar),
		cmocka_unit_test(test_size_not_octal),
		cmocka_unit_test(test_size_digit_8),
		cmocka_unit_test(test_size_empty),
		cmocka_unit_test(test_size_negative_base256),
		cmocka_unit_test(test_size_base256_overflow),
		cmocka_unit_test(test_absolute_name),
		cmocka_unit_test(test_dotdot_name),
		cmocka_unit_test(test_dotdot_inside),
		cmocka_unit_test(test_hard_link),
		cmocka_unit_test(test_symlink),
		cmocka_unit_test(test_gnu_long_link),
		cmocka_unit_test(test_char_device),
		cmocka_unit_test(test_block_device),
		cmocka_unit_test(test_fifo),
		cmocka_unit_test(test_gnu_sparse),
		cmocka_unit_test(test_pax_sparse),
		cmocka_unit_test(test_pax_global_sparse),
		cmocka_unit_test(test_other_type),
		cmocka_unit_test(test_other_type_binary),
		cmocka_unit_test(test_duplicate),
		cmocka_unit_test(test_duplicate_normalised),
		cmocka_unit_test(test_duplicate_root),
		cmocka_unit_test(test_two_top_dirs),
		cmocka_unit_test(test_two_top_dir_entries),
		cmocka_unit_test(test_nested),
		cmocka_unit_test(test_nested_dir),
		cmocka_unit_test(test_mixed_levels),
		cmocka_unit_test(test_subdir_beside_files),
		cmocka_unit_test(test_data_truncated),
		cmocka_unit_test(test_data_past_end),
		cmocka_unit_test(test_no_end_marker),
		cmocka_unit_test(test_one_zero_block),
		cmocka_unit_test(test_zero_block_then_header),
		cmocka_unit_test(test_trailing_garbage),
		cmocka_unit_test(test_trailing_member),
		cmocka_unit_test(test_pax_bad_length),
		cmocka_unit_test(test_pax_no_newline),
		cmocka_unit_test(test_pax_no_length),
		cmocka_unit_test(test_pax_huge_length),
		cmocka_unit_test(test_pax_trailing_bytes),
		cmocka_unit_test(test_pax_no_keyword),
		cmocka_unit_test(test_pax_no_equals),
		cmocka_unit_test(test_pax_path_too_long),
		cmocka_unit_test(test_pax_path_nul),
		cmocka_unit_test(test_pax_size_not_decimal),
		cmocka_unit_test(test_pax_size_overflow),
		cmocka_unit_test(test_pax_size_past_end),
		cmocka_unit_test(test_pax_too_big),
		cmocka_unit_test(test_ext_past_end),
		cmocka_unit_test(test_two_pax_in_a_row),
		cmocka_unit_test(test_two_long_names),
		cmocka_unit_test(test_pax_and_long_name),
		cmocka_unit_test(test_pax_then_end),
		cmocka_unit_test(test_long_name_then_end),
		cmocka_unit_test(test_long_name_empty),
		cmocka_unit_test(test_long_name_too_long),
		cmocka_unit_test(test_dir_with_data),
		cmocka_unit_test(test_file_with_slash),
		cmocka_unit_test(test_file_named_dot),
		cmocka_unit_test(test_empty_name),
		cmocka_unit_test(test_too_many_members),
		cmocka_unit_test(test_names_too_long_together),
		cmocka_unit_test(test_gzip),
		cmocka_unit_test(test_pax_size_empty),
		cmocka_unit_test(test_pax_size_empty_long),
		cmocka_unit_test(test_pax_path_empty),
		cmocka_unit_test(test_pax_mtime_empty),
		cmocka_unit_test(test_pax_global_size_empty),
		cmocka_unit_test(test_pax_global_size),
		cmocka_unit_test(test_pax_global_path),
		cmocka_unit_test(test_pax_global_between),
		cmocka_unit_test(test_pax_global_then_end),
		cmocka_unit_test(test_pax_size_leading_zero),
		cmocka_unit_test(test_pax_size_sign),
		cmocka_unit_test(test_pax_size_blank),
		cmocka_unit_test(test_pax_size_twice),
		cmocka_unit_test(test_pax_path_twice),
		cmocka_unit_test(test_pax_length_leading_zero),
		cmocka_unit_test(test_pax_length_zero),
		cmocka_unit_test(test_pax_blank_before_length),
		cmocka_unit_test(test_pax_two_blanks),
		cmocka_unit_test(test_pax_key_control),
		cmocka_unit_test(test_pax_length_short),
		cmocka_unit_test(test_pax_record_in_padding),
		cmocka_unit_test(test_pax_linkpath),
		cmocka_unit_test(test_pax_hdrcharset),
		cmocka_unit_test(test_pax_unknown_keyword),
		cmocka_unit_test(test_pax_volume_keyword),
		cmocka_unit_test(test_pax_bad_mtime),
		cmocka_unit_test(test_pax_bad_uid),
		cmocka_unit_test(test_long_name_no_nul),
		cmocka_unit_test(test_long_name_two_names),
		cmocka_unit_test(test_long_name_padding),
		cmocka_unit_test(test_long_name_over_dir_field),
		cmocka_unit_test(test_pax_path_over_dir_field),
		cmocka_unit_test(test_file_dot_component),
		cmocka_unit_test(test_gnu_prefix_bytes),
		cmocka_unit_test(test_mode_not_number),
		cmocka_unit_test(test_mtime_blank),
		cmocka_unit_test(test_devminor_not_number),
		cmocka_unit_test(test_gid_negative),
		cmocka_unit_test(test_ext_header_uid),
		cmocka_unit_test(test_size_field_under_pax),

		TMP(test_golden_tars),
		TMP(test_fd_entries),
		TMP(test_read_header),
		TMP(test_missing_members),
		TMP(test_extra_member),
		TMP(test_invalid_through_api),
		TMP(test_load_limit),
		TMP(test_changed_while_hashed),
		TMP(test_truncated_while_hashed),
	};

	return cmocka_run_group_tests_name("tar", tests, NULL, NULL);
}

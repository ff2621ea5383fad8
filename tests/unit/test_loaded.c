/*
 * vd_load_verified: the bytes a caller loads are the bytes verified. Every
 * golden case gets the verdict vd_verify_artifact gives it; the buffers
 * equal the files and outlive later changes to them; tensors are found in
 * them; the memory cap and the symlink rule hold.
 *
 * Written against the installed interface: this file includes only
 * <lensemble/verify.h> of the project and links the shared library, so it
 * also checks that header and export list are complete.
 */
#define _XOPEN_SOURCE 700

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <lensemble/verify.h>

#define GOLDEN_CASES 13
#define ROUND0_HASH "4d7ed7dee40f9a70cd8c3601c869bcfbbce35ff92723da1ddd4937b6d8fcc753"
#define ROUND1_HASH "a9cad4759c6eb63aa18ec57db6cffbcf6fe9614908908057194fc7077fe58c5d"
#define ROUND0_BYTES (916 + 368)       /* header.json + weights.safetensors */
#define PROJ_OFFSET 304                /* predictor.proj.weight in round-00000 */
#define PROJ_LEN 64
#define PATH_LEN 4200

static const char *golden(const char *name)
{
	static char path[PATH_LEN];
	const char *top = getenv("top_srcdir");

	snprintf(path, sizeof(path), "%s/tests/data/golden-cases/%s", top ? top : ".", name);
	return path;
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void spill(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(p, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

static void copy_file(const char *from, const char *to)
{
	size_t n;
	uint8_t *b = slurp(from, &n);

	spill(to, b, n);
	free(b);
}

static void make_tmpdir(char *dir, size_t size)
{
	const char *t = getenv("TMPDIR");

	snprintf(dir, size, "%s/test_loaded.XXXXXX", t ? t : "/tmp");
	assert_non_null(mkdtemp(dir));
}

/* A copy of a golden case with one weight file, in a fresh directory. */
static void copy_case(const char *name, char *dir, size_t size)
{
	char from[PATH_LEN], to[PATH_LEN];

	make_tmpdir(dir, size);
	snprintf(from, sizeof(from), "%s/header.json", golden(name));
	snprintf(to, sizeof(to), "%s/header.json", dir);
	copy_file(from, to);
	snprintf(from, sizeof(from), "%s/weights.safetensors", golden(name));
	snprintf(to, sizeof(to), "%s/weights.safetensors", dir);
	copy_file(from, to);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void rm_tree(const char *dir)
{
	assert_int_equal(nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
}

static void assert_empty(const vd_loaded *l)
{
	assert_null(l->header);
	assert_null(l->files);
	assert_null(l->tensors);
	assert_null(l->store);
	assert_int_equal(l->n_files, 0);
	assert_int_equal(l->n_tensors, 0);
}

static void assert_same_verdict(const vd_verdict *a, const vd_verdict *b)
{
	assert_int_equal(a->code, b->code);
	assert_string_equal(a->detail, b->detail);
	assert_string_equal(a->content_hash, b->content_hash);
	assert_string_equal(a->claimed_hash, b->claimed_hash);
	assert_int_equal(a->have_header, b->have_header);
	assert_int_equal(a->schema_version, b->schema_version);
	assert_int_equal(a->round_index, b->round_index);
	assert_int_equal(a->has_parent, b->has_parent);
	assert_string_equal(a->parent_hash, b->parent_hash);
	assert_int_equal(a->tensors, b->tensors);
	assert_int_equal(a->bytes, b->bytes);
	assert_string_equal(a->facts.expected_hash, b->facts.expected_hash);
	assert_string_equal(a->facts.recomputed_hash, b->facts.recomputed_hash);
	assert_int_equal(a->facts.has_file_schema_version, b->facts.has_file_schema_version);
	assert_int_equal(a->facts.file_schema_version, b->facts.file_schema_version);
	assert_int_equal(a->facts.reader_max_version, b->facts.reader_max_version);
	assert_string_equal(a->facts.tensor, b->facts.tensor);
	assert_string_equal(a->facts.file, b->facts.file);
	assert_string_equal(a->facts.remediation, b->facts.remediation);
	assert_int_equal(a->legacy, b->legacy);
	assert_int_equal(a->migrated_from, b->migrated_from);
}

/* The buffers are the files' bytes, and the tensors tile their data. */
static void assert_matches_disk(const char *dir, const vd_loaded *l, const vd_verdict *v)
{
	char path[PATH_LEN];
	uint64_t total = 0;
	uint8_t *disk;
	size_t i, n;

	snprintf(path, sizeof(path), "%s/header.json", dir);
	disk = slurp(path, &n);
	assert_int_equal(l->header_len, n);
	assert_memory_equal(l->header, disk, n);
	free(disk);
	for (i = 0; i < l->n_files; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, l->files[i].name);
		disk = slurp(path, &n);
		assert_int_equal(l->files[i].len, n);
		assert_memory_equal(l->files[i].data, disk, n);
		free(disk);
	}
	assert_int_equal(l->n_tensors, v->tensors);
	for (i = 0; i < l->n_tensors; i++) {
		const vd_tensor *t = &l->tensors[i];
		const vd_loaded_file *f = &l->files[t->file];
		assert_true(t->file < l->n_files);
		assert_true(t->data >= f->data && t->data + t->len <= f->data + f->len);
		assert_ptr_equal(vd_loaded_tensor(l, t->name), t);
		if (i > 0)
			assert_true(strcmp(l->tensors[i - 1].name, t->name) < 0);
		total += t->len;
	}
	assert_int_equal(total, v->bytes);
}

static void check_case(const char *name, const vd_options *opt)
{
	vd_verdict mapped, loaded_v;
	vd_loaded l;

	vd_verify_artifact(golden(name), opt, &mapped);
	vd_load_verified(golden(name), opt, 0, &l, &loaded_v);
	print_message("%-22s %s %s\n", name, vd_code_name(loaded_v.code), loaded_v.detail);
	assert_same_verdict(&mapped, &loaded_v);
	if (loaded_v.code == VD_OK)
		assert_matches_disk(golden(name), &l, &loaded_v);
	else
		assert_empty(&l);
	vd_loaded_free(&l);
	assert_empty(&l);
}

/* Every golden case: the same verdict, code, detail and hash both ways. */
static void test_golden_cases(void **state)
{
	struct dirent *e;
	struct stat st;
	DIR *d = opendir(golden(""));
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		assert_int_equal(stat(golden(e->d_name), &st), 0);
		if (!S_ISDIR(st.st_mode))
			continue;
		check_case(e->d_name, NULL);
		n++;
	}
	closedir(d);
	assert_int_equal(n, GOLDEN_CASES);
}

static void test_expected_hash(void **state)
{
	vd_options opt = { 0 };
	vd_verdict v;
	vd_loaded l;

	opt.expected_hash = ROUND1_HASH;
	check_case("round-00001", &opt);
	opt.expected_hash = ROUND0_HASH;
	check_case("round-00001", &opt);
	assert_int_equal(vd_load_verified(golden("round-00001"), &opt, 0, &l, &v),
	    VD_CHECKPOINT_INTEGRITY);
	assert_non_null(strstr(v.detail, "committed"));
	assert_empty(&l);
	check_case("no-such-artifact", NULL);
}

static void test_tensor_lookup(void **state)
{
	static const uint64_t shape[] = { 4, 4 };
	const vd_tensor *t;
	vd_verdict v;
	vd_loaded l;
	uint8_t *disk;
	size_t n;
	char path[PATH_LEN];

	assert_int_equal(vd_load_verified(golden("round-00000"), NULL, 0, &l, &v), VD_OK);
	t = vd_loaded_tensor(&l, "predictor.proj.weight");
	assert_non_null(t);
	assert_string_equal(t->dtype, "float32");
	assert_int_equal(t->name_len, strlen("predictor.proj.weight"));
	assert_int_equal(t->rank, 2);
	assert_memory_equal(t->shape, shape, sizeof(shape));
	assert_int_equal(t->file, 0);
	assert_int_equal(t->len, PROJ_LEN);
	assert_ptr_equal(t->data, l.files[0].data + PROJ_OFFSET);
	snprintf(path, sizeof(path), "%s/weights.safetensors", golden("round-00000"));
	disk = slurp(path, &n);
	assert_memory_equal(t->data, disk + PROJ_OFFSET, PROJ_LEN);
	free(disk);
	assert_null(vd_loaded_tensor(&l, "predictor"));
	assert_null(vd_loaded_tensor(&l, "predictor.proj.weight."));
	assert_null(vd_loaded_tensor(&l, ""));
	vd_loaded_free(&l);
}

/* Shards hold the same tensors at other offsets: a lookup finds the same
 * bytes in whichever file holds them. */
static void test_tensor_lookup_sharded(void **state)
{
	vd_verdict v;
	vd_loaded one, three;
	size_t i;

	assert_int_equal(vd_load_verified(golden("round-00000"), NULL, 0, &one, &v), VD_OK);
	assert_int_equal(vd_load_verified(golden("round-00000-sharded"), NULL, 0, &three, &v),
	    VD_OK);
	assert_int_equal(three.n_files, 3);
	assert_int_equal(one.n_tensors, three.n_tensors);
	for (i = 0; i < one.n_tensors; i++) {
		const vd_tensor *a = &one.tensors[i];
		const vd_tensor *b = vd_loaded_tensor(&three, a->name);
		assert_non_null(b);
		assert_string_equal(a->dtype, b->dtype);
		assert_int_equal(a->rank, b->rank);
		if (a->rank > 0)
			assert_memory_equal(a->shape, b->shape, a->rank * sizeof(*a->shape));
		assert_int_equal(a->len, b->len);
		assert_memory_equal(a->data, b->data, a->len);
	}
	vd_loaded_free(&one);
	vd_loaded_free(&three);
}

/* Write what was loaded as an artifact of its own and verify that. */
static void assert_loaded_hashes_to(const vd_loaded *l, const char *hash)
{
	char dir[PATH_LEN], path[PATH_LEN];
	vd_verdict v;
	size_t i;

	make_tmpdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/header.json", dir);
	spill(path, l->header, l->header_len);
	for (i = 0; i < l->n_files; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, l->files[i].name);
		spill(path, l->files[i].data, l->files[i].len);
	}
	assert_int_equal(vd_verify_artifact(dir, NULL, &v), VD_OK);
	assert_string_equal(v.content_hash, hash);
	rm_tree(dir);
}

/* A weight file rewritten in place after the load (a mapping would see
 * it) leaves the loaded bytes as they were verified. */
static void test_change_after_load(void **state)
{
	char dir[PATH_LEN], path[PATH_LEN];
	uint8_t *before, flip[PROJ_LEN];
	vd_verdict v, now;
	vd_loaded l;
	int fd;

	copy_case("round-00000", dir, sizeof(dir));
	assert_int_equal(vd_load_verified(dir, NULL, 0, &l, &v), VD_OK);
	assert_string_equal(v.content_hash, ROUND0_HASH);
	before = malloc(l.files[0].len);
	assert_non_null(before);
	memcpy(before, l.files[0].data, l.files[0].len);

	memset(flip, 0x5a, sizeof(flip));
	snprintf(path, sizeof(path), "%s/weights.safetensors", dir);
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, flip, sizeof(flip), PROJ_OFFSET), (ssize_t)sizeof(flip));
	assert_int_equal(close(fd), 0);
	assert_int_equal(vd_verify_artifact(dir, NULL, &now), VD_CHECKPOINT_INTEGRITY);

	assert_memory_equal(l.files[0].data, before, l.files[0].len);
	assert_memory_not_equal(vd_loaded_tensor(&l, "predictor.proj.weight")->data, flip,
	    sizeof(flip));
	assert_loaded_hashes_to(&l, v.content_hash);
	free(before);
	vd_loaded_free(&l);
	rm_tree(dir);
}

static void test_size_cap(void **state)
{
	vd_verdict v;
	vd_loaded l;

	assert_int_equal(vd_load_verified(golden("round-00000"), NULL, ROUND0_BYTES - 1, &l, &v),
	    VD_IO_ERROR);
	print_message("%s\n", v.detail);
	assert_non_null(strstr(v.detail, "load limit"));
	assert_non_null(strstr(v.detail, "1284 bytes"));
	assert_string_equal(v.content_hash, "");
	assert_empty(&l);
	assert_int_equal(vd_load_verified(golden("round-00000"), NULL, ROUND0_BYTES, &l, &v),
	    VD_OK);
	vd_loaded_free(&l);
	assert_int_equal(VD_LOAD_DEFAULT_MAX_BYTES > ROUND0_BYTES, 1);
}

/* A weight file that is a symbolic link is refused, wherever it points. */
static void test_symlink_refused(void **state)
{
	char dir[PATH_LEN], path[PATH_LEN], real[PATH_LEN];
	vd_verdict v, mapped;
	vd_loaded l;

	copy_case("round-00000", dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/weights.safetensors", dir);
	snprintf(real, sizeof(real), "%s/real.safetensors", dir);
	assert_int_equal(rename(path, real), 0);
	assert_int_equal(symlink("real.safetensors", path), 0);
	assert_int_equal(vd_load_verified(dir, NULL, 0, &l, &v), VD_ARTIFACT_INVALID);
	assert_non_null(strstr(v.detail, "symbolic link"));
	assert_empty(&l);
	vd_verify_artifact(dir, NULL, &mapped);
	assert_same_verdict(&mapped, &v);
	rm_tree(dir);
}

/* Weight files too short to hold a length prefix fail alike both ways. */
static void test_short_files(void **state)
{
	static const size_t lens[] = { 0, 5 };
	char dir[PATH_LEN], path[PATH_LEN];
	vd_verdict v, mapped;
	vd_loaded l;
	size_t i;

	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		copy_case("round-00000", dir, sizeof(dir));
		snprintf(path, sizeof(path), "%s/weights.safetensors", dir);
		assert_int_equal(truncate(path, (off_t)lens[i]), 0);
		assert_int_equal(vd_load_verified(dir, NULL, 0, &l, &v), VD_CHECKPOINT_INTEGRITY);
		assert_empty(&l);
		vd_verify_artifact(dir, NULL, &mapped);
		assert_same_verdict(&mapped, &v);
		rm_tree(dir);
	}
}

/* The _at form leaves the directory open; a caller may keep a buffer. */
static void test_at_and_ownership(void **state)
{
	int fd = open(golden("round-00000"), O_RDONLY | O_DIRECTORY);
	char path[PATH_LEN];
	vd_verdict v;
	vd_loaded l;
	uint8_t *kept, *disk;
	size_t len, n;

	assert_true(fd >= 0);
	assert_int_equal(vd_load_verified_at(fd, NULL, 0, &l, &v), VD_OK);
	assert_true(fcntl(fd, F_GETFD) >= 0);
	kept = l.files[0].data;
	len = l.files[0].len;
	l.files[0].data = NULL;
	vd_loaded_free(&l);
	assert_empty(&l);
	vd_loaded_free(&l);
	snprintf(path, sizeof(path), "%s/weights.safetensors", golden("round-00000"));
	disk = slurp(path, &n);
	assert_int_equal(len, n);
	assert_memory_equal(kept, disk, n);
	free(disk);
	free(kept);
	close(fd);
}

/* ---- large files: read on a thread of their own while hashed ---------- */

#define LARGE_BYTES (24u << 20)   /* above the size read on a second thread */
/* Files large enough that the mapped verifier looks at how their page
 * cache is held (about 21 MiB each), and decides. */
#define PROBED_BYTES (64u << 20)

/* A real-data artifact of three weight files made by vd-mkartifact. */
static void make_large(char *dir, size_t size, unsigned bytes)
{
	const char *top = getenv("top_builddir");
	char cmd[2 * PATH_LEN];

	make_tmpdir(dir, size);
	snprintf(cmd, sizeof(cmd),
	    "'%s/tools/vd-mkartifact' --bytes %u --tensors 6 --shards 3 '%s/a' >/dev/null",
	    top ? top : ".", bytes, dir);
	assert_int_equal(system(cmd), 0);
	strncat(dir, "/a", size - strlen(dir) - 1);
}

/* Loaded while read: the verdict a mapping gives, and every file whole. */
static void test_large_files(void **state)
{
	char dir[PATH_LEN], path[PATH_LEN];
	vd_verdict v, mapped;
	vd_loaded l;
	uint8_t *disk;
	size_t i, len;

	make_large(dir, sizeof(dir), LARGE_BYTES);
	assert_int_equal(vd_load_verified(dir, NULL, 0, &l, &v), VD_OK);
	assert_int_equal(vd_verify_artifact(dir, NULL, &mapped), VD_OK);
	assert_same_verdict(&mapped, &v);
	assert_int_equal(l.n_files, 3);
	for (i = 0; i < l.n_files; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, l.files[i].name);
		disk = slurp(path, &len);
		assert_int_equal(l.files[i].len, len);
		assert_memory_equal(l.files[i].data, disk, len);
		free(disk);
	}
	vd_loaded_free(&l);
	rm_tree(dir);
}

typedef struct cutter {
	const char *path;
	int cut;
	off_t off;                  /* bytes cut off the end; 0: half the file */
} cutter;

/* Cuts the file once hashing has begun. */
static int cut_once(uint64_t done, uint64_t total, void *arg)
{
	cutter *c = arg;
	struct stat st;

	if (!c->cut && done > 0 && stat(c->path, &st) == 0) {
		assert_int_equal(truncate(c->path, c->off ? st.st_size - c->off : st.st_size / 2), 0);
		c->cut = 1;
	}
	return 0;
}

/* A file cut while loaded fails, whether the read meets the end first or
 * the identity check after the hash sees the change, and hands nothing
 * over. */
static void test_large_cut(void **state)
{
	char dir[PATH_LEN], path[PATH_LEN];
	vd_options opt = { 0 };
	vd_verdict v;
	vd_loaded l;
	cutter c;
	size_t i;

	for (i = 0; i < 3; i++) {
		make_large(dir, sizeof(dir), LARGE_BYTES);
		snprintf(path, sizeof(path), "%s/weights-%05zu-of-00003.safetensors", dir, i);
		c = (cutter){ path, 0, 0 };
		opt.progress = cut_once;
		opt.progress_arg = &c;
		assert_int_not_equal(vd_load_verified(dir, &opt, 0, &l, &v), VD_OK);
		assert_true(c.cut);
		print_message("cut %s: %s\n", path + strlen(dir) + 1, v.detail);
		assert_true(strstr(v.detail, "shrank") != NULL || strstr(v.detail, "changed") != NULL);
		assert_empty(&l);
		rm_tree(dir);
	}
}

/* Each weight file's page cache refilled by WILLNEED advice, which on
 * Linux fills it with 4 KiB pages: the mapped verifier then reads the
 * files instead of hashing them in place, and must come to the same. */
static void small_pages(const char *dir)
{
	char path[PATH_LEN];
	size_t i;
	int fd;

	for (i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/weights-%05zu-of-00003.safetensors", dir, i);
		fd = open(path, O_RDONLY);
		assert_true(fd >= 0);
		assert_int_equal(fdatasync(fd), 0);
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
		close(fd);
	}
}

static void test_mapped_small_pages(void **state)
{
	char dir[PATH_LEN], path[PATH_LEN];
	vd_options opt = { 0 };
	vd_verdict v, loaded_v;
	vd_loaded l;
	cutter c;

	make_large(dir, sizeof(dir), PROBED_BYTES);
	assert_int_equal(vd_load_verified(dir, NULL, 0, &l, &loaded_v), VD_OK);
	vd_loaded_free(&l);
	small_pages(dir);
	assert_int_equal(vd_verify_artifact(dir, NULL, &v), VD_OK);
	assert_same_verdict(&loaded_v, &v);

	small_pages(dir);
	snprintf(path, sizeof(path), "%s/weights-00001-of-00003.safetensors", dir);
	/* Past what is hashed in place: the read meets the end. */
	c = (cutter){ path, 0, 1 << 20 };
	opt.progress = cut_once;
	opt.progress_arg = &c;
	assert_int_equal(vd_verify_artifact(dir, &opt, &v), VD_CHECKPOINT_INTEGRITY);
	assert_non_null(strstr(v.detail, "shrank"));
	rm_tree(dir);
}

/* A program built before vd_verdict grew calls the plain names with the
 * smaller struct: it gets its fields, and nothing past them is written. */
#undef vd_verify_artifact
#undef vd_load_verified
vd_code vd_verify_artifact(const char *path, const vd_options *opt, void *out);
vd_code vd_load_verified(const char *path, const vd_options *opt, uint64_t max_bytes,
    vd_loaded *loaded, void *out);

#define FIRST_LAYOUT offsetof(vd_verdict, facts)
#define CANARY 0x5a

static void test_first_layout(void **state)
{
	unsigned char buf[sizeof(vd_verdict)];
	vd_verdict whole, first;
	vd_loaded l;
	size_t i;

	vd_verify_artifact_v2(golden("tamper-weight-byte"), NULL, &whole);
	memset(buf, CANARY, sizeof(buf));
	assert_int_equal(vd_verify_artifact(golden("tamper-weight-byte"), NULL, buf),
	    VD_CHECKPOINT_INTEGRITY);
	for (i = FIRST_LAYOUT; i < sizeof(buf); i++)
		assert_int_equal(buf[i], CANARY);
	memcpy(&first, buf, FIRST_LAYOUT);
	assert_string_equal(first.detail, whole.detail);
	assert_string_equal(first.content_hash, whole.content_hash);
	assert_int_equal(first.bytes, whole.bytes);

	memset(buf, CANARY, sizeof(buf));
	assert_int_equal(vd_load_verified(golden("round-00000"), NULL, 0, &l, buf), VD_OK);
	for (i = FIRST_LAYOUT; i < sizeof(buf); i++)
		assert_int_equal(buf[i], CANARY);
	memcpy(&first, buf, FIRST_LAYOUT);
	assert_string_equal(first.content_hash, ROUND0_HASH);
	vd_loaded_free(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden_cases),
		cmocka_unit_test(test_expected_hash),
		cmocka_unit_test(test_tensor_lookup),
		cmocka_unit_test(test_tensor_lookup_sharded),
		cmocka_unit_test(test_change_after_load),
		cmocka_unit_test(test_size_cap),
		cmocka_unit_test(test_symlink_refused),
		cmocka_unit_test(test_short_files),
		cmocka_unit_test(test_at_and_ownership),
		cmocka_unit_test(test_first_layout),
		cmocka_unit_test(test_large_files),
		cmocka_unit_test(test_large_cut),
		cmocka_unit_test(test_mapped_small_pages),
	};

	return cmocka_run_group_tests_name("loaded", tests, NULL, NULL);
}

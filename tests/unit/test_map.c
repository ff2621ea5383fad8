/*
 * The string-keyed map under the daemon's indexes: lookups stay right
 * through growth and through long runs of deletes, whose tombstones must
 * neither hide live keys nor fill the table.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "vd_map.h"
#include "vd_util.h"

#define MANY 10000

/* Values are the addresses of these, so a wrong slot shows as a wrong index. */
static int cells[MANY];

static void key_of(char *buf, size_t n, const char *prefix, size_t i)
{
	snprintf(buf, n, "%s%zu", prefix, i);
}

static void *val(size_t i)
{
	return &cells[i];
}

static void test_empty(void **state)
{
	(void)state;
	const char *k;
	void *v;
	size_t i = 0;
	vd_map m;

	vd_map_init(&m);
	assert_null(vd_map_get(&m, "a"));
	assert_null(vd_map_del(&m, "a"));
	assert_int_equal(vd_map_next(&m, &i, &k, &v), 0);
	assert_int_equal(m.count, 0);
	vd_map_free(&m);
	vd_map_free(&m);     /* a freed map is an empty one */
}

static void test_put_get_del(void **state)
{
	(void)state;
	int a = 1, b = 2, c = 3;
	vd_map m;

	vd_map_init(&m);
	assert_int_equal(vd_map_put(&m, "alpha", &a), 0);
	assert_int_equal(vd_map_put(&m, "beta", &b), 0);
	assert_int_equal(m.count, 2);
	assert_ptr_equal(vd_map_get(&m, "alpha"), &a);
	assert_ptr_equal(vd_map_get(&m, "beta"), &b);
	assert_null(vd_map_get(&m, "gamma"));
	assert_null(vd_map_get(&m, "alph"));
	assert_null(vd_map_get(&m, "alphaa"));
	assert_null(vd_map_get(&m, ""));

	/* Overwrite replaces the value, not the entry. */
	assert_int_equal(vd_map_put(&m, "alpha", &c), 0);
	assert_int_equal(m.count, 2);
	assert_ptr_equal(vd_map_get(&m, "alpha"), &c);

	assert_ptr_equal(vd_map_del(&m, "alpha"), &c);
	assert_int_equal(m.count, 1);
	assert_null(vd_map_get(&m, "alpha"));
	assert_null(vd_map_del(&m, "alpha"));
	assert_ptr_equal(vd_map_get(&m, "beta"), &b);
	assert_null(vd_map_del(&m, "missing"));
	assert_int_equal(m.count, 1);

	assert_int_equal(vd_map_put(&m, "alpha", &a), 0);
	assert_ptr_equal(vd_map_get(&m, "alpha"), &a);
	assert_int_equal(m.count, 2);

	/* The empty string is a key like any other. */
	assert_int_equal(vd_map_put(&m, "", &c), 0);
	assert_ptr_equal(vd_map_get(&m, ""), &c);
	assert_ptr_equal(vd_map_del(&m, ""), &c);
	assert_null(vd_map_get(&m, ""));
	vd_map_free(&m);
	assert_int_equal(m.count, 0);
	assert_null(vd_map_get(&m, "beta"));
}

/* A NULL value is stored: it counts and iterates, though get cannot tell it apart. */
static void test_null_value(void **state)
{
	(void)state;
	const char *k;
	void *v = &cells[0];
	size_t i = 0;
	vd_map m;

	vd_map_init(&m);
	assert_int_equal(vd_map_put(&m, "k", NULL), 0);
	assert_int_equal(m.count, 1);
	assert_int_equal(vd_map_next(&m, &i, &k, &v), 1);
	assert_string_equal(k, "k");
	assert_null(v);
	assert_int_equal(vd_map_next(&m, &i, &k, &v), 0);
	assert_null(vd_map_del(&m, "k"));
	assert_int_equal(m.count, 0);
	vd_map_free(&m);
}

static void test_keys_copied(void **state)
{
	(void)state;
	char buf[32];
	const char *k;
	void *v;
	size_t i = 0;
	vd_map m;

	vd_map_init(&m);
	strcpy(buf, "round-00001");
	assert_int_equal(vd_map_put(&m, buf, val(1)), 0);
	strcpy(buf, "round-00002");
	assert_int_equal(vd_map_put(&m, buf, val(2)), 0);
	memset(buf, 'x', sizeof(buf) - 1);
	buf[sizeof(buf) - 1] = '\0';

	assert_ptr_equal(vd_map_get(&m, "round-00001"), val(1));
	assert_ptr_equal(vd_map_get(&m, "round-00002"), val(2));
	assert_null(vd_map_get(&m, buf));
	assert_int_equal(m.count, 2);
	while (vd_map_next(&m, &i, &k, &v)) {
		assert_ptr_not_equal(k, buf);
		assert_true(strcmp(k, "round-00001") == 0 || strcmp(k, "round-00002") == 0);
	}
	vd_map_free(&m);
}

static void test_iteration(void **state)
{
	(void)state;
	static unsigned char seen[1000];
	const char *k;
	char name[32];
	void *v;
	size_t i, n = 0, idx;
	vd_map m;

	vd_map_init(&m);
	for (i = 0; i < 1000; i++) {
		key_of(name, sizeof(name), "k", i);
		assert_int_equal(vd_map_put(&m, name, val(i)), 0);
	}
	for (i = 0; i < 1000; i += 3) {
		key_of(name, sizeof(name), "k", i);
		assert_ptr_equal(vd_map_del(&m, name), val(i));
	}
	memset(seen, 0, sizeof(seen));
	for (i = 0; vd_map_next(&m, &i, &k, &v); n++) {
		assert_int_equal(sscanf(k, "k%zu", &idx), 1);
		assert_true(idx < 1000);
		assert_true(idx % 3 != 0);
		assert_ptr_equal(v, val(idx));
		assert_int_equal(seen[idx], 0);
		seen[idx] = 1;
	}
	assert_int_equal(n, m.count);
	for (i = 0; i < 1000; i++)
		assert_int_equal(seen[i], i % 3 != 0);
	vd_map_free(&m);
}

static void check_all(const vd_map *m, const char *prefix, size_t step, size_t offset)
{
	char name[32];
	size_t i;

	for (i = 0; i < MANY; i++) {
		key_of(name, sizeof(name), prefix, i);
		if (i % step == offset)
			assert_ptr_equal(vd_map_get(m, name), val(i));
		else
			assert_null(vd_map_get(m, name));
	}
}

static void test_many(void **state)
{
	(void)state;
	char name[32];
	size_t i;
	vd_map m;

	vd_map_init(&m);
	for (i = 0; i < MANY; i++) {
		key_of(name, sizeof(name), "artifact/", i);
		assert_int_equal(vd_map_put(&m, name, val(i)), 0);
	}
	assert_int_equal(m.count, MANY);
	check_all(&m, "artifact/", 1, 0);

	/* Deleting the even keys leaves tombstones that probes must pass over. */
	for (i = 0; i < MANY; i += 2) {
		key_of(name, sizeof(name), "artifact/", i);
		assert_ptr_equal(vd_map_del(&m, name), val(i));
	}
	assert_int_equal(m.count, MANY / 2);
	check_all(&m, "artifact/", 2, 1);

	for (i = 0; i < MANY; i += 2) {
		key_of(name, sizeof(name), "artifact/", i);
		assert_int_equal(vd_map_put(&m, name, val(i)), 0);
	}
	assert_int_equal(m.count, MANY);
	check_all(&m, "artifact/", 1, 0);

	for (i = 0; i < MANY; i++) {
		key_of(name, sizeof(name), "artifact/", i);
		assert_ptr_equal(vd_map_del(&m, name), val(i));
	}
	assert_int_equal(m.count, 0);
	check_all(&m, "artifact/", MANY + 1, MANY);
	vd_map_free(&m);
}

/* Room made at once: the table does not grow again while the entries
 * reserved for come, and what was in it stays. */
static void test_reserve(void **state)
{
	(void)state;
	char name[32];
	size_t i, cap;
	vd_map m;

	vd_map_init(&m);
	assert_int_equal(vd_map_reserve(&m, 0), 0);
	for (i = 0; i < 10; i++) {
		key_of(name, sizeof(name), "before/", i);
		assert_int_equal(vd_map_put(&m, name, val(i)), 0);
	}
	assert_int_equal(vd_map_reserve(&m, MANY), 0);
	cap = m.cap;
	assert_true((m.count + MANY) * 4 <= cap * 3);
	for (i = 0; i < 10; i++) {
		key_of(name, sizeof(name), "before/", i);
		assert_ptr_equal(vd_map_get(&m, name), val(i));
	}
	for (i = 0; i < MANY; i++) {
		key_of(name, sizeof(name), "artifact/", i);
		assert_int_equal(vd_map_put(&m, name, val(i)), 0);
	}
	assert_int_equal(m.cap, cap);
	check_all(&m, "artifact/", 1, 0);
	assert_int_equal(vd_map_reserve(&m, 1), 0);     /* room enough already */
	assert_int_equal(m.cap, cap);
	vd_map_free(&m);
}

/* Churn: keys come and go while few are live. The table must reuse or
 * purge tombstones rather than grow without bound, and lookups of absent
 * keys must still end. */
static void test_churn(void **state)
{
	(void)state;
	char name[48];
	size_t round, i, cap_after_warmup = 0;
	vd_map m;

	vd_map_init(&m);
	for (i = 0; i < 10; i++) {
		key_of(name, sizeof(name), "live/", i);
		assert_int_equal(vd_map_put(&m, name, val(i)), 0);
	}
	for (round = 0; round < 200; round++) {
		for (i = 0; i < 500; i++) {
			snprintf(name, sizeof(name), "tmp/%zu/%zu", round, i);
			assert_int_equal(vd_map_put(&m, name, val(i)), 0);
		}
		for (i = 0; i < 500; i++) {
			snprintf(name, sizeof(name), "tmp/%zu/%zu", round, i);
			assert_ptr_equal(vd_map_del(&m, name), val(i));
		}
		assert_int_equal(m.count, 10);
		assert_true(m.used < m.cap);
		if (round == 10)
			cap_after_warmup = m.cap;
	}
	assert_true(m.cap <= cap_after_warmup);
	assert_true(m.cap <= 4096);
	for (i = 0; i < 10; i++) {
		key_of(name, sizeof(name), "live/", i);
		assert_ptr_equal(vd_map_get(&m, name), val(i));
	}
	assert_null(vd_map_get(&m, "tmp/0/0"));
	assert_null(vd_map_get(&m, "never"));
	vd_map_free(&m);
}

/* The key pieces: decimal digits as printf writes them, and the hash of a
 * string with its NUL (two fields "ab", "c" and "a", "bc" differ). */
static void test_key_pieces(void **state)
{
	static const int64_t v[] = { 0, 7, -1, 10, -4500, 1234567890123LL, INT64_MAX, INT64_MIN };
	char got[VD_I64_DIGITS_MAX + 1], want[32];
	size_t i, n;

	(void)state;
	for (i = 0; i < VD_ARRAY_LEN(v); i++) {
		n = vd_i64_digits(got, v[i]);
		assert_true(n <= VD_I64_DIGITS_MAX);
		got[n] = '\0';
		snprintf(want, sizeof(want), "%lld", (long long)v[i]);
		assert_string_equal(got, want);
	}
	assert_int_equal(vd_fnv_str(VD_FNV_BASIS, "round"), vd_fnv(VD_FNV_BASIS, "round", 6));
	assert_int_not_equal(vd_fnv_str(vd_fnv_str(VD_FNV_BASIS, "ab"), "c"),
	    vd_fnv_str(vd_fnv_str(VD_FNV_BASIS, "a"), "bc"));
	assert_int_equal(vd_fnv(VD_FNV_BASIS, "", 0), VD_FNV_BASIS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_put_get_del),
		cmocka_unit_test(test_null_value),
		cmocka_unit_test(test_keys_copied),
		cmocka_unit_test(test_iteration),
		cmocka_unit_test(test_many),
		cmocka_unit_test(test_reserve),
		cmocka_unit_test(test_churn),
		cmocka_unit_test(test_key_pieces),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

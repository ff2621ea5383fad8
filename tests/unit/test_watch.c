/*
 * inotify watches taken from a scan's list a slice at a time
 * (vd_watch_pass): every directory of the list is watched once, the
 * added ones are announced, the stale ones dropped only where the scan
 * looked, and a sync in one go does the same.
 */
#include "config.h"

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
#include <uv.h>

#include "vd_watch.h"

/* Directory names as the scan lists them (char *const *). */
static char d_root[] = "", d_a[] = "a", d_ab[] = "a/b", d_c[] = "c", d_d[] = "d";

typedef struct fx {
	char root[64];
	uv_loop_t loop;
	vd_watch w;
	unsigned announced;
} fx;

static void no_event(void *arg, const char *dir, const char *name, int overflow)
{
	(void)arg;
	(void)dir;
	(void)name;
	(void)overflow;
}

static void announced(void *arg, const char *dir)
{
	(void)dir;
	((fx *)arg)->announced++;
}

/* The scan looked only under "a" (and at it). */
static int under_a(void *arg, const char *dir)
{
	(void)arg;
	return strncmp(dir, "a", 1) == 0 && (dir[1] == '\0' || dir[1] == '/');
}

static void mkdir_in(const fx *f, const char *rel)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/%s", f->root, rel);
	assert_int_equal(mkdir(path, 0755), 0);
}

static void rmdir_in(const fx *f, const char *rel)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/%s", f->root, rel);
	assert_int_equal(rmdir(path), 0);
}

static int set_up(void **state)
{
	fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	snprintf(f->root, sizeof(f->root), "/tmp/vd-test-watch.XXXXXX");
	assert_non_null(mkdtemp(f->root));
	mkdir_in(f, "a");
	mkdir_in(f, "a/b");
	mkdir_in(f, "c");
	mkdir_in(f, "d");
	assert_int_equal(uv_loop_init(&f->loop), 0);
	assert_int_equal(vd_watch_init(&f->w, &f->loop, f->root, no_event, f), 0);
	*state = f;
	return 0;
}

static int tear_down(void **state)
{
	fx *f = *state;
	char cmd[128];

	vd_watch_close(&f->w);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&f->loop), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->root);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* Parts of at most budget directories until the pass is over: how many
 * calls it took. */
static int pass(fx *f, char *const *dirs, size_t n, const vd_watch_scope *scope, size_t budget,
    size_t *added)
{
	vd_watch_pass p;
	int calls = 1;

	vd_watch_pass_begin(&p);
	while (!vd_watch_pass_some(&f->w, &p, dirs, n, scope, budget))
		calls++;
	*added = p.added;
	return calls;
}

static void test_pass_in_slices(void **state)
{
	fx *f = *state;
	char *dirs[] = { d_root, d_a, d_ab, d_c, d_d };
	vd_watch_scope scope = { NULL, NULL, announced, f };
	size_t added;

	/* Five directories two at a time: three parts in each of the three
	 * steps over the list, then the drop. */
	assert_int_equal(pass(f, dirs, 5, &scope, 2, &added), 10);
	assert_int_equal(added, 5);
	assert_int_equal(f->announced, 5);
	assert_int_equal(f->w.by_dir.count, 5);
	/* Again: nothing new, nothing announced. */
	assert_int_equal(pass(f, dirs, 5, &scope, SIZE_MAX, &added), 4);
	assert_int_equal(added, 0);
	assert_int_equal(f->announced, 5);
}

/* A directory gone from the list is dropped only where the scan looked. */
static void test_pass_drops_covered(void **state)
{
	fx *f = *state;
	char *all[] = { d_root, d_a, d_ab, d_c, d_d };
	char *some[] = { d_root, d_a };
	vd_watch_scope scope = { under_a, NULL, NULL, f };
	size_t added;

	pass(f, all, 5, NULL, 3, &added);
	assert_int_equal(added, 5);
	rmdir_in(f, "a/b");
	pass(f, some, 2, &scope, 1, &added);
	assert_int_equal(added, 0);
	assert_int_equal(f->w.by_dir.count, 4);
	assert_null(vd_map_get(&f->w.by_dir, "a/b"));
	assert_non_null(vd_map_get(&f->w.by_dir, "c"));
	/* With no scope, every other is stale. */
	assert_int_equal(vd_watch_sync(&f->w, some, 2, NULL), 0);
	assert_int_equal(f->w.by_dir.count, 2);
}

/* A pass left before its end frees what it took in. */
static void test_pass_abandoned(void **state)
{
	fx *f = *state;
	char *dirs[] = { d_root, d_a, d_ab, d_c, d_d };
	vd_watch_pass p;

	vd_watch_pass_begin(&p);
	assert_int_equal(vd_watch_pass_some(&f->w, &p, dirs, 5, NULL, 2), 0);
	assert_int_equal(vd_watch_pass_some(&f->w, &p, dirs, 5, NULL, 2), 0);
	vd_watch_pass_free(&p);
	assert_int_equal(f->w.by_dir.count, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_pass_in_slices, set_up, tear_down),
		cmocka_unit_test_setup_teardown(test_pass_drops_covered, set_up, tear_down),
		cmocka_unit_test_setup_teardown(test_pass_abandoned, set_up, tear_down),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

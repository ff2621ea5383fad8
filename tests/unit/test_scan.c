/*
 * Targeted scans: which scopes a change becomes, what is walked for them,
 * what a scan covers (and so may take for gone), and the set of changes
 * noted between scans.
 */
#define _XOPEN_SOURCE 700

#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "vd_changes.h"
#include "vd_limits.h"
#include "vd_scan.h"

#define DEPTH 3

static char root[256];

static void mkpath(const char *rel)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	assert_int_equal(mkdir(p, 0755), 0);
}

static void touch(const char *rel)
{
	char p[512];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	assert_true((fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0);
	close(fd);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(p);
}

/* The store: an artifact at the root, a run with an artifact, a ledger
 * and a statement file, and a run at the depth limit. */
static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "%s/vd-test-scan.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	assert_non_null(mkdtemp(root));
	mkpath("round-00000");
	touch("round-00000/header.json");
	mkpath("run-a");
	mkpath("run-a/round-00001");
	touch("run-a/round-00001/header.json");
	touch("run-a/round-00001/weights.safetensors");
	touch("run-a/ledger.jsonl");
	mkpath("run-a/commitments");
	touch("run-a/commitments/x.json");
	touch("run-a/commitments/y.json");
	mkpath("run-a/deep");
	mkpath("run-a/deep/round-00002");
	touch("run-a/deep/round-00002/header.json");
	/* Inside an artifact: never walked by a whole scan. */
	mkpath("run-a/round-00001/commitments");
	touch("run-a/round-00001/commitments/z.json");
	mkpath("run-a/round-00001/sub");
	mkpath("run-a/round-00001/sub/x");
	touch("run-a/round-00001/sub/x/header.json");
	/* Past the depth limit, with a ledger beside a round. */
	mkpath("p");
	mkpath("p/q");
	mkpath("p/q/r");
	mkpath("p/q/r/round-00003");
	touch("p/q/r/round-00003/header.json");
	touch("p/q/r/ledger.jsonl");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void scan(vd_scan_result *r, const vd_scan_change *c, size_t n)
{
	vd_scan_changes(root, DEPTH, NULL, c, n, 0, r);
	assert_true(r->root_ok);
	assert_true(r->targeted);
}

static int has_scope(const vd_scan_result *r, vd_scope_kind kind, const char *rel)
{
	size_t i;

	for (i = 0; i < r->n_scopes; i++)
		if (r->scopes[i].kind == kind && strcmp(r->scopes[i].relpath, rel) == 0)
			return 1;
	return 0;
}

/* ---- what a scan covers ------------------------------------------------ */

static void test_covers(void **state)
{
	vd_scope scopes[] = {
		{ VD_SCOPE_TREE, (char *)"a" },
		{ VD_SCOPE_DIR, (char *)"b" },
		{ VD_SCOPE_STMTS, (char *)"c" },
		{ VD_SCOPE_FILE, (char *)"d/commitments/x.json" },
	};
	vd_scan_result r;

	(void)state;
	memset(&r, 0, sizeof(r));
	assert_true(vd_scan_covers(&r, "anything/at/all"));
	r.incomplete = 1;
	assert_false(vd_scan_covers(&r, "anything"));
	r.incomplete = 0;
	r.targeted = 1;
	r.scopes = scopes;
	r.n_scopes = 4;
	assert_true(vd_scan_covers(&r, "a"));
	assert_true(vd_scan_covers(&r, "a/round-00001"));
	assert_true(vd_scan_covers(&r, "a/commitments/z.json"));
	assert_false(vd_scan_covers(&r, "ab"));
	assert_false(vd_scan_covers(&r, ""));
	assert_true(vd_scan_covers(&r, "b"));
	assert_true(vd_scan_covers(&r, "b/ledger.jsonl"));
	assert_false(vd_scan_covers(&r, "b/round-00001"));
	assert_false(vd_scan_covers(&r, "b/commitments"));
	assert_false(vd_scan_covers(&r, "b/ledger.jsonlx"));
	assert_true(vd_scan_covers(&r, "c/commitments"));
	assert_true(vd_scan_covers(&r, "c/commitments/y.json"));
	assert_false(vd_scan_covers(&r, "c"));
	assert_false(vd_scan_covers(&r, "c/ledger.jsonl"));
	assert_false(vd_scan_covers(&r, "c/commitmentsx"));
	assert_true(vd_scan_covers(&r, "d/commitments/x.json"));
	assert_false(vd_scan_covers(&r, "d/commitments/y.json"));
	assert_false(vd_scan_covers(&r, "d/commitments"));
	r.incomplete = 1;
	assert_false(vd_scan_covers(&r, "a"));

	/* The root's scopes. */
	r.incomplete = 0;
	scopes[0].relpath = (char *)"";
	r.n_scopes = 1;
	assert_true(vd_scan_covers(&r, "x/y"));
	scopes[0].kind = VD_SCOPE_DIR;
	assert_true(vd_scan_covers(&r, ""));
	assert_true(vd_scan_covers(&r, "ledger.jsonl"));
	assert_false(vd_scan_covers(&r, "round-00000"));
	scopes[0].kind = VD_SCOPE_STMTS;
	assert_true(vd_scan_covers(&r, "commitments/x.json"));
	assert_false(vd_scan_covers(&r, "ledger.jsonl"));
}

/* ---- what a scan covers, found in an index by path --------------------- */

static const char *str_path(const void *p)
{
	return p;
}

static int str_order(const void *a, const void *b)
{
	return strcmp(a, b);
}

typedef struct seen_list {
	const char *v[64];
	size_t n;
} seen_list;

static void note(void *arg, void *elem)
{
	seen_list *l = arg;

	assert_true(l->n < 64);
	l->v[l->n++] = elem;
}

/* What each_covered passes is exactly what vd_scan_covers says of every
 * element, in order, each once. */
static void check_each(const vd_scan_result *r, const vd_order *o)
{
	seen_list got = { { NULL }, 0 };
	size_t i, k = 0;

	assert_int_equal(vd_scan_each_covered(r, o, str_path, note, &got), 0);
	for (i = 0; i < o->n; i++)
		if (vd_scan_covers(r, o->v[i])) {
			assert_true(k < got.n);
			assert_ptr_equal(got.v[k], o->v[i]);
			k++;
		}
	assert_int_equal(k, got.n);
}

static void test_each_covered(void **state)
{
	/* Neighbours in strcmp order of what each scope covers: a name
	 * continued ("a-b", "ab"), a child, the ledger and its lookalikes. */
	static const char *paths[] = {
		"", "a", "a-b", "a.b", "a/commitments", "a/commitments/z.json", "a/ledger.jsonl",
		"a/round-00001", "a/round-00010", "a/x/y", "ab", "b", "b/commitments",
		"b/ledger.jsonl", "b/ledger.jsonlx", "b/round-00001", "c", "c/commitments",
		"c/commitments/y.json", "c/commitmentsx", "c/ledger.jsonl", "commitments",
		"commitments/x.json", "d/commitments", "d/commitments/x.json",
		"d/commitments/y.json", "ledger.jsonl", "round-00000",
	};
	vd_scope scopes[] = {
		{ VD_SCOPE_TREE, (char *)"a" },
		{ VD_SCOPE_DIR, (char *)"b" },
		{ VD_SCOPE_STMTS, (char *)"c" },
		{ VD_SCOPE_FILE, (char *)"d/commitments/x.json" },
		{ VD_SCOPE_DIR, (char *)"a" },          /* inside the tree of "a" */
		{ VD_SCOPE_TREE, (char *)"a/x" },
	};
	vd_scope at_root[] = {
		{ VD_SCOPE_TREE, (char *)"" },
		{ VD_SCOPE_DIR, (char *)"" },
		{ VD_SCOPE_STMTS, (char *)"" },
	};
	vd_scan_result r;
	vd_order o;
	size_t i, n;

	(void)state;
	vd_order_init(&o, str_order);
	for (i = VD_ARRAY_LEN(paths); i-- > 0; )
		vd_order_add(&o, (void *)paths[i]);
	assert_int_equal(vd_order_settle(&o), 0);
	memset(&r, 0, sizeof(r));
	check_each(&r, &o);                     /* a whole scan: all */
	r.incomplete = 1;
	check_each(&r, &o);                     /* incomplete: none */
	r.incomplete = 0;
	r.targeted = 1;
	r.scopes = scopes;
	for (n = 0; n <= VD_ARRAY_LEN(scopes); n++) {
		r.n_scopes = n;
		check_each(&r, &o);
	}
	for (i = 0; i < VD_ARRAY_LEN(scopes); i++) {
		r.scopes = &scopes[i];
		r.n_scopes = 1;
		check_each(&r, &o);
	}
	r.scopes = at_root;
	for (i = 0; i < VD_ARRAY_LEN(at_root); i++) {
		r.scopes = &at_root[i];
		r.n_scopes = 1;
		check_each(&r, &o);
	}
	r.scopes = at_root;
	r.n_scopes = VD_ARRAY_LEN(at_root);
	check_each(&r, &o);
	vd_order_free(&o);
}

/* ---- changes into scopes ----------------------------------------------- */

/* A round renamed into a run, a file of it, the run's ledger, one of its
 * statement files, and an entry gone: each its own scope, the artifact's
 * file inside the round's tree, and only these walked. */
static void test_changes_in_a_run(void **state)
{
	vd_scan_change c[] = {
		{ (char *)"run-a", (char *)"round-00001" },
		{ (char *)"run-a/round-00001", (char *)"weights.safetensors" },
		{ (char *)"run-a", (char *)"ledger.jsonl" },
		{ (char *)"run-a/commitments", (char *)"x.json" },
		{ (char *)"run-a", (char *)"round-00009" },
	};
	vd_scan_result r;

	(void)state;
	scan(&r, c, 5);
	assert_false(r.incomplete);
	assert_int_equal(r.n_scopes, 4);
	assert_true(has_scope(&r, VD_SCOPE_TREE, "run-a/round-00001"));
	assert_true(has_scope(&r, VD_SCOPE_DIR, "run-a"));
	assert_true(has_scope(&r, VD_SCOPE_FILE, "run-a/commitments/x.json"));
	assert_true(has_scope(&r, VD_SCOPE_TREE, "run-a/round-00009"));
	assert_int_equal(r.n_artifacts, 1);
	assert_string_equal(r.artifacts[0].relpath, "run-a/round-00001");
	assert_string_equal(r.artifacts[0].run, "run-a");
	assert_int_equal(r.n_ledgers, 1);
	assert_string_equal(r.ledgers[0].relpath, "run-a/ledger.jsonl");
	assert_int_equal(r.n_envelopes, 1);
	assert_string_equal(r.envelopes[0].relpath, "run-a/commitments/x.json");
	assert_string_equal(r.envelopes[0].run, "run-a");
	/* What it may take for gone, and what it may not. */
	assert_true(vd_scan_covers(&r, "run-a/round-00009"));
	assert_false(vd_scan_covers(&r, "run-a/deep/round-00002"));
	assert_false(vd_scan_covers(&r, "run-a/commitments/y.json"));
	assert_false(vd_scan_covers(&r, "round-00000"));
	vd_scan_result_free(&r);
}

/* A file of an artifact directory is its artifact; header.json appearing
 * or going walks its directory again; a new run is walked whole, down to
 * the depth limit. */
static void test_artifact_files_and_new_runs(void **state)
{
	vd_scan_change c1[] = { { (char *)"run-a/round-00001", (char *)"weights.safetensors" } };
	vd_scan_change c2[] = { { (char *)"run-a/deep", (char *)"header.json" } };
	vd_scan_change c3[] = { { (char *)"", (char *)"run-a" } };
	vd_scan_result r;

	(void)state;
	scan(&r, c1, 1);
	assert_int_equal(r.n_scopes, 2);
	assert_true(has_scope(&r, VD_SCOPE_DIR, "run-a/round-00001"));
	assert_true(has_scope(&r, VD_SCOPE_TREE, "run-a/round-00001/weights.safetensors"));
	assert_int_equal(r.n_artifacts, 1);
	assert_int_equal(r.n_ledgers, 0);
	vd_scan_result_free(&r);

	scan(&r, c2, 1);
	assert_true(has_scope(&r, VD_SCOPE_TREE, "run-a/deep"));
	assert_int_equal(r.n_artifacts, 1);
	assert_string_equal(r.artifacts[0].relpath, "run-a/deep/round-00002");
	vd_scan_result_free(&r);

	scan(&r, c3, 1);
	assert_true(has_scope(&r, VD_SCOPE_TREE, "run-a"));
	assert_int_equal(r.n_artifacts, 2);   /* round-00001, deep/round-00002 */
	assert_int_equal(r.n_ledgers, 1);
	assert_int_equal(r.n_envelopes, 2);
	vd_scan_result_free(&r);
}

/* Past the depth limit nothing is walked (a whole scan would not walk it
 * either), and what a client named there is covered, so that what was
 * taken for an artifact there is gone; no ledger there is read. */
static void test_depth_limit(void **state)
{
	vd_scan_change one[] = { { (char *)"run-a/deep", (char *)"round-00002" } };
	vd_scan_change two[] = { { (char *)"p/q/r", (char *)"round-00003" } };
	vd_scan_result r;

	(void)state;
	vd_scan_changes(root, 2, NULL, one, 1, 0, &r);
	assert_int_equal(r.n_scopes, 1);
	assert_true(has_scope(&r, VD_SCOPE_TREE, "run-a/deep/round-00002"));
	assert_int_equal(r.n_artifacts, 0);
	assert_true(vd_scan_covers(&r, "run-a/deep/round-00002"));
	vd_scan_result_free(&r);

	vd_scan_changes(root, 2, NULL, two, 1, 0, &r);
	assert_int_equal(r.n_scopes, 1);
	assert_true(has_scope(&r, VD_SCOPE_TREE, "p/q/r/round-00003"));
	assert_int_equal(r.n_artifacts, 0);
	assert_int_equal(r.n_ledgers, 0);
	assert_int_equal(r.n_dirs, 0);
	assert_false(vd_scan_covers(&r, "p/q/r/ledger.jsonl"));
	vd_scan_result_free(&r);
}

/* What lies inside an artifact directory is never walked: a commitments
 * directory made in one is the artifact's change, not statements; a path
 * below one is nothing. */
static void test_inside_an_artifact(void **state)
{
	vd_scan_change stmts[] = { { (char *)"run-a/round-00001", (char *)"commitments" } };
	vd_scan_change below[] = { { (char *)"run-a/round-00001/sub", (char *)"x" } };
	vd_scan_result r;

	(void)state;
	scan(&r, stmts, 1);
	assert_true(has_scope(&r, VD_SCOPE_DIR, "run-a/round-00001"));
	assert_int_equal(r.n_envelopes, 0);
	assert_int_equal(r.n_artifacts, 1);
	assert_string_equal(r.artifacts[0].relpath, "run-a/round-00001");
	vd_scan_result_free(&r);

	scan(&r, below, 1);
	assert_int_equal(r.n_artifacts, 0);
	assert_int_equal(r.n_dirs, 0);
	assert_true(vd_scan_covers(&r, "run-a/round-00001/sub/x"));
	vd_scan_result_free(&r);
}

/* Statement files: one named is that one; the directory itself, or the
 * run's entry "commitments", is all of them; a name that is not *.json
 * is nothing. */
static void test_statements(void **state)
{
	vd_scan_change c1[] = { { (char *)"run-a/commitments", (char *)"" } };
	vd_scan_change c2[] = { { (char *)"run-a", (char *)"commitments" },
		{ (char *)"run-a/commitments", (char *)"y.json" } };
	vd_scan_change c3[] = { { (char *)"run-a/commitments", (char *)"notes.txt" } };
	vd_scan_change c4[] = { { (char *)"run-a/commitments", (char *)"gone.json" } };
	vd_scan_result r;

	(void)state;
	scan(&r, c1, 1);
	assert_true(has_scope(&r, VD_SCOPE_STMTS, "run-a"));
	assert_int_equal(r.n_envelopes, 2);
	assert_int_equal(r.n_artifacts, 0);
	vd_scan_result_free(&r);

	scan(&r, c2, 2);
	assert_int_equal(r.n_scopes, 1);
	assert_int_equal(r.n_envelopes, 2);
	vd_scan_result_free(&r);

	scan(&r, c3, 1);
	assert_int_equal(r.n_scopes, 0);
	assert_false(vd_scan_covers(&r, "run-a/commitments/x.json"));
	vd_scan_result_free(&r);

	scan(&r, c4, 1);
	assert_int_equal(r.n_envelopes, 0);
	assert_false(r.incomplete);
	assert_true(vd_scan_covers(&r, "run-a/commitments/gone.json"));
	vd_scan_result_free(&r);
}

/* A statement file that cannot be looked up (here a name too long; for a
 * daemon not run as root, a directory it cannot search) is listed
 * unread, with the reason, as a whole scan lists it: a refused statement,
 * not an incomplete scan. */
static void test_statement_unreadable(void **state)
{
	char name[320];
	vd_scan_change c[] = { { (char *)"run-a/commitments", name } };
	vd_scan_result r;

	(void)state;
	memset(name, 'a', 300);
	strcpy(name + 300, ".json");
	scan(&r, c, 1);
	assert_false(r.incomplete);
	assert_int_equal(r.n_envelopes, 1);
	assert_false(r.envelopes[0].read_ok);
	assert_non_null(strstr(r.envelopes[0].read_error, "cannot read"));
	vd_scan_result_free(&r);
}

/* A change in a directory that is gone by now covers it, whole. */
static void test_gone_directory(void **state)
{
	vd_scan_change c[] = { { (char *)"run-z/round-00004", (char *)"weights.safetensors" } };
	vd_scan_result r;

	(void)state;
	scan(&r, c, 1);
	assert_false(r.incomplete);
	assert_true(has_scope(&r, VD_SCOPE_TREE, "run-z/round-00004"));
	assert_int_equal(r.n_artifacts, 0);
	assert_true(vd_scan_covers(&r, "run-z/round-00004"));
	assert_false(vd_scan_covers(&r, "run-z"));
	vd_scan_result_free(&r);
}

/* A directory of a scope that cannot be opened (here a name too long
 * for a component; for a daemon not run as root, a denied one) leaves
 * the scan incomplete: the store then walks the whole store, which
 * records what it cannot read. */
static void test_unopenable_scope(void **state)
{
	char dir[400];
	vd_scan_change c[] = { { dir, (char *)"ledger.jsonl" }, { dir, (char *)"round-00001" } };
	vd_scan_result r;

	(void)state;
	memset(dir, 'a', 300);
	dir[300] = '\0';
	scan(&r, c, 1);
	assert_true(r.incomplete);
	assert_false(vd_scan_covers(&r, "run-a"));
	vd_scan_result_free(&r);
	scan(&r, c + 1, 1);
	assert_true(r.incomplete);
	vd_scan_result_free(&r);
}

/* ---- the changes noted between scans ---------------------------------- */

static void test_changes_set(void **state)
{
	vd_changes c, out;
	char name[32];
	int i;

	(void)state;
	vd_changes_init(&c);
	vd_changes_init(&out);
	assert_true(vd_changes_empty(&c));
	vd_changes_add(&c, "run-a", "round-00001");
	vd_changes_add(&c, "run-a", "round-00001");
	vd_changes_add(&c, "run-a", "");
	assert_int_equal(c.n, 2);
	vd_changes_take(&c, &out);
	assert_true(vd_changes_empty(&c));
	assert_int_equal(out.n, 2);
	assert_string_equal(out.v[1].dir, "run-a");
	assert_string_equal(out.v[1].name, "");

	for (i = 0; i <= VD_SCAN_CHANGES_MAX; i++) {
		snprintf(name, sizeof(name), "round-%05d", i);
		vd_changes_add(&c, "", name);
	}
	assert_true(c.whole);
	assert_int_equal(c.n, 0);
	vd_changes_add(&c, "", "more");
	assert_int_equal(c.n, 0);
	assert_false(vd_changes_empty(&c));
	vd_changes_take(&c, &out);
	assert_true(out.whole);
	assert_false(c.whole);
	vd_changes_free(&out);
	vd_changes_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_covers),
		cmocka_unit_test(test_each_covered),
		cmocka_unit_test(test_changes_in_a_run),
		cmocka_unit_test(test_artifact_files_and_new_runs),
		cmocka_unit_test(test_depth_limit),
		cmocka_unit_test(test_inside_an_artifact),
		cmocka_unit_test(test_statements),
		cmocka_unit_test(test_statement_unreadable),
		cmocka_unit_test(test_gone_directory),
		cmocka_unit_test(test_unopenable_scope),
		cmocka_unit_test(test_changes_set),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

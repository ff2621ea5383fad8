/*
 * Reference cases: every artifact in tests/data/golden-cases gives the
 * verdict, hash and code the reference implementation gave; the
 * store-basic artifacts and ledger verify, and edited ledgers break at the
 * right line.
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

#include "lensemble/verify.h"
#include "vd_json.h"
#include "vd_ledger.h"

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static const char *datadir(void)
{
	const char *s = getenv("top_srcdir");
	static char path[4096];

	snprintf(path, sizeof(path), "%s/tests/data", s ? s : ".");
	return path;
}

static const char *jstr(const vd_jval *o, const char *key)
{
	const vd_jval *v = vd_json_get(o, key);

	return v && v->type == VD_JSTR ? v->str.p : NULL;
}

static void test_cases(void **state)
{
	char path[4200];
	vd_jdoc doc;
	size_t len;
	char *buf, err[128];
	const vd_jval *c;
	int n = 0;

	snprintf(path, sizeof(path), "%s/golden-cases/cases.json", datadir());
	buf = read_file(path, &len);
	assert_int_equal(vd_json_parse((uint8_t *)buf, len, NULL, &doc, err, sizeof(err)), 0);
	for (c = vd_json_get(doc.root, "cases")->child; c != NULL; c = c->next) {
		vd_verdict v;
		const char *expect = jstr(c, "expect");
		snprintf(path, sizeof(path), "%s/golden-cases/%s", datadir(), jstr(c, "path"));
		vd_verify_artifact(path, NULL, &v);
		print_message("%-22s %s %s\n", jstr(c, "name"), vd_code_name(v.code), v.detail);
		if (strcmp(expect, "ok") == 0) {
			int64_t round;
			const vd_jval *parent = vd_json_get(c, "parent_hash");
			assert_int_equal(v.code, VD_OK);
			assert_string_equal(v.content_hash, jstr(c, "content_hash"));
			assert_true(vd_json_int64(vd_json_get(c, "round_index"), &round));
			assert_int_equal(v.round_index, round);
			assert_int_equal(v.has_parent, parent->type == VD_JSTR);
			if (v.has_parent)
				assert_string_equal(v.parent_hash, parent->str.p);
		} else {
			assert_string_equal(vd_code_name(v.code), jstr(c, "code"));
			assert_true(strlen(v.detail) > 10);
		}
		n++;
	}
	assert_int_equal(n, 13);
	vd_jdoc_free(&doc);
	free(buf);
}

/* What each case's verdict says beyond its code: the facts behind a
 * failure (NULL, or -1 for a version: the fact does not apply) and the
 * legacy label (migrated_from 0: not legacy). */
static const struct case_facts {
	const char *name;
	const char *expected_hash, *recomputed_hash;
	int64_t file_schema_version, reader_max_version;
	const char *tensor, *file;
	const char *remediation;
	int64_t migrated_from;
} case_facts[] = {
	{ "round-00000", NULL, NULL, -1, -1, NULL, NULL, NULL, 0 },
	{ "round-00000-sharded", NULL, NULL, -1, -1, NULL, NULL, NULL, 0 },
	{ "round-00001", NULL, NULL, -1, -1, NULL, NULL, NULL, 0 },
	{ "round-00002", NULL, NULL, -1, -1, NULL, NULL, NULL, 0 },
	{ "scalar-and-empty", NULL, NULL, -1, -1, NULL, NULL, NULL, 0 },
	{ "schema-v1", NULL, NULL, -1, -1, NULL, NULL, NULL, 1 },
	{ "tamper-weight-byte",
	  "4d7ed7dee40f9a70cd8c3601c869bcfbbce35ff92723da1ddd4937b6d8fcc753",
	  "0ec7edcd9ade216a8598e20fe6f0b52602168a453ea59775d182baedd584cd85", -1, -1, NULL, NULL,
	  "re-download round-00000 from the coordinator; do not load it", 0 },
	{ "tamper-header-hash",
	  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	  "4d7ed7dee40f9a70cd8c3601c869bcfbbce35ff92723da1ddd4937b6d8fcc753", -1, -1, NULL, NULL,
	  "re-download round-00000 from the coordinator; do not load it", 0 },
	{ "pickle-payload", NULL, NULL, -1, -1, NULL, "weights.safetensors",
	  "re-download round-00000 from the coordinator; do not load it", 0 },
	{ "schema-too-new", NULL, NULL, 999, 2, NULL, NULL,
	  "upgrade the verifier: this artifact uses schema version 999, newer than the 2 it reads", 0 },
	{ "action-head", NULL, NULL, -1, -1, "action_head.so101.weight", "weights.safetensors",
	  "do not load or share it: round-00000 holds weights outside the shared encoder and predictor groups; export it again with those groups only", 0 },
	{ "header-missing-field", NULL, NULL, -1, -1, NULL, NULL,
	  "do not load it: re-download the artifact from the coordinator, and have it exported again if that copy is invalid too", 0 },
	{ "weight-file-escapes", NULL, NULL, -1, -1, NULL, NULL,
	  "do not load it: re-download the artifact from the coordinator, and have it exported again if that copy is invalid too", 0 },
};

static void assert_fact(const char *name, const char *what, const char *got, const char *want)
{
	if (want == NULL ? got[0] != '\0' : strcmp(got, want) != 0)
		fail_msg("%s: %s is \"%s\", expected \"%s\"", name, what, got, want ? want : "");
}

static void check_facts(const struct case_facts *w, const vd_verdict *v)
{
	const vd_facts *f = &v->facts;

	assert_fact(w->name, "expected_hash", f->expected_hash, w->expected_hash);
	assert_fact(w->name, "recomputed_hash", f->recomputed_hash, w->recomputed_hash);
	assert_int_equal(f->has_file_schema_version, w->file_schema_version >= 0);
	if (f->has_file_schema_version)
		assert_int_equal(f->file_schema_version, w->file_schema_version);
	assert_int_equal(f->reader_max_version, w->reader_max_version >= 0 ? w->reader_max_version : 0);
	assert_fact(w->name, "tensor", f->tensor, w->tensor);
	assert_fact(w->name, "file", f->file, w->file);
	assert_fact(w->name, "remediation", f->remediation, w->remediation);
	assert_int_equal(v->legacy, w->migrated_from > 0);
	assert_int_equal(v->migrated_from, w->migrated_from);
}

/* Every golden case's facts, and every case has a row. */
static void test_case_facts(void **state)
{
	char path[4200];
	vd_jdoc doc;
	size_t len, i, n = 0;
	char *buf, err[128];
	const vd_jval *c;

	snprintf(path, sizeof(path), "%s/golden-cases/cases.json", datadir());
	buf = read_file(path, &len);
	assert_int_equal(vd_json_parse((uint8_t *)buf, len, NULL, &doc, err, sizeof(err)), 0);
	for (c = vd_json_get(doc.root, "cases")->child; c != NULL; c = c->next, n++) {
		vd_verdict v;
		for (i = 0; i < sizeof(case_facts) / sizeof(case_facts[0]); i++)
			if (strcmp(case_facts[i].name, jstr(c, "name")) == 0)
				break;
		if (i == sizeof(case_facts) / sizeof(case_facts[0]))
			fail_msg("no facts listed for the case %s", jstr(c, "name"));
		snprintf(path, sizeof(path), "%s/golden-cases/%s", datadir(), jstr(c, "path"));
		vd_verify_artifact(path, NULL, &v);
		check_facts(&case_facts[i], &v);
	}
	assert_int_equal(n, sizeof(case_facts) / sizeof(case_facts[0]));
	vd_jdoc_free(&doc);
	free(buf);
}

/* The expected hash given by a caller must match too. */
static void test_expected_hash(void **state)
{
	char path[4200];
	vd_options opt = { 0 };
	vd_verdict v;

	snprintf(path, sizeof(path), "%s/golden-cases/round-00001", datadir());
	opt.expected_hash = "a9cad4759c6eb63aa18ec57db6cffbcf6fe9614908908057194fc7077fe58c5d";
	assert_int_equal(vd_verify_artifact(path, &opt, &v), VD_OK);
	opt.expected_hash = "4d7ed7dee40f9a70cd8c3601c869bcfbbce35ff92723da1ddd4937b6d8fcc753";
	assert_int_equal(vd_verify_artifact(path, &opt, &v), VD_CHECKPOINT_INTEGRITY);
	assert_non_null(strstr(v.detail, "committed"));
	assert_string_equal(v.facts.expected_hash, opt.expected_hash);
	assert_string_equal(v.facts.recomputed_hash,
	    "a9cad4759c6eb63aa18ec57db6cffbcf6fe9614908908057194fc7077fe58c5d");
	assert_string_equal(v.facts.remediation,
	    "re-download round-00001 from the coordinator; do not load it");
}

static void test_store_basic_artifacts(void **state)
{
	char path[4200];
	vd_jdoc doc;
	size_t len;
	char *buf, err[128];
	const vd_jval *arts, *a;
	int round, found;

	snprintf(path, sizeof(path), "%s/store-basic/expected.json", datadir());
	buf = read_file(path, &len);
	assert_int_equal(vd_json_parse((uint8_t *)buf, len, NULL, &doc, err, sizeof(err)), 0);
	arts = vd_json_get(doc.root, "artifacts");
	for (round = 0; round <= 4; round++) {
		vd_verdict v;
		snprintf(path, sizeof(path), "%s/store-basic/round-%05d", datadir(), round);
		assert_int_equal(vd_verify_artifact(path, NULL, &v), VD_OK);
		assert_int_equal(v.round_index, round);
		found = 0;
		for (a = arts->child; a != NULL; a = a->next)
			if (strcmp(a->key.p, v.content_hash) == 0)
				found = 1;
		assert_true(found);
	}
	vd_jdoc_free(&doc);
	free(buf);
}

struct collected {
	char hashes[8][VD_HASH_HEX_LEN + 1];
	int trusted[8];
	size_t n;
};

static void collect(const vd_ledger_record *r, size_t line, int trusted, void *arg)
{
	struct collected *c = arg;

	if (c->n < 8) {
		memcpy(c->hashes[c->n], r->global_model_hash, VD_HASH_HEX_LEN + 1);
		c->trusted[c->n++] = trusted;
	}
}

static char *ledger(size_t *len)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/store-basic/ledger.jsonl", datadir());
	return read_file(path, len);
}

static void test_ledger_intact(void **state)
{
	struct collected c = { 0 };
	vd_ledger_result r;
	size_t len;
	char *buf = ledger(&len);

	vd_ledger_verify((uint8_t *)buf, len, collect, &c, &r);
	assert_int_equal(r.brk, VD_LEDGER_INTACT);
	assert_int_equal(r.records, 4);
	assert_int_equal(r.trusted, 4);
	assert_int_equal(c.n, 4);
	assert_string_equal(c.hashes[3],
	    "31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e");
	free(buf);
}

/* Replace the first occurrence of `from` on line `line` (1-based). */
static void edit_line(char *buf, int line, const char *from, const char *to)
{
	char *p = buf, *hit;
	int i;

	for (i = 1; i < line; i++)
		p = strchr(p, '\n') + 1;
	hit = strstr(p, from);
	assert_non_null(hit);
	assert_int_equal(strlen(from), strlen(to));
	memcpy(hit, to, strlen(to));
}

static void expect_break(char *buf, size_t len, vd_ledger_break why, size_t line,
    size_t trusted)
{
	vd_ledger_result r;

	vd_ledger_verify((uint8_t *)buf, len, NULL, NULL, &r);
	assert_int_equal(r.brk, why);
	assert_int_equal(r.break_line, line);
	assert_int_equal(r.trusted, trusted);
}

static void test_ledger_edits(void **state)
{
	size_t len;
	char *buf;

	/* A rewritten commitment in record 2 breaks the link at record 3. */
	buf = ledger(&len);
	edit_line(buf, 2, "c3eaa23b", "c3eaa23c");
	expect_break(buf, len, VD_LEDGER_PREV_MISMATCH, 3, 2);
	free(buf);

	/* A participant renamed in record 1 breaks it at record 2. */
	buf = ledger(&len);
	edit_line(buf, 1, "site-a", "site-x");
	expect_break(buf, len, VD_LEDGER_PREV_MISMATCH, 2, 1);
	free(buf);

	/* The last record edited: nothing after it can notice, so it stays
	 * intact; a rewritten tail is caught by commitments, not the chain. */
	buf = ledger(&len);
	edit_line(buf, 4, "31ceb436", "31ceb437");
	expect_break(buf, len, VD_LEDGER_INTACT, 0, 4);
	free(buf);

	/* A broken line is a break, not a crash. */
	buf = ledger(&len);
	edit_line(buf, 3, "{\"schema", "[\"schema");
	expect_break(buf, len, VD_LEDGER_MALFORMED, 3, 2);
	free(buf);

	/* A ledger that does not begin at round 0 commits nothing: it could
	 * be grafted onto another run's history. */
	buf = ledger(&len);
	edit_line(buf, 1, "\"round_index\":0", "\"round_index\":9");
	expect_break(buf, len, VD_LEDGER_NO_ROUND_0, 1, 0);
	free(buf);

	/* A record's round_index going back. */
	buf = ledger(&len);
	edit_line(buf, 3, "\"round_index\":2", "\"round_index\":0");
	expect_break(buf, len, VD_LEDGER_ROUND_ORDER, 3, 2);
	free(buf);

	/* Truncated mid-record (an append cut short). */
	buf = ledger(&len);
	expect_break(buf, len - 40, VD_LEDGER_MALFORMED, 4, 3);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cases),
		cmocka_unit_test(test_case_facts),
		cmocka_unit_test(test_expected_hash),
		cmocka_unit_test(test_store_basic_artifacts),
		cmocka_unit_test(test_ledger_intact),
		cmocka_unit_test(test_ledger_edits),
	};

	return cmocka_run_group_tests_name("golden", tests, NULL, NULL);
}

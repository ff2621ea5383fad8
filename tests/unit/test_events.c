/*
 * The parts of GET /events that need no connection: reading the
 * Last-Event-ID a client sends, the frame of an event, and where a
 * resumed stream starts (and whether it must be told events were lost).
 * Then what it remembers between refreshes: heads and commitments seen,
 * announced again when they come back, forgotten when they are gone, and
 * the heads of a restart taken from the history; the events published are
 * read back from a scratch state database.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>
#include <cmocka.h>
#include <uv.h>

#include "vd_events.h"
#include "vd_lineage.h"
#include "vd_model.h"
#include "vd_state.h"

static void test_parse_id(void **state)
{
	(void)state;
	uint64_t id = 7;

	assert_int_equal(vd_events_parse_id("0", &id), 0);
	assert_int_equal(id, 0);
	assert_int_equal(vd_events_parse_id("42", &id), 0);
	assert_int_equal(id, 42);
	assert_int_equal(vd_events_parse_id("007", &id), 0);
	assert_int_equal(id, 7);
	assert_int_equal(vd_events_parse_id("18446744073709551615", &id), 0);
	assert_true(id == UINT64_MAX);
	/* Nothing but decimal digits, and nothing that overflows. */
	id = 5;
	assert_int_equal(vd_events_parse_id("18446744073709551616", &id), -EINVAL);
	assert_int_equal(vd_events_parse_id("99999999999999999999999", &id), -EINVAL);
	assert_int_equal(vd_events_parse_id("", &id), -EINVAL);
	assert_int_equal(vd_events_parse_id(NULL, &id), -EINVAL);
	assert_int_equal(vd_events_parse_id("-1", &id), -EINVAL);
	assert_int_equal(vd_events_parse_id("+1", &id), -EINVAL);
	assert_int_equal(vd_events_parse_id(" 1", &id), -EINVAL);
	assert_int_equal(vd_events_parse_id("1 ", &id), -EINVAL);
	assert_int_equal(vd_events_parse_id("0x10", &id), -EINVAL);
	assert_int_equal(vd_events_parse_id("1e3", &id), -EINVAL);
	assert_int_equal(vd_events_parse_id("abc", &id), -EINVAL);
	assert_true(id == 5);      /* untouched by a refusal */
}

static void test_frame(void **state)
{
	(void)state;
	vd_buf b;

	vd_buf_init(&b);
	assert_int_equal(vd_events_frame(&b, 12, "verdict", "{\"state\":\"verified\"}"), 0);
	assert_int_equal(vd_events_frame(&b, 13, "head", "{}"), 0);
	vd_buf_putc(&b, '\0');
	assert_string_equal((const char *)b.p,
	    "id: 12\nevent: verdict\ndata: {\"state\":\"verified\"}\n\n"
	    "id: 13\nevent: head\ndata: {}\n\n");
	/* A line break in the data would end the field and forge another. */
	b.len = 0;
	assert_int_equal(vd_events_frame(&b, 1, "alert", "{\"detail\":\"a\nid: 99\"}"), -EINVAL);
	assert_int_equal(vd_events_frame(&b, 1, "alert", "a\rb"), -EINVAL);
	assert_int_equal(vd_events_frame(&b, 1, "al\nert", "{}"), -EINVAL);
	assert_int_equal(b.len, 0);
	vd_buf_free(&b);
}

static void test_resume_point(void **state)
{
	(void)state;
	int lost = -1;

	/* Within the history: from the next one, nothing lost. */
	assert_int_equal(vd_events_resume_point(95, 100, 10, &lost), 95);
	assert_int_equal(lost, 0);
	assert_int_equal(vd_events_resume_point(90, 100, 10, &lost), 90);
	assert_int_equal(lost, 0);
	assert_int_equal(vd_events_resume_point(100, 100, 10, &lost), 100);
	assert_int_equal(lost, 0);
	/* Older than the history: what remains, and a loss. */
	assert_int_equal(vd_events_resume_point(89, 100, 10, &lost), 90);
	assert_int_equal(lost, 1);
	assert_int_equal(vd_events_resume_point(0, 100, 10, &lost), 90);
	assert_int_equal(lost, 1);
	/* Everything is still there: from the start, nothing lost. */
	assert_int_equal(vd_events_resume_point(0, 5, 10, &lost), 0);
	assert_int_equal(lost, 0);
	assert_int_equal(vd_events_resume_point(0, 0, 10, &lost), 0);
	assert_int_equal(lost, 0);
	/* No history kept: only the future, anything earlier lost. */
	assert_int_equal(vd_events_resume_point(99, 100, 0, &lost), 100);
	assert_int_equal(lost, 1);
	assert_int_equal(vd_events_resume_point(100, 100, 0, &lost), 100);
	assert_int_equal(lost, 0);
	/* An id never published (the state was reset): from now, a loss. */
	assert_int_equal(vd_events_resume_point(500, 100, 10, &lost), 100);
	assert_int_equal(lost, 1);
}

/* ---- what is remembered between refreshes ------------------------------ */

#define N_RUNS 50
#define N_ROUNDS 100

/* A model and the lineage parts vd_events reads (whole, commits), set by
 * hand: each copy added is verified, its chain intact and committed. */
typedef struct fx {
	uv_loop_t loop;
	vd_config cfg;
	vd_model model;
	vd_lineage l;
	char dir[64];
	vd_state *st;
	vd_events *ev;
} fx;

/* A distinct, stable hex64 for n. */
static const char *hx(unsigned n)
{
	static char tab[4][VD_HASH_HEX_LEN + 1];
	static unsigned next;
	char *h = tab[next++ % 4];

	snprintf(h, VD_HASH_HEX_LEN + 1, "%08x%056x", n * 2654435761u, n);
	return h;
}

static void ev_start(fx *f)
{
	assert_non_null(f->ev = vd_events_new(&f->loop, &f->cfg, f->st));
}

/* Closed and freed, as at a stop (no stream is open). */
static void ev_stop(fx *f)
{
	vd_events_close(f->ev);
	assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
	f->ev = NULL;
}

static fx *fx_new(void)
{
	fx *f = calloc(1, sizeof(*f));
	char err[256];

	assert_non_null(f);
	assert_int_equal(uv_loop_init(&f->loop), 0);
	vd_config_defaults(&f->cfg);
	vd_model_init(&f->model);
	memset(&f->l, 0, sizeof(f->l));
	vd_map_init(&f->l.commits);
	snprintf(f->dir, sizeof(f->dir), "%s/vd-events.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	assert_non_null(mkdtemp(f->dir));
	if (vd_state_open(f->dir, &f->st, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	ev_start(f);
	return f;
}

static void fx_free(fx *f)
{
	char path[sizeof(f->dir) + 300];
	const char *k;
	void *v;
	size_t it = 0;
	DIR *d;
	struct dirent *e;

	ev_stop(f);
	assert_int_equal(uv_loop_close(&f->loop), 0);
	vd_state_close(f->st);
	while (vd_map_next(&f->l.commits, &it, &k, &v))
		free(v);
	vd_map_free(&f->l.commits);
	vd_model_free(&f->model);
	assert_non_null(d = opendir(f->dir));
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", f->dir, e->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(f->dir);
	free(f);
}

/* The trusted artifact of round in run. */
static void head_copy(fx *f, const char *run, int64_t round, const char *hash)
{
	char rel[128];
	vd_copy *c;
	vd_group *g;

	snprintf(rel, sizeof(rel), "%s/round-%05d", run, (int)round);
	assert_non_null(c = vd_model_add_copy(&f->model, rel, run));
	c->hdr.code = VD_OK;
	snprintf(c->hdr.content_hash, sizeof(c->hdr.content_hash), "%s", hash);
	c->hdr.round_index = round;
	c->has_verdict = 1;
	c->code = VD_OK;
	vd_model_index(&f->model, c);
	assert_non_null(g = vd_model_group(&f->model, hash));
	g->chain = VD_CHAIN_INTACT;
	g->committed = 1;
}

static void drop(fx *f, const char *run, int64_t round)
{
	char rel[128];
	vd_copy *c;

	snprintf(rel, sizeof(rel), "%s/round-%05d", run, (int)round);
	assert_non_null(c = vd_model_copy(&f->model, rel));
	vd_model_remove_copy(&f->model, c);
}

/* A RoundClose posted for (run, round): it counts under every policy. */
static void slot_add(fx *f, const char *run, int64_t round, const char *hash)
{
	char key[128];
	vd_commit_slot *sl;
	size_t len = strlen(run) + 1;

	snprintf(key, sizeof(key), "%s\n%d", run, (int)round);
	assert_null(vd_map_get(&f->l.commits, key));
	assert_non_null(sl = calloc(1, sizeof(*sl) + len));
	memcpy(sl + 1, run, len);
	sl->run = (const char *)(sl + 1);
	sl->round_index = round;
	snprintf(sl->first_hash, sizeof(sl->first_hash), "%s", hash);
	sl->src[VD_SRC_ROUNDCLOSE].has = 1;
	sl->src[VD_SRC_ROUNDCLOSE].hash = sl->first_hash;
	sl->src[VD_SRC_ROUNDCLOSE].key_id = "";
	sl->src[VD_SRC_ROUNDCLOSE].where = "api";
	assert_int_equal(vd_map_put(&f->l.commits, key, sl), 0);
}

static void slot_drop(fx *f, const char *run, int64_t round)
{
	char key[128];

	snprintf(key, sizeof(key), "%s\n%d", run, (int)round);
	free(vd_map_del(&f->l.commits, key));
}

/* A whole refresh, as after a scan (commits: the slots were rebuilt). */
static void refresh(fx *f, int commits)
{
	vd_lineage_delta d;

	vd_lineage_delta_init(&d);
	d.whole = 1;
	vd_events_lineage(f->ev, &f->l, &d, &f->model, &f->cfg, commits, 1);
}

typedef struct counted {
	const char *type, *has;
	size_t n;
} counted;

static void count_row(uint64_t id, const char *type, const char *data, void *arg)
{
	counted *c = arg;

	(void)id;
	if (strcmp(type, c->type) == 0 && (c->has == NULL || strstr(data, c->has) != NULL))
		c->n++;
}

/* Events of type in the history (whose data holds has, unless NULL). */
static size_t published(fx *f, const char *type, const char *has)
{
	counted c = { type, has, 0 };

	assert_int_equal(vd_state_load_events(f->st, 0, 1000000, count_row, &c), 0);
	return c.n;
}

static void assert_tracked(fx *f, size_t heads, size_t commits)
{
	size_t h, c;

	vd_events_tracked(f->ev, &h, &c);
	assert_int_equal(h, heads);
	assert_int_equal(c, commits);
}

static void run_name(char *out, size_t n, unsigned i)
{
	snprintf(out, n, "r%02u", i);
}

/* Runs that go away are forgotten; one that comes back is news again. */
static void test_heads_forgotten(void **state)
{
	(void)state;
	fx *f = fx_new();
	char run[16];
	unsigned i;

	for (i = 0; i < N_RUNS; i++) {
		run_name(run, sizeof(run), i);
		head_copy(f, run, 0, hx(i));
	}
	refresh(f, 0);
	assert_int_equal(published(f, "head", NULL), N_RUNS);
	assert_tracked(f, N_RUNS, 0);
	refresh(f, 0);
	assert_int_equal(published(f, "head", NULL), N_RUNS);
	for (i = 0; i < N_RUNS; i++) {
		run_name(run, sizeof(run), i);
		drop(f, run, 0);
	}
	refresh(f, 0);
	assert_int_equal(published(f, "head", NULL), N_RUNS);
	assert_tracked(f, 0, 0);
	/* Back, with the same head: announced again. */
	head_copy(f, "r07", 0, hx(7));
	refresh(f, 0);
	assert_int_equal(published(f, "head", "\"run\":\"r07\""), 2);
	assert_int_equal(published(f, "head", NULL), N_RUNS + 1);
	assert_tracked(f, 1, 0);
	/* A head that loses its trust goes too, and is news when it is back. */
	vd_model_group(&f->model, hx(7))->committed = 0;
	refresh(f, 0);
	assert_tracked(f, 0, 0);
	vd_model_group(&f->model, hx(7))->committed = 1;
	refresh(f, 0);
	assert_int_equal(published(f, "head", "\"run\":\"r07\""), 3);
	fx_free(f);
}

/* A restart announces only the heads that changed meanwhile, and forgets
 * those of runs that are gone. */
static void test_heads_restart(void **state)
{
	(void)state;
	fx *f = fx_new();

	head_copy(f, "a", 0, hx(1));
	head_copy(f, "b", 0, hx(2));
	head_copy(f, "c", 0, hx(3));
	refresh(f, 0);
	assert_int_equal(published(f, "head", NULL), 3);
	drop(f, "c", 0);
	refresh(f, 0);
	assert_tracked(f, 2, 0);
	ev_stop(f);
	head_copy(f, "b", 1, hx(4));     /* b moved while the daemon was down */
	ev_start(f);
	assert_tracked(f, 3, 0);          /* a, b and c, as the history has them */
	refresh(f, 0);
	assert_int_equal(published(f, "head", NULL), 4);
	assert_int_equal(published(f, "head", "\"run\":\"b\",\"round_index\":1"), 1);
	assert_tracked(f, 2, 0);
	refresh(f, 0);
	assert_int_equal(published(f, "head", NULL), 4);
	head_copy(f, "c", 0, hx(3));
	refresh(f, 0);
	assert_int_equal(published(f, "head", "\"run\":\"c\""), 2);
	assert_tracked(f, 3, 0);
	fx_free(f);
}

/* Commitments that stop counting (a ledger rewritten or forgotten, a run
 * gone) are forgotten; one that counts again is announced again. */
static void test_commits_forgotten(void **state)
{
	(void)state;
	fx *f = fx_new();
	int r;

	for (r = 0; r < N_ROUNDS; r++)
		slot_add(f, "run", r, hx((unsigned)r));
	refresh(f, 1);
	/* Found at start: where the daemon starts from, not news. */
	assert_int_equal(published(f, "commitment", NULL), 0);
	assert_tracked(f, 0, N_ROUNDS);
	for (r = 0; r < N_ROUNDS; r++)
		slot_drop(f, "run", r);
	refresh(f, 1);
	assert_tracked(f, 0, 0);
	for (r = 0; r < 10; r++)
		slot_add(f, "run", r, hx((unsigned)r));
	refresh(f, 1);
	assert_int_equal(published(f, "commitment", NULL), 10);
	assert_tracked(f, 0, 10);
	/* Unchanged: nothing new, nothing more held. */
	refresh(f, 1);
	assert_int_equal(published(f, "commitment", NULL), 10);
	assert_tracked(f, 0, 10);
	/* One stops counting, then counts again. */
	((vd_commit_slot *)vd_map_get(&f->l.commits, "run\n3"))->src[VD_SRC_ROUNDCLOSE].has = 0;
	refresh(f, 1);
	assert_tracked(f, 0, 9);
	((vd_commit_slot *)vd_map_get(&f->l.commits, "run\n3"))->src[VD_SRC_ROUNDCLOSE].has = 1;
	refresh(f, 1);
	assert_int_equal(published(f, "commitment", "\"round_index\":3,"), 2);
	assert_int_equal(published(f, "commitment", NULL), 11);
	assert_tracked(f, 0, 10);
	fx_free(f);
}

/* A first pass in slices: its slots' commitments are recorded a turn
 * before its end (not news); its end looks at the heads only, unless the
 * slots were rebuilt meanwhile. */
static void test_commits_primed(void **state)
{
	(void)state;
	fx *f = fx_new();
	unsigned r;

	for (r = 0; r < 10; r++)
		slot_add(f, "run", r, hx(r));
	assert_int_equal(vd_events_prime(f->ev, &f->l, &f->cfg, 0), 0);
	assert_int_equal(vd_events_prime(f->ev, &f->l, &f->cfg, 1), 1);
	assert_tracked(f, 0, 10);
	assert_int_equal(vd_events_prime(f->ev, &f->l, &f->cfg, 1), 0);
	refresh(f, 1);
	assert_int_equal(published(f, "commitment", NULL), 0);
	assert_tracked(f, 0, 10);
	/* Once primed and seen, a refresh looks at the slots again. */
	slot_add(f, "run", 10, hx(10));
	refresh(f, 1);
	assert_int_equal(published(f, "commitment", NULL), 1);
	assert_tracked(f, 0, 11);
	fx_free(f);

	/* Rebuilt between the priming and the pass's end: news. */
	f = fx_new();
	for (r = 0; r < 10; r++)
		slot_add(f, "run", r, hx(r));
	assert_int_equal(vd_events_prime(f->ev, &f->l, &f->cfg, 1), 1);
	slot_add(f, "run", 10, hx(10));
	f->l.slots_gen++;
	refresh(f, 1);
	assert_int_equal(published(f, "commitment", NULL), 1);
	assert_tracked(f, 0, 11);
	fx_free(f);
}

/* A refresh after the lineage rebuilt the slot of (run, round) alone. */
static void refresh_one(fx *f, const char *run, int64_t round)
{
	vd_slot_ref ref = { run, round };
	vd_lineage_delta d;

	vd_lineage_delta_init(&d);
	d.whole = 1;
	f->l.only = &ref;
	f->l.n_only = 1;
	f->l.commits_in_place = 1;
	vd_events_lineage(f->ev, &f->l, &d, &f->model, &f->cfg, 1, 1);
	f->l.only = NULL;
	f->l.n_only = 0;
	f->l.commits_in_place = 0;
}

/* The slots rebuilt alone are compared alone, with the same news as a
 * whole comparison. */
static void test_commits_in_place(void **state)
{
	(void)state;
	fx *f = fx_new();
	vd_commit_slot *sl;
	int r;

	for (r = 0; r < 5; r++)
		slot_add(f, "run", r, hx((unsigned)r));
	refresh(f, 1);
	assert_tracked(f, 0, 5);
	/* A round appended: news once. */
	slot_add(f, "run", 5, hx(5));
	refresh_one(f, "run", 5);
	assert_int_equal(published(f, "commitment", NULL), 1);
	assert_tracked(f, 0, 6);
	refresh_one(f, "run", 5);
	assert_int_equal(published(f, "commitment", NULL), 1);
	/* Another hash for it: news; no longer counting: forgotten. */
	sl = vd_map_get(&f->l.commits, "run\n5");
	snprintf(sl->first_hash, sizeof(sl->first_hash), "%s", hx(50));
	refresh_one(f, "run", 5);
	assert_int_equal(published(f, "commitment", hx(50)), 1);
	sl->src[VD_SRC_ROUNDCLOSE].has = 0;
	refresh_one(f, "run", 5);
	assert_tracked(f, 0, 5);
	/* A whole comparison afterwards finds nothing more. */
	sl->src[VD_SRC_ROUNDCLOSE].has = 1;
	refresh_one(f, "run", 5);
	assert_int_equal(published(f, "commitment", NULL), 3);
	refresh(f, 1);
	assert_int_equal(published(f, "commitment", NULL), 3);
	assert_tracked(f, 0, 6);
	fx_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_id),
		cmocka_unit_test(test_frame),
		cmocka_unit_test(test_resume_point),
		cmocka_unit_test(test_heads_forgotten),
		cmocka_unit_test(test_heads_restart),
		cmocka_unit_test(test_commits_forgotten),
		cmocka_unit_test(test_commits_in_place),
		cmocka_unit_test(test_commits_primed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

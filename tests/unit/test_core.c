/*
 * The commitments state machine (vd_core) through its one entry: a post
 * takes effect only once durable and answers with what lineage changed; a
 * failed persist leaves the machine as it was; a statement is remembered
 * under every signer or, past a failure, reported not durable; a whole
 * pass remembers what it finds committed a slice at a time; a restart's
 * memory empties lineage; a job's result is taken into its copy with the
 * outcome the shell acts on; waiters are answered once, never early; the
 * verification schedule answers with jobs to start, take back and promote,
 * counts the queue's room, retries a job out of time at its deadline and
 * scrubs each verified copy once a pass; the first whole pass over a scan
 * goes in slices, said once at its end.
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
#include <cmocka.h>

#include "lineage_fx.h"
#include "vd_core.h"

/* A persistence that counts what it was given, or fails from a call on. */
typedef struct fake_db {
	int calls, kept;
	int fail_from;                /* 0: never; else the call that fails first */
} fake_db;

static int fake_persist(const vd_mem_record *rec, void *arg)
{
	fake_db *db = arg;

	(void)rec;
	db->calls++;
	if (db->fail_from > 0 && db->calls >= db->fail_from)
		return -EIO;
	db->kept++;
	return 0;
}

typedef struct env {
	fx *f;
	fake_db db;
	vd_plan_queue queue;          /* the hasher queue; closed unless a test opens it */
	int scanned;
} env;

static env *env_new(void)
{
	env *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	e->f = fx_new();
	e->scanned = 1;
	vd_core_free(&e->f->core);
	vd_core_init(&e->f->core, fake_persist, &e->db);
	return e;
}

static void env_free(env *e)
{
	fx_free(e->f);
	free(e);
}

static void step(env *e, const vd_core_input *in, vd_core_output *out)
{
	vd_core_input src = { .kind = VD_CORE_SOURCES };
	vd_core_output ignored;

	src.u.sources.src = (vd_core_sources){ vd_config_trust(&e->f->cfg),
		&e->f->ring, NULL, e->f->ledgers, e->f->n_ledgers, e->scanned, e->queue };
	src.u.sources.change = VD_REFRESH_MODEL;
	vd_core_step(&e->f->core, &src, &ignored);
	vd_core_step(&e->f->core, in, out);
}

static void core_refresh(env *e, vd_refresh what)
{
	vd_core_input in = { .kind = VD_CORE_REFRESH, .u.refresh = what };
	vd_core_output out;

	step(e, &in, &out);
	assert_non_null(out.delta);
}

static int post_token(env *e, const char *run, int64_t round, const char *hash,
    vd_core_output *out)
{
	vd_core_input in = { .kind = VD_CORE_POST };
	vd_commitment c;

	fill_commitment(&c, run, round, hash, NULL);
	in.u.post.c = &c;
	step(e, &in, out);
	return out->result;
}

static const vd_group *group(env *e, unsigned n)
{
	const vd_group *g = vd_model_group(e->f->model, H(n));

	assert_non_null(g);
	return g;
}

/* Trusted only once the post is durable; the post answers with the
 * refresh it caused. */
static void test_post_durable_then_visible(void **state)
{
	env *e = env_new();
	vd_core_output out;

	(void)state;
	pin(e->f, "genesis_hash", "r", -1, H(0));
	chain(e->f, "r", 0, 1, V_OK);
	core_refresh(e, VD_REFRESH_WHOLE);
	assert_true(vd_group_trusted(group(e, 0)));
	assert_false(vd_group_trusted(group(e, 1)));

	e->db.fail_from = 1;
	assert_int_equal(post_token(e, "r", 0, H(1), &out), -EIO);
	assert_null(out.delta);
	assert_int_equal(vd_core_memory(&e->f->core)->n_posted, 0);
	core_refresh(e, VD_REFRESH_COMMITS);
	assert_false(vd_group_trusted(group(e, 1)));

	e->db.fail_from = 0;
	assert_int_equal(post_token(e, "r", 0, H(1), &out), VD_POST_NEW);
	assert_non_null(out.delta);
	assert_int_equal(out.refreshed, VD_REFRESH_COMMITS);
	assert_true(vd_group_trusted(group(e, 1)));
	assert_int_equal(post_token(e, "r", 0, H(1), &out), VD_POST_KNOWN);
	env_free(e);
}

/* Another hash for a round is a conflict: recorded, the existing hash
 * said, and the round no longer trusted. */
static void test_post_conflict(void **state)
{
	env *e = env_new();
	vd_core_output out;

	(void)state;
	chain(e->f, "r", 0, 1, V_OK);
	assert_int_equal(post_token(e, "r", 0, H(1), &out), VD_POST_NEW);
	assert_int_equal(post_token(e, "r", 0, X(1), &out), VD_POST_CONFLICT);
	assert_string_equal(out.existing, H(1));
	assert_int_equal(vd_core_memory(&e->f->core)->n_equivs, 1);
	env_free(e);
}

/* A statement under two signers: both remembered, or -EIO when the second
 * cannot be made durable (the first stays: it is durable). */
static void test_statement_signers(void **state)
{
	env *e = env_new();
	vd_core_input in = { .kind = VD_CORE_STATEMENT };
	vd_core_output out;
	vd_signed_stmt ss;
	const char *ids[] = { vd_key_id(keys[0]), vd_key_id(keys[1]) };

	(void)state;
	stmt_at(&ss, 1, VD_STMT_ROUNDCLOSE, "r", ids[0]);
	ss.st.schema_version = 2;
	ss.st.round_index = 0;
	snprintf(ss.st.hash, sizeof(ss.st.hash), "%s", H(1));
	in.u.statement.st = &ss.st;
	in.u.statement.run = ss.run;
	in.u.statement.key_ids = ids;
	in.u.statement.n_keys = 2;
	in.u.statement.where = ss.where;
	e->db.fail_from = 2;
	step(e, &in, &out);
	assert_int_equal(out.result, -EIO);
	assert_int_equal(vd_core_memory(&e->f->core)->n_stmts, 1);
	e->db.fail_from = 0;
	step(e, &in, &out);
	assert_int_equal(out.result, 1);          /* the second key only */
	assert_int_equal(vd_core_memory(&e->f->core)->n_stmts, 2);
	step(e, &in, &out);
	assert_int_equal(out.result, 0);
	env_free(e);
}

/* A whole pass remembers what it finds committed a slice at a time from
 * the next input on; what is left is remembered before a post. */
static void test_retention_slices(void **state)
{
	env *e = env_new();
	vd_core_input in = { .kind = VD_CORE_RETAIN, .u.budget = 1 };
	vd_core_output out;
	int i;

	(void)state;
	pin(e->f, "genesis_hash", "r", -1, H(0));
	chain(e->f, "r", 0, VD_RETAIN_SLICE + 2, V_OK);
	for (i = 0; i < VD_RETAIN_SLICE + 2; i++)
		ledger(e->f, "r", i, H((unsigned)i + 1));
	core_refresh(e, VD_REFRESH_WHOLE);
	/* The pass's own turn remembers none of them. */
	assert_true(vd_core_retaining(&e->f->core));
	assert_int_equal(e->db.kept, 0);
	in.u.budget = VD_RETAIN_SLICE;
	step(e, &in, &out);
	assert_true(out.retaining);
	assert_int_equal(e->db.kept, VD_RETAIN_SLICE);
	in.u.budget = 1;
	step(e, &in, &out);
	assert_true(out.retaining);
	assert_int_equal(e->db.kept, VD_RETAIN_SLICE + 1);
	assert_int_equal(post_token(e, "r", VD_RETAIN_SLICE + 2, hx(FX_SPARE_HASH), &out),
	    VD_POST_NEW);
	assert_false(out.retaining);
	assert_true(vd_core_is_retained(&e->f->core, H(VD_RETAIN_SLICE + 2)));
	env_free(e);
}

/* A whole pass while the last one's list is still being remembered: the
 * list is made again, nothing remembered in the pass's own turn, and every
 * committed group is remembered a slice at a time all the same. */
static void test_retention_listed_again(void **state)
{
	env *e = env_new();
	vd_core_input in = { .kind = VD_CORE_RETAIN, .u.budget = VD_RETAIN_SLICE };
	vd_core_output out;
	int i;

	(void)state;
	pin(e->f, "genesis_hash", "r", -1, H(0));
	chain(e->f, "r", 0, 2 * VD_RETAIN_SLICE, V_OK);
	for (i = 0; i < 2 * VD_RETAIN_SLICE; i++)
		ledger(e->f, "r", i, H((unsigned)i + 1));
	core_refresh(e, VD_REFRESH_WHOLE);
	step(e, &in, &out);
	assert_int_equal(e->db.kept, VD_RETAIN_SLICE);
	core_refresh(e, VD_REFRESH_WHOLE);
	assert_true(vd_core_retaining(&e->f->core));
	assert_int_equal(e->db.kept, VD_RETAIN_SLICE);
	step(e, &in, &out);
	assert_true(out.retaining);
	assert_int_equal(e->db.kept, 2 * VD_RETAIN_SLICE);
	step(e, &in, &out);
	assert_false(out.retaining);
	for (i = 1; i <= 2 * VD_RETAIN_SLICE; i++)
		assert_true(vd_core_is_retained(&e->f->core, H((unsigned)i)));
	env_free(e);
}

/* Rounds 0..9 of run r committed by its ledger, the first whole pass over
 * the scan begun in slices of 2 chains: nothing said yet, nothing
 * trusted, no head. */
static env *pass_begun(void)
{
	env *e = env_new();
	vd_core_input in = { .kind = VD_CORE_REFRESH, .u.refresh = VD_REFRESH_COMMITS };
	vd_core_output out;
	int i;

	pin(e->f, "genesis_hash", "r", -1, H(0));
	chain(e->f, "r", 0, 9, V_OK);
	for (i = 0; i < 9; i++)
		ledger(e->f, "r", i, H((unsigned)i + 1));
	e->f->core.pass_slice = 2;
	step(e, &in, &out);
	assert_null(out.delta);
	assert_true(out.passing);
	assert_true(vd_core_passing(&e->f->core));
	assert_false(vd_core_dirty(&e->f->core));
	for (i = 0; i <= 9; i++)
		assert_false(vd_group_trusted(group(e, (unsigned)i)));
	assert_int_equal(vd_lineage_head(vd_core_lineage(&e->f->core), NULL, NULL), -1);
	return e;
}

/* A verdict while the pass goes on: a refresh of the model waits for its
 * end, the mark stays; VD_CORE_PASS ends the pass with its changes, as a
 * whole refresh's, and the next catches up the mark. */
static void test_pass_in_slices(void **state)
{
	env *e = pass_begun();
	vd_core_input touch = { .kind = VD_CORE_TOUCH };
	vd_core_input in = { .kind = VD_CORE_REFRESH, .u.refresh = VD_REFRESH_MODEL };
	vd_core_input more = { .kind = VD_CORE_PASS, .u.budget = 2 };
	vd_core_output out;
	int slices = 0;

	(void)state;
	step(e, &more, &out);
	assert_true(out.passing);
	assert_null(out.delta);
	reverdict(e->f, "r/round-00009", V_FAIL);
	step(e, &touch, &out);
	step(e, &in, &out);
	assert_null(out.delta);
	assert_true(out.passing);
	assert_true(vd_core_dirty(&e->f->core));
	do {
		step(e, &more, &out);
		slices++;
	} while (out.passing);
	/* 10 chains, 2 a slice, then the head and the alerts. */
	assert_int_equal(slices, 5);
	assert_non_null(out.delta);
	assert_true(out.delta->whole);
	assert_int_equal(out.refreshed, VD_REFRESH_COMMITS);
	assert_true(out.retaining);
	assert_true(vd_group_trusted(group(e, 8)));
	assert_true(vd_core_dirty(&e->f->core));
	step(e, &more, &out);
	assert_non_null(out.delta);
	assert_false(out.delta->whole);
	assert_false(vd_core_dirty(&e->f->core));
	assert_false(vd_group_trusted(group(e, 9)));
	assert_int_equal(vd_lineage_head(vd_core_lineage(&e->f->core), NULL, NULL), 8);
	env_free(e);
}

/* A copy of a group the pass computed fails while the pass goes on: the
 * group, and the chains it granted, read pending again at once (not
 * trusted on what it no longer is), and the pass computes them anew. */
static void test_pass_undoes_stale_grant(void **state)
{
	env *e = pass_begun();
	vd_core_input in = { .kind = VD_CORE_REFRESH, .u.refresh = VD_REFRESH_MODEL };
	vd_core_input more = { .kind = VD_CORE_PASS, .u.budget = 4 };
	vd_core_output out;

	(void)state;
	step(e, &more, &out);
	assert_true(out.passing);
	assert_true(vd_group_trusted(group(e, 1)));
	assert_true(vd_group_trusted(group(e, 2)));
	reverdict(e->f, "r/round-00001", V_FAIL);
	step(e, &in, &out);
	assert_true(out.passing);
	assert_false(vd_group_trusted(group(e, 1)));
	assert_false(vd_group_trusted(group(e, 2)));
	assert_true(vd_group_trusted(group(e, 0)));
	more.u.budget = SIZE_MAX;
	step(e, &more, &out);
	assert_false(out.passing);
	assert_false(vd_group_trusted(group(e, 1)));
	assert_false(vd_group_trusted(group(e, 2)));
	assert_true(vd_group_trusted(group(e, 0)));
	env_free(e);
}

/* After the first pass, verdicts that mark everything (a model that takes
 * a few marks for everything) make the refresh a pass in place: the group
 * that changed since it was computed and what it granted read pending at
 * once, the others keep what they read, and it is no first pass (starting
 * is over); its end reads as a whole refresh would. */
static void test_pass_in_place(void **state)
{
	env *e = pass_begun();
	vd_core_input in = { .kind = VD_CORE_REFRESH, .u.refresh = VD_REFRESH_MODEL };
	vd_core_input more = { .kind = VD_CORE_PASS, .u.budget = SIZE_MAX };
	vd_core_output out;
	int i;

	(void)state;
	step(e, &more, &out);
	assert_false(out.passing);
	for (i = 0; i <= 9; i++)
		assert_true(vd_group_trusted(group(e, (unsigned)i)));
	e->f->core.model.dirty_whole_min = 1;
	reverdict(e->f, "r/round-00007", V_FAIL);
	reverdict(e->f, "r/round-00008", V_OK);
	assert_true(vd_model_dirty_all(e->f->model));
	step(e, &in, &out);
	assert_true(out.passing);
	assert_true(vd_lineage_pass_in_place(vd_core_lineage(&e->f->core)));
	for (i = 0; i <= 6; i++)
		assert_true(vd_group_trusted(group(e, (unsigned)i)));
	for (i = 7; i <= 9; i++)
		assert_false(vd_group_trusted(group(e, (unsigned)i)));
	assert_int_equal(vd_lineage_head(vd_core_lineage(&e->f->core), NULL, NULL), -1);
	more.u.budget = 2;
	step(e, &more, &out);
	assert_true(out.passing);
	assert_true(vd_group_trusted(group(e, 6)));
	more.u.budget = SIZE_MAX;
	step(e, &more, &out);
	assert_false(out.passing);
	assert_non_null(out.delta);
	assert_true(out.delta->whole);
	for (i = 0; i <= 9; i++)
		assert_int_equal(vd_group_trusted(group(e, (unsigned)i)), i <= 6);
	assert_int_equal(vd_lineage_head(vd_core_lineage(&e->f->core), NULL, NULL), 6);
	env_free(e);
}

/* A header moved off the round its commitment names while the pass goes
 * on: the round check the slots read changed, and the refresh is made
 * now (the pass dropped), so that nothing reads committed on it. */
static void test_pass_round_check_changed(void **state)
{
	env *e = env_new();
	vd_core_input in = { .kind = VD_CORE_REFRESH, .u.refresh = VD_REFRESH_COMMITS };
	vd_core_input more = { .kind = VD_CORE_PASS, .u.budget = 4 };
	vd_core_output out;
	vd_copy *c;
	int i;

	(void)state;
	pin(e->f, "genesis_hash", "r", -1, H(0));
	chain(e->f, "r", 0, 9, V_OK);
	for (i = 0; i < 9; i++)
		post(e->f, "r", i, H((unsigned)i + 1), NULL);
	e->f->core.pass_slice = 2;
	step(e, &in, &out);
	assert_true(out.passing);
	in.u.refresh = VD_REFRESH_MODEL;
	step(e, &more, &out);
	assert_true(out.passing);
	assert_true(group(e, 1)->committed);
	c = vd_model_copy(e->f->model, "r/round-00001");
	vd_model_unindex(e->f->model, c);
	c->hdr.round_index = 5;
	vd_model_index(e->f->model, c);
	step(e, &in, &out);
	assert_false(group(e, 1)->committed);
	assert_false(vd_group_trusted(group(e, 1)));
	assert_false(out.passing);
	assert_non_null(out.delta);
	env_free(e);
}

/* A copy removed while the pass goes on ends it first: its artifact is
 * remembered as the pass found it committed, and its link is pruned. */
static void test_pass_ended_by_removal(void **state)
{
	env *e = pass_begun();
	vd_core_input gone = { .kind = VD_CORE_COPY_GONE, .u.relpath = "r/round-00009" };
	vd_core_output out;

	(void)state;
	assert_true(vd_core_pass_first(&e->f->core, VD_CORE_COPY_GONE));
	assert_false(vd_core_pass_first(&e->f->core, VD_CORE_JOB_DONE));
	step(e, &gone, &out);
	assert_false(out.passing);
	assert_non_null(out.delta);
	assert_true(out.delta->whole);
	assert_true(out.pruned);
	assert_true(vd_core_is_retained(&e->f->core, H(9)));
	env_free(e);
}

/* A commitment posted while the pass goes on ends the pass first (the
 * shell sends VD_CORE_PASS for it before), then takes the post: its
 * refresh answers. */
static void test_pass_dropped_by_post(void **state)
{
	env *e = pass_begun();
	vd_core_output out;

	(void)state;
	assert_int_equal(post_token(e, "r", 9, hx(FX_SPARE_HASH), &out), VD_POST_NEW);
	assert_false(out.passing);
	assert_non_null(out.delta);
	assert_int_equal(out.refreshed, VD_REFRESH_COMMITS);
	assert_true(vd_group_trusted(group(e, 8)));
	assert_true(vd_group_trusted(group(e, 9)));
	assert_int_equal(vd_lineage_head(vd_core_lineage(&e->f->core), NULL, NULL), 9);
	env_free(e);
}

/* A restart's memory replaces the memory, and lineage starts again from
 * nothing until the next (whole) refresh. */
static void test_restore(void **state)
{
	env *e = env_new();
	vd_core_input in = { .kind = VD_CORE_RESTORE };
	vd_core_output out;
	vd_memory loaded;
	vd_mem_record rec;

	(void)state;
	pin(e->f, "genesis_hash", "r", -1, H(0));
	chain(e->f, "r", 0, 1, V_OK);
	assert_int_equal(post_token(e, "r", 0, H(1), &out), VD_POST_NEW);
	assert_true(vd_lineage_slot_count(vd_core_lineage(&e->f->core)) > 0);
	vd_memory_init(&loaded);
	vd_mem_record_init(&rec, VD_MEM_POST);
	fill_commitment(&rec.c, "r", 0, H(1), NULL);
	assert_int_equal(vd_memory_restore(&loaded, &rec), VD_RESTORE_APPLIED);
	in.u.restore = &loaded;
	step(e, &in, &out);
	assert_int_equal(vd_lineage_slot_count(vd_core_lineage(&e->f->core)), 0);
	assert_true(vd_core_dirty(&e->f->core));
	assert_int_equal(loaded.n_posted, 0);       /* taken over */
	core_refresh(e, VD_REFRESH_MODEL);
	assert_true(vd_group_trusted(group(e, 1)));
	vd_memory_free(&loaded);
	env_free(e);
}

static vd_core_output job(env *e, vd_copy *c, uint64_t id, vd_code code,
    vd_abandon abandoned, int changed_under)
{
	vd_core_input in = { .kind = VD_CORE_JOB_DONE };
	vd_core_output out;
	vd_job_result r;
	vd_verdict v;

	memset(&v, 0, sizeof(v));
	v.code = code;
	memset(&r, 0, sizeof(r));
	r.id = id;
	r.relpath = c->relpath;
	r.kind = c->inflight ? c->inflight_kind : VD_JOB_BACKGROUND;
	r.gen = 7;
	r.abandoned = abandoned;
	r.verdict = &v;
	r.fp_before = r.fp_after = c->fp;
	r.fp_after.digest[1] ^= (uint8_t)changed_under;
	r.changed = "";
	in.u.job = &r;
	step(e, &in, &out);
	return out;
}

/* Each outcome of a job, and what it leaves in its copy. */
static void test_job_outcomes(void **state)
{
	env *e = env_new();
	vd_copy *c;

	(void)state;
	chain(e->f, "r", 0, 0, V_BUSY);
	c = vd_model_copy(e->f->model, "r/round-00000");
	assert_non_null(c);
	assert_int_equal(job(e, c, 0, VD_OK, VD_ABANDON_NONE, 0).result, VD_JOB_DROPPED);
	assert_int_equal(c->inflight, busy_job);

	assert_int_equal(job(e, c, busy_job, VD_OK, VD_ABANDON_NONE, 0).result, VD_JOB_JUDGED);
	assert_int_equal(c->inflight, 0);
	assert_int_equal(c->done_gen, 7);
	assert_int_equal(vd_copy_settled(c), VD_AS_VERIFIED);

	c->inflight = busy_job;
	assert_int_equal(job(e, c, busy_job, VD_IO_ERROR, VD_ABANDON_TIME, 0).result,
	    VD_JOB_TIMED_OUT);
	assert_int_equal(c->timeouts, 1);

	c->inflight = busy_job;
	assert_int_equal(job(e, c, busy_job, VD_OK, VD_ABANDON_NONE, 1).result, VD_JOB_CHANGED);
	assert_int_equal(c->timeouts, 0);
	assert_false(vd_fingerprint_eq(&c->fp, &c->verdict_fp));  /* describes other bytes */

	c->inflight = busy_job;
	assert_int_equal(job(e, c, busy_job, VD_IO_ERROR, VD_ABANDON_GONE, 0).result, VD_JOB_GONE);
	assert_false(c->fp.ok);
	env_free(e);
}

static void wait_for(vd_core_input *in, char **paths, const uint64_t *gens,
    uint64_t deadline_ms, void *user)
{
	*in = (vd_core_input){ .kind = VD_CORE_WAIT };
	in->u.wait.relpaths = paths;
	in->u.wait.gens = gens;
	in->u.wait.n = 1;
	in->u.wait.deadline_ms = deadline_ms;
	in->u.wait.user = user;
}

static vd_core_output wait_input(env *e, vd_core_input *in)
{
	vd_core_output out;

	step(e, in, &out);
	return out;
}

/* A client waits for a copy's generation: answered once its job is
 * judged and a check comes, never before; another times out at the first
 * tick past its deadline; a cancelled one is never answered. */
static void test_waiters(void **state)
{
	env *e = env_new();
	char path[] = "r/round-00000";
	char *paths[] = { path };
	uint64_t gens[] = { 7 };
	int user1, user2, user3;
	vd_core_input in = { .kind = VD_CORE_WAIT };
	vd_core_output out;
	uint64_t id3;
	vd_copy *c;

	(void)state;
	chain(e->f, "r", 0, 0, V_BUSY);
	c = vd_model_copy(e->f->model, paths[0]);
	wait_for(&in, paths, gens, 1000, &user1);
	out = wait_input(e, &in);
	assert_int_equal(out.result, 0);
	assert_int_equal(out.n_answered, 0);
	assert_int_equal(out.deadline_ms, 1000);
	wait_for(&in, paths, gens, 500, &user2);
	assert_int_equal(wait_input(e, &in).result, 0);
	wait_for(&in, paths, gens, 2000, &user3);
	id3 = wait_input(e, &in).wait_id;

	in = (vd_core_input){ .kind = VD_CORE_WAIT_CANCEL, .u.wait_id = id3 };
	assert_int_equal(wait_input(e, &in).result, 0);
	in = (vd_core_input){ .kind = VD_CORE_TICK, .u.now_ms = 499 };
	assert_int_equal(wait_input(e, &in).n_answered, 0);
	in.u.now_ms = 500;
	out = wait_input(e, &in);
	assert_int_equal(out.n_answered, 1);
	assert_ptr_equal(out.answered[0].user, &user2);
	assert_true(out.answered[0].timed_out);

	in = (vd_core_input){ .kind = VD_CORE_WAIT_CHECK };
	assert_int_equal(wait_input(e, &in).n_answered, 0);     /* its job runs */
	assert_int_equal(job(e, c, busy_job, VD_OK, VD_ABANDON_NONE, 0).result, VD_JOB_JUDGED);
	out = wait_input(e, &in);
	assert_int_equal(out.n_answered, 1);
	assert_ptr_equal(out.answered[0].user, &user1);
	assert_false(out.answered[0].timed_out);
	assert_int_equal(out.deadline_ms, VD_WAIT_NONE);
	in = (vd_core_input){ .kind = VD_CORE_WAIT_FIRE_ALL };
	assert_int_equal(wait_input(e, &in).n_answered, 0);     /* the cancelled one too */
	env_free(e);
}

/* ---- the schedule -------------------------------------------------------- */

static vd_core_output verify_input(env *e, const char *relpath, vd_job_kind kind)
{
	vd_core_input in = { .kind = VD_CORE_VERIFY };
	vd_core_output out;

	in.u.verify.relpath = relpath;
	in.u.verify.kind = kind;
	step(e, &in, &out);
	return out;
}

static vd_core_output answer_input(env *e, vd_core_in_kind kind, const vd_copy *c, uint64_t id)
{
	vd_core_input in = { .kind = kind };
	vd_core_output out;

	in.u.action.relpath = c->relpath;
	in.u.action.id = id;
	step(e, &in, &out);
	return out;
}

static void assert_start(const vd_core_output *out, size_t i, const vd_copy *c, vd_job_kind kind,
    uint64_t gen)
{
	assert_true(i < out->n_actions);
	assert_int_equal(out->actions[i].kind, VD_ACT_START);
	assert_ptr_equal(out->actions[i].copy, c);
	assert_int_equal(out->actions[i].job_kind, kind);
	assert_int_equal(out->actions[i].gen, gen);
	assert_int_equal(out->actions[i].id, c->inflight);
}

/* A verification asked for is a job to start; one more asked for while
 * it is in flight is booked; a client's takes the queued background job
 * back (an action) and, once the queue said it had not started, queues it
 * again ahead, answering both; when it returns, nothing follows. */
static void test_verify_actions(void **state)
{
	env *e = env_new();
	vd_core_output out;
	vd_copy *c;
	uint64_t first;

	(void)state;
	e->queue = (vd_plan_queue){ 0, 2, 1 };
	c = copy(e->f, "r", "a", H(1), 0, NULL, V_NONE);
	out = verify_input(e, c->relpath, VD_JOB_BACKGROUND);
	assert_int_equal(out.result, 0);
	assert_int_equal(out.gen, 1);
	assert_int_equal(out.n_actions, 1);
	assert_start(&out, 0, c, VD_JOB_BACKGROUND, 1);
	first = c->inflight;
	e->queue.waiting = 1;

	out = verify_input(e, c->relpath, VD_JOB_BACKGROUND);
	assert_int_equal(out.gen, 2);
	assert_int_equal(out.n_actions, 0);
	assert_true(c->again);
	out = verify_input(e, c->relpath, VD_JOB_EXPLICIT);
	assert_int_equal(out.gen, 2);
	assert_int_equal(out.n_actions, 1);
	assert_int_equal(out.actions[0].kind, VD_ACT_TAKE_BACK);
	assert_int_equal(out.actions[0].id, first);
	assert_int_equal(c->again_kind, VD_JOB_EXPLICIT);

	e->queue.waiting = 0;
	out = answer_input(e, VD_CORE_TAKEN_BACK, c, first);
	assert_int_not_equal(c->inflight, first);
	assert_start(&out, 0, c, VD_JOB_EXPLICIT, 2);
	assert_false(c->again);
	out = answer_input(e, VD_CORE_TAKEN_BACK, c, first);     /* not its job now */
	assert_int_equal(out.n_actions, 0);

	out = job(e, c, c->inflight, VD_OK, VD_ABANDON_NONE, 0);
	assert_int_equal(out.result, VD_JOB_JUDGED);
	assert_int_equal(out.n_actions, 0);
	assert_int_equal(c->inflight, 0);
	out = verify_input(e, "r/none", VD_JOB_BACKGROUND);
	assert_int_equal(out.result, -ENOENT);
	env_free(e);
}

/* The queue's room as the core counts it: a background job finds it full
 * and waits in the backlog, a client's may go past it to twice the bound;
 * a job returning makes room for the backlog's first; a job the queue
 * refused after all waits in the backlog; bytes changed under a job run it
 * again at its generation; stopping, nothing is queued. */
static void test_queue_room(void **state)
{
	env *e = env_new();
	vd_core_output out;
	vd_copy *a, *b;

	(void)state;
	e->queue = (vd_plan_queue){ 1, 1, 1 };
	a = copy(e->f, "r", "a", H(1), 0, NULL, V_NONE);
	b = copy(e->f, "r", "b", H(2), 1, H(1), V_NONE);
	out = verify_input(e, a->relpath, VD_JOB_BACKGROUND);
	assert_int_equal(out.result, -EAGAIN);
	assert_true(a->backlog);
	assert_int_equal(out.n_actions, 0);
	out = verify_input(e, b->relpath, VD_JOB_EXPLICIT);
	assert_int_equal(out.result, 0);
	assert_start(&out, 0, b, VD_JOB_EXPLICIT, 1);
	e->queue.waiting = 2;
	assert_int_equal(verify_input(e, a->relpath, VD_JOB_EXPLICIT).result, -EAGAIN);

	/* b started, then returned: a, first in the backlog, is queued. */
	e->queue.waiting = 0;
	out = job(e, b, b->inflight, VD_OK, VD_ABANDON_NONE, 0);
	assert_int_equal(out.result, VD_JOB_JUDGED);
	assert_start(&out, 0, a, VD_JOB_BACKGROUND, 1);
	assert_false(a->backlog);
	out = answer_input(e, VD_CORE_UNSTARTED, a, a->inflight);
	assert_int_equal(a->inflight, 0);
	assert_true(a->backlog);

	out = verify_input(e, b->relpath, VD_JOB_BACKGROUND);
	assert_start(&out, 0, b, VD_JOB_BACKGROUND, 2);
	out = job(e, b, b->inflight, VD_OK, VD_ABANDON_NONE, 1);
	assert_int_equal(out.result, VD_JOB_CHANGED);
	assert_start(&out, 0, b, VD_JOB_BACKGROUND, 7);        /* the job's generation */
	assert_int_equal(out.n_actions, 1);                     /* a: the queue is full */

	e->queue = (vd_plan_queue){ 0, 1, 0 };
	assert_int_equal(verify_input(e, a->relpath, VD_JOB_EXPLICIT).result, -ESHUTDOWN);
	env_free(e);
}

/* A job out of time is verified again after its limit, at the first tick
 * then (the deadline the shell arms for), later each time in a row. */
static void test_retry(void **state)
{
	env *e = env_new();
	vd_core_input tick = { .kind = VD_CORE_TICK };
	vd_core_input in = { .kind = VD_CORE_JOB_DONE };
	vd_core_output out;
	vd_job_result r;
	vd_verdict v;
	vd_copy *c;

	(void)state;
	e->queue = (vd_plan_queue){ 0, 4, 1 };
	c = copy(e->f, "r", "a", H(1), 0, NULL, V_NONE);
	out = verify_input(e, c->relpath, VD_JOB_BACKGROUND);
	memset(&v, 0, sizeof(v));
	v.code = VD_IO_ERROR;
	memset(&r, 0, sizeof(r));
	r.id = c->inflight;
	r.relpath = c->relpath;
	r.kind = VD_JOB_BACKGROUND;
	r.gen = 1;
	r.abandoned = VD_ABANDON_TIME;
	r.verdict = &v;
	r.fp_before = r.fp_after = c->fp;
	r.changed = "";
	r.limit = 30;
	r.now_ms = 1000;
	in.u.job = &r;
	step(e, &in, &out);
	assert_int_equal(out.result, VD_JOB_TIMED_OUT);
	assert_true(out.retry_in == 30);
	assert_int_equal(out.deadline_ms, 31000);
	assert_int_equal(out.n_actions, 0);

	tick.u.now_ms = 30999;
	step(e, &tick, &out);
	assert_int_equal(out.n_actions, 0);
	tick.u.now_ms = 31000;
	step(e, &tick, &out);
	assert_start(&out, 0, c, VD_JOB_BACKGROUND, 2);
	assert_int_equal(out.deadline_ms, VD_WAIT_NONE);

	r.id = c->inflight;
	r.gen = 2;
	r.now_ms = 40000;
	step(e, &in, &out);
	assert_int_equal(c->timeouts, 2);
	assert_true(out.retry_in == 60);
	assert_int_equal(out.deadline_ms, 100000);
	env_free(e);
}

/* A scrub pass: not before the store was scanned; then each copy with a
 * verdict, in path order, one job at a time, a busy one passed over, and
 * the pass's end said once. */
static void test_scrub(void **state)
{
	env *e = env_new();
	vd_core_input in = { .kind = VD_CORE_SCRUB };
	vd_core_output out;
	vd_copy *a, *b, *busy;

	(void)state;
	e->queue = (vd_plan_queue){ 0, 4, 1 };
	b = copy(e->f, "r", "b", H(2), 1, H(1), V_OK);
	a = copy(e->f, "r", "a", H(1), 0, NULL, V_OK);
	busy = copy(e->f, "r", "c", H(3), 2, H(2), V_BUSY);
	(void)copy(e->f, "r", "d", H(4), 3, H(3), V_NONE);
	e->scanned = 0;
	step(e, &in, &out);
	assert_int_equal(out.result, -EAGAIN);
	e->scanned = 1;
	step(e, &in, &out);
	assert_int_equal(out.result, 3);
	assert_int_equal(out.n_actions, 1);
	assert_start(&out, 0, a, VD_JOB_SCRUB, 1);
	step(e, &in, &out);
	assert_int_equal(out.result, -EBUSY);

	out = job(e, a, a->inflight, VD_OK, VD_ABANDON_NONE, 0);
	assert_int_equal(out.n_actions, 1);
	assert_start(&out, 0, b, VD_JOB_SCRUB, 1);
	assert_false(out.scrub_ended);
	out = job(e, b, b->inflight, VD_OK, VD_ABANDON_NONE, 0);
	assert_int_equal(busy->inflight, busy_job);            /* passed over */
	assert_int_equal(out.n_actions, 0);
	assert_true(out.scrub_ended);
	env_free(e);
}

/* A client waiting for a copy whose job is background work has it taken
 * back (or promoted) at the next check; one asking about an artifact has
 * the jobs of its copies promoted. */
static void test_hurry_and_interest(void **state)
{
	env *e = env_new();
	vd_core_input in = { .kind = VD_CORE_WAIT };
	char path[] = "r/a";
	char *paths[] = { path };
	uint64_t gens[] = { 1 };
	vd_core_output out;
	vd_copy *c;
	int user;

	(void)state;
	e->queue = (vd_plan_queue){ 0, 4, 1 };
	c = copy(e->f, "r", "a", H(1), 0, NULL, V_NONE);
	(void)verify_input(e, c->relpath, VD_JOB_BACKGROUND);
	wait_for(&in, paths, gens, 1000, &user);
	out = wait_input(e, &in);
	assert_int_equal(out.n_actions, 0);
	in = (vd_core_input){ .kind = VD_CORE_WAIT_CHECK };
	out = wait_input(e, &in);
	assert_int_equal(out.n_actions, 1);
	assert_int_equal(out.actions[0].kind, VD_ACT_TAKE_BACK);
	assert_int_equal(out.actions[0].id, c->inflight);

	in = (vd_core_input){ .kind = VD_CORE_INTEREST, .u.hash = H(1) };
	out = wait_input(e, &in);
	assert_int_equal(out.n_actions, 1);
	assert_int_equal(out.actions[0].kind, VD_ACT_PROMOTE);
	assert_ptr_equal(out.actions[0].copy, c);
	in.u.hash = H(9);
	assert_int_equal(wait_input(e, &in).n_actions, 0);
	env_free(e);
}

/* Forgetting a ledger nothing remembers is -ENOENT; one remembered is
 * forgotten durably, said with its count, and lineage refreshed. */
static void test_forget_ledger(void **state)
{
	env *e = env_new();
	vd_core_input in = { .kind = VD_CORE_LEDGER_FORGET, .u.relpath = "r/ledger.jsonl" };
	vd_core_output out;

	(void)state;
	step(e, &in, &out);
	assert_int_equal(out.result, -ENOENT);
	ledger(e->f, "r", 0, H(1));
	ledger(e->f, "r", 1, H(2));
	step(e, &in, &out);
	assert_int_equal(out.result, 0);
	assert_int_equal(out.note, VD_CORE_NOTE_FORGOTTEN);
	assert_int_equal(out.seen, 2);
	assert_non_null(out.delta);
	env_free(e);
}

static int set_up(void **state)
{
	int i;

	(void)state;
	for (i = 0; i < N_KEYS; i++)
		if (vd_key_generate(&keys[i]) != 0)
			return -1;
	return 0;
}

static int tear_down(void **state)
{
	int i;

	(void)state;
	for (i = 0; i < N_KEYS; i++)
		vd_key_free(keys[i]);
	return 0;
}

/* ---- what a scan found of the store's paths ------------------------------ */

static void scan_input(env *e, vd_core_in_kind kind, const vd_cover *cv, vd_core_output *out)
{
	vd_core_input in = { .kind = kind, .u.cover = cv };

	step(e, &in, out);
}

static void unreadable_input(env *e, const vd_cover *cv, char *const *dirs, size_t n,
    vd_core_output *out)
{
	vd_core_input in = { .kind = VD_CORE_UNREADABLE, .u.unreadable = { cv, dirs, n } };

	step(e, &in, out);
}

/* A scan finds the copy at relpath as it was. */
static void found_again(env *e, const char *relpath)
{
	const vd_copy *c = vd_core_copy(&e->f->core, relpath);
	vd_core_input in = { .kind = VD_CORE_SCANNED };
	vd_scan_artifact a;
	vd_core_output out;

	assert_non_null(c);
	memset(&a, 0, sizeof(a));
	a.relpath = c->relpath;
	a.run = c->run;
	a.kind = c->kind;
	a.fp = c->fp;
	a.hdr.code = c->hdr.code;
	in.u.scanned.a = &a;
	step(e, &in, &out);
	assert_int_equal(out.result, VD_SCAN_SAME);
}

static int noted(const vd_core_output *out, vd_path_note_kind kind, const char *relpath)
{
	size_t i;

	for (i = 0; i < out->n_paths; i++)
		if (out->paths[i].kind == kind && strcmp(out->paths[i].relpath, relpath) == 0)
			return 1;
	return 0;
}

/* A scan of what changed sweeps only what it covers: a copy it looked at
 * and did not find goes (noted, with its kind), one elsewhere stays; an
 * incomplete scan sweeps nothing. */
static void test_sweep_covered(void **state)
{
	env *e = env_new();
	vd_scope scopes[] = { { VD_SCOPE_TREE, (char *)"r" } };
	vd_cover targeted = { 0, 1, scopes, 1 }, broken = { 1, 0, NULL, 0 };
	vd_core_output out;

	(void)state;
	chain(e->f, "r", 0, 1, V_OK);
	chain(e->f, "x", 0, 0, V_OK);
	scan_input(e, VD_CORE_SCAN_BEGIN, &broken, &out);
	scan_input(e, VD_CORE_SWEEP, &broken, &out);
	assert_int_equal(out.n_paths, 0);
	assert_non_null(vd_core_copy(&e->f->core, "r/round-00000"));

	scan_input(e, VD_CORE_SCAN_BEGIN, &targeted, &out);
	found_again(e, "r/round-00001");
	scan_input(e, VD_CORE_SWEEP, &targeted, &out);
	assert_int_equal(out.n_paths, 1);
	assert_true(noted(&out, VD_PATH_GONE, "r/round-00000"));
	assert_int_equal(out.paths[0].artifact, VD_KIND_DIR);
	assert_null(vd_core_copy(&e->f->core, "r/round-00000"));
	assert_non_null(vd_core_copy(&e->f->core, "r/round-00001"));
	assert_non_null(vd_core_copy(&e->f->core, "x/round-00000"));
	env_free(e);
}

/* An unreadable directory is noted once; what lies under it is neither
 * gone nor pruned while it stays so, and its copy fails with io_error;
 * readable again, it is noted, and a whole scan that does not find what
 * was under it sweeps that. */
static void test_unreadable_dirs(void **state)
{
	env *e = env_new();
	vd_cover whole = { 0, 0, NULL, 0 };
	char d1[] = "r\npermission denied", d2[] = "x/round-00000\npermission denied";
	char *dirs[] = { d1, d2 };
	const vd_copy *c;
	vd_core_output out;

	(void)state;
	chain(e->f, "r", 0, 1, V_OK);
	chain(e->f, "x", 0, 0, V_OK);
	scan_input(e, VD_CORE_SCAN_BEGIN, &whole, &out);
	unreadable_input(e, &whole, dirs, 2, &out);
	assert_int_equal(out.result, 0);
	assert_true(noted(&out, VD_PATH_UNREADABLE, "r"));
	assert_true(noted(&out, VD_PATH_UNREADABLE, "x/round-00000"));
	assert_string_equal(out.paths[0].reason, "permission denied");
	assert_true(vd_core_unreadable_covers(&e->f->core, "r/round-00000", 0));
	assert_false(vd_core_unreadable_covers(&e->f->core, "r", 0));
	assert_true(vd_core_unreadable_covers(&e->f->core, "r", 1));
	assert_int_equal(vd_core_unreadable_count(&e->f->core), 2);
	c = vd_core_copy(&e->f->core, "x/round-00000");
	assert_non_null(c);
	assert_int_equal(c->code, VD_IO_ERROR);
	scan_input(e, VD_CORE_SWEEP, &whole, &out);
	assert_int_equal(out.n_paths, 0);
	assert_non_null(vd_core_copy(&e->f->core, "r/round-00001"));

	/* Still unreadable: not noted again. */
	scan_input(e, VD_CORE_SCAN_BEGIN, &whole, &out);
	unreadable_input(e, &whole, dirs, 1, &out);
	assert_false(noted(&out, VD_PATH_UNREADABLE, "r"));
	assert_true(noted(&out, VD_PATH_READABLE, "x/round-00000"));
	scan_input(e, VD_CORE_SWEEP, &whole, &out);
	assert_true(noted(&out, VD_PATH_GONE, "x/round-00000"));
	assert_int_equal(out.n_paths, 1);

	scan_input(e, VD_CORE_SCAN_BEGIN, &whole, &out);
	unreadable_input(e, &whole, NULL, 0, &out);
	assert_true(noted(&out, VD_PATH_READABLE, "r"));
	assert_int_equal(vd_core_unreadable_count(&e->f->core), 0);
	scan_input(e, VD_CORE_SWEEP, &whole, &out);
	assert_true(noted(&out, VD_PATH_GONE, "r/round-00000"));
	assert_true(noted(&out, VD_PATH_GONE, "r/round-00001"));
	assert_int_equal(vd_model_copy_count(vd_core_model(&e->f->core)), 0);
	env_free(e);
}

/* A directory the scan did not look at stays unreadable, unnoted. */
static void test_unreadable_outside_scan(void **state)
{
	env *e = env_new();
	vd_scope scopes[] = { { VD_SCOPE_TREE, (char *)"x" } };
	vd_cover whole = { 0, 0, NULL, 0 }, targeted = { 0, 1, scopes, 1 };
	char d1[] = "r\nI/O error";
	char *dirs[] = { d1 };
	vd_core_output out;

	(void)state;
	unreadable_input(e, &whole, dirs, 1, &out);
	unreadable_input(e, &targeted, NULL, 0, &out);
	assert_int_equal(out.n_paths, 0);
	assert_true(vd_core_unreadable_covers(&e->f->core, "r/a", 0));
	env_free(e);
}

/* A copy a client named comes in once, seen, of its kind. */
static void test_adopt(void **state)
{
	env *e = env_new();
	vd_core_input in = { .kind = VD_CORE_ADOPT, .u.adopt = { "r/m.tar", VD_KIND_TAR } };
	vd_core_output out;
	const vd_copy *c;

	(void)state;
	step(e, &in, &out);
	assert_int_equal(out.result, VD_SCAN_NEW);
	c = vd_core_copy(&e->f->core, "r/m.tar");
	assert_non_null(c);
	assert_int_equal(c->kind, VD_KIND_TAR);
	assert_string_equal(c->run, "r");
	assert_true(c->seen);
	step(e, &in, &out);
	assert_int_equal(out.result, VD_SCAN_SAME);
	in.u.adopt.relpath = "top";
	step(e, &in, &out);
	assert_string_equal(vd_core_copy(&e->f->core, "top")->run, "");
	env_free(e);
}

/* A ledger rewritten under a round it committed: the memory takes it in
 * at once (the rewrite is logged then), so the next catch-up must not
 * leave the round trusted until the scan's sources are merged. */
static void test_ledger_rewrite_seen_by_catch_up(void **state)
{
	env *e = env_new();
	vd_ledger_entry ent[3];
	vd_scan_ledger l;
	char relpath[] = "r/ledger.jsonl", run[] = "r";
	vd_core_input in = { .kind = VD_CORE_LEDGER };
	vd_core_input sync = { .kind = VD_CORE_REFRESH, .u.refresh = VD_REFRESH_MODEL };
	vd_core_output out;
	size_t i;

	(void)state;
	memset(ent, 0, sizeof(ent));
	memset(&l, 0, sizeof(l));
	pin(e->f, "genesis_hash", "r", -1, H(0));
	chain(e->f, "r", 0, 3, V_OK);
	for (i = 0; i < 3; i++) {
		ent[i].round_index = (int64_t)i;
		ent[i].line = i + 1;
		ent[i].trusted = 1;
		strcpy(ent[i].global_model_hash, H((unsigned)i + 1));
		strcpy(ent[i].record_hash, hx(RECORD_HASH_BASE + (unsigned)i));
	}
	l.relpath = relpath;
	l.run = run;
	l.read_ok = 1;
	l.entries = ent;
	l.n_entries = 3;
	in.u.ledger.l = &l;
	in.u.ledger.budget = SIZE_MAX;
	step(e, &in, &out);
	core_refresh(e, VD_REFRESH_COMMITS);
	assert_true(vd_group_trusted(group(e, 3)));
	strcpy(ent[2].global_model_hash, X(3));
	strcpy(ent[2].record_hash, hx(RECORD_HASH_BASE + 50));
	step(e, &in, &out);
	assert_int_equal(out.note, VD_CORE_NOTE_REWRITTEN);
	assert_true(vd_core_dirty(&e->f->core));
	step(e, &sync, &out);
	assert_false(vd_group_trusted(group(e, 3)));
	env_free(e);
}

/* A verdict that fails round 7 after the pass computed rounds 7 to 9, as
 * the pass's last slice comes: the pass takes it in before it names the
 * head, which is round 6, never round 9 through a failed round. */
static void test_pass_end_reads_verdict_since(void **state)
{
	env *e = pass_begun();
	vd_core_input touch = { .kind = VD_CORE_TOUCH };
	vd_core_input more = { .kind = VD_CORE_PASS, .u.budget = 10 };
	vd_core_output out;
	int n = 0;

	(void)state;
	step(e, &more, &out);                 /* every chain computed, the head not yet */
	assert_true(out.passing);
	reverdict(e->f, "r/round-00007", V_FAIL);
	step(e, &touch, &out);
	more.u.budget = 2;
	do {
		step(e, &more, &out);
		assert_true(++n < 100);
	} while (out.passing);
	assert_false(vd_group_trusted(group(e, 9)));
	assert_int_equal(vd_lineage_head(vd_core_lineage(&e->f->core), NULL, NULL), 6);
	env_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_post_durable_then_visible),
		cmocka_unit_test(test_post_conflict),
		cmocka_unit_test(test_statement_signers),
		cmocka_unit_test(test_retention_slices),
		cmocka_unit_test(test_retention_listed_again),
		cmocka_unit_test(test_restore),
		cmocka_unit_test(test_job_outcomes),
		cmocka_unit_test(test_forget_ledger),
		cmocka_unit_test(test_waiters),
		cmocka_unit_test(test_verify_actions),
		cmocka_unit_test(test_queue_room),
		cmocka_unit_test(test_retry),
		cmocka_unit_test(test_scrub),
		cmocka_unit_test(test_hurry_and_interest),
		cmocka_unit_test(test_pass_in_slices),
		cmocka_unit_test(test_pass_undoes_stale_grant),
		cmocka_unit_test(test_pass_round_check_changed),
		cmocka_unit_test(test_pass_in_place),
		cmocka_unit_test(test_pass_ended_by_removal),
		cmocka_unit_test(test_pass_dropped_by_post),
		cmocka_unit_test(test_sweep_covered),
		cmocka_unit_test(test_unreadable_dirs),
		cmocka_unit_test(test_unreadable_outside_scan),
		cmocka_unit_test(test_adopt),
		cmocka_unit_test(test_ledger_rewrite_seen_by_catch_up),
		cmocka_unit_test(test_pass_end_reads_verdict_since),
	};

	return cmocka_run_group_tests(tests, set_up, tear_down);
}

/* The inputs of lineage, built in memory (lineage_fx.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lineage_fx.h"
#include "vd_pool.h"

void fx_fatal(const char *file, int line, const char *what)
{
	fprintf(stderr, "%s:%d: %s\n", file, line, what);
	abort();
}

vd_key *keys[N_KEYS];
const uint64_t busy_job = UINT64_C(1) << 62;   /* no schedule's id */

/* A distinct, stable hex64 for n. */
const char *hx(unsigned n)
{
	static char tab[MAX_HASHES][VD_HASH_HEX_LEN + 1];

	FX_REQUIRE(n < MAX_HASHES);
	if (tab[n][0] == '\0')
		snprintf(tab[n], sizeof(tab[n]), "%08x%056x", n * 2654435761u, n);
	return tab[n];
}


/* ---- the inputs ------------------------------------------------------- */



fx *fx_new(void)
{
	fx *f = calloc(1, sizeof(*f));

	FX_REQUIRE(f);
	vd_config_defaults(&f->cfg);
	vd_core_init(&f->core, NULL, NULL);
	f->model = &f->core.model;
	f->ring.keys = keys;
	f->ring.n = 1;                 /* the second key is not trusted */
	f->ring.refs = 1;
	vd_map_init(&f->applied);
	return f;
}

/* A record applied as the memory would once it is durable. */
void fx_apply(fx *f, const vd_mem_record *rec)
{
	FX_REQUIRE(vd_memory_apply(&f->core.mem, rec) == 0);
}

void fx_free(fx *f)
{
	vd_map_free(&f->applied);
	vd_core_free(&f->core);
	free(f);
}

void cfg_set(fx *f, const char *key, const char *value)
{
	char err[256];

	if (vd_config_set(&f->cfg, key, value, err, sizeof(err)) != 0)
		fx_fatal(__FILE__, __LINE__, err);
	f->whole = 1;
}

/* "RUN:HEX" or "RUN:ROUND:HEX" for a pin. */
void pin(fx *f, const char *key, const char *run, int64_t round, const char *hash)
{
	char v[PATH_MAX_LEN];

	if (round < 0)
		snprintf(v, sizeof(v), "%s%s%s", run, run[0] ? ":" : "", hash);
	else
		snprintf(v, sizeof(v), "%s:%lld:%s", run, (long long)round, hash);
	cfg_set(f, key, v);
}

void input_for(fx *f, const vd_model *m, vd_lineage_input *in)
{
	memset(in, 0, sizeof(*in));
	in->model = m;
	in->policy = vd_config_trust(&f->cfg);
	in->keys = &f->ring;
	in->ledgers = f->ledgers;
	in->n_ledgers = f->n_ledgers;
	vd_lineage_input_memory(in, &f->core.mem);
	in->scanned = !f->unscanned;
}

/* The delta applied to the alerts raised before it, as the shell applies
 * it to the history: raised ones added, cleared ones removed. */
void fx_note_delta(fx *f, const vd_lineage_delta *d)
{
	char key[VD_RUN_MAX + 64];
	size_t i;

	for (i = 0; i < d->n_alerts; i++) {
		const vd_alert_change *a = &d->alerts[i];
		snprintf(key, sizeof(key), "%s\n%s", vd_alert_name((vd_alert_kind)a->kind),
		    a->subject);
		if (a->raised) {
			f->delta_bad |= vd_map_get(&f->applied, key) != NULL;
			FX_REQUIRE(vd_map_put(&f->applied, key, f) == 0);
		} else {
			f->delta_bad |= vd_map_del(&f->applied, key) == NULL;
		}
	}
}

/* As the store does: commits set when anything but the model changed.
 * Commitment sources, ledgers as read and keys are a VD_REFRESH_COMMITS;
 * the configuration or the memory of an artifact whose directory is gone
 * since the last such refresh, a VD_REFRESH_WHOLE. Then what the model
 * marked is forgotten. */
void refresh(fx *f, int commits)
{
	vd_lineage_input in;
	vd_refresh what = !commits ? VD_REFRESH_MODEL : f->whole ? VD_REFRESH_WHOLE :
	    VD_REFRESH_COMMITS;

	if (commits)
		f->whole = 0;
	input_for(f, f->model, &in);
	vd_lineage_refresh(&f->core.lineage, &in, what, &f->core.delta);
	fx_note_delta(f, &f->core.delta);
	vd_model_clear_dirty(f->model);
}

void refresh_alone(vd_lineage *l, const vd_lineage_input *in, vd_refresh what)
{
	vd_lineage_delta d;

	vd_lineage_delta_init(&d);
	vd_lineage_refresh(l, in, what, &d);
	vd_lineage_delta_free(&d);
}

/* ---- copies ----------------------------------------------------------- */

/* The verdict fields of a copy not yet indexed, or through verdict(). */
void set_verdict(vd_copy *c, int v)
{
	c->has_verdict = v != V_NONE;
	c->code = v == V_FAIL ? VD_CHECKPOINT_INTEGRITY : VD_OK;
	vd_copy_text(&c->detail, v == V_FAIL ? "weights.safetensors differs" : NULL);
	memset(&c->fp, 0, sizeof(c->fp));
	memset(&c->verdict_fp, 0, sizeof(c->verdict_fp));
	c->fp.ok = c->verdict_fp.ok = 1;
	c->fp.digest[0] = v == V_STALE;          /* the directory changed since */
	c->inflight = v == V_BUSY ? busy_job : 0;
	c->inflight_kind = VD_JOB_BACKGROUND;
}

void set_header(vd_copy *c, const char *hash, int64_t round, const char *parent)
{
	c->hdr.code = VD_OK;
	snprintf(c->hdr.content_hash, sizeof(c->hdr.content_hash), "%s", hash);
	c->hdr.round_index = round;
	c->hdr.has_parent = parent != NULL;
	snprintf(c->hdr.parent_hash, sizeof(c->hdr.parent_hash), "%s", parent ? parent : "");
}

/* A verdict changed (or a verification started) on an indexed copy: the
 * store tells the model, as lineage may look only at what changed. */
void verdict(vd_model *m, vd_copy *c, int v)
{
	set_verdict(c, v);
	vd_model_touch(m, c);
}

vd_copy *model_copy(vd_model *m, const char *run, const char *name, const char *hash,
    int64_t round, const char *parent, int v)
{
	char rel[PATH_MAX_LEN];
	vd_copy *c;

	snprintf(rel, sizeof(rel), "%s%s%s", run, run[0] ? "/" : "", name);
	FX_REQUIRE(c = vd_model_add_copy(m, rel, run));
	set_header(c, hash, round, parent);
	set_verdict(c, v);
	vd_model_index(m, c);
	return c;
}

vd_copy *copy(fx *f, const char *run, const char *name, const char *hash,
    int64_t round, const char *parent, int v)
{
	return model_copy(f->model, run, name, hash, round, parent, v);
}

/* Rounds from..to of one run, hx(base + i) the hash of round i. */
void chain_at(fx *f, const char *run, unsigned base, int from, int to, int v)
{
	char name[32];
	int i;

	for (i = from; i <= to; i++) {
		snprintf(name, sizeof(name), "round-%05d", i);
		copy(f, run, name, hx(base + (unsigned)i), i, i > 0 ? hx(base + (unsigned)i - 1) : NULL, v);
	}
}

/* H(i) the hash of round i. */
void chain(fx *f, const char *run, int from, int to, int v)
{
	chain_at(f, run, 0, from, to, v);
}

void reverdict(fx *f, const char *relpath, int v)
{
	vd_copy *c = vd_model_copy(f->model, relpath);

	FX_REQUIRE(c);
	verdict(f->model, c, v);
}

void drop(fx *f, const char *relpath)
{
	vd_copy *c = vd_model_copy(f->model, relpath);

	FX_REQUIRE(c);
	vd_model_remove_copy(f->model, c);
}

/* ---- commitments ------------------------------------------------------ */

void ledger_path(const char *run, char *out, size_t n)
{
	snprintf(out, n, "%s%sledger.jsonl", run, run[0] ? "/" : "");
}

vd_ledger_mem *mem_of(fx *f, const char *run)
{
	char rel[PATH_MAX_LEN];
	vd_ledger_mem *m;

	ledger_path(run, rel, sizeof(rel));
	vd_mem_record rec;

	if ((m = vd_map_get(&f->core.mem.mems, rel)) != NULL)
		return m;
	vd_mem_record_init(&rec, VD_MEM_LEDGER_APPEND);
	snprintf(rec.relpath, sizeof(rec.relpath), "%s", rel);
	snprintf(rec.run, sizeof(rec.run), "%s", run);
	fx_apply(f, &rec);
	FX_REQUIRE(m = vd_map_get(&f->core.mem.mems, rel));
	return m;
}

void push_rec(vd_ledger_rec **arr, size_t *n, size_t *cap, int64_t round,
    const char *hash, const char *record_hash, size_t line)
{
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 8;
		FX_REQUIRE(*arr = realloc(*arr, *cap * sizeof(**arr)));
	}
	memset(&(*arr)[*n], 0, sizeof(**arr));
	(*arr)[*n].round_index = round;
	snprintf((*arr)[*n].hash, sizeof((*arr)[*n].hash), "%s", hash);
	snprintf((*arr)[*n].record_hash, sizeof((*arr)[*n].record_hash), "%s", record_hash);
	(*arr)[*n].line = line;
	(*n)++;
}

/* A record remembered of run's ledger; returns its record hash. */
const char *ledger(fx *f, const char *run, int64_t round, const char *hash)
{
	vd_ledger_mem *m = mem_of(f, run);

	push_rec(&m->recs, &m->n, &m->cap, round, hash, hx(RECORD_HASH_BASE + f->records++),
	    m->n + 1);
	return m->recs[m->n - 1].record_hash;
}

/* The file no longer extends the memory; it says hash for round now. */
void rewritten(fx *f, const char *run, int64_t round, const char *hash)
{
	vd_ledger_mem *m = mem_of(f, run);
	size_t cap = m->n_diverged;

	m->rewritten = 1;
	snprintf(m->detail, sizeof(m->detail), "line 1 differs");
	push_rec(&m->diverged, &m->n_diverged, &cap, round, hash,
	    hx(RECORD_HASH_BASE + f->records++), m->n_diverged + 1);
}

void fill_commitment(vd_commitment *c, const char *run, int64_t round,
    const char *hash, const char *key_id)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->run, sizeof(c->run), "%s", run);
	c->round_index = round;
	snprintf(c->hash, sizeof(c->hash), "%s", hash);
	c->schema_version = 2;
	snprintf(c->key_id, sizeof(c->key_id), "%s", key_id ? key_id : "");
}

/* A RoundClose posted with the token (key_id NULL) or signed. */
void post(fx *f, const char *run, int64_t round, const char *hash, const char *key_id)
{
	vd_mem_record rec;

	vd_mem_record_init(&rec, VD_MEM_POST);
	fill_commitment(&rec.c, run, round, hash, key_id);
	fx_apply(f, &rec);
}

/* A RoundClose refused: it named another hash than one already posted. */
void refused(fx *f, const char *run, int64_t round, const char *hash)
{
	vd_mem_record rec;

	vd_mem_record_init(&rec, VD_MEM_EQUIVOCATION);
	fill_commitment(&rec.c, run, round, hash, NULL);
	fx_apply(f, &rec);
}

/* A statement of run found in its file number n of commitments/. */
void stmt_at(vd_signed_stmt *s, size_t n, vd_stmt_kind kind, const char *run,
    const char *key_id)
{
	memset(s, 0, sizeof(*s));
	s->st.kind = kind;
	snprintf(s->st.run, sizeof(s->st.run), "%s", run[0] ? run : ".");
	snprintf(s->run, sizeof(s->run), "%s", run);
	snprintf(s->key_id, sizeof(s->key_id), "%s", key_id);
	snprintf(s->where, sizeof(s->where), "%s%scommitments/s%zu.json", run, run[0] ? "/" : "", n);
}

void signed_roundclose(fx *f, const char *run, int64_t round, const char *hash,
    const char *key_id)
{
	vd_mem_record rec;

	vd_mem_record_init(&rec, VD_MEM_STATEMENT);
	stmt_at(&rec.stmt, f->core.mem.n_stmts + 1, VD_STMT_ROUNDCLOSE, run, key_id);
	rec.stmt.st.schema_version = 2;
	rec.stmt.st.round_index = round;
	snprintf(rec.stmt.st.hash, sizeof(rec.stmt.st.hash), "%s", hash);
	fx_apply(f, &rec);
}

/* The operator withdraws (run, round) -> hash, or takes that back. */
void withdraw(fx *f, const char *run, int64_t round, const char *hash, int on)
{
	char key[VD_WITHDRAWAL_KEY_MAX];
	vd_mem_record rec;

	vd_withdrawal_key(key, sizeof(key), run, round, hash);
	if (!on) {
		free(vd_map_del(&f->core.mem.withdrawn, key));
		return;
	}
	vd_mem_record_init(&rec, VD_MEM_WITHDRAWAL);
	snprintf(rec.w.run, sizeof(rec.w.run), "%s", run);
	rec.w.round_index = round;
	snprintf(rec.w.hash, sizeof(rec.w.hash), "%s", hash);
	fx_apply(f, &rec);
}

void checkpoint(fx *f, const char *run, uint64_t records, const char *head,
    const char *key_id)
{
	vd_mem_record rec;

	vd_mem_record_init(&rec, VD_MEM_STATEMENT);
	stmt_at(&rec.stmt, f->core.mem.n_stmts + 1, VD_STMT_CHECKPOINT, run, key_id);
	rec.stmt.st.records = records;
	snprintf(rec.stmt.st.head_record_hash, sizeof(rec.stmt.st.head_record_hash), "%s", head);
	fx_apply(f, &rec);
}

void retain(fx *f, const char *hash, const char *run, int64_t round, const char *parent)
{
	vd_mem_record rec;

	vd_mem_record_init(&rec, VD_MEM_RETAIN);
	snprintf(rec.r.hash, sizeof(rec.r.hash), "%s", hash);
	snprintf(rec.run, sizeof(rec.run), "%s", run);
	rec.r.run = rec.run;
	rec.r.round_index = round;
	rec.r.has_parent = parent != NULL;
	snprintf(rec.r.parent, sizeof(rec.r.parent), "%s", parent ? parent : "");
	FX_REQUIRE((vd_map_get(&f->core.mem.retained, hash)) == NULL);
	fx_apply(f, &rec);
	if (vd_model_group(f->model, hash) == NULL)
		f->whole = 1;
}

/* Only lineage's tests forget a pruned artifact: the memory never does. */
void forget_retained(fx *f, const char *hash)
{
	vd_retained *r = vd_map_del(&f->core.mem.retained, hash), **pp, *first;

	FX_REQUIRE(r);
	if (vd_model_group(f->model, hash) == NULL)
		f->whole = 1;
	if (r->has_parent) {
		first = vd_map_get(&f->core.mem.retained_children, r->parent);
		for (pp = &first; *pp != r; pp = &(*pp)->next_child)
			FX_REQUIRE(*pp);
		*pp = r->next_child;
		if (first == NULL)
			vd_map_del(&f->core.mem.retained_children, r->parent);
		else
			FX_REQUIRE((vd_map_put(&f->core.mem.retained_children, r->parent, first)) == 0);
	}
	free(r->run);
	free(r);
}

/* Tables grown and emptied again, so that a fresh model's groups are
 * walked in another order than those of one grown otherwise. */
void grow_tables(vd_model *m)
{
	char name[16];
	vd_copy *c[FX_GROWTH];
	int i;

	for (i = 0; i < FX_GROWTH; i++) {
		snprintf(name, sizeof(name), "g%02d", i);
		c[i] = model_copy(m, "grow", name, hx(FX_GROW_HASH + (unsigned)i), 0, NULL, V_OK);
	}
	for (i = 0; i < FX_GROWTH; i++)
		vd_model_remove_copy(m, c[i]);
}

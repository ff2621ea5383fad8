/* The memory of commitments in the state database (vd_memstate.h). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "vd_log.h"
#include "vd_memstate.h"
#include "vd_model.h"
#include "vd_util.h"

/* The signers a record remembers its statement under, as rows. */
static const vd_stmt_sigs *sigs_of(const vd_mem_record *rec, vd_stmt_sigs *sigs,
    const char **ids)
{
	size_t i;

	for (i = 0; i < rec->n_signers; i++)
		ids[i] = rec->signers[i];
	*sigs = (vd_stmt_sigs){ .stm = &rec->stmt.st, .run = rec->stmt.run,
		.source = rec->stmt.where, .key_ids = ids, .n = rec->n_signers, .env = rec->env,
		.env_len = rec->env_len };
	return rec->n_signers > 0 ? sigs : NULL;
}

int vd_memstate_persist(const vd_mem_record *rec, void *arg)
{
	vd_state *st = arg;
	const char *ids[VD_DSSE_MAX_SIGS];
	vd_stmt_sigs sigs;
	vd_commitment old;
	vd_retained r;
	int rc;

	switch (rec->kind) {
	case VD_MEM_POST:
	case VD_MEM_POST_AGAIN:
		if (st == NULL)
			return -EIO;
		rc = vd_state_post_commitment(st, &rec->c, rec->env, rec->env_len, rec->audit,
		    sigs_of(rec, &sigs, ids), &old);
		if (rc == VD_POST_CONFLICT)
			log_error("the state database holds %s for run %s round %lld, which the daemon's memory does not",
			    old.hash, vd_run_name(rec->c.run), (long long)rec->c.round_index);
		if (rc < 0)
			return rc;
		return rc == VD_POST_CONFLICT ? -EEXIST : 0;
	case VD_MEM_EQUIVOCATION:
		return st == NULL ? -EIO : vd_state_record_equivocation(st, &rec->c, rec->existing,
		    rec->c.key_id[0] ? "signed" : "roundclose");
	case VD_MEM_CHECKPOINT:
		if (st == NULL)
			return -EIO;
		rc = vd_state_post_checkpoint(st, &rec->stmt.st, rec->stmt.key_id, rec->env,
		    rec->env_len, rec->audit, sigs_of(rec, &sigs, ids));
		return rc < 0 ? rc : 0;
	case VD_MEM_SIGNATURES:
		return st == NULL ? -EIO :
		    vd_state_remember_signatures(st, sigs_of(rec, &sigs, ids));
	case VD_MEM_WITHDRAWAL:
		return st == NULL ? -EIO : vd_state_withdraw(st, &rec->w, rec->audit);
	default:
		break;
	}
	if (st == NULL)
		return 0;       /* memory only */
	switch (rec->kind) {
	case VD_MEM_STATEMENT:
		/* A file's statement (a post's come with it): read again if lost. */
		rc = vd_state_remember_statement(st, &rec->stmt.st, rec->stmt.run,
		    rec->stmt.key_id, rec->stmt.where, rec->env, rec->env_len);
		return rc < 0 ? rc : 0;
	case VD_MEM_LEDGER_APPEND:
		return rec->n == 0 ? 0 : vd_state_append_ledger(st, rec->relpath, rec->first,
		    rec->recs, rec->n);
	case VD_MEM_LEDGER_FORGET:
		return vd_state_forget_ledger(st, rec->relpath);
	case VD_MEM_RETAIN:
		r = rec->r;
		r.run = (char *)rec->run;
		return vd_state_retain(st, &r);
	default:
		return 0;
	}
}

/* A row of the state database, applied at start. */
static void restore_record(vd_memory *m, const vd_mem_record *rec)
{
	if (vd_memory_restore(m, rec) < 0)
		log_error("out of memory loading the state database; a commitment it holds is missed until a restart");
}

static void load_retained(const vd_retained *r, void *arg)
{
	vd_mem_record rec;

	vd_mem_record_init(&rec, VD_MEM_RETAIN);
	rec.r = *r;
	snprintf(rec.run, sizeof(rec.run), "%s", r->run);
	restore_record(arg, &rec);
}

static void load_ledger_rec(const char *path, int64_t seq, int64_t round, const char *hash,
    const char *record_hash, int64_t line, void *arg)
{
	const char *slash = strrchr(path, '/');
	vd_mem_record rec;
	vd_ledger_rec r;

	if (seq < 0 || !vd_is_hex64((vd_str){ hash, strlen(hash) }) ||
	    !vd_is_hex64((vd_str){ record_hash, strlen(record_hash) }))
		return;
	vd_mem_record_init(&rec, VD_MEM_LEDGER_APPEND);
	snprintf(rec.relpath, sizeof(rec.relpath), "%s", path);
	snprintf(rec.run, sizeof(rec.run), "%.*s", slash ? (int)(slash - path) : 0, path);
	memset(&r, 0, sizeof(r));
	r.round_index = round;
	snprintf(r.hash, sizeof(r.hash), "%s", hash);
	snprintf(r.record_hash, sizeof(r.record_hash), "%s", record_hash);
	r.line = (size_t)line;
	rec.first = (size_t)seq;
	rec.recs = &r;
	rec.n = 1;
	restore_record(arg, &rec);
}

static void load_commitment(const vd_commitment *c, vd_mem_kind kind, vd_memory *m)
{
	vd_mem_record rec;

	vd_mem_record_init(&rec, kind);
	rec.c = *c;
	restore_record(m, &rec);
}

static void load_posted(const vd_commitment *c, void *arg)
{
	load_commitment(c, VD_MEM_POST, arg);
}

static void load_equiv(const vd_commitment *c, void *arg)
{
	load_commitment(c, VD_MEM_EQUIVOCATION, arg);
}

static void load_stmt(const vd_statement *stm, const char *run, const char *key_id,
    const char *where, vd_mem_kind kind, vd_memory *m)
{
	vd_mem_record rec;

	vd_mem_record_init(&rec, kind);
	rec.stmt.st = *stm;
	snprintf(rec.stmt.run, sizeof(rec.stmt.run), "%s", run);
	snprintf(rec.stmt.key_id, sizeof(rec.stmt.key_id), "%s", key_id);
	snprintf(rec.stmt.where, sizeof(rec.stmt.where), "%s", where);
	restore_record(m, &rec);
}

static void load_checkpoint(const vd_statement *c, const char *key_id, void *arg)
{
	load_stmt(c, c->run, key_id, "api", VD_MEM_CHECKPOINT, arg);
}

static void load_statement(const vd_statement *stm, const char *run, const char *key_id,
    const char *where, void *arg)
{
	load_stmt(stm, run, key_id, where, VD_MEM_STATEMENT, arg);
}

static void load_withdrawal(const vd_withdrawal *w, void *arg)
{
	vd_mem_record rec;

	vd_mem_record_init(&rec, VD_MEM_WITHDRAWAL);
	rec.w = *w;
	restore_record(arg, &rec);
}

int vd_memstate_load(vd_state *st, vd_memory *m, char *err, size_t errlen)
{
	int rc;

	if ((rc = vd_state_load_commitments(st, load_posted, m, err, errlen)) < 0 ||
	    (rc = vd_state_load_equivocations(st, load_equiv, m, err, errlen)) < 0 ||
	    (rc = vd_state_load_checkpoints(st, load_checkpoint, m, err, errlen)) < 0 ||
	    (rc = vd_state_load_statements(st, load_statement, m, err, errlen)) < 0 ||
	    (rc = vd_state_load_withdrawals(st, load_withdrawal, m, err, errlen)) < 0 ||
	    (rc = vd_state_load_ledgers(st, load_ledger_rec, m, err, errlen)) < 0 ||
	    (rc = vd_state_load_retained(st, load_retained, m, err, errlen)) < 0)
		return rc;
	return 0;
}

/*
 * The inputs of lineage, built in memory for tests and the simulator: a
 * model of copies, remembered ledgers, posts, signed statements,
 * withdrawals, pruned artifacts and the configuration, and a refresh as
 * the store does it. Misuse and out of memory end the program.
 */
#ifndef LINEAGE_FX_H
#define LINEAGE_FX_H

#include <stdint.h>

#include "vd_config.h"
#include "vd_core.h"
#include "vd_keys.h"
#include "vd_lineage.h"
#include "vd_model.h"
#include "vd_state.h"

#define MAX_HASHES 4096
#define MAX_SCAN_LEDGERS 4
#define N_KEYS 2
#define PATH_MAX_LEN 256
#define ALERT_KEY_MAX 512

#define H(n) hx(n)                 /* a chain's hashes */
#define X(n) hx(100 + (n))         /* hashes no artifact claims */
#define RECORD_HASH_BASE 1000      /* record hashes of ledger records */
#define FX_GROW_HASH 300           /* hx() offset of the hashes that grow tables */
#define FX_GROWTH 60               /* groups that grow a model's tables */
#define FX_SPARE_HASH 4000         /* hx() of a hash nothing else uses */

enum { V_NONE, V_OK, V_FAIL, V_STALE, V_BUSY, V_COUNT };

typedef struct fx {
	vd_model *model;               /* the core's: filled directly here, as
	                                * the memory is */
	vd_config cfg;
	vd_core core;                  /* its memory (posts, statements, ledgers,
	                                * withdrawals, pruned artifacts) filled
	                                * directly here, or through the core's
	                                * inputs by the simulator; its lineage
	                                * refreshed alone here (refresh), or by
	                                * the core in the simulator */
	vd_scan_ledger ledgers[MAX_SCAN_LEDGERS];
	size_t n_ledgers;
	vd_keyring ring;
	unsigned records;              /* record hashes handed out */
	int whole;                     /* the configuration changed, or the memory
	                                * of an artifact whose directory is gone */
	vd_map applied;                /* "kind\nsubject" -> f: the alerts the deltas
	                                * raised and did not clear since */
	int delta_bad;                 /* a delta cleared what was not raised, or
	                                * raised what was */
	int unscanned;                 /* the store is not scanned whole yet (0: it is) */
} fx;

extern vd_key *keys[N_KEYS];
extern const uint64_t busy_job;    /* the job id of a copy being verified */

void fx_fatal(const char *file, int line, const char *what);
#define FX_REQUIRE(x) do { if (!(x)) fx_fatal(__FILE__, __LINE__, #x); } while (0)

const char *hx(unsigned n);
fx *fx_new(void);
void fx_apply(fx *f, const vd_mem_record *rec);
void fx_free(fx *f);
void cfg_set(fx *f, const char *key, const char *value);
void pin(fx *f, const char *key, const char *run, int64_t round, const char *hash);
void input_for(fx *f, const vd_model *m, vd_lineage_input *in);
void refresh(fx *f, int commits);
/* A delta applied to the alerts its refreshes raised (f->applied). */
void fx_note_delta(fx *f, const vd_lineage_delta *d);
/* A refresh with a delta of its own, thrown away: for lineages beside f's. */
void refresh_alone(vd_lineage *l, const vd_lineage_input *in, vd_refresh what);
void set_verdict(vd_copy *c, int v);
void set_header(vd_copy *c, const char *hash, int64_t round, const char *parent);
void verdict(vd_model *m, vd_copy *c, int v);
vd_copy *model_copy(vd_model *m, const char *run, const char *name, const char *hash,
    int64_t round, const char *parent, int v);
vd_copy *copy(fx *f, const char *run, const char *name, const char *hash,
    int64_t round, const char *parent, int v);
void chain_at(fx *f, const char *run, unsigned base, int from, int to, int v);
void chain(fx *f, const char *run, int from, int to, int v);
void reverdict(fx *f, const char *relpath, int v);
void drop(fx *f, const char *relpath);
void ledger_path(const char *run, char *out, size_t n);
vd_ledger_mem *mem_of(fx *f, const char *run);
void push_rec(vd_ledger_rec **arr, size_t *n, size_t *cap, int64_t round,
    const char *hash, const char *record_hash, size_t line);
const char *ledger(fx *f, const char *run, int64_t round, const char *hash);
void rewritten(fx *f, const char *run, int64_t round, const char *hash);
void fill_commitment(vd_commitment *c, const char *run, int64_t round,
    const char *hash, const char *key_id);
void post(fx *f, const char *run, int64_t round, const char *hash, const char *key_id);
void refused(fx *f, const char *run, int64_t round, const char *hash);
void stmt_at(vd_signed_stmt *s, size_t n, vd_stmt_kind kind, const char *run,
    const char *key_id);
void signed_roundclose(fx *f, const char *run, int64_t round, const char *hash,
    const char *key_id);
void withdraw(fx *f, const char *run, int64_t round, const char *hash, int on);
void checkpoint(fx *f, const char *run, uint64_t records, const char *head,
    const char *key_id);
void retain(fx *f, const char *hash, const char *run, int64_t round, const char *parent);
void forget_retained(fx *f, const char *hash);
void grow_tables(vd_model *m);

#endif

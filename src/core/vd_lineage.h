/*
 * Commitments, lineage and alerts, computed from a read-only view of the
 * store: the model's groups, the remembered ledgers, the posted and signed
 * commitments, the pinned genesis, under the commitment policy in force.
 * Writes each group's lineage part and its own state (commitment slots,
 * alerts, the committed head); nothing else. A refresh returns what
 * changed (vd_lineage_delta): the shell records, publishes and logs it.
 */
#ifndef VD_LINEAGE_H
#define VD_LINEAGE_H

#include <stdint.h>

#include "vd_alerts.h"
#include "vd_dsse.h"
#include "vd_keys.h"
#include "vd_map.h"
#include "vd_memory.h"
#include "vd_model.h"
#include "vd_policy.h"
#include "vd_scanned.h"

/* Sources of a commitment, strongest first (trust.md section 4). A ledger
 * record is as strong as a signed statement when a signed checkpoint
 * covers it, and weakest otherwise. */
typedef enum vd_commit_source {
	VD_SRC_SIGNED,        /* a signed RoundClose statement */
	VD_SRC_LEDGER,        /* a ledger record */
	VD_SRC_ROUNDCLOSE,    /* a RoundClose posted with the operator token */
	VD_SRC_PINNED,        /* genesis_hash in the configuration */
	VD_SRC_OMS,           /* an artifact's OMS bundle by a key of its run */
	VD_SRC_COUNT
} vd_commit_source;

const char *vd_commit_source_name(vd_commit_source s);

/* A long run holds a slot per round: entries point into their slot and
 * the lineage rather than hold copies. */
typedef struct vd_commit_entry {
	int has;
	int is_signed;
	const char *hash;           /* one of its slot's hashes */
	const char *where;          /* ledger or statement path, "api", "config";
	                             * owned by the inputs, valid until the next refresh */
	size_t line;                /* ledger line */
	const char *key_id;         /* held by the lineage; "" when unsigned */
} vd_commit_entry;

#define VD_SLOT_MORE_HASHES VD_SRC_COUNT /* past first and other: one per source at most */

/* What every source says for one round of one run. */
typedef struct vd_commit_slot {
	const char *run;               /* in the same allocation as the slot */
	int64_t round_index;           /* the RoundClose round t (-1: pinned genesis) */
	vd_commit_entry src[VD_SRC_COUNT];
	char first_hash[VD_HASH_HEX_LEN + 1];  /* the first hash any source named */
	char other_hash[VD_HASH_HEX_LEN + 1];  /* another one: an equivocation */
	char (*more)[VD_HASH_HEX_LEN + 1];     /* a third and fourth, rarely */
	size_t n_more;
	const char *other_where;
	int anchor;                    /* an anchor pins this round: a chain root */
} vd_commit_slot;

typedef struct vd_lineage_input {
	const vd_model *model;
	vd_policy policy;              /* what the configuration says (vd_config_trust) */
	const vd_keyring *keys;        /* may be NULL */
	const vd_scan_ledger *ledgers; /* as last read, for ledger_broken */
	size_t n_ledgers;
	const vd_map *mems;            /* relpath -> vd_ledger_mem */
	const vd_commitment *posted;
	size_t n_posted;
	const vd_commitment *equivs;   /* conflicting posts refused */
	size_t n_equivs;
	const vd_signed_stmt *stmts;
	size_t n_stmts;
	const vd_map *withdrawn;       /* vd_withdrawal_key -> anything; may be NULL */
	const vd_map *retained;        /* hash -> vd_retained; may be NULL. Read only
	                                * where no copy of the hash is in the run:
	                                * a change there is a VD_REFRESH_WHOLE */
	const vd_map *retained_children; /* parent hash -> first vd_retained; may be NULL */
	int scanned;                   /* the model holds a whole scan: an alert
	                                * not raised now is not raised at all */
	const struct vd_omskeys *oms_keys;  /* run_oms_keys; NULL: none */
	size_t slice;                  /* the first whole pass over a whole scan goes in
	                                * slices of this many groups' chains, a
	                                * vd_lineage_pass each; 0: all at once */
} vd_lineage_input;

typedef struct vd_alert {
	int kind;
	int seen;                      /* still raised by a whole pass */
	char *subject, *detail;
} vd_alert;

/* One alert raised or cleared by a refresh. */
typedef struct vd_alert_change {
	int kind;                      /* vd_alert_kind */
	int raised;                    /* 1 raised, 0 cleared */
	char *subject, *detail;        /* owned by the delta */
} vd_alert_change;

/* What a refresh changed, for the shell to apply: the alerts raised and
 * cleared in the order they changed (applied to the set before the
 * refresh, they give the set after it), and what was recomputed. The
 * caller owns it; a refresh empties it first. */
typedef struct vd_lineage_delta {
	vd_alert_change *alerts;
	size_t n_alerts, cap_alerts;
	int settled;                   /* a whole pass over a whole scan looked at every
	                                * alert: what is not raised now has ended */
	int whole;                     /* every group was recomputed */
	vd_group *const *touched;      /* else these were (held by the lineage, valid
	                                * until the next refresh or change of the model) */
	size_t n_touched;
	size_t n_looked;               /* hashes looked at by an update */
	const char *fallback;          /* why an update became a whole pass, or NULL */
	int head_changed;              /* the committed head is another one */
} vd_lineage_delta;

void vd_lineage_delta_init(vd_lineage_delta *d);
void vd_lineage_delta_clear(vd_lineage_delta *d);   /* empty, keeping its memory */
void vd_lineage_delta_free(vd_lineage_delta *d);

/* A slot the last refresh rebuilt alone (vd_lineage.commits_in_place): its
 * run, the slot's own (NULL: the slot went), and its round. */
typedef struct vd_slot_ref {
	const char *run;
	int64_t round;
} vd_slot_ref;

typedef struct vd_lineage {
	vd_map commits;                /* "run\nround" -> vd_commit_slot */
	vd_map key_ids;                /* key id -> its one copy, for the slots */
	vd_map oms_where;              /* copy path -> its copy, for the OMS entries:
	                                * a copy may go before the slots are rebuilt */
	vd_map named;                  /* hash a RoundClose names -> what the round check said */
	int named_failed;              /* out of memory: not all are in named */
	vd_map alerts;                 /* "kind\nsubject" -> vd_alert */
	uint64_t alert_counts[VD_ALERT_COUNT];
	uint64_t series[VD_CS_COUNT];  /* commitments by source and signature */
	int built;                     /* the slots were built once */
	int scanned;                   /* a whole pass saw a whole scan */
	int64_t head_round;            /* committed head, -1: none */
	char head_hash[VD_HASH_HEX_LEN + 1];
	const char *head_run;          /* its run (head_run_buf), NULL: none */
	char head_run_buf[VD_RUN_MAX];
	/* What the last refresh recomputed: every group (whole), or the
	 * groups listed (valid until the model next changes). */
	int whole;
	vd_group **touched;
	size_t n_touched, cap_touched;
	char (*queue)[VD_HASH_HEX_LEN + 1];  /* hashes to look at, a refresh's work list */
	size_t n_queue, cap_queue;
	int queue_failed;              /* out of memory: a whole pass instead */
	vd_lineage_delta *out;         /* the refresh's delta, while it runs */

	/* The slots changed in place: what the sources said when the slots
	 * were last built from all of them, and the slots a refresh rebuilt
	 * alone (while only ledgers grew or got signed). */
	vd_map mems_seen;              /* ledger relpath -> what it held then */
	uint64_t others_sig;           /* every other source, then */
	int in_place_ok;               /* mems_seen and others_sig are of the slots */
	int commits_in_place;          /* the last refresh rebuilt the slots of only
	                                * (the others stand as they were) */
	vd_slot_ref *only;             /* the slots of (run, round) rebuilt alone */
	size_t n_only, cap_only;
	int64_t only_min, only_max;
	int only_on;                   /* the sources go into those slots alone */
	uint64_t in_place;             /* refreshes that rebuilt some slots alone */
	uint64_t slots_gen;            /* refreshes that may have changed the slots: a
	                                * reader that saw them at one value need not
	                                * look again while it holds */

	/* A whole pass in slices (vd_lineage_pass): the groups by round, the
	 * next to compute, the model's groups_gen they were listed at, what
	 * the refresh that began it was, and the head before it. */
	int passing;
	int pass_in_place;             /* the groups keep what they read until computed */
	int whole_owed;                /* a pass was dropped: the next refresh is whole */
	struct vd_pass_ent *pass_order;
	size_t pass_n, pass_next;
	uint64_t pass_gen;
	uint64_t pass_looked;          /* the model's change_gen when the pass last
	                                * looked for groups changed since computed */
	int64_t pass_head_round;
	char pass_head_hash[VD_HASH_HEX_LEN + 1];
	char pass_head_run[VD_RUN_MAX];
} vd_lineage;

/* What changed since the last refresh. */
typedef enum vd_refresh {
	VD_REFRESH_MODEL,        /* only what the model marked dirty */
	VD_REFRESH_COMMITS,      /* a commitment source too (ledgers, posts, statements, keys) */
	VD_REFRESH_WHOLE         /* anything: the configuration (policies, pins) */
} vd_refresh;

void vd_lineage_init(vd_lineage *l);
void vd_lineage_free(vd_lineage *l);
/* Catch up with in. The first call, VD_REFRESH_WHOLE, and a model too
 * changed to list recompute every chain, the head and every alert. Else
 * only what the model marked dirty and what depends on it (children,
 * through pruned links), and with VD_REFRESH_COMMITS the slots rebuilt
 * and the groups whose commitment reads differently from them: the cost
 * of the chains follows the change, not the store. */
void vd_lineage_refresh(vd_lineage *l, const vd_lineage_input *in, vd_refresh what,
    vd_lineage_delta *out);

/* The first whole pass over a whole scan of a large store is more than a
 * turn of the loop: with in->slice set, the refresh that would make it
 * only rebuilds the slots and leaves every group to compute, pending (not
 * trusted, not committed) with no head, and each vd_lineage_pass then
 * computes in->slice more chains (0: all that are left), then the head and
 * the alerts. Only the last says what changed (out, as the refresh in one
 * go would; else out is emptied). Meanwhile the model may change: a
 * group's chain reads the model as it is when computed, what changed
 * after stays marked for the refresh after the pass, and what it granted
 * on what changed is taken back at once (vd_lineage_pass_changed). A
 * vd_lineage_refresh under way drops the pass and recomputes everything
 * at once.
 * A refresh that would recompute every group because the model marked
 * too many to list (the verdicts that came in while a first pass went on)
 * is a pass too, in place: the groups keep what they read until the pass
 * computes them, but for those that changed since they were computed and
 * what they granted, which read pending; the head stays unless it was
 * among them. */
int vd_lineage_passing(const vd_lineage *l);
/* 1 while a pass in place goes on (vd_lineage_passing too). */
int vd_lineage_pass_in_place(const vd_lineage *l);
/* The model changed while the pass goes on: a group it computed that
 * changed since, and the descendants it granted an intact chain, read
 * pending again until the pass computes them anew, so that nothing reads
 * trusted or committed on what it no longer is. One that granted nothing
 * stays as computed (it reads no better than it is); the marks stay for
 * the refresh after the pass either way. 1 when the change reaches what
 * a commitment commits (a round check): the slots the pass reads are
 * stale, and only a refresh now (which drops the pass) will do. */
int vd_lineage_pass_changed(vd_lineage *l, const vd_lineage_input *in);
/* 1 when the pass ended with this slice (or none was under way). */
int vd_lineage_pass(vd_lineage *l, const vd_lineage_input *in, vd_lineage_delta *out);

/* What the lineage holds, read by the views, the store and the events
 * through these only. Iterators start with *it = 0 and return NULL at the
 * end; nothing may refresh the lineage meanwhile. */
const vd_commit_slot *vd_lineage_next_slot(const vd_lineage *l, size_t *it);
size_t vd_lineage_slot_count(const vd_lineage *l);
const vd_alert *vd_lineage_next_alert(const vd_lineage *l, size_t *it);
size_t vd_lineage_alert_count(const vd_lineage *l);
/* Raised alerts by kind, and commitments by source (VD_CS_*). */
const uint64_t *vd_lineage_alert_counts(const vd_lineage *l);
const uint64_t *vd_lineage_series(const vd_lineage *l);
/* The committed head: its round (-1: none), hash and run (NULL: none). */
int64_t vd_lineage_head(const vd_lineage *l, const char **hash, const char **run);

/* ---- trust: the one rule -------------------------------------------------
 * A hash is trusted when its verdict is verified, its chain is intact,
 * a counting commitment names it unopposed, and legacy_policy does not
 * distrust it. */

/* Why g would not be trusted with verdict st: the first rule it misses,
 * as GET /status says it ("failed", "unverified", "chain_broken",
 * "chain_pending", "uncommitted", "legacy"); NULL when trusted. Reads
 * the chain as lineage last computed it. */
const char *vd_trust_reason(const vd_group *g, vd_astate st);
/* Whether g is trusted, as the last refresh decided (vd_group_state). */
int vd_group_trusted(const vd_group *g);
/* Why g is not trusted, NULL when it is: a verdict lineage has not
 * looked at since leaves the chain pending. */
const char *vd_group_untrusted_reason(const vd_group *g);
/* Whether copy c of g is trusted: its own verdict, g's chain (a good copy
 * beside a bad one can be loaded). */
int vd_copy_trusted(const vd_copy *c, const vd_group *g);

/* The slot of (run, round), or NULL. */
const vd_commit_slot *vd_lineage_slot(const vd_lineage *l, const char *run, int64_t round);
/* Whether an entry counts under the policy: every source but an unsigned
 * ledger record under "signed". */
int vd_commit_counts(const vd_commit_entry *e, vd_commit_source src, int policy);

/* The slot's entry of source src, or NULL when src is not a source or the
 * slot has no such entry (a slot may hold only noted hashes): every view
 * reads a slot through this. */
const vd_commit_entry *vd_slot_entry(const vd_commit_slot *sl, int src);

/* The memory's part of the inputs: its pointers, valid until it next
 * changes. */
void vd_lineage_input_memory(vd_lineage_input *in, const vd_memory *m);

/* Another hash than hash that a commitment by the token or a trusted key
 * names for (run, round) as lineage last saw it: a signed statement or a
 * ledger record a signed checkpoint covers (never an unsigned record);
 * NULL when none does. */
const char *vd_lineage_strong_other(const vd_lineage *l, const char *run, int64_t round,
    const char *hash);

/* Whether a verified artifact of run with content hash, present or pruned
 * (retained: hash -> vd_retained, may be NULL), has a header round_index
 * other than round + 1: a RoundClose for round naming it commits nothing
 * (trust.md section 8). *header_round, when not NULL, gets that round. */
int vd_round_mismatch(const vd_model *m, const vd_map *retained, const char *run,
    int64_t round, const char *hash, int64_t *header_round);

/* Whether c's OMS bundle commits its content hash for its own header
 * round in its run: verified under the keys run_oms_keys gives the run
 * now, on a copy verified itself. */
int vd_oms_commits(const vd_copy *c, const struct vd_omskeys *keys);
/* Whether c's bundle was checked under other keys than its run's now. */
int vd_oms_stale(const vd_copy *c, const struct vd_omskeys *keys);

/* The schema_version a legacy hash's header.json was read through the
 * migration from (older than the newest the verifier reads), as its
 * first copy has it; 0 when it is not legacy. Under legacy_policy =
 * untrusted such a hash is never trusted (vd_group.legacy_untrusted). */
int64_t vd_group_migrated_from(const vd_group *g);

#endif

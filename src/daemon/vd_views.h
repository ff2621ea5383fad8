/*
 * What the HTTP API shows: the status object of an artifact and its
 * copies, the /artifacts listing, /chain, the verdict of POST /verify,
 * the answers to posts, the alert and commitment histories. Each view is
 * a function of the store's state (model, lineage, ledgers) as it is on
 * the loop thread, or of a row read for it, to JSON: no I/O, no HTTP.
 *
 * json-c answers NULL when memory runs out. A view that lost any part is
 * thrown away whole: it returns NULL (or -ENOMEM), never an answer with a
 * null where memory ran out.
 */
#ifndef VD_VIEWS_H
#define VD_VIEWS_H

#include <stddef.h>

#include <json-c/json.h>

#include "vd_dsse.h"
#include "vd_reqparse.h"
#include "vd_state.h"
#include "vd_store.h"
#include "vd_util.h"

/* How an answer is written: compact, "/" as it is. */
#define VD_VIEW_JSON (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

/* The status object of every copy claiming hash: 0 with *out set,
 * -ENOENT when no copy claims it, -ENOMEM. */
int vd_view_status(vd_store *s, const char *hash, json_object **out);

/* GET /artifacts: status objects by content hash, of one state (state
 * -1: all), after a hash (NULL: from the first), limit of them (0: all),
 * with "next" when limited; copies whose header claims no hash on the
 * last page. */
json_object *vd_view_artifacts(vd_store *s, int state, const char *after, size_t limit);

/* POST /verify once its verifications finished: the status object (of
 * the copy at relpath, for the path form) with "verdict" and "reasons". */
json_object *vd_view_verdict(vd_store *s, const vd_verify_req *vr, const char *relpath);

/* POST /verify not finished in time: {"state": "verifying", ...}; hash
 * and location NULL when the copy claims no hash. */
json_object *vd_view_accepted(const char *hash, const char *location);

/* POST /roundclose answered: the commitment (key_id NULL: by a token),
 * created or already known. */
json_object *vd_view_commitment_posted(const char *run, const vd_roundclose *rc,
    const char *key_id, int created);
/* POST /roundclose of a signed ledger checkpoint. */
json_object *vd_view_checkpoint_posted(const vd_statement *st, const char *key_id, int created);

/* DELETE /ledger: what was forgotten. */
json_object *vd_view_ledger_forgotten(const char *path);

/* GET /key: the key id and the public key in PEM. */
/* DELETE /commitment: what was withdrawn (created 0: already was). */
json_object *vd_view_withdrawn(const vd_withdrawal *w, int created);
/* GET /key: the verdicts' key, and the OMS bundles' (oms_* NULL: none). */
json_object *vd_view_key(const char *key_id, const char *pem, const char *oms_key_id,
    const char *oms_pem);
/* A verified copy of hash, when the artifact is trusted (directories
 * first): 0 with *out set, -ENOENT when no copy claims hash, -EPERM when
 * the artifact is not trusted. */
int vd_view_trusted_copy(vd_store *s, const char *hash, const vd_copy **out);
/* Whether the copy at relpath is still a trusted copy of hash, on the
 * bytes its verdict was reached on (fp): lineage as it stands, caught up
 * by the caller. */
int vd_view_copy_still_trusted(vd_store *s, const char *hash, const char *relpath,
    const vd_fingerprint *fp);

/* GET /chain?run=: one run's artifacts in round order after round after
 * (-1: from the first), limit of them (0: all), never splitting a round. */
json_object *vd_view_run_chain(vd_store *s, const char *run, long long after, size_t limit);

/* GET /chain: every run, the committed head, forks, ledgers and every
 * commitment, as text into b (initialised here; the caller's to free or
 * hand on). 0, or -ENOMEM with b empty. */
int vd_view_chain(vd_store *s, vd_buf *b);

/* A page of a history (GET /alerts, GET /commitments), filled a row at a
 * time by vd_state_list_alerts or vd_state_list_audit. */
typedef struct vd_view_rows {
	json_object *list;
	int oom;
} vd_view_rows;

/* 0, or -ENOMEM. */
int vd_view_rows_init(vd_view_rows *rows);
void vd_view_rows_free(vd_view_rows *rows);
void vd_view_alert_row(const vd_alert_row *a, void *rows);
void vd_view_audit_row(const vd_audit *a, void *rows);
/* {name: rows, "next": ...}: takes the rows, whatever it returns. */
json_object *vd_view_history(const char *name, vd_view_rows *rows, const vd_page *pg);

#endif

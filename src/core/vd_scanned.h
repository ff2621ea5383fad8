/*
 * What a scan hands to the loop, as plain values: an artifact's kind, its
 * header as read, the fingerprint of its files, a ledger as read, a change
 * the watches reported. The reading is vd_scan's (the shell); the model,
 * lineage and the changes keep these.
 */
#ifndef VD_SCANNED_H
#define VD_SCANNED_H

#include <stddef.h>
#include <stdint.h>

#include "vd_artifact.h"
#include "vd_ledger.h"
#include "vd_limits.h"
#include "vd_util.h"

/* What an artifact is on disk. */
typedef enum vd_artifact_kind {
	VD_KIND_DIR,                   /* a directory holding header.json */
	VD_KIND_TAR                    /* a tar of one, verified in place */
} vd_artifact_kind;

const char *vd_kind_name(vd_artifact_kind k);   /* "dir", "tar" */

/* What header.json says, copied out of the parsed document. */
typedef struct vd_hdrinfo {
	vd_code code;                  /* VD_OK when header.json parsed */
	char content_hash[VD_HASH_HEX_LEN + 1];
	int has_parent;
	char parent_hash[VD_HASH_HEX_LEN + 1];
	int64_t schema_version, round_index;
	char *wmcp_version, *config_hash, *created_at;
	char **param_groups;
	size_t n_param_groups;
} vd_hdrinfo;

void vd_hdrinfo_free(vd_hdrinfo *h);

/* A digest of every entry of a directory (name, type, device, inode, size,
 * times): equal digests mean nothing in it changed. */
typedef struct vd_fingerprint {
	uint8_t digest[32];
	size_t entries;
	size_t linked;      /* regular files with other hard links */
	int ok;
} vd_fingerprint;

int vd_fingerprint_eq(const vd_fingerprint *a, const vd_fingerprint *b);

/* An artifact as a scan found it. */
typedef struct vd_scan_artifact {
	char *relpath;       /* relative to the store root */
	char *run;           /* its parent directory, "" for the root */
	vd_artifact_kind kind;
	vd_fingerprint fp;
	vd_hdrinfo hdr;
} vd_scan_artifact;

typedef struct vd_ledger_entry {
	int64_t round_index;
	char global_model_hash[VD_HASH_HEX_LEN + 1];
	char record_hash[VD_HASH_HEX_LEN + 1];
	size_t line;
	int trusted;
} vd_ledger_entry;

typedef struct vd_scan_ledger {
	char *relpath;
	char *run;
	vd_file_id id;
	int read_ok;
	char read_error[VD_DETAIL_MAX];
	vd_ledger_result result;
	vd_ledger_entry *entries;
	size_t n_entries, cap_entries;
	int oom;             /* an entry could not be kept: the list is partial */
} vd_scan_ledger;

void vd_scan_ledger_free(vd_scan_ledger *l);

/* A change the watches reported: name in the directory dir, or dir
 * itself when name is "". */
typedef struct vd_scan_change {
	char *dir, *name;
} vd_scan_change;

#endif

/*
 * ledger.jsonl: one record a line, each binding the hash of the record
 * before it. Pure functions over bytes: a record parser and a chain
 * verifier that reports the first broken line.
 */
#ifndef VD_LEDGER_H
#define VD_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#include "vd_limits.h"
#include "vd_util.h"

#define VD_LEDGER_DOMAIN "lensemble/provenance/ledger-record/v1"  /* then \0 */
#define VD_LEDGER_SCHEMA 1

typedef struct vd_ledger_record {
	int64_t schema_version;
	int64_t round_index;
	char global_model_hash[VD_HASH_HEX_LEN + 1];
	int has_prev;
	char prev_record_hash[VD_HASH_HEX_LEN + 1];
	char record_hash[VD_HASH_HEX_LEN + 1];  /* what the next record must name */
} vd_ledger_record;

/* Why a chain breaks at a line. */
typedef enum vd_ledger_break {
	VD_LEDGER_INTACT = 0,
	VD_LEDGER_MALFORMED,        /* not a record: JSON, fields, types */
	VD_LEDGER_PREV_MISMATCH,    /* prev_record_hash is not the previous record's hash */
	VD_LEDGER_ROUND_ORDER,      /* round_index does not increase */
	VD_LEDGER_NO_ROUND_0        /* the first record is not round 0 */
} vd_ledger_break;

const char *vd_ledger_break_name(vd_ledger_break b);

/* Parse one line (without its newline). Returns 0, or -1 with a sentence. */
int vd_ledger_parse_record(const uint8_t *line, size_t len,
    vd_ledger_record *out, char *why, size_t whylen);

typedef struct vd_ledger_result {
	size_t records;            /* record lines (blank lines are skipped) */
	size_t trusted;            /* records before the first break */
	vd_ledger_break brk;
	size_t break_line;         /* 1-based line number, 0 if intact */
	char break_detail[VD_DETAIL_MAX];
} vd_ledger_result;

/* Called for each record that parses, in order; trusted is 1 before the
 * first break and 0 from it on. */
typedef void (*vd_ledger_fn)(const vd_ledger_record *rec, size_t line,
    int trusted, void *arg);

void vd_ledger_verify(const uint8_t *buf, size_t len, vd_ledger_fn fn,
    void *arg, vd_ledger_result *res);

#endif

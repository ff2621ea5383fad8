/*
 * The daemon's configuration: an immutable value built from defaults, the
 * config file and command-line overrides. Every limit the daemon enforces
 * is a key here, with its default, range and meaning in one table
 * (vd_config.c), which `lensemble-verifyd.conf(5)` documents.
 */
#ifndef VD_CONFIG_H
#define VD_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "lensemble/verify.h"
#include "vd_limits.h"
#include "vd_policy.h"

typedef struct vd_run_token {
	char run[VD_PIN_RUN_MAX];
	char file[VD_CONFIG_PATH_MAX];
} vd_run_token;

typedef struct vd_config {
	char listen[128];           /* ADDR:PORT as given */
	char listen_host[64];       /* parsed address */
	unsigned listen_port;
	int listen_v6;
	char store[VD_CONFIG_PATH_MAX];
	char state_dir[VD_CONFIG_PATH_MAX];
	char token_file[VD_CONFIG_PATH_MAX];
	char genesis_hash[VD_CONFIG_VALUE_MAX];    /* as written; parsed into genesis */
	vd_pin genesis[VD_CONFIG_MAX_PINS];
	size_t n_genesis;
	char anchor[VD_CONFIG_VALUE_MAX];          /* as written; parsed into anchors */
	vd_pin anchors[VD_CONFIG_MAX_PINS];
	size_t n_anchors;
	char run_token_file[VD_CONFIG_VALUE_MAX];  /* as written; parsed into run_tokens */
	vd_run_token run_tokens[VD_CONFIG_MAX_RUN_TOKENS];
	size_t n_run_tokens;
	char run_oms_keys[VD_CONFIG_VALUE_MAX];    /* as written; parsed into run_oms */
	vd_run_token run_oms[VD_CONFIG_MAX_RUN_OMS];  /* file: the directory */
	size_t n_run_oms;
	char trusted_keys[VD_CONFIG_PATH_MAX];
	char signing_key[VD_CONFIG_PATH_MAX];
	char oms_signing_key[VD_CONFIG_PATH_MAX];
	int commitment_policy;      /* VD_POLICY_*; see vd_config_policy */
	int legacy_policy;          /* VD_LEGACY_* */
	char user[64];
	char tls_cert[VD_CONFIG_PATH_MAX];
	char tls_key[VD_CONFIG_PATH_MAX];
	int log_level;
	int log_format;             /* VD_LOG_TEXT or VD_LOG_JSON (vd_log.h) */
	unsigned workers;           /* 0: one per core */
	unsigned queue_max;
	unsigned scan_depth;
	unsigned rescan_interval;   /* seconds */
	unsigned debounce_ms;
	unsigned max_body_bytes;
	unsigned max_request_header_bytes;
	unsigned max_json_depth;
	unsigned max_connections;
	unsigned max_connections_per_ip;
	unsigned connection_timeout;  /* seconds */
	unsigned request_header_timeout;  /* seconds to send a request line and headers */
	unsigned reserved_connections;    /* beyond max_connections, for loopback probes */
	unsigned max_wait;          /* seconds a /verify may hold its answer */
	uint64_t max_header_len;    /* safetensors header cap, bytes */
	uint64_t max_tensors;       /* tensors per artifact, all weight files together */
	uint64_t max_job_memory;    /* parse memory one verification may hold, bytes */
	uint64_t max_artifact_bytes;  /* weight bytes per artifact */
	unsigned max_verify_seconds;  /* per job; 0: verify_grace + size / verify_floor_rate */
	uint64_t verify_floor_rate;   /* bytes per second a job is expected to reach at least */
	unsigned hash_slice_ms;       /* hashing before a job gives way; 0: never */
	unsigned scrub_interval;    /* seconds; 0: never */
	uint64_t scrub_rate;        /* bytes per second */
	unsigned shutdown_grace;    /* seconds to finish work on SIGTERM */
	unsigned event_history;     /* events GET /events can resume from */
	unsigned max_event_streams; /* GET /events streams open at once */
	unsigned event_keepalive;   /* longest silence on a stream before a keepalive comment */
	unsigned alert_retention;   /* seconds a cleared alert stays in GET /alerts; 0: for ever */
	unsigned loop_stall_warn_ms;  /* a busier event-loop turn is logged at warning */
} vd_config;

void vd_config_defaults(vd_config *c);

/* The policy in force: as set, else signed when trusted_keys is set. */
int vd_config_policy(const vd_config *c);
/* What lineage follows of c (pointing into c). */
vd_policy vd_config_trust(const vd_config *c);
const char *vd_policy_name(int policy);
/* "accept" or "untrusted". */
const char *vd_legacy_policy_name(int policy);

/* Parse config text. On error returns -EINVAL and writes "FILE:LINE: problem",
 * or "FILE: problem" when keys conflict (vd_config_check) rather than a
 * line being wrong. */
int vd_config_parse(const char *text, size_t len, const char *filename,
    vd_config *c, char *err, size_t errlen);

/* Set one key (a command-line override). 0, or -EINVAL with a sentence. */
int vd_config_set(vd_config *c, const char *key, const char *value,
    char *err, size_t errlen);

/* The keys read only at start whose values differ between old and new,
 * as "listen, workers" in out ("" when none); their number. */
size_t vd_config_restart_changes(const vd_config *old, const vd_config *new, char *out,
    size_t outlen);

/* Checks across keys (TLS cert without key, ...). 0, or -EINVAL with a
 * sentence. */
int vd_config_check(const vd_config *c, char *err, size_t errlen);

/* Read and parse a file on top of defaults. 0, or with a sentence -EINVAL
 * (not a regular file, or it does not parse), -EFBIG (over
 * VD_CONFIG_MAX_BYTES) or the -errno of opening or reading it. */
int vd_config_load(const char *path, vd_config *c, char *err, size_t errlen);

/* A duration: a whole number of seconds, or of minutes, hours or days
 * with the suffix m, h or d ("90d"); "s" may follow seconds. 0, or
 * -EINVAL when malformed or beyond UINT64_MAX seconds. */
int vd_config_parse_duration(const char *s, uint64_t *seconds);

/* Iterate the key table, for docs and `-t -v`. */
typedef struct vd_config_key {
	const char *name;
	const char *def;
	const char *doc;
} vd_config_key;
const vd_config_key *vd_config_keys(size_t *n);

#endif

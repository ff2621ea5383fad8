#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vd_config.h"
#include "vd_dsse.h"
#include "vd_json.h"
#include "vd_limits.h"
#include "vd_log.h"
#include "vd_utf8.h"
#include "vd_util.h"

typedef enum key_type {
	K_STR, K_PATH, K_UINT, K_U64, K_LISTEN, K_LEVEL, K_PINS, K_ANCHORS, K_RUN_TOKENS, K_RUN_OMS, K_POLICY,
	K_LOGFMT, K_DURATION, K_LEGACY
} key_type;

typedef struct key_spec {
	const char *name;
	key_type type;
	size_t off, size;        /* where and how large (strings) */
	uint64_t min, max;
	const char *def;
	const char *doc;
} key_spec;

#define S(f) offsetof(vd_config, f), sizeof(((vd_config *)0)->f)
#define U(f) offsetof(vd_config, f), 0

/* Every key, its default and its range: the one place limits live. */
static const key_spec keys[] = {
	{ "listen", K_LISTEN, S(listen), 0, 0, "127.0.0.1:8420",
	  "address and port of the HTTP API (port 0: any free port)" },
	{ "store", K_PATH, S(store), 0, 0, "/srv/lensemble/artifacts",
	  "the artifact store root, read only" },
	{ "state_dir", K_PATH, S(state_dir), 0, 0, "/var/lib/lensemble-verifyd",
	  "where the state database lives" },
	{ "token_file", K_PATH, S(token_file), 0, 0, "",
	  "file holding the operator token for POST /roundclose (empty: endpoint refused)" },
	{ "genesis_hash", K_PINS, S(genesis_hash), 0, 0, "",
	  "[RUN:]HEX[, [RUN:]HEX...]: pinned content hash of a run's round-0 artifact; a bare HEX for every run without its own (empty: none)" },
	{ "anchor", K_ANCHORS, S(anchor), 0, 0, "",
	  "RUN:ROUND:HEX[, ...]: a later round pinned as a run's trusted root, for a run whose early rounds were never seen (empty: none)" },
	{ "run_token_file", K_RUN_TOKENS, S(run_token_file), 0, 0, "",
	  "RUN:FILE[, ...]: a token that commits for that run only, besides token_file (empty: none)" },
	{ "run_oms_keys", K_RUN_OMS, S(run_oms_keys), 0, 0, "",
	  "RUN:DIR[, ...]: EC public keys (*.pub) and CA certificates (*.pem) whose OpenSSF Model Signing bundles (model.sig) commit an artifact of that run for its own round; re-read on SIGHUP (empty: none)" },
	{ "trusted_keys", K_PATH, S(trusted_keys), 0, 0, "",
	  "directory of Ed25519 public keys (*.pub) whose signed commitments count (empty: none)" },
	{ "signing_key", K_PATH, S(signing_key), 0, 0, "",
	  "the daemon's Ed25519 private key (PKCS#8 PEM) for signed verdicts (empty: state_dir/signing.key, created at first start)" },
	{ "oms_signing_key", K_PATH, S(oms_signing_key), 0, 0, "",
	  "the daemon's EC private key (PKCS#8 PEM; P-256, P-384 or P-521) for the OMS bundles of GET /artifact/HASH/oms (empty: state_dir/oms-signing.key, a P-256 key created at first start)" },
	{ "commitment_policy", K_POLICY, U(commitment_policy), 0, 0, "",
	  "signed: only signed statements, token posts and the pin commit; ledger: unsigned ledger records too (empty: signed when trusted_keys is set, else ledger)" },
	{ "legacy_policy", K_LEGACY, U(legacy_policy), 0, 0, "accept",
	  "accept: an artifact of an older schema_version, read through the migration, is trusted as any other; untrusted: it is never trusted" },
	{ "user", K_STR, S(user), 0, 0, "",
	  "user to switch to after binding when started as root" },
	{ "tls_cert", K_PATH, S(tls_cert), 0, 0, "", "PEM certificate: serve HTTPS" },
	{ "tls_key", K_PATH, S(tls_key), 0, 0, "", "PEM private key for tls_cert" },
	{ "log_level", K_LEVEL, U(log_level), 0, 0, "info", "error, warning, info or debug" },
	{ "log_format", K_LOGFMT, U(log_format), 0, 0, "text",
	  "text (\"level: message\") or json (one object a line) on stderr; the journal gets its own fields either way" },
	{ "workers", K_UINT, U(workers), 0, 256, "0", "hasher threads (0: one per core)" },
	{ "queue_max", K_UINT, U(queue_max), 1, 1000000, "4096",
	  "verification jobs waiting at most; beyond it requests get 503" },
	{ "scan_depth", K_UINT, U(scan_depth), 1, 32, "4",
	  "directory levels below the store root searched for artifacts" },
	{ "rescan_interval", K_UINT, U(rescan_interval), 1, 86400, "60",
	  "seconds between identity rescans (for file systems without inotify)" },
	{ "debounce_ms", K_UINT, U(debounce_ms), 0, 60000, "200",
	  "milliseconds a burst of file changes settles before a scan" },
	{ "max_body_bytes", K_UINT, U(max_body_bytes), 64, 16 << 20, "65536",
	  "largest request body accepted (413 beyond)" },
	{ "max_request_header_bytes", K_UINT, U(max_request_header_bytes), 1024, 1 << 20, "16384",
	  "memory for one request's line and headers (431 beyond)" },
	{ "max_json_depth", K_UINT, U(max_json_depth), 2, 256, "16",
	  "nesting depth accepted in request bodies" },
	{ "max_connections", K_UINT, U(max_connections), 1, 100000, "512",
	  "open HTTP connections at most" },
	{ "max_connections_per_ip", K_UINT, U(max_connections_per_ip), 1, 100000, "64",
	  "open HTTP connections from one address at most" },
	{ "connection_timeout", K_UINT, U(connection_timeout), 1, 3600, "15",
	  "seconds an idle or slow connection is kept" },
	{ "request_header_timeout", K_UINT, U(request_header_timeout), 1, 3600, "5",
	  "seconds a client has to send a request line and headers (the connection is closed beyond)" },
	{ "reserved_connections", K_UINT, U(reserved_connections), 0, 1000, "4",
	  "connections beyond max_connections kept for GET /healthz, /readyz and /metrics from 127.0.0.1 or ::1 (0: none)" },
	{ "max_wait", K_UINT, U(max_wait), 0, VD_API_MAX_WAIT, VD_XSTR(VD_API_MAX_WAIT),
	  "seconds POST /verify?wait= may hold its answer" },
	{ "max_header_len", K_U64, U(max_header_len), 2, 100000000, "100000000",
	  "largest safetensors JSON header, bytes" },
	{ "max_tensors", K_U64, U(max_tensors), 1, 100000000, VD_XSTR(VD_MAX_TENSORS_DEFAULT),
	  "tensors per artifact, over all its weight files (artifact_invalid beyond)" },
	{ "max_job_memory", K_U64, U(max_job_memory), 1048576, 1ull << 40, VD_XSTR(VD_MAX_JOB_MEMORY_DEFAULT),
	  "memory one verification may spend parsing header.json and the safetensors headers, bytes (artifact_invalid beyond)" },
	{ "max_artifact_bytes", K_U64, U(max_artifact_bytes), 1, UINT64_MAX, VD_XSTR(VD_MAX_ARTIFACT_BYTES_DEFAULT),
	  "weight bytes per artifact, all files together (artifact_invalid beyond)" },
	{ "max_verify_seconds", K_UINT, U(max_verify_seconds), 0, 31536000, "0",
	  "seconds one verification may run before it is abandoned as io_error and retried later (0: 60 + weight bytes / verify_floor_rate)" },
	{ "hash_slice_ms", K_UINT, U(hash_slice_ms), 0, 60000, VD_XSTR(VD_HASH_SLICE_MS_DEFAULT),
	  "milliseconds a verification hashes before it gives its hasher to a job ahead of it (explicit, or one that has hashed less) and waits to go on where it stopped (0: it never gives way)" },
	{ "verify_floor_rate", K_U64, U(verify_floor_rate), 1048576, UINT64_MAX, "10485760",
	  "bytes per second the automatic max_verify_seconds expects a verification to reach at least" },
	{ "scrub_interval", K_UINT, U(scrub_interval), 0, 31536000, "86400",
	  "seconds between re-hashes of every artifact (0: never)" },
	{ "scrub_rate", K_U64, U(scrub_rate), 1048576, UINT64_MAX, "104857600",
	  "bytes per second a scrub reads at most" },
	{ "shutdown_grace", K_UINT, U(shutdown_grace), 0, 60, "3",
	  "seconds to let running hashes finish on SIGTERM" },
	{ "event_history", K_UINT, U(event_history), 0, 10000000, "10000",
	  "events kept in the state database for GET /events to resume from (Last-Event-ID)" },
	{ "max_event_streams", K_UINT, U(max_event_streams), 0, 100000, "256",
	  "GET /events streams open at once; beyond it 503 (0: none)" },
	{ "event_keepalive", K_UINT, U(event_keepalive), 1, 3600, "15",
	  "longest silence, in seconds, before a keepalive comment on a GET /events stream" },
	{ "alert_retention", K_DURATION, U(alert_retention), 0, 3650 * 86400u, "90d",
	  "how long a cleared alert stays in GET /alerts: seconds, or with m, h or d (0: for ever)" },
	{ "loop_stall_warn_ms", K_UINT, U(loop_stall_warn_ms), 1, 60000, VD_XSTR(VD_LOOP_STALL_WARN_MS_DEFAULT),
	  "milliseconds one turn of the event loop may be busy before it is logged at warning (at most one line a minute)" },
};

/* Read once at start (what they configure is bound, opened or sized
 * then): a reload that changes them only warns. */
static const char *const restart_keys[] = {
	"listen", "store", "state_dir", "workers", "user", "tls_cert", "tls_key",
	"max_connections", "max_connections_per_ip", "connection_timeout",
	"max_request_header_bytes",
};

const vd_config_key *vd_config_keys(size_t *n)
{
	static vd_config_key docs[VD_ARRAY_LEN(keys)];
	size_t i;

	for (i = 0; i < VD_ARRAY_LEN(keys); i++) {
		docs[i].name = keys[i].name;
		docs[i].def = keys[i].def;
		docs[i].doc = keys[i].doc;
	}
	*n = VD_ARRAY_LEN(keys);
	return docs;
}

static const key_spec *find_key(const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < VD_ARRAY_LEN(keys); i++)
		if (strlen(keys[i].name) == len && memcmp(keys[i].name, name, len) == 0)
			return &keys[i];
	return NULL;
}

static int parse_u64(const char *v, uint64_t *out)
{
	char *end;

	if (!isdigit((unsigned char)v[0]))
		return -EINVAL;
	errno = 0;
	*out = strtoull(v, &end, 10);
	return errno || *end != '\0' ? -EINVAL : 0;
}

/* "127.0.0.1:8420", "[::1]:8420", "0.0.0.0:0". */
static int parse_listen(vd_config *c, const char *v, char *err, size_t errlen)
{
	const char *colon = strrchr(v, ':');
	uint64_t port;
	size_t hlen;

	if (colon == NULL || parse_u64(colon + 1, &port) < 0 || port > 65535) {
		snprintf(err, errlen, "listen must be ADDR:PORT with a port from 0 to 65535");
		return -EINVAL;
	}
	hlen = (size_t)(colon - v);
	c->listen_v6 = v[0] == '[';
	if (c->listen_v6) {
		if (hlen < 3 || v[hlen - 1] != ']') {
			snprintf(err, errlen, "listen: an IPv6 address goes in brackets, as [::1]:8420");
			return -EINVAL;
		}
		v++;
		hlen -= 2;
	}
	if (!c->listen_v6 && memchr(v, ':', hlen) != NULL) {
		snprintf(err, errlen, "listen: an IPv6 address goes in brackets, as [::1]:8420");
		return -EINVAL;
	}
	if (hlen == 0 || hlen >= sizeof(c->listen_host)) {
		snprintf(err, errlen, "listen: the address is empty or too long");
		return -EINVAL;
	}
	memcpy(c->listen_host, v, hlen);
	c->listen_host[hlen] = '\0';
	c->listen_port = (unsigned)port;
	return 0;
}

/* A run in a list entry: "." or a relative directory path, no ':' (it
 * separates the fields), stored as "" for the root. */
static int entry_run(const char *p, size_t n, char *out, char *err, size_t errlen, const char *key)
{
	if (n == 0 || n >= VD_PIN_RUN_MAX || memchr(p, ':', n) != NULL || !vd_run_name_valid(p, n)) {
		snprintf(err, errlen, "%s: \"%.*s\" is not a run (\".\" or a directory path inside the store, at most %d characters)",
		    key, (int)(n > 64 ? 64 : n), p, VD_PIN_RUN_MAX - 1);
		return -EINVAL;
	}
	if (n == 1 && p[0] == '.')
		n = 0;
	memcpy(out, p, n);
	out[n] = '\0';
	return 0;
}

static int entry_hash(const char *p, size_t n, char *out, char *err, size_t errlen, const char *key)
{
	if (!vd_is_hex64((vd_str){ p, n })) {
		snprintf(err, errlen, "%s: a content hash is 64 lowercase hex characters", key);
		return -EINVAL;
	}
	memcpy(out, p, VD_HASH_HEX_LEN);
	out[VD_HASH_HEX_LEN] = '\0';
	return 0;
}

/* [RUN:]HEX (genesis_hash) or RUN:ROUND:HEX (anchor). */
static int parse_pin(const key_spec *k, const char *p, size_t n, vd_pin *pin, char *err, size_t errlen)
{
	const char *colon = n > VD_HASH_HEX_LEN ? p + n - VD_HASH_HEX_LEN - 1 : NULL;
	const char *mid;
	uint64_t round = 0;
	char num[24];

	memset(pin, 0, sizeof(*pin));
	if (colon == NULL || *colon != ':') {
		if (k->type == K_ANCHORS) {
			snprintf(err, errlen, "anchor entries are RUN:ROUND:HEX");
			return -EINVAL;
		}
		snprintf(pin->run, sizeof(pin->run), "*");
		return entry_hash(p, n, pin->hash, err, errlen, k->name);
	}
	if (entry_hash(colon + 1, VD_HASH_HEX_LEN, pin->hash, err, errlen, k->name) < 0)
		return -EINVAL;
	if (k->type == K_PINS)
		return entry_run(p, (size_t)(colon - p), pin->run, err, errlen, k->name);
	for (mid = colon; mid > p && mid[-1] != ':'; mid--)
		;
	if (mid == p || (size_t)(colon - mid) >= sizeof(num) || colon == mid) {
		snprintf(err, errlen, "anchor entries are RUN:ROUND:HEX");
		return -EINVAL;
	}
	memcpy(num, mid, (size_t)(colon - mid));
	num[colon - mid] = '\0';
	if (parse_u64(num, &round) < 0 || round == 0 || round > INT64_MAX) {
		snprintf(err, errlen, "anchor: the round must be a whole number above 0");
		return -EINVAL;
	}
	pin->round_index = (int64_t)round;
	return entry_run(p, (size_t)(mid - 1 - p), pin->run, err, errlen, k->name);
}

/* RUN:PATH with an absolute PATH (run_token_file, run_oms_keys). */
static int parse_run_token(const key_spec *k, const char *p, size_t n, vd_run_token *t,
    char *err, size_t errlen)
{
	const char *colon = memchr(p, ':', n), *what = k->type == K_RUN_OMS ? "DIR" : "FILE";

	memset(t, 0, sizeof(*t));
	if (colon == NULL || colon + 1 == p + n || colon[1] != '/' ||
	    (size_t)(p + n - colon - 1) >= sizeof(t->file)) {
		snprintf(err, errlen, "%s entries are RUN:%s with an absolute %s", k->name, what, what);
		return -EINVAL;
	}
	memcpy(t->file, colon + 1, (size_t)(p + n - colon - 1));
	return entry_run(p, (size_t)(colon - p), t->run, err, errlen, k->name);
}

/* The array a list of runs fills, its count and its capacity. */
static vd_run_token *run_list(const key_spec *k, vd_config *c, size_t **n, size_t *cap)
{
	if (k->type == K_RUN_OMS) {
		*n = &c->n_run_oms;
		*cap = VD_CONFIG_MAX_RUN_OMS;
		return c->run_oms;
	}
	*n = &c->n_run_tokens;
	*cap = VD_CONFIG_MAX_RUN_TOKENS;
	return c->run_tokens;
}

/* A comma-separated list, each entry into its array; a run named twice
 * in one list is refused (which would win is not obvious). */
static int parse_list(const key_spec *k, vd_config *c, const char *v, char *err, size_t errlen)
{
	int runs = k->type == K_RUN_TOKENS || k->type == K_RUN_OMS;
	size_t *n = k->type == K_PINS ? &c->n_genesis : &c->n_anchors;
	size_t cap = VD_CONFIG_MAX_PINS, i, len;
	vd_run_token *rt = runs ? run_list(k, c, &n, &cap) : NULL;
	const char *p = v, *end, *run;
	int rc;

	*n = 0;
	while (*p != '\0') {
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == '\0')
			break;
		for (end = p; *end != '\0' && *end != ','; end++)
			;
		for (len = (size_t)(end - p); len > 0 && p[len - 1] == ' '; len--)
			;
		if (*n == cap) {
			snprintf(err, errlen, "%s has more than %zu entries", k->name, cap);
			return -EINVAL;
		}
		if (runs)
			rc = parse_run_token(k, p, len, &rt[*n], err, errlen);
		else
			rc = parse_pin(k, p, len, &(k->type == K_PINS ? c->genesis : c->anchors)[*n], err, errlen);
		if (rc < 0)
			return -EINVAL;
		run = runs ? rt[*n].run : (k->type == K_PINS ? c->genesis : c->anchors)[*n].run;
		for (i = 0; i < *n && k->type != K_ANCHORS; i++)
			if (strcmp(run, runs ? rt[i].run : c->genesis[i].run) == 0) {
				snprintf(err, errlen, "%s names run %s twice", k->name, run[0] ? run : ".");
				return -EINVAL;
			}
		(*n)++;
		p = end;
	}
	return 0;
}

static int set_string(const key_spec *k, vd_config *c, const char *v, char *err,
    size_t errlen)
{
	if (strlen(v) >= k->size) {
		snprintf(err, errlen, "%s is longer than %zu characters", k->name, k->size - 1);
		return -EINVAL;
	}
	if (k->type == K_PATH && v[0] != '\0' && v[0] != '/') {
		snprintf(err, errlen, "%s must be an absolute path", k->name);
		return -EINVAL;
	}
	memcpy((char *)c + k->off, v, strlen(v) + 1);
	return 0;
}

static int set_number(const key_spec *k, vd_config *c, const char *v, char *err,
    size_t errlen)
{
	uint64_t n;

	if (parse_u64(v, &n) < 0 || n < k->min || n > k->max) {
		snprintf(err, errlen, "%s must be a whole number from %llu to %llu", k->name,
		    (unsigned long long)k->min, (unsigned long long)k->max);
		return -EINVAL;
	}
	if (k->type == K_UINT)
		*(unsigned *)(void *)((char *)c + k->off) = (unsigned)n;
	else
		*(uint64_t *)(void *)((char *)c + k->off) = n;
	return 0;
}

int vd_config_parse_duration(const char *s, uint64_t *seconds)
{
	static const struct { char suffix; uint64_t scale; } units[] = {
		{ 's', 1 }, { 'm', 60 }, { 'h', 3600 }, { 'd', 86400 },
	};
	char digits[24];
	size_t len = strlen(s), i;
	uint64_t n, scale = 1;

	if (len > 0 && !isdigit((unsigned char)s[len - 1])) {
		for (i = 0; i < VD_ARRAY_LEN(units) && units[i].suffix != s[len - 1]; i++)
			;
		if (i == VD_ARRAY_LEN(units))
			return -EINVAL;
		scale = units[i].scale;
		len--;
	}
	if (len == 0 || len >= sizeof(digits))
		return -EINVAL;
	memcpy(digits, s, len);
	digits[len] = '\0';
	if (parse_u64(digits, &n) < 0 || vd_mul_u64(n, scale, seconds) < 0)
		return -EINVAL;
	return 0;
}

/* A duration key is held in seconds; its range is given in days. */
static int set_duration(const key_spec *k, vd_config *c, const char *v, char *err,
    size_t errlen)
{
	uint64_t n;

	if (vd_config_parse_duration(v, &n) < 0 || n < k->min || n > k->max) {
		snprintf(err, errlen, "%s must be a duration from %llu to %llud: seconds, or a whole number followed by m, h or d",
		    k->name, (unsigned long long)k->min, (unsigned long long)(k->max / 86400));
		return -EINVAL;
	}
	*(unsigned *)(void *)((char *)c + k->off) = (unsigned)n;
	return 0;
}

static int set_key(const key_spec *k, vd_config *c, const char *v, char *err,
    size_t errlen)
{
	int level;

	switch (k->type) {
	case K_STR: case K_PATH:
		return set_string(k, c, v, err, errlen);
	case K_PINS: case K_ANCHORS: case K_RUN_TOKENS: case K_RUN_OMS:
		if (set_string(k, c, v, err, errlen) < 0)
			return -EINVAL;
		return parse_list(k, c, v, err, errlen);
	case K_UINT: case K_U64:
		return set_number(k, c, v, err, errlen);
	case K_LISTEN:
		if (set_string(k, c, v, err, errlen) < 0)
			return -EINVAL;
		return parse_listen(c, v, err, errlen);
	case K_POLICY:
		if (strcmp(v, "signed") == 0)
			c->commitment_policy = VD_POLICY_SIGNED;
		else if (strcmp(v, "ledger") == 0)
			c->commitment_policy = VD_POLICY_LEDGER;
		else if (v[0] == '\0')
			c->commitment_policy = VD_POLICY_DEFAULT;
		else {
			snprintf(err, errlen, "commitment_policy must be signed or ledger");
			return -EINVAL;
		}
		return 0;
	case K_DURATION:
		return set_duration(k, c, v, err, errlen);
	case K_LEGACY:
		if (strcmp(v, "accept") == 0)
			c->legacy_policy = VD_LEGACY_ACCEPT;
		else if (strcmp(v, "untrusted") == 0)
			c->legacy_policy = VD_LEGACY_UNTRUSTED;
		else {
			snprintf(err, errlen, "legacy_policy must be accept or untrusted");
			return -EINVAL;
		}
		return 0;
	case K_LOGFMT:
		if ((level = vd_log_format_parse(v)) < 0) {
			snprintf(err, errlen, "log_format must be text or json");
			return -EINVAL;
		}
		c->log_format = level;
		return 0;
	case K_LEVEL:
		if ((level = vd_log_level_parse(v)) < 0) {
			snprintf(err, errlen, "log_level must be error, warning, info or debug");
			return -EINVAL;
		}
		c->log_level = level;
		return 0;
	}
	return -EINVAL;
}

int vd_config_policy(const vd_config *c)
{
	if (c->commitment_policy != VD_POLICY_DEFAULT)
		return c->commitment_policy;
	return c->trusted_keys[0] ? VD_POLICY_SIGNED : VD_POLICY_LEDGER;
}

vd_policy vd_config_trust(const vd_config *c)
{
	vd_policy p = { vd_config_policy(c), c->legacy_policy, c->genesis, c->n_genesis,
		c->anchors, c->n_anchors };

	return p;
}

const char *vd_policy_name(int policy)
{
	return policy == VD_POLICY_SIGNED ? "signed" : "ledger";
}

const char *vd_legacy_policy_name(int policy)
{
	return policy == VD_LEGACY_UNTRUSTED ? "untrusted" : "accept";
}

void vd_config_defaults(vd_config *c)
{
	char err[128];
	size_t i;

	memset(c, 0, sizeof(*c));
	for (i = 0; i < VD_ARRAY_LEN(keys); i++)
		if (set_key(&keys[i], c, keys[i].def, err, sizeof(err)) < 0)
			abort();    /* a bad default is a build bug */
}

int vd_config_set(vd_config *c, const char *key, const char *value, char *err,
    size_t errlen)
{
	const key_spec *k = find_key(key, strlen(key));

	if (k == NULL) {
		snprintf(err, errlen, "unknown key \"%s\"", key);
		return -EINVAL;
	}
	return set_key(k, c, value, err, errlen);
}

/* One "key = value" line, comments and blanks already excluded. Values may
 * be double-quoted to keep leading or trailing spaces or a '#'. */
static int parse_line(const char *p, const char *end, vd_config *c, char *seen,
    char *err, size_t errlen)
{
	const char *eq = memchr(p, '=', (size_t)(end - p)), *k_end, *v;
	char value[VD_CONFIG_VALUE_MAX + 2];
	const key_spec *k;
	size_t vlen;

	if (eq == NULL) {
		snprintf(err, errlen, "expected \"key = value\"");
		return -EINVAL;
	}
	for (k_end = eq; k_end > p && isspace((unsigned char)k_end[-1]); k_end--)
		;
	if ((k = find_key(p, (size_t)(k_end - p))) == NULL) {
		snprintf(err, errlen, "unknown key \"%.*s\"", (int)(k_end - p > 64 ? 64 : k_end - p), p);
		return -EINVAL;
	}
	if (seen[k - keys]++) {
		snprintf(err, errlen, "%s is set twice", k->name);
		return -EINVAL;
	}
	for (v = eq + 1; v < end && isspace((unsigned char)*v); v++)
		;
	vlen = (size_t)(end - v);
	if (vlen >= 2 && v[0] == '"' && v[vlen - 1] == '"') {
		v++;
		vlen -= 2;
	}
	if (memchr(v, '"', vlen) != NULL) {
		snprintf(err, errlen, "%s: unbalanced quote", k->name);
		return -EINVAL;
	}
	if (vlen >= sizeof(value) || memchr(v, '\0', vlen) != NULL) {
		snprintf(err, errlen, "%s: the value is too long or holds a NUL byte", k->name);
		return -EINVAL;
	}
	memcpy(value, v, vlen);
	value[vlen] = '\0';
	return set_key(k, c, value, err, errlen);
}

/* Trim a line to its content: drop comments (outside quotes) and spaces. */
static const char *content_end(const char *p, const char *end)
{
	const char *q;
	int quoted = 0;

	for (q = p; q < end; q++) {
		if (*q == '"')
			quoted = !quoted;
		else if (*q == '#' && !quoted)
			break;
	}
	while (q > p && isspace((unsigned char)q[-1]))
		q--;
	return q;
}

static void printable(char *s)
{
	vd_utf8_sanitize(s);
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

int vd_config_parse(const char *text, size_t len, const char *filename,
    vd_config *c, char *err, size_t errlen)
{
	const char *p = text, *end = text + len, *nl, *e;
	char seen[VD_ARRAY_LEN(keys)] = { 0 }, msg[256];
	unsigned line = 0;

	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL)
			nl = end;
		line++;
		while (p < nl && isspace((unsigned char)*p))
			p++;
		e = content_end(p, nl);
		if (e > p && parse_line(p, e, c, seen, msg, sizeof(msg)) < 0) {
			/* The message quotes the file: keep it printable. */
			printable(msg);
			snprintf(err, errlen, "%s:%u: %s", filename, line, msg);
			return -EINVAL;
		}
		p = nl < end ? nl + 1 : end;
	}
	if (vd_config_check(c, msg, sizeof(msg)) < 0) {
		snprintf(err, errlen, "%s: %s", filename, msg);
		return -EINVAL;
	}
	return 0;
}

static int key_differs(const key_spec *k, const vd_config *a, const vd_config *b)
{
	const char *pa = (const char *)a + k->off, *pb = (const char *)b + k->off;

	switch (k->type) {
	case K_UINT:
		return *(const unsigned *)(const void *)pa != *(const unsigned *)(const void *)pb;
	case K_U64:
		return *(const uint64_t *)(const void *)pa != *(const uint64_t *)(const void *)pb;
	case K_STR: case K_PATH: case K_LISTEN: case K_PINS: case K_ANCHORS: case K_RUN_TOKENS:
	case K_RUN_OMS:
		return strcmp(pa, pb) != 0;   /* as written: the parsed fields follow from it */
	default:    /* the enumerations and durations are held as int or unsigned */
		return *(const int *)(const void *)pa != *(const int *)(const void *)pb;
	}
}

size_t vd_config_restart_changes(const vd_config *old, const vd_config *new, char *out,
    size_t outlen)
{
	const key_spec *k;
	size_t i, n = 0, len = 0;

	if (outlen > 0)
		out[0] = '\0';
	for (i = 0; i < VD_ARRAY_LEN(restart_keys); i++) {
		k = find_key(restart_keys[i], strlen(restart_keys[i]));
		if (k == NULL || !key_differs(k, old, new))
			continue;
		if (len < outlen)
			len += (size_t)snprintf(out + len, outlen - len, "%s%s", n ? ", " : "", k->name);
		n++;
	}
	return n;
}

int vd_config_check(const vd_config *c, char *err, size_t errlen)
{
	if ((c->tls_cert[0] == '\0') != (c->tls_key[0] == '\0')) {
		snprintf(err, errlen, "tls_cert and tls_key go together: set both or neither");
		return -EINVAL;
	}
	if (c->store[0] == '\0') {
		snprintf(err, errlen, "store must be set");
		return -EINVAL;
	}
	if (c->max_connections_per_ip > c->max_connections) {
		snprintf(err, errlen, "max_connections_per_ip exceeds max_connections");
		return -EINVAL;
	}
	return 0;
}

int vd_config_load(const char *path, vd_config *c, char *err, size_t errlen)
{
	vd_buf b;
	int rc;

	vd_buf_init(&b);
	rc = vd_read_file(path, VD_CONFIG_MAX_BYTES, &b);
	if (rc == -EINVAL || rc == -EFBIG)
		snprintf(err, errlen, "%s: not a regular file of at most %u bytes", path,
		    VD_CONFIG_MAX_BYTES);
	else if (rc < 0)
		snprintf(err, errlen, "%s: cannot read: %s", path, strerror(-rc));
	else
		rc = vd_config_parse(b.p ? (const char *)b.p : "", b.len, path, c, err, errlen);
	vd_buf_free(&b);
	return rc;
}

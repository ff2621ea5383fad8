/*
 * lensemble-verifyd.conf, parsed on top of the defaults as `-t` and a
 * reload do. A refusal is the operator's whole diagnosis, so it must name
 * the file and, for a bad line, that line: one that exists, holds
 * something, and follows only lines that parse. An accepted file gives a
 * configuration that passes the cross-key check, keeps every string
 * terminated inside its array, and reads back to itself when written out
 * as "key = value" lines (what `-t -v` shows must mean the same thing).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vd_config.h"
#include "vd_log.h"
#include "vd_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A format directive in the name would show if it ever reached printf
 * as a format. */
#define FILENAME "/etc/lensemble-verifyd%n%s.conf"
/* What lensemble-verifyd passes. */
#define ERR_FULL 512

enum ftype { F_STR, F_UINT, F_U64, F_LEVEL, F_POLICY, F_LOGFMT, F_LEGACY };

#define STR(f) F_STR, offsetof(vd_config, f), sizeof(((vd_config *)0)->f)
#define NUM(t, f) t, offsetof(vd_config, f), 0

static const struct field {
	const char *name;
	enum ftype type;
	size_t off, size;
} fields[] = {
	{ "listen", STR(listen) },
	{ "store", STR(store) },
	{ "state_dir", STR(state_dir) },
	{ "token_file", STR(token_file) },
	{ "genesis_hash", STR(genesis_hash) },
	{ "anchor", STR(anchor) },
	{ "run_token_file", STR(run_token_file) },
	{ "run_oms_keys", STR(run_oms_keys) },
	{ "trusted_keys", STR(trusted_keys) },
	{ "signing_key", STR(signing_key) },
	{ "oms_signing_key", STR(oms_signing_key) },
	{ "commitment_policy", NUM(F_POLICY, commitment_policy) },
	{ "legacy_policy", NUM(F_LEGACY, legacy_policy) },
	{ "user", STR(user) },
	{ "tls_cert", STR(tls_cert) },
	{ "tls_key", STR(tls_key) },
	{ "log_level", NUM(F_LEVEL, log_level) },
	{ "workers", NUM(F_UINT, workers) },
	{ "queue_max", NUM(F_UINT, queue_max) },
	{ "scan_depth", NUM(F_UINT, scan_depth) },
	{ "rescan_interval", NUM(F_UINT, rescan_interval) },
	{ "debounce_ms", NUM(F_UINT, debounce_ms) },
	{ "max_body_bytes", NUM(F_UINT, max_body_bytes) },
	{ "max_request_header_bytes", NUM(F_UINT, max_request_header_bytes) },
	{ "max_json_depth", NUM(F_UINT, max_json_depth) },
	{ "max_connections", NUM(F_UINT, max_connections) },
	{ "max_connections_per_ip", NUM(F_UINT, max_connections_per_ip) },
	{ "connection_timeout", NUM(F_UINT, connection_timeout) },
	{ "request_header_timeout", NUM(F_UINT, request_header_timeout) },
	{ "reserved_connections", NUM(F_UINT, reserved_connections) },
	{ "max_wait", NUM(F_UINT, max_wait) },
	{ "max_header_len", NUM(F_U64, max_header_len) },
	{ "max_tensors", NUM(F_U64, max_tensors) },
	{ "max_job_memory", NUM(F_U64, max_job_memory) },
	{ "max_artifact_bytes", NUM(F_U64, max_artifact_bytes) },
	{ "max_verify_seconds", NUM(F_UINT, max_verify_seconds) },
	{ "hash_slice_ms", NUM(F_UINT, hash_slice_ms) },
	{ "verify_floor_rate", NUM(F_U64, verify_floor_rate) },
	{ "scrub_interval", NUM(F_UINT, scrub_interval) },
	{ "scrub_rate", NUM(F_U64, scrub_rate) },
	{ "shutdown_grace", NUM(F_UINT, shutdown_grace) },
	{ "event_history", NUM(F_UINT, event_history) },
	{ "max_event_streams", NUM(F_UINT, max_event_streams) },
	{ "event_keepalive", NUM(F_UINT, event_keepalive) },
	{ "log_format", NUM(F_LOGFMT, log_format) },
	{ "alert_retention", NUM(F_UINT, alert_retention) },
	{ "loop_stall_warn_ms", NUM(F_UINT, loop_stall_warn_ms) },
};

/* The write-back below covers every key only if this table does: a key
 * added to the parser without a row here stops the fuzzer at start. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const vd_config_key *k;
	size_t n, i, j;

	(void)argc;
	(void)argv;
	k = vd_config_keys(&n);
	for (i = 0; i < n; i++) {
		for (j = 0; j < VD_ARRAY_LEN(fields); j++)
			if (strcmp(k[i].name, fields[j].name) == 0)
				break;
		if (j == VD_ARRAY_LEN(fields)) {
			fprintf(stderr, "fuzz_config: key %s has no row in fields[]\n", k[i].name);
			abort();
		}
	}
	if (n != VD_ARRAY_LEN(fields)) {
		fprintf(stderr, "fuzz_config: fields[] names a key the parser lacks\n");
		abort();
	}
	return 0;
}

static void parse(const char *text, size_t len, vd_config *c, int *rc, char *err)
{
	memset(err, 0xa5, ERR_FULL);
	vd_config_defaults(c);
	*rc = vd_config_parse(text, len, FILENAME, c, err, ERR_FULL);
	/* A refusal writes a terminated message inside the buffer. */
	if (*rc != 0 && memchr(err, '\0', ERR_FULL) == NULL)
		abort();
}

static int terminated(const char *s, size_t size)
{
	return memchr(s, '\0', size) != NULL;
}

static void check_accepted(const vd_config *c)
{
	char err[ERR_FULL];
	const struct field *f;
	const char *s;
	vd_config again;
	vd_buf out;
	size_t i;
	int rc;

	if (vd_config_check(c, err, sizeof(err)) != 0)
		abort();
	if (!terminated(c->listen_host, sizeof(c->listen_host)) ||
	    c->listen_host[0] == '\0' || c->listen_port > 65535)
		abort();

	vd_buf_init(&out);
	for (i = 0; i < VD_ARRAY_LEN(fields); i++) {
		f = &fields[i];
		switch (f->type) {
		case F_STR:
			s = (const char *)c + f->off;
			if (!terminated(s, f->size))
				abort();
			/* Quoted, so that blanks and '#' survive. */
			vd_buf_printf(&out, "%s = \"%s\"\n", f->name, s);
			break;
		case F_UINT:
			vd_buf_printf(&out, "%s = %u\n", f->name,
			    *(const unsigned *)(const void *)((const char *)c + f->off));
			break;
		case F_U64:
			vd_buf_printf(&out, "%s = %llu\n", f->name, (unsigned long long)
			    *(const uint64_t *)(const void *)((const char *)c + f->off));
			break;
		case F_LEVEL:
			vd_buf_printf(&out, "%s = %s\n", f->name, vd_log_level_name(c->log_level));
			break;
		case F_LOGFMT:
			vd_buf_printf(&out, "%s = %s\n", f->name, vd_log_format_name(c->log_format));
			break;
		case F_POLICY:
			vd_buf_printf(&out, "%s = \"%s\"\n", f->name,
			    c->commitment_policy == VD_POLICY_DEFAULT ? "" :
			    vd_policy_name(c->commitment_policy));
			break;
		case F_LEGACY:
			vd_buf_printf(&out, "%s = %s\n", f->name, vd_legacy_policy_name(c->legacy_policy));
			break;
		}
	}
	if (out.oom)
		abort();
	parse((const char *)out.p, out.len, &again, &rc, err);
	if (rc != 0 || memcmp(c, &again, sizeof(again)) != 0)
		abort();
	vd_buf_free(&out);
}

/* "FILE:LINE: problem" for a line, "FILE: problem" for the check across
 * keys once every line has parsed. */
static void check_refused(const vd_config *c, const char *err, const char *text,
    size_t len)
{
	char again_err[ERR_FULL], check_err[ERR_FULL];
	size_t flen = strlen(FILENAME), lines = 0, i, start, end;
	unsigned long line = 0;
	const char *p;
	vd_config again;
	int rc;

	if (strncmp(err, FILENAME, flen) != 0)
		abort();
	p = err + flen;
	if (p[0] == ':' && p[1] == ' ') {
		/* The check's own words, and only when the check fails. */
		if (vd_config_check(c, check_err, sizeof(check_err)) == 0 ||
		    strcmp(p + 2, check_err) != 0)
			abort();
		return;
	}
	if (p[0] != ':' || p[1] < '1' || p[1] > '9')
		abort();
	for (p++; *p >= '0' && *p <= '9'; p++) {
		line = line * 10 + (unsigned long)(*p - '0');
		if (line > len + 1)
			abort();
	}
	if (p[0] != ':' || p[1] != ' ' || p[2] == '\0')
		abort();

	/* Line `line` exists and is not blank. */
	for (i = 0; i < len; i++)
		lines += text[i] == '\n';
	lines += len > 0 && text[len - 1] != '\n';
	if (line > lines)
		abort();
	for (start = 0, i = 1; i < line; i++)
		start = (size_t)((const char *)memchr(text + start, '\n', len - start) - text) + 1;
	for (end = start; end < len && text[end] != '\n'; end++)
		;
	for (i = start; i < end && isspace((unsigned char)text[i]); i++)
		;
	if (i == end || text[i] == '#')
		abort();

	/* The lines before it parse: on their own they fail at most the
	 * check across keys. */
	parse(text, start, &again, &rc, again_err);
	if (rc != 0 && strncmp(again_err + flen, ": ", 2) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	char err[ERR_FULL];
	vd_config c;
	int rc;

	parse(text, size, &c, &rc, err);
	if (rc == 0)
		check_accepted(&c);
	else if (rc == -EINVAL)
		check_refused(&c, err, text, size);
	else
		abort();
	return 0;
}

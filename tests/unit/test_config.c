/*
 * The daemon's config parser: what a well-formed file sets, and for every
 * malformed one an error naming the file and line, since `-t` shows that
 * message to the operator as the whole diagnosis.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "vd_config.h"
#include "vd_log.h"

#define HASH "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define HASH2 "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"

/* Text that may hold NUL bytes: pass the literal and its length. */
#define B(s) (s), sizeof(s) - 1

static int parse_n(const char *text, size_t len, vd_config *c, char *err, size_t errlen)
{
	vd_config_defaults(c);
	err[0] = '\0';
	return vd_config_parse(text, len, "f.conf", c, err, errlen);
}

static void parse_ok(const char *text, vd_config *c)
{
	char err[512];

	if (parse_n(text, strlen(text), c, err, sizeof(err)) != 0)
		fail_msg("refused \"%s\": %s", text, err);
}

/* The message must start with "f.conf:LINE: " and mention what is wrong. */
static void refused_n(const char *text, size_t len, unsigned line, const char *needle)
{
	char err[512], prefix[32];
	vd_config c;

	if (parse_n(text, len, &c, err, sizeof(err)) == 0)
		fail_msg("accepted \"%.*s\"", (int)len, text);
	snprintf(prefix, sizeof(prefix), "f.conf:%u: ", line);
	if (strncmp(err, prefix, strlen(prefix)) != 0)
		fail_msg("\"%s\" does not start with \"%s\"", err, prefix);
	if (needle != NULL && strstr(err, needle) == NULL)
		fail_msg("\"%s\" does not mention \"%s\"", err, needle);
}

static void refused(const char *text, unsigned line, const char *needle)
{
	refused_n(text, strlen(text), line, needle);
}

static void test_defaults(void **state)
{
	(void)state;
	char err[256];
	vd_config c, d;

	vd_config_defaults(&c);
	assert_int_equal(vd_config_check(&c, err, sizeof(err)), 0);
	assert_string_equal(c.listen, "127.0.0.1:8420");
	assert_string_equal(c.listen_host, "127.0.0.1");
	assert_int_equal(c.listen_port, 8420);
	assert_int_equal(c.listen_v6, 0);
	assert_string_equal(c.store, "/srv/lensemble/artifacts");
	assert_string_equal(c.state_dir, "/var/lib/lensemble-verifyd");
	assert_string_equal(c.token_file, "");
	assert_string_equal(c.genesis_hash, "");
	assert_string_equal(c.tls_cert, "");
	assert_string_equal(c.tls_key, "");
	assert_int_equal(c.log_level, VD_LOG_INFO);
	assert_int_equal(c.scan_depth, 4);
	assert_int_equal(c.max_body_bytes, 65536);
	assert_true(c.max_connections_per_ip <= c.max_connections);

	/* An empty file, or one of only comments, means the defaults. */
	assert_int_equal(vd_config_parse("", 0, "f.conf", &c, err, sizeof(err)), 0);
	parse_ok("# nothing here\n\n   \n\t# indented comment\n", &d);
	assert_memory_equal(&c, &d, sizeof(c));
}

/* Each default in the documented table is itself a value the key accepts. */
static void test_key_table(void **state)
{
	(void)state;
	const vd_config_key *k;
	char err[256];
	vd_config c;
	size_t n, i, j;

	k = vd_config_keys(&n);
	assert_non_null(k);
	assert_true(n >= 25);
	vd_config_defaults(&c);
	for (i = 0; i < n; i++) {
		assert_non_null(k[i].name);
		assert_non_null(k[i].def);
		assert_non_null(k[i].doc);
		assert_true(k[i].doc[0] != '\0');
		for (j = 0; j < i; j++)
			assert_string_not_equal(k[i].name, k[j].name);
		if (vd_config_set(&c, k[i].name, k[i].def, err, sizeof(err)) != 0)
			fail_msg("default of %s refused: %s", k[i].name, err);
	}
}

static const struct {
	const char *key, *value;
} valid[] = {
	{ "listen", "[::1]:9000" },
	{ "store", "/srv/store" },
	{ "state_dir", "/var/lib/vd" },
	{ "token_file", "/etc/vd/token" },
	{ "genesis_hash", HASH },
	{ "anchor", "runs/a:7:" HASH },
	{ "run_token_file", "runs/a:/etc/vd/a.token" },
	{ "run_oms_keys", "runs/a:/etc/vd/oms-a, .:/etc/vd/oms-root" },
	{ "trusted_keys", "/etc/vd/keys" },
	{ "signing_key", "/etc/vd/signing.key" },
	{ "oms_signing_key", "/etc/vd/oms-signing.key" },
	{ "commitment_policy", "ledger" },
	{ "legacy_policy", "untrusted" },
	{ "user", "verifyd" },
	{ "tls_cert", "/etc/vd/cert.pem" },
	{ "tls_key", "/etc/vd/key.pem" },
	{ "log_level", "debug" },
	{ "log_format", "json" },
	{ "workers", "8" },
	{ "queue_max", "10" },
	{ "scan_depth", "2" },
	{ "rescan_interval", "30" },
	{ "debounce_ms", "0" },
	{ "max_body_bytes", "1024" },
	{ "max_request_header_bytes", "2048" },
	{ "max_json_depth", "8" },
	{ "max_connections", "100" },
	{ "max_connections_per_ip", "10" },
	{ "connection_timeout", "5" },
	{ "request_header_timeout", "3" },
	{ "reserved_connections", "2" },
	{ "max_wait", "60" },
	{ "max_header_len", "1000" },
	{ "max_tensors", "5000" },
	{ "max_job_memory", "2097152" },
	{ "max_artifact_bytes", "1048576" },
	{ "max_verify_seconds", "30" },
	{ "hash_slice_ms", "100" },
	{ "verify_floor_rate", "2097152" },
	{ "scrub_interval", "0" },
	{ "scrub_rate", "2097152" },
	{ "shutdown_grace", "10" },
	{ "event_history", "500" },
	{ "max_event_streams", "8" },
	{ "event_keepalive", "2" },
	{ "alert_retention", "7d" },
	{ "loop_stall_warn_ms", "500" },
};

static void test_every_key(void **state)
{
	(void)state;
	const vd_config_key *k;
	char text[8192];
	size_t n, i, j, off = 0;
	vd_config c;

	/* A key added to the table without a case here fails the test. */
	k = vd_config_keys(&n);
	for (i = 0; i < n; i++) {
		for (j = 0; j < sizeof(valid) / sizeof(valid[0]); j++)
			if (strcmp(k[i].name, valid[j].key) == 0)
				break;
		if (j == sizeof(valid) / sizeof(valid[0]))
			fail_msg("no valid value for key %s", k[i].name);
	}
	assert_int_equal(n, sizeof(valid) / sizeof(valid[0]));

	for (j = 0; j < sizeof(valid) / sizeof(valid[0]); j++)
		off += (size_t)snprintf(text + off, sizeof(text) - off, "%s = %s\n",
		    valid[j].key, valid[j].value);
	parse_ok(text, &c);
	assert_string_equal(c.listen, "[::1]:9000");
	assert_string_equal(c.listen_host, "::1");
	assert_int_equal(c.listen_port, 9000);
	assert_int_equal(c.listen_v6, 1);
	assert_string_equal(c.store, "/srv/store");
	assert_string_equal(c.state_dir, "/var/lib/vd");
	assert_string_equal(c.token_file, "/etc/vd/token");
	assert_string_equal(c.genesis_hash, HASH);
	assert_int_equal(c.n_genesis, 1);
	assert_string_equal(c.genesis[0].run, "*");
	assert_int_equal(c.n_anchors, 1);
	assert_string_equal(c.anchors[0].run, "runs/a");
	assert_int_equal(c.anchors[0].round_index, 7);
	assert_int_equal(c.n_run_tokens, 1);
	assert_string_equal(c.run_tokens[0].file, "/etc/vd/a.token");
	assert_string_equal(c.trusted_keys, "/etc/vd/keys");
	assert_string_equal(c.signing_key, "/etc/vd/signing.key");
	assert_int_equal(vd_config_policy(&c), VD_POLICY_LEDGER);
	assert_int_equal(c.legacy_policy, VD_LEGACY_UNTRUSTED);
	assert_string_equal(c.user, "verifyd");
	assert_string_equal(c.tls_cert, "/etc/vd/cert.pem");
	assert_string_equal(c.tls_key, "/etc/vd/key.pem");
	assert_int_equal(c.log_level, VD_LOG_DEBUG);
	assert_int_equal(c.workers, 8);
	assert_int_equal(c.queue_max, 10);
	assert_int_equal(c.scan_depth, 2);
	assert_int_equal(c.rescan_interval, 30);
	assert_int_equal(c.debounce_ms, 0);
	assert_int_equal(c.max_body_bytes, 1024);
	assert_int_equal(c.max_request_header_bytes, 2048);
	assert_int_equal(c.max_json_depth, 8);
	assert_int_equal(c.max_connections, 100);
	assert_int_equal(c.max_connections_per_ip, 10);
	assert_int_equal(c.connection_timeout, 5);
	assert_int_equal(c.request_header_timeout, 3);
	assert_int_equal(c.reserved_connections, 2);
	assert_int_equal(c.max_wait, 60);
	assert_int_equal(c.max_header_len, 1000);
	assert_int_equal(c.max_tensors, 5000);
	assert_int_equal(c.max_job_memory, 2097152);
	assert_int_equal(c.max_artifact_bytes, 1048576);
	assert_int_equal(c.max_verify_seconds, 30);
	assert_int_equal(c.verify_floor_rate, 2097152);
	assert_int_equal(c.scrub_interval, 0);
	assert_int_equal(c.scrub_rate, 2097152);
	assert_int_equal(c.shutdown_grace, 10);
	assert_int_equal(c.event_history, 500);
	assert_int_equal(c.max_event_streams, 8);
	assert_int_equal(c.event_keepalive, 2);
	assert_int_equal(c.log_format, VD_LOG_JSON);
	assert_int_equal(c.alert_retention, 7 * 86400);
	assert_int_equal(c.loop_stall_warn_ms, 500);
}

/* Pins per run: [RUN:]HEX lists, anchors, tokens per run. */
static void test_pins(void **state)
{
	(void)state;
	vd_config c;

	parse_ok("store = /s\ngenesis_hash = " HASH ", .:" HASH2 ", runs/b:" HASH "\n", &c);
	assert_int_equal(c.n_genesis, 3);
	assert_string_equal(c.genesis[0].run, "*");
	assert_string_equal(c.genesis[1].run, "");
	assert_string_equal(c.genesis[1].hash, HASH2);
	assert_string_equal(c.genesis[2].run, "runs/b");
	refused("store = /s\ngenesis_hash = a:" HASH ", a:" HASH2 "\n", 2, "twice");
	refused("store = /s\ngenesis_hash = ../x:" HASH "\n", 2, "not a run");
	refused("store = /s\ngenesis_hash = " HASH "0\n", 2, "64 lowercase hex");
	refused("store = /s\nanchor = " HASH "\n", 2, "RUN:ROUND:HEX");
	refused("store = /s\nanchor = a:0:" HASH "\n", 2, "above 0");
	refused("store = /s\nanchor = a:x:" HASH "\n", 2, "above 0");
	parse_ok("store = /s\nanchor = a:12:" HASH ", b/c:3:" HASH2 "\n", &c);
	assert_int_equal(c.n_anchors, 2);
	assert_int_equal(c.anchors[1].round_index, 3);
	assert_string_equal(c.anchors[1].run, "b/c");
	refused("store = /s\nrun_token_file = a:relative\n", 2, "absolute");
	refused("store = /s\nrun_token_file = a:/x, a:/y\n", 2, "twice");
	parse_ok("store = /s\nrun_oms_keys = runs/a:/k/a, .:/k/root\n", &c);
	assert_int_equal(c.n_run_oms, 2);
	assert_string_equal(c.run_oms[0].run, "runs/a");
	assert_string_equal(c.run_oms[0].file, "/k/a");
	assert_string_equal(c.run_oms[1].run, "");
	refused("store = /s\nrun_oms_keys = a:keys\n", 2, "RUN:DIR with an absolute DIR");
	refused("store = /s\nrun_oms_keys = a:/x, a:/y\n", 2, "twice");
}

/* trust.md section 4: signed by default once keys are configured. */
static void test_policy(void **state)
{
	(void)state;
	vd_config c;

	parse_ok("store = /s\n", &c);
	assert_int_equal(vd_config_policy(&c), VD_POLICY_LEDGER);
	parse_ok("store = /s\ntrusted_keys = /k\n", &c);
	assert_int_equal(vd_config_policy(&c), VD_POLICY_SIGNED);
	parse_ok("store = /s\ntrusted_keys = /k\ncommitment_policy = ledger\n", &c);
	assert_int_equal(vd_config_policy(&c), VD_POLICY_LEDGER);
	parse_ok("store = /s\ncommitment_policy = signed\n", &c);
	assert_int_equal(vd_config_policy(&c), VD_POLICY_SIGNED);
	refused("store = /s\ncommitment_policy = maybe\n", 2, "commitment_policy");
	refused("store = /s\ntrusted_keys = keys\n", 2, "absolute");
}

/* legacy_policy: accept by default, untrusted on request, nothing else. */
static void test_legacy_policy(void **state)
{
	(void)state;
	vd_config c;

	vd_config_defaults(&c);
	assert_int_equal(c.legacy_policy, VD_LEGACY_ACCEPT);
	assert_string_equal(vd_legacy_policy_name(c.legacy_policy), "accept");
	parse_ok("legacy_policy = untrusted\n", &c);
	assert_int_equal(c.legacy_policy, VD_LEGACY_UNTRUSTED);
	assert_string_equal(vd_legacy_policy_name(c.legacy_policy), "untrusted");
	parse_ok("legacy_policy = accept\n", &c);
	assert_int_equal(c.legacy_policy, VD_LEGACY_ACCEPT);
	refused("legacy_policy = refuse\n", 1, "legacy_policy must be accept or untrusted");
	refused("legacy_policy = Untrusted\n", 1, "legacy_policy");
	refused("store = /s\nlegacy_policy =\n", 2, "legacy_policy");
}

static void test_log_levels(void **state)
{
	(void)state;
	static const struct { const char *name; int level; } levels[] = {
		{ "error", VD_LOG_ERROR }, { "warning", VD_LOG_WARN },
		{ "info", VD_LOG_INFO }, { "debug", VD_LOG_DEBUG },
	};
	char text[64];
	vd_config c;
	size_t i;

	for (i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		snprintf(text, sizeof(text), "log_level = %s\n", levels[i].name);
		parse_ok(text, &c);
		assert_int_equal(c.log_level, levels[i].level);
	}
	refused("log_level = verbose\n", 1, "log_level");
	refused("log_level = DEBUG\n", 1, "log_level");
	refused("log_level = warn\n", 1, "log_level");
	refused("log_level = 3\n", 1, "log_level");
	refused("log_level =\n", 1, "log_level");
}

/* log_format, and durations (alert_retention): seconds, m, h or d. */
static void test_format_and_durations(void **state)
{
	(void)state;
	static const struct { const char *text; uint64_t seconds; } good[] = {
		{ "0", 0 }, { "90", 90 }, { "90s", 90 }, { "5m", 300 }, { "12h", 43200 },
		{ "90d", 7776000 }, { "0d", 0 }, { "007h", 25200 },
	};
	static const char *const bad[] = {
		"", "d", "-1", "1.5h", "1w", "1H", " 1d", "1d ", "1dd", "h1", "1 d", "+1",
		"18446744073709551616", "213503982334602d",
	};
	uint64_t v;
	vd_config c;
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		if (vd_config_parse_duration(good[i].text, &v) != 0)
			fail_msg("refused the duration \"%s\"", good[i].text);
		assert_int_equal(v, good[i].seconds);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (vd_config_parse_duration(bad[i], &v) == 0)
			fail_msg("accepted the duration \"%s\"", bad[i]);

	vd_config_defaults(&c);
	assert_int_equal(c.alert_retention, 90 * 86400);
	assert_int_equal(c.log_format, VD_LOG_TEXT);
	parse_ok("alert_retention = 0\n", &c);
	assert_int_equal(c.alert_retention, 0);
	parse_ok("alert_retention = 3650d\n", &c);
	assert_int_equal(c.alert_retention, 3650 * 86400);
	refused("alert_retention = 3651d\n", 1, "duration");
	refused("alert_retention = 2w\n", 1, "alert_retention");
	parse_ok("log_format = text\n", &c);
	assert_int_equal(c.log_format, VD_LOG_TEXT);
	parse_ok("log_format = json\n", &c);
	assert_int_equal(c.log_format, VD_LOG_JSON);
	refused("log_format = JSON\n", 1, "log_format");
	refused("log_format = syslog\n", 1, "text or json");
}

static void test_syntax(void **state)
{
	(void)state;
	vd_config c;

	parse_ok("user=bob\n", &c);
	assert_string_equal(c.user, "bob");
	parse_ok("  user   =   bob  \n", &c);
	assert_string_equal(c.user, "bob");
	parse_ok("\tuser\t=\tbob\t\n", &c);
	assert_string_equal(c.user, "bob");
	parse_ok("user = bob", &c);                     /* no final newline */
	assert_string_equal(c.user, "bob");
	parse_ok("user = bob # the service account\n", &c);
	assert_string_equal(c.user, "bob");
	parse_ok("user = bob#no space before the comment\n", &c);
	assert_string_equal(c.user, "bob");
	parse_ok("# a comment\n\n   # another\nuser = bob\n\n", &c);
	assert_string_equal(c.user, "bob");
	parse_ok("store = /a\r\nuser = bob\r\n", &c);    /* CRLF files */
	assert_string_equal(c.store, "/a");
	assert_string_equal(c.user, "bob");
	parse_ok("user = a b\n", &c);                    /* inner spaces are kept */
	assert_string_equal(c.user, "a b");

	/* Quotes keep what would otherwise be trimmed or cut as a comment. */
	parse_ok("user = \"  a # b  \"\n", &c);
	assert_string_equal(c.user, "  a # b  ");
	parse_ok("store = \"/srv/a b#c\" # a comment after the quotes\n", &c);
	assert_string_equal(c.store, "/srv/a b#c");
	parse_ok("user = \"\"\n", &c);
	assert_string_equal(c.user, "");
	parse_ok("user = \"#\"\n", &c);
	assert_string_equal(c.user, "#");

	/* An empty value clears a key whose empty value means "none". */
	parse_ok("token_file =\n", &c);
	assert_string_equal(c.token_file, "");
	parse_ok("genesis_hash = \"\"\n", &c);
	assert_string_equal(c.genesis_hash, "");
}

static void test_line_numbers(void **state)
{
	(void)state;
	char err[256];
	vd_config c;

	assert_int_equal(parse_n(B("# comment\n\nbogus = 1\n"), &c, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "f.conf:3: unknown key \"bogus\"");
	assert_int_equal(parse_n(B("user = a\nstore = /b\nbogus = 1\n"), &c, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "f.conf:3: unknown key \"bogus\"");
	assert_int_equal(parse_n(B("\r\n\r\nbogus = 1\r\n"), &c, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "f.conf:3: unknown key \"bogus\"");
	refused("\n\n\n\n\n\n\n\n\n\nbogus\n", 11, NULL);
	refused("user = a\n\n  # x\nworkers = lots\n", 4, "workers");
}

static void test_unknown_key(void **state)
{
	(void)state;
	refused("bogus = 1\n", 1, "unknown key \"bogus\"");
	refused("Store = /a\n", 1, "unknown key \"Store\"");
	refused("store_dir = /a\n", 1, "unknown key");
	refused("= /a\n", 1, "unknown key");
	refused("user name = bob\n", 1, "unknown key");
}

static void test_missing_equals(void **state)
{
	(void)state;
	refused("user bob\n", 1, "key = value");
	refused("user\n", 1, "key = value");
	refused("# ok\nstore /srv\n", 2, "key = value");
	refused("user : bob\n", 1, "key = value");
}

static void test_set_twice(void **state)
{
	(void)state;
	refused("user = a\nuser = b\n", 2, "user");
	refused("workers = 1\n# comment\nworkers = 1\n", 3, "twice");
	refused("store = /a\nuser = x\nstore = /a\n", 3, "store");
}

static void test_numbers(void **state)
{
	(void)state;
	vd_config c;

	parse_ok("workers = 0\n", &c);
	assert_int_equal(c.workers, 0);
	parse_ok("workers = 256\n", &c);
	assert_int_equal(c.workers, 256);
	parse_ok("workers = 007\n", &c);
	assert_int_equal(c.workers, 7);
	parse_ok("queue_max = 1000000\n", &c);
	assert_int_equal(c.queue_max, 1000000);
	parse_ok("max_json_depth = 2\n", &c);
	assert_int_equal(c.max_json_depth, 2);
	parse_ok("scrub_rate = 18446744073709551615\n", &c);
	assert_true(c.scrub_rate == UINT64_MAX);
	parse_ok("max_header_len = 100000000\n", &c);
	assert_true(c.max_header_len == 100000000);
	parse_ok("workers = \"12\"\n", &c);
	assert_int_equal(c.workers, 12);

	/* Out of range. */
	refused("workers = 257\n", 1, "workers must be a whole number from 0 to 256");
	refused("queue_max = 0\n", 1, "queue_max");
	refused("queue_max = 1000001\n", 1, "queue_max");
	refused("max_json_depth = 1\n", 1, "max_json_depth");
	refused("scrub_rate = 1048575\n", 1, "scrub_rate");
	refused("scrub_rate = 18446744073709551616\n", 1, "scrub_rate");
	refused("max_header_len = 100000001\n", 1, "max_header_len");
	refused("max_header_len = 1\n", 1, "max_header_len");
	refused("max_tensors = 0\n", 1, "max_tensors");
	refused("max_job_memory = 1048575\n", 1, "max_job_memory");
	refused("max_artifact_bytes = 0\n", 1, "max_artifact_bytes");
	refused("max_verify_seconds = 31536001\n", 1, "max_verify_seconds");
	refused("verify_floor_rate = 1000\n", 1, "verify_floor_rate");
	/* Would wrap to 1 if cut to 32 bits. */
	refused("workers = 4294967297\n", 1, "workers");
	refused("workers = 99999999999999999999999\n", 1, "workers");

	/* Not a number, negative, signed, trailing garbage, empty. */
	refused("workers = many\n", 1, "workers");
	refused("workers = -1\n", 1, "workers");
	refused("workers = +1\n", 1, "workers");
	refused("workers = 4x\n", 1, "workers");
	refused("workers = 4 4\n", 1, "workers");
	refused("workers = 0x10\n", 1, "workers");
	refused("workers = 1.5\n", 1, "workers");
	refused("workers = 1e2\n", 1, "workers");
	refused("workers =\n", 1, "workers");
	refused("workers = \" 4\"\n", 1, "workers");
}

static void test_paths(void **state)
{
	(void)state;
	static const char *const keys[] = { "store", "state_dir", "token_file", "tls_cert", "tls_key" };
	char text[2200], long_path[VD_CONFIG_PATH_MAX + 1];
	vd_config c;
	size_t i;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		snprintf(text, sizeof(text), "%s = relative/dir\n", keys[i]);
		refused(text, 1, keys[i]);
		refused_n(text, strlen(text), 1, "absolute");
		snprintf(text, sizeof(text), "%s = ./x\n", keys[i]);
		refused(text, 1, keys[i]);
		snprintf(text, sizeof(text), "%s = ~/x\n", keys[i]);
		refused(text, 1, keys[i]);
	}

	/* The longest path that fits, and one byte more. */
	memset(long_path, 'a', sizeof(long_path));
	long_path[0] = '/';
	long_path[VD_CONFIG_PATH_MAX - 1] = '\0';
	snprintf(text, sizeof(text), "store = %s\n", long_path);
	parse_ok(text, &c);
	assert_string_equal(c.store, long_path);
	long_path[VD_CONFIG_PATH_MAX - 1] = 'a';
	long_path[VD_CONFIG_PATH_MAX] = '\0';
	snprintf(text, sizeof(text), "store = %s\n", long_path);
	refused(text, 1, "store");
}

static void test_store_required(void **state)
{
	(void)state;
	char err[256];
	vd_config c;

	assert_int_equal(parse_n(B("store =\n"), &c, err, sizeof(err)), -EINVAL);
	assert_true(strncmp(err, "f.conf:", 7) == 0);
	assert_non_null(strstr(err, "store"));
}

static void test_genesis_hash(void **state)
{
	(void)state;
	char text[256];
	vd_config c;
	size_t i;

	parse_ok("genesis_hash = " HASH "\n", &c);
	assert_string_equal(c.genesis_hash, HASH);

	strcpy(text, "genesis_hash = " HASH "\n");
	for (i = 15; text[i] != '\n'; i++)
		text[i] = (char)((text[i] >= 'a' && text[i] <= 'f') ? text[i] - 32 : text[i]);
	refused(text, 1, "genesis_hash");                               /* uppercase */
	refused("genesis_hash = " HASH "0\n", 1, "genesis_hash");      /* 65 */
	refused("genesis_hash = 0011\n", 1, "genesis_hash");           /* short */
	refused("genesis_hash = 0g112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n",
	    1, "genesis_hash");
	/* RUN:HEX names a run: an algorithm prefix is read as one, and a run
	 * with a colon or outside the store is refused. */
	parse_ok("genesis_hash = sha256:" HASH "\n", &c);
	assert_string_equal(c.genesis[0].run, "sha256");
	refused("genesis_hash = a:b:" HASH "\n", 1, "genesis_hash");
	refused("genesis_hash = /abs:" HASH "\n", 1, "genesis_hash");
}

static void test_listen(void **state)
{
	(void)state;
	vd_config c;

	parse_ok("listen = [::1]:8420\n", &c);
	assert_string_equal(c.listen, "[::1]:8420");
	assert_string_equal(c.listen_host, "::1");
	assert_int_equal(c.listen_port, 8420);
	assert_int_equal(c.listen_v6, 1);
	parse_ok("listen = [::]:0\n", &c);
	assert_string_equal(c.listen_host, "::");
	assert_int_equal(c.listen_port, 0);
	assert_int_equal(c.listen_v6, 1);
	parse_ok("listen = [fe80::1:2]:443\n", &c);
	assert_string_equal(c.listen_host, "fe80::1:2");
	assert_int_equal(c.listen_port, 443);
	parse_ok("listen = 0.0.0.0:0\n", &c);
	assert_string_equal(c.listen_host, "0.0.0.0");
	assert_int_equal(c.listen_port, 0);
	assert_int_equal(c.listen_v6, 0);
	parse_ok("listen = 10.1.2.3:65535\n", &c);
	assert_int_equal(c.listen_port, 65535);

	refused("listen = 127.0.0.1\n", 1, "listen");               /* no port */
	refused("listen = 127.0.0.1:\n", 1, "listen");
	refused("listen = :8420\n", 1, "listen");                   /* no address */
	refused("listen = 127.0.0.1:65536\n", 1, "listen");
	refused("listen = 127.0.0.1:99999999999999999999999\n", 1, "listen");
	refused("listen = 127.0.0.1:-1\n", 1, "listen");
	refused("listen = 127.0.0.1:84x\n", 1, "listen");
	refused("listen = [::1]\n", 1, "listen");                   /* no port */
	refused("listen = [::1]8420\n", 1, "listen");
	refused("listen = [::1:8420\n", 1, "listen");
	refused("listen = []:8420\n", 1, "listen");
	refused("listen =\n", 1, "listen");
	/* An IPv6 address must be bracketed: "::1:8420" reads as host "::1"
	 * port 8420 or host "::1:8420" without a port; refuse rather than guess. */
	refused("listen = ::1:8420\n", 1, "listen");
	refused("listen = fe80::1:443\n", 1, "listen");
	refused("listen = ::1\n", 1, "listen");
}

static void test_quotes(void **state)
{
	(void)state;
	refused("user = \"bob\n", 1, "quote");
	refused("user = bob\"\n", 1, "quote");
	refused("user = \"\n", 1, "quote");
	refused("user = \"bob # not closed\n", 1, "quote");
	refused("# fine\nstore = \"/srv\n", 2, "quote");
}

static void test_nul_byte(void **state)
{
	(void)state;
	refused_n(B("user = a\0b\n"), 1, "NUL");
	refused_n(B("user = \"a\0b\"\n"), 1, "NUL");
	refused_n(B("store = /srv\nuser = bob\0\n"), 2, "user");
	refused_n(B("store = /srv\0/evil\n"), 1, "store");
}

/* Problems between keys have no single line; the file is still named. */
static void test_cross_key(void **state)
{
	(void)state;
	char err[256];
	vd_config c;

	assert_int_equal(parse_n(B("tls_cert = /etc/c.pem\n"), &c, err, sizeof(err)), -EINVAL);
	assert_true(strncmp(err, "f.conf:", 7) == 0);
	assert_non_null(strstr(err, "tls_key"));
	assert_int_equal(parse_n(B("tls_key = /etc/k.pem\n"), &c, err, sizeof(err)), -EINVAL);
	assert_true(strncmp(err, "f.conf:", 7) == 0);
	assert_non_null(strstr(err, "tls_cert"));
	parse_ok("tls_cert = /etc/c.pem\ntls_key = /etc/k.pem\n", &c);

	assert_int_equal(parse_n(B("max_connections = 10\nmax_connections_per_ip = 11\n"), &c,
	    err, sizeof(err)), -EINVAL);
	assert_true(strncmp(err, "f.conf:", 7) == 0);
	assert_non_null(strstr(err, "max_connections_per_ip"));
	parse_ok("max_connections = 10\nmax_connections_per_ip = 10\n", &c);
	assert_int_equal(c.max_connections_per_ip, 10);

	vd_config_defaults(&c);
	strcpy(c.tls_key, "/etc/k.pem");
	assert_int_equal(vd_config_check(&c, err, sizeof(err)), -EINVAL);
	assert_true(err[0] != '\0');
	vd_config_defaults(&c);
	c.max_connections_per_ip = c.max_connections + 1;
	assert_int_equal(vd_config_check(&c, err, sizeof(err)), -EINVAL);
	assert_true(err[0] != '\0');
}

/* A reload names the keys read only at start that it changed, and only
 * those: a list of every such key tells the operator nothing. */
static void test_restart_changes(void **state)
{
	(void)state;
	char out[256];
	vd_config a, b;

	parse_ok("store = /a\n", &a);
	parse_ok("store = /a\nlog_level = debug\nloop_stall_warn_ms = 10\n", &b);
	assert_int_equal(vd_config_restart_changes(&a, &b, out, sizeof(out)), 0);
	assert_string_equal(out, "");
	parse_ok("store = /b\nworkers = 3\nlisten = 127.0.0.1:1\nmax_connections = 900\n", &b);
	assert_int_equal(vd_config_restart_changes(&a, &b, out, sizeof(out)), 4);
	assert_string_equal(out, "listen, store, workers, max_connections");
	parse_ok("store = /a\ntls_cert = /c\ntls_key = /k\n", &b);
	assert_int_equal(vd_config_restart_changes(&a, &b, out, sizeof(out)), 2);
	assert_string_equal(out, "tls_cert, tls_key");
	/* Cut to the room given, the count still whole. */
	parse_ok("store = /b\nworkers = 3\n", &b);
	assert_int_equal(vd_config_restart_changes(&a, &b, out, 8), 2);
	assert_string_equal(out, "store, ");
}

static void test_set(void **state)
{
	(void)state;
	char err[256];
	vd_config c;

	parse_ok("workers = 4\nstore = /a\n", &c);
	assert_int_equal(vd_config_set(&c, "workers", "8", err, sizeof(err)), 0);
	assert_int_equal(c.workers, 8);
	/* An override is not a second setting of the key. */
	assert_int_equal(vd_config_set(&c, "workers", "9", err, sizeof(err)), 0);
	assert_int_equal(c.workers, 9);
	assert_int_equal(vd_config_set(&c, "store", "/b", err, sizeof(err)), 0);
	assert_string_equal(c.store, "/b");
	assert_int_equal(vd_config_set(&c, "listen", "[::1]:1", err, sizeof(err)), 0);
	assert_int_equal(c.listen_v6, 1);
	assert_int_equal(vd_config_set(&c, "listen", "127.0.0.1:2", err, sizeof(err)), 0);
	assert_int_equal(c.listen_v6, 0);
	assert_string_equal(c.listen_host, "127.0.0.1");
	assert_int_equal(c.listen_port, 2);
	assert_int_equal(vd_config_set(&c, "genesis_hash", HASH, err, sizeof(err)), 0);
	assert_string_equal(c.genesis_hash, HASH);

	/* Command-line values are taken whole: no trimming, quotes or comments. */
	assert_int_equal(vd_config_set(&c, "user", " a # b ", err, sizeof(err)), 0);
	assert_string_equal(c.user, " a # b ");

	err[0] = '\0';
	assert_int_equal(vd_config_set(&c, "nope", "1", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "unknown key \"nope\"");
	err[0] = '\0';
	assert_int_equal(vd_config_set(&c, "workers", "-1", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "workers"));
	assert_int_equal(c.workers, 9);
	assert_int_equal(vd_config_set(&c, "store", "rel", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "store"));
	assert_int_equal(vd_config_set(&c, "log_level", "loud", err, sizeof(err)), -EINVAL);
	assert_int_equal(vd_config_set(&c, "listen", "::1:80", err, sizeof(err)), -EINVAL);
	assert_int_equal(vd_config_set(&c, "genesis_hash", "ABC", err, sizeof(err)), -EINVAL);
	/* A key is a whole name, never a prefix of one. */
	assert_int_equal(vd_config_set(&c, "work", "1", err, sizeof(err)), -EINVAL);
	assert_int_equal(vd_config_set(&c, "workers ", "1", err, sizeof(err)), -EINVAL);
}

/* A file in $TMPDIR (or /tmp) holding len bytes of text; path receives its name. */
static void write_temp(char *path, size_t pathlen, const char *text, size_t len)
{
	const char *dir = getenv("TMPDIR");
	int fd;

	snprintf(path, pathlen, "%s/vd-config-XXXXXX", dir && dir[0] ? dir : "/tmp");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	assert_int_equal(close(fd), 0);
}

static void test_load(void **state)
{
	(void)state;
	char path[4200], err[4400], want[4400];
	vd_config c;

	write_temp(path, sizeof(path), B("# test\nworkers = 3\nstore = /srv/x\n"));
	vd_config_defaults(&c);
	assert_int_equal(vd_config_load(path, &c, err, sizeof(err)), 0);
	assert_int_equal(c.workers, 3);
	assert_string_equal(c.store, "/srv/x");
	assert_int_equal(unlink(path), 0);

	/* A parse error names the file by the path it was loaded from. */
	write_temp(path, sizeof(path), B("workers = 3\n\nbogus = 1\n"));
	vd_config_defaults(&c);
	assert_int_equal(vd_config_load(path, &c, err, sizeof(err)), -EINVAL);
	snprintf(want, sizeof(want), "%s:3: unknown key \"bogus\"", path);
	assert_string_equal(err, want);
	assert_int_equal(unlink(path), 0);

	write_temp(path, sizeof(path), "", 0);
	vd_config_defaults(&c);
	assert_int_equal(vd_config_load(path, &c, err, sizeof(err)), 0);
	assert_int_equal(unlink(path), 0);
}

static void test_load_refused(void **state)
{
	(void)state;
	char path[4200], dir[4200], err[4400];
	const char *tmp = getenv("TMPDIR");
	vd_config c;
	char *big;
	size_t i;

	/* Missing. */
	write_temp(path, sizeof(path), "", 0);
	assert_int_equal(unlink(path), 0);
	vd_config_defaults(&c);
	err[0] = '\0';
	assert_int_equal(vd_config_load(path, &c, err, sizeof(err)), -ENOENT);
	assert_true(strncmp(err, path, strlen(path)) == 0);

	/* A directory. */
	snprintf(dir, sizeof(dir), "%s/vd-config-dir-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
	assert_non_null(mkdtemp(dir));
	err[0] = '\0';
	assert_int_equal(vd_config_load(dir, &c, err, sizeof(err)), -EINVAL);
	assert_true(strncmp(err, dir, strlen(dir)) == 0);
	assert_int_equal(rmdir(dir), 0);

	/* A device reads forever or blocks; only regular files are config. */
	err[0] = '\0';
	assert_int_equal(vd_config_load("/dev/null", &c, err, sizeof(err)), -EINVAL);
	assert_true(strncmp(err, "/dev/null", 9) == 0);

	/* Exactly the limit is read; one byte more is refused unread. */
	big = malloc(VD_CONFIG_MAX_BYTES + 1);
	assert_non_null(big);
	for (i = 0; i < VD_CONFIG_MAX_BYTES + 1; i++)
		big[i] = (i % 64 == 63) ? '\n' : '#';
	big[VD_CONFIG_MAX_BYTES - 1] = '\n';
	write_temp(path, sizeof(path), big, VD_CONFIG_MAX_BYTES);
	vd_config_defaults(&c);
	assert_int_equal(vd_config_load(path, &c, err, sizeof(err)), 0);
	assert_int_equal(unlink(path), 0);
	write_temp(path, sizeof(path), big, VD_CONFIG_MAX_BYTES + 1);
	err[0] = '\0';
	assert_int_equal(vd_config_load(path, &c, err, sizeof(err)), -EFBIG);
	assert_true(strncmp(err, path, strlen(path)) == 0);
	assert_int_equal(unlink(path), 0);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_key_table),
		cmocka_unit_test(test_every_key),
		cmocka_unit_test(test_policy),
		cmocka_unit_test(test_legacy_policy),
		cmocka_unit_test(test_pins),
		cmocka_unit_test(test_log_levels),
		cmocka_unit_test(test_format_and_durations),
		cmocka_unit_test(test_syntax),
		cmocka_unit_test(test_line_numbers),
		cmocka_unit_test(test_unknown_key),
		cmocka_unit_test(test_missing_equals),
		cmocka_unit_test(test_set_twice),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_store_required),
		cmocka_unit_test(test_genesis_hash),
		cmocka_unit_test(test_listen),
		cmocka_unit_test(test_quotes),
		cmocka_unit_test(test_nul_byte),
		cmocka_unit_test(test_cross_key),
		cmocka_unit_test(test_restart_changes),
		cmocka_unit_test(test_set),
		cmocka_unit_test(test_load),
		cmocka_unit_test(test_load_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The log line formats: a JSON line is one valid JSON object whatever the
 * message holds (quotes, controls, bytes that are not UTF-8) and however
 * little room there is; a journal entry is the native protocol's KEY=value
 * lines, with the length-prefixed form for a value holding a newline.
 * Entries reach a journal whose socket is replaced, and go to stderr while
 * it is busy or gone. A line that repeats is held to one per interval and
 * counts the ones held back; a request's path is escaped and bounded.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include <json-c/json.h>

#include "vd_log.h"
#include "vd_util.h"

#define HASH "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define TS 1798761600.25     /* 2027-01-01T00:00:00.250Z */

/* The line parsed: one object, then the newline, nothing else. */
static json_object *parse_line(const char *line, size_t len)
{
	json_tokener *tok = json_tokener_new();
	json_object *o;

	assert_true(len > 1);
	assert_int_equal(strlen(line), len);
	assert_int_equal(line[len - 1], '\n');
	assert_null(memchr(line, '\n', len - 1));
	o = json_tokener_parse_ex(tok, line, (int)len - 1);
	if (o == NULL || json_tokener_get_error(tok) != json_tokener_success ||
	    json_tokener_get_parse_end(tok) != len - 1)
		fail_msg("not one JSON object: %s", line);
	json_tokener_free(tok);
	assert_true(json_object_is_type(o, json_type_object));
	return o;
}

static const char *member(json_object *o, const char *key)
{
	json_object *v;

	return json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : NULL;
}

static void test_json_line(void **state)
{
	(void)state;
	vd_log_fields f = { .content_hash = HASH, .path = "run-7/round-00004", .code = "ok",
		.run = "run-7" };
	char line[VD_LOG_LINE_MAX];
	size_t len;
	json_object *o;

	len = vd_log_json_line(line, sizeof(line), TS, VD_LOG_INFO, &f, "verified it");
	o = parse_line(line, len);
	assert_string_equal(member(o, "ts"), "2027-01-01T00:00:00.250Z");
	assert_string_equal(member(o, "level"), "info");
	assert_string_equal(member(o, "msg"), "verified it");
	assert_string_equal(member(o, "content_hash"), HASH);
	assert_string_equal(member(o, "path"), "run-7/round-00004");
	assert_string_equal(member(o, "code"), "ok");
	assert_string_equal(member(o, "run"), "run-7");
	assert_null(member(o, "kind"));            /* a field not set is left out */
	assert_int_equal(json_object_object_length(o), 7);
	json_object_put(o);

	/* The keys come in a fixed order: ts, level, msg, then the fields. */
	assert_true(strncmp(line, "{\"ts\":\"2027-01-01T00:00:00.250Z\",\"level\":\"info\",\"msg\":", 53) == 0);

	len = vd_log_json_line(line, sizeof(line), TS, VD_LOG_WARN, NULL, "no fields");
	o = parse_line(line, len);
	assert_string_equal(member(o, "level"), "warning");
	assert_int_equal(json_object_object_length(o), 3);
	json_object_put(o);
}

/* What a path in a message may hold reaches JSON escaped or replaced. */
static void test_json_escapes(void **state)
{
	(void)state;
	vd_log_fields f = { .path = "odd\"dir\\\t\x01\xff", .kind = "fork" };
	char line[VD_LOG_LINE_MAX];
	size_t len;
	json_object *o;

	len = vd_log_json_line(line, sizeof(line), TS, VD_LOG_ERROR, &f,
	    "a \"quote\", a \\, a tab\t, a newline\n, \x1f, DEL \x7f, caf\xc3\xa9, bad \xc3(, cut \xe2\x82");
	o = parse_line(line, len);
	assert_string_equal(member(o, "msg"),
	    "a \"quote\", a \\, a tab\t, a newline\n, \x1f, DEL \x7f, caf\xc3\xa9, bad ?(, cut ??");
	assert_string_equal(member(o, "path"), "odd\"dir\\\t\x01?");
	assert_string_equal(member(o, "kind"), "fork");
	assert_non_null(strstr(line, "\\u001f"));
	json_object_put(o);
}

/* Short of room, the message is cut between characters, never the line. */
static void test_json_cut(void **state)
{
	(void)state;
	vd_log_fields f = { .content_hash = HASH, .path = "p" };
	char msg[VD_LOG_MSG_MAX], line[VD_LOG_LINE_MAX];
	size_t n, len, i;
	json_object *o;

	for (i = 0; i + 1 < sizeof(msg); i++)
		msg[i] = "\"\xc3\xa9\n"[i % 4];      /* escapes and two-byte characters */
	msg[sizeof(msg) - 1] = '\0';
	for (n = 80; n <= 400; n += 7) {
		len = vd_log_json_line(line, n, TS, VD_LOG_DEBUG, &f, msg);
		assert_true(len < n);
		o = parse_line(line, len);
		assert_non_null(member(o, "msg"));
		json_object_put(o);
	}
	/* A field that does not fit whole is left out, never cut. */
	len = vd_log_json_line(line, 120, TS, VD_LOG_DEBUG, &f, "m");
	o = parse_line(line, len);
	assert_string_equal(member(o, "msg"), "m");
	assert_null(member(o, "content_hash"));
	assert_string_equal(member(o, "path"), "p");
	json_object_put(o);
	for (n = 80; n <= 400; n++) {
		len = vd_log_json_line(line, n, TS, VD_LOG_DEBUG, &f, msg);
		o = parse_line(line, len);
		assert_true(member(o, "content_hash") == NULL ||
		    strcmp(member(o, "content_hash"), HASH) == 0);
		json_object_put(o);
	}
	/* No room even for the frame: nothing. */
	assert_int_equal(vd_log_json_line(line, 40, TS, VD_LOG_DEBUG, &f, "m"), 0);
	assert_string_equal(line, "");
	/* A whole message of the longest kind fits a full buffer. */
	len = vd_log_json_line(line, sizeof(line), TS, VD_LOG_DEBUG, &f, msg);
	o = parse_line(line, len);
	assert_int_equal(strlen(member(o, "msg")), strlen(msg));
	json_object_put(o);
}

/* The native protocol's fields back from an entry: "KEY=value" lines, or
 * KEY, newline, a 64-bit little-endian length and the value. */
static const char *journal_get(const char *e, size_t len, const char *key, char *out, size_t n)
{
	const char *p = e, *end = e + len, *nl, *eq;
	size_t kl = strlen(key);
	uint64_t size;
	int i;

	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		eq = memchr(p, '=', (size_t)(end - p));
		assert_non_null(nl);
		if (eq != NULL && eq < nl) {
			if ((size_t)(eq - p) == kl && memcmp(p, key, kl) == 0) {
				snprintf(out, n, "%.*s", (int)(nl - eq - 1), eq + 1);
				return out;
			}
			p = nl + 1;
			continue;
		}
		for (size = 0, i = 7; i >= 0; i--)
			size = size << 8 | (uint8_t)nl[1 + i];
		assert_true(nl + 9 + size < end);
		assert_int_equal(nl[9 + size], '\n');
		if ((size_t)(nl - p) == kl && memcmp(p, key, kl) == 0) {
			snprintf(out, n, "%.*s", (int)size, nl + 9);
			return out;
		}
		p = nl + 10 + size;
	}
	return NULL;
}

static void test_journal_entry(void **state)
{
	(void)state;
	vd_log_fields f = { .content_hash = HASH, .path = "a/b", .code = "io_error", .run = ".",
		.kind = "artifact_failed" };
	char e[VD_LOG_LINE_MAX], v[256];
	size_t len;

	len = vd_log_journal_entry(e, sizeof(e), "lensemble-verifyd", VD_LOG_WARN, &f, "it failed");
	assert_true(len > 0);
	assert_string_equal(journal_get(e, len, "PRIORITY", v, sizeof(v)), "4");
	assert_string_equal(journal_get(e, len, "SYSLOG_IDENTIFIER", v, sizeof(v)), "lensemble-verifyd");
	assert_string_equal(journal_get(e, len, "MESSAGE", v, sizeof(v)), "it failed");
	assert_string_equal(journal_get(e, len, "CONTENT_HASH", v, sizeof(v)), HASH);
	assert_string_equal(journal_get(e, len, "STORE_PATH", v, sizeof(v)), "a/b");
	assert_string_equal(journal_get(e, len, "CODE", v, sizeof(v)), "io_error");
	assert_string_equal(journal_get(e, len, "RUN", v, sizeof(v)), ".");
	assert_string_equal(journal_get(e, len, "KIND", v, sizeof(v)), "artifact_failed");

	/* A newline in a value: the length-prefixed form. */
	f.path = "odd\ndir";
	len = vd_log_journal_entry(e, sizeof(e), "x", VD_LOG_DEBUG, &f, "two\nlines");
	assert_true(len > 0);
	assert_string_equal(journal_get(e, len, "MESSAGE", v, sizeof(v)), "two\nlines");
	assert_string_equal(journal_get(e, len, "STORE_PATH", v, sizeof(v)), "odd\ndir");
	assert_string_equal(journal_get(e, len, "PRIORITY", v, sizeof(v)), "7");
	assert_null(journal_get(e, len, "PATH", v, sizeof(v)));

	/* Without fields, and too little room. */
	len = vd_log_journal_entry(e, sizeof(e), "x", VD_LOG_ERROR, NULL, "m");
	assert_int_equal(len, strlen("PRIORITY=3\nSYSLOG_IDENTIFIER=x\nMESSAGE=m\n"));
	assert_memory_equal(e, "PRIORITY=3\nSYSLOG_IDENTIFIER=x\nMESSAGE=m\n", len);
	assert_int_equal(vd_log_journal_entry(e, 30, "x", VD_LOG_ERROR, &f, "m"), 0);
}

/* A journal for the test: a datagram socket bound at path. */
static int journal_bind(const char *path)
{
	struct sockaddr_un sa;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* The MESSAGE of the next entry the journal holds; NULL when none. A
 * datagram is queued before its send returns: nothing to wait for. */
static const char *journal_next(int fd, char *out, size_t n)
{
	char e[VD_LOG_LINE_MAX];
	ssize_t len = recv(fd, e, sizeof(e), MSG_DONTWAIT);

	return len > 0 ? journal_get(e, (size_t)len, "MESSAGE", out, n) : NULL;
}

static const char *journal_msg(int fd, char *out, size_t n)
{
	const char *m = journal_next(fd, out, n);

	return m != NULL ? m : "(nothing)";
}

/* What stderr (a file here) was given. */
static const char *stderr_text(int fd, char *out, size_t n)
{
	ssize_t len = pread(fd, out, n - 1, 0);

	assert_true(len >= 0);
	out[len] = '\0';
	return out;
}

static size_t count_lines(const char *s)
{
	size_t n = 0;

	for (; (s = strchr(s, '\n')) != NULL; s++)
		n++;
	return n;
}

/* stderr redirected to a file named by JOURNAL_STREAM, as systemd
 * would have it; what cmocka says there on a failure is copied back. */
static struct {
	char dir[32], path[64], errpath[64];
	int errfd, saved;
} cap;

static int capture_stderr(void **state)
{
	(void)state;
	struct stat st;
	char env[64];

	snprintf(cap.dir, sizeof(cap.dir), "/tmp/test_log.XXXXXX");
	if (mkdtemp(cap.dir) == NULL)
		return -1;
	snprintf(cap.path, sizeof(cap.path), "%s/socket", cap.dir);
	snprintf(cap.errpath, sizeof(cap.errpath), "%s/stderr", cap.dir);
	/* O_APPEND: truncated, it is written from its start again. */
	cap.errfd = open(cap.errpath, O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	fflush(stderr);
	cap.saved = dup(STDERR_FILENO);
	if (cap.errfd < 0 || cap.saved < 0 || dup2(cap.errfd, STDERR_FILENO) < 0 ||
	    fstat(cap.errfd, &st) < 0)
		return -1;
	snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
	    (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", env, 1);
	return 0;
}

static int restore_stderr(void **state)
{
	(void)state;
	char buf[4096];
	ssize_t n;
	off_t at = 0;

	fflush(stderr);
	dup2(cap.saved, STDERR_FILENO);
	close(cap.saved);
	while ((n = pread(cap.errfd, buf, sizeof(buf), at)) > 0) {
		fwrite(buf, 1, (size_t)n, stderr);
		at += n;
	}
	close(cap.errfd);
	unsetenv("JOURNAL_STREAM");
	vd_log_open("test_log", 1);
	unlink(cap.path);
	unlink(cap.errpath);
	rmdir(cap.dir);
	return 0;
}

/* Each entry goes to the socket at the journal's path as it is then: a
 * journal restarted on a new socket file gets the next entry; one busy
 * or gone leaves that entry to stderr, and nothing is lost. */
static void test_journal_socket(void **state)
{
	(void)state;
	static char err[1 << 20];
	char v[64], long_path[200];
	int j, sent, received = 0;

	memset(long_path, 'x', sizeof(long_path) - 1);
	long_path[sizeof(long_path) - 1] = '\0';
	assert_int_equal(vd_log_set_journal_socket(long_path), -ENAMETOOLONG);
	assert_int_equal(vd_log_set_journal_socket(cap.path), 0);
	j = journal_bind(cap.path);
	vd_log_open("test_log", 1);
	vd_log_set_level(VD_LOG_INFO);

	log_info("first");
	assert_string_equal(journal_msg(j, v, sizeof(v)), "first");

	/* Busy: the entries it cannot take now go to stderr, the others wait
	 * in its queue, and the journal gets the next one once it has read. */
	for (sent = 0; sent < 100000 && count_lines(stderr_text(cap.errfd, err, sizeof(err))) == 0; sent++)
		log_info("busy %d", sent);
	snprintf(v, sizeof(v), "info: busy %d\n", sent - 1);
	assert_string_equal(stderr_text(cap.errfd, err, sizeof(err)), v);
	while (journal_next(j, v, sizeof(v)) != NULL)
		received++;
	assert_int_equal(received, sent - 1);
	log_info("read");
	assert_string_equal(journal_msg(j, v, sizeof(v)), "read");

	/* Restarted: the old socket closed (refused), its file removed (gone),
	 * a new socket at the same path. */
	assert_int_equal(ftruncate(cap.errfd, 0), 0);
	close(j);
	log_info("refused");
	assert_int_equal(unlink(cap.path), 0);
	log_info("gone");
	assert_string_equal(stderr_text(cap.errfd, err, sizeof(err)), "info: refused\ninfo: gone\n");
	j = journal_bind(cap.path);
	log_info("restarted");
	assert_string_equal(journal_msg(j, v, sizeof(v)), "restarted");
	log_info("again");
	assert_string_equal(journal_msg(j, v, sizeof(v)), "again");
	assert_string_equal(stderr_text(cap.errfd, err, sizeof(err)), "info: refused\ninfo: gone\n");
	close(j);
	assert_int_equal(ftruncate(cap.errfd, 0), 0);
}

static void test_names(void **state)
{
	(void)state;

	assert_int_equal(vd_log_format_parse("text"), VD_LOG_TEXT);
	assert_int_equal(vd_log_format_parse("json"), VD_LOG_JSON);
	assert_int_equal(vd_log_format_parse("JSON"), -EINVAL);
	assert_int_equal(vd_log_format_parse(""), -EINVAL);
	assert_string_equal(vd_log_format_name(VD_LOG_TEXT), "text");
	assert_string_equal(vd_log_format_name(VD_LOG_JSON), "json");
	assert_int_equal(vd_log_level_parse("warning"), VD_LOG_WARN);
	assert_string_equal(vd_log_level_name(VD_LOG_DEBUG), "debug");
}

#define SEC 1000000000ull

static void test_limit(void **state)
{
	(void)state;
	vd_log_limit l = { 0 };
	uint64_t held = 99;

	/* The first line goes out whenever it comes, even at 0. */
	assert_int_equal(vd_log_limit_pass(&l, 5, 60 * SEC, &held), 1);
	assert_int_equal(held, 0);
	assert_int_equal(vd_log_limit_pass(&l, 5 + SEC, 60 * SEC, &held), 0);
	assert_int_equal(vd_log_limit_pass(&l, 5 + 59 * SEC, 60 * SEC, &held), 0);
	/* A clock read behind the last line is no time passed, not ages. */
	assert_int_equal(vd_log_limit_pass(&l, 1, 60 * SEC, &held), 0);
	assert_int_equal(vd_log_limit_pass(&l, 5 + 60 * SEC, 60 * SEC, &held), 1);
	assert_int_equal(held, 3);
	assert_int_equal(vd_log_limit_pass(&l, 5 + 121 * SEC, 60 * SEC, &held), 1);
	assert_int_equal(held, 0);
}

static void test_ns_between(void **state)
{
	(void)state;

	assert_int_equal(vd_ns_between(10, 25), 15);
	assert_int_equal(vd_ns_between(25, 25), 0);
	/* Behind: zero, never 2^64 less a little. */
	assert_int_equal(vd_ns_between(25, 10), 0);
	assert_int_equal(vd_ns_between(UINT64_MAX, 0), 0);
}

static void test_path(void **state)
{
	(void)state;
	char out[VD_LOG_PATH_MAX + 1], small[8], long_path[2 * VD_LOG_PATH_MAX];
	size_t n;

	assert_int_equal(vd_log_path(out, sizeof(out), "/artifact/abc"), 13);
	assert_string_equal(out, "/artifact/abc");
	vd_log_path(out, sizeof(out), "/a\nb\r\x1b[31m c%\x7f\xc3\xa9");
	assert_string_equal(out, "/a%0Ab%0D%1B[31m%20c%25%7F%C3%A9");
	memset(long_path, 'x', sizeof(long_path) - 1);
	long_path[sizeof(long_path) - 1] = '\0';
	n = vd_log_path(out, sizeof(out), long_path);
	assert_int_equal(n, VD_LOG_PATH_MAX);
	assert_int_equal(strlen(out), VD_LOG_PATH_MAX);
	assert_string_equal(out + n - 3, "...");
	/* A path exactly at the bound is whole. */
	long_path[VD_LOG_PATH_MAX] = '\0';
	assert_int_equal(vd_log_path(out, sizeof(out), long_path), VD_LOG_PATH_MAX);
	assert_int_equal(strchr(out, '.'), NULL);
	/* An escape is never cut in two. */
	assert_int_equal(vd_log_path(small, sizeof(small), "/ab\n\n\n"), 6);
	assert_string_equal(small, "/ab...");
	assert_int_equal(vd_log_path(small, sizeof(small), "/\n\n"), 7);
	assert_string_equal(small, "/%0A%0A");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_line),
		cmocka_unit_test(test_json_escapes),
		cmocka_unit_test(test_json_cut),
		cmocka_unit_test(test_journal_entry),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_limit),
		cmocka_unit_test(test_ns_between),
		cmocka_unit_test(test_path),
		cmocka_unit_test_setup_teardown(test_journal_socket, capture_stderr, restore_stderr),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

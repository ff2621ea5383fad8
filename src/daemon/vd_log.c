#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "vd_log.h"
#include "vd_utf8.h"
#include "vd_util.h"

static int log_stderr = 1;
static int log_level = VD_LOG_INFO;
static int log_format = VD_LOG_TEXT;
/* Chosen once at open; the socket may come and go with the journal. */
static int journal_wanted;
/* Not connected: each entry is sent to the path as it is then, so a
 * journal restarted on a new socket file gets the next one, and there is
 * no reconnect to guard among threads. */
static int journal_fd = -1;
static struct sockaddr_un journal_addr = { .sun_family = AF_UNIX, .sun_path = VD_LOG_JOURNAL_SOCKET };
static const char *log_ident = "lensemble-verifyd";
static const char *const names[] = { "error", "warning", "info", "debug" };
static const char *const formats[] = { "text", "json" };
static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };

/* The fields of vd_log_fields, in its order: JSON member, journal field.
 * PATH would read as the environment variable, hence STORE_PATH. */
static const struct {
	const char *json, *journal;
} field_names[] = {
	{ "content_hash", "CONTENT_HASH" },
	{ "path", "STORE_PATH" },
	{ "code", "CODE" },
	{ "run", "RUN" },
	{ "kind", "KIND" },
};

static const char *field_value(const vd_log_fields *f, size_t i)
{
	const char *const v[] = { f->content_hash, f->path, f->code, f->run, f->kind };

	return i < VD_ARRAY_LEN(v) ? v[i] : NULL;
}

/* systemd sets JOURNAL_STREAM to the device and inode of the stream it
 * connected; a stderr redirected elsewhere since (a test's log file)
 * keeps the variable but not the identity. */
static int stderr_is_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char extra;

	if (e == NULL || sscanf(e, "%llu:%llu%c", &dev, &ino, &extra) != 2 ||
	    fstat(STDERR_FILENO, &st) < 0)
		return 0;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

int vd_log_set_journal_socket(const char *path)
{
	if (strlen(path) >= sizeof(journal_addr.sun_path))
		return -ENAMETOOLONG;
	snprintf(journal_addr.sun_path, sizeof(journal_addr.sun_path), "%s", path);
	return 0;
}

/* The journal when stderr is the journal's stream, or when systemd runs
 * the daemon (INVOCATION_ID) without a stderr of its own; the native
 * protocol carries the fields, which a stream line cannot. Whether the
 * socket answers now does not matter: it is tried for every entry. */
void vd_log_open(const char *ident, int to_stderr)
{
	log_ident = ident;
	log_stderr = to_stderr;
	journal_wanted = stderr_is_journal() || (!to_stderr && getenv("INVOCATION_ID") != NULL);
	if (journal_wanted && journal_fd < 0)
		journal_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (!journal_wanted && !to_stderr)
		openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void vd_log_set_level(int level)
{
	log_level = level;
}

void vd_log_set_format(int format)
{
	log_format = format;
}

static int name_index(const char *const *list, size_t n, const char *s)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(s, list[i]) == 0)
			return (int)i;
	return -EINVAL;
}

int vd_log_level_parse(const char *s)
{
	return name_index(names, VD_ARRAY_LEN(names), s);
}

const char *vd_log_level_name(int level)
{
	return level >= 0 && level <= VD_LOG_DEBUG ? names[level] : "?";
}

int vd_log_format_parse(const char *s)
{
	return name_index(formats, VD_ARRAY_LEN(formats), s);
}

const char *vd_log_format_name(int format)
{
	return format == VD_LOG_JSON ? formats[VD_LOG_JSON] : formats[VD_LOG_TEXT];
}

/* ---- JSON lines ----------------------------------------------------------- */

/* The escape of one character at p (k bytes of UTF-8, 0: not UTF-8). */
static size_t json_escape(const uint8_t *p, size_t k, char *esc)
{
	if (k == 0)
		return (size_t)snprintf(esc, 8, "?");
	if (*p == '"' || *p == '\\')
		return (size_t)snprintf(esc, 8, "\\%c", *p);
	if (*p == '\n')
		return (size_t)snprintf(esc, 8, "\\n");
	if (*p == '\t')
		return (size_t)snprintf(esc, 8, "\\t");
	if (*p < 0x20)
		return (size_t)snprintf(esc, 8, "\\u%04x", *p);
	memcpy(esc, p, k);
	return k;
}

/* s as a JSON string, quotes included, at out[*len], ending at most at
 * out[max - 1]: a string that does not fit is cut between characters
 * (-ENOSPC), bytes that are not UTF-8 become '?'. Nothing when even ""
 * does not fit. */
static int json_string(char *out, size_t max, size_t *len, const char *s)
{
	const uint8_t *p = (const uint8_t *)s, *end = p + strlen(s);
	char esc[8];
	size_t k, e;

	if (*len + 2 > max)
		return -ENOSPC;
	out[(*len)++] = '"';
	while (p < end) {
		k = vd_utf8_seq(p, end);
		e = json_escape(p, k, esc);
		if (*len + e + 1 > max)
			break;
		memcpy(out + *len, esc, e);
		*len += e;
		p += k ? k : 1;
	}
	out[(*len)++] = '"';
	return p < end ? -ENOSPC : 0;
}

/* ,"name":"value" for each field set that fits whole in max bytes: a
 * hash or a path cut short would name something else. */
static void json_fields(char *out, size_t max, size_t *len, const vd_log_fields *f)
{
	const char *v;
	size_t i, klen, before;

	for (i = 0; f != NULL && i < VD_ARRAY_LEN(field_names); i++) {
		if ((v = field_value(f, i)) == NULL)
			continue;
		klen = strlen(field_names[i].json);
		if (*len + klen + 6 > max)
			continue;
		before = *len;
		*len += (size_t)snprintf(out + *len, max - *len, ",\"%s\":", field_names[i].json);
		if (json_string(out, max, len, v) < 0)
			*len = before;
	}
}

size_t vd_log_json_line(char *out, size_t n, double ts, int level, const vd_log_fields *f,
    const char *msg)
{
	char tail[VD_LOG_LINE_MAX / 2], when[40];
	size_t tlen = 0, len, room;
	int head;

	vd_rfc3339(ts, when, sizeof(when));
	head = snprintf(out, n, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":", when,
	    vd_log_level_name(level));
	if (head < 0 || (size_t)head + 8 > n) {
		if (n > 0)
			out[0] = '\0';
		return 0;
	}
	/* The fields are short; the message gets what they leave. */
	room = (n - (size_t)head - 8) / 2;
	json_fields(tail, room < sizeof(tail) ? room : sizeof(tail), &tlen, f);
	len = (size_t)head;
	json_string(out, n - tlen - 3, &len, msg);
	memcpy(out + len, tail, tlen);
	len += tlen;
	out[len++] = '}';
	out[len++] = '\n';
	out[len] = '\0';
	return len;
}

/* ---- the journal's native protocol ----------------------------------------- */

/* KEY=value, or for a value holding a newline KEY, its length as 64-bit
 * little endian, then the value. -ENOSPC when it does not fit. */
static int journal_field(char *out, size_t n, size_t *len, const char *key, const char *val)
{
	size_t kl = strlen(key), vl = strlen(val), i;
	int binary = memchr(val, '\n', vl) != NULL;
	uint64_t size = vl;

	if (*len + kl + 1 + (binary ? 8 : 0) + vl + 1 > n)
		return -ENOSPC;
	memcpy(out + *len, key, kl);
	*len += kl;
	out[(*len)++] = binary ? '\n' : '=';
	for (i = 0; binary && i < 8; i++)
		out[(*len)++] = (char)((size >> (8 * i)) & 0xff);
	memcpy(out + *len, val, vl);
	*len += vl;
	out[(*len)++] = '\n';
	return 0;
}

size_t vd_log_journal_entry(char *out, size_t n, const char *ident, int level,
    const vd_log_fields *f, const char *msg)
{
	char num[4];
	const char *v;
	size_t len = 0, i;
	int rc;

	snprintf(num, sizeof(num), "%d", prio[level >= 0 && level <= VD_LOG_DEBUG ? level : VD_LOG_ERROR]);
	if ((rc = journal_field(out, n, &len, "PRIORITY", num)) == 0 &&
	    (rc = journal_field(out, n, &len, "SYSLOG_IDENTIFIER", ident)) == 0)
		rc = journal_field(out, n, &len, "MESSAGE", msg);
	for (i = 0; f != NULL && rc == 0 && i < VD_ARRAY_LEN(field_names); i++)
		if ((v = field_value(f, i)) != NULL)
			rc = journal_field(out, n, &len, field_names[i].journal, v);
	return rc == 0 ? len : 0;
}

/* Never blocks the loop: a journal that cannot take the entry now (busy,
 * restarting, gone) gets the line on stderr instead, and the next entry
 * tries it again. 0 when sent, else a negative errno. */
static int to_journal(int level, const vd_log_fields *f, const char *msg)
{
	char entry[VD_LOG_LINE_MAX];
	size_t len = vd_log_journal_entry(entry, sizeof(entry), log_ident, level, f, msg);
	ssize_t sent;

	if (len == 0)
		len = vd_log_journal_entry(entry, sizeof(entry), log_ident, level, NULL, msg);
	if (len == 0)
		return -EMSGSIZE;
	sent = sendto(journal_fd, entry, len, MSG_DONTWAIT | MSG_NOSIGNAL,
	    (const struct sockaddr *)&journal_addr, sizeof(journal_addr));
	return sent == (ssize_t)len ? 0 : sent < 0 ? -errno : -EAGAIN;
}

static void emit(int level, const vd_log_fields *f, const char *msg)
{
	char line[VD_LOG_LINE_MAX];
	size_t len;

	if (journal_wanted && journal_fd >= 0 && to_journal(level, f, msg) == 0)
		return;
	if (!log_stderr && !journal_wanted) {
		syslog(prio[level], "%s", msg);
		return;
	}
	if (log_format == VD_LOG_JSON) {
		len = vd_log_json_line(line, sizeof(line), vd_wall_now(), level, f, msg);
		fwrite(line, 1, len, stderr);
		return;
	}
	/* systemd's journal adds its own timestamps; a terminal wants one. */
	fprintf(stderr, "%s: %s\n", names[level], msg);
}

int vd_log_would(int level)
{
	return level <= log_level;
}

void vd_log(int level, const char *fmt, ...)
{
	char msg[VD_LOG_MSG_MAX];
	va_list ap;

	if (level > log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	emit(level, NULL, msg);
}

void vd_logf(int level, const vd_log_fields *f, const char *fmt, ...)
{
	char msg[VD_LOG_MSG_MAX];
	va_list ap;

	if (level > log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	emit(level, f, msg);
}

int vd_log_limit_pass(vd_log_limit *l, uint64_t now_ns, uint64_t gap_ns, uint64_t *held)
{
	if (l->started && vd_ns_between(l->last_ns, now_ns) < gap_ns) {
		l->held++;
		return 0;
	}
	*held = l->held;
	l->held = 0;
	l->last_ns = now_ns;
	l->started = 1;
	return 1;
}

static size_t path_escape_len(unsigned char c)
{
	return c <= ' ' || c >= 0x7f || c == '%' ? 3 : 1;
}

/* Escaped, a path cannot end a line, forge a field or hide behind a
 * terminal's control sequences; an escape is never cut in two. */
size_t vd_log_path(char *out, size_t n, const char *path)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t max = n - 1 < VD_LOG_PATH_MAX ? n - 1 : VD_LOG_PATH_MAX, len = 0, whole = 0;
	const unsigned char *p;

	for (p = (const unsigned char *)path; *p != '\0' && whole <= max; p++)
		whole += path_escape_len(*p);
	if (whole > max)
		max -= 3;    /* room for the "..." that says it was cut */
	for (p = (const unsigned char *)path; *p != '\0'; p++) {
		if (len + path_escape_len(*p) > max)
			break;
		if (path_escape_len(*p) == 3) {
			out[len++] = '%';
			out[len++] = hex[*p >> 4];
			out[len++] = hex[*p & 15];
		} else {
			out[len++] = (char)*p;
		}
	}
	if (*p != '\0') {
		memcpy(out + len, "...", 3);
		len += 3;
	}
	out[len] = '\0';
	return len;
}

/*
 * Logging: to stderr in the foreground, as text ("level: message") or as
 * one JSON object a line (log_format); to the systemd journal through its
 * native protocol when stderr is the journal or the daemon runs under
 * systemd; else to syslog. A line may carry fields (vd_log_fields): JSON
 * members of the same names, and journal fields upper-cased (path as
 * STORE_PATH), so `journalctl CONTENT_HASH=<hex>` lists what the daemon
 * said about one artifact. Each journal entry is sent to the socket's
 * path as it is then: a restarted journal gets the next entry, and one the
 * journal cannot take (busy, restarting, gone) goes to stderr, never to
 * syslog. Safe from any thread.
 */
#ifndef VD_LOG_H
#define VD_LOG_H

#include "vd_limits.h"

#include <stddef.h>
#include <stdint.h>

enum { VD_LOG_ERROR, VD_LOG_WARN, VD_LOG_INFO, VD_LOG_DEBUG };

/* log_format: how lines go to stderr. */
enum { VD_LOG_TEXT, VD_LOG_JSON };

#define VD_LOG_JOURNAL_SOCKET "/run/systemd/journal/socket"

/* What a line is about; NULL members are left out. */
typedef struct vd_log_fields {
	const char *content_hash;   /* an artifact's content hash */
	const char *path;           /* inside the store: an artifact directory, a ledger, a statement */
	const char *code;           /* a verification code, or why a statement was refused */
	const char *run;            /* a run, "." for the store root */
	const char *kind;           /* an alert's kind */
} vd_log_fields;

void vd_log_open(const char *ident, int to_stderr);
/* Where the journal's socket is (default VD_LOG_JOURNAL_SOCKET), for
 * tests; before vd_log_open and any thread. -ENAMETOOLONG when path does
 * not fit an AF_UNIX address. */
int vd_log_set_journal_socket(const char *path);
void vd_log_set_level(int level);
void vd_log_set_format(int format);
int vd_log_level_parse(const char *s);         /* -EINVAL if unknown */
const char *vd_log_level_name(int level);
int vd_log_format_parse(const char *s);        /* -EINVAL if unknown */
const char *vd_log_format_name(int format);
/* Whether a line at level would be written: to spare building one. */
int vd_log_would(int level);
void vd_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same with fields (NULL: none). */
void vd_logf(int level, const vd_log_fields *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The JSON line of a message, newline included, in out (cut to a valid
 * line when it does not fit); its length. ts is Unix seconds. */
size_t vd_log_json_line(char *out, size_t n, double ts, int level, const vd_log_fields *f,
    const char *msg);
/* The journal entry of a message (native protocol: KEY=value lines), in
 * out; its length, or 0 when it does not fit. */
size_t vd_log_journal_entry(char *out, size_t n, const char *ident, int level,
    const vd_log_fields *f, const char *msg);

/* A line that may repeat many times a minute goes out at most once per
 * gap; the ones held back are counted for the next line to report. */
typedef struct vd_log_limit {
	uint64_t last_ns;      /* when a line last went out (monotonic) */
	uint64_t held;         /* lines held back since */
	int started;           /* a line went out: last_ns holds */
} vd_log_limit;

/* 1 when a line at now_ns may go out, with *held the lines held back
 * before it (then reset); 0 when it is held back and counted. A clock
 * read behind last_ns counts as no time passed. */
int vd_log_limit_pass(vd_log_limit *l, uint64_t now_ns, uint64_t gap_ns, uint64_t *held);

/* A request's path for a log line, in out (n bytes, at least 8): bytes
 * that are not printable ASCII, spaces and '%' as %XX, and cut after
 * VD_LOG_PATH_MAX bytes (or n - 1) with "..." at the end. Its length. */
size_t vd_log_path(char *out, size_t n, const char *path);

#define log_error(...) vd_log(VD_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) vd_log(VD_LOG_WARN, __VA_ARGS__)
#define log_info(...) vd_log(VD_LOG_INFO, __VA_ARGS__)
#define log_debug(...) vd_log(VD_LOG_DEBUG, __VA_ARGS__)

#endif

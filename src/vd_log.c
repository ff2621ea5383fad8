#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "vd_log.h"

static int log_stderr = 1;
static int log_level = VD_LOG_INFO;
static const char *const names[] = { "error", "warning", "info", "debug" };

void vd_log_open(const char *ident, int to_stderr)
{
	log_stderr = to_stderr;
	if (!to_stderr)
		openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void vd_log_set_level(int level)
{
	log_level = level;
}

int vd_log_level_parse(const char *s)
{
	int i;

	for (i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

const char *vd_log_level_name(int level)
{
	return level >= 0 && level <= VD_LOG_DEBUG ? names[level] : "?";
}

void vd_log(int level, const char *fmt, ...)
{
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	char msg[2048];
	va_list ap;

	if (level > log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!log_stderr) {
		syslog(prio[level], "%s", msg);
		return;
	}
	/* systemd's journal adds its own timestamps; a terminal wants one. */
	fprintf(stderr, "%s: %s\n", names[level], msg);
}

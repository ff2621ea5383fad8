#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "vd_notify.h"

int vd_notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa;
	socklen_t len;
	ssize_t n;
	int fd;

	if (path == NULL || path[0] == '\0')
		return VD_NOTIFY_NONE;
	if ((path[0] != '/' && path[0] != '@') || strlen(path) >= sizeof(sa.sun_path))
		return -EINVAL;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, strlen(path));
	if (path[0] == '@')
		sa.sun_path[0] = '\0';   /* abstract socket */
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	n = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
	close(fd);
	return n < 0 ? -errno : VD_NOTIFY_SENT;
}

int vd_notifyf(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return vd_notify(buf);
}

uint64_t vd_notify_watchdog_usec(void)
{
	const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	char *end;
	unsigned long long v;

	if (usec == NULL)
		return 0;
	if (pid != NULL && strtol(pid, NULL, 10) != (long)getpid())
		return 0;
	v = strtoull(usec, &end, 10);
	return *end == '\0' ? v : 0;
}

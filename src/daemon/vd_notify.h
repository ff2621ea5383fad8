/* The systemd notification protocol (sd_notify) without libsystemd. */
#ifndef VD_NOTIFY_H
#define VD_NOTIFY_H

#include <stdint.h>

/* What became of a state string when nothing failed. */
typedef enum vd_notify_result {
	VD_NOTIFY_NONE = 0,        /* not under systemd (no NOTIFY_SOCKET): nothing sent */
	VD_NOTIFY_SENT = 1
} vd_notify_result;

/* Send a state string ("READY=1", "STATUS=..."): a vd_notify_result, or
 * -EINVAL when NOTIFY_SOCKET is not a usable address, or the -errno of
 * sending. */
int vd_notify(const char *state);
int vd_notifyf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The watchdog interval in microseconds, or 0 when none is asked for. */
uint64_t vd_notify_watchdog_usec(void);

#endif

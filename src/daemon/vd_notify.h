/* The systemd notification protocol (sd_notify) without libsystemd. */
#ifndef VD_NOTIFY_H
#define VD_NOTIFY_H

#include <stdint.h>

/* Send a state string ("READY=1", "STATUS=..."); 0 when not under systemd. */
int vd_notify(const char *state);
int vd_notifyf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The watchdog interval in microseconds, or 0 when none is asked for. */
uint64_t vd_notify_watchdog_usec(void);

#endif

/* Logging: to stderr in the foreground (or under systemd), else syslog. */
#ifndef VD_LOG_H
#define VD_LOG_H

enum { VD_LOG_ERROR, VD_LOG_WARN, VD_LOG_INFO, VD_LOG_DEBUG };

void vd_log_open(const char *ident, int to_stderr);
void vd_log_set_level(int level);
int vd_log_level_parse(const char *s);         /* -1 if unknown */
const char *vd_log_level_name(int level);
void vd_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) vd_log(VD_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) vd_log(VD_LOG_WARN, __VA_ARGS__)
#define log_info(...) vd_log(VD_LOG_INFO, __VA_ARGS__)
#define log_debug(...) vd_log(VD_LOG_DEBUG, __VA_ARGS__)

#endif

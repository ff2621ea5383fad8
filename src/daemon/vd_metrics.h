/*
 * Counters and histograms, rendered in the Prometheus text format 0.0.4.
 * Owned by the event loop thread; no labels carry hashes or paths.
 */
#ifndef VD_METRICS_H
#define VD_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "lensemble/verify.h"
#include "vd_alerts.h"
#include "vd_dsse.h"
#include "vd_limits.h"
#include "vd_util.h"

typedef struct vd_histogram {
	const double *bounds;
	size_t n;
	uint64_t counts[32];      /* per bucket (non-cumulative), n + 1 with +Inf */
	double sum;
	uint64_t count;
} vd_histogram;

void vd_histogram_observe(vd_histogram *h, double v);

typedef struct vd_http_series {
	const char *route;        /* a fixed route name, never a raw path */
	unsigned code;
	uint64_t count;
} vd_http_series;

typedef struct vd_metrics {
	uint64_t verifications_total;
	uint64_t failures[VD_IO_ERROR + 1];
	uint64_t bytes_hashed_total;
	vd_histogram verify_duration;
	vd_histogram http_duration;
	vd_histogram loop_stall;   /* busy time of each event-loop turn */
	vd_http_series http[VD_METRICS_MAX_HTTP_SERIES];
	size_t n_http;
	uint64_t envelopes_rejected[VD_ENV_REASON_COUNT];
	uint64_t artifacts_pruned_total;
	uint64_t scans_total[2];          /* of changes, whole */
	uint64_t reloads_total[2];        /* SIGHUP reloads: applied, refused */
	double last_reload_success;       /* unix seconds: the start, then each applied reload */
} vd_metrics;

/* Values read off the store when rendering. */
typedef struct vd_gauges {
	uint64_t artifacts[4];            /* pending, verifying, verified, failed */
	uint64_t alerts[VD_ALERT_COUNT];
	uint64_t commitments[VD_CS_COUNT];
	uint64_t queue_depth, workers_busy, workers;
	uint64_t hashing_bytes, hashing_yields;   /* counted as slices end */
	uint64_t http_connections, http_connections_limit;
	uint64_t unreadable_dirs;         /* directories the last scan could not open */
	int64_t committed_head_round;     /* -1: none */
	int state_ok;                     /* the state database's last write succeeded */
	uint64_t state_write_failures;
	double last_scan, last_scrub;     /* unix seconds; 0: never */
	double start_time;
} vd_gauges;

void vd_metrics_init(vd_metrics *m);
void vd_metrics_http(vd_metrics *m, const char *route, unsigned code, double seconds);
void vd_metrics_envelope_rejected(vd_metrics *m, vd_env_reason why);
void vd_metrics_verified(vd_metrics *m, vd_code code, uint64_t bytes, double seconds);
void vd_metrics_scan(vd_metrics *m, int whole);
/* A reload of the configuration, applied (ok) or refused, at now. */
void vd_metrics_reload(vd_metrics *m, int ok, double now);
/* 0, or -ENOMEM (out is then incomplete). */
int vd_metrics_render(const vd_metrics *m, const vd_gauges *g, vd_buf *out);

#endif

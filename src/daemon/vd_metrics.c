#include "config.h"

#include <errno.h>
#include <string.h>

#include "vd_metrics.h"

#define P "lensemble_verifyd_"

static const double verify_bounds[] = { 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600 };
static const double loop_bounds[] = { 0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };
static const double http_bounds[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30 };
static const char *const state_names[] = { "pending", "verifying", "verified", "failed" };

void vd_histogram_observe(vd_histogram *h, double v)
{
	size_t i;

	for (i = 0; i < h->n && v > h->bounds[i]; i++)
		;
	h->counts[i]++;
	h->sum += v;
	h->count++;
}

void vd_metrics_init(vd_metrics *m)
{
	memset(m, 0, sizeof(*m));
	m->verify_duration.bounds = verify_bounds;
	m->verify_duration.n = VD_ARRAY_LEN(verify_bounds);
	m->http_duration.bounds = http_bounds;
	m->http_duration.n = VD_ARRAY_LEN(http_bounds);
	m->loop_stall.bounds = loop_bounds;
	m->loop_stall.n = VD_ARRAY_LEN(loop_bounds);
}

void vd_metrics_envelope_rejected(vd_metrics *m, vd_env_reason why)
{
	if (why > VD_ENV_OK && why < VD_ENV_REASON_COUNT)
		m->envelopes_rejected[why]++;
}

void vd_metrics_http(vd_metrics *m, const char *route, unsigned code, double seconds)
{
	size_t i;

	vd_histogram_observe(&m->http_duration, seconds);
	for (i = 0; i < m->n_http; i++) {
		if (m->http[i].code == code && strcmp(m->http[i].route, route) == 0) {
			m->http[i].count++;
			return;
		}
	}
	if (m->n_http < VD_METRICS_MAX_HTTP_SERIES) {
		m->http[m->n_http].route = route;
		m->http[m->n_http].code = code;
		m->http[m->n_http++].count = 1;
	}
}

void vd_metrics_verified(vd_metrics *m, vd_code code, uint64_t bytes, double seconds)
{
	m->verifications_total++;
	if (code != VD_OK && (unsigned)code <= VD_IO_ERROR)
		m->failures[code]++;
	m->bytes_hashed_total += bytes;
	vd_histogram_observe(&m->verify_duration, seconds);
}

void vd_metrics_scan(vd_metrics *m, int whole)
{
	m->scans_total[whole ? 1 : 0]++;
}

void vd_metrics_reload(vd_metrics *m, int ok, double now)
{
	m->reloads_total[ok ? 0 : 1]++;
	if (ok)
		m->last_reload_success = now;
}

static void help(vd_buf *b, const char *name, const char *type, const char *text)
{
	vd_buf_printf(b, "# HELP " P "%s %s\n# TYPE " P "%s %s\n", name, text, name, type);
}

static void histogram(vd_buf *b, const char *name, const vd_histogram *h)
{
	uint64_t cum = 0;
	size_t i;

	for (i = 0; i < h->n; i++) {
		cum += h->counts[i];
		vd_buf_printf(b, P "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[i],
		    (unsigned long long)cum);
	}
	cum += h->counts[h->n];
	vd_buf_printf(b, P "%s_bucket{le=\"+Inf\"} %llu\n" P "%s_sum %.6f\n" P "%s_count %llu\n",
	    name, (unsigned long long)cum, name, h->sum, name, (unsigned long long)h->count);
}

/* Commitments by where they come from and whether a trusted key signed
 * them; envelopes refused, by why. */
static void render_trust(const vd_metrics *m, const vd_gauges *g, vd_buf *b)
{
	static const char *const series[VD_CS_COUNT][2] = {
		{ "signed", "true" }, { "ledger", "true" }, { "ledger", "false" },
		{ "roundclose", "false" }, { "pinned", "false" }, { "oms", "true" },
	};
	size_t i;

	help(b, "commitments", "gauge", "Commitments known, by source and signature.");
	for (i = 0; i < VD_CS_COUNT; i++)
		vd_buf_printf(b, P "commitments{source=\"%s\",signed=\"%s\"} %llu\n", series[i][0],
		    series[i][1], (unsigned long long)g->commitments[i]);
	help(b, "artifacts_pruned_total", "counter",
	    "Verified, committed artifacts whose directories were removed; chains pass through them.");
	vd_buf_printf(b, P "artifacts_pruned_total %llu\n", (unsigned long long)m->artifacts_pruned_total);
	help(b, "envelopes_rejected_total", "counter", "Signed envelopes refused, by reason.");
	for (i = 1; i < VD_ENV_REASON_COUNT; i++)
		vd_buf_printf(b, P "envelopes_rejected_total{reason=\"%s\"} %llu\n",
		    vd_env_reason_name((vd_env_reason)i), (unsigned long long)m->envelopes_rejected[i]);
}

static void render_verification(const vd_metrics *m, const vd_gauges *g, vd_buf *b)
{
	size_t i;

	help(b, "artifacts", "gauge", "Artifact directories by verification state.");
	for (i = 0; i < 4; i++)
		vd_buf_printf(b, P "artifacts{state=\"%s\"} %llu\n", state_names[i],
		    (unsigned long long)g->artifacts[i]);
	help(b, "verifications_total", "counter", "Verifications completed.");
	vd_buf_printf(b, P "verifications_total %llu\n", (unsigned long long)m->verifications_total);
	help(b, "verification_failures_total", "counter", "Failed verifications by code.");
	for (i = 1; i <= VD_IO_ERROR; i++)
		vd_buf_printf(b, P "verification_failures_total{code=\"%s\"} %llu\n",
		    vd_code_name((vd_code)i), (unsigned long long)m->failures[i]);
	help(b, "integrity_alerts", "gauge", "Integrity conditions currently raised, by kind.");
	for (i = 0; i < VD_ALERT_COUNT; i++)
		vd_buf_printf(b, P "integrity_alerts{kind=\"%s\"} %llu\n",
		    vd_alert_name((vd_alert_kind)i), (unsigned long long)g->alerts[i]);
	render_trust(m, g, b);
	help(b, "bytes_hashed_total", "counter", "Bytes fed to SHA-256.");
	vd_buf_printf(b, P "bytes_hashed_total %llu\n", (unsigned long long)m->bytes_hashed_total);
	help(b, "verify_duration_seconds", "histogram", "Time to verify one artifact.");
	histogram(b, "verify_duration_seconds", &m->verify_duration);
}

static void render_runtime(const vd_metrics *m, const vd_gauges *g, vd_buf *b)
{
	size_t i;

	help(b, "unreadable_dirs", "gauge", "Directories of the store the last scan could not open.");
	vd_buf_printf(b, P "unreadable_dirs %llu\n", (unsigned long long)g->unreadable_dirs);
	help(b, "queue_depth", "gauge", "Verification jobs waiting for a worker.");
	vd_buf_printf(b, P "queue_depth %llu\n", (unsigned long long)g->queue_depth);
	help(b, "workers_busy", "gauge", "Hasher threads working.");
	vd_buf_printf(b, P "workers_busy %llu\n", (unsigned long long)g->workers_busy);
	help(b, "hashing_bytes_total", "counter",
	    "Bytes fed to SHA-256 by verifications, counted as each slice of hashing ends: unfinished ones included.");
	vd_buf_printf(b, P "hashing_bytes_total %llu\n", (unsigned long long)g->hashing_bytes);
	help(b, "hashing_yields_total", "counter",
	    "Slices of hashing that ended with the verification giving its hasher to another, to go on later.");
	vd_buf_printf(b, P "hashing_yields_total %llu\n", (unsigned long long)g->hashing_yields);
	help(b, "workers", "gauge", "Hasher threads.");
	vd_buf_printf(b, P "workers %llu\n", (unsigned long long)g->workers);
	help(b, "committed_head_round", "gauge",
	    "Round index of the newest trusted artifact (-1: none).");
	vd_buf_printf(b, P "committed_head_round %lld\n", (long long)g->committed_head_round);
	help(b, "state_database_ok", "gauge",
	    "1 when the state database's last write succeeded; 0 while writes fail (nothing new is recorded, /readyz is 503).");
	vd_buf_printf(b, P "state_database_ok %d\n", g->state_ok ? 1 : 0);
	help(b, "state_write_failures_total", "counter", "Writes to the state database that failed.");
	vd_buf_printf(b, P "state_write_failures_total %llu\n",
	    (unsigned long long)g->state_write_failures);
	help(b, "store_scans_total", "counter",
	    "Store scans begun: of the places changes named, or of the whole store.");
	vd_buf_printf(b, P "store_scans_total{scope=\"changes\"} %llu\n",
	    (unsigned long long)m->scans_total[0]);
	vd_buf_printf(b, P "store_scans_total{scope=\"whole\"} %llu\n",
	    (unsigned long long)m->scans_total[1]);
	help(b, "last_scan_timestamp_seconds", "gauge", "When the last store scan finished.");
	vd_buf_printf(b, P "last_scan_timestamp_seconds %.3f\n", g->last_scan);
	help(b, "last_scrub_timestamp_seconds", "gauge", "When the last scrub pass finished.");
	vd_buf_printf(b, P "last_scrub_timestamp_seconds %.3f\n", g->last_scrub);
	help(b, "start_time_seconds", "gauge", "When the daemon started.");
	vd_buf_printf(b, P "start_time_seconds %.3f\n", g->start_time);
	help(b, "config_reloads_total", "counter",
	    "Configuration reloads (SIGHUP): applied, or refused with the running one kept.");
	vd_buf_printf(b, P "config_reloads_total{result=\"success\"} %llu\n",
	    (unsigned long long)m->reloads_total[0]);
	vd_buf_printf(b, P "config_reloads_total{result=\"failure\"} %llu\n",
	    (unsigned long long)m->reloads_total[1]);
	help(b, "config_last_reload_success_timestamp_seconds", "gauge",
	    "When the configuration in force was loaded: the start, or the last applied reload.");
	vd_buf_printf(b, P "config_last_reload_success_timestamp_seconds %.3f\n",
	    m->last_reload_success);
	help(b, "http_connections", "gauge", "HTTP connections open, this one included.");
	vd_buf_printf(b, P "http_connections %llu\n", (unsigned long long)g->http_connections);
	help(b, "http_connections_limit", "gauge", "max_connections the listener was started with.");
	vd_buf_printf(b, P "http_connections_limit %llu\n",
	    (unsigned long long)g->http_connections_limit);
	help(b, "loop_stall_seconds", "histogram",
	    "Time the event loop spent running callbacks in one turn (not waiting).");
	histogram(b, "loop_stall_seconds", &m->loop_stall);
	help(b, "http_requests_total", "counter", "HTTP requests by route and status.");
	for (i = 0; i < m->n_http; i++)
		vd_buf_printf(b, P "http_requests_total{route=\"%s\",code=\"%u\"} %llu\n",
		    m->http[i].route, m->http[i].code, (unsigned long long)m->http[i].count);
	help(b, "http_request_duration_seconds", "histogram", "Time to answer a request.");
	histogram(b, "http_request_duration_seconds", &m->http_duration);
	help(b, "build_info", "gauge", "The running version.");
	vd_buf_printf(b, P "build_info{version=\"%s\"} 1\n", PACKAGE_VERSION);
}

int vd_metrics_render(const vd_metrics *m, const vd_gauges *g, vd_buf *out)
{
	render_verification(m, g, out);
	render_runtime(m, g, out);
	return out->oom ? -ENOMEM : 0;
}

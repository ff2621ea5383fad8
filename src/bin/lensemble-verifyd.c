/*
 * lensemble-verifyd: watch a Lensemble artifact store, verify every
 * artifact's canonical content hash, and answer participants over HTTP
 * before they load a model.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <uv.h>

#include "vd_api.h"
#include "vd_attest.h"
#include "vd_artifact.h"
#include "vd_config.h"
#include "vd_http.h"
#include "vd_limits.h"
#include "vd_log.h"
#include "vd_metrics.h"
#include "vd_notify.h"
#include "vd_startcheck.h"
#include "vd_state.h"
#include "vd_store.h"
#include "vd_turn.h"
#include "vd_exit.h"
#include "vd_util.h"

#ifndef SYSCONFDIR
#define SYSCONFDIR "/etc"
#endif
#define DEFAULT_CONFIG SYSCONFDIR "/lensemble-verifyd.conf"
#define MAX_OVERRIDES 16
#define MALLOC_ARENAS 1                    /* see main() */
#define MALLOC_MMAP_THRESHOLD (128 * 1024)  /* glibc's default, kept fixed */

typedef struct daemon_opts {
	int foreground, check;
	const char *config;
	int config_given;
	const char *keys[MAX_OVERRIDES], *values[MAX_OVERRIDES];
	int n;
} daemon_opts;

typedef struct vd_daemon {
	uv_loop_t loop;
	daemon_opts opts;
	vd_config *cfg;
	vd_metrics metrics;
	vd_store store;
	vd_http *http;
	vd_api api;
	vd_state *state;
	vd_keyring *keys;           /* trusted_keys as last read */
	vd_omskeys *oms_keys;       /* run_oms_keys as last read */
	vd_account account;         /* who the daemon runs as */
	uv_signal_t sigterm, sigint, sighup;
	uv_timer_t status, watchdog;
	uv_prepare_t stall;
	vd_turn turn;
	vd_log_limit stall_lines;
	int stopping;
} vd_daemon;

static const char usage_text[] =
"Usage: lensemble-verifyd [-f] [-t] [-c FILE] [--store DIR] [--listen ADDR:PORT]\n"
"                         [--state-dir DIR] [--workers N] [--token-file FILE]\n"
"                         [--genesis-hash [RUN:]HEX[,[RUN:]HEX...]] [--user NAME]\n"
"\n"
"Verify the Lensemble model artifacts of a store and answer over HTTP\n"
"whether a model is the committed one and unaltered.\n"
"\n"
"  -f, --foreground        stay in the foreground, log to stderr\n"
"  -t, --test              check the configuration and what a start needs of\n"
"                          the system (the account, the state directory),\n"
"                          as this user, and exit (0 good, 1 bad)\n"
"  -c, --config FILE       configuration file (default " DEFAULT_CONFIG ")\n"
"      --store DIR         the artifact store (config key: store)\n"
"      --listen ADDR:PORT  HTTP address; port 0 picks a free one\n"
"      --state-dir DIR     where the state database lives\n"
"      --workers N         hasher threads (0: one per core)\n"
"      --token-file FILE   operator token for POST /roundclose\n"
"      --genesis-hash [RUN:]HEX[,[RUN:]HEX...]\n"
"                          pinned content hash of a run's round-0 artifact;\n"
"                          a bare HEX for every run without its own\n"
"      --user NAME         account to switch to when started as root\n"
"  -h, --help              show this help\n"
"  -V, --version           show the version\n"
"\n"
"Signals: SIGTERM/SIGINT stop; SIGHUP re-reads the configuration (a bad\n"
"one is refused and the running one kept).\n";

/* 0, or -EINVAL (-E2BIG: too many overrides) for a bad command line. */
static int parse_args(int argc, char **argv, daemon_opts *o)
{
	static const struct option longopts[] = {
		{ "foreground", no_argument, NULL, 'f' },
		{ "test", no_argument, NULL, 't' },
		{ "config", required_argument, NULL, 'c' },
		{ "store", required_argument, NULL, 1 },
		{ "listen", required_argument, NULL, 2 },
		{ "state-dir", required_argument, NULL, 3 },
		{ "workers", required_argument, NULL, 4 },
		{ "token-file", required_argument, NULL, 5 },
		{ "genesis-hash", required_argument, NULL, 6 },
		{ "user", required_argument, NULL, 7 },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const keys[] = { NULL, "store", "listen", "state_dir", "workers",
		"token_file", "genesis_hash", "user" };
	int ch;

	o->config = DEFAULT_CONFIG;
	while ((ch = getopt_long(argc, argv, "ftc:hV", longopts, NULL)) != -1) {
		switch (ch) {
		case 'f': o->foreground = 1; break;
		case 't': o->check = 1; break;
		case 'c': o->config = optarg; o->config_given = 1; break;
		case 'h': fputs(usage_text, stdout); exit(VD_EXIT_OK);
		case 'V': printf("lensemble-verifyd %s\n", PACKAGE_VERSION); exit(VD_EXIT_OK);
		case 1: case 2: case 3: case 4: case 5: case 6: case 7:
			if (o->n == MAX_OVERRIDES)
				return -E2BIG;
			o->keys[o->n] = keys[ch];
			o->values[o->n++] = optarg;
			break;
		default:
			return -EINVAL;
		}
	}
	return optind == argc ? 0 : -EINVAL;
}

/* Defaults, then the file, then the command line. */
static vd_config *load_config(const daemon_opts *o, char *err, size_t errlen)
{
	vd_config *c = malloc(sizeof(*c));
	char msg[256];
	int i;

	if (c == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	vd_config_defaults(c);
	if ((o->config_given || access(o->config, F_OK) == 0) &&
	    vd_config_load(o->config, c, err, errlen) < 0)
		goto fail;
	for (i = 0; i < o->n; i++) {
		if (vd_config_set(c, o->keys[i], o->values[i], msg, sizeof(msg)) < 0) {
			snprintf(err, errlen, "command line: %s", msg);
			goto fail;
		}
	}
	if (vd_config_check(c, msg, sizeof(msg)) < 0) {
		snprintf(err, errlen, "%s", msg);
		goto fail;
	}
	return c;
fail:
	free(c);
	return NULL;
}

static void bad_key(const char *file, const char *why, void *arg)
{
	if (arg != NULL)
		fprintf(stderr, "lensemble-verifyd: trusted_keys: %s: %s; skipped\n", file, why);
	else
		log_warn("trusted_keys: %s: %s; skipped", file, why);
}

/* The trusted keys named by cfg: an empty ring when none are configured,
 * NULL with err when the directory cannot be read (the config is refused). */
static vd_keyring *load_keys(const vd_config *cfg, int to_stderr, char *err, size_t errlen)
{
	char msg[400];
	vd_keyring *kr;

	if (cfg->trusted_keys[0] == '\0') {
		if ((kr = calloc(1, sizeof(*kr))) == NULL)
			snprintf(err, errlen, "out of memory");
		else
			kr->refs = 1;
		return kr;
	}
	kr = vd_keyring_load_dir(cfg->trusted_keys, bad_key, to_stderr ? (void *)1 : NULL,
	    msg, sizeof(msg));
	if (kr == NULL)
		snprintf(err, errlen, "trusted_keys: %s", msg);
	return kr;
}

static void bad_oms_key(const char *file, const char *why, void *arg)
{
	if (arg != NULL)
		fprintf(stderr, "lensemble-verifyd: run_oms_keys: %s: %s; skipped\n", file, why);
	else
		log_warn("run_oms_keys: %s: %s; skipped", file, why);
}

static vd_omskeys *load_oms_keys(const vd_config *cfg, int to_stderr, char *err, size_t errlen)
{
	return vd_omskeys_load(cfg, bad_oms_key, to_stderr ? (void *)1 : NULL, err, errlen);
}

/* Takes over the reference to keys. */
static void set_oms_keys(vd_daemon *d, vd_omskeys *keys)
{
	size_t i;

	for (i = 0; i < keys->n; i++)
		log_info("OMS bundles of run %s: %zu key(s), %zu CA file(s)",
		    vd_run_name(keys->runs[i].run), keys->runs[i].n_keys, keys->runs[i].n_cas);
	vd_store_set_oms_keys(&d->store, keys);
	vd_omskeys_unref(d->oms_keys);
	d->oms_keys = keys;
}

/* Keys read once at start: a reload that changes them only warns, naming
 * those it changed so that the operator knows what awaits a restart. */
static void warn_restart_keys(const vd_config *old, const vd_config *new)
{
	char changed[512];
	size_t n = vd_config_restart_changes(old, new, changed, sizeof(changed));

	if (n > 0)
		log_warn("reload: %s changed; %s only on restart, until then the running value%s",
		    changed, n == 1 ? "it takes effect" : "they take effect", n == 1 ? " holds" : "s hold");
}

/* Takes over the reference to keys. */
static void set_keys(vd_daemon *d, vd_keyring *keys)
{
	log_info("commitment policy %s; %zu trusted key(s)%s%s",
	    vd_policy_name(vd_config_policy(d->cfg)), keys->n,
	    d->cfg->trusted_keys[0] ? " from " : "", d->cfg->trusted_keys);
	vd_store_set_keys(&d->store, keys);
	vd_keyring_unref(d->keys);
	d->keys = keys;
}

static void reload(vd_daemon *d)
{
	char err[512];
	vd_config *c = load_config(&d->opts, err, sizeof(err));
	vd_config *old = d->cfg;
	vd_keyring *keys = c ? load_keys(c, 0, err, sizeof(err)) : NULL;
	vd_omskeys *oms = keys ? load_oms_keys(c, 0, err, sizeof(err)) : NULL;

	if (c == NULL || keys == NULL || oms == NULL) {
		log_error("reload refused, keeping the running configuration: %s", err);
		vd_metrics_reload(&d->metrics, 0, vd_wall_now());
		vd_keyring_unref(keys);
		free(c);
		return;
	}
	warn_restart_keys(old, c);
	log_info("configuration reloaded from %s", d->opts.config);
	d->cfg = c;
	vd_log_set_level(c->log_level);
	vd_log_set_format(c->log_format);
	vd_state_set_alert_retention(d->state, c->alert_retention);
	vd_store_set_config(&d->store, c);
	vd_http_set_config(d->http, c);
	d->api.cfg = c;
	vd_api_load_token(&d->api);
	set_keys(d, keys);
	set_oms_keys(d, oms);
	free(old);
	vd_metrics_reload(&d->metrics, 1, vd_wall_now());
	vd_store_scan(&d->store);
}

static void closed_noop(uv_handle_t *h)
{
}

static void on_store_closed(void *arg)
{
	vd_daemon *d = arg;

	uv_close((uv_handle_t *)&d->sigterm, closed_noop);
	uv_close((uv_handle_t *)&d->sigint, closed_noop);
	uv_close((uv_handle_t *)&d->sighup, closed_noop);
	uv_close((uv_handle_t *)&d->status, closed_noop);
	uv_close((uv_handle_t *)&d->watchdog, closed_noop);
	uv_close((uv_handle_t *)&d->stall, closed_noop);
}

static void shutdown_daemon(vd_daemon *d, const char *why)
{
	if (d->stopping)
		return;
	d->stopping = 1;
	log_info("%s: stopping", why);
	vd_notify("STOPPING=1");
	uv_timer_stop(&d->status);
	uv_timer_stop(&d->watchdog);
	/* Stop accepting first; waiting clients get their 202 from the store. */
	vd_store_close(&d->store, on_store_closed, d);
	/* Answers lookups still on the thread pool: libmicrohttpd must not
	 * be stopped with a connection suspended. */
	vd_api_stop(&d->api);
	d->api.http = NULL;
	vd_http_stop(d->http);
}

static void on_signal(uv_signal_t *h, int sig)
{
	vd_daemon *d = h->data;

	if (sig == SIGHUP)
		reload(d);
	else
		shutdown_daemon(d, sig == SIGTERM ? "SIGTERM" : "SIGINT");
}

static void on_status(uv_timer_t *t)
{
	vd_daemon *d = t->data;
	vd_gauges g;

	memset(&g, 0, sizeof(g));
	vd_store_gauges(&d->store, &g);
	vd_notifyf("STATUS=%llu verified, %llu failed, %llu pending; queue %llu",
	    (unsigned long long)g.artifacts[VD_AS_VERIFIED],
	    (unsigned long long)g.artifacts[VD_AS_FAILED],
	    (unsigned long long)(g.artifacts[VD_AS_PENDING] + g.artifacts[VD_AS_VERIFYING]),
	    (unsigned long long)g.queue_depth);
}

/* The loop pings only while it turns: a stuck loop misses its pings. */
static void on_watchdog(uv_timer_t *t)
{
	vd_notify("WATCHDOG=1");
}

/* A start that fails names who the daemon ran as: most failures here
 * are permissions, which depend on it. */
static void start_error(const char *msg)
{
	char who[96];

	vd_account_describe_self(who, sizeof(who));
	log_error("%s; running as %s", msg, who);
}

static int drop_privileges(const vd_account *a)
{
	char err[256];
	int rc;

	if (!a->switch_to)
		return 0;
	if ((rc = vd_account_switch(a, err, sizeof(err))) < 0) {
		log_error("%s", err);
		return rc;
	}
	prctl(PR_SET_DUMPABLE, 1);
	log_info("running as user %s", a->name);
	return 0;
}

/* Each turn of the loop, its busy time (the turn less the time it waited
 * in poll) goes to loop_stall_seconds; a turn over loop_stall_warn_ms is a
 * stall that delays every client, and is logged with its length, at most
 * once per VD_STALL_LOG_GAP_NS. */
static void on_prepare(uv_prepare_t *h)
{
	vd_daemon *d = h->data;
	uint64_t busy = vd_turn_mark(&d->turn), held;

	vd_histogram_observe(&d->metrics.loop_stall, (double)busy / 1e9);
	if (busy <= (uint64_t)d->cfg->loop_stall_warn_ms * 1000000u ||
	    !vd_log_limit_pass(&d->stall_lines, d->turn.start, VD_STALL_LOG_GAP_NS, &held))
		return;
	log_warn("the event loop was busy for %.1f ms in one turn (over loop_stall_warn_ms = %u; %llu more such turn(s) since the last line)",
	    (double)busy / 1e6, d->cfg->loop_stall_warn_ms, (unsigned long long)held);
}

static void start_stall_guard(vd_daemon *d)
{
	uv_prepare_init(&d->loop, &d->stall);
	d->stall.data = d;
	vd_turn_init(&d->turn, &d->loop);
	uv_prepare_start(&d->stall, on_prepare);
}

static void start_timers(vd_daemon *d)
{
	uint64_t wd = vd_notify_watchdog_usec();

	uv_timer_init(&d->loop, &d->status);
	uv_timer_init(&d->loop, &d->watchdog);
	d->status.data = d->watchdog.data = d;
	uv_timer_start(&d->status, on_status, VD_STATUS_INTERVAL_MS, VD_STATUS_INTERVAL_MS);
	if (wd > 0)
		uv_timer_start(&d->watchdog, on_watchdog, 0, wd / 2000);
}

static void start_signals(vd_daemon *d)
{
	signal(SIGPIPE, SIG_IGN);
	uv_signal_init(&d->loop, &d->sigterm);
	uv_signal_init(&d->loop, &d->sigint);
	uv_signal_init(&d->loop, &d->sighup);
	d->sigterm.data = d->sigint.data = d->sighup.data = d;
	uv_signal_start(&d->sigterm, on_signal, SIGTERM);
	uv_signal_start(&d->sigint, on_signal, SIGINT);
	uv_signal_start(&d->sighup, on_signal, SIGHUP);
}

static int start_http(vd_daemon *d)
{
	char err[512];
	int rc;

	rc = vd_http_start(&d->http, &d->loop, d->cfg, vd_api_handle, &d->api, err, sizeof(err));
	if (rc < 0) {
		start_error(err);
		return rc;
	}
	vd_http_on_done(d->http, vd_api_done, &d->api);
	vd_http_on_headers(d->http, vd_api_early, &d->api);
	d->api.http = d->http;
	log_info("listening on %s%s%s:%u%s", d->cfg->listen_v6 ? "[" : "", d->cfg->listen_host,
	    d->cfg->listen_v6 ? "]" : "", (unsigned)vd_http_port(d->http),
	    d->cfg->tls_cert[0] ? " (HTTPS)" : "");
	return 0;
}

/* The key that signs verdicts: named in the configuration (read before
 * privileges are dropped, as it may be root's alone), else the state
 * directory's, created at first start. */
static int open_signing_key(vd_daemon *d, int before_drop)
{
	char path[VD_CONFIG_PATH_MAX + 32], err[512];
	int rc;

	if (d->api.signing_key != NULL || (before_drop && d->cfg->signing_key[0] == '\0'))
		return 0;
	if (d->cfg->signing_key[0])
		snprintf(path, sizeof(path), "%s", d->cfg->signing_key);
	else
		snprintf(path, sizeof(path), "%s/%s", d->cfg->state_dir, VD_SIGNING_KEY_FILE);
	if ((rc = vd_attest_key_open(path, 1, &d->api.signing_key, err, sizeof(err))) < 0) {
		char msg[600];
		snprintf(msg, sizeof(msg), "signing_key: %s", err);
		start_error(msg);
		return rc;
	}
	log_info("verdicts are signed by key %s (%s)", vd_key_id(d->api.signing_key), path);
	return 0;
}

/* The key that signs OMS bundles: as the verdicts' key, P-256 when made. */
static int open_oms_key(vd_daemon *d, int before_drop)
{
	char path[VD_CONFIG_PATH_MAX + 32], err[512], msg[600];
	int rc;

	if (d->api.oms_key != NULL || (before_drop && d->cfg->oms_signing_key[0] == '\0'))
		return 0;
	if (d->cfg->oms_signing_key[0])
		snprintf(path, sizeof(path), "%s", d->cfg->oms_signing_key);
	else
		snprintf(path, sizeof(path), "%s/%s", d->cfg->state_dir, VD_OMS_SIGNING_KEY_FILE);
	if ((rc = vd_attest_oms_key_open(path, 1, &d->api.oms_key, err, sizeof(err))) < 0) {
		snprintf(msg, sizeof(msg), "oms_signing_key: %s", err);
		start_error(msg);
		return rc;
	}
	log_info("OMS bundles are signed by key %s (%s)", vd_key_id(d->api.oms_key), path);
	return 0;
}

/* What strip_others did when it did not fail. */
enum strip_result {
	STRIP_NONE,         /* nothing to take: no such access, or neither a file nor a directory */
	STRIP_TAKEN         /* it had some, in *was, and lost it */
};

/* fd's group and other permissions taken away: a strip_result, or the
 * negative errno of why they stay. */
static int strip_others(int fd, mode_t *was)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if ((!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) || (st.st_mode & 077) == 0)
		return STRIP_NONE;
	*was = st.st_mode & 07777;
	return fchmod(fd, st.st_mode & 07700) < 0 ? -errno : STRIP_TAKEN;
}

/* The state directory holds the posted commitments, the verdicts and the
 * key that signs them: no other user may read or change them. Under
 * systemd the unit's StateDirectoryMode= and UMask= see to it; started
 * otherwise, the directory and the database may have been made open to
 * others (as by an earlier run under umask 022). Their access is taken
 * away, with one warning; what cannot be fixed (another user's directory)
 * keeps the daemon from starting. A missing directory is made 0700 by
 * vd_state_open; a symbolic link is left for SQLite to judge, and an
 * exposed signing key for vd_key_load to refuse: it may have been read. */
static int private_state(const char *dir)
{
	static const char *const names[] = { ".", VD_STATE_FILE, VD_STATE_FILE "-wal",
		VD_STATE_FILE "-shm" };
	char fixed[256] = "";
	size_t i, at = 0;
	int dfd, fd, rc = STRIP_NONE;
	mode_t was = 0;

	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return 0;
	for (i = 0; i < VD_ARRAY_LEN(names); i++) {
		fd = i == 0 ? dfd : openat(dfd, names[i], O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
		    O_NOCTTY | O_CLOEXEC);
		if (fd >= 0)
			rc = strip_others(fd, &was);
		else
			rc = errno == ENOENT || errno == ELOOP ? STRIP_NONE : -errno;
		if (fd >= 0 && fd != dfd)
			close(fd);
		if (rc < 0)
			break;
		if (rc == STRIP_TAKEN && at < sizeof(fixed))
			at += (size_t)snprintf(fixed + at, sizeof(fixed) - at, "%s%s %04o",
			    at ? ", " : "", i == 0 ? "the directory" : names[i], (unsigned)was);
	}
	close(dfd);
	if (rc < 0) {
		log_error("state directory %s: cannot take other users' access away from %s: %s",
		    dir, i == 0 ? "the directory" : names[i], strerror(-rc));
		return rc;
	}
	if (fixed[0] != '\0')
		log_warn("state directory %s was open to other users (%s): now its owner's alone",
		    dir, fixed);
	return 0;
}

/* The database is refused, never recreated, when damaged or too new. */
static int open_state(vd_daemon *d)
{
	char err[512];
	int rc;

	if ((rc = private_state(d->cfg->state_dir)) < 0)
		return rc;
	if (vd_state_open(d->cfg->state_dir, &d->state, err, sizeof(err)) < 0) {
		/* SQLite's errno is that of its last try: a file it could not
		 * create is retried read-only and reported missing. The check
		 * of -t, as the user now running, says what is not allowed. */
		vd_account self = { .switch_to = 0 };
		char why[512];
		if (vd_startcheck_state(d->cfg, &self, why, sizeof(why)) < 0)
			log_error("%s; %s", err, why);
		else
			start_error(err);
		return -EIO;
	}
	vd_state_set_alert_retention(d->state, d->cfg->alert_retention);
	return 0;
}

/* 0 once stopped, or the negative errno of what kept it from starting
 * (said in the log). */
static int run(vd_daemon *d)
{
	vd_omskeys *oms;
	vd_keyring *keys;
	char err[512], why[320];
	int rc;

	uv_loop_init(&d->loop);
	uv_loop_configure(&d->loop, UV_METRICS_IDLE_TIME);
	vd_metrics_init(&d->metrics);
	memset(&d->api, 0, sizeof(d->api));
	d->api.store = &d->store;
	d->api.metrics = &d->metrics;
	d->api.cfg = d->cfg;
	d->api.start_time = vd_wall_now();
	d->metrics.last_reload_success = d->api.start_time;
	start_signals(d);
	start_stall_guard(d);
	if ((rc = start_http(d)) < 0)
		return rc;
	/* Read as the starting user: the token file may be root's alone. */
	vd_api_load_token(&d->api);
	if ((keys = load_keys(d->cfg, 0, err, sizeof(err))) == NULL ||
	    (oms = load_oms_keys(d->cfg, 0, err, sizeof(err))) == NULL) {
		start_error(err);
		return -EINVAL;
	}
	if ((rc = open_signing_key(d, 1)) < 0 || (rc = open_oms_key(d, 1)) < 0 ||
	    (rc = drop_privileges(&d->account)) < 0 || (rc = open_state(d)) < 0 ||
	    (rc = open_signing_key(d, 0)) < 0 || (rc = open_oms_key(d, 0)) < 0)
		return rc;
	if ((rc = vd_store_init(&d->store, &d->loop, &d->turn, d->cfg, &d->metrics)) < 0) {
		snprintf(err, sizeof(err), "cannot start the store %s: %s (%s)", d->cfg->store,
		    uv_strerror(rc), uv_err_name(rc));
		start_error(err);
		return rc;
	}
	set_keys(d, keys);
	set_oms_keys(d, oms);
	if ((rc = vd_store_attach_state(&d->store, d->state, why, sizeof(why))) < 0) {
		snprintf(err, sizeof(err), "cannot load the state database in %s: %s", d->cfg->state_dir,
		    why);
		start_error(err);
		return rc;
	}
	d->api.state_ready = 1;
	start_timers(d);
	vd_notify("READY=1");
	log_info("lensemble-verifyd %s watching %s", PACKAGE_VERSION, d->cfg->store);
	/* The start before this (the state database loaded, the keys read)
	 * is no turn of the loop: its first turn starts now. */
	vd_turn_init(&d->turn, &d->loop);
	uv_run(&d->loop, UV_RUN_DEFAULT);
	rc = uv_loop_close(&d->loop);
	if (rc != 0)
		log_warn("event loop closed with handles open");
	vd_state_close(d->state);
	vd_keyring_unref(d->keys);
	vd_omskeys_unref(d->oms_keys);
	vd_key_free(d->api.signing_key);
	vd_key_free(d->api.oms_key);
	log_info("stopped");
	return 0;
}

/* A signing_key named in the configuration is read as the starting user;
 * one missing is made at start. */
static int check_key_file(const char *key, const char *path,
    int (*open_fn)(const char *, int, vd_key **, char *, size_t), char *err, size_t errlen)
{
	char msg[400];
	struct stat st;
	vd_key *k = NULL;
	int rc;

	if (path[0] == '\0' || (lstat(path, &st) < 0 && errno == ENOENT))
		return 0;
	if ((rc = open_fn(path, 0, &k, msg, sizeof(msg))) < 0) {
		snprintf(err, errlen, "%s: %s", key, msg);
		return rc;
	}
	vd_key_free(k);
	return 0;
}

static int check_signing_key(const vd_config *c, char *err, size_t errlen)
{
	int rc = check_key_file("signing_key", c->signing_key, vd_attest_key_open, err, errlen);

	return rc < 0 ? rc : check_key_file("oms_signing_key", c->oms_signing_key,
	    vd_attest_oms_key_open, err, errlen);
}

/* -t: what a start would refuse, short of binding and switching user for
 * good. Checked for the user running it: under a unit that starts the
 * daemon unprivileged, run it as that account. The exit status. */
static int check_config(vd_daemon *d, char *err, size_t errlen)
{
	vd_keyring *keys = load_keys(d->cfg, 1, err, errlen);
	vd_omskeys *oms = keys ? load_oms_keys(d->cfg, 1, err, errlen) : NULL;
	int oms_ok = oms != NULL;

	vd_omskeys_unref(oms);
	if (keys == NULL || !oms_ok || vd_http_tls_check(d->cfg, err, errlen) < 0 ||
	    vd_account_of(d->cfg, &d->account, err, errlen) < 0 ||
	    check_signing_key(d->cfg, err, errlen) < 0 ||
	    vd_startcheck_state(d->cfg, &d->account, err, errlen) < 0) {
		fprintf(stderr, "lensemble-verifyd: %s\n", err);
		if (keys != NULL && geteuid() == 0 && d->cfg->user[0] == '\0')
			fprintf(stderr, "lensemble-verifyd: for a service manager that starts the daemon as its own account (the shipped systemd unit does), run the check as that account: runuser -u ACCOUNT -- lensemble-verifyd -t\n");
		vd_keyring_unref(keys);
		return VD_EXIT_FAIL;
	}
	printf("commitment policy %s; %zu trusted key(s)\n",
	    vd_policy_name(vd_config_policy(d->cfg)), keys->n);
	printf("runs as user %s; state directory %s\n", d->account.name, d->cfg->state_dir);
	vd_keyring_unref(keys);
	printf("configuration OK: %s\n", d->opts.config_given ||
	    access(d->opts.config, F_OK) == 0 ? d->opts.config : "(defaults)");
	return VD_EXIT_OK;
}

int main(int argc, char **argv)
{
	static vd_daemon d;
	char err[512];

	/* One malloc arena for every thread: the scan thread's result is
	 * freed on the loop thread, and the hashers allocate little; with an
	 * arena each, memory freed in one is not reused by another and stays
	 * resident. */
	mallopt(M_ARENA_MAX, MALLOC_ARENAS);
	/* A fixed threshold: glibc would raise it to the size of each large
	 * block freed (a request body, a scan result), and the next ones
	 * would stay on the heap, resident, after they are freed. */
	mallopt(M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD);
	/* All the daemon creates is its state (the database, with the files
	 * SQLite adds beside it, and the signing key): its user's alone, as
	 * the unit's UMask= has it, however the daemon was started. */
	umask(077);
	if (parse_args(argc, argv, &d.opts) < 0) {
		fprintf(stderr, "lensemble-verifyd: bad arguments\nTry 'lensemble-verifyd --help'.\n");
		return VD_EXIT_USAGE;
	}
	if ((d.cfg = load_config(&d.opts, err, sizeof(err))) == NULL) {
		fprintf(stderr, "lensemble-verifyd: %s\n", err);
		return VD_EXIT_FAIL;
	}
	if (d.opts.check) {
		int rc = check_config(&d, err, sizeof(err));
		free(d.cfg);
		return rc;
	}
	if (vd_account_of(d.cfg, &d.account, err, sizeof(err)) < 0) {
		fprintf(stderr, "lensemble-verifyd: %s\n", err);
		free(d.cfg);
		return VD_EXIT_FAIL;
	}
	vd_log_open("lensemble-verifyd", d.opts.foreground || getenv("JOURNAL_STREAM") != NULL);
	vd_log_set_level(d.cfg->log_level);
	vd_log_set_format(d.cfg->log_format);
	vd_artifact_guard_sigbus();
	/* Initialise libcrypto here, not lazily in whichever hasher thread
	 * hashes first: its global state then belongs to the main thread. */
	OPENSSL_init_crypto(OPENSSL_INIT_LOAD_CONFIG, NULL);
	if (run(&d) < 0) {
		free(d.cfg);
		return VD_EXIT_FAIL;
	}
	free(d.cfg);
	return VD_EXIT_OK;
}

#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <json-c/json.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "vd_http.h"
#include "vd_json.h"
#include "vd_log.h"

#define MHD_TIMER_MAX_MS 1000     /* re-check MHD at least this often */
#define MHD_TIMER_MIN_MS 1        /* a 0 ms timer re-armed from its own callback
                                   * would run again before any I/O */
#define SWEEP_MS 250              /* how often request deadlines are checked */

struct vd_http {
	uv_loop_t *loop;
	struct MHD_Daemon *mhd;
	uv_poll_t poll;
	uv_timer_t timer;
	const vd_config *cfg;
	vd_http_handler handler;
	void *arg;
	vd_http_done_fn done;
	void *done_arg;
	uint16_t port;
	unsigned max_connections;  /* as started: a reload does not change it */
	unsigned open_handles;
	char *tls_cert, *tls_key;
	int kick;                 /* a connection closed: run MHD again soon */
	uv_timer_t sweep;
	struct conn_track *conns;
};

/* Every connection, for the request deadline: libmicrohttpd's timeout
 * counts inactivity, so a client sending a byte a second would never hit
 * it. A request not received whole within connection_timeout has its
 * socket shut down, which MHD then sees and closes. */
typedef struct conn_track {
	struct conn_track *next, **prevp;
	int fd;
	uint64_t deadline_ms;
	int busy;                 /* received whole and being answered */
} conn_track;

static void drive(vd_http *h);

static void on_timer(uv_timer_t *t)
{
	drive(t->data);
}

/* Run MHD until it has nothing ready, then sleep until its next timeout. */
static void drive(vd_http *h)
{
	MHD_UNSIGNED_LONG_LONG to;
	uint64_t ms = MHD_TIMER_MAX_MS;

	if (h->mhd == NULL)
		return;
	h->kick = 0;
	MHD_run(h->mhd);
	if (MHD_get_timeout(h->mhd, &to) == MHD_YES && to < ms)
		ms = to;
	/* After a close MHD may take the listening socket back only on its
	 * next run (it drops it at the connection limit). */
	if (h->kick || ms < MHD_TIMER_MIN_MS)
		ms = MHD_TIMER_MIN_MS;
	uv_timer_start(&h->timer, on_timer, ms, 0);
}

static void on_poll(uv_poll_t *p, int status, int events)
{
	drive(p->data);
}

static uint64_t now_ns(void)
{
	return uv_hrtime();
}

const char *vd_req_header(vd_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *vd_req_query(vd_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

static struct MHD_Response *make_response(const char *content_type,
    const char *body, size_t len, const char *const *extra)
{
	struct MHD_Response *resp;

	resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	if (resp == NULL)
		return NULL;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	for (; extra != NULL && extra[0] != NULL; extra += 2)
		MHD_add_response_header(resp, extra[0], extra[1]);
	return resp;
}

void vd_http_respond(vd_req *r, unsigned status, const char *content_type,
    const char *body, size_t len, const char *const *extra)
{
	struct MHD_Response *resp = make_response(content_type, body, len, extra);

	r->status = status;
	if (r->suspended) {
		/* Queued on the next access-handler call, after the resume. */
		r->ready = resp;
		r->ready_status = status;
		r->suspended = 0;
		MHD_resume_connection(r->conn);
		uv_timer_start(&r->http->timer, on_timer, MHD_TIMER_MIN_MS, 0);
		return;
	}
	if (resp != NULL) {
		MHD_queue_response(r->conn, status, resp);
		MHD_destroy_response(resp);
	}
}

void vd_http_error(vd_req *r, unsigned status, const char *code,
    const char *detail, const char *const *extra)
{
	json_object *o = json_object_new_object(), *e = json_object_new_object();
	char clean[512];
	const char *s;

	snprintf(clean, sizeof(clean), "%s", detail);
	vd_utf8_sanitize(clean);
	json_object_object_add(e, "code", json_object_new_string(code));
	json_object_object_add(e, "detail", json_object_new_string(clean));
	json_object_object_add(o, "error", e);
	s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE);
	vd_http_respond(r, status, "application/json", s, strlen(s), extra);
	json_object_put(o);
}

void vd_http_suspend(vd_req *r)
{
	r->suspended = 1;
	MHD_suspend_connection(r->conn);
}

/* Read the body ourselves, refusing at the limit: a declared length over
 * the limit is refused before any of it is read. */
static int take_body(vd_req *r, const char *data, size_t *size)
{
	const char *cl;
	unsigned long long declared;
	char *end;

	if (!r->body_started) {
		r->body_started = 1;
		cl = vd_req_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl != NULL) {
			declared = strtoull(cl, &end, 10);
			if (*end == '\0' && declared > r->http->cfg->max_body_bytes)
				r->body_too_large = 1;
		}
	}
	if (*size == 0)
		return 0;
	if (!r->body_too_large && r->body.len + *size > r->http->cfg->max_body_bytes)
		r->body_too_large = 1;
	if (!r->body_too_large)
		vd_buf_put(&r->body, data, *size);
	*size = 0;
	return 1;
}

static enum MHD_Result add_header_size(void *cls, enum MHD_ValueKind kind,
    const char *key, const char *value)
{
	size_t *n = cls;

	*n += strlen(key) + (value ? strlen(value) : 0) + 4;
	return MHD_YES;
}

/* The request line and headers, counted here against the configured
 * limit so that the answer is our JSON error; libmicrohttpd's own memory
 * limit is a larger backstop (see start_mhd). */
static size_t header_bytes(struct MHD_Connection *conn, const char *url)
{
	size_t n = strlen(url) + 16;

	MHD_get_connection_values(conn, MHD_HEADER_KIND, add_header_size, &n);
	MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, add_header_size, &n);
	return n;
}

static conn_track *track_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
    const char *url, const char *method, const char *version,
    const char *upload_data, size_t *upload_size, void **con_cls)
{
	vd_http *h = cls;
	vd_req *r = *con_cls;
	char detail[128];
	conn_track *t;

	if (r == NULL) {
		if ((r = calloc(1, sizeof(*r))) == NULL)
			return MHD_NO;
		r->http = h;
		r->conn = conn;
		r->method = method;
		r->url = url;
		r->route = "other";
		r->t0_ns = now_ns();
		vd_buf_init(&r->body);
		*con_cls = r;
		if (header_bytes(conn, url) > h->cfg->max_request_header_bytes) {
			r->dispatched = 1;
			snprintf(detail, sizeof(detail), "the request line and headers exceed %u bytes",
			    h->cfg->max_request_header_bytes);
			vd_http_error(r, 431, "request_header_too_large", detail,
			    (const char *const[]){ "Connection", "close", NULL });
			return MHD_YES;
		}
		take_body(r, NULL, &(size_t){ 0 });
		if (!r->body_too_large)
			return MHD_YES;
	}
	if (r->ready != NULL) {
		enum MHD_Result rc = MHD_queue_response(conn, r->ready_status, r->ready);
		MHD_destroy_response(r->ready);
		r->ready = NULL;
		return rc;
	}
	if (r->dispatched)
		return MHD_YES;
	if (!r->body_too_large && take_body(r, upload_data, upload_size))
		return MHD_YES;
	if (r->body_too_large) {
		*upload_size = 0;
		r->dispatched = 1;
		snprintf(detail, sizeof(detail), "the request body is larger than %u bytes",
		    h->cfg->max_body_bytes);
		vd_http_error(r, 413, "payload_too_large", detail,
		    (const char *const[]){ "Connection", "close", NULL });
		return MHD_YES;
	}
	r->dispatched = 1;
	if ((t = track_of(conn)) != NULL)
		t->busy = 1;
	h->handler(r, h->arg);
	return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	vd_http *h = cls;
	vd_req *r = *con_cls;
	conn_track *t;

	t = track_of(conn);
	if (t != NULL) {
		t->busy = 0;
		t->deadline_ms = uv_now(h->loop) + (uint64_t)h->cfg->connection_timeout * 1000;
	}
	h->kick = 1;
	if (r == NULL)
		return;
	if (r->cancel != NULL)
		r->cancel(r);
	if (h->done != NULL)
		h->done(r, (double)(now_ns() - r->t0_ns) / 1e9, h->done_arg);
	if (r->ready)
		MHD_destroy_response(r->ready);
	vd_buf_free(&r->body);
	free(r);
	*con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
    enum MHD_ConnectionNotificationCode code)
{
	vd_http *h = cls;
	conn_track *t = *socket_context;
	const union MHD_ConnectionInfo *ci;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		if ((t = calloc(1, sizeof(*t))) == NULL)
			return;
		ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		t->fd = ci ? ci->connect_fd : -1;
		t->deadline_ms = uv_now(h->loop) + (uint64_t)h->cfg->connection_timeout * 1000;
		t->next = h->conns;
		if (h->conns)
			h->conns->prevp = &t->next;
		h->conns = t;
		t->prevp = &h->conns;
		*socket_context = t;
		return;
	}
	if (t == NULL)
		return;
	*t->prevp = t->next;
	if (t->next)
		t->next->prevp = t->prevp;
	free(t);
	*socket_context = NULL;
	h->kick = 1;
}

static void on_sweep(uv_timer_t *timer)
{
	vd_http *h = timer->data;
	uint64_t now = uv_now(h->loop);
	conn_track *t;
	int cut = 0;

	for (t = h->conns; t != NULL; t = t->next) {
		if (!t->busy && t->fd >= 0 && now > t->deadline_ms) {
			shutdown(t->fd, SHUT_RDWR);
			t->fd = -1;
			cut = 1;
		}
	}
	if (cut)
		uv_timer_start(&h->timer, on_timer, MHD_TIMER_MIN_MS, 0);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	size_t n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n > 0 && msg[n - 1] == '\n')
		msg[--n] = '\0';
	log_debug("http: %s", msg);
}

static int resolve(const vd_config *cfg, struct sockaddr_storage *ss, char *err,
    size_t errlen)
{
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (!cfg->listen_v6 && inet_pton(AF_INET, cfg->listen_host, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)cfg->listen_port);
		return 0;
	}
	if (inet_pton(AF_INET6, cfg->listen_host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)cfg->listen_port);
		return 0;
	}
	snprintf(err, errlen, "listen: \"%s\" is not a numeric IPv4 or IPv6 address",
	    cfg->listen_host);
	return -1;
}

static char *slurp(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	long n;

	if (f == NULL || fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) < 0 || n > (1 << 20) ||
	    fseek(f, 0, SEEK_SET) < 0 || (buf = calloc(1, (size_t)n + 1)) == NULL ||
	    fread(buf, 1, (size_t)n, f) != (size_t)n) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno ? errno : EIO));
		free(buf);
		buf = NULL;
	}
	if (f)
		fclose(f);
	return buf;
}

static void handle_closed(uv_handle_t *hd)
{
	vd_http *h = hd->data;

	if (--h->open_handles == 0) {
		free(h->tls_cert);
		free(h->tls_key);
		free(h);
	}
}

int vd_http_tls_check(const vd_config *cfg, char *err, size_t errlen)
{
	X509 *cert = NULL;
	EVP_PKEY *key = NULL;
	FILE *f;
	int rc = -1;

	if (cfg->tls_cert[0] == '\0')
		return 0;
	if ((f = fopen(cfg->tls_cert, "re")) == NULL) {
		snprintf(err, errlen, "cannot read tls_cert %s: %s", cfg->tls_cert, strerror(errno));
		return -1;
	}
	cert = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	if (cert == NULL) {
		snprintf(err, errlen, "tls_cert %s holds no PEM certificate", cfg->tls_cert);
		goto out;
	}
	if ((f = fopen(cfg->tls_key, "re")) == NULL) {
		snprintf(err, errlen, "cannot read tls_key %s: %s", cfg->tls_key, strerror(errno));
		goto out;
	}
	key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	if (key == NULL)
		snprintf(err, errlen, "tls_key %s holds no unencrypted PEM private key", cfg->tls_key);
	else if (X509_check_private_key(cert, key) != 1)
		snprintf(err, errlen, "tls_key %s does not belong to the certificate in %s",
		    cfg->tls_key, cfg->tls_cert);
	else
		rc = 0;
out:
	ERR_clear_error();
	X509_free(cert);
	EVP_PKEY_free(key);
	return rc;
}

static int load_tls(vd_http *h, const vd_config *cfg, char *err, size_t errlen)
{
	if (cfg->tls_cert[0] == '\0')
		return 0;
	if (vd_http_tls_check(cfg, err, errlen) < 0)
		return -1;
	if ((h->tls_cert = slurp(cfg->tls_cert, err, errlen)) == NULL ||
	    (h->tls_key = slurp(cfg->tls_key, err, errlen)) == NULL)
		return -1;
	return 0;
}

static struct MHD_Daemon *start_mhd(vd_http *h, const vd_config *cfg,
    struct sockaddr_storage *ss)
{
	unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
	    MHD_USE_TURBO;
	struct MHD_OptionItem tls[3] = { { MHD_OPTION_END, 0, NULL } };

	if (h->tls_cert != NULL) {
		flags |= MHD_USE_TLS;
		tls[0] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, h->tls_cert };
		tls[1] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, h->tls_key };
		tls[2] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
	}
	if (ss->ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	return MHD_start_daemon(flags, 0, NULL, NULL, on_request, h,
	    MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)ss,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->max_connections_per_ip,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->connection_timeout,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)cfg->max_request_header_bytes * 4 + 65536,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
	    MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
	    MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
	    MHD_OPTION_ARRAY, tls,
	    MHD_OPTION_END);
}

int vd_http_start(vd_http **out, uv_loop_t *loop, const vd_config *cfg,
    vd_http_handler handler, void *arg, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	const union MHD_DaemonInfo *info;
	vd_http *h;

	if (resolve(cfg, &ss, err, errlen) < 0)
		return -EINVAL;
	if ((h = calloc(1, sizeof(*h))) == NULL)
		return -ENOMEM;
	h->loop = loop;
	h->cfg = cfg;
	h->handler = handler;
	h->arg = arg;
	if (load_tls(h, cfg, err, errlen) < 0)
		goto fail;
	h->max_connections = (unsigned)cfg->max_connections;
	h->mhd = start_mhd(h, cfg, &ss);
	if (h->mhd == NULL) {
		snprintf(err, errlen, "cannot listen on %s (address in use, or not permitted)",
		    cfg->listen);
		goto fail;
	}
	info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_BIND_PORT);
	h->port = info ? info->port : (uint16_t)cfg->listen_port;
	info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	if (info == NULL || uv_poll_init(loop, &h->poll, info->epoll_fd) < 0) {
		snprintf(err, errlen, "cannot watch the HTTP server's epoll descriptor");
		MHD_stop_daemon(h->mhd);
		goto fail;
	}
	uv_timer_init(loop, &h->timer);
	uv_timer_init(loop, &h->sweep);
	h->poll.data = h->timer.data = h->sweep.data = h;
	h->open_handles = 3;
	uv_poll_start(&h->poll, UV_READABLE, on_poll);
	uv_timer_start(&h->sweep, on_sweep, SWEEP_MS, SWEEP_MS);
	drive(h);
	*out = h;
	return 0;
fail:
	free(h->tls_cert);
	free(h->tls_key);
	free(h);
	return -EIO;
}

void vd_http_set_config(vd_http *h, const vd_config *cfg)
{
	h->cfg = cfg;    /* body and wait limits; socket limits need a restart */
}

uint16_t vd_http_port(vd_http *h)
{
	return h->port;
}

unsigned vd_http_connections(vd_http *h)
{
	const union MHD_DaemonInfo *info;

	if (h == NULL || h->mhd == NULL)
		return 0;
	info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
	return info ? info->num_connections : 0;
}

unsigned vd_http_connection_limit(vd_http *h)
{
	return h != NULL ? h->max_connections : 0;
}

void vd_http_on_done(vd_http *h, vd_http_done_fn fn, void *arg)
{
	h->done = fn;
	h->done_arg = arg;
}

void vd_http_stop(vd_http *h)
{
	if (h->mhd == NULL)
		return;
	/* Completion callbacks run inside MHD_stop_daemon: cancel hooks fire. */
	MHD_stop_daemon(h->mhd);
	h->mhd = NULL;
	uv_close((uv_handle_t *)&h->poll, handle_closed);
	uv_close((uv_handle_t *)&h->timer, handle_closed);
	uv_close((uv_handle_t *)&h->sweep, handle_closed);
}

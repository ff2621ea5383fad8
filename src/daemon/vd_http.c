#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "vd_http.h"
#include "vd_json.h"
#include "vd_limits.h"
#include "vd_log.h"
#include "vd_reqparse.h"
#include "vd_utf8.h"

#define MHD_TIMER_MAX_MS 1000     /* re-check MHD at least this often */
#define MHD_TIMER_MIN_MS 1        /* a 0 ms timer re-armed from its own callback
                                   * would run again before any I/O */
#define SWEEP_MS 250              /* how often request deadlines are checked */

/* Retry-After of the 503 on a reserved connection. */
#define VD_HTTP_RETRY_AFTER "5"
/* The buffer libmicrohttpd allocates for a streamed answer's body. */
#define VD_HTTP_STREAM_BLOCK 4096

/* The only requests a reserved connection serves: liveness, readiness and
 * metrics, so that a local probe still gets through when clients hold
 * every other slot. */
static const char *const VD_HTTP_PROBE_PATHS[] = { "/healthz", "/readyz", "/metrics" };

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
	vd_http_early_fn early;
	void *early_arg;
	uint16_t port;
	unsigned max_connections;  /* as started: a reload does not change it */
	unsigned reserved;         /* reserved_connections, as started */
	unsigned nconns;           /* open now, as MHD notified them */
	uint64_t full_logged_ms;
	unsigned open_handles;
	char *tls_cert, *tls_key;
	int kick;                 /* a connection closed: run MHD again soon */
	uv_timer_t sweep;
	struct conn_track *conns;
	vd_req *streams;          /* streamed answers under way */
	unsigned n_streams;
	int stopping;             /* vd_http_stop: streams are ending */
	uv_timer_t drain;
};

/* Every connection, for the request deadlines: libmicrohttpd's timeout
 * counts inactivity, so a client sending a byte a second would never hit
 * it. A request not received whole within connection_timeout, or whose
 * line and headers are not in within request_header_timeout, has its
 * socket shut down, which MHD then sees and closes. */
typedef struct conn_track {
	struct conn_track *next, **prevp;
	int fd;
	uint64_t deadline_ms;
	uint64_t head_deadline_ms;  /* 0: no request line and headers awaited */
	int busy;                 /* received whole and being answered */
	int reserved;             /* took a reserved slot: probes only */
	int target_nul;           /* the request target decodes to a NUL byte */
	int head_pending;         /* a request line is in; the access handler has not seen it */
	const char *uri;          /* as the request line gave it, before decoding */
	size_t uri_len;
	struct MHD_Connection *conn;
} conn_track;

static void drive(vd_http *h);
static conn_track *track_of(struct MHD_Connection *conn);

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
    const char *body, size_t len, const char *const *extra, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *resp;

	resp = MHD_create_response_from_buffer(len, (void *)body, mode);
	if (resp == NULL)
		return NULL;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	for (; extra != NULL && extra[0] != NULL; extra += 2)
		MHD_add_response_header(resp, extra[0], extra[1]);
	return resp;
}

static void respond(vd_req *r, unsigned status, struct MHD_Response *resp);

void vd_http_respond(vd_req *r, unsigned status, const char *content_type,
    const char *body, size_t len, const char *const *extra)
{
	respond(r, status, make_response(content_type, body, len, extra, MHD_RESPMEM_MUST_COPY));
}

void vd_http_respond_owned(vd_req *r, unsigned status, const char *content_type,
    char *body, size_t len, const char *const *extra)
{
	struct MHD_Response *resp = make_response(content_type, body, len, extra,
	    MHD_RESPMEM_MUST_FREE);

	if (resp == NULL)
		free(body);
	respond(r, status, resp);
}

static void respond(vd_req *r, unsigned status, struct MHD_Response *resp)
{

	r->status = status;
	if (r->suspended) {
		/* Queued on the next access-handler call, after the resume. */
		r->ready = resp;
		r->ready_status = status;
		r->suspended = 0;
		MHD_resume_connection(r->conn);
		/* Called from inside MHD_run, drive() would re-arm the timer
		 * by MHD's own timeout, which does not count resumes. */
		r->http->kick = 1;
		uv_timer_start(&r->http->timer, on_timer, MHD_TIMER_MIN_MS, 0);
		return;
	}
	if (resp != NULL) {
		MHD_queue_response(r->conn, status, resp);
		MHD_destroy_response(resp);
	}
}

/* {"error": {"code": code, "detail": detail}}; put the object when done. */
/* The error object written into out without allocating: an answer that
 * reports running out of memory must not need any. As json-c writes it
 * (plain, '/' unescaped); code is one of ours, detail is cut to a
 * sentence and made valid UTF-8. */
static size_t put_escaped(char *out, size_t at, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p;

	for (p = (const unsigned char *)s; *p; p++) {
		const char *esc = *p == '"' ? "\\\"" : *p == '\\' ? "\\\\" : *p == '\n' ? "\\n" :
		    *p == '\r' ? "\\r" : *p == '\t' ? "\\t" : *p == '\b' ? "\\b" : *p == '\f' ? "\\f" : NULL;
		if (esc != NULL) {
			memcpy(out + at, esc, 2);
			at += 2;
		} else if (*p < 0x20) {
			memcpy(out + at, "\\u00", 4);
			out[at + 4] = hex[*p >> 4];
			out[at + 5] = hex[*p & 15];
			at += 6;
		} else {
			out[at++] = (char)*p;
		}
	}
	return at;
}

static const char *error_text(const char *code, const char *detail,
    char out[VD_HTTP_ERROR_MAX])
{
	char clean[VD_HTTP_DETAIL_MAX], name[64];
	size_t at;

	snprintf(clean, sizeof(clean), "%s", detail);
	vd_utf8_sanitize(clean);
	snprintf(name, sizeof(name), "%s", code);
	memcpy(out, "{\"error\":{\"code\":\"", 18);
	at = put_escaped(out, 18, name);
	memcpy(out + at, "\",\"detail\":\"", 12);
	at = put_escaped(out, at + 12, clean);
	memcpy(out + at, "\"}}", 4);
	return out;
}

void vd_http_error(vd_req *r, unsigned status, const char *code,
    const char *detail, const char *const *extra)
{
	char buf[VD_HTTP_ERROR_MAX];
	const char *s = error_text(code, detail, buf);

	vd_http_respond(r, status, "application/json", s, strlen(s), extra);
}

void vd_http_suspend(vd_req *r)
{
	r->suspended = 1;
	MHD_suspend_connection(r->conn);
}

/* ---- streamed answers ------------------------------------------------ */

/* libmicrohttpd asks a stream for more once the last chunk is sent. With
 * nothing to send, the connection is suspended (from here, where the
 * library allows it): it leaves the epoll set until woken. */
static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	vd_req *r = cls;
	ssize_t n;

	(void)pos;
	if (r->cut)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	n = r->fill(r->fill_arg, buf, max, r->http->stopping);
	if (n < 0)      /* cut mid-way: not the clean end of a stream */
		return MHD_CONTENT_READER_END_WITH_ERROR;
	if (n == 0 && r->http->stopping)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (n == 0) {
		r->paused = 1;
		MHD_suspend_connection(r->conn);
	}
	return n;
}

int vd_http_stream(vd_req *r, const char *content_type, vd_http_fill_fn fill, void *arg)
{
	vd_http *h = r->http;
	struct MHD_Response *resp;

	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, VD_HTTP_STREAM_BLOCK,
	    stream_reader, r, NULL);
	if (resp == NULL)
		return -ENOMEM;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	/* A buffering proxy (nginx) would hold events back. */
	MHD_add_response_header(resp, "X-Accel-Buffering", "no");
	MHD_add_response_header(resp, "Connection", "close");
	r->fill = fill;
	r->fill_arg = arg;
	r->status = 200;
	r->answered_ns = now_ns();
	if (MHD_queue_response(r->conn, 200, resp) != MHD_YES) {
		MHD_destroy_response(resp);
		return -EIO;
	}
	MHD_destroy_response(resp);
	r->snext = h->streams;
	if (h->streams)
		h->streams->sprevp = &r->snext;
	h->streams = r;
	r->sprevp = &h->streams;
	h->n_streams++;
	return 0;
}

/* One resume, and MHD is run soon: the only cost of waking a stream. */
void vd_http_stream_wake(vd_req *r)
{
	if (!r->paused)
		return;
	r->paused = 0;
	MHD_resume_connection(r->conn);
	r->http->kick = 1;          /* as in respond() */
	uv_timer_start(&r->http->timer, on_timer, MHD_TIMER_MIN_MS, 0);
}

void vd_http_stream_cut(vd_req *r)
{
	conn_track *t = track_of(r->conn);

	r->cut = 1;
	/* A connection stuck on a full socket is never asked for more:
	 * shutting the socket down makes libmicrohttpd close it. */
	if (t != NULL && t->fd >= 0) {
		shutdown(t->fd, SHUT_RDWR);
		t->fd = -1;
	}
	if (r->paused)
		vd_http_stream_wake(r);
	else
		uv_timer_start(&r->http->timer, on_timer, MHD_TIMER_MIN_MS, 0);
}

int vd_http_stream_gone(vd_req *r)
{
	conn_track *t = track_of(r->conn);
	char c;
	ssize_t n;

	if (t == NULL || t->fd < 0)
		return 0;
	n = recv(t->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void stream_unlink(vd_http *h, vd_req *r)
{
	*r->sprevp = r->snext;
	if (r->snext)
		r->snext->sprevp = r->sprevp;
	h->n_streams--;
}

/* Read the body ourselves, refusing at the limit: a declared length over
 * the limit is refused before any of it is read. */
static void take_body(vd_req *r, const char *data, size_t *size)
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
		return;
	if (!r->body_too_large && r->body.len + *size > r->http->cfg->max_body_bytes)
		r->body_too_large = 1;
	if (!r->body_too_large)
		vd_buf_put(&r->body, data, *size);
	*size = 0;
}

static conn_track *track_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

/* ---- checks on the request line and headers ------------------------- */

typedef struct head_scan {
	size_t bytes;             /* text, as counted against max_request_header_bytes */
	unsigned fields;
	const char *bad_field;    /* a field holding a control character */
	unsigned n_length;        /* Content-Length fields */
	unsigned n_coding;        /* Transfer-Encoding fields */
	const char *coding;       /* the first one's value */
	/* Where libmicrohttpd 0.9.75 left the header block (see scan_header). */
	const char *lo, *hi, *prev_end;
	int hidden;
	vd_query_arg args[VD_REQ_QUERY_MAX_ARGS + 1];
	size_t nargs;
} head_scan;

/* What lies between the end of one line's last field and the start of the
 * next line, in libmicrohttpd's read buffer: its CR LF (or bare LF),
 * turned into NULs, and nothing else, unless a NUL byte cut the line short.
 * max: what the terminators alone may take. */
static int gap_hides(const char *a, const char *b, size_t max)
{
	if ((size_t)(b - a) > max)
		return 1;
	for (; a < b; a++)
		if (*a != '\0')
			return 1;
	return 0;
}

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key,
    size_t key_size, const char *value, size_t value_size)
{
	head_scan *hs = cls;
	const char *end;

	hs->bytes += key_size + value_size + 4;
	hs->fields++;
	if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
		hs->n_length++;
	if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0 && hs->n_coding++ == 0)
		hs->coding = value != NULL ? value : "";
	if (hs->bad_field == NULL && (!vd_http_field_ok(key, key_size) ||
	    (value != NULL && !vd_http_field_ok(value, value_size))))
		hs->bad_field = key;
	/* libmicrohttpd 0.9.75 cuts a header line at a NUL byte: the value
	 * ends short of the line, and what follows the NUL is never seen.
	 * Its lines sit one after the other in the read buffer, so more than
	 * a line end between one value and the next name means a NUL. Only
	 * pointers inside the block are judged. A folded field (obsolete
	 * since RFC 7230) shows the same way: libmicrohttpd 0.9.75 drops its
	 * second line. A lone NUL just before a bare LF looks like a CR LF;
	 * it hides nothing. */
	if (hs->lo != NULL && key >= hs->lo && key < hs->hi && hs->prev_end != NULL &&
	    hs->prev_end < key && gap_hides(hs->prev_end, key, 2))
		hs->hidden = 1;
	end = value != NULL ? value + value_size : key + key_size;
	hs->prev_end = end >= hs->lo && end <= hs->hi ? end : NULL;
	return MHD_YES;
}

static enum MHD_Result scan_arg(void *cls, enum MHD_ValueKind kind, const char *key,
    size_t key_size, const char *value, size_t value_size)
{
	head_scan *hs = cls;

	hs->bytes += key_size + (value ? value_size : 0) + 4;
	if (hs->nargs < VD_ARRAY_LEN(hs->args))
		hs->args[hs->nargs] = (vd_query_arg){ key, key_size, value, value_size };
	hs->nargs++;
	return MHD_YES;
}

static int is_probe(const char *method, const char *url)
{
	size_t i;

	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return 0;
	for (i = 0; i < VD_ARRAY_LEN(VD_HTTP_PROBE_PATHS); i++)
		if (strcmp(url, VD_HTTP_PROBE_PATHS[i]) == 0)
			return 1;
	return 0;
}

/* The framing of the body, which libmicrohttpd 0.9.75 does not check: it
 * reads a body under any Transfer-Encoding but chunked until the client
 * closes (the request would hang until a timeout), and ignores a
 * Content-Length beside a Transfer-Encoding, or all but the first of
 * several: a request a proxy may frame otherwise, to smuggle another
 * past it. 1 when answered. */
static int refuse_framing(vd_req *r, const head_scan *hs, const char *const *closing)
{
	char detail[160];

	if (hs->n_coding > 1) {
		vd_http_error(r, 501, "not_implemented", "more than one Transfer-Encoding is not "
		    "supported: send the body with a Content-Length, or chunked", closing);
		return 1;
	}
	if (hs->n_coding == 1 && strcasecmp(hs->coding, "chunked") != 0) {
		snprintf(detail, sizeof(detail), "the transfer coding \"%.64s\" is not supported: "
		    "send the body with a Content-Length, or chunked", hs->coding);
		vd_http_error(r, 501, "not_implemented", detail, closing);
		return 1;
	}
	if (hs->n_coding == 1 && hs->n_length > 0) {
		vd_http_error(r, 400, "bad_request", "the request has both Transfer-Encoding and "
		    "Content-Length", closing);
		return 1;
	}
	if (hs->n_length > 1) {
		vd_http_error(r, 400, "bad_request", "the request has more than one Content-Length",
		    closing);
		return 1;
	}
	return 0;
}

/* Refuse, on its line and headers alone, a request the application must
 * not see; 1 when answered. */
static int refuse_on_head(vd_http *h, vd_req *r, conn_track *t, const char *method,
    const char *version)
{
	static const char *const closing[] = { "Connection", "close", NULL };
	const union MHD_ConnectionInfo *ci;
	head_scan hs;
	char detail[256];
	const char *p;

	memset(&hs, 0, sizeof(hs));
	hs.bytes = strlen(r->url) + 16;
	ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
	if (ci != NULL && version != NULL && version[0] != '\0') {
		hs.lo = method;
		hs.hi = method + ci->header_size;
		hs.prev_end = version + strlen(version);
		if (hs.prev_end < hs.lo || hs.prev_end > hs.hi)
			hs.lo = NULL;
	}
	MHD_get_connection_values_n(r->conn, MHD_HEADER_KIND, scan_header, &hs);
	/* The last line's end and the empty line. */
	if (hs.lo != NULL && hs.prev_end != NULL && gap_hides(hs.prev_end, hs.hi, 4))
		hs.hidden = 1;
	MHD_get_connection_values_n(r->conn, MHD_GET_ARGUMENT_KIND, scan_arg, &hs);

	if (hs.bytes > h->cfg->max_request_header_bytes) {
		snprintf(detail, sizeof(detail), "the request line and headers exceed %u bytes",
		    h->cfg->max_request_header_bytes);
		vd_http_error(r, 431, "request_header_too_large", detail, closing);
		return 1;
	}
	if (hs.fields > VD_HTTP_MAX_FIELDS) {
		snprintf(detail, sizeof(detail), "the request has more than %d header fields",
		    VD_HTTP_MAX_FIELDS);
		vd_http_error(r, 431, "request_header_too_large", detail, closing);
		return 1;
	}
	/* The request line, as the URI log callback saw it, must run up to
	 * the space before the version: shorter, a NUL cut it. */
	if (t != NULL && t->uri == r->url && version != NULL && version > r->url &&
	    (size_t)(version - 1 - r->url) != t->uri_len)
		hs.hidden = 1;
	if (hs.hidden) {
		vd_http_error(r, 400, "bad_request", "the request line or a header line holds a NUL byte, "
		    "or a header field is folded onto a second line", closing);
		return 1;
	}
	if (hs.bad_field != NULL) {
		snprintf(detail, sizeof(detail), "the header field \"%.64s\" holds a control character",
		    vd_http_field_ok(hs.bad_field, strlen(hs.bad_field)) ? hs.bad_field : "?");
		vd_http_error(r, 400, "bad_request", detail, closing);
		return 1;
	}
	if (refuse_framing(r, &hs, closing))
		return 1;
	if (t != NULL && t->target_nul) {
		vd_http_error(r, 400, "bad_request", "the request target holds a NUL byte (%00)", closing);
		return 1;
	}
	for (p = r->url; *p != '\0'; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			vd_http_error(r, 400, "bad_request", "the path holds a control character", closing);
			return 1;
		}
	}
	if (vd_query_check(hs.args, hs.nargs, detail, sizeof(detail)) < 0) {
		vd_http_error(r, 400, "bad_request", detail, NULL);
		return 1;
	}
	if (t != NULL && t->reserved && !is_probe(method, r->url)) {
		vd_http_error(r, 503, "overloaded",
		    "every connection is in use; this one is kept for health checks and metrics",
		    (const char *const[]){ "Retry-After", VD_HTTP_RETRY_AFTER, "Connection", "close", NULL });
		return 1;
	}
	return 0;
}

/* ---- a body over the limit ------------------------------------------- */

static void http_date(char *out, size_t n)
{
	static const char days[7][4] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
	static const char months[12][4] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul",
		"Aug", "Sep", "Oct", "Nov", "Dec" };
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	snprintf(out, n, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday], tm.tm_mday,
	    months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/* The JSON error written to the socket whole, in one call, and the write
 * side shut after it, so that nothing libmicrohttpd queues can follow.
 * Only where the connection's earlier answers are all sent (MHD reads a
 * request only then). 0 when written whole, else -EAGAIN (the socket took
 * part of it) or sendmsg's -errno. */
static int write_error(int fd, unsigned status, const char *code, const char *detail)
{
	char head[512], date[40];
	char buf[VD_HTTP_ERROR_MAX];
	const char *body;
	struct iovec iov[2];
	struct msghdr msg;
	ssize_t want, sent;
	int rc;

	body = error_text(code, detail, buf);
	http_date(date, sizeof(date));
	snprintf(head, sizeof(head), "HTTP/1.1 %u %s\r\nDate: %s\r\nConnection: close\r\n"
	    "Content-Type: application/json\r\nCache-Control: no-store\r\n"
	    "X-Content-Type-Options: nosniff\r\nContent-Length: %zu\r\n\r\n",
	    status, MHD_get_reason_phrase_for(status), date, strlen(body));
	iov[0] = (struct iovec){ head, strlen(head) };
	iov[1] = (struct iovec){ (void *)body, strlen(body) };
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = iov;
	msg.msg_iovlen = 2;
	want = (ssize_t)(iov[0].iov_len + iov[1].iov_len);
	sent = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	rc = sent == want ? 0 : sent < 0 ? -errno : -EAGAIN;
	shutdown(fd, SHUT_WR);
	return rc;
}

/* libmicrohttpd 0.9.75 queues no response while a body is arriving, so an
 * answer at that point is written to the socket here. Plain HTTP only
 * (-ENOTSUP under TLS); 0 when written, else a negative errno. */
static int send_error_now(vd_http *h, vd_req *r, unsigned status, const char *code,
    const char *detail)
{
	const union MHD_ConnectionInfo *ci;

	if (h->tls_cert != NULL)
		return -ENOTSUP;
	if ((ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD)) == NULL)
		return -EBADF;
	r->status = status;
	return write_error(ci->connect_fd, status, code, detail);
}

static void linger_deadline(vd_http *h, struct MHD_Connection *conn)
{
	conn_track *t = track_of(conn);
	uint64_t until = uv_now(h->loop) + VD_HTTP_LINGER_MS;

	if (t != NULL && t->deadline_ms > until)
		t->deadline_ms = until;
}

static void too_large_detail(vd_http *h, char *out, size_t n)
{
	snprintf(out, n, "the request body is larger than %u bytes", h->cfg->max_body_bytes);
}

static void answer_too_large(vd_http *h, vd_req *r)
{
	char detail[128];

	too_large_detail(h, detail, sizeof(detail));
	vd_http_error(r, 413, "payload_too_large", detail,
	    (const char *const[]){ "Connection", "close", NULL });
}

/* The body went over max_body_bytes. Before its first byte (a declared
 * length) or after its last, the answer is queued as any other; while it
 * arrives, it is sent at once (plain HTTP) and the rest is dropped for a
 * short while, then the connection is closed. Over HTTPS the rest is
 * dropped and the answer queued when the body ends. */
static enum MHD_Result refuse_body(vd_http *h, vd_req *r, int arriving)
{
	r->dispatched = 1;
	if (!arriving) {
		answer_too_large(h, r);
		return MHD_YES;
	}
	r->discarding = 1;
	linger_deadline(h, r->conn);
	if (h->tls_cert == NULL) {
		char detail[128];

		too_large_detail(h, detail, sizeof(detail));
		if (send_error_now(h, r, 413, "payload_too_large", detail) < 0)
			return MHD_NO;
	}
	return MHD_YES;
}

static enum MHD_Result discard_body(vd_http *h, vd_req *r, size_t *upload_size)
{
	if (*upload_size == 0) {          /* the body ended */
		if (r->status != 0)
			return MHD_NO;    /* answered on the socket: close */
		answer_too_large(h, r);
		return MHD_YES;
	}
	r->discarded += *upload_size;
	*upload_size = 0;
	return r->discarded > VD_HTTP_DISCARD_MAX ? MHD_NO : MHD_YES;
}

/* ---- libmicrohttpd's callbacks --------------------------------------- */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
    const char *url, const char *method, const char *version,
    const char *upload_data, size_t *upload_size, void **con_cls)
{
	vd_http *h = cls;
	vd_req *r = *con_cls;
	conn_track *t;

	/* Stopping: the store may be gone; only answers already made go out. */
	if (h->stopping && (r == NULL || r->ready == NULL))
		return MHD_NO;
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
		t = track_of(conn);
		if (t != NULL)
			t->head_deadline_ms = t->head_pending = 0;
		if (refuse_on_head(h, r, t, method, version) ||
		    (h->early != NULL && (h->early(r, h->early_arg) != VD_HTTP_PROCEED ||
		    r->status != 0))) {
			r->dispatched = 1;
			return MHD_YES;
		}
		take_body(r, NULL, &(size_t){ 0 });
		return r->body_too_large ? refuse_body(h, r, 0) : MHD_YES;
	}
	if (r->ready != NULL) {
		enum MHD_Result rc = MHD_queue_response(conn, r->ready_status, r->ready);
		MHD_destroy_response(r->ready);
		r->ready = NULL;
		return rc;
	}
	if (r->discarding)
		return discard_body(h, r, upload_size);
	if (r->dispatched)
		return MHD_YES;
	if (*upload_size != 0) {
		take_body(r, upload_data, upload_size);
		return r->body_too_large ? refuse_body(h, r, 1) : MHD_YES;
	}
	r->dispatched = 1;
	if ((t = track_of(conn)) != NULL)
		t->busy = 1;
	h->handler(r, h->arg);
	return MHD_YES;
}

static void on_drain(uv_timer_t *t);

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	vd_http *h = cls;
	vd_req *r = *con_cls;
	conn_track *t;

	t = track_of(conn);
	if (t != NULL) {
		t->busy = 0;
		t->head_deadline_ms = 0;  /* set again by the next request line */
		t->head_pending = 0;
		t->deadline_ms = uv_now(h->loop) + (uint64_t)h->cfg->connection_timeout * 1000;
	}
	h->kick = 1;
	if (r == NULL)
		return;
	if (r->cancel != NULL)
		r->cancel(r);
	if (r->fill != NULL) {
		stream_unlink(h, r);
		if (h->stopping && h->n_streams == 0)
			uv_timer_start(&h->drain, on_drain, 0, 0);
	}
	/* A stream's time is the time to its first byte: its length is the
	 * client's choice, and would swamp the request duration histogram. */
	if (h->done != NULL)
		h->done(r, (double)((r->fill ? r->answered_ns : now_ns()) - r->t0_ns) / 1e9,
		    h->done_arg);
	if (r->ready)
		MHD_destroy_response(r->ready);
	vd_buf_free(&r->body);
	free(r);
	*con_cls = NULL;
}

static uint64_t head_deadline(vd_http *h)
{
	return uv_now(h->loop) + (uint64_t)h->cfg->request_header_timeout * 1000;
}

/* The request line is in: its headers are due within request_header_timeout
 * (from the connection's start for its first request). The line is noted
 * before libmicrohttpd decodes it in place, to find a NUL byte in it. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	vd_http *h = cls;
	conn_track *t = track_of(conn);

	if (t != NULL) {
		if (t->head_deadline_ms == 0)
			t->head_deadline_ms = head_deadline(h);
		t->target_nul = 0;
		t->head_pending = 1;
		t->uri = uri;
		t->uri_len = uri != NULL ? strlen(uri) : 0;
	}
	return NULL;
}

/* libmicrohttpd's own %-decoding of the path and of each query name and
 * value, noting a %00: the decoded string ends there, and what follows
 * would go unseen. */
static size_t on_unescape(void *cls, struct MHD_Connection *conn, char *s)
{
	size_t n = MHD_http_unescape(s);
	conn_track *t;

	if (memchr(s, '\0', n) != NULL && (t = track_of(conn)) != NULL)
		t->target_nul = 1;
	return n;
}

/* 127.0.0.1 or ::1 (or ::ffff:127.0.0.1): a probe on this host. */
static int is_local_probe(const struct sockaddr *sa, socklen_t len)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	struct sockaddr_in in;
	struct sockaddr_in6 in6;

	/* Copied out: the library's address need not be aligned for them. */
	if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(in)) {
		memcpy(&in, sa, sizeof(in));
		return ntohl(in.sin_addr.s_addr) == INADDR_LOOPBACK;
	}
	if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(in6)) {
		memcpy(&in6, sa, sizeof(in6));
		return IN6_IS_ADDR_LOOPBACK(&in6.sin6_addr) ||
		    (memcmp(in6.sin6_addr.s6_addr, mapped, sizeof(mapped)) == 0 &&
		    in6.sin6_addr.s6_addr[12] == 127 && in6.sin6_addr.s6_addr[13] == 0 &&
		    in6.sin6_addr.s6_addr[14] == 0 && in6.sin6_addr.s6_addr[15] == 1);
	}
	return 0;
}

/* libmicrohttpd takes max_connections + reserved_connections; past
 * max_connections only a local probe is let in, and the others are
 * closed at once rather than left to wait in the backlog ahead of it. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
	vd_http *h = cls;
	uint64_t now;

	if (h->nconns < h->max_connections || (h->reserved > 0 && is_local_probe(addr, addrlen)))
		return MHD_YES;
	now = uv_now(h->loop);
	if (h->full_logged_ms == 0 || now - h->full_logged_ms >= VD_HTTP_FULL_LOG_MS) {
		h->full_logged_ms = now;
		log_warn("http: all %u connections are in use; refusing new ones%s", h->max_connections,
		    h->reserved ? " (the reserved ones wait for health checks from 127.0.0.1 and ::1)" : "");
	}
	return MHD_NO;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
    enum MHD_ConnectionNotificationCode code)
{
	vd_http *h = cls;
	conn_track *t = *socket_context;
	const union MHD_ConnectionInfo *ci;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		h->nconns++;
		if ((t = calloc(1, sizeof(*t))) == NULL)
			return;
		ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		t->fd = ci ? ci->connect_fd : -1;
		t->conn = conn;
		t->deadline_ms = uv_now(h->loop) + (uint64_t)h->cfg->connection_timeout * 1000;
		t->head_deadline_ms = head_deadline(h);
		t->reserved = h->nconns > h->max_connections;
		t->next = h->conns;
		if (h->conns)
			h->conns->prevp = &t->next;
		h->conns = t;
		t->prevp = &h->conns;
		*socket_context = t;
		return;
	}
	if (h->nconns > 0)
		h->nconns--;
	h->kick = 1;
	if (t == NULL)
		return;
	*t->prevp = t->next;
	if (t->next)
		t->next->prevp = t->prevp;
	free(t);
	*socket_context = NULL;
}

static void on_sweep(uv_timer_t *timer)
{
	vd_http *h = timer->data;
	uint64_t now = uv_now(h->loop);
	conn_track *t;
	int cut = 0;

	for (t = h->conns; t != NULL; t = t->next) {
		if (t->fd < 0)
			continue;
		if ((!t->busy && now > t->deadline_ms) ||
		    (t->head_deadline_ms != 0 && now > t->head_deadline_ms)) {
			shutdown(t->fd, SHUT_RDWR);
			t->fd = -1;
			cut = 1;
		}
	}
	if (cut)
		uv_timer_start(&h->timer, on_timer, MHD_TIMER_MIN_MS, 0);
}

/* A Content-Length libmicrohttpd 0.9.75 refuses: not a number, or over
 * 2^64 - 1; 0 for none or a good one. */
static int bad_length(const char *cl)
{
	uint64_t v = 0;
	const char *p;

	if (cl == NULL)
		return 0;
	if (*cl == '\0')
		return 400;
	for (p = cl; *p != '\0'; p++) {
		if (*p < '0' || *p > '9')
			return 400;
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return 413;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	return 0;
}

/* libmicrohttpd 0.9.75 answers a Content-Length it cannot read itself,
 * before any callback of ours, and wrongly: the status line and headers
 * twice, then an HTML page. It logs first, while that connection has its
 * headers and no answer yet, and is the only one so: the next step would
 * call the access handler. So it is found from here and given the JSON
 * error on its socket, whose write side is then shut: libmicrohttpd's own
 * answer fails to go out, and it closes the connection. Over TLS nothing
 * can be written beside libmicrohttpd: the connection is closed. */
static void answer_bad_length(vd_http *h)
{
	conn_track *t;
	const char *cl;
	char detail[160];
	int status;

	for (t = h->conns; t != NULL; t = t->next) {
		if (!t->head_pending || t->fd < 0 ||
		    MHD_get_connection_info(t->conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE) == NULL ||
		    MHD_get_connection_info(t->conn, MHD_CONNECTION_INFO_HTTP_STATUS) != NULL ||
		    MHD_lookup_connection_value(t->conn, MHD_HEADER_KIND,
		    MHD_HTTP_HEADER_TRANSFER_ENCODING) != NULL)
			continue;
		cl = MHD_lookup_connection_value(t->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if ((status = bad_length(cl)) == 0)
			continue;
		t->head_pending = 0;
		if (h->tls_cert != NULL) {
			shutdown(t->fd, SHUT_RDWR);
			t->fd = -1;
		} else if (status == 413) {
			too_large_detail(h, detail, sizeof(detail));
			write_error(t->fd, 413, "payload_too_large", detail);
		} else {
			snprintf(detail, sizeof(detail), "the Content-Length \"%.32s\" is not a number", cl);
			write_error(t->fd, 400, "bad_request", detail);
		}
		return;
	}
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
	answer_bad_length(cls);
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
	return -EINVAL;
}

/* A PEM file, as a string into *out. 0, or a negative errno with a
 * sentence. */
static int slurp(const char *path, char **out, char *err, size_t errlen)
{
	vd_buf b;
	int rc;

	*out = NULL;
	vd_buf_init(&b);
	rc = vd_read_file(path, VD_TLS_FILE_MAX, &b);
	if (rc == 0 && vd_buf_putc(&b, '\0') < 0)
		rc = -ENOMEM;
	if (rc < 0) {
		snprintf(err, errlen, "cannot read %s: %s", path, rc == -EINVAL ?
		    "not a regular file" : strerror(-rc));
		vd_buf_free(&b);
		return rc;
	}
	*out = (char *)b.p;
	return 0;
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
	int rc = -EINVAL;

	if (cfg->tls_cert[0] == '\0')
		return 0;
	if ((f = fopen(cfg->tls_cert, "re")) == NULL) {
		rc = -errno;
		snprintf(err, errlen, "cannot read tls_cert %s: %s", cfg->tls_cert, strerror(-rc));
		return rc;
	}
	cert = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	if (cert == NULL) {
		snprintf(err, errlen, "tls_cert %s holds no PEM certificate", cfg->tls_cert);
		goto out;
	}
	if ((f = fopen(cfg->tls_key, "re")) == NULL) {
		rc = -errno;
		snprintf(err, errlen, "cannot read tls_key %s: %s", cfg->tls_key, strerror(-rc));
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
	int rc;

	if (cfg->tls_cert[0] == '\0')
		return 0;
	if ((rc = vd_http_tls_check(cfg, err, errlen)) < 0 ||
	    (rc = slurp(cfg->tls_cert, &h->tls_cert, err, errlen)) < 0 ||
	    (rc = slurp(cfg->tls_key, &h->tls_key, err, errlen)) < 0)
		return rc;
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
	return MHD_start_daemon(flags, 0, on_accept, h, on_request, h,
	    MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)ss,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections + cfg->reserved_connections,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->max_connections_per_ip,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->connection_timeout,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)cfg->max_request_header_bytes *
	        VD_HTTP_POOL_TEXT_FACTOR + (size_t)VD_HTTP_FIELD_COST * VD_HTTP_POOL_FIELDS +
	        VD_HTTP_POOL_SLACK,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
	    MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
	    MHD_OPTION_URI_LOG_CALLBACK, on_uri, h,
	    MHD_OPTION_UNESCAPE_CALLBACK, on_unescape, h,
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
	int rc;

	if ((rc = resolve(cfg, &ss, err, errlen)) < 0)
		return rc;
	if ((h = calloc(1, sizeof(*h))) == NULL)
		return -ENOMEM;
	h->loop = loop;
	h->cfg = cfg;
	h->handler = handler;
	h->arg = arg;
	if ((rc = load_tls(h, cfg, err, errlen)) < 0)
		goto fail;
	h->max_connections = (unsigned)cfg->max_connections;
	h->reserved = (unsigned)cfg->reserved_connections;
	h->mhd = start_mhd(h, cfg, &ss);
	if (h->mhd == NULL) {
		snprintf(err, errlen, "cannot listen on %s (address in use, or not permitted)",
		    cfg->listen);
		rc = -EADDRINUSE;
		goto fail;
	}
	info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_BIND_PORT);
	h->port = info ? info->port : (uint16_t)cfg->listen_port;
	info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	if (info == NULL || uv_poll_init(loop, &h->poll, info->epoll_fd) < 0) {
		snprintf(err, errlen, "cannot watch the HTTP server's epoll descriptor");
		MHD_stop_daemon(h->mhd);
		rc = -EIO;
		goto fail;
	}
	uv_timer_init(loop, &h->timer);
	uv_timer_init(loop, &h->sweep);
	uv_timer_init(loop, &h->drain);
	h->poll.data = h->timer.data = h->sweep.data = h->drain.data = h;
	h->open_handles = 4;
	uv_poll_start(&h->poll, UV_READABLE, on_poll);
	uv_timer_start(&h->sweep, on_sweep, SWEEP_MS, SWEEP_MS);
	drive(h);
	*out = h;
	return 0;
fail:
	free(h->tls_cert);
	free(h->tls_key);
	free(h);
	return rc;
}

void vd_http_set_config(vd_http *h, const vd_config *cfg)
{
	/* Body, header and wait limits; socket limits need a restart. */
	if (cfg->reserved_connections != h->reserved)
		log_warn("reload: reserved_connections changes only on restart");
	h->cfg = cfg;
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

void vd_http_on_headers(vd_http *h, vd_http_early_fn fn, void *arg)
{
	h->early = fn;
	h->early_arg = arg;
}

void vd_http_on_done(vd_http *h, vd_http_done_fn fn, void *arg)
{
	h->done = fn;
	h->done_arg = arg;
}

static void finish_stop(vd_http *h)
{
	vd_req *r;

	if (h->mhd == NULL)
		return;
	/* libmicrohttpd must not be stopped with a connection suspended. */
	for (r = h->streams; r != NULL; r = r->snext)
		if (r->paused) {
			r->paused = 0;
			MHD_resume_connection(r->conn);
		}
	/* The poll handle leaves the loop's epoll set while libmicrohttpd's
	 * descriptor is still open: once closed, its number may already name
	 * a file another thread opened. */
	uv_close((uv_handle_t *)&h->poll, handle_closed);
	/* Completion callbacks run inside MHD_stop_daemon: cancel hooks fire. */
	MHD_stop_daemon(h->mhd);
	h->mhd = NULL;
	uv_close((uv_handle_t *)&h->timer, handle_closed);
	uv_close((uv_handle_t *)&h->sweep, handle_closed);
	uv_close((uv_handle_t *)&h->drain, handle_closed);
}

static void on_drain(uv_timer_t *t)
{
	finish_stop(t->data);
}

/* Streams first end with their last chunk, so that a client sees a clean
 * end rather than a reset; no connection is accepted meanwhile, and the
 * server stops once they are done, or after VD_HTTP_DRAIN_MS. */
void vd_http_stop(vd_http *h)
{
	MHD_socket ls;
	vd_req *r;

	if (h->mhd == NULL || h->stopping)
		return;
	h->stopping = 1;
	if (h->n_streams == 0) {
		finish_stop(h);
		return;
	}
	ls = MHD_quiesce_daemon(h->mhd);
	if (ls != MHD_INVALID_SOCKET)
		close(ls);
	for (r = h->streams; r != NULL; r = r->snext)
		vd_http_stream_wake(r);
	uv_timer_start(&h->timer, on_timer, MHD_TIMER_MIN_MS, 0);
	uv_timer_start(&h->drain, on_drain, VD_HTTP_DRAIN_MS, 0);
}

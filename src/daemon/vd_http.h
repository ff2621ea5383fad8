/*
 * HTTP plumbing: libmicrohttpd in external-epoll mode, driven from the
 * libuv loop (a uv_poll_t on MHD's epoll fd and a uv_timer_t for its
 * timeouts). Every handler therefore runs on the loop thread and reads
 * the store without locks. Request bodies are read here, by hand, with an
 * explicit limit (no MHD PostProcessor).
 *
 * Before a request reaches the application, this layer refuses, as JSON
 * errors: headers over max_request_header_bytes or VD_HTTP_MAX_FIELDS
 * fields (431); a control character in a header field, a NUL byte in the
 * request line or a header line, a path that decodes to a control
 * character, and a query vd_query_check refuses (400); a body over
 * max_body_bytes (413, at once even when it is chunked). A request line
 * and headers not received within request_header_timeout close the
 * connection. Past max_connections, reserved_connections more are kept
 * for GET and HEAD of VD_HTTP_PROBE_PATHS from 127.0.0.1 or ::1; any other
 * request on one of them gets 503.
 *
 * A streamed answer (vd_http_stream, for text/event-stream) is pulled by
 * libmicrohttpd as the connection can take it; when its filler has nothing
 * to send the connection is suspended, so an idle stream costs no work and
 * no system call until vd_http_stream_wake. On vd_http_stop every stream
 * ends with its last chunk before the server stops.
 */
#ifndef VD_HTTP_H
#define VD_HTTP_H

#include <stdint.h>
#include <sys/types.h>

#include <uv.h>
#include <microhttpd.h>

#include "vd_config.h"
#include "vd_util.h"

typedef struct vd_http vd_http;

/* Fills buf with up to max bytes of a streamed answer: returns how many,
 * 0 when there is nothing to send now (the stream then waits for
 * vd_http_stream_wake), or a negative errno to break it off (the connection
 * is aborted, not ended cleanly). While ending (the server
 * stops) it should only finish what it began, then return 0. */
typedef ssize_t (*vd_http_fill_fn)(void *arg, char *buf, size_t max, int ending);

typedef struct vd_req {
	vd_http *http;
	struct MHD_Connection *conn;
	const char *method;
	const char *url;          /* path only, owned by MHD */
	const char *route;        /* fixed name for logs and metrics */
	vd_buf body;
	int body_too_large;
	int body_started;
	int dispatched;
	int suspended;
	uint64_t t0_ns;
	unsigned status;          /* what was answered */
	void *handler_state;      /* a handler's, across a suspension */
	void (*cancel)(struct vd_req *r);   /* called if the client goes away */
	struct MHD_Response *ready;
	unsigned ready_status;
	int discarding;           /* refused while its body arrived: the rest is dropped */
	uint64_t discarded;
	/* A streamed answer (vd_http_stream). */
	vd_http_fill_fn fill;
	void *fill_arg;
	int paused;               /* suspended until vd_http_stream_wake */
	int cut;                  /* closed as too slow to keep up */
	uint64_t answered_ns;     /* when its headers were queued */
	struct vd_req *snext, **sprevp;
} vd_req;

/* The application's router: answers (vd_http_respond*) or suspends. */
typedef void (*vd_http_handler)(vd_req *r, void *arg);

/* What a check on the headers decided. */
enum vd_http_early {
	VD_HTTP_PROCEED = 0,      /* read the body and call the handler */
	VD_HTTP_REFUSED = 1       /* answered (vd_http_error) on the headers alone */
};

/* Called once a request's line and headers are in and have passed the
 * checks of this layer, before any of its body is read: it may refuse the
 * request on what it has (vd_http_error) and then returns VD_HTTP_REFUSED,
 * or returns VD_HTTP_PROCEED. A request refused here never has its body
 * read (so a wrong token is 401 whatever the Content-Length), and its
 * connection is closed after the answer. */
typedef enum vd_http_early (*vd_http_early_fn)(vd_req *r, void *arg);

/* 0, or with a sentence -EINVAL (listen is not an address, or the TLS files
 * are not a certificate and its key), -EADDRINUSE (cannot listen), -ENOMEM,
 * -EIO, or the -errno of reading a TLS file. */
int vd_http_start(vd_http **out, uv_loop_t *loop, const vd_config *cfg,
    vd_http_handler handler, void *arg, char *err, size_t errlen);
void vd_http_set_config(vd_http *h, const vd_config *cfg);
uint16_t vd_http_port(vd_http *h);
unsigned vd_http_connections(vd_http *h);   /* open now, this one included */
unsigned vd_http_connection_limit(vd_http *h);

/* The TLS certificate and key: readable, PEM, and belonging together. 0, or
 * with a sentence the -errno of opening one, or -EINVAL. */
int vd_http_tls_check(const vd_config *cfg, char *err, size_t errlen);
void vd_http_stop(vd_http *h);   /* stop accepting; closes handles */

const char *vd_req_header(vd_req *r, const char *name);
const char *vd_req_query(vd_req *r, const char *name);

/* Answer now (or, for a suspended request, resume and answer). The body
 * is copied. extra_headers: NULL-terminated name/value pairs. */
void vd_http_respond(vd_req *r, unsigned status, const char *content_type,
    const char *body, size_t len, const char *const *extra_headers);
/* The same with a body allocated with malloc, which the server frees once
 * sent (a large answer is not copied). */
void vd_http_respond_owned(vd_req *r, unsigned status, const char *content_type,
    char *body, size_t len, const char *const *extra_headers);
/* {"error": {"code": code, "detail": detail}} */
void vd_http_error(vd_req *r, unsigned status, const char *code,
    const char *detail, const char *const *extra_headers);
void vd_http_suspend(vd_req *r);

/* Answer 200 with a body of unknown length pulled from fill (chunked, the
 * connection closed after it). 0, or -ENOMEM, or -EIO when libmicrohttpd
 * refuses it (nothing sent either way). */
int vd_http_stream(vd_req *r, const char *content_type, vd_http_fill_fn fill, void *arg);
/* A stream that waits for data has some: fill is called again soon. */
void vd_http_stream_wake(vd_req *r);
/* Close a stream's connection now (a client too slow to keep up). */
void vd_http_stream_cut(vd_req *r);
/* Whether the client closed its end: a waiting stream is out of the
 * server's polling, so only this (one recv) or a failed write tells. */
int vd_http_stream_gone(vd_req *r);

/* Install the check of a request on its headers (see vd_http_early_fn). */
void vd_http_on_headers(vd_http *h, vd_http_early_fn fn, void *arg);

/* Called when a request completes, for the access log and metrics. */
typedef void (*vd_http_done_fn)(vd_req *r, double seconds, void *arg);
void vd_http_on_done(vd_http *h, vd_http_done_fn fn, void *arg);

#endif

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <openssl/crypto.h>

#include "vd_api.h"
#include "vd_attest.h"
#include "vd_dsse.h"
#include "vd_events.h"
#include "vd_json.h"
#include "vd_log.h"
#include "vd_page.h"
#include "vd_reqparse.h"
#include "vd_sched.h"
#include "vd_util.h"
#include "vd_views.h"

#define PEER_MAX INET6_ADDRSTRLEN
#define RETRY_AFTER (const char *const[]){ "Retry-After", VD_API_RETRY_AFTER, NULL }

/* A POST /verify from its parse to its answer. */
typedef struct verify_wait {
	vd_api *api;
	vd_req *req;
	vd_waiter *waiter;
	unsigned wait;                   /* seconds to hold the answer */
	vd_verify_req vr;
	char relpath[VD_REQ_PATH_MAX];   /* the copy, for the path form */
} verify_wait;

/* A path no scan has seen, looked up on libuv's threadpool: the loop never
 * waits on the file system, where a slow or hung mount would stall every
 * client. The request's connection stays suspended meanwhile. The worker
 * reads only what is copied here. */
typedef struct vd_api_lookup {
	uv_work_t work;
	verify_wait *vw;            /* NULL once no one waits for the answer */
	int kind;                   /* the worker's finding: a vd_artifact_kind, or -1 */
	struct vd_api_lookup *next, **prevp;   /* in api->lookups while vw is set */
	char relpath[VD_REQ_PATH_MAX];
	char root[];                /* the store: a reload may free the configuration meanwhile */
} lookup;

/* A GET /artifact/<hash>/oms being signed on libuv's threadpool: the
 * model's files are read and hashed there, never on the loop. The copy's
 * fingerprint before and after the walk must be the one its verdict was
 * reached on, or the daemon would sign bytes it did not verify. */
typedef struct vd_api_oms {
	uv_work_t work;
	vd_req *req;                /* NULL once no one waits for the answer */
	vd_api *api;                /* read only while req is set */
	struct vd_api_oms *next, **prevp;   /* in api->omss while req is set */
	const vd_key *key;          /* the daemon's, alive as long as the loop */
	vd_artifact_kind kind;
	vd_fingerprint want;        /* the copy's verdict_fp */
	char hash[VD_HASH_HEX_LEN + 1];
	const char *relpath;        /* in path */
	int changed;                /* the worker's finding */
	vd_oms_code code;
	vd_buf bundle;
	char path[];                /* the copy, under the store root */
} oms_job;

/* ---- answers ---------------------------------------------------------- */

/* Memory ran out while answering. Posts are idempotent, so the request
 * can be sent again as it is. */
static void out_of_memory(vd_req *r, const char *doing)
{
	char detail[192];

	snprintf(detail, sizeof(detail), "out of memory while %s", doing);
	vd_http_error(r, 503, "overloaded", detail, RETRY_AFTER);
}

/* o NULL: the view ran out of memory while doing what doing says. */
static void send_json(vd_req *r, unsigned status, json_object *o,
    const char *const *extra, const char *doing)
{
	const char *s = o != NULL ? json_object_to_json_string_ext(o, VD_VIEW_JSON) : NULL;

	if (s == NULL)
		out_of_memory(r, doing);
	else
		vd_http_respond(r, status, "application/json", s, strlen(s), extra);
	json_object_put(o);
}

static void not_allowed(vd_req *r, const char *allow)
{
	char detail[96];

	snprintf(detail, sizeof(detail), "%s is not allowed here; use %s", r->method, allow);
	vd_http_error(r, 405, "method_not_allowed", detail,
	    (const char *const[]){ "Allow", allow, NULL });
}

/* ---- what a request says ---------------------------------------------- */

static int parse_state(const char *s, int *out)
{
	int i;

	for (i = 0; i < 4; i++) {
		if (strcmp(s, vd_astate_name((vd_astate)i)) == 0) {
			*out = i;
			return 0;
		}
	}
	return -EINVAL;
}

/* ?limit=N (1 to VD_PAGE_MAX; absent: no limit, 0 here). */
static int parse_limit(vd_req *r, size_t *out)
{
	const char *q = vd_req_query(r, "limit");
	char *end;
	unsigned long v;

	*out = 0;
	if (q == NULL)
		return 0;
	v = strtoul(q, &end, 10);
	if (q[0] < '0' || q[0] > '9' || *end != '\0' || v < 1 || v > VD_PAGE_MAX)
		return -EINVAL;
	*out = v;
	return 0;
}

static void bad_limit(vd_req *r)
{
	char detail[96];

	snprintf(detail, sizeof(detail), "limit must be a whole number from 1 to %d", VD_PAGE_MAX);
	vd_http_error(r, 400, "bad_request", detail, NULL);
}

static int parse_wait(vd_req *r, unsigned max, unsigned *out)
{
	const char *q = vd_req_query(r, "wait");
	char *end;
	unsigned long v;

	*out = VD_API_DEFAULT_WAIT < max ? VD_API_DEFAULT_WAIT : max;
	if (q == NULL)
		return 0;
	v = strtoul(q, &end, 10);
	if (q[0] < '0' || q[0] > '9' || *end != '\0' || v > VD_API_MAX_WAIT)
		return -EINVAL;
	*out = v < max ? (unsigned)v : max;
	return 0;
}

/* A path the client named: relative to the store root, or absolute inside it. */
static int store_relpath(vd_api *api, const char *p, char *out, size_t n)
{
	size_t rl = strlen(api->cfg->store);

	if (p[0] == '/') {
		if (strncmp(p, api->cfg->store, rl) != 0 || p[rl] != '/')
			return -EINVAL;
		p += rl + 1;
	}
	if (!vd_relpath_ok(p) || strlen(p) >= n)
		return -EINVAL;
	snprintf(out, n, "%s", p);
	return 0;
}

static int run_param(vd_req *r, char *out, size_t n)
{
	const char *q = vd_req_query(r, "run");

	if (q == NULL || q[0] == '\0' || strcmp(q, ".") == 0) {
		out[0] = '\0';
		return 0;
	}
	if (!vd_relpath_ok(q) || strlen(q) >= n)
		return -EINVAL;
	snprintf(out, n, "%s", q);
	return 0;
}

static void bad_run(vd_req *r)
{
	vd_http_error(r, 400, "bad_request",
	    "run must name a directory inside the store, without \"..\" or hidden parts", NULL);
}

/* ?limit=&after= of a history, newest first: after is the next of the
 * page before (an id). Without limit, a page of VD_PAGE_MAX. 0, or
 * -EINVAL with the 400 sent. */
static int history_page(vd_req *r, vd_page *pg)
{
	const char *q = vd_req_query(r, "after");
	char *end;
	long long v = 0;

	memset(pg, 0, sizeof(*pg));
	if (parse_limit(r, &pg->limit) < 0) {
		bad_limit(r);
		return -EINVAL;
	}
	if (pg->limit == 0)
		pg->limit = VD_PAGE_MAX;
	errno = 0;
	if (q != NULL && (q[0] < '1' || q[0] > '9' || (v = strtoll(q, &end, 10)) < 1 ||
	    *end != '\0' || errno != 0)) {
		vd_http_error(r, 400, "bad_request",
		    "after is the next of the page before: a whole number above 0", NULL);
		return -EINVAL;
	}
	pg->before = v;
	return 0;
}

/* The client's address, as the audit of commitments keeps it. A
 * dual-stack listener sees an IPv4 client as ::ffff:a.b.c.d: shown as
 * a.b.c.d, as an IPv4 listener would. */
static void peer_address(vd_req *r, char *out, size_t n)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn,
	    MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci != NULL ? ci->client_addr : NULL;
	const struct in6_addr *a6;

	out[0] = '\0';
	if (sa != NULL && sa->sa_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out, (socklen_t)n);
	} else if (sa != NULL && sa->sa_family == AF_INET6) {
		a6 = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(a6))
			inet_ntop(AF_INET, &a6->s6_addr[12], out, (socklen_t)n);
		else
			inet_ntop(AF_INET6, a6, out, (socklen_t)n);
	}
}

/* ---- tokens ----------------------------------------------------------- */

void vd_api_load_token(vd_api *api)
{
	vd_auth_load(&api->auth, api->cfg);
}

/* The operator token commits for every run; a run's own token (when run
 * is given) for that run only, so one coordinator's token cannot commit
 * for another. 1, or 0 with the 401 or 403 sent. */
static int authorized_for(vd_api *api, vd_req *r, const char *run)
{
	char why[VD_AUTH_WHY_MAX];

	switch (vd_auth_check(&api->auth, vd_req_header(r, "Authorization"), run, why, sizeof(why))) {
	case VD_AUTH_OPERATOR:
	case VD_AUTH_RUN:
		return 1;
	case VD_AUTH_UNCONFIGURED:
		vd_http_error(r, 403, "forbidden", why, NULL);
		return 0;
	case VD_AUTH_DENIED:
		break;
	}
	vd_http_error(r, 401, "unauthorized", "a valid operator token is required: Authorization: Bearer <token>",
	    (const char *const[]){ "WWW-Authenticate", "Bearer realm=\"lensemble-verifyd\"", NULL });
	return 0;
}

static int authorized(vd_api *api, vd_req *r)
{
	return authorized_for(api, r, NULL);
}

/* Which token let a post through (authorized_for): the operator's, else
 * the run's own. Named, never echoed. */
static const char *token_holder(vd_api *api, vd_req *r)
{
	if (vd_auth_check(&api->auth, vd_req_header(r, "Authorization"), NULL, NULL, 0) == VD_AUTH_OPERATOR)
		return VD_AUDIT_OPERATOR;
	return VD_AUDIT_RUN_TOKEN;
}

/* On the headers, before the body is read (vd_http_on_headers): a request
 * that needs a token is refused without a valid one, so a wrong token is
 * 401 whatever the size of the body. A POST /roundclose with no token and
 * a JSON body may be a signed envelope, which needs its body. */
enum vd_http_early vd_api_early(vd_req *r, void *arg)
{
	vd_api *api = arg;
	char run[VD_RUN_MAX];

	if (strcmp(r->url, "/ledger") == 0 && strcmp(r->method, "DELETE") == 0) {
		r->route = "/ledger";
		return authorized(api, r) ? VD_HTTP_PROCEED : VD_HTTP_REFUSED;
	}
	if (strcmp(r->url, "/commitment") == 0 && strcmp(r->method, "DELETE") == 0) {
		r->route = "/commitment";
		return authorized(api, r) ? VD_HTTP_PROCEED : VD_HTTP_REFUSED;
	}
	if (strcmp(r->url, "/roundclose") != 0 || strcmp(r->method, "POST") != 0)
		return VD_HTTP_PROCEED;
	r->route = "/roundclose";
	if (vd_req_header(r, "Authorization") == NULL &&
	    vd_is_json_content_type(vd_req_header(r, "Content-Type")))
		return VD_HTTP_PROCEED;
	if (run_param(r, run, sizeof(run)) < 0)
		return VD_HTTP_PROCEED;    /* post_roundclose answers 400 */
	return authorized_for(api, r, run) ? VD_HTTP_PROCEED : VD_HTTP_REFUSED;
}

/* ---- GET routes ------------------------------------------------------- */

static void get_healthz(vd_api *api, vd_req *r)
{
	vd_http_respond(r, 200, "text/plain; charset=utf-8", "ok\n", 3, NULL);
}

/* Starting: the first store scan or the state database is not done yet.
 * /readyz says so, and so does every commitment route, whatever the run
 * or the commitment: a coordinator that takes a 4xx for final would drop
 * a good one, and until the first scan the store's own commitments are
 * not known to conflict with it. NULL once started. */
static const char *starting(const vd_api *api)
{
	if (!vd_store_scanned(api->store))
		return "the first store scan has not finished";
	if (!api->state_ready)
		return "the state database is not loaded yet";
	/* Until it ends, what it has not reached reads chain_pending. */
	if (vd_store_passing(api->store))
		return "the first lineage pass over the store has not finished";
	return NULL;
}

static void get_readyz(vd_api *api, vd_req *r)
{
	const char *why = starting(api);

	if (why != NULL) {
		vd_http_error(r, 503, "not_ready", why, (const char *const[]){
		    "Retry-After", "1", NULL });
		return;
	}
	/* Nothing new can be recorded: a replica that records is better. */
	if (!vd_state_ok(vd_store_state(api->store))) {
		vd_http_error(r, 503, "not_ready", "the state database cannot be written: nothing new is recorded (see the log)",
		    (const char *const[]){ "Retry-After", "5", NULL });
		return;
	}
	vd_http_respond(r, 200, "application/json", "{\"ready\":true}", 14, NULL);
}

static void get_metrics(vd_api *api, vd_req *r)
{
	vd_gauges g;
	vd_buf b;

	memset(&g, 0, sizeof(g));
	g.committed_head_round = -1;
	g.start_time = api->start_time;
	vd_store_gauges(api->store, &g);
	g.http_connections = vd_http_connections(api->http);
	g.http_connections_limit = vd_http_connection_limit(api->http);
	vd_buf_init(&b);
	if (vd_metrics_render(api->metrics, &g, &b) < 0) {
		vd_buf_free(&b);
		vd_http_error(r, 500, "internal", "out of memory rendering metrics", NULL);
		return;
	}
	vd_http_respond(r, 200, "text/plain; version=0.0.4; charset=utf-8",
	    (const char *)b.p, b.len, NULL);
	vd_buf_free(&b);
}

/* The status object of hash: 0 with *out set, or -EINVAL, -ENOENT or
 * -ENOMEM with the answer sent. */
static int status_of(vd_api *api, vd_req *r, const char *hash, json_object **out)
{
	int rc;

	if (!vd_is_hex64((vd_str){ hash, strlen(hash) })) {
		vd_http_error(r, 400, "bad_request",
		    "an artifact is named by its content hash: 64 lowercase hex characters", NULL);
		return -EINVAL;
	}
	/* Asking is interest, as waiting is: its verification goes ahead. */
	vd_store_interest(api->store, hash);
	if ((rc = vd_view_status(api->store, hash, out)) == -ENOENT)
		vd_http_error(r, 404, "not_found", "no artifact in the store claims this hash", NULL);
	else if (rc < 0)
		out_of_memory(r, "building the status object");
	return rc < 0 ? rc : 0;
}

static void get_artifact(vd_api *api, vd_req *r, const char *hash)
{
	json_object *o;

	if (status_of(api, r, hash, &o) == 0)
		send_json(r, 200, o, NULL, "building the status object");
}

/* GET /artifact/<hash>/attestation: the verdict as it stands now, signed
 * by the daemon's key (trust.md section 6). */
static void get_attestation(vd_api *api, vd_req *r, const char *hash)
{
	json_object *status;
	vd_buf payload, env;

	if (status_of(api, r, hash, &status) < 0)
		return;
	if (strcmp(json_object_get_string(json_object_object_get(status, "state")), "verified") != 0) {
		json_object_put(status);
		vd_http_error(r, 409, "not_verified",
		    "the artifact is not verified (yet): only a verified artifact's verdict is signed", NULL);
		return;
	}
	vd_buf_init(&payload);
	vd_buf_init(&env);
	if (vd_attest_statement(status, vd_wall_now(), &payload) < 0 ||
	    vd_dsse_sign(VD_PT_INTOTO, payload.p, payload.len, api->signing_key, &env) < 0)
		vd_http_error(r, 500, "internal", "the attestation could not be signed", NULL);
	else
		vd_http_respond(r, 200, "application/json", (const char *)env.p, env.len, NULL);
	json_object_put(status);
	vd_buf_free(&payload);
	vd_buf_free(&env);
}

/* The copy's fingerprint, taken as the scan takes it. */
static void fingerprint_path(const char *path, vd_artifact_kind kind, vd_fingerprint *fp)
{
	const char *slash = strrchr(path, '/');
	char parent[PATH_MAX];
	struct stat st, sig;
	int fd;

	memset(fp, 0, sizeof(*fp));
	if (kind == VD_KIND_DIR) {
		if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
			vd_fingerprint_dir(fd, fp);
			close(fd);
		}
		return;
	}
	snprintf(parent, sizeof(parent), "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
	if (lstat(path, &st) < 0 || (fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return;
	vd_fingerprint_file(&st, vd_tar_sig_stat(fd, slash ? slash + 1 : path, &sig), fp);
	close(fd);
}

/* On libuv's threadpool. */
static void oms_work(uv_work_t *w)
{
	oms_job *job = w->data;
	char sig[PATH_MAX + 8];
	vd_oms_sign_opts o = { .key = job->key };
	vd_oms_result *res = malloc(sizeof(*res));
	vd_fingerprint before, after;

	job->code = VD_OMS_UNREADABLE;
	if (res == NULL)
		return;
	/* A tar is one file: the bundle lies beside it, outside the model. */
	snprintf(sig, sizeof(sig), "%s%s", job->path, job->kind == VD_KIND_TAR ?
	    VD_TAR_SIG_SUFFIX : "/" VD_OMS_SIGNATURE_NAME);
	o.signature = sig;
	fingerprint_path(job->path, job->kind, &before);
	job->code = vd_oms_sign(job->path, &o, &job->bundle, res);
	fingerprint_path(job->path, job->kind, &after);
	job->changed = !vd_fingerprint_eq(&before, &job->want) ||
	    !vd_fingerprint_eq(&after, &job->want);
	free(res);
	/* A thread of libuv's pool is never joined before the process ends:
	 * what OpenSSL keeps per thread for the signature goes now. */
	OPENSSL_thread_stop();
}

static void oms_unlink(oms_job *job)
{
	if (job->prevp == NULL)
		return;
	*job->prevp = job->next;
	if (job->next)
		job->next->prevp = job->prevp;
	job->prevp = NULL;
}

/* Trust may have been taken back while the worker signed (a withdrawal,
 * a failed copy or parent, an equivocation): the bundle goes only if the
 * copy is still trusted once lineage has caught up. */
static int oms_still_trusted(const oms_job *job)
{
	vd_store_sync(job->api->store);
	return vd_view_copy_still_trusted(job->api->store, job->hash, job->relpath, &job->want);
}

static void oms_done(uv_work_t *w, int status)
{
	oms_job *job = w->data;
	vd_req *r = job->req;

	oms_unlink(job);
	if (r != NULL) {
		r->cancel = NULL;
		r->handler_state = NULL;
		if (status != 0 || job->code != VD_OMS_OK || job->bundle.oom)
			vd_http_error(r, 503, "overloaded", "the bundle could not be signed; try again",
			    RETRY_AFTER);
		else if (job->changed)
			vd_http_error(r, 409, "not_trusted", "the copy changed since it was verified: "
			    "it is verified again before anything is signed", NULL);
		else if (!oms_still_trusted(job))
			vd_http_error(r, 409, "not_trusted", "the artifact stopped being trusted while "
			    "its files were signed: nothing is signed", NULL);
		else
			vd_http_respond(r, 200, "application/json", (const char *)job->bundle.p,
			    job->bundle.len, NULL);
	}
	vd_buf_free(&job->bundle);
	free(job);
}

/* The connection closed while the worker signs: oms_done frees the job. */
static void on_oms_cancel(vd_req *r)
{
	oms_job *job = r->handler_state;

	oms_unlink(job);
	job->req = NULL;
}

/* GET /artifact/<hash>/oms: an OMS v1.0 bundle (key method) by the
 * daemon's EC key over the files of a trusted, verified copy. */
static void get_oms(vd_api *api, vd_req *r, const char *hash)
{
	const vd_copy *c;
	oms_job *job;
	size_t len;
	int rc;

	if (!vd_is_hex64((vd_str){ hash, strlen(hash) })) {
		vd_http_error(r, 400, "bad_request",
		    "an artifact is named by its content hash: 64 lowercase hex characters", NULL);
		return;
	}
	vd_store_sync(api->store);
	if ((rc = vd_view_trusted_copy(api->store, hash, &c)) == -ENOENT) {
		vd_http_error(r, 404, "not_found", "no artifact in the store claims this hash", NULL);
		return;
	}
	if (rc < 0) {
		vd_http_error(r, 409, "not_trusted", "no copy of the artifact is verified and trusted: "
		    "only a trusted artifact's files are signed", NULL);
		return;
	}
	len = strlen(api->cfg->store) + 1 + strlen(c->relpath);
	if (api->oms_key == NULL || (job = calloc(1, sizeof(*job) + len + 1)) == NULL) {
		out_of_memory(r, "signing the bundle");
		return;
	}
	snprintf(job->path, len + 1, "%s/%s", api->cfg->store, c->relpath);
	job->relpath = job->path + strlen(api->cfg->store) + 1;
	snprintf(job->hash, sizeof(job->hash), "%s", hash);
	job->work.data = job;
	job->req = r;
	job->api = api;
	job->key = api->oms_key;
	job->kind = c->kind;
	job->want = c->verdict_fp;
	vd_buf_init(&job->bundle);
	if (uv_queue_work(vd_store_loop(api->store), &job->work, oms_work, oms_done) < 0) {
		free(job);
		vd_http_error(r, 503, "overloaded", "the bundle could not be signed; try again",
		    RETRY_AFTER);
		return;
	}
	job->next = api->omss;
	if (job->next)
		job->next->prevp = &job->next;
	api->omss = job;
	job->prevp = &api->omss;
	r->handler_state = job;
	r->cancel = on_oms_cancel;
	vd_http_suspend(r);
}

static void get_artifact_route(vd_api *api, vd_req *r)
{
	const char *rest = r->url + strlen("/artifact/");
	const char *slash = strchr(rest, '/');
	char hash[VD_HASH_HEX_LEN + 1];

	if (slash == NULL) {
		get_artifact(api, r, rest);
	} else if (strcmp(slash, "/attestation") == 0 && slash - rest == VD_HASH_HEX_LEN) {
		memcpy(hash, rest, VD_HASH_HEX_LEN);
		hash[VD_HASH_HEX_LEN] = '\0';
		get_attestation(api, r, hash);
	} else if (strcmp(slash, "/oms") == 0 && slash - rest == VD_HASH_HEX_LEN) {
		memcpy(hash, rest, VD_HASH_HEX_LEN);
		hash[VD_HASH_HEX_LEN] = '\0';
		get_oms(api, r, hash);
	} else {
		vd_http_error(r, 404, "not_found", "no such endpoint", NULL);
	}
}

/* GET /artifacts: by content hash; ?limit=&after=HASH pages through them
 * with a "next" cursor (copies without a valid header, which claim no
 * hash, come on the last page). */
static void get_artifacts(vd_api *api, vd_req *r)
{
	const char *q = vd_req_query(r, "state"), *after = vd_req_query(r, "after");
	size_t limit;
	int want = -1;

	if (q != NULL && parse_state(q, &want) < 0) {
		vd_http_error(r, 400, "bad_request",
		    "state must be pending, verifying, verified or failed", NULL);
		return;
	}
	if (after != NULL && !vd_is_hex64((vd_str){ after, strlen(after) })) {
		vd_http_error(r, 400, "bad_request", "after is a content hash: 64 lowercase hex characters", NULL);
		return;
	}
	if (parse_limit(r, &limit) < 0) {
		bad_limit(r);
		return;
	}
	send_json(r, 200, vd_view_artifacts(api->store, want, after, limit), NULL,
	    "listing the artifacts");
}

/* GET /key: the public halves of the keys that sign verdicts and OMS
 * bundles. */
static void get_key(vd_api *api, vd_req *r)
{
	vd_buf pem, oms;

	vd_buf_init(&pem);
	vd_buf_init(&oms);
	if (vd_key_public_pem(api->signing_key, &pem) < 0 ||
	    (api->oms_key != NULL && vd_key_public_pem(api->oms_key, &oms) < 0)) {
		vd_http_error(r, 500, "internal", "the public key could not be written", NULL);
	} else {
		send_json(r, 200, vd_view_key(vd_key_id(api->signing_key), (const char *)pem.p,
		    api->oms_key ? vd_key_id(api->oms_key) : NULL,
		    api->oms_key ? (const char *)oms.p : NULL), NULL, "writing out the key");
	}
	vd_buf_free(&pem);
	vd_buf_free(&oms);
}

/* GET /events: Server-Sent Events (vd_events.h). Last-Event-ID resumes;
 * ?last_event_id= does for a client that cannot set headers, but the
 * header wins: EventSource sends it on reconnecting, to the same URL. */
static void get_events(vd_api *api, vd_req *r)
{
	const char *h = vd_req_header(r, "Last-Event-ID"), *q = vd_req_query(r, "last_event_id");
	const char *given = h != NULL && h[0] != '\0' ? h : q;
	uint64_t after = 0;

	if (given != NULL && vd_events_parse_id(given, &after) < 0) {
		vd_http_error(r, 400, "bad_request",
		    "Last-Event-ID (or last_event_id) is an event id: a whole number", NULL);
		return;
	}
	if (strcmp(r->method, "HEAD") == 0) {
		vd_http_respond(r, 200, "text/event-stream", "", 0, NULL);
		return;
	}
	if (vd_events_open(vd_store_events(api->store), r, given != NULL, after) < 0)
		vd_http_error(r, 503, "overloaded",
		    "no event stream can be opened now (max_event_streams are open, or the daemon is stopping)",
		    RETRY_AFTER);
}

/* ---- GET /chain -------------------------------------------------------- */

/* GET /chain?run=R[&limit=N&after=ROUND]: one run's artifacts in round
 * order, a page at a time, with a "next" cursor (the last round shown). */
static void get_run_chain(vd_api *api, vd_req *r, const char *run)
{
	const char *q = vd_req_query(r, "after");
	long long after = -1;
	size_t limit;
	char *end;

	if (parse_limit(r, &limit) < 0) {
		bad_limit(r);
		return;
	}
	if (q != NULL && (q[0] < '0' || q[0] > '9' || (after = strtoll(q, &end, 10)) < 0 || *end != '\0')) {
		vd_http_error(r, 400, "bad_request", "after is a round index: a whole number", NULL);
		return;
	}
	send_json(r, 200, vd_view_run_chain(api->store, run, after, limit), NULL,
	    "building the run's chain");
}

static void get_chain(vd_api *api, vd_req *r)
{
	char run[VD_RUN_MAX];
	vd_buf b;

	if (vd_req_query(r, "run") != NULL) {
		if (run_param(r, run, sizeof(run)) < 0)
			bad_run(r);
		else
			get_run_chain(api, r, run);
		return;
	}
	if (vd_req_query(r, "limit") != NULL || vd_req_query(r, "after") != NULL) {
		vd_http_error(r, 400, "bad_request", "limit and after page through one run: give run= too", NULL);
		return;
	}
	if (vd_view_chain(api->store, &b) < 0) {
		out_of_memory(r, "building /chain; page through one run with /chain?run=");
		return;
	}
	vd_http_respond_owned(r, 200, "application/json", (char *)b.p, b.len, NULL);
}

/* ---- GET /alerts and GET /commitments: histories in the state database -- */

/* The history is in the state database, loaded after the first start. */
static vd_state *history_state(vd_api *api, vd_req *r)
{
	if (!api->state_ready || vd_store_state(api->store) == NULL) {
		vd_http_error(r, 503, "not_ready", "the state database is not loaded yet", RETRY_AFTER);
		return NULL;
	}
	return vd_store_state(api->store);
}

/* rc: what reading the page gave. */
static void send_history(vd_req *r, const char *name, vd_view_rows *rows, int rc,
    const vd_page *pg)
{
	if (rc < 0) {
		vd_view_rows_free(rows);
		vd_http_error(r, 503, "overloaded", "the state database could not be read; try again",
		    RETRY_AFTER);
		return;
	}
	send_json(r, 200, vd_view_history(name, rows, pg), NULL, "listing the history");
}

/* A yes-or-no parameter: 1 or true, 0 or false (clients' URL builders
 * write booleans either way); -EINVAL for anything else. */
static int query_bool(const char *q, int *out)
{
	if (strcmp(q, "1") == 0 || strcmp(q, "true") == 0)
		*out = 1;
	else if (strcmp(q, "0") == 0 || strcmp(q, "false") == 0)
		*out = 0;
	else
		return -EINVAL;
	return 0;
}

/* GET /alerts[?active=1|0|true|false][&limit=N&after=ID]: every alert
 * raised, newest first, with when it was raised and cleared (null while
 * raised). */
static void get_alerts(vd_api *api, vd_req *r)
{
	const char *q = vd_req_query(r, "active");
	vd_view_rows rows;
	vd_state *st;
	vd_page pg;
	vd_alert_filter which = VD_ALERTS_ALL;
	int active;

	if (q != NULL && query_bool(q, &active) < 0) {
		vd_http_error(r, 400, "bad_request",
		    "active is 1 or true (only alerts still raised), 0 or false (only cleared ones)", NULL);
		return;
	}
	if (q != NULL)
		which = active ? VD_ALERTS_RAISED : VD_ALERTS_CLEARED;
	if (history_page(r, &pg) < 0 || (st = history_state(api, r)) == NULL)
		return;
	if (vd_view_rows_init(&rows) < 0) {
		out_of_memory(r, "listing the history");
		return;
	}
	send_history(r, "alerts", &rows,
	    vd_state_list_alerts(st, which, &pg, vd_view_alert_row, &rows), &pg);
}

/* GET /commitments[?run=R][&limit=N&after=ID]: the audit of every
 * commitment accepted (of one run with run=), newest first. */
static void get_commitments(vd_api *api, vd_req *r)
{
	char run[VD_RUN_MAX];
	int one_run = vd_req_query(r, "run") != NULL;
	vd_view_rows rows;
	vd_state *st;
	vd_page pg;

	if (one_run && run_param(r, run, sizeof(run)) < 0) {
		bad_run(r);
		return;
	}
	if (history_page(r, &pg) < 0 || (st = history_state(api, r)) == NULL)
		return;
	if (vd_view_rows_init(&rows) < 0) {
		out_of_memory(r, "listing the history");
		return;
	}
	send_history(r, "commitments", &rows,
	    vd_state_list_audit(st, one_run ? run : NULL, &pg, vd_view_audit_row, &rows), &pg);
}

/* ---- POST /verify ------------------------------------------------------ */

static void accepted(verify_wait *vw)
{
	const vd_copy *c = vw->vr.form == VD_VERIFY_PATH ? vd_store_copy(vw->api->store, vw->relpath) : NULL;
	const char *hash = vw->vr.form != VD_VERIFY_PATH ? vw->vr.hash :
	    (c && c->hdr.code == VD_OK ? c->hdr.content_hash : NULL);
	const char *doing = "answering (the verification goes on)";
	char loc[128];

	if (hash == NULL) {
		send_json(vw->req, 202, vd_view_accepted(NULL, NULL), NULL, doing);
		return;
	}
	snprintf(loc, sizeof(loc), "/artifact/%s", hash);
	send_json(vw->req, 202, vd_view_accepted(hash, loc),
	    (const char *const[]){ "Location", loc, NULL }, doing);
}

static void on_verified(void *arg, int timed_out)
{
	verify_wait *vw = arg;

	vw->waiter = NULL;
	vw->req->cancel = NULL;
	vw->req->handler_state = NULL;
	if (timed_out)
		accepted(vw);
	else
		send_json(vw->req, 200, vd_view_verdict(vw->api->store, &vw->vr, vw->relpath), NULL,
		    "building the verdict");
	free(vw);
}

static void on_verify_cancel(vd_req *r)
{
	verify_wait *vw = r->handler_state;

	if (vw->waiter)
		vd_waiters_cancel(vw->waiter);
	free(vw);
}

/* Queue the copies (the targets of vw) and answer, or hold the answer for
 * vw->wait seconds. Takes vw. */
static void verify_copies(vd_api *api, verify_wait *vw, const vd_copy *const *copies, size_t n)
{
	vd_req *r = vw->req;
	const vd_copy **targets = calloc(n, sizeof(*targets));
	char **paths = calloc(n, sizeof(*paths));
	uint64_t *gens = calloc(n, sizeof(*gens));
	size_t i;
	int rc = 0;

	if (targets == NULL || paths == NULL || gens == NULL) {
		out_of_memory(r, "starting the verification");
		goto out;
	}
	/* A copy of the list: queueing must not see the group change under it. */
	memcpy(targets, copies, n * sizeof(*targets));
	for (i = 0; i < n && rc == 0; i++) {
		paths[i] = targets[i]->relpath;
		rc = vd_store_verify_now(api->store, targets[i], &gens[i]);
	}
	if (rc == -ENOMEM) {
		out_of_memory(r, "queueing the verification");
		goto out;
	}
	if (rc < 0) {
		vd_http_error(r, 503, "overloaded", "the verification queue is full; try again later",
		    RETRY_AFTER);
		goto out;
	}
	if (vw->wait == 0) {
		accepted(vw);
		goto out;
	}
	vw->waiter = vd_waiters_wait(vd_store_waiters(api->store), paths, gens, n, (uint64_t)vw->wait * 1000,
	    on_verified, vw);
	if (vw->waiter == NULL) {
		out_of_memory(r, "waiting for the verification");
		goto out;
	}
	r->handler_state = vw;
	r->cancel = on_verify_cancel;
	if (!r->suspended)          /* it is when a lookup came first */
		vd_http_suspend(r);
	vw = NULL;
out:
	free(targets);
	free(paths);
	free(gens);
	free(vw);
}

static void lookup_unlink(lookup *job)
{
	if (job->prevp == NULL)
		return;
	*job->prevp = job->next;
	if (job->next)
		job->next->prevp = job->prevp;
	job->prevp = NULL;
}

/* On libuv's threadpool. */
static void lookup_work(uv_work_t *w)
{
	lookup *job = w->data;
	int root = open(job->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	job->kind = -1;
	if (root < 0)
		return;
	job->kind = vd_artifact_kind_at(root, job->relpath);
	close(root);
}

/* Back on the loop: adopt what was found, unless a scan found it first. */
static void found(vd_api *api, verify_wait *vw, int kind)
{
	const vd_copy *c;

	if (vd_store_closing(api->store)) {
		vd_http_error(vw->req, 503, "overloaded", "the daemon is stopping", RETRY_AFTER);
		free(vw);
		return;
	}
	c = vd_store_copy(api->store, vw->relpath);
	if (c == NULL && kind >= 0 &&
	    (c = vd_store_adopt(api->store, vw->relpath, (vd_artifact_kind)kind)) == NULL) {
		out_of_memory(vw->req, "adopting the artifact");
		free(vw);
		return;
	}
	if (c == NULL) {
		vd_http_error(vw->req, 404, "not_found", "no artifact at that path", NULL);
		free(vw);
		return;
	}
	verify_copies(api, vw, &c, 1);
}

/* The only place a lookup is freed: its work is done, and libuv is done
 * with it. */
static void lookup_done(uv_work_t *w, int status)
{
	lookup *job = w->data;
	verify_wait *vw = job->vw;
	int kind = status == 0 ? job->kind : -1;

	lookup_unlink(job);
	free(job);
	if (vw == NULL)
		return;             /* the client went away, or the daemon stops */
	vw->req->cancel = NULL;
	vw->req->handler_state = NULL;
	found(vw->api, vw, kind);
}

/* The connection closed while the worker looks: the work cannot be taken
 * back, so the lookup is left for lookup_done to free. */
static void on_lookup_cancel(vd_req *r)
{
	lookup *job = r->handler_state;

	lookup_unlink(job);
	free(job->vw);
	job->vw = NULL;
}

/* Takes vw: answered when the lookup cannot start, else once it is done. */
static void lookup_start(vd_api *api, verify_wait *vw)
{
	size_t len = strlen(api->cfg->store);
	lookup *job = calloc(1, sizeof(*job) + len + 1);
	vd_req *r = vw->req;

	if (job == NULL) {
		out_of_memory(r, "looking up the artifact");
		free(vw);
		return;
	}
	job->work.data = job;
	job->vw = vw;
	memcpy(job->root, api->cfg->store, len + 1);
	memcpy(job->relpath, vw->relpath, sizeof(job->relpath));
	if (uv_queue_work(vd_store_loop(api->store), &job->work, lookup_work, lookup_done) < 0) {
		free(job);
		vd_http_error(r, 503, "overloaded", "the artifact could not be looked up; try again",
		    RETRY_AFTER);
		free(vw);
		return;
	}
	job->next = api->lookups;
	if (job->next)
		job->next->prevp = &job->next;
	api->lookups = job;
	job->prevp = &api->lookups;
	r->handler_state = job;
	r->cancel = on_lookup_cancel;
	vd_http_suspend(r);
}

void vd_api_stop(vd_api *api)
{
	lookup *job;
	verify_wait *vw;
	oms_job *oj;
	vd_req *r;

	while ((oj = api->omss) != NULL) {
		r = oj->req;
		oms_unlink(oj);
		oj->req = NULL;     /* oms_done frees the job alone */
		r->cancel = NULL;
		r->handler_state = NULL;
		vd_http_error(r, 503, "overloaded", "the daemon is stopping", RETRY_AFTER);
	}

	while ((job = api->lookups) != NULL) {
		vw = job->vw;
		lookup_unlink(job);
		job->vw = NULL;     /* lookup_done frees the job alone */
		vw->req->cancel = NULL;
		vw->req->handler_state = NULL;
		vd_http_error(vw->req, 503, "overloaded", "the daemon is stopping", RETRY_AFTER);
		free(vw);
	}
}

/* The path form: a copy the store knows is verified now; any other path
 * is looked up off the loop first. Takes vw. */
static void verify_path(vd_api *api, verify_wait *vw)
{
	const vd_copy *c;

	if (store_relpath(api, vw->vr.path, vw->relpath, sizeof(vw->relpath)) < 0) {
		vd_http_error(vw->req, 400, "bad_request",
		    "path must name an artifact inside the store, without \"..\" or hidden parts", NULL);
		free(vw);
		return;
	}
	if ((c = vd_store_copy(api->store, vw->relpath)) != NULL)
		verify_copies(api, vw, &c, 1);
	else
		lookup_start(api, vw);
}

/* The content hash and RoundClose forms: every copy claiming the hash. */
static void verify_hash(vd_api *api, verify_wait *vw)
{
	const vd_group *g = vd_store_group(api->store, vw->vr.hash);

	if (g == NULL) {
		vd_http_error(vw->req, 404, "not_found", "no artifact in the store claims this hash", NULL);
		free(vw);
		return;
	}
	verify_copies(api, vw, (const vd_copy *const *)g->copies, g->n);
}

static void post_verify(vd_api *api, vd_req *r)
{
	verify_wait *vw;
	char err[256];
	unsigned wait;

	if (!vd_is_json_content_type(vd_req_header(r, "Content-Type"))) {
		vd_http_error(r, 415, "unsupported_media_type", "the body must be application/json", NULL);
		return;
	}
	if (parse_wait(r, api->cfg->max_wait, &wait) < 0) {
		vd_http_error(r, 400, "bad_request", "wait must be a whole number of seconds from 0 to " VD_XSTR(VD_API_MAX_WAIT), NULL);
		return;
	}
	if ((vw = calloc(1, sizeof(*vw))) == NULL) {
		out_of_memory(r, "starting the verification");
		return;
	}
	vw->api = api;
	vw->req = r;
	vw->wait = wait;
	if (vd_parse_verify(r->body.p ? r->body.p : (const uint8_t *)"", r->body.len,
	    api->cfg->max_json_depth, &vw->vr, err, sizeof(err)) < 0) {
		vd_http_error(r, 400, "bad_request", err, NULL);
		free(vw);
		return;
	}
	if (vw->vr.form == VD_VERIFY_PATH)
		verify_path(api, vw);
	else
		verify_hash(api, vw);
}

/* ---- POST /roundclose -------------------------------------------------- */

/* A RoundClose accepted, in the audit: who, from where, when first. */
static void post_audit(vd_api *api, vd_req *r, const char *run, const vd_roundclose *rc,
    const char *key_id, char *peer, size_t n, vd_audit *a)
{
	peer_address(r, peer, n);
	*a = (vd_audit){
		.run = run, .kind = VD_AUDIT_ROUND_CLOSE, .number = rc->round_index,
		.hash = rc->global_model_hash,
		.source = vd_commit_source_name(key_id ? VD_SRC_SIGNED : VD_SRC_ROUNDCLOSE),
		.author = key_id ? VD_AUDIT_KEY : token_holder(api, r), .key_id = key_id, .peer = peer,
	};
}

/* The trusted keys whose signatures on a posted statement verified. */
typedef struct vd_post_keys {
	const char *ids[VD_DSSE_MAX_SIGS];
	size_t n;
} vd_post_keys;

/* A RoundClose naming an artifact of its run whose header says another
 * round commits nothing (trust.md section 8): 1 with the 422 sent. */
static int round_mismatch(vd_api *api, vd_req *r, const char *run, const vd_roundclose *rc)
{
	char detail[400];
	int64_t hr;

	if (!vd_store_round_mismatch(api->store, run, rc->round_index, rc->global_model_hash, &hr))
		return 0;
	snprintf(detail, sizeof(detail), "a RoundClose for round %lld commits the artifact of round %lld, but %s is the artifact of round %lld in run %s",
	    (long long)rc->round_index, (long long)rc->round_index + 1, rc->global_model_hash,
	    (long long)hr, vd_run_name(run));
	vd_metrics_envelope_rejected(api->metrics, VD_ENV_ROUND_MISMATCH);
	vd_logf(VD_LOG_WARN, &(vd_log_fields){ .run = vd_run_name(run), .code = "round_mismatch",
	    .content_hash = rc->global_model_hash }, "RoundClose refused: %s", detail);
	vd_http_error(r, 422, "round_mismatch", detail, NULL);
	return 1;
}

static void answer_post(vd_api *api, vd_req *r, const char *run, const vd_roundclose *rc,
    const vd_post_keys *pk, const uint8_t *env, size_t env_len)
{
	char existing[VD_HASH_HEX_LEN + 1], detail[400], peer[PEER_MAX];
	vd_log_fields f = { .run = vd_run_name(run), .content_hash = rc->global_model_hash };
	const char *key_id = pk ? pk->ids[0] : NULL;
	vd_audit audit;
	int res;

	if (round_mismatch(api, r, run, rc))
		return;
	post_audit(api, r, run, rc, key_id, peer, sizeof(peer), &audit);
	/* Every trusted key that signed it is remembered with it, so that a
	 * statement re-signed by a current key survives the revocation of an
	 * old one. */
	res = vd_store_post_commitment(api->store, run, rc->round_index, rc->global_model_hash,
	    rc->schema_version, pk ? pk->ids : NULL, pk ? pk->n : 0, env, env_len, &audit, existing);
	if (res < 0) {
		vd_http_error(r, 503, "overloaded", "the commitment could not be stored durably; try again",
		    RETRY_AFTER);
		return;
	}
	if (res == VD_POST_CONFLICT) {
		f.code = "commitment_conflict";
		vd_logf(VD_LOG_WARN, &f, "RoundClose for run %s round %lld names %s, but %s is already committed",
		    vd_run_name(run), (long long)rc->round_index, rc->global_model_hash, existing);
		snprintf(detail, sizeof(detail), "round %lld of run %s is already committed to %s",
		    (long long)rc->round_index, vd_run_name(run), existing);
		vd_http_error(r, 409, "commitment_conflict", detail, NULL);
		return;
	}
	if (res == VD_POST_NEW)
		vd_logf(VD_LOG_INFO, &f, "commitment recorded: run %s round %lld -> %s (%s%s)", vd_run_name(run),
		    (long long)rc->round_index, rc->global_model_hash, key_id ? "key " :
		    strcmp(token_holder(api, r), VD_AUDIT_OPERATOR) == 0 ? "operator token" : "run token",
		    key_id ? key_id : "");
	send_json(r, res == VD_POST_NEW ? 201 : 200,
	    vd_view_commitment_posted(run, rc, key_id, res == VD_POST_NEW), NULL,
	    "answering the commitment (it is recorded)");
}

/* A commitment names a run: a run directory of the store (not a file,
 * FIFO, symbolic link or artifact directory), or one the configuration
 * names before its directory exists. */
static int not_started(vd_api *api, vd_req *r)
{
	char detail[160];
	const char *why = starting(api);

	if (why == NULL)
		return 0;
	snprintf(detail, sizeof(detail), "%s; try again", why);
	vd_http_error(r, 503, "not_ready", detail, RETRY_AFTER);
	return 1;
}

static int known_run(vd_api *api, vd_req *r, const char *run)
{
	char detail[VD_RUN_MAX + 160];

	if (not_started(api, r))
		return 0;
	if (vd_store_run_known(api->store, run))
		return 1;
	snprintf(detail, sizeof(detail), "run %s is not a run directory of the store (none, or not a plain directory) nor a run the configuration names",
	    vd_run_name(run));
	vd_http_error(r, 400, "bad_request", detail, NULL);
	return 0;
}

/* A body whose top-level object has "payloadType" is a DSSE envelope. */
static int is_envelope(const uint8_t *p, size_t len)
{
	vd_json_opts opts = { VD_DSSE_MAX_DEPTH, 0 };
	vd_jdoc doc;
	char msg[64];
	int yes;

	if (len > VD_DSSE_MAX_BYTES)
		return memmem(p, len, "\"payloadType\"", 13) != NULL;
	if (vd_json_parse(p, len, &opts, &doc, msg, sizeof(msg)) < 0)
		return 0;
	yes = doc.root->type == VD_JOBJ && vd_json_get(doc.root, "payloadType") != NULL;
	vd_jdoc_free(&doc);
	return yes;
}

static void refuse_envelope(vd_api *api, vd_req *r, vd_env_reason why, const char *detail)
{
	int auth = why == VD_ENV_NO_SIGNATURE || why == VD_ENV_UNKNOWN_KEY ||
	    why == VD_ENV_BAD_SIGNATURE;

	vd_metrics_envelope_rejected(api->metrics, why);
	vd_logf(VD_LOG_WARN, &(vd_log_fields){ .code = vd_env_reason_name(why) },
	    "signed statement refused (%s): %s", vd_env_reason_name(why), detail);
	vd_http_error(r, auth ? 403 : 400, auth ? "forbidden" : "bad_request", detail, NULL);
}

static void post_checkpoint(vd_api *api, vd_req *r, const vd_statement *st, const vd_post_keys *pk)
{
	char peer[PEER_MAX];
	const char *key_id = pk->ids[0];
	vd_audit audit;
	int res;

	peer_address(r, peer, sizeof(peer));
	vd_audit_signed(&audit, st, st->run, key_id, peer, NULL);
	/* Every trusted signer is remembered with it, as for a RoundClose. */
	res = vd_store_post_checkpoint(api->store, st, pk->ids, pk->n, r->body.p, r->body.len, &audit);
	if (res < 0) {
		vd_http_error(r, 503, "overloaded", "the checkpoint could not be stored durably; try again",
		    RETRY_AFTER);
		return;
	}
	if (res == VD_POST_NEW)
		vd_logf(VD_LOG_INFO, &(vd_log_fields){ .run = vd_run_name(st->run) },
		    "ledger checkpoint recorded: run %s records 1..%llu (key %s)",
		    vd_run_name(st->run), (unsigned long long)st->records, key_id);
	send_json(r, res == VD_POST_NEW ? 201 : 200,
	    vd_view_checkpoint_posted(st, key_id, res == VD_POST_NEW), NULL,
	    "answering the checkpoint (it is recorded)");
}

/* A signed statement needs no token: the key is the authority. */
static void post_envelope(vd_api *api, vd_req *r, const char *qrun)
{
	char why[VD_DETAIL_MAX], key_ids[VD_DSSE_MAX_SIGS][VD_KEYID_LEN + 1];
	vd_dsse env;
	vd_statement st;
	const vd_key *signers[VD_DSSE_MAX_SIGS];
	vd_post_keys pk;
	vd_env_reason rc;
	vd_roundclose msg;
	size_t i;

	if ((rc = vd_dsse_parse(r->body.p, r->body.len, &env, why, sizeof(why))) != VD_ENV_OK) {
		refuse_envelope(api, r, rc, why);
		return;
	}
	rc = vd_statement_parse(env.payload_type, env.payload, env.payload_len, &st, why, sizeof(why));
	pk.n = 0;
	if (rc == VD_ENV_OK && (rc = vd_dsse_verify_all(&env, vd_store_keys(api->store), signers,
	    VD_DSSE_MAX_SIGS, &pk.n)) != VD_ENV_OK)
		snprintf(why, sizeof(why), "%s", rc == VD_ENV_BAD_SIGNATURE ?
		    "a trusted key's signature does not verify" :
		    "no signature by a key in trusted_keys");
	vd_dsse_free(&env);
	if (rc != VD_ENV_OK) {
		refuse_envelope(api, r, rc, why);
		return;
	}
	if (strcmp(st.run, ".") != 0 && !vd_relpath_ok(st.run)) {
		refuse_envelope(api, r, VD_ENV_PAYLOAD, "the statement's run must name a directory inside the store, without \"..\" or hidden parts");
		return;
	}
	if (strcmp(st.run, ".") == 0)
		st.run[0] = '\0';
	if (qrun != NULL && strcmp(qrun, st.run) != 0) {
		refuse_envelope(api, r, VD_ENV_WRONG_RUN, "the statement names another run than ?run=");
		return;
	}
	if (!known_run(api, r, st.run))
		return;
	for (i = 0; i < pk.n; i++) {
		snprintf(key_ids[i], sizeof(key_ids[i]), "%s", vd_key_id(signers[i]));
		pk.ids[i] = key_ids[i];
	}
	if (st.kind == VD_STMT_CHECKPOINT) {
		post_checkpoint(api, r, &st, &pk);
		return;
	}
	memset(&msg, 0, sizeof(msg));
	msg.schema_version = st.schema_version;
	msg.round_index = st.round_index;
	memcpy(msg.global_model_hash, st.hash, sizeof(msg.global_model_hash));
	answer_post(api, r, st.run, &msg, &pk, r->body.p, r->body.len);
}

static void post_roundclose(vd_api *api, vd_req *r)
{
	char err[256], run[1024];
	const uint8_t *body = r->body.p ? r->body.p : (const uint8_t *)"";
	vd_roundclose rc;
	int token = vd_req_header(r, "Authorization") != NULL;

	/* A token, when given, is checked first: a wrong one is 401 whatever
	 * the body. Without one, only a signed envelope is accepted. */
	int json = vd_is_json_content_type(vd_req_header(r, "Content-Type"));

	if (run_param(r, run, sizeof(run)) < 0) {
		bad_run(r);
		return;
	}
	if ((token || !json || !is_envelope(body, r->body.len)) && !authorized_for(api, r, run))
		return;
	if (!json) {
		vd_http_error(r, 415, "unsupported_media_type", "the body must be application/json", NULL);
		return;
	}
	if (is_envelope(body, r->body.len)) {
		post_envelope(api, r, vd_req_query(r, "run") ? run : NULL);
		return;
	}
	if (!known_run(api, r, run))
		return;
	if (vd_parse_roundclose(body, r->body.len, api->cfg->max_json_depth, &rc, err,
	    sizeof(err)) < 0) {
		vd_http_error(r, 400, "bad_request", err, NULL);
		return;
	}
	answer_post(api, r, run, &rc, NULL, NULL, 0);
}

/* DELETE /ledger?path=: forget what was remembered of one ledger, so that
 * it is learned again from the file as it is now (trust.md section 5). */
static void delete_ledger(vd_api *api, vd_req *r)
{
	const char *path = vd_req_query(r, "path");
	int rc;

	if (!authorized(api, r))
		return;
	if (path == NULL || !vd_relpath_ok(path)) {
		vd_http_error(r, 400, "bad_request", "path must name a ledger file inside the store, as /chain lists it", NULL);
		return;
	}
	if ((rc = vd_store_forget_ledger(api->store, path)) == -ENOENT) {
		vd_http_error(r, 404, "not_found", "no ledger with that path is remembered", NULL);
		return;
	}
	if (rc < 0) {
		vd_http_error(r, 503, "overloaded", "the ledger's memory could not be removed; try again",
		    RETRY_AFTER);
		return;
	}
	send_json(r, 200, vd_view_ledger_forgotten(path), NULL,
	    "answering (the ledger's memory is removed)");
}

/* DELETE /commitment?run=&round=&hash=&reason=: the operator withdraws a
 * commitment, whatever its source; recorded durably and audited. */
static int withdrawal_params(vd_req *r, vd_withdrawal *w)
{
	const char *round = vd_req_query(r, "round"), *hash = vd_req_query(r, "hash");
	const char *reason = vd_req_query(r, "reason");
	char *end;

	memset(w, 0, sizeof(*w));
	if (run_param(r, w->run, sizeof(w->run)) < 0) {
		bad_run(r);
		return -EINVAL;
	}
	errno = 0;
	if (round == NULL || round[0] < '0' || round[0] > '9' ||
	    (w->round_index = strtoll(round, &end, 10)) < 0 || *end != '\0' || errno != 0) {
		vd_http_error(r, 400, "bad_request", "round must be the RoundClose round: a whole number, 0 or above", NULL);
		return -EINVAL;
	}
	if (hash == NULL || !vd_is_hex64((vd_str){ hash, strlen(hash) })) {
		vd_http_error(r, 400, "bad_request", "hash must be the committed hash: 64 lowercase hex digits", NULL);
		return -EINVAL;
	}
	if (reason != NULL && strlen(reason) > VD_WITHDRAW_REASON_MAX) {
		vd_http_error(r, 400, "bad_request", "reason is longer than " VD_XSTR(VD_WITHDRAW_REASON_MAX) " bytes", NULL);
		return -EINVAL;
	}
	memcpy(w->hash, hash, sizeof(w->hash));
	snprintf(w->reason, sizeof(w->reason), "%s", reason ? reason : "");
	peer_address(r, w->peer, sizeof(w->peer));
	return 0;
}

static void delete_commitment(vd_api *api, vd_req *r)
{
	vd_withdrawal w;
	int rc;

	if (!authorized(api, r) || withdrawal_params(r, &w) < 0)
		return;
	if (not_started(api, r))
		return;
	if ((rc = vd_store_withdraw(api->store, &w)) == -ENOENT) {
		vd_http_error(r, 404, "not_found", "no source commits that hash for that run and round", NULL);
		return;
	}
	if (rc < 0) {
		vd_http_error(r, 503, "overloaded", "the withdrawal could not be stored durably; try again",
		    RETRY_AFTER);
		return;
	}
	if (rc == VD_POST_NEW)
		vd_logf(VD_LOG_WARN, &(vd_log_fields){ .run = vd_run_name(w.run), .content_hash = w.hash },
		    "commitment withdrawn by the operator from %s: run %s round %lld -> %s (%s); reason: %s",
		    w.peer, vd_run_name(w.run), (long long)w.round_index, w.hash, w.sources, w.reason);
	send_json(r, 200, vd_view_withdrawn(&w, rc == VD_POST_NEW), NULL,
	    "answering (the withdrawal is recorded)");
}

/* ---- routing ---------------------------------------------------------- */
/* ---- the status page (vd_page.h) --------------------------------------- */

static void get_page(vd_api *api, vd_req *r)
{
	vd_page_index(r);
}

static void get_page_css(vd_api *api, vd_req *r)
{
	vd_page_css(r);
}

static void get_page_js(vd_api *api, vd_req *r)
{
	vd_page_js(r);
}

static void get_page_icon(vd_api *api, vd_req *r)
{
	vd_page_icon(r);
}

static void get_summary(vd_api *api, vd_req *r)
{
	vd_page_facts f = { starting(api), api->cfg, api->signing_key, vd_store_keys(api->store),
		vd_store_lineage(api->store), VD_API_RETRY_AFTER };

	vd_page_summary(r, &f);
}

typedef void (*route_fn)(vd_api *api, vd_req *r);

static const struct route {
	const char *path;
	int prefix;
	const char *method;      /* GET routes answer HEAD too */
	int sync;                /* reads lineage: it catches up first (vd_store_sync) */
	route_fn fn;
} routes[] = {
	{ "/artifact/", 1, "GET", 1, get_artifact_route },
	{ "/verify", 0, "POST", 1, post_verify },
	{ "/roundclose", 0, "POST", 1, post_roundclose },
	{ "/ledger", 0, "DELETE", 1, delete_ledger },
	{ "/commitment", 0, "DELETE", 1, delete_commitment },
	{ "/chain", 0, "GET", 1, get_chain },
	{ "/key", 0, "GET", 0, get_key },
	{ "/artifacts", 0, "GET", 1, get_artifacts },
	{ "/metrics", 0, "GET", 1, get_metrics },
	{ "/healthz", 0, "GET", 0, get_healthz },
	{ "/readyz", 0, "GET", 0, get_readyz },
	{ "/events", 0, "GET", 1, get_events },
	{ "/alerts", 0, "GET", 1, get_alerts },
	{ "/commitments", 0, "GET", 1, get_commitments },
	/* The status page for a browser (vd_page.h). */
	{ "/", 0, "GET", 0, get_page },
	{ "/status.css", 0, "GET", 0, get_page_css },
	{ "/status.js", 0, "GET", 0, get_page_js },
	{ "/status.svg", 0, "GET", 0, get_page_icon },
	{ "/summary", 0, "GET", 1, get_summary },
};

static int method_ok(const struct route *rt, const char *m)
{
	if (strcmp(rt->method, "GET") == 0 && strcmp(m, "HEAD") == 0)
		return 1;
	return strcmp(rt->method, m) == 0;
}

void vd_api_handle(vd_req *r, void *arg)
{
	vd_api *api = arg;
	const struct route *rt;
	size_t i, n;

	for (i = 0; i < VD_ARRAY_LEN(routes); i++) {
		rt = &routes[i];
		n = strlen(rt->path);
		if (rt->prefix ? strncmp(r->url, rt->path, n) != 0 : strcmp(r->url, rt->path) != 0)
			continue;
		/* Label by route, never by the raw path: a hash is not a label. */
		r->route = rt->prefix ? "/artifact" : rt->path;
		if (!method_ok(rt, r->method)) {
			not_allowed(r, strcmp(rt->method, "GET") == 0 ? "GET, HEAD" : rt->method);
		} else {
			if (rt->sync)
				vd_store_sync(api->store);
			rt->fn(api, r);
		}
		return;
	}
	vd_http_error(r, 404, "not_found", "no such endpoint", NULL);
}

void vd_api_done(vd_req *r, double seconds, void *arg)
{
	vd_api *api = arg;
	char method[16], path[VD_LOG_PATH_MAX + 1];

	vd_metrics_http(api->metrics, r->route, r->status, seconds);
	/* Every answer is counted in /metrics. A line for each at info would
	 * take a sixth of the loop's rate under load and flood the journal,
	 * so info keeps the refusals and errors, debug all of them. The line
	 * names the path asked, which the route label of the metrics cannot
	 * (an unknown path is only "other" there). */
	if (vd_log_would(r->status >= 400 ? VD_LOG_INFO : VD_LOG_DEBUG)) {
		vd_log_path(method, sizeof(method), r->method ? r->method : "?");
		vd_log_path(path, sizeof(path), r->url ? r->url : "?");
		vd_log(r->status >= 400 ? VD_LOG_INFO : VD_LOG_DEBUG, "%s %s %u %.1f ms", method, path,
		    r->status, seconds * 1000.0);
	}
}

/*
 * The HTTP API (interfaces.md section 3): the routes, what each reads from
 * a request and how it answers, and POST /verify with its waiting. Runs on
 * the loop thread; what an answer shows is in vd_views, who may commit in
 * vd_auth.
 */
#ifndef VD_API_H
#define VD_API_H

#include "vd_auth.h"
#include "vd_config.h"
#include "vd_http.h"
#include "vd_keys.h"
#include "vd_limits.h"
#include "vd_metrics.h"
#include "vd_store.h"

#define VD_API_RETRY_AFTER "5"     /* seconds, with 503 */

struct vd_api_lookup;

typedef struct vd_api {
	vd_store *store;
	vd_metrics *metrics;
	vd_http *http;             /* set once listening */
	const vd_config *cfg;
	int state_ready;           /* the state database is loaded */
	double start_time;
	vd_auth auth;              /* token_file and run_token_file */
	vd_key *signing_key;       /* signs verdicts; never logged */
	vd_key *oms_key;           /* signs OMS bundles; never logged */
	struct vd_api_oms *omss;   /* GET /artifact/<hash>/oms being signed off the loop */
	struct vd_api_lookup *lookups;  /* POST /verify paths being looked up off the loop */
} vd_api;

/* (Re)read the operator tokens: cfg->token_file and run_token_file. */
void vd_api_load_token(vd_api *api);

void vd_api_handle(vd_req *r, void *arg);
/* Before a request's body is read: VD_HTTP_REFUSED when it was
 * answered, else VD_HTTP_PROCEED (a vd_http_early_fn). */
enum vd_http_early vd_api_early(vd_req *r, void *arg);
void vd_api_done(vd_req *r, double seconds, void *arg);

/* Answer the requests whose connection is suspended while a path is
 * looked up: libmicrohttpd cannot stop with a connection suspended. Call
 * before vd_http_stop. */
void vd_api_stop(vd_api *api);

#endif

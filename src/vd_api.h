/*
 * The HTTP API (interfaces.md section 3): routes, the artifact status
 * object, and POST /verify with its waiting. Runs on the loop thread.
 */
#ifndef VD_API_H
#define VD_API_H

#include <json-c/json.h>

#include "vd_config.h"
#include "vd_keys.h"
#include "vd_http.h"
#include "vd_metrics.h"
#include "vd_store.h"

#define VD_API_DEFAULT_WAIT 30     /* seconds, POST /verify?wait= */
#define VD_API_MAX_WAIT 300
#define VD_API_RETRY_AFTER "5"     /* seconds, with 503 */
#define VD_TOKEN_MAX 512           /* bytes in the operator token */
#define VD_TOKEN_MIN 16

typedef struct vd_api {
	vd_store *store;
	vd_metrics *metrics;
	vd_http *http;             /* set once listening */
	const vd_config *cfg;
	int state_ready;           /* the state database is loaded */
	double start_time;
	char token[VD_TOKEN_MAX + 1];  /* never logged, never echoed */
	size_t token_len;          /* 0: POST /roundclose is refused */
	char token_error[256];
	vd_key *signing_key;       /* signs verdicts; never logged */
} vd_api;

/* (Re)read the operator token from cfg->token_file. */
void vd_api_load_token(vd_api *api);

void vd_api_handle(vd_req *r, void *arg);
/* Before a request's body is read: nonzero when it was answered. */
int vd_api_early(vd_req *r, void *arg);
void vd_api_done(vd_req *r, double seconds, void *arg);

/* The status object of every copy claiming hash (NULL if none). */
json_object *vd_api_status(vd_api *api, const char *hash);

#endif

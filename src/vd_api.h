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
#define VD_PAGE_MAX 10000          /* ?limit= of a paginated listing, at most */
#define VD_TOKEN_MIN 16

/* An operator token as read from its file: never logged, never echoed. */
typedef struct vd_token {
	char run[VD_PIN_RUN_MAX];  /* the run it commits for; unused for token_file */
	char value[VD_TOKEN_MAX + 1];
	size_t len;                /* 0: none usable */
	char error[256];           /* why not, when a file is named */
} vd_token;

typedef struct vd_api {
	vd_store *store;
	vd_metrics *metrics;
	vd_http *http;             /* set once listening */
	const vd_config *cfg;
	int state_ready;           /* the state database is loaded */
	double start_time;
	vd_token token;            /* token_file: commits for every run */
	vd_token run_tokens[VD_CONFIG_MAX_RUN_TOKENS];  /* run_token_file, in its order */
	size_t n_run_tokens;
	vd_key *signing_key;       /* signs verdicts; never logged */
} vd_api;

/* (Re)read the operator tokens: cfg->token_file and run_token_file. */
void vd_api_load_token(vd_api *api);

void vd_api_handle(vd_req *r, void *arg);
/* Before a request's body is read: nonzero when it was answered. */
int vd_api_early(vd_req *r, void *arg);
void vd_api_done(vd_req *r, double seconds, void *arg);

/* The status object of every copy claiming hash (NULL if none). */
json_object *vd_api_status(vd_api *api, const char *hash);

#endif

/*
 * Who may commit: the operator token (token_file) commits for every run,
 * a run's own token (run_token_file) for that run only. Tokens are read
 * from their files, taken from an Authorization: Bearer header, and
 * compared in constant time. Never logged, never echoed. No HTTP here:
 * the routes turn a refusal into 401 or 403.
 */
#ifndef VD_AUTH_H
#define VD_AUTH_H

#include <stddef.h>

#include "vd_config.h"
#include "vd_limits.h"


/* The sentence vd_auth_check gives: a token file's path and why. */
#define VD_AUTH_WHY_MAX (VD_CONFIG_PATH_MAX + 128)

/* A token as read from its file. */
typedef struct vd_token {
	char run[VD_PIN_RUN_MAX];  /* the run it commits for; unused for token_file */
	char value[VD_TOKEN_MAX + 1];
	size_t len;                /* 0: none usable */
	char file[VD_CONFIG_PATH_MAX];  /* where it was last read from */
	int status;                /* 0, or how that read failed: -EINVAL when the
	                            * file holds no valid token, else its -errno */
} vd_token;

typedef struct vd_auth {
	vd_token operator_token;   /* token_file: commits for every run */
	vd_token run_tokens[VD_CONFIG_MAX_RUN_TOKENS];  /* run_token_file, in its order */
	size_t n_run_tokens;
} vd_auth;

typedef enum vd_auth_result {
	VD_AUTH_OPERATOR,          /* the operator token */
	VD_AUTH_RUN,               /* the run's own token */
	VD_AUTH_UNCONFIGURED,      /* no token usable for this run: nothing can pass */
	VD_AUTH_DENIED             /* no Bearer token, or not a usable one */
} vd_auth_result;

/* (Re)read cfg's token_file and run_token_file. A file that cannot be read
 * keeps the token read from it before; the failure is logged, and kept in
 * its status for vd_auth_check to explain. */
void vd_auth_load(vd_auth *a, const vd_config *cfg);

/* Whom the Authorization header (NULL: none) speaks for: the operator, or
 * run's own token (run NULL: the operator's alone is asked for; "" is the
 * store root). With VD_AUTH_UNCONFIGURED, why (NULL: not asked for) says
 * why no token is usable, in a sentence for the client. */
vd_auth_result vd_auth_check(const vd_auth *a, const char *authorization,
    const char *run, char *why, size_t whylen);

#endif

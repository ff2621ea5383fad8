#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "vd_auth.h"
#include "vd_hash.h"
#include "vd_log.h"

#define BEARER "Bearer "
#define BEARER_LEN 7

/* Why t's file gave no token, from what read_token kept of it. */
static void token_why(const vd_token *t, char *out, size_t n)
{
	if (t->status == -EINVAL)
		snprintf(out, n,
		    "the token file %s must hold one token of %d to %d printable characters",
		    t->file, VD_TOKEN_MIN, VD_TOKEN_MAX);
	else
		snprintf(out, n, "cannot read the token file %s: %s", t->file, strerror(-t->status));
}

/* One token file: a line of VD_TOKEN_MIN to VD_TOKEN_MAX printable
 * characters. An unreadable file keeps the token read before. */
static void read_token(const char *path, vd_token *t)
{
	char buf[VD_TOKEN_MAX + 2], why[VD_AUTH_WHY_MAX];
	size_t n = 0, i;
	FILE *f;

	snprintf(t->file, sizeof(t->file), "%s", path);
	t->status = 0;
	if ((f = fopen(path, "re")) == NULL) {
		t->status = -errno;
		token_why(t, why, sizeof(why));
		log_error("%s; %s", why, t->len ? "keeping the token read before" :
		    "commitments with it are refused until it can be read");
		return;
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	for (i = 0; i < n && buf[i] > ' ' && buf[i] < 0x7f; i++)
		;
	if (n < VD_TOKEN_MIN || n > VD_TOKEN_MAX || i != n) {
		t->status = -EINVAL;
		token_why(t, why, sizeof(why));
		log_error("%s", why);
		t->len = 0;
	} else {
		memcpy(t->value, buf, n + 1);
		t->len = n;
	}
	explicit_bzero(buf, sizeof(buf));
}

void vd_auth_load(vd_auth *a, const vd_config *c)
{
	vd_token old[VD_CONFIG_MAX_RUN_TOKENS];
	size_t i, j, n = a->n_run_tokens;

	if (c->token_file[0] == '\0')
		memset(&a->operator_token, 0, sizeof(a->operator_token));
	else
		read_token(c->token_file, &a->operator_token);
	/* A run keeps the token read before when its file cannot be read. */
	memcpy(old, a->run_tokens, sizeof(old));
	memset(a->run_tokens, 0, sizeof(a->run_tokens));
	for (i = 0; i < c->n_run_tokens; i++) {
		for (j = 0; j < n && strcmp(old[j].run, c->run_tokens[i].run) != 0; j++)
			;
		if (j < n)
			a->run_tokens[i] = old[j];
		snprintf(a->run_tokens[i].run, sizeof(a->run_tokens[i].run), "%s", c->run_tokens[i].run);
		read_token(c->run_tokens[i].file, &a->run_tokens[i]);
	}
	a->n_run_tokens = c->n_run_tokens;
	explicit_bzero(old, sizeof(old));
}

/* Compare digests, so neither the bytes nor the length leak through time. */
static int token_ok(const vd_token *t, const char *given, size_t len)
{
	char ha[VD_HASH_HEX_LEN + 1], hb[VD_HASH_HEX_LEN + 1];

	if (t->len == 0 || vd_sha256_hex(given, len, ha) < 0 || vd_sha256_hex(t->value, t->len, hb) < 0)
		return 0;
	return CRYPTO_memcmp(ha, hb, VD_HASH_HEX_LEN) == 0;
}

static const vd_token *run_token(const vd_auth *a, const char *run)
{
	size_t i;

	for (i = 0; run != NULL && i < a->n_run_tokens; i++)
		if (strcmp(a->run_tokens[i].run, run) == 0)
			return &a->run_tokens[i];
	return NULL;
}

/* The token of "Authorization: Bearer <token>" (the scheme in any case),
 * or NULL. */
static const char *bearer(const char *authorization)
{
	if (authorization == NULL || strncasecmp(authorization, BEARER, BEARER_LEN) != 0)
		return NULL;
	return authorization + BEARER_LEN;
}

vd_auth_result vd_auth_check(const vd_auth *a, const char *authorization,
    const char *run, char *why, size_t whylen)
{
	const vd_token *rt = run_token(a, run);
	const char *given = bearer(authorization);
	size_t len;

	if (a->operator_token.len == 0 && (rt == NULL || rt->len == 0)) {
		if (why == NULL)
			;
		else if (rt != NULL && rt->status < 0)
			token_why(rt, why, whylen);
		else if (a->operator_token.status < 0)
			token_why(&a->operator_token, why, whylen);
		else
			snprintf(why, whylen, "%s",
			    "no operator token is configured (token_file), so commitments cannot be posted");
		return VD_AUTH_UNCONFIGURED;
	}
	if (given == NULL)
		return VD_AUTH_DENIED;
	len = strlen(given);
	/* The operator's first: a token that is both speaks for the operator. */
	if (token_ok(&a->operator_token, given, len))
		return VD_AUTH_OPERATOR;
	if (rt != NULL && token_ok(rt, given, len))
		return VD_AUTH_RUN;
	return VD_AUTH_DENIED;
}

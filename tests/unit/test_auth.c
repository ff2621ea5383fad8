/*
 * Tokens: who a Bearer header speaks for, and why nothing can pass when
 * no token file gives a usable token (the sentence a 403 carries).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "vd_auth.h"
#include "vd_log.h"

#define TOKEN "0123456789abcdef0123456789abcdef"

static void write_temp(char *path, size_t pathlen, const char *text)
{
	const char *dir = getenv("TMPDIR");
	int fd;

	snprintf(path, pathlen, "%s/vd-auth-XXXXXX", dir && dir[0] ? dir : "/tmp");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(close(fd), 0);
}

static void test_unconfigured(void **state)
{
	(void)state;
	static vd_auth a;
	vd_config c;
	char why[2048];

	vd_config_defaults(&c);
	memset(&a, 0, sizeof(a));
	vd_auth_load(&a, &c);
	assert_int_equal(vd_auth_check(&a, "Bearer " TOKEN, NULL, why, sizeof(why)),
	    VD_AUTH_UNCONFIGURED);
	assert_string_equal(why,
	    "no operator token is configured (token_file), so commitments cannot be posted");
	/* Not asked for: nothing is written. */
	assert_int_equal(vd_auth_check(&a, NULL, NULL, NULL, 0), VD_AUTH_UNCONFIGURED);
}

static void test_operator(void **state)
{
	(void)state;
	static vd_auth a;
	vd_config c;
	char path[1024], why[2048];

	write_temp(path, sizeof(path), TOKEN "\n");
	vd_config_defaults(&c);
	snprintf(c.token_file, sizeof(c.token_file), "%s", path);
	memset(&a, 0, sizeof(a));
	vd_auth_load(&a, &c);
	assert_int_equal(vd_auth_check(&a, "Bearer " TOKEN, NULL, why, sizeof(why)), VD_AUTH_OPERATOR);
	assert_int_equal(vd_auth_check(&a, "bearer " TOKEN, "r", why, sizeof(why)), VD_AUTH_OPERATOR);
	assert_int_equal(vd_auth_check(&a, "Bearer x" TOKEN, NULL, why, sizeof(why)), VD_AUTH_DENIED);
	assert_int_equal(vd_auth_check(&a, NULL, NULL, why, sizeof(why)), VD_AUTH_DENIED);

	/* The file gone: the token read before still passes. */
	assert_int_equal(unlink(path), 0);
	vd_auth_load(&a, &c);
	assert_int_equal(vd_auth_check(&a, "Bearer " TOKEN, NULL, why, sizeof(why)), VD_AUTH_OPERATOR);
}

static void test_why(void **state)
{
	(void)state;
	static vd_auth a;
	vd_config c;
	char path[1024], why[2048], want[2200];

	/* Malformed: too short. */
	write_temp(path, sizeof(path), "short\n");
	vd_config_defaults(&c);
	snprintf(c.token_file, sizeof(c.token_file), "%s", path);
	memset(&a, 0, sizeof(a));
	vd_auth_load(&a, &c);
	assert_int_equal(vd_auth_check(&a, "Bearer short", NULL, why, sizeof(why)),
	    VD_AUTH_UNCONFIGURED);
	snprintf(want, sizeof(want),
	    "the token file %s must hold one token of %d to %d printable characters",
	    path, VD_TOKEN_MIN, VD_TOKEN_MAX);
	assert_string_equal(why, want);

	/* Unreadable, with no token before: the system's reason. */
	assert_int_equal(unlink(path), 0);
	vd_auth_load(&a, &c);
	assert_int_equal(vd_auth_check(&a, "Bearer " TOKEN, NULL, why, sizeof(why)),
	    VD_AUTH_UNCONFIGURED);
	snprintf(want, sizeof(want), "cannot read the token file %s: %s", path, strerror(ENOENT));
	assert_string_equal(why, want);

	/* A sentence cut to the caller's buffer stays terminated. */
	assert_int_equal(vd_auth_check(&a, NULL, NULL, why, 8), VD_AUTH_UNCONFIGURED);
	assert_string_equal(why, "cannot ");
}

static void test_run_token(void **state)
{
	(void)state;
	static vd_auth a;
	vd_config c;
	char path[1024], why[2048], want[2200], err[256];

	write_temp(path, sizeof(path), "x\n");
	vd_config_defaults(&c);
	snprintf(want, sizeof(want), "r1:%s", path);
	assert_int_equal(vd_config_set(&c, "run_token_file", want, err, sizeof(err)), 0);
	memset(&a, 0, sizeof(a));
	vd_auth_load(&a, &c);
	/* The run's own file says why, ahead of the operator's absence. */
	assert_int_equal(vd_auth_check(&a, "Bearer x", "r1", why, sizeof(why)), VD_AUTH_UNCONFIGURED);
	snprintf(want, sizeof(want),
	    "the token file %s must hold one token of %d to %d printable characters",
	    path, VD_TOKEN_MIN, VD_TOKEN_MAX);
	assert_string_equal(why, want);
	assert_int_equal(vd_auth_check(&a, "Bearer x", "r2", why, sizeof(why)), VD_AUTH_UNCONFIGURED);
	assert_string_equal(why,
	    "no operator token is configured (token_file), so commitments cannot be posted");

	/* Fixed: it speaks for its run alone. */
	write_temp(want, sizeof(want), TOKEN);
	assert_int_equal(rename(want, path), 0);
	vd_auth_load(&a, &c);
	assert_int_equal(vd_auth_check(&a, "Bearer " TOKEN, "r1", why, sizeof(why)), VD_AUTH_RUN);
	assert_int_equal(vd_auth_check(&a, "Bearer " TOKEN, "r2", why, sizeof(why)),
	    VD_AUTH_UNCONFIGURED);
	assert_int_equal(unlink(path), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unconfigured),
		cmocka_unit_test(test_operator),
		cmocka_unit_test(test_why),
		cmocka_unit_test(test_run_token),
	};

	vd_log_open("test_auth", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

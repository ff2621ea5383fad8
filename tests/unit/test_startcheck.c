/*
 * What a start needs of the system, and the signing keys it opens or
 * makes: each refusal is a negative errno, with the sentence that names
 * the path and the reason.
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
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "vd_attest.h"
#include "vd_startcheck.h"
#include "vd_state.h"

static void temp_dir(char *dir, size_t n)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, n, "%s/vd-startcheck-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
	assert_non_null(mkdtemp(dir));
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, mode), 0);
}

#define UNKNOWN_USER "user \"vd-no-such-user-x9\" does not exist"

/* Started as root, the account is named, exists and is not root. */
static void test_account(void **state)
{
	(void)state;
	vd_config c;
	vd_account a;
	char err[512];

	if (geteuid() != 0) {
		vd_config_defaults(&c);
		assert_int_equal(vd_account_of(&c, &a, err, sizeof(err)), 0);
		assert_int_equal(a.uid, geteuid());
		assert_false(a.switch_to);
		return;
	}
	vd_config_defaults(&c);
	c.user[0] = '\0';
	assert_int_equal(vd_account_of(&c, &a, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "refusing to run as root"));
	snprintf(c.user, sizeof(c.user), "root");
	assert_int_equal(vd_account_of(&c, &a, err, sizeof(err)), -EPERM);
	assert_string_equal(err, "user \"root\" is root; name an unprivileged user");
	snprintf(c.user, sizeof(c.user), "vd-no-such-user-x9");
	/* Some name services say why (errno set), most do not. */
	assert_int_equal(vd_account_of(&c, &a, err, sizeof(err)) < 0, 1);
	assert_int_equal(strncmp(err, UNKNOWN_USER, strlen(UNKNOWN_USER)), 0);
}

/* Checked here (no switch): a state_dir that is a file is -ENOTDIR, a
 * default signing key that is not a key -EINVAL, a good one 0. */
static void test_state_here(void **state)
{
	(void)state;
	char dir[512], path[600], err[1024], who[96], want[1024];
	vd_account self = { .switch_to = 0 };
	vd_config c;

	temp_dir(dir, sizeof(dir));
	vd_config_defaults(&c);
	snprintf(path, sizeof(path), "%s/file", dir);
	write_file(path, "x", 0600);
	snprintf(c.state_dir, sizeof(c.state_dir), "%s", path);
	assert_int_equal(vd_startcheck_state(&c, &self, err, sizeof(err)), -ENOTDIR);
	vd_account_describe_self(who, sizeof(who));
	snprintf(want, sizeof(want), "%s: the state directory is not a directory as %s: %s "
	    "(errno %d)", path, who, strerror(ENOTDIR), ENOTDIR);
	assert_string_equal(err, want);
	assert_int_equal(unlink(path), 0);

	snprintf(c.state_dir, sizeof(c.state_dir), "%s", dir);
	assert_int_equal(vd_startcheck_state(&c, &self, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/%s", dir, VD_SIGNING_KEY_FILE);
	write_file(path, "not a key\n", 0600);
	assert_int_equal(vd_startcheck_state(&c, &self, err, sizeof(err)), -EINVAL);
	assert_int_equal(strncmp(err, "signing_key: ", 13), 0);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
}

static void test_key_open(void **state)
{
	(void)state;
	char dir[512], path[600], err[1024], want[1024];
	struct stat st;
	vd_key *k = NULL;

	temp_dir(dir, sizeof(dir));
	/* Made when missing, its owner's alone. */
	snprintf(path, sizeof(path), "%s/%s", dir, VD_SIGNING_KEY_FILE);
	assert_int_equal(vd_attest_key_open(path, 1, &k, err, sizeof(err)), 0);
	assert_non_null(k);
	vd_key_free(k);
	k = NULL;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(vd_attest_key_open(path, 0, &k, err, sizeof(err)), 0);
	vd_key_free(k);
	k = NULL;
	/* An Ed25519 key does not sign OMS bundles. */
	assert_int_equal(vd_attest_oms_key_open(path, 0, &k, err, sizeof(err)), -EINVAL);
	assert_null(k);
	assert_non_null(strstr(err, "is an Ed25519 key"));
	assert_int_equal(unlink(path), 0);

	/* A directory that is not there: the system's reason. */
	snprintf(path, sizeof(path), "%s/gone/%s", dir, VD_SIGNING_KEY_FILE);
	assert_int_equal(vd_attest_key_open(path, 1, &k, err, sizeof(err)), -ENOENT);
	snprintf(want, sizeof(want), "cannot write the signing key %s: %s", path,
	    strerror(ENOENT));
	assert_string_equal(err, want);
	assert_null(k);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_account),
		cmocka_unit_test(test_state_here),
		cmocka_unit_test(test_key_open),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

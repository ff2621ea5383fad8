#include "config.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vd_attest.h"
#include "vd_state.h"
#include "vd_startcheck.h"

int vd_account_of(const vd_config *c, vd_account *a, char *err, size_t errlen)
{
	struct passwd *pw;

	memset(a, 0, sizeof(*a));
	if (geteuid() != 0) {
		pw = getpwuid(geteuid());
		snprintf(a->name, sizeof(a->name), "%s", pw ? pw->pw_name : "?");
		a->uid = geteuid();
		a->gid = getegid();
		return 0;
	}
	if (c->user[0] == '\0') {
		snprintf(err, errlen, "refusing to run as root; set \"user\" in the configuration to the account to switch to after binding");
		return -EPERM;
	}
	errno = 0;
	if ((pw = getpwnam(c->user)) == NULL) {
		int e = errno;

		snprintf(err, errlen, "user \"%s\" does not exist%s%s", c->user,
		    e ? ": " : "", e ? strerror(e) : "");
		return e ? -e : -ENOENT;
	}
	if (pw->pw_uid == 0) {
		snprintf(err, errlen, "user \"%s\" is root; name an unprivileged user", c->user);
		return -EPERM;
	}
	snprintf(a->name, sizeof(a->name), "%s", pw->pw_name);
	a->uid = pw->pw_uid;
	a->gid = pw->pw_gid;
	a->switch_to = 1;
	return 0;
}

int vd_account_switch(const vd_account *a, char *err, size_t errlen)
{
	const char *call = "initgroups";
	int e;

	if (initgroups(a->name, a->gid) < 0 || (call = "setgid", setgid(a->gid) < 0) ||
	    (call = "setuid", setuid(a->uid) < 0)) {
		e = errno;
		snprintf(err, errlen, "cannot switch to user %s (uid %u, gid %u): %s: %s (errno %d)",
		    a->name, (unsigned)a->uid, (unsigned)a->gid, call, strerror(e), e);
		return -e;
	}
	if (setuid(0) == 0) {
		snprintf(err, errlen, "could regain root after switching to user %s; refusing to run",
		    a->name);
		return -EPERM;
	}
	return 0;
}

void vd_account_describe_self(char *out, size_t n)
{
	struct passwd *pw = getpwuid(geteuid());

	snprintf(out, n, "user %s (uid %u)", pw ? pw->pw_name : "?", (unsigned)geteuid());
}

/* "PATH: WHAT as user NAME (uid N): REASON (errno E)"; -e. */
static int refuse(char *err, size_t errlen, const char *path, const char *what, int e)
{
	char who[96];

	vd_account_describe_self(who, sizeof(who));
	snprintf(err, errlen, "%s: %s as %s: %s (errno %d)", path, what, who, strerror(e), e);
	return -e;
}

/* The daemon makes the state directory itself (one level, mode 0700) after
 * switching user: then its parent must let that account add it. */
static int check_creatable(const char *dir, char *err, size_t errlen)
{
	char parent[VD_CONFIG_PATH_MAX];
	char *slash;

	snprintf(parent, sizeof(parent), "%s", dir);
	if ((slash = strrchr(parent, '/')) == parent)
		slash[1] = '\0';     /* a directory at the root: "/" */
	else if (slash != NULL)
		*slash = '\0';
	if (access(parent, W_OK | X_OK) < 0)
		return refuse(err, errlen, dir, "the state directory does not exist and cannot be created", errno);
	return 0;
}

/* A file of the database that exists must be readable and writable. */
static int check_db_file(const char *dir, const char *suffix, char *err, size_t errlen)
{
	char path[VD_CONFIG_PATH_MAX + 64];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s%s", dir, VD_STATE_FILE, suffix);
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : refuse(err, errlen, path, "cannot look up the state database", errno);
	if (access(path, R_OK | W_OK) < 0)
		return refuse(err, errlen, path, "cannot read and write the state database", errno);
	return 0;
}

static int check_default_key(const vd_config *c, char *err, size_t errlen)
{
	char path[VD_CONFIG_PATH_MAX + 32], msg[400], who[96];
	struct stat st;
	vd_key *k = NULL;
	int rc;

	if (c->signing_key[0] != '\0')
		return 0;    /* read before the switch, as the starting user: checked there */
	snprintf(path, sizeof(path), "%s/%s", c->state_dir, VD_SIGNING_KEY_FILE);
	if (lstat(path, &st) < 0 && errno == ENOENT)
		return 0;    /* made at start, in a directory checked writable */
	if ((rc = vd_attest_key_open(path, 0, &k, msg, sizeof(msg))) < 0) {
		vd_account_describe_self(who, sizeof(who));
		snprintf(err, errlen, "signing_key: %s (as %s)", msg, who);
		return rc;
	}
	vd_key_free(k);
	return 0;
}

static int check_state_here(const vd_config *c, char *err, size_t errlen)
{
	struct stat st;
	int rc;

	if (stat(c->state_dir, &st) < 0) {
		if (errno != ENOENT)
			return refuse(err, errlen, c->state_dir, "cannot look up the state directory", errno);
		return check_creatable(c->state_dir, err, errlen);
	}
	if (!S_ISDIR(st.st_mode))
		return refuse(err, errlen, c->state_dir, "the state directory is not a directory", ENOTDIR);
	if (access(c->state_dir, W_OK | X_OK) < 0)
		return refuse(err, errlen, c->state_dir, "cannot create files in the state directory", errno);
	if ((rc = check_db_file(c->state_dir, "", err, errlen)) < 0 ||
	    (rc = check_db_file(c->state_dir, "-wal", err, errlen)) < 0 ||
	    (rc = check_db_file(c->state_dir, "-shm", err, errlen)) < 0)
		return rc;
	return check_default_key(c, err, errlen);
}

/* The child's sentence comes back through a pipe; its exit status is the
 * refusal's errno (0: none). */
static int check_state_as(const vd_config *c, const vd_account *a, char *err, size_t errlen)
{
	int fds[2], status, rc;
	size_t len = 0;
	ssize_t n;
	pid_t pid;

	if (pipe(fds) < 0)
		return refuse(err, errlen, c->state_dir, "cannot check the state directory", errno);
	fflush(NULL);
	if ((pid = fork()) < 0) {
		close(fds[0]);
		close(fds[1]);
		return refuse(err, errlen, c->state_dir, "cannot check the state directory", errno);
	}
	if (pid == 0) {
		close(fds[0]);
		if ((rc = vd_account_switch(a, err, errlen)) == 0 &&
		    (rc = check_state_here(c, err, errlen)) == 0)
			_exit(0);
		/* Lost, the sentence is replaced by the parent's own. */
		if (write(fds[1], err, strlen(err)) < 0)
			_exit(EIO);
		_exit(-rc < 256 ? -rc : EIO);
	}
	close(fds[1]);
	while (len + 1 < errlen && (n = read(fds[0], err + len, errlen - len - 1)) != 0) {
		if (n < 0 && errno != EINTR)
			break;
		len += n > 0 ? (size_t)n : 0;
	}
	err[len < errlen ? len : 0] = '\0';
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return refuse(err, errlen, c->state_dir, "cannot check the state directory", errno);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (len == 0)
		snprintf(err, errlen, "%s: the check as user %s did not finish", c->state_dir, a->name);
	return WIFEXITED(status) ? -WEXITSTATUS(status) : -EINTR;
}

int vd_startcheck_state(const vd_config *c, const vd_account *a, char *err, size_t errlen)
{
	return a->switch_to ? check_state_as(c, a, err, errlen) : check_state_here(c, err, errlen);
}

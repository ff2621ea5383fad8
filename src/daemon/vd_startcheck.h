/*
 * What a start needs of the system, looked at without starting: the
 * account the daemon runs as, and that this account can make or use the
 * state directory, its database and the default signing key. `-t` runs
 * these checks so that a configuration it accepts does not then fail to
 * start; each refusal names the path, the account and the system's reason.
 */
#ifndef VD_STARTCHECK_H
#define VD_STARTCHECK_H

#include <stddef.h>
#include <sys/types.h>

#include "vd_config.h"

typedef struct vd_account {
	char name[64];
	uid_t uid;
	gid_t gid;
	int switch_to;      /* started as root: the daemon switches to it after binding */
} vd_account;

/* The account the daemon runs as under c when started by this process:
 * the one named by `user` when root (refused when unset, unknown or of
 * UID 0: -EPERM; unknown: -ENOENT or the lookup's -errno), else this
 * process's own. 0, or a negative errno with a sentence. */
int vd_account_of(const vd_config *c, vd_account *a, char *err, size_t errlen);

/* Become a (its groups, then its GID and UID), for good: the failed call's
 * -errno, or -EPERM when root could be regained, with a sentence. */
int vd_account_switch(const vd_account *a, char *err, size_t errlen);

/* "user NAME (uid N)" of this process as it runs now, for errors. */
void vd_account_describe_self(char *out, size_t n);

/* Whether a can make or use c's state directory, the database in it and
 * the default signing key, asked as a: by a child that switches to a when
 * a is another account, else here. Nothing is created or changed. 0, or
 * the refusal's negative errno (-EINTR: the child was killed) with a
 * sentence. */
int vd_startcheck_state(const vd_config *c, const vd_account *a, char *err, size_t errlen);

#endif

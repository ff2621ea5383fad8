/*
 * The programs' exit statuses, as their manual pages list them (EXIT
 * STATUS). Functions inside a program return 0 or a negative errno like
 * the daemon's; only what main returns, and what a subcommand hands to
 * it, is one of these.
 */
#ifndef VD_EXIT_H
#define VD_EXIT_H

typedef enum vd_exit {
	VD_EXIT_OK = 0,       /* verified, done, or the configuration is good */
	VD_EXIT_FAIL = 1,     /* not verified, refused, or could not be done */
	VD_EXIT_USAGE = 2,    /* the command line is wrong */
	VD_EXIT_ERROR = 2     /* verify-oms, sign-oms: could not be checked or done at all */
} vd_exit;

#endif

/*
 * A weight file truncated while the library hashes it: the verification
 * fails, the program goes on. Written as an outside program is: it
 * includes only <lensemble/verify.h> of the project, links the shared
 * library and installs no SIGBUS handler of its own unless a check says
 * so. The truncation is timed by the progress callback, so that it always
 * lands in the middle of the hash: the callback asks another thread (or
 * another process) to cut the file and waits until it has.
 *
 * No cmocka: its runner installs and restores its own SIGBUS handler
 * around every test, which is exactly what a program must not do behind
 * the library's back. Checks that need a process without the library's
 * handler run in a child forked before any verification.
 */
#define _XOPEN_SOURCE 700

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lensemble/verify.h>

#define BIG_BYTES (256u << 20)       /* sparse: cheap on disk, long to hash */
#define SMALL_BYTES (8u << 20)
#define CUT_TO 65536                 /* what is left of a truncated file */
#define PATH_LEN 4200

static int passed, failed;
static char work[PATH_LEN];

static void check(int cond, const char *what)
{
	if (cond) {
		passed++;
		printf("ok - %s\n", what);
	} else {
		failed++;
		printf("not ok - %s\n", what);
	}
	fflush(stdout);
}

static void die(const char *what)
{
	fprintf(stderr, "test_sigbus: %s: %s\n", what, strerror(errno));
	exit(99);
}

/* An artifact made by vd-mkartifact: zero tensors as file holes. */
static void make_artifact(const char *name, unsigned bytes, char *dir, size_t n)
{
	const char *top = getenv("top_builddir");
	char cmd[2 * PATH_LEN];

	snprintf(dir, n, "%s/%s", work, name);
	snprintf(cmd, sizeof(cmd), "'%s/tools/vd-mkartifact' --round 1 --sparse --bytes %u '%s' >/dev/null",
	    top, bytes, dir);
	if (system(cmd) != 0) {
		fprintf(stderr, "test_sigbus: %s failed\n", cmd);
		exit(99);
	}
}

static void weights_of(const char *dir, char *path, size_t n)
{
	snprintf(path, n, "%s/weights.safetensors", dir);
}

/* ---- a truncater: cuts a file when asked, on a pipe ------------------ */

typedef struct truncater {
	int req[2], ack[2];
	char path[PATH_LEN];
	pthread_t thread;
	pid_t pid;
	int asked;
} truncater;

/* One request: cut the file, answer. In a thread or a forked child. */
static void serve(truncater *t)
{
	char c;

	if (read(t->req[0], &c, 1) != 1)
		return;
	c = truncate(t->path, CUT_TO) == 0 ? 'y' : 'n';
	if (write(t->ack[1], &c, 1) != 1)
		return;
}

static void *serve_thread(void *arg)
{
	serve(arg);
	return NULL;
}

static void truncater_start(truncater *t, const char *path, int in_process)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->path, sizeof(t->path), "%s", path);
	if (pipe(t->req) < 0 || pipe(t->ack) < 0)
		die("pipe");
	if (!in_process) {
		if (pthread_create(&t->thread, NULL, serve_thread, t) != 0)
			die("pthread_create");
		return;
	}
	if ((t->pid = fork()) < 0)
		die("fork");
	if (t->pid == 0) {
		serve(t);
		_exit(0);
	}
}

static void truncater_stop(truncater *t)
{
	close(t->req[1]);            /* an unasked truncater reads EOF and ends */
	if (t->pid > 0)
		waitpid(t->pid, NULL, 0);
	else
		pthread_join(t->thread, NULL);
	close(t->req[0]);
	close(t->ack[0]);
	close(t->ack[1]);
}

/* The progress callback: at the first step, have the file cut. */
static int cut_now(uint64_t done, uint64_t total, void *arg)
{
	truncater *t = arg;
	char c = 'x';

	if (t->asked++ > 0)
		return 0;
	if (write(t->req[1], &c, 1) != 1 || read(t->ack[0], &c, 1) != 1 || c != 'y')
		fprintf(stderr, "test_sigbus: the truncation did not happen\n");
	return 0;
}

static int shrank(const vd_verdict *v)
{
	return (v->code == VD_CHECKPOINT_INTEGRITY || v->code == VD_IO_ERROR) &&
	    v->content_hash[0] == '\0';
}

/* Verify dir while its weight file is cut under the hash. */
static void verify_truncated(const char *dir, int in_process, vd_verdict *v)
{
	char path[PATH_LEN];
	truncater t;
	vd_options opt = { 0 };

	weights_of(dir, path, sizeof(path));
	truncater_start(&t, path, in_process);
	opt.progress = cut_now;
	opt.progress_arg = &t;
	vd_verify_artifact(dir, &opt, v);
	truncater_stop(&t);
	if (t.asked == 0)
		fprintf(stderr, "test_sigbus: hashing never reported progress\n");
}

/* ---- the program's own mapping, cut short ---------------------------- */

static volatile uint8_t *own_map;

/* A mapped page of a file of ours that no longer exists. */
static void map_own_truncated(void)
{
	char path[PATH_LEN];
	int fd;

	snprintf(path, sizeof(path), "%s/own", work);
	if ((fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600)) < 0 || ftruncate(fd, 8192) < 0)
		die("own file");
	own_map = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
	if (own_map == MAP_FAILED || ftruncate(fd, 0) < 0)
		die("own mapping");
	close(fd);
}

static sigjmp_buf own_jb;
static volatile sig_atomic_t own_faults;

static void own_handler(int sig, siginfo_t *si, void *uctx)
{
	if (si->si_addr == (void *)own_map)
		own_faults++;
	siglongjmp(own_jb, 1);
}

static void touch_own(void)
{
	if (sigsetjmp(own_jb, 1) == 0)
		(void)own_map[0];
}

/* The progress callback of a program whose own mapping faults: its handler
 * gets the fault, the verification is not disturbed. */
static int touch_own_once(uint64_t done, uint64_t total, void *arg)
{
	int *n = arg;

	if ((*n)++ == 0)
		touch_own();
	return 0;
}

/* Child: a handler the program installed before the library's. */
static int child_chained(const char *small)
{
	struct sigaction sa;
	vd_options opt = { 0 };
	vd_verdict v;
	int calls = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = own_handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, NULL) < 0)
		return 2;
	map_own_truncated();
	opt.progress = touch_own_once;
	opt.progress_arg = &calls;
	if (vd_verify_artifact(small, &opt, &v) != VD_OK)
		return 3;                   /* the program's fault was taken for the file's */
	if (own_faults != 1)
		return 4;                   /* the program's handler did not get it */
	touch_own();                        /* outside any verification, too */
	return own_faults == 2 ? 0 : 5;
}

/* Child: no handler of the program's own; the default action must stay. */
static int child_default(const char *small)
{
	vd_verdict v;

	if (vd_verify_artifact(small, NULL, &v) != VD_OK)
		return 3;
	map_own_truncated();
	/* A sanitizer reports the fault before ending the process: that
	 * report is expected here and says nothing. */
	dup2(open("/dev/null", O_WRONLY), STDERR_FILENO);
	(void)own_map[0];                   /* must end the process */
	return 0;
}

static int run_child(int (*fn)(const char *), const char *arg)
{
	int status;
	pid_t pid;

	fflush(NULL);
	if ((pid = fork()) < 0)
		die("fork");
	if (pid == 0)
		_exit(fn(arg));
	if (waitpid(pid, &status, 0) < 0)
		die("waitpid");
	return status;
}

/* ---- several threads at once ----------------------------------------- */

typedef struct job {
	const char *dir;
	int cut;
	vd_verdict v;
} job;

static void *verify_thread(void *arg)
{
	job *j = arg;

	if (j->cut)
		verify_truncated(j->dir, 0, &j->v);
	else
		vd_verify_artifact(j->dir, NULL, &j->v);
	return NULL;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

int main(void)
{
	char big1[PATH_LEN], big2[PATH_LEN], big3[PATH_LEN], small[PATH_LEN];
	job jobs[2];
	pthread_t th[2];
	vd_verdict v;
	int status, i;
	const char *tmp = getenv("TMPDIR");

	if (getenv("top_builddir") == NULL) {
		printf("SKIP: run through make check\n");
		return 77;
	}
	snprintf(work, sizeof(work), "%s/test_sigbus.XXXXXX", tmp ? tmp : "/tmp");
	if (mkdtemp(work) == NULL)
		die("mkdtemp");
	make_artifact("big1", BIG_BYTES, big1, sizeof(big1));
	make_artifact("big2", BIG_BYTES, big2, sizeof(big2));
	make_artifact("big3", BIG_BYTES, big3, sizeof(big3));
	make_artifact("small", SMALL_BYTES, small, sizeof(small));

	/* First, in fresh processes: what the library does to a program's
	 * own SIGBUS handling. */
	status = run_child(child_chained, small);
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "a SIGBUS handler installed before gets the program's own faults, in a progress callback and after");
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		printf("# child status %#x\n", status);
	status = run_child(child_default, small);
	check(!(WIFEXITED(status) && WEXITSTATUS(status) == 0),
	    "without a handler of its own, a program's own fault still ends it");
	check(WIFSIGNALED(status) ? WTERMSIG(status) == SIGBUS : WIFEXITED(status),
	    "by SIGBUS (or a sanitizer's report)");

	verify_truncated(big1, 0, &v);
	check(shrank(&v), "a weight file cut by another thread while hashed: the verification fails");
	check(v.code == VD_CHECKPOINT_INTEGRITY, "with checkpoint_integrity");
	check(strstr(v.detail, "shrank") != NULL, "the detail says the file shrank");
	check(strstr(v.facts.file, ".safetensors") != NULL, "and the verdict names which file");
	printf("# %s: %s (%s)\n", vd_code_name(v.code), v.detail, v.facts.file);

	verify_truncated(big2, 1, &v);
	check(shrank(&v), "a weight file cut by another process while hashed: the verification fails");

	/* The handler is per thread: one thread's fault leaves the other's
	 * verification alone. */
	jobs[0] = (job){ .dir = big3, .cut = 1 };
	jobs[1] = (job){ .dir = small, .cut = 0 };
	for (i = 0; i < 2; i++)
		if (pthread_create(&th[i], NULL, verify_thread, &jobs[i]) != 0)
			die("pthread_create");
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	check(shrank(&jobs[0].v), "two threads: the one whose file was cut fails");
	check(jobs[1].v.code == VD_OK, "two threads: the other verifies");

	check(vd_verify_artifact(small, NULL, &v) == VD_OK, "the program goes on verifying");

	nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/*
 * lensemble-verify verify-oms and sign-oms (docs/OMS.md). Exit status: 0
 * verified or signed; 1 not verified; 2 usage, or input that cannot be
 * read (the bundle, a key, the model).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "lensemble-verify-oms.h"
#include "vd_exit.h"
#include "vd_keys.h"
#include "vd_oms.h"
#include "vd_util.h"

#define BUNDLE_FILE_MODE 0644

const char oms_usage_text[] =
"\n"
"OpenSSF Model Signing (OMS v1.0 bundles, as model_signing writes them):\n"
"  lensemble-verify verify-oms (--key PUB.pem | --ca-cert CA.pem)\n"
"                   [--signature FILE] [--ignore-path P]...\n"
"                   [--ignore-unsigned-files] [--json] [--jobs N] PATH\n"
"  lensemble-verify sign-oms --key PRIV.pem [--signature FILE]\n"
"                   [--ignore-path P]... [--shards BYTES] [--jobs N] PATH\n"
"\n"
"  verify-oms  exit 0 when the bundle (default PATH/model.sig) is signed by\n"
"              the ECDSA key in PUB.pem, or by a certificate chaining to\n"
"              CA.pem, and PATH's files are exactly those it lists; exit 1\n"
"              with what differs when not\n"
"  sign-oms    sign PATH's files with the ECDSA key in PRIV.pem (a bundle\n"
"              `model_signing verify key` accepts); --shards hashes files\n"
"              in BYTES-long shards\n"
"\n"
"PATH is a model directory or a single file (then --signature is needed).\n"
"--ignore-path is relative to PATH. --jobs N hashes files (or shards) on N\n"
"threads; the default is one per CPU this process may run on. Exit status:\n"
"0 verified or signed, 1 not verified, 2 usage error or unreadable input.\n";

struct oms_args {
	const char *key, *ca, *signature, *path;
	const char *ignore[VD_OMS_MAX_IGNORE];
	char ignore_buf[VD_OMS_MAX_IGNORE][VD_OMS_MAX_NAME + 1];
	size_t n_ignore;
	int ignore_unsigned, json;
	uint64_t shards;
	uint64_t jobs;          /* 0: one thread per CPU */
};

static int usage(const char *cmd, const char *msg)
{
	fprintf(stderr, "lensemble-verify %s: %s\nTry 'lensemble-verify %s --help'.\n",
	    cmd, msg, cmd);
	return VD_EXIT_USAGE;
}

/* An option given twice is -EEXIST. */
static int once(const char **slot, const char *v)
{
	if (*slot != NULL)
		return -EEXIST;
	*slot = v;
	return 0;
}

/* "./a/b/" is a/b: how a shell completes it, not another path. 0, or
 * -E2BIG (too many), -ENAMETOOLONG or -EINVAL. */
static int add_ignore(struct oms_args *a, const char *p)
{
	char *s;
	size_t n;

	if (a->n_ignore == VD_OMS_MAX_IGNORE)
		return -E2BIG;
	s = a->ignore_buf[a->n_ignore];
	while (p[0] == '.' && p[1] == '/')
		p += 2;
	if ((n = strlen(p)) > VD_OMS_MAX_NAME)
		return -ENAMETOOLONG;
	memcpy(s, p, n + 1);
	while (n > 1 && s[n - 1] == '/')
		s[--n] = '\0';
	if (!vd_oms_ignore_valid(s, n))
		return -EINVAL;
	a->ignore[a->n_ignore++] = s;
	return 0;
}

static int parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (*s < '1' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v > INT64_MAX)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Whether the command line leaves the command something to do. */
enum oms_parsed {
	OMS_PROCEED,        /* a is filled in */
	OMS_DONE            /* help printed, or a usage error said: *status is the exit status */
};

static enum oms_parsed parse_args(const char *cmd, int argc, char **argv, int sign,
    struct oms_args *a, int *status)
{
	static const struct option longopts[] = {
		{ "key", required_argument, NULL, 'k' },
		{ "ca-cert", required_argument, NULL, 'c' },
		{ "signature", required_argument, NULL, 's' },
		{ "ignore-path", required_argument, NULL, 'i' },
		{ "ignore-unsigned-files", no_argument, NULL, 'u' },
		{ "json", no_argument, NULL, 'j' },
		{ "shards", required_argument, NULL, 'S' },
		{ "jobs", required_argument, NULL, 'J' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int ch, bad = 0;

	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'k': bad |= once(&a->key, optarg) < 0; break;
		case 'c': bad |= sign || once(&a->ca, optarg) < 0; break;
		case 's': bad |= once(&a->signature, optarg) < 0; break;
		case 'u': bad |= sign; a->ignore_unsigned = 1; break;
		case 'j': bad |= sign; a->json = 1; break;
		case 'S': bad |= !sign || a->shards || parse_size(optarg, &a->shards) < 0; break;
		case 'J':
			if (a->jobs || parse_size(optarg, &a->jobs) < 0 || a->jobs > VD_OMS_JOBS_MAX) {
				*status = usage(cmd, "--jobs takes a number of threads, 1 to "
				    VD_XSTR(VD_OMS_JOBS_MAX));
				return OMS_DONE;
			}
			break;
		case 'i':
			if (add_ignore(a, optarg) < 0) {
				*status = usage(cmd, "--ignore-path takes a path relative to PATH, "
				    "without '..', a leading '/' or glob characters");
				return OMS_DONE;
			}
			break;
		case 'h':
			fputs(oms_usage_text + 1, stdout);
			*status = VD_EXIT_OK;
			return OMS_DONE;
		default:
			*status = usage(cmd, "unknown option or missing value");
			return OMS_DONE;
		}
		if (bad) {
			*status = usage(cmd, sign ? "an option given twice, not taken by sign-oms, or "
			    "--shards without a positive byte count" : "an option given twice or "
			    "not taken by verify-oms");
			return OMS_DONE;
		}
	}
	if (optind != argc - 1) {
		*status = usage(cmd, "takes one PATH, the model directory or file");
		return OMS_DONE;
	}
	a->path = argv[optind];
	if (sign ? a->key == NULL : (a->key == NULL) == (a->ca == NULL)) {
		*status = usage(cmd, sign ? "--key PRIV.pem is required" :
		    "give either --key PUB.pem or --ca-cert CA.pem");
		return OMS_DONE;
	}
	return OMS_PROCEED;
}

/* The CPUs this process may run on (taskset, cgroup cpusets), which
 * sysconf's count of online ones ignores. */
static unsigned jobs_for(const struct oms_args *a)
{
	cpu_set_t set;
	int n;

	if (a->jobs)
		return (unsigned)a->jobs;
	n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
	return n < 1 ? 1 : n > VD_OMS_JOBS_MAX ? VD_OMS_JOBS_MAX : (unsigned)n;
}

static int exit_for(vd_oms_code c)
{
	return c == VD_OMS_OK ? VD_EXIT_OK : c == VD_OMS_UNREADABLE ? VD_EXIT_ERROR : VD_EXIT_FAIL;
}

static void add(json_object *o, const char *k, const char *v)
{
	json_object_object_add(o, k, json_object_new_string(v));
}

static void report_json(const char *path, const vd_oms_result *r)
{
	json_object *o = json_object_new_object(), *d = json_object_new_array();
	size_t i;

	add(o, "path", path);
	json_object_object_add(o, "verified", json_object_new_boolean(r->code == VD_OMS_OK));
	add(o, "code", vd_oms_code_name(r->code));
	add(o, "detail", r->detail);
	add(o, "method", r->method);
	add(o, "key_id", r->key_id);
	add(o, "subject", r->subject);
	add(o, "root_digest", r->root_digest);
	add(o, "serialization", r->serialization);
	add(o, "hash_type", r->hash_type);
	json_object_object_add(o, "resources", json_object_new_int64((int64_t)r->resources));
	json_object_object_add(o, "files", json_object_new_int64((int64_t)r->files));
	json_object_object_add(o, "bytes", json_object_new_int64((int64_t)r->bytes));
	for (i = 0; i < r->n_diffs && i < VD_OMS_MAX_DIFFS; i++)
		json_object_array_add(d, json_object_new_string(r->diffs[i]));
	json_object_object_add(o, "differences", d);
	json_object_object_add(o, "more_differences",
	    json_object_new_int64((int64_t)(r->n_diffs > VD_OMS_MAX_DIFFS ? r->n_diffs - VD_OMS_MAX_DIFFS : 0)));
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
}

static void report_text(const char *path, const vd_oms_result *r)
{
	size_t i;

	if (r->code == VD_OMS_OK) {
		printf("verified %s: %zu resources (%s, %s), %s %s, subject \"%s\", root %s\n", path,
		    r->resources, r->serialization, r->hash_type, r->method, r->key_id, r->subject,
		    r->root_digest);
		return;
	}
	fprintf(stderr, "lensemble-verify verify-oms: %s: not verified (%s): %s\n", path,
	    vd_oms_code_name(r->code), r->n_diffs > 1 ? "the files differ from the signature" :
	    r->detail);
	for (i = 0; r->n_diffs > 1 && i < r->n_diffs && i < VD_OMS_MAX_DIFFS; i++)
		fprintf(stderr, "  %s\n", r->diffs[i]);
	if (r->n_diffs > VD_OMS_MAX_DIFFS)
		fprintf(stderr, "  and %zu more\n", r->n_diffs - VD_OMS_MAX_DIFFS);
}

int cmd_verify_oms(int argc, char **argv)
{
	static const char cmd[] = "verify-oms";
	struct oms_args *a = calloc(1, sizeof(*a));
	vd_oms_verify_opts o = { 0 };
	char err[PATH_MAX + VD_DETAIL_MAX];
	vd_key *k = NULL;
	vd_oms_result *r = calloc(1, sizeof(*r));
	int rc;

	if (a == NULL || r == NULL) {
		rc = VD_EXIT_ERROR;
		goto cleanup;
	}
	if (parse_args(cmd, argc, argv, 0, a, &rc) == OMS_DONE)
		goto cleanup;
	if (a->key != NULL && vd_key_load_any(a->key, 0, 0, &k, err, sizeof(err)) < 0) {
		fprintf(stderr, "lensemble-verify %s: %s\n", cmd, err);
		rc = VD_EXIT_ERROR;
		goto cleanup;
	}
	o.key = k;
	o.ca_file = a->ca;
	o.signature = a->signature;
	o.ignore = a->ignore;
	o.n_ignore = a->n_ignore;
	o.ignore_unsigned = a->ignore_unsigned;
	o.jobs = jobs_for(a);
	vd_oms_verify(a->path, &o, r);
	if (a->json)
		report_json(a->path, r);
	else
		report_text(a->path, r);
	rc = exit_for(r->code);
cleanup:
	vd_key_free(k);
	free(a);
	free(r);
	return rc;
}

/* The bundle replaces path in one step: a reader sees the old one or the
 * new one, never part of one. 0, or a negative errno with a sentence. */
static int write_bundle(const char *path, const vd_buf *b, char *err, size_t n)
{
	char tmp[PATH_MAX];
	ssize_t w;
	size_t off = 0;
	int fd, e;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp-XXXXXX", path) >= (int)sizeof(tmp)) {
		snprintf(err, n, "%s: the path is too long", path);
		return -ENAMETOOLONG;
	}
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
		e = errno;
		snprintf(err, n, "cannot create %s: %s", tmp, strerror(e));
		return -e;
	}
	while (off < b->len && ((w = write(fd, b->p + off, b->len - off)) > 0 || errno == EINTR))
		off += w > 0 ? (size_t)w : 0;
	if (off < b->len || fchmod(fd, BUNDLE_FILE_MODE) < 0 || fsync(fd) < 0 ||
	    rename(tmp, path) < 0) {
		e = errno;
		snprintf(err, n, "cannot write %s: %s", path, strerror(e));
		close(fd);
		unlink(tmp);
		return e ? -e : -EIO;
	}
	close(fd);
	return 0;
}

/* Sign a->path into sig: the exit status. */
static int sign_with(const struct oms_args *a, const vd_key *k, const char *sig)
{
	vd_oms_sign_opts o = { 0 };
	char err[PATH_MAX + 128];
	vd_oms_result *r = calloc(1, sizeof(*r));
	vd_buf b;
	int rc = VD_EXIT_ERROR;

	if (r == NULL)
		return VD_EXIT_ERROR;
	o.key = k;
	o.signature = sig;
	o.ignore = a->ignore;
	o.n_ignore = a->n_ignore;
	o.shard_size = a->shards;
	o.jobs = jobs_for(a);
	vd_buf_init(&b);
	if (vd_oms_sign(a->path, &o, &b, r) != VD_OMS_OK)
		fprintf(stderr, "lensemble-verify sign-oms: %s\n", r->detail);
	else if (write_bundle(sig, &b, err, sizeof(err)) < 0)
		fprintf(stderr, "lensemble-verify sign-oms: %s\n", err);
	else {
		printf("%s: %zu resources of %s signed by %s\n", sig, r->resources, a->path, r->key_id);
		rc = VD_EXIT_OK;
	}
	vd_buf_free(&b);
	free(r);
	return rc;
}

int cmd_sign_oms(int argc, char **argv)
{
	static const char cmd[] = "sign-oms";
	struct oms_args *a = calloc(1, sizeof(*a));
	char err[PATH_MAX + VD_DETAIL_MAX], sig[PATH_MAX];
	struct stat st;
	vd_key *k = NULL;
	int rc;

	if (a == NULL)
		return VD_EXIT_ERROR;
	if (parse_args(cmd, argc, argv, 1, a, &rc) == OMS_DONE)
		goto cleanup;
	rc = VD_EXIT_ERROR;
	if (a->signature == NULL && (stat(a->path, &st) < 0 || !S_ISDIR(st.st_mode))) {
		rc = usage(cmd, "PATH is not a directory: give --signature FILE");
		goto cleanup;
	}
	if (snprintf(sig, sizeof(sig), "%s%s%s", a->signature ? a->signature : a->path,
	    a->signature ? "" : "/", a->signature ? "" : VD_OMS_SIGNATURE_NAME) >= (int)sizeof(sig)) {
		rc = usage(cmd, "the signature's path is too long");
		goto cleanup;
	}
	/* Strict: a private key others can read is no longer private. */
	if (vd_key_load_any(a->key, 1, 1, &k, err, sizeof(err)) < 0) {
		fprintf(stderr, "lensemble-verify %s: %s\n", cmd, err);
		goto cleanup;
	}
	rc = sign_with(a, k, sig);
cleanup:
	vd_key_free(k);
	free(a);
	return rc;
}

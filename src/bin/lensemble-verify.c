/*
 * lensemble-verify: check Lensemble model artifacts (and ledgers) once,
 * from the command line. Exit 0: all verified; 1: one failed; 2: usage.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "lensemble/verify.h"
#include "lensemble-verify-oms.h"
#include "vd_exit.h"
#include "vd_artifact.h"
#include "vd_attest.h"
#include "vd_dsse.h"
#include "vd_json.h"
#include "vd_jsonw.h"
#include "vd_keys.h"
#include "vd_ledger.h"
#include "vd_limits.h"
#include "vd_mapping.h"
#include "vd_util.h"

static const char usage_text[] =
"Usage: lensemble-verify [--json] [--expect HASH] ARTIFACT...\n"
"       lensemble-verify [--json] --ledger LEDGER_FILE...\n"
"\n"
"Verify Lensemble model artifacts: recompute each directory's canonical\n"
"SHA-256 content hash from header.json and its safetensors weights and\n"
"check it against the header (and the committed hash, with --expect).\n"
"An ARTIFACT is a directory, or an uncompressed tar of one (ustar, pax or\n"
"GNU; files at the top level or in one directory), verified in place.\n"
"With --ledger, verify the record chain of ledger.jsonl files instead.\n"
"\n"
"  -j, --json          one JSON object per artifact (or ledger) per line\n"
"  -e, --expect HASH   every artifact must have this content hash\n"
"  -l, --ledger        the arguments are ledger.jsonl files\n"
"  -q, --quiet         print nothing; the exit status tells\n"
"  -h, --help          show this help and exit\n"
"  -V, --version       show the version and exit\n"
"\n"
"Exit status: 0 every artifact verified; 1 at least one failed;\n"
"2 usage error.\n"
"Codes: schema_version_mismatch, artifact_invalid, residency_violation,\n"
"checkpoint_integrity, io_error (could not be read: not verified).\n";

struct cli {
	int json, quiet, ledger;
	const char *expect;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int progress(uint64_t done, uint64_t total, void *arg)
{
	const char *path = arg;
	static int last = -1;
	int pct;

	if (total < VD_PROGRESS_MIN_BYTES)
		return 0;
	pct = (int)(done * 100 / total);
	if (pct == last && done != total)
		return 0;
	last = done == total ? -1 : pct;
	fprintf(stderr, "\r%s: hashing %3d%% (%llu of %llu MiB)%s", path, pct,
	    (unsigned long long)(done >> 20), (unsigned long long)(total >> 20),
	    done == total ? "\r\033[K" : "");
	return 0;
}

static void print_json(json_object *o)
{
	printf("%s\n", json_object_to_json_string_ext(o,
	    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
}

/* A fact that applies: an absent one is left out, never null. */
static void add_str(json_object *o, const char *key, const char *value)
{
	if (value[0] != '\0')
		json_object_object_add(o, key, json_object_new_string(value));
}

/* The facts behind a failure (vd_facts), each where it applies. */
static void add_facts(json_object *o, const vd_facts *f)
{
	add_str(o, "expected_hash", f->expected_hash);
	add_str(o, "recomputed_hash", f->recomputed_hash);
	if (f->has_file_schema_version)
		json_object_object_add(o, "file_schema_version",
		    json_object_new_int64(f->file_schema_version));
	if (f->reader_max_version > 0)
		json_object_object_add(o, "reader_max_version",
		    json_object_new_int64(f->reader_max_version));
	add_str(o, "tensor", f->tensor);
	add_str(o, "file", f->file);
	add_str(o, "remediation", f->remediation);
}

/* Whether header.json was read through the migration chain. */
static void add_legacy(json_object *o, const vd_verdict *v)
{
	if (!v->have_header)
		return;
	json_object_object_add(o, "legacy", json_object_new_boolean(v->legacy));
	if (v->legacy)
		json_object_object_add(o, "migrated_from", json_object_new_int64(v->migrated_from));
}

static void report_text(const char *path, const vd_verdict *v, double secs)
{
	char legacy[64] = "";

	if (v->code != VD_OK) {
		printf("%s: FAILED %s: %s; %s\n", path, vd_code_name(v->code), v->detail,
		    v->facts.remediation);
		return;
	}
	if (v->legacy)
		snprintf(legacy, sizeof(legacy), "; legacy schema_version %lld",
		    (long long)v->migrated_from);
	printf("%s: OK %s round %lld (%llu tensors, %llu bytes, %.3f s%s)\n",
	    path, v->content_hash, (long long)v->round_index,
	    (unsigned long long)v->tensors, (unsigned long long)v->bytes, secs, legacy);
}

static void report_artifact(const struct cli *cli, const char *path,
    const vd_verdict *v, double secs)
{
	json_object *o;

	if (cli->quiet)
		return;
	if (!cli->json) {
		report_text(path, v, secs);
		return;
	}
	o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "ok", json_object_new_boolean(v->code == VD_OK));
	if (v->code == VD_OK) {
		json_object_object_add(o, "content_hash", json_object_new_string(v->content_hash));
		json_object_object_add(o, "round_index", json_object_new_int64(v->round_index));
		json_object_object_add(o, "parent_hash",
		    v->has_parent ? json_object_new_string(v->parent_hash) : NULL);
		json_object_object_add(o, "schema_version", json_object_new_int64(v->schema_version));
		json_object_object_add(o, "tensors", json_object_new_uint64(v->tensors));
		json_object_object_add(o, "bytes", json_object_new_uint64(v->bytes));
		json_object_object_add(o, "seconds", json_object_new_double(secs));
	} else {
		json_object_object_add(o, "code", json_object_new_string(vd_code_name(v->code)));
		json_object_object_add(o, "detail", json_object_new_string(v->detail));
		if (v->claimed_hash[0])
			json_object_object_add(o, "claimed_hash", json_object_new_string(v->claimed_hash));
		if (v->content_hash[0])
			json_object_object_add(o, "content_hash", json_object_new_string(v->content_hash));
		add_facts(o, &v->facts);
	}
	add_legacy(o, v);
	print_json(o);
}

static int verify_one(const struct cli *cli, const char *path)
{
	vd_options opt = { 0 };
	vd_loaded loaded;
	vd_verdict v;
	double t0 = now();

	opt.expected_hash = cli->expect;
	if (!cli->quiet && isatty(STDERR_FILENO)) {
		opt.progress = progress;
		opt.progress_arg = (void *)path;
	}
	/* Against a committed hash, judge bytes read once into memory, what a
	 * loader would hold, not a mapping the files can change under; without
	 * one, mapping keeps memory flat however large the artifact. */
	if (cli->expect != NULL) {
		vd_load_verified(path, &opt, 0, &loaded, &v);
		vd_loaded_free(&loaded);
	} else {
		vd_verify_artifact(path, &opt, &v);
	}
	report_artifact(cli, path, &v, now() - t0);
	return v.code == VD_OK ? VD_EXIT_OK : VD_EXIT_FAIL;
}

static void report_ledger(const struct cli *cli, const char *path,
    const vd_ledger_result *r, const char *err)
{
	json_object *o, *b;

	if (cli->quiet)
		return;
	if (!cli->json) {
		if (err)
			printf("%s: FAILED %s\n", path, err);
		else if (r->brk == VD_LEDGER_INTACT)
			printf("%s: OK %zu records, chain intact\n", path, r->records);
		else
			printf("%s: BROKEN at line %zu: %s (%s); %zu of %zu records trusted\n",
			    path, r->break_line, vd_ledger_break_name(r->brk),
			    r->break_detail, r->trusted, r->records);
		return;
	}
	o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "ok", json_object_new_boolean(!err && r->brk == VD_LEDGER_INTACT));
	if (err) {
		json_object_object_add(o, "code", json_object_new_string("io_error"));
		json_object_object_add(o, "detail", json_object_new_string(err));
	} else {
		json_object_object_add(o, "records", json_object_new_uint64(r->records));
		json_object_object_add(o, "trusted", json_object_new_uint64(r->trusted));
		json_object_object_add(o, "chain_valid", json_object_new_boolean(r->brk == VD_LEDGER_INTACT));
		b = NULL;
		if (r->brk != VD_LEDGER_INTACT) {
			b = json_object_new_object();
			json_object_object_add(b, "line", json_object_new_uint64(r->break_line));
			json_object_object_add(b, "reason", json_object_new_string(vd_ledger_break_name(r->brk)));
			json_object_object_add(b, "detail", json_object_new_string(r->break_detail));
		}
		json_object_object_add(o, "first_break", b);
	}
	print_json(o);
}

static int read_ledger(const char *path, vd_buf *b, char *err, size_t n);

/* Read, not mapped: a ledger truncated under a mapping would end the
 * program with SIGBUS, and it is small (VD_LEDGER_MAX_BYTES). */
static int verify_ledger(const struct cli *cli, const char *path)
{
	vd_ledger_result r;
	char err[VD_DETAIL_MAX];
	vd_buf b;

	memset(&r, 0, sizeof(r));
	vd_buf_init(&b);
	if (read_ledger(path, &b, err, sizeof(err)) < 0) {
		vd_buf_free(&b);
		report_ledger(cli, path, &r, err);
		return VD_EXIT_FAIL;
	}
	vd_ledger_verify(b.p, b.len, NULL, NULL, &r);
	vd_buf_free(&b);
	report_ledger(cli, path, &r, NULL);
	return r.brk == VD_LEDGER_INTACT ? VD_EXIT_OK : VD_EXIT_FAIL;
}

static int usage_error(const char *msg)
{
	fprintf(stderr, "lensemble-verify: %s\nTry 'lensemble-verify --help'.\n", msg);
	return VD_EXIT_USAGE;
}

/* ---- signed commitments (trust.md section 7) ----------------------------- */

#define KEY_FILE_MODE 0600
#define KEY_DIR_MODE 0700
#define PUB_FILE_MODE 0644
#define ENVELOPE_FILE_MODE 0644
#define COMMITMENTS_DIR_MODE 0755
#define COMMITMENTS_DIR "commitments"
#define RUN_DEFAULT "."

static const char sign_usage_text[] =
"\n"
"Signed commitments (Ed25519 keys, DSSE envelopes):\n"
"  lensemble-verify keygen [--type ed25519|ec-p256|ec-p384|ec-p521] PREFIX\n"
"  lensemble-verify sign-roundclose --key FILE [--run RUN] [-o FILE] ARTIFACT\n"
"  lensemble-verify sign-roundclose --key FILE [--run RUN] --round T --hash HEX\n"
"                                   [--artifact PATH] [-o FILE]\n"
"  lensemble-verify sign-ledger --key FILE [--run RUN] [--records N] LEDGER\n"
"                               [-o FILE]\n"
"  lensemble-verify verify-envelope --key PUBFILE FILE\n"
"  lensemble-verify verify-attestation --key PUBFILE [--expect HASH] FILE\n"
"\n"
"  keygen           write PREFIX.key (private, mode 0600) and PREFIX.pub and\n"
"                   print the key id; existing files are never overwritten;\n"
"                   a missing last directory of PREFIX is made, mode 0700\n"
"  sign-roundclose  sign the RoundClose that commits ARTIFACT (a directory\n"
"                   or a tar) to stdout or -o FILE. ARTIFACT must verify;\n"
"                   its content hash is HEX and T is its header's round_index\n"
"                   minus one: RoundClose T commits the artifact of round\n"
"                   T+1, \"round T of RUN ended with the model HEX\". Round 0\n"
"                   is pinned by the daemon's genesis_hash, never signed.\n"
"                   --round T --hash HEX sign before the artifact exists;\n"
"                   with --artifact PATH, a warning when PATH disagrees\n"
"  sign-ledger      sign records 1..N of LEDGER (default: every record, and\n"
"                   the whole chain must be intact) into -o FILE or\n"
"                   <LEDGER's directory>/commitments/ledger-N.json\n"
"  verify-envelope  exit 0 and print the statement when FILE is signed by\n"
"                   the key in PUBFILE; exit 1 with the reason when not\n"
"  verify-attestation\n"
"                   exit 0 and print \"trusted HASH (...)\" when FILE (- for\n"
"                   stdin), a verdict the daemon signed, is signed by the key\n"
"                   in PUBFILE and says the artifact (HASH with --expect) is\n"
"                   trusted; exit 1 with the check that failed when not\n"
"\n"
"RUN is the run directory relative to the store root, \".\" for the root\n"
"(the default). Exit status: 0 done, 1 failed, 2 usage error.\n";

/* The subcommands say what went wrong and return their exit status. */
static int cmd_usage(const char *cmd, const char *msg)
{
	fprintf(stderr, "lensemble-verify %s: %s\nTry 'lensemble-verify --help'.\n", cmd, msg);
	return VD_EXIT_USAGE;
}

static int cmd_fail(const char *cmd, const char *msg)
{
	fprintf(stderr, "lensemble-verify %s: %s\n", cmd, msg);
	return VD_EXIT_FAIL;
}

/* An option given twice is refused (-EEXIST): which of two --hash values
 * to sign is not a guess to make. */
static int set_once(const char **slot, const char *value)
{
	if (*slot != NULL)
		return -EEXIST;
	*slot = value;
	return 0;
}

/* Decimal digits only (no sign, no blanks), at least min, fits int64. */
static int parse_count(const char *s, int64_t min, int64_t *out)
{
	long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min)
		return -EINVAL;
	*out = v;
	return 0;
}

/* 0, or the negative errno of a failed write, errno set as well (EIO
 * when nothing was written and nothing said why). */
static int write_all(int fd, const uint8_t *p, size_t n)
{
	ssize_t w;

	while (n > 0) {
		w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w == 0)
			errno = EIO;
		if (w <= 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void split_path(const char *path, char *dir, size_t dirlen, const char **base)
{
	const char *slash = strrchr(path, '/');

	if (slash == NULL) {
		snprintf(dir, dirlen, ".");
		*base = path;
	} else {
		snprintf(dir, dirlen, "%.*s", slash == path ? 1 : (int)(slash - path), path);
		*base = slash + 1;
	}
}

/* path replaced in one step: a hidden temporary file in the same
 * directory, flushed, renamed over path, then the directory flushed. A
 * reader (the daemon scanning commitments/) sees the old file or the new
 * one, never part of one, and skips the temporary file: it is hidden.
 * 0, or a negative errno with a sentence. */
static int write_atomic(const char *path, const vd_buf *b, mode_t mode,
    char *err, size_t n)
{
	char dir[PATH_MAX], tmp[PATH_MAX];
	const char *base;
	int fd, dfd, rc = 0;

	split_path(path, dir, sizeof(dir), &base);
	if (*base == '\0' || snprintf(tmp, sizeof(tmp), "%s/.%s.tmp-XXXXXX", dir, base) >=
	    (int)sizeof(tmp)) {
		snprintf(err, n, "%s: not a usable file name", path);
		return -EINVAL;
	}
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
		rc = -errno;
		snprintf(err, n, "cannot create a file in %s: %s", dir, strerror(-rc));
		return rc;
	}
	if (fchmod(fd, mode) < 0 || write_all(fd, b->p, b->len) < 0 || fsync(fd) < 0) {
		rc = -errno;
		snprintf(err, n, "cannot write %s: %s", tmp, strerror(-rc));
	} else if (rename(tmp, path) < 0) {
		rc = -errno;
		snprintf(err, n, "cannot rename %s to %s: %s", tmp, path, strerror(-rc));
	}
	close(fd);
	if (rc < 0) {
		unlink(tmp);
		return rc;
	}
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		fsync(dfd);       /* the rename itself survives a crash */
		close(dfd);
	}
	return 0;
}

/* A new file that must not exist yet, with exactly this mode (umask
 * aside); the fd, or a negative errno with a sentence. */
static int create_new(const char *path, mode_t mode, char *err, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode), e;

	if (fd < 0) {
		e = errno;
		if (e == EEXIST)
			snprintf(err, n, "%s already exists; a key file is never overwritten", path);
		else
			snprintf(err, n, "cannot create %s: %s", path, strerror(e));
		return -e;
	}
	if (fchmod(fd, mode) < 0) {
		e = errno;
		snprintf(err, n, "cannot set the mode of %s: %s", path, strerror(e));
		close(fd);
		unlink(path);
		return -e;
	}
	return fd;
}

/* 0, or a negative errno with a sentence: then neither file is left. */
static int write_key_files(const char *key_path, const char *pub_path,
    const vd_buf *priv, const vd_buf *pub, char *err, size_t n)
{
	int kfd, pfd, rc;

	if ((kfd = create_new(key_path, KEY_FILE_MODE, err, n)) < 0)
		return kfd;
	if ((pfd = create_new(pub_path, PUB_FILE_MODE, err, n)) < 0) {
		close(kfd);
		unlink(key_path);
		return pfd;
	}
	if (write_all(kfd, priv->p, priv->len) < 0 || fsync(kfd) < 0 ||
	    write_all(pfd, pub->p, pub->len) < 0 || fsync(pfd) < 0) {
		rc = -errno;
		snprintf(err, n, "cannot write the key files: %s", strerror(-rc));
		close(kfd);
		close(pfd);
		unlink(key_path);
		unlink(pub_path);
		return rc;
	}
	close(kfd);
	close(pfd);
	return 0;
}

/* What key_directory found or did. */
enum key_dir {
	KEY_DIR_THERE,      /* already there (or a failure the key files' creation names) */
	KEY_DIR_MADE
};

/* The directory PREFIX names, made (mode 0700: it holds a private key)
 * when it is missing and its own parent exists. Only that last component
 * is made, never a whole path a typing error could invent. A key_dir, or
 * a negative errno with a sentence. */
static int key_directory(const char *prefix, char *dir, size_t len, char *err, size_t n)
{
	char parent[PATH_MAX];
	const char *base;
	struct stat st;
	int e;

	split_path(prefix, dir, len, &base);
	if (stat(dir, &st) == 0 || errno != ENOENT)
		return KEY_DIR_THERE;
	if (mkdir(dir, KEY_DIR_MODE) == 0) {
		fprintf(stderr, "lensemble-verify keygen: made the directory %s, mode 0700\n", dir);
		return KEY_DIR_MADE;
	}
	e = errno;
	if (e == ENOENT) {
		split_path(dir, parent, sizeof(parent), &base);
		snprintf(err, n, "cannot make the directory %s: %s does not exist either; "
		    "make it first, e.g. mkdir -p -m 0700 %s", dir, parent, dir);
	} else {
		snprintf(err, n, "cannot make the directory %s: %s", dir, strerror(e));
	}
	return -e;
}

/* keygen's --type: Ed25519 (the default) or an ECDSA curve for OMS;
 * -EINVAL for another name. */
static int key_type_arg(const char *name, vd_key_type *out)
{
	static const vd_key_type types[] = { VD_KEY_ED25519, VD_KEY_EC_P256, VD_KEY_EC_P384,
	    VD_KEY_EC_P521 };
	size_t i;

	for (i = 0; i < VD_ARRAY_LEN(types); i++)
		if (strcmp(name, vd_key_type_name(types[i])) == 0) {
			*out = types[i];
			return 0;
		}
	return -EINVAL;
}

static int cmd_keygen(int argc, char **argv)
{
	char key_path[PATH_MAX], pub_path[PATH_MAX], dir[PATH_MAX], err[3 * PATH_MAX + 128];
	vd_key_type type = VD_KEY_ED25519;
	vd_buf priv, pub;
	vd_key *k;
	int rc, made;

	if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		fputs(sign_usage_text + 1, stdout);
		return VD_EXIT_OK;
	}
	if (argc == 4 && strcmp(argv[1], "--type") == 0) {
		if (key_type_arg(argv[2], &type) < 0)
			return cmd_usage("keygen", "--type takes ed25519, ec-p256, ec-p384 or ec-p521");
		argc -= 2;
		argv += 2;
	}
	if (argc != 2 || argv[1][0] == '\0')
		return cmd_usage("keygen", "takes one argument, the PREFIX of the key files");
	if (argv[1][0] == '-')
		return cmd_usage("keygen", "a PREFIX starting with '-' must be written as ./PREFIX");
	if (snprintf(key_path, sizeof(key_path), "%s.key", argv[1]) >= (int)sizeof(key_path) ||
	    snprintf(pub_path, sizeof(pub_path), "%s.pub", argv[1]) >= (int)sizeof(pub_path))
		return cmd_usage("keygen", "PREFIX is too long");
	if ((made = key_directory(argv[1], dir, sizeof(dir), err, sizeof(err))) < 0)
		return cmd_fail("keygen", err);
	if (vd_key_generate_type(type, &k) < 0) {
		if (made == KEY_DIR_MADE)
			rmdir(dir);
		return cmd_fail("keygen", "cannot generate the key");
	}
	vd_buf_init(&priv);
	vd_buf_init(&pub);
	if (vd_key_private_pem(k, &priv) < 0 || vd_key_public_pem(k, &pub) < 0) {
		snprintf(err, sizeof(err), "cannot encode the key");
		rc = -ENOMEM;
	} else {
		rc = write_key_files(key_path, pub_path, &priv, &pub, err, sizeof(err));
	}
	if (priv.p != NULL)
		explicit_bzero(priv.p, priv.cap);
	vd_buf_free(&priv);
	vd_buf_free(&pub);
	if (rc == 0)
		printf("%s\n", vd_key_id(k));
	else if (made == KEY_DIR_MADE)
		rmdir(dir);
	vd_key_free(k);
	return rc == 0 ? VD_EXIT_OK : cmd_fail("keygen", err);
}

/* Into something that exists and is not a regular file (a FIFO, a
 * device such as /dev/stdout): written in place, never renamed over. 0,
 * or a negative errno with a sentence. */
static int write_special(const char *path, const vd_buf *b, char *err, size_t n)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY), e;

	if (fd < 0 || write_all(fd, b->p, b->len) < 0) {
		e = errno;
		snprintf(err, n, "cannot write %s: %s", path, strerror(e));
		if (fd >= 0)
			close(fd);
		return -e;
	}
	close(fd);
	return 0;
}

/* The envelope to stdout ("-" or no -o) or into a file, replaced whole:
 * the exit status, the failure said. */
static int emit_envelope(const char *cmd, const char *out, const vd_buf *env,
    const vd_key *k)
{
	char err[2 * PATH_MAX + 128];
	struct stat st;

	if (out == NULL || strcmp(out, "-") == 0) {
		if (fwrite(env->p, 1, env->len, stdout) != env->len || fflush(stdout) != 0)
			return cmd_fail(cmd, "cannot write to standard output");
		return VD_EXIT_OK;
	}
	if (stat(out, &st) == 0 && !S_ISREG(st.st_mode)) {
		if (S_ISDIR(st.st_mode))
			snprintf(err, sizeof(err), "%s is a directory", out);
		if (S_ISDIR(st.st_mode) || write_special(out, env, err, sizeof(err)) < 0)
			return cmd_fail(cmd, err);
		return VD_EXIT_OK;
	}
	if (write_atomic(out, env, ENVELOPE_FILE_MODE, err, sizeof(err)) < 0)
		return cmd_fail(cmd, err);
	printf("%s: signed by %s\n", out, vd_key_id(k));
	return VD_EXIT_OK;
}

/* The private key in key_path: the exit status (VD_EXIT_OK: *k is set).
 * Strict: a private key others can read is no longer private. */
static int load_signing_key(const char *cmd, const char *key_path, vd_key **k)
{
	char err[PATH_MAX + VD_DETAIL_MAX];

	if (vd_key_load(key_path, 1, 1, k, err, sizeof(err)) < 0)
		return cmd_fail(cmd, err);
	return VD_EXIT_OK;
}

/* Sign the statement with k and emit it: the exit status. */
static int sign_with(const char *cmd, const vd_key *k, const char *type,
    const vd_statement *st, const char *out)
{
	vd_buf payload, env;
	int rc;

	vd_buf_init(&payload);
	vd_buf_init(&env);
	if (vd_statement_write(st, &payload) < 0 ||
	    vd_dsse_sign(type, payload.p, payload.len, k, &env) < 0)
		rc = cmd_fail(cmd, "cannot sign the statement");
	else
		rc = emit_envelope(cmd, out, &env, k);
	vd_buf_free(&payload);
	vd_buf_free(&env);
	return rc;
}

/* Sign the statement with the private key in key_path and emit it. */
static int sign_statement(const char *cmd, const char *key_path, const char *type,
    const vd_statement *st, const char *out)
{
	vd_key *k;
	int rc;

	if ((rc = load_signing_key(cmd, key_path, &k)) != VD_EXIT_OK)
		return rc;
	rc = sign_with(cmd, k, type, st, out);
	vd_key_free(k);
	return rc;
}

static int check_run(const char *run)
{
	return vd_run_name_valid(run, strlen(run));
}

#define RUN_USAGE "--run takes \".\" or a directory path relative to the store " \
	"root, without empty, \".\" or \"..\" components"

/* The verdict on an artifact (a directory or a tar), judged in place. */
static void verify_quietly(const char *path, vd_verdict *v)
{
	vd_options opt = { 0 };

	if (isatty(STDERR_FILENO)) {
		opt.progress = progress;
		opt.progress_arg = (void *)path;
	}
	vd_artifact_guard_sigbus();
	vd_verify_artifact(path, &opt, v);
}

/* RoundClose t commits the artifact of round t + 1: the statement that
 * commits the artifact at path, which must verify. The exit status, the
 * reason said when it is not VD_EXIT_OK. */
static int roundclose_of_artifact(const char *cmd, const char *path, vd_statement *st)
{
	vd_verdict v;
	char why[PATH_MAX + VD_DETAIL_MAX + 256];

	verify_quietly(path, &v);
	if (v.code != VD_OK) {
		snprintf(why, sizeof(why), "%s does not verify (%s: %s); nothing signed",
		    path, vd_code_name(v.code), v.detail);
		return cmd_fail(cmd, why);
	}
	if (v.round_index == 0) {
		snprintf(why, sizeof(why), "%s is round 0, the warm start, which no RoundClose "
		    "commits (RoundClose t commits the artifact of round t+1): the daemon trusts "
		    "it only as its pinned genesis_hash, so set genesis_hash = %s%s%s in its "
		    "configuration instead; nothing signed", path,
		    strcmp(st->run, RUN_DEFAULT) == 0 ? "" : st->run,
		    strcmp(st->run, RUN_DEFAULT) == 0 ? "" : ":", v.content_hash);
		return cmd_fail(cmd, why);
	}
	st->round_index = v.round_index - 1;
	memcpy(st->hash, v.content_hash, VD_HASH_HEX_LEN + 1);
	fprintf(stderr, "lensemble-verify %s: %s is round %lld with content hash %s: "
	    "signing RoundClose round %lld of run %s\n", cmd, path, (long long)v.round_index,
	    v.content_hash, (long long)st->round_index, st->run);
	return VD_EXIT_OK;
}

/* --round and --hash given by hand, checked against the artifact at
 * path: a disagreement is said, not fatal (the statement is signed as
 * given). */
static void warn_if_artifact_disagrees(const char *cmd, const char *path,
    const vd_statement *st)
{
	vd_verdict v;

	verify_quietly(path, &v);
	if (v.code != VD_OK) {
		fprintf(stderr, "lensemble-verify %s: warning: --artifact %s does not verify "
		    "(%s: %s); signing --round %lld --hash %s as given\n", cmd, path,
		    vd_code_name(v.code), v.detail, (long long)st->round_index, st->hash);
		return;
	}
	if (strcmp(v.content_hash, st->hash) != 0)
		fprintf(stderr, "lensemble-verify %s: warning: --artifact %s has content hash %s, "
		    "not --hash %s\n", cmd, path, v.content_hash, st->hash);
	if (v.round_index != st->round_index + 1)
		fprintf(stderr, "lensemble-verify %s: warning: --artifact %s is round %lld, and "
		    "RoundClose round %lld commits the artifact of round %lld%s\n", cmd, path,
		    (long long)v.round_index, (long long)st->round_index,
		    (long long)st->round_index + 1,
		    v.round_index > 0 ? "; to commit it, sign without --round and --hash" : "");
}

/* The key is read first: a key that cannot sign is said before a large
 * artifact is hashed. */
static int sign_artifact_roundclose(const char *cmd, const char *key_path,
    const char *path, vd_statement *st, const char *out)
{
	vd_key *k;
	int rc;

	if ((rc = load_signing_key(cmd, key_path, &k)) != VD_EXIT_OK)
		return rc;
	if ((rc = roundclose_of_artifact(cmd, path, st)) == VD_EXIT_OK)
		rc = sign_with(cmd, k, VD_PT_ROUNDCLOSE, st, out);
	vd_key_free(k);
	return rc;
}

struct roundclose_args {
	const char *key, *run, *round, *hash, *artifact, *out;
	const char *path;   /* the ARTIFACT operand, or NULL */
};

/* Usage checks of the two forms; NULL when the arguments are usable. */
static const char *roundclose_misuse(const struct roundclose_args *a)
{
	int by_hand = a->round != NULL || a->hash != NULL;

	if (a->key == NULL)
		return "--key is required";
	if (by_hand && a->path != NULL)
		return "give ARTIFACT, or --round and --hash (with --artifact PATH to check "
		    "them against an artifact), not both";
	if (!by_hand && a->path == NULL)
		return "give the ARTIFACT to commit (a directory or a tar), or --round and --hash";
	if (by_hand && (a->round == NULL || a->hash == NULL))
		return "--round and --hash go together";
	if (!by_hand && a->artifact != NULL)
		return "--artifact checks --round and --hash; with ARTIFACT alone, leave it out";
	if (!check_run(a->run))
		return RUN_USAGE;
	return NULL;
}

static int cmd_sign_roundclose(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "key", required_argument, NULL, 'k' },
		{ "run", required_argument, NULL, 'r' },
		{ "round", required_argument, NULL, 't' },
		{ "hash", required_argument, NULL, 'H' },
		{ "artifact", required_argument, NULL, 'a' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char cmd[] = "sign-roundclose";
	struct roundclose_args a = { 0 };
	const char *misuse;
	vd_statement st;
	int ch, dup = 0;

	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'k': dup |= set_once(&a.key, optarg) < 0; break;
		case 'r': dup |= set_once(&a.run, optarg) < 0; break;
		case 't': dup |= set_once(&a.round, optarg) < 0; break;
		case 'H': dup |= set_once(&a.hash, optarg) < 0; break;
		case 'a': dup |= set_once(&a.artifact, optarg) < 0; break;
		case 'o': dup |= set_once(&a.out, optarg) < 0; break;
		case 'h': fputs(sign_usage_text + 1, stdout); return VD_EXIT_OK;
		default: return cmd_usage(cmd, "unknown option or missing value");
		}
	}
	if (dup)
		return cmd_usage(cmd, "an option is given twice");
	if (argc - optind > 1)
		return cmd_usage(cmd, "takes one ARTIFACT");
	a.path = optind < argc ? argv[optind] : NULL;
	if (a.run == NULL)
		a.run = RUN_DEFAULT;
	if ((misuse = roundclose_misuse(&a)) != NULL)
		return cmd_usage(cmd, misuse);
	memset(&st, 0, sizeof(st));
	st.kind = VD_STMT_ROUNDCLOSE;
	st.schema_version = 2;
	memcpy(st.run, a.run, strlen(a.run) + 1);
	if (a.path != NULL)
		return sign_artifact_roundclose(cmd, a.key, a.path, &st, a.out);
	if (parse_count(a.round, 0, &st.round_index) < 0)
		return cmd_usage(cmd, "--round takes a round index, a non-negative integer");
	if (!vd_is_hex64((vd_str){ a.hash, strlen(a.hash) }))
		return cmd_usage(cmd, "--hash takes a content hash of 64 lowercase hex characters");
	memcpy(st.hash, a.hash, VD_HASH_HEX_LEN + 1);
	if (a.artifact != NULL)
		warn_if_artifact_disagrees(cmd, a.artifact, &st);
	return sign_statement(cmd, a.key, VD_PT_ROUNDCLOSE, &st, a.out);
}

/* What sign-ledger needs from the chain: the record hash of record
 * `want` (or of the last intact record) and the first record. */
struct ledger_walk {
	size_t want, seen;
	char want_hash[VD_HASH_HEX_LEN + 1], last_hash[VD_HASH_HEX_LEN + 1];
	int64_t first_round;
};

static void on_ledger_record(const vd_ledger_record *rec, size_t line, int trusted,
    void *arg)
{
	struct ledger_walk *w = arg;

	(void)line;
	if (!trusted)
		return;
	if (++w->seen == 1)
		w->first_round = rec->round_index;
	memcpy(w->last_hash, rec->record_hash, sizeof(w->last_hash));
	if (w->seen == w->want)
		memcpy(w->want_hash, rec->record_hash, sizeof(w->want_hash));
}

static int read_ledger(const char *path, vd_buf *b, char *err, size_t n)
{
	int rc = vd_read_file(path, VD_LEDGER_MAX_BYTES, b);

	if (rc == -EINVAL)
		snprintf(err, n, "%s is not a regular file", path);
	else if (rc == -EFBIG)
		snprintf(err, n, "%s is larger than %u bytes", path, VD_LEDGER_MAX_BYTES);
	else if (rc < 0)
		snprintf(err, n, "cannot read %s: %s", path, strerror(-rc));
	return rc;
}

/* Records 1..*records of the ledger at path, checked: their chain intact
 * and starting at round 0 with no previous record. *records 0 means all
 * of them, and then the whole file must be intact. 0, or with a sentence
 * the negative errno of reading it, or -EINVAL when those records are not
 * what may be signed. */
static int ledger_head(const char *path, size_t *records, char hash[VD_HASH_HEX_LEN + 1],
    char *err, size_t n)
{
	struct ledger_walk w = { .want = *records };
	vd_ledger_result res;
	vd_buf b;
	int rc;

	vd_buf_init(&b);
	if ((rc = read_ledger(path, &b, err, n)) < 0) {
		vd_buf_free(&b);
		return rc;
	}
	vd_ledger_verify(b.p, b.len, on_ledger_record, &w, &res);
	vd_buf_free(&b);
	if (res.records == 0) {
		snprintf(err, n, "%s has no records", path);
		return -EINVAL;
	}
	if (*records == 0 && res.brk != VD_LEDGER_INTACT) {
		if (res.trusted == 0)
			snprintf(err, n, "%s: the chain breaks at %s; no record is intact",
			    path, res.break_detail);
		else
			snprintf(err, n, "%s: the chain breaks at %s; records 1..%zu are "
			    "intact (sign them with --records %zu)", path, res.break_detail,
			    res.trusted, res.trusted);
		return -EINVAL;
	}
	if (*records > res.trusted) {
		if (res.brk != VD_LEDGER_INTACT)
			snprintf(err, n, "%s: the chain breaks at %s, before record %zu",
			    path, res.break_detail, *records);
		else
			snprintf(err, n, "%s has %zu records, not %zu", path, res.records, *records);
		return -EINVAL;
	}
	if (w.seen == 0 || w.first_round != 0) {
		snprintf(err, n, "%s: the first record is round %lld, not round 0: the "
		    "ledger does not start where its run started", path, (long long)w.first_round);
		return -EINVAL;
	}
	memcpy(hash, w.want ? w.want_hash : w.last_hash, VD_HASH_HEX_LEN + 1);
	if (*records == 0)
		*records = res.trusted;
	return 0;
}

/* <directory of the ledger>/commitments/, created when missing; a
 * symbolic link there is refused, as the daemon would not follow it. 0,
 * or a negative errno with a sentence. */
static int commitments_dir(const char *ledger, char *dir, size_t len, char *err, size_t n)
{
	char parent[PATH_MAX];
	const char *base;
	struct stat st;
	int e;

	split_path(ledger, parent, sizeof(parent), &base);
	if (snprintf(dir, len, "%s/%s", parent, COMMITMENTS_DIR) >= (int)len) {
		snprintf(err, n, "the path of %s is too long", ledger);
		return -ENAMETOOLONG;
	}
	if (mkdir(dir, COMMITMENTS_DIR_MODE) == 0) {
		chmod(dir, COMMITMENTS_DIR_MODE);       /* whatever the umask */
		return 0;
	}
	if ((e = errno) != EEXIST) {
		snprintf(err, n, "cannot create %s: %s", dir, strerror(e));
		return -e;
	}
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, n, "%s is not a directory", dir);
		return -ENOTDIR;
	}
	return 0;
}

static int cmd_sign_ledger(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "key", required_argument, NULL, 'k' },
		{ "run", required_argument, NULL, 'r' },
		{ "records", required_argument, NULL, 'n' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char cmd[] = "sign-ledger";
	const char *key = NULL, *run = NULL, *records = NULL, *out = NULL;
	char err[2 * PATH_MAX + VD_DETAIL_MAX], dir[PATH_MAX], path[PATH_MAX + 64];
	vd_statement st;
	int64_t want = 0;
	size_t n;
	int ch, dup = 0;

	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'k': dup |= set_once(&key, optarg) < 0; break;
		case 'r': dup |= set_once(&run, optarg) < 0; break;
		case 'n': dup |= set_once(&records, optarg) < 0; break;
		case 'o': dup |= set_once(&out, optarg) < 0; break;
		case 'h': fputs(sign_usage_text + 1, stdout); return VD_EXIT_OK;
		default: return cmd_usage(cmd, "unknown option or missing value");
		}
	}
	if (dup)
		return cmd_usage(cmd, "an option is given twice");
	if (key == NULL)
		return cmd_usage(cmd, "--key is required");
	if (optind + 1 != argc)
		return cmd_usage(cmd, "takes one LEDGER file");
	if (run == NULL)
		run = RUN_DEFAULT;
	if (!check_run(run))
		return cmd_usage(cmd, RUN_USAGE);
	if (records != NULL && parse_count(records, 1, &want) < 0)
		return cmd_usage(cmd, "--records takes a record count, a positive integer");
	memset(&st, 0, sizeof(st));
	st.kind = VD_STMT_CHECKPOINT;
	memcpy(st.run, run, strlen(run) + 1);
	n = (size_t)want;
	if (ledger_head(argv[optind], &n, st.head_record_hash, err, sizeof(err)) < 0)
		return cmd_fail(cmd, err);
	st.records = n;
	if (out == NULL) {
		if (commitments_dir(argv[optind], dir, sizeof(dir), err, sizeof(err)) < 0)
			return cmd_fail(cmd, err);
		snprintf(path, sizeof(path), "%s/ledger-%zu.json", dir, n);
		out = path;
	}
	return sign_statement(cmd, key, VD_PT_CHECKPOINT, &st, out);
}

/* The envelope at path ("-": standard input) into b: 0, or a negative
 * errno with a sentence. */
static int read_envelope(const char *path, vd_buf *b, char *err, size_t n)
{
	struct stat st;
	int fd = strcmp(path, "-") == 0 ? STDIN_FILENO :
	    open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	int rc;

	if (fd < 0) {
		rc = -errno;
		snprintf(err, n, "cannot open %s: %s", path, strerror(-rc));
		return rc;
	}
	if (fd != STDIN_FILENO && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		snprintf(err, n, "%s is not a regular file", path);
		close(fd);
		return -EINVAL;
	}
	rc = vd_read_all(fd, VD_DSSE_MAX_BYTES, b);
	if (fd != STDIN_FILENO)
		close(fd);
	if (rc == -EFBIG)
		snprintf(err, n, "%s: not verified: too_large: the envelope is larger than %u bytes",
		    path, VD_DSSE_MAX_BYTES);
	else if (rc < 0)
		snprintf(err, n, "cannot read %s: %s", path, strerror(-rc));
	return rc < 0 ? rc : 0;
}

/* The verified payload as one line: a statement as its canonical JSON,
 * any other JSON payload compact with sorted keys. 0, or -EINVAL with a
 * sentence, or -ENOMEM. */
static int payload_line(const vd_dsse *e, vd_buf *line, char *why, size_t n)
{
	vd_statement st;
	vd_env_reason r;
	char msg[128];
	vd_jdoc doc;
	int rc;

	if (strcmp(e->payload_type, VD_PT_ROUNDCLOSE) == 0 ||
	    strcmp(e->payload_type, VD_PT_CHECKPOINT) == 0) {
		r = vd_statement_parse(e->payload_type, e->payload, e->payload_len, &st, why, n);
		if (r != VD_ENV_OK)
			return -EINVAL;
		return vd_statement_write(&st, line) < 0 ? -ENOMEM : 0;
	}
	if (vd_json_parse(e->payload, e->payload_len, NULL, &doc, msg, sizeof(msg)) < 0) {
		snprintf(why, n, "the payload is not JSON: %s", msg);
		return -EINVAL;
	}
	rc = vd_jw_value(line, doc.root, VD_JW_UTF8);
	vd_jdoc_free(&doc);
	if (rc < 0)
		snprintf(why, n, "the payload cannot be printed as one line");
	return rc < 0 ? -EINVAL : 0;
}

static const char *verify_sentence(vd_env_reason r)
{
	switch (r) {
	case VD_ENV_NO_SIGNATURE: return "the envelope has no signatures";
	case VD_ENV_UNKNOWN_KEY: return "no signature names this key";
	case VD_ENV_BAD_SIGNATURE: return "the signature by this key does not verify";
	default: return "the envelope is refused";
	}
}

static int cmd_verify_envelope(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "key", required_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char cmd[] = "verify-envelope";
	char err[PATH_MAX + VD_DETAIL_MAX], why[VD_DETAIL_MAX];
	const char *keyfile = NULL, *file;
	vd_keyring ring = { 0 };
	vd_env_reason r;
	vd_buf b, line;
	vd_key *k;
	vd_dsse e;
	int ch, dup = 0, rc = VD_EXIT_FAIL;

	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'k': dup |= set_once(&keyfile, optarg) < 0; break;
		case 'h': fputs(sign_usage_text + 1, stdout); return VD_EXIT_OK;
		default: return cmd_usage(cmd, "unknown option or missing value");
		}
	}
	if (dup)
		return cmd_usage(cmd, "an option is given twice");
	if (keyfile == NULL)
		return cmd_usage(cmd, "--key is required");
	if (optind + 1 != argc)
		return cmd_usage(cmd, "takes one envelope FILE");
	file = argv[optind];
	if (vd_key_load(keyfile, 0, 0, &k, err, sizeof(err)) < 0)
		return cmd_fail(cmd, err);
	ring.keys = &k;
	ring.n = 1;
	ring.refs = 1;
	vd_buf_init(&b);
	vd_buf_init(&line);
	if (read_envelope(file, &b, err, sizeof(err)) < 0) {
		cmd_fail(cmd, err);
		goto out;
	}
	r = vd_dsse_parse(b.p, b.len, &e, why, sizeof(why));
	if (r == VD_ENV_OK && (r = vd_dsse_verify(&e, &ring, NULL)) != VD_ENV_OK)
		snprintf(why, sizeof(why), "%s", verify_sentence(r));
	if (r == VD_ENV_OK && payload_line(&e, &line, why, sizeof(why)) < 0)
		r = VD_ENV_PAYLOAD;
	if (r != VD_ENV_OK) {
		snprintf(err, sizeof(err), "%s: not verified: %s: %s", file,
		    vd_env_reason_name(r), why);
		cmd_fail(cmd, err);
	} else {
		printf("%s\n", (char *)line.p);
		rc = VD_EXIT_OK;
	}
	vd_dsse_free(&e);
out:
	vd_buf_free(&b);
	vd_buf_free(&line);
	vd_key_free(k);
	return rc;
}

/* ---- signed verdicts (trust.md section 6) -------------------------------- */

/* The statement an attestation carries is untrusted input, read by the
 * strict parser under these bounds: no larger than an envelope of
 * VD_DSSE_MAX_BYTES can carry in base64, nested no deeper than any other
 * payload, and a fixed arena. */
#define ATTEST_PAYLOAD_MAX_BYTES (VD_DSSE_MAX_BYTES / 4 * 3)
#define ATTEST_MAX_DEPTH VD_DSSE_MAX_DEPTH
#define ATTEST_TIME_MAX 40              /* bytes in verified_at or issued_at */
#define ATTEST_STATE_MAX 32             /* bytes of predicate.state worth quoting */

/* What a trusted verdict says, for its one line. */
struct verdict {
	char hash[VD_HASH_HEX_LEN + 1];
	char verified_at[ATTEST_TIME_MAX + 1];
	char issued_at[ATTEST_TIME_MAX + 1];
};

static int jstr_is(const vd_jval *v, const char *s)
{
	return v != NULL && v->type == VD_JSTR && v->str.len == strlen(s) &&
	    memcmp(v->str.p, s, v->str.len) == 0;
}

/* Member key of o when o is an object and the member has this type. */
static const vd_jval *jmember(const vd_jval *o, const char *key, vd_jtype type)
{
	const vd_jval *v = o != NULL && o->type == VD_JOBJ ? vd_json_get(o, key) : NULL;

	return v != NULL && v->type == type ? v : NULL;
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* An RFC 3339 date-time, YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM), as
 * the daemon writes it: printable, so the line printed stays one line. */
static int rfc3339_ok(const vd_jval *v)
{
	static const char pat[] = "dddd-dd-ddTdd:dd:dd";
	const char *s;
	size_t i, n, start;

	if (v == NULL || v->type != VD_JSTR || v->str.len > ATTEST_TIME_MAX ||
	    v->str.len < sizeof(pat) - 1)
		return 0;
	s = v->str.p;
	n = v->str.len;
	for (i = 0; i < sizeof(pat) - 1; i++)
		if (pat[i] == 'd' ? !is_digit(s[i]) : s[i] != pat[i])
			return 0;
	if (i < n && s[i] == '.') {
		for (start = ++i; i < n && is_digit(s[i]); i++)
			;
		if (i == start)
			return 0;
	}
	if (n - i == 1)
		return s[i] == 'Z';
	return n - i == 6 && (s[i] == '+' || s[i] == '-') && is_digit(s[i + 1]) &&
	    is_digit(s[i + 2]) && s[i + 3] == ':' && is_digit(s[i + 4]) && is_digit(s[i + 5]);
}

/* A short printable ASCII string, safe to quote in a message. */
static int quotable(const vd_jval *v, size_t max)
{
	size_t i;

	if (v == NULL || v->type != VD_JSTR || v->str.len == 0 || v->str.len > max)
		return 0;
	for (i = 0; i < v->str.len; i++)
		if ((unsigned char)v->str.p[i] < 0x20 || (unsigned char)v->str.p[i] > 0x7e)
			return 0;
	return 1;
}

/* The subjects: a non-empty array of objects, each with a string name
 * when it has one and a digest.sha256 of 64 lowercase hex, all the same.
 * 0, or -EINVAL with why. */
static int check_subjects(const vd_jval *root, struct verdict *out, char *why, size_t n)
{
	const vd_jval *list = jmember(root, "subject", VD_JARR), *s, *name, *sha;
	size_t i = 0;

	if (list == NULL || list->count == 0) {
		snprintf(why, n, "the statement has no subject array with at least one subject");
		return -EINVAL;
	}
	for (s = list->child; s != NULL; s = s->next) {
		i++;
		name = s->type == VD_JOBJ ? vd_json_get(s, "name") : NULL;
		sha = jmember(jmember(s, "digest", VD_JOBJ), "sha256", VD_JSTR);
		if (s->type != VD_JOBJ || (name != NULL && name->type != VD_JSTR)) {
			snprintf(why, n, "subject %zu is not an object with a string name", i);
			return -EINVAL;
		}
		if (sha == NULL || !vd_is_hex64(sha->str)) {
			snprintf(why, n, "subject %zu has no digest.sha256 of 64 lowercase hex "
			    "characters", i);
			return -EINVAL;
		}
		if (i == 1) {
			memcpy(out->hash, sha->str.p, VD_HASH_HEX_LEN + 1);
		} else if (memcmp(out->hash, sha->str.p, VD_HASH_HEX_LEN) != 0) {
			snprintf(why, n, "the subjects name different digests: subject 1 is %s, "
			    "subject %zu %s", out->hash, i, sha->str.p);
			return -EINVAL;
		}
	}
	return 0;
}

/* 0 when the payload is an in-toto Statement v1 carrying a trusted
 * lensemble-verifyd verdict about one content hash (expect, when not
 * NULL), with out filled; -EINVAL with the check that failed in why. */
static int check_verdict(const uint8_t *p, size_t len, const char *expect,
    struct verdict *out, char *why, size_t n)
{
	vd_json_opts opts = { ATTEST_MAX_DEPTH, VD_ATTEST_JSON_MEMORY };
	const vd_jval *pred, *trusted, *state, *vat, *iat;
	char msg[128];
	vd_jdoc doc;
	int rc = -EINVAL;

	if (len > ATTEST_PAYLOAD_MAX_BYTES) {
		snprintf(why, n, "the statement is larger than %u bytes", ATTEST_PAYLOAD_MAX_BYTES);
		return -EINVAL;
	}
	if (vd_json_parse(p, len, &opts, &doc, msg, sizeof(msg)) < 0) {
		snprintf(why, n, "the statement is not strict JSON: %s", msg);
		return -EINVAL;
	}
	pred = jmember(doc.root, "predicate", VD_JOBJ);
	trusted = jmember(pred, "trusted", VD_JBOOL);
	state = jmember(pred, "state", VD_JSTR);
	vat = jmember(pred, "verified_at", VD_JSTR);
	iat = jmember(pred, "issued_at", VD_JSTR);
	if (doc.root->type != VD_JOBJ)
		snprintf(why, n, "the statement is not a JSON object");
	else if (!jstr_is(vd_json_get(doc.root, "_type"), VD_INTOTO_STATEMENT))
		snprintf(why, n, "_type is not \"%s\": not an in-toto Statement v1",
		    VD_INTOTO_STATEMENT);
	else if (!jstr_is(vd_json_get(doc.root, "predicateType"), VD_VERDICT_PREDICATE))
		snprintf(why, n, "predicateType is not \"%s\": not a verdict of lensemble-verifyd",
		    VD_VERDICT_PREDICATE);
	else if (check_subjects(doc.root, out, why, n) < 0)
		;
	else if (expect != NULL && strcmp(out->hash, expect) != 0)
		snprintf(why, n, "the verdict is about %s, not the expected %s", out->hash, expect);
	else if (pred == NULL)
		snprintf(why, n, "the statement has no predicate object");
	else if (trusted == NULL)
		snprintf(why, n, "predicate.trusted is not a boolean");
	else if (!trusted->boolean)
		snprintf(why, n, "the verdict says %s is not trusted (state %s)", out->hash,
		    quotable(state, ATTEST_STATE_MAX) ? state->str.p : "not given");
	else if (!rfc3339_ok(vat))
		snprintf(why, n, "predicate.verified_at is not an RFC 3339 time");
	else if (!rfc3339_ok(iat))
		snprintf(why, n, "predicate.issued_at is not an RFC 3339 time");
	else {
		memcpy(out->verified_at, vat->str.p, vat->str.len + 1);
		memcpy(out->issued_at, iat->str.p, iat->str.len + 1);
		rc = 0;
	}
	vd_jdoc_free(&doc);
	return rc;
}

static int cmd_verify_attestation(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "key", required_argument, NULL, 'k' },
		{ "expect", required_argument, NULL, 'e' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char cmd[] = "verify-attestation";
	char err[PATH_MAX + 2 * VD_DETAIL_MAX], why[VD_DETAIL_MAX];
	const char *keyfile = NULL, *expect = NULL, *file;
	const vd_key *signer = NULL;
	vd_keyring ring = { 0 };
	struct verdict v;
	vd_env_reason r;
	vd_buf b;
	vd_key *k;
	vd_dsse e;
	int ch, dup = 0, rc = VD_EXIT_FAIL;

	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'k': dup |= set_once(&keyfile, optarg) < 0; break;
		case 'e': dup |= set_once(&expect, optarg) < 0; break;
		case 'h': fputs(sign_usage_text + 1, stdout); return VD_EXIT_OK;
		default: return cmd_usage(cmd, "unknown option or missing value");
		}
	}
	if (dup)
		return cmd_usage(cmd, "an option is given twice");
	if (keyfile == NULL)
		return cmd_usage(cmd, "--key is required");
	if (expect != NULL && !vd_is_hex64((vd_str){ expect, strlen(expect) }))
		return cmd_usage(cmd, "--expect takes a content hash of 64 lowercase hex characters");
	if (optind + 1 != argc)
		return cmd_usage(cmd, "takes one attestation FILE (- for standard input)");
	file = argv[optind];
	if (vd_key_load(keyfile, 0, 0, &k, err, sizeof(err)) < 0)
		return cmd_fail(cmd, err);
	ring.keys = &k;
	ring.n = 1;
	ring.refs = 1;
	memset(&e, 0, sizeof(e));
	memset(&v, 0, sizeof(v));
	vd_buf_init(&b);
	if (read_envelope(file, &b, err, sizeof(err)) < 0) {
		cmd_fail(cmd, err);
		goto out;
	}
	/* In this order: the envelope, its type, the signature, and only then
	 * what the signed statement says. */
	r = vd_dsse_parse(b.p, b.len, &e, why, sizeof(why));
	if (r == VD_ENV_OK && strcmp(e.payload_type, VD_PT_INTOTO) != 0) {
		r = VD_ENV_PAYLOAD_TYPE;
		snprintf(why, sizeof(why), "the payload type is \"%s\", not %s",
		    e.payload_type, VD_PT_INTOTO);
	}
	if (r == VD_ENV_OK && (r = vd_dsse_verify(&e, &ring, &signer)) != VD_ENV_OK)
		snprintf(why, sizeof(why), "%s", verify_sentence(r));
	if (r != VD_ENV_OK) {
		snprintf(err, sizeof(err), "%s: not verified: %s: %s", file,
		    vd_env_reason_name(r), why);
		cmd_fail(cmd, err);
	} else if (check_verdict(e.payload, e.payload_len, expect, &v, why, sizeof(why)) < 0) {
		snprintf(err, sizeof(err), "%s: not a trusted verdict: %s", file, why);
		cmd_fail(cmd, err);
	} else {
		printf("trusted %s (verified_at %s, issued_at %s, key %s)\n", v.hash,
		    v.verified_at, v.issued_at, vd_key_id(signer));
		rc = fflush(stdout) == 0 ? VD_EXIT_OK : cmd_fail(cmd, "cannot write to standard output");
	}
	vd_dsse_free(&e);
out:
	vd_buf_free(&b);
	vd_key_free(k);
	return rc;
}

/* The exit status of a subcommand named by argv[0], or -ENOENT when
 * argv[0] names none (the arguments are artifacts). */
static int subcommand(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {
		{ "keygen", cmd_keygen },
		{ "sign-roundclose", cmd_sign_roundclose },
		{ "sign-ledger", cmd_sign_ledger },
		{ "verify-envelope", cmd_verify_envelope },
		{ "verify-attestation", cmd_verify_attestation },
		{ "verify-oms", cmd_verify_oms },
		{ "sign-oms", cmd_sign_oms },
	};
	size_t i;

	for (i = 0; i < VD_ARRAY_LEN(cmds); i++)
		if (strcmp(argv[0], cmds[i].name) == 0)
			return cmds[i].fn(argc, argv);
	return -ENOENT;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "expect", required_argument, NULL, 'e' },
		{ "ledger", no_argument, NULL, 'l' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct cli cli = { 0 };
	int ch, i, failed = 0;

	/* keygen, sign-roundclose, sign-ledger, verify-envelope,
	 * verify-attestation: a first argument that is one of these words is
	 * a subcommand. */
	if (argc > 1 && (ch = subcommand(argc - 1, argv + 1)) >= 0)
		return ch;
	while ((ch = getopt_long(argc, argv, "je:lqhV", longopts, NULL)) != -1) {
		switch (ch) {
		case 'j': cli.json = 1; break;
		case 'e': cli.expect = optarg; break;
		case 'l': cli.ledger = 1; break;
		case 'q': cli.quiet = 1; break;
		case 'h':
			fputs(usage_text, stdout);
			fputs(sign_usage_text, stdout);
			fputs(oms_usage_text, stdout);
			return VD_EXIT_OK;
		case 'V': printf("lensemble-verify %s\n", PACKAGE_VERSION); return VD_EXIT_OK;
		default: return usage_error("unknown option");
		}
	}
	vd_artifact_guard_sigbus();
	if (optind >= argc)
		return usage_error(cli.ledger ? "no ledger file given" : "no artifact given");
	if (cli.expect && !vd_is_hex64((vd_str){ cli.expect, strlen(cli.expect) }))
		return usage_error("--expect takes a content hash of 64 lowercase hex characters");
	if (cli.expect && cli.ledger)
		return usage_error("--expect applies to artifacts, not ledgers");
	for (i = optind; i < argc; i++)
		failed |= (cli.ledger ? verify_ledger(&cli, argv[i]) : verify_one(&cli, argv[i])) !=
		    VD_EXIT_OK;
	return failed ? VD_EXIT_FAIL : VD_EXIT_OK;
}

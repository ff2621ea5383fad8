/*
 * lensemble-verify: check Lensemble model artifacts (and ledgers) once,
 * from the command line. Exit 0: all verified; 1: one failed; 2: usage.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "lensemble/verify.h"
#include "vd_artifact.h"
#include "vd_ledger.h"
#include "vd_util.h"

#define PROGRESS_MIN_BYTES (256u << 20)   /* show progress above this size */
#define LEDGER_MAX_BYTES (256u << 20)

static const char usage_text[] =
"Usage: lensemble-verify [--json] [--expect HASH] ARTIFACT_DIR...\n"
"       lensemble-verify [--json] --ledger LEDGER_FILE...\n"
"\n"
"Verify Lensemble model artifacts: recompute each directory's canonical\n"
"SHA-256 content hash from header.json and its safetensors weights and\n"
"check it against the header (and the committed hash, with --expect).\n"
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

	if (total < PROGRESS_MIN_BYTES)
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

static void report_artifact(const struct cli *cli, const char *path,
    const vd_verdict *v, double secs)
{
	json_object *o;

	if (cli->quiet)
		return;
	if (!cli->json) {
		if (v->code == VD_OK)
			printf("%s: OK %s round %lld (%llu tensors, %llu bytes, %.3f s)\n",
			    path, v->content_hash, (long long)v->round_index,
			    (unsigned long long)v->tensors, (unsigned long long)v->bytes, secs);
		else
			printf("%s: FAILED %s: %s\n", path, vd_code_name(v->code), v->detail);
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
	}
	print_json(o);
}

static int verify_one(const struct cli *cli, const char *path)
{
	vd_options opt = { 0 };
	vd_verdict v;
	double t0 = now();

	opt.expected_hash = cli->expect;
	if (!cli->quiet && isatty(STDERR_FILENO)) {
		opt.progress = progress;
		opt.progress_arg = (void *)path;
	}
	vd_verify_artifact(path, &opt, &v);
	report_artifact(cli, path, &v, now() - t0);
	return v.code == VD_OK ? 0 : 1;
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

static int verify_ledger(const struct cli *cli, const char *path)
{
	vd_ledger_result r;
	char err[VD_DETAIL_MAX];
	struct stat st;
	void *map = NULL;
	int fd;

	memset(&r, 0, sizeof(r));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > LEDGER_MAX_BYTES) {
		snprintf(err, sizeof(err), "cannot read the ledger: %s",
		    fd < 0 || errno ? strerror(errno) : "not a regular file of at most 256 MiB");
		goto fail;
	}
	if (st.st_size > 0) {
		map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED) {
			snprintf(err, sizeof(err), "cannot map the ledger: %s", strerror(errno));
			goto fail;
		}
	}
	vd_ledger_verify(map, (size_t)st.st_size, NULL, NULL, &r);
	if (map)
		munmap(map, (size_t)st.st_size);
	close(fd);
	report_ledger(cli, path, &r, NULL);
	return r.brk == VD_LEDGER_INTACT ? 0 : 1;
fail:
	if (fd >= 0)
		close(fd);
	report_ledger(cli, path, &r, err);
	return 1;
}

static int usage_error(const char *msg)
{
	fprintf(stderr, "lensemble-verify: %s\nTry 'lensemble-verify --help'.\n", msg);
	return 2;
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

	while ((ch = getopt_long(argc, argv, "je:lqhV", longopts, NULL)) != -1) {
		switch (ch) {
		case 'j': cli.json = 1; break;
		case 'e': cli.expect = optarg; break;
		case 'l': cli.ledger = 1; break;
		case 'q': cli.quiet = 1; break;
		case 'h': fputs(usage_text, stdout); return 0;
		case 'V': printf("lensemble-verify %s\n", PACKAGE_VERSION); return 0;
		default: return usage_error("unknown option");
		}
	}
	vd_artifact_guard_sigbus();
	if (optind >= argc)
		return usage_error(cli.ledger ? "no ledger file given" : "no artifact directory given");
	if (cli.expect && !vd_is_hex64((vd_str){ cli.expect, strlen(cli.expect) }))
		return usage_error("--expect takes a content hash of 64 lowercase hex characters");
	if (cli.expect && cli.ledger)
		return usage_error("--expect applies to artifacts, not ledgers");
	for (i = optind; i < argc; i++)
		failed |= cli.ledger ? verify_ledger(&cli, argv[i]) : verify_one(&cli, argv[i]);
	return failed ? 1 : 0;
}

/*
 * vd-mkartifact: write a Lensemble artifact directory (and optionally a
 * ledger record committing it) for demos, tests and benchmarks. Tensor
 * bytes are pseudo-random from a seed; the content hash is computed by the
 * library and written into header.json.
 *
 *   vd-mkartifact [--round N] [--parent HASH] [--bytes N] [--tensors N]
 *                 [--shards N] [--seed N] [--ledger FILE] [--participants a,b]
 *                 [--sparse] [--claim HASH] [--chain N] DIR
 *
 * With --claim HASH, header.json claims HASH and nothing is hashed: an
 * artifact too big to hash when it is made (a sparse terabyte), or one
 * whose claim is wrong.
 *
 * With --chain N, DIR is a run directory: rounds 0 to N-1 are written as
 * DIR/round-NNNNN, each the parent of the next, and every round after 0 is
 * committed by a record of DIR/ledger.jsonl (or --ledger FILE), in one
 * process. Prints the head's hash.
 *
 * A new DIR appears whole (written under a hidden name beside it, then
 * renamed), so a daemon watching the store never sees it half made.
 *
 * Prints the content hash on stdout.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lensemble/verify.h"
#include "vd_ledger.h"
#include "vd_util.h"

#define WRITE_CHUNK (4u << 20)

struct spec {
	long long round;
	const char *parent;
	uint64_t bytes;
	unsigned tensors, shards;
	uint64_t seed;
	const char *ledger;
	const char *participants;
	const char *dir;
	int sparse;          /* zero tensors as a file hole: big and cheap */
	const char *claim;   /* the hash header.json claims, unchecked */
};

static void die(const char *what, const char *arg)
{
	fprintf(stderr, "vd-mkartifact: %s %s\n", what, arg);
	exit(1);
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* The first half are encoder tensors, the rest predictor: index order is
 * name order, as the manifest needs. */
static const char *tensor_group(const struct spec *s, unsigned i)
{
	return i < (s->tensors + 1) / 2 ? "encoder" : "predictor";
}

static void tensor_name(const struct spec *s, char *out, size_t n, unsigned i)
{
	snprintf(out, n, "%s.layer%05u.weight", tensor_group(s, i), i);
}

/* Tensor i holds elems[i] float32 values; sizes split `bytes` evenly. */
static uint64_t tensor_elems(const struct spec *s, unsigned i)
{
	uint64_t total = s->bytes / 4, each = total / s->tensors;

	return i == s->tensors - 1 ? total - each * (s->tensors - 1) : each;
}

static void write_all(int fd, const void *p, size_t n, const char *path)
{
	const uint8_t *b = p;

	while (n > 0) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("cannot write", path);
		b += w;
		n -= (size_t)w;
	}
}

static void write_shard(const struct spec *s, unsigned shard, const char *fname,
    uint64_t *rng)
{
	char path[4096], name[64];
	vd_buf h;
	uint64_t off = 0, pad;
	unsigned i;
	uint8_t *buf;
	int fd;

	vd_buf_init(&h);
	vd_buf_putc(&h, '{');
	for (i = shard; i < s->tensors; i += s->shards) {
		uint64_t e = tensor_elems(s, i);
		tensor_name(s, name, sizeof(name), i);
		vd_buf_printf(&h, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%" PRIu64 "],"
		    "\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", h.len > 1 ? "," : "",
		    name, e, off, off + e * 4);
		off += e * 4;
	}
	vd_buf_putc(&h, '}');
	for (pad = (8 - h.len % 8) % 8; pad > 0; pad--)
		vd_buf_putc(&h, ' ');
	snprintf(path, sizeof(path), "%s/%s", s->dir, fname);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		die("cannot create", path);
	write_all(fd, (uint64_t[]){ htole64(h.len) }, 8, path);
	write_all(fd, h.p, h.len, path);
	if (s->sparse) {
		off_t end = lseek(fd, 0, SEEK_CUR) + (off_t)off;
		if (ftruncate(fd, end) < 0)
			die("cannot extend", path);
		close(fd);
		vd_buf_free(&h);
		return;
	}
	buf = malloc(WRITE_CHUNK);
	if (buf == NULL)
		die("out of memory", "");
	while (off > 0) {
		size_t n = off > WRITE_CHUNK ? WRITE_CHUNK : (size_t)off, j;
		for (j = 0; j + 8 <= n; j += 8) {
			/* Small finite float32 values: two per 64-bit draw. */
			uint64_t r = xorshift(rng) & 0x3e7fffff3e7fffffULL;
			memcpy(buf + j, &r, 8);
		}
		write_all(fd, buf, n, path);
		off -= n;
	}
	free(buf);
	close(fd);
	vd_buf_free(&h);
}

static void shard_name(const struct spec *s, unsigned i, char *out, size_t n)
{
	if (s->shards == 1)
		snprintf(out, n, "weights.safetensors");
	else
		snprintf(out, n, "weights-%05u-of-%05u.safetensors", i, s->shards);
}

static void write_header(const struct spec *s, const char *hash)
{
	char path[4096], name[64];
	unsigned i;
	vd_buf h;
	FILE *f;

	vd_buf_init(&h);
	vd_buf_printf(&h, "{\n  \"schema_version\": 2,\n  \"content_hash\": \"%s\",\n", hash);
	if (s->parent)
		vd_buf_printf(&h, "  \"parent_hash\": \"%s\",\n", s->parent);
	else
		vd_buf_puts(&h, "  \"parent_hash\": null,\n");
	vd_buf_printf(&h, "  \"wmcp_version\": \"wmcp-1.0.0\",\n  \"round_index\": %lld,\n"
	    "  \"config_hash\": \"%064d\",\n  \"param_groups\": [\"encoder\", \"predictor\"],\n"
	    "  \"tensor_manifest\": [", s->round, 0);
	/* The manifest is in name order, which is index order here. */
	for (i = 0; i < s->tensors; i++) {
		tensor_name(s, name, sizeof(name), i);
		vd_buf_printf(&h, "%s\n    {\"name\": \"%s\", \"group\": \"%s\", \"dtype\": \"float32\", "
		    "\"shape\": [%" PRIu64 "]}", i ? "," : "", name,
		    tensor_group(s, i), tensor_elems(s, i));
	}
	vd_buf_puts(&h, "\n  ],\n  \"weight_files\": [");
	for (i = 0; i < s->shards; i++) {
		shard_name(s, i, name, sizeof(name));
		vd_buf_printf(&h, "%s\"%s\"", i ? ", " : "", name);
	}
	vd_buf_puts(&h, "],\n  \"created_at\": \"2026-06-02T12:00:00Z\",\n  \"model_arch\": null\n}\n");
	snprintf(path, sizeof(path), "%s/header.json", s->dir);
	f = fopen(path, "w");
	if (f == NULL || fwrite(h.p, 1, h.len, f) != h.len || fclose(f) != 0)
		die("cannot write", path);
	vd_buf_free(&h);
}

/* The last record's hash, so the appended record links to it. */
static int last_record(const char *ledger, vd_ledger_record *last)
{
	char *line = NULL, why[160];
	size_t cap = 0;
	ssize_t n;
	int found = 0;
	FILE *f = fopen(ledger, "r");

	if (f == NULL)
		return 0;
	while ((n = getline(&line, &cap, f)) > 0) {
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			n--;
		if (n > 0 && vd_ledger_parse_record((uint8_t *)line, (size_t)n, last, why, sizeof(why)) == 0)
			found = 1;
	}
	free(line);
	fclose(f);
	return found;
}

/* Append the record committing hash; *last (when *have) is the record
 * before it and becomes this one. */
static void append_ledger(const struct spec *s, const char *hash, vd_ledger_record *last,
    int *have)
{
	char *parts = strdup(s->participants), *tok, *save = NULL;
	vd_buf roots, list;
	FILE *f;

	vd_buf_init(&roots);
	vd_buf_init(&list);
	for (tok = strtok_r(parts, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		vd_buf_printf(&list, "%s\"%s\"", list.len ? "," : "", tok);
		vd_buf_printf(&roots, "%s\"%s\":\"%064d\"", roots.len ? "," : "", tok, 1);
	}
	vd_buf rec;
	char why[160];

	vd_buf_init(&rec);
	/* Round t's record commits the artifact of round t + 1. */
	vd_buf_printf(&rec, "{\"schema_version\":1,\"round_index\":%lld,\"participants\":[%s],"
	    "\"dataset_roots\":{%s},\"global_model_hash\":\"%s\",\"prev_record_hash\":",
	    s->round - 1, list.p ? (char *)list.p : "", roots.p ? (char *)roots.p : "", hash);
	if (*have)
		vd_buf_printf(&rec, "\"%s\"}", last->record_hash);
	else
		vd_buf_puts(&rec, "null}");
	if (vd_ledger_parse_record(rec.p, rec.len, last, why, sizeof(why)) < 0)
		die("wrote a record that does not parse:", why);
	*have = 1;
	f = fopen(s->ledger, "a");
	if (f == NULL || fwrite(rec.p, 1, rec.len, f) != rec.len || fputc('\n', f) == EOF ||
	    fclose(f) != 0)
		die("cannot write", s->ledger);
	vd_buf_free(&rec);
	free(parts);
	vd_buf_free(&roots);
	vd_buf_free(&list);
}

/* Write the artifact s describes in s->dir; its hash into hash. */
static void make_in(const struct spec *s, char hash[VD_HASH_HEX_LEN + 1])
{
	char name[64], zero[VD_HASH_HEX_LEN + 1];
	uint64_t rng;
	vd_verdict v;
	unsigned i;

	if (mkdir(s->dir, 0755) < 0 && errno != EEXIST)
		die("cannot create", s->dir);
	rng = s->seed * 0x9e3779b97f4a7c15ULL + 1;
	for (i = 0; i < s->shards; i++) {
		shard_name(s, i, name, sizeof(name));
		write_shard(s, i, name, &rng);
	}
	if (s->claim != NULL) {
		write_header(s, s->claim);
		snprintf(hash, VD_HASH_HEX_LEN + 1, "%s", s->claim);
		return;
	}
	/* Hash once with a placeholder claim; the verdict carries the real hash. */
	memset(zero, '0', VD_HASH_HEX_LEN);
	zero[VD_HASH_HEX_LEN] = '\0';
	write_header(s, zero);
	vd_verify_artifact(s->dir, NULL, &v);
	if (v.content_hash[0] == '\0')
		die("the written artifact does not hash:", v.detail);
	write_header(s, v.content_hash);
	if (vd_verify_artifact(s->dir, NULL, &v) != VD_OK)
		die("the written artifact does not verify:", v.detail);
	memcpy(hash, v.content_hash, VD_HASH_HEX_LEN + 1);
}

/* A new DIR is written beside it under a hidden name, which a daemon
 * watching the store skips, and renamed into place whole: a scan never
 * sees its placeholder claim or half its weights. An existing DIR is
 * written in place. */
static void make_one(const struct spec *s, char hash[VD_HASH_HEX_LEN + 1])
{
	char tmp[PATH_MAX];
	const char *slash = strrchr(s->dir, '/');
	struct spec t = *s;
	struct stat st;

	if (lstat(s->dir, &st) == 0 || errno != ENOENT || (slash != NULL && slash[1] == '\0')) {
		make_in(s, hash);
		return;
	}
	if (slash == NULL)
		snprintf(tmp, sizeof(tmp), ".%s.mk-%ld", s->dir, (long)getpid());
	else
		snprintf(tmp, sizeof(tmp), "%.*s/.%s.mk-%ld", (int)(slash - s->dir), s->dir,
		    slash + 1, (long)getpid());
	t.dir = tmp;
	make_in(&t, hash);
	if (rename(tmp, s->dir) < 0)
		die("cannot rename into place:", s->dir);
}

/* Rounds 0..n-1 of one run, chained and committed, in one process. */
static int make_chain(struct spec *s, const char *run, long long n)
{
	char dir[PATH_MAX], ledger[PATH_MAX], hash[VD_HASH_HEX_LEN + 1], parent[VD_HASH_HEX_LEN + 1];
	vd_ledger_record last;
	uint64_t seed = s->seed;
	int have = 0;
	long long r;

	if (mkdir(run, 0755) < 0 && errno != EEXIST)
		die("cannot create", run);
	if (s->ledger == NULL) {
		snprintf(ledger, sizeof(ledger), "%s/ledger.jsonl", run);
		s->ledger = ledger;
	}
	for (r = 0; r < n; r++) {
		snprintf(dir, sizeof(dir), "%s/round-%05lld", run, r);
		s->dir = dir;
		s->round = r;
		s->parent = r > 0 ? parent : NULL;
		s->seed = seed + (uint64_t)r;
		make_one(s, hash);
		if (r > 0)
			append_ledger(s, hash, &last, &have);
		memcpy(parent, hash, sizeof(parent));
	}
	printf("%s\n", hash);
	return 0;
}

static const char usage_text[] =
"usage: vd-mkartifact [OPTION]... DIR\n"
"Write a Lensemble artifact directory DIR (header.json and safetensors\n"
"weights of pseudo-random float32 tensors) and print its content hash.\n"
"\n"
"  --round N           the header's round_index (default 0)\n"
"  --parent HASH       the header's parent_hash (default null)\n"
"  --bytes N           tensor bytes in all, split evenly (default 4096)\n"
"  --tensors N         tensors, half encoder, half predictor (default 4)\n"
"  --shards N          number of weight files, at most --tensors (default 1)\n"
"  --seed N            seed of the tensor bytes (default 1)\n"
"  --ledger FILE       append to FILE the record of round N-1 that commits DIR\n"
"  --participants a,b  a ledger record's participants (default site-a,site-b)\n"
"  --sparse            zero tensors as a file hole: big artifacts made cheaply\n"
"  --claim HASH        header.json claims HASH and nothing is hashed\n"
"  --chain N           DIR is a run: rounds 0 to N-1 as DIR/round-NNNNN, each\n"
"                      the parent of the next, committed in DIR/ledger.jsonl\n"
"                      (or --ledger FILE); prints the last round's hash\n"
"  --help              show this help and exit\n";

static void usage(void)
{
	fputs(usage_text, stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "round", required_argument, NULL, 'r' },
		{ "parent", required_argument, NULL, 'p' },
		{ "bytes", required_argument, NULL, 'b' },
		{ "tensors", required_argument, NULL, 't' },
		{ "shards", required_argument, NULL, 's' },
		{ "seed", required_argument, NULL, 'S' },
		{ "ledger", required_argument, NULL, 'l' },
		{ "participants", required_argument, NULL, 'P' },
		{ "sparse", no_argument, NULL, 'z' },
		{ "chain", required_argument, NULL, 'c' },
		{ "claim", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct spec s = { 0, NULL, 4096, 4, 1, 1, NULL, "site-a,site-b", NULL, 0, NULL };
	char hash[VD_HASH_HEX_LEN + 1];
	vd_ledger_record last;
	long long chain = 0;
	int ch, have;

	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'r': s.round = atoll(optarg); break;
		case 'p': s.parent = optarg; break;
		case 'b': s.bytes = strtoull(optarg, NULL, 0); break;
		case 't': s.tensors = (unsigned)atoi(optarg); break;
		case 's': s.shards = (unsigned)atoi(optarg); break;
		case 'S': s.seed = strtoull(optarg, NULL, 0); break;
		case 'l': s.ledger = optarg; break;
		case 'P': s.participants = optarg; break;
		case 'z': s.sparse = 1; break;
		case 'c': chain = atoll(optarg); break;
		case 'C': s.claim = optarg; break;
		case 'h': fputs(usage_text, stdout); return 0;
		default: usage();
		}
	}
	if (optind != argc - 1 || s.tensors == 0 || s.shards == 0 || s.shards > s.tensors ||
	    s.bytes < 4ull * s.tensors || s.round < 0 || chain < 0 ||
	    (s.claim != NULL && (strlen(s.claim) != VD_HASH_HEX_LEN || chain > 0)))
		usage();
	if (chain > 0)
		return make_chain(&s, argv[optind], chain);
	s.dir = argv[optind];
	make_one(&s, hash);
	if (s.ledger && s.round > 0) {
		have = last_record(s.ledger, &last);
		append_ledger(&s, hash, &last, &have);
	}
	printf("%s\n", hash);
	return 0;
}

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vd_attest.h"

#define JSON_OUT (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

/* The file appears under its name only once written and synced: a crash
 * never leaves a half key that the next start would refuse. */
static int write_new_key(const char *path, vd_key_type type, vd_key **out, char *err,
    size_t errlen)
{
	char tmp[PATH_MAX + 8];
	vd_key *k = NULL;
	vd_buf pem;
	size_t len;
	int fd = -1, rc;

	vd_buf_init(&pem);
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		rc = -ENAMETOOLONG;
	else if (vd_key_generate_type(type, &k) < 0 || vd_key_private_pem(k, &pem) < 0)
		rc = -EIO;
	else
		rc = 0;
	if (rc < 0) {
		snprintf(err, errlen, "cannot generate a signing key");
		goto out;
	}
	unlink(tmp);
	errno = 0;
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	len = strlen((const char *)pem.p);
	if (fd < 0 || write(fd, pem.p, len) != (ssize_t)len || fsync(fd) < 0 ||
	    rename(tmp, path) < 0) {
		/* A short write sets no errno: say EIO rather than a stale one. */
		rc = errno ? -errno : -EIO;
		snprintf(err, errlen, "cannot write the signing key %s: %s", path, strerror(-rc));
		unlink(tmp);
		goto out;
	}
	*out = k;
	k = NULL;
out:
	if (fd >= 0)
		close(fd);
	if (pem.p)
		explicit_bzero(pem.p, pem.cap);
	vd_buf_free(&pem);
	vd_key_free(k);
	return rc;
}

int vd_attest_key_open(const char *path, int create, vd_key **out, char *err, size_t errlen)
{
	struct stat st;

	if (create && lstat(path, &st) < 0 && errno == ENOENT)
		return write_new_key(path, VD_KEY_ED25519, out, err, errlen);
	return vd_key_load(path, 1, 1, out, err, errlen) < 0 ? -EINVAL : 0;
}

int vd_attest_oms_key_open(const char *path, int create, vd_key **out, char *err, size_t errlen)
{
	struct stat st;

	if (create && lstat(path, &st) < 0 && errno == ENOENT)
		return write_new_key(path, VD_KEY_EC_P256, out, err, errlen);
	if (vd_key_load_any(path, 1, 1, out, err, errlen) < 0)
		return -EINVAL;
	if (vd_key_get_type(*out) == VD_KEY_ED25519) {
		vd_key_free(*out);
		*out = NULL;
		snprintf(err, errlen, "%s is an Ed25519 key; OMS bundles are signed with an EC key "
		    "(lensemble-verify keygen --type ec-p256)", path);
		return -EINVAL;
	}
	return 0;
}

static json_object *get(json_object *o, const char *key)
{
	json_object *v = NULL;

	json_object_object_get_ex(o, key, &v);
	return v;
}

/* Out of memory anywhere, the statement is not made: *bad is set, and
 * what could not be added is dropped. */
static void put(json_object *o, const char *key, json_object *v, int *bad)
{
	if (o == NULL || json_object_object_add(o, key, v) != 0) {
		*bad = 1;
		json_object_put(v);
	}
}

/* A new value (NULL: out of memory) added under key. */
static void put_new(json_object *o, const char *key, json_object *v, int *bad)
{
	if (v == NULL)
		*bad = 1;
	else
		put(o, key, v, bad);
}

static void put_string(json_object *o, const char *key, const char *s, int *bad)
{
	put_new(o, key, json_object_new_string(s), bad);
}

/* Share a member of the status object (json-c counts references). */
static void copy_member(json_object *dst, json_object *src, const char *key, const char *as,
    int *bad)
{
	json_object *v = get(src, key);

	put(dst, as ? as : key, v ? json_object_get(v) : NULL, bad);
}

static json_object *subject(json_object *copy, const char *hash, int *bad)
{
	json_object *s = json_object_new_object(), *d = json_object_new_object();

	put_string(d, "sha256", hash, bad);
	put(s, "name", json_object_get(get(copy, "path")), bad);
	put_new(s, "digest", d, bad);
	if (s == NULL)
		*bad = 1;
	return s;
}

/* One subject per verified copy; the latest verification time among them. */
static json_object *subjects(json_object *status, const char *hash, const char **verified_at,
    int *bad)
{
	json_object *list = json_object_new_array(), *copies = get(status, "copies");
	size_t i, n = copies ? json_object_array_length(copies) : 0;

	*verified_at = NULL;
	if (list == NULL) {
		*bad = 1;
		return NULL;
	}
	for (i = 0; i < n; i++) {
		json_object *c = json_object_array_get_idx(copies, i), *s;
		const char *when = json_object_get_string(get(c, "verified_at"));
		if (strcmp(json_object_get_string(get(c, "state")), "verified") != 0)
			continue;
		if ((s = subject(c, hash, bad)) != NULL && json_object_array_add(list, s) != 0) {
			json_object_put(s);
			*bad = 1;
		}
		if (when && (*verified_at == NULL || strcmp(when, *verified_at) > 0))
			*verified_at = when;
	}
	return list;
}

static json_object *predicate(json_object *status, const char *verified_at, double now,
    int *bad)
{
	json_object *p = json_object_new_object(), *chain = json_object_new_object();
	json_object *v = json_object_new_object(), *src_chain = get(status, "chain");
	char when[40];

	copy_member(p, status, "state", NULL, bad);
	copy_member(p, status, "trusted", NULL, bad);
	copy_member(chain, src_chain, "status", NULL, bad);
	copy_member(chain, src_chain, "length", NULL, bad);
	copy_member(chain, src_chain, "root", NULL, bad);
	put_new(p, "chain", chain, bad);
	copy_member(p, status, "commitment", NULL, bad);
	put_string(p, "verified_at", verified_at, bad);
	vd_rfc3339(now, when, sizeof(when));
	put_string(p, "issued_at", when, bad);
	put_string(v, "name", PACKAGE_NAME, bad);
	put_string(v, "version", PACKAGE_VERSION, bad);
	put_new(p, "verifier", v, bad);
	if (p == NULL)
		*bad = 1;
	return p;
}

int vd_attest_statement(json_object *status, double now, vd_buf *b)
{
	const char *hash = json_object_get_string(get(status, "content_hash")), *verified_at, *text;
	json_object *st, *subj;
	int bad = 0, rc = -ENOMEM;

	if (hash == NULL)
		return -ENOENT;
	subj = subjects(status, hash, &verified_at, &bad);
	if (subj == NULL || json_object_array_length(subj) == 0 || verified_at == NULL) {
		json_object_put(subj);
		return bad ? -ENOMEM : -ENOENT;
	}
	st = json_object_new_object();
	put_string(st, "_type", VD_INTOTO_STATEMENT, &bad);
	put_new(st, "subject", subj, &bad);
	put_string(st, "predicateType", VD_VERDICT_PREDICATE, &bad);
	put_new(st, "predicate", predicate(status, verified_at, now, &bad), &bad);
	if (st != NULL && !bad &&
	    (text = json_object_to_json_string_ext(st, JSON_OUT)) != NULL)
		rc = vd_buf_puts(b, text) < 0 || b->oom ? -ENOMEM : 0;
	json_object_put(st);
	return rc;
}

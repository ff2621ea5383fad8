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
static int write_new_key(const char *path, vd_key **out, char *err, size_t errlen)
{
	char tmp[PATH_MAX + 8];
	vd_key *k = NULL;
	vd_buf pem;
	int fd = -1, rc = -1;

	vd_buf_init(&pem);
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp) ||
	    vd_key_generate(&k) < 0 || vd_key_private_pem(k, &pem) < 0) {
		snprintf(err, errlen, "cannot generate a signing key");
		goto out;
	}
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, pem.p, strlen((const char *)pem.p)) != (ssize_t)strlen((const char *)pem.p) ||
	    fsync(fd) < 0 || rename(tmp, path) < 0) {
		snprintf(err, errlen, "cannot write the signing key %s: %s", path, strerror(errno));
		unlink(tmp);
		goto out;
	}
	*out = k;
	k = NULL;
	rc = 0;
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
		return write_new_key(path, out, err, errlen);
	return vd_key_load(path, 1, 1, out, err, errlen);
}

static json_object *get(json_object *o, const char *key)
{
	json_object *v = NULL;

	json_object_object_get_ex(o, key, &v);
	return v;
}

/* Share a member of the status object (json-c counts references). */
static void copy_member(json_object *dst, json_object *src, const char *key, const char *as)
{
	json_object *v = get(src, key);

	json_object_object_add(dst, as ? as : key, v ? json_object_get(v) : NULL);
}

/* One subject per verified copy; the latest verification time among them. */
static json_object *subjects(json_object *status, const char *hash, const char **verified_at)
{
	json_object *list = json_object_new_array(), *copies = get(status, "copies");
	size_t i, n = copies ? json_object_array_length(copies) : 0;

	*verified_at = NULL;
	for (i = 0; i < n; i++) {
		json_object *c = json_object_array_get_idx(copies, i), *s, *d;
		const char *when = json_object_get_string(get(c, "verified_at"));
		if (strcmp(json_object_get_string(get(c, "state")), "verified") != 0)
			continue;
		s = json_object_new_object();
		d = json_object_new_object();
		json_object_object_add(s, "name", json_object_get(get(c, "path")));
		json_object_object_add(d, "sha256", json_object_new_string(hash));
		json_object_object_add(s, "digest", d);
		json_object_array_add(list, s);
		if (when && (*verified_at == NULL || strcmp(when, *verified_at) > 0))
			*verified_at = when;
	}
	return list;
}

static json_object *predicate(json_object *status, const char *verified_at, double now)
{
	json_object *p = json_object_new_object(), *chain = json_object_new_object();
	json_object *v = json_object_new_object(), *src_chain = get(status, "chain");
	char when[40];

	copy_member(p, status, "state", NULL);
	copy_member(p, status, "trusted", NULL);
	copy_member(chain, src_chain, "status", NULL);
	copy_member(chain, src_chain, "length", NULL);
	copy_member(chain, src_chain, "root", NULL);
	json_object_object_add(p, "chain", chain);
	copy_member(p, status, "commitment", NULL);
	json_object_object_add(p, "verified_at", json_object_new_string(verified_at));
	vd_rfc3339(now, when, sizeof(when));
	json_object_object_add(p, "issued_at", json_object_new_string(when));
	json_object_object_add(v, "name", json_object_new_string(PACKAGE_NAME));
	json_object_object_add(v, "version", json_object_new_string(PACKAGE_VERSION));
	json_object_object_add(p, "verifier", v);
	return p;
}

int vd_attest_statement(json_object *status, double now, vd_buf *b)
{
	const char *hash = json_object_get_string(get(status, "content_hash")), *verified_at;
	json_object *st, *subj;
	int rc;

	if (hash == NULL)
		return -1;
	subj = subjects(status, hash, &verified_at);
	if (json_object_array_length(subj) == 0 || verified_at == NULL) {
		json_object_put(subj);
		return -1;
	}
	st = json_object_new_object();
	json_object_object_add(st, "_type", json_object_new_string(VD_INTOTO_STATEMENT));
	json_object_object_add(st, "subject", subj);
	json_object_object_add(st, "predicateType", json_object_new_string(VD_VERDICT_PREDICATE));
	json_object_object_add(st, "predicate", predicate(status, verified_at, now));
	rc = vd_buf_puts(b, json_object_to_json_string_ext(st, JSON_OUT));
	json_object_put(st);
	return rc < 0 || b->oom ? -1 : 0;
}

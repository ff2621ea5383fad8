#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vd_hash.h"
#include "vd_omskeys.h"

#define PUB_SUFFIX ".pub"
#define CA_SUFFIX ".pem"

static int has_suffix(const char *name, const char *suffix)
{
	size_t n = strlen(name), s = strlen(suffix);

	return name[0] != '.' && n > s && strcmp(name + n - s, suffix) == 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_free(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* The *.pub and *.pem names of dir, sorted: the order is the digest's. */
static char **list_dir(const char *dir, size_t *n, int *err)
{
	size_t cap = 0;
	char **v = NULL, **grown;
	struct dirent *de;
	DIR *d = opendir(dir);

	*n = 0;
	if (d == NULL) {
		*err = errno;
		return NULL;
	}
	while ((errno = 0, de = readdir(d)) != NULL) {
		if (!has_suffix(de->d_name, PUB_SUFFIX) && !has_suffix(de->d_name, CA_SUFFIX))
			continue;
		if ((grown = vd_grow(v, &cap, *n, sizeof(*v))) == NULL ||
		    (grown[*n] = strdup(de->d_name)) == NULL) {
			errno = ENOMEM;
			v = grown ? grown : v;
			break;
		}
		v = grown;
		(*n)++;
	}
	*err = errno;
	closedir(d);
	if (*err != 0) {
		names_free(v, *n);
		return NULL;
	}
	if (*n > 1)
		qsort(v, *n, sizeof(*v), name_cmp);
	return v;
}

static void run_free(vd_oms_run *r)
{
	size_t i;

	for (i = 0; i < r->n_keys; i++)
		vd_key_free(r->keys[i]);
	free(r->keys);
	for (i = 0; i < r->n_cas; i++)
		vd_x509_anchors_free(r->cas[i]);
	free(r->cas);
}

/* A file of the directory the daemon's own: a symbolic link would let
 * whoever can write its target pick a signer. */
static int plain_file(const char *path, vd_keyring_bad_fn bad, void *arg, const char *name)
{
	struct stat st;

	if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
		return 1;
	bad(name, "it is not a regular file", arg);
	return 0;
}

static void add_key(vd_oms_run *r, const char *path, const char *name, vd_hasher *h,
    vd_keyring_bad_fn bad, void *arg)
{
	char why[VD_DETAIL_MAX];
	vd_key *k;

	if (vd_key_load_any(path, 0, 0, &k, why, sizeof(why)) < 0) {
		bad(name, why, arg);
		return;
	}
	if (vd_key_get_type(k) == VD_KEY_ED25519 || r->n_keys == VD_KEYRING_MAX) {
		bad(name, r->n_keys == VD_KEYRING_MAX ? "too many keys in the directory" :
		    "OMS bundles are signed with ECDSA keys; this one is Ed25519", arg);
		vd_key_free(k);
		return;
	}
	vd_hasher_update(h, "key\n", 4);
	vd_hasher_update(h, vd_key_id(k), strlen(vd_key_id(k)));
	r->keys[r->n_keys++] = k;
}

static void add_ca(vd_oms_run *r, const char *path, const char *name, vd_hasher *h,
    vd_keyring_bad_fn bad, void *arg)
{
	char why[VD_DETAIL_MAX];
	vd_x509_anchors *a;
	vd_buf b;

	if (r->n_cas == VD_OMS_RUN_CAS_MAX) {
		bad(name, "too many CA certificate files in the directory", arg);
		return;
	}
	if ((a = vd_x509_anchors_load(path, why, sizeof(why))) == NULL) {
		bad(name, why, arg);
		return;
	}
	vd_buf_init(&b);
	if (vd_read_file(path, VD_TLS_FILE_MAX, &b) == 0) {
		vd_hasher_update(h, "ca\n", 3);
		vd_hasher_update(h, b.p, b.len);
	}
	vd_buf_free(&b);
	r->cas[r->n_cas++] = a;
}

/* One run's directory into r: 0, or a negative errno with a sentence (a
 * bad file is reported through bad, and skipped). */
static int load_run(vd_oms_run *r, const vd_run_token *t, vd_keyring_bad_fn bad, void *arg,
    char *err, size_t errlen)
{
	char path[VD_CONFIG_PATH_MAX + 260];
	vd_hasher *h = vd_hasher_new();
	size_t n = 0, i;
	char **names;
	int e = 0;

	snprintf(r->run, sizeof(r->run), "%s", t->run);
	names = list_dir(t->file, &n, &e);
	r->keys = calloc(VD_KEYRING_MAX, sizeof(*r->keys));
	r->cas = calloc(VD_OMS_RUN_CAS_MAX, sizeof(*r->cas));
	if ((names == NULL && e != 0) || h == NULL || r->keys == NULL || r->cas == NULL) {
		e = e ? e : ENOMEM;
		snprintf(err, errlen, "run_oms_keys: cannot read %s: %s", t->file, strerror(e));
		names_free(names, n);
		vd_hasher_free(h);
		return -e;
	}
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", t->file, names[i]);
		if (!plain_file(path, bad, arg, names[i]))
			continue;
		if (has_suffix(names[i], PUB_SUFFIX))
			add_key(r, path, names[i], h, bad, arg);
		else
			add_ca(r, path, names[i], h, bad, arg);
	}
	names_free(names, n);
	e = vd_hasher_final(h, r->digest);
	vd_hasher_free(h);
	if (e < 0)
		snprintf(err, errlen, "run_oms_keys: out of memory");
	return e < 0 ? -ENOMEM : 0;
}

vd_omskeys *vd_omskeys_load(const vd_config *cfg, vd_keyring_bad_fn bad, void *arg,
    char *err, size_t errlen)
{
	vd_omskeys *k = calloc(1, sizeof(*k));
	size_t i;

	if (k == NULL || (k->runs = calloc(cfg->n_run_oms + 1, sizeof(*k->runs))) == NULL) {
		free(k);
		snprintf(err, errlen, "run_oms_keys: out of memory");
		return NULL;
	}
	atomic_init(&k->refs, 1);
	for (i = 0; i < cfg->n_run_oms; i++) {
		k->n = i + 1;
		if (load_run(&k->runs[i], &cfg->run_oms[i], bad, arg, err, errlen) < 0) {
			vd_omskeys_unref(k);
			return NULL;
		}
	}
	return k;
}

vd_omskeys *vd_omskeys_ref(vd_omskeys *k)
{
	if (k != NULL)
		atomic_fetch_add(&k->refs, 1);
	return k;
}

void vd_omskeys_unref(vd_omskeys *k)
{
	size_t i;

	if (k == NULL || atomic_fetch_sub(&k->refs, 1) != 1)
		return;
	for (i = 0; i < k->n; i++)
		run_free(&k->runs[i]);
	free(k->runs);
	free(k);
}

#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "vd_hash.h"
#include "vd_keys.h"

#define PUB_SUFFIX ".pub"
#define PRIVATE_PEM_TAG "PRIVATE KEY-----"
#define PEM_BEGIN_PUBLIC "-----BEGIN PUBLIC KEY-----"
#define PEM_BEGIN_PRIVATE "-----BEGIN PRIVATE KEY-----"
#define PEM_BEGIN "-----BEGIN "

struct vd_key {
	EVP_PKEY *pkey;
	vd_key_type type;
	int has_private;
	char id[VD_KEYID_LEN + 1];
};

static const struct {
	vd_key_type type;
	const char *name;       /* as keygen --type takes it */
	const char *group;      /* OpenSSL's group name; NULL for Ed25519 */
} key_types[] = {
	{ VD_KEY_ED25519, "ed25519", NULL },
	{ VD_KEY_EC_P256, "ec-p256", "prime256v1" },
	{ VD_KEY_EC_P384, "ec-p384", "secp384r1" },
	{ VD_KEY_EC_P521, "ec-p521", "secp521r1" },
};

static int fail(char *err, size_t n, const char *msg)
{
	snprintf(err, n, "%s", msg);
	return -1;
}

/* An encrypted private key must not make OpenSSL prompt on the terminal:
 * there is no passphrase, so decryption simply fails. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf; (void)size; (void)rwflag; (void)u;
	return -1;
}

static int key_set_id(vd_key *k)
{
	uint8_t raw[VD_ED25519_RAW_LEN];
	size_t rawlen = sizeof(raw);

	if (k->type != VD_KEY_ED25519)
		return vd_key_pem_hint(k, k->id);
	if (EVP_PKEY_get_raw_public_key(k->pkey, raw, &rawlen) != 1 ||
	    rawlen != VD_ED25519_RAW_LEN)
		return -1;
	return vd_sha256_hex(raw, rawlen, k->id);
}

/* The type of pkey, or -1 for a key type or curve not taken here. */
static int pkey_type(EVP_PKEY *pkey)
{
	char group[64];
	size_t i, n;

	if (EVP_PKEY_get_id(pkey) == EVP_PKEY_ED25519)
		return VD_KEY_ED25519;
	if (EVP_PKEY_get_base_id(pkey) != EVP_PKEY_EC ||
	    EVP_PKEY_get_group_name(pkey, group, sizeof(group), &n) != 1)
		return -1;
	for (i = 0; i < VD_ARRAY_LEN(key_types); i++)
		if (key_types[i].group != NULL && strcmp(group, key_types[i].group) == 0)
			return (int)key_types[i].type;
	return -1;
}

static vd_key *key_wrap(EVP_PKEY *pkey, int has_private)
{
	vd_key *k = calloc(1, sizeof(*k));
	int type = pkey_type(pkey);

	if (k == NULL || type < 0) {
		free(k);
		return NULL;
	}
	k->pkey = pkey;
	k->type = (vd_key_type)type;
	k->has_private = has_private;
	if (key_set_id(k) < 0) {
		free(k);
		return NULL;
	}
	return k;
}

/* Only blanks may follow the one PEM block: a file with a second key
 * would be read as its first, which is not what its writer meant. */
static int only_blanks_left(BIO *bio)
{
	char c;

	while (BIO_read(bio, &c, 1) == 1)
		if (c != '\n' && c != '\r' && c != ' ' && c != '\t')
			return 0;
	return 1;
}

/* The text must start with the one block it is read for (after blanks):
 * OpenSSL's reader would skip other blocks to find one, and an encrypted
 * or a traditional-format private key is not what trust.md names. */
static int starts_with_block(const uint8_t *pem, size_t len, const char *begin)
{
	size_t i = 0, n = strlen(begin);

	while (i < len && (pem[i] == '\n' || pem[i] == '\r' || pem[i] == ' ' || pem[i] == '\t'))
		i++;
	return len - i >= n && memcmp(pem + i, begin, n) == 0;
}

static int has_private_tag(const uint8_t *pem, size_t len)
{
	size_t n = sizeof(PRIVATE_PEM_TAG) - 1, i;

	for (i = 0; i + n <= len; i++)
		if (memcmp(pem + i, PRIVATE_PEM_TAG, n) == 0)
			return 1;
	return 0;
}

/* Where the PEM text to read starts: the first block, past explanatory
 * text. NULL when there is no block. */
static const uint8_t *first_block(const uint8_t *pem, size_t len)
{
	size_t n = sizeof(PEM_BEGIN) - 1, i;

	for (i = 0; i + n <= len; i++)
		if (memcmp(pem + i, PEM_BEGIN, n) == 0)
			return pem + i;
	return NULL;
}

static int key_from_pem(const uint8_t *pem, size_t len, int private_key,
    int any_type, vd_key **out, char *err, size_t errlen)
{
	const uint8_t *start;
	EVP_PKEY *pkey;
	BIO *bio;
	int rest_ok;

	*out = NULL;
	/* Only the block read is checked below: text before it is
	 * commentary, but never another block OpenSSL would skip. */
	if (any_type && len <= VD_KEY_FILE_MAX && (start = first_block(pem, len)) != NULL) {
		len -= (size_t)(start - pem);
		pem = start;
	}
	if (len > VD_KEY_FILE_MAX)
		return fail(err, errlen, "the key is larger than a PEM key file may be");
	/* Said before parsing, so that a private key handed over as a
	 * public one is named as such and never parsed on that path. */
	if (!private_key && has_private_tag(pem, len))
		return fail(err, errlen, "it holds a private key, not a public key");
	if (!starts_with_block(pem, len, private_key ? PEM_BEGIN_PRIVATE : PEM_BEGIN_PUBLIC))
		return fail(err, errlen, private_key ?
		    "it is not an unencrypted PKCS#8 PEM private key" :
		    "it is not a PEM public key (SubjectPublicKeyInfo)");
	bio = BIO_new_mem_buf(pem, (int)len);
	if (bio == NULL)
		return fail(err, errlen, "out of memory");
	pkey = private_key ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL)
	    : PEM_read_bio_PUBKEY(bio, NULL, no_passphrase, NULL);
	rest_ok = pkey != NULL && only_blanks_left(bio);
	BIO_free(bio);
	ERR_clear_error();
	if (pkey == NULL)
		return fail(err, errlen, private_key ?
		    "it is not an unencrypted PKCS#8 PEM private key" :
		    "it is not a PEM public key (SubjectPublicKeyInfo)");
	if (!rest_ok) {
		EVP_PKEY_free(pkey);
		return fail(err, errlen, "something other than blank lines follows the PEM key");
	}
	if (any_type ? pkey_type(pkey) < 0 : EVP_PKEY_get_id(pkey) != EVP_PKEY_ED25519) {
		EVP_PKEY_free(pkey);
		return fail(err, errlen, any_type ? "the key is neither Ed25519 nor ECDSA "
		    "on P-256, P-384 or P-521" : "the key is not an Ed25519 key");
	}
	if ((*out = key_wrap(pkey, private_key)) == NULL) {
		EVP_PKEY_free(pkey);
		return fail(err, errlen, "the public key cannot be read from it");
	}
	return 0;
}

int vd_key_from_pem(const uint8_t *pem, size_t len, int private_key,
    vd_key **out, char *err, size_t errlen)
{
	return key_from_pem(pem, len, private_key, 0, out, err, errlen);
}

int vd_key_from_pem_any(const uint8_t *pem, size_t len, int private_key,
    vd_key **out, char *err, size_t errlen)
{
	return key_from_pem(pem, len, private_key, 1, out, err, errlen);
}

int vd_key_from_spki_der(const uint8_t *der, size_t len, vd_key **out,
    char *err, size_t errlen)
{
	const unsigned char *p = der;
	EVP_PKEY *pkey;

	*out = NULL;
	if (len > VD_KEY_FILE_MAX || (pkey = d2i_PUBKEY(NULL, &p, (long)len)) == NULL) {
		ERR_clear_error();
		return fail(err, errlen, "it is not a DER SubjectPublicKeyInfo");
	}
	if (p != der + len) {
		EVP_PKEY_free(pkey);
		return fail(err, errlen, "bytes follow the DER SubjectPublicKeyInfo");
	}
	if (pkey_type(pkey) < 0) {
		EVP_PKEY_free(pkey);
		return fail(err, errlen, "the key is neither Ed25519 nor ECDSA on P-256, "
		    "P-384 or P-521");
	}
	if ((*out = key_wrap(pkey, 0)) == NULL) {
		EVP_PKEY_free(pkey);
		return fail(err, errlen, "out of memory");
	}
	return 0;
}

/* Open name relative to dirfd, refusing symbolic links and anything but a
 * regular file of at most VD_KEY_FILE_MAX bytes; why is a sentence
 * without the file name. */
static int key_open_at(int dirfd, const char *name, int private_key,
    int strict_mode, struct stat *st, char *why, size_t n)
{
	int fd;

	/* O_NONBLOCK: opening a FIFO must not wait for a writer. */
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		snprintf(why, n, "%s", errno == ELOOP ?
		    "it is a symbolic link, not a regular file" : strerror(errno));
		return -1;
	}
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
		close(fd);
		return fail(why, n, "it is not a regular file");
	}
	if (st->st_size > (off_t)VD_KEY_FILE_MAX) {
		close(fd);
		snprintf(why, n, "it is larger than %u bytes", VD_KEY_FILE_MAX);
		return -1;
	}
	if (private_key && strict_mode && (st->st_mode & 077)) {
		close(fd);
		snprintf(why, n, "a private key file must not be accessible to group or "
		    "others (mode %04o; chmod 600 it)", (unsigned)(st->st_mode & 07777));
		return -1;
	}
	return fd;
}

/* Read the whole file into buf (cap bytes): its length, or -1 with errno
 * (EFBIG when it holds more than cap bytes). Read here rather than with
 * vd_read_all, whose stack buffer would keep a copy of a private key. */
static ssize_t read_key_file(int fd, uint8_t *buf, size_t cap)
{
	size_t len = 0;
	ssize_t n;

	for (;;) {
		n = read(fd, buf + len, cap + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			return (ssize_t)len;
		len += (size_t)n;
		if (len > cap) {
			errno = EFBIG;
			return -1;
		}
	}
}

static int key_load_at(int dirfd, const char *name, int private_key,
    int strict_mode, int any_type, vd_key **out, char *why, size_t n)
{
	struct stat st;
	uint8_t *buf;
	ssize_t len;
	int fd, rc = -1;

	*out = NULL;
	if ((fd = key_open_at(dirfd, name, private_key, strict_mode, &st, why, n)) < 0)
		return -1;
	/* One byte more than the cap, to see a file that grew past it. */
	if ((buf = malloc(VD_KEY_FILE_MAX + 1)) == NULL) {
		close(fd);
		return fail(why, n, "out of memory");
	}
	len = read_key_file(fd, buf, VD_KEY_FILE_MAX);
	if (len < 0)
		snprintf(why, n, "%s", errno == EFBIG ? "it grew larger than a key file may be"
		    : strerror(errno));
	else
		rc = key_from_pem(buf, (size_t)len, private_key, any_type, out, why, n);
	close(fd);
	OPENSSL_cleanse(buf, VD_KEY_FILE_MAX + 1);     /* it may have held a private key */
	free(buf);
	return rc;
}

int vd_key_load(const char *path, int private_key, int strict_mode,
    vd_key **out, char *err, size_t errlen)
{
	char why[VD_DETAIL_MAX];

	if (key_load_at(AT_FDCWD, path, private_key, strict_mode, 0, out, why,
	    sizeof(why)) == 0)
		return 0;
	snprintf(err, errlen, "%s: %s", path, why);
	return -1;
}

int vd_key_load_any(const char *path, int private_key, int strict_mode,
    vd_key **out, char *err, size_t errlen)
{
	char why[VD_DETAIL_MAX];

	if (key_load_at(AT_FDCWD, path, private_key, strict_mode, 1, out, why,
	    sizeof(why)) == 0)
		return 0;
	snprintf(err, errlen, "%s: %s", path, why);
	return -1;
}

int vd_key_generate(vd_key **out)
{
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL);
	EVP_PKEY *pkey = NULL;

	*out = NULL;
	if (ctx != NULL && EVP_PKEY_keygen_init(ctx) == 1)
		EVP_PKEY_keygen(ctx, &pkey);
	EVP_PKEY_CTX_free(ctx);
	if (pkey == NULL)
		return -1;
	if ((*out = key_wrap(pkey, 1)) == NULL) {
		EVP_PKEY_free(pkey);
		return -1;
	}
	return 0;
}

int vd_key_generate_type(vd_key_type type, vd_key **out)
{
	EVP_PKEY *pkey = NULL;
	size_t i;

	*out = NULL;
	if (type == VD_KEY_ED25519)
		return vd_key_generate(out);
	for (i = 0; i < VD_ARRAY_LEN(key_types); i++)
		if (key_types[i].type == type && key_types[i].group != NULL)
			pkey = EVP_PKEY_Q_keygen(NULL, NULL, "EC", key_types[i].group);
	if (pkey == NULL) {
		ERR_clear_error();
		return -1;
	}
	if ((*out = key_wrap(pkey, 1)) == NULL) {
		EVP_PKEY_free(pkey);
		return -1;
	}
	return 0;
}

vd_key_type vd_key_get_type(const vd_key *k)
{
	return k->type;
}

const char *vd_key_type_name(vd_key_type type)
{
	size_t i;

	for (i = 0; i < VD_ARRAY_LEN(key_types); i++)
		if (key_types[i].type == type)
			return key_types[i].name;
	return "unknown";
}

int vd_key_equal(const vd_key *a, const vd_key *b)
{
	return EVP_PKEY_eq(a->pkey, b->pkey) == 1;
}

void vd_key_free(vd_key *k)
{
	if (k == NULL)
		return;
	EVP_PKEY_free(k->pkey);
	free(k);
}

const char *vd_key_id(const vd_key *k)
{
	return k->id;
}

int vd_key_has_private(const vd_key *k)
{
	return k->has_private;
}

/* The BIO's text into b, NUL-terminated (vd_buf always is). */
static int bio_to_buf(BIO *bio, vd_buf *b)
{
	char *p;
	long n = BIO_get_mem_data(bio, &p);

	return n > 0 && vd_buf_put(b, p, (size_t)n) == 0 ? 0 : -1;
}

int vd_key_public_pem(const vd_key *k, vd_buf *b)
{
	BIO *bio = BIO_new(BIO_s_mem());
	int rc = -1;

	if (bio != NULL && PEM_write_bio_PUBKEY(bio, k->pkey) == 1)
		rc = bio_to_buf(bio, b);
	BIO_free(bio);
	return rc;
}

int vd_key_private_pem(const vd_key *k, vd_buf *b)
{
	/* Secure memory BIO: the PEM text is wiped when it is freed. */
	BIO *bio;
	int rc = -1;

	if (!k->has_private)
		return -1;
	bio = BIO_new(BIO_s_secmem());
	/* No cipher: PKCS#8 PEM, as `openssl genpkey` writes it. */
	if (bio != NULL && PEM_write_bio_PrivateKey(bio, k->pkey, NULL, NULL, 0,
	    NULL, NULL) == 1)
		rc = bio_to_buf(bio, b);
	BIO_free(bio);
	return rc;
}

int vd_key_sign(const vd_key *k, const uint8_t *msg, size_t len,
    uint8_t sig[VD_ED25519_SIG_LEN])
{
	EVP_MD_CTX *ctx;
	size_t siglen = VD_ED25519_SIG_LEN;
	int rc = -1;

	if (!k->has_private || (ctx = EVP_MD_CTX_new()) == NULL)
		return -1;
	/* Ed25519 is "pure": no digest, the message goes in whole. */
	if (EVP_DigestSignInit(ctx, NULL, NULL, NULL, k->pkey) == 1 &&
	    EVP_DigestSign(ctx, sig, &siglen, msg, len) == 1 &&
	    siglen == VD_ED25519_SIG_LEN)
		rc = 0;
	EVP_MD_CTX_free(ctx);
	ERR_clear_error();
	return rc;
}

int vd_key_verify(const vd_key *k, const uint8_t *msg, size_t len,
    const uint8_t *sig, size_t siglen)
{
	EVP_MD_CTX *ctx;
	int ok = 0;

	if (siglen != VD_ED25519_SIG_LEN || (ctx = EVP_MD_CTX_new()) == NULL)
		return 0;
	if (EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, k->pkey) == 1)
		ok = EVP_DigestVerify(ctx, sig, siglen, msg, len) == 1;
	EVP_MD_CTX_free(ctx);
	ERR_clear_error();     /* a bad signature leaves an error queued */
	return ok;
}

int vd_key_pem_hint(const vd_key *k, char hex[VD_KEYID_LEN + 1])
{
	vd_buf pem;
	int rc;

	vd_buf_init(&pem);
	rc = vd_key_public_pem(k, &pem) == 0 ? vd_sha256_hex(pem.p, pem.len, hex) : -1;
	vd_buf_free(&pem);
	return rc;
}

/* The digest ECDSA takes on the key's curve, as OMS fixes it; NULL for
 * Ed25519, which hashes internally. */
static const EVP_MD *key_md(const vd_key *k)
{
	switch (k->type) {
	case VD_KEY_EC_P256: return EVP_sha256();
	case VD_KEY_EC_P384: return EVP_sha384();
	case VD_KEY_EC_P521: return EVP_sha512();
	default: return NULL;
	}
}

int vd_key_sign_any(const vd_key *k, const uint8_t *msg, size_t len,
    uint8_t sig[VD_SIG_MAX], size_t *siglen)
{
	EVP_MD_CTX *ctx;
	int rc = -1;

	*siglen = VD_SIG_MAX;
	if (!k->has_private || (ctx = EVP_MD_CTX_new()) == NULL)
		return -1;
	if (EVP_DigestSignInit(ctx, NULL, key_md(k), NULL, k->pkey) == 1 &&
	    EVP_DigestSign(ctx, NULL, siglen, msg, len) == 1 && *siglen <= VD_SIG_MAX &&
	    EVP_DigestSign(ctx, sig, siglen, msg, len) == 1)
		rc = 0;
	EVP_MD_CTX_free(ctx);
	ERR_clear_error();
	return rc;
}

int vd_key_verify_any(const vd_key *k, const uint8_t *msg, size_t len,
    const uint8_t *sig, size_t siglen)
{
	EVP_MD_CTX *ctx;
	int ok = 0;

	if (k->type == VD_KEY_ED25519)
		return vd_key_verify(k, msg, len, sig, siglen);
	if (siglen == 0 || siglen > VD_SIG_MAX || (ctx = EVP_MD_CTX_new()) == NULL)
		return 0;
	if (EVP_DigestVerifyInit(ctx, NULL, key_md(k), NULL, k->pkey) == 1)
		ok = EVP_DigestVerify(ctx, sig, siglen, msg, len) == 1;
	EVP_MD_CTX_free(ctx);
	ERR_clear_error();
	return ok;
}

/* ---- the keyring ------------------------------------------------------- */

struct names {
	char **v;
	size_t n, cap;
};

static void names_free(struct names *ns)
{
	size_t i;

	for (i = 0; i < ns->n; i++)
		free(ns->v[i]);
	free(ns->v);
}

static int names_add(struct names *ns, const char *name)
{
	char **v;

	if (ns->n == ns->cap) {
		size_t cap = ns->cap ? 2 * ns->cap : 16;

		if ((v = realloc(ns->v, cap * sizeof(*v))) == NULL)
			return -1;
		ns->v = v;
		ns->cap = cap;
	}
	if ((ns->v[ns->n] = strdup(name)) == NULL)
		return -1;
	ns->n++;
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_pub_name(const char *name)
{
	size_t n = strlen(name), s = sizeof(PUB_SUFFIX) - 1;

	return name[0] != '.' && n > s && strcmp(name + n - s, PUB_SUFFIX) == 0;
}

/* The candidate names, sorted: the order decides which of two files with
 * the same key is the one that counts, and which keys fit the cap. */
static int list_pub_files(DIR *d, struct names *ns)
{
	struct dirent *de;

	errno = 0;
	while ((de = readdir(d)) != NULL) {
		if (is_pub_name(de->d_name) && names_add(ns, de->d_name) < 0)
			return -1;
		errno = 0;
	}
	if (errno != 0)
		return -1;
	if (ns->n > 1)
		qsort(ns->v, ns->n, sizeof(*ns->v), name_cmp);
	return 0;
}

static void report(vd_keyring_bad_fn bad, void *arg, const char *file, const char *why)
{
	if (bad != NULL)
		bad(file, why, arg);
}

/* Load one candidate into kr: 1 added, 0 skipped (duplicate or bad). */
static int ring_add_file(vd_keyring *kr, int dirfd, const char *name,
    vd_keyring_bad_fn bad, void *arg)
{
	char why[VD_DETAIL_MAX];
	struct stat st;
	vd_key *k;

	/* A symbolic link would let whoever can write its target pick a
	 * trusted key; the file must be the directory's own. */
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		report(bad, arg, name, strerror(errno));
		return 0;
	}
	if (S_ISLNK(st.st_mode) || !S_ISREG(st.st_mode)) {
		report(bad, arg, name, S_ISLNK(st.st_mode) ?
		    "it is a symbolic link, not a regular file" : "it is not a regular file");
		return 0;
	}
	if (key_load_at(dirfd, name, 0, 0, 0, &k, why, sizeof(why)) < 0) {
		report(bad, arg, name, why);
		return 0;
	}
	if (vd_keyring_find(kr, vd_key_id(k)) != NULL) {
		vd_key_free(k);
		return 0;
	}
	if (kr->n == VD_KEYRING_MAX) {
		vd_key_free(k);
		snprintf(why, sizeof(why), "the directory already holds %u keys, "
		    "the most one keyring takes", VD_KEYRING_MAX);
		report(bad, arg, name, why);
		return 0;
	}
	kr->keys[kr->n++] = k;
	return 1;
}

vd_keyring *vd_keyring_load_dir(const char *dir, vd_keyring_bad_fn bad,
    void *arg, char *err, size_t errlen)
{
	struct names ns = { 0 };
	vd_keyring *kr = NULL;
	DIR *d = NULL;
	size_t i;
	int fd;

	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || (d = fdopendir(fd)) == NULL || list_pub_files(d, &ns) < 0) {
		snprintf(err, errlen, "cannot read the trusted keys directory %s: %s",
		    dir, strerror(errno ? errno : ENOMEM));
		goto out;
	}
	kr = calloc(1, sizeof(*kr));
	if (kr == NULL || (kr->keys = calloc(VD_KEYRING_MAX, sizeof(*kr->keys))) == NULL) {
		free(kr);
		kr = NULL;
		snprintf(err, errlen, "cannot read the trusted keys directory %s: out of memory", dir);
		goto out;
	}
	kr->refs = 1;
	for (i = 0; i < ns.n; i++)
		ring_add_file(kr, dirfd(d), ns.v[i], bad, arg);
out:
	if (d != NULL)
		closedir(d);
	else if (fd >= 0)
		close(fd);
	names_free(&ns);
	return kr;
}

vd_keyring *vd_keyring_ref(vd_keyring *kr)
{
	if (kr != NULL)
		kr->refs++;
	return kr;
}

void vd_keyring_unref(vd_keyring *kr)
{
	size_t i;

	if (kr == NULL || --kr->refs > 0)
		return;
	for (i = 0; i < kr->n; i++)
		vd_key_free(kr->keys[i]);
	free(kr->keys);
	free(kr);
}

const vd_key *vd_keyring_find(const vd_keyring *kr, const char *keyid)
{
	size_t i;

	if (kr == NULL || keyid == NULL)
		return NULL;
	for (i = 0; i < kr->n; i++)
		if (strcmp(kr->keys[i]->id, keyid) == 0)
			return kr->keys[i];
	return NULL;
}

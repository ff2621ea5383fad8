#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "vd_tar.h"

#define NOT_TAR "not a valid artifact tar: "
#define INVALID(...) vd_fail(err, VD_ARTIFACT_INVALID, NOT_TAR __VA_ARGS__)
#define NAME_QUOTE_MAX 64           /* bytes of a member name quoted in a message */

/* The fields of a ustar header block that the parse reads. */
enum {
	H_NAME = 0, H_NAME_LEN = 100,
	H_MODE = 100, H_UID = 108, H_GID = 116, H_ID_LEN = 8,
	H_SIZE = 124, H_SIZE_LEN = 12,
	H_MTIME = 136, H_MTIME_LEN = 12,
	H_CHKSUM = 148, H_CHKSUM_LEN = 8,
	H_TYPE = 156,
	H_MAGIC = 257, H_MAGIC_LEN = 8,         /* magic and version together */
	H_DEVMAJOR = 329, H_DEVMINOR = 337, H_DEV_LEN = 8,
	H_PREFIX = 345, H_PREFIX_LEN = 155,     /* ustar only; GNU keeps times here */
};

/* The numbers the parse has no use for. Python's tarfile reads each one
 * and takes a header where one is not a number for the end of the
 * archive, while GNU tar reads on: both must be able to read them. */
static const struct meta_field {
	size_t off, len;
	const char *what;
	int may_be_negative;        /* GNU tar refuses a negative owner */
} meta_fields[] = {
	{ H_MODE, H_ID_LEN, "mode", 0 }, { H_UID, H_ID_LEN, "uid", 0 },
	{ H_GID, H_ID_LEN, "gid", 0 }, { H_MTIME, H_MTIME_LEN, "mtime", 1 },
	{ H_DEVMAJOR, H_DEV_LEN, "devmajor", 0 }, { H_DEVMINOR, H_DEV_LEN, "devminor", 0 },
};

/* Room for prefix, '/' and name: the longest name a plain header holds. */
#define USTAR_NAME_MAX (H_PREFIX_LEN + 1 + H_NAME_LEN)

static const char ustar_magic[H_MAGIC_LEN] = "ustar\0" "00";
static const char gnu_magic[H_MAGIC_LEN] = "ustar  \0";

typedef unsigned long long ull;

_Static_assert(VD_TAR_MAX_EXT % VD_TAR_BLOCK == 0 && VD_TAR_MAX_NAME + 1 <= VD_TAR_MAX_EXT,
    "an extended header with its padding is one want");

static uint64_t round_block(uint64_t n)
{
	return (n + VD_TAR_BLOCK - 1) / VD_TAR_BLOCK * VD_TAR_BLOCK;
}

static int all_zero(const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != 0)
			return 0;
	return 1;
}

/* GNU base-256: big-endian in the bytes after the 0x80 marker. */
static int base256(const uint8_t *f, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < len; i++) {
		if (v >> 56)
			return -1;
		v = v << 8 | f[i];
	}
	*out = v;
	return 0;
}

/* A numeric field: octal digits after optional spaces, then only spaces
 * and NULs to the field's end; or, where allowed, GNU base-256 (first
 * byte 0x80; 0xff, a negative number, is refused). -1 when it is neither
 * or does not fit. */
static int field_number(const uint8_t *f, size_t len, int allow_base256, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;

	if (allow_base256 && f[0] == 0x80)
		return base256(f + 1, len - 1, out);
	while (i < len && f[i] == ' ')
		i++;
	if (i == len || f[i] < '0' || f[i] > '7')
		return -1;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v > UINT64_MAX >> 3)
			return -1;
		v = v << 3 | (uint64_t)(f[i] - '0');
	}
	for (; i < len; i++)
		if (f[i] != ' ' && f[i] != '\0')
			return -1;
	*out = v;
	return 0;
}

/* The checksum as ustar defines it: the unsigned sum of the header's bytes
 * with the checksum field read as spaces. */
static uint64_t header_sum(const uint8_t *h)
{
	uint64_t s = 0;
	size_t i;

	for (i = 0; i < VD_TAR_BLOCK; i++)
		s += i >= H_CHKSUM && i < H_CHKSUM + H_CHKSUM_LEN ? ' ' : h[i];
	return s;
}

static size_t field_len(const uint8_t *f, size_t max)
{
	const uint8_t *z = memchr(f, '\0', max);

	return z ? (size_t)(z - f) : max;
}

/* A number both readers take: octal as field_number reads it, GNU
 * base-256 (negative only where allowed: a time before 1970), or an
 * empty field (GNU tar leaves a file's device numbers empty; both read
 * 0). */
static int meta_number_ok(const uint8_t *f, size_t len, int may_be_negative)
{
	uint64_t v;

	return all_zero(f, len) || f[0] == 0x80 || (may_be_negative && f[0] == 0xff) ||
	    field_number(f, len, 0, &v) == 0;
}

vd_code vd_tar_begin(vd_tar_parser *ps, uint64_t size, vd_err *err)
{
	memset(ps, 0, sizeof(*ps));
	vd_arena_init(&ps->names, 0);
	ps->size = size;
	ps->state = VD_TAR_DONE;
	if (size == 0)
		return INVALID("the file is empty");
	if (size % VD_TAR_BLOCK != 0)
		return INVALID("the file is %llu bytes, not a whole number of %d-byte blocks",
		    (ull)size, VD_TAR_BLOCK);
	if (size < 2 * VD_TAR_BLOCK)
		return INVALID("the file is %llu bytes, too short for the end marker of two zero blocks",
		    (ull)size);
	ps->state = VD_TAR_HEADER;
	return VD_OK;
}

int vd_tar_want(const vd_tar_parser *ps, uint64_t *off, size_t *len)
{
	uint64_t left;

	switch (ps->state) {
	case VD_TAR_HEADER:
		*off = ps->pos;
		*len = VD_TAR_BLOCK;
		return 1;
	case VD_TAR_EXT:
		/* With its padding: tarfile reads records up to the block's end. */
		*off = ps->pos + VD_TAR_BLOCK;
		*len = (size_t)round_block(ps->ext_len);
		return 1;
	case VD_TAR_TRAILER:
		left = ps->size - ps->pos;
		*off = ps->pos;
		*len = left < VD_TAR_WANT_MAX ? (size_t)left : VD_TAR_WANT_MAX;
		return 1;
	default:
		return 0;
	}
}

/* pos is the next header's offset: there must be one. */
static vd_code next_header(vd_tar_parser *ps, vd_err *err)
{
	if (ps->pos == ps->size)
		return INVALID("the archive ends at offset %llu without its end marker (two zero blocks)",
		    (ull)ps->pos);
	ps->state = VD_TAR_HEADER;
	return VD_OK;
}

static vd_code zero_block(vd_tar_parser *ps, vd_err *err)
{
	if (ps->pending_x || ps->pending_long || ps->pending_g)
		return INVALID("the extended header before offset %llu describes no member",
		    (ull)ps->pos);
	ps->pos += VD_TAR_BLOCK;
	if (!ps->zero_blocks) {
		ps->zero_blocks = 1;
		if (ps->pos == ps->size)
			return INVALID("the archive ends after one zero block; its end marker is two");
		return VD_OK;
	}
	ps->state = ps->pos == ps->size ? VD_TAR_DONE : VD_TAR_TRAILER;
	return VD_OK;
}

typedef enum name_fault { NAME_OK, NAME_EMPTY, NAME_NUL, NAME_ABSOLUTE, NAME_DOTDOT } name_fault;

/* raw without its "." and empty components into out (room for len + 1
 * bytes), and the number of components left. */
static name_fault normalise(const char *raw, size_t len, char *out, uint32_t *depth)
{
	size_t i = 0, o = 0, start, n;
	uint32_t d = 0;

	if (len == 0)
		return NAME_EMPTY;
	if (memchr(raw, '\0', len) != NULL)
		return NAME_NUL;
	if (raw[0] == '/')
		return NAME_ABSOLUTE;
	while (i < len) {
		for (start = i; i < len && raw[i] != '/'; i++)
			;
		n = i - start;
		if (n == 2 && raw[start] == '.' && raw[start + 1] == '.')
			return NAME_DOTDOT;
		if (n > 0 && !(n == 1 && raw[start] == '.')) {
			if (o > 0)
				out[o++] = '/';
			memcpy(out + o, raw + start, n);
			o += n;
			d++;
		}
		i++;
	}
	out[o] = '\0';
	*depth = d;
	return NAME_OK;
}

static vd_code name_refused(name_fault f, const char *raw, size_t len, vd_err *err)
{
	int q = len > NAME_QUOTE_MAX ? NAME_QUOTE_MAX : (int)len;

	switch (f) {
	case NAME_EMPTY:
		return INVALID("a member has an empty name");
	case NAME_NUL:
		return INVALID("member \"%.*s\" has a NUL byte in its name", q, raw);
	case NAME_ABSOLUTE:
		return INVALID("member \"%.*s\" has an absolute name", q, raw);
	default:
		return INVALID("member \"%.*s\" has a \"..\" component", q, raw);
	}
}

static vd_code add_entry(vd_tar_parser *ps, const char *raw, size_t len, int is_dir,
    uint64_t offset, uint64_t size, vd_err *err)
{
	char path[VD_TAR_MAX_NAME + 1];
	vd_tar_entry *e;
	name_fault f;
	uint32_t depth;
	size_t n;

	if (ps->n == VD_TAR_MAX_MEMBERS)
		return INVALID("the archive has more than %d members", VD_TAR_MAX_MEMBERS);
	if ((f = normalise(raw, len, path, &depth)) != NAME_OK)
		return name_refused(f, raw, len, err);
	if (!is_dir && raw[len - 1] == '/')
		return INVALID("member \"%.64s\" ends in '/' but is not a directory", path);
	if (!is_dir && depth == 0)
		return INVALID("a file member is named \"%.64s\", which names no file",
		    len > NAME_QUOTE_MAX ? "..." : raw);
	/* "d/." is "d" here, a directory to a reader that extracts it. */
	if (!is_dir && raw[len - 1] == '.' && raw[len - 2] == '/')
		return INVALID("file member \"%.*s\" ends in a \".\" component, which names a directory",
		    len > NAME_QUOTE_MAX ? NAME_QUOTE_MAX : (int)len, raw);
	n = strlen(path) + 1;
	if (n > VD_TAR_MAX_NAME_BYTES - ps->name_bytes)
		return INVALID("the member names add up to more than %u bytes", VD_TAR_MAX_NAME_BYTES);
	e = vd_grow(ps->entries, &ps->cap, ps->n, sizeof(*e));
	if (e == NULL)
		return vd_fail(err, VD_IO_ERROR, "out of memory reading a tar archive");
	ps->entries = e;
	e = &ps->entries[ps->n];
	if ((e->path = vd_arena_alloc(&ps->names, n)) == NULL)
		return vd_fail(err, VD_IO_ERROR, "out of memory reading a tar archive");
	memcpy(e->path, path, n);
	e->depth = depth;
	e->is_dir = is_dir;
	e->offset = offset;
	e->size = size;
	ps->name_bytes += n;
	ps->n++;
	return VD_OK;
}

/* The member's name: pax path, GNU long name, or the header's own
 * (ustar: prefix/name). */
static size_t member_name(const vd_tar_parser *ps, const uint8_t *h, int ustar, char *out)
{
	const char *src;
	size_t n, p;

	if (ps->pending_x && ps->x.has_path) {
		src = ps->x.path;
		n = ps->x.path_len;
	} else if (ps->pending_long) {
		src = ps->long_name;
		n = ps->long_len;
	} else {
		p = ustar ? field_len(h + H_PREFIX, H_PREFIX_LEN) : 0;
		n = field_len(h + H_NAME, H_NAME_LEN);
		memcpy(out, h + H_PREFIX, p);
		if (p > 0)
			out[p++] = '/';
		memcpy(out + p, h + H_NAME, n);
		out[p + n] = '\0';
		return p + n;
	}
	memcpy(out, src, n);
	out[n] = '\0';
	return n;
}

/* Why a member of type t is refused, or NULL for a file or directory. */
static const char *type_refusal(uint8_t t)
{
	switch (t) {
	case '0': case '\0': case '7': case '5':
		return NULL;
	case '1': return "is a hard link";
	case '2': return "is a symbolic link";
	case '3': return "is a character device";
	case '4': return "is a block device";
	case '6': return "is a FIFO";
	case 'S': return "is a sparse file";
	default: return "has a type other than file or directory";
	}
}

/* The header's size field is checked even when a pax size replaces it:
 * tarfile reads it first and stops at a header where it is no number. */
static vd_code member_size(const vd_tar_parser *ps, const uint8_t *h, const char *name,
    uint64_t *size, vd_err *err)
{
	if (field_number(h + H_SIZE, H_SIZE_LEN, 1, size) < 0)
		return INVALID("member \"%.64s\" has a size field that is not a valid octal or base-256 number",
		    name);
	if (ps->pending_x && ps->x.has_size)
		*size = ps->x.size;
	return VD_OK;
}

static void clear_pending(vd_tar_parser *ps)
{
	ps->pending_x = ps->pending_long = ps->pending_g = 0;
	ps->x.has_path = ps->x.has_size = 0;
}

static vd_code member(vd_tar_parser *ps, const uint8_t *h, int ustar, vd_err *err)
{
	char name[VD_TAR_MAX_NAME + USTAR_NAME_MAX + 2];
	uint8_t t = h[H_TYPE];
	uint64_t size, data = ps->pos + VD_TAR_BLOCK;
	const char *why;
	size_t len, n;
	vd_code rc;

	if (ps->pending_x && ps->x.has_path && ps->pending_long)
		return INVALID("the member at offset %llu has both a pax path and a GNU long name",
		    (ull)ps->pos);
	len = member_name(ps, h, ustar, name);
	/* tarfile makes a type-NUL member whose own name field ends in '/' a
	 * directory, whatever name a pax or GNU header gives it. */
	n = field_len(h + H_NAME, H_NAME_LEN);
	if (t != '5' && ((ps->pending_x && ps->x.has_path) || ps->pending_long) &&
	    n > 0 && h[H_NAME + n - 1] == '/')
		return INVALID("member \"%.64s\" is not a directory but its header's name field ends in '/'",
		    name);
	if ((why = type_refusal(t)) != NULL) {
		if (t >= 0x20 && t < 0x7f)
			return INVALID("member \"%.64s\" %s (type '%c'); an artifact tar holds only regular files and directories",
			    name, why, t);
		return INVALID("member \"%.64s\" %s (type 0x%02x); an artifact tar holds only regular files and directories",
		    name, why, t);
	}
	/* GNU tar writes zeros there; tarfile would read a prefix of the name. */
	if (!ustar && !all_zero(h + H_PREFIX, H_PREFIX_LEN))
		return INVALID("the GNU header of member \"%.64s\" has bytes where ustar keeps a name prefix, which Python's tarfile reads as part of the name and GNU tar does not",
		    name);
	if ((rc = member_size(ps, h, name, &size, err)) != VD_OK)
		return rc;
	if (size > ps->size - data)
		return INVALID("member \"%.64s\" has %llu bytes of data but the archive ends %llu bytes after its header",
		    name, (ull)size, (ull)(ps->size - data));
	if (t == '5' && size != 0)
		return INVALID("directory member \"%.64s\" has %llu bytes of data", name, (ull)size);
	if ((rc = add_entry(ps, name, len, t == '5', data, size, err)) != VD_OK)
		return rc;
	clear_pending(ps);
	ps->pos = data + round_block(size);
	return next_header(ps, err);
}

static vd_code feed_ext(vd_tar_parser *ps, const uint8_t *p, vd_err *err);

/* An 'x', 'g' or 'L' header: its data is wanted next. */
static vd_code ext_header(vd_tar_parser *ps, const uint8_t *h, vd_err *err)
{
	uint8_t t = h[H_TYPE];
	uint64_t size, cap = t == 'L' ? VD_TAR_MAX_NAME + 1 : VD_TAR_MAX_EXT;

	if (t == 'x' && ps->pending_x)
		return INVALID("two pax extended headers in a row at offset %llu", (ull)ps->pos);
	if (t == 'L' && ps->pending_long)
		return INVALID("two GNU long names in a row at offset %llu", (ull)ps->pos);
	/* tarfile and GNU tar disagree on what a global header between an
	 * extended header and its member applies to. */
	if (t == 'g' && (ps->pending_x || ps->pending_long))
		return INVALID("a global pax header at offset %llu comes between an extended header and its member",
		    (ull)ps->pos);
	if (field_number(h + H_SIZE, H_SIZE_LEN, 0, &size) < 0)
		return INVALID("the extended header at offset %llu has a size field that is not octal",
		    (ull)ps->pos);
	if (size > cap)
		return INVALID("the extended header at offset %llu is %llu bytes, above the limit of %llu",
		    (ull)ps->pos, (ull)size, (ull)cap);
	if (size > ps->size - ps->pos - VD_TAR_BLOCK)
		return INVALID("the extended header at offset %llu runs past the end of the archive",
		    (ull)ps->pos);
	if (size == 0 && t == 'L')
		return INVALID("the GNU long name at offset %llu is empty", (ull)ps->pos);
	ps->ext_type = (char)t;
	ps->ext_len = size;
	ps->state = VD_TAR_EXT;
	/* No data to want: a want of zero bytes would be no request at all. */
	return size == 0 ? feed_ext(ps, (const uint8_t *)"", err) : VD_OK;
}

static vd_code check_meta_numbers(const vd_tar_parser *ps, const uint8_t *h, vd_err *err)
{
	size_t i;

	for (i = 0; i < VD_ARRAY_LEN(meta_fields); i++)
		if (!meta_number_ok(h + meta_fields[i].off, meta_fields[i].len,
		    meta_fields[i].may_be_negative))
			return INVALID("the header at offset %llu has a %s field that GNU tar or Python's tarfile cannot read as a number",
			    (ull)ps->pos, meta_fields[i].what);
	return VD_OK;
}

static vd_code feed_header(vd_tar_parser *ps, const uint8_t *h, vd_err *err)
{
	uint64_t sum;
	uint8_t t = h[H_TYPE];
	int ustar;
	vd_code rc;

	if (all_zero(h, VD_TAR_BLOCK))
		return zero_block(ps, err);
	if (ps->zero_blocks)
		return INVALID("a single zero block at offset %llu is followed by more headers",
		    (ull)(ps->pos - VD_TAR_BLOCK));
	if (field_number(h + H_CHKSUM, H_CHKSUM_LEN, 0, &sum) < 0)
		return INVALID("the header at offset %llu has a checksum field that is not octal",
		    (ull)ps->pos);
	if (sum != header_sum(h))
		return INVALID("the header at offset %llu has a bad checksum", (ull)ps->pos);
	ustar = memcmp(h + H_MAGIC, ustar_magic, H_MAGIC_LEN) == 0;
	if (!ustar && memcmp(h + H_MAGIC, gnu_magic, H_MAGIC_LEN) != 0)
		return INVALID("the header at offset %llu is not a ustar, pax or GNU header",
		    (ull)ps->pos);
	if ((rc = check_meta_numbers(ps, h, err)) != VD_OK)
		return rc;
	if (t == 'x' || t == 'g' || t == 'L')
		return ext_header(ps, h, err);
	if (t == 'K')
		return INVALID("the header at offset %llu is a GNU long link name; an artifact tar holds no links",
		    (ull)ps->pos);
	return member(ps, h, ustar, err);
}

/* Decimal digits as the readers' writers put them: no sign, no blank, no
 * leading zero; fits in 64 bits. */
static int pax_decimal(const uint8_t *p, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (n == 0 || (n > 1 && p[0] == '0'))
		return -1;
	for (i = 0; i < n; i++) {
		uint64_t d = (uint64_t)(p[i] - '0');
		if (p[i] < '0' || p[i] > '9' || v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

static size_t skip_digits(const uint8_t *p, size_t i, size_t n)
{
	while (i < n && p[i] >= '0' && p[i] <= '9')
		i++;
	return i;
}

/* A pax time: an optional '-', digits, an optional '.' and digits. */
static int pax_time(const uint8_t *p, size_t n)
{
	size_t start = n > 0 && p[0] == '-', i = skip_digits(p, start, n);

	if (i == start)
		return 0;
	if (i < n && p[i] == '.') {
		start = i + 1;
		if ((i = skip_digits(p, start, n)) == start)
			return 0;
	}
	return i == n;
}

typedef enum pax_kind { PAX_PATH, PAX_SIZE, PAX_TIME, PAX_ID, PAX_TEXT } pax_kind;

/* The keywords a pax header may hold: path and size, read here, and
 * metadata with no bearing on a member's name or bytes. Any other one
 * may mean something to some reader (linkpath, hdrcharset,
 * GNU.volume.*, SCHILY.realsize), so it is refused, never ignored. */
static const struct pax_key {
	const char *name;
	int is_prefix;
	pax_kind kind;
} pax_keys[] = {
	{ "path", 0, PAX_PATH }, { "size", 0, PAX_SIZE },
	{ "mtime", 0, PAX_TIME }, { "atime", 0, PAX_TIME }, { "ctime", 0, PAX_TIME },
	{ "LIBARCHIVE.creationtime", 0, PAX_TIME },
	{ "uid", 0, PAX_ID }, { "gid", 0, PAX_ID }, { "SCHILY.dev", 0, PAX_ID },
	{ "SCHILY.ino", 0, PAX_ID }, { "SCHILY.nlink", 0, PAX_ID },
	{ "uname", 0, PAX_TEXT }, { "gname", 0, PAX_TEXT }, { "comment", 0, PAX_TEXT },
	{ "charset", 0, PAX_TEXT }, { "SCHILY.fflags", 0, PAX_TEXT },
	{ "SCHILY.xattr.", 1, PAX_TEXT }, { "LIBARCHIVE.xattr.", 1, PAX_TEXT },
	{ "SCHILY.acl.", 1, PAX_TEXT },
};

static int has_prefix(const uint8_t *k, size_t n, const char *lit)
{
	size_t l = strlen(lit);

	return n >= l && memcmp(k, lit, l) == 0;
}

static const struct pax_key *find_pax_key(const uint8_t *k, size_t n)
{
	size_t i;

	for (i = 0; i < VD_ARRAY_LEN(pax_keys); i++) {
		const struct pax_key *pk = &pax_keys[i];
		if (pk->is_prefix ? has_prefix(k, n, pk->name) && n > strlen(pk->name) :
		    n == strlen(pk->name) && memcmp(k, pk->name, n) == 0)
			return pk;
	}
	return NULL;
}

#define SPARSE_PREFIX "GNU.sparse."
#define KEY_QUOTE(kn) ((kn) > NAME_QUOTE_MAX ? NAME_QUOTE_MAX : (int)(kn))

/* path or size, for the next member (o); a global header (o NULL) may
 * set neither, as tarfile applies it only to members that have a pax
 * header of their own and GNU tar to every member. */
static vd_code pax_override(vd_tar_parser *ps, vd_tar_override *o, pax_kind kind,
    const uint8_t *v, size_t vn, vd_err *err)
{
	const char *what = kind == PAX_PATH ? "path" : "size";

	if (o == NULL)
		return INVALID("the global pax header at offset %llu sets %s, which readers apply to different members",
		    (ull)ps->pos, what);
	if (kind == PAX_PATH ? o->has_path : o->has_size)
		return INVALID("the pax header at offset %llu has two %s records", (ull)ps->pos, what);
	if (kind == PAX_SIZE) {
		if (pax_decimal(v, vn, &o->size) < 0)
			return INVALID("the pax header at offset %llu has a size that is not a decimal number that fits (digits only, no leading zero)",
			    (ull)ps->pos);
		o->has_size = 1;
		return VD_OK;
	}
	if (vn > VD_TAR_MAX_NAME)
		return INVALID("the pax header at offset %llu has a path of %zu bytes, above the limit of %d",
		    (ull)ps->pos, vn, VD_TAR_MAX_NAME);
	memcpy(o->path, v, vn);
	o->path[vn] = '\0';
	o->path_len = vn;
	o->has_path = 1;
	return VD_OK;
}

/* One record. An empty value is refused for every keyword: POSIX has it
 * unset the keyword, GNU tar does so (an empty size leaves the header's),
 * Python's tarfile takes it for a value (an empty size is 0). */
static vd_code pax_keyword(vd_tar_parser *ps, vd_tar_override *o, const uint8_t *k,
    size_t kn, const uint8_t *v, size_t vn, vd_err *err)
{
	const struct pax_key *pk;
	uint64_t id;

	if (has_prefix(k, kn, SPARSE_PREFIX))
		return INVALID("the pax header at offset %llu describes a sparse file (%.*s)",
		    (ull)ps->pos, KEY_QUOTE(kn), (const char *)k);
	if ((pk = find_pax_key(k, kn)) == NULL)
		return INVALID("the pax header at offset %llu has keyword \"%.*s\", which this reader does not interpret and another may apply to the member",
		    (ull)ps->pos, KEY_QUOTE(kn), (const char *)k);
	if (vn == 0)
		return INVALID("the pax header at offset %llu has an empty %s record, which GNU tar takes for unset and Python's tarfile for a value",
		    (ull)ps->pos, pk->name);
	switch (pk->kind) {
	case PAX_PATH:
	case PAX_SIZE:
		return pax_override(ps, o, pk->kind, v, vn, err);
	case PAX_TIME:
		if (!pax_time(v, vn))
			return INVALID("the pax header at offset %llu has a %s that is not a decimal time",
			    (ull)ps->pos, pk->name);
		return VD_OK;
	case PAX_ID:
		if (pax_decimal(v, vn, &id) < 0)
			return INVALID("the pax header at offset %llu has a %s that is not a decimal number",
			    (ull)ps->pos, pk->name);
		return VD_OK;
	default:
		return VD_OK;
	}
}

/* A keyword is printable and has no blank: readers split records alike
 * only then. */
static int plain_keyword(const uint8_t *k, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (k[i] <= ' ' || k[i] == 0x7f)
			return 0;
	return 1;
}

/* Records "LEN KEY=VALUE\n", LEN in decimal without a leading zero and
 * counting the whole record, filling the data exactly: GNU tar also takes
 * blanks around LEN, and tarfile ignores what follows a record it cannot
 * read, so anything else would be read two ways. */
static vd_code pax_records(vd_tar_parser *ps, vd_tar_override *o, const uint8_t *p,
    size_t n, vd_err *err)
{
	const uint8_t *key, *eq, *end;
	size_t i = 0, j, len;
	vd_code rc;

	while (i < n) {
		for (len = 0, j = i; j < n && p[j] >= '0' && p[j] <= '9' && len <= n; j++)
			len = len * 10 + (size_t)(p[j] - '0');
		/* The shortest record: digits, ' ', a one-byte key, '=', '\n'. */
		if (j == i || p[i] == '0' || j == n || p[j] != ' ' || len > n - i ||
		    len < j - i + 4 || p[i + len - 1] != '\n')
			return INVALID("the pax header at offset %llu has a malformed record",
			    (ull)ps->pos);
		key = p + j + 1;
		end = p + i + len - 1;
		eq = memchr(key, '=', (size_t)(end - key));
		if (eq == NULL || eq == key)
			return INVALID("the pax header at offset %llu has a record without a keyword",
			    (ull)ps->pos);
		if (!plain_keyword(key, (size_t)(eq - key)))
			return INVALID("the pax header at offset %llu has a keyword with a blank or a control character",
			    (ull)ps->pos);
		rc = pax_keyword(ps, o, key, (size_t)(eq - key), eq + 1, (size_t)(end - eq - 1), err);
		if (rc != VD_OK)
			return rc;
		i += len;
	}
	return VD_OK;
}

/* The name and one NUL, as GNU tar and tarfile write it. */
static vd_code long_name(vd_tar_parser *ps, const uint8_t *p, size_t n, vd_err *err)
{
	size_t len = field_len(p, n);

	if (len == 0)
		return INVALID("the GNU long name at offset %llu is empty", (ull)ps->pos);
	if (len != n - 1)
		return INVALID("the GNU long name at offset %llu is not a name ended by its only NUL byte",
		    (ull)ps->pos);
	if (len > VD_TAR_MAX_NAME)
		return INVALID("the GNU long name at offset %llu is above the limit of %d bytes",
		    (ull)ps->pos, VD_TAR_MAX_NAME);
	memcpy(ps->long_name, p, len);
	ps->long_name[len] = '\0';
	ps->long_len = len;
	ps->pending_long = 1;
	return VD_OK;
}

/* p holds the data and its padding, which must be zeros: tarfile reads
 * pax records and long names up to the end of the block. */
static vd_code feed_ext(vd_tar_parser *ps, const uint8_t *p, vd_err *err)
{
	size_t n = (size_t)ps->ext_len;
	vd_code rc;

	if (!all_zero(p + n, (size_t)round_block(n) - n))
		return INVALID("the extended header at offset %llu has bytes other than zero after its data, which Python's tarfile reads as more of it",
		    (ull)ps->pos);
	if (ps->ext_type == 'L') {
		rc = long_name(ps, p, n, err);
	} else if (ps->ext_type == 'x') {
		ps->pending_x = 1;
		rc = pax_records(ps, &ps->x, p, n, err);
	} else {
		ps->pending_g = 1;
		rc = pax_records(ps, NULL, p, n, err);
	}
	if (rc != VD_OK)
		return rc;
	ps->pos += VD_TAR_BLOCK + round_block(ps->ext_len);
	return next_header(ps, err);
}

static vd_code feed_trailer(vd_tar_parser *ps, const uint8_t *p, vd_err *err)
{
	uint64_t left = ps->size - ps->pos;
	size_t n = left < VD_TAR_WANT_MAX ? (size_t)left : VD_TAR_WANT_MAX;

	if (!all_zero(p, n))
		return INVALID("bytes other than zero follow the end marker, at offset %llu",
		    (ull)ps->pos);
	ps->pos += n;
	if (ps->pos == ps->size)
		ps->state = VD_TAR_DONE;
	return VD_OK;
}

vd_code vd_tar_feed(vd_tar_parser *ps, const uint8_t *p, vd_err *err)
{
	vd_code rc;

	switch (ps->state) {
	case VD_TAR_HEADER:
		rc = feed_header(ps, p, err);
		break;
	case VD_TAR_EXT:
		rc = feed_ext(ps, p, err);
		break;
	case VD_TAR_TRAILER:
		rc = feed_trailer(ps, p, err);
		break;
	default:
		rc = vd_fail(err, VD_IO_ERROR, "the tar parse was fed after it ended");
	}
	if (rc != VD_OK)
		ps->state = VD_TAR_DONE;
	return rc;
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const vd_tar_entry *)a)->path, ((const vd_tar_entry *)b)->path);
}

static vd_code check_duplicates(vd_tar_parser *ps, vd_err *err)
{
	size_t i;

	if (ps->n > 1)
		qsort(ps->entries, ps->n, sizeof(*ps->entries), entry_cmp);
	for (i = 1; i < ps->n; i++)
		if (strcmp(ps->entries[i - 1].path, ps->entries[i].path) == 0)
			return INVALID("member \"%.64s\" appears twice",
			    ps->entries[i].depth ? ps->entries[i].path : ".");
	return VD_OK;
}

static size_t first_component(const char *path)
{
	const char *slash = strchr(path, '/');

	return slash ? (size_t)(slash - path) : strlen(path);
}

/* Files all at the top level: no member below it but the root's entry. */
static vd_code check_flat(const vd_tar_parser *ps, vd_err *err)
{
	size_t i;

	for (i = 0; i < ps->n; i++) {
		const vd_tar_entry *e = &ps->entries[i];
		if (e->depth > 1 || (e->is_dir && e->depth == 1))
			return INVALID("member \"%.64s\" is in a directory while files lie at the top level; an artifact tar holds its files at the top level or all in one directory",
			    e->path);
	}
	return VD_OK;
}

/* Files all in one directory, no deeper; *strip: the bytes of "dir/". */
static vd_code check_one_dir(const vd_tar_parser *ps, size_t *strip, vd_err *err)
{
	const char *top = NULL;
	size_t i, tlen = 0, n;

	for (i = 0; i < ps->n; i++) {
		const vd_tar_entry *e = &ps->entries[i];
		if (e->depth == 0)
			continue;
		n = first_component(e->path);
		if (top == NULL) {
			top = e->path;
			tlen = n;
		} else if (n != tlen || memcmp(top, e->path, n) != 0) {
			return INVALID("members lie in more than one top directory (\"%.*s\" and \"%.*s\")",
			    (int)(tlen > NAME_QUOTE_MAX ? NAME_QUOTE_MAX : tlen), top,
			    (int)(n > NAME_QUOTE_MAX ? NAME_QUOTE_MAX : n), e->path);
		}
		if (e->depth > 2 || (e->is_dir && e->depth == 2))
			return INVALID("member \"%.64s\" is nested deeper than one directory; an artifact has no subdirectories",
			    e->path);
	}
	*strip = top ? tlen + 1 : 0;
	return VD_OK;
}

static vd_code check_layout(const vd_tar_parser *ps, size_t *strip, vd_err *err)
{
	size_t i;

	*strip = 0;
	for (i = 0; i < ps->n; i++)
		if (!ps->entries[i].is_dir && ps->entries[i].depth == 1)
			return check_flat(ps, err);
	return check_one_dir(ps, strip, err);
}

/* The files, in name order (the entries are sorted by path, and the
 * paths of files share their directory). */
static vd_code build_index(vd_tar_parser *ps, size_t strip, vd_tar_index *out, vd_err *err)
{
	size_t i, n = 0;

	for (i = 0; i < ps->n; i++)
		n += !ps->entries[i].is_dir;
	if ((out->members = calloc(n ? n : 1, sizeof(*out->members))) == NULL)
		return vd_fail(err, VD_IO_ERROR, "out of memory reading a tar archive");
	for (i = 0; i < ps->n; i++) {
		const vd_tar_entry *e = &ps->entries[i];
		if (e->is_dir)
			continue;
		out->members[out->count].name = e->path + strip;
		out->members[out->count].offset = e->offset;
		out->members[out->count].size = e->size;
		out->count++;
	}
	out->names = ps->names;
	vd_arena_init(&ps->names, 0);
	return VD_OK;
}

vd_code vd_tar_finish(vd_tar_parser *ps, vd_tar_index *out, vd_err *err)
{
	size_t strip = 0;
	vd_code rc;

	memset(out, 0, sizeof(*out));
	if (ps->state != VD_TAR_DONE)
		rc = vd_fail(err, VD_IO_ERROR, "the tar parse was finished before its end");
	else if ((rc = check_duplicates(ps, err)) == VD_OK &&
	    (rc = check_layout(ps, &strip, err)) == VD_OK)
		rc = build_index(ps, strip, out, err);
	vd_tar_parser_free(ps);
	return rc;
}

void vd_tar_parser_free(vd_tar_parser *ps)
{
	free(ps->entries);
	ps->entries = NULL;
	ps->n = ps->cap = 0;
	vd_arena_free(&ps->names);
}

vd_code vd_tar_parse(const uint8_t *p, size_t n, vd_tar_index *out, vd_err *err)
{
	/* On the heap: it holds three names of VD_TAR_MAX_NAME bytes, too
	 * much for a hasher thread's stack. */
	vd_tar_parser *ps = malloc(sizeof(*ps));
	uint64_t off;
	size_t len;
	vd_code rc;

	memset(out, 0, sizeof(*out));
	if (ps == NULL)
		return vd_fail(err, VD_IO_ERROR, "out of memory reading a tar archive");
	rc = vd_tar_begin(ps, n, err);
	while (rc == VD_OK && vd_tar_want(ps, &off, &len))
		rc = vd_tar_feed(ps, p + off, err);
	if (rc == VD_OK)
		rc = vd_tar_finish(ps, out, err);
	else
		vd_tar_parser_free(ps);
	free(ps);
	return rc;
}

static int member_cmp(const void *key, const void *m)
{
	return strcmp(key, ((const vd_tar_member *)m)->name);
}

const vd_tar_member *vd_tar_find(const vd_tar_index *ix, const char *name)
{
	if (ix->count == 0)
		return NULL;
	return bsearch(name, ix->members, ix->count, sizeof(*ix->members), member_cmp);
}

void vd_tar_index_free(vd_tar_index *ix)
{
	free(ix->members);
	vd_arena_free(&ix->names);
	memset(ix, 0, sizeof(*ix));
}

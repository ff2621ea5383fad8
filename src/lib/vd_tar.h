/*
 * An artifact packed as an uncompressed POSIX tar, parsed from bytes with
 * explicit bounds and never extracted: the result is where each member
 * file's data lies in the archive, so the verifier can hash it in place.
 *
 * Accepted: ustar headers, pax extended headers ('x' per member, 'g'
 * global), GNU headers with long names ('L') and base-256 sizes. Members
 * are regular files ('0', NUL, and '7', a contiguous file, which is a
 * regular file on every system tar runs on) and directories. The files
 * lie either all at the top level or all in one directory, which may have
 * its own entry; "." and empty components are dropped first
 * ("./header.json" is "header.json"). The archive ends with two zero
 * blocks, followed by nothing but zero bytes up to a whole number of
 * blocks: GNU tar and Python's tarfile both pad to a 10240-byte record
 * this way.
 *
 * What is accepted must read the same to GNU tar and to Python's tarfile,
 * the readers a participant extracts with: every shape the two read two
 * ways is refused, even where this parse could pick one reading. So pax
 * records are exact ("LEN key=value\n", LEN without a leading zero, the
 * records filling the data, zeros after it); a pax header holds only
 * path and size, which it applies to its member, and keywords of
 * metadata with no bearing on names or bytes (times, owners, xattrs);
 * no value is empty (GNU tar takes an empty size for "the header's",
 * tarfile for 0); a global header sets neither path nor size; a long
 * name is the name and one NUL; every numeric field of every header is a
 * number (tarfile ends the archive at a header where one is not, GNU tar
 * reads on); a GNU header has zeros where ustar keeps the name prefix
 * (tarfile reads one there).
 *
 * Refused, as VD_ARTIFACT_INVALID with one sentence: the shapes above;
 * absolute names and ".." components; links ('1', '2', GNU 'K'); devices,
 * FIFOs, sparse files ('S', pax GNU.sparse.*) and any other member type;
 * a name twice; files in two directories or deeper than one; bad
 * checksums; anything cut short; no end marker; anything but zero bytes
 * after it; more than the limits below.
 *
 * The parse is incremental: vd_tar_want names the bytes it needs next and
 * vd_tar_feed takes them, so a caller can read an archive with pread()
 * as well as parse a mapping (vd_tar_parse). Neither form reads a byte of
 * member data.
 */
#ifndef VD_TAR_H
#define VD_TAR_H

#include <stddef.h>
#include <stdint.h>

#include "vd_limits.h"
#include "vd_util.h"

#define VD_TAR_BLOCK 512
/* The most vd_tar_want asks for at once (an extended header with its
 * padding, or a step of the zero padding after the end marker). */
#define VD_TAR_WANT_MAX VD_TAR_MAX_EXT

/* A regular file of the artifact: where its data lies in the archive. */
typedef struct vd_tar_member {
	const char *name;           /* relative to the artifact directory: a
	                             * plain file name, NUL-terminated */
	uint64_t offset;            /* of the first data byte */
	uint64_t size;
} vd_tar_member;

typedef struct vd_tar_index {
	vd_tar_member *members;     /* regular files, ascending byte-wise by name */
	size_t count;
	vd_arena names;             /* owns the names */
} vd_tar_index;

/* A member of any kind, as the parse collects it. */
typedef struct vd_tar_entry {
	char *path;                 /* normalised: no ".", no empty components */
	uint32_t depth;             /* components in path; 0 for the root "./" */
	int is_dir;
	uint64_t offset, size;
} vd_tar_entry;

typedef enum vd_tar_state {
	VD_TAR_HEADER,              /* a header block */
	VD_TAR_EXT,                 /* the data of a pax or GNU long-name header */
	VD_TAR_TRAILER,             /* padding after the end marker */
	VD_TAR_DONE
} vd_tar_state;

/* A name or size given by a pax header, for its member. */
typedef struct vd_tar_override {
	int has_path, has_size;
	uint64_t size;
	char path[VD_TAR_MAX_NAME + 1];
	size_t path_len;
} vd_tar_override;

typedef struct vd_tar_parser {
	uint64_t size;              /* of the archive */
	uint64_t pos;               /* of the header block read last or next */
	vd_tar_state state;
	int zero_blocks;            /* zero blocks just seen: 0 or 1 */
	char ext_type;              /* 'x', 'g' or 'L' while in VD_TAR_EXT */
	uint64_t ext_len;
	int pending_x, pending_long; /* an 'x' or 'L' waits for its member */
	int pending_g;              /* a 'g' waits for a member (tarfile reads it
	                             * with the next header, and fails at the end) */
	vd_tar_override x;          /* the next member's */
	char long_name[VD_TAR_MAX_NAME + 1];
	size_t long_len;
	vd_tar_entry *entries;
	size_t n, cap;
	size_t name_bytes;
	vd_arena names;
} vd_tar_parser;

/* Start parsing an archive of size bytes. On failure nothing is held. */
vd_code vd_tar_begin(vd_tar_parser *ps, uint64_t size, vd_err *err);

/* The bytes the parse needs next, [*off, *off + *len) with *len at most
 * VD_TAR_WANT_MAX and inside the archive: 1; 0 when it needs no more. */
int vd_tar_want(const vd_tar_parser *ps, uint64_t *off, size_t *len);

/* Take the bytes vd_tar_want named. After a failure, only
 * vd_tar_parser_free. */
vd_code vd_tar_feed(vd_tar_parser *ps, const uint8_t *p, vd_err *err);

/* Once vd_tar_want says it needs no more: check the layout and fill *out
 * (the caller frees it with vd_tar_index_free). ps is freed either way. */
vd_code vd_tar_finish(vd_tar_parser *ps, vd_tar_index *out, vd_err *err);

void vd_tar_parser_free(vd_tar_parser *ps);

/* The whole parse over an archive in memory (n bytes at p). */
vd_code vd_tar_parse(const uint8_t *p, size_t n, vd_tar_index *out, vd_err *err);

/* The member file called name, or NULL. */
const vd_tar_member *vd_tar_find(const vd_tar_index *ix, const char *name);

void vd_tar_index_free(vd_tar_index *ix);

#endif

/*
 * The artifact verifier's internal interface: the public one plus the
 * identities of the files it read, so a caller can tell later whether a
 * verdict still describes what is on disk.
 */
#ifndef VD_ARTIFACT_H
#define VD_ARTIFACT_H

#include <sys/stat.h>
#include <sys/types.h>

#include "lensemble/verify.h"
#include "vd_header.h"
#include "vd_util.h"

#define VD_ARTIFACT_MAX_FILES 4096     /* weight files per artifact */
#define VD_PREFETCH_WINDOW (64u << 20) /* read ahead of the hash position */
#define VD_PREFETCH_STEP (8u << 20)
#define VD_DIGEST_STEP (1u << 20)      /* resident per hasher in a range digest */
#define VD_HASH_CHUNK (1u << 20)       /* bytes hashed between progress calls: the
                                        * granularity of cancellation */
#define VD_LOAD_READ_STEP (64u << 20)  /* bytes per read() when loading into memory:
                                        * below Linux's per-call limit of 2 GiB */

typedef struct vd_file_id {
	char name[256];
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
} vd_file_id;

typedef struct vd_file_ids {
	vd_file_id *ids;
	size_t count, cap;
} vd_file_ids;

void vd_file_ids_free(vd_file_ids *ids);
void vd_file_id_from_stat(vd_file_id *id, const char *name, const struct stat *st);
int vd_file_id_same(const vd_file_id *a, const vd_file_id *b);

/* A weight file as the verifier mapped it, for digesting chunks alongside
 * the canonical pass. */
typedef struct vd_mapped_file {
	const char *name;
	const uint8_t *map;
	uint64_t size;
} vd_mapped_file;

/* Digests of what the verifier read besides the weights. */
typedef struct vd_meta_digests {
	uint8_t header[32];         /* header.json bytes */
	int has_index;
	uint8_t index[32];          /* weights.index.json bytes */
} vd_meta_digests;

/* Told when the weight files are mapped and structurally valid (start),
 * and before they are unmapped (finish: anything reading the mappings
 * must be done when it returns). */
typedef struct vd_chunk_sink {
	void (*start)(void *arg, const vd_mapped_file *files, size_t n);
	void (*finish)(void *arg, const vd_meta_digests *meta);
	void *arg;
} vd_chunk_sink;

/* Verify dirfd; when ids is not NULL, record the identity of every file
 * read; when sink is not NULL, hand it the mapped weight files. */
vd_code vd_artifact_verify_ex(int dirfd, const vd_options *opt, vd_verdict *out,
    vd_file_ids *ids, const vd_chunk_sink *sink);
#define vd_artifact_verify(fd, opt, out, ids) vd_artifact_verify_ex(fd, opt, out, ids, NULL)

/* The same for an artifact packed as a tar (vd_tar.h), open as tarfd (not
 * closed), verified in place: the archive is mapped whole and each weight
 * file is its member's range of that mapping, under the same SIGBUS
 * guard. ids gets one entry, the archive's own identity, named "."; it is
 * taken when verification begins and compared again after hashing (a
 * change is VD_IO_ERROR). The sink's files point into the archive's
 * mapping, so they start on a 512-byte boundary, not a page: what a sink
 * drops from the mapping must be whole pages inside a member. */
vd_code vd_artifact_verify_tar_ex(int tarfd, const vd_options *opt, vd_verdict *out,
    vd_file_ids *ids, const vd_chunk_sink *sink);

/* Fill v->facts.remediation from its code and facts ("" when ok): for a
 * verdict reached without the verifier (a directory that cannot be
 * opened). */
void vd_verdict_remediate(vd_verdict *v);

/* SHA-256 of a mapped range, dropping each digested step
 * from the mapping; -1 if the file shrank under it (SIGBUS, caught within
 * the range only). */
int vd_digest_range(const uint8_t *p, size_t n, uint8_t out[32]);

/* Open a member file the way the verifier does (no symlink, regular file,
 * no blocking on a FIFO). */
vd_code vd_artifact_open_member(int dirfd, const char *name, int *fd,
    struct stat *st, vd_err *err);

/* SHA-256 of a small member file's bytes (header.json, the index);
 * VD_CHECKPOINT_INTEGRITY when absent. */
vd_code vd_artifact_digest_small(int dirfd, const char *name, uint8_t out[32], vd_err *err);

/* Route SIGBUS from a truncated mapped file back to the verification that
 * touched it (which then fails) instead of killing the process; other
 * faults go on to the handler installed before. Verifications install the
 * handler themselves on first use; this installs it now, and again if a
 * handler set since replaced it. 0 or -1 (errno). */
int vd_artifact_guard_sigbus(void);

/* Read and parse dirfd's header.json alone (what a store scan needs). On
 * success the caller owns *hdr (vd_header_free). */
vd_code vd_artifact_read_header(int dirfd, vd_header *hdr, vd_file_id *id,
    vd_err *err);

/* The same for a tar open as tarfd: the archive's headers and header.json
 * are read with pread, nothing is mapped; *id is the archive's identity. */
vd_code vd_artifact_read_header_tar(int tarfd, vd_header *hdr, vd_file_id *id,
    vd_err *err);

#endif

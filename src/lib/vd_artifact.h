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
#include "vd_limits.h"
#include "vd_mapping.h"
#include "vd_util.h"

/* What one verification may spend, whatever the artifact's headers claim:
 * over a bound the artifact is VD_ARTIFACT_INVALID, with a detail naming
 * it. A field left 0 takes its default. */
typedef struct vd_bounds {
	uint64_t max_tensors;         /* over all weight files together */
	uint64_t max_job_memory;      /* parse memory: header.json, safetensors headers */
	uint64_t max_artifact_bytes;  /* weight bytes, all files together */
} vd_bounds;

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

/* Verify dirfd within bounds (NULL: the defaults); when ids is not NULL,
 * record the identity of every file read; when sink is not NULL, hand it
 * the mapped weight files. */
vd_code vd_artifact_verify_ex(int dirfd, const vd_options *opt, const vd_bounds *bounds,
    vd_verdict *out, vd_file_ids *ids, const vd_chunk_sink *sink);
#define vd_artifact_verify(fd, opt, out, ids) vd_artifact_verify_ex(fd, opt, NULL, out, ids, NULL)

/* The same for an artifact packed as a tar (vd_tar.h), open as tarfd (not
 * closed), verified in place: the archive is mapped whole and each weight
 * file is its member's range of that mapping, under the same SIGBUS
 * guard. ids gets one entry, the archive's own identity, named "."; it is
 * taken when verification begins and compared again after hashing (a
 * change is VD_IO_ERROR). The sink's files point into the archive's
 * mapping, so they start on a 512-byte boundary, not a page: what a sink
 * drops from the mapping must be whole pages inside a member. */
vd_code vd_artifact_verify_tar_ex(int tarfd, const vd_options *opt,
    const vd_bounds *bounds, vd_verdict *out, vd_file_ids *ids, const vd_chunk_sink *sink);

/* ---- a verification in slices -------------------------------------------
 * The canonical pass may stop between two chunks and go on later, on any
 * thread. What it keeps meanwhile is small and holds nothing open: the
 * SHA-256 state, the position, the identity of every file read and
 * header.json's digest; no descriptor, mapping or parse memory, so that
 * any number of verifications may wait their turn. Going on opens and
 * checks the artifact again up to the hash; a file that is not the one
 * read before fails it as a change during hashing does. */
typedef struct vd_resume vd_resume;

/* What a progress callback returns to stop here and go on later (under
 * vd_artifact_verify_part; anywhere else a nonzero return cancels). */
#define VD_PROGRESS_PAUSE 2

/* Verify fd, a directory or (tar) an archive, from *resume (NULL: from
 * the start). 1 when the pass paused: *resume is where it stopped, out
 * and the sink's map describe nothing yet (the sink is started on the
 * first part only). 0 when done: out holds the verdict, *resume is NULL. */
int vd_artifact_verify_part(int fd, int tar, const vd_options *opt, const vd_bounds *bounds,
    vd_verdict *out, const vd_chunk_sink *sink, vd_resume **resume);
/* Bytes of tensor data hashed before it paused. */
uint64_t vd_resume_hashed(const vd_resume *r);
void vd_resume_free(vd_resume *r);

/* Fill v->facts.remediation from its code and facts ("" when ok): for a
 * verdict reached without the verifier (a directory that cannot be
 * opened). */
void vd_verdict_remediate(vd_verdict *v);

/* Open a member file the way the verifier does (no symlink, regular file,
 * no blocking on a FIFO). */
vd_code vd_artifact_open_member(int dirfd, const char *name, int *fd,
    struct stat *st, vd_err *err);

/* SHA-256 of a small member file's bytes (header.json, the index);
 * VD_CHECKPOINT_INTEGRITY when absent. */
vd_code vd_artifact_digest_small(int dirfd, const char *name, uint8_t out[32], vd_err *err);

/* Read and parse dirfd's header.json alone (what a store scan needs). On
 * success the caller owns *hdr (vd_header_free). */
vd_code vd_artifact_read_header(int dirfd, const vd_bounds *bounds, vd_header *hdr,
    vd_file_id *id, vd_err *err);

/* The same for a tar open as tarfd: the archive's headers and header.json
 * are read with pread, nothing is mapped; *id is the archive's identity. */
vd_code vd_artifact_read_header_tar(int tarfd, const vd_bounds *bounds, vd_header *hdr,
    vd_file_id *id, vd_err *err);

#endif

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
#define VD_HASH_CHUNK (1u << 20)       /* bytes hashed between progress calls: the
                                        * granularity of cancellation */

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

/* Verify dirfd; when ids is not NULL, record the identity of every file read. */
vd_code vd_artifact_verify(int dirfd, const vd_options *opt, vd_verdict *out,
    vd_file_ids *ids);

/* Route SIGBUS from a truncated mapped file back to the verification that
 * touched it (which then fails) instead of killing the process. */
int vd_artifact_guard_sigbus(void);

/* Read and parse dirfd's header.json alone (what a store scan needs). On
 * success the caller owns *hdr (vd_header_free). */
vd_code vd_artifact_read_header(int dirfd, vd_header *hdr, vd_file_id *id,
    vd_err *err);

#endif

/*
 * lensemble/verify.h - verify a Lensemble model artifact.
 *
 * The public API of liblensemble-verify: the canonical content hash of an
 * artifact directory (header.json + safetensors weights) and the verdict of
 * checking it, exactly as the Lensemble reference implementation defines it.
 *
 * An artifact may also come as an uncompressed tar of its directory
 * (ustar, pax or GNU, as GNU tar and Python's tarfile write them): the
 * files at the archive's top level, or all in one directory. It is
 * verified in place, never extracted, and gives the very verdict and hash
 * the directory gives. Every function below that takes an artifact
 * directory takes a path to (or an fd of) such a tar as well: a regular
 * file is read as a tar. An archive that is not one of these (links,
 * devices, absolute or ".." names, files in two directories or deeper
 * than one, a name twice, bad checksums, anything cut short or after the
 * end marker) is VD_ARTIFACT_INVALID.
 *
 * A verdict is never "could not check, so ok": every path that does not end
 * in a recomputed hash equal to the claimed one carries a failure code.
 */
#ifndef LENSEMBLE_VERIFY_H
#define LENSEMBLE_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VD_HASH_HEX_LEN 64
#define VD_DETAIL_MAX 256
#define VD_NAME_MAX 256         /* a tensor or file name in vd_facts, with its NUL */
#define VD_REMEDIATION_MAX 256

/* The reference implementation's error codes, plus VD_IO_ERROR for an
 * artifact that could not be read (permissions, I/O failure, memory): it is
 * not verified, and a caller may try again later. */
typedef enum vd_code {
	VD_OK = 0,
	VD_SCHEMA_VERSION_MISMATCH,
	VD_ARTIFACT_INVALID,
	VD_RESIDENCY_VIOLATION,
	VD_CHECKPOINT_INTEGRITY,
	VD_IO_ERROR
} vd_code;

/*
 * The facts behind a failed verdict, each only where it applies: a string
 * that does not apply is "", a number 0 (file_schema_version: when
 * has_file_schema_version is 0). All empty when the verdict is VD_OK.
 * A name longer than VD_NAME_MAX - 1 bytes is cut at a UTF-8 character
 * boundary.
 */
typedef struct vd_facts {
	/* VD_CHECKPOINT_INTEGRITY from a hash comparison: the hash the artifact
	 * must have (header.json's content_hash, or vd_options.expected_hash
	 * when that is the one that differs) and the hash its bytes have. */
	char expected_hash[VD_HASH_HEX_LEN + 1];
	char recomputed_hash[VD_HASH_HEX_LEN + 1];
	/* VD_SCHEMA_VERSION_MISMATCH: header.json's schema_version, when it is
	 * an integer, and the newest version this library reads. */
	int has_file_schema_version;
	int64_t file_schema_version;
	int64_t reader_max_version;
	char tensor[VD_NAME_MAX];          /* the tensor at fault: dtype, residency,
	                                    * groups, index, manifest, a tensor twice */
	char file[VD_NAME_MAX];            /* the weight file at fault, as header.json
	                                    * weight_files names it */
	char remediation[VD_REMEDIATION_MAX]; /* what to do, one sentence; "" only when ok */
} vd_facts;

typedef struct vd_verdict {
	vd_code code;
	char detail[VD_DETAIL_MAX];        /* one sentence; "" when ok */
	char content_hash[VD_HASH_HEX_LEN + 1]; /* recomputed; "" if not reached */
	char claimed_hash[VD_HASH_HEX_LEN + 1]; /* header.content_hash; "" if unread */
	int have_header;                   /* the fields below are valid */
	int64_t schema_version;
	int64_t round_index;
	int has_parent;
	char parent_hash[VD_HASH_HEX_LEN + 1];
	uint64_t tensors;                  /* tensors hashed */
	uint64_t bytes;                    /* tensor data bytes hashed */
	/* Appended after the first release: see "The size of vd_verdict". */
	vd_facts facts;
	/* have_header, and schema_version is older than the newest this library
	 * reads: header.json was read through the migration chain (the hash
	 * binds the version on disk, so the artifact verifies as written). */
	int legacy;
	int64_t migrated_from;             /* that schema_version when legacy; 0 otherwise */
} vd_verdict;

/*
 * The size of vd_verdict.
 *
 * vd_verdict grows at its end from one version to the next; the library
 * fills it and the caller allocates it. So that a program built against
 * an earlier header keeps working with a later library, the functions
 * below that fill a vd_verdict are macros naming entry points of the size
 * this header declares (vd_verify_artifact is vd_verify_artifact_v2), and
 * the library keeps the earlier entry points, which fill only the fields
 * the earlier vd_verdict has: rebuild to get the new ones. Never rely on
 * sizeof(vd_verdict) across versions: do not store one as bytes, nor pass
 * one between programs built against different versions of this header.
 */
#define vd_verify_artifact vd_verify_artifact_v2
#define vd_verify_artifact_at vd_verify_artifact_at_v2
#define vd_load_verified vd_load_verified_v2
#define vd_load_verified_at vd_load_verified_at_v2

/* Called while hashing; a nonzero return cancels the verification, which
 * then fails with VD_IO_ERROR. */
typedef int (*vd_progress_fn)(uint64_t done, uint64_t total, void *arg);

/* vd_options.flags */
#define VD_VERIFY_KEEP_CACHE_CLEAN 0x1 /* evict the pages this read brought
                                        * into the page cache, keep the rest */

typedef struct vd_options {
	const char *expected_hash;    /* committed hash to match, or NULL */
	unsigned flags;
	uint64_t max_header_len;      /* safetensors header cap; 0: default */
	vd_progress_fn progress;      /* called while hashing, or NULL */
	void *progress_arg;
} vd_options;

/*
 * Truncated files and SIGBUS.
 *
 * vd_verify_artifact and vd_verify_artifact_at map the weight files (or the
 * whole tar) while they hash them. A file that another process truncates
 * meanwhile makes
 * the lost pages fault with SIGBUS, which would end the calling program.
 * The library catches it itself: before its first mapping it installs a
 * SIGBUS handler (sigaction, SA_SIGINFO) in front of the handler the
 * program had. A fault inside a mapping the faulting thread is verifying
 * fails that verification with VD_CHECKPOINT_INTEGRITY ("a weight file
 * shrank while it was being read"); the program goes on. Every other
 * SIGBUS (outside those mappings, in a thread that is not verifying, or
 * sent with kill) goes to the previous handler, or takes the default
 * action if there was none, exactly as without the library.
 *
 * A program that installs its own SIGBUS handler after its first
 * verification replaces the library's: it must keep the handler sigaction
 * returns as the old one and call it for faults it does not handle, or a
 * truncated file ends the program. Handlers installed before are chained
 * to. vd_load_verified maps nothing and installs nothing.
 *
 * Verifications may run in several threads at once, each in the calling
 * thread alone.
 */

/*
 * What one verification may spend.
 *
 * Whatever an artifact's headers claim, each verification (the functions
 * below, vd_load_verified included) stays within the defaults of the
 * daemon's bounds: at most 32768 tensors over all the weight files
 * together (max_tensors); at most 64 MiB of memory to parse header.json,
 * every safetensors header and weights.index.json, all charged to one
 * budget (max_job_memory); at most 1 TiB of weight files (for a tar, of
 * its weight members; max_artifact_bytes). Past a bound the verdict is
 * VD_ARTIFACT_INVALID, its detail naming the bound: "weights.safetensors
 * declares more than 32768 tensors (max_tensors)", "header.json needs
 * more than 67108864 bytes to parse (max_job_memory)". Tensors are counted
 * as a header is read, so one listing millions is refused before they are
 * built; the sizes of the weight files are checked before a byte of them
 * is read, so a sparse file claiming terabytes is refused at once. The
 * parse memory is returned to the system when the verification ends.
 * These bounds are not parameters of this interface; lensemble-verifyd
 * takes its own from its configuration.
 */

/* Verify the artifact directory (or tar) at path. Fills *out and returns
 * out->code. */
vd_code vd_verify_artifact(const char *path, const vd_options *opt,
    vd_verdict *out);

/* The same for a directory (or a tar) already open as dirfd (not closed). */
vd_code vd_verify_artifact_at(int dirfd, const vd_options *opt,
    vd_verdict *out);

/* "checkpoint_integrity" etc.; "ok" for VD_OK. */
const char *vd_code_name(vd_code code);

/*
 * Verifying the bytes you load.
 *
 * vd_verify_artifact judges the files on disk; a program that then opens
 * them itself loads bytes nobody checked, since a file can be replaced
 * between the check and the load. vd_load_verified instead reads each file
 * once, with read(), into memory the caller owns, and runs the same checks
 * with the same codes over exactly those bytes. Nothing is mapped: a later
 * change to a file cannot reach the buffers, and a truncated file cannot
 * fault. Files are opened relative to the artifact directory, never through
 * a symbolic link, with the same name rules as vd_verify_artifact. A tar
 * is read with pread() alone, its headers as well as its members.
 *
 * On VD_OK the caller uses loaded->files[i].data or loaded->tensors[i].data
 * (the very bytes hashed) and frees everything with vd_loaded_free. On any
 * other code *loaded is left empty: unverified bytes are never handed out.
 */

/* The bytes vd_load_verified holds in memory at most (header.json plus the
 * weight files) when the caller passes max_bytes 0. */
#define VD_LOAD_DEFAULT_MAX_BYTES (UINT64_C(16) << 30)

typedef struct vd_loaded_file {
	const char *name;          /* as header.json weight_files lists it */
	uint8_t *data;             /* the whole safetensors file; malloc'd */
	size_t len;
} vd_loaded_file;

typedef struct vd_tensor {
	const char *name;          /* UTF-8, NUL-terminated */
	size_t name_len;           /* bytes, without the NUL */
	const char *dtype;         /* "float32", "float16" or "bfloat16" */
	uint32_t rank;
	const uint64_t *shape;     /* rank dimensions, outer first */
	const uint8_t *data;       /* inside files[file].data, little-endian */
	size_t len;                /* bytes: element size times the shape */
	size_t file;               /* index into vd_loaded.files */
} vd_tensor;

struct vd_loaded_store;

typedef struct vd_loaded {
	uint8_t *header;           /* header.json, the bytes parsed */
	size_t header_len;
	vd_loaded_file *files;     /* in header.json weight_files order */
	size_t n_files;
	vd_tensor *tensors;        /* every tensor, ascending byte-wise by name */
	size_t n_tensors;
	struct vd_loaded_store *store; /* internal: owns names and shapes */
} vd_loaded;

/* Read the artifact directory (or tar) at path into memory, verify those
 * bytes and fill *out (as vd_verify_artifact does) and, on VD_OK only,
 * *loaded. max_bytes bounds header.json plus the weight files (0: the
 * default above; a tar's headers and other members do not count); a
 * larger artifact is refused before it is read, with VD_IO_ERROR:
 * it was not judged. (A parameter rather than a vd_options field, so that
 * programs built against the earlier vd_options keep working.) A file that
 * changes while it is read is VD_IO_ERROR too, worth a retry.
 * opt->flags' VD_VERIFY_KEEP_CACHE_CLEAN does not apply (nothing is
 * mapped). Returns out->code. */
vd_code vd_load_verified(const char *path, const vd_options *opt,
    uint64_t max_bytes, vd_loaded *loaded, vd_verdict *out);

/* The same for a directory (or a tar) already open as dirfd (not closed). */
vd_code vd_load_verified_at(int dirfd, const vd_options *opt,
    uint64_t max_bytes, vd_loaded *loaded, vd_verdict *out);

/* The tensor called name (NUL-terminated), or NULL. Its data points into
 * loaded->files and lives as long as they do. */
const vd_tensor *vd_loaded_tensor(const vd_loaded *loaded, const char *name);

/* Free what vd_load_verified put in *loaded and empty it; safe on an empty
 * one. A caller may keep a file's buffer past this by taking it first
 * (copy files[i].data, set it to NULL) and releasing it with free(). */
void vd_loaded_free(vd_loaded *loaded);

#ifdef __cplusplus
}
#endif
#endif

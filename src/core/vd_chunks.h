/*
 * Chunk maps: SHA-256 digests of fixed-size chunks of every weight file of
 * a verified artifact, plus digests of its header.json and index. Taken
 * alongside the first canonical pass, they let a later re-check compare
 * chunks on all workers at once and fall back to the canonical pass (one
 * SHA-256 stream, one core) only when a chunk differs. The map is stored
 * with the verdict in the state database as a versioned binary blob.
 */
#ifndef VD_CHUNKS_H
#define VD_CHUNKS_H

#include <stddef.h>
#include <stdint.h>

#include "vd_artifact.h"
#include "vd_limits.h"

#define VD_CHUNKMAP_MAX_FILES VD_ARTIFACT_MAX_FILES
#define VD_CHUNKMAP_MAGIC "VDCM\x01"

typedef struct vd_chunk_file {
	char *name;
	uint64_t size;
	size_t n_chunks;
	uint8_t (*digests)[32];
} vd_chunk_file;

typedef struct vd_chunkmap {
	uint32_t chunk_size;
	vd_meta_digests meta;
	vd_chunk_file *files;
	size_t n_files;
} vd_chunkmap;

size_t vd_chunk_count(uint64_t size, uint32_t chunk_size);
vd_chunkmap *vd_chunkmap_new(const vd_mapped_file *files, size_t n, uint32_t chunk_size);
void vd_chunkmap_free(vd_chunkmap *m);

/* The blob stored in the database; parse refuses anything malformed. */
int vd_chunkmap_serialize(const vd_chunkmap *m, vd_buf *out);
vd_chunkmap *vd_chunkmap_parse(const uint8_t *p, size_t n);
vd_chunkmap *vd_chunkmap_dup(const vd_chunkmap *m);

#endif

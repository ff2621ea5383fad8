/*
 * Reading files into memory on a thread of its own while the caller hashes
 * what has arrived. A load (vd_load_verified) must copy every byte out of
 * the page cache and fault in every page of its buffers; done on the
 * hashing thread, that work came on top of SHA-256 (a loaded verification
 * took twice as long as a mapped one). On a second core it costs the hash
 * nothing but a wait at the start. Without one (the other core busy), the
 * hash reads what it needs itself rather than wait for a thread that is
 * not running, a piece at a time, and hashes it while it is in cache.
 */
#ifndef VD_READER_H
#define VD_READER_H

#include <stddef.h>
#include <stdint.h>

/* len bytes of fd from file_off on into dst, of which the first `have`
 * are there already. */
typedef struct vd_read_job {
	int fd;
	uint64_t file_off;
	uint8_t *dst;
	size_t len, have;
} vd_read_job;

typedef struct vd_reader vd_reader;

/* Start reading jobs[0..n) in that order (the array is copied); NULL when
 * no thread could be started (the caller reads them itself). */
vd_reader *vd_reader_start(const vd_read_job *jobs, size_t n);

/* Until job i holds want bytes (reading them on the calling thread when
 * the reader has not taken them yet): 0; -1 when it never will, because
 * job *failed (i, or one read before it) could not be read: *err is the
 * errno of the failed read, or 0 when that file ended early. */
int vd_reader_wait(vd_reader *r, size_t i, size_t want, size_t *failed, int *err);

/* Stop reading (at once, if not done), join the thread, free r. */
void vd_reader_stop(vd_reader *r);

#endif

/*
 * Reading the bytes of mapped files: the SIGBUS guard that turns a file
 * truncated under its mapping into a failed read, the page-cache advice
 * that keeps a hash of a large file from filling memory, and the digest
 * of a mapped range. Over plain pointers, lengths and descriptors: what
 * the bytes mean is the verifier's business.
 */
#ifndef VD_MAPPING_H
#define VD_MAPPING_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

/* A mapped file truncated by another process faults on access (SIGBUS).
 * A thread reading mappings sets a guard naming them; a fault inside them
 * jumps back to the guard, whose reader then fails. Any other SIGBUS
 * (another thread, another address, a sent signal) goes on to the handler
 * the process had before, so that the library, linked into any program,
 * neither kills it on a truncated file nor swallows its own faults. */
typedef struct vd_bus_guard {
	sigjmp_buf jb;
	/* What is guarded: the addresses covers(arg, addr) accepts (called
	 * in the signal handler: it may only read), or else [lo, hi). */
	int (*covers)(const void *arg, const void *addr);
	const void *arg;
	uintptr_t lo, hi;
	const void *volatile fault; /* where it faulted: which file shrank */
} vd_bus_guard;

/* Install the handler once, before the first mapping is read: a program
 * linking the library need not know about SIGBUS. Later handlers are the
 * program's business. */
void vd_bus_guard_lazily(void);

/* Make g the thread's guard (the caller then sets g->jb with sigsetjmp);
 * vd_bus_guard_pop(the result) restores the one before: guards nest. */
vd_bus_guard *vd_bus_guard_push(vd_bus_guard *g);
void vd_bus_guard_pop(vd_bus_guard *prev);

/* addr lies in [p, p + n) (never when p is NULL). Async-signal-safe. */
int vd_bus_in_range(const void *addr, const void *p, size_t n);

/* Route SIGBUS from a truncated mapped file back to the verification that
 * touched it (which then fails) instead of killing the process; other
 * faults go on to the handler installed before. Verifications install the
 * handler themselves on first use; this installs it now, and again if a
 * handler set since replaced it. 0 or -1 (errno). */
int vd_artifact_guard_sigbus(void);

/* Tell the kernel that fd's [file_off, file_off + len) is read in order:
 * its own read-ahead (a larger window, large folios) keeps ahead of the
 * hash. */
void vd_mapping_sequential(int fd, uint64_t file_off, uint64_t len);

/* Minor page faults the calling thread has taken (0 when that cannot be
 * told): how the page cache of a mapping it reads is laid out shows in
 * how often it faults. */
uint64_t vd_thread_minor_faults(void);

/* Which pages of [off, off + n) of the mapping base (a whole file, from
 * its start) are in the page cache, one byte each, from page *first_page
 * on; NULL when that cannot be told. ps is the page size. Freed with free. */
unsigned char *vd_mapping_residency(const uint8_t *base, uint64_t off, size_t n,
    uint64_t ps, uint64_t *first_page);

/* Every page of [off, off + n) of the mapping base is in the page cache
 * (0 also when that cannot be told). */
int vd_mapping_resident(const uint8_t *base, uint64_t off, size_t n, uint64_t ps);

/* Evict from the page cache the pages of fd's [off, off + n) that were
 * not resident before (was, from vd_mapping_residency). */
void vd_mapping_evict_new(int fd, uint64_t ps, uint64_t first_page,
    const unsigned char *was, uint64_t off, size_t n);

/* Drop the whole pages inside [off, off + n) of the mapping base. */
void vd_mapping_drop(const uint8_t *base, uint64_t off, size_t n, uint64_t ps);

/* SHA-256 of a mapped range, dropping each digested step
 * from the mapping; -1 if the file shrank under it (SIGBUS, caught within
 * the range only). */
int vd_digest_range(const uint8_t *p, size_t n, uint8_t out[32]);

#endif

#include "config.h"

#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>


#include "vd_hash.h"
#include "vd_limits.h"
#include "vd_mapping.h"

/* ---- the SIGBUS guard ---------------------------------------------------- */

static __thread vd_bus_guard *bus_top;
static struct sigaction bus_prev;   /* changed only while on_sigbus is not installed */
static pthread_mutex_t bus_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t bus_once = PTHREAD_ONCE_INIT;

int vd_bus_in_range(const void *addr, const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)addr;

	return p != NULL && a >= (uintptr_t)p && a - (uintptr_t)p < n;
}

/* Async-signal context: reads only. */
static int guarded(const vd_bus_guard *g, const void *addr)
{
	uintptr_t a = (uintptr_t)addr;

	if (g->covers != NULL)
		return g->covers(g->arg, addr);
	return a >= g->lo && a < g->hi;
}

/* What the process would have done without on_sigbus. */
static void chain_sigbus(int sig, siginfo_t *si, void *uctx)
{
	void (*h)(int) = bus_prev.sa_handler;

	if (h != SIG_DFL && h != SIG_IGN) {
		if (bus_prev.sa_flags & SA_SIGINFO)
			bus_prev.sa_sigaction(sig, si, uctx);
		else
			h(sig);
		return;
	}
	/* A sent SIGBUS that was ignored stays ignored. Otherwise the default
	 * action: a fault repeats on return and ends the process where it
	 * happened (the kernel does not let a fault be ignored either); a
	 * sent signal is sent again. */
	if (h == SIG_IGN && si->si_code <= 0)
		return;
	signal(SIGBUS, SIG_DFL);
	if (si->si_code <= 0)
		raise(SIGBUS);
}

static void on_sigbus(int sig, siginfo_t *si, void *uctx)
{
	vd_bus_guard *g = bus_top;

	if (g != NULL && si->si_code > 0 && guarded(g, si->si_addr)) {
		g->fault = si->si_addr;
		siglongjmp(g->jb, 1);
	}
	chain_sigbus(sig, si, uctx);
}

/* Put on_sigbus in front of the current SIGBUS handler, unless it is. */
static int install_sigbus(void)
{
	struct sigaction sa, cur;
	int rc = 0;

	pthread_mutex_lock(&bus_mu);
	if (sigaction(SIGBUS, NULL, &cur) < 0) {
		rc = -1;
	} else if (!(cur.sa_flags & SA_SIGINFO) || cur.sa_sigaction != on_sigbus) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_sigbus;
		/* SA_NODEFER: a fault in a chained handler is not blocked. */
		sa.sa_flags = SA_SIGINFO | SA_NODEFER | (cur.sa_flags & SA_ONSTACK);
		sigemptyset(&sa.sa_mask);
		bus_prev = cur;
		rc = sigaction(SIGBUS, &sa, NULL);
	}
	pthread_mutex_unlock(&bus_mu);
	return rc;
}

static void install_sigbus_once(void)
{
	install_sigbus();
}

void vd_bus_guard_lazily(void)
{
	pthread_once(&bus_once, install_sigbus_once);
}

int vd_artifact_guard_sigbus(void)
{
	vd_bus_guard_lazily();
	return install_sigbus();
}

vd_bus_guard *vd_bus_guard_push(vd_bus_guard *g)
{
	vd_bus_guard *prev = bus_top;

	bus_top = g;
	atomic_signal_fence(memory_order_seq_cst);
	return prev;
}

void vd_bus_guard_pop(vd_bus_guard *prev)
{
	atomic_signal_fence(memory_order_seq_cst);
	bus_top = prev;
}

/* ---- page-cache advice ---------------------------------------------------- */

/* Read-ahead is left to the kernel's sequential read-ahead, doubled for
 * the file: it fills the page cache with large folios, which later
 * mappings of the file fault in a few hundred KiB at a time. Explicit
 * WILLNEED windows (posix_fadvise, madvise) fill it with 4 KiB pages
 * instead, whose faults and TLB misses slowed every later hash of the
 * file by a fifth, and did their I/O submission on the hashing thread. */
void vd_mapping_sequential(int fd, uint64_t file_off, uint64_t len)
{
	posix_fadvise(fd, (off_t)file_off, (off_t)len, POSIX_FADV_SEQUENTIAL);
}

uint64_t vd_thread_minor_faults(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru) < 0)
		return 0;
	return (uint64_t)ru.ru_minflt;
}

unsigned char *vd_mapping_residency(const uint8_t *base, uint64_t off, size_t n,
    uint64_t ps, uint64_t *first_page)
{
	uint64_t start = off / ps * ps;
	size_t pages = (size_t)((off + n - start + ps - 1) / ps);
	unsigned char *vec = malloc(pages ? pages : 1);

	if (vec != NULL && mincore((void *)(base + start), (size_t)(off + n - start), vec) < 0) {
		free(vec);
		vec = NULL;
	}
	*first_page = start / ps;
	return vec;
}

int vd_mapping_resident(const uint8_t *base, uint64_t off, size_t n, uint64_t ps)
{
	uint64_t first, i, pages = (off + n + ps - 1) / ps - off / ps;
	unsigned char *vec = vd_mapping_residency(base, off, n, ps, &first);
	int all = vec != NULL;

	for (i = 0; all && i < pages; i++)
		all = vec[i] & 1;
	free(vec);
	return all;
}

/* In runs; pages that were cached before (a model someone is loading)
 * stay. */
void vd_mapping_evict_new(int fd, uint64_t ps, uint64_t first_page,
    const unsigned char *was, uint64_t off, size_t n)
{
	uint64_t p = first_page, end = (off + n + ps - 1) / ps;

	while (p < end) {
		uint64_t q = p;
		while (q < end && !(was[q - first_page] & 1))
			q++;
		if (q > p)
			posix_fadvise(fd, (off_t)(p * ps), (off_t)((q - p) * ps), POSIX_FADV_DONTNEED);
		p = q + 1;
	}
}

/* Whole pages only: in a tar the pages at either end hold other members'
 * bytes too. */
void vd_mapping_drop(const uint8_t *base, uint64_t off, size_t n, uint64_t ps)
{
	uint64_t a = (off + ps - 1) / ps * ps, b = (off + n) / ps * ps;

	if (b > a)
		madvise((void *)(base + a), (size_t)(b - a), MADV_DONTNEED);
}

/* ---- the digest of a mapped range ----------------------------------------- */

int vd_digest_range(const uint8_t *p, size_t n, uint8_t out[32])
{
	/* Allocated outside the guard: a jump out of the digest must not
	 * leave anything allocated behind it. */
	vd_hasher *h = vd_hasher_new();
	vd_bus_guard g = { .lo = (uintptr_t)p, .hi = (uintptr_t)p + n }, *prev;
	volatile int rc = -1;

	if (h == NULL)
		return -1;
	vd_bus_guard_lazily();
	prev = vd_bus_guard_push(&g);
	if (sigsetjmp(g.jb, 1) == 0) {
		uintptr_t ps = (uintptr_t)sysconf(_SC_PAGESIZE), from, to;
		size_t off = 0, step;
		int ok = 1;

		/* Each step leaves the mapping once digested (the page cache
		 * keeps it): resident memory per hasher stays one step, however
		 * many hashers digest at once. A range need not start on a page
		 * (a tar member): whole pages are dropped, from the one it
		 * starts in, which lies in the same mapping. */
		for (; ok && off < n; off += step) {
			step = n - off < VD_DIGEST_STEP ? n - off : VD_DIGEST_STEP;
			ok = vd_hasher_update(h, p + off, step) == 0;
			from = ((uintptr_t)p + off) & ~(ps - 1);
			to = ((uintptr_t)p + off + step) & ~(ps - 1);
			if (to > from)
				madvise((void *)from, to - from, MADV_DONTNEED);
		}
		if (ok && vd_hasher_digest(h, out) == 0)
			rc = 0;
	}
	vd_bus_guard_pop(prev);
	vd_hasher_free(h);
	return rc;
}

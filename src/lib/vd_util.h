/* Small shared pieces: error reporting, byte buffers, an arena. */
#ifndef VD_UTIL_H
#define VD_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "lensemble/verify.h"
#include "vd_limits.h"

#define VD_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* to - from on a monotonic clock in nanoseconds, 0 when to reads behind
 * from (two clocks, or two reads of one across CPUs): an interval is never
 * a negative number wrapped to a huge unsigned one. */
static inline uint64_t vd_ns_between(uint64_t from, uint64_t to)
{
	return to > from ? to - from : 0;
}

/* FNV-1a, 64 bits, from VD_FNV_BASIS: the hash of the maps' keys and the
 * fingerprints that tell whether a set of sources changed. */
#define VD_FNV_BASIS 0xcbf29ce484222325ULL
#define VD_FNV_PRIME 0x100000001b3ULL

static inline uint64_t vd_fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	while (n-- > 0)
		h = (h ^ *b++) * VD_FNV_PRIME;
	return h;
}

/* A string with its NUL: "ab", "c" and "a", "bc" differ. */
static inline uint64_t vd_fnv_str(uint64_t h, const char *s)
{
	while (*s)
		h = (h ^ (unsigned char)*s++) * VD_FNV_PRIME;
	return h * VD_FNV_PRIME;     /* the NUL: h ^ 0 */
}

/* The decimal digits of v, with a '-' before a negative one, at out
 * (VD_I64_DIGITS_MAX bytes at least), unterminated; their count. Written
 * without snprintf for keys built once per group at every refresh. */
#define VD_I64_DIGITS_MAX 20
size_t vd_i64_digits(char *out, int64_t v);

typedef struct vd_str {
	const char *p;
	size_t len;
} vd_str;

/* An error: the verdict code and one sentence. */
typedef struct vd_err {
	vd_code code;
	char msg[VD_DETAIL_MAX];
} vd_err;

/* Record the first error only; returns code so callers can `return vd_fail(...)`. */
vd_code vd_fail(vd_err *err, vd_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

int vd_str_eq(vd_str a, const char *lit);
int vd_str_cmp(vd_str a, vd_str b);          /* byte-wise, shorter first */
int vd_is_hex64(vd_str s);                   /* 64 lowercase hex digits */
void vd_hex(const uint8_t *in, size_t n, char *out); /* out: 2n+1 */

/* A growable byte buffer; `oom` sticks once an allocation failed. */
typedef struct vd_buf {
	uint8_t *p;
	size_t len, cap;
	int oom;
} vd_buf;

void vd_buf_init(vd_buf *b);
void vd_buf_free(vd_buf *b);
int vd_buf_put(vd_buf *b, const void *p, size_t n);
/* Room for n more bytes (and the NUL) in one allocation of exactly that
 * size: for a buffer whose final size is known, which doubling would
 * leave up to twice as large. 0 or -1. */
int vd_buf_reserve(vd_buf *b, size_t n);
int vd_buf_putc(vd_buf *b, uint8_t c);
int vd_buf_puts(vd_buf *b, const char *s);
int vd_buf_printf(vd_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int vd_buf_put_u32le(vd_buf *b, uint32_t v);
int vd_buf_put_u64le(vd_buf *b, uint64_t v);

/* Seconds since the epoch, wall clock (CLOCK_REALTIME). */
double vd_wall_now(void);
/* Unix seconds as RFC 3339 UTC with milliseconds; out: 32 bytes. */
void vd_rfc3339(double t, char *out, size_t n);

/* Room for item n of an array of `size`-byte items with *cap slots:
 * arr itself, or arr grown (doubling; *cap updated), or NULL with arr
 * untouched when memory runs out. */
void *vd_grow(void *arr, size_t *cap, size_t n, size_t size);

/* Read fd to its end into b, at most cap bytes: 0, -EFBIG past cap,
 * -ENOMEM, or -errno of a failed read. */
int vd_read_all(int fd, size_t cap, vd_buf *b);
/* The regular file at path into b, at most cap bytes: 0, -EFBIG past
 * cap, -EINVAL when it is not a regular file (a FIFO is not waited on),
 * or -errno. The one reader of whole files but for secrets (keys and
 * tokens are read into buffers that are wiped). */
int vd_read_file(const char *path, size_t cap, vd_buf *b);

/* What one job may spend on parsing, shared by every arena and array the
 * job allocates for it: the sum stays bounded however a hostile artifact
 * spreads its bytes over documents. One job, one thread: no locking. */
typedef struct vd_budget {
	size_t limit;      /* 0: unlimited */
	size_t used;
	size_t peak;       /* the most used at once */
	int exhausted;     /* a charge was refused: why the allocation failed */
} vd_budget;

void vd_budget_init(vd_budget *b, size_t limit);
/* Take n bytes from b (NULL: nothing to charge): 0, or -1 when they would
 * go past the limit (b->exhausted is then set). */
int vd_budget_charge(vd_budget *b, size_t n);
void vd_budget_release(vd_budget *b, size_t n);

/* What parsing one artifact's headers may spend: the header.json and
 * safetensors parsers take it. A bound exceeded is VD_ARTIFACT_INVALID,
 * with a detail naming it. */
typedef struct vd_parse_bounds {
	uint64_t max_tensors;      /* the artifact's tensors, all files together; 0: no limit */
	uint64_t tensors_before;   /* declared by the weight files parsed before this one */
	vd_budget *budget;         /* memory; NULL: no limit */
} vd_parse_bounds;

/* Memory that goes back to the system when freed, whatever malloc's
 * thresholds have become (glibc raises its mmap threshold each time a
 * mapped block is freed, so the next big block lands on the heap and stays
 * resident): blocks of VD_MEM_MAP_MIN bytes and more are mapped on their
 * own; smaller ones come from malloc. Zeroed. The size given to
 * vd_mem_free must be the one allocated. */
void *vd_mem_alloc(size_t n);
void vd_mem_free(void *p, size_t n);
/* The same, charged to b (NULL: not charged); NULL when out of budget or
 * memory. */
void *vd_budget_alloc(vd_budget *b, size_t n);
void vd_budget_free(vd_budget *b, void *p, size_t n);

/* A bump allocator freed all at once: parsed documents live in one.
 * Chunks grow as the arena does; the large ones are mapped (vd_mem_alloc),
 * so that a big document leaves no heap behind it. */
typedef struct vd_arena_chunk vd_arena_chunk;
typedef struct vd_arena {
	vd_arena_chunk *head;
	size_t used_total;
	size_t limit;      /* 0: unlimited */
	size_t chunks;     /* bytes of chunks held */
	vd_budget *budget; /* charged for every chunk; NULL: none */
} vd_arena;

void vd_arena_init(vd_arena *a, size_t limit);
void *vd_arena_alloc(vd_arena *a, size_t n);   /* 8-aligned, zeroed; NULL on failure */
void vd_arena_free(vd_arena *a);

/* Overflow-checked arithmetic. Return 0 on success, -1 on overflow. */
static inline int vd_add_u64(uint64_t a, uint64_t b, uint64_t *r)
{
	return __builtin_add_overflow(a, b, r) ? -1 : 0;
}
static inline int vd_mul_u64(uint64_t a, uint64_t b, uint64_t *r)
{
	return __builtin_mul_overflow(a, b, r) ? -1 : 0;
}

#endif

/* Small shared pieces: error reporting, byte buffers, an arena. */
#ifndef VD_UTIL_H
#define VD_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "lensemble/verify.h"

#define VD_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

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

/* A bump allocator freed all at once: parsed documents live in one. */
typedef struct vd_arena_chunk vd_arena_chunk;
typedef struct vd_arena {
	vd_arena_chunk *head;
	size_t used_total;
	size_t limit;      /* 0: unlimited */
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

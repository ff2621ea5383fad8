#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vd_utf8.h"
#include "vd_util.h"

vd_code vd_fail(vd_err *err, vd_code code, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || err->code != VD_OK)
		return err ? err->code : code;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	vd_utf8_sanitize(err->msg);
	return code;
}

size_t vd_i64_digits(char *out, int64_t v)
{
	char rev[VD_I64_DIGITS_MAX];
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	size_t d = 0, n = 0;

	do {
		rev[d++] = (char)('0' + u % 10);
		u /= 10;
	} while (u > 0);
	if (v < 0)
		out[n++] = '-';
	while (d > 0)
		out[n++] = rev[--d];
	return n;
}

int vd_str_eq(vd_str a, const char *lit)
{
	size_t n = strlen(lit);

	return a.len == n && memcmp(a.p, lit, n) == 0;
}

int vd_str_cmp(vd_str a, vd_str b)
{
	size_t n = a.len < b.len ? a.len : b.len;
	int c = n ? memcmp(a.p, b.p, n) : 0;

	if (c != 0)
		return c;
	return (a.len > b.len) - (a.len < b.len);
}

int vd_is_hex64(vd_str s)
{
	size_t i;

	if (s.len != VD_HASH_HEX_LEN)
		return 0;
	for (i = 0; i < s.len; i++) {
		char c = s.p[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return 0;
	}
	return 1;
}

void vd_hex(const uint8_t *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

void vd_buf_init(vd_buf *b)
{
	memset(b, 0, sizeof(*b));
}

void vd_buf_free(vd_buf *b)
{
	free(b->p);
	vd_buf_init(b);
}

/* Room for n more bytes and the NUL: doubling, or (exact) just that. */
static int buf_room(vd_buf *b, size_t n, int exact)
{
	size_t want, cap;
	uint8_t *p;

	if (b->oom)
		return -1;
	if (__builtin_add_overflow(b->len, n, &want) || want == SIZE_MAX)
		goto oom;
	if (want + 1 <= b->cap)
		return 0;
	cap = exact ? want + 1 : b->cap ? b->cap : 256;
	while (cap < want + 1) {
		if (cap > SIZE_MAX / 2)
			goto oom;
		cap *= 2;
	}
	p = realloc(b->p, cap);
	if (p == NULL)
		goto oom;
	b->p = p;
	b->cap = cap;
	return 0;
oom:
	b->oom = 1;
	return -1;
}

static int buf_reserve(vd_buf *b, size_t n)
{
	return buf_room(b, n, 0);
}

int vd_buf_reserve(vd_buf *b, size_t n)
{
	return buf_room(b, n, 1);
}

int vd_buf_put(vd_buf *b, const void *p, size_t n)
{
	if (buf_reserve(b, n) < 0)
		return -1;
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';    /* always NUL-terminated for convenience */
	return 0;
}

int vd_buf_putc(vd_buf *b, uint8_t c)
{
	return vd_buf_put(b, &c, 1);
}

int vd_buf_puts(vd_buf *b, const char *s)
{
	return vd_buf_put(b, s, strlen(s));
}

int vd_buf_printf(vd_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || buf_reserve(b, (size_t)n) < 0)
		return -1;
	va_start(ap, fmt);
	vsnprintf((char *)b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

int vd_buf_put_u32le(vd_buf *b, uint32_t v)
{
	uint8_t x[4] = { v, v >> 8, v >> 16, v >> 24 };

	return vd_buf_put(b, x, 4);
}

int vd_buf_put_u64le(vd_buf *b, uint64_t v)
{
	uint8_t x[8];
	int i;

	for (i = 0; i < 8; i++)
		x[i] = (uint8_t)(v >> (8 * i));
	return vd_buf_put(b, x, 8);
}

void vd_budget_init(vd_budget *b, size_t limit)
{
	memset(b, 0, sizeof(*b));
	b->limit = limit;
}

int vd_budget_charge(vd_budget *b, size_t n)
{
	if (b == NULL)
		return 0;
	if (b->limit && (n > b->limit || b->used > b->limit - n)) {
		b->exhausted = 1;
		return -1;
	}
	b->used += n;
	if (b->used > b->peak)
		b->peak = b->used;
	return 0;
}

void vd_budget_release(vd_budget *b, size_t n)
{
	if (b != NULL)
		b->used = n < b->used ? b->used - n : 0;
}

void *vd_mem_alloc(size_t n)
{
	void *p;

	if (n < VD_MEM_MAP_MIN)
		return calloc(1, n ? n : 1);
	p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void vd_mem_free(void *p, size_t n)
{
	if (p == NULL)
		return;
	if (n < VD_MEM_MAP_MIN)
		free(p);
	else
		munmap(p, n);
}

void *vd_budget_alloc(vd_budget *b, size_t n)
{
	void *p;

	if (vd_budget_charge(b, n) < 0)
		return NULL;
	if ((p = vd_mem_alloc(n)) == NULL)
		vd_budget_release(b, n);
	return p;
}

void vd_budget_free(vd_budget *b, void *p, size_t n)
{
	if (p == NULL)
		return;
	vd_mem_free(p, n);
	vd_budget_release(b, n);
}

/* Chunk sizes (VD_ARENA_FIRST_CHUNK, VD_ARENA_MAX_CHUNK, header
 * included): the first from malloc (most documents are small), then as
 * much again as the arena holds, up to the largest, each mapped on its
 * own. */
#define ARENA_ALIGN 8

struct vd_arena_chunk {
	vd_arena_chunk *next;
	size_t total;               /* as allocated, header included */
	size_t size, used;
	_Alignas(16) unsigned char data[];
};

void vd_arena_init(vd_arena *a, size_t limit)
{
	memset(a, 0, sizeof(*a));
	a->limit = limit;
}

/* How big the next chunk is to be, for an allocation of n: never more
 * than the budget has left when n fits in that, so that a document is
 * refused for what it uses, not for the slack of its last chunk. */
static size_t chunk_total(const vd_arena *a, size_t n)
{
	size_t want = sizeof(vd_arena_chunk) + n, total = VD_ARENA_FIRST_CHUNK, left;

	if (a->chunks >= VD_ARENA_FIRST_CHUNK)
		total = a->chunks < VD_ARENA_MAX_CHUNK ? a->chunks : VD_ARENA_MAX_CHUNK;
	if (total < want)
		total = want;
	if (a->budget != NULL && a->budget->limit) {
		left = a->budget->limit > a->budget->used ? a->budget->limit - a->budget->used : 0;
		if (total > left && want <= left)
			total = left;
	}
	return total;
}

static vd_arena_chunk *new_chunk(vd_arena *a, size_t n)
{
	size_t total = chunk_total(a, n);
	vd_arena_chunk *c;

	if (vd_budget_charge(a->budget, total) < 0)
		return NULL;
	if ((c = vd_mem_alloc(total)) == NULL) {
		vd_budget_release(a->budget, total);
		return NULL;
	}
	c->total = total;
	c->size = total - sizeof(*c);
	c->used = 0;
	c->next = a->head;
	a->head = c;
	a->chunks += total;
	return c;
}

void *vd_arena_alloc(vd_arena *a, size_t n)
{
	vd_arena_chunk *c = a->head;
	void *p;

	if (n > SIZE_MAX - sizeof(*c) - ARENA_ALIGN)
		return NULL;
	n = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	if (n == 0)
		n = ARENA_ALIGN;
	if (a->limit && (n > a->limit || a->used_total > a->limit - n))
		return NULL;
	if ((c == NULL || c->size - c->used < n) && (c = new_chunk(a, n)) == NULL)
		return NULL;
	p = c->data + c->used;
	c->used += n;
	a->used_total += n;
	memset(p, 0, n);
	return p;
}

void vd_arena_free(vd_arena *a)
{
	vd_arena_chunk *c = a->head, *next;

	while (c != NULL) {
		next = c->next;
		vd_budget_release(a->budget, c->total);
		vd_mem_free(c, c->total);
		c = next;
	}
	a->head = NULL;
	a->used_total = 0;
	a->chunks = 0;
}

int vd_read_file(const char *path, size_t cap, vd_buf *b)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), rc;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		rc = -errno;
	else if (!S_ISREG(st.st_mode))
		rc = -EINVAL;
	else if ((uint64_t)st.st_size > cap)
		rc = -EFBIG;
	else
		rc = vd_read_all(fd, cap, b);
	close(fd);
	return rc;
}

int vd_read_all(int fd, size_t cap, vd_buf *b)
{
	uint8_t tmp[65536];
	ssize_t n;

	for (;;) {
		n = read(fd, tmp, sizeof(tmp));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		if (b->len + (size_t)n > cap)
			return -EFBIG;
		if (vd_buf_put(b, tmp, (size_t)n) < 0)
			return -ENOMEM;
	}
}

void *vd_grow(void *arr, size_t *cap, size_t n, size_t size)
{
	void *p;
	size_t c;

	if (n < *cap)
		return arr;
	c = *cap ? *cap * 2 : 16;
	if ((p = realloc(arr, c * size)) == NULL)
		return NULL;
	*cap = c;
	return p;
}

double vd_wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void vd_rfc3339(double t, char *out, size_t n)
{
	time_t secs = (time_t)t;
	struct tm tm;

	gmtime_r(&secs, &tm);
	snprintf(out, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
	    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
	    (int)((t - (double)secs) * 1000));
}

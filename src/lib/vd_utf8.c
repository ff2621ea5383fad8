#include "config.h"

#include <string.h>

#include "vd_utf8.h"

/* Length of the UTF-8 sequence at p (1-4), or 0 if invalid. */
size_t vd_utf8_seq(const uint8_t *p, const uint8_t *end)
{
	size_t n = (size_t)(end - p);
	uint8_t c = p[0];

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return n >= 2 && (p[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		if (n < 3 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80)
			return 0;
		if (c == 0xe0 && p[1] < 0xa0)
			return 0;           /* overlong */
		if (c == 0xed && p[1] >= 0xa0)
			return 0;           /* surrogate */
		return 3;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		if (n < 4 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 ||
		    (p[3] & 0xc0) != 0x80)
			return 0;
		if (c == 0xf0 && p[1] < 0x90)
			return 0;           /* overlong */
		if (c == 0xf4 && p[1] >= 0x90)
			return 0;           /* > U+10FFFF */
		return 4;
	}
	return 0;
}

int vd_utf8_valid(const uint8_t *p, size_t len)
{
	const uint8_t *end = p + len;
	size_t n;

	while (p < end) {
		if ((n = vd_utf8_seq(p, end)) == 0)
			return 0;
		p += n;
	}
	return 1;
}

void vd_utf8_sanitize(char *s)
{
	uint8_t *p = (uint8_t *)s, *end = p + strlen(s);
	size_t n;

	while (p < end) {
		if ((n = vd_utf8_seq(p, end)) == 0) {
			*p++ = '?';
			continue;
		}
		p += n;
	}
}

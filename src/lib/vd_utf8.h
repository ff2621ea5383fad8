/*
 * UTF-8 validation and repair: a leaf with no project dependencies, used by
 * the JSON parser and by anything that puts text into JSON.
 */
#ifndef VD_UTF8_H
#define VD_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length of the UTF-8 sequence at p (1-4), or 0 if invalid; p < end. */
size_t vd_utf8_seq(const uint8_t *p, const uint8_t *end);
/* Validate UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
int vd_utf8_valid(const uint8_t *p, size_t len);
/* Replace every byte that is not part of valid UTF-8 with '?', in place:
 * a message that cut a name mid-character still goes into JSON whole. */
void vd_utf8_sanitize(char *s);

#endif

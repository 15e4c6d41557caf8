/*
 * Well-formed UTF-8 (RFC 3629), the one check: what the JSON escaper (tt_json.h) copies as it
 * is and the status page's HTML escaper passes through; anything else both write as U+FFFD.
 */
#ifndef TT_UTF8_H
#define TT_UTF8_H

#include <stddef.h>

/* The length of the well-formed UTF-8 sequence at s[0, n) (no overlong form, no surrogate,
 * nothing above U+10FFFF), or 0 when none starts there (n >= 1). ASCII is a sequence of 1. */
static inline size_t tt_utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t len = c >= 0xf0 && c <= 0xf4   ? 4
                 : c >= 0xe0 && c <= 0xef ? 3
                 : c >= 0xc2 && c <= 0xdf ? 2
                                          : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) ||
        (c == 0xf4 && s[1] > 0x8f))
        return 0;
    return len;
}

#endif

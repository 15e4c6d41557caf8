/*
 * Integers to decimal text without printf, for the answer paths (rate headers, HTTP answers,
 * Redis commands) where snprintf's format parsing is a measurable share of the work.
 */
#ifndef TT_FMT_H
#define TT_FMT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TT_FMT_I64_MAX 20 /* "-9223372036854775808" */

/* Writes v's decimal digits (and a leading '-') to out, no NUL; returns how many. */
static inline size_t tt_fmt_i64(char out[TT_FMT_I64_MAX], int64_t v)
{
    static const char pairs[201] = "00010203040506070809101112131415161718192021222324"
                                   "25262728293031323334353637383940414243444546474849"
                                   "50515253545556575859606162636465666768697071727374"
                                   "75767778798081828384858687888990919293949596979899";
    char tmp[TT_FMT_I64_MAX];
    size_t n = sizeof(tmp);
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    while (u >= 100) { /* two digits per division, written from the end */
        unsigned d = (unsigned)(u % 100) * 2;
        u /= 100;
        tmp[--n] = pairs[d + 1];
        tmp[--n] = pairs[d];
    }
    if (u >= 10) {
        tmp[--n] = pairs[u * 2 + 1];
        tmp[--n] = pairs[u * 2];
    } else {
        tmp[--n] = (char)('0' + u);
    }
    if (v < 0)
        tmp[--n] = '-';
    memcpy(out, tmp + n, sizeof(tmp) - n);
    return sizeof(tmp) - n;
}

/*
 * A Prometheus label value from bytes anyone may have written (a Redis node's host name, a
 * descriptor's value): '\\', '"' and a newline escaped as the text format says, any other byte
 * outside printable ASCII written '?', so a scrape never meets invalid UTF-8; cut to fit `size`
 * (NUL included). Returns out.
 */
static inline char *tt_fmt_label(char *out, size_t size, const char *in, size_t len)
{
    size_t k = 0;
    for (size_t i = 0; i < len && k + 3 < size; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c == '\\' || c == '"' || c == '\n') {
            out[k++] = '\\';
            out[k++] = c == '\n' ? 'n' : (char)c;
        } else {
            out[k++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
        }
    }
    if (size)
        out[k] = '\0';
    return out;
}

#endif

/*
 * tt_buf: the one growable byte buffer, for whatever is being written out: the socket's msgpack
 * answers, HTTP answers, the metrics page, JSON. The owner frees `data` (tt_buf_free); a zeroed
 * tt_buf_t is an empty buffer. An allocation failure latches `failed` and the buffer never grows
 * again, so what it holds is known to be incomplete: a writer may append a whole answer and
 * check `failed` once at the end.
 */
#ifndef TT_BUF_H
#define TT_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tt_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
    bool failed;
} tt_buf_t;

static inline void tt_buf_free(tt_buf_t *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* The slow path of tt_buf_room: doubles the capacity (from 256) until n more bytes fit. */
static __attribute__((noinline, unused)) bool tt_buf__grow(tt_buf_t *b, size_t n)
{
    if (b->failed || n > SIZE_MAX / 2 - b->len) {
        b->failed = true;
        return false;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n)
        cap *= 2;
    uint8_t *p = realloc(b->data, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->data = p;
    b->cap = cap;
    return true;
}

/* Makes room for n more bytes after len; false (and `failed` latched) when memory runs out. */
static inline bool tt_buf_room(tt_buf_t *b, size_t n)
{
    return __builtin_expect(b->cap - b->len >= n, 1) || tt_buf__grow(b, n);
}

/* Appends n bytes; 0, or -1 when memory ran out (now or before: `failed`). */
static inline int tt_buf_append(tt_buf_t *b, const void *bytes, size_t n)
{
    if (!tt_buf_room(b, n))
        return -1;
    if (n)
        memcpy(b->data + b->len, bytes, n);
    b->len += n;
    return 0;
}

/* Appends what vprintf would write, whatever its length (formatted in place; again at its size
 * when it did not fit the room there was); 0, or -1 when memory ran out. */
static inline __attribute__((format(printf, 2, 0))) int tt_buf_vprintf(tt_buf_t *b, const char *fmt,
                                                                       va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n =
        tt_buf_room(b, 256) ? vsnprintf((char *)b->data + b->len, b->cap - b->len, fmt, ap) : -1;
    if (n >= 0 && (size_t)n >= b->cap - b->len)
        n = tt_buf_room(b, (size_t)n + 1)
                ? vsnprintf((char *)b->data + b->len, b->cap - b->len, fmt, again)
                : -1;
    va_end(again);
    if (n < 0)
        return -1;
    b->len += (size_t)n;
    return 0;
}

static inline __attribute__((format(printf, 2, 3))) int tt_buf_printf(tt_buf_t *b, const char *fmt,
                                                                      ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = tt_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

#endif

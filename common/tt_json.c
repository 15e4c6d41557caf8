/* The JSON string escaper. See tt_json.h. */
#include "tt_json.h"
#include "tt_utf8.h"

#include <stdint.h>
#include <string.h>

size_t tt_json_escape(char *out, size_t cap, const char *in, size_t n, size_t *used)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)in;
    size_t i = 0, k = 0;
    while (i < n) {
        size_t run = i; /* plain ASCII, copied whole */
        while (run < n && s[run] >= 0x20 && s[run] < 0x7f && s[run] != '"' && s[run] != '\\')
            run++;
        if (run > i) {
            size_t take = run - i < cap - k ? run - i : cap - k;
            memcpy(out + k, s + i, take);
            k += take;
            i += take;
            if (i < run)
                break; /* full */
            continue;
        }
        unsigned char c = s[i];
        char e[TT_JSON_ESCAPE_MAX];
        size_t len = 2, consumed = 1;
        const char *from = e;
        e[0] = '\\';
        switch (c) {
        case '"':
            e[1] = '"';
            break;
        case '\\':
            e[1] = '\\';
            break;
        case '\b':
            e[1] = 'b';
            break;
        case '\f':
            e[1] = 'f';
            break;
        case '\n':
            e[1] = 'n';
            break;
        case '\r':
            e[1] = 'r';
            break;
        case '\t':
            e[1] = 't';
            break;
        default:
            if (c < 0x20 || c == 0x7f) {
                memcpy(e, "\\u00", 4);
                e[4] = hex[c >> 4];
                e[5] = hex[c & 15];
                len = 6;
            } else if ((consumed = tt_utf8_len(s + i, n - i)) != 0) {
                from = (const char *)s + i;
                len = consumed;
            } else {
                from = "\\ufffd";
                len = 6;
                consumed = 1;
            }
        }
        if (cap - k < len)
            break;
        memcpy(out + k, from, len);
        k += len;
        i += consumed;
    }
    *used = i;
    return k;
}

int tt_json_str(tt_buf_t *b, const char *in, size_t n)
{
    if (tt_buf_append(b, "\"", 1) < 0)
        return -1;
    for (size_t i = 0; i < n;) {
        /* room for the rest as plain bytes, and for one escape at least: each round advances */
        if (n - i > SIZE_MAX / 2 || !tt_buf_room(b, n - i + TT_JSON_ESCAPE_MAX))
            return -1;
        size_t used;
        b->len += tt_json_escape((char *)b->data + b->len, b->cap - b->len, in + i, n - i, &used);
        i += used;
    }
    return tt_buf_append(b, "\"", 1);
}

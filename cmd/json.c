/* A msgpack value as JSON. See json.h. */
#include "json.h"

#include <stdio.h>
#include <stdlib.h>

int json_str(proto_out_t *out, const char *p, size_t n)
{
    proto_out_append(out, "\"", 1);
    size_t run = 0; /* bytes copied as they are, flushed before each escape */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            run++;
            continue;
        }
        proto_out_append(out, p + i - run, run);
        run = 0;
        char esc[8];
        int k = (c == '"' || c == '\\') ? snprintf(esc, sizeof(esc), "\\%c", c)
                                        : snprintf(esc, sizeof(esc), "\\u%04x", c);
        proto_out_append(out, esc, (size_t)k);
    }
    proto_out_append(out, p + n - run, run);
    return proto_out_append(out, "\"", 1);
}

static int json_value(wire_reader_t *r, proto_out_t *out, int depth)
{
    if (depth > PROTO_MAX_DEPTH)
        return PROTO_EDEEP;
    if (r->pos >= r->end)
        return PROTO_EFRAME;
    uint32_t n;
    wire_str_t s;
    int64_t i64;
    uint64_t u64;
    double d;
    bool bv;
    char num[32];
    if (wire_read_map(r, &n) == 0) {
        proto_out_append(out, "{", 1);
        for (uint32_t i = 0; i < n; i++) {
            if (i)
                proto_out_append(out, ",", 1);
            int rc = json_value(r, out, depth + 1);
            if (rc)
                return rc;
            proto_out_append(out, ":", 1);
            if ((rc = json_value(r, out, depth + 1)))
                return rc;
        }
        return proto_out_append(out, "}", 1);
    }
    if (wire_read_array(r, &n) == 0) {
        proto_out_append(out, "[", 1);
        for (uint32_t i = 0; i < n; i++) {
            if (i)
                proto_out_append(out, ",", 1);
            int rc = json_value(r, out, depth + 1);
            if (rc)
                return rc;
        }
        return proto_out_append(out, "]", 1);
    }
    if (wire_read_str(r, &s) == 0 || wire_read_bin(r, &s) == 0)
        return json_str(out, s.ptr, s.len);
    if (wire_read_int(r, &i64) == 0)
        return proto_out_append(out, num,
                                (size_t)snprintf(num, sizeof(num), "%lld", (long long)i64));
    if (wire_read_uint(r, &u64) == 0)
        return proto_out_append(
            out, num, (size_t)snprintf(num, sizeof(num), "%llu", (unsigned long long)u64));
    if (wire_read_bool(r, &bv) == 0)
        return bv ? proto_out_append(out, "true", 4) : proto_out_append(out, "false", 5);
    if (wire_read_float(r, &d) == 0)
        return proto_out_append(out, num, (size_t)snprintf(num, sizeof(num), "%.17g", d));
    /* nil, ext: null */
    if (wire_skip(r))
        return PROTO_EFRAME;
    return proto_out_append(out, "null", 4);
}

int json_from_msgpack(wire_reader_t *r, proto_out_t *out)
{
    int rc = json_value(r, out, 0);
    if (rc)
        return rc;
    return out->failed ? -1 : 0;
}

/* A msgpack value as JSON. See json.h. */
#include "json.h"

#include <stdio.h>
#include <stdlib.h>

static int json_value(wire_reader_t *r, tt_buf_t *out, int depth)
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
        tt_buf_append(out, "{", 1);
        for (uint32_t i = 0; i < n; i++) {
            if (i)
                tt_buf_append(out, ",", 1);
            int rc = json_value(r, out, depth + 1);
            if (rc)
                return rc;
            tt_buf_append(out, ":", 1);
            if ((rc = json_value(r, out, depth + 1)))
                return rc;
        }
        return tt_buf_append(out, "}", 1);
    }
    if (wire_read_array(r, &n) == 0) {
        tt_buf_append(out, "[", 1);
        for (uint32_t i = 0; i < n; i++) {
            if (i)
                tt_buf_append(out, ",", 1);
            int rc = json_value(r, out, depth + 1);
            if (rc)
                return rc;
        }
        return tt_buf_append(out, "]", 1);
    }
    if (wire_read_str(r, &s) == 0 || wire_read_bin(r, &s) == 0)
        return tt_json_str(out, s.ptr, s.len);
    if (wire_read_int(r, &i64) == 0)
        return tt_buf_append(out, num, (size_t)snprintf(num, sizeof(num), "%lld", (long long)i64));
    if (wire_read_uint(r, &u64) == 0)
        return tt_buf_append(out, num,
                             (size_t)snprintf(num, sizeof(num), "%llu", (unsigned long long)u64));
    if (wire_read_bool(r, &bv) == 0)
        return bv ? tt_buf_append(out, "true", 4) : tt_buf_append(out, "false", 5);
    if (wire_read_float(r, &d) == 0)
        return tt_buf_append(out, num, (size_t)snprintf(num, sizeof(num), "%.17g", d));
    /* nil, ext: null */
    if (wire_skip(r))
        return PROTO_EFRAME;
    return tt_buf_append(out, "null", 4);
}

int json_from_msgpack(wire_reader_t *r, tt_buf_t *out)
{
    int rc = json_value(r, out, 0);
    if (rc)
        return rc;
    return out->failed ? -1 : 0;
}

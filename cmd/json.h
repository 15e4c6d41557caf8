/* json: a msgpack answer rendered as JSON, for the CLI's output (and loadgen's error notes). */
#ifndef TT_CMD_JSON_H
#define TT_CMD_JSON_H

#include "proto.h"
#include "wire.h"

/* Appends the value at r->pos as JSON: maps with any keys, arrays, strings escaped, integers,
 * floats, booleans, nil and ext as null, bin as a string. Depth beyond PROTO_MAX_DEPTH fails
 * (PROTO_EDEEP); so do truncated values (PROTO_EFRAME), and memory running out (-1). */
int json_from_msgpack(wire_reader_t *r, proto_out_t *out);

/* Appends p[0, n) as a JSON string, escaped. Returns 0 or -1 (memory ran out). */
int json_str(proto_out_t *out, const char *p, size_t n);

#endif

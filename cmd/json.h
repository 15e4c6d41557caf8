/* json: a msgpack answer rendered as JSON, for the CLI's output (and loadgen's error notes). */
#ifndef TT_CMD_JSON_H
#define TT_CMD_JSON_H

#include "proto.h"
#include "tt_json.h" /* strings: tt_json_str, the one escaper */
#include "wire.h"

/* Appends the value at r->pos as JSON: maps with any keys, arrays, strings escaped, integers,
 * floats, booleans, nil and ext as null, bin as a string. Depth beyond PROTO_MAX_DEPTH fails
 * (PROTO_EDEEP); so do truncated values (PROTO_EFRAME), and memory running out (-1). */
int json_from_msgpack(wire_reader_t *r, tt_buf_t *out);

#endif

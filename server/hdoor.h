/*
 * hdoor: the HTTP front door's pure core (SPEC §12): what a parsed request asks for, and the
 * bytes of the answer. No socket, no clock; the libuv shell (http.c) moves the bytes.
 */
#ifndef TT_SERVER_HDOOR_H
#define TT_SERVER_HDOOR_H

#include <stdbool.h>
#include <stddef.h>

#include "hreq.h"
#include "proto.h"

/* An answer's framing: close the connection after it (keep_alive false) or not; a HEAD
 * request gets the head alone. */
typedef struct hdoor_frame {
    bool keep_alive;
    bool head_only;
} hdoor_frame_t;

/*
 * Appends one whole response: the status line, Content-Type and Content-Length, Connection,
 * then `extra` (whole header lines, each ending in CRLF, or NULL), then the body unless
 * head_only. Returns 0 or -1 (out->failed).
 */
int hdoor_respond(proto_out_t *out, int status, const char *reason, const char *type,
                  const char *extra, const void *body, size_t len, hdoor_frame_t f);

/* The same with a text/plain body. */
int hdoor_respond_text(proto_out_t *out, int status, const char *reason, const char *text,
                       hdoor_frame_t f);

#endif

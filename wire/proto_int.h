/*
 * What the codec's files share (not installed): the request fields, what each op takes, and the
 * op names. proto_frame.c frames, proto_dec.c decodes requests, proto_enc.c encodes answers
 * (and, for the client, requests).
 */
#ifndef TT_WIRE_PROTO_INT_H
#define TT_WIRE_PROTO_INT_H

#include "proto.h"

enum field {
    F_OP = 0,
    F_SEQ,
    F_SUBJECT,
    F_TOKENS,
    F_RESERVATION,
    F_ACTUAL,
    F_LEASE,
    F_RESERVED, /* retired (issue 23): named only to say what replaced it */
    F_V,
    F_HEADERS,
    F_COUNT_,
};

extern const char *const proto__field_names[F_COUNT_];
extern const char *const proto__op_names[PROTO_OP_COUNT_];

#define BIT(f) (1u << (f))
/* What each op takes (op, seq and v go everywhere) and what it cannot do without. */
typedef struct proto_op_fields {
    unsigned allowed, required;
} proto_op_fields_t;

extern const proto_op_fields_t proto__op_fields[PROTO_OP_COUNT_];

#endif

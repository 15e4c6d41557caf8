/*
 * The RateLimitResponse's encoder: the bytes protobuf-c's pack writes for the same message
 * (fields in number order, proto3's zero values left out, submessages present when set), at a
 * fraction of its cost (no descriptors walked, no size pass per field through reflection).
 * tests/rls/test_rls.c checks it byte for byte against protobuf-c on seeded random responses.
 */
#ifndef TT_RLS_PBWRITE_H
#define TT_RLS_PBWRITE_H

#include <stddef.h>
#include <stdint.h>

#include "rls.pb-c.h"

/* The packed size of r. */
size_t rls_response_size(const Envoy__Service__Ratelimit__V3__RateLimitResponse *r);

/* Writes r into out (rls_response_size(r) bytes) and returns its length. */
size_t rls_response_write(const Envoy__Service__Ratelimit__V3__RateLimitResponse *r, uint8_t *out);

#endif

/*
 * wire_pack: the one bounded writer for msgpack-c's packer, for the payloads that go out in a
 * space fixed beforehand (gossip datagrams, demand payloads, the members file). msgpack-c's
 * packer is fine there: those payloads are small and rare next to the socket's answers, which
 * keep their own writer (proto.h says why). The packer writes through wire_pack_write into
 * p[0, cap); a write that does not fit sets `overflow` instead, and once set every later write
 * fails too, so an encoder packs everything and checks once at the end.
 */
#ifndef TT_WIRE_PACK_H
#define TT_WIRE_PACK_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct wire_pack {
    uint8_t *p;
    size_t len;
    size_t cap;
    bool overflow;
} wire_pack_t;

/* msgpack-c's write callback (msgpack_packer_write) over a wire_pack_t: 0, or -1 on overflow.
 * An empty write is nothing, whatever its pointer: msgpack-c hands an empty str or bin body
 * over with the pointer it was given, which may be NULL. */
int wire_pack_write(void *data, const char *buf, size_t len);

/* A packer writing into w. */
static inline void wire_packer_init(msgpack_packer *pk, wire_pack_t *w)
{
    msgpack_packer_init(pk, w, wire_pack_write);
}

#endif

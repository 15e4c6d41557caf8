/*
 * Framing: where a message of the decision socket ends, without interpreting it. See proto.h.
 *
 * Framing walks the message's values with a small stack of "values still to read" per open
 * container. Every container header adds its children to the pending total, and that total
 * must fit in the bytes the 64 KiB bound still allows (each value takes at least one byte), so
 * a forged header is refused the moment it is read. Past PROTO_MAX_DEPTH the stack stops
 * growing and the deeper children are counted in the deepest frame instead: the message's end
 * is still found exactly, and the request is answered "too_deep" instead of closing the stream.
 *
 * The walk is one loop over locals, the innermost container's count in a register and the
 * stack touched only when a container opens or closes; a value whose first byte tells its size
 * (every form requests are made of) is sized by one table lookup, anything else by wire_head. A
 * call per value to wire_head and the stack in memory were most of the framer's cost (about 85
 * instructions a value, docs/performance.md); the rules are the same.
 */
#include "proto.h"

void proto_framer_init(proto_framer_t *f)
{
    /* left[] is written before it is read (each container's entry when it opens) */
    f->pos = 0;
    f->pending = 1;
    f->depth = 0;
    f->deep = false;
    f->steps = 0;
}

/*
 * What wire_head says of every value whose size its first byte tells: the size (header and
 * payload, 1..32) in the low byte, the values that follow (a fixmap's or fixarray's) in the high
 * one. 0: wire_head reads the header (a length follows the type byte, or 0xc1).
 */
#define FORM(b)                                                                                    \
    ((b) <= 0x7f || (b) >= 0xe0 || (b) == 0xc0 || (b) == 0xc2 || (b) == 0xc3 ? 1                   \
     : (b) <= 0x8f                ? 1 | (2 * ((b)&0x0f)) << 8                                      \
     : (b) <= 0x9f                ? 1 | ((b)&0x0f) << 8                                            \
     : (b) <= 0xbf                ? 1 + ((b)&0x1f)                                                 \
     : (b) == 0xca                ? 5                                                              \
     : (b) == 0xcb                ? 9                                                              \
     : (b) >= 0xcc && (b) <= 0xd3 ? 1 + (1 << (((b)-0xcc) & 3))                                    \
     : (b) >= 0xd4 && (b) <= 0xd8 ? 2 + (1 << (((b)-0xd4) & 7))                                    \
                                  : 0)
#define FORM4(b) FORM(b), FORM((b) + 1), FORM((b) + 2), FORM((b) + 3)
#define FORM16(b) FORM4(b), FORM4((b) + 4), FORM4((b) + 8), FORM4((b) + 12)
#define FORM64(b) FORM16(b), FORM16((b) + 16), FORM16((b) + 32), FORM16((b) + 48)
static const uint16_t forms[256] = {FORM64(0x00), FORM64(0x40), FORM64(0x80), FORM64(0xc0)};

int proto_frame_resume(proto_framer_t *f, const uint8_t *data, size_t len, size_t *msg_len,
                       bool *deep)
{
    if (len == 0)
        return PROTO_EMORE;
    if (f->pos == 0 && !wire_is_map_byte(data[0]))
        return PROTO_EFRAME;
    /* Locals, written back once: `top` is the innermost open container's left[] entry. */
    size_t pos = f->pos, lim = len < PROTO_MAX_MESSAGE ? len : PROTO_MAX_MESSAGE;
    uint64_t pending = f->pending, steps = f->steps;
    int depth = f->depth, rc;
    /* at depth 0 (before the root, or after it closed) top is never 0: no pop */
    uint64_t top = depth > 0 ? f->left[depth - 1] : UINT64_MAX;
    for (;;) {
        if (pos >= len) {
            rc = len >= PROTO_MAX_MESSAGE ? PROTO_ETOOBIG : PROTO_EMORE;
            break;
        }
        /* the value's header and payload, and the values that follow it */
        uint16_t form = forms[data[pos]];
        uint64_t size = form & 0xff, children = form >> 8;
        if (form == 0) {
            size_t hdr;
            uint64_t payload;
            rc = wire_head(data + pos, data + len, &hdr, &payload, &children);
            if (rc == PROTO_EMORE)
                rc = len >= PROTO_MAX_MESSAGE ? PROTO_ETOOBIG : PROTO_EMORE;
            if (rc)
                break;
            size = hdr + payload; /* no overflow: payload < 2^33 */
        }
        if (pos + size > lim) { /* beyond the bound, or cut: read this header again later */
            rc = pos + size > PROTO_MAX_MESSAGE ? PROTO_ETOOBIG : PROTO_EMORE;
            break;
        }
        steps++;
        pos += size;
        pending--;
        top--;
        if (children > 0) {
            /* every pending value needs at least one more byte within the bound */
            if (children > PROTO_MAX_MESSAGE || pending + children > PROTO_MAX_MESSAGE - pos) {
                rc = PROTO_ETOOBIG;
                break;
            }
            pending += children;
            if (depth < PROTO_MAX_DEPTH) {
                if (depth > 0)
                    f->left[depth - 1] = top;
                depth++;
                top = children;
            } else {
                f->deep = true;
                top += children;
            }
        }
        while (top == 0)
            top = --depth > 0 ? f->left[depth - 1] : UINT64_MAX;
        if (pending == 0) {
            *msg_len = pos;
            rc = 0;
            break;
        }
    }
    if (depth > 0)
        f->left[depth - 1] = top;
    f->pos = pos;
    f->pending = pending;
    f->steps = steps;
    f->depth = depth;
    *deep = f->deep;
    return rc;
}

int proto_frame(const uint8_t *data, size_t len, size_t *msg_len, bool *deep)
{
    proto_framer_t f;
    proto_framer_init(&f);
    *deep = false;
    return proto_frame_resume(&f, data, len, msg_len, deep);
}

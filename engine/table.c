/*
 * The counter table.
 *
 * Layout. One array of 24-byte slots, open addressing with linear probing, at most 3/4 full
 * (it doubles past that, so it runs between 3/8 and 3/4 full). A slot carries the 64-bit
 * SipHash-1-3 of the id, keyed by the process seed mixed with the limit's identity, so a
 * client cannot aim collisions at us without the seed. The id bytes themselves live in an
 * arena of size-classed chunks (8 .. 256 bytes) addressed by a 32-bit reference: a lookup
 * compares the hash, then the identity's 16-bit index and the length, then the bytes. That last
 * step is what keeps the table exact: two ids whose hashes collide are two slots. An empty id
 * (the "global" level's one counter) takes no chunk.
 *
 * Bytes per counter at 1M keys (ids of 8 bytes): 2^21 slots x 24 B / 1M = 50 B, plus an 8 B
 * chunk: about 58 B, measured by bench_engine.
 *
 * Reclamation. A counter equivalent to a fresh key (ra_state_is_idle: a gcra TAT in the past,
 * a window state with both counts zero, a gauge at 0) carries no information and is freed.
 * Nothing sweeps the whole table: a cursor walks it a few slots per operation and a bounded
 * slice per tick, freeing idle slots as it meets them, so the work is spread evenly and a
 * table full of idle keys empties in (capacity / slots per second) seconds. Deletion shifts the
 * following cluster back, and the cursor re-examines the slot it just freed, so nothing is
 * skipped. Slots of an identity dropped by a reload are freed the same way; lookups stop
 * matching them the moment the identity is dropped.
 *
 * The cap. count never exceeds `max`. The engine, seeing a request that may need new counters
 * with the table at its cap, first reclaims a larger bounded slice; an insert that still finds
 * the table full fails, and the engine applies the limit's posture.fail (open: the limit is
 * skipped for this request; closed: denied, retry 1 s) and counts a store error and a cap hit.
 * Existing counters are never evicted while they still hold information: evicting one would
 * hand its key a fresh allowance, which is exactly what an attacker filling the table wants.
 *
 * Growth is incremental too. Past 3/4 full, a slot array twice the size is allocated and the
 * old one is kept beside it; every operation then moves the next 64 old slots across (and every
 * reclamation slice as many as it examines), and a lookup that finds its key still in the old
 * array moves that key across on the spot. A moved old slot keeps its hash (so the old probe
 * chains stay whole) and is marked by an impossible length. Lookups try the new array, then the
 * old. The move is done long before the new array could fill: it starts at 3/8 of the new
 * capacity and takes at most (old capacity / 64) operations, against the 3/8 of the new
 * capacity that inserts would need. So no operation ever rehashes the whole table, and the
 * old array goes back to the kernel in 64 KiB slices as the move passes them.
 */
#include "table.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = ROTL(v1, 13);                                                                         \
        v1 ^= v0;                                                                                  \
        v0 = ROTL(v0, 32);                                                                         \
        v2 += v3;                                                                                  \
        v3 = ROTL(v3, 16);                                                                         \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = ROTL(v3, 21);                                                                         \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = ROTL(v1, 17);                                                                         \
        v1 ^= v2;                                                                                  \
        v2 = ROTL(v2, 32);                                                                         \
    } while (0)

/* Little-endian 64-bit word at p (SipHash reads its message so). */
static inline uint64_t le64(const uint8_t *p)
{
    uint64_t m;
    memcpy(&m, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    m = __builtin_bswap64(m);
#endif
    return m;
}

/* SipHash-c-d, inlined where c and d are constants (the table's hash, on every decision, runs
 * its rounds unrolled and reads whole words). */
static inline __attribute__((always_inline)) uint64_t
siphash(uint64_t k0, uint64_t k1, const void *data, size_t len, int c, int d)
{
    const uint8_t *p = data;
    uint64_t v0 = k0 ^ UINT64_C(0x736f6d6570736575), v1 = k1 ^ UINT64_C(0x646f72616e646f6d);
    uint64_t v2 = k0 ^ UINT64_C(0x6c7967656e657261), v3 = k1 ^ UINT64_C(0x7465646279746573);
    size_t whole = len & ~(size_t)7;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m = le64(p + i);
        v3 ^= m;
        for (int r = 0; r < c; r++)
            SIPROUND;
        v0 ^= m;
    }
    uint64_t b = (uint64_t)len << 56;
    for (size_t k = 0; k < (len & 7); k++)
        b |= (uint64_t)p[whole + k] << (8 * k);
    v3 ^= b;
    for (int r = 0; r < c; r++)
        SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    for (int r = 0; r < d; r++)
        SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t gov_siphash(uint64_t k0, uint64_t k1, const void *data, size_t len, int c, int d)
{
    return siphash(k0, k1, data, len, c, d);
}

/* ---- memory from the kernel ---------------------------------------------------------------- */

/*
 * Slot arrays and arena blocks come straight from the kernel: zero pages on demand, so a growth
 * costs no memset. (calloc would serve an array below glibc's dynamic mmap threshold, which
 * rises once a large block has been freed, from the heap and zero it all at once: 3 ms for
 * 24 MB, measured.)
 *
 * What is a huge page or more starts on a huge-page boundary, so that the state snapshot can have
 * the kernel hold it in transparent huge pages (gov_table_regions; a fork then copies one
 * page-table entry per 2 MiB instead of 512). Huge pages are not asked for here (MADV_HUGEPAGE):
 * a fault on the decision path would then wait for the kernel to find or compact one.
 */
#define HUGE_PAGE ((size_t)2 << 20)

static void *pages_alloc(size_t len)
{
    size_t pad = len >= HUGE_PAGE ? HUGE_PAGE : 0;
    char *p = mmap(NULL, len + pad, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    size_t head = pad ? (HUGE_PAGE - (uintptr_t)p % HUGE_PAGE) % HUGE_PAGE : 0;
    if (head)
        munmap(p, head);
    if (pad > head)
        munmap(p + head + len, pad - head);
    return p + head;
}

static void pages_free(void *p, size_t len)
{
    munmap(p, len);
}

/* ---- the id arena -------------------------------------------------------------------------- */

static int arena_class(size_t len)
{
    int c = 0;
    while (((size_t)8 << c) < len)
        c++;
    return c;
}

/* Chunks live in fixed blocks of ARENA_BLOCK bytes, so the arena grows by adding a block and
 * never moves (a realloc of the whole arena would copy megabytes inside one operation). A block
 * is one huge page (its pages are touched only as its chunks are used). */
#define ARENA_BLOCK HUGE_PAGE

static uint8_t *arena_at(const gov_arena_t *a, int c, uint32_t ix)
{
    size_t per_block = ARENA_BLOCK >> (3 + c), size = (size_t)8 << c;
    return a->blocks[ix / per_block] + (ix % per_block) * size;
}

static uint8_t *arena_chunk(const gov_table_t *t, uint32_t ref)
{
    int c = (int)(ref >> 29);
    return arena_at(&t->arena[c], c, (ref & 0x1fffffffu) - 1);
}

/* Copies `len` bytes in; returns the reference, or 0 when out of memory (len > 0 only). */
static uint32_t arena_put(gov_table_t *t, const char *key, size_t len)
{
    int c = arena_class(len);
    gov_arena_t *a = &t->arena[c];
    uint32_t per_block = (uint32_t)(ARENA_BLOCK >> (3 + c)), ix;
    if (a->free) {
        ix = a->free - 1;
        memcpy(&a->free, arena_at(a, c, ix), sizeof(a->free));
    } else {
        if (a->n == a->n_blocks * per_block) {
            if ((uint64_t)(a->n_blocks + 1) * per_block >= 0x1fffffffu)
                return 0;
            if (a->n_blocks == a->cap_blocks) {
                uint32_t cap = a->cap_blocks ? a->cap_blocks * 2 : 16;
                uint8_t **blocks = realloc(a->blocks, cap * sizeof(*blocks));
                if (!blocks)
                    return 0;
                a->blocks = blocks;
                a->cap_blocks = cap;
            }
            if (!(a->blocks[a->n_blocks] = pages_alloc(ARENA_BLOCK)))
                return 0;
            a->n_blocks++;
        }
        ix = a->n++;
    }
    uint32_t ref = ((uint32_t)c << 29) | (ix + 1); /* never 0: 0 says "out of memory" */
    memcpy(arena_chunk(t, ref), key, len);
    return ref;
}

static void arena_drop(gov_table_t *t, uint32_t ref, size_t len)
{
    if (len == 0)
        return;
    int c = (int)(ref >> 29);
    gov_arena_t *a = &t->arena[c];
    memcpy(arena_chunk(t, ref), &a->free, sizeof(a->free));
    a->free = ref & 0x1fffffffu; /* chunk index + 1 */
}

/* ---- slots --------------------------------------------------------------------------------- */

static gov_slot_t *slots_alloc(size_t n)
{
    return pages_alloc(n * sizeof(gov_slot_t));
}

static void slots_free(gov_slot_t *slots, size_t n)
{
    if (slots)
        pages_free(slots, n * sizeof(gov_slot_t));
}

#define MOVED UINT16_MAX /* the length of an old slot already moved to the new array */
#define MIGRATE_PER_OP 64
#define RELEASE_BYTES ((size_t)64 * 1024) /* a multiple of the page size */

/* The empty slot where `hash` goes in the new array. */
static size_t empty_for(const gov_table_t *t, uint64_t hash)
{
    size_t j = hash & t->mask;
    while (t->slots[j].hash)
        j = (j + 1) & t->mask;
    return j;
}

/* Moves old slot i to new slot j (empty). */
static void move_across(gov_table_t *t, size_t i, size_t j)
{
    t->slots[j] = t->old[i];
    t->old[i].len = MOVED;
}

/*
 * Returns the old array's moved prefix to the kernel in RELEASE_BYTES slices, so that no single
 * operation frees a whole array (about 0.14 ms per MB). Slots below t->released are never read
 * again: every key there has moved, and a probe through that range skips it (see old_step).
 */
static void release_moved(gov_table_t *t)
{
    size_t done = t->moved * sizeof(gov_slot_t) / RELEASE_BYTES * RELEASE_BYTES;
    if (done <= t->released_bytes)
        return;
    munmap((char *)t->old + t->released_bytes, done - t->released_bytes);
    t->released_bytes = done;
    t->released = (done + sizeof(gov_slot_t) - 1) / sizeof(gov_slot_t);
}

/* Drops what is left of the old array. Its released prefix is not ours any more: the kernel may
 * have put another mapping there (a thread's stack), so only the tail is unmapped. */
static void old_free(gov_table_t *t)
{
    size_t bytes = (t->old_mask + 1) * sizeof(gov_slot_t);
    if (bytes > t->released_bytes)
        pages_free((char *)t->old + t->released_bytes, bytes - t->released_bytes);
    t->old = NULL;
}

/* Moves up to `budget` old slots across; drops the old array when all are. */
static void migrate(gov_table_t *t, size_t budget)
{
    if (!t->old)
        return;
    for (; budget; budget--) {
        size_t i = t->moved++;
        if (t->old[i].hash && t->old[i].len != MOVED)
            move_across(t, i, empty_for(t, t->old[i].hash));
        if (t->moved > t->old_mask) {
            old_free(t);
            return;
        }
    }
    release_moved(t);
}

/*
 * Old-array probing. A key still in the old array sits at or above `moved`, and its chain from
 * its home has no empty slot, so jumping over the released range [0, released) (where the
 * memory is gone) to `released` still reaches it. The walk is bounded by the array's size
 * because the released range may have held every empty slot.
 */
static size_t old_step(const gov_table_t *t, size_t j)
{
    j &= t->old_mask;
    return j < t->released ? t->released : j;
}

/* Starts a move to a `capacity`-slot array, finishing any move still under way first. */
static int grow(gov_table_t *t, size_t capacity)
{
    gov_slot_t *slots = slots_alloc(capacity);
    if (!slots)
        return -2;
    migrate(t, SIZE_MAX);
    t->old = t->slots;
    t->old_mask = t->mask;
    t->moved = 0;
    t->released = 0;
    t->released_bytes = 0;
    t->slots = slots;
    t->mask = capacity - 1;
    t->cursor = 0;
    return 0;
}

static size_t capacity_for(size_t count)
{
    size_t cap = 1024;
    while (count > cap / 4 * 3)
        cap *= 2;
    return cap;
}

int gov_table_init(gov_table_t *t, size_t initial, size_t max, const uint64_t seed[2])
{
    memset(t, 0, sizeof(*t));
    t->max = max;
    t->seed[0] = seed[0];
    t->seed[1] = seed[1];
    return grow(t, capacity_for(initial < max ? initial : max));
}

void gov_table_free(gov_table_t *t)
{
    slots_free(t->slots, t->mask + 1);
    if (t->old)
        old_free(t);
    for (int c = 0; c < GOV_ARENA_CLASSES; c++) {
        for (uint32_t b = 0; b < t->arena[c].n_blocks; b++)
            pages_free(t->arena[c].blocks[b], ARENA_BLOCK);
        free(t->arena[c].blocks);
    }
    memset(t, 0, sizeof(*t));
}

int gov_table_reserve(gov_table_t *t, size_t extra)
{
    migrate(t, MIGRATE_PER_OP);
    size_t want = t->count + extra;
    if (want > t->max)
        want = t->max;
    if (want <= (t->mask + 1) / 4 * 3)
        return 0;
    return grow(t, capacity_for(want));
}

int gov_table_ident_add(gov_table_t *t, uint64_t identity, const ra_limiter_t *limiter, bool gauge)
{
    for (int i = 0; i < GOV_IDENTS_MAX; i++) {
        gov_ident_t *id = &t->idents[i];
        if (id->alive || id->count)
            continue;
        id->identity = identity;
        id->limiter = *limiter;
        id->gen++;
        id->alive = true;
        id->gauge = gauge;
        return i;
    }
    return -1;
}

void gov_table_ident_drop(gov_table_t *t, int ident)
{
    t->idents[ident].alive = false;
}

uint64_t gov_table_hash(const gov_table_t *t, int ident, const char *key, size_t len)
{
    uint64_t h = siphash(t->seed[0] ^ t->idents[ident].identity, t->seed[1], key, len, 1, 3);
    return h ? h : 1; /* 0 marks an empty slot */
}

/* The n bytes at a and b are equal. Keys are short ids: up to 16 bytes, two overlapping loads
 * of each instead of a call to memcmp (a fifth of a lookup). */
static inline bool same_key(const uint8_t *a, const char *b, size_t n)
{
    if (n > 16)
        return memcmp(a, b, n) == 0;
    if (n >= 8)
        return le64(a) == le64((const uint8_t *)b) &&
               le64(a + n - 8) == le64((const uint8_t *)b + n - 8);
    for (size_t i = 0; i < n; i++)
        if (a[i] != (uint8_t)b[i])
            return false;
    return true;
}

static bool slot_is(const gov_table_t *t, const gov_slot_t *s, int ident, uint64_t hash,
                    const char *key, size_t len)
{
    return s->hash == hash && s->ident == ident && s->len == len &&
           (len == 0 || same_key(arena_chunk(t, s->key), key, len));
}

/* Probes for the key: returns its slot, or the empty slot where it would go with *found = 0.
 * A key still in the old array is moved across first. */
static size_t probe(gov_table_t *t, int ident, uint64_t hash, const char *key, size_t len,
                    bool *found)
{
    size_t i = hash & t->mask;
    for (; t->slots[i].hash; i = (i + 1) & t->mask) {
        if (slot_is(t, &t->slots[i], ident, hash, key, len)) {
            *found = true;
            return i;
        }
    }
    size_t j = t->old ? old_step(t, hash) : 0;
    for (size_t n = 0; t->old && n <= t->old_mask && t->old[j].hash; n++, j = old_step(t, j + 1)) {
        if (slot_is(t, &t->old[j], ident, hash, key, len)) { /* a moved one never matches */
            move_across(t, j, i);
            *found = true;
            return i;
        }
    }
    *found = false;
    return i;
}

size_t gov_table_find(gov_table_t *t, int ident, uint64_t hash, const char *key, size_t len)
{
    bool found;
    size_t i = probe(t, ident, hash, key, len, &found);
    return found ? i : GOV_SLOT_NONE;
}

static bool slot_has_ref(const gov_slot_t *s, int ident, uint64_t hash, uint32_t ref, uint16_t len)
{
    return s->hash == hash && s->ident == ident && s->len == len && s->key == ref;
}

size_t gov_table_find_ref(gov_table_t *t, int ident, uint64_t hash, uint32_t ref, uint16_t len)
{
    size_t i = hash & t->mask;
    for (; t->slots[i].hash; i = (i + 1) & t->mask)
        if (slot_has_ref(&t->slots[i], ident, hash, ref, len))
            return i;
    size_t j = t->old ? old_step(t, hash) : 0;
    for (size_t n = 0; t->old && n <= t->old_mask && t->old[j].hash; n++, j = old_step(t, j + 1)) {
        if (slot_has_ref(&t->old[j], ident, hash, ref, len)) {
            move_across(t, j, i);
            return i;
        }
    }
    return GOV_SLOT_NONE;
}

int gov_table_get(gov_table_t *t, int ident, uint64_t hash, const char *key, size_t len,
                  size_t *slot)
{
    bool found;
    size_t i = probe(t, ident, hash, key, len, &found);
    if (found) {
        *slot = i;
        return 0;
    }
    if (t->count >= t->max || t->count + 1 > (t->mask + 1) / 4 * 3)
        return -1;
    if (len > GOV_KEY_MAX) /* the arena's largest chunk: callers fold longer keys first */
        return -2;
    uint32_t ref = 0;
    if (len && !(ref = arena_put(t, key, len)))
        return -2;
    t->slots[i] =
        (gov_slot_t){.hash = hash, .key = ref, .ident = (uint16_t)ident, .len = (uint16_t)len};
    t->count++;
    t->idents[ident].count++;
    *slot = i;
    return 0;
}

/* Frees slot i and shifts the rest of its cluster back so no probe sequence breaks. */
static void delete_slot(gov_table_t *t, size_t i)
{
    gov_slot_t *s = &t->slots[i];
    arena_drop(t, s->key, s->len);
    t->idents[s->ident].count--;
    t->count--;
    for (size_t j = (i + 1) & t->mask; t->slots[j].hash; j = (j + 1) & t->mask) {
        size_t home = t->slots[j].hash & t->mask;
        /* j may move to i iff its home is not in the cyclic range (i, j] */
        bool in_range = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!in_range) {
            t->slots[i] = t->slots[j];
            i = j;
        }
    }
    t->slots[i].hash = 0;
}

static bool slot_idle(const gov_table_t *t, const gov_slot_t *s, int64_t now)
{
    const gov_ident_t *id = &t->idents[s->ident];
    if (!id->alive)
        return true;
    if (id->gauge)
        return s->state == 0;
    return ra_state_is_idle(&id->limiter, s->state, now);
}

size_t gov_table_reclaim(gov_table_t *t, int64_t now, size_t budget)
{
    size_t freed = 0;
    migrate(t, budget);
    while (budget-- && t->count) {
        size_t i = t->cursor & t->mask;
        if (t->slots[i].hash && slot_idle(t, &t->slots[i], now)) {
            delete_slot(t, i); /* stay: the shift may have brought another key to i */
            freed++;
        } else {
            t->cursor = (i + 1) & t->mask;
        }
    }
    t->reclaimed += freed;
    return freed;
}

static void each_in(const gov_table_t *t, const gov_slot_t *slots, size_t from, size_t n,
                    gov_table_each_fn fn, void *ctx)
{
    for (size_t i = from; i < n; i++) {
        const gov_slot_t *s = &slots[i];
        if (s->hash && s->len != MOVED)
            fn(ctx, s->ident, s->len ? (const char *)arena_chunk(t, s->key) : "", s->len, s->state);
    }
}

void gov_table_each(const gov_table_t *t, gov_table_each_fn fn, void *ctx)
{
    each_in(t, t->slots, 0, t->mask + 1, fn, ctx);
    if (t->old) /* old [0, moved) is across (and partly returned to the kernel) */
        each_in(t, t->old, t->moved, t->old_mask + 1, fn, ctx);
}

size_t gov_table_regions(const gov_table_t *t, void **addr, size_t *len, size_t cap)
{
    size_t n = 0;
    if (n < cap) {
        addr[n] = t->slots;
        len[n++] = (t->mask + 1) * sizeof(gov_slot_t);
    }
    if (t->old && n < cap) { /* its first released_bytes are back with the kernel */
        addr[n] = (char *)t->old + t->released_bytes;
        len[n++] = (t->old_mask + 1) * sizeof(gov_slot_t) - t->released_bytes;
    }
    for (int c = 0; c < GOV_ARENA_CLASSES; c++)
        for (uint32_t b = 0; b + 1 < t->arena[c].n_blocks && n < cap; b++) { /* the full ones */
            addr[n] = t->arena[c].blocks[b];
            len[n++] = ARENA_BLOCK;
        }
    return n;
}

size_t gov_table_bytes(const gov_table_t *t)
{
    size_t bytes = sizeof(*t) + (t->mask + 1) * sizeof(gov_slot_t);
    if (t->old)
        bytes += (t->old_mask + 1) * sizeof(gov_slot_t);
    /* a block's pages are touched only as its chunks are handed out: count those */
    for (int c = 0; c < GOV_ARENA_CLASSES; c++)
        bytes += ((((size_t)t->arena[c].n << (3 + c)) + 4095) & ~(size_t)4095) +
                 t->arena[c].cap_blocks * sizeof(uint8_t *);
    return bytes;
}

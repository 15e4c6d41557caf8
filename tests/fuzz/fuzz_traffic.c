/*
 * libFuzzer target for a recording's reader (server/record.h: rec_read_header, rec_read_entry),
 * which `tokentriage simulate --traffic` runs on files from anywhere. Beyond "no crash, no leak,
 * no UB": the reader always moves forward, and every record it accepts is within the bounds it
 * promises (1..GOV_SUBJECT_MAX levels of 1..CFG_LEVEL_MAX bytes, ids of 1..GOV_ID_MAX, tokens
 * absent or 0..GOV_TOKENS_MAX, t >= 0), its strings inside the input.
 */
#include <stdint.h>
#include <string.h>

#include "record.h"

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

static int inside(const uint8_t *data, size_t size, const char *p, size_t len)
{
    return len == 0 || ((const uint8_t *)p >= data && (const uint8_t *)p + len <= data + size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wire_reader_t rd = {.pos = data, .end = data + size};
    char why[160];
    bool hashed;
    if (rec_read_header(&rd, &hashed, why, sizeof(why)) != 0) {
        check(why[0] != '\0');
        return 0;
    }
    while (rd.pos < rd.end) {
        const uint8_t *before = rd.pos;
        rec_entry_t e;
        if (rec_read_entry(&rd, &e, why, sizeof(why)) != 0) {
            check(why[0] != '\0');
            break;
        }
        check(rd.pos > before && rd.pos <= rd.end);
        check(e.t >= 0);
        check(e.tokens == GOV_NO_TOKENS || (e.tokens >= 0 && e.tokens <= GOV_TOKENS_MAX));
        check(e.s.n >= 1 && e.s.n <= GOV_SUBJECT_MAX);
        for (size_t i = 0; i < e.s.n; i++) {
            const gov_pair_t *p = &e.s.pairs[i];
            check(p->level_len >= 1 && p->level_len <= CFG_LEVEL_MAX);
            check(p->id_len >= 1 && p->id_len <= GOV_ID_MAX);
            check(inside(data, size, p->level, p->level_len));
            check(inside(data, size, p->id, p->id_len));
        }
        check(e.verdict.len <= CFG_ID_MAX && inside(data, size, e.verdict.ptr, e.verdict.len));
        check(e.limit.len <= CFG_ID_MAX && inside(data, size, e.limit.ptr, e.limit.len));
    }
    return 0;
}

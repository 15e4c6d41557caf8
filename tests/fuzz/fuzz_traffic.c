/*
 * libFuzzer target for a recording's reader (server/record.h: rec_read_header, rec_read_entry),
 * which `tokentriage simulate --traffic` runs on files from anywhere. Beyond "no crash, no leak,
 * no UB": the reader always moves forward, and every record it accepts is within the bounds it
 * promises, its strings inside the input: a decide's subject (1..GOV_SUBJECT_MAX levels of
 * 1..CFG_LEVEL_MAX bytes, ids of 1..GOV_ID_MAX, tokens absent or 0..GOV_TOKENS_MAX) or a gRPC
 * request's (a domain of 1..CFG_RULE_DOMAIN_MAX bytes, 1..GOV_ASKS_MAX descriptors of
 * 1..GOV_SUBJECT_MAX entries, keys of 1..CFG_RULE_KEY_MAX bytes, values of at most GOV_ID_MAX,
 * a cost of 0..GOV_TOKENS_MAX, an own limit of Envoy's units or none), never both; t >= 0.
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

/* 1..GOV_SUBJECT_MAX pairs, names of 1..name_max bytes, ids of id_min..GOV_ID_MAX, inside. */
static int subject_within(const uint8_t *data, size_t size, const gov_subject_t *s, size_t name_max,
                          size_t id_min)
{
    if (s->n < 1 || s->n > GOV_SUBJECT_MAX)
        return 0;
    for (size_t i = 0; i < s->n; i++) {
        const gov_pair_t *p = &s->pairs[i];
        if (p->level_len < 1 || p->level_len > name_max || p->id_len < id_min ||
            p->id_len > GOV_ID_MAX || !inside(data, size, p->level, p->level_len) ||
            !inside(data, size, p->id, p->id_len))
            return 0;
    }
    return 1;
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
        check((e.s.n > 0) != (e.n_asks > 0)); /* a decide or a gRPC request */
        check(subject_within(data, size, &e.s, CFG_LEVEL_MAX, 1) || e.n_asks);
        check(e.n_asks <= GOV_ASKS_MAX);
        check(!e.n_asks || (e.domain.len >= 1 && e.domain.len <= CFG_RULE_DOMAIN_MAX &&
                            inside(data, size, e.domain.ptr, e.domain.len)));
        for (size_t a = 0; a < e.n_asks; a++) {
            const gov_ask_t *k = &e.asks[a];
            check(subject_within(data, size, &k->subject, CFG_RULE_KEY_MAX, 0));
            check(k->cost >= 0 && k->cost <= GOV_TOKENS_MAX);
            check(!k->override_unit ||
                  (cfg_unit_of_number(k->override_unit) && k->override_amount >= 0 &&
                   k->override_amount <= RA_ENVOY_CEILING));
        }
        check(e.verdict.len <= CFG_ID_MAX && inside(data, size, e.verdict.ptr, e.verdict.len));
        check(e.limit.len <= CFG_ID_MAX && inside(data, size, e.limit.ptr, e.limit.len));
    }
    return 0;
}

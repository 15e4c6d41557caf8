/* A rule's packed path and replaces, globs and envoy's units; see rule.h. */
#include "rule.h"

#include <stdio.h>
#include <string.h>

#include "ratealg.h"

const cfg_unit_t cfg_units[CFG_UNITS] = {
    {"second", 1, 1},       {"minute", 2, 60},        {"hour", 3, 3600},        {"day", 4, 86400},
    {"week", 7, 7 * 86400}, {"month", 5, 30 * 86400}, {"year", 6, 365 * 86400},
};

const cfg_unit_t *cfg_unit_of_period(int64_t period_ns)
{
    for (size_t i = 0; i < CFG_UNITS; i++)
        if (cfg_units[i].seconds * RA_NS_PER_S == period_ns)
            return &cfg_units[i];
    return NULL;
}

const cfg_unit_t *cfg_unit_of_number(int number)
{
    for (size_t i = 0; i < CFG_UNITS; i++)
        if (cfg_units[i].number == number)
            return &cfg_units[i];
    return NULL;
}

/* Where the replaces start: past every entry. */
static size_t entries_end(const cfg_rule_t *r)
{
    size_t at = 0;
    for (size_t i = 0; i < r->n_entries; i++)
        at += 5 + r->bytes[at + 2] + (r->bytes[at + 3] | (size_t)r->bytes[at + 4] << 8);
    return at;
}

int cfg_rule_add_entry(cfg_rule_t *r, cfg_match_t match, uint8_t flags, const char *key,
                       size_t key_len, const char *value, size_t value_len)
{
    size_t need = 5 + key_len + value_len;
    if (r->n_entries == CFG_RULE_ENTRIES_MAX || r->n_replaces || key_len == 0 ||
        key_len > CFG_RULE_KEY_MAX || value_len > CFG_RULE_VALUE_MAX ||
        need > (size_t)CFG_RULE_BYTES - r->len)
        return -1;
    uint8_t *p = r->bytes + r->len;
    p[0] = (uint8_t)match;
    p[1] = flags;
    p[2] = (uint8_t)key_len;
    p[3] = (uint8_t)value_len;
    p[4] = (uint8_t)(value_len >> 8);
    memcpy(p + 5, key, key_len);
    if (value_len)
        memcpy(p + 5 + key_len, value, value_len);
    r->len = (uint16_t)(r->len + need);
    r->n_entries++;
    return 0;
}

int cfg_rule_add_replaces(cfg_rule_t *r, const char *name, size_t len)
{
    if (r->n_replaces == CFG_RULE_REPLACES_MAX || len == 0 || len > CFG_RULE_NAME_MAX ||
        1 + len > (size_t)CFG_RULE_BYTES - r->len)
        return -1;
    r->bytes[r->len] = (uint8_t)len;
    memcpy(r->bytes + r->len + 1, name, len);
    r->len = (uint16_t)(r->len + 1 + len);
    r->n_replaces++;
    return 0;
}

size_t cfg_rule_entries(const cfg_rule_t *r, cfg_entry_t *out)
{
    size_t at = 0;
    for (size_t i = 0; i < r->n_entries; i++) {
        const uint8_t *p = r->bytes + at;
        size_t kl = p[2], vl = p[3] | (size_t)p[4] << 8;
        out[i] = (cfg_entry_t){.match = (cfg_match_t)p[0],
                               .flags = p[1],
                               .key = (const char *)p + 5,
                               .key_len = kl,
                               .value = (const char *)p + 5 + kl,
                               .value_len = vl};
        at += 5 + kl + vl;
    }
    return r->n_entries;
}

const char *cfg_rule_replaces(const cfg_rule_t *r, size_t i, size_t *len)
{
    size_t at = entries_end(r);
    for (size_t k = 0; k < i; k++)
        at += 1 + r->bytes[at];
    *len = r->bytes[at];
    return (const char *)r->bytes + at + 1;
}

cfg_match_t cfg_match_of(const char *value, size_t len)
{
    if (len == 0)
        return CFG_MATCH_ANY;
    return memchr(value, '*', len) ? CFG_MATCH_GLOB : CFG_MATCH_VALUE;
}

/* The first occurrence of needle in hay, or NULL (memmem without _GNU_SOURCE). */
static const char *find(const char *hay, size_t hlen, const char *needle, size_t nlen)
{
    if (nlen == 0)
        return hay;
    for (size_t i = 0; i + nlen <= hlen; i++)
        if (hay[i] == needle[0] && memcmp(hay + i, needle, nlen) == 0)
            return hay + i;
    return NULL;
}

/*
 * The pattern is literal segments split by '*': the value must start with the first, end with
 * the last, and hold the middle ones in order in between, each found at its leftmost place
 * (leftmost is always safe: it leaves the most room for what follows). envoy ratelimit's
 * wildcardMatch, on bytes.
 */
bool cfg_glob_match(const char *pattern, size_t plen, const char *value, size_t vlen)
{
    const char *star = memchr(pattern, '*', plen);
    if (!star)
        return plen == vlen && memcmp(pattern, value, vlen) == 0;
    size_t head = (size_t)(star - pattern);
    const char *last = pattern + plen;
    while (last > star && last[-1] != '*')
        last--;
    size_t tail = (size_t)(pattern + plen - last);
    if (head + tail > vlen || memcmp(value, pattern, head) != 0 ||
        memcmp(value + vlen - tail, last, tail) != 0)
        return false;
    const char *v = value + head, *v_end = value + vlen - tail;
    const char *seg = star + 1;
    while (seg < last) { /* the middle segments, between the first and the last '*' */
        const char *next = memchr(seg, '*', (size_t)(last - seg));
        size_t slen = (size_t)(next - seg);
        const char *at = find(v, (size_t)(v_end - v), seg, slen);
        if (!at)
            return false;
        v = at + slen;
        seg = next + 1;
    }
    return true;
}

char *cfg_rule_full_key(const cfg_rule_t *r, char *buf, size_t size)
{
    cfg_entry_t e[CFG_RULE_ENTRIES_MAX];
    size_t n = cfg_rule_entries(r, e), used = 0;
    int w = snprintf(buf, size, "%s", r->domain);
    used = w < 0 ? 0 : (size_t)w;
    for (size_t i = 0; i < n && used < size; i++) {
        w = e[i].value_len
                ? snprintf(buf + used, size - used, ".%.*s_%.*s", (int)e[i].key_len, e[i].key,
                           (int)e[i].value_len, e[i].value)
                : snprintf(buf + used, size - used, ".%.*s", (int)e[i].key_len, e[i].key);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    return buf;
}

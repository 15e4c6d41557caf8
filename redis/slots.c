/*
 * Redis Cluster's and Sentinel's outside input, read strictly (see slots.h). A misbehaving
 * node, a proxy or a port some other program listens on can send anything: each function
 * bounds what it reads and names the field that was wrong.
 */
#include "slots.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

uint16_t rds_crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((uint8_t)buf[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = crc & 0x8000 ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

int rds_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open != NULL) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close != NULL && close > open + 1)
            return rds_crc16(open + 1, (size_t)(close - open - 1)) & (RDS_SLOTS - 1);
    }
    return rds_crc16(key, len) & (RDS_SLOTS - 1);
}

/* An integer element in [lo, hi]. */
static bool int_in(const redisReply *e, long long lo, long long hi, long long *out)
{
    if (e == NULL || e->type != REDIS_REPLY_INTEGER || e->integer < lo || e->integer > hi)
        return false;
    *out = e->integer;
    return true;
}

/* The endpoint of a CLUSTER SLOTS node entry [host, port, ...]. */
static int read_endpoint(const redisReply *n, const rds_endpoint_t *asked, rds_endpoint_t *out,
                         const char **why)
{
    long long port;
    if (n == NULL || n->type != REDIS_REPLY_ARRAY || n->elements < 2) {
        *why = "the primary is not an array [host, port, ...]";
        return RDS_EMAP;
    }
    const redisReply *h = n->element[0];
    if (h == NULL || (h->type != REDIS_REPLY_STRING && h->type != REDIS_REPLY_NIL)) {
        *why = "the primary's host is not a string";
        return RDS_EMAP;
    }
    if (!int_in(n->element[1], 1, 65535, &port)) {
        *why = "the primary's port is not an integer in 1..65535";
        return RDS_EMAP;
    }
    if (h->type == REDIS_REPLY_NIL || h->len == 0) { /* unknown endpoint: the node asked */
        snprintf(out->host, sizeof(out->host), "%s", asked->host);
    } else if (h->len > RDS_HOST_MAX || memchr(h->str, '\0', h->len) != NULL ||
               (h->len == 1 && h->str[0] == '?')) {
        *why = "the primary's host is too long, holds a NUL, or is \"?\" (no endpoint known)";
        return RDS_EMAP;
    } else {
        memcpy(out->host, h->str, h->len);
        out->host[h->len] = '\0';
    }
    out->port = (int)port;
    return 0;
}

static int node_index(rds_map_t *map, const rds_endpoint_t *e)
{
    for (uint32_t i = 0; i < map->n_nodes; i++)
        if (map->nodes[i].port == e->port && strcmp(map->nodes[i].host, e->host) == 0)
            return (int)i;
    if (map->n_nodes == RDS_NODES_MAX)
        return -1;
    map->nodes[map->n_nodes] = *e;
    return (int)map->n_nodes++;
}

int rds_map_parse(const redisReply *reply, const rds_endpoint_t *asked, rds_map_t *map,
                  tt_err_t *err)
{
    memset(map->slot, RDS_MAP_NONE, sizeof(map->slot));
    map->n_nodes = 0;
    map->covered = 0;
    if (reply != NULL && reply->type == REDIS_REPLY_ERROR) {
        return tt_err_set(err, RDS_EMAP, "", "redis: CLUSTER SLOTS: %.*s",
                          (int)(reply->len > 120 ? 120 : reply->len), reply->str);
    }
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY) {
        return tt_err_set(err, RDS_EMAP, "", "redis: CLUSTER SLOTS answered %s, want an array",
                          reply == NULL ? "nothing" : "another type");
    }
    if (reply->elements > RDS_SLOTS) {
        return tt_err_set(err, RDS_EMAP, "",
                          "redis: CLUSTER SLOTS has %zu ranges, more than there are slots",
                          reply->elements);
    }
    for (size_t i = 0; i < reply->elements; i++) {
        const redisReply *r = reply->element[i];
        const char *why = NULL;
        long long lo = 0, hi = -1;
        rds_endpoint_t e;
        int at = 0;
        if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 3)
            why = "not an array [start, end, primary, replicas...]";
        else if (!int_in(r->element[0], 0, RDS_SLOTS - 1, &lo) ||
                 !int_in(r->element[1], lo, RDS_SLOTS - 1, &hi))
            why = "the slot range is not start <= end within 0..16383";
        else if (read_endpoint(r->element[2], asked, &e, &why) == 0 &&
                 (at = node_index(map, &e)) < 0)
            why = "more primaries than a store holds (64)";
        for (long long s = lo; why == NULL && s <= hi; s++) {
            if (map->slot[s] != RDS_MAP_NONE) {
                why = "its slots overlap an earlier range";
                break;
            }
            map->slot[s] = (uint8_t)at;
            map->covered++;
        }
        if (why != NULL)
            return tt_err_set(err, RDS_EMAP, "", "redis: CLUSTER SLOTS range %zu: %s", i + 1, why);
    }
    return 0;
}

/* "host:port" (the host may be empty, or an IPv6 literal without brackets: the last colon
 * splits) into *out. */
static bool parse_host_port(const char *s, size_t len, const rds_endpoint_t *asked,
                            rds_endpoint_t *out)
{
    const char *colon = NULL;
    for (size_t i = len; i > 0; i--)
        if (s[i - 1] == ':') {
            colon = s + i - 1;
            break;
        }
    if (colon == NULL)
        return false;
    size_t hlen = (size_t)(colon - s), plen = len - hlen - 1;
    long port = 0;
    if (plen == 0 || plen > 5)
        return false;
    for (size_t i = 0; i < plen; i++) {
        if (colon[1 + i] < '0' || colon[1 + i] > '9')
            return false;
        port = port * 10 + (colon[1 + i] - '0');
    }
    if (port < 1 || port > 65535 || hlen > RDS_HOST_MAX || memchr(s, '\0', hlen) != NULL)
        return false;
    if (hlen == 0) {
        snprintf(out->host, sizeof(out->host), "%s", asked->host);
    } else {
        memcpy(out->host, s, hlen);
        out->host[hlen] = '\0';
    }
    out->port = (int)port;
    return true;
}

int rds_redirect_parse(const char *str, size_t len, const rds_endpoint_t *asked,
                       rds_redirect_t *out, tt_err_t *err)
{
    memset(out, 0, sizeof(*out));
    size_t word;
    if (len > 6 && memcmp(str, "MOVED ", 6) == 0) {
        out->kind = RDS_REDIRECT_MOVED;
        word = 6;
    } else if (len > 4 && memcmp(str, "ASK ", 4) == 0) {
        out->kind = RDS_REDIRECT_ASK;
        word = 4;
    } else {
        return 0;
    }
    size_t i = word;
    long slot = 0;
    while (i < len && i - word < 6 && str[i] >= '0' && str[i] <= '9')
        slot = slot * 10 + (str[i++] - '0');
    bool ok = i > word && i < len && str[i] == ' ' && slot < RDS_SLOTS &&
              parse_host_port(str + i + 1, len - i - 1, asked, &out->to);
    if (!ok) {
        out->kind = RDS_REDIRECT_NONE;
        return tt_err_set(err, RDS_EMAP, "", "redis: a misshapen redirect: %.*s",
                          (int)(len > 120 ? 120 : len), str);
    }
    out->slot = (int)slot;
    return 0;
}

int rds_sentinel_addr_parse(const redisReply *reply, rds_endpoint_t *out, tt_err_t *err)
{
    const char *why = NULL;
    if (reply == NULL)
        why = "no reply";
    else if (reply->type == REDIS_REPLY_NIL)
        why = "the master name is unknown to this Sentinel";
    else if (reply->type == REDIS_REPLY_ERROR)
        why = "an error";
    else if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
             reply->element[0]->type != REDIS_REPLY_STRING ||
             reply->element[1]->type != REDIS_REPLY_STRING)
        why = "not an array [ip, port]";
    if (why == NULL) {
        const redisReply *h = reply->element[0], *p = reply->element[1];
        char buf[RDS_HOST_MAX + 8];
        size_t n = h->len + 1 + p->len;
        if (h->len == 0 || n >= sizeof(buf))
            why = "the address is empty or too long";
        else {
            memcpy(buf, h->str, h->len);
            buf[h->len] = ':';
            memcpy(buf + h->len + 1, p->str, p->len);
            if (!parse_host_port(buf, n, out, out))
                why = "the address is not ip, port";
        }
    }
    if (why != NULL)
        return tt_err_set(err, RDS_EMAP, "", "redis: SENTINEL get-master-addr-by-name: %s", why);
    return 0;
}

int rds_switch_master_parse(const char *str, size_t len, const char *master, rds_endpoint_t *out,
                            tt_err_t *err)
{
    /* five space-separated words; the last two are the new primary */
    size_t start[5], end[5], n = 0, i = 0;
    while (i < len && n < 5) {
        start[n] = i;
        while (i < len && str[i] != ' ')
            i++;
        end[n++] = i;
        if (i < len)
            i++;
    }
    char buf[RDS_HOST_MAX + 8];
    size_t hl = n == 5 ? end[3] - start[3] : 0, pl = n == 5 ? end[4] - start[4] : 0;
    if (n != 5 || i != len || end[0] == start[0] || hl == 0 || hl + 1 + pl >= sizeof(buf)) {
        return tt_err_set(err, RDS_EMAP, "", "redis: a misshapen +switch-master: %.*s",
                          (int)(len > 120 ? 120 : len), str);
    }
    if (strlen(master) != end[0] || memcmp(str, master, end[0]) != 0)
        return 1;
    memcpy(buf, str + start[3], hl);
    buf[hl] = ':';
    memcpy(buf + hl + 1, str + start[4], pl);
    if (!parse_host_port(buf, hl + 1 + pl, out, out)) {
        return tt_err_set(err, RDS_EMAP, "", "redis: +switch-master names no ip and port: %.*s",
                          (int)(len > 120 ? 120 : len), str);
    }
    return 0;
}

int rds_role_is_primary(const redisReply *reply, tt_err_t *err)
{
    const redisReply *r0 =
        reply && reply->type == REDIS_REPLY_ARRAY && reply->elements > 0 ? reply->element[0] : NULL;
    if (r0 != NULL && r0->type == REDIS_REPLY_STRING && r0->len == 6 &&
        memcmp(r0->str, "master", 6) == 0)
        return 0;
    if (r0 != NULL && r0->type == REDIS_REPLY_STRING)
        return tt_err_set(err, RDS_EMAP, "", "redis: ROLE says %.*s, not master",
                          (int)(r0->len > 40 ? 40 : r0->len), r0->str);
    return tt_err_set(err, RDS_EMAP, "", "redis: ROLE answered no role");
}

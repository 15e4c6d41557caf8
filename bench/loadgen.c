/*
 * loadgen: the one load generator of bench/run.sh, for every target it compares.
 *
 *   loadgen --proto msgpack|resp|http --socket PATH|tcp:PORT [-c CONNS] [-p DEPTH] [-k KEYS]
 *           [-d MS] [-w MS] [--sha SHA1] [--prefill] [--seed N] [--pid PID] [--v1]
 *           [--token TOKEN]
 *
 * Why one generator. The comparison is only fair when every target sees the same client: the
 * same connections, the same number of requests in flight, the same keys in the same order,
 * the same syscalls. What differs is the bytes: `msgpack` speaks the decision socket (the
 * ceiling, the daemon with a local limit, the daemon with a redis limit), `resp` speaks Redis
 * (EVALSHA of bench/redis_gcra.lua), `http` the daemon's HTTP front door (GET /v1/decide on
 * keep-alive connections, pipelined like the others; over the socket, or the TCP listener with
 * --socket tcp:PORT, with --token: the TCP listener decides for a bearer token only). Answers are
 * framed by the daemon's own framing (proto_frame), by hiredis's reply reader and by libhttp-parser
 * respectively, and each is checked: a decision (admit true/false; HTTP 200/429) or an error,
 * counted apart.
 *
 * Why one thread. The machine has two cores and each target serves from one thread; a thread
 * per connection would take the target's core away from it with context switches. One epoll
 * loop drives every connection: a connection starts with DEPTH requests in flight; each time
 * a read completes k answers, k new requests go out in one write. So each connection keeps
 * DEPTH in flight with one read and one write per batch, as a pipelining client does.
 *
 * Keys: "k" and eight digits, drawn uniformly from [0, KEYS) by a xorshift generator seeded
 * per connection (--seed): the same sequence for every target. --prefill first sends every
 * key once, in order, at the same depth, so runs over a million keys meet a warm table.
 *
 * Timing: the first -w milliseconds are a warm-up and not counted; then answers are counted
 * for -d milliseconds. Latency is per batch (a request's round trip from the write that sent
 * it to the read that completed it), exact percentiles over every batch. max_us is the slowest
 * batch. With --pid, the target's CPU time over the window is read too: its share of a CPU and its
 * CPU time per answer, the figure that stays meaningful when other work shares the machine. Prints
 * one JSON line.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <hiredis/read.h>
#include <hiredis/hiredis.h>
#include <http_parser.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "proto.h"

#define MAX_CONNS 1024
#define MAX_DEPTH 4096
#define IN_CAP (256 * 1024)
#define KEY_DIGITS 8
#define TOKEN_MAX 128 /* bytes of --token */
/* bytes of the longest request any protocol sends (HTTP with its Authorization line) */
#define MAX_REQ (160 + TOKEN_MAX + 32)
/* The limit both the daemon's config (bench/bench.yaml) and the Redis script apply. */
#define LIMIT_BURST "100"
#define LIMIT_RATE "600"
#define LIMIT_PERIOD_S "60"

typedef enum { P_MSGPACK, P_RESP, P_HTTP } proto_kind_t;

typedef struct conn {
    int fd;
    uint64_t rng;
    uint32_t seq;
    size_t inflight;
    uint8_t *in;
    size_t in_len;
    uint8_t *out;
    size_t out_len, out_off;
    redisReader *reader;
    http_parser hp;   /* http: the answers' parser */
    unsigned hp_done; /* http: answers completed by the last parse */
    /* send times of the batches in flight: a FIFO of (time, requests) */
    int64_t *batch_t;
    uint32_t *batch_n;
    unsigned bhead, btail; /* ring over MAX_DEPTH entries */
    uint64_t prefill_next; /* next key to prefill, when prefilling */
} conn_t;

static struct {
    proto_kind_t proto;
    const char *socket;
    unsigned conns, depth;
    uint64_t keys;
    int64_t duration_ns, warmup_ns;
    const char *sha;
    bool prefill;
    bool v1;           /* msgpack requests without "v": protocol 1 answers */
    const char *token; /* http: Authorization: Bearer this (a TCP listener needs it) */
    uint64_t seed;
    int pid; /* the target's process, for its CPU time; 0: not measured */
} opt = {.conns = 1,
         .depth = 1,
         .keys = 1,
         .duration_ns = 2000000000LL,
         .warmup_ns = 300000000LL,
         .seed = 1};

static struct {
    uint64_t answers, admitted, denied, errors, unexpected;
    char first_error[200];
} st;

static bool counting; /* inside the measured window */

/* Nanoseconds the target's process has run on a CPU so far (all its threads), from
 * every /proc/PID/task/TID/schedstat; -1 when unknown. Under a shared machine's load, throughput
 * says how much CPU the target got, CPU time per answer says what an answer costs it. */
static int64_t target_cpu_ns(void)
{
    if (!opt.pid)
        return -1;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", opt.pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int64_t total = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char f[320];
        snprintf(f, sizeof(f), "/proc/%d/task/%s/schedstat", opt.pid, e->d_name);
        FILE *fp = fopen(f, "r");
        long long ns;
        if (fp && fscanf(fp, "%lld", &ns) == 1)
            total += ns;
        if (fp)
            fclose(fp);
    }
    closedir(d);
    return total;
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Round trips as (nanoseconds, requests) pairs, one per completed batch; sorted at the end for
 * exact percentiles. A few hundred thousand reads a second at most: a few MB per run. */
typedef struct sample {
    int64_t ns;
    uint64_t n;
} sample_t;

static sample_t *samples;
static size_t nsamples, samples_cap;

static void sample(int64_t ns, uint64_t n)
{
    if (nsamples == samples_cap) {
        samples_cap = samples_cap ? 2 * samples_cap : 65536;
        if (!(samples = realloc(samples, samples_cap * sizeof(*samples)))) {
            fprintf(stderr, "loadgen: out of memory for latency samples\n");
            exit(1);
        }
    }
    samples[nsamples++] = (sample_t){ns, n};
}

static int by_ns(const void *a, const void *b)
{
    int64_t x = ((const sample_t *)a)->ns, y = ((const sample_t *)b)->ns;
    return (x > y) - (x < y);
}

/* The round trip below which a fraction q of the counted requests came back. */
static double percentile(double q)
{
    uint64_t want = (uint64_t)(q * (double)st.answers), seen = 0;
    for (size_t i = 0; i < nsamples; i++) {
        seen += samples[i].n;
        if (seen > want)
            return (double)samples[i].ns;
    }
    return 0;
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static void put_key(char *dst, uint64_t k)
{
    for (int i = KEY_DIGITS - 1; i >= 0; i--, k /= 10)
        dst[i] = (char)('0' + k % 10);
}

/*
 * One request for key k. msgpack: {"op":"decide","v":2,"seq":N,"subject":{"key":"kNNNNNNNN"}}
 * (seq as uint32, so every request has the same length; without "v" with --v1: the protocol 1
 * answer, headers rendered by the daemon). resp: EVALSHA sha 1 kNNNNNNNN burst rate period
 * cost, as a pipelining Redis client writes it.
 */
static size_t encode(conn_t *c, uint64_t k, uint8_t *p)
{
    static const char mp_head[] = "\x84\xa2op\xa6"
                                  "decide\xa1v\x02\xa3seq\xce";
    static const char mp_head_v1[] = "\x83\xa2op\xa6"
                                     "decide\xa3seq\xce";
    static const char mp_mid[] = "\xa7subject\x81\xa3key\xa9k";
    uint8_t *start = p;
    if (opt.proto == P_MSGPACK) {
        uint32_t s = ++c->seq;
        if (opt.v1) {
            memcpy(p, mp_head_v1, sizeof(mp_head_v1) - 1);
            p += sizeof(mp_head_v1) - 1;
        } else {
            memcpy(p, mp_head, sizeof(mp_head) - 1);
            p += sizeof(mp_head) - 1;
        }
        *p++ = (uint8_t)(s >> 24), *p++ = (uint8_t)(s >> 16), *p++ = (uint8_t)(s >> 8);
        *p++ = (uint8_t)s;
        memcpy(p, mp_mid, sizeof(mp_mid) - 1);
        p += sizeof(mp_mid) - 1;
        put_key((char *)p, k);
        return (size_t)(p + KEY_DIGITS - start);
    }
    if (opt.proto == P_HTTP) {
        static const char head[] = "GET /v1/decide?key=k", tail[] = " HTTP/1.1\r\nHost: t\r\n";
        memcpy(p, head, sizeof(head) - 1);
        p += sizeof(head) - 1;
        put_key((char *)p, k);
        p += KEY_DIGITS;
        memcpy(p, tail, sizeof(tail) - 1);
        p += sizeof(tail) - 1;
        if (opt.token) /* a TCP listener decides for a bearer token only */
            p += sprintf((char *)p, "Authorization: Bearer %s\r\n", opt.token);
        memcpy(p, "\r\n", 2);
        return (size_t)(p + 2 - start);
    }
    p += sprintf((char *)p, "*8\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n$1\r\n1\r\n$9\r\nk", opt.sha);
    put_key((char *)p, k);
    p += KEY_DIGITS;
    static const char tail[] = "\r\n$"
                               "3\r\n" LIMIT_BURST "\r\n$"
                               "3\r\n" LIMIT_RATE "\r\n$"
                               "2\r\n" LIMIT_PERIOD_S "\r\n$1\r\n1\r\n";
    memcpy(p, tail, sizeof(tail) - 1);
    return (size_t)(p + sizeof(tail) - 1 - start);
}

static void fail(const char *what)
{
    fprintf(stderr, "loadgen: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* Queues up to n requests (fewer when a prefill runs out of keys), notes when they leave, and
 * returns how many. */
static unsigned send_more(conn_t *c, unsigned n, int64_t now)
{
    memmove(c->out, c->out + c->out_off, c->out_len - c->out_off); /* what is still unsent */
    c->out_len -= c->out_off;
    c->out_off = 0;
    unsigned sent = 0;
    for (; sent < n; sent++) {
        uint64_t k;
        if (opt.prefill) {
            if (c->prefill_next >= opt.keys)
                break;
            k = c->prefill_next;
            c->prefill_next += opt.conns; /* connection i sends keys i, i + CONNS, ... */
        } else {
            k = opt.keys == 1 ? 0 : xorshift(&c->rng) % opt.keys;
        }
        c->out_len += encode(c, k, c->out + c->out_len);
    }
    if (sent == 0)
        return 0;
    c->inflight += sent;
    c->batch_t[c->bhead % MAX_DEPTH] = now;
    c->batch_n[c->bhead % MAX_DEPTH] = sent;
    c->bhead++;
    return sent;
}

static bool flush(conn_t *c)
{
    while (c->out_off < c->out_len) {
        ssize_t w = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (w < 0) {
            if (errno == EAGAIN)
                return false;
            fail("write");
        }
        c->out_off += (size_t)w;
    }
    return true;
}

/* k answers arrived at `now`: their batches' round trips become samples. */
static void completed(conn_t *c, unsigned k, int64_t now)
{
    c->inflight -= k;
    while (k > 0) {
        uint32_t *n = &c->batch_n[c->btail % MAX_DEPTH];
        unsigned take = *n < k ? *n : k;
        if (counting)
            sample(now - c->batch_t[c->btail % MAX_DEPTH], take);
        *n -= take;
        k -= take;
        if (*n == 0)
            c->btail++;
    }
}

static void note_error(const char *msg, size_t len)
{
    if (!st.first_error[0])
        snprintf(st.first_error, sizeof(st.first_error), "%.*s", (int)len, msg);
}

/* Reads one decision answer: {"seq", "admit": bool, ...} or {"seq", "error": {...}}. */
static void check_msgpack(const uint8_t *msg, size_t len)
{
    wire_reader_t r = {.pos = msg, .end = msg + len};
    uint32_t n;
    if (wire_read_map(&r, &n) != 0) {
        st.unexpected++;
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        proto_str_t key;
        if (wire_read_str(&r, &key) != 0)
            break;
        if (wire_str_eq(key, "admit")) {
            bool admit;
            if (wire_read_bool(&r, &admit) == 0) {
                admit ? st.admitted++ : st.denied++;
                return;
            }
            break;
        }
        if (wire_str_eq(key, "error")) {
            st.errors++;
            tt_buf_t json = {0};
            if (!st.first_error[0] && json_from_msgpack(&r, &json) == 0)
                note_error((const char *)json.data, json.len);
            tt_buf_free(&json);
            return;
        }
        if (wire_skip(&r) != 0)
            break;
    }
    st.unexpected++;
}

/* A Redis reply: the script's array {allowed, remaining, retry_after, reset_after}. */
static void check_resp(const redisReply *rep)
{
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements >= 1 &&
        rep->element[0]->type == REDIS_REPLY_INTEGER)
        rep->element[0]->integer ? st.admitted++ : st.denied++;
    else if (rep->type == REDIS_REPLY_ERROR) {
        st.errors++;
        note_error(rep->str, rep->len);
    } else
        st.unexpected++;
}

/* An HTTP answer: 200 admitted, 429 denied, anything else an error. */
static int on_http_answer(http_parser *hp)
{
    conn_t *c = hp->data;
    c->hp_done++;
    if (!counting)
        return 0;
    if (hp->status_code == 200)
        st.admitted++;
    else if (hp->status_code == 429)
        st.denied++;
    else {
        st.errors++;
        char m[32];
        snprintf(m, sizeof(m), "HTTP %u", hp->status_code);
        note_error(m, strlen(m));
    }
    return 0;
}

static const http_parser_settings http_answers = {.on_message_complete = on_http_answer};

/* Counts the whole answers in c->in; keeps the cut tail. Returns how many. */
static unsigned parse(conn_t *c)
{
    unsigned k = 0;
    if (opt.proto == P_HTTP) { /* the parser keeps its own state across reads */
        c->hp_done = 0;
        size_t n = http_parser_execute(&c->hp, &http_answers, (const char *)c->in, c->in_len);
        if (n != c->in_len || HTTP_PARSER_ERRNO(&c->hp) != HPE_OK) {
            fprintf(stderr, "loadgen: bad HTTP answer: %s\n",
                    http_errno_description(HTTP_PARSER_ERRNO(&c->hp)));
            exit(1);
        }
        c->in_len = 0;
        return c->hp_done;
    }
    if (opt.proto == P_MSGPACK) {
        size_t off = 0, n;
        bool deep;
        int rc;
        for (; (rc = proto_frame(c->in + off, c->in_len - off, &n, &deep)) == 0; off += n, k++)
            if (counting)
                check_msgpack(c->in + off, n);
        if (rc != PROTO_EMORE) {
            fprintf(stderr, "loadgen: the target's answers cannot be framed\n");
            exit(1);
        }
        memmove(c->in, c->in + off, c->in_len - off);
        c->in_len -= off;
        return k;
    }
    if (redisReaderFeed(c->reader, (const char *)c->in, c->in_len) != REDIS_OK) {
        fprintf(stderr, "loadgen: bad reply: %s\n", c->reader->errstr);
        exit(1);
    }
    c->in_len = 0;
    void *rep;
    while (redisReaderGetReply(c->reader, &rep) == REDIS_OK && rep) {
        if (counting)
            check_resp(rep);
        freeReplyObject(rep);
        k++;
    }
    return k;
}

static int dial(void)
{
    if (strncmp(opt.socket, "tcp:", 4) == 0) { /* the HTTP listener on loopback */
        struct sockaddr_in in = {.sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)atoi(opt.socket + 4)),
                                 .sin_addr.s_addr = htonl(0x7f000001)};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&in, sizeof(in)) != 0)
            fail(opt.socket);
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        return fd;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", opt.socket);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        fail("socket");
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        fail(opt.socket);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: loadgen --proto msgpack|resp|http --socket PATH|tcp:PORT [-c CONNS] [-p DEPTH] "
            "[-k KEYS] [-d MS] [-w MS] [--sha SHA1] [--prefill] [--seed N] [--pid PID] [--v1] "
            "[--token TOKEN]\n");
    exit(64);
}

static void parse_args(int argc, char **argv)
{
    static const struct option o[] = {
        {"proto", required_argument, NULL, 'P'},       {"socket", required_argument, NULL, 's'},
        {"connections", required_argument, NULL, 'c'}, {"depth", required_argument, NULL, 'p'},
        {"keys", required_argument, NULL, 'k'},        {"duration", required_argument, NULL, 'd'},
        {"warmup", required_argument, NULL, 'w'},      {"sha", required_argument, NULL, 'S'},
        {"prefill", no_argument, NULL, 'F'},           {"seed", required_argument, NULL, 'r'},
        {"pid", required_argument, NULL, 'i'},         {"v1", no_argument, NULL, '1'},
        {"token", required_argument, NULL, 'T'},       {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "s:c:p:k:d:w:", o, NULL)) != -1) {
        switch (ch) {
        case 'P':
            if (strcmp(optarg, "msgpack") == 0)
                opt.proto = P_MSGPACK;
            else if (strcmp(optarg, "resp") == 0)
                opt.proto = P_RESP;
            else if (strcmp(optarg, "http") == 0)
                opt.proto = P_HTTP;
            else
                usage();
            break;
        case 's':
            opt.socket = optarg;
            break;
        case 'c':
            opt.conns = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'p':
            opt.depth = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'k':
            opt.keys = strtoull(optarg, NULL, 10);
            break;
        case 'd':
            opt.duration_ns = strtoll(optarg, NULL, 10) * 1000000;
            break;
        case 'w':
            opt.warmup_ns = strtoll(optarg, NULL, 10) * 1000000;
            break;
        case 'S':
            opt.sha = optarg;
            break;
        case 'F':
            opt.prefill = true;
            break;
        case 'r':
            opt.seed = strtoull(optarg, NULL, 10);
            break;
        case 'i':
            opt.pid = atoi(optarg);
            break;
        case '1':
            opt.v1 = true;
            break;
        case 'T':
            opt.token = optarg;
            break;
        default:
            usage();
        }
    }
    if (!opt.socket || opt.conns < 1 || opt.conns > MAX_CONNS || opt.depth < 1 ||
        opt.depth > MAX_DEPTH || opt.keys < 1 || opt.keys > 100000000 || optind != argc ||
        (opt.proto == P_RESP && (!opt.sha || strlen(opt.sha) != 40)) ||
        (opt.token && strlen(opt.token) > TOKEN_MAX))
        usage();
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    conn_t *cs = calloc(opt.conns, sizeof(conn_t));
    if (ep < 0 || !cs)
        fail("setup");
    int64_t now = mono_ns();
    size_t live = opt.conns;
    for (unsigned i = 0; i < opt.conns; i++) {
        conn_t *c = &cs[i];
        c->fd = dial();
        c->rng = opt.seed * 0x9e3779b97f4a7c15ULL + i + 1;
        c->in = malloc(IN_CAP);
        c->out = malloc((size_t)opt.depth * MAX_REQ);
        c->batch_t = calloc(MAX_DEPTH, sizeof(int64_t));
        c->batch_n = calloc(MAX_DEPTH, sizeof(uint32_t));
        if (opt.proto == P_RESP)
            c->reader = redisReaderCreate();
        http_parser_init(&c->hp, HTTP_RESPONSE);
        c->hp.data = c;
        if (!c->in || !c->out || !c->batch_t || !c->batch_n || (opt.proto == P_RESP && !c->reader))
            fail("allocation");
        c->prefill_next = i;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    }
    for (unsigned i = 0; i < opt.conns; i++) {
        if (send_more(&cs[i], opt.depth, now) == 0) {
            epoll_ctl(ep, EPOLL_CTL_DEL, cs[i].fd, NULL); /* a prefill with fewer keys than conns */
            live--;
        }
        flush(&cs[i]);
    }
    int64_t start = now, count_from = start + opt.warmup_ns, stop_at = count_from + opt.duration_ns;
    int64_t counted_from = 0, counted_to = 0, cpu_from = -1, cpu_to = -1;
    struct epoll_event evs[64];
    int idle = 0; /* seconds without an event */
    while (live > 0) {
        int n = epoll_wait(ep, evs, 64, 1000);
        if (n < 0 && errno != EINTR)
            fail("epoll_wait");
        now = mono_ns();
        if (!opt.prefill) {
            if (!counting && counted_from == 0 && now >= count_from) {
                counting = true;
                counted_from = now;
                cpu_from = target_cpu_ns();
            }
            if (counting && now >= stop_at) {
                counting = false;
                counted_to = now;
                cpu_to = target_cpu_ns();
            }
        }
        if (n > 0)
            idle = 0;
        else if (++idle == 10) {
            fprintf(stderr, "loadgen: no answer for ten seconds; giving up\n");
            return 1;
        }
        for (int i = 0; i < n; i++) {
            conn_t *c = evs[i].data.ptr;
            if (evs[i].events & EPOLLOUT) {
                if (flush(c)) {
                    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                }
            }
            if (!(evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                continue;
            ssize_t r = read(c->fd, c->in + c->in_len, IN_CAP - c->in_len);
            if (r < 0 && errno == EAGAIN)
                continue;
            if (r <= 0) {
                fprintf(stderr, "loadgen: the target closed a connection\n");
                return 1;
            }
            c->in_len += (size_t)r;
            unsigned k = parse(c);
            if (counting)
                st.answers += k;
            completed(c, k, now);
            unsigned more = opt.prefill || now < stop_at ? send_more(c, k, now) : 0;
            if (more && !flush(c)) {
                struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
            }
            if (c->inflight == 0) {
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                live--;
            }
        }
    }
    if (opt.prefill) {
        printf("{\"prefilled\":%llu,\"seconds\":%.3f}\n", (unsigned long long)opt.keys,
               (double)(mono_ns() - start) / 1e9);
        return 0;
    }
    if (counted_to == 0) {
        counted_to = mono_ns();
        cpu_to = target_cpu_ns();
    }
    double secs = (double)(counted_to - counted_from) / 1e9;
    qsort(samples, nsamples, sizeof(*samples), by_ns);
    printf("{\"proto\":\"%s\",\"connections\":%u,\"depth\":%u,\"keys\":%llu,\"answers\":%llu,"
           "\"seconds\":%.3f,\"per_s\":%.0f,\"admitted\":%llu,\"denied\":%llu,\"errors\":%llu,"
           "\"unexpected\":%llu,\"p50_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f",
           opt.proto == P_MSGPACK ? "msgpack"
           : opt.proto == P_RESP  ? "resp"
                                  : "http",
           opt.conns, opt.depth, (unsigned long long)opt.keys, (unsigned long long)st.answers, secs,
           (double)st.answers / secs, (unsigned long long)st.admitted,
           (unsigned long long)st.denied, (unsigned long long)st.errors,
           (unsigned long long)st.unexpected, percentile(0.5) / 1e3, percentile(0.99) / 1e3,
           nsamples ? (double)samples[nsamples - 1].ns / 1e3 : 0.0);
    if (cpu_from >= 0 && cpu_to >= 0 && st.answers)
        printf(",\"cpu_share\":%.3f,\"cpu_ns_per_answer\":%.0f",
               (double)(cpu_to - cpu_from) / (double)(counted_to - counted_from),
               (double)(cpu_to - cpu_from) / (double)st.answers);
    if (st.first_error[0]) {
        printf(",\"first_error\":\"");
        for (const char *p = st.first_error; *p; p++)
            putchar(*p == '"' || *p == '\\' || (unsigned char)*p < 0x20 ? '?' : *p);
        putchar('"');
    }
    printf("}\n");
    for (unsigned i = 0; i < opt.conns; i++) {
        close(cs[i].fd);
        free(cs[i].in);
        free(cs[i].out);
        free(cs[i].batch_t);
        free(cs[i].batch_n);
        if (cs[i].reader)
            redisReaderFree(cs[i].reader);
    }
    free(cs);
    return 0;
}

/*
 * What one turn of a gRPC connection costs (rls/h2.c, issue 34): the pure connection core fed
 * a few kinds of input one turn at a time, as the shell feeds it, with the time of each
 * rls_conn_recv. The turn's budget (RLS_TURN_WORK) and the weights of a stream and a call are
 * set so that a turn costs about the same whatever the input; this prints what it costs here:
 * turns, and per turn the median, p99 and largest time in microseconds.
 *
 *   headers    250 streams (the most a connection may open is 256), each a header list just
 *              under the bound (three references to a 4 KB field: 12 KB decoded and validated
 *              from a few bytes)
 *   amplified  header blocks of 12,000 references to a 4 KB field (refused at the bound)
 *   calls      ShouldRateLimit calls, each HEADERS + one small message, each decided
 *
 * usage: bench_h2turn [REPEAT]   (each kind fed REPEAT times to a new connection; default 20)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "door.h"
#include "h2.h"
#include "h2raw.h"

#define T0 (INT64_C(1700000000) * RA_NS_PER_S)

static const char yaml[] =
    "governance:\n"
    "  limits:\n"
    "    - { id: key_rpm, attach: { level: key }, type: rpm, amount: 60000000, period: 1m }\n";

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void pad_field(h2raw_buf_t *block)
{
    static char pad[4000];
    memset(pad, 'a', sizeof(pad));
    h2raw_hpack_literal(block, "x-pad", pad, sizeof(pad), true);
}

/* The input of one kind, after the client preface. */
static void build(const char *kind, h2raw_buf_t *in)
{
    h2raw_preface(in);
    /* the client reads its answers: the connection's window for them never closes */
    static const uint8_t more[4] = {0x7f, 0xff, 0, 0};
    h2raw_frame(in, H2_WINDOW_UPDATE, 0, 0, more, sizeof(more));
    h2raw_buf_t block = {0};
    if (!strcmp(kind, "headers") || !strcmp(kind, "amplified")) {
        bool amp = kind[0] == 'a';
        for (uint32_t s = 0; s < (amp ? 1000 : 250); s++) {
            block.len = 0;
            h2raw_grpc_fields(&block, H2RAW_RLS);
            if (s == 0 || amp)
                pad_field(&block);
            for (int i = 0; i < (amp ? 12000 : 3); i++)
                h2raw_hpack_indexed(&block, 62);
            h2raw_headers(in, 1 + 2 * s, &block, false);
            if (amp && in->len > (8u << 20))
                break;
        }
    } else {
        h2raw_grpc_fields(&block, H2RAW_RLS);
        for (uint32_t s = 0; s < 20000; s++) {
            char key[32];
            size_t len;
            snprintf(key, sizeof(key), "k-%u", s);
            uint8_t *msg = h2raw_rls_request("bench", "key", key, &len);
            h2raw_headers(in, 1 + 2 * s, &block, false);
            h2raw_grpc_data(in, 1 + 2 * s, msg, len, true);
            free(msg);
        }
    }
    h2raw_buf_free(&block);
}

int main(int argc, char **argv)
{
    int repeat = argc > 1 ? atoi(argv[1]) : 20;
    cfg_config_t *cfg;
    cfg_report_t rep = {0};
    if (cfg_load_string("bench.yaml", yaml, sizeof(yaml) - 1, &cfg, &rep) != 0 ||
        cfg_arm(cfg, &rep) != 0) {
        fprintf(stderr, "bench_h2turn: the config does not arm\n");
        return 1;
    }
    cfg_report_free(&rep);
    static const char *kinds[] = {"headers", "amplified", "calls"};
    printf("%-10s %8s %10s %10s %10s %10s %12s\n", "input", "turns", "p50_us", "p99_us", "max_us",
           "MB_in", "work/turn");
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        h2raw_buf_t in = {0};
        build(kinds[k], &in);
        size_t cap = 1 << 16, n = 0;
        double *t = malloc(cap * sizeof(*t)), work = 0;
        for (int r = 0; r < repeat; r++) {
            gov_engine_t *e = NULL;
            tt_err_t err;
            gov_options_t o = {.hash_seed = {1, 2}};
            if (gov_engine_create_config(&e, &o, cfg, &err) != 0)
                return 1;
            srv_metrics_t *m = srv_metrics_new();
            door_t *door = NULL;
            if (!m || door_new(&door, e, m, NULL, &err) != 0)
                return 1;
            cfg_config_t *live = cfg;
            rls_conn_config_t cc = {.door = door_rls(door), .cfg = &live};
            rls_caller_t who = {.tcp = false}; /* a unix peer: decided, no token to check */
            rls_conn_t *c = rls_conn_new(&cc, &who, T0);
            const uint8_t *p = in.p, *out;
            size_t left = in.len;
            for (int rc = RLS_RECV_MORE; rc == RLS_RECV_MORE;) {
                /* one read at a time, as the shell reads: 64 KiB */
                size_t len = left < 65536 ? left : 65536, used;
                double t0 = now_us();
                rc = rls_conn_recv(c, p, len, T0, &used);
                double dt = now_us() - t0;
                if (n == cap)
                    t = realloc(t, (cap *= 2) * sizeof(*t));
                t[n++] = dt;
                rls_conn_stats_t st;
                rls_conn_stats(c, &st);
                work += (double)st.turn_work;
                while (rls_conn_send(c, &out) > 0)
                    ;
                p += used;
                left -= used;
                if (rc == RLS_RECV_DONE && left)
                    rc = RLS_RECV_MORE;
            }
            rls_conn_free(c);
            door_free(door);
            srv_metrics_free(m);
            gov_engine_destroy(e);
        }
        qsort(t, n, sizeof(*t), cmp);
        printf("%-10s %8zu %10.1f %10.1f %10.1f %10.1f %12.0f\n", kinds[k], n, t[n / 2],
               t[n * 99 / 100], t[n - 1], (double)in.len / 1e6, work / (double)n);
        free(t);
        h2raw_buf_free(&in);
    }
    return 0;
}

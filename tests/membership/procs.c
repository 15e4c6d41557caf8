#include "procs.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "swim_proto.h"

int fp_bound_port(const tt_daemon_t *r, const char *after)
{
    static char log[1 << 16];
    cr_assert(tt_daemon_log_has(r, after, 10000), "no \"%s\" in %s", after, r->log);
    FILE *f = fopen(r->log, "r");
    cr_assert_not_null(f);
    size_t n = fread(log, 1, sizeof log - 1, f);
    fclose(f);
    log[n] = 0;
    const char *last = strstr(log, after);
    for (const char *q; (q = strstr(last + 1, after));)
        last = q;
    const char *p = strstr(last, "127.0.0.1:");
    cr_assert_not_null(p, "no address after \"%s\" in %s", after, r->log);
    return atoi(p + strlen("127.0.0.1:"));
}

void fp_temp_file(char *path, size_t cap, const char *name, const char *text)
{
    snprintf(path, cap, "/tmp/tt-%s-XXXXXX", name);
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0, "cannot make %s", path);
    close(fd);
    fp_write_file(path, text);
}

void fp_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    cr_assert_eq(fputs(text, f) >= 0 && fclose(f) == 0, true, "cannot write %s", path);
}

void fp_replica_config(char *out, size_t cap, const char *prefix, int i, int gport, int seed,
                       const char *keyring)
{
    char seeds[64] = "";
    if (seed)
        snprintf(seeds, sizeof seeds, "    seeds: [\"127.0.0.1:%d\"]\n", seed);
    snprintf(out, cap,
             "  http: 127.0.0.1:0\nshared_state:\n  share:\n    node_id: %s%d\n"
             "    bind: 127.0.0.1:%d\n%s    keyring_file: %s\n    cluster: itest\n",
             prefix, i, gport, seeds, keyring);
}

int fp_cli_json(const tt_daemon_t *r, const char *sub, char *out, size_t cap)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s/cmd/tokentriage %s -s %s --json 2>/dev/null", TT_BINARY_DIR, sub,
             r->socket);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void fp_field(const char *json, const char *id, const char *key, char *out, size_t cap)
{
    char needle[160], k[32];
    snprintf(needle, sizeof needle, "\"id\":\"%s\"", id);
    snprintf(k, sizeof k, "\"%s\":", key);
    out[0] = 0;
    const char *p = strstr(json, needle), *s;
    if (!p || !(s = strstr(p, k)))
        return;
    s += strlen(k);
    s += *s == '"';
    size_t n = strcspn(s, "\",}");
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), s);
}

int fp_live(const tt_daemon_t *r)
{
    static char out[1 << 16];
    if (fp_cli_json(r, "members", out, sizeof out) != 0)
        return -1;
    const char *p = strstr(out, "\"live\":");
    return p ? atoi(p + strlen("\"live\":")) : -1;
}

void fp_state(const tt_daemon_t *r, const char *id, char *st, size_t cap)
{
    static char out[1 << 16];
    st[0] = 0;
    if (fp_cli_json(r, "members", out, sizeof out) == 0)
        fp_field(out, id, "state", st, cap);
}

bool fp_poll(bool (*until)(void *arg), void *arg, int ms, int pause_ms)
{
    long long deadline = tt_now_ms() + ms;
    if (ms <= 0)
        return false;
    for (;;) {
        if (until(arg))
            return true;
        long long left = deadline - tt_now_ms();
        if (left <= 0)
            return false;
        long long p = left < pause_ms ? left : pause_ms;
        struct timespec pause = {(time_t)(p / 1000), (long)(p % 1000) * 1000000L};
        nanosleep(&pause, NULL);
    }
}

typedef struct state_wait {
    const tt_daemon_t *r;
    const char *id, *want;
} state_wait_t;

static bool state_is(void *arg)
{
    const state_wait_t *w = arg;
    char st[16];
    fp_state(w->r, w->id, st, sizeof st);
    return strcmp(st, w->want) == 0;
}

bool fp_poll_state(const tt_daemon_t *r, const char *id, const char *want, int ms)
{
    return fp_poll(state_is, &(state_wait_t){r, id, want}, ms, 50);
}

typedef struct metric_wait {
    int hport;
    const char *name;
    long long min, max, value;
    char *text;
    size_t cap;
} metric_wait_t;

static bool metric_within(void *arg)
{
    metric_wait_t *w = arg;
    w->value = fp_scrape(w->hport, w->text, w->cap) == 0 ? fp_counter(w->text, w->name) : -1;
    return w->value >= w->min && w->value <= w->max;
}

long long fp_poll_metric(int hport, const char *name, long long min, long long max, int ms,
                         char *text, size_t cap)
{
    static char own[1 << 16];
    metric_wait_t w = {hport, name, min, max, -1, text ? text : own, text ? cap : sizeof own};
    fp_poll(metric_within, &w, ms, 20);
    return w.value;
}

int fp_scrape(int port, char *out, size_t cap)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {2, 0};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        close(s);
        return -1;
    }
    const char *req = "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n";
    size_t n = 0;
    if (write(s, req, strlen(req)) == (ssize_t)strlen(req))
        for (ssize_t r; n < cap - 1 && (r = read(s, out + n, cap - 1 - n)) > 0;)
            n += (size_t)r;
    out[n] = 0;
    close(s);
    return n ? 0 : -1;
}

long long fp_counter(const char *text, const char *name)
{
    const char *p = strstr(text, name);
    return p ? atoll(p + strlen(name)) : -1;
}

long long fp_metric(int hport, const char *name)
{
    static char text[1 << 16];
    return fp_scrape(hport, text, sizeof text) == 0 ? fp_counter(text, name) : -1;
}

void fp_start_faked(tt_daemon_t *r, const char *file, const char *limits, const char *extra)
{
    const char *lib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
    cr_assert_eq(access(lib, R_OK), 0, "libfaketime is missing (scripts/deps.sh installs it)");
    /* under ASan the runtime must come first unless told it need not: libfaketime is preloaded
     * before it here */
    char asan[512];
    const char *was = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof asan, "%s%sverify_asan_link_order=0", was ? was : "", was ? ":" : "");
    char *saved = was ? strdup(was) : NULL;
    setenv("ASAN_OPTIONS", asan, 1);
    setenv("LD_PRELOAD", lib, 1);
    setenv("FAKETIME_TIMESTAMP_FILE", file, 1);
    setenv("FAKETIME_NO_CACHE", "1", 1);
    setenv("FAKETIME_DONT_FAKE_MONOTONIC", "1", 1);
    int rc = limits ? tt_daemon_start(r, limits, extra) : tt_daemon_spawn(r, true);
    unsetenv("LD_PRELOAD");
    unsetenv("FAKETIME_TIMESTAMP_FILE");
    if (saved)
        setenv("ASAN_OPTIONS", saved, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(saved);
    cr_assert_eq(rc, 0, "a replica under libfaketime did not start");
}

int64_t fp_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

size_t fp_datagram(uint8_t *out, const uint8_t *key, const char *label, const char *id,
                   uint64_t gen, uint64_t seq, int64_t sent_ns, uint16_t port)
{
    uint8_t body[SWIM_DATAGRAM_MAX], nonce[SWIM_NONCE_BYTES] = {0};
    wire_pack_t w = {body, 0, sizeof body, false};
    swim_enc_head(&w, id, strlen(id), gen, sent_ns, seq, SWIM_GOSSIP);
    swim_msg_t om = {.kind = SWIM_GOSSIP};
    swim_enc_msg(&w, &om);
    size_t at = swim_enc_array_open(&w);
    swim_update_t u = {.state = SWIM_ALIVE,
                       .id = id,
                       .id_len = strlen(id),
                       .generation = gen,
                       .addr = {.family = 4, .port = port, .ip = {127, 0, 0, 1}}};
    swim_enc_update(&w, &u);
    swim_enc_array_close(&w, at, 1);
    memcpy(nonce, &seq, sizeof seq);
    memcpy(nonce + sizeof seq, &gen, sizeof gen);
    return swim_seal(key, label, strlen(label), nonce, body, w.len, out);
}

/* Real replicas in network namespaces on a bridge; see fleet.h. */
#define _GNU_SOURCE
#include "fleet.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <msgpack.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NS_PREFIX "ttshare-"
#define DIR_PREFIX "ttshare-fleet-"

int64_t fleet_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* fork + exec with stdout/stderr to `log` (or /dev/null); the child dies with us. */
static pid_t spawn(const char *const *argv, const char *log)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    int fd = open(log ? log : "/dev/null", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
    }
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0)
        dup2(null, 0);
    execvp(argv[0], (char *const *)argv);
    _exit(127);
}

int fleet_run(const char *const *argv)
{
    pid_t pid = spawn(argv, NULL);
    if (pid < 0)
        return -1;
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#define RUN(...) fleet_run((const char *const[]){__VA_ARGS__, NULL})

/* True when `name` is `prefix` followed by the pid of a process that is gone. */
static bool dead_owner(const char *name, const char *prefix)
{
    size_t n = strlen(prefix);
    int pid;
    return strncmp(name, prefix, n) == 0 && sscanf(name + n, "%d-", &pid) == 1 && pid > 0 &&
           kill(pid, 0) < 0 && errno == ESRCH;
}

/* Removes what runs that died without their teardown left: namespaces and directories. */
static void reap_dead_runs(void)
{
    DIR *d = opendir("/run/netns");
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (dead_owner(e->d_name, NS_PREFIX))
            RUN("ip", "netns", "del", e->d_name);
    if (d)
        closedir(d);
    d = opendir("/tmp");
    while (d && (e = readdir(d))) {
        char path[300];
        snprintf(path, sizeof(path), "/tmp/%s", e->d_name);
        if (dead_owner(e->d_name, DIR_PREFIX))
            RUN("rm", "-rf", "--", path);
    }
    if (d)
        closedir(d);
}

/* The bridge lives in a namespace of its own (the hub), so nothing touches the host's network
 * and removing the namespaces removes everything. */
static int make_netns(fleet_t *f)
{
    int pid = (int)getpid();
    snprintf(f->hub, sizeof(f->hub), NS_PREFIX "%d-hub", pid);
    if (RUN("ip", "netns", "add", f->hub) != 0 ||
        RUN("ip", "-n", f->hub, "link", "add", "br0", "type", "bridge") != 0 ||
        RUN("ip", "-n", f->hub, "link", "set", "br0", "up") != 0)
        return -1;
    for (int i = 0; i < f->n; i++) {
        fleet_replica_t *r = &f->r[i];
        char peer[24];
        snprintf(r->ns, sizeof(r->ns), NS_PREFIX "%d-%d", pid, i);
        snprintf(r->veth, sizeof(r->veth), "tts%dh%d", pid % 100000, i);
        snprintf(peer, sizeof(peer), "tts%dn%d", pid % 100000, i);
        snprintf(r->ip, sizeof(r->ip), "10.77.0.%d", i + 1);
        char cidr[sizeof(r->ip) + 4];
        snprintf(cidr, sizeof(cidr), "%s/24", r->ip);
        if (RUN("ip", "netns", "add", r->ns) != 0 ||
            RUN("ip", "link", "add", r->veth, "type", "veth", "peer", "name", peer) != 0 ||
            RUN("ip", "link", "set", r->veth, "netns", f->hub) != 0 ||
            RUN("ip", "link", "set", peer, "netns", r->ns) != 0 ||
            RUN("ip", "-n", f->hub, "link", "set", r->veth, "master", "br0") != 0 ||
            RUN("ip", "-n", f->hub, "link", "set", r->veth, "up") != 0 ||
            RUN("ip", "-n", r->ns, "link", "set", "lo", "up") != 0 ||
            RUN("ip", "-n", r->ns, "link", "set", peer, "name", "eth0") != 0 ||
            RUN("ip", "-n", r->ns, "addr", "add", cidr, "dev", "eth0") != 0 ||
            RUN("ip", "-n", r->ns, "link", "set", "eth0", "up") != 0)
            return -1;
        r->port = FLEET_GOSSIP_PORT;
        snprintf(r->http, sizeof(r->http), "127.0.0.1:9464");
    }
    return 0;
}

/* Removes the namespaces; the links and the bridge go with them. */
static void unmake_netns(fleet_t *f)
{
    for (int i = 0; i < f->n; i++) {
        if (f->r[i].ns[0])
            RUN("ip", "netns", "del", f->r[i].ns);
        f->r[i].ns[0] = f->r[i].veth[0] = '\0';
    }
    if (f->hub[0])
        RUN("ip", "netns", "del", f->hub);
    f->hub[0] = '\0';
}

/* Loopback: replica i at 127.A.B.(i + 1), A and B from the pid (A from 1: never 127.0.0.x), so
 * every replica has the same ports as in a namespace and concurrent runs never share an
 * address or race for a port. Linux routes all of 127.0.0.0/8 to lo. */
static void make_loopback(fleet_t *f)
{
    int pid = (int)getpid();
    for (int i = 0; i < f->n; i++) {
        fleet_replica_t *r = &f->r[i];
        r->ns[0] = r->veth[0] = '\0';
        int a = 1 + (pid / 250) % 250, b = pid % 250;
        snprintf(r->ip, sizeof(r->ip), "127.%d.%d.%d", a, b, i + 1);
        snprintf(r->http, sizeof(r->http), "127.%d.%d.%d:%d", a, b, i + 1, FLEET_HTTP_PORT);
        r->port = FLEET_GOSSIP_PORT;
    }
}

int fleet_setup(fleet_t *f, int n)
{
    return fleet_setup_on(f, n, getenv("TT_FLEET_LOOPBACK") != NULL);
}

int fleet_setup_on(fleet_t *f, int n, bool loopback)
{
    memset(f, 0, sizeof(*f));
    if (n < 1 || n > FLEET_MAX)
        return -1;
    f->n = n;
    snprintf(f->join_timeout, sizeof(f->join_timeout), "2s");
    snprintf(f->snapshot_interval, sizeof(f->snapshot_interval), "1s");
    snprintf(f->dir, sizeof(f->dir), "/tmp/" DIR_PREFIX "%d-XXXXXX", (int)getpid());
    if (!mkdtemp(f->dir)) {
        perror("fleet: mkdtemp");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        fleet_replica_t *r = &f->r[i];
        snprintf(r->name, sizeof(r->name), "r%d", i);
        snprintf(r->dir, sizeof(r->dir), "%.200s/r%d", f->dir, i);
        mkdir(r->dir, 0700); /* the daemon wants its socket directory closed to others */
        snprintf(r->sock, sizeof(r->sock), "%.200s/r%d/tt.sock", f->dir, i);
    }
    reap_dead_runs();
    f->netns = !loopback;
    if (f->netns && make_netns(f) != 0) {
        fprintf(stderr, "fleet: network namespaces unavailable, falling back to loopback\n");
        unmake_netns(f); /* whatever part of them was made */
        f->netns = false;
    }
    if (!f->netns)
        make_loopback(f);
    return 0;
}

/* TT_VALGRIND=<dir> (as in tests/integration/daemon.c): every replica under memcheck, logging
 * there. NULL when unset. */
static const char *valgrind_dir(void)
{
    const char *vg = getenv("TT_VALGRIND");
    return vg && *vg ? vg : NULL;
}

/* The run's keyring (one key of 32 random bytes, standard padded base64) at path; 0 or -1. */
static int write_keyring(const char *path)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    uint8_t key[33] = {0};
    FILE *u = fopen("/dev/urandom", "rb");
    size_t got = u ? fread(key, 1, 32, u) : 0;
    if (u)
        fclose(u);
    if (got != 32)
        return -1;
    char text[48];
    size_t k = 0;
    for (int i = 0; i < 33; i += 3) {
        uint32_t v = (uint32_t)key[i] << 16 | (uint32_t)key[i + 1] << 8 | key[i + 2];
        for (int j = 0; j < 4; j++)
            text[k++] = b64[(v >> (18 - 6 * j)) & 63];
    }
    text[43] = '='; /* 32 bytes: 43 characters and one pad */
    text[44] = '\n';
    FILE *c = fopen(path, "w");
    if (!c)
        return -1;
    bool ok = fwrite(text, 1, 45, c) == 45;
    return fclose(c) == 0 && ok ? 0 : -1;
}

int fleet_start(fleet_t *f, int i, const char *limits_yaml)
{
    fleet_replica_t *r = &f->r[i];
    char conf[320], log[320], keyring[300] = "";
    snprintf(conf, sizeof(conf), "%s/tokentriage.yaml", r->dir);
    snprintf(log, sizeof(log), "%s/log", r->dir);
    if (f->sealed) {
        snprintf(keyring, sizeof(keyring), "%.250s/gossip.keys", f->dir);
        if (access(keyring, R_OK) != 0 && write_keyring(keyring) != 0)
            return -1;
    }
    FILE *c = fopen(conf, "w");
    if (!c)
        return -1;
    fprintf(c, "server:\n  socket: %s\n  http: %s\n", r->sock, r->http);
    if (f->state)
        fprintf(c, "  state_dir: %s/state\n  snapshot_interval: %s\n", r->dir,
                f->snapshot_interval);
    fprintf(c,
            "governance:\n  limits:\n%s"
            "shared_state:\n  share:\n    node_id: %s\n    bind: %s:%d\n"
            "    advertise: %s:%d\n    partition_hold: 60s\n    join_timeout: %s\n%s",
            limits_yaml, r->name, f->netns ? "0.0.0.0" : r->ip, r->port, r->ip, r->port,
            f->join_timeout, f->share_extra);
    if (keyring[0])
        fprintf(c, "    keyring_file: %s\n    cluster: fleet\n", keyring);
    fprintf(c, "    seeds: [");
    const char *sep = "";
    for (int j = 0; j < (f->n_seeds ? f->n_seeds : f->n); j++) {
        if (j == i && !f->n_seeds)
            continue;
        fprintf(c, "%s%s:%d", sep, f->r[j].ip, f->r[j].port);
        sep = ", ";
    }
    fprintf(c, "]\n%s", f->shared_extra);
    fclose(c);
    /* [ip netns exec NS] [valgrind ...] tokentriage serve -c CONF */
    const char *argv[16], *vg = valgrind_dir();
    char vglog[512];
    int k = 0;
    if (f->netns) {
        argv[k++] = "ip", argv[k++] = "netns", argv[k++] = "exec", argv[k++] = r->ns;
    }
    if (vg) {
        snprintf(vglog, sizeof(vglog), "--log-file=%s/vg.%%p.log", vg);
        argv[k++] = "valgrind", argv[k++] = "--leak-check=full", argv[k++] = "--error-exitcode=99";
        argv[k++] = vglog;
    }
    argv[k++] = TT_BINARY_DIR "/cmd/tokentriage", argv[k++] = "serve", argv[k++] = "-c";
    argv[k++] = conf, argv[k] = NULL;
    r->pid = spawn(argv, log);
    return r->pid > 0 ? 0 : -1;
}

/* Waits (bounded) for replica i to exit after a SIGKILL or SIGTERM; SIGKILL after 10 s. */
static void reap(fleet_t *f, int i)
{
    fleet_replica_t *r = &f->r[i];
    if (r->pid <= 0)
        return;
    int64_t deadline = fleet_now_ms() + 10000;
    while (waitpid(r->pid, NULL, WNOHANG) == 0) {
        if (fleet_now_ms() > deadline) {
            kill(r->pid, SIGKILL);
            waitpid(r->pid, NULL, 0);
            break;
        }
        usleep(10000);
    }
    r->pid = 0;
}

void fleet_kill(fleet_t *f, int i, int sig)
{
    if (f->r[i].pid > 0)
        kill(f->r[i].pid, sig);
}

bool fleet_exited(fleet_t *f, int i)
{
    if (f->r[i].pid > 0 && waitpid(f->r[i].pid, NULL, WNOHANG) == f->r[i].pid)
        f->r[i].pid = 0;
    return f->r[i].pid <= 0;
}

void fleet_signal(fleet_t *f, int i, int sig)
{
    if (f->r[i].pid <= 0)
        return;
    kill(f->r[i].pid, sig);
    if (sig == SIGKILL || sig == SIGTERM)
        reap(f, i);
}

bool fleet_ready(fleet_t *f, int i)
{
    char url[64];
    snprintf(url, sizeof(url), "http://%s/readyz", f->r[i].http);
    if (f->netns)
        return RUN("ip", "netns", "exec", f->r[i].ns, "curl", "-sf", "-m", "2", "-o", "/dev/null",
                   url) == 0;
    return RUN("curl", "-sf", "-m", "2", "-o", "/dev/null", url) == 0;
}

int fleet_http_get(fleet_t *f, int i, const char *path, char *buf, size_t size)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s%s curl -sf -m 2 http://%s%s", f->netns ? "ip netns exec " : "",
             f->netns ? f->r[i].ns : "", f->r[i].http, path);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(buf, 1, size - 1, p);
    buf[n] = '\0';
    return pclose(p) == 0 ? 0 : -1;
}

int fleet_link(fleet_t *f, int i, bool up)
{
    if (!f->netns)
        return -1;
    return RUN("ip", "-n", f->hub, "link", "set", f->r[i].veth, up ? "up" : "down") == 0 ? 0 : -1;
}

void fleet_teardown(fleet_t *f)
{
    /* Under TT_VALGRIND the replicas are stopped with SIGTERM, all at once (a graceful leave),
     * so memcheck writes its summary; otherwise SIGKILL, the quickest. */
    int sig = valgrind_dir() ? SIGTERM : SIGKILL;
    for (int i = 0; i < f->n; i++)
        if (f->r[i].pid > 0)
            kill(f->r[i].pid, sig);
    for (int i = 0; i < f->n; i++)
        reap(f, i);
    unmake_netns(f);
    if (f->dir[0])
        RUN("rm", "-rf", f->dir);
    f->dir[0] = '\0';
    f->n = 0;
}

/* ---- reading a `fleet` answer ---------------------------------------------------------------- */

static bool key_is(const msgpack_object *k, const char *s)
{
    return k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(s) &&
           memcmp(k->via.str.ptr, s, k->via.str.size) == 0;
}

static const msgpack_object *map_get(const msgpack_object *m, const char *key)
{
    if (m->type != MSGPACK_OBJECT_MAP)
        return NULL;
    for (uint32_t i = 0; i < m->via.map.size; i++)
        if (key_is(&m->via.map.ptr[i].key, key))
            return &m->via.map.ptr[i].val;
    return NULL;
}

static int64_t get_int(const msgpack_object *m, const char *key)
{
    const msgpack_object *v = map_get(m, key);
    if (v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        return (int64_t)v->via.u64;
    if (v && v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return v->via.i64;
    return -1;
}

static void read_row(const msgpack_object *l, fleet_row_t *out)
{
    out->n = get_int(l, "n");
    out->local_share = get_int(l, "local_share");
    out->sustained_bound = get_int(l, "sustained_bound");
    out->burst_bound = get_int(l, "burst_bound");
    out->detect_within_s = get_int(l, "detect_within_s");
    const msgpack_object *c = map_get(l, "converged");
    out->converged = c && c->type == MSGPACK_OBJECT_BOOLEAN && c->via.boolean;
    out->keys_leased = get_int(l, "keys_leased");
    out->keys_owned = get_int(l, "keys_owned");
    out->largest_lease_age_ms = get_int(l, "largest_lease_age_ms");
    out->largest_lease = get_int(l, "largest_lease");
    const msgpack_object *mv = map_get(l, "moving");
    out->moving = mv && mv->type == MSGPACK_OBJECT_BOOLEAN && mv->via.boolean;
    const msgpack_object *st = map_get(l, "state");
    if (st && st->type == MSGPACK_OBJECT_STR)
        snprintf(out->state, sizeof(out->state), "%.*s", (int)st->via.str.size, st->via.str.ptr);
}

int fleet_query(tt_client_t *c, const char *id, fleet_row_t *out)
{
    memset(out, 0, sizeof(*out));
    tt_response_t r;
    if (tt_fleet(c, &r) != 0 || r.kind != TT_KIND_FLEET)
        return -1;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    int rc = -1;
    if (msgpack_unpack_next(&u, (const char *)r.raw, r.raw_len, NULL) == MSGPACK_UNPACK_SUCCESS) {
        const msgpack_object *limits = map_get(&u.data, "limits");
        for (uint32_t k = 0; rc != 0 && limits && limits->type == MSGPACK_OBJECT_ARRAY &&
                             k < limits->via.array.size;
             k++) {
            const msgpack_object *l = &limits->via.array.ptr[k];
            const msgpack_object *lid = map_get(l, "id");
            if (lid && key_is(lid, id)) {
                read_row(l, out);
                rc = 0;
            }
        }
    }
    msgpack_unpacked_destroy(&u);
    return rc;
}

int fleet_members(tt_client_t *c, uint64_t live[FLEET_MAX / 64])
{
    memset(live, 0, FLEET_MAX / 64 * sizeof(live[0]));
    tt_response_t r;
    if (tt_members(c, &r) != 0)
        return -1;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    int count = -1;
    if (msgpack_unpack_next(&u, (const char *)r.raw, r.raw_len, NULL) == MSGPACK_UNPACK_SUCCESS) {
        count = (int)get_int(&u.data, "live");
        const msgpack_object *ms = map_get(&u.data, "members");
        for (uint32_t k = 0; ms && ms->type == MSGPACK_OBJECT_ARRAY && k < ms->via.array.size;
             k++) {
            const msgpack_object *id = map_get(&ms->via.array.ptr[k], "id");
            const msgpack_object *st = map_get(&ms->via.array.ptr[k], "state");
            char name[16] = "";
            int i;
            if (id && id->type == MSGPACK_OBJECT_STR && id->via.str.size < sizeof(name))
                memcpy(name, id->via.str.ptr, id->via.str.size);
            if (sscanf(name, "r%d", &i) == 1 && i >= 0 && i < FLEET_MAX && st &&
                (key_is(st, "alive") || key_is(st, "suspect")))
                live[i / 64] |= UINT64_C(1) << (i % 64);
        }
    }
    msgpack_unpacked_destroy(&u);
    return count;
}

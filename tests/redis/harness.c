/* The test redis-server: see harness.h. */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

long long rh_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A port the kernel just handed out; redis-server binds it a moment later (a retry covers
 * the rare race with another process). */
int rh_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof(a);
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &n) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

bool rh_port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

static bool answers_ping(const rh_server_t *s)
{
    redisContext *c = rh_connect(s);
    if (c == NULL)
        return false;
    redisReply *r = redisCommand(c, "PING");
    /* a server that wants a password answers NOAUTH: it is up all the same */
    bool ok = r && ((r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0) ||
                    (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOAUTH", 6) == 0));
    freeReplyObject(r);
    redisFree(c);
    return ok;
}

/* Forks `argv` with the test's descriptors closed and output to /dev/null; the child dies
 * with the test (even one killed by a sanitizer or a timeout): ctest and Criterion wait for
 * every holder of their pipes. */
static pid_t fork_exec(const char *const *argv)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    execvp(argv[0], (char *const *)argv);
    _exit(127);
}

int rh_spawn_program(const char *const *argv, pid_t *pid)
{
    *pid = fork_exec(argv);
    return *pid > 0 ? 0 : -1;
}

int rh_poll_program(pid_t pid)
{
    int status;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == 0)
        return -2;
    return r == pid && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int rh_run_program(const char *const *argv, long long ms)
{
    pid_t pid;
    if (rh_spawn_program(argv, &pid) < 0)
        return -1;
    long long deadline = rh_now_ms() + ms;
    int rc;
    while ((rc = rh_poll_program(pid)) == -2) {
        if (rh_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            return -1;
        }
        usleep(10000); /* polling the child, bounded by the deadline */
    }
    return rc;
}

static int spawn(rh_server_t *s)
{
    char port[16], log[128], conf[128];
    snprintf(port, sizeof(port), "%d", s->port);
    snprintf(log, sizeof(log), "%s/redis.log", s->dir);
    snprintf(conf, sizeof(conf), "%s/redis.conf", s->dir);
    const char *argv[48] = {"redis-server"};
    int n = 1;
    if (s->sentinel) {
        argv[n++] = conf;
        argv[n++] = "--sentinel";
    }
    const char *base[] = {
        "--port",    port, "--bind", "127.0.0.1", "--unixsocket", s->sock, "--dir",       s->dir,
        "--logfile", log,  "--save", "",          "--appendonly", "no",    "--daemonize", "no"};
    for (size_t i = 0; i < sizeof(base) / sizeof(base[0]); i++)
        argv[n++] = base[i];
    for (int i = 0; s->extra && s->extra[i] && n < 47; i++)
        argv[n++] = s->extra[i];
    argv[n] = NULL;
    pid_t pid = fork_exec(argv);
    if (pid < 0)
        return -1;
    s->pid = pid;
    long long deadline = rh_now_ms() + 10000;
    while (rh_now_ms() < deadline) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) { /* it exited: port taken, or no binary */
            s->pid = 0;
            char cmd[160];
            snprintf(cmd, sizeof(cmd), "tail -n 3 %s/redis.log >&2", s->dir);
            if (system(cmd) != 0)
                fprintf(stderr, "redis-server exited at once (no log)\n");
            return -1;
        }
        if (answers_ping(s))
            return 0;
        usleep(10000); /* polling for readiness, bounded by the deadline */
    }
    rh_kill(s);
    return -1;
}

int rh_start_with(rh_server_t *s, const char *const *extra, const char *sentinel_conf)
{
    memset(s, 0, sizeof(*s));
    s->extra = extra;
    s->sentinel = sentinel_conf != NULL;
    snprintf(s->dir, sizeof(s->dir), "/tmp/tt-redis-XXXXXX");
    if (mkdtemp(s->dir) == NULL)
        return -1;
    snprintf(s->sock, sizeof(s->sock), "%s/redis.sock", s->dir);
    if (sentinel_conf != NULL) {
        char path[128];
        snprintf(path, sizeof(path), "%s/redis.conf", s->dir);
        FILE *f = fopen(path, "w");
        if (f == NULL || fputs(sentinel_conf, f) < 0 || fclose(f) != 0) {
            rh_stop(s);
            return -1;
        }
    }
    for (int attempt = 0; attempt < 5; attempt++) {
        s->port = rh_free_port();
        snprintf(s->address, sizeof(s->address), "127.0.0.1:%d", s->port);
        if (s->port > 0 && spawn(s) == 0)
            return 0;
    }
    rh_stop(s);
    return -1;
}

int rh_start(rh_server_t *s)
{
    return rh_start_with(s, NULL, NULL);
}

int rh_restart(rh_server_t *s)
{
    return s->pid ? 0 : spawn(s);
}

void rh_kill(rh_server_t *s)
{
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

void rh_pause(rh_server_t *s, bool paused)
{
    if (s->pid > 0)
        kill(s->pid, paused ? SIGSTOP : SIGCONT);
}

void rh_stop(rh_server_t *s)
{
    rh_pause(s, false);
    rh_kill(s);
    if (s->dir[0] == '\0')
        return;
    DIR *d = opendir(s->dir);
    if (d != NULL) {
        struct dirent *e;
        char path[512];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(path, sizeof(path), "%s/%s", s->dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(s->dir);
    s->dir[0] = '\0';
}

redisContext *rh_connect(const rh_server_t *s)
{
    struct timeval tv = {.tv_sec = 2};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", s->port, tv);
    if (c != NULL && c->err) {
        redisFree(c);
        return NULL;
    }
    if (c != NULL)
        redisSetTimeout(c, tv);
    if (c != NULL && s->password != NULL) {
        redisReply *r = redisCommand(c, "AUTH %s", s->password);
        bool ok = r && r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        if (!ok) {
            redisFree(c);
            return NULL;
        }
    }
    return c;
}

int rh_sentinel_replicas(const rh_server_t *s, const char *master)
{
    redisContext *c = rh_connect(s);
    redisReply *r = c ? redisCommand(c, "SENTINEL REPLICAS %s", master) : NULL;
    int n = r && r->type == REDIS_REPLY_ARRAY ? (int)r->elements : -1;
    freeReplyObject(r);
    if (c)
        redisFree(c);
    return n;
}

int rh_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    int ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

int rh_resolve_as(const char *dir, const char *name, const char *const *addresses, char *why,
                  size_t whysz)
{
    char path[128], text[512] = "";
    size_t used = 0;
    for (size_t i = 0; addresses[i] != NULL; i++)
        used += (size_t)snprintf(text + used, sizeof(text) - used, "%s %s\n", addresses[i], name);
    snprintf(path, sizeof(path), "%s/hosts", dir);
    if (used >= sizeof(text) || rh_write_file(path, text) < 0) {
        snprintf(why, whysz, "cannot write %s", path);
        return -1;
    }
    if (geteuid() != 0 || unshare(CLONE_NEWNS) < 0 ||
        mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) < 0 ||
        mount(path, "/etc/hosts", "none", MS_BIND, NULL) < 0) {
        snprintf(why, whysz, "a hosts file of the test's own needs root and a mount namespace: %s",
                 strerror(errno));
        return -1;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(name, "6379", &hints, &res);
    const struct addrinfo *a = res;
    size_t i = 0;
    for (; rc == 0 && a != NULL && addresses[i] != NULL; a = a->ai_next, i++) {
        char ip[INET6_ADDRSTRLEN] = "";
        const void *bytes = a->ai_family == AF_INET6
                                ? (const void *)&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr
                                : (const void *)&((struct sockaddr_in *)a->ai_addr)->sin_addr;
        inet_ntop(a->ai_family, bytes, ip, sizeof(ip));
        if (strcmp(ip, addresses[i]) != 0)
            break;
    }
    bool same = rc == 0 && a == NULL && addresses[i] == NULL;
    snprintf(why, whysz, "%s resolves otherwise here (%s): the order this test needs is not given",
             name, rc == 0 ? "reordered" : gai_strerror(rc));
    if (res != NULL)
        freeaddrinfo(res);
    return same ? 0 : -1;
}

static void on_tick(uv_timer_t *t)
{
    (void)t;
}

bool rh_run_until(uv_loop_t *loop, bool (*pred)(void *), void *arg, long long ms)
{
    uv_timer_t tick;
    uv_timer_init(loop, &tick);
    uv_timer_start(&tick, on_tick, 5, 5);
    long long deadline = rh_now_ms() + ms;
    bool ok;
    while (!(ok = pred(arg)) && rh_now_ms() < deadline)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    return ok;
}

int rh_suite_start(rh_server_t *s, uv_loop_t *loop)
{
    uv_loop_init(loop);
    return rh_start(s);
}

int rh_suite_stop(rh_server_t *s, uv_loop_t *loop)
{
    uv_run(loop, UV_RUN_DEFAULT); /* the stores' close callbacks */
    int rc = uv_loop_close(loop);
    rh_stop(s);
    return rc;
}

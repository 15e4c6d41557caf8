/* See daemon.h. */
#include "daemon.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

long long tt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_ms(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

int tt_daemon_config_text(const tt_daemon_t *d, const char *limits_yaml, const char *server_extra,
                          char *buf, size_t size)
{
    /* HTTP off unless the test asks for it (many daemons run at once) */
    bool http = server_extra && strstr(server_extra, "http:");
    int n = snprintf(buf, size,
                     "server:\n  socket: %s\n%s%sgovernance:\n  keys: { disclose_limits: true }\n"
                     "  limits:\n%s",
                     d->socket, http ? "" : "  http: \"\"\n", server_extra ? server_extra : "",
                     limits_yaml);
    return n < 0 || (size_t)n >= size ? -1 : n;
}

static int write_config(tt_daemon_t *d, const char *limits_yaml, const char *server_extra)
{
    static char text[1 << 16];
    char tmp[320];
    int n = tt_daemon_config_text(d, limits_yaml, server_extra, text, sizeof(text));
    snprintf(tmp, sizeof(tmp), "%s.tmp", d->config);
    FILE *f = n < 0 ? NULL : fopen(tmp, "w");
    if (!f)
        return -1;
    fwrite(text, 1, (size_t)n, f);
    fclose(f);
    return rename(tmp, d->config); /* a reload never reads half a file */
}

tt_client_t *tt_daemon_client(const tt_daemon_t *d)
{
    tt_client_t *c;
    if (tt_connect(&c, d->socket) != 0)
        return NULL;
    tt_set_timeout(c, 5000);
    return c;
}

int tt_daemon_start(tt_daemon_t *d, const char *limits_yaml, const char *server_extra)
{
    return tt_daemon_start_binary(d, NULL, limits_yaml, server_extra);
}

int tt_daemon_prepare(tt_daemon_t *d, const char *binary)
{
    memset(d, 0, sizeof(*d));
    d->binary = binary;
    snprintf(d->dir, sizeof(d->dir), "/tmp/tt-test-XXXXXX");
    if (!mkdtemp(d->dir))
        return -1;
    snprintf(d->config, sizeof(d->config), "%s/config.yaml", d->dir);
    snprintf(d->socket, sizeof(d->socket), "%s/tt.sock", d->dir);
    snprintf(d->log, sizeof(d->log), "%s/stderr.log", d->dir);
    return 0;
}

int tt_daemon_start_binary(tt_daemon_t *d, const char *binary, const char *limits_yaml,
                           const char *server_extra)
{
    if (tt_daemon_prepare(d, binary) || write_config(d, limits_yaml, server_extra))
        return -1;
    return tt_daemon_spawn(d, true);
}

/* Under valgrind a daemon starts and stops ~20x slower: the deadlines stretch with it. */
int tt_slowdown(void)
{
    const char *vg = getenv("TT_VALGRIND");
    return vg && *vg ? 20 : 1;
}

int tt_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

int tt_daemon_spawn(tt_daemon_t *d, bool wait)
{
    d->exit_status = -1;
    d->pid = fork();
    if (d->pid < 0)
        return -1;
    if (d->pid == 0) {
        /* a test killed before its cleanup (a timeout, a crash) takes its daemon along */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        int fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fd, 2);
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        unsetenv("TOKENTRIAGE_SOCKET");
        const char *bin = d->binary ? d->binary : TT_BINARY_DIR "/cmd/tokentriage";
        const char *vg = getenv("TT_VALGRIND"); /* scripts/valgrind.sh: memcheck, logs there */
        if (vg && *vg) {
            char log[512];
            snprintf(log, sizeof(log), "--log-file=%s/vg.%%p.log", vg);
            execlp("valgrind", "valgrind", "--leak-check=full", "--error-exitcode=99",
                   "--track-fds=no", log, bin, "serve", "-c", d->config, (char *)NULL);
        }
        execl(bin, "tokentriage", "serve", "-c", d->config, (char *)NULL);
        _exit(127);
    }
    for (long long deadline = tt_now_ms() + 10000 * tt_slowdown(); tt_now_ms() < deadline;
         pause_ms(5)) {
        int st;
        if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
            d->exit_status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
            d->pid = 0;
            if (wait)
                fprintf(stderr, "tokentriage serve exited early; see %s\n", d->log);
            return -1;
        }
        if (!wait)
            continue;
        tt_client_t *c = tt_daemon_client(d);
        if (c) {
            tt_response_t r;
            int rc = tt_ping(c, &r);
            tt_close(c);
            if (rc == 0)
                return 0;
        }
    }
    fprintf(stderr, "tokentriage serve did not answer within %d s\n", 10 * tt_slowdown());
    return -1;
}

int tt_daemon_rewrite(tt_daemon_t *d, const char *limits_yaml, const char *server_extra)
{
    if (write_config(d, limits_yaml, server_extra))
        return -1;
    return d->pid > 0 ? kill(d->pid, SIGHUP) : 0;
}

bool tt_daemon_log_has(const tt_daemon_t *d, const char *needle, int timeout_ms)
{
    static char buf[1 << 20];
    for (long long deadline = tt_now_ms() + timeout_ms;; pause_ms(5)) {
        FILE *f = fopen(d->log, "r");
        if (f) {
            size_t n = fread(buf, 1, sizeof(buf) - 1, f);
            fclose(f);
            buf[n] = 0;
            if (strstr(buf, needle))
                return true;
        }
        if (tt_now_ms() >= deadline)
            return false;
    }
}

int tt_daemon_log_lines(const tt_daemon_t *d, const char *a, const char *b)
{
    FILE *f = fopen(d->log, "r");
    if (!f)
        return -1;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, a) && strstr(line, b);
    fclose(f);
    return n;
}

long tt_daemon_rss_kib(const tt_daemon_t *d)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)d->pid);
    FILE *f = fopen(path, "r");
    long kib = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

int tt_daemon_kill(tt_daemon_t *d, int sig)
{
    int status = -1;
    if (d->pid > 0) {
        kill(d->pid, sig);
        long long deadline = tt_now_ms() + 10000 * tt_slowdown();
        int st;
        while (waitpid(d->pid, &st, WNOHANG) == 0) {
            if (tt_now_ms() >= deadline) {
                kill(d->pid, SIGKILL);
                waitpid(d->pid, &st, 0);
                st = -1;
                break;
            }
            pause_ms(5);
        }
        if (st != -1 && WIFEXITED(st))
            status = WEXITSTATUS(st);
        d->pid = 0;
    }
    return status;
}

int tt_daemon_stop(tt_daemon_t *d)
{
    int status = tt_daemon_kill(d, SIGTERM);
    char cmd[320];
    if (d->dir[0] && getenv("TT_KEEP_TEST_DIRS") == NULL) {
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", d->dir);
    }
    return status;
}

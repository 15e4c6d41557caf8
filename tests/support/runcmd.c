/* See runcmd.h. */
#define _GNU_SOURCE
#include "runcmd.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct sink {
    int fd;
    char *buf;
    size_t len;
} sink_t;

/* Reads what is there; returns 1 at end of stream. */
static int drain(sink_t *s)
{
    char chunk[4096];
    ssize_t n = read(s->fd, chunk, sizeof(chunk));
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    if (n <= 0)
        return 1;
    size_t keep = s->len + (size_t)n > RUNCMD_MAX ? RUNCMD_MAX - s->len : (size_t)n;
    memcpy(s->buf + s->len, chunk, keep);
    s->len += keep;
    return 0;
}

static void child(const runcmd_opts_t *o, const char *const *argv, int in, int out, int err)
{
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    if (o && o->cwd && chdir(o->cwd) != 0)
        _exit(127);
    for (const char **e = o ? o->env : NULL; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (eq) {
            char name[256];
            snprintf(name, sizeof(name), "%.*s", (int)(eq - *e), *e);
            setenv(name, eq + 1, 1);
        } else {
            unsetenv(*e);
        }
    }
    execvp(argv[0], (char *const *)argv);
    _exit(127);
}

int runcmd(runcmd_t *r, const runcmd_opts_t *o, const char *const *argv)
{
    memset(r, 0, sizeof(*r));
    r->status = -1;
    sink_t s[2] = {{.buf = malloc(RUNCMD_MAX + 1)}, {.buf = malloc(RUNCMD_MAX + 1)}};
    int po[2], pe[2], pi[2];
    if (!s[0].buf || !s[1].buf || pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC) ||
        pipe2(pi, O_CLOEXEC)) {
        free(s[0].buf);
        free(s[1].buf);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0)
        child(o, argv, pi[0], po[1], pe[1]);
    close(pi[0]);
    close(po[1]);
    close(pe[1]);
    /* stdin: the text, then end of file (a short text fits the pipe; a long one is a test bug) */
    const char *in = o && o->in ? o->in : "";
    size_t in_len = strlen(in);
    signal(SIGPIPE, SIG_IGN);
    if (in_len && write(pi[1], in, in_len) != (ssize_t)in_len) {
        /* the child may not read it all: what it read is what it got */
    }
    close(pi[1]);
    s[0].fd = po[0];
    s[1].fd = pe[0];
    long long deadline = now_ms() + (o && o->timeout_ms ? o->timeout_ms : 30000);
    int open_ = 2;
    while (pid > 0 && open_ > 0) {
        struct pollfd p[2];
        nfds_t n = 0;
        for (int i = 0; i < 2; i++)
            if (s[i].fd >= 0)
                p[n++] = (struct pollfd){.fd = s[i].fd, .events = POLLIN};
        long long left = deadline - now_ms();
        if (left <= 0) {
            kill(pid, SIGKILL);
            r->timed_out = 1;
            break;
        }
        if (poll(p, n, (int)left) < 0 && errno != EINTR)
            break;
        for (nfds_t k = 0; k < n; k++) {
            if (!p[k].revents)
                continue;
            sink_t *sk = p[k].fd == s[0].fd ? &s[0] : &s[1];
            if (drain(sk)) {
                close(sk->fd);
                sk->fd = -1;
                open_--;
            }
        }
    }
    for (int i = 0; i < 2; i++)
        if (s[i].fd >= 0)
            close(s[i].fd);
    int st;
    if (pid > 0 && waitpid(pid, &st, 0) == pid)
        r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    s[0].buf[s[0].len] = '\0';
    s[1].buf[s[1].len] = '\0';
    r->out = s[0].buf;
    r->out_len = s[0].len;
    r->err = s[1].buf;
    r->err_len = s[1].len;
    return r->status;
}

int runcmdl(runcmd_t *r, const runcmd_opts_t *o, const char *arg0, ...)
{
    const char *argv[64];
    size_t n = 0;
    va_list ap;
    va_start(ap, arg0);
    for (const char *a = arg0; a && n < 63; a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    return runcmd(r, o, argv);
}

void runcmd_free(runcmd_t *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

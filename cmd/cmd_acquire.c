/*
 * tokentriage acquire [-s SOCK] --subject LEVEL=ID... [--] COMMAND [ARG...]
 *
 * Concurrency limits from a shell: takes a lease of every concurrency limit the subject
 * reaches, runs COMMAND while holding it, and exits with COMMAND's status. The lease's life is
 * the socket connection's (docs/protocol.md, "acquire / release"): this process keeps it open
 * while it waits for COMMAND, releases the lease when COMMAND ends, and if this process dies
 * (SIGKILL, a crash) the daemon sees the connection close and frees the slot itself, so a slot
 * never leaks. A denial runs nothing and exits 75 (EX_TEMPFAIL: try again later).
 *
 * Signals: SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 sent to acquire are passed to COMMAND (a
 * supervisor stopping acquire stops the work); SIGINT and SIGQUIT are ignored while COMMAND
 * runs, as system() does, since the terminal sends them to COMMAND itself.
 */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "cmd.h"

#define EX_TEMPFAIL_ 75 /* denied: the command did not run */

#define HELP                                                                                       \
    "usage: tokentriage acquire [-s SOCKET] --subject LEVEL=ID... [--] COMMAND [ARG...]\n"         \
    "\n"                                                                                           \
    "Runs COMMAND holding a lease of every concurrency limit the subject reaches (type\n"          \
    "concurrency: a live count of work in flight per key), and exits with COMMAND's status.\n"     \
    "These limits are reached only by acquire: decide, HTTP /v1/decide and Envoy's gRPC never\n"   \
    "count them. The lease lives as long as this process's connection to the daemon: it is\n"      \
    "released when COMMAND ends, and if acquire itself dies the daemon frees it. A denial (the\n"  \
    "limit's slots are all held) runs nothing and exits 75; retry later.\n"                        \
    "\n"                                                                                           \
    "options:\n" CLI_HELP_SOCKET                                                                   \
    "  --subject LEVEL=ID   one level of the subject, e.g. key=k-1; repeat for each level\n"       \
    "                       (required; at most 16)\n" CLI_HELP_HELP                                \
    "Options end at COMMAND (or at --): what follows is COMMAND's.\n"                              \
    "\n"                                                                                           \
    "signals: SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 are passed to COMMAND; SIGINT and SIGQUIT\n"    \
    "reach it from the terminal and are ignored by acquire meanwhile.\n"                           \
    "\n"                                                                                           \
    "exit status: COMMAND's (128 + N when a signal N ended it; 126 it cannot run, 127 not\n"       \
    "found); 75 denied, COMMAND not run; 64 usage; 65 the daemon refused the request (its error\n" \
    "on stderr); 69 no daemon answers on the socket; 70 cannot start COMMAND.\n"

static volatile sig_atomic_t child_pid;

static void forward(int sig)
{
    if (child_pid > 0)
        kill((pid_t)child_pid, sig);
}

/* Runs argv with the caller's stdin, stdout and stderr; returns its exit status as a shell
 * reports it. The client's socket is close-on-exec: the command cannot end the lease. The
 * forwarded signals are blocked from before the fork until child_pid holds the command's pid:
 * one that came in between would have found no pid to forward to and been lost (acquire then
 * waited for a command that was never told to stop). The child takes its handlers back before
 * it unblocks them, so what was sent to it meanwhile reaches the command. */
static int run_command(char **argv)
{
    static const int forwarded[] = {SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
    struct sigaction fwd = {.sa_handler = forward}, ign = {.sa_handler = SIG_IGN}, old[4], oint,
                     oquit;
    sigset_t held, mask;
    sigemptyset(&fwd.sa_mask);
    sigemptyset(&ign.sa_mask);
    sigemptyset(&held);
    for (int i = 0; i < 4; i++)
        sigaddset(&held, forwarded[i]);
    int pipefd[2]; /* exec's failure reaches the parent through a close-on-exec pipe */
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        fprintf(stderr, "tokentriage acquire: pipe: %s\n", strerror(errno));
        return EX_SOFTWARE_;
    }
    sigprocmask(SIG_BLOCK, &held, &mask);
    for (int i = 0; i < 4; i++)
        sigaction(forwarded[i], &fwd, &old[i]);
    sigaction(SIGINT, &ign, &oint);
    sigaction(SIGQUIT, &ign, &oquit);
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 4; i++)
            sigaction(forwarded[i], &old[i], NULL);
        sigaction(SIGINT, &oint, NULL);
        sigaction(SIGQUIT, &oquit, NULL);
        sigprocmask(SIG_SETMASK, &mask, NULL);
        close(pipefd[0]);
        execvp(argv[0], argv);
        int e = errno;
        (void)!write(pipefd[1], &e, sizeof(e));
        _exit(e == ENOENT ? 127 : 126);
    }
    close(pipefd[1]);
    if (pid > 0)
        child_pid = pid;
    sigprocmask(SIG_SETMASK, &mask, NULL); /* what came since the fork is forwarded now */
    int status = EX_SOFTWARE_;
    if (pid < 0) {
        fprintf(stderr, "tokentriage acquire: fork: %s\n", strerror(errno));
    } else {
        int e = 0;
        ssize_t got;
        while ((got = read(pipefd[0], &e, sizeof(e))) < 0 && errno == EINTR)
            ;
        if (got == sizeof(e))
            fprintf(stderr, "tokentriage acquire: %s: %s\n", argv[0], strerror(e));
        int st;
        pid_t w;
        while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
            ;
        if (w == pid)
            status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        child_pid = 0;
    }
    close(pipefd[0]);
    for (int i = 0; i < 4; i++)
        sigaction(forwarded[i], &old[i], NULL);
    sigaction(SIGINT, &oint, NULL);
    sigaction(SIGQUIT, &oquit, NULL);
    return status;
}

int cmd_acquire(int argc, char **argv)
{
    static const struct option opts[] = {{"socket", required_argument, NULL, 's'},
                                         {"subject", required_argument, NULL, 'S'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    cli_common_t o = {0};
    cli_subject_t subject = {.n = 0};
    int ch, rc;
    optind = 1;
    /* "+": options end at the first word that is not one, so COMMAND's own stay its own */
    while ((ch = cmd_getopt(argc, argv, "+s:h", opts, HELP)) != -1) {
        if (ch == 'S' && cli_subject_add(&subject, optarg, HELP))
            return EX_USAGE_;
        if (ch != 'S' && (rc = cli_common_option(ch, &o, HELP)) != CLI_CONTINUE)
            return rc;
    }
    if (subject.n == 0 || optind == argc)
        return cmd_usage_error(HELP, "%s",
                               subject.n ? "COMMAND is required" : "--subject is required");
    tt_client_t *c = cli_connect(o.sock, "acquire");
    if (!c)
        return EX_UNAVAILABLE_;
    static tt_response_t r;
    rc = tt_acquire(c, subject.pairs, subject.n, &r);
    if (rc != 0) {
        rc = cli_fail(rc, &r, "acquire");
        tt_close(c);
        return rc;
    }
    if (!r.admit) {
        fprintf(stderr,
                "tokentriage acquire: denied by %s (every slot is held; retry after %llds): %s "
                "not run\n",
                r.limit[0] ? r.limit : "a concurrency limit", (long long)r.retry_after,
                argv[optind]);
        tt_close(c);
        return EX_TEMPFAIL_;
    }
    int status = run_command(argv + optind);
    static tt_response_t rel;
    (void)tt_release(c, r.lease, &rel); /* closing would release it too; this says so first */
    tt_close(c);
    return status;
}

/*
 * A real `tokentriage serve` for multi-process tests: a private directory with the config and
 * the socket, the binary started with fork/exec, readiness polled with a deadline (never a
 * blind sleep), SIGTERM and a bounded wait at the end.
 */
#ifndef TT_TESTS_DAEMON_H
#define TT_TESTS_DAEMON_H

#include <stdbool.h>
#include <sys/types.h>

#include "tokentriage.h"

typedef struct tt_daemon {
    pid_t pid;
    char dir[256];      /* removed by tt_daemon_stop */
    char config[300];   /* dir/config.yaml */
    char socket[300];   /* dir/tt.sock */
    char log[300];      /* dir/stderr.log: the daemon's logs */
    int exit_status;    /* when tt_daemon_spawn saw it exit */
    const char *binary; /* tt_daemon_start_binary's, for tt_daemon_spawn (NULL: tokentriage) */
} tt_daemon_t;

/*
 * Writes `limits_yaml` (the entries under governance.limits, already indented by 4 spaces) and
 * `server_extra` (more lines under server:, indented by 2, or NULL) into a config, starts the
 * daemon on it and waits until its socket answers a ping. Returns 0, or -1 (logged to stderr).
 */
int tt_daemon_start(tt_daemon_t *d, const char *limits_yaml, const char *server_extra);
/* The same with another daemon binary (tests/server/tt_fault_daemon); NULL: tokentriage. */
int tt_daemon_start_binary(tt_daemon_t *d, const char *binary, const char *limits_yaml,
                           const char *server_extra);

/* Makes the private directory and fills in the paths, writing no config and starting nothing:
 * for a test that lays the config out itself, then calls tt_daemon_spawn. */
int tt_daemon_prepare(tt_daemon_t *d, const char *binary);

/* Starts the binary again on the same directory (after a crash, or to see a second daemon
 * refused). Waits for readiness when wait is true; returns 0, or -1 when it did not come up
 * (d->exit_status then holds its exit status, if it exited). */
int tt_daemon_spawn(tt_daemon_t *d, bool wait);

/* The config text tt_daemon_start and tt_daemon_rewrite write for these arguments, into buf:
 * its length, or -1 when it does not fit. */
int tt_daemon_config_text(const tt_daemon_t *d, const char *limits_yaml, const char *server_extra,
                          char *buf, size_t size);

/* Rewrites the config (same arguments) and sends SIGHUP when the daemon runs; the caller polls
 * for the effect. */
int tt_daemon_rewrite(tt_daemon_t *d, const char *limits_yaml, const char *server_extra);

/* Sends sig and waits (bounded; SIGKILL past 10 s) for the exit; the directory stays, so
 * tt_daemon_spawn can start the daemon again on it. Returns the exit status, or -1 when it was
 * killed by a signal or had to be. */
int tt_daemon_kill(tt_daemon_t *d, int sig);

/* SIGTERM, then waits (bounded) for the exit. Returns the exit status, or -1 when it had to be
 * killed. Removes the directory. */
int tt_daemon_stop(tt_daemon_t *d);

/* Connects a client to the daemon; NULL on failure. */
tt_client_t *tt_daemon_client(const tt_daemon_t *d);

/* True once `needle` appears in the daemon's log within timeout_ms. */
bool tt_daemon_log_has(const tt_daemon_t *d, const char *needle, int timeout_ms);
/* How many of the daemon's log lines hold both `a` and `b` (-1: no log). */
int tt_daemon_log_lines(const tt_daemon_t *d, const char *a, const char *b);

/* Resident memory of the daemon in KiB (from /proc), or -1. */
long tt_daemon_rss_kib(const tt_daemon_t *d);

/* Milliseconds on a monotonic clock, for deadlines. */
long long tt_now_ms(void);

/* How many times slower the daemons run here: 20 under valgrind (TT_VALGRIND), else 1. A test's
 * own deadlines stretch with it. */
int tt_slowdown(void);

/* A loopback TCP port nobody listens on right now: bound to port 0, read back, let go. */
int tt_free_port(void);

#endif

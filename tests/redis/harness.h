/*
 * A real redis-server for the tests: started on a free loopback port (and a unix socket) in a
 * temporary directory, polled for readiness with a deadline, killed and restarted on the same
 * port on demand, and removed with its directory at the end. Prefix rh_ (redis harness).
 */
#ifndef TT_TESTS_REDIS_HARNESS_H
#define TT_TESTS_REDIS_HARNESS_H

#include <stdbool.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>
#include <uv.h>

typedef struct rh_server {
    pid_t pid; /* 0 when not running */
    int port;
    char dir[64];
    char sock[96];    /* the unix socket path */
    char address[32]; /* "127.0.0.1:<port>" */
    /* more arguments, kept for restarts: "--cluster-enabled", "yes", ... (NULL-ended) */
    const char *const *extra;
    bool sentinel; /* a redis.conf written from conf_text, run with --sentinel */
    /* set after the start when the server wants one: rh_connect authenticates with it */
    const char *password;
} rh_server_t;

/* A loopback port the kernel just handed out (for a second port of a server: tls-port). */
int rh_free_port(void);

/* Whether `port` on loopback can be bound right now (a cluster's bus port, 10000 above). */
bool rh_port_free(int port);

/* Starts a server and waits (at most 10 s) until it answers PING. 0 or -1. */
int rh_start(rh_server_t *s);

/*
 * rh_start with more arguments (`extra`, NULL-ended, must outlive the server) and, when
 * `sentinel_conf` is not NULL, as a Sentinel: the text is written to dir/redis.conf (which
 * Sentinel rewrites as it learns). 0 or -1.
 */
int rh_start_with(rh_server_t *s, const char *const *extra, const char *sentinel_conf);

/* Runs a program (argv NULL-ended; its output discarded) and waits at most `ms` for it.
 * Returns its exit status, or -1 (not run, killed by a signal, or killed at the deadline). */
int rh_run_program(const char *const *argv, long long ms);

/* Starts a program in the background (output discarded); *pid is for rh_wait_program. */
int rh_spawn_program(const char *const *argv, pid_t *pid);

/* Exit status of a program started by rh_spawn_program once it ended, else -2 (still running);
 * -1 when it died by a signal. Does not block. */
int rh_poll_program(pid_t pid);

/* Starts it again on the same port and socket after rh_kill. 0 or -1. */
int rh_restart(rh_server_t *s);

/* SIGKILL, then reap: the server is gone at once, as in a crash. */
void rh_kill(rh_server_t *s);

/* SIGSTOP / SIGCONT: a server that stops answering without closing its connections. */
void rh_pause(rh_server_t *s, bool paused);

/* Stops the server (if running) and removes the directory. */
void rh_stop(rh_server_t *s);

/* A synchronous connection for test set-up and checks (AUTH with s->password when set); the
 * caller frees it. */
redisContext *rh_connect(const rh_server_t *s);

/* How many replicas Sentinel `s` knows for `master` (SENTINEL REPLICAS), or -1. */
int rh_sentinel_replicas(const rh_server_t *s, const char *master);

/* Writes `text` to `path` (a password file, a config). 0 or -1. */
int rh_write_file(const char *path, const char *text);

/*
 * Makes `name` resolve to `addresses` (NULL-ended numeric addresses), in that order, for this
 * process: an /etc/hosts of those lines is written to dir/hosts and bind-mounted over /etc/hosts
 * in a mount namespace of the calling thread's own, which the threads it starts later (libuv's
 * resolver) share and nothing else sees; it ends with the process (Criterion runs each test in
 * its own). Then getaddrinfo (AF_UNSPEC, SOCK_STREAM) is asked, and must answer the addresses
 * in the order given. 0, or -1 with `why` (not root, mounts not permitted, a resolver that
 * reorders them): the caller skips.
 */
int rh_resolve_as(const char *dir, const char *name, const char *const *addresses, char *why,
                  size_t whysz);

/* Milliseconds on a monotonic clock, for deadlines. */
long long rh_now_ms(void);

/* A suite's set-up: a server and a fresh loop. 0 or -1. */
int rh_suite_start(rh_server_t *s, uv_loop_t *loop);

/* A suite's tear-down: runs the loop until every handle closed, closes it, stops the server.
 * Returns uv_loop_close's answer (nonzero: a handle was left open). */
int rh_suite_stop(rh_server_t *s, uv_loop_t *loop);

/* Runs `loop` until pred(arg) holds or `ms` pass (a 5 ms tick re-checks the predicate between
 * events). Returns whether it holds. */
bool rh_run_until(uv_loop_t *loop, bool (*pred)(void *), void *arg, long long ms);

#endif

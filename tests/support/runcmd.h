/*
 * Runs a program as a user runs it, for the tests of the command line: no shell, stdin from a
 * string (or /dev/null), stdout and stderr captured apart and whole, bounded in time (SIGKILL
 * at the deadline, reported as such). One of these for every test that runs `tokentriage`.
 */
#ifndef TT_TESTS_RUNCMD_H
#define TT_TESTS_RUNCMD_H

#include <stddef.h>

#define RUNCMD_MAX (1 << 20) /* bytes kept of each stream; more is read and dropped */

typedef struct runcmd {
    int status;    /* the exit code; 128 + N when killed by signal N; -1: could not run */
    int timed_out; /* killed at the deadline */
    char *out;     /* stdout, NUL-terminated (owned: runcmd_free) */
    char *err;     /* stderr, NUL-terminated (owned: runcmd_free) */
    size_t out_len, err_len;
} runcmd_t;

typedef struct runcmd_opts {
    const char *cwd;  /* NULL: the test's own */
    const char *in;   /* stdin's whole text; NULL: /dev/null */
    int timeout_ms;   /* 0: 30 s */
    const char **env; /* "NAME=value" set (or "NAME" unset) in the child, NULL-terminated */
} runcmd_opts_t;

/* Runs argv (argv[0] looked up in PATH when it has no '/'), waits for it within the deadline,
 * fills r. Returns r->status. */
int runcmd(runcmd_t *r, const runcmd_opts_t *o, const char *const *argv);

/* The same with the arguments listed: runcmdl(&r, NULL, BIN, "version", NULL). */
int runcmdl(runcmd_t *r, const runcmd_opts_t *o, const char *arg0, ...);

/* Frees what r holds (r stays usable for another run). */
void runcmd_free(runcmd_t *r);

#endif

/*
 * Reading the vector files, tests/vectors/NAME.vec (format: CONTRACTS.md, docs/algorithms.md). Test
 * support only: it allocates freely and reports the first malformed line with its file and number.
 */
#ifndef TT_TESTS_VECFILE_H
#define TT_TESTS_VECFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ratealg.h"

typedef struct vec_step {
    char algorithm[32];
    int64_t amount, period_ns, burst;
    int64_t share_num, share_den, unit; /* 1 1 1 = plain */
    int64_t state_before, now, cost;
    bool admit, unfittable;
    int64_t remaining, retry_after_s, reset_after_s, state_after;
    int line;            /* 1-based line number in its file */
    bool opens_sequence; /* first step line after the top of the file or a blank line */
} vec_step_t;

typedef struct vec_file {
    char path[512];
    vec_step_t *steps;
    size_t n;
} vec_file_t;

/* Loads one file. Returns 0, or -1 with "<path>:<line>: <what>" in err. */
int vec_load(const char *path, vec_file_t *out, char *err, size_t err_size);
void vec_free(vec_file_t *f);

/* The paths of every *.vec in dir, sorted; returns how many (at most max). */
size_t vec_list(const char *dir, char paths[][512], size_t max);

/* Arms the limiter a step names: ra_limiter_init, then ra_limiter_effective unless the share
 * is 1 1 1. Returns 0 or the negative RA_E* code. */
int vec_limiter(const vec_step_t *s, ra_limiter_t *out);

/* True when two steps name the same limiter (algorithm, amount, period, burst, share, unit). */
bool vec_same_limiter(const vec_step_t *a, const vec_step_t *b);

#endif

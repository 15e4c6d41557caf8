/*
 * Reading the header vector table, tests/vectors/headers.txt (its head comment gives the
 * format): each case's numbers, as a decision discloses them, and the headers every renderer
 * must write from them. Test support only; a malformed line fails with its number.
 */
#ifndef TT_TESTS_HDRVEC_H
#define TT_TESTS_HDRVEC_H

#include <stdbool.h>
#include <stdio.h>

#include "ratehdr.h"

#define HDRVEC_PATH TT_SOURCE_DIR "/tests/vectors/headers.txt"

typedef struct hdrvec_case {
    char name[64];
    int line;
    proto_disclosed_t d;
    int n_want;
    char want[PROTO_RATE_HEADERS_MAX + 1][2][PROTO_HEADER_VALUE_MAX + 1]; /* name, value */
} hdrvec_case_t;

/* Reads the next case into c (*line counts the file's lines). Returns 1, 0 at the end of the
 * file, or -1 with "headers.txt:LINE: what" in err. */
int hdrvec_next(FILE *in, hdrvec_case_t *c, int *line, char *err, size_t err_size);

#endif

/* The one error table (common/tt_err.h). Values are kept distinct by the compiler (tt_err.c
 * switches on them); the wire names are held to tests/vectors/error_codes.txt, written apart
 * from the table, since a name is what an answer, a metric label and a client show. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tt_err.h"

#define VECTORS TT_SOURCE_DIR "/tests/vectors/error_codes.txt"

static const struct row {
    int code;
    const char *message;
} rows[] = {
#define ROW_(name, value, wire, msg) {value, msg},
    TT_ERRNO_MAP(ROW_)
#undef ROW_
};
#define N (sizeof rows / sizeof *rows)

/* The pinned table: value and name per line. */
static struct pinned {
    int code;
    char name[64];
} pinned[256];
static size_t n_pinned;

static void read_pinned(void)
{
    FILE *f = fopen(VECTORS, "r");
    cr_assert_not_null(f, "%s", VECTORS);
    char line[256];
    n_pinned = 0;
    while (fgets(line, sizeof(line), f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        cr_assert_lt(n_pinned, sizeof pinned / sizeof *pinned);
        struct pinned *p = &pinned[n_pinned++];
        cr_assert_eq(sscanf(line, "%d %63s", &p->code, p->name), 2, "%s: %s", VECTORS, line);
    }
    fclose(f);
}

Test(tt_err, every_pinned_code_has_its_pinned_name)
{
    read_pinned();
    cr_assert_gt(n_pinned, 0);
    for (size_t i = 0; i < n_pinned; i++)
        cr_assert_str_eq(tt_err_name(pinned[i].code), pinned[i].name, "code %d", pinned[i].code);
}

Test(tt_err, every_code_is_pinned_negative_with_a_message_and_a_name_of_its_own)
{
    read_pinned();
    for (size_t i = 0; i < N; i++) {
        const char *name = tt_err_name(rows[i].code);
        cr_assert_lt(rows[i].code, 0, "%s", name);
        bool found = false;
        for (size_t j = 0; j < n_pinned && !found; j++)
            found = pinned[j].code == rows[i].code;
        cr_assert(found, "code %d (%s) is not in %s", rows[i].code, name, VECTORS);
        cr_assert_str_eq(tt_err_message(rows[i].code), rows[i].message);
        cr_assert_gt(strlen(rows[i].message), 0, "%s", name);
        for (size_t j = 0; j < i; j++)
            cr_assert_str_neq(name, tt_err_name(rows[j].code), "two codes named %s", name);
    }
    cr_assert_str_eq(tt_err_name(12345), "error");
    cr_assert_str_eq(tt_err_message(12345), "unknown error");
}

Test(tt_err, the_detail_carries_code_path_and_message)
{
    tt_err_t e;
    cr_assert_eq(tt_err_set(&e, TT_ERR_SUBJECT, "subject.team", "%d bytes", 300), TT_ERR_SUBJECT);
    char buf[256];
    cr_assert_str_eq(tt_err_format(&e, buf, sizeof(buf)), "subject.team: 300 bytes");
    cr_assert_eq(tt_err_set(NULL, TT_ERR_NOMEM, NULL, "x"), TT_ERR_NOMEM);
}

/* The one error table (common/tt_err.h). Values are kept distinct by the compiler (tt_err.c
 * switches on them); names are checked here, since a name is what a metric or an answer shows. */
#include <criterion/criterion.h>
#include <string.h>

#include "tt_err.h"

static const struct row {
    int code;
    const char *name, *message;
} rows[] = {
#define ROW_(name, value, wire, msg) {value, wire, msg},
    TT_ERRNO_MAP(ROW_)
#undef ROW_
};
#define N (sizeof rows / sizeof *rows)

Test(tt_err, every_code_is_negative_and_has_its_own_name_and_a_message)
{
    for (size_t i = 0; i < N; i++) {
        cr_assert_lt(rows[i].code, 0, "%s", rows[i].name);
        cr_assert_str_eq(tt_err_name(rows[i].code), rows[i].name);
        cr_assert_str_eq(tt_err_message(rows[i].code), rows[i].message);
        cr_assert_gt(strlen(rows[i].message), 0, "%s", rows[i].name);
        for (size_t j = 0; j < i; j++)
            cr_assert_str_neq(rows[i].name, rows[j].name, "two codes named %s", rows[i].name);
    }
}

Test(tt_err, the_detail_carries_code_path_and_message)
{
    tt_err_t e;
    cr_assert_eq(tt_err_set(&e, TT_ERR_SUBJECT, "subject.team", "%d bytes", 300), TT_ERR_SUBJECT);
    char buf[256];
    cr_assert_str_eq(tt_err_format(&e, buf, sizeof(buf)), "subject.team: 300 bytes");
    cr_assert_eq(tt_err_set(NULL, TT_ERR_NOMEM, NULL, "x"), TT_ERR_NOMEM);
}

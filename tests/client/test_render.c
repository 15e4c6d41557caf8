/*
 * The client library's renderer against the shared header vector table
 * (tests/vectors/headers.txt), field by field: the numbers of each case as a protocol 2 answer
 * carries them, through tt_render_headers, must give the table's headers byte for byte. The
 * library renders every protocol 2 decision this way (and the CLI prints what it rendered).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "hdrvec.h"
#include "tokentriage.h"

static tt_trio_t trio(proto_trio_t t)
{
    return (tt_trio_t){t.quota, t.remaining, t.reset_ms};
}

Test(render, every_case_of_the_header_table_renders_byte_for_byte)
{
    FILE *in = fopen(HDRVEC_PATH, "r");
    cr_assert_not_null(in, "%s", HDRVEC_PATH);
    static hdrvec_case_t c;
    char err[128];
    int line = 0, cases = 0, rc;
    while ((rc = hdrvec_next(in, &c, &line, err, sizeof(err))) > 0) {
        tt_disclosed_t d = {
            .has_policy = c.d.has_policy,
            .policy_tpm = c.d.policy_tpm,
            .period_ms = c.d.period_ms,
            .quota = c.d.quota,
            .remaining = c.d.remaining,
            .t_s = c.d.t_s,
            .has_requests = c.d.has_requests,
            .requests = trio(c.d.requests),
            .has_tokens = c.d.has_tokens,
            .tokens = trio(c.d.tokens),
            .retry_s = c.d.retry_s,
        };
        snprintf(d.policy_id, sizeof(d.policy_id), "%s", c.d.policy_id);
        tt_header_t h[TT_MAX_HEADERS];
        unsigned n = tt_render_headers(&d, h, TT_MAX_HEADERS);
        cr_assert_eq(n, (unsigned)c.n_want, "%s (line %d): %u headers, want %d", c.name, c.line, n,
                     c.n_want);
        for (int i = 0; i < c.n_want; i++) {
            cr_assert_str_eq(h[i].name, c.want[i][0], "%s (line %d)", c.name, c.line);
            cr_assert_str_eq(h[i].value, c.want[i][1], "%s (line %d): %s", c.name, c.line,
                             c.want[i][0]);
        }
        cases++;
    }
    fclose(in);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert_geq(cases, 16, "the table was read whole");
}

/* Room for fewer headers than a decision has: the count says how many there were, and nothing
 * is written past the room given. */
Test(render, a_short_array_is_never_overrun)
{
    tt_disclosed_t d = {.has_policy = 1,
                        .policy_id = "p",
                        .period_ms = 60000,
                        .quota = 5,
                        .has_requests = 1,
                        .requests = {5, 0, 1000},
                        .retry_s = 3};
    tt_header_t h[3];
    memset(h, 0x5a, sizeof(h));
    tt_header_t *guard = &h[2];
    cr_assert_eq(tt_render_headers(&d, h, 2), 6);
    cr_assert_str_eq(h[0].name, "Ratelimit-Policy");
    cr_assert_str_eq(h[1].value, "\"p\";r=0;t=0");
    cr_assert_eq((unsigned char)guard->name[0], 0x5a, "the third slot was not written");
}

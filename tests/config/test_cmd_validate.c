/* `tokentriage validate`, run as the real binary: output streams, exit codes, --explain. */
#include <criterion/criterion.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"

#define BIN TT_BINARY_DIR "/cmd/tokentriage"
#define VECTORS TT_SOURCE_DIR "/tests/vectors/config"
#define EXAMPLES TT_SOURCE_DIR "/examples"

struct run {
    int status;
    char *out, *err;
};

static char dir[64];

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/tt-validate-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/out", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/err", dir);
    unlink(path);
    rmdir(dir);
}

/* Runs `BIN args` in directory cwd with stdout and stderr captured apart. */
static struct run run(const char *cwd, const char *args)
{
    char cmd[1024], path[128];
    snprintf(cmd, sizeof(cmd), "cd '%s' && '%s' %s >'%s/out' 2>'%s/err'", cwd, BIN, args, dir, dir);
    struct run r;
    int status = system(cmd);
    cr_assert(WIFEXITED(status), "%s", cmd);
    r.status = WEXITSTATUS(status);
    size_t len;
    snprintf(path, sizeof(path), "%s/out", dir);
    r.out = slurp(path, &len);
    snprintf(path, sizeof(path), "%s/err", dir);
    r.err = slurp(path, &len);
    return r;
}

static void done(struct run *r)
{
    free(r->out);
    free(r->err);
}

TestSuite(cmd_validate, .init = setup, .fini = teardown);

Test(cmd_validate, a_valid_config_prints_ok_and_exits_0)
{
    struct run r = run(EXAMPLES, "validate single-node.yaml");
    cr_assert_eq(r.status, 0);
    cr_assert_str_eq(r.out, "OK: configuration is valid\n");
    cr_assert_str_eq(r.err, "");
    done(&r);
}

Test(cmd_validate, the_large_sliding_window_on_redis_validates_then_fails_to_arm)
{
    struct run v = run(VECTORS, "validate arm-sliding-window-ceiling-redis.yaml");
    cr_assert_eq(v.status, 0);
    cr_assert_str_eq(v.out, "OK: configuration is valid\n");
    cr_assert_str_eq(v.err, "");
    struct run a = run(VECTORS, "validate --arm arm-sliding-window-ceiling-redis.yaml");
    cr_assert_eq(a.status, 78);
    cr_assert_str_eq(a.out, "");
    cr_assert_str_eq(
        a.err, "Error: governance: compile limits: govern: limit \"team_rpm\": sliding_window: "
               "limit 100000 exceeds the packed window-counter ceiling 65535; the frozen int64 "
               "state holds a 16-bit per-window counter \xe2\x80\x94 use algorithm \"gcra\" "
               "(unbounded) for limits this large\n");
    done(&v);
    done(&a);
}

Test(cmd_validate, every_error_is_reported_in_one_run_with_exit_78)
{
    struct run r = run(VECTORS, "validate period-bounds.yaml");
    cr_assert_eq(r.status, 78);
    cr_assert_str_eq(r.out, "");
    size_t len;
    char *want = slurp(VECTORS "/period-bounds.out", &len);
    cr_assert_str_eq(r.err, want);
    int lines = 0;
    for (const char *p = r.err; *p; p++)
        lines += *p == '\n';
    cr_assert_eq(lines, 8);
    free(want);
    done(&r);
}

Test(cmd_validate, warnings_go_to_stderr_beside_the_ok_line)
{
    struct run r = run(EXAMPLES, "validate --arm ledger-types.yaml");
    cr_assert_eq(r.status, 0);
    cr_assert_str_eq(r.out, "OK: configuration is valid\n");
    cr_assert(strstr(r.err, "Warning: governance.limits[0]: limit \"team_budget\": budget_usd"),
              "%s", r.err);
    done(&r);
}

Test(cmd_validate, explain_prints_identity_t_tau_and_ceilings)
{
    struct run r = run(EXAMPLES, "validate --explain seed-gcra-burst.yaml");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "limit \"team_rpm\"\n  identity   "), "%s", r.out);
    cr_assert(strstr(r.out, "  T          200ms (200000000 ns)  tau 12s (12000000000 ns)\n"), "%s",
              r.out);
    cr_assert(strstr(r.out, "a single cost above 60 is unfittable"), "%s", r.out);
    done(&r);
    r = run(EXAMPLES, "validate --explain seed-sliding-window.yaml");
    cr_assert(strstr(r.out, "ceilings   amount 10 of the packed window-counter ceiling 65535"),
              "%s", r.out);
    cr_assert(strstr(r.out, "editing burst keeps the counter"), "%s", r.out);
    done(&r);
}

Test(cmd_validate, usage_errors_exit_64)
{
    struct run r = run(EXAMPLES, "validate");
    cr_assert_eq(r.status, 64);
    done(&r);
    r = run(EXAMPLES, "validate --bogus single-node.yaml");
    cr_assert_eq(r.status, 64);
    done(&r);
}

Test(cmd_validate, a_missing_file_exits_78)
{
    struct run r = run(EXAMPLES, "validate no-such-file.yaml");
    cr_assert_eq(r.status, 78);
    cr_assert_str_eq(r.err, "Error: (root): cannot open the file: No such file or directory "
                            "(no-such-file.yaml:1:1)\n");
    done(&r);
}

/*
 * The binary's front door (cmd/main.c), run as a user runs it: the version and the commit it
 * was built from, the help of each subcommand, a misspelled subcommand.
 */
#include <criterion/criterion.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runcmd.h"

#define BIN TT_BINARY_DIR "/cmd/tokentriage"

/* Whether s matches the extended regular expression re. */
static bool matches(const char *s, const char *re)
{
    regex_t rx;
    cr_assert_eq(regcomp(&rx, re, REG_EXTENDED | REG_NEWLINE), 0, "%s", re);
    bool m = regexec(&rx, s, 0, NULL, 0) == 0;
    regfree(&rx);
    return m;
}

Test(main, version_and_dash_dash_version_print_the_version_and_the_commit)
{
    const char *forms[] = {"version", "--version"};
    char want[128];
    snprintf(want, sizeof(want), "^tokentriage %s \\(commit ([0-9a-f]{12}(-dirty)?|unknown)\\)\n$",
             TT_PROJECT_VERSION);
    for (size_t i = 0; i < 2; i++) {
        runcmd_t r;
        cr_assert_eq(runcmdl(&r, NULL, BIN, forms[i], NULL), 0, "%s: %s", forms[i], r.err);
        cr_assert(matches(r.out, want), "%s printed \"%s\"", forms[i], r.out);
        cr_assert_str_eq(r.err, "");
        runcmd_free(&r);
    }
}

Test(main, the_changelog_starts_at_the_version_the_binary_prints)
{
    runcmd_t r;
    cr_assert_eq(runcmdl(&r, NULL, "sed", "-n", "s/^## \\[\\([^]]*\\)\\].*/\\1/p",
                         TT_SOURCE_DIR "/CHANGELOG.md", NULL),
                 0, "%s", r.err);
    char first[64] = "";
    sscanf(r.out, "%63s", first);
    cr_assert_str_eq(first, TT_PROJECT_VERSION,
                     "CHANGELOG.md's first release heading (## [X.Y.Z] - date) is \"%s\"", first);
    runcmd_free(&r);
}

Test(main, the_license_is_apache_2_0_whole)
{
    runcmd_t r;
    cr_assert_eq(runcmdl(&r, NULL, "md5sum", TT_SOURCE_DIR "/LICENSE", NULL), 0, "%s", r.err);
    /* the digest of https://www.apache.org/licenses/LICENSE-2.0.txt, Debian's
     * /usr/share/common-licenses/Apache-2.0 */
    cr_assert(strncmp(r.out, "3b83ef96387f14655fc854ddc3c6bd57 ", 33) == 0, "%s", r.out);
    runcmd_free(&r);
    cr_assert_eq(runcmdl(&r, NULL, "grep", "-c", "tokentriage", TT_SOURCE_DIR "/NOTICE", NULL), 0);
    runcmd_free(&r);
}

/* A tree with no git (a tarball, a container build context) still builds and says so. */
Test(main, a_tree_without_git_reports_the_commit_unknown)
{
    char dir[] = "/tmp/tt-nogit-XXXXXX", out[64];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(out, sizeof(out), "%s/tt_commit.h", dir);
    runcmd_t r;
    const char *env[] = {"PATH=/nonexistent", NULL}; /* no git to find, either */
    runcmd_opts_t o = {.env = env};
    char src[80], dst[80];
    snprintf(src, sizeof(src), "-DSRC=%s", dir);
    snprintf(dst, sizeof(dst), "-DOUT=%s", out);
    cr_assert_eq(runcmdl(&r, &o, TT_CMAKE_COMMAND, src, dst, "-P",
                         TT_SOURCE_DIR "/cmake/commit.cmake", NULL),
                 0, "%s", r.err);
    runcmd_free(&r);
    cr_assert_eq(runcmdl(&r, NULL, "cat", out, NULL), 0);
    cr_assert_str_eq(r.out, "#define TT_COMMIT \"unknown\"\n");
    runcmd_free(&r);
    unlink(out);
    rmdir(dir);
}

/* Each subcommand's --help: what it does, every option, the defaults. */
static const struct help_want {
    const char *cmd;
    const char *says[12]; /* substrings the help must hold (options, defaults) */
} helps[] = {
    {"version", {"commit"}},
    {"validate", {"--arm", "--offline", "--explain", "--json", "exit status", "66", "78"}},
    {"simulate",
     {"--algorithm", "--amount", "--period", "--burst", "--type", "--replicas", "--share",
      "default"}},
    {"serve", {"--config", "--socket", "--log-format", "embedded default", "default"}},
    {"decide",
     {"--socket", "--subject", "--tokens", "--json", "--exit-status", "TOKENTRIAGE_SOCKET",
      "unfittable"}},
    {"settle", {"--socket", "--reservation", "--actual", "--json"}},
    {"charge", {"--socket", "--subject", "--tokens", "--json"}},
    {"fleet", {"--socket", "--json"}},
    {"members", {"--socket", "--json"}},
    {"state", {"inspect", "--json", "66"}},
    {"bench",
     {"--socket", "--connections", "--depth", "--keys", "--duration", "--count", "--level",
      "--tokens", "default"}},
};

Test(main, every_subcommand_explains_itself_its_options_and_their_defaults)
{
    for (size_t i = 0; i < sizeof(helps) / sizeof(helps[0]); i++) {
        const struct help_want *h = &helps[i];
        runcmd_t r;
        cr_assert_eq(runcmdl(&r, NULL, BIN, h->cmd, "--help", NULL), 0, "%s --help: %s", h->cmd,
                     r.err);
        char usage[64];
        snprintf(usage, sizeof(usage), "usage: tokentriage %s", h->cmd);
        cr_assert(strncmp(r.out, usage, strlen(usage)) == 0, "%s --help:\n%s", h->cmd, r.out);
        /* a sentence of what it does, after the usage lines */
        cr_assert(matches(r.out, "\n\n[A-Z][a-z]+ [a-z][^\n]+\n"),
                  "%s --help says no sentence of what it does:\n%s", h->cmd, r.out);
        for (size_t k = 0; k < 12 && h->says[k]; k++)
            cr_assert(strstr(r.out, h->says[k]), "%s --help does not mention %s:\n%s", h->cmd,
                      h->says[k], r.out);
        runcmd_t same;
        runcmdl(&same, NULL, BIN, "help", h->cmd, NULL);
        cr_assert_str_eq(same.out, r.out, "tokentriage help %s differs from --help", h->cmd);
        runcmd_free(&same);
        runcmd_free(&r);
    }
}

Test(main, a_misspelled_subcommand_gets_a_suggestion)
{
    runcmd_t r;
    cr_assert_eq(runcmdl(&r, NULL, BIN, "decied", NULL), 64);
    cr_assert(strstr(r.err, "unknown command \"decied\"; did you mean \"decide\"?"), "%s", r.err);
    cr_assert_str_eq(r.out, "");
    runcmd_free(&r);
    cr_assert_eq(runcmdl(&r, NULL, BIN, "vlidate", NULL), 64);
    cr_assert(strstr(r.err, "did you mean \"validate\"?"), "%s", r.err);
    runcmd_free(&r);
    cr_assert_eq(runcmdl(&r, NULL, BIN, "frobnicate", NULL), 64);
    cr_assert_null(strstr(r.err, "did you mean"), "nothing is close: %s", r.err);
    cr_assert(strstr(r.err, "tokentriage --help"), "%s", r.err);
    runcmd_free(&r);
}

/* What a subcommand is given that it cannot take, and the first line it must answer with. */
static const struct usage_want {
    const char *args[8];
    const char *says; /* the first line of stderr, after "tokentriage " */
} usage_errors[] = {
    {{"serve", "--bogus"}, "serve: unknown option '--bogus'"},
    {{"serve", "-Z"}, "serve: unknown option '-Z'"},
    {{"serve", "-c"}, "serve: option '-c' needs an argument"},
    {{"serve", "--config"}, "serve: option '--config' needs an argument"},
    {{"serve", "extra"}, "serve: unexpected argument \"extra\""},
    {{"validate", "--bogus", "f.yaml"}, "validate: unknown option '--bogus'"},
    {{"validate", "--arm=yes", "f.yaml"}, "validate: option '--arm' takes no argument"},
    {{"validate"}, "validate: FILE is required"},
    {{"validate", "a.yaml", "b.yaml"}, "validate: one FILE, got \"b.yaml\" too"},
    {{"decide", "--bogus"}, "decide: unknown option '--bogus'"},
    {{"decide", "--subject"}, "decide: option '--subject' needs an argument"},
    {{"decide", "-s"}, "decide: option '-s' needs an argument"},
    {{"decide", "--subject", "key=k", "extra"}, "decide: unexpected argument \"extra\""},
    {{"decide", "--s", "x"}, "decide: option '--s' is ambiguous (--socket, --subject)"},
    {{"settle", "--bogus"}, "settle: unknown option '--bogus'"},
    {{"settle", "--actual"}, "settle: option '--actual' needs an argument"},
    {{"charge", "--bogus"}, "charge: unknown option '--bogus'"},
    {{"charge", "--tokens"}, "charge: option '--tokens' needs an argument"},
    {{"acquire", "--bogus"}, "acquire: unknown option '--bogus'"},
    {{"acquire", "--subject"}, "acquire: option '--subject' needs an argument"},
    {{"fleet", "--bogus"}, "fleet: unknown option '--bogus'"},
    {{"fleet", "--timeout"}, "fleet: option '--timeout' needs an argument"},
    {{"fleet", "extra"}, "fleet: unexpected argument \"extra\""},
    {{"members", "--bogus"}, "members: unknown option '--bogus'"},
    {{"members", "-s"}, "members: option '-s' needs an argument"},
    {{"members", "extra"}, "members: unexpected argument \"extra\""},
    {{"simulate", "--bogus"}, "simulate: unknown option '--bogus'"},
    {{"simulate", "--amount"}, "simulate: option '--amount' needs an argument"},
    {{"simulate", "--traffic"}, "simulate: option '--traffic' needs an argument"},
    {{"simulate", "--traffic", "t.ttr", "--bogus"}, "simulate: unknown option '--bogus'"},
    {{"simulate", "--algorithm", "gcra", "--amount", "1", "--period", "1x"},
     "simulate: --period: \"1x\": "},
    {{"state", "--bogus"}, "state: unknown option '--bogus'"},
    {{"state"}, "state: the form is `state inspect FILE`"},
    {{"state", "inspect"}, "state: the form is `state inspect FILE`"},
    {{"bench", "--bogus"}, "bench: unknown option '--bogus'"},
    {{"bench", "-c"}, "bench: option '-c' needs an argument"},
    {{"bench", "--level"}, "bench: option '--level' needs an argument"},
    {{"bench", "-c", "0"}, "bench: --connections wants an integer from 1 to 4096, got \"0\""},
    {{"bench", "extra"}, "bench: unexpected argument \"extra\""},
    {{"version", "--bogus"}, "version: unexpected argument \"--bogus\""},
};

Test(main, every_usage_error_names_the_subcommand_what_was_wrong_and_where_the_help_is)
{
    for (size_t i = 0; i < sizeof(usage_errors) / sizeof(usage_errors[0]); i++) {
        const struct usage_want *u = &usage_errors[i];
        const char *argv[10] = {BIN};
        for (size_t k = 0; k < 8 && u->args[k]; k++)
            argv[k + 1] = u->args[k];
        runcmd_t r;
        cr_expect_eq(runcmd(&r, NULL, argv), 64, "%s %s: exit %d, stderr:\n%s", u->args[0],
                     u->args[1] ? u->args[1] : "", r.status, r.err);
        char want[256], usage[64], hint[96];
        snprintf(want, sizeof(want), "tokentriage %s", u->says);
        snprintf(usage, sizeof(usage), "\nusage: tokentriage %s", u->args[0]);
        snprintf(hint, sizeof(hint), "\n(tokentriage %s --help: ", u->args[0]);
        cr_expect(strncmp(r.err, want, strlen(want)) == 0, "wanted \"%s...\", got:\n%s", want,
                  r.err);
        cr_expect(strstr(r.err, usage) && strstr(r.err, hint),
                  "%s: no usage line or no --help hint after the error:\n%s", want, r.err);
        cr_expect_str_eq(r.out, "", "%s: stdout holds %s", want, r.out);
        runcmd_free(&r);
    }
}

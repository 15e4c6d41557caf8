/* server.tokens_file (config/tokens.c): read when the config is armed, every finding named with
 * the tokens file's position and never echoing a token; what a token may name. */
#include <criterion/criterion.h>
#include <unistd.h>

#include "helpers.h"

#define TOKEN_A "a-very-secret-token-of-team-a"
#define TOKEN_B "another-secret-token-for-team-b"
#define TOKEN_C "hello-tokentriage-token"

static char dir[64], path[96];

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/tt-tokens-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/tokens.yaml", dir);
}

static void teardown(void)
{
    unlink(path);
    rmdir(dir);
}

TestSuite(tokens, .init = setup, .fini = teardown);

/* Writes the tokens file, arms a config naming it; the report, and the config in *out. */
static char *arm_with(const char *tokens_yaml, cfg_config_t **out)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(tokens_yaml, f);
    fclose(f);
    char yaml[256];
    snprintf(yaml, sizeof(yaml), "server:\n  tokens_file: %s\n  http_decide: on\n", path);
    return load_text(yaml, 1, out);
}

static const char good[] = "tokens:\n"
                           "  - name: team-a\n"
                           "    token: " TOKEN_A "\n"
                           "    subjects: { team: [a], key: [\"a-*\"] }\n"
                           "  - name: team-b\n"
                           "    token: " TOKEN_B "\n"
                           "    subjects: { team: [b] }\n"
                           "  - name: gateway\n"
                           "    sha256: "
                           "0d5a3c3ec6c6a9da10d1c5ee8e2f2fd1ed5ef8ab35d5b1c39e3fc6a18b0aa7f5\n"
                           "    subjects: { team: [\"*\"] }\n";

static bool allows(const cfg_config_t *cfg, const cfg_token_t *t, const char *level, const char *id)
{
    return cfg_token_allows(&cfg->tokens, t, level, strlen(level), id, strlen(id));
}

Test(tokens, a_token_is_found_by_its_bytes_and_names_only_what_it_was_granted)
{
    cfg_config_t *cfg;
    char *text = arm_with(good, &cfg);
    cr_assert_str_eq(text, "");
    cr_assert_eq(cfg->tokens.n, 3);
    const cfg_token_t *a = cfg_token_find(&cfg->tokens, TOKEN_A, strlen(TOKEN_A));
    const cfg_token_t *b = cfg_token_find(&cfg->tokens, TOKEN_B, strlen(TOKEN_B));
    cr_assert_not_null(a);
    cr_assert_not_null(b);
    cr_assert_str_eq(a->name, "team-a");
    cr_assert_str_eq(b->name, "team-b");
    cr_assert_null(cfg_token_find(&cfg->tokens, TOKEN_A, strlen(TOKEN_A) - 1), "a prefix");
    cr_assert_null(cfg_token_find(&cfg->tokens, "nobody-has-this-token", 21));
    cr_assert(allows(cfg, a, "team", "a"));
    cr_assert_not(allows(cfg, a, "team", "b"), "team a's token cannot name team b");
    cr_assert_not(allows(cfg, a, "team", "aa"), "an exact id is exact");
    cr_assert(allows(cfg, a, "key", "a-1") && allows(cfg, a, "key", "a-"));
    cr_assert_not(allows(cfg, a, "key", "b-1"), "the prefix is a-");
    cr_assert_not(allows(cfg, a, "user", "a"), "a level it was not given");
    cr_assert_not(allows(cfg, b, "key", "a-1"));
    cr_assert_neq(a->client, b->client);
    cr_assert_neq(a->client, 0);
    free(text);
    cfg_free(cfg);
}

/* sha256: keeps the secret out of the daemon's file; "*" is any id. */
Test(tokens, a_sha256_entry_matches_its_token)
{
    cfg_config_t *cfg;
    char line[] = "tokens:\n  - name: gw\n    sha256: "
                  "0000000000000000000000000000000000000000000000000000000000000000\n"
                  "    subjects: { team: [\"*\"] }\n";
    /* the SHA-256 of TOKEN_C, in hex as the docs say to make it */
    FILE *p = popen("printf %s " TOKEN_C " | sha256sum", "r");
    cr_assert_not_null(p);
    char hex[65] = "";
    cr_assert_eq(fscanf(p, "%64s", hex), 1);
    pclose(p);
    memcpy(strstr(line, "0000"), hex, 64);
    char *text = arm_with(line, &cfg);
    cr_assert_str_eq(text, "");
    const cfg_token_t *t = cfg_token_find(&cfg->tokens, TOKEN_C, strlen(TOKEN_C));
    cr_assert_not_null(t);
    cr_assert(allows(cfg, t, "team", "anything"));
    free(text);
    cfg_free(cfg);
}

Test(tokens, entries_of_one_name_are_one_client)
{
    cfg_config_t *cfg;
    char *text = arm_with("tokens:\n"
                          "  - { name: team-a, token: " TOKEN_A ", subjects: { team: [a] } }\n"
                          "  - { name: team-a, token: " TOKEN_B ", subjects: { team: [a] } }\n",
                          &cfg);
    cr_assert_str_eq(text, "");
    const cfg_token_t *old = cfg_token_find(&cfg->tokens, TOKEN_A, strlen(TOKEN_A));
    const cfg_token_t *rotated = cfg_token_find(&cfg->tokens, TOKEN_B, strlen(TOKEN_B));
    cr_assert(old && rotated && old != rotated);
    cr_assert_eq(old->client, rotated->client, "a rotated token settles what the old reserved");
    free(text);
    cfg_free(cfg);
}

/* Every finding names the field with the tokens file's position; no finding shows a token. */
Test(tokens, bad_entries_are_named_and_never_echo_a_token)
{
    static const struct {
        const char *yaml, *want;
    } cases[] = {
        {"tokens:\n  - { name: a, token: short, subjects: { team: [a] } }\n",
         "tokens[0].token: is 5 bytes; a token is 16 to 512 bytes"},
        {"tokens:\n  - { name: a, token: \"" TOKEN_A "!\", subjects: { team: [a] } }\n",
         "tokens[0].token: byte 29 is outside the token alphabet"},
        {"tokens:\n  - { name: a, sha256: abc, subjects: { team: [a] } }\n",
         "tokens[0].sha256: not 64 hexadecimal digits"},
        {"tokens:\n  - { name: a, subjects: { team: [a] } }\n", "tokens[0].sha256: missing"},
        {"tokens:\n  - { name: a, token: " TOKEN_A ", sha256: " TOKEN_B
         ", subjects: { team: [a] } }\n",
         "tokens[0].token: give sha256 or token, not both"},
        {"tokens:\n  - { name: a, token: " TOKEN_A " }\n", "tokens[0].subjects: missing"},
        {"tokens:\n  - { token: " TOKEN_A ", subjects: { team: [a] } }\n",
         "tokens[0].name: missing"},
        {"tokens:\n  - { name: a, token: " TOKEN_A ", subjects: { team: [] } }\n",
         "tokens[0].subjects.team: expected a sequence of ids"},
        {"tokens:\n  - { name: a, token: " TOKEN_A ", subjects: { global: [x] } }\n",
         "tokens[0].subjects.global: \"global\" is one counter"},
        {"tokens:\n  - { name: a, token: " TOKEN_A ", subjects: { team: [a] }, scope: x }\n",
         "tokens[0].scope: unknown key"},
        {"tokens:\n  - { name: a, token: " TOKEN_A ", subjects: { team: [a] } }\n"
         "  - { name: b, token: " TOKEN_A ", subjects: { team: [b] } }\n",
         "tokens[1]: the same token as tokens[0]"},
        {"tokenz: []\n", "tokenz: unknown key; did you mean \"tokens\"?"},
        {"tokens: {}\n", "tokens: expected a sequence of tokens"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cfg_config_t *cfg;
        char *text = arm_with(cases[i].yaml, &cfg);
        cr_assert_null(cfg, "case %zu armed", i);
        cr_assert(strstr(text, cases[i].want), "case %zu: %s", i, text);
        cr_assert(strstr(text, "(/tmp/tt-tokens-") && strstr(text, "tokens.yaml:"),
                  "case %zu names the tokens file's position: %s", i, text);
        cr_assert_null(strstr(text, TOKEN_A), "case %zu shows a token: %s", i, text);
        cr_assert_null(strstr(text, TOKEN_B), "case %zu shows a token: %s", i, text);
        free(text);
    }
}

Test(tokens, a_missing_or_unreadable_file_is_refused_and_an_empty_list_accepts_none)
{
    cfg_config_t *cfg;
    char yaml[256];
    snprintf(yaml, sizeof(yaml), "server:\n  tokens_file: %s/nope.yaml\n", dir);
    char *text = load_text(yaml, 1, &cfg);
    cr_assert_null(cfg);
    cr_assert(strstr(text, "nope.yaml") && strstr(text, "cannot open the file"), "%s", text);
    free(text);
    text = load_text(yaml, 0, &cfg);
    cr_assert_str_eq(text, "", "validate alone does not read it; --arm and serve do");
    cfg_free(cfg);
    free(text);
    text = arm_with("tokens: []\n", &cfg);
    cr_assert_str_eq(text, "");
    cr_assert_eq(cfg->tokens.n, 0);
    cr_assert_null(cfg_token_find(&cfg->tokens, TOKEN_A, strlen(TOKEN_A)));
    free(text);
    cfg_free(cfg);
}

/* Armed again (a reload arms a new config): the file is read as it is now. */
Test(tokens, arming_again_reads_the_file_again)
{
    cfg_config_t *cfg;
    char *text = arm_with(good, &cfg);
    cr_assert_str_eq(text, "");
    free(text);
    FILE *f = fopen(path, "w");
    fputs("tokens:\n  - { name: team-b, token: " TOKEN_B ", subjects: { team: [b] } }\n", f);
    fclose(f);
    cfg_report_t r = {0};
    cr_assert_eq(cfg_arm(cfg, &r), 0);
    cfg_report_free(&r);
    cr_assert_eq(cfg->tokens.n, 1);
    cr_assert_null(cfg_token_find(&cfg->tokens, TOKEN_A, strlen(TOKEN_A)), "team a's is gone");
    cr_assert_not_null(cfg_token_find(&cfg->tokens, TOKEN_B, strlen(TOKEN_B)));
    cfg_free(cfg);
}

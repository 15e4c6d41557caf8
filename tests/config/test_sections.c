/*
 * The defaults of config/sections.c as docs/operators.md states them: each row of the gossip
 * table ("Tune gossip") says in its second column what leaving the key out gives, and that is
 * what the loader gives. Where the binary has no default and the shipped manifests set one
 * (keyring_file, seeds), the table says "none" and the third column says what k8s/ sets.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define GUIDE TT_SOURCE_DIR "/docs/operators.md"

/* The second cell of the row of `key` in the gossip table, without backquotes; "" if none. */
static void cell(const char *guide, const char *key, char *out, size_t size)
{
    const char *table = strstr(guide, "## Tune gossip");
    cr_assert_not_null(table, "docs/operators.md has no \"Tune gossip\" section");
    char row[160];
    snprintf(row, sizeof(row), "\n| `%s` | ", key);
    const char *at = strstr(table, row);
    out[0] = 0;
    cr_assert_not_null(at, "the gossip table has no row for %s", key);
    at += strlen(row);
    size_t n = 0;
    for (; *at && *at != '|' && n + 1 < size; at++)
        if (*at != '`')
            out[n++] = *at;
    while (n && out[n - 1] == ' ')
        n--;
    out[n] = 0;
}

/* The cell as a duration (its first word). */
static int64_t cell_duration(const char *text)
{
    char word[32];
    int64_t ns = -1;
    cr_assert_eq(sscanf(text, "%31s", word), 1);
    cr_assert_eq(cfg_duration_parse(word, &ns), 0, "\"%s\" is not a duration", text);
    return ns;
}

Test(sections, the_gossip_table_says_what_leaving_each_key_out_gives)
{
    size_t len;
    char *guide = slurp(GUIDE, &len), c[256];
    cr_assert_not_null(guide);
    cfg_config_t *cfg = NULL;
    char *report = load_text("shared_state:\n  share: { node_id: n1 }\n", 1, &cfg);
    cr_assert_not_null(cfg, "%s", report);
    free(report);
    const cfg_share_t *s = &cfg->share;

    cell(guide, "keyring_file", c, sizeof(c));
    cr_assert_str_eq(s->keyring_file, "", "the loader has no default keyring file");
    cr_assert(strncmp(c, "none", 4) == 0,
              "left out, keyring_file is plaintext gossip; the table says \"%s\"", c);
    cell(guide, "seeds", c, sizeof(c));
    cr_assert_eq(s->n_seeds, 0, "the loader has no default seeds");
    cr_assert(strncmp(c, "none", 4) == 0, "left out, seeds are none; the table says \"%s\"", c);
    cell(guide, "join_timeout", c, sizeof(c));
    cr_assert_eq(cell_duration(c), s->join_timeout_ns, "join_timeout: the table says \"%s\"", c);
    cell(guide, "partition_hold", c, sizeof(c));
    cr_assert_eq(cell_duration(c), s->partition_hold_ns, "partition_hold: the table says \"%s\"",
                 c);
    cell(guide, "cluster", c, sizeof(c));
    cr_assert_str_eq(s->cluster, "");
    cr_assert(strncmp(c, "\"\"", 2) == 0, "cluster: the table says \"%s\"", c);
    cell(guide, "division", c, sizeof(c));
    cr_assert_eq(s->division, CFG_DIVISION_EQUAL);
    cr_assert(strncmp(c, "equal", 5) == 0, "division: the table says \"%s\"", c);
    cfg_free(cfg);
    free(guide);
}

/* What the binary leaves out, the shipped DaemonSet's config sets: sealed gossip, one seed. */
Test(sections, the_shipped_kubernetes_config_sets_the_keyring_and_the_seeds)
{
    size_t len;
    char *yaml = slurp(TT_SOURCE_DIR "/k8s/tokentriage.yaml", &len);
    cr_assert_not_null(yaml);
    cr_assert(strstr(yaml, "    keyring_file: /etc/tokentriage/gossip.keys\n"), "%s", yaml);
    cr_assert(strstr(yaml, "    seeds: [tokentriage-peers.tokentriage.svc.cluster.local:7946]\n"),
              "%s", yaml);
    free(yaml);
}

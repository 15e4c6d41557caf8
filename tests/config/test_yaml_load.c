/* The YAML loader: bounds on size, encoding, depth, nodes, aliases; keys; ${VAR}; positions. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <unistd.h>

#include "helpers.h"
#include "internal.h"

static char *load_report(const char *yaml, size_t len, int *rc)
{
    cfg_report_t r = {0};
    cfg_config_t *cfg = NULL;
    *rc = cfg_load_string("t.yaml", yaml, len, &cfg, &r);
    char *text = report_text(&r);
    cfg_report_free(&r);
    cfg_free(cfg);
    return text;
}

static void expect(const char *yaml, const char *want)
{
    int rc;
    char *text = load_report(yaml, strlen(yaml), &rc);
    cr_assert_str_eq(text, want);
    cr_assert_eq(rc, CFG_EINVALID);
    free(text);
}

Test(yaml_load, a_100_mb_file_is_refused_by_its_size_without_being_read)
{
    char dir[] = "/tmp/tt-config-XXXXXX", path[64], want[256];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/huge.yaml", dir);
    FILE *f = fopen(path, "w");
    char line[1024];
    memset(line, '#', sizeof(line) - 1);
    line[sizeof(line) - 1] = '\n';
    for (int i = 0; i < 100 * 1024; i++)
        cr_assert_eq(fwrite(line, 1, sizeof(line), f), sizeof(line));
    fclose(f);
    cfg_report_t r = {0};
    cfg_config_t *cfg = (cfg_config_t *)1;
    cr_assert_eq(cfg_load_file(path, &cfg, &r), CFG_EINVALID);
    cr_assert_null(cfg);
    char *text = report_text(&r);
    snprintf(want, sizeof(want),
             "Error: (root): the file is larger than 1 MiB (104857600 bytes; the limit is "
             "1048576) (%s:1:1)\n",
             path);
    cr_assert_str_eq(text, want);
    free(text);
    cfg_report_free(&r);
    unlink(path);
    rmdir(dir);
}

Test(yaml_load, text_one_byte_over_the_cap_is_refused_from_memory_too)
{
    size_t len = CFG_FILE_MAX + 1;
    char *big = malloc(len);
    memset(big, '#', len);
    int rc;
    char *text = load_report(big, len, &rc);
    cr_assert_eq(rc, CFG_EINVALID);
    cr_assert_str_eq(text, "Error: (root): the file is larger than 1 MiB (1048577 bytes; the "
                           "limit is 1048576) (t.yaml:1:1)\n");
    free(text);
    free(big);
}

Test(yaml_load, a_missing_file_is_a_config_error_naming_it)
{
    cfg_report_t r = {0};
    cfg_config_t *cfg;
    cr_assert_eq(cfg_load_file("/nonexistent/tt.yaml", &cfg, &r), CFG_EINVALID);
    char *text = report_text(&r);
    cr_assert_str_eq(text, "Error: (root): cannot open the file: No such file or directory "
                           "(/nonexistent/tt.yaml:1:1)\n");
    free(text);
    cfg_report_free(&r);
}

Test(yaml_load, invalid_utf8_is_refused_with_its_position)
{
    expect("server:\n  socket: /tmp/\xc3\x28\n",
           "Error: (root): the file is not valid UTF-8; a config is UTF-8 text (byte 0xc3 at "
           "offset 23) (t.yaml:2:16)\n");
    /* overlong "/" and a UTF-16 surrogate are not UTF-8 either */
    expect("a: \xc0\xaf\n", "Error: (root): the file is not valid UTF-8; a config is UTF-8 text "
                            "(byte 0xc0 at offset 3) (t.yaml:1:4)\n");
    expect("a: \xed\xa0\x80\n", "Error: (root): the file is not valid UTF-8; a config is UTF-8 "
                                "text (byte 0xed at offset 3) (t.yaml:1:4)\n");
    expect("a: \xf0\x9f\x98\n", "Error: (root): the file is not valid UTF-8; a config is UTF-8 "
                                "text (byte 0xf0 at offset 3) (t.yaml:1:4)\n");
}

Test(yaml_load, utf8_text_in_comments_and_values_is_fine)
{
    int rc;
    const char *yaml = "# caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x98\x80\n"
                       "server: { socket_group: \"\" }\n";
    char *text = load_report(yaml, strlen(yaml), &rc);
    cr_assert_eq(rc, 0, "%s", text);
    free(text);
}

Test(yaml_load, aliases_are_refused_so_an_alias_bomb_costs_nothing)
{
    expect("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
           "c: [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n",
           "Error: b: aliases (*name) are not supported in a config; write the value out "
           "(t.yaml:2:8)\n");
}

Test(yaml_load, nesting_deeper_than_the_cap_is_refused)
{
    char yaml[256];
    memset(yaml, '[', 100);
    memset(yaml + 100, ']', 100);
    yaml[200] = '\0';
    int rc;
    char *text = load_report(yaml, 200, &rc);
    cr_assert_eq(rc, CFG_EINVALID);
    cr_assert(strstr(text, ": nesting deeper than 32 levels (t.yaml:1:33)\n"), "%s", text);
    free(text);
}

Test(yaml_load, more_nodes_than_the_cap_are_refused)
{
    size_t n = CFG_NODES_MAX + 10, len = 0;
    char *yaml = malloc(2 * n + 8);
    yaml[len++] = '[';
    for (size_t i = 0; i < n; i++) {
        yaml[len++] = '1';
        yaml[len++] = ',';
    }
    yaml[len - 1] = ']';
    int rc;
    char *text = load_report(yaml, len, &rc);
    cr_assert_eq(rc, CFG_EINVALID);
    cr_assert(strstr(text, ": the document has more than 100000 nodes (t.yaml:1:"), "%s", text);
    free(text);
    free(yaml);
}

Test(yaml_load, more_keys_in_one_mapping_than_the_cap_are_refused)
{
    char *yaml = malloc(20 * 1100);
    size_t len = 0;
    for (int i = 0; i < 1100; i++)
        len += (size_t)sprintf(yaml + len, "k%d: 1\n", i);
    int rc;
    char *text = load_report(yaml, len, &rc);
    cr_assert_str_eq(text, "Error: (root): a mapping has more than 1024 keys (t.yaml:1025:1)\n");
    free(text);
    free(yaml);
}

Test(yaml_load, duplicate_keys_are_errors_at_every_level)
{
    expect("server: {}\nserver: {}\n",
           "Error: server: duplicate key (first at line 1, column 1) (t.yaml:2:1)\n");
    expect("server: { http: \"\", http: \"\" }\n",
           "Error: server.http: duplicate key (first at line 1, column 11) (t.yaml:1:21)\n");
}

Test(yaml_load, one_document_per_file)
{
    expect("server: {}\n---\nserver: {}\n",
           "Error: (root): a config file holds one YAML document; found a second (t.yaml:2:1)\n");
}

Test(yaml_load, syntax_errors_carry_the_parser_position)
{
    expect("server: {\n", "Error: server: YAML syntax: did not find expected node content while "
                          "parsing a flow node (t.yaml:2:1)\n");
}

Test(yaml_load, non_scalar_keys_are_refused)
{
    expect("? [a, b]\n: 1\n", "Error: (root): a mapping key must be a plain scalar (t.yaml:1:3)\n");
}

static const cfg_node_t *doc_get(cfg_doc_t *doc, const char *a, const char *b)
{
    return cfg__map_get(cfg__map_get(doc->root, a), b);
}

Test(yaml_load, every_node_carries_its_line_and_column)
{
    const char *yaml = "server:\n  socket: /run/x.sock\n  http:   \"\"\n";
    cfg_doc_t doc;
    cfg_report_t r = {0};
    cr_assert_eq(cfg__yaml_load("t.yaml", yaml, strlen(yaml), 0, &doc, &r), 0);
    const cfg_node_t *socket = doc_get(&doc, "server", "socket");
    const cfg_node_t *http = doc_get(&doc, "server", "http");
    cr_assert_eq(socket->line, 2);
    cr_assert_eq(socket->col, 11);
    cr_assert_str_eq(socket->text, "/run/x.sock");
    cr_assert_eq(http->line, 3);
    cr_assert_eq(http->col, 11);
    cr_assert_not(http->null, "a quoted empty string is not null");
    cr_assert_eq(doc.root->line, 1);
    cfg__doc_free(&doc);
    cfg_report_free(&r);
}

Test(yaml_load, environment_variables_expand_in_values_only)
{
    setenv("TT_TEST_NODE", "node-7", 1);
    const char *yaml = "a: ${TT_TEST_NODE}:7946\nb: $${TT_TEST_NODE}\n${TT_TEST_NODE}: x\n";
    cfg_doc_t doc;
    cfg_report_t r = {0};
    cr_assert_eq(cfg__yaml_load("t.yaml", yaml, strlen(yaml), 0, &doc, &r), 0);
    cr_assert_eq(doc.errors, 0);
    cr_assert_str_eq(cfg__map_get(doc.root, "a")->text, "node-7:7946");
    cr_assert_str_eq(cfg__map_get(doc.root, "b")->text, "${TT_TEST_NODE}");
    cr_assert_not_null(cfg__map_get(doc.root, "${TT_TEST_NODE}"));
    cfg__doc_free(&doc);
    cfg_report_free(&r);
    unsetenv("TT_TEST_NODE");
}

Test(yaml_load, an_unset_variable_is_an_error_naming_the_path_and_the_schema_still_runs)
{
    unsetenv("TT_TEST_UNSET");
    expect("shared_state:\n  share: { node_id: \"${TT_TEST_UNSET}\" }\nserver: { sokcet: x }\n",
           "Error: shared_state.share.node_id: environment variable TT_TEST_UNSET is not set "
           "(t.yaml:2:21)\n"
           "Error: server.sokcet: unknown key; did you mean \"socket\"? (t.yaml:3:11)\n");
}

Test(yaml_load, an_expansion_longer_than_a_scalar_may_be_is_refused)
{
    char *big = malloc(CFG_SCALAR_MAX + 2);
    memset(big, 'x', CFG_SCALAR_MAX + 1);
    big[CFG_SCALAR_MAX + 1] = '\0';
    setenv("TT_TEST_BIG", big, 1);
    expect("server: { socket_group: \"${TT_TEST_BIG}\" }\n",
           "Error: server.socket_group: the value is longer than 4096 bytes (t.yaml:1:25)\n");
    unsetenv("TT_TEST_BIG");
    free(big);
}

/* fuzz_config's find: an empty key's finding had an empty path, printed as ": unknown key". */
Test(yaml_load, an_empty_key_is_named_as_quotes)
{
    expect("\"\": x\n",
           "Error: \"\": unknown key; expected one of: server, governance, shared_state "
           "(t.yaml:1:1)\n");
    int rc;
    const char *yaml = "server:\n  \"\": x\n";
    char *text = load_report(yaml, strlen(yaml), &rc);
    const char *want = "Error: server.\"\": unknown key; expected one of: ";
    cr_assert_eq(strncmp(text, want, strlen(want)), 0, "%s", text);
    free(text);
}

/* The schema: the bad-config table, the examples, the embedded default, defaults, reload. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <unistd.h>

#include "helpers.h"

#define VECTORS TT_SOURCE_DIR "/tests/vectors/config"

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* What `tokentriage validate --arm NAME` prints for a file, run in-process. */
static char *validate_arm(const char *name, const char *text, size_t len)
{
    cfg_report_t r = {0};
    cfg_config_t *cfg = NULL;
    int rc = cfg_load_string(name, text, len, &cfg, &r);
    if (rc == 0)
        rc = cfg_arm(cfg, &r);
    char *out = NULL;
    size_t out_len = 0;
    FILE *f = open_memstream(&out, &out_len);
    cfg_report_print(&r, f);
    if (rc == 0)
        fputs("OK: configuration is valid\n", f);
    fclose(f);
    cfg_report_free(&r);
    cfg_free(cfg);
    return out;
}

Test(vectors, every_bad_config_gets_exactly_its_expected_errors)
{
    unsetenv("TT_TEST_SURELY_UNSET");
    unsetenv("TT_TEST_SURELY_UNSET_TOO");
    DIR *d = opendir(VECTORS);
    cr_assert_not_null(d);
    int cases = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!ends_with(e->d_name, ".yaml"))
            continue;
        char path[512], expect_path[512];
        snprintf(path, sizeof(path), "%s/%s", VECTORS, e->d_name);
        snprintf(expect_path, sizeof(expect_path), "%.*s.out", (int)(strlen(path) - 5), path);
        size_t len = 0, want_len = 0;
        char *text = slurp(path, &len);
        char *want = slurp(expect_path, &want_len);
        cr_assert_not_null(want, "%s has no .out", e->d_name);
        char *got = validate_arm(e->d_name, text, len);
        cr_expect_str_eq(got, want, "%s", e->d_name);
        cr_expect_not(strstr(got, "OK: "), "%s: a bad config passed", e->d_name);
        free(got);
        free(text);
        free(want);
        cases++;
    }
    closedir(d);
    cr_assert_geq(cases, 25);
}

/* Validates and arms the file at path, its `from` replaced by `to` first (a mounted path where
 * the test has the file); from NULL: as it is. */
static void expect_valid_and_armed_at(const char *path, const char *from, const char *to)
{
    size_t len = 0;
    char *text = slurp(path, &len);
    cr_assert_not_null(text, "%s", path);
    char *at = from ? strstr(text, from) : NULL;
    if (at) {
        size_t head = (size_t)(at - text), tail = len - head - strlen(from);
        char *moved = malloc(head + strlen(to) + tail + 1);
        memcpy(moved, text, head);
        memcpy(moved + head, to, strlen(to));
        memcpy(moved + head + strlen(to), at + strlen(from), tail + 1);
        free(text);
        text = moved;
        len = head + strlen(to) + tail;
    }
    char *got = validate_arm(path, text, len);
    cr_expect(strstr(got, "OK: configuration is valid\n"), "%s:\n%s", path, got);
    cr_expect_not(strstr(got, "Error: "), "%s:\n%s", path, got);
    free(got);
    free(text);
}

static void expect_valid_and_armed(const char *path)
{
    expect_valid_and_armed_at(path, NULL, NULL);
}

Test(examples, every_example_and_the_k8s_config_validate_and_arm)
{
    setenv("NODE_NAME", "node-a", 1);
    setenv("POD_IP", "10.0.0.7", 1);
    DIR *d = opendir(TT_SOURCE_DIR "/examples");
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!ends_with(e->d_name, ".yaml"))
            continue;
        char path[512];
        snprintf(path, sizeof(path), "%s/examples/%s", TT_SOURCE_DIR, e->d_name);
        expect_valid_and_armed(path);
        n++;
    }
    closedir(d);
    cr_assert_geq(n, 10);
    /* the DaemonSet mounts its tokens file (k8s/secret-tokens.yaml, no token) at
     * /etc/tokentriage/tokens.yaml: arming reads it, so the test puts one where it can */
    char tokens[] = "/tmp/tt-k8s-tokens-XXXXXX";
    int fd = mkstemp(tokens);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, "tokens: []\n", 11), 11);
    close(fd);
    expect_valid_and_armed_at(TT_SOURCE_DIR "/k8s/tokentriage.yaml", "/etc/tokentriage/tokens.yaml",
                              tokens);
    unlink(tokens);
}

Test(defaults, the_embedded_default_serves_local_limits_at_once)
{
    cfg_report_t r = {0};
    cfg_config_t *cfg;
    cr_assert_eq(strlen(cfg_default_yaml), cfg_default_yaml_len);
    cr_assert_eq(cfg_load_string("<default>", cfg_default_yaml, cfg_default_yaml_len, &cfg, &r), 0);
    cr_assert_eq(cfg_arm(cfg, &r), 0);
    cr_assert_eq(r.n, 0);
    cr_assert_geq(cfg->n_limits, 2);
    for (size_t i = 0; i < cfg->n_limits; i++)
        cr_assert_eq(cfg->limits[i].store, CFG_STORE_LOCAL);
    cr_assert_not(cfg->share.present);
    cr_assert_not(cfg->redis.present);
    cr_assert_str_eq(cfg->server.socket, CFG_DEFAULT_SOCKET);
    cfg_free(cfg);
    cfg_report_free(&r);
}

Test(defaults, omitted_settings_take_their_documented_defaults)
{
    cfg_config_t *cfg;
    char *text = load_text("shared_state:\n  share: { node_id: n1 }\n  redis: { address: r:6379 }\n"
                           "governance:\n  limits:\n    - id: a\n      attach: { level: key }\n"
                           "      type: rpm\n      amount: 10\n      period: 1s\n",
                           1, &cfg);
    cr_assert_str_eq(text, "");
    cr_assert_str_eq(cfg->server.socket, "/run/tokentriage/tokentriage.sock");
    cr_assert_eq(cfg->server.socket_mode, 0660);
    cr_assert_str_eq(cfg->server.http, "127.0.0.1:9464");
    cr_assert_eq(cfg->server.max_counters, CFG_DEFAULT_MAX_COUNTERS);
    cr_assert(cfg->disclose_limits);
    cr_assert_str_eq(cfg->share.bind, "0.0.0.0:7946");
    cr_assert_eq(cfg->share.partition_hold_ns, INT64_C(60000000000));
    cr_assert_eq(cfg->share.division, CFG_DIVISION_EQUAL);
    cr_assert_eq(cfg->share.demand_interval_ns, INT64_C(500000000));
    cr_assert_eq(cfg->share.demand_keys, 4096);
    cr_assert_eq(cfg->redis.timeout_ns, INT64_C(50000000));
    const cfg_limit_t *l = cfg_find_limit(cfg, "a");
    cr_assert_not_null(l);
    cr_assert_eq(l->burst, 10);
    cr_assert_eq(l->algorithm, RA_GCRA);
    cr_assert_eq(l->store, CFG_STORE_LOCAL);
    cr_assert(l->posture.on && l->posture.enforce_hard && l->posture.fail_open);
    cr_assert_eq(l->limiter.emission_ns, 100000000);
    free(text);
    cfg_free(cfg);
}

Test(schema, every_section_reads_what_it_is_given)
{
    setenv("TT_TEST_IP", "10.1.2.3", 1);
    cfg_config_t *cfg;
    char *text = load_text(
        "server:\n  socket: /tmp/tt.sock\n  socket_mode: 0600\n  socket_group: tt\n  http: \"\"\n"
        "  max_counters: 5000\n  max_connections: 16\n"
        "governance:\n  keys: { disclose_limits: false }\n  limits: []\n"
        "shared_state:\n  share:\n    node_id: n-1\n    bind: \"[::]:7000\"\n"
        "    advertise: ${TT_TEST_IP}:7000\n    seeds: [a:1, \"b.example:2\"]\n"
        "    keyring_file: /k\n    cluster: prod\n    partition_hold: 0s\n    join_timeout: 1m30s\n"
        "    division: demand\n    cold_share: 0.1\n    demand_interval: 250ms\n"
        "    demand_keys: 16384\n"
        "  redis: { address: \"[::1]:6379\", timeout: 1s }\n",
        0, &cfg);
    cr_assert_str_eq(text, "");
    cr_assert_str_eq(cfg->server.socket, "/tmp/tt.sock");
    cr_assert_eq(cfg->server.socket_mode, 0600);
    cr_assert_str_eq(cfg->server.socket_group, "tt");
    cr_assert_str_eq(cfg->server.http, "");
    cr_assert_eq(cfg->server.max_counters, 5000);
    cr_assert_eq(cfg->server.max_connections, 16);
    cr_assert_not(cfg->disclose_limits);
    cr_assert_eq(cfg->n_limits, 0);
    cr_assert_str_eq(cfg->share.node_id, "n-1");
    cr_assert_str_eq(cfg->share.bind, "[::]:7000");
    cr_assert_str_eq(cfg->share.advertise, "10.1.2.3:7000");
    cr_assert_eq(cfg->share.n_seeds, 2);
    cr_assert_str_eq(cfg->share.seeds[1], "b.example:2");
    cr_assert_str_eq(cfg->share.keyring_file, "/k");
    cr_assert_str_eq(cfg->share.cluster, "prod");
    cr_assert_eq(cfg->share.partition_hold_ns, 0);
    cr_assert_eq(cfg->share.join_timeout_ns, INT64_C(90000000000));
    cr_assert_eq(cfg->share.division, CFG_DIVISION_DEMAND);
    cr_assert_float_eq(cfg->share.cold_share, 0.1, 1e-12);
    cr_assert_eq(cfg->share.demand_interval_ns, INT64_C(250000000));
    cr_assert_eq(cfg->share.demand_keys, 16384);
    cr_assert_str_eq(cfg->redis.address, "[::1]:6379");
    cr_assert_eq(cfg->redis.timeout_ns, INT64_C(1000000000));
    free(text);
    cfg_free(cfg);
    unsetenv("TT_TEST_IP");
}

Test(schema, redis_credentials_and_tls_are_read_as_paths_never_as_secrets)
{
    cfg_config_t *cfg;
    char *text = load_text(
        "governance:\n  limits: []\n"
        "shared_state:\n  redis:\n    sentinels: [s:26379]\n    master: m\n"
        "    username: tokentriage\n    password_file: /run/secrets/redis\n"
        "    sentinel_username: watcher\n    sentinel_password_file: /run/secrets/sentinel\n"
        "    tls: { ca_file: /etc/tt/ca.pem, cert_file: /etc/tt/c.pem, key_file: /etc/tt/c.key,\n"
        "           server_name: redis.internal }\n",
        0, &cfg);
    cr_assert_str_eq(text, "");
    cr_assert_str_eq(cfg->redis.username, "tokentriage");
    cr_assert_str_eq(cfg->redis.password_file, "/run/secrets/redis");
    cr_assert_str_eq(cfg->redis.sentinel_username, "watcher");
    cr_assert_str_eq(cfg->redis.sentinel_password_file, "/run/secrets/sentinel");
    cr_assert(cfg->redis.tls.present);
    cr_assert(cfg->redis.tls.verify, "certificates are verified unless told otherwise");
    cr_assert_str_eq(cfg->redis.tls.ca_file, "/etc/tt/ca.pem");
    cr_assert_str_eq(cfg->redis.tls.cert_file, "/etc/tt/c.pem");
    cr_assert_str_eq(cfg->redis.tls.key_file, "/etc/tt/c.key");
    cr_assert_str_eq(cfg->redis.tls.server_name, "redis.internal");
    free(text);
    cfg_free(cfg);
    /* "tls:" alone: TLS against the system's trust store, each node's host the name checked */
    text = load_text("governance:\n  limits: []\nshared_state:\n  redis:\n"
                     "    address: r:6380\n    tls:\n",
                     0, &cfg);
    cr_assert_str_eq(text, "");
    cr_assert(cfg->redis.tls.present && cfg->redis.tls.verify);
    cr_assert_str_eq(cfg->redis.tls.ca_file, "");
    cr_assert_str_eq(cfg->redis.password_file, "");
    free(text);
    cfg_free(cfg);
}

Test(schema, state_is_off_unless_a_directory_is_named)
{
    cfg_config_t *cfg;
    char *text = load_text("governance:\n  limits: []\n", 0, &cfg);
    cr_assert_str_eq(text, "");
    cr_assert_str_eq(cfg->server.state_dir, "");
    cr_assert_eq(cfg->server.snapshot_interval_ns, INT64_C(5000000000));
    free(text);
    cfg_free(cfg);
    text = load_text("server:\n  state_dir: /var/lib/tokentriage\n  snapshot_interval: 0\n"
                     "governance:\n  limits: []\n",
                     0, &cfg);
    cr_assert_str_eq(text, "");
    cr_assert_str_eq(cfg->server.state_dir, "/var/lib/tokentriage");
    cr_assert_eq(cfg->server.snapshot_interval_ns, 0);
    free(text);
    cfg_free(cfg);
}

Test(schema, a_relative_state_dir_and_a_too_short_interval_are_named)
{
    cfg_config_t *cfg;
    char *text = load_text("server:\n  state_dir: var/state\n  snapshot_interval: 50ms\n"
                           "governance:\n  limits: []\n",
                           0, &cfg);
    cr_assert_null(cfg);
    cr_assert(strstr(text, "server.state_dir: \"var/state\" must be an absolute path"), "%s", text);
    cr_assert(strstr(text, "server.snapshot_interval: must be 0 (a snapshot only at stop) or at "
                           "least 100ms"),
              "%s", text);
    free(text);
}

/* The config watch (issue 31 item 2): on with a 5 s poll unless told otherwise. */
Test(schema, the_config_watch_is_on_with_a_five_second_poll_unless_told)
{
    cfg_config_t *cfg;
    char *text = load_text("governance:\n  limits: []\n", 0, &cfg);
    cr_assert_str_eq(text, "");
    cr_assert(cfg->server.config_watch);
    cr_assert_eq(cfg->server.config_poll_ns, INT64_C(5000000000));
    free(text);
    cfg_free(cfg);
    text = load_text("server:\n  config_watch: false\n  config_poll: 1s\n"
                     "governance:\n  limits: []\n",
                     0, &cfg);
    cr_assert_str_eq(text, "");
    cr_assert_not(cfg->server.config_watch);
    cr_assert_eq(cfg->server.config_poll_ns, INT64_C(1000000000));
    free(text);
    cfg_free(cfg);
    text = load_text("server:\n  config_watch: sometimes\n  config_poll: 10ms\n"
                     "governance:\n  limits: []\n",
                     0, &cfg);
    cr_assert_null(cfg);
    cr_assert(strstr(text, "server.config_watch:"), "%s", text);
    cr_assert(strstr(text, "server.config_poll: 10ms is shorter than the shortest allowed, 100ms"),
              "%s", text);
    free(text);
}

/* server.record (issue 30 item 10): off unless a file is named; its defaults; what it refuses. */
Test(schema, the_recording_is_off_unless_a_file_is_named)
{
    cfg_config_t *cfg;
    char *text = load_text("governance:\n  limits: []\n", 0, &cfg);
    cr_assert_str_eq(text, "");
    cr_assert_str_eq(cfg->server.record.file, "");
    free(text);
    cfg_free(cfg);
    text = load_text("server:\n  record: { file: /var/lib/tokentriage/traffic.ttr }\n"
                     "governance:\n  limits: []\n",
                     0, &cfg);
    cr_assert_str_eq(text, "");
    const cfg_record_t *r = &cfg->server.record;
    cr_assert_str_eq(r->file, "/var/lib/tokentriage/traffic.ttr");
    cr_assert_eq(r->max_bytes, INT64_C(64) << 20);
    cr_assert_eq(r->files, 2);
    cr_assert_eq(r->sample, 1);
    cr_assert(r->hash_subjects, "subjects are hashed unless said otherwise");
    cr_assert_str_eq(r->hash_key_file, "");
    free(text);
    cfg_free(cfg);
}

Test(schema, a_bad_recording_is_named)
{
    cfg_config_t *cfg;
    char *text = load_text("server:\n  record: { file: traffic.ttr, max_bytes: 100, files: 17, "
                           "sample: 0, hash_subjects: maybe, hash_key_file: key, rotate: yes }\n"
                           "governance:\n  limits: []\n",
                           0, &cfg);
    cr_assert_null(cfg);
    cr_assert(strstr(text, "server.record.file: \"traffic.ttr\" must be an absolute path"), "%s",
              text);
    cr_assert(strstr(text, "server.record.max_bytes"), "%s", text);
    cr_assert(strstr(text, "server.record.files"), "%s", text);
    cr_assert(strstr(text, "server.record.sample"), "%s", text);
    cr_assert(strstr(text, "server.record.hash_subjects"), "%s", text);
    cr_assert(strstr(text, "server.record.hash_key_file: \"key\" must be an absolute path"), "%s",
              text);
    cr_assert(strstr(text, "rotate"), "%s", text);
    free(text);
    text =
        load_text("server:\n  record: { max_bytes: 8192 }\ngovernance:\n  limits: []\n", 0, &cfg);
    cr_assert_null(cfg);
    cr_assert(strstr(text, "server.record.file: required"), "%s", text);
    free(text);
}

/* server.log_level: info unless told; one of the logger's names, a path-named error otherwise. */
Test(schema, the_log_level_is_info_unless_told)
{
    cfg_config_t *cfg;
    char *text = load_text("governance:\n  limits: []\n", 0, &cfg);
    cr_assert_str_eq(text, "");
    cr_assert_eq(cfg->server.log_level, TT_LOG_INFO);
    free(text);
    cfg_free(cfg);
    text = load_text("server:\n  log_level: debug\ngovernance:\n  limits: []\n", 0, &cfg);
    cr_assert_str_eq(text, "");
    cr_assert_eq(cfg->server.log_level, TT_LOG_DEBUG);
    free(text);
    cfg_free(cfg);
    text = load_text("server:\n  log_level: loud\ngovernance:\n  limits: []\n", 0, &cfg);
    cr_assert_null(cfg);
    cr_assert(strstr(text, "server.log_level:") && strstr(text, "loud") && strstr(text, "debug") &&
                  strstr(text, "error"),
              "%s", text);
    free(text);
}

Test(schema, posture_and_ledger_periods_compile)
{
    cfg_config_t *cfg;
    char *text = load_text("governance:\n  limits:\n"
                           "    - id: soft\n      attach: { level: key }\n      type: rpm\n"
                           "      amount: 5\n      period: 1h30m\n"
                           "      posture: { mode: off, enforce: soft, fail: closed }\n"
                           "    - id: quota\n      attach: { level: org }\n"
                           "      type: quota_requests\n      amount: 9\n      period: 1mo\n",
                           0, &cfg);
    cr_assert_str_eq(text, "");
    cr_assert_eq(cfg->limits[0].period_ns, INT64_C(5400000000000));
    cr_assert_not(cfg->limits[0].posture.on);
    cr_assert_not(cfg->limits[0].posture.enforce_hard);
    cr_assert_not(cfg->limits[0].posture.fail_open);
    cr_assert_eq(cfg->limits[1].type, CFG_TYPE_QUOTA_REQUESTS);
    cr_assert_eq(cfg->limits[1].period_ns, 0, "ledger periods are not compiled");
    free(text);
    cfg_free(cfg);
}

Test(reload, a_bad_load_leaves_the_serving_model_untouched)
{
    cfg_config_t *serving;
    char *text = load_text(cfg_default_yaml, 1, &serving);
    cr_assert_not_null(serving);
    cfg_limit_t before[8];
    size_t n = serving->n_limits;
    memcpy(before, serving->limits, n * sizeof(cfg_limit_t));
    cfg_config_t *next = (cfg_config_t *)1;
    char *bad = load_text("governance:\n  limits:\n    - id: key_rpm\n      amount: 0\n", 1, &next);
    cr_assert_null(next);
    cr_assert_neq(strlen(bad), 0);
    cr_assert_eq(serving->n_limits, n);
    cr_assert_eq(memcmp(before, serving->limits, n * sizeof(cfg_limit_t)), 0);
    cr_assert(serving->armed);
    free(text);
    free(bad);
    cfg_free(serving);
}

Test(schema, the_peer_allow_lists_read_numeric_ids)
{
    cfg_config_t *cfg;
    char *text = load_text("server:\n  allow_uids: [0, 1000]\n  allow_gids: [65534]\n", 0, &cfg);
    cr_assert_str_eq(text, "");
    cr_assert_eq(cfg->server.n_allow_uids, 2);
    cr_assert_eq(cfg->server.allow_uids[1], 1000);
    cr_assert_eq(cfg->server.n_allow_gids, 1);
    cr_assert_eq(cfg->server.allow_gids[0], 65534);
    free(text);
    cfg_free(cfg);
}

Test(schema, a_bad_allow_list_is_refused_naming_the_entry)
{
    char *text = load_text("server:\n  allow_uids: [0, root]\n", 0, NULL);
    cr_assert(strstr(text, "server.allow_uids[1]") && strstr(text, "not an integer"), "%s", text);
    free(text);
    text = load_text("server:\n  allow_gids: 5\n", 0, NULL);
    cr_assert(strstr(text, "server.allow_gids") && strstr(text, "sequence"), "%s", text);
    free(text);
    text = load_text("server:\n  allow_uids: [-1]\n", 0, NULL);
    cr_assert(strstr(text, "server.allow_uids[0]"), "%s", text);
    free(text);
}

Test(schema, the_http_front_door_maps_headers_to_levels)
{
    cfg_config_t *cfg;
    char *text = load_text("server:\n  http_decide: on\n  tokens_file: /etc/tt/tokens.yaml\n"
                           "  http_subject: { team: X-Team, key: X-Api-Key }\n"
                           "  http_tokens: X-Tokens\n",
                           0, &cfg);
    cr_assert_str_eq(text, "");
    cr_assert_eq(cfg->server.http_decide, CFG_HTTP_DECIDE_ON);
    cr_assert_eq(cfg->server.n_http_subject, 2);
    cr_assert_str_eq(cfg->server.http_subject[0].level, "team");
    cr_assert_str_eq(cfg->server.http_subject[0].header, "X-Team");
    cr_assert_str_eq(cfg->server.http_subject[1].level, "key");
    cr_assert_str_eq(cfg->server.http_tokens, "X-Tokens");
    free(text);
    cfg_free(cfg);
    text = load_text("server: {}\n", 0, &cfg);
    cr_assert_eq(cfg->server.http_decide, CFG_HTTP_DECIDE_OFF, "off by default (SPEC §9)");
    cr_assert_str_eq(cfg->server.tokens_file, "");
    cr_assert_eq(cfg->server.n_http_subject, 0);
    cr_assert_str_eq(cfg->server.http_tokens, "");
    free(text);
    cfg_free(cfg);
}

Test(schema, a_bad_http_mapping_is_refused_naming_the_entry)
{
    static const struct {
        const char *yaml, *want;
    } cases[] = {
        {"server:\n  http_subject: [X-Team]\n", "server.http_subject: expected a mapping"},
        {"server:\n  http_subject: { team: \"X Team\" }\n",
         "server.http_subject.team: \"X Team\" is not an HTTP header name"},
        {"server:\n  http_subject: { \"te am\": X-Team }\n", "is not a level name"},
        {"server:\n  http_subject: { global: X-Team }\n",
         "server.http_subject.global: \"global\" is one counter"},
        {"server:\n  http_subject: { team: X-Team, key: x-team }\n",
         "server.http_subject.key: header x-team already names level team"},
        {"server:\n  http_subject: { team: X-Team }\n  http_tokens: X-TEAM\n",
         "server.http_tokens: header X-TEAM already names level team"},
        {"server:\n  http_tokens: \"\"\n", "server.http_tokens: must not be empty"},
        {"server:\n  http_decide: yes\n", "server.http_decide: unknown setting \"yes\""},
        {"server:\n  http_decide: loopbak\n", "unknown setting \"loopbak\""},
        /* SPEC §9: a TCP door decides only with bearer tokens (issue 34 item 4) */
        {"server:\n  http_decide: loopback\n",
         "server.http_decide: \"loopback\" is no more: any local user"},
        {"server:\n  http_decide: on\n", "server.http_decide: on needs server.tokens_file"},
        {"server:\n  grpc: 127.0.0.1:8081\n",
         "server.grpc: a TCP address needs server.tokens_file"},
        {"server:\n  tokens_file: tokens.yaml\n",
         "server.tokens_file: \"tokens.yaml\" must be an absolute path"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *text = load_text(cases[i].yaml, 0, NULL);
        cr_assert(strstr(text, cases[i].want), "case %zu: %s", i, text);
        cr_assert(strstr(text, "(t.yaml:"), "case %zu names the position: %s", i, text);
        free(text);
    }
}

Test(schema, more_limits_than_the_engine_holds_are_refused)
{
    size_t cap = (CFG_LIMITS_MAX + 1) * 96 + 64, n = 0;
    char *yaml = malloc(cap);
    cr_assert_not_null(yaml);
    n += (size_t)snprintf(yaml + n, cap - n, "governance:\n  limits:\n");
    for (int i = 0; i <= CFG_LIMITS_MAX; i++)
        n += (size_t)snprintf(yaml + n, cap - n,
                              "    - { id: l%d, attach: { level: key }, type: rpm, amount: 1 }\n",
                              i);
    char *text = load_text(yaml, 0, NULL);
    cr_assert(strstr(text, "governance.limits") && strstr(text, "513 limits; at most 512"), "%s",
              text);
    free(text);
    free(yaml);
}

Test(schema, demand_keys_out_of_range_is_refused_naming_the_field)
{
    char *text = load_text("shared_state:\n  share: { node_id: n1, demand_keys: 10 }\n", 0, NULL);
    cr_assert(strstr(text, "shared_state.share.demand_keys"), "%s", text);
    free(text);
    text = load_text("shared_state:\n  share: { node_id: n1, demand_keys: 65537 }\n", 0, NULL);
    cr_assert(strstr(text, "shared_state.share.demand_keys"), "%s", text);
    free(text);
    text = load_text("shared_state:\n  share: { node_id: n1, demand_keys: 65536 }\n", 0, NULL);
    cr_assert_str_eq(text, "");
    free(text);
}

/* Each finding carries the one error space's detail: code, path, message, and its position;
 * `text` is what validate prints after "Error: " or "Warning: ". */
Test(findings, carry_code_path_message_and_position)
{
    static const char yaml[] = "governance:\n"
                               "  limits:\n"
                               "    - id: a\n"
                               "      attach: { level: team }\n"
                               "      type: rpm\n"
                               "      amount: 0\n"
                               "      period: 1m\n"
                               "    - id: b\n"
                               "      attach: { level: team }\n"
                               "      type: rpm\n"
                               "      amount: 5\n"
                               "      period: 1m\n"
                               "      algorithm: fixed_window\n"
                               "      burst: 3\n"
                               "      colour: red\n";
    cfg_report_t r = {0};
    cfg_config_t *cfg = NULL;
    cr_assert_eq(cfg_load_string("t.yaml", yaml, sizeof(yaml) - 1, &cfg, &r), CFG_EINVALID);
    cr_assert_eq(r.n, 3);
    const cfg_finding_t *f = &r.items[0];
    cr_assert_not(f->warning);
    cr_assert_eq(f->code, CFG_EINVALID);
    cr_assert_str_eq(f->path, "governance.limits[0].amount");
    cr_assert_str_eq(f->message, "must be greater than 0, got 0");
    cr_assert_eq(f->line, 6);
    cr_assert_eq(f->col, 15);
    cr_assert_str_eq(f->text,
                     "governance.limits[0].amount: must be greater than 0, got 0 (t.yaml:6:15)");
    f = &r.items[1];
    cr_assert_eq(f->code, CFG_EINVALID);
    cr_assert_str_eq(f->path, "governance.limits[1].colour");
    cr_assert(strstr(f->message, "unknown key; expected one of: id, attach"), "%s", f->message);
    f = &r.items[2];
    cr_assert(f->warning);
    cr_assert_eq(f->code, 0);
    cr_assert_str_eq(f->path, "governance.limits[1].burst");
    cr_assert_eq(f->line, 14);
    cr_assert_eq(r.n_errors, 2);
    cr_assert_eq(r.n_warnings, 1);
    cfg_report_free(&r);

    cr_assert_eq(cfg_load_file("/nonexistent/tt.yaml", &cfg, &r), CFG_EINVALID);
    cr_assert_eq(r.items[0].code, CFG_EINVALID);
    cr_assert_str_eq(r.items[0].path, "(root)");
    cr_assert_str_eq(r.items[0].message, "cannot open the file: No such file or directory");
    cr_assert_eq(r.items[0].line, 1);
    cr_assert_str_eq(r.items[0].text, "(root): cannot open the file: No such file or directory "
                                      "(/nonexistent/tt.yaml:1:1)");
    cfg_report_free(&r);
}

/* An arm finding has a path and no position: what validate --arm prints is unchanged. */
Test(findings, an_arm_finding_has_a_path_and_no_position)
{
    static const char yaml[] = "governance:\n"
                               "  limits:\n"
                               "    - { id: t, attach: { level: team }, type: tpm, amount: 500,\n"
                               "        period: 1m }\n";
    cfg_report_t r = {0};
    cfg_config_t *cfg = NULL;
    cr_assert_eq(cfg_load_string("t.yaml", yaml, sizeof(yaml) - 1, &cfg, &r), 0);
    cr_assert_eq(cfg_arm(cfg, &r), CFG_EINVALID);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.items[0].code, CFG_EINVALID);
    cr_assert_str_eq(r.items[0].path, "governance");
    cr_assert_eq(r.items[0].line, 0);
    const char *m = r.items[0].message;
    cr_assert(strstr(m, "compile limits: govern: limit \"t\": tpm limit") == m, "%s", m);
    cr_assert(strstr(r.items[0].text, "governance: compile limits: ") == r.items[0].text, "%s",
              r.items[0].text);
    cfg_report_free(&r);
    cfg_free(cfg);
}

/* cfg_restart_sections: what a reload cannot change in a running daemon is named, nothing else. */
#include <criterion/criterion.h>

#include "helpers.h"

#define LIMITS                                                                                     \
    "governance:\n  limits:\n    - id: a_rpm\n      attach: { level: team }\n      type: rpm\n"    \
    "      amount: %d\n      period: 1m\n      store: share\n"
#define SHARE "shared_state:\n  share:\n    node_id: n1\n    division: %s\n"

static cfg_config_t *load(const char *server, int amount, const char *division, const char *redis)
{
    char yaml[1024];
    int len = snprintf(yaml, sizeof(yaml), "%s" LIMITS SHARE "%s", server, amount, division, redis);
    cr_assert(len > 0 && (size_t)len < sizeof(yaml));
    cfg_config_t *cfg;
    char *report = load_text(yaml, 0, &cfg);
    cr_assert_not_null(cfg, "%s", report);
    free(report);
    return cfg;
}

static size_t changed(const cfg_config_t *a, const cfg_config_t *b, const char *names[])
{
    size_t n = cfg_restart_sections(a, b, names);
    cr_assert_leq(n, CFG_RESTART_SECTIONS);
    return n;
}

Test(restart, a_change_of_limits_alone_needs_no_restart)
{
    cfg_config_t *a = load("", 10, "equal", ""), *b = load("", 20, "equal", "");
    const char *names[CFG_RESTART_SECTIONS];
    cr_expect_eq(changed(a, b, names), 0);
    cfg_free(a);
    cfg_free(b);
}

Test(restart, each_start_only_section_that_changed_is_named)
{
    const char *server = "server:\n  max_counters: 5000\n";
    const char *redis = "  redis: { address: \"r:6379\" }\n";
    cfg_config_t *a = load("", 10, "equal", ""), *b = load(server, 10, "demand", redis);
    const char *names[CFG_RESTART_SECTIONS];
    cr_assert_eq(changed(a, b, names), 3);
    cr_expect_str_eq(names[0], "server");
    cr_expect_str_eq(names[1], "shared_state.share");
    cr_expect_str_eq(names[2], "shared_state.redis");
    cfg_free(b);
    b = load("", 10, "demand", "");
    cr_assert_eq(changed(a, b, names), 1, "the division alone");
    cr_expect_str_eq(names[0], "shared_state.share");
    cfg_free(a);
    cfg_free(b);
}

Test(restart, redis_credentials_and_tls_files_apply_on_reload_the_topology_after_a_restart)
{
    const char *plain = "  redis: { address: \"r:6379\" }\n";
    const char *auth = "  redis: { address: \"r:6379\", username: u, password_file: /s/p }\n";
    const char *tls = "  redis: { address: \"r:6379\", tls: { ca_file: /s/ca.pem } }\n";
    cfg_config_t *a = load("", 10, "equal", plain), *b = load("", 10, "equal", auth);
    const char *names[CFG_RESTART_SECTIONS];
    cr_expect_eq(changed(a, b, names), 0, "the store reads the credentials again on reload");
    cfg_free(b);
    b = load("", 10, "equal", tls);
    cr_expect_eq(changed(a, b, names), 0, "the store builds its TLS context again on reload");
    cfg_free(b);
    b = load("", 10, "equal", "  redis: { address: \"r:6380\", tls: { ca_file: /s/ca.pem } }\n");
    cr_assert_eq(changed(a, b, names), 1);
    cr_expect_str_eq(names[0], "shared_state.redis");
    cfg_free(a);
    cfg_free(b);
}

/* The config watch is built at start: turning it off or changing its poll needs a restart. */
Test(restart, the_config_watch_applies_at_start)
{
    cfg_config_t *a = load("", 10, "equal", "");
    static const char *const servers[] = {"server:\n  config_watch: false\n",
                                          "server:\n  config_poll: 1s\n"};
    for (int i = 0; i < 2; i++) {
        cfg_config_t *b = load(servers[i], 10, "equal", "");
        const char *names[CFG_RESTART_SECTIONS];
        cr_assert_eq(changed(a, b, names), 1, "%s", servers[i]);
        cr_expect_str_eq(names[0], "server");
        cfg_free(b);
    }
    cfg_free(a);
}

/* server.log_level applies on reload (the daemon sets the level at the commit). */
Test(restart, the_log_level_applies_on_reload)
{
    cfg_config_t *a = load("", 10, "equal", "");
    cfg_config_t *b = load("server:\n  log_level: warn\n", 10, "equal", "");
    const char *names[CFG_RESTART_SECTIONS];
    cr_assert_eq(changed(a, b, names), 0);
    cr_assert_eq(b->server.log_level, TT_LOG_WARN);
    cfg_free(a);
    cfg_free(b);
}

/* The status page's pure core (server/status.c): the page from a view, escaping of what comes
 * from outside, the ring of recent counts and the Content-Security-Policy's style hash. */
#include <criterion/criterion.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

static tt_buf_t out;

static void fini(void)
{
    tt_buf_free(&out);
}

TestSuite(status, .fini = fini);

/* The page as a NUL-terminated string (owned by `out`). */
static const char *render(const status_view_t *v)
{
    out.len = 0;
    cr_assert_eq(status_render(v, &out), 0);
    tt_buf_append(&out, "", 1);
    return (const char *)out.data;
}

static const char *escape(const char *s, size_t n)
{
    out.len = 0;
    status_html_escape(&out, s, n);
    tt_buf_append(&out, "", 1);
    return (const char *)out.data;
}

static proto_member_t member(const char *id, const char *addr, const char *state, bool self)
{
    return (proto_member_t){.id = {id, (uint32_t)strlen(id)},
                            .address = {addr, (uint32_t)strlen(addr)},
                            .state = {state, (uint32_t)strlen(state)},
                            .incarnation = 3,
                            .last_heard_ms = self ? 0 : 800,
                            .self = self};
}

static gov_fleet_entry_t limit(const char *id, cfg_store_t store, int64_t n)
{
    gov_fleet_entry_t l = {.type = CFG_TYPE_RPM,
                           .store = store,
                           .algorithm = RA_GCRA,
                           .amount = 300,
                           .period_ns = INT64_C(60000000000),
                           .burst = 60,
                           .n = n,
                           .local_share = 300 / n,
                           .sustained_bound = 300,
                           .burst_bound = 60,
                           .state = "armed"};
    snprintf(l.id, sizeof(l.id), "%s", id);
    return l;
}

Test(status, escapes_markup_quotes_and_ampersands)
{
    const char *s = "<script>alert(1)</script>\"'&x";
    cr_assert_str_eq(escape(s, strlen(s)),
                     "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;x");
}

Test(status, control_bytes_and_bad_utf8_become_replacement_characters)
{
    /* a NUL, an escape, DEL, a lone continuation byte, an overlong '<' (0xc0 0xbc), a
     * surrogate (ed a0 80), a sequence cut short at the end */
    const char s[] = "a\0b\x1b\x7f\x80<\xc0\xbc\xed\xa0\x80z\xe2\x82";
    cr_assert_str_eq(
        escape(s, sizeof(s) - 1),
        "a&#xFFFD;b&#xFFFD;&#xFFFD;&#xFFFD;&lt;&#xFFFD;&#xFFFD;&#xFFFD;&#xFFFD;&#xFFFD;"
        "z&#xFFFD;&#xFFFD;");
}

Test(status, well_formed_utf8_passes_whole)
{
    const char *s = "nœud-é-日本-\xf0\x9f\x9a\x80";
    cr_assert_str_eq(escape(s, strlen(s)), s);
}

/* Hostile member ids and addresses (gossip is outside input) cannot open an element or leave
 * an attribute: every one of them is in the page only escaped. */
Test(status, hostile_member_ids_are_escaped_in_text_and_attributes)
{
    proto_member_t m[] = {
        member("r0", "10.0.0.1:7946", "alive", true),
        member("\"><script>alert(1)</script>", "<img src=x onerror=alert(2)>", "suspect", false),
        member("r2' onmouseover='alert(3)", "10.0.0.3:7946", "dead", false),
    };
    status_view_t v = {.node = "<b>n</b>",
                       .version = "0.1.0",
                       .now = 1,
                       .ready = true,
                       .membership = true,
                       .live = 2,
                       .members = m,
                       .n_members = 3};
    const char *p = render(&v);
    cr_assert_null(strstr(p, "<script"), "%s", p);
    cr_assert_null(strstr(p, "<img"), "%s", p);
    cr_assert_null(strstr(p, "<b>n"), "%s", p);
    cr_assert_null(strstr(p, "' onmouseover"), "%s", p);
    cr_assert(strstr(p, "data-member=\"&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;\""), "%s",
              p);
    cr_assert(strstr(p, "data-member=\"r2&#39; onmouseover=&#39;alert(3)\""), "%s", p);
    cr_assert(strstr(p, "&lt;img src=x onerror=alert(2)&gt;"), "%s", p);
    /* every '<' of the page opens one of the page's own elements */
    static const char *const tags[] = {
        "!DOCTYPE", "html", "head", "meta", "title", "style",    "body", "h1", "h2",
        "p",        "span", "dl",   "dt",   "dd",    "table",    "tr",   "th", "td",
        "b",        "br",   "code", "svg",  "rect",  "polyline", "/"};
    for (const char *q = strchr(p, '<'); q; q = strchr(q + 1, '<')) {
        bool known = false;
        for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]) && !known; i++) {
            size_t n = strlen(tags[i]);
            known = strncmp(q + 1, tags[i], n) == 0 &&
                    (tags[i][0] == '/' || q[1 + n] == '>' || q[1 + n] == ' ');
        }
        cr_assert(known, "an element the page does not make: %.40s", q);
    }
}

Test(status, members_show_their_states_and_n)
{
    proto_member_t m[] = {member("r0", "10.0.0.1:7946", "alive", true),
                          member("r1", "10.0.0.2:7946", "suspect", false),
                          member("r2", "10.0.0.3:7946", "dead", false)};
    status_view_t v = {
        .node = "r0", .ready = true, .membership = true, .live = 2, .members = m, .n_members = 3};
    const char *p = render(&v);
    cr_assert(strstr(p, "N = <b>2</b>"), "%s", p);
    cr_assert(strstr(p, "<tr data-member=\"r1\"><td>r1</td><td class=\"state\"><span "
                        "class=\"st suspect\">suspect</span>"),
              "%s", p);
    cr_assert(strstr(p, "<tr data-member=\"r2\"><td>r2</td><td class=\"state\"><span "
                        "class=\"st dead\">dead</span>"),
              "%s", p);
    cr_assert(strstr(p, "r0 <span class=\"k\">(this replica)</span>"), "%s", p);
}

Test(status, unheard_members_are_rows_and_the_n_line_counts_them)
{
    proto_member_t m[] = {member("r0", "10.0.0.1:7946", "alive", true),
                          member("r1", "10.0.0.2:7946", "unheard", false)};
    m[1].last_heard_ms = -1;
    status_view_t v = {.node = "r0",
                       .ready = true,
                       .membership = true,
                       .live = 1,
                       .unheard = 1,
                       .unheard_for_ms = 27400,
                       .members = m,
                       .n_members = 2};
    const char *p = render(&v);
    cr_assert(strstr(p, "N = <b>2</b>: 1 alive or suspect (this one included) and 1 unheard: "
                        "members this replica knew before its restart and has not heard from "
                        "since, counted until they are found, for at most 27 s more"),
              "%s", p);
    cr_assert(strstr(p, "<tr data-member=\"r1\"><td>r1</td><td class=\"state\"><span "
                        "class=\"st unheard\">unheard</span>"),
              "%s", p);
    cr_assert(strstr(p, "never"), "an unheard member was never heard: %s", p);
}

Test(status, a_replica_without_membership_says_it_runs_alone)
{
    status_view_t v = {.node = "solo", .ready = false, .not_ready = "configuration not armed"};
    const char *p = render(&v);
    cr_assert(strstr(p, "runs alone, N = 1"), "%s", p);
    cr_assert(strstr(p, "not ready</span> configuration not armed"), "%s", p);
}

Test(status, limits_show_store_share_bounds_and_health)
{
    gov_fleet_entry_t l[] = {limit("team_rpm", CFG_STORE_SHARE, 3),
                             limit("org_rpm", CFG_STORE_REDIS, 3)};
    l[0].state = "held";
    l[1].fallback = true;
    l[1].sustained_bound = INT64_MAX;
    status_view_t v = {.node = "r0",
                       .ready = true,
                       .limits = l,
                       .n_limits = 2,
                       .redis = STATUS_DOWN,
                       .redis_detail = "connection refused",
                       .state_dir = true,
                       .snapshot_age_ms = 2500,
                       .generation = 4,
                       .now = INT64_C(100000000000),
                       .applied_ns = INT64_C(40000000000),
                       .config = "/etc/tokentriage/<x>.yaml",
                       .reloads_refused = 1};
    const char *p = render(&v);
    cr_assert(strstr(p, "<tr data-limit=\"team_rpm\">"), "%s", p);
    cr_assert(strstr(p, "<span class=\"st held\">held</span>"), "%s", p);
    cr_assert(strstr(p, "300 / 1m</td><td class=\"n\">3</td><td class=\"n\">100</td>"), "%s", p);
    cr_assert(strstr(p, "local fallback deciding"), "%s", p);
    cr_assert(strstr(p, ">unbounded<"), "%s", p);
    cr_assert(strstr(p, "<span class=\"st down\">down</span> <span class=\"k\">connection "
                        "refused</span>"),
              "%s", p);
    cr_assert(strstr(p, "<dt>State snapshot</dt><dd>2.5 s ago</dd>"), "%s", p);
    cr_assert(strstr(p, "generation 4, applied 60 s ago from /etc/tokentriage/&lt;x&gt;.yaml "
                        "&middot; 1 reload refused"),
              "%s", p);
    cr_assert(strstr(p, "no data yet"), "%s", p);
}

static gov_limit_metrics_t metrics(const char *id, uint64_t admit, uint64_t deny)
{
    gov_limit_metrics_t m = {.type = CFG_TYPE_RPM};
    snprintf(m.id, sizeof(m.id), "%s", id);
    m.outcomes[GOV_OUT_ADMIT] = admit;
    m.outcomes[GOV_OUT_DENY] = deny;
    return m;
}

#define S(k) (INT64_C(5000000000) * (k) + 1)

Test(status, the_ring_keeps_differences_per_interval_by_limit)
{
    status_rates_t r;
    status_rates_init(&r, 0);
    cr_assert(status_rates_due(&r, S(0)));
    gov_limit_metrics_t m[] = {metrics("a", 10, 1), metrics("b", 0, 0)};
    cr_assert_eq(status_rates_sample(&r, m, 2, S(0)), 0); /* the baseline */
    cr_assert_not(status_rates_due(&r, S(0) + 1000));
    cr_assert_eq(status_rates_find(&r, "a")->valid, 0);
    m[0] = metrics("a", 25, 4);
    m[1].outcomes[GOV_OUT_SOFT_DENY] = 2; /* admitted: soft */
    m[1].outcomes[GOV_OUT_FAIL_CLOSED] = 5;
    cr_assert(status_rates_due(&r, S(1)));
    cr_assert_eq(status_rates_sample(&r, m, 2, S(1)), 0);
    uint32_t a, d;
    const status_series_t *s = status_rates_find(&r, "a");
    cr_assert_eq(s->valid, 1);
    status_series_at(&r, s, STATUS_SLOTS - 1, &a, &d);
    cr_assert_eq(a, 15);
    cr_assert_eq(d, 3);
    status_series_at(&r, status_rates_find(&r, "b"), STATUS_SLOTS - 1, &a, &d);
    cr_assert_eq(a, 2);
    cr_assert_eq(d, 5);
    /* a reload dropped b and added c: b is forgotten, c starts with no data, a goes on */
    gov_limit_metrics_t m2[] = {metrics("a", 26, 4), metrics("c", 7, 7)};
    cr_assert_eq(status_rates_sample(&r, m2, 2, S(2)), 0);
    cr_assert_null(status_rates_find(&r, "b"));
    cr_assert_eq(status_rates_find(&r, "c")->valid, 0);
    s = status_rates_find(&r, "a");
    cr_assert_eq(s->valid, 2);
    status_series_at(&r, s, STATUS_SLOTS - 2, &a, &d);
    cr_assert_eq(a, 15);
    status_series_at(&r, s, STATUS_SLOTS - 1, &a, &d);
    cr_assert_eq(a, 1);
    cr_assert_eq(d, 0);
    status_rates_free(&r);
}

Test(status, the_ring_is_bounded_and_keeps_the_newest)
{
    status_rates_t r;
    status_rates_init(&r, 0);
    gov_limit_metrics_t m = metrics("a", 0, 0);
    for (int k = 0; k <= 3 * STATUS_SLOTS; k++) {
        m.outcomes[GOV_OUT_ADMIT] += (uint64_t)k; /* interval k admitted k */
        cr_assert_eq(status_rates_sample(&r, &m, 1, S(k)), 0);
    }
    const status_series_t *s = status_rates_find(&r, "a");
    cr_assert_eq(s->valid, STATUS_SLOTS);
    cr_assert_eq(r.n, 1);
    for (size_t i = 0; i < STATUS_SLOTS; i++) {
        uint32_t a, d;
        status_series_at(&r, s, i, &a, &d);
        cr_assert_eq(a, 3 * STATUS_SLOTS - (STATUS_SLOTS - 1) + i, "slot %zu: %u", i, a);
    }
    status_rates_free(&r);
}

Test(status, a_chart_is_drawn_from_the_ring)
{
    status_rates_t r;
    status_rates_init(&r, 0);
    gov_limit_metrics_t m = metrics("team_rpm", 0, 0);
    status_rates_sample(&r, &m, 1, S(0));
    m = metrics("team_rpm", 50, 10);
    status_rates_sample(&r, &m, 1, S(1));
    gov_fleet_entry_t l = limit("team_rpm", CFG_STORE_LOCAL, 1);
    status_view_t v = {.node = "r0", .ready = true, .limits = &l, .n_limits = 1, .rates = &r};
    const char *p = render(&v);
    cr_assert(strstr(p, "<svg width=\"180\" height=\"36\""), "%s", p);
    cr_assert(strstr(p, "50 admitted, 10 denied</title>"), "%s", p);
    cr_assert(strstr(p, "now 10.0/s admitted, 2.0/s denied"), "%s", p);
    /* one interval of data is a step across it, not a lone point nothing draws */
    cr_assert(strstr(p, "stroke=\"#2f9e44\" stroke-width=\"1.5\" points=\"176.0,2.0 179.0,2.0\""),
              "%s", p);
    status_rates_free(&r);
}

/* The policy allows the one style block by its hash: it must be the block the page carries. */
Test(status, the_policys_style_hash_is_the_pages_style)
{
    cr_assert_geq(sodium_init(), 0);
    status_view_t v = {.node = "r0", .ready = true};
    const char *p = render(&v);
    const char *a = strstr(p, "<style>"), *b = strstr(p, "</style>");
    cr_assert(a && b);
    a += 7;
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, (const unsigned char *)a, (unsigned long long)(b - a));
    char b64[sodium_base64_ENCODED_LEN(sizeof(h), sodium_base64_VARIANT_ORIGINAL)];
    sodium_bin2base64(b64, sizeof(b64), h, sizeof(h), sodium_base64_VARIANT_ORIGINAL);
    char want[128];
    snprintf(want, sizeof(want), "style-src 'sha256-%s';", b64);
    cr_assert(strstr(STATUS_HEADERS, want), "%s\nwant %s", STATUS_HEADERS, want);
    cr_assert(strstr(STATUS_HEADERS, "default-src 'none'"));
}

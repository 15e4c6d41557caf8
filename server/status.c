/* See status.h. */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ratealg.h"
#include "tt_utf8.h"

/* ---- the ring of recent counts ------------------------------------------------------------ */

void status_rates_init(status_rates_t *r, int64_t interval_ns)
{
    *r = (status_rates_t){.interval_ns = interval_ns > 0 ? interval_ns : STATUS_INTERVAL_NS};
}

void status_rates_free(status_rates_t *r)
{
    free(r->series);
    r->series = NULL;
    r->n = r->cap = 0;
}

bool status_rates_due(const status_rates_t *r, int64_t now)
{
    return r->last_ns == 0 || now - r->last_ns >= r->interval_ns || now < r->last_ns;
}

const status_series_t *status_rates_find(const status_rates_t *r, const char *id)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->series[i].id, id) == 0)
            return &r->series[i];
    return NULL;
}

void status_series_at(const status_rates_t *r, const status_series_t *s, size_t i, uint32_t *admit,
                      uint32_t *deny)
{
    size_t k = (r->head + i) % STATUS_SLOTS; /* head is the oldest slot */
    *admit = s->admit[k];
    *deny = s->deny[k];
}

static uint32_t delta(uint64_t now, uint64_t then)
{
    uint64_t d = now >= then ? now - then : 0; /* a counter never goes back; if it did, 0 */
    return d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
}

int status_rates_sample(status_rates_t *r, const gov_limit_metrics_t *lm, size_t n, int64_t now)
{
    if (n > GOV_LIMITS_MAX)
        n = GOV_LIMITS_MAX;
    /* room for every new id first, so that a failure changes nothing */
    size_t need = r->n + n;
    if (need > r->cap) {
        status_series_t *s = realloc(r->series, need * sizeof(*s));
        if (!s)
            return -1;
        r->series = s;
        r->cap = need;
    }
    for (size_t i = 0; i < r->n; i++)
        r->series[i].seen = false;
    size_t slot = r->head;
    for (size_t i = 0; i < n; i++) {
        const uint64_t *o = lm[i].outcomes;
        uint64_t admit = o[GOV_OUT_ADMIT] + o[GOV_OUT_SOFT_DENY] + o[GOV_OUT_FAIL_OPEN];
        uint64_t deny = o[GOV_OUT_DENY] + o[GOV_OUT_UNFITTABLE] + o[GOV_OUT_FAIL_CLOSED];
        status_series_t *s = (status_series_t *)status_rates_find(r, lm[i].id);
        if (!s) { /* a new limit: its baseline, no data yet */
            s = &r->series[r->n++];
            memset(s, 0, sizeof(*s));
            snprintf(s->id, sizeof(s->id), "%s", lm[i].id);
        } else {
            s->admit[slot] = delta(admit, s->last_admit);
            s->deny[slot] = delta(deny, s->last_deny);
            if (s->valid < STATUS_SLOTS)
                s->valid++;
        }
        s->last_admit = admit;
        s->last_deny = deny;
        s->seen = true;
    }
    /* the series no limit reported any more go */
    size_t k = 0;
    for (size_t i = 0; i < r->n; i++)
        if (r->series[i].seen)
            r->series[k++] = r->series[i];
    r->n = k;
    if (r->last_ns != 0)
        r->head = (r->head + 1) % STATUS_SLOTS;
    r->last_ns = now;
    return 0;
}

/* ---- HTML --------------------------------------------------------------------------------- */

static void put(tt_buf_t *out, const char *s)
{
    tt_buf_append(out, s, strlen(s));
}

__attribute__((format(printf, 2, 3))) static void putf(tt_buf_t *out, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    tt_buf_append(out, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

void status_html_escape(tt_buf_t *out, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t run = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        const char *rep = NULL;
        size_t skip = 1;
        if (c == '&')
            rep = "&amp;";
        else if (c == '<')
            rep = "&lt;";
        else if (c == '>')
            rep = "&gt;";
        else if (c == '"')
            rep = "&quot;";
        else if (c == '\'')
            rep = "&#39;";
        else if (c < 0x20 || c == 0x7f)
            rep = "&#xFFFD;";
        else if (c >= 0x80 && !(skip = tt_utf8_len(s + i, n - i)))
            rep = "&#xFFFD;", skip = 1;
        if (!rep) {
            i += skip;
            continue;
        }
        tt_buf_append(out, s + run, i - run);
        put(out, rep);
        i += skip;
        run = i;
    }
    tt_buf_append(out, s + run, n - run);
}

static void esc(tt_buf_t *out, const char *s)
{
    status_html_escape(out, s, strlen(s));
}

/* The one style block; STATUS_HEADERS names its SHA-256 (a test recomputes it). */
static const char STYLE[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1d232a;background:#fbfbfc}"
    "h1{font-size:1.35em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.4em 0 .4em}"
    "p.sub{color:#56606b;margin:0 0 1em}"
    "table{border-collapse:collapse;background:#fff;border:1px solid #d8dde3}"
    "th,td{padding:.3em .7em;border-bottom:1px solid #e6e9ed;text-align:left;vertical-align:middle}"
    "th{background:#f1f3f5;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".st{font-weight:600;padding:.1em .5em;border-radius:.6em}"
    ".alive,.up,.armed,.ready{background:#d9f2df;color:#14532d}"
    ".suspect,.held,.unarmed,.unheard{background:#fdf0c4;color:#713f12}"
    ".dead,.down,.notready{background:#fbd5d5;color:#7f1d1d}"
    ".left,.none{background:#e9ecef;color:#495057}"
    ".doubt{background:#fbd5d5;color:#7f1d1d;padding:.5em;border-radius:.3em}"
    "dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em;margin:0}"
    "dt{color:#56606b}dd{margin:0}svg{display:block}.k{color:#56606b;font-size:.85em}";

const char STATUS_HEADERS[] =
    "Content-Security-Policy: default-src 'none'; "
    "style-src 'sha256-ZBkmLR2Vaf2hkA7yP8uc3bwVJwGOXZp5m74iUotTMWk='; img-src 'none'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'\r\n"
    "X-Content-Type-Options: nosniff\r\n"
    "Referrer-Policy: no-referrer\r\n"
    "Cache-Control: no-store\r\n";

/* A state as a badge: its name, and a class of the same name for its colour. */
static void badge(tt_buf_t *out, const char *cls, const char *text)
{
    put(out, "<span class=\"st ");
    esc(out, cls);
    put(out, "\">");
    esc(out, text);
    put(out, "</span>");
}

/* "1.5 s", "3 min", "2 h": an age for people. */
static void age(tt_buf_t *out, int64_t ms)
{
    if (ms < 0)
        put(out, "never");
    else if (ms < 10000)
        putf(out, "%.1f s ago", (double)ms / 1000);
    else if (ms < 120000)
        putf(out, "%lld s ago", (long long)(ms / 1000));
    else if (ms < 7200000)
        putf(out, "%lld min ago", (long long)(ms / 60000));
    else
        putf(out, "%lld h ago", (long long)(ms / 3600000));
}

/* A period as the config writes it (1m, 1h30m, 500ms). */
static void period(tt_buf_t *out, int64_t ns)
{
    char buf[64];
    put(out, cfg_duration_format(ns, buf, sizeof(buf)));
}

/* An int64 bound, "unbounded" at the saturation value. */
static void bound(tt_buf_t *out, int64_t v)
{
    if (v == INT64_MAX)
        put(out, "unbounded");
    else
        putf(out, "%lld", (long long)v);
}

#define CHART_W 180
#define CHART_H 36

static void polyline(tt_buf_t *out, const status_rates_t *r, const status_series_t *s, uint32_t max,
                     bool deny, const char *colour)
{
    putf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", colour);
    /* one slot is drawn as a step across its interval, so that it shows */
    size_t first = STATUS_SLOTS - s->valid;
    size_t from = first ? first - 1 : 0;
    for (size_t i = from; i < STATUS_SLOTS; i++) {
        uint32_t a, d;
        status_series_at(r, s, i < first ? first : i, &a, &d);
        uint32_t v = deny ? d : a;
        double x = (double)i * (CHART_W - 1) / (STATUS_SLOTS - 1);
        double y = (CHART_H - 2) - (double)v * (CHART_H - 4) / max;
        putf(out, "%s%.1f,%.1f", i == from ? "" : " ", x, y);
    }
    put(out, "\"/>");
}

/* The limit's recent admissions (green) and denials (red) per interval, and the last rates. */
static void chart(tt_buf_t *out, const status_rates_t *r, const char *id)
{
    const status_series_t *s = r ? status_rates_find(r, id) : NULL;
    double secs = (double)(r ? r->interval_ns : STATUS_INTERVAL_NS) / 1e9;
    if (!s || s->valid == 0) {
        put(out, "<td class=\"k\">no data yet</td>");
        return;
    }
    uint32_t max = 1, last_a = 0, last_d = 0;
    uint64_t sum_a = 0, sum_d = 0;
    for (size_t i = STATUS_SLOTS - s->valid; i < STATUS_SLOTS; i++) {
        uint32_t a, d;
        status_series_at(r, s, i, &a, &d);
        max = a > max ? a : max;
        max = d > max ? d : max;
        sum_a += a;
        sum_d += d;
        last_a = a;
        last_d = d;
    }
    putf(out,
         "<td><svg width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">"
         "<title>admitted and denied per %.0f s over the last %.0f s: %llu admitted, %llu "
         "denied</title>"
         "<rect width=\"%d\" height=\"%d\" fill=\"#f6f8fa\"/>",
         CHART_W, CHART_H, CHART_W, CHART_H, secs, secs * s->valid, (unsigned long long)sum_a,
         (unsigned long long)sum_d, CHART_W, CHART_H);
    polyline(out, r, s, max, false, "#2f9e44");
    polyline(out, r, s, max, true, "#e03131");
    putf(out,
         "</svg><span class=\"k\">now %.1f/s admitted, %.1f/s denied &middot; peak %u per %.0f "
         "s</span></td>",
         last_a / secs, last_d / secs, max, secs);
}

static void members(tt_buf_t *out, const status_view_t *v)
{
    put(out, "<h2>Members</h2>");
    if (!v->membership) {
        put(out, "<p>No membership configured (shared_state.share): this replica runs alone, "
                 "N = 1.</p>");
        return;
    }
    if (v->unheard) /* why N is more than the live rows */
        putf(out,
             "<p>N = <b>%lld</b>: %lld alive or suspect (this one included) and %lld unheard: "
             "members this replica knew before its restart and has not heard from since, counted "
             "until they are found, for at most %.0f s more</p>",
             (long long)(v->live + v->unheard), (long long)v->live, (long long)v->unheard,
             (double)v->unheard_for_ms / 1000);
    else
        putf(out, "<p>N = <b>%lld</b> (alive and suspect members, this one included)</p>",
             (long long)v->live);
    put(out, "<table id=\"members\"><tr><th>member</th><th>state</th><th>address</th>"
             "<th>incarnation</th><th>last heard</th></tr>");
    for (size_t i = 0; i < v->n_members; i++) {
        const proto_member_t *m = &v->members[i];
        char state[16];
        snprintf(state, sizeof(state), "%.*s", (int)m->state.len, m->state.ptr);
        put(out, "<tr data-member=\"");
        status_html_escape(out, m->id.ptr, m->id.len);
        put(out, "\"><td>");
        status_html_escape(out, m->id.ptr, m->id.len);
        if (m->self)
            put(out, " <span class=\"k\">(this replica)</span>");
        put(out, "</td><td class=\"state\">");
        badge(out, state, state);
        put(out, "</td><td>");
        status_html_escape(out, m->address.ptr, m->address.len);
        putf(out, "</td><td class=\"n\">%llu</td><td>", (unsigned long long)m->incarnation);
        if (m->self)
            put(out, "&mdash;");
        else
            age(out, m->last_heard_ms);
        put(out, "</td></tr>");
    }
    put(out, "</table>");
}

static void limits(tt_buf_t *out, const status_view_t *v)
{
    put(out, "<h2>Limits</h2>");
    if (v->n_limits == 0) {
        put(out, "<p>No rate-class limit is configured.</p>");
        return;
    }
    put(out, "<table id=\"limits\"><tr><th>limit</th><th>store</th><th>state</th>"
             "<th>amount</th><th>N</th><th>share here</th><th>fleet bound</th>"
             "<th>burst bound</th><th>recent decisions</th></tr>");
    for (size_t i = 0; i < v->n_limits; i++) {
        const gov_fleet_entry_t *l = &v->limits[i];
        const char *store = cfg_store_name(l->store);
        put(out, "<tr data-limit=\"");
        esc(out, l->id);
        put(out, "\"><td><b>");
        esc(out, l->id);
        put(out, "</b><br><span class=\"k\">");
        esc(out, cfg_type_name(l->type));
        put(out, " &middot; ");
        esc(out, ra_algorithm_name(l->algorithm));
        put(out, "</span></td><td>");
        esc(out, store);
        if (l->fallback)
            put(out, "<br><span class=\"k\">local fallback deciding</span>");
        put(out, "</td><td>");
        const char *state = l->state ? l->state : "armed";
        badge(out, state, state);
        putf(out, "</td><td class=\"n\">%lld / ", (long long)l->amount);
        period(out, l->period_ns);
        putf(out, "</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td><td class=\"n\">",
             (long long)l->n, (long long)l->local_share);
        bound(out, l->sustained_bound);
        put(out, "</td><td class=\"n\">");
        bound(out, l->burst_bound);
        put(out, "</td>");
        chart(out, v->rates, l->id);
        put(out, "</tr>");
    }
    put(out, "</table><p class=\"k\">Fleet bound: the most the whole fleet can admit per period "
             "as this replica sees it (local: every replica counts alone; redis: one counter; "
             "share: the sum of every member's share). Charts: the last minutes, "
             "green admitted, red denied.</p>");
}

static void stores(tt_buf_t *out, const status_view_t *v)
{
    put(out, "<h2>Stores</h2><dl><dt>Redis</dt><dd>");
    if (v->redis == STATUS_NONE) {
        badge(out, "none", "not configured");
    } else {
        badge(out, v->redis == STATUS_UP ? "up" : "down", v->redis == STATUS_UP ? "up" : "down");
        if (v->redis == STATUS_DOWN && v->redis_detail && *v->redis_detail) {
            put(out, " <span class=\"k\">");
            esc(out, v->redis_detail);
            put(out, "</span>");
        }
    }
    put(out, "</dd><dt>State snapshot</dt><dd>");
    if (!v->state_dir)
        put(out, "off (server.state_dir is not set: a restart starts every counter afresh)");
    else if (v->snapshot_age_ms < 0)
        put(out, "none yet");
    else
        age(out, v->snapshot_age_ms);
    put(out, "</dd></dl>");
}

int status_render(const status_view_t *v, tt_buf_t *out)
{
    put(out, "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">");
    putf(out, "<meta http-equiv=\"refresh\" content=\"%d\">", STATUS_REFRESH_S);
    put(out, "<meta name=\"viewport\" content=\"width=device-width\"><title>tokentriage ");
    esc(out, v->node ? v->node : "");
    put(out, "</title><style>");
    put(out, STYLE);
    put(out, "</style></head><body><h1>tokentriage on ");
    esc(out, v->node ? v->node : "");
    put(out, "</h1><p class=\"sub\">");
    esc(out, v->version ? v->version : "");
    put(out, " &middot; ");
    if (v->ready)
        badge(out, "ready", "ready");
    else {
        badge(out, "notready", "not ready");
        put(out, " ");
        esc(out, v->not_ready ? v->not_ready : "");
    }
    put(out, "</p>");
    if (v->n_in_doubt && *v->n_in_doubt) {
        put(out, "<p class=\"doubt\">N IN DOUBT: ");
        esc(out, v->n_in_doubt);
        put(out, "</p>");
    }
    putf(out, "<dl><dt>Configuration</dt><dd>generation %llu, applied ",
         (unsigned long long)v->generation);
    age(out,
        v->applied_ns > 0 && v->now >= v->applied_ns ? (v->now - v->applied_ns) / 1000000 : -1);
    put(out, " from ");
    esc(out, v->config ? v->config : "<default>");
    if (v->reloads_refused)
        putf(out, " &middot; %llu reload%s refused since the start",
             (unsigned long long)v->reloads_refused, v->reloads_refused == 1 ? "" : "s");
    put(out, "</dd></dl>");
    members(out, v);
    limits(out, v);
    stores(out, v);
    putf(out,
         "<p class=\"k\">This page reloads every %d s. The same view for scripts: "
         "<code>tokentriage fleet --json</code>, /metrics.</p></body></html>\n",
         STATUS_REFRESH_S);
    return out->failed ? -1 : 0;
}

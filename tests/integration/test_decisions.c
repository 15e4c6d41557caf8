/*
 * The real daemon, driven through the client library: what a caller sees (SPEC §5), reloads,
 * leases, pipelining, the socket's life.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon.h"

#define TEAM_RPM(burst)                                                                            \
    "    - id: team_rpm\n      attach: { level: team }\n      type: rpm\n      amount: 300\n"      \
    "      period: 1m\n      burst: " #burst "\n"

static tt_daemon_t d;
static tt_client_t *c;
static tt_response_t r;

static void start(const char *limits, const char *server_extra)
{
    cr_assert_eq(tt_daemon_start(&d, limits, server_extra), 0, "daemon did not start");
    c = tt_daemon_client(&d);
    cr_assert_not_null(c);
}

static void stop(void)
{
    tt_close(c);
    c = NULL;
    tt_daemon_stop(&d);
}

TestSuite(decisions, .fini = stop, .timeout = 60);

static const tt_pair_t team_t42[] = {{"team", "t-42"}};

Test(decisions, the_seed_capture_comes_out_exactly)
{
    start(TEAM_RPM(60), NULL);
    cr_assert_eq(tt_decide(c, team_t42, 1, -1, &r), 0, "%s", r.error_message);
    cr_assert(r.admit);
    cr_assert_str_eq(r.verdict, "admit");
    cr_assert_str_eq(r.limit, "team_rpm");
    cr_assert_str_eq(tt_header(&r, "Ratelimit-Policy"), "\"team_rpm\";q=300;w=60");
    cr_assert_str_eq(tt_header(&r, "X-Ratelimit-Limit-Requests"), "300");
    cr_assert_str_eq(tt_header(&r, "X-Ratelimit-Remaining-Requests"), "59");
    cr_assert_eq(r.remaining, 59);
}

Test(decisions, with_burst_300_one_request_leaves_299)
{
    start(TEAM_RPM(300), NULL);
    cr_assert_eq(tt_decide(c, team_t42, 1, -1, &r), 0);
    cr_assert_str_eq(tt_header(&r, "X-Ratelimit-Remaining-Requests"), "299");
}

Test(decisions, a_denial_in_one_limit_consumes_nothing_in_another)
{
    start("    - id: team_rpm\n      attach: { level: team }\n      type: rpm\n"
          "      amount: 2\n      period: 1m\n"
          "    - id: key_rpm\n      attach: { level: key }\n      type: rpm\n"
          "      amount: 1\n      period: 1m\n",
          NULL);
    tt_pair_t ka[] = {{"team", "t"}, {"key", "a"}}, kb[] = {{"team", "t"}, {"key", "b"}};
    cr_assert_eq(tt_decide(c, ka, 2, -1, &r), 0);
    cr_assert(r.admit);
    cr_assert_eq(tt_decide(c, ka, 2, -1, &r), 0);
    cr_assert_not(r.admit);
    cr_assert_str_eq(r.verdict, "deny");
    cr_assert_str_eq(r.limit, "key_rpm");
    cr_assert_gt(r.retry_after, 0);
    cr_assert_not_null(tt_header(&r, "Retry-After"));
    /* team_rpm still has its second unit: the denied request took none of it */
    cr_assert_eq(tt_decide(c, kb, 2, -1, &r), 0);
    cr_assert(r.admit, "team_rpm was charged for a denied request");
    cr_assert_eq(tt_decide(c, (tt_pair_t[]){{"team", "t"}, {"key", "c"}}, 2, -1, &r), 0);
    cr_assert_not(r.admit);
    cr_assert_str_eq(r.limit, "team_rpm");
}

#define TEAM_TPM                                                                                   \
    "    - id: team_tpm\n      attach: { level: team }\n      type: tpm\n"                         \
    "      amount: 100000\n      period: 1m\n      burst: 20000\n"

Test(decisions, settling_a_reservation_restores_the_headroom)
{
    start(TEAM_TPM, NULL);
    tt_pair_t t[] = {{"team", "t"}};
    long long t0 = tt_now_ms();
    cr_assert_eq(tt_decide(c, t, 1, 16384, &r), 0, "%s", r.error_message);
    cr_assert(r.admit);
    cr_assert_neq(r.reservation, 0, "an admitted tpm decision carries its reservation");
    cr_assert_eq(tt_settle(c, r.reservation, 1000, &r), 0, "%s", r.error_message);
    cr_assert_eq(r.kind, TT_KIND_SETTLED);
    cr_assert_eq(r.settled, 1);
    cr_assert_not(r.already_settled);
    cr_assert_eq(tt_decide(c, t, 1, 1, &r), 0);
    /* 20000 - 1000 - 1, give or take a token, plus what refilled meanwhile (100000 a minute:
     * 5 tokens every 3 ms) on a slow machine */
    long long refill = (tt_now_ms() - t0 + 1) * 100000 / 60000 + 1;
    long long left = atoll(tt_header(&r, "X-Ratelimit-Remaining-Tokens"));
    cr_assert(left >= 20000 - 1000 - 1 - 1 && left <= 20000 - 1000 - 1 + refill,
              "remaining %lld (refill allowance %lld)", left, refill);
}

Test(decisions, a_settle_for_a_reservation_never_made_refunds_nothing)
{
    /* issue 23, item 2: the key has spent its whole burst; a settle for a reservation it never
     * got is refused and must not hand it a full bucket */
    start(TEAM_TPM, NULL);
    tt_pair_t t[] = {{"team", "t"}};
    cr_assert_eq(tt_decide(c, t, 1, 20000, &r), 0, "%s", r.error_message);
    cr_assert(r.admit);
    uint64_t real = r.reservation;
    const uint64_t made_up[] = {1, 1000000, real + 1, real ^ (UINT64_C(1) << 32)};
    for (size_t i = 0; i < sizeof(made_up) / sizeof(made_up[0]); i++) {
        cr_assert_eq(tt_settle(c, made_up[i], 0, &r), TT_ESERVER);
        cr_assert_str_eq(r.error_code, "unknown_reservation");
    }
    cr_assert_eq(tt_decide(c, t, 1, 10000, &r), 0, "%s", r.error_message);
    cr_assert_not(r.admit, "10000 tokens admitted right after the whole burst was spent");
}

Test(decisions, settling_twice_refunds_once)
{
    /* issue 23, item 2: a client retrying a settle after a timeout must not refund twice */
    start(TEAM_TPM, NULL);
    tt_pair_t t[] = {{"team", "t"}};
    cr_assert_eq(tt_decide(c, t, 1, 20000, &r), 0, "%s", r.error_message);
    cr_assert(r.admit);
    uint64_t id = r.reservation;
    cr_assert_eq(tt_settle(c, id, 10000, &r), 0, "%s", r.error_message);
    cr_assert_eq(r.settled, 1);
    cr_assert_eq(tt_settle(c, id, 10000, &r), 0, "%s", r.error_message); /* the retry */
    cr_assert(r.already_settled);
    cr_assert_eq(r.settled, 0);
    /* one refund of 10000 (plus what refilled: 5 tokens every 3 ms) leaves less than 15000 */
    cr_assert_eq(tt_decide(c, t, 1, 15000, &r), 0, "%s", r.error_message);
    cr_assert_not(r.admit, "the second settle refunded again");
}

Test(decisions, a_charge_counts_tokens_and_never_refunds)
{
    start(TEAM_TPM, NULL);
    tt_pair_t t[] = {{"team", "t"}};
    cr_assert_eq(tt_charge(c, t, 1, 20000, &r), 0, "%s", r.error_message);
    cr_assert_eq(r.kind, TT_KIND_CHARGED);
    cr_assert_eq(r.charged, 1);
    cr_assert_eq(tt_charge(c, t, 1, 0, &r), 0, "%s", r.error_message);
    cr_assert_eq(tt_decide(c, t, 1, 10000, &r), 0, "%s", r.error_message);
    cr_assert_not(r.admit, "the charged tokens came back");
}

Test(decisions, a_charge_without_a_tpm_limit_is_a_clear_error)
{
    start(TEAM_RPM(60), NULL);
    cr_assert_eq(tt_charge(c, team_t42, 1, 10, &r), TT_ESERVER);
    cr_assert_str_eq(r.error_code, "no_tpm_limit");
    cr_assert_str_eq(r.error_message, "subject: no tpm limit applies (charge counts tpm limits)");
    cr_assert_eq(tt_ping(c, &r), 0, "the connection goes on after an error");
}

Test(decisions, a_tpm_decision_without_tokens_is_refused)
{
    start(TEAM_TPM, NULL);
    cr_assert_eq(tt_decide(c, (tt_pair_t[]){{"team", "t"}}, 1, -1, &r), TT_ESERVER);
    /* the engine's error on the wire: its code's name, and "path: message" */
    cr_assert_str_eq(r.error_code, "tokens_required");
    cr_assert_str_eq(r.error_message, "tokens: required: tpm limit \"team_tpm\" applies");
}

#define KEY_CONCURRENCY                                                                            \
    "    - id: key_conc\n      attach: { level: key }\n      type: concurrency\n      amount: 2\n"

Test(decisions, leases_die_with_their_connection)
{
    start(KEY_CONCURRENCY, NULL);
    tt_pair_t k[] = {{"key", "k"}};
    tt_client_t *other = tt_daemon_client(&d);
    cr_assert_eq(tt_acquire(c, k, 1, &r), 0);
    cr_assert(r.admit);
    uint64_t first = r.lease;
    cr_assert_neq(first, 0);
    cr_assert_eq(tt_acquire(c, k, 1, &r), 0);
    cr_assert(r.admit);
    cr_assert_eq(tt_acquire(other, k, 1, &r), 0);
    cr_assert_not(r.admit, "a third lease over a gauge of 2");
    /* release gives one back */
    cr_assert_eq(tt_release(c, first, &r), 0);
    cr_assert_eq(r.kind, TT_KIND_RELEASED);
    cr_assert(r.released);
    cr_assert_eq(tt_release(c, first, &r), 0);
    cr_assert_not(r.released, "a lease ends once");
    cr_assert_eq(tt_acquire(other, k, 1, &r), 0);
    cr_assert(r.admit);
    /* closing c ends its remaining lease: other can take a second one */
    tt_close(c);
    c = NULL;
    bool admitted = false;
    for (long long deadline = tt_now_ms() + 5000; !admitted && tt_now_ms() < deadline;) {
        cr_assert_eq(tt_acquire(other, k, 1, &r), 0);
        admitted = r.admit;
    }
    cr_assert(admitted, "the closed connection's lease was not released");
    tt_close(other);
}

Test(decisions, a_lease_is_released_only_by_the_connection_that_holds_it)
{
    /* issue 23, item 1: A holds both leases of a gauge of 2; B, refused, presents A's lease ids.
     * Nothing may be released: B's next acquires are still refused, and A's ids still work. */
    start(KEY_CONCURRENCY, NULL);
    tt_pair_t k[] = {{"key", "k"}};
    tt_client_t *b = tt_daemon_client(&d);
    cr_assert_not_null(b);
    uint64_t held[2];
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(tt_acquire(c, k, 1, &r), 0);
        cr_assert(r.admit);
        held[i] = r.lease;
    }
    cr_assert_eq(tt_acquire(b, k, 1, &r), 0);
    cr_assert_not(r.admit);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(tt_release(b, held[i], &r), 0);
        cr_assert_eq(r.kind, TT_KIND_RELEASED);
        cr_assert_not(r.released, "B released A's lease %d", i);
    }
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(tt_acquire(b, k, 1, &r), 0);
        cr_assert_not(r.admit, "B acquire %d admitted: more in flight than the gauge allows", i);
    }
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(tt_release(c, held[i], &r), 0);
        cr_assert(r.released, "A's own lease %d", i);
    }
    cr_assert_eq(tt_acquire(b, k, 1, &r), 0);
    cr_assert(r.admit);
    tt_close(b);
}

Test(decisions, ten_thousand_pipelined_requests_are_answered_in_order)
{
    start(TEAM_RPM(60) KEY_CONCURRENCY, NULL);
    enum { N = 10000 };
    static uint64_t seqs[N];
    for (int i = 0; i < N; i++) {
        char id[32];
        snprintf(id, sizeof(id), "t-%d", i % 97);
        tt_pair_t s[] = {{"team", id}};
        int rc;
        switch (i % 4) { /* a mix of ops, each answered in its turn */
        case 0:
        case 1:
            rc = tt_send_decide(c, s, 1, -1, &seqs[i]);
            break;
        case 2:
            rc = tt_send_ping(c, &seqs[i]);
            break;
        default:
            rc = tt_send_release(c, 12345, &seqs[i]);
            break;
        }
        cr_assert_eq(rc, 0);
    }
    cr_assert_eq(tt_outstanding(c), N);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(tt_recv(c, &r), 0, "answer %d: %s", i, r.error_message);
        cr_assert_eq(r.seq, seqs[i], "answer %d out of order", i);
        tt_kind_t want = i % 4 < 2    ? TT_KIND_DECISION
                         : i % 4 == 2 ? TT_KIND_PONG
                                      : TT_KIND_RELEASED;
        cr_assert_eq(r.kind, want, "answer %d", i);
    }
    cr_assert_eq(tt_outstanding(c), 0);
}

#define RELOAD_V1                                                                                  \
    "    - id: a_rpm\n      attach: { level: team }\n      type: rpm\n      amount: 10\n"          \
    "      period: 1h\n"                                                                           \
    "    - id: b_rpm\n      attach: { level: key }\n      type: rpm\n      amount: 10\n"           \
    "      period: 1h\n"
#define RELOAD_V2                                                                                  \
    "    - id: a_rpm\n      attach: { level: team }\n      type: rpm\n      amount: 10\n"          \
    "      period: 1h\n"                                                                           \
    "    - id: b_rpm\n      attach: { level: key }\n      type: rpm\n      amount: 20\n"           \
    "      period: 1h\n"                                                                           \
    "    - id: c_rpm\n      attach: { level: user }\n      type: rpm\n      amount: 5\n"           \
    "      period: 1h\n"

static int64_t remaining(const tt_pair_t *s)
{
    cr_assert_eq(tt_decide(c, s, 1, -1, &r), 0, "%s", r.error_message);
    return r.remaining;
}

Test(decisions, a_reload_keeps_counters_and_resets_only_what_changed)
{
    start(RELOAD_V1, NULL);
    tt_pair_t team[] = {{"team", "t"}}, key[] = {{"key", "k"}};
    for (int i = 0; i < 3; i++) {
        remaining(team);
        remaining(key);
    }
    /* the counter table's size is read at start only: the reload says so, and applies the rest */
    cr_assert_eq(tt_daemon_rewrite(&d, RELOAD_V2, "  max_counters: 5000\n"), 0);
    cr_assert(tt_daemon_log_has(&d, "reload applied", 5000), "no reload logged");
    cr_assert(tt_daemon_log_has(&d, "section=server", 0), "the server change went unmentioned");
    cr_assert(!tt_daemon_log_has(&d, "section=shared_state", 0));
    cr_assert(tt_daemon_log_has(&d, "limit=a_rpm counters=kept", 0));
    cr_assert(tt_daemon_log_has(&d, "limit=b_rpm counters=reset", 0));
    cr_assert(tt_daemon_log_has(&d, "limit=c_rpm counters=added", 0));
    cr_assert_eq(remaining(team), 6, "a_rpm kept its three requests");
    cr_assert_eq(remaining(key), 19, "b_rpm changed, so it starts afresh");

    /* a broken file is refused whole: the running config and its counters stay */
    cr_assert_eq(tt_daemon_rewrite(&d, "    - id: a_rpm\n      burts: 3\n", NULL), 0);
    cr_assert(tt_daemon_log_has(&d, "reload refused", 5000));
    cr_assert_eq(remaining(team), 5);
    cr_assert_eq(remaining((tt_pair_t[]){{"user", "u"}}), 4, "c_rpm still serves");
}

Test(decisions, sigterm_exits_cleanly_and_removes_the_socket)
{
    start(TEAM_RPM(60), NULL);
    cr_assert_eq(access(d.socket, F_OK), 0);
    kill(d.pid, SIGTERM);
    int st = 0;
    long long deadline = tt_now_ms() + 10000;
    while (waitpid(d.pid, &st, WNOHANG) == 0 && tt_now_ms() < deadline)
        usleep(2000);
    d.pid = 0;
    cr_assert(WIFEXITED(st));
    cr_assert_eq(WEXITSTATUS(st), 0);
    cr_assert_neq(access(d.socket, F_OK), 0, "the socket file is still there");
}

Test(decisions, a_stale_socket_is_replaced_and_a_live_one_is_not)
{
    start(TEAM_RPM(60), NULL);
    /* a second daemon on the same socket refuses, exit 69, and the first keeps serving */
    pid_t first = d.pid;
    cr_assert_neq(tt_daemon_spawn(&d, false), 0);
    cr_assert_eq(d.exit_status, 69);
    d.pid = first;
    cr_assert(tt_daemon_log_has(&d, "another tokentriage is already serving", 0));
    cr_assert_eq(tt_ping(c, &r), 0);
    /* a daemon that died leaves its socket file: the next one replaces it */
    kill(d.pid, SIGKILL);
    waitpid(d.pid, NULL, 0);
    cr_assert_eq(access(d.socket, F_OK), 0);
    cr_assert_eq(tt_daemon_spawn(&d, true), 0);
    cr_assert(tt_daemon_log_has(&d, "replaced a stale socket", 0));
}

Test(decisions, the_socket_gets_its_configured_mode)
{
    start(TEAM_RPM(60), "  socket_mode: \"0600\"\n");
    struct stat st;
    cr_assert_eq(stat(d.socket, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600);
}

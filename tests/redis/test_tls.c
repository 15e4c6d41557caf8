/*
 * TLS (redis/tls.c, redis/conn.c) against real redis-servers with a tls-port, on certificates the
 * test makes (certs.c): verified against the CA and the name, a client certificate when the
 * server asks for one; the wrong CA, the wrong name, an expired certificate and a server that
 * speaks no TLS are each a clear error naming the address and the reason, while every call is
 * refused at once (each limit's posture decides) and Redis counts nothing.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "certs.h"
#include "harness.h"
#include "redis_store.h"
#include "store_test.h"

#define MS INT64_C(1000000)

static rt_certs_t certs;
static rh_server_t server; /* the server certificate, client certificates optional */
static const char *server_args[16];
static char server_storage[512], tls_address[32];
static uv_loop_t loop;

static void setup(void)
{
    uv_loop_init(&loop);
    cr_assert_eq(rt_certs_make(&certs), 0, "could not make the certificates");
    int port = rh_free_port();
    rt_server_args(&certs, &certs.server, port, "optional", server_args, server_storage);
    cr_assert_eq(rh_start_with(&server, server_args, NULL), 0, "redis-server did not start");
    snprintf(tls_address, sizeof(tls_address), "127.0.0.1:%d", port);
}

static void teardown(void)
{
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&loop), 0, "a handle was left open");
    rh_stop(&server);
    rt_certs_remove(&certs);
}

TestSuite(tls, .init = setup, .fini = teardown, .timeout = 60);

static rds_store_t *open_store(const char *address, const rds_tls_options_t *tls, rs_events_t *e)
{
    rds_options_t o = {.address = address,
                       .timeout_ns = 500 * MS,
                       .backoff_min_ns = 10 * MS,
                       .backoff_max_ns = 50 * MS,
                       .tls = tls,
                       .on_event = rs_on_event,
                       .data = e};
    return rs_store_new(&loop, &o);
}

/* Another TLS server on this suite's CA, serving `pair`; its TLS address in address[32]. */
static void start_tls(rh_server_t *s, const rt_pair_t *pair, const char *auth_clients,
                      char address[32])
{
    static const char *args[16];
    static char storage[512];
    int port = rh_free_port();
    rt_server_args(&certs, pair, port, auth_clients, args, storage);
    cr_assert_eq(rh_start_with(s, args, NULL), 0);
    snprintf(address, 32, "127.0.0.1:%d", port);
}

Test(tls, verified_by_the_ca_and_the_name_it_decides_over_tls)
{
    rds_tls_options_t by_name = {.ca_file = certs.ca, .server_name = "redis.test", .verify = true};
    rds_tls_options_t by_address = {.ca_file = certs.ca, .verify = true}; /* IP:127.0.0.1 */
    rs_events_t e1 = {0}, e2 = {0};
    rds_store_t *a = open_store(tls_address, &by_name, &e1);
    rds_store_t *b = open_store(tls_address, &by_address, &e2);
    cr_assert(rh_run_until(&loop, rs_ready, a, 5000), "server_name: %s", e1.last);
    cr_assert(rh_run_until(&loop, rs_ready, b, 5000), "by address: %s", e2.last);
    rs_tally_t t = {0};
    cr_assert_eq(rs_steps(&loop, a, "team:tls", 40, &t), 0);
    cr_assert_eq(rs_steps(&loop, b, "team:tls", 40, &t), 0);
    cr_assert_eq(t.admitted, 80);
    cr_assert_eq(rs_dbsize(&server), 1, "one counter, written over TLS");
    cr_assert_eq(e1.node_down + e2.node_down, 0);
    rds_store_close(a);
    rds_store_close(b);
}

/* A store whose TLS handshake can never succeed: see rs_expect_refused. */
static void expect_refused(const char *address, const rds_tls_options_t *tls, const char *want)
{
    rs_events_t e = {0};
    rs_expect_refused(&loop, open_store(address, tls, &e), &e, &server, address, want);
}

Test(tls, a_server_certificate_from_another_ca_is_refused)
{
    rds_tls_options_t o = {.ca_file = certs.other_ca, .verify = true};
    /* OpenSSL's words: "self-signed certificate in certificate chain" */
    expect_refused(tls_address, &o, "TLS handshake: certificate verify failed: ");
}

Test(tls, a_server_certificate_for_another_name_is_refused)
{
    rds_tls_options_t o = {.ca_file = certs.ca, .server_name = "other.test", .verify = true};
    expect_refused(tls_address, &o,
                   "TLS handshake: certificate verify failed: hostname mismatch (checked "
                   "other.test)");
}

Test(tls, a_certificate_whose_names_leave_out_the_address_is_refused)
{
    rh_server_t named;
    char address[32];
    start_tls(&named, &certs.wrong_name, "optional", address);
    rds_tls_options_t o = {.ca_file = certs.ca, .verify = true};
    expect_refused(address, &o,
                   "certificate verify failed: IP address mismatch (checked 127.0.0.1)");
    rh_stop(&named);
}

Test(tls, a_name_of_several_addresses_is_verified_as_the_name_not_the_address_reached)
{
    rh_server_t named; /* other.test only: no IP entry */
    char at[32], address[64];
    start_tls(&named, &certs.wrong_name, "optional", at);
    static const char *const order[] = {"::1", "127.0.0.1", NULL}; /* [::1]: nobody listens */
    char why[256];
    if (rh_resolve_as(named.dir, "other.test", order, why, sizeof(why)) < 0) {
        rh_stop(&named);
        cr_skip_test("%s", why);
    }
    snprintf(address, sizeof(address), "other.test%s", strrchr(at, ':'));
    rds_tls_options_t o = {.ca_file = certs.ca, .verify = true};
    rs_events_t e = {0};
    rds_store_t *s = open_store(address, &o, &e);
    cr_assert(rh_run_until(&loop, rs_ready, s, 5000), "%s", e.last);
    rs_tally_t t = {0};
    cr_assert_eq(rs_steps(&loop, s, "team:named", 1, &t), 0);
    cr_assert_eq(t.admitted, 1);
    cr_assert(strstr(e.up_detail, "127.0.0.1"), "%s", e.up_detail);
    rds_store_close(s);
    rh_stop(&named);
}

Test(tls, an_expired_server_certificate_is_refused)
{
    rh_server_t old;
    char address[32];
    start_tls(&old, &certs.expired, "optional", address);
    rds_tls_options_t o = {.ca_file = certs.ca, .verify = true};
    expect_refused(address, &o, "certificate verify failed: certificate has expired");
    rh_stop(&old);
}

Test(tls, a_server_that_speaks_no_tls_is_refused_not_waited_for)
{
    /* Redis reads the ClientHello as an inline command: it waits for a line end (our deadline
     * says where we stuck) or, when the bytes hold one, answers and closes (OpenSSL's reason);
     * which of the two differs from one connection to the next, so each may be told once */
    rds_tls_options_t o = {.ca_file = certs.ca, .verify = true};
    rs_events_t e = {0};
    rds_store_t *s = open_store(server.address, &o, &e);
    cr_assert(rh_run_until(&loop, rs_failed_twice, s, 10000), "did not fail its handshakes");
    rds_stats_t st;
    rds_store_stats(s, &st);
    cr_assert_not(st.ready);
    cr_assert(strstr(st.last_error, server.address) && strstr(st.last_error, "TLS handshake"), "%s",
              st.last_error);
    cr_assert_leq(e.node_down, 2, "told %d times: %s", e.node_down, e.last);
    rs_tally_t t = {0};
    cr_assert_eq(rs_steps(&loop, s, "team:refused", 1, &t), RDS_EUNAVAILABLE);
    cr_assert_eq(rs_dbsize(&server), 0);
    rds_store_close(s);
}

Test(tls, without_verify_any_certificate_is_taken)
{
    rds_tls_options_t o = {.ca_file = certs.other_ca, .server_name = "other.test"};
    rs_events_t e = {0};
    rds_store_t *s = open_store(tls_address, &o, &e);
    cr_assert(rh_run_until(&loop, rs_ready, s, 5000), "%s", e.last);
    rds_store_close(s);
}

Test(tls, a_server_that_requires_a_client_certificate_gets_it)
{
    rh_server_t strict;
    char address[32];
    start_tls(&strict, &certs.server, "yes", address);
    rds_tls_options_t with = {.ca_file = certs.ca,
                              .cert_file = certs.client.pem,
                              .key_file = certs.client.key,
                              .verify = true};
    rs_events_t e = {0};
    rds_store_t *s = open_store(address, &with, &e);
    cr_assert(rh_run_until(&loop, rs_ready, s, 5000), "%s", e.last);
    rs_tally_t t = {0};
    cr_assert_eq(rs_steps(&loop, s, "team:cert", 2, &t), 0);
    cr_assert_eq(t.admitted, 2);
    rds_store_close(s);
    /* and without one the server closes the connection: refused, and said so */
    rds_tls_options_t without = {.ca_file = certs.ca, .verify = true};
    e = (rs_events_t){0};
    s = open_store(address, &without, &e);
    cr_assert(rh_run_until(&loop, rs_failed_twice, s, 10000));
    rds_stats_t st;
    rds_store_stats(s, &st);
    cr_assert_not(st.ready);
    cr_assert(strstr(st.last_error, address) && strstr(st.last_error, "TLS"), "%s", st.last_error);
    rds_store_close(s);
    rh_stop(&strict);
}

Test(tls, a_tls_file_that_cannot_be_used_is_named_at_start)
{
    rds_options_t o = {.address = tls_address};
    rds_store_t *s;
    tt_err_t err;
    rds_tls_options_t missing = {.ca_file = "/nonexistent/ca.pem", .verify = true};
    o.tls = &missing;
    cr_assert_eq(rds_store_new(&loop, &o, &s, &err), RDS_ETLS);
    cr_assert_str_eq(err.path, "shared_state.redis.tls.ca_file");
    cr_assert(strstr(err.message, "/nonexistent/ca.pem"), "%s", err.message);
    rds_tls_options_t mismatched = {.ca_file = certs.ca,
                                    .cert_file = certs.client.pem,
                                    .key_file = certs.server.key,
                                    .verify = true};
    o.tls = &mismatched;
    cr_assert_eq(rds_store_new(&loop, &o, &s, &err), RDS_ETLS);
    cr_assert_str_eq(err.path, "shared_state.redis.tls.key_file");
    cr_assert(strstr(err.message, "mismatch"), "%s", err.message);
}

/* A reload's new TLS files (a rotated CA or certificate): the next connection uses them. */
Test(tls, new_tls_files_reach_the_next_connection)
{
    rds_tls_options_t wrong = {.ca_file = certs.other_ca, .verify = true};
    rs_events_t e = {0};
    rds_store_t *s = open_store(tls_address, &wrong, &e);
    cr_assert(rh_run_until(&loop, rs_failed_twice, s, 10000), "the wrong CA was taken");
    cr_assert_not(rds_store_ready(s));
    rds_tls_options_t right = {.ca_file = certs.ca, .verify = true};
    rds_tls_t *t;
    tt_err_t err;
    cr_assert_eq(rds_tls_new(&right, &t, &err), 0, "%s", err.message);
    rds_store_set_tls(s, t); /* the store owns it now */
    cr_assert(rh_run_until(&loop, rs_ready, s, 10000), "the new CA never reached a connection: %s",
              e.last);
    rs_tally_t tally = {0};
    cr_assert_eq(rs_steps(&loop, s, "team:rotated", 2, &tally), 0);
    cr_assert_eq(tally.admitted, 2);
    rds_store_close(s);
}

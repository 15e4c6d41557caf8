/*
 * What the store's tests against real servers share (test_store, test_auth, test_tls,
 * test_cluster, test_sentinel): opening a store, its events tallied, steps sent and counted, a
 * store that can never complete its handshake checked for what it says and what it leaves.
 * Prefix rs_. Built into each test that uses it (it asserts with Criterion).
 */
#ifndef TT_TESTS_REDIS_STORE_TEST_H
#define TT_TESTS_REDIS_STORE_TEST_H

#include "harness.h"
#include "redis_store.h"

#define RS_MS INT64_C(1000000)

/* The store's events, counted (rds_options_t.on_event with data = an rs_events_t). */
typedef struct rs_events {
    int node_down, node_up, up, down;
    char last[256];      /* the last NODE_DOWN's detail */
    char up_detail[256]; /* the last NODE_UP's */
} rs_events_t;

void rs_on_event(void *data, rds_event_t event, const char *node, const char *detail);

/* rds_store_new on `loop`, asserted. */
rds_store_t *rs_store_new(uv_loop_t *loop, const rds_options_t *o);

/* Predicates for rh_run_until: the store is ready; it dropped two connections; three. */
bool rs_ready(void *store);
bool rs_failed_twice(void *store);
bool rs_failed_thrice(void *store);

typedef struct rs_tally {
    int sent, answered, admitted;
} rs_tally_t;

/* n gcra steps on `key` (1000 a minute: nothing denied), all answered before it returns. 0, or
 * the first refusal (RDS_E*), with the calls sent before it answered. */
int rs_steps(uv_loop_t *loop, rds_store_t *s, const char *key, int n, rs_tally_t *t);

/* DBSIZE on `server` (its plain port, with its password). */
long long rs_dbsize(const rh_server_t *server);

/* A store (opened with on_event counting into e) whose handshake can never succeed: once it has
 * failed three times, it is not ready, its last error names `address` and holds `want`, which
 * was told once (a reason is told once while it repeats), a call is refused at once and `server`
 * holds no key. Closes the store. */
void rs_expect_refused(uv_loop_t *loop, rds_store_t *s, rs_events_t *e, const rh_server_t *server,
                       const char *address, const char *want);

#endif

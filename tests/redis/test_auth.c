/*
 * AUTH (redis/auth.c and the handshake in redis/node.c) against real redis-servers: one with
 * requirepass, one with an ACL user. The password files are read as a mounted Secret is, a
 * wrong or missing password is an error that names the address and Redis' own WRONGPASS/NOAUTH
 * (never the secret) while every call is refused at once (so each limit's posture decides and
 * Redis counts nothing), and a rotated password reaches the next connection.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "redis_store.h"
#include "store_test.h"

#define MS INT64_C(1000000)

static rh_server_t server;
static uv_loop_t loop;
static char dir[64];

/* requirepass "old-secret", and an ACL user "tt" with "user-secret" allowed everything */
static const char *const auth_args[] = {"--requirepass", "old-secret", "--user", "tt",    "on",
                                        ">user-secret",  "~*",         "&*",     "+@all", NULL};

static void setup(void)
{
    uv_loop_init(&loop);
    cr_assert_eq(rh_start_with(&server, auth_args, NULL), 0, "redis-server did not start");
    server.password = "old-secret"; /* the harness' own connections */
    snprintf(dir, sizeof(dir), "/tmp/tt-auth-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&loop), 0, "a handle was left open");
    rh_stop(&server);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(auth, .init = setup, .fini = teardown, .timeout = 60);

/* dir/name holding `text` (written as is); the path in a static buffer per call site */
static const char *secret_file(const char *name, const char *text, size_t len)
{
    static char paths[8][128];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, 128, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(text, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
    return path;
}

/* ---- the files ---------------------------------------------------------------------------- */

Test(auth, a_password_file_is_one_line_its_final_line_break_dropped)
{
    rds_auth_t a;
    tt_err_t err;
    cr_assert_eq(rds_auth_read("tt", secret_file("p1", "s3cret\n", 7), "f", &a, &err), 0, "%s",
                 err.message);
    cr_assert_eq(a.password_len, 6);
    cr_assert_eq(memcmp(a.password, "s3cret", 6), 0);
    cr_assert_str_eq(a.user, "tt");
    cr_assert_eq(rds_auth_read(NULL, secret_file("p2", "s3cret\r\n", 8), "f", &a, &err), 0);
    cr_assert_eq(a.password_len, 6);
    cr_assert_str_eq(a.user, "");
    cr_assert_eq(rds_auth_read(NULL, secret_file("p3", "no-newline", 10), "f", &a, &err), 0);
    cr_assert_eq(a.password_len, 10);
}

Test(auth, a_bad_password_file_is_named_with_the_reason_and_never_its_content)
{
    static char big[5000];
    memset(big, 'x', sizeof(big));
    const struct {
        const char *name, *text;
        size_t len;
        const char *why;
    } bad[] = {
        {"empty", "", 0, "it is empty"},
        {"newline", "\n", 1, "it is empty"},
        {"two", "first-secret\nsecond\n", 20, "more than one line"},
        {"nul", "nul\0secret", 10, "a NUL byte"},
        {"big", big, sizeof(big), "more than 4096 bytes"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        rds_auth_t a;
        tt_err_t err;
        const char *path = secret_file(bad[i].name, bad[i].text, bad[i].len);
        cr_assert_eq(rds_auth_read(NULL, path, "shared_state.redis.password_file", &a, &err),
                     RDS_ESECRET, "%s", bad[i].name);
        cr_assert_str_eq(err.path, "shared_state.redis.password_file");
        cr_assert(strstr(err.message, path), "%s: %s", bad[i].name, err.message);
        cr_assert(strstr(err.message, bad[i].why), "%s: %s", bad[i].name, err.message);
        cr_assert_null(strstr(err.message, "secret"), "the content leaked: %s", err.message);
        cr_assert_null(strstr(err.message, "xxxx"), "the content leaked: %s", err.message);
        cr_assert_eq(a.password_len, 0);
    }
    rds_auth_t a;
    tt_err_t err;
    cr_assert_eq(rds_auth_read(NULL, "/nonexistent/pw", "f", &a, &err), RDS_ESECRET);
    cr_assert(strstr(err.message, "/nonexistent/pw") && strstr(err.message, "No such file"), "%s",
              err.message);
}

/* ---- the handshake ------------------------------------------------------------------------ */

static rds_store_t *open_store(const char *user, const char *password, rs_events_t *events)
{
    rds_credentials_t cred = {0};
    if (password != NULL) {
        snprintf(cred.redis.user, sizeof(cred.redis.user), "%s", user ? user : "");
        cred.redis.password_len = strlen(password);
        memcpy(cred.redis.password, password, cred.redis.password_len);
    }
    rds_options_t o = {.address = server.address,
                       .timeout_ns = 500 * MS,
                       .backoff_min_ns = 10 * MS,
                       .backoff_max_ns = 50 * MS,
                       .credentials = &cred,
                       .on_event = rs_on_event,
                       .data = events};
    return rs_store_new(&loop, &o);
}

Test(auth, the_right_password_and_the_right_acl_user_decide_through_redis)
{
    rs_events_t e1 = {0}, e2 = {0};
    rds_store_t *a = open_store(NULL, "old-secret", &e1), *b = open_store("tt", "user-secret", &e2);
    cr_assert(rh_run_until(&loop, rs_ready, a, 5000), "requirepass: never ready");
    cr_assert(rh_run_until(&loop, rs_ready, b, 5000), "ACL user: never ready");
    rs_tally_t t = {0};
    cr_assert_eq(rs_steps(&loop, a, "team:a", 3, &t), 0);
    cr_assert_eq(rs_steps(&loop, b, "team:a", 3, &t), 0);
    cr_assert_eq(t.admitted, 6);
    cr_assert_eq(rs_dbsize(&server), 1, "one counter for both");
    cr_assert_eq(e1.node_up, 1);
    cr_assert_eq(e1.up, 1);
    cr_assert_eq(e1.node_down + e2.node_down, 0);
    rds_store_close(a);
    rds_store_close(b);
}

/* A store that can never authenticate: see rs_expect_refused. */
static void expect_refused(const char *user, const char *password, const char *want)
{
    rs_events_t e = {0};
    rs_expect_refused(&loop, open_store(user, password, &e), &e, &server, server.address, want);
}

Test(auth, a_wrong_password_is_wrongpass_named_with_the_address)
{
    expect_refused(NULL, "not-the-secret", "AUTH: WRONGPASS");
}

Test(auth, a_wrong_acl_user_is_wrongpass_named_with_the_user)
{
    expect_refused("nobody", "user-secret", "AUTH as nobody: WRONGPASS");
}

Test(auth, no_password_is_noauth_and_says_which_setting_is_missing)
{
    /* Redis 7 refuses the unauthenticated SCRIPT LOAD's long body before it would say NOAUTH */
    expect_refused(NULL, NULL, "(NOAUTH: the server wants a password: set password_file)");
}

static bool ready_again(void *arg)
{
    rds_stats_t st;
    rds_store_stats(arg, &st);
    return st.ready && st.connects >= 2;
}

Test(auth, a_rotated_password_reaches_the_next_connection)
{
    rs_events_t e = {0};
    rds_store_t *s = open_store(NULL, "old-secret", &e);
    cr_assert(rh_run_until(&loop, rs_ready, s, 5000));
    /* Redis' password changes: the connection made with the old one stays authenticated */
    redisContext *admin = rh_connect(&server);
    redisReply *r = redisCommand(admin, "CONFIG SET requirepass new-secret");
    cr_assert(r && r->type == REDIS_REPLY_STATUS, "CONFIG SET: %s", r ? r->str : "");
    freeReplyObject(r);
    rs_tally_t t = {0};
    cr_assert_eq(rs_steps(&loop, s, "team:r", 1, &t), 0);
    cr_assert_eq(t.admitted, 1);
    /* the reload's commit: the store takes the new password; the connection is then lost */
    rds_credentials_t cred = {0};
    cred.redis.password_len = strlen("new-secret");
    memcpy(cred.redis.password, "new-secret", cred.redis.password_len);
    rds_store_set_credentials(s, &cred);
    r = redisCommand(admin, "CLIENT KILL TYPE normal SKIPME yes");
    cr_assert(r && r->type == REDIS_REPLY_INTEGER && r->integer >= 1);
    freeReplyObject(r);
    cr_assert(rh_run_until(&loop, ready_again, s, 5000), "never reconnected: %s", e.last);
    cr_assert_eq(rs_steps(&loop, s, "team:r", 1, &t), 0);
    cr_assert_eq(t.admitted, 2);
    redisFree(admin);
    rds_store_close(s);
}

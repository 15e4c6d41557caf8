/*
 * A real `tokentriage serve` on a real redis-server that wants a password (requirepass), the
 * password read from password_file: Redis decides; the password rotated in Redis alone makes the
 * next connection fail with WRONGPASS (logged with the address, never the password; decisions
 * follow the posture, fail closed here, and Redis counts none of them); the new password written
 * to the file and a SIGHUP make the next connection succeed, and so does the file alone (the
 * config watch).
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/daemon.h"
#include "harness.h"

static rh_server_t server;
static tt_daemon_t d;
static tt_client_t *client;
static char secret_path[128], limits[1024];
static const char *const auth_args[] = {"--requirepass", "first-Secret", NULL};

static void write_secret(const char *text)
{
    cr_assert_eq(rh_write_file(secret_path, text), 0);
}

/* A command on the server as its admin, with `password`. */
static redisReply *admin(const char *password, const char *cmd)
{
    redisContext *c = rh_connect(&server);
    cr_assert_not_null(c);
    freeReplyObject(redisCommand(c, "AUTH %s", password));
    redisReply *r = redisCommand(c, cmd);
    redisFree(c);
    return r;
}

static void setup(void)
{
    cr_assert_eq(rh_start_with(&server, auth_args, NULL), 0, "redis-server did not start");
    snprintf(secret_path, sizeof(secret_path), "%s/redis-password", server.dir);
    write_secret("first-Secret\n");
    /* fail closed: a decision Redis did not make is a denial, never an admission */
    snprintf(limits, sizeof(limits),
             "    - id: key_rph\n      attach: { level: key }\n      type: rpm\n"
             "      amount: 100\n      period: 1h\n      store: redis\n"
             "      posture: { fail: closed }\n"
             "shared_state:\n  redis: { address: \"%s\", timeout: 500ms, password_file: %s }\n",
             server.address, secret_path);
    cr_assert_eq(tt_daemon_start(&d, limits, NULL), 0, "the daemon did not start");
    cr_assert_not_null(client = tt_daemon_client(&d));
    tt_set_timeout(client, 5000);
}

static void teardown(void)
{
    tt_close(client);
    tt_daemon_stop(&d);
    rh_stop(&server);
}

TestSuite(daemon_auth, .init = setup, .fini = teardown, .timeout = 60);

/* One decision on `id`; true when admitted (only Redis admits: fail closed). */
static bool admitted(const char *id)
{
    tt_pair_t s[] = {{"key", id}};
    tt_response_t r;
    return tt_decide(client, s, 1, -1, &r) == 0 && r.admit;
}

static void wait_admitted(const char *id)
{
    long long deadline = rh_now_ms() + 10000;
    while (!admitted(id))
        cr_assert_lt(rh_now_ms(), deadline, "Redis never decided through the daemon");
}

/* Redis' password changes; the daemon's connection is cut and it comes back with the old one,
 * refused: decisions fail closed and Redis counts none. */
static void rotate_in_redis(void)
{
    wait_admitted("k-before");
    redisReply *r = admin("first-Secret", "CONFIG SET requirepass second-Secret");
    cr_assert(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    freeReplyObject(admin("second-Secret", "CLIENT KILL TYPE normal SKIPME yes"));
    cr_assert(tt_daemon_log_has(&d, "WRONGPASS", 10000), "the refusal was not logged");
    cr_assert(tt_daemon_log_has(&d, server.address, 0), "the log does not name the address");
    int denied = 0;
    for (int i = 0; i < 20; i++)
        denied += !admitted("k-during");
    cr_assert_eq(denied, 20, "fail closed: no admission without Redis");
    r = admin("second-Secret", "KEYS *k-during*");
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 0, "Redis counted a refusal");
    freeReplyObject(r);
}

static void no_password_in_the_log(void)
{
    size_t len = 0;
    FILE *f = fopen(d.log, "r");
    cr_assert_not_null(f);
    static char text[1 << 20];
    len = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[len] = '\0';
    cr_assert_null(strstr(text, "Secret"), "a password reached the log");
}

Test(daemon_auth, a_rotated_password_file_takes_effect_on_the_next_connection_after_a_reload)
{
    rotate_in_redis();
    /* the Secret is updated and the daemon reloaded: its next connection authenticates */
    write_secret("second-Secret\n");
    cr_assert_eq(kill(d.pid, SIGHUP), 0);
    cr_assert(tt_daemon_log_has(&d, "reload applied", 10000));
    wait_admitted("k-after");
    no_password_in_the_log();
}

/* The config watch (issue 31 item 2) reads a password file that changed with no signal: a
 * rotated Secret reaches the daemon as its file changes. */
Test(daemon_auth, a_rotated_password_file_is_read_again_without_a_signal)
{
    rotate_in_redis();
    write_secret("second-Secret\n");
    cr_assert(tt_daemon_log_has(&d, "trigger=watch", 10000), "no reload without a signal");
    cr_assert(tt_daemon_log_has(&d, "reload applied", 10000));
    wait_admitted("k-after");
    no_password_in_the_log();
}

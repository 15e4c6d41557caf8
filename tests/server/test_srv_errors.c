/*
 * srv_start's refusals, in-process: each is a code of the one error table with the path of the
 * option at fault (server.socket, server.http, server.allow_uids) and a message naming the
 * value, and each leaves nothing listening.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "srv.h"

static const stream_handler_t handler = {0};
static uv_loop_t loop;
static srv_metrics_t *metrics;
static char dir[64], sock[128];

static void setup(void)
{
    uv_loop_init(&loop);
    metrics = srv_metrics_new();
    snprintf(dir, sizeof(dir), "/tmp/tt-srverr-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(sock, sizeof(sock), "%s/tt.sock", dir);
}

static void teardown(void)
{
    uv_loop_close(&loop);
    srv_metrics_free(metrics);
    unlink(sock);
    rmdir(dir);
}

TestSuite(srv_errors, .init = setup, .fini = teardown, .timeout = 30);

/* Starts with opt on l; on a failure runs l until the stopped server's handles close. */
static int start_on(uv_loop_t *l, srv_t **s, const srv_options_t *opt, tt_err_t *err)
{
    int rc = srv_start(s, l, opt, &handler, metrics, err);
    if (rc != 0 && *s) {
        uv_run(l, UV_RUN_DEFAULT);
        srv_free(*s);
        *s = NULL;
    }
    return rc;
}

static int start(srv_t **s, const srv_options_t *opt, tt_err_t *err)
{
    return start_on(&loop, s, opt, err);
}

static void stop(srv_t *s)
{
    srv_stop(s);
    uv_run(&loop, UV_RUN_DEFAULT);
    srv_free(s);
}

Test(srv_errors, a_live_server_on_the_socket_is_in_use)
{
    srv_t *a, *b;
    tt_err_t err;
    srv_options_t o = {.socket_path = sock};
    cr_assert_eq(start(&a, &o, &err), 0, "%s", err.message);
    uv_loop_t other; /* a's loop would serve a forever */
    uv_loop_init(&other);
    cr_assert_eq(start_on(&other, &b, &o, &err), SRV_EINUSE);
    uv_loop_close(&other);
    cr_assert_eq(err.code, SRV_EINUSE);
    cr_assert_str_eq(err.path, "server.socket");
    char want[256];
    snprintf(want, sizeof(want), "another tokentriage is already serving on %s", sock);
    cr_assert_str_eq(err.message, want);
    stop(a);
}

Test(srv_errors, a_file_that_is_not_a_socket_is_not_replaced)
{
    FILE *f = fopen(sock, "w");
    cr_assert_not_null(f);
    fclose(f);
    srv_t *s;
    tt_err_t err;
    srv_options_t o = {.socket_path = sock};
    cr_assert_eq(start(&s, &o, &err), SRV_ELISTEN);
    cr_assert_str_eq(err.path, "server.socket");
    cr_assert(strstr(err.message, "exists and is not a socket; not replacing it"), "%s",
              err.message);
}

Test(srv_errors, a_bad_http_address_names_server_http)
{
    srv_t *s;
    tt_err_t err;
    srv_options_t o = {.socket_path = sock, .http = "nowhere"};
    cr_assert_eq(start(&s, &o, &err), SRV_ELISTEN);
    cr_assert_eq(err.code, SRV_ELISTEN);
    cr_assert_str_eq(err.path, "server.http");
    /* membership's numeric address reader, as for shared_state.share.bind (mb_want_addr) */
    const char *said = "\"nowhere\" is not a numeric ip:port (names are not resolved for an "
                       "address to bind or advertise)";
    cr_assert_str_eq(err.message, said);
    char text[TT_ERR_TEXT_MAX], line[TT_ERR_TEXT_MAX];
    snprintf(line, sizeof(line), "server.http: %s", said);
    cr_assert_str_eq(tt_err_format(&err, text, sizeof(text)), line, "the log line");
    /* the socket was closed again: a second start binds it */
    o.http = NULL;
    cr_assert_eq(start(&s, &o, &err), 0, "%s", err.message);
    stop(s);
}

Test(srv_errors, a_socket_path_too_long_is_refused)
{
    char longp[120]; /* past sun_path's 108 bytes */
    memset(longp, 'x', sizeof(longp) - 1);
    longp[0] = '/';
    longp[sizeof(longp) - 1] = '\0';
    srv_t *s;
    tt_err_t err;
    srv_options_t o = {.socket_path = longp};
    cr_assert_eq(start(&s, &o, &err), SRV_ELISTEN);
    cr_assert_str_eq(err.path, "server.socket");
    cr_assert(strstr(err.message, "is too long"), "%s", err.message);
}

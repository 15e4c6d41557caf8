/* `tokentriage validate`, run as the real binary: output streams, exit codes, --explain. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "runcmd.h"

#define BIN TT_BINARY_DIR "/cmd/tokentriage"
#define VECTORS TT_SOURCE_DIR "/tests/vectors/config"
#define EXAMPLES TT_SOURCE_DIR "/examples"

/* Runs `tokentriage ARGS...` in directory cwd, stdout and stderr apart. */
#define run(cwd, ...) run_in(cwd, (const char *[]){BIN, __VA_ARGS__, NULL})
static runcmd_t run_in(const char *cwd, const char **argv)
{
    runcmd_t r;
    runcmd_opts_t o = {.cwd = cwd};
    runcmd(&r, &o, argv);
    cr_assert(r.status >= 0 && r.status < 128, "%s did not exit: %d", argv[1], r.status);
    return r;
}

static void done(runcmd_t *r)
{
    runcmd_free(r);
}

TestSuite(cmd_validate);

Test(cmd_validate, a_valid_config_prints_ok_and_exits_0)
{
    runcmd_t r = run(EXAMPLES, "validate", "single-node.yaml");
    cr_assert_eq(r.status, 0);
    cr_assert_str_eq(r.out, "OK: configuration is valid\n");
    cr_assert_str_eq(r.err, "");
    done(&r);
}

Test(cmd_validate, the_large_sliding_window_on_redis_validates_then_fails_to_arm)
{
    runcmd_t v = run(VECTORS, "validate", "arm-sliding-window-ceiling-redis.yaml");
    cr_assert_eq(v.status, 0);
    cr_assert_str_eq(v.out, "OK: configuration is valid\n");
    cr_assert_str_eq(v.err, "");
    runcmd_t a = run(VECTORS, "validate", "--arm", "arm-sliding-window-ceiling-redis.yaml");
    cr_assert_eq(a.status, 78);
    cr_assert_str_eq(a.out, "");
    cr_assert_str_eq(
        a.err, "Error: governance: compile limits: govern: limit \"team_rpm\": sliding_window: "
               "limit 100000 exceeds the packed window-counter ceiling 65535; the frozen int64 "
               "state holds a 16-bit per-window counter \xe2\x80\x94 use algorithm \"gcra\" "
               "(unbounded) for limits this large\n");
    done(&v);
    done(&a);
}

Test(cmd_validate, every_error_is_reported_in_one_run_with_exit_78)
{
    runcmd_t r = run(VECTORS, "validate", "period-bounds.yaml");
    cr_assert_eq(r.status, 78);
    cr_assert_str_eq(r.out, "");
    size_t len;
    char *want = slurp(VECTORS "/period-bounds.out", &len);
    cr_assert_str_eq(r.err, want);
    int lines = 0;
    for (const char *p = r.err; *p; p++)
        lines += *p == '\n';
    cr_assert_eq(lines, 8);
    free(want);
    done(&r);
}

Test(cmd_validate, warnings_go_to_stderr_beside_the_ok_line)
{
    runcmd_t r = run(EXAMPLES, "validate", "--arm", "ledger-types.yaml");
    cr_assert_eq(r.status, 0);
    cr_assert_str_eq(r.out, "OK: configuration is valid\n");
    cr_assert(strstr(r.err, "Warning: governance.limits[0]: limit \"team_budget\": budget_usd"),
              "%s", r.err);
    done(&r);
}

Test(cmd_validate, explain_prints_identity_t_tau_and_ceilings)
{
    runcmd_t r = run(EXAMPLES, "validate", "--explain", "seed-gcra-burst.yaml");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "limit \"team_rpm\"\n  identity   "), "%s", r.out);
    cr_assert(strstr(r.out, "  T          200ms (200000000 ns)  tau 12s (12000000000 ns)\n"), "%s",
              r.out);
    cr_assert(strstr(r.out, "a single cost above 60 is unfittable"), "%s", r.out);
    done(&r);
    r = run(EXAMPLES, "validate", "--explain", "seed-sliding-window.yaml");
    cr_assert(strstr(r.out, "ceilings   amount 10 of the packed window-counter ceiling 65535"),
              "%s", r.out);
    cr_assert(strstr(r.out, "editing burst keeps the counter"), "%s", r.out);
    done(&r);
}

Test(cmd_validate, usage_errors_exit_64)
{
    runcmd_t r = run(EXAMPLES, "validate");
    cr_assert_eq(r.status, 64);
    done(&r);
    r = run(EXAMPLES, "validate", "--bogus", "single-node.yaml");
    cr_assert_eq(r.status, 64);
    done(&r);
}

Test(cmd_validate, a_missing_file_exits_66_like_state_inspect)
{
    runcmd_t r = run(EXAMPLES, "validate", "no-such-file.yaml");
    cr_assert_eq(r.status, 66, "EX_NOINPUT, as `state inspect` on a missing file");
    cr_assert_str_eq(r.err, "Error: (root): cannot open the file: No such file or directory "
                            "(no-such-file.yaml:1:1)\n");
    done(&r);
    r = run(EXAMPLES, "validate", "--arm", "/nonexistent/tt.yaml");
    cr_assert_eq(r.status, 66);
    done(&r);
}

/*
 * validate --arm and serve on one config: --arm runs every check serve runs before it listens
 * (the keyring, the state directory, the socket's directory, the listeners' addresses), through
 * the same code, so what one refuses the other refuses with the same words.
 */
typedef struct host {
    char dir[64];    /* a scratch directory for the config, the socket, the keyring */
    char config[96]; /* dir/tt.yaml */
} host_t;

/* Writes a config: `server` and `shared_state` mappings' lines with %1$s for the directory. */
static void host_config(host_t *h, const char *fmt)
{
    snprintf(h->dir, sizeof(h->dir), "/tmp/tt-arm-XXXXXX");
    cr_assert_not_null(mkdtemp(h->dir));
    snprintf(h->config, sizeof(h->config), "%s/tt.yaml", h->dir);
    FILE *f = fopen(h->config, "w");
    cr_assert_not_null(f);
    fprintf(f, fmt, h->dir);
    fclose(f);
}

static void host_file(const host_t *h, const char *name, const char *text)
{
    char path[160];
    snprintf(path, sizeof(path), "%s/%s", h->dir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

static void host_done(const host_t *h)
{
    runcmd_t r;
    runcmdl(&r, NULL, "rm", "-rf", h->dir, NULL);
    runcmd_free(&r);
}

/* `validate --arm` refuses the config with exit 78 and the error `want` (printf with the
 * directory); `serve` refuses it too, before anything listens, with the same words in its log. */
static void both_refuse(const host_t *h, const char *want_fmt)
{
    char want[512], logged[600], *o = logged;
    snprintf(want, sizeof(want), want_fmt, h->dir);
    runcmd_t a = run(h->dir, "validate", "--arm", h->config);
    cr_assert_eq(a.status, 78, "validate --arm: %d\n%s%s", a.status, a.out, a.err);
    cr_assert_str_eq(a.out, "");
    cr_assert(strstr(a.err, want), "validate --arm printed:\n%s\nwanted: %s", a.err, want);
    /* the daemon logs the finding's text (no "Error: ", no newline), quoted as logfmt quotes */
    for (const char *p = want + strlen("Error: ");
         *p && *p != '\n' && o < logged + sizeof(logged) - 3; p++) {
        if (*p == '"' || *p == '\\')
            *o++ = '\\';
        *o++ = *p;
    }
    *o = 0;
    runcmd_opts_t opts = {.cwd = h->dir, .timeout_ms = 20000};
    runcmd_t s;
    runcmdl(&s, &opts, BIN, "serve", "-c", h->config, NULL);
    cr_assert(!s.timed_out, "serve took this config and served:\n%s", s.err);
    cr_assert_eq(s.status, 78, "serve: %d\n%s", s.status, s.err);
    cr_assert(strstr(s.err, logged), "serve logged:\n%s\nwanted: %s", s.err, logged);
    cr_assert_null(strstr(s.err, "listening"), "serve listened before refusing:\n%s", s.err);
    done(&a);
    done(&s);
}

#define SERVER "server: { socket: %1$s/tt.sock, http: \"127.0.0.1:0\" }\n"
#define SHARE "shared_state:\n  share: { node_id: n1, bind: \"127.0.0.1:0\", "

Test(cmd_validate, arm_refuses_a_missing_keyring_file_as_serve_does)
{
    host_t h;
    host_config(&h, SERVER SHARE "keyring_file: %1$s/gossip.keys }\n");
    both_refuse(&h, "Error: shared_state.share.keyring_file: %s/gossip.keys: No such file or "
                    "directory\n");
    host_done(&h);
}

/* The Secret k8s/ ships: a placeholder that deliberately does not parse. */
Test(cmd_validate, arm_refuses_the_shipped_placeholder_key_as_serve_does)
{
    size_t len;
    char *secret = slurp(TT_SOURCE_DIR "/k8s/secret-gossip.yaml", &len);
    cr_assert_not_null(secret);
    char *keys = strstr(secret, "gossip.keys: |\n"), text[1024] = "", *t = text;
    cr_assert_not_null(keys);
    for (char *line = strchr(keys, '\n') + 1; strncmp(line, "    ", 4) == 0;) {
        char *nl = strchr(line, '\n');
        t += snprintf(t, sizeof(text) - (size_t)(t - text), "%.*s\n", (int)(nl - line - 4),
                      line + 4);
        line = nl + 1;
    }
    cr_assert(strstr(text, "REPLACE-ME"), "%s", text);
    free(secret);
    host_t h;
    host_config(&h, SERVER SHARE "keyring_file: %1$s/gossip.keys }\n");
    host_file(&h, "gossip.keys", text);
    both_refuse(&h, "Error: shared_state.share.keyring_file: %s/gossip.keys: line 3: ");
    host_done(&h);
}

Test(cmd_validate, arm_refuses_a_socket_whose_directory_cannot_be_made_as_serve_does)
{
    host_t h;
    host_config(&h, "server: { socket: %1$s/no/such/tt.sock, http: \"127.0.0.1:0\" }\n");
    both_refuse(&h, "Error: server.socket: %s/no/such/tt.sock: cannot make its directory: ");
    host_done(&h);
}

Test(cmd_validate, arm_refuses_a_listener_address_that_is_a_name_as_serve_does)
{
    host_t h;
    host_config(&h, "server: { socket: %1$s/tt.sock, http: \"localhost:0\" }\n");
    both_refuse(&h, "Error: server.http: \"localhost:0\" is not a numeric ip:port");
    host_done(&h);
    host_config(&h, SERVER "shared_state:\n  share: { node_id: n1, bind: \"localhost:0\" }\n");
    both_refuse(&h, "Error: shared_state.share.bind: \"localhost:0\" is not a numeric ip:port");
    host_done(&h);
}

/* serve runs without state when its directory is unusable (it never crash-loops on its state):
 * --arm says so as a warning, with the reason. */
/* server.record: the recording's directory and its key file (issue 30 item 10). */
Test(cmd_validate, arm_refuses_a_recording_serve_cannot_write_as_serve_does)
{
    host_t h;
    host_config(&h, "server: { socket: %1$s/tt.sock, http: \"127.0.0.1:0\", "
                    "record: { file: %1$s/no/such/traffic.ttr } }\n");
    both_refuse(&h, "Error: server.record.file: %1$s/no/such/traffic.ttr: its directory "
                    "%1$s/no/such: No such file or directory\n");
    host_done(&h);
}

Test(cmd_validate, arm_refuses_a_recording_key_file_too_short_as_serve_does)
{
    host_t h;
    host_config(&h, "server: { socket: %1$s/tt.sock, http: \"127.0.0.1:0\", "
                    "record: { file: %1$s/traffic.ttr, hash_key_file: %1$s/key } }\n");
    host_file(&h, "key", "abc");
    both_refuse(&h, "Error: server.record.hash_key_file: %1$s/key: 3 bytes; a key file holds 16 "
                    "to 4096\n");
    host_done(&h);
}

Test(cmd_validate, arm_warns_of_a_state_dir_serve_cannot_use)
{
    host_t h;
    host_config(&h, "server: { socket: %1$s/tt.sock, state_dir: %1$s/state }\n");
    host_file(&h, "state", "a file, not a directory\n");
    runcmd_t a = run(h.dir, "validate", "--arm", h.config);
    cr_assert_eq(a.status, 0, "%s", a.err);
    cr_assert_str_eq(a.out, "OK: configuration is valid\n");
    char want[256];
    snprintf(want, sizeof(want), "Warning: server.state_dir: %s/state: not a directory", h.dir);
    cr_assert(strstr(a.err, want), "%s", a.err);
    cr_assert(strstr(a.err, "serve would run without state"), "%s", a.err);
    done(&a);
    host_done(&h);
}

/* Away from the node (CI), --offline compiles as serve does and leaves the host alone. */
Test(cmd_validate, arm_offline_compiles_without_the_host_checks)
{
    host_t h;
    host_config(&h, SERVER SHARE "keyring_file: %1$s/gossip.keys }\n");
    runcmd_t a = run(h.dir, "validate", "--arm", "--offline", h.config);
    cr_assert_eq(a.status, 0, "%s", a.err);
    cr_assert_str_eq(a.out, "OK: configuration is valid\n");
    done(&a);
    host_done(&h);
}

/* --json: one object on stdout, every finding with its severity, code, path, line and column
 * (null where a finding has no position), for CI annotations. */
Test(cmd_validate, json_prints_every_finding_with_its_position_and_code)
{
    runcmd_t r = run(VECTORS, "validate", "--json", "period-bounds.yaml");
    cr_assert_eq(r.status, 78);
    cr_assert_str_eq(r.err, "");
    const char *head = "{\"file\":\"period-bounds.yaml\",\"valid\":false,\"errors\":8,"
                       "\"warnings\":0,\"findings\":[{\"severity\":\"error\",";
    cr_assert(strncmp(r.out, head, strlen(head)) == 0, "%s", r.out);
    cr_assert(strstr(r.out, "\"code\":\"bad_config\",\"path\":\"governance.limits[1].period\","
                            "\"line\":"),
              "%s", r.out);
    cr_assert(strstr(r.out, ",\"column\":"), "%s", r.out);
    int n = 0;
    for (const char *p = r.out; (p = strstr(p, "\"severity\":")); p++)
        n++;
    cr_assert_eq(n, 8, "%s", r.out);
    cr_assert_eq(r.out[strlen(r.out) - 1], '\n');
    done(&r);
    r = run(VECTORS, "validate", "--json", "--arm", "arm-sliding-window-ceiling-redis.yaml");
    cr_assert_eq(r.status, 78);
    cr_assert(strstr(r.out, "\"path\":\"governance\",\"line\":null,\"column\":null,"), "%s", r.out);
    done(&r);
    r = run(EXAMPLES, "validate", "--json", "--arm", "ledger-types.yaml");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "\"valid\":true,\"errors\":0,"), "%s", r.out);
    cr_assert(strstr(r.out, "{\"severity\":\"warning\",\"code\":null,"), "%s", r.out);
    done(&r);
}

#define REDIS "shared_state:\n  redis: { address: \"127.0.0.1:6379\", "

Test(cmd_validate, arm_refuses_a_missing_redis_password_file_as_serve_does)
{
    host_t h;
    host_config(&h, SERVER REDIS "password_file: %1$s/redis-password }\n");
    both_refuse(&h, "Error: shared_state.redis.password_file: cannot read %s/redis-password: No "
                    "such file or directory\n");
    host_done(&h);
}

Test(cmd_validate, arm_refuses_an_empty_redis_password_file_as_serve_does)
{
    host_t h;
    host_config(&h, SERVER REDIS "password_file: %1$s/redis-password }\n");
    host_file(&h, "redis-password", "\n");
    both_refuse(&h, "Error: shared_state.redis.password_file: %s/redis-password: it is empty");
    host_done(&h);
}

Test(cmd_validate, arm_refuses_a_redis_ca_file_that_is_no_certificate_as_serve_does)
{
    host_t h;
    host_config(&h, SERVER REDIS "tls: { ca_file: %1$s/ca.pem } }\n");
    host_file(&h, "ca.pem", "not a certificate\n");
    both_refuse(&h,
                "Error: shared_state.redis.tls.ca_file: %s/ca.pem: cannot load CA certificates");
    host_done(&h);
}

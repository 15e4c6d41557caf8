/* The test's certificates: see certs.h. */
#include "certs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define FAKETIME_LIB "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

#define EC "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"

static int run(const char *const *argv)
{
    if (rh_run_program(argv, 20000) == 0)
        return 0;
    fprintf(stderr, "certs: %s %s %s failed\n", argv[0], argv[1], argv[2]);
    return -1;
}

static void path(const rt_certs_t *c, char *out, const char *name)
{
    snprintf(out, 128, "%s/%s", c->dir, name);
}

static int make_ca(const rt_certs_t *c, const char *pem, const char *name)
{
    char key[128];
    snprintf(key, sizeof(key), "%s.key", pem);
    const char *argv[] = {"openssl", "req", "-x509", "-newkey", EC,      "-keyout", key,
                          "-out",    pem,   "-subj", name,      "-days", "2",       NULL};
    (void)c;
    return run(argv);
}

/* A certificate for `names` (an extension line) signed by ca, optionally at a faked time. */
static int make_leaf(const rt_certs_t *c, rt_pair_t *out, const char *stem, const char *ca,
                     const char *san, const char *at)
{
    char csr[128], ext[128], ca_key[140], serial[128];
    snprintf(out->pem, sizeof(out->pem), "%s/%s.pem", c->dir, stem);
    snprintf(out->key, sizeof(out->key), "%s/%s.key", c->dir, stem);
    snprintf(csr, sizeof(csr), "%s/%s.csr", c->dir, stem);
    snprintf(ext, sizeof(ext), "%s/%s.ext", c->dir, stem);
    snprintf(ca_key, sizeof(ca_key), "%s.key", ca);
    snprintf(serial, sizeof(serial), "%s/%s.srl", c->dir, stem);
    FILE *f = fopen(ext, "w");
    if (f == NULL || fprintf(f, "%s\n", san) < 0 || fclose(f) != 0)
        return -1;
    const char *req[] = {"openssl", "req", "-newkey", EC,       "-keyout", out->key,
                         "-out",    csr,   "-subj",   "/CN=tt", NULL};
    if (run(req) < 0)
        return -1;
    /* libfaketime preloaded, not Debian's faketime wrapper: the wrapper creates a semaphore
     * named after its pid with O_EXCL and exits 1 when one is there, and a daemon of the suite
     * killed under libfaketime leaves its pair in /dev/shm; with pid_max 32768 a later
     * certificate met one now and then (CI: "faketime ... openssl failed"). The library itself
     * goes on without sharing when its name is taken. */
    char fake_at[64];
    snprintf(fake_at, sizeof(fake_at), "FAKETIME=@%s", at ? at : "");
    const char *sign[] = {"env",
                          "LD_PRELOAD=" FAKETIME_LIB,
                          fake_at,
                          "openssl",
                          "x509",
                          "-req",
                          "-in",
                          csr,
                          "-CA",
                          ca,
                          "-CAkey",
                          ca_key,
                          "-CAserial",
                          serial,
                          "-CAcreateserial",
                          "-out",
                          out->pem,
                          "-days",
                          "1",
                          "-extfile",
                          ext,
                          NULL};
    return run(at ? sign : sign + 3);
}

int rt_certs_make(rt_certs_t *c)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->dir, sizeof(c->dir), "/tmp/tt-certs-XXXXXX");
    if (mkdtemp(c->dir) == NULL)
        return -1;
    path(c, c->ca, "ca.pem");
    path(c, c->other_ca, "other-ca.pem");
    const char *both = "subjectAltName=DNS:redis.test,IP:127.0.0.1";
    if (make_ca(c, c->ca, "/CN=tt-test-ca") < 0 || make_ca(c, c->other_ca, "/CN=tt-other-ca") < 0 ||
        make_leaf(c, &c->server, "server", c->ca, both, NULL) < 0 ||
        make_leaf(c, &c->client, "client", c->ca, "extendedKeyUsage=clientAuth", NULL) < 0 ||
        make_leaf(c, &c->stranger, "stranger", c->other_ca, both, NULL) < 0 ||
        make_leaf(c, &c->wrong_name, "wrong-name", c->ca, "subjectAltName=DNS:other.test", NULL) <
            0 ||
        make_leaf(c, &c->expired, "expired", c->ca, both, "2020-01-01 00:00:00") < 0) {
        rt_certs_remove(c);
        return -1;
    }
    return 0;
}

void rt_certs_remove(rt_certs_t *c)
{
    if (c->dir[0] == '\0')
        return;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", c->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "certs: could not remove %s\n", c->dir);
    c->dir[0] = '\0';
}

void rt_server_args(const rt_certs_t *c, const rt_pair_t *pair, int tls_port,
                    const char *auth_clients, const char *args[16], char storage[512])
{
    snprintf(storage, 512, "%d", tls_port);
    int n = 0;
    args[n++] = "--tls-port";
    args[n++] = storage;
    args[n++] = "--tls-cert-file";
    args[n++] = pair->pem;
    args[n++] = "--tls-key-file";
    args[n++] = pair->key;
    args[n++] = "--tls-ca-cert-file";
    args[n++] = c->ca;
    args[n++] = "--tls-auth-clients";
    args[n++] = auth_clients;
    args[n] = NULL;
}

/* The store's TLS context and sessions (tls.h), on OpenSSL. */
#include "tls.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "auth.h" /* RDS_ETLS */

struct rds_tls {
    int refs;
    SSL_CTX *ctx;
    bool verify;
    char server_name[256];
};

/* OpenSSL's first queued reason, or `fallback`; the queue is cleared. */
static const char *reason(char *buf, size_t size, const char *fallback)
{
    unsigned long e = ERR_get_error();
    if (e == 0)
        snprintf(buf, size, "%s", fallback);
    else
        ERR_error_string_n(e, buf, size);
    ERR_clear_error();
    return buf;
}

static int fail(rds_tls_t *t, tt_err_t *err, const char *field, const char *file, const char *what)
{
    char why[200];
    reason(why, sizeof(why), "unknown error");
    SSL_CTX_free(t->ctx);
    free(t);
    return tt_err_set(err, RDS_ETLS, field, "%.120s: %s: %.120s", file ? file : "", what, why);
}

int rds_tls_new(const rds_tls_options_t *o, rds_tls_t **out, tt_err_t *err)
{
    *out = NULL;
    ERR_clear_error();
    rds_tls_t *t = calloc(1, sizeof(*t));
    if (t == NULL || (t->ctx = SSL_CTX_new(TLS_client_method())) == NULL) {
        free(t);
        return tt_err_set(err, TT_ERR_NOMEM, "shared_state.redis.tls", "redis: out of memory");
    }
    t->refs = 1;
    t->verify = o->verify;
    snprintf(t->server_name, sizeof(t->server_name), "%s", o->server_name ? o->server_name : "");
    SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(t->ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    const char *ca = o->ca_file && o->ca_file[0] ? o->ca_file : NULL;
    if (ca != NULL) {
        if (SSL_CTX_load_verify_locations(t->ctx, ca, NULL) != 1)
            return fail(t, err, "shared_state.redis.tls.ca_file", ca,
                        "cannot load CA certificates");
    } else if (SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
        return fail(t, err, "shared_state.redis.tls", "the system's trust store", "cannot load it");
    }
    if (o->cert_file && o->cert_file[0]) {
        if (SSL_CTX_use_certificate_chain_file(t->ctx, o->cert_file) != 1)
            return fail(t, err, "shared_state.redis.tls.cert_file", o->cert_file,
                        "cannot load the client certificate");
        if (SSL_CTX_use_PrivateKey_file(t->ctx, o->key_file, SSL_FILETYPE_PEM) != 1)
            return fail(t, err, "shared_state.redis.tls.key_file", o->key_file,
                        "cannot load the private key");
        if (SSL_CTX_check_private_key(t->ctx) != 1)
            return fail(t, err, "shared_state.redis.tls.key_file", o->key_file,
                        "the key does not match cert_file");
    }
    SSL_CTX_set_verify(t->ctx, t->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    *out = t;
    return 0;
}

rds_tls_t *rds_tls_ref(rds_tls_t *t)
{
    if (t != NULL)
        t->refs++;
    return t;
}

void rds_tls_free(rds_tls_t *t)
{
    if (t == NULL || --t->refs > 0)
        return;
    SSL_CTX_free(t->ctx);
    free(t);
}

static bool is_ip(const char *host)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

SSL *rds_tls_session(const rds_tls_t *t, const char *host)
{
    SSL *ssl = SSL_new(t->ctx);
    if (ssl == NULL)
        return NULL;
    const char *name = t->server_name[0] ? t->server_name : host;
    if (!is_ip(name))
        SSL_set_tlsext_host_name(ssl, name); /* SNI is for names only (RFC 6066) */
    if (t->verify) {
        X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
        X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        int ok = is_ip(name) ? X509_VERIFY_PARAM_set1_ip_asc(param, name)
                             : X509_VERIFY_PARAM_set1_host(param, name, 0);
        if (ok != 1) {
            SSL_free(ssl);
            return NULL;
        }
    }
    SSL_set_connect_state(ssl);
    return ssl;
}

void rds_tls_why(const rds_tls_t *t, SSL *ssl, int ssl_error, const char *host, char *out,
                 size_t size)
{
    long verify = SSL_get_verify_result(ssl);
    char buf[200];
    if (t->verify && verify != X509_V_OK) {
        const char *name = t->server_name[0] ? t->server_name : host;
        snprintf(out, size, "certificate verify failed: %s%s%s%s",
                 X509_verify_cert_error_string(verify),
                 verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH
                     ? " (checked "
                     : "",
                 verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH
                     ? name
                     : "",
                 verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH
                     ? ")"
                     : "");
        ERR_clear_error();
        return;
    }
    if (ssl_error == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
        snprintf(out, size, "the server closed the connection during the handshake (not TLS?)");
    else
        snprintf(out, size, "%s", reason(buf, sizeof(buf), "handshake failed"));
    ERR_clear_error();
}

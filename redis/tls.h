/*
 * rds tls: the store's TLS settings as one OpenSSL context (shared_state.redis.tls), and a
 * session for each connection. Server certificates are verified by default, against ca_file or
 * the system's trust store, and the name checked is server_name or else the node's own host
 * (a DNS name, or an IP address against the certificate's IP entries); a client certificate is
 * presented when cert_file and key_file are given. See docs/redis.md, "Credentials and TLS".
 */
#ifndef TT_REDIS_TLS_H
#define TT_REDIS_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

#include "tt_err.h"

typedef struct rds_tls rds_tls_t;

typedef struct rds_tls_options {
    const char *ca_file;     /* PEM CA certificates; NULL or "": the system's store */
    const char *cert_file;   /* PEM client certificate (chain), with key_file; NULL: none */
    const char *key_file;    /* its private key (PEM) */
    const char *server_name; /* the name every server's certificate is checked against, and
                              * sent as SNI; NULL or "": each node's host */
    bool verify;             /* false: no check at all (warned about by the config) */
} rds_tls_options_t;

/* Loads the files and builds the context. Returns 0, or RDS_ETLS (auth.h) with err's path the
 * setting (shared_state.redis.tls.ca_file, ...) and OpenSSL's reason. *out holds one reference,
 * the caller's, given back with rds_tls_free. */
int rds_tls_new(const rds_tls_options_t *o, rds_tls_t **out, tt_err_t *err);

/* One more reference (a connection keeps the context it was opened with while the store may
 * take a reload's new one); t may be NULL. Returns t. */
rds_tls_t *rds_tls_ref(rds_tls_t *t);

/* Gives one reference back; the last frees the context. t may be NULL. */
void rds_tls_free(rds_tls_t *t);

/* A client session for a connection to `host`: SNI and the name to check set. NULL when out of
 * memory. */
SSL *rds_tls_session(const rds_tls_t *t, const char *host);

/* After SSL_do_handshake failed with `ssl_error` (SSL_get_error): why, in words, into out
 * ("certificate verify failed: certificate has expired", "... hostname mismatch (checked
 * redis.internal)", or OpenSSL's reason). */
void rds_tls_why(const rds_tls_t *t, SSL *ssl, int ssl_error, const char *host, char *out,
                 size_t size);

#endif

/*
 * Certificates made by the test, with Debian's openssl (and libfaketime for one in the past): a CA,
 * a server certificate it signed (names redis.test and the address 127.0.0.1), a client
 * certificate it signed, a second CA with a server certificate of its own (the wrong CA), a
 * server certificate for another name (other.test only) and one that expired in 2020. All EC
 * P-256, in a temporary directory removed at the end. Prefix rt_ (redis TLS).
 */
#ifndef TT_TESTS_REDIS_CERTS_H
#define TT_TESTS_REDIS_CERTS_H

typedef struct rt_pair {
    char pem[128], key[128];
} rt_pair_t;

typedef struct rt_certs {
    char dir[64];
    char ca[128];         /* the CA everyone trusts */
    rt_pair_t server;     /* redis.test, 127.0.0.1; signed by ca */
    rt_pair_t client;     /* a client certificate signed by ca */
    char other_ca[128];   /* another CA */
    rt_pair_t stranger;   /* redis.test, 127.0.0.1; signed by other_ca */
    rt_pair_t wrong_name; /* other.test only; signed by ca */
    rt_pair_t expired;    /* redis.test, 127.0.0.1; signed by ca, valid 2020-01-01 for a day */
} rt_certs_t;

/* Makes them all. 0, or -1 (what failed on stderr). */
int rt_certs_make(rt_certs_t *c);

/* Removes the directory. */
void rt_certs_remove(rt_certs_t *c);

/* redis-server arguments for a TLS port `tls_port` (the plain port stays, for the harness and
 * the checks) serving `pair`, trusting ca for client certificates; `auth_clients` "no",
 * "optional" or "yes". Written into args (NULL-ended), whose strings live in storage. */
void rt_server_args(const rt_certs_t *c, const rt_pair_t *pair, int tls_port,
                    const char *auth_clients, const char *args[16], char storage[512]);

#endif

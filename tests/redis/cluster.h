/*
 * A real Redis Cluster for the tests: six redis-servers on free loopback ports (cluster mode,
 * a short cluster-node-timeout so a failover takes about two seconds), joined by
 * `redis-cli --cluster create --cluster-replicas 1`: three primaries, each with a replica.
 * Everything is polled with a deadline and removed at the end. Prefix rc_ (redis cluster).
 */
#ifndef TT_TESTS_REDIS_CLUSTER_H
#define TT_TESTS_REDIS_CLUSTER_H

#include "harness.h"

#define RC_NODES 6

/* A cluster that wants a password, or speaks TLS (each node then has a tls-port beside its plain
 * one, with tls-cluster and tls-replication: CLUSTER SLOTS over TLS names the TLS ports). */
typedef struct rc_options {
    const char *password;        /* requirepass and masterauth; NULL: none */
    const char *cert, *key, *ca; /* the nodes' certificate and the CA; NULL: no TLS */
} rc_options_t;

typedef struct rc_cluster {
    rh_server_t node[RC_NODES];
    const char *seeds[3]; /* three node addresses, for rds_options_t.cluster (TLS ports with TLS) */
    char tls_address[RC_NODES][32]; /* "127.0.0.1:<tls-port>" with TLS, else "" */
    const char *args[RC_NODES][32];
    char storage[RC_NODES][256];
    char password[64];
} rc_cluster_t;

/* Starts and joins the cluster, and waits (bounded) until every node says cluster_state:ok.
 * 0 or -1 (what went wrong on stderr). */
int rc_start(rc_cluster_t *c);

/* The same with a password and/or TLS (o's strings must outlive the cluster). */
int rc_start_with(rc_cluster_t *c, const rc_options_t *o);

/* Stops every node and removes their directories. */
void rc_stop(rc_cluster_t *c);

/* True when every running node says cluster_state:ok and agrees on the primary of every slot
 * (tests poll it with a deadline). */
bool rc_ok(rc_cluster_t *c);

/* The index of the node serving `slot` as primary, as node `asked` sees it, or -1. */
int rc_primary_of(rc_cluster_t *c, int asked, int slot);

/* Whether node i is a primary now (ROLE). */
bool rc_is_primary(rc_cluster_t *c, int i);

/* Node i's cluster id (CLUSTER MYID) into id[41]. 0 or -1. */
int rc_node_id(rc_cluster_t *c, int i, char id[41]);

/* A key (written into buf) whose slot is `slot`: "k<n>" for the first n that hashes there. */
const char *rc_key_in_slot(int slot, char *buf, size_t n);

#endif

/*
 * rds auth: the credentials the store sends in every connection's handshake (AUTH), read from
 * files as a mounted Secret is, never from the configuration itself. The secrets live only here
 * and in the store's copy, are never put in an error, a log line or a metric, and are wiped when
 * dropped. See docs/redis.md, "Credentials and TLS".
 */
#ifndef TT_REDIS_AUTH_H
#define TT_REDIS_AUTH_H

#include <stddef.h>

#include "tt_err.h"

#define RDS_USER_MAX 128      /* an ACL user name (config's CFG_NAME_MAX) */
#define RDS_PASSWORD_MAX 4096 /* bytes of one password */

/* Errors beside script.h's and slots.h's. */
enum {
    RDS_ESECRET = TT_ERR_RDS_SECRET, /* a password file that cannot be read or used */
    RDS_ETLS = TT_ERR_RDS_TLS,       /* a TLS file or setting that cannot be used */
};

/* AUTH for one kind of server: none (password_len 0), AUTH <password> (user ""), or
 * AUTH <user> <password> (an ACL user). */
typedef struct rds_auth {
    char user[RDS_USER_MAX + 1];
    char password[RDS_PASSWORD_MAX + 1];
    size_t password_len;
} rds_auth_t;

typedef struct rds_credentials {
    rds_auth_t redis;    /* every Redis: the address, each cluster node, Sentinel's primaries */
    rds_auth_t sentinel; /* the Sentinels (their own; none unless given) */
} rds_credentials_t;

/*
 * Reads the password in `file` into *out (user copied from `user`, may be NULL). The file holds
 * one line: a final "\n" or "\r\n" is dropped, and an empty file, a NUL, another line break or
 * more than RDS_PASSWORD_MAX bytes is refused. Returns 0, or RDS_ESECRET with err's path `field`
 * (shared_state.redis.password_file) and a message naming the file and what is wrong, never its
 * content. *out is wiped on error.
 */
int rds_auth_read(const char *user, const char *file, const char *field, rds_auth_t *out,
                  tt_err_t *err);

/* Overwrites the secrets with zeros (not optimised away). */
void rds_credentials_wipe(rds_credentials_t *c);

#endif

/*
 * tt_err: the one error space of the daemon's modules, as libuv's UV_ERRNO_MAP (the client
 * library's TT_E* are its own public API). A module names its codes after its prefix
 * (GOV_ESUBJECT, PROTO_EFRAME) as aliases of these rows, so one code has one value, one name
 * and one message wherever it travels; the rows are grouped by the module that added them. Every
 * code has a wire name (what an answer's error.code says) and a message (what it means); a
 * failure's detail travels in a tt_err_t: the code, the path of the field that was wrong
 * (`items[3].key`, `subject.team`) and a message about that field. Functions return 0 or one of
 * these negative codes.
 */
#ifndef TT_COMMON_TT_ERR_H
#define TT_COMMON_TT_ERR_H

#include <stdarg.h>

/* X(NAME, value, "wire_name", "message") */
#define TT_ERRNO_MAP(X)                                                                            \
    X(MORE, -1, "more", "the message is incomplete")                                               \
    X(FRAME, -2, "bad_frame", "not a msgpack map, or bytes no msgpack value starts with")          \
    X(TOOBIG, -3, "too_large", "longer than the message bound, or a header that cannot fit")       \
    X(DEEP, -4, "too_deep", "nesting beyond the depth bound")                                      \
    X(TYPE, -5, "wrong_type", "a value of the wrong type")                                         \
    X(OP, -6, "unknown_op", "an op the daemon does not know")                                      \
    X(MISSING, -7, "missing_field", "a field the message needs is absent")                         \
    X(VALUE, -8, "bad_value", "a value out of range, too long or given twice")                     \
    X(FIELD, -9, "unknown_field", "a field the message does not take")                             \
    /* any module */                                                                               \
    X(INVAL, -10, "bad_request", "a bad argument")                                                 \
    X(NOMEM, -11, "out_of_memory", "out of memory")                                                \
    /* engine/ (GOV_E*) */                                                                         \
    X(SUBJECT, -20, "bad_subject", "a malformed subject: too many levels, an id too long")         \
    X(TOKENS, -21, "tokens_required", "a tpm limit applies and the request gives no tokens")       \
    X(RANGE, -22, "out_of_range", "tokens, reserved or actual negative or above 2^40")             \
    X(NOTPM, -23, "no_tpm_limit", "no tpm limit applies to the subject")                           \
    X(NOLEASE, -24, "unknown_lease", "no such lease of this owner, or already released")           \
    X(LIMITS, -25, "bad_limits", "too many limits, or a limit not armed")                          \
    X(LEASES, -26, "lease_cap", "the lease cap is reached")                                        \
    X(RESERVATION, -27, "unknown_reservation",                                                     \
      "no such reservation: never issued, expired or evicted")                                     \
    /* config/ (CFG_E*) */                                                                         \
    X(CONFIG, -30, "bad_config", "the configuration has errors; the report lists them")            \
    /* server/ (SRV_E*): what keeps the daemon from serving */                                     \
    X(INUSE, -35, "socket_in_use", "a live daemon already answers on the socket")                  \
    X(LISTEN, -36, "cannot_listen", "cannot create, bind or listen (path, permissions, address)")  \
    /* membership/ (SWIM_E*): a datagram dropped, and why */                                       \
    X(GOSSIP_OVERSIZE, -40, "gossip_oversize", "oversized datagram")                               \
    X(GOSSIP_TRUNCATED, -41, "gossip_truncated", "truncated datagram")                             \
    X(GOSSIP_VERSION, -42, "gossip_version", "unknown wire version")                               \
    X(GOSSIP_MODE, -43, "gossip_mode", "plaintext/sealed mismatch")                                \
    X(GOSSIP_AUTH, -44, "gossip_auth", "authentication failed")                                    \
    X(GOSSIP_MALFORMED, -45, "gossip_malformed", "malformed body")                                 \
    X(GOSSIP_STALE, -46, "gossip_stale", "outside the replay window")                              \
    X(GOSSIP_REPLAY, -47, "gossip_replay", "replayed datagram")                                    \
    X(GOSSIP_SELF, -48, "gossip_self", "our own datagram")                                         \
    X(KEYRING, -49, "bad_keyring", "bad keyring")                                                  \
    X(SPACE, -50, "no_space", "buffer too small")                                                  \
    /* state/ (ST_E*): why a snapshot was not restored; contiguous, st_reason_index counts on it   \
     */                                                                                            \
    X(ST_UNSAFE, -69, "unsafe",                                                                    \
      "the directory or file is not safe to use: others may write it, or not a regular file")      \
    X(ST_MISSING, -70, "missing", "no snapshot file")                                              \
    X(ST_TRUNCATED, -71, "truncated", "the file ends before the snapshot does")                    \
    X(ST_MAGIC, -72, "not_a_snapshot", "the file does not start with the snapshot magic")          \
    X(ST_VERSION, -73, "wrong_version", "written in a format version this build cannot read")      \
    X(ST_CHECKSUM, -74, "corrupt", "a checksum does not match")                                    \
    X(ST_FORMAT, -75, "malformed", "a field is out of range")                                      \
    X(ST_FOREIGN, -76, "foreign", "written for another node or cluster")                           \
    X(ST_IO, -77, "io", "the file or directory could not be read or written")                      \
    X(ST_LOCKED, -78, "locked", "another daemon holds the state directory")                        \
    X(ST_TOOBIG, -79, "too_big", "larger than the daemon would read")                              \
    /* share/ (DEMAND_E*) */                                                                       \
    X(DEMAND_CONFIG, -60, "bad_demand_config", "a field of the demand configuration out of range") \
    X(DEMAND_WIRE, -61, "bad_demand_payload", "a demand payload that does not decode")             \
    X(DEMAND_SENDER, -62, "unknown_demand_sender",                                                 \
      "a demand payload from a member not in the live list")                                       \
    X(DEMAND_MEMBERS, -63, "too_many_members", "more live members than members_max")               \
    X(UNARMED, -64, "unarmed", "share store not armed yet (membership has not joined)")            \
    /* share/ (SHARE_E*) */                                                                        \
    X(SHARE_META, -65, "bad_share_meta", "share metadata payload does not decode")                 \
    X(SHARE_LIMIT, -66, "not_a_share_limit", "not a gcra rate limit on store share")               \
    X(SHARE_CONFIG, -67, "bad_share_config", "share configuration out of range")                   \
    /* ratealg/ (RA_E*): a limiter that does not arm */                                            \
    X(RA_AMOUNT, -80, "bad_amount", "amount must be positive")                                     \
    X(RA_PERIOD, -81, "bad_period", "period must be positive")                                     \
    X(RA_BURST, -82, "bad_burst", "burst must be positive")                                        \
    X(RA_EMISSION, -83, "zero_emission_interval",                                                  \
      "amount exceeds the period in nanoseconds: the emission interval would be 0")                \
    X(RA_TAU, -84, "tau_overflow", "the allowance offset tau = T x burst overflows int64")         \
    X(RA_CEILING, -85, "above_window_ceiling",                                                     \
      "amount exceeds the packed window-counter ceiling 65535")                                    \
    X(RA_NOEFFECTIVE, -86, "no_effective_form",                                                    \
      "the algorithm has no per-step effective-rate form")                                         \
    X(RA_SHARE, -87, "bad_share",                                                                  \
      "a share must be num/den with 0 < num <= den and a positive unit")                           \
    X(RA_ALGORITHM, -88, "unknown_algorithm", "unregistered algorithm")                            \
    /* redis/ (RDS_E*): each means "Redis could not answer this decision" */                       \
    X(RDS_UNAVAILABLE, -90, "redis_unavailable",                                                   \
      "not connected, or the script handshake not done")                                           \
    X(RDS_TIMEDOUT, -91, "redis_timeout", "no answer within the timeout")                          \
    X(RDS_ERROR, -92, "redis_error", "Redis answered an error")                                    \
    X(RDS_REPLY, -93, "redis_bad_reply", "the answer had the wrong shape or type")                 \
    X(RDS_CONN, -94, "redis_connection_lost", "the connection went away with the call in flight")  \
    X(RDS_FULL, -95, "redis_busy", "too many calls in flight: bounded, not queued")                \
    X(RDS_ADDRESS, -96, "bad_redis_address", "not host:port or a socket path")                     \
    X(RDS_ARG, -97, "bad_redis_argument", "a key too long, or an algorithm with no redis form")    \
    X(RDS_CLOSED, -98, "redis_closed", "the store was closed with the call in flight")             \
    X(RDS_NOSCRIPT, -99, "redis_noscript", "Redis does not hold the script")                       \
    X(RDS_MAP, -100, "redis_bad_map", "a CLUSTER SLOTS or Sentinel reply that cannot be used")     \
    X(RDS_SECRET, -101, "bad_redis_secret", "a password file that cannot be read or used")         \
    X(RDS_TLS, -102, "bad_redis_tls", "a TLS file or setting that cannot be used")                 \
    /* server/hreq (HREQ_E*): what ends an HTTP connection after its answer */                     \
    X(HTTP_BAD, -110, "http_bad_request", "the bytes are not an HTTP/1.x request")                 \
    X(HTTP_TARGET, -111, "http_target_too_long", "the request target is too long")                 \
    X(HTTP_HEAD, -112, "http_head_too_large", "the request head is too large")                     \
    X(HTTP_BODY, -113, "http_body_too_large", "the request body is too large")                     \
    /* server/door (DOOR_E*): who may spend (SPEC §9) */                                          \
    X(UNAUTHENTICATED, -120, "unauthenticated",                                                    \
      "a decision over TCP without a bearer token server.tokens_file holds")                       \
    X(FORBIDDEN, -121, "forbidden", "the token may not name this subject, or this reservation")    \
    X(PEER, -122, "peer_not_allowed", "the peer's uid and gid are not in server.allow_uids/gids")

enum {
#define TT_ERR_ENUM_(name, value, wire, msg) TT_ERR_##name = value,
    TT_ERRNO_MAP(TT_ERR_ENUM_)
#undef TT_ERR_ENUM_
};

/* The wire name of a code ("bad_frame", ...); "error" for a code not in the table. */
const char *tt_err_name(int code);
/* What a code means; "unknown error" for a code not in the table. */
const char *tt_err_message(int code);

#define TT_ERR_PATH_MAX 96     /* bytes of a path, with its NUL: "subject." and a 64-byte level */
#define TT_ERR_MESSAGE_MAX 160 /* bytes of a message, with its NUL */
/* What tt_err_format writes at the most, with its NUL: "path: message". */
#define TT_ERR_TEXT_MAX (TT_ERR_PATH_MAX + 2 + TT_ERR_MESSAGE_MAX)

/* A failure's detail. An empty path: the message concerns the whole input. */
typedef struct tt_err {
    int code;
    char path[TT_ERR_PATH_MAX];
    char message[TT_ERR_MESSAGE_MAX];
} tt_err_t;

/* Fills err (when not NULL) and returns code, so a failure reads `return tt_err_set(...)`. */
int tt_err_set(tt_err_t *err, int code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same with the message's arguments in a va_list (for a module's own fail helper). */
int tt_err_vset(tt_err_t *err, int code, const char *path, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
/* "path: message", or the message alone when the path is empty. */
const char *tt_err_format(const tt_err_t *err, char *buf, unsigned long size);

#endif

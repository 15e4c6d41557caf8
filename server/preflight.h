/*
 * What `serve` checks on this host before anything listens, and `validate --arm` with it
 * (nginx -t's promise: a config it passes, the daemon takes). Each check is the code the daemon
 * runs when it starts, called early and changing nothing:
 *   - the socket: where it resolves (-s, $TOKENTRIAGE_SOCKET, server.socket, the default) and
 *     whether it can be made there (srv_socket_check); a unix server.grpc likewise;
 *   - the listeners' addresses: server.http, shared_state.share.bind and .advertise are numeric
 *     ip:port (mb_want_addr: the parser the listeners bind with);
 *   - the gossip keyring: shared_state.share.keyring_file read and parsed (mb_keyring_read);
 *   - the redis store's files: password_file and sentinel_password_file read
 *     (rds_credentials_from_config, then wiped), the tls files loaded (rds_tls_check);
 *   - the state directory (st_dir_check): unusable, the daemon runs without state, so this is
 *     a warning; the daemon itself leaves it to st_node_open, which runs the same check and logs.
 * The host is this one, the user the caller: run `validate --arm` where and as whom the daemon
 * runs. A live daemon already on the socket is not a finding (validating beside a running
 * daemon is the common case).
 */
#ifndef TT_SERVER_PREFLIGHT_H
#define TT_SERVER_PREFLIGHT_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/* The socket the daemon serves: the flag (may be NULL), then $TOKENTRIAGE_SOCKET, then
 * server.socket, then the built-in default with its non-root fallback (docs/protocol.md). 0, or
 * -1 when the path does not fit `size`. */
int srv_socket_resolve(const cfg_config_t *cfg, const char *flag, char *path, size_t size);

/* Runs the checks on an armed config, adding every finding to `report` (no position: they are
 * about the host, not the file). `serving`: the daemon asks (the state directory is left to
 * st_node_open). Returns 0, or CFG_EINVALID when an error was found (CFG_ENOMEM when the report
 * could not grow). */
int srv_preflight(const cfg_config_t *cfg, const char *socket_flag, bool serving,
                  cfg_report_t *report);

#endif

/*
 * The daemon's life: load and arm the config, build the engine, serve, reload on SIGHUP,
 * leave on SIGTERM/SIGINT. `tokentriage serve` is a thin wrapper around srv_daemon_run.
 */
#ifndef TT_SERVER_DAEMON_H
#define TT_SERVER_DAEMON_H

#include <stdbool.h>

typedef struct srv_daemon_options {
    const char *config_path; /* NULL: the embedded default configuration */
    const char *socket;      /* -s: overrides $TOKENTRIAGE_SOCKET and server.socket; may be NULL */
    const char *version;
    const char *commit; /* the source commit, for tokentriage_build_info; may be NULL */
    bool log_level_set; /* --log-level was given (tt_log_set_level): server.log_level is not read */
} srv_daemon_options_t;

/* Runs until SIGTERM or SIGINT. Returns a sysexits code: 0 after a clean exit, 78 for a
 * configuration that does not load or arm or fails a host check before anything listens
 * (srv_preflight, what validate --arm runs: the keyring, the socket's directory, the listeners'
 * addresses), 69 when the socket or an address cannot be served all the same (another daemon
 * holds it, the port is taken), 70 for anything else. */
int srv_daemon_run(const srv_daemon_options_t *opt);

#endif

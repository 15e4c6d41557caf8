/*
 * tokentriage serve [-c FILE] [-s SOCK] [--log-format logfmt|json] [--log-level LEVEL]
 *
 * With no file the embedded default configuration serves at once (config/default.yaml). The
 * socket resolves as everywhere: -s, then $TOKENTRIAGE_SOCKET, then server.socket, then the
 * built-in default (with its non-root fallback, see docs/protocol.md).
 */
#include <getopt.h>
#include <stdio.h>

#include "cmd.h"
#include "daemon.h"
#include "tt_log.h"
#include "tokentriage.h" /* TT_SOCKET_ENV */
#include "tt_commit.h"

#define HELP                                                                                       \
    "usage: tokentriage serve [-c FILE] [-s SOCKET] [--log-format logfmt|json]\n"                  \
    "                         [--log-level debug|info|warn|error]\n"                               \
    "\n"                                                                                           \
    "Runs the daemon: loads and arms the configuration, checks this host (the keyring, the\n"      \
    "socket's directory, the listeners' addresses: what `validate --arm` checks), then answers\n"  \
    "decisions on the unix socket and serves /metrics, /healthz and /readyz on server.http.\n"     \
    "SIGHUP reloads the configuration (all or nothing); SIGTERM or SIGINT leave the gossip "       \
    "group\n"                                                                                      \
    "gracefully, write the counters' snapshot and exit 0. Logs go to stderr.\n"                    \
    "\n"                                                                                           \
    "options:\n"                                                                                   \
    "  -c, --config FILE    the configuration (default: the embedded default configuration,\n"     \
    "                       config/default.yaml: demo limits on the local store)\n"                \
    "  -s, --socket PATH    serve here (default: $" TT_SOCKET_ENV ", else server.socket, else\n"   \
    "                       /run/tokentriage/tokentriage.sock, or as an ordinary user\n"           \
    "                       $XDG_RUNTIME_DIR/tokentriage/ or /tmp/tokentriage-UID/)\n"             \
    "  --log-format F       logfmt or json (default logfmt)\n"                                     \
    "  --log-level L        debug, info, warn or error: the lowest level written (default\n"       \
    "                       server.log_level, else info; the flag wins over the key)\n"            \
    "  -h, --help           this text\n"                                                           \
    "\n"                                                                                           \
    "exit status: 0 after a clean stop, 64 usage, 69 the socket or an address cannot be served\n"  \
    "(another daemon holds it, a port is taken), 70 an internal error, 78 the configuration "      \
    "does\n"                                                                                       \
    "not load, arm or pass the host checks.\n"

int cmd_serve(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"socket", required_argument, NULL, 's'},
                                         {"log-format", required_argument, NULL, 'L'},
                                         {"log-level", required_argument, NULL, 'l'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    srv_daemon_options_t opt = {.version = TT_VERSION, .commit = TT_COMMIT};
    tt_log_format_t format;
    tt_log_level_t level;
    int ch;
    optind = 1;
    while ((ch = cmd_getopt(argc, argv, "c:s:h", opts, HELP)) != -1) {
        switch (ch) {
        case 'c':
            opt.config_path = optarg;
            break;
        case 's':
            opt.socket = optarg;
            break;
        case 'L':
            if (tt_log_parse_format(optarg, &format) != 0)
                return cmd_usage_error(HELP, "--log-format is logfmt or json, not \"%s\"", optarg);
            tt_log_set_format(format);
            break;
        case 'l':
            if (tt_log_parse_level(optarg, &level) != 0)
                return cmd_usage_error(
                    HELP, "--log-level is debug, info, warn or error, not \"%s\"", optarg);
            tt_log_set_level(level);
            opt.log_level_set = true;
            break;
        case 'h':
            return cmd_help(HELP);
        default: /* CMD_OPT_BAD: said */
            return EX_USAGE_;
        }
    }
    if (optind != argc)
        return cmd_usage_error(HELP, "unexpected argument \"%s\"", argv[optind]);
    return srv_daemon_run(&opt);
}

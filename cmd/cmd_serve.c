/*
 * tokentriage serve [-c FILE] [-s SOCK] [--log-format logfmt|json]
 *
 * With no file the embedded default configuration serves at once (config/default.yaml). The
 * socket resolves as everywhere: -s, then $TOKENTRIAGE_SOCKET, then server.socket, then the
 * built-in default (with its non-root fallback, see docs/protocol.md).
 */
#include <getopt.h>
#include <stdio.h>

#include "cmd.h"
#include "daemon.h"
#include "log.h"
#include "tt_commit.h"

#define USAGE "usage: tokentriage serve [-c FILE] [-s SOCKET] [--log-format logfmt|json]\n"

int cmd_serve(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"socket", required_argument, NULL, 's'},
                                         {"log-format", required_argument, NULL, 'L'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    srv_daemon_options_t opt = {.version = TT_VERSION, .commit = TT_COMMIT};
    srv_log_format_t format;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "c:s:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            opt.config_path = optarg;
            break;
        case 's':
            opt.socket = optarg;
            break;
        case 'L':
            if (srv_log_parse_format(optarg, &format) != 0) {
                fprintf(stderr, "tokentriage serve: --log-format is logfmt or json\n" USAGE);
                return EX_USAGE_;
            }
            srv_log_set_format(format);
            break;
        case 'h':
            printf(USAGE);
            return EX_OK_;
        default:
            fprintf(stderr, USAGE);
            return EX_USAGE_;
        }
    }
    if (optind != argc) {
        fprintf(stderr, USAGE);
        return EX_USAGE_;
    }
    return srv_daemon_run(&opt);
}

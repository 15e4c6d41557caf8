/*
 * tokentriage settle [-s SOCK] --subject LEVEL=ID... --reserved R --actual A [--json]
 *
 * Corrects the tpm limits of a subject once a call's real token count is known: the decision
 * reserved R, the call used A (SPEC §5, docs/protocol.md).
 */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "cmd.h"

#define USAGE                                                                                      \
    "usage: tokentriage settle [-s SOCKET] --subject LEVEL=ID... --reserved R --actual A "        \
    "[--json]\n"

int cmd_settle(int argc, char **argv)
{
    static const struct option opts[] = {{"socket", required_argument, NULL, 's'},
                                         {"subject", required_argument, NULL, 'S'},
                                         {"reserved", required_argument, NULL, 'r'},
                                         {"actual", required_argument, NULL, 'a'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *sock = NULL;
    cli_subject_t subject = {.n = 0};
    long long reserved = -1, actual = -1;
    bool json = false;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "s:h", opts, NULL)) != -1) {
        switch (ch) {
        case 's':
            sock = optarg;
            break;
        case 'S':
            if (cli_subject_add(&subject, optarg, "settle"))
                return EX_USAGE_;
            break;
        case 'r':
            if (cli_parse_count(optarg, "--reserved", "settle", 1LL << 40, &reserved))
                return EX_USAGE_;
            break;
        case 'a':
            if (cli_parse_count(optarg, "--actual", "settle", 1LL << 40, &actual))
                return EX_USAGE_;
            break;
        case 'j':
            json = true;
            break;
        case 'h':
            printf(USAGE);
            return EX_OK_;
        default:
            fprintf(stderr, USAGE);
            return EX_USAGE_;
        }
    }
    if (optind != argc || subject.n == 0 || reserved < 0 || actual < 0) {
        fprintf(stderr, "tokentriage settle: --subject, --reserved and --actual are required\n%s",
                USAGE);
        return EX_USAGE_;
    }
    tt_client_t *c = cli_connect(sock, "settle");
    if (!c)
        return EX_UNAVAILABLE_;
    static tt_response_t r;
    int rc = tt_settle(c, subject.pairs, subject.n, reserved, actual, &r);
    int code = EX_OK_;
    if (rc == 0 && json)
        code = cli_print_json(&r);
    else if (rc == 0)
        printf("settled %lld tpm limit%s (reserved %lld, actual %lld)\n", (long long)r.settled,
               r.settled == 1 ? "" : "s", reserved, actual);
    else
        code = cli_fail(rc, &r, "settle");
    tt_close(c);
    return code;
}

/*
 * tokentriage settle [-s SOCK] --subject LEVEL=ID... --reserved R --actual A [--json]
 *
 * Corrects the tpm limits of a subject once a call's real token count is known: the decision
 * reserved R, the call used A (SPEC §5, docs/protocol.md).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd.h"

#define USAGE                                                                                      \
    "usage: tokentriage settle [-s SOCKET] --subject LEVEL=ID... --reserved R --actual A "         \
    "[--json]\n"

/* The counts, for the human line. */
static long long reserved = -1, actual = -1;

static void print_settled(const tt_response_t *r)
{
    printf("settled %lld tpm limit%s (reserved %lld, actual %lld)\n", (long long)r->settled,
           r->settled == 1 ? "" : "s", reserved, actual);
}

int cmd_settle(int argc, char **argv)
{
    static const struct option opts[] = {CLI_COMMON_OPTIONS,
                                         {"subject", required_argument, NULL, 'S'},
                                         {"reserved", required_argument, NULL, 'r'},
                                         {"actual", required_argument, NULL, 'a'},
                                         {NULL, 0, NULL, 0}};
    cli_common_t o = {0};
    cli_subject_t subject = {.n = 0};
    int ch, rc;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "s:h", opts, NULL)) != -1) {
        if (ch == 'S' && cli_subject_add(&subject, optarg, "settle"))
            return EX_USAGE_;
        if (ch == 'r' && cli_parse_count(optarg, "--reserved", "settle", 1LL << 40, &reserved))
            return EX_USAGE_;
        if (ch == 'a' && cli_parse_count(optarg, "--actual", "settle", 1LL << 40, &actual))
            return EX_USAGE_;
        if (!strchr("Sra", ch) && (rc = cli_common_option(ch, &o, USAGE)) != CLI_CONTINUE)
            return rc;
    }
    if (optind != argc || subject.n == 0 || reserved < 0 || actual < 0) {
        fprintf(stderr, "tokentriage settle: --subject, --reserved and --actual are required\n%s",
                USAGE);
        return EX_USAGE_;
    }
    tt_client_t *c = cli_connect(o.sock, "settle");
    if (!c)
        return EX_UNAVAILABLE_;
    static tt_response_t r;
    return cli_answer(c, tt_settle(c, subject.pairs, subject.n, reserved, actual, &r), &r, &o,
                      "settle", print_settled);
}

/*
 * tokentriage settle [-s SOCK] --reservation ID --actual A [--json]
 * tokentriage charge [-s SOCK] --subject LEVEL=ID... --tokens N [--json]
 *
 * settle corrects what a tpm decision charged once the call's real token count is known: the
 * decision answered a reservation id, the call used A (SPEC §5, docs/protocol.md). Once: a
 * repeat is told "already settled". charge counts tokens known after the fact with no
 * reservation (never a refund).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd.h"

#define SETTLE_HELP                                                                                \
    "usage: tokentriage settle [-s SOCKET] --reservation ID --actual A [--json]\n"                 \
    "\n"                                                                                           \
    "Corrects what a tpm decision charged once the call's real token count is known: the\n"        \
    "decision answered a reservation id (decide prints it), the call used A tokens. Every tpm\n"   \
    "limit the reservation charged moves by A minus the estimate: a refund never below a full\n"   \
    "bucket, an overrun always charged. Once: a repeat is answered \"already settled\" and\n"      \
    "changes nothing; an unknown or expired reservation is an error that changes nothing.\n"       \
    "\n"                                                                                           \
    "options:\n" CLI_HELP_SOCKET                                                                   \
    "  --reservation ID     the id a tpm decision answered (required)\n"                           \
    "  --actual A           the tokens the call really used, 0 or more (required)\n" CLI_HELP_JSON \
        CLI_HELP_HELP "\n" CLI_HELP_EXIT
#define CHARGE_HELP                                                                                \
    "usage: tokentriage charge [-s SOCKET] --subject LEVEL=ID... --tokens N [--json]\n"            \
    "\n"                                                                                           \
    "Counts tokens known only after the fact, with no decision before them, against every tpm\n"   \
    "limit the subject reaches. Never a refund; a charge past the limit is counted all the same\n" \
    "(later decisions wait for it).\n"                                                             \
    "\n"                                                                                           \
    "options:\n" CLI_HELP_SOCKET                                                                   \
    "  --subject LEVEL=ID   one level of the subject, e.g. team=t-1; repeat for each level\n"      \
    "                       (required; at most 16)\n"                                              \
    "  --tokens N           the tokens to count, 0 or more (required)\n" CLI_HELP_JSON             \
        CLI_HELP_HELP "\n" CLI_HELP_EXIT

/* The counts, for the human lines. */
static long long actual = -1, tokens = -1;

static void print_settled(const tt_response_t *r)
{
    if (r->already_settled)
        printf("already settled: nothing changed\n");
    else
        printf("settled %lld tpm limit%s (actual %lld)\n", (long long)r->settled,
               r->settled == 1 ? "" : "s", actual);
}

static void print_charged(const tt_response_t *r)
{
    printf("charged %lld tpm limit%s (tokens %lld)\n", (long long)r->charged,
           r->charged == 1 ? "" : "s", tokens);
}

/* A reservation id: the decimal the decision answered, 1 .. 2^64 - 1. */
static int parse_reservation(const char *arg, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    if (!*arg || *end || errno || v == 0 || arg[strspn(arg, "0123456789")])
        return cmd_usage_error(SETTLE_HELP,
                               "--reservation: \"%s\" is not a reservation id (the decimal number "
                               "a tpm decision answered)",
                               arg);
    *out = v;
    return 0;
}

int cmd_settle(int argc, char **argv)
{
    static const struct option opts[] = {CLI_COMMON_OPTIONS,
                                         {"reservation", required_argument, NULL, 'R'},
                                         {"actual", required_argument, NULL, 'a'},
                                         {"reserved", required_argument, NULL, 'r'},
                                         {"subject", required_argument, NULL, 'S'},
                                         {NULL, 0, NULL, 0}};
    cli_common_t o = {0};
    uint64_t reservation = 0;
    int ch, rc;
    optind = 1;
    while ((ch = cmd_getopt(argc, argv, "s:h", opts, SETTLE_HELP)) != -1) {
        if (ch == 'r' || ch == 'S') /* the form before reservations (issue 23) */
            return cmd_usage_error(SETTLE_HELP,
                                   "--%s is gone: settle takes the --reservation a tpm decision "
                                   "answered; tokens counted without one go through `tokentriage "
                                   "charge --subject ... --tokens N`",
                                   ch == 'r' ? "reserved" : "subject");
        if (ch == 'R' && parse_reservation(optarg, &reservation))
            return EX_USAGE_;
        if (ch == 'a' && cli_parse_count(optarg, "--actual", 0, 1LL << 40, SETTLE_HELP, &actual))
            return EX_USAGE_;
        if (!strchr("Ra", ch) && (rc = cli_common_option(ch, &o, SETTLE_HELP)) != CLI_CONTINUE)
            return rc;
    }
    if (optind != argc)
        return cmd_usage_error(SETTLE_HELP, "unexpected argument \"%s\"", argv[optind]);
    if (reservation == 0 || actual < 0)
        return cmd_usage_error(SETTLE_HELP, "--reservation and --actual are required");
    tt_client_t *c = cli_connect(o.sock, "settle");
    if (!c)
        return EX_UNAVAILABLE_;
    static tt_response_t r;
    return cli_answer(c, tt_settle(c, reservation, actual, &r), &r, &o, "settle", print_settled);
}

int cmd_charge(int argc, char **argv)
{
    static const struct option opts[] = {CLI_COMMON_OPTIONS,
                                         {"subject", required_argument, NULL, 'S'},
                                         {"tokens", required_argument, NULL, 't'},
                                         {NULL, 0, NULL, 0}};
    cli_common_t o = {0};
    cli_subject_t subject = {.n = 0};
    int ch, rc;
    optind = 1;
    while ((ch = cmd_getopt(argc, argv, "s:h", opts, CHARGE_HELP)) != -1) {
        if (ch == 'S' && cli_subject_add(&subject, optarg, CHARGE_HELP))
            return EX_USAGE_;
        if (ch == 't' && cli_parse_count(optarg, "--tokens", 0, 1LL << 40, CHARGE_HELP, &tokens))
            return EX_USAGE_;
        if (!strchr("St", ch) && (rc = cli_common_option(ch, &o, CHARGE_HELP)) != CLI_CONTINUE)
            return rc;
    }
    if (optind != argc)
        return cmd_usage_error(CHARGE_HELP, "unexpected argument \"%s\"", argv[optind]);
    if (subject.n == 0 || tokens < 0)
        return cmd_usage_error(CHARGE_HELP, "--subject and --tokens are required");
    tt_client_t *c = cli_connect(o.sock, "charge");
    if (!c)
        return EX_UNAVAILABLE_;
    static tt_response_t r;
    return cli_answer(c, tt_charge(c, subject.pairs, subject.n, tokens, &r), &r, &o, "charge",
                      print_charged);
}

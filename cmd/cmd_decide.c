/*
 * tokentriage decide [-s SOCK] --subject LEVEL=ID... [--tokens N] [--json] [--exit-status]
 *
 * Asks the daemon once and prints the verdict, the deciding limit, retry and reset, and the
 * headers to hand back to the caller. Exit 0 whatever the verdict: the answer is the output;
 * with --exit-status the verdict is the status too (0 admit, 1 deny, 2 unfittable, 3 a deny
 * because a store could not answer), as grep -q and diff answer, so a script can gate on it.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd.h"

#define EX_DENY 1       /* --exit-status: the request was denied */
#define EX_UNFITTABLE 2 /* --exit-status: the cost can never fit: do not retry it */
#define EX_STORE_DOWN 3 /* --exit-status: denied because a limit's store could not answer */

#define HELP                                                                                       \
    "usage: tokentriage decide [-s SOCKET] --subject LEVEL=ID... [--tokens N] [--json]\n"          \
    "                          [--exit-status]\n"                                                  \
    "\n"                                                                                           \
    "Asks the daemon once whether a request may go, as a workload does: every rpm and tpm limit\n" \
    "whose level the subject names (or global) is probed, and all commit only if all admit. It\n"  \
    "prints the verdict (admit, deny, unfittable), the deciding limit, remaining, retry_after,\n"  \
    "reset_after, a tpm reservation to settle, and the rate headers to hand back. Concurrency\n"   \
    "limits are not reached by decide: `tokentriage acquire` holds their leases.\n"                \
    "\n"                                                                                           \
    "options:\n" CLI_HELP_SOCKET                                                                   \
    "  --subject LEVEL=ID   one level of the subject, e.g. team=t-1; repeat for each level\n"      \
    "                       (required; at most 16)\n"                                              \
    "  --tokens N           the request's token cost, for tpm limits (required when one "          \
    "applies;\n"                                                                                   \
    "                       rpm limits cost 1 whatever it says; default: not "                     \
    "sent)\n" CLI_HELP_JSON                                                                        \
    "  --exit-status        the verdict is the exit status too: 0 admit, 1 deny, 2 unfittable,\n"  \
    "                       3 unavailable (default: 0 whatever the verdict)\n" CLI_HELP_HELP "\n"  \
    "exit status: 0 answered (with --exit-status: admitted), 1 denied, 2 unfittable and 3\n"       \
    "unavailable, denied because a limit's store could not answer (with --exit-status), 64\n"      \
    "usage, 65 the daemon refused the request (its error on stderr), 69 no daemon answers on\n"    \
    "the socket.\n"

static void print_decision(const tt_response_t *r)
{
    printf("verdict      %s\n", r->verdict);
    if (r->limit[0])
        printf("limit        %s\n", r->limit);
    if (r->remaining >= 0)
        printf("remaining    %lld\n", (long long)r->remaining);
    printf("retry_after  %llds\n", (long long)r->retry_after);
    printf("reset_after  %llds\n", (long long)r->reset_after);
    if (strcmp(r->code, "unavailable") == 0)
        printf("code         unavailable (a limit's store could not answer; its posture denied)\n");
    else if (r->code[0])
        printf("code         %s (do not retry the same cost)\n", r->code);
    if (r->nsoft) {
        printf("soft_denied ");
        for (unsigned i = 0; i < r->nsoft; i++)
            printf(" %s", r->soft_denied[i]);
        printf("\n");
    }
    if (r->lease)
        printf("lease        %llu\n", (unsigned long long)r->lease);
    if (r->reservation)
        printf("reservation  %llu (settle --reservation %llu --actual N)\n",
               (unsigned long long)r->reservation, (unsigned long long)r->reservation);
    for (unsigned i = 0; i < r->nheaders; i++)
        printf("%s: %s\n", r->headers[i].name, r->headers[i].value);
}

int cmd_decide(int argc, char **argv)
{
    static const struct option opts[] = {CLI_COMMON_OPTIONS,
                                         {"subject", required_argument, NULL, 'S'},
                                         {"tokens", required_argument, NULL, 't'},
                                         {"exit-status", no_argument, NULL, 'x'},
                                         {NULL, 0, NULL, 0}};
    cli_common_t o = {0};
    cli_subject_t subject = {.n = 0};
    long long tokens = -1;
    bool exit_status = false;
    int ch, rc;
    optind = 1;
    while ((ch = cmd_getopt(argc, argv, "s:h", opts, HELP)) != -1) {
        if (ch == 'S' && cli_subject_add(&subject, optarg, HELP))
            return EX_USAGE_;
        if (ch == 't' && cli_parse_count(optarg, "--tokens", 0, 1LL << 40, HELP, &tokens))
            return EX_USAGE_;
        if (ch == 'x')
            exit_status = true;
        if (!strchr("Stx", ch) && (rc = cli_common_option(ch, &o, HELP)) != CLI_CONTINUE)
            return rc;
    }
    if (optind != argc)
        return cmd_usage_error(HELP, "unexpected argument \"%s\"", argv[optind]);
    if (subject.n == 0)
        return cmd_usage_error(HELP, "--subject is required");
    tt_client_t *c = cli_connect(o.sock, "decide");
    if (!c)
        return EX_UNAVAILABLE_;
    static tt_response_t r;
    rc = cli_answer(c, tt_decide(c, subject.pairs, subject.n, tokens, &r), &r, &o, "decide",
                    print_decision);
    if (rc != EX_OK_ || !exit_status)
        return rc;
    return strcmp(r.verdict, "admit") == 0        ? EX_OK_
           : strcmp(r.verdict, "unfittable") == 0 ? EX_UNFITTABLE
           : strcmp(r.code, "unavailable") == 0   ? EX_STORE_DOWN
                                                  : EX_DENY;
}

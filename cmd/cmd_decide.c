/*
 * tokentriage decide [-s SOCK] --subject LEVEL=ID... [--tokens N] [--json]
 *
 * Asks the daemon once and prints the verdict, the deciding limit, retry and reset, and the
 * headers to hand back to the caller. Exit 0 whatever the verdict: the answer is the output.
 */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "cmd.h"

#define USAGE "usage: tokentriage decide [-s SOCKET] --subject LEVEL=ID... [--tokens N] [--json]\n"

static void print_decision(const tt_response_t *r)
{
    printf("verdict      %s\n", r->verdict);
    if (r->limit[0])
        printf("limit        %s\n", r->limit);
    if (r->remaining >= 0)
        printf("remaining    %lld\n", (long long)r->remaining);
    printf("retry_after  %llds\n", (long long)r->retry_after);
    printf("reset_after  %llds\n", (long long)r->reset_after);
    if (r->code[0])
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
                                         {NULL, 0, NULL, 0}};
    cli_common_t o = {0};
    cli_subject_t subject = {.n = 0};
    long long tokens = -1;
    int ch, rc;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "s:h", opts, NULL)) != -1) {
        if (ch == 'S' && cli_subject_add(&subject, optarg, "decide"))
            return EX_USAGE_;
        if (ch == 't' && cli_parse_count(optarg, "--tokens", "decide", 1LL << 40, &tokens))
            return EX_USAGE_;
        if (ch != 'S' && ch != 't' && (rc = cli_common_option(ch, &o, USAGE)) != CLI_CONTINUE)
            return rc;
    }
    if (optind != argc || subject.n == 0) {
        fprintf(stderr, "%s%s", subject.n ? "" : "tokentriage decide: --subject is required\n",
                USAGE);
        return EX_USAGE_;
    }
    tt_client_t *c = cli_connect(o.sock, "decide");
    if (!c)
        return EX_UNAVAILABLE_;
    static tt_response_t r;
    return cli_answer(c, tt_decide(c, subject.pairs, subject.n, tokens, &r), &r, &o, "decide",
                      print_decision);
}

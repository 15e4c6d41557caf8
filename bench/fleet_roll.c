/*
 * fleet_roll: the rolling restart of tests/share/roll.h at any size, for the figures in
 * docs/share.md (64 and 128 replicas are too heavy for the suite). Real `tokentriage serve`
 * replicas on loopback; one line of figures per check, as the test prints them.
 *
 *   fleet_roll [--replicas N] [--seeds K] [--step-ms MS] [--down-ms MS] [--steady-ms MS]
 *              [--settle-ms MS] [--burst B] [--amount A] [--ask X] [--no-roll] [--verbose]
 *
 * Defaults: 32 replicas, 3 static seeds, one restart a second, each down 3 s, 15 s of load
 * before and after, 3200 a minute with burst 64, each replica asked 4.8x its share. --no-roll
 * loads the fleet for steady + settle and restarts nothing (what a burst needs at N). Exits 0
 * when every window was within the disclosed bound and no islands were seen, 1 otherwise, 2
 * when the run could not be made. Built with the tests (build/tests/share/fleet_roll).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roll.h"

static int usage(void)
{
    fprintf(stderr, "usage: fleet_roll [--replicas N] [--seeds K] [--step-ms MS] [--down-ms MS] "
                    "[--steady-ms MS] [--settle-ms MS] [--burst B] [--amount A] [--ask X] "
                    "[--no-roll] [--verbose]\n");
    return 64;
}

int main(int argc, char **argv)
{
    roll_options_t o = {.n = 32,
                        .seeds = 3,
                        .step_ms = 1000,
                        .down_ms = 3000,
                        .steady_ms = 15000,
                        .settle_ms = 15000,
                        .poll_ms = 500,
                        .ask = 4.8};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--no-roll") == 0)
            o.no_roll = true;
        else if (strcmp(a, "--verbose") == 0)
            o.verbose = true;
        else if (!v)
            return usage();
        else if (strcmp(a, "--replicas") == 0)
            o.n = atoi(v), i++;
        else if (strcmp(a, "--seeds") == 0)
            o.seeds = atoi(v), i++;
        else if (strcmp(a, "--step-ms") == 0)
            o.step_ms = atoi(v), i++;
        else if (strcmp(a, "--down-ms") == 0)
            o.down_ms = atoi(v), i++;
        else if (strcmp(a, "--steady-ms") == 0)
            o.steady_ms = atoi(v), i++;
        else if (strcmp(a, "--settle-ms") == 0)
            o.settle_ms = atoi(v), i++;
        else if (strcmp(a, "--burst") == 0)
            o.burst = atoll(v), i++;
        else if (strcmp(a, "--amount") == 0)
            o.amount = atoll(v), i++;
        else if (strcmp(a, "--ask") == 0)
            o.ask = atof(v), i++;
        else
            return usage();
    }
    if (o.n < 2 || o.n > 128 || o.seeds < 0 || o.seeds > o.n || o.step_ms < 1 || o.down_ms < 0 ||
        o.ask <= 0 || o.burst < 0 || o.amount < 0)
        return usage();
    roll_result_t r;
    if (roll_run(&o, &r) != 0) {
        fprintf(stderr, "fleet_roll: %s\n", r.failed);
        return 2;
    }
    roll_report("fleet_roll", &o, &r);
    return r.island_rounds || r.win[0].violations || r.win[1].violations ? 1 : 0;
}

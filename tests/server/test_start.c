/*
 * A start that cannot complete says why before it exits (issue 16): tt_fault_daemon with one
 * of the daemon's own parts made to fail (fault_daemon.c), watched as an operator would see it,
 * through the exit status and the log.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "daemon.h"

#define TEAM_RPM                                                                                   \
    "    - id: team_rpm\n      attach: { level: team }\n      type: rpm\n      amount: 300\n"      \
    "      period: 1m\n"

#define FAULT_DAEMON TT_BINARY_DIR "/tests/server/tt_fault_daemon"

static tt_daemon_t d;

static void cleanup(void)
{
    tt_daemon_stop(&d);
}

TestSuite(start, .fini = cleanup, .timeout = 60);

Test(start, a_request_handler_that_cannot_be_made_is_logged_with_its_exit)
{
    setenv("TT_FAULT", "dispatch", 1);
    cr_assert_eq(tt_daemon_start_binary(&d, FAULT_DAEMON, TEAM_RPM, NULL), -1,
                 "the daemon served without a handler");
    cr_assert_eq(d.exit_status, 70, "EX_SOFTWARE");
    cr_assert(tt_daemon_log_has(&d, "level=error", 0), "it exited without an error logged");
    cr_assert(tt_daemon_log_has(&d, "request handler: out of memory", 0), "the log says not why");
}

/* The reservation and lease ids are sealed under a key drawn from the kernel; without random
 * bytes the daemon once fell back to pid x constant XOR time, which a local client can guess
 * (issue 34 item 10). It must refuse to start, and say why. */
Test(start, no_random_bytes_from_the_kernel_refuses_the_start_and_says_why)
{
    setenv("TT_FAULT", "getrandom", 1);
    cr_assert_eq(tt_daemon_start_binary(&d, FAULT_DAEMON, TEAM_RPM, NULL), -1,
                 "the daemon served with a guessable key");
    cr_assert_eq(d.exit_status, 71, "EX_OSERR");
    cr_assert(tt_daemon_log_has(&d, "level=error", 0), "it exited without an error logged");
    cr_assert(tt_daemon_log_has(&d, "getrandom: Function not implemented", 0),
              "the log says not why");
}

/* A signal during the draw is no failure: the daemon draws again and serves. */
Test(start, an_interrupted_draw_of_random_bytes_is_retried)
{
    setenv("TT_FAULT", "getrandom_eintr", 1);
    cr_assert_eq(tt_daemon_start_binary(&d, FAULT_DAEMON, TEAM_RPM, NULL), 0);
    cr_assert_not(tt_daemon_log_has(&d, "getrandom", 0), "an interrupted draw was logged");
}

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

/*
 * The tokentriage binary (every object of it, tt_cmd) with one fault injected, named by
 * $TT_FAULT, at link time (-Wl,--wrap). Without $TT_FAULT every call goes through.
 *
 *   sigterm_after_fork  the process is sent SIGTERM the moment fork returns in the parent: a
 *                       supervisor's stop that reaches `acquire` as COMMAND starts, before
 *                       acquire holds COMMAND's pid
 *
 * test_cli.c shows what acquire must do then.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

pid_t __real_fork(void);
pid_t __wrap_fork(void);
pid_t __wrap_fork(void)
{
    pid_t pid = __real_fork();
    const char *f = getenv("TT_FAULT");
    if (pid > 0 && f && strcmp(f, "sigterm_after_fork") == 0)
        kill(getpid(), SIGTERM);
    return pid;
}

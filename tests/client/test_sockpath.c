/* Where clients and the daemon look for the socket: flag, env, config, default, fallback. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "tokentriage.h"

static char path[256];

static void setup(void)
{
    unsetenv(TT_SOCKET_ENV);
}

TestSuite(sockpath, .init = setup);

Test(sockpath, the_flag_wins_then_the_environment_then_the_config)
{
    setenv(TT_SOCKET_ENV, "/env.sock", 1);
    cr_assert_eq(tt_socket_path(path, sizeof(path), "/flag.sock", "/cfg.sock", 1), 0);
    cr_assert_str_eq(path, "/flag.sock");
    cr_assert_eq(tt_socket_path(path, sizeof(path), NULL, "/cfg.sock", 1), 0);
    cr_assert_str_eq(path, "/env.sock");
    unsetenv(TT_SOCKET_ENV);
    cr_assert_eq(tt_socket_path(path, sizeof(path), "", "/cfg.sock", 1), 0);
    cr_assert_str_eq(path, "/cfg.sock");
}

Test(sockpath, root_serves_on_the_built_in_default)
{
    if (geteuid() != 0 || access("/run", W_OK) != 0)
        cr_skip_test("needs root");
    cr_assert_eq(tt_socket_path(path, sizeof(path), NULL, NULL, 1), 0);
    cr_assert_str_eq(path, TT_DEFAULT_SOCKET);
}

Test(sockpath, a_client_finds_the_fallback_socket_when_the_default_has_none)
{
    struct stat st;
    if (stat(TT_DEFAULT_SOCKET, &st) == 0)
        cr_skip_test("a daemon is serving on the default socket");
    char dir[] = "/tmp/tt-xdg-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    setenv("XDG_RUNTIME_DIR", dir, 1);
    cr_assert_eq(tt_socket_path(path, sizeof(path), NULL, NULL, 0), 0);
    cr_assert_str_eq(path, TT_DEFAULT_SOCKET, "no socket anywhere: name the default");
    /* a daemon that fell back left its socket under XDG_RUNTIME_DIR */
    char sub[300], sock[340];
    snprintf(sub, sizeof(sub), "%s/tokentriage", dir);
    snprintf(sock, sizeof(sock), "%s/tokentriage.sock", sub);
    mkdir(sub, 0700);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, sock, strlen(sock) + 1);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(tt_socket_path(path, sizeof(path), NULL, NULL, 0), 0);
    cr_assert_str_eq(path, sock);
    close(fd);
    unlink(sock);
    rmdir(sub);
    rmdir(dir);
}

Test(sockpath, a_path_that_does_not_fit_is_refused)
{
    cr_assert_eq(tt_socket_path(path, 8, "/a/long/path.sock", NULL, 0), TT_EARG);
}

/*
 * `tokentriage serve -c FILE` whose membership refuses every keyring a reload brings: the
 * daemon is the product's own (srv_daemon_run and all it links); only membership's answer to
 * "can this keyring be applied?" is replaced, at link time (-Wl,--wrap). A keyring file that
 * reads and parses can still be refused by membership (a replica started sealed stays sealed,
 * the core's own checks): test_reload.c shows what a reload must do then (issue 16 defect 3).
 */
#include <stdio.h>
#include <string.h>

#include "daemon.h"
#include "mb.h"

int __wrap_mb_keyring_prepare(const mb_t *mb, const char *path, mb_keyring_t *out, mb_err_t *err);
int __wrap_mb_keyring_prepare(const mb_t *mb, const char *path, mb_keyring_t *out, mb_err_t *err)
{
    (void)mb;
    (void)path;
    out->n = 0;
    snprintf(err->msg, sizeof err->msg, "shared_state.share.keyring_file: refused (test fault)");
    return SWIM_EINVAL;
}

int main(int argc, char **argv)
{
    if (argc != 4 || strcmp(argv[1], "serve") != 0 || strcmp(argv[2], "-c") != 0) {
        fprintf(stderr, "usage: tt_reload_fault serve -c FILE\n");
        return 64;
    }
    srv_daemon_options_t opt = {.config_path = argv[3], .version = "test"};
    return srv_daemon_run(&opt);
}

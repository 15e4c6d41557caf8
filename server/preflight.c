/* See preflight.h. */
#include "preflight.h"

#include <string.h>
#include <sys/socket.h>

#include "gov.h" /* redis/: the store's own readers of its files */
#include "mb.h"
#include "record.h"
#include "srv.h"
#include "state.h"
#include "tokentriage.h"

int srv_socket_resolve(const cfg_config_t *cfg, const char *flag, char *path, size_t size)
{
    /* the config's socket counts only when it differs from the built-in default, so that the
     * default's non-root fallback (tt_socket_path) applies to a config that leaves it be */
    const char *configured =
        strcmp(cfg->server.socket, CFG_DEFAULT_SOCKET) == 0 ? NULL : cfg->server.socket;
    return tt_socket_path(path, size, flag, configured, 1) == 0 ? 0 : -1;
}

typedef struct found {
    cfg_report_t *report;
    int errors;
    bool nomem;
} found_t;

/* A check that failed (rc != 0, err filled): one error finding. */
static void check(found_t *f, int rc, const tt_err_t *err)
{
    if (rc == 0)
        return;
    f->errors++;
    if (cfg_report_add(f->report, false, err->code, err->path, "%s", err->message) != 0)
        f->nomem = true;
}

int srv_preflight(const cfg_config_t *cfg, const char *socket_flag, bool serving,
                  cfg_report_t *report)
{
    found_t f = {.report = report};
    tt_err_t err;
    struct sockaddr_storage ss;
    char path[256];
    if (srv_socket_resolve(cfg, socket_flag, path, sizeof(path)) != 0)
        check(&f, tt_err_set(&err, SRV_ELISTEN, "server.socket", "the socket's path is too long"),
              &err);
    else
        check(&f, srv_socket_check(path, "server.socket", true, &err), &err);
    if (cfg->server.http[0])
        check(&f, mb_want_addr(cfg->server.http, "server.http", &ss, &err), &err);
    if (cfg->server.grpc[0] == '/')
        check(&f, srv_socket_check(cfg->server.grpc, "server.grpc", false, &err), &err);
    const cfg_share_t *sh = &cfg->share;
    if (sh->present) {
        check(&f, mb_want_addr(sh->bind, "shared_state.share.bind", &ss, &err), &err);
        if (sh->advertise[0])
            check(&f, mb_want_addr(sh->advertise, "shared_state.share.advertise", &ss, &err), &err);
    }
    if (sh->present && sh->keyring_file[0]) {
        mb_keyring_t kr;
        check(&f, mb_keyring_read(sh->keyring_file, &kr, &err), &err);
        mb_keyring_wipe(&kr);
    }
    if (cfg->redis.present) { /* the password files and the TLS files, as the store reads them */
        rds_credentials_t cred;
        check(&f, rds_credentials_from_config(&cfg->redis, &cred, &err), &err);
        rds_credentials_wipe(&cred);
        check(&f, rds_tls_check(&cfg->redis, &err), &err);
    }
    if (cfg->server.record.file[0]) /* the recording's directory and key file */
        check(&f, rec_check(&cfg->server.record, &err), &err);
    char detail[200];
    if (!serving && cfg->server.state_dir[0] &&
        st_dir_check(cfg->server.state_dir, detail, sizeof(detail)) != 0 &&
        cfg_report_add(report, true, 0, "server.state_dir",
                       "%s: %s; serve would run without state (docs/state.md)",
                       cfg->server.state_dir, detail) != 0)
        f.nomem = true;
    return f.nomem ? CFG_ENOMEM : f.errors ? CFG_EINVALID : 0;
}

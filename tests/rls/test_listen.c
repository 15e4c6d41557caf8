/* rls_srv_start's refusal: the code of the one error table and the option at fault. */
#include <criterion/criterion.h>
#include <string.h>

#include "listen.h"

Test(rls_listen, an_address_that_cannot_be_listened_on_names_server_grpc)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    rls_srv_t *s;
    tt_err_t err;
    rls_srv_options_t o = {.addr = "not-an-address"};
    cr_assert_eq(rls_srv_start(&s, &loop, &o, &err), TT_ERR_LISTEN);
    cr_assert_eq(err.code, TT_ERR_LISTEN);
    cr_assert_str_eq(err.path, "server.grpc");
    cr_assert(strstr(err.message, "cannot listen on not-an-address: "), "%s", err.message);
    rls_srv_stop(s);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&loop), 0, "every handle closed");
}

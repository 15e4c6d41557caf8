/*
 * A result's start and its failure: the two helpers every entry point of the engine begins and
 * fails with. Below every other file of engine/ (they call down to it, it calls nothing of
 * theirs), so the files of the engine look down to each other without a circle.
 */
#include <stdarg.h>

#include "engine_int.h"

int gov__fail(gov_result_t *out, int code, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tt_err_vset(&out->err, code, path, fmt, ap);
    va_end(ap);
    out->status = code;
    out->admit = false;
    return code;
}

void gov__result_init(gov_result_t *out)
{
    out->status = 0; /* out->err is only written on a failure (gov__fail) */
    out->admit = true;
    out->verdict = GOV_ADMIT;
    out->limit[0] = '\0';
    out->remaining = -1;
    out->retry_after_s = 0;
    out->reset_after_s = 0;
    out->code = NULL;
    out->n_soft_denied = 0;
    out->soft_truncated = false;
    out->n_headers = 0;
    out->disclosed.has_policy = out->disclosed.has_requests = out->disclosed.has_tokens = false;
    out->disclosed.retry_s = -1;
    out->unavailable = false;
    out->settled = 0;
    out->already_settled = false;
    out->lease = 0;
    out->reservation = 0;
    out->limit_amount = out->limit_period_ns = 0;
    out->met = GOV_MET_NONE;
    out->rule_flags = 0;
    out->rule_name[0] = '\0';
}

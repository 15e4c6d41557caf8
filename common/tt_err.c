/* The error table's look-ups and the detail carrier. See tt_err.h. */
#include "tt_err.h"

#include <stdarg.h>
#include <stdio.h>

const char *tt_err_name(int code)
{
    switch (code) {
#define TT_ERR_NAME_(name, value, wire, msg)                                                       \
    case value:                                                                                    \
        return wire;
        TT_ERRNO_MAP(TT_ERR_NAME_)
#undef TT_ERR_NAME_
    default:
        return "error";
    }
}

const char *tt_err_message(int code)
{
    switch (code) {
#define TT_ERR_MSG_(name, value, wire, msg)                                                        \
    case value:                                                                                    \
        return msg;
        TT_ERRNO_MAP(TT_ERR_MSG_)
#undef TT_ERR_MSG_
    default:
        return "unknown error";
    }
}

int tt_err_vset(tt_err_t *err, int code, const char *path, const char *fmt, va_list ap)
{
    if (!err)
        return code;
    err->code = code;
    snprintf(err->path, sizeof(err->path), "%s", path ? path : "");
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    return code;
}

int tt_err_set(tt_err_t *err, int code, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tt_err_vset(err, code, path, fmt, ap);
    va_end(ap);
    return code;
}

const char *tt_err_format(const tt_err_t *err, char *buf, unsigned long size)
{
    if (err->path[0])
        snprintf(buf, size, "%s: %s", err->path, err->message);
    else
        snprintf(buf, size, "%s", err->message);
    return buf;
}

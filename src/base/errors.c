/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include "ratelimit.h"
#include "base/errors.h"

/* One switch per table use: the compiler sees every code the map defines. */
const char *rl_strerror(int err)
{
    switch (err) {
    case 0:
        return "success";
#define RL__STRERROR(name, value, msg) \
    case RL_##name:                   \
        return msg;
        RL_ERRNO_MAP(RL__STRERROR)
#undef RL__STRERROR
    default:
        return "unknown error";
    }
}

const char *rl_err_name(int err)
{
    switch (err) {
    case 0:
        return "RL_OK";
#define RL__ERRNAME(name, value, msg) \
    case RL_##name:                  \
        return "RL_" #name;
        RL_ERRNO_MAP(RL__ERRNAME)
#undef RL__ERRNAME
    default:
        return "RL_EUNKNOWN";
    }
}

int rl__errf(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

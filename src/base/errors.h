/* SPDX-License-Identifier: MIT */
/* Error messages into a caller's buffer, for functions that explain failures. */
#ifndef RL_BASE_ERRORS_H
#define RL_BASE_ERRORS_H
#include <stddef.h>

/* Format a message into err (when errlen > 0) and return code. */
int rl__errf(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif

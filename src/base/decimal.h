/* SPDX-License-Identifier: MIT */
/* Decimal text a stranger may have written (the node registry's records). */
#ifndef RL_DECIMAL_H
#define RL_DECIMAL_H

#include <stddef.h>
#include <stdint.h>

/* A decimal integer of [p, p + n), 0 if it is not one or overflows. */
static inline uint64_t rl__decimal_u64(const char *p, size_t n)
{
    uint64_t v = 0;
    if (n == 0 || n > 20)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return 0;
        uint64_t d = (uint64_t)(p[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return 0;
        v = v * 10 + d;
    }
    return v;
}

#endif

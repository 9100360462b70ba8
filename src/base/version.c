/* SPDX-License-Identifier: MIT */
#include "ratelimit.h"

#define RL__STR2(x) #x
#define RL__STR(x) RL__STR2(x)

const char *rl_version(void)
{
    return RL__STR(RL_VERSION_MAJOR) "." RL__STR(RL_VERSION_MINOR) "." RL__STR(RL_VERSION_PATCH);
}

uint32_t rl_version_hex(void) { return RL_VERSION_HEX; }

/* SPDX-License-Identifier: MIT */
/* Redis key naming (see keys.h). */
#include <inttypes.h>
#include <stdio.h>
#include "redis/keys.h"

unsigned rl__redis_vshard(rl_keyid_t id)
{
    /* fmix64 over both halves: every output bit depends on every input bit. */
    uint64_t x = id.lo ^ (id.hi * UINT64_C(0x9e3779b97f4a7c15));
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return (unsigned)(x % RL_VSHARDS);
}

int rl__redis_key_name(const rl_keyhash_t *kh, const char *prefix, const char *limit,
                       rl_keyid_t id, char *buf, size_t cap)
{
    uint64_t words[2] = {id.lo, id.hi};
    const uint64_t *k = kh->name;
    uint64_t k2[2] = {k[1], k[0]};
    uint64_t h1 = rl__siphash24(k, words, 16), h2 = rl__siphash24(k2, words, 16);
    return snprintf(buf, cap, "{%s:v1:%s:%u}:k:%016" PRIx64 "%016" PRIx64, prefix, limit,
                    rl__redis_vshard(id), h1, h2);
}

/* SPDX-License-Identifier: MIT */
/* Redis key naming (see keys.h). */
#include <inttypes.h>
#include <stdio.h>
#include "redis/keys.h"

/* The name PRF of a key identity: 128 bits, as 32 hex digits. */
static void key_prf(const rl_keyhash_t *kh, rl_keyid_t id, uint64_t *h1, uint64_t *h2)
{
    uint64_t words[2] = {id.lo, id.hi};
    const uint64_t *k = kh->name;
    uint64_t k2[2] = {k[1], k[0]};
    *h1 = rl__siphash24(k, words, 16);
    *h2 = rl__siphash24(k2, words, 16);
}

int rl__redis_quota_tag(const rl_keyhash_t *kh, const char *prefix, const char *quota,
                        rl_keyid_t id, char *buf, size_t cap)
{
    uint64_t h1, h2;
    key_prf(kh, id, &h1, &h2);
    return snprintf(buf, cap, "{%s:q1:%s:%016" PRIx64 "%016" PRIx64 "}", prefix, quota, h1, h2);
}

void rl__redis_quota_rid(const rl_keyhash_t *kh, const void *rid, size_t len, uint64_t out[2])
{
    const uint64_t *k = kh->name;
    /* Other key words than key_prf's: an id's name never equals a key's. */
    uint64_t k1[2] = {k[0] ^ UINT64_C(0x71756f7461726964), k[1]};
    uint64_t k2[2] = {k[1], k[0] ^ UINT64_C(0x71756f7461726964)};
    out[0] = rl__siphash24(k1, rid, len);
    out[1] = rl__siphash24(k2, rid, len);
}

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

uint64_t rl__redis_inflight_digest(const rl_keyhash_t *kh, rl_keyid_t id)
{
    uint64_t words[2] = {id.lo, id.hi};
    const uint64_t *k = kh->name;
    /* Other key words than key_prf's: a holders' set never shares a name's hex. */
    uint64_t k1[2] = {k[0] ^ UINT64_C(0x696e666c69676874), k[1]};
    return rl__siphash24(k1, words, 16);
}

int rl__redis_inflight_key(const char *prefix, const char *limit, uint64_t digest, char *buf,
                           size_t cap)
{
    return snprintf(buf, cap, "{%s:i1:%s:%016" PRIx64 "}", prefix, limit, digest);
}

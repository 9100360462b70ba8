/* SPDX-License-Identifier: MIT */
#include <string.h>
#include "local/keyhash.h"

static inline uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

#define SIPROUND(v0, v1, v2, v3) \
    do {                         \
        v0 += v1;                \
        v1 = rotl(v1, 13);       \
        v1 ^= v0;                \
        v0 = rotl(v0, 32);       \
        v2 += v3;                \
        v3 = rotl(v3, 16);       \
        v3 ^= v2;                \
        v0 += v3;                \
        v3 = rotl(v3, 21);       \
        v3 ^= v0;                \
        v2 += v1;                \
        v1 = rotl(v1, 17);       \
        v1 ^= v2;                \
        v2 = rotl(v2, 32);       \
    } while (0)

uint64_t rl__siphash24(const uint64_t key[2], const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t v0 = UINT64_C(0x736f6d6570736575) ^ key[0];
    uint64_t v1 = UINT64_C(0x646f72616e646f6d) ^ key[1];
    uint64_t v2 = UINT64_C(0x6c7967656e657261) ^ key[0];
    uint64_t v3 = UINT64_C(0x7465646279746573) ^ key[1];
    size_t full = len & ~(size_t)7;
    for (size_t i = 0; i < full; i += 8) {
        uint64_t m = rl__load_le64(p + i);
        v3 ^= m;
        SIPROUND(v0, v1, v2, v3);
        SIPROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    uint64_t b = (uint64_t)(len & 0xff) << 56; /* SipHash: the length mod 256 */
    for (size_t i = 0; i < (len & 7); i++)
        b |= (uint64_t)p[full + i] << (8 * i);
    v3 ^= b;
    SIPROUND(v0, v1, v2, v3);
    SIPROUND(v0, v1, v2, v3);
    v0 ^= b;
    v2 ^= 0xff;
    for (int i = 0; i < 4; i++)
        SIPROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}

void rl__keyhash_init(rl_keyhash_t *kh, const void *secret, size_t len)
{
    /* Condense the secret into a SipHash key (two independent PRF outputs),
     * then expand it in counter mode: the NH key is as unpredictable as the
     * secret, and identical on every node that shares it. */
    static const uint64_t zero[2] = {0, 0};
    uint64_t master[2];
    master[0] = rl__siphash24(zero, secret, len);
    uint64_t k1[2] = {UINT64_C(0x5241544c494d4954), master[0]};
    master[1] = rl__siphash24(k1, secret, len);
    uint64_t ctr[2];
    uint64_t *out[] = {kh->nh, kh->mix, kh->name, &kh->fingerprint};
    size_t counts[] = {RL_NH_WORDS, 2, 2, 1};
    for (size_t d = 0; d < 4; d++) {
        for (size_t i = 0; i < counts[d]; i++) {
            ctr[0] = d;
            ctr[1] = i;
            out[d][i] = rl__siphash24(master, ctr, sizeof ctr);
        }
    }
}

rl_keyid_t rl__keyhash_general(const rl_keyhash_t *kh, const void *key, size_t len)
{
    const unsigned char *p = key;
    const uint64_t *k = kh->nh;
    unsigned __int128 acc = 0;
    size_t full = len / 16;
    for (size_t i = 0; i < full; i++, p += 16, k += 2)
        acc += (unsigned __int128)(rl__load_le64(p) + k[0]) * (rl__load_le64(p + 8) + k[1]);
    size_t rest = len % 16;
    if (rest != 0) {
        uint64_t lo, hi;
        rl__load_tail(key, len, p, rest, &lo, &hi);
        acc += (unsigned __int128)(lo + k[0]) * (hi + k[1]);
        k += 2;
    }
    /* The length block makes keys that differ only by trailing zero bytes,
     * or by length, distinct. */
    acc += (unsigned __int128)((uint64_t)len + k[0]) * (UINT64_C(0x9e3779b97f4a7c15) + k[1]);
    rl_keyid_t id = {(uint64_t)acc, (uint64_t)(acc >> 64)};
    return id;
}

/* SPDX-License-Identifier: MIT */
/*
 * Key identity: a keyed 128-bit hash of the key bytes.
 *
 * Keys are attacker-controlled, so the identity must not collide by the
 * attacker's choice. XXH3 (64 and 128) with a secret has crafted pairs that
 * collide with probability ~2^-27 over the secret (xxHash #1127), too high
 * for "two tenants never share a bucket". We use NH (the UMAC inner hash):
 *   NH_K(M) = sum_i (m[2i] + k[2i]) * (m[2i+1] + k[2i+1])  mod 2^128
 * over 64-bit little-endian words, with the key length in a final block.
 * For any two distinct keys fixed before K is drawn, Pr[NH_K(M) = NH_K(M')]
 * <= 2^-64 (each product of two 64-bit values is exact in 128 bits, and a
 * differing block leaves at most 2^64 of the 2^128 choices of its key words
 * colliding). That is the risk we state: 2^-64 per crafted pair, so ~2^63
 * tries per expected collision, and no structured family beats it.
 *
 * NH is linear-ish, so its raw output must not leak: it never leaves the
 * process (Redis names use a PRF of it), and the table position and tag come
 * from a keyed mix of it. The NH key is derived from the instance secret with
 * SipHash-2-4 in counter mode, so every node of a fleet sharing a secret
 * computes the same identity.
 */
#ifndef RL_KEYHASH_H
#define RL_KEYHASH_H

#include <stddef.h>
#include <stdint.h>
#include "ratelimit.h"

/* Words of NH key: one pair per 16-byte block of the longest key, plus the
 * length block. */
#define RL_NH_WORDS (2 * (RL_MAX_KEY_LEN / 16) + 2)

typedef struct rl_keyhash {
    uint64_t nh[RL_NH_WORDS];
    uint64_t mix[2];  /* keys the position/tag mix */
    uint64_t name[2]; /* SipHash key for names that leave the process */
    /* The secret's fingerprint, published in the node registry so nodes
     * with different secrets (a split fleet) see each other: one more
     * output of the same PRF, so it reveals nothing of the other keys nor
     * of the secret beyond what any keyed name in Redis already does. */
    uint64_t fingerprint;
} rl_keyhash_t;

typedef struct rl_keyid {
    uint64_t lo, hi;
} rl_keyid_t;

/* Derive every key from a secret of >= 16 bytes. */
void rl__keyhash_init(rl_keyhash_t *kh, const void *secret, size_t len);

/* SipHash-2-4 with a 128-bit key; used off the hot path only. */
uint64_t rl__siphash24(const uint64_t key[2], const void *data, size_t len);

static inline uint64_t rl__load_le64(const unsigned char *p)
{
    uint64_t v;
    __builtin_memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint64_t rl__load_le32(const unsigned char *p)
{
    uint32_t v;
    __builtin_memcpy(&v, p, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

/*
 * The last rest (1..15) bytes of a key, at p, as two little-endian words
 * zero-padded to 16 bytes, read without a byte copy into a stack buffer (a
 * store-forwarding stall on every check): overlapping loads that never leave
 * [key, key + len), shifted so the bytes before p fall off.
 */
static inline void rl__load_tail(const void *key, size_t len, const unsigned char *p, size_t rest,
                                 uint64_t *lo, uint64_t *hi)
{
    if (rest > 8) {
        *lo = rl__load_le64(p);
        *hi = rl__load_le64(p + rest - 8) >> (8 * (16 - rest));
    } else if (rest == 8) {
        *lo = rl__load_le64(p);
        *hi = 0;
    } else if (len >= 8) { /* rest 1..7, with 8 key bytes ending at p + rest */
        *lo = rl__load_le64(p + rest - 8) >> (8 * (8 - rest));
        *hi = 0;
    } else if (rest >= 4) { /* a 4..7-byte key: two overlapping 32-bit loads */
        *lo = rl__load_le32(p) | (rl__load_le32(p + rest - 4) << (8 * (rest - 4)));
        *hi = 0;
    } else { /* a 1..3-byte key */
        *lo = (uint64_t)p[0] | ((uint64_t)p[rest / 2] << (8 * (rest / 2))) |
              ((uint64_t)p[rest - 1] << (8 * (rest - 1)));
        *hi = 0;
    }
    (void)key;
}

/* NH of key[0..len), len in 0..RL_MAX_KEY_LEN: the definition, a loop over
 * the whole blocks, then the tail and the length block. Out of line; the
 * check path reaches it only for a key longer than one block. */
rl_keyid_t rl__keyhash_general(const rl_keyhash_t *kh, const void *key, size_t len);

/*
 * The same NH, bit for bit (tests/test_keyhash.c compares the two on every
 * length), with the one-block keys most traffic has inline: a key of 1..16
 * bytes is one data block, zero-padded, and the length block, both with
 * constant key words, so it is two multiplies and no loop. Longer keys, and
 * the empty one, take the general form.
 */
static inline __attribute__((always_inline)) rl_keyid_t rl__keyhash(const rl_keyhash_t *kh,
                                                                    const void *key, size_t len)
{
    if (__builtin_expect(len - 1 >= 16, 0))
        return rl__keyhash_general(kh, key, len);
    const unsigned char *p = key;
    uint64_t lo, hi = 0;
    if (len > 8) { /* 9..16: as rl__load_tail, a 16-byte block read whole */
        lo = rl__load_le64(p);
        hi = rl__load_le64(p + len - 8) >> (8 * (16 - len));
    } else {
        rl__load_tail(key, len, p, len, &lo, &hi);
    }
    const uint64_t *k = kh->nh;
    unsigned __int128 acc = (unsigned __int128)(lo + k[0]) * (hi + k[1]);
    acc += (unsigned __int128)((uint64_t)len + k[2]) * (UINT64_C(0x9e3779b97f4a7c15) + k[3]);
    rl_keyid_t id = {(uint64_t)acc, (uint64_t)(acc >> 64)};
    return id;
}

/*
 * A well-distributed 64-bit value from an identity: position in its high
 * bits via multiply-shift, tag in its low 32 bits. One keyed 64x64->128
 * multiply of the identity's halves, each masked by a secret word (the salt,
 * per limit, added to one), folded high into low. Keyed against flooding:
 * the identity is itself keyed and never leaves the process, and an
 * attacker who could steer it would still have to meet two secret words to
 * pick a home. Process-local: only where a key lives and its tag depend on
 * it, never an identity or a name.
 */
static inline uint64_t rl__keyid_mix(const rl_keyhash_t *kh, rl_keyid_t id, uint64_t salt)
{
    unsigned __int128 m = (unsigned __int128)((id.lo ^ kh->mix[0]) + salt) * (id.hi ^ kh->mix[1]);
    return (uint64_t)m ^ (uint64_t)(m >> 64);
}

#endif

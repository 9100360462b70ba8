/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: rl_headers, the snprintf-style renderer of a decision.
 *
 * Input layout: a decision's fields taken from the input (any values,
 * UINT64_MAX included), a struct size (below, at and above the sizes this
 * library knows), a policy name of up to RL_NAME_MAX - 1 arbitrary bytes
 * (quotes, CR/LF, non-ASCII; not NUL-terminated when it fills the buffer),
 * and a buffer length. The decision lives in a heap block of exactly its
 * declared size and the policy in one of exactly its length, so ASan flags
 * any read past either; the output buffer is exactly `len` bytes.
 *
 * Checks (the snprintf contract in ratelimit.h): the return value is the
 * same for len 0 with a NULL buffer and for a buffer big enough; the output
 * is NUL-terminated within len and is a prefix of the full text; no header
 * line can be injected (every CR is followed by LF and begins a line end).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "ratelimit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MIN_SIZE offsetof(rl_decision_t, window_ms)

typedef struct rd {
    const uint8_t *p;
    size_t n;
} rd_t;

static uint64_t take(rd_t *r, size_t bytes)
{
    uint64_t v = 0;
    for (size_t i = 0; i < bytes && r->n > 0; i++, r->p++, r->n--)
        v |= (uint64_t)*r->p << (8 * i);
    return v;
}

/* A field value: small, edge, or raw 64 bits, so both ends get exercised. */
static uint64_t value(rd_t *r)
{
    unsigned sel = (unsigned)take(r, 1);
    switch (sel % 6) {
    case 0: return 0;
    case 1: return UINT64_MAX;
    case 2: return UINT64_C(999999999999999) + (sel >> 3); /* sf-integer edge */
    case 3: return take(r, 2);
    default: return take(r, 8);
    }
}

static void check_text(const char *s, size_t n)
{
    /* Header injection: a CR or LF only ever appears as a CRLF line end. */
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\r' && (i + 1 >= n || s[i + 1] != '\n'))
            abort();
        if (s[i] == '\n' && (i == 0 || s[i - 1] != '\r'))
            abort();
        if (s[i] == '\0')
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rd_t r = {data, size};
    rl_decision_t full;
    memset(&full, 0, sizeof full);
    full.allowed = (int32_t)take(&r, 4);
    full.limit = value(&r);
    full.remaining = value(&r);
    full.reset_ms = value(&r);
    full.retry_after_ms = value(&r);
    full.flags = (uint32_t)take(&r, 4);
    full.window_ms = value(&r);
    full.burst = value(&r);

    /* Declared size: too small, the minimum, the current one, or larger. */
    unsigned ssel = (unsigned)take(&r, 1);
    size_t dsize;
    switch (ssel % 5) {
    case 0: dsize = ssel % MIN_SIZE; break;
    case 1: dsize = MIN_SIZE; break;
    case 2: dsize = MIN_SIZE + ssel % (sizeof full - MIN_SIZE); break;
    case 3: dsize = sizeof full; break;
    default: dsize = sizeof full + ssel % 64; break;
    }
    if (dsize < sizeof full.size)
        dsize = sizeof full.size; /* the size field itself must be readable */

    /* The policy: NULL, or 0..63 input bytes with no terminating NUL when
     * it is 63 long (the renderer reads at most RL_NAME_MAX - 1 bytes). */
    unsigned psel = (unsigned)take(&r, 1);
    char *policy = NULL;
    if (psel % 8 != 0) {
        size_t plen = (size_t)take(&r, 1) % RL_NAME_MAX;
        size_t have = plen < r.n ? plen : r.n;
        size_t alloc = have == RL_NAME_MAX - 1 ? have : have + 1;
        policy = malloc(alloc);
        if (policy == NULL)
            return 0;
        memcpy(policy, r.p, have);
        if (alloc > have)
            policy[have] = '\0';
        r.p += have;
        r.n -= have;
    }
    full.policy = policy;

    unsigned char *blk = malloc(dsize);
    if (blk == NULL) {
        free(policy);
        return 0;
    }
    memset(blk, (int)(take(&r, 1) & 0xff), dsize); /* whatever a newer tail holds */
    full.size = dsize;
    memcpy(blk, &full, dsize < sizeof full ? dsize : sizeof full);
    const rl_decision_t *d = (const rl_decision_t *)(void *)blk;

    size_t len = (size_t)take(&r, 2) % 700;

    int need = rl_headers(d, NULL, 0);
    if (dsize < MIN_SIZE) {
        if (need != RL_ESIZE)
            abort();
        goto out;
    }
    if (need < 0 || need > 517)
        abort();
    if (rl_headers(d, NULL, 1) != RL_EINVAL || rl_headers(NULL, NULL, 0) != RL_EINVAL)
        abort();

    char *big = malloc((size_t)need + 1);
    if (big == NULL)
        goto out;
    if (rl_headers(d, big, (size_t)need + 1) != need || big[need] != '\0')
        abort();
    check_text(big, (size_t)need);

    char *small = malloc(len ? len : 1);
    if (small == NULL) {
        free(big);
        goto out;
    }
    if (rl_headers(d, len ? small : NULL, len) != need)
        abort();
    if (len > 0) {
        size_t k = (size_t)need < len ? (size_t)need : len - 1;
        if (small[k] != '\0' || memcmp(small, big, k) != 0)
            abort();
    }
    free(small);
    free(big);
out:
    free(blk);
    free(policy);
    return 0;
}

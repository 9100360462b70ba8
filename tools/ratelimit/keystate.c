/* SPDX-License-Identifier: MIT */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "keystate.h"
#include "sync/share.h"

void ks_init(ks_key_t *k) { memset(k, 0, sizeof *k); }

void ks_free(ks_key_t *k)
{
    free(k->nodes);
    memset(k, 0, sizeof *k);
}

/* A value as the script stored it: digits, or an exponent form. */
static int parse_num(const char *v, size_t n, uint64_t *out)
{
    char buf[64];
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, v, n);
    buf[n] = '\0';
    size_t digits = strspn(buf, "0123456789");
    if (digits == n && n <= 19) {
        *out = strtoull(buf, NULL, 10);
        return 0;
    }
    char *end;
    double d = strtod(buf, &end);
    if (*end != '\0' || !isfinite(d) || d < 0 || d >= 18446744073709551616.0)
        return -1;
    *out = (uint64_t)llround(d);
    return 0;
}

static ks_node_t *node_for(ks_key_t *k, const char *inc, size_t len)
{
    for (size_t i = 0; i < k->n; i++)
        if (strlen(k->nodes[i].inc) == len && memcmp(k->nodes[i].inc, inc, len) == 0)
            return &k->nodes[i];
    if (k->n == k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 8;
        ks_node_t *grown = realloc(k->nodes, cap * sizeof *grown);
        if (grown == NULL)
            return NULL;
        k->nodes = grown;
        k->cap = cap;
    }
    ks_node_t *n = &k->nodes[k->n++];
    memset(n, 0, sizeof *n);
    memcpy(n->inc, inc, len);
    n->inc[len] = '\0';
    return n;
}

/* The bucket's fields (x + one letter): 1 if field is one, folded in (or
 * counted malformed), else 0. xn may be negative. */
static int add_bucket(ks_key_t *k, const char *field, size_t flen, const char *value,
                      size_t vlen)
{
    static const char letters[] = "nlrfc";
    const char *at = flen == 2 && field[0] == 'x' && field[1] != '\0'
                         ? strchr(letters, field[1]) : NULL;
    if (at == NULL)
        return 0;
    int neg = vlen > 1 && value[0] == '-' && at == letters;
    uint64_t v;
    if (parse_num(value + neg, vlen - (size_t)neg, &v) != 0 || (neg && v > INT64_MAX)) {
        k->malformed++;
        return 1;
    }
    static const unsigned bits[] = {KS_XN, KS_XL, KS_XR, KS_XF, KS_XC};
    uint64_t *slot[] = {NULL, &k->xl, &k->xr, &k->xf, &k->xc};
    k->have |= bits[at - letters];
    if (at == letters)
        k->xn = neg ? -(int64_t)v : (int64_t)(v > INT64_MAX ? INT64_MAX : v);
    else
        *slot[at - letters] = v;
    return 1;
}

int ks_add(ks_key_t *k, const char *field, size_t flen, const char *value, size_t vlen)
{
    uint64_t v = 0;
    if (add_bucket(k, field, flen, value, vlen))
        return 0;
    int ok = parse_num(value, vlen, &v) == 0;
    const char *bar = memchr(field, '|', flen);
    if (bar == NULL) {
        /* The key's own fields: a single letter. */
        static const char own[] = "atckulngh";
        const char *at = flen == 1 && field[0] != '\0' ? strchr(own, field[0]) : NULL;
        if (at == NULL || !ok) {
            k->malformed++;
            return 0;
        }
        static const unsigned bits[] = {KS_A, KS_T, KS_C, KS_K, KS_U, KS_L, KS_N, KS_G, KS_H};
        uint64_t *slot[] = {&k->a, &k->t, &k->c, &k->k, &k->u, &k->l, &k->extra,
                            &k->hold_until, &k->hold_nodes};
        k->have |= bits[at - own];
        *slot[at - own] = v;
        return 0;
    }
    size_t ilen = (size_t)(bar - field);
    const char *what = bar + 1;
    size_t wlen = flen - ilen - 1;
    static const char letters[] = "eaodrtxqb";
    const char *at = wlen == 1 ? strchr(letters, what[0]) : NULL;
    if (at == NULL || what[0] == '\0' || !ok || ilen == 0 || ilen >= KS_INC_MAX) {
        k->malformed++;
        return 0;
    }
    ks_node_t *n = node_for(k, field, ilen);
    if (n == NULL)
        return -1;
    int idx = (int)(at - letters);
    uint64_t *slot[] = {&n->e, &n->a, &n->o, &n->d, &n->r, &n->t, &n->x, &n->q, &n->b};
    *slot[idx] = v;
    n->have |= 1u << idx;
    return 0;
}

static int cmp_node(const void *a, const void *b)
{
    return strcmp(((const ks_node_t *)a)->inc, ((const ks_node_t *)b)->inc);
}

void ks_finish(ks_key_t *k)
{
    if (k->n > 1)
        qsort(k->nodes, k->n, sizeof *k->nodes, cmp_node);
}

int ks_family(const ks_key_t *k)
{
    if (!(k->have & KS_XN))
        return KS_GLOBAL;
    return k->n > 0 ? KS_TIERED : KS_EXACT;
}

int64_t ks_bucket_now(const ks_key_t *k, uint64_t rate, uint64_t period_us, uint64_t burst,
                      uint64_t now_us, uint64_t *full_us)
{
    /* exact.lua's arithmetic, in 128 bits (its values stay below 2^53). */
    __int128 tokens = k->xn, b = (__int128)burst, per = (__int128)period_us;
    __int128 rem = (__int128)k->xr;
    uint64_t last = k->xl, now = now_us > last ? now_us : last;
    if (tokens >= b) {
        tokens = b;
        rem = 0;
    } else {
        __int128 acc = (__int128)(now - last) * (__int128)rate + rem;
        if (acc >= (b - tokens) * per) {
            tokens = b;
            rem = 0;
        } else {
            tokens += acc / per;
            rem = acc % per;
        }
    }
    __int128 full = 0;
    if (tokens < b && rate > 0)
        full = ((b - tokens) * per - rem + (__int128)rate - 1) / (__int128)rate;
    *full_us = full > (__int128)UINT64_MAX ? UINT64_MAX : (uint64_t)full;
    return tokens < 0 ? 0 : (int64_t)tokens;
}

uint64_t ks_now(const ks_key_t *k, uint64_t redis_now_ms)
{
    /* report.lua: now = max(TIME, the key's t). */
    return (k->have & KS_T) && k->t > redis_now_ms ? k->t : redis_now_ms;
}

int ks_node_state(const ks_node_t *n, uint64_t now)
{
    if (!(n->have & KS_X))
        return KS_LEFT;
    return n->x < now ? KS_STALE : KS_LIVE;
}

uint64_t ks_live_admitted_q(const ks_key_t *k, uint64_t now)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < k->n; i++)
        if (ks_node_state(&k->nodes[i], now) == KS_LIVE)
            sum += k->nodes[i].r;
    return sum;
}

uint64_t ks_live_demand_q(const ks_key_t *k, uint64_t now)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < k->n; i++)
        if (ks_node_state(&k->nodes[i], now) == KS_LIVE)
            sum += k->nodes[i].d;
    return sum;
}

int ks_shares(const ks_key_t *k, uint64_t now, uint64_t burst, uint32_t *q, uint32_t *tokens)
{
    size_t live = 0;
    for (size_t i = 0; i < k->n; i++) {
        q[i] = tokens[i] = 0;
        live += ks_node_state(&k->nodes[i], now) == KS_LIVE;
    }
    if (live == 0)
        return 0;
    if (live > RL_SHARE_MAX_NODES)
        return -1;
    uint32_t *demand = malloc(live * sizeof *demand);
    uint32_t *lq = malloc(live * sizeof *lq);
    uint32_t *lt = malloc(live * sizeof *lt);
    int rc = -1;
    if (demand != NULL && lq != NULL && lt != NULL) {
        size_t j = 0;
        for (size_t i = 0; i < k->n; i++)
            if (ks_node_state(&k->nodes[i], now) == KS_LIVE)
                demand[j++] = k->nodes[i].d > RL_SHARE_ONE ? RL_SHARE_ONE : (uint32_t)k->nodes[i].d;
        /* As the round sends them (src/sync/calls.c, send_call), and as
         * report.lua derives the over-consumption. */
        rl_share_params_t p;
        rl__share_params_init(&p);
        p.burst = burst > UINT32_MAX ? UINT32_MAX : (uint32_t)burst;
        p.reserve_q = RL_SHARE_RESERVE_DEFAULT;
        p.gain_q16 = RL_SHARE_GAIN_DEFAULT;
        p.max_cut_q = RL_SHARE_MAX_CUT_DEFAULT;
        uint64_t over = ks_live_admitted_q(k, now);
        over = over > RL_SHARE_ONE ? over - RL_SHARE_ONE : 0;
        p.over_q = over > UINT32_MAX ? UINT32_MAX : (uint32_t)over;
        if (rl__share_compute(&p, demand, live, lq, lt) == 0) {
            j = 0;
            for (size_t i = 0; i < k->n; i++)
                if (ks_node_state(&k->nodes[i], now) == KS_LIVE) {
                    q[i] = lq[j];
                    tokens[i] = lt[j];
                    j++;
                }
            rc = (int)live;
        }
    }
    free(demand);
    free(lq);
    free(lt);
    return rc;
}

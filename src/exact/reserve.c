/* SPDX-License-Identifier: MIT */
/* Reservations of exact and tiered keys in Redis (see exact/reserve.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "exact/reserve.h"
#include "redis/caller.h"
#include "redis/reply.h"

enum { NARGS = 9 };

typedef struct rsv_args {
    char key[2][200];
    char num[NARGS][24];
    const char *argv[2 + NARGS];
    size_t argl[2 + NARGS];
    rl_redis_call_t call;
} rsv_args_t;

/* The bucket's TTL, exact.c's rule: the time to refill a whole burst, and
 * at least 1 s. */
static uint64_t bucket_ttl_ms(const rl_exact_req_t *r)
{
    unsigned __int128 t = ((unsigned __int128)r->burst * r->period_ms + r->rate_count - 1) /
                          r->rate_count;
    uint64_t ms = t > UINT64_C(1) << 40 ? UINT64_C(1) << 40 : (uint64_t)t;
    return ms < 1000 ? 1000 : ms + 1000;
}

/* The deepest debt reserve.lua may write: (burst + debt) x period_us + rate
 * stays below 2^53 (every value exact in Lua's doubles), and 2^31 tokens. */
static uint64_t debt_max(const rl_exact_req_t *r)
{
    uint64_t per = r->period_ms * 1000u;
    uint64_t lim = ((UINT64_C(1) << 53) - r->rate_count) / per;
    uint64_t d = lim > r->burst + 1 ? lim - r->burst - 1 : 0;
    return d < (UINT64_C(1) << 31) ? d : UINT64_C(1) << 31;
}

static void make_args(rl_exact_t *x, const rl_exact_rsv_t *r, rsv_args_t *a)
{
    int n = rl__exact_key(x, r->b.limit, r->b.id, a->key[0], sizeof a->key[0]);
    size_t l0 = n > 0 && (size_t)n < sizeof a->key[0] ? (size_t)n : strlen(a->key[0]);
    int m = snprintf(a->key[1], sizeof a->key[1], "%s:r:%016" PRIx64 "%016" PRIx64, a->key[0],
                     r->rid[0], r->rid[1]);
    a->argv[0] = a->key[0];
    a->argl[0] = l0;
    a->argv[1] = a->key[1];
    a->argl[1] = m > 0 && (size_t)m < sizeof a->key[1] ? (size_t)m : strlen(a->key[1]);
    uint64_t now = rl__exact_now_us(x);
    uint64_t v[NARGS] = {0,
                         r->b.cost,
                         r->b.rate_count,
                         r->b.period_ms * 1000u,
                         r->b.burst,
                         bucket_ttl_ms(&r->b),
                         (uint64_t)r->ttl_ms + RL_XRSV_MARGIN_MS,
                         debt_max(&r->b),
                         now};
    int nargs = now != 0 ? NARGS : NARGS - 1;
    for (int i = 0; i < nargs; i++) {
        if (i == 0)
            a->argl[2] = (size_t)snprintf(a->num[0], sizeof a->num[0], "%s",
                                          r->op == RL_XRSV_RESERVE ? "r" : "s");
        else
            a->argl[2 + i] = (size_t)snprintf(a->num[i], sizeof a->num[i], "%" PRIu64, v[i]);
        a->argv[2 + i] = a->num[i];
    }
    a->call = (rl_redis_call_t){RL_EXACT_SCRIPT_RESERVE, 2, nargs, a->argv, a->argl,
                                rl__exact_deadline(x)};
}

/* reserve.lua's reply: four non-negative integers. */
static void parse(void *ud, int status, const redisReply *reply)
{
    rl_exact_rsv_answer_t *a = ud;
    uint64_t v[4];
    a->ok = status == RL_CALL_REPLY && rl__redis_uint_array(reply, v, 4);
    if (!a->ok)
        return;
    a->code = (int)v[0];
    a->remaining = v[1];
    /* A reserve's third is the wait in us; a settle's the estimate or actual. */
    a->first = v[2];
    a->reset_ms = (v[3] + 999u) / 1000u;
}

void rl__exact_rsv(rl_exact_t *x, const rl_exact_rsv_t *r, rl_exact_rsv_answer_t *a)
{
    rsv_args_t args;
    make_args(x, r, &args);
    memset(a, 0, sizeof *a);
    rl_redis_caller_t *c = rl__exact_caller(x);
    if (c == NULL || rl__redis_caller_wait(c, &args.call, parse, a) != RL_CALL_REPLY)
        a->ok = 0;
    if (a->ok && r->op == RL_XRSV_RESERVE) {
        a->retry_ms = a->code == 1 ? 0 : (a->first + 999u) / 1000u;
        a->first = 0;
    }
}

static void dropped(void *ud, int status, const redisReply *reply)
{
    (void)ud, (void)status, (void)reply;
}

int rl__exact_rsv_send(rl_exact_t *x, const rl_exact_rsv_t *r)
{
    rl_redis_caller_t *c = rl__exact_caller(x);
    if (c == NULL)
        return -1;
    rsv_args_t args;
    make_args(x, r, &args);
    char none = 0;
    return rl__redis_caller_send(c, &args.call, dropped, &none, sizeof none) == 0 ? 0 : -1;
}

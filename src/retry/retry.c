/* SPDX-License-Identifier: MIT */
/*
 * rl_retry_*: a client's backoff, its server hints and its retry budget.
 *
 * Why full jitter, and why the hint is a floor rather than a replacement:
 * clients refused together were refused by one bucket, which hands each of
 * them the same Retry-After; if they all wait exactly that long they
 * arrive together again, and the bucket, which refills at its rate, admits
 * a burst's worth and refuses the rest with the same hint once more
 * (bench/retryherd). Waiting h + U(0, c) keeps every client from coming
 * back before the server asked while spreading them over c, which grows
 * with each refusal as full jitter's does. The budget is the SRE book's
 * client-side throttling ("Handling Overload"): it needs no coordination
 * between clients, only each client's own count of what it sent and what
 * was accepted.
 *
 * One mutex per object: the budget is the whole client's, shared by its
 * threads, and an update is a few additions, so a lock costs less than
 * the attempt it guards.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include "ratelimit.h"
#include "base/errors.h"
#include "base/structsize.h"

/* The budget's window, in slots: it forgets a slot's counts at once, so
 * the window it counts is between 7/8 and all of budget_window_ms. */
#define SLOTS 8

typedef struct slot {
    uint64_t epoch; /* now_ms / slot_ms when it was last written; 0: never */
    uint64_t requests;
    uint64_t accepts;
} slot_t;

struct rl_retry {
    rl_retry_config_t cfg;
    pthread_mutex_t lock;
    uint64_t rng;  /* xorshift64* state, never 0 (unused with cfg.random) */
    uint64_t slot_ms;
    slot_t slots[SLOTS];
};

_Static_assert(offsetof(rl_retry_config_t, size) == 0, "rl_retry_config_t starts with its size");

static const rl_retry_config_t defaults = {
    .size = sizeof(rl_retry_config_t),
    .base_ms = 100,
    .throttled_base_ms = 1000,
    .cap_ms = 20000,
    .hint_cap_ms = 60000,
    .max_retries = 5,
    .budget_k_milli = 2000,
    .budget_window_ms = 120000,
    .budget_min_requests = 10,
};

void rl_retry_config_init_sized(rl_retry_config_t *cfg, size_t size)
{
    rl__struct_init(cfg, size, &defaults, sizeof defaults);
}

typedef struct range {
    const char *name;
    size_t offset;
    uint32_t min, max;
} range_t;

static int check_config(const rl_retry_config_t *c, char *err, size_t errlen)
{
    const range_t ranges[] = {
        {"base_ms", offsetof(rl_retry_config_t, base_ms), 1, 60000},
        {"throttled_base_ms", offsetof(rl_retry_config_t, throttled_base_ms), c->base_ms, 60000},
        {"cap_ms", offsetof(rl_retry_config_t, cap_ms), c->throttled_base_ms, 3600000},
        {"hint_cap_ms", offsetof(rl_retry_config_t, hint_cap_ms), 0, 86400000},
        {"max_retries", offsetof(rl_retry_config_t, max_retries), 0, 1000},
        {"budget_window_ms", offsetof(rl_retry_config_t, budget_window_ms), 1000, 3600000},
        {"budget_min_requests", offsetof(rl_retry_config_t, budget_min_requests), 0, 1000000},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        uint32_t v;
        memcpy(&v, (const char *)c + ranges[i].offset, sizeof v);
        if (v < ranges[i].min || v > ranges[i].max)
            return rl__errf(err, errlen, RL_ERANGE, "%s: %u is outside %u..%u", ranges[i].name,
                            (unsigned)v, (unsigned)ranges[i].min, (unsigned)ranges[i].max);
    }
    if (c->budget_k_milli != 0 && (c->budget_k_milli < 1000 || c->budget_k_milli > 100000))
        return rl__errf(err, errlen, RL_ERANGE,
                        "budget_k_milli: %u is outside 1000..100000 (K 1 to 100), or 0 (off)",
                        (unsigned)c->budget_k_milli);
    return 0;
}

int rl_retry_new(rl_retry_t **out, const rl_retry_config_t *cfg, char *err, size_t errlen)
{
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (out == NULL)
        return rl__errf(err, errlen, RL_EINVAL, "out: NULL");
    *out = NULL;
    rl_retry_config_t c = defaults;
    if (cfg != NULL) {
        if (rl__struct_ok(cfg, cfg->size, sizeof c, sizeof c) != 0)
            return rl__errf(err, errlen, RL_ESIZE, "size: %zu is not a known rl_retry_config_t",
                            cfg->size);
        memcpy(&c, cfg, sizeof c);
        c.size = sizeof c;
    }
    int rc = check_config(&c, err, errlen);
    if (rc != 0)
        return rc;
    uint64_t seed = c.seed;
    if (c.random == NULL && seed == 0 &&
        getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed)
        return rl__errf(err, errlen, RL_ENOMEM, "seed: getrandom failed (errno %d)", errno);
    rl_retry_t *r = calloc(1, sizeof *r);
    if (r == NULL)
        return rl__errf(err, errlen, RL_ENOMEM, "rl_retry_t: out of memory");
    if (pthread_mutex_init(&r->lock, NULL) != 0) {
        free(r);
        return rl__errf(err, errlen, RL_ENOMEM, "rl_retry_t: no mutex");
    }
    r->cfg = c;
    r->rng = seed != 0 ? seed : UINT64_C(0x9E3779B97F4A7C15);
    r->slot_ms = c.budget_window_ms / SLOTS;
    *out = r;
    return 0;
}

void rl_retry_free(rl_retry_t *r)
{
    if (r == NULL)
        return;
    pthread_mutex_destroy(&r->lock);
    free(r);
}

/* A uniform draw in [0, n] (n + 1 values); the modulo bias is below
 * n / 2^64, far under the jitter's purpose. Lock held. */
static uint64_t retry_draw(rl_retry_t *r, uint64_t n)
{
    uint64_t x;
    if (r->cfg.random != NULL) {
        x = r->cfg.random(r->cfg.random_ud);
    } else {
        x = r->rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        r->rng = x;
        x *= UINT64_C(2685821657736338717);
    }
    return n == UINT64_MAX ? x : x % (n + 1);
}

/* The slot now_ms falls in, emptied first if it last counted an older
 * epoch. Epochs start at 1 so a never-written slot (0) is never current. */
static slot_t *slot_at(rl_retry_t *r, uint64_t now_ms)
{
    uint64_t epoch = now_ms / r->slot_ms + 1;
    slot_t *s = &r->slots[epoch % SLOTS];
    if (s->epoch != epoch) {
        s->epoch = epoch;
        s->requests = 0;
        s->accepts = 0;
    }
    return s;
}

/* Requests and accepts of the slots still in the window. Lock held. */
static void window_counts(const rl_retry_t *r, uint64_t now_ms, uint64_t *req, uint64_t *acc)
{
    uint64_t epoch = now_ms / r->slot_ms + 1;
    *req = 0;
    *acc = 0;
    for (int i = 0; i < SLOTS; i++) {
        const slot_t *s = &r->slots[i];
        if (s->epoch != 0 && s->epoch <= epoch && epoch - s->epoch < SLOTS) {
            *req += s->requests;
            *acc += s->accepts;
        }
    }
}

/* The rejection probability's numerator and denominator, in thousandths:
 * p = max(0, requests - K accepts) / (requests + 1), or 0 below
 * budget_min_requests. */
static void reject_fraction(const rl_retry_t *r, uint64_t req, uint64_t acc, uint64_t *num,
                            uint64_t *den)
{
    uint64_t k_acc = acc > UINT64_MAX / 100000 ? UINT64_MAX : acc * r->cfg.budget_k_milli;
    uint64_t req_m = req > UINT64_MAX / 1000 - 1 ? UINT64_MAX / 1000 - 1 : req;
    *num = r->cfg.budget_k_milli == 0 || req < r->cfg.budget_min_requests || req_m * 1000 <= k_acc
               ? 0
               : req_m * 1000 - k_acc;
    *den = (req_m + 1) * 1000;
}

int rl_retry_admit(rl_retry_t *r, uint64_t now_ms)
{
    if (r == NULL)
        return RL_EINVAL;
    pthread_mutex_lock(&r->lock);
    uint64_t req, acc, num, den;
    window_counts(r, now_ms, &req, &acc);
    reject_fraction(r, req, acc, &num, &den);
    /* retry_draw(den - 1) is uniform over den values: below num with p = num/den */
    int rc = num == 0 || retry_draw(r, den - 1) >= num ? RL_ALLOW : RL_DENY;
    slot_at(r, now_ms)->requests++;
    pthread_mutex_unlock(&r->lock);
    return rc;
}

int rl_retry_record(rl_retry_t *r, uint64_t now_ms, int outcome)
{
    if (r == NULL || outcome < RL_RETRY_OK || outcome > RL_RETRY_FAILED)
        return RL_EINVAL;
    if (outcome == RL_RETRY_OK) {
        pthread_mutex_lock(&r->lock);
        slot_at(r, now_ms)->accepts++;
        pthread_mutex_unlock(&r->lock);
    }
    return 0;
}

int rl_retry_delay(rl_retry_t *r, uint32_t retry, int outcome, int64_t hint_ms,
                   uint64_t *delay_ms)
{
    if (r == NULL || delay_ms == NULL ||
        (outcome != RL_RETRY_THROTTLED && outcome != RL_RETRY_FAILED))
        return RL_EINVAL;
    *delay_ms = 0;
    uint64_t hint = hint_ms < 0 ? 0 : (uint64_t)hint_ms;
    if (hint_ms >= 0 && hint > r->cfg.hint_cap_ms) {
        *delay_ms = hint;
        return RL_DENY;
    }
    if (retry >= r->cfg.max_retries)
        return RL_DENY;
    uint64_t base = outcome == RL_RETRY_THROTTLED ? r->cfg.throttled_base_ms : r->cfg.base_ms;
    uint64_t ceiling = r->cfg.cap_ms;
    if (retry < 32 && base << retry < ceiling) /* base < 2^16: no overflow below 2^48 */
        ceiling = base << retry;
    pthread_mutex_lock(&r->lock);
    uint64_t jitter = retry_draw(r, ceiling);
    pthread_mutex_unlock(&r->lock);
    *delay_ms = hint + jitter;
    return RL_ALLOW;
}

int rl_retry_budget(rl_retry_t *r, uint64_t now_ms, uint64_t *requests, uint64_t *accepts,
                    uint32_t *reject_ppm)
{
    if (r == NULL)
        return RL_EINVAL;
    pthread_mutex_lock(&r->lock);
    uint64_t req, acc, num, den;
    window_counts(r, now_ms, &req, &acc);
    reject_fraction(r, req, acc, &num, &den);
    pthread_mutex_unlock(&r->lock);
    if (requests != NULL)
        *requests = req;
    if (accepts != NULL)
        *accepts = acc;
    if (reject_ppm != NULL) /* a report, not a decision: a double's rounding is fine */
        *reject_ppm = (uint32_t)((double)num * 1e6 / (double)den);
    return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * rl_wait: the turn is taken at once (the tokens charged with the wait as
 * the admission's slack, reserve/charge.h), then the caller sleeps until it.
 */
#include <time.h>
#include "reserve/reserve.h"
#include "reserve/charge.h"
#include "base/structsize.h"

/* The longest sleep between two looks at the instance clock: a clock hook
 * a test moves wakes a waiter within it. */
#define WAIT_SLICE_NS UINT64_C(2000000)

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sleep until the instance clock (source) reaches ready_fp, or until the
 * real time the turn needed has passed, whichever is first: with the
 * built-in clocks the two agree; a hook that stands still cannot hold a
 * waiter longer than its wait. */
static void sleep_until(rl_t *rl, int32_t source, uint64_t now_fp, uint64_t ready_fp)
{
    uint64_t real_end = mono_ns() + (ready_fp - now_fp) / RL_FP_PER_NS;
    for (;;) {
        uint64_t now = rl__clock_now_fp(&rl->clock, source);
        uint64_t real = mono_ns();
        if (now >= ready_fp || real >= real_end)
            return;
        uint64_t left = (ready_fp - now) / RL_FP_PER_NS;
        if (left > real_end - real)
            left = real_end - real;
        if (left > WAIT_SLICE_NS)
            left = WAIT_SLICE_NS;
        struct timespec ts = {.tv_sec = (time_t)(left / 1000000000u),
                              .tv_nsec = (long)(left % 1000000000u)};
        nanosleep(&ts, NULL);
    }
}

int rl_wait(rl_t *rl, int id, const void *key, size_t key_len, uint32_t cost,
            uint32_t max_wait_ms, rl_decision_t *out)
{
    if (out != NULL && out->size < RL_DECISION_SIZE_MIN)
        return RL_ESIZE;
    int rc = rl == NULL || max_wait_ms > RL_WAIT_MAX_MS || cost == 0 ? RL_EINVAL : 0;
    if (rc == 0)
        rc = rl__fork_check(rl);
    if (rc == 0 && ((key == NULL && key_len > 0)))
        rc = RL_EINVAL;
    if (rc == 0 && (key_len == 0 || key_len > RL_MAX_KEY_LEN))
        rc = RL_EKEYLEN;
    rl_rkey_t k;
    if (rc == 0)
        rc = rl__rkey_resolve(rl, id, rl__keyhash(&rl->kh, key, key_len), cost, &k);
    if (rc != 0) {
        rl__rkey_fail(out);
        return rc;
    }
    rl_radmit_t o;
    rl__rkey_admit(rl, &k, cost, (uint64_t)max_wait_ms * RL_FP_PER_MS, &o);
    rl__rkey_count(rl, &k, &o, key, key_len);
    if (out != NULL)
        rl__rkey_decision(out, &k, &o);
    rl_reserve_t *r = rl->reserve;
    if (!o.allowed) {
        if (r != NULL)
            rl__reserve_add(r, RL_RSV_WAITS_REFUSED, 1);
        return RL_DENY;
    }
    if (r != NULL) {
        rl__reserve_add(r, RL_RSV_WAITS, 1);
        if (o.ready_fp > k.now)
            rl__reserve_add(r, RL_RSV_WAITS_SLEPT, 1);
    }
    if (o.ready_fp > k.now)
        sleep_until(rl, (int32_t)k.p.clock_source, k.now, o.ready_fp);
    return RL_ALLOW;
}

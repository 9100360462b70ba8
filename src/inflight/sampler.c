/* SPDX-License-Identifier: MIT */
/*
 * The windowed feed of an in-flight limit, as Netflix's WindowedLimit: each
 * release adds its sample to the open window (a latency under
 * RL_INFLIGHT_RTT_FLOOR_NS, and an RL_INFLIGHT_IGNORED outcome, add
 * nothing), and the release that finds the window full (at least
 * RL_INFLIGHT_WINDOW_SAMPLES samples and drops, RL_INFLIGHT_WINDOW_MS old)
 * and wins its try-lock closes it: the algorithm moves the limit once.
 * Releases never wait: one that loses the try-lock has already counted its
 * sample, in this window or the next.
 */
#include <sched.h>
#include "inflight/internal.h"

#define WINDOW_NS ((uint64_t)RL_INFLIGHT_WINDOW_MS * 1000000u)

void rl__ifl_sampler_reset(rl_ifl_t *b, const rl_inflight_def_t *d, uint64_t now)
{
    /* acquire: the closer's state writes, released with busy, are seen. */
    while (atomic_exchange_explicit(&b->busy, 1, memory_order_acquire) != 0)
        sched_yield(); /* a closer holds it for one update: the control path waits */
    b->algo = d->algo;
    if (d->algo != RL_INFLIGHT_FIXED)
        rl__adapt_init(&b->adapt, d->algo, d->min, d->max, b->salt | 1);
    uint32_t l = d->algo == RL_INFLIGHT_FIXED ? d->max : (uint32_t)b->adapt.limit;
    /* relaxed: a parameter; acquires read the newest they see. */
    atomic_store_explicit(&b->limit_now, l, memory_order_relaxed);
    atomic_store_explicit(&b->w_start_ns, now, memory_order_relaxed);
    /* release: the next closer sees the state written above. */
    atomic_store_explicit(&b->busy, 0, memory_order_release);
}

/* Close the window: its sums taken (exchanged, so racing releases land in
 * the next), the limit moved. Under busy. */
static void close_window(rl_ifl_t *b, uint64_t now)
{
    rl_adapt_window_t w;
    /* relaxed: sums, each self-contained; busy orders the state. */
    w.samples = atomic_exchange_explicit(&b->w_samples, 0, memory_order_relaxed);
    w.drops = atomic_exchange_explicit(&b->w_drops, 0, memory_order_relaxed);
    w.rtt_sum_ns = atomic_exchange_explicit(&b->w_rtt_sum, 0, memory_order_relaxed);
    w.max_inflight = atomic_exchange_explicit(&b->w_max_inflight, 0, memory_order_relaxed);
    atomic_store_explicit(&b->w_start_ns, now, memory_order_relaxed);
    if (w.samples > 0)
        atomic_store_explicit(&b->mean_ns, w.rtt_sum_ns / w.samples, memory_order_relaxed);
    if (b->algo != RL_INFLIGHT_FIXED)
        atomic_store_explicit(&b->limit_now, rl__adapt_update(&b->adapt, &w),
                              memory_order_relaxed);
}

void rl__ifl_sample(rl_t *rl, rl_ifl_t *b, int32_t outcome, uint64_t latency_ns,
                    uint32_t held, uint64_t now)
{
    (void)rl;
    if (outcome == RL_INFLIGHT_IGNORED)
        return;
    /* relaxed throughout: the window's sums are counters; the closer takes
     * them by exchange and needs no order with anything else. */
    if (outcome == RL_INFLIGHT_DROPPED) {
        atomic_fetch_add_explicit(&b->w_drops, 1, memory_order_relaxed);
    } else if (latency_ns >= RL_INFLIGHT_RTT_FLOOR_NS) {
        atomic_fetch_add_explicit(&b->w_rtt_sum, latency_ns, memory_order_relaxed);
        atomic_fetch_add_explicit(&b->w_samples, 1, memory_order_relaxed);
    } else {
        return;
    }
    uint32_t m = atomic_load_explicit(&b->w_max_inflight, memory_order_relaxed);
    while (held > m && !atomic_compare_exchange_weak_explicit(
                           &b->w_max_inflight, &m, held, memory_order_relaxed,
                           memory_order_relaxed))
        ;
    uint64_t n = atomic_load_explicit(&b->w_samples, memory_order_relaxed) +
                 atomic_load_explicit(&b->w_drops, memory_order_relaxed);
    uint64_t start = atomic_load_explicit(&b->w_start_ns, memory_order_relaxed);
    if (n < RL_INFLIGHT_WINDOW_SAMPLES || now < start || now - start < WINDOW_NS)
        return;
    /* acquire: the last closer's state writes are seen. */
    if (atomic_exchange_explicit(&b->busy, 1, memory_order_acquire) != 0)
        return;
    /* Re-read under busy: another closer may have just closed it. */
    start = atomic_load_explicit(&b->w_start_ns, memory_order_relaxed);
    if (now >= start && now - start >= WINDOW_NS)
        close_window(b, now);
    /* release: the state written is seen by the next closer. */
    atomic_store_explicit(&b->busy, 0, memory_order_release);
}

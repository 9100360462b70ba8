/* SPDX-License-Identifier: MIT */
/*
 * rl_bench_instr: a fixed number of hot-key checks, for counting the
 * instructions of one check under callgrind, which (unlike ns on a shared
 * VM) repeats to the instruction:
 *
 *   for n in 100000 200000; do
 *     valgrind --tool=callgrind --callgrind-out-file=/dev/null \
 *       build/bench/rl_bench_instr allow $n 2>&1 | grep refs
 *   done
 *
 * The difference of the two totals over 100000 is one check plus this
 * loop's own few instructions. Modes: allow (NULL decision), deny, decision
 * (an allowed check that fills an rl_decision_t), batch32 (rl_check_batch of
 * 32 requests of the one key, counted per request), hot (allow, the key
 * marked hot through hot= and rl_hotkeys first: its checks take their
 * tokens from a lease, src/local/lease.h), precise (deny of a burst-1 limit,
 * which reads CLOCK_MONOTONIC), precise1s (deny of a 1/s burst-1 limit,
 * precise too, whose denies coarse-first settles on the coarse clock,
 * src/local/clock.h) and fresh1s (N keys of that limit checked once each, all
 * admitted: its allow path, with a new slot each).
 *
 * Cache misses per check, modes k1 and m1: N allowed checks of keys drawn
 * uniformly from 1000 or 1M keys, all in the table first (1M: max_keys
 * 1.25M, a 120 MB table, as rl_bench), the key bytes in op order. Count
 * only inside rl_check, with callgrind's cache simulator:
 *
 *   valgrind --tool=callgrind --cache-sim=yes --collect-atstart=no \
 *     --toggle-collect=measured --D1=49152,12,64 --LL=33554432,16,64 \
 *     --callgrind-out-file=cg.out build/bench/rl_bench_instr m1 200000
 *   callgrind_annotate --auto=yes cg.out     (Dr D1mr DLmr per source line)
 *
 * The totals over N are one check's data reads and misses (rl_check's
 * inclusive figures leave out the loop's own reads of the key stream).
 *
 * In-flight limits (a fixed limit of 64, decision NULL), counted per
 * acquire+release pair: ifl_first (the key holds nothing between pairs, so
 * each acquire is the key's first: a claim of its entry) and ifl_held (a
 * permit of the key is held throughout, so each acquire finds the entry
 * live).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ratelimit.h"

#define KEY_STRIDE 16

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* The measured loop, apart from the warm-up's checks (callgrind
 * --toggle-collect=measured). */
static __attribute__((noinline)) long measured(rl_t *rl, int id, const char *ops, long n)
{
    long allowed = 0;
    for (long i = 0; i < n; i++)
        allowed += rl_check(rl, id, ops + (size_t)i * KEY_STRIDE, 13, 1, NULL) == RL_ALLOW;
    return allowed;
}

/* N uniform checks over nkeys keys, every key inserted first. */
static long spread(rl_t *rl, int id, uint32_t nkeys, long n)
{
    char key[KEY_STRIDE];
    for (uint32_t k = 0; k < nkeys; k++) {
        snprintf(key, sizeof key, "user:%08x", k);
        if (rl_check(rl, id, key, 13, 1, NULL) < 0)
            return -1;
    }
    char *ops = malloc((size_t)n * KEY_STRIDE);
    if (ops == NULL)
        return -1;
    uint64_t seed = 1;
    for (long i = 0; i < n; i++)
        snprintf(ops + (size_t)i * KEY_STRIDE, KEY_STRIDE, "user:%08x",
                 (uint32_t)(splitmix(&seed) % nkeys));
    long allowed = measured(rl, id, ops, n);
    free(ops);
    return allowed;
}

/* N acquire+release pairs of one key of an in-flight limit of 64; with
 * `hold`, a permit of the key held throughout. */
static long inflight_pairs(rl_t *rl, long n, int hold)
{
    rl_limit_t lim;
    char err[256];
    if (rl_limit_parse(&lim, "name=f kind=inflight max=64", err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    int id = rl_limit_add(rl, &lim);
    rl_permit_t held, p;
    if (id < 0 || (hold && rl_inflight_acquire(rl, id, "user:00000001", 13,
                                               RL_INFLIGHT_NO_CLASS, &held, NULL) != RL_ALLOW))
        return -1;
    long allowed = 0;
    for (long i = 0; i < n; i++)
        if (rl_inflight_acquire(rl, id, "user:00000001", 13, RL_INFLIGHT_NO_CLASS, &p, NULL) ==
            RL_ALLOW)
            allowed += rl_inflight_release(rl, &p, RL_INFLIGHT_SUCCESS, 0) == 0;
    if (hold && rl_inflight_release(rl, &held, RL_INFLIGHT_SUCCESS, 0) != 0)
        return -1;
    return allowed;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "allow";
    long n = argc > 2 ? atol(argv[2]) : 100000;
    int deny = strcmp(mode, "deny") == 0, precise = strcmp(mode, "precise") == 0;
    int hot = strcmp(mode, "hot") == 0;
    int slow = strcmp(mode, "precise1s") == 0, fresh = strcmp(mode, "fresh1s") == 0;
    uint32_t nkeys = strcmp(mode, "k1") == 0 ? 1000 : strcmp(mode, "m1") == 0 ? 1u << 20 : 0;
    rl_config_t cfg;
    rl_config_init(&cfg);
    if (nkeys > 1000)
        cfg.max_keys = nkeys + nkeys / 4;
    if (fresh)
        cfg.max_keys = (uint32_t)(n + n / 4 + 16);
    rl_t *rl;
    if (rl_open(&rl, &cfg) != 0)
        return 2;
    rl_limit_t lim;
    char err[256];
    /* All three burst-1 limits get the precise clock (rate x tick > burst
     * - 1 = 0); deny and precise1s deny coarse-first (src/local/clock.h: a
     * charge of at least two margins, 16 ms here), precise (1 ms) does not. */
    const char *spec = deny            ? "name=d rate=1/m burst=1 mode=local"
                       : precise         ? "name=p rate=1000/s burst=1 mode=local"
                       : slow || fresh   ? "name=s rate=1/s burst=1 mode=local"
                       : hot     ? "name=a rate=100000/1ms burst=1000000 mode=local hot=0.000001"
                                 : "name=a rate=100000/1ms burst=1000000 mode=local";
    if (rl_limit_parse(&lim, spec, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    int id = rl_limit_add(rl, &lim);
    if (id < 0)
        return 2;
    long allowed = 0;
    if (hot) {
        /* Demand far past hot= (100/s) over RL_HOT_ENTER calls: marked. */
        rl_decision_t d;
        rl_decision_init(&d);
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < 10000; i++)
                rl_check(rl, id, "user:00000001", 13, 1, NULL);
            rl_hotkey_t hk;
            rl_hotkey_init(&hk);
            rl_hotkeys(rl, id, &hk, 1);
        }
        rl_check(rl, id, "user:00000001", 13, 1, &d);
        if (!(d.flags & RL_FLAG_HOT)) {
            fprintf(stderr, "rl_bench_instr: the key was not marked hot\n");
            return 2;
        }
    }
    if (strncmp(mode, "ifl_", 4) == 0) {
        allowed = inflight_pairs(rl, n, strcmp(mode, "ifl_held") == 0);
        if (allowed < 0)
            return 2;
    } else if (nkeys != 0) {
        allowed = spread(rl, id, nkeys, n);
        if (allowed < 0)
            return 2;
    } else if (strcmp(mode, "batch32") == 0) {
        rl_request_t req[32];
        for (int i = 0; i < 32; i++) {
            rl_request_init(&req[i]);
            req[i].limit = id;
            req[i].key = "user:00000001";
            req[i].key_len = 13;
        }
        for (long i = 0; i < n; i += 32)
            allowed += rl_check_batch(rl, req, 32, sizeof req[0], NULL, NULL);
    } else if (fresh) {
        char *ops = malloc((size_t)n * KEY_STRIDE);
        if (ops == NULL)
            return 2;
        for (long i = 0; i < n; i++)
            snprintf(ops + (size_t)i * KEY_STRIDE, KEY_STRIDE, "user:%08x", (uint32_t)i);
        allowed = measured(rl, id, ops, n);
        free(ops);
    } else if (strcmp(mode, "decision") == 0) {
        rl_decision_t d;
        rl_decision_init(&d);
        for (long i = 0; i < n; i++)
            allowed += rl_check(rl, id, "user:00000001", 13, 1, &d) == RL_ALLOW;
    } else {
        for (long i = 0; i < n; i++)
            allowed += rl_check(rl, id, "user:00000001", 13, 1, NULL) == RL_ALLOW;
    }
    printf("%ld of %ld allowed\n", allowed, n);
    rl_close(rl);
    return 0;
}

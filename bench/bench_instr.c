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
 * tokens from a lease, src/lease.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ratelimit.h"

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "allow";
    long n = argc > 2 ? atol(argv[2]) : 100000;
    int deny = strcmp(mode, "deny") == 0;
    int hot = strcmp(mode, "hot") == 0;
    rl_config_t cfg;
    rl_config_init(&cfg);
    rl_t *rl;
    if (rl_open(&rl, &cfg) != 0)
        return 2;
    rl_limit_t lim;
    char err[256];
    const char *spec = deny ? "name=d rate=1/m burst=1 mode=local"
                  : hot ? "name=a rate=100000/1ms burst=1000000 mode=local hot=0.000001"
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
    if (strcmp(mode, "batch32") == 0) {
        rl_request_t req[32];
        for (int i = 0; i < 32; i++) {
            rl_request_init(&req[i]);
            req[i].limit = id;
            req[i].key = "user:00000001";
            req[i].key_len = 13;
        }
        for (long i = 0; i < n; i += 32)
            allowed += rl_check_batch(rl, req, 32, sizeof req[0], NULL, NULL);
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

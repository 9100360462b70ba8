/* SPDX-License-Identifier: MIT */
/*
 * Instance health, decided by the sync thread and read by every check with
 * one atomic load: healthy -> degraded -> recovering -> healthy.
 *
 *   healthy     rounds succeed: decisions use each key's global share.
 *   degraded    a round failed (error, missed deadline, lost connection):
 *               synced limits decide by their on_failure policy.
 *   recovering  a round succeeded again: shares are being re-established;
 *               decisions are normal, and a failed round goes straight back
 *               to degraded. recover_rounds successes in a row: healthy.
 *
 * The word packs the state (2 bits) with the instance time (fixed point,
 * see local/bucket.h) at which it was entered, so a check knows how old an outage
 * is without a second load. The time of the next reconnect attempt (what a
 * closed limit tells callers in Retry-After) is a separate word, read only
 * by closed limits while degraded.
 */
#ifndef RL_HEALTH_H
#define RL_HEALTH_H

#include <stdatomic.h>
#include <stdint.h>

#include "ratelimit.h" /* RL_HEALTH_* */

/* The states, one table: the public RL_HEALTH_* values and the names every
 * log line, metric label and registry record uses. */
#define RL_HEALTH_MAP(X)                                                           \
    X(HEALTHY, healthy)                                                            \
    X(DEGRADED, degraded)                                                          \
    X(RECOVERING, recovering)

enum {
#define RL_X_(up, word) RL_HEALTH_I_##up,
    RL_HEALTH_MAP(RL_X_)
#undef RL_X_
    RL_HEALTH_N
};
#define RL_X_(up, word)                                                            \
    _Static_assert((int)RL_HEALTH_I_##up == (int)RL_HEALTH_##up,                   \
                   "RL_HEALTH_" #up " is its row of RL_HEALTH_MAP");
RL_HEALTH_MAP(RL_X_)
#undef RL_X_

/* "healthy", "degraded", "recovering"; NULL for anything else. */
static inline const char *rl__health_name(int state)
{
    static const char *const names[] = {
#define RL_X_(up, word) #word,
        RL_HEALTH_MAP(RL_X_)
#undef RL_X_
    };
    return state >= 0 && state < RL_HEALTH_N ? names[state] : NULL;
}

#define RL_HEALTH_STATE(w) ((int)((w)&3u))
#define RL_HEALTH_SINCE(w) ((w) >> 2)
#define RL_HEALTH_MAKE(state, since_fp) (((since_fp) << 2) | (uint64_t)(state))

typedef struct rl_health {
    _Atomic uint64_t word;        /* state | since */
    _Atomic uint64_t next_try_fp; /* instance time of the next reconnect try */
    /* Time spent in each state before the current stay (ms), and the
     * number of transitions; written by the sync thread only. */
    _Atomic uint64_t ms_in[3];
    _Atomic uint64_t transitions;
    _Atomic uint64_t since_round; /* sync rounds started at the transition */
} rl_health_t;

#endif

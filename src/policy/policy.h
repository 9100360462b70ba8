/* SPDX-License-Identifier: MIT */
/*
 * Policy: what the limiter does about Redis's health, decided in one place
 * and as pure functions, so each rule is unit-tested without Redis
 * (tests/test_policy.c) and every path that can fail uses the same one.
 *
 * - Health transitions (local/health.h): how a sync round's outcome moves the
 *   state machine. The sync thread owns the state and the counters; this
 *   says where they go.
 * - The on_failure decision: a limit's answer when the global tier cannot
 *   decide (today: a key with no table slot, a synced limit while degraded;
 *   next: an exact check's timeout, a quota outage), and the degraded ramp
 *   a `local` limit runs at.
 *
 * Depends on local/health.h, local/bucket.h (rl_gcra_t) and the public header only:
 * never on Redis, the sync thread, or the table.
 */
#ifndef RL_POLICY_H
#define RL_POLICY_H

#include <stdint.h>
#include "local/bucket.h"
#include "local/health.h"
#include "ratelimit.h"

/* ------------------------------------------------------------ health */

typedef struct rl_health_counts {
    uint32_t fails_in_row; /* failed rounds since the last success */
    uint32_t oks_in_row;   /* successful rounds since the last failure (or
                              since recovering began) */
} rl_health_counts_t;

typedef struct rl_health_cfg {
    uint32_t degrade_after_failures; /* failed rounds in a row that degrade */
    uint32_t recover_after_rounds;   /* successes in a row that heal */
} rl_health_cfg_t;

/* One transition: the state entered and why (for the log line). */
typedef struct rl_health_move {
    int state;
    const char *why;
} rl_health_move_t;

#define RL_HEALTH_MOVES_MAX 2

/*
 * A finished round's outcome (failed or not): update *c and return the
 * transitions to make, in order, into moves[] (0, 1 or 2: a degraded
 * instance whose round succeeds enters recovering, and with
 * recover_after_rounds 1 heals in the same round):
 *   failed:    degraded when recovering, or after degrade_after_failures
 *              failures in a row;
 *   succeeded: degraded -> recovering; recovering -> healthy after
 *              recover_after_rounds successes in a row.
 * A lost connection is not a round: it degrades at once (sync/sync.c).
 */
int rl__policy_health_round(int state, int failed, rl_health_counts_t *c,
                            const rl_health_cfg_t *cfg,
                            rl_health_move_t moves[RL_HEALTH_MOVES_MAX]);

/* ------------------------------------------------------- on_failure */

/* What a limit's on_failure answers when the global tier cannot decide. */
typedef enum rl_failure_action {
    RL_FAILURE_ALLOW,      /* open: allow, a whole burst remaining */
    RL_FAILURE_DENY,       /* closed: deny, retry after retry_ms */
    RL_FAILURE_LOCAL,      /* local: the caller charges a local bucket */
} rl_failure_action_t;

typedef struct rl_failure_answer {
    rl_failure_action_t action;
    uint64_t remaining; /* allow/deny only */
    uint64_t retry_ms;  /* deny only (reset_ms is the same) */
} rl_failure_answer_t;

/*
 * The on_failure decision, written once: on_failure is RL_FAIL_*, burst the
 * limit's own, retry_ms when a closed limit's callers may try again (when
 * the global tier may answer again; at least 1 ms, the caller's estimate).
 * Anything but open or closed is local.
 */
static inline rl_failure_answer_t rl__policy_on_failure(int32_t on_failure, uint64_t burst,
                                                        uint64_t retry_ms)
{
    rl_failure_answer_t a = {RL_FAILURE_LOCAL, 0, 0};
    if (on_failure == RL_FAIL_OPEN) {
        a.action = RL_FAILURE_ALLOW;
        a.remaining = burst;
    } else if (on_failure == RL_FAIL_CLOSED) {
        a.action = RL_FAILURE_DENY;
        a.retry_ms = retry_ms;
    }
    return a;
}

/*
 * A `local` limit while Redis is out: the key's last good share (last)
 * moves to the limit's degraded rate (to) over ramp_fp as the outage ages
 * (age_fp), so a node neither keeps a large share it may no longer hold nor
 * drops to the pessimistic one in a step. ramp_fp 0: at once. Writes *out.
 */
void rl__policy_degraded_gcra(const rl_gcra_t *last, const rl_gcra_t *to, uint64_t age_fp,
                              uint64_t ramp_fp, rl_gcra_t *out);

#endif

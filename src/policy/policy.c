/* SPDX-License-Identifier: MIT */
/* Health transitions and the degraded ramp (see policy/policy.h). Pure. */
#include "policy/policy.h"

int rl__policy_health_round(int state, int failed, rl_health_counts_t *c,
                            const rl_health_cfg_t *cfg,
                            rl_health_move_t moves[RL_HEALTH_MOVES_MAX])
{
    int n = 0;
    if (failed) {
        c->oks_in_row = 0;
        c->fails_in_row++;
        /* A recovering instance has shares only being re-established: one
         * failure is enough to stop trusting them. */
        if (state != RL_HEALTH_DEGRADED &&
            (state == RL_HEALTH_RECOVERING || c->fails_in_row >= cfg->degrade_after_failures))
            moves[n++] = (rl_health_move_t){RL_HEALTH_DEGRADED, "sync round failed"};
        return n;
    }
    c->fails_in_row = 0;
    c->oks_in_row++;
    if (state == RL_HEALTH_DEGRADED) {
        c->oks_in_row = 1;
        moves[n++] = (rl_health_move_t){RL_HEALTH_RECOVERING, "sync round succeeded"};
        state = RL_HEALTH_RECOVERING;
    }
    if (state == RL_HEALTH_RECOVERING && c->oks_in_row >= cfg->recover_after_rounds)
        moves[n++] = (rl_health_move_t){RL_HEALTH_HEALTHY, "sync rounds succeed"};
    return n;
}

/* Move a from `from` towards `to` by frac/65536. */
static uint64_t ramp_u64(uint64_t from, uint64_t to, uint64_t frac)
{
    if (to >= from)
        return from + (uint64_t)(((unsigned __int128)(to - from) * frac) >> 16);
    return from - (uint64_t)(((unsigned __int128)(from - to) * frac) >> 16);
}

void rl__policy_degraded_gcra(const rl_gcra_t *last, const rl_gcra_t *to, uint64_t age_fp,
                              uint64_t ramp_fp, rl_gcra_t *out)
{
    uint64_t frac = ramp_fp == 0 || age_fp >= ramp_fp
                        ? 65536
                        : (uint64_t)(((unsigned __int128)age_fp << 16) / ramp_fp);
    rl_gcra_t g;
    g.t_fp = ramp_u64(last->t_fp, to->t_fp, frac);
    g.burst = ramp_u64(last->burst, to->burst, frac);
    if (g.burst == 0)
        g.burst = 1;
    g.tau_fp = g.burst <= RL_TAU_FP_MAX / g.t_fp ? g.burst * g.t_fp
                                                 : (RL_TAU_FP_MAX / g.t_fp) * g.t_fp;
    *out = g;
}

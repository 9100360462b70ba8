/* SPDX-License-Identifier: MIT */
#include <string.h>
#include "local/limitdef.h"
#include "local/inflightdef.h"
#include "base/errors.h"

int rl__name_valid(const char *name, size_t cap)
{
    size_t n = 0;
    for (; n < cap && name[n] != '\0'; n++) {
        unsigned char c = (unsigned char)name[n];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '.' || c == ':' || c == '-';
        if (!ok)
            return 0;
    }
    return n > 0 && n < cap;
}

static int derive(rl_limit_derived_t *d, const rl_limit_t *lim, uint32_t expected_nodes,
                  char *err, size_t errlen)
{
    if (lim->kind == RL_KIND_INFLIGHT) {
        /* No bucket: the registry still keeps valid parameters for it,
         * which no check charges (its checks are refused, whatever their
         * cost up to the largest burst). */
        static const rl_rate_t fast = {100000000u, 1000};
        int rc = rl__gcra_from_rate(&d->normal, &fast, 1000000000u, "rate", err, errlen);
        d->presync = d->degraded = d->normal;
        return rc;
    }
    int rc = rl__gcra_from_rate(&d->normal, &lim->rate, lim->burst, "rate", err, errlen);
    if (rc != 0)
        return rc;
    rl__gcra_divide(&d->presync, &d->normal, expected_nodes ? expected_nodes : 1);
    if (lim->degraded_rate.count != 0 || lim->degraded_rate.period_ms != 0) {
        uint64_t burst = lim->degraded_rate.count < d->normal.burst ? lim->degraded_rate.count
                                                                    : d->normal.burst;
        return rl__gcra_from_rate(&d->degraded, &lim->degraded_rate, burst, "degraded_rate",
                                  err, errlen);
    }
    d->degraded = d->presync;
    return 0;
}

void rl__gcra_divide(rl_gcra_t *out, const rl_gcra_t *g, uint64_t n)
{
    /* 1/n of the rate: an n times longer interval; burst rounded up to a
     * whole token so a node can admit at all. */
    uint64_t t = g->t_fp > RL_T_FP_MAX / n ? RL_T_FP_MAX : g->t_fp * n;
    uint64_t burst = (g->burst + n - 1) / n;
    out->t_fp = t;
    out->burst = burst;
    out->tau_fp = burst <= RL_TAU_FP_MAX / t ? burst * t : (RL_TAU_FP_MAX / t) * t;
}

int rl__limit_derive(rl_limit_derived_t *d, const rl_limit_t *lim, uint32_t expected_nodes)
{
    return derive(d, lim, expected_nodes, NULL, 0);
}

void rl__limit_resolve(rl_limit_t *lim)
{
    /* Closed for the modes a user picks to protect an invariant: a limit
     * declared exact must not admit past its bound while Redis is late. */
    if (lim->on_failure == RL_FAIL_DEFAULT)
        lim->on_failure = lim->mode == RL_MODE_EXACT || lim->mode == RL_MODE_TIERED ||
                                  lim->kind == RL_KIND_INFLIGHT
                              ? RL_FAIL_CLOSED
                              : RL_FAIL_LOCAL;
}

int rl__limit_validate(const rl_limit_t *lim, char *err, size_t errlen)
{
    if (!rl__name_valid(lim->name, sizeof lim->name))
        return rl__errf(err, errlen, RL_ENAME, "name: must be 1..%d bytes of [A-Za-z0-9_.:-]",
                        RL_NAME_MAX - 1);
    if (lim->mode < RL_MODE_GLOBAL || lim->mode > RL_MODE_TIERED)
        return rl__errf(err, errlen, RL_EMODE, "mode: unknown value %d", (int)lim->mode);
    int irc = rl__inflight_validate(lim, err, errlen);
    if (irc != 0 || lim->kind == RL_KIND_INFLIGHT)
        return irc;
    if (lim->on_failure < RL_FAIL_DEFAULT || lim->on_failure > RL_FAIL_CLOSED)
        return rl__errf(err, errlen, RL_EMODE, "on_failure: unknown value %d",
                        (int)lim->on_failure);
    if (lim->shadow != 0 && lim->shadow != 1)
        return rl__errf(err, errlen, RL_ERANGE, "shadow: must be 0 or 1, not %d",
                        (int)lim->shadow);
    if (lim->near_ppm > RL_NEAR_PPM_MAX)
        return rl__errf(err, errlen, RL_ERANGE, "near_ppm: %u is above %u (the whole burst)",
                        (unsigned)lim->near_ppm, (unsigned)RL_NEAR_PPM_MAX);
    /* Refused, not ignored: only tiered confirms near the limit, and a
     * threshold set on another mode would silently do nothing. */
    if (lim->near_ppm != 0 && lim->mode != RL_MODE_TIERED)
        return rl__errf(err, errlen, RL_ERANGE,
                        "near_ppm: only mode=tiered confirms near its limit (set it to 0)");
    if (lim->hot_ppm > RL_HOT_PPM_MAX)
        return rl__errf(err, errlen, RL_ERANGE, "hot_ppm: %u is above %u (%u times the rate)",
                        (unsigned)lim->hot_ppm, (unsigned)RL_HOT_PPM_MAX,
                        (unsigned)(RL_HOT_PPM_MAX / 1000000u));
    if (lim->hot_policy != RL_HOT_POLICY_SYNC && lim->hot_policy != RL_HOT_POLICY_LOCAL)
        return rl__errf(err, errlen, RL_EMODE, "hot_policy: unknown value %d",
                        (int)lim->hot_policy);
    /* Refused, not ignored, as near_ppm: a policy that can never apply
     * would look configured and do nothing. */
    if (lim->hot_policy == RL_HOT_POLICY_LOCAL && lim->mode != RL_MODE_GLOBAL)
        return rl__errf(err, errlen, RL_ERANGE,
                        "hot_policy: local applies to mode=global only (a %s limit's keys "
                        "%s)",
                        lim->mode == RL_MODE_LOCAL   ? "local"
                        : lim->mode == RL_MODE_EXACT ? "exact"
                                                     : "tiered",
                        lim->mode == RL_MODE_LOCAL   ? "never sync"
                        : lim->mode == RL_MODE_EXACT ? "are decided in Redis per check"
                                                     : "confirm in Redis near the limit");
    if (lim->hot_policy == RL_HOT_POLICY_LOCAL && lim->hot_ppm == 0)
        return rl__errf(err, errlen, RL_ERANGE,
                        "hot_policy: local needs hot_ppm (without a threshold no key is "
                        "ever hot)");
    if (lim->hot_every != 0 && lim->hot_policy != RL_HOT_POLICY_LOCAL)
        return rl__errf(err, errlen, RL_ERANGE,
                        "hot_every: only hot_policy=local reports every Nth round (set it "
                        "to 0)");
    if (lim->hot_every == 1 || lim->hot_every > RL_HOT_EVERY_MAX)
        return rl__errf(err, errlen, RL_ERANGE,
                        "hot_every: %u is outside 2..%u (rounds between a hot key's reports)",
                        (unsigned)lim->hot_every, (unsigned)RL_HOT_EVERY_MAX);
    rl_limit_derived_t d;
    int rc = derive(&d, lim, 1, err, errlen);
    if (rc == 0 && (lim->mode == RL_MODE_EXACT || lim->mode == RL_MODE_TIERED)) {
        /* lua/exact.lua (and report.lua's fleet bucket of a tiered key)
         * count in token-microseconds in Lua's doubles: exact only below
         * 2^53. */
        uint64_t burst = lim->burst != 0 ? lim->burst : lim->rate.count;
        unsigned __int128 span = (unsigned __int128)burst * lim->rate.period_ms * 1000u +
                                 lim->rate.count;
        if (span >= (unsigned __int128)1 << 53)
            return rl__errf(err, errlen, RL_ERANGE,
                            "mode=%s: burst x period must be under 2^53 token-microseconds "
                            "(9e9 token-seconds; %llu tokens over %llu ms is more)",
                            lim->mode == RL_MODE_EXACT ? "exact" : "tiered",
                            (unsigned long long)burst, (unsigned long long)lim->rate.period_ms);
    }
    return rc;
}

/* SPDX-License-Identifier: MIT */
/*
 * Degraded spells: a limit's answers by its on_failure come in runs (an
 * outage of the global tier, Redis slow to answer an exact check, a full
 * table). The first answer of a run is what a person needs to hear of,
 * once, naming the limit: a spell begins at the first degraded answer
 * after the instance's health changed, or a minute after the last spell
 * began, and each is counted (rl_limit_stats_t.degraded_spells) and logged
 * at WARN. Only degraded answers come here: an allowed or denied check by
 * the limit's own bucket costs nothing.
 */
#include "core.h"

/* A run of degraded answers that lasts longer is told again this often. */
#define SPELL_EVERY_FP (UINT64_C(60000) * RL_FP_PER_MS)

static const char *failure_name(int on_failure)
{
    return on_failure == RL_FAIL_OPEN ? "open" : on_failure == RL_FAIL_CLOSED ? "closed" : "local";
}

void rl__degraded_note(rl_t *rl, rl_limit_slot_t *ls, uint64_t health, int on_failure,
                       const char *why)
{
    uint64_t now = rl__clock_now_fp(&rl->clock, RL_CLOCK_PRECISE);
    /* relaxed: the word is the whole state; the CAS decides who begins a
     * spell, and nothing else is published through it. */
    uint64_t mark = atomic_load_explicit(&ls->deg_mark, memory_order_relaxed);
    if (mark != 0 && RL_HEALTH_SINCE(health) <= mark && now < mark + SPELL_EVERY_FP)
        return;
    if (!atomic_compare_exchange_strong_explicit(&ls->deg_mark, &mark, now, memory_order_relaxed,
                                                 memory_order_relaxed))
        return; /* another check began it */
    /* relaxed: a statistic. */
    atomic_fetch_add_explicit(&ls->deg_spells, 1, memory_order_relaxed);
    rl__log(&rl->logger, RL_LOG_WARN,
            "limit %.64s: answering by on_failure=%s: %s (counted in rl_limit_stats' degraded; "
            "told again when the health changes, or in a minute)",
            ls->name, failure_name(on_failure), why);
}

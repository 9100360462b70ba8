#include <string.h>
#include "instance.h"
#include "structsize.h"
#include "sync.h"

void rl_stats_init_sized(rl_stats_t *s, size_t size)
{
    if (s == NULL || size < sizeof s->size)
        return;
    memset(s, 0, size);
    s->size = size;
}

void rl_limit_stats_init_sized(rl_limit_stats_t *s, size_t size)
{
    if (s == NULL || size < sizeof s->size)
        return;
    memset(s, 0, size);
    s->size = size;
}

/* Decisions still in the slots of the limit at index idx (not yet folded
 * into its totals). Walks the table: O(max_keys). */
static void slot_counts(rl_t *rl, uint32_t lref, uint64_t *admitted, uint64_t *denied)
{
    for (size_t i = 0; i < rl->table.nslots; i++) {
        rl_slot_t *s = &rl->table.slots[i];
        /* relaxed: statistics; a slot retired meanwhile was folded. */
        uint64_t c = atomic_load_explicit(&s->ctrl, memory_order_relaxed);
        if (RL_CTRL_STATE(c) == RL_SLOT_LIVE && RL_CTRL_LREF(c) == lref) {
            *admitted += atomic_load_explicit(&s->admitted, memory_order_relaxed);
            *denied += atomic_load_explicit(&s->denied, memory_order_relaxed);
        }
    }
}

static void limit_counts(rl_t *rl, rl_limit_slot_t *ls, int id, rl_limit_stats_t *o)
{
    o->admitted = rl__limit_stat_sum(ls, RL_STAT_ADMITTED);
    o->denied = rl__limit_stat_sum(ls, RL_STAT_DENIED);
    slot_counts(rl, rl__limit_ref(id), &o->admitted, &o->denied);
    o->shadow_denied = rl__limit_stat_sum(ls, RL_STAT_SHADOW);
    o->noslot = rl__limit_stat_sum(ls, RL_STAT_NOSLOT);
    o->degraded = rl__limit_stat_sum(ls, RL_STAT_DEGRADED);
    /* relaxed: a statistic. */
    o->keys_live = atomic_load_explicit(&ls->nkeys, memory_order_relaxed);
}

static void health_stats(rl_t *rl, rl_stats_t *o)
{
    /* relaxed: statistics, and a self-contained state word. */
    uint64_t w = atomic_load_explicit(&rl->health.word, memory_order_relaxed);
    uint64_t now = rl__clock_now_fp(&rl->clock, RL_CLOCK_PRECISE);
    uint64_t since = RL_HEALTH_SINCE(w);
    uint64_t stay = rl->sync != NULL && now > since ? (now - since) / RL_FP_PER_MS : 0;
    o->health = RL_HEALTH_STATE(w);
    o->health_since_ms = stay;
    uint64_t in[3];
    for (int i = 0; i < 3; i++)
        in[i] = atomic_load_explicit(&rl->health.ms_in[i], memory_order_relaxed);
    in[o->health] += stay; /* the current stay counts too */
    o->ms_healthy = in[RL_HEALTH_HEALTHY];
    o->ms_degraded = in[RL_HEALTH_DEGRADED];
    o->ms_recovering = in[RL_HEALTH_RECOVERING];
    o->health_transitions = atomic_load_explicit(&rl->health.transitions, memory_order_relaxed);
    o->health_since_round = atomic_load_explicit(&rl->health.since_round, memory_order_relaxed);
    if (rl->sync != NULL) {
        rl_sync_counters_t c;
        rl__sync_counters(rl->sync, &c);
        o->sync_rounds = c.rounds;
        o->sync_rounds_failed = c.rounds_failed;
        o->sync_reports = c.reports;
        o->sync_errors = c.errors;
        o->sync_connected = c.connected;
    }
}

int rl_stats(rl_t *rl, rl_stats_t *s)
{
    if (rl == NULL || s == NULL)
        return RL_EINVAL;
    int rc = rl__struct_ok(s, s->size, RL_STATS_SIZE_MIN, s->size);
    if (rc != 0)
        return rc;
    if ((rc = rl__fork_check(rl)) != 0)
        return rc;
    rl_stats_t o;
    memset(&o, 0, sizeof o);
    for (uint32_t i = 0; i < rl->limits.cap; i++) {
        rl_limit_slot_t *ls = &rl->limits.slots[i];
        /* relaxed: a removed limit's counters are simply no longer summed. */
        uint32_t id = atomic_load_explicit(&ls->id, memory_order_relaxed);
        if (id == 0)
            continue;
        rl_limit_stats_t l;
        limit_counts(rl, ls, (int)id, &l);
        o.admitted += l.admitted;
        o.denied += l.denied;
        o.shadow_denied += l.shadow_denied;
        o.noslot += l.noslot;
        o.degraded += l.degraded;
        o.degraded_open += rl__limit_stat_sum(ls, RL_STAT_DEG_OPEN);
        o.degraded_closed += rl__limit_stat_sum(ls, RL_STAT_DEG_CLOSED);
        o.degraded_local += rl__limit_stat_sum(ls, RL_STAT_DEG_LOCAL);
    }
    health_stats(rl, &o);
    /* relaxed: statistics. */
    o.keys_live = atomic_load_explicit(&rl->table.live, memory_order_relaxed);
    o.reclaimed = atomic_load_explicit(&rl->table.reclaimed, memory_order_relaxed);
    o.limits = atomic_load_explicit(&rl->limits.count, memory_order_relaxed);
    o.keys_capacity = rl->max_keys;
    o.table_slots = rl->table.nslots;
    o.table_bytes = rl__table_bytes(&rl->table);
    o.size = s->size;
    memcpy(s, &o, s->size < sizeof o ? s->size : sizeof o);
    return 0;
}

int rl_limit_stats(rl_t *rl, int id, rl_limit_stats_t *s)
{
    if (rl == NULL || s == NULL)
        return RL_EINVAL;
    int rc = rl__struct_ok(s, s->size, RL_LIMIT_STATS_SIZE_MIN, s->size);
    if (rc != 0)
        return rc;
    if ((rc = rl__fork_check(rl)) != 0)
        return rc;
    rl_limit_slot_t *ls = rl__limit_get(&rl->limits, id);
    if (ls == NULL)
        return RL_ENOTFOUND;
    rl_limit_stats_t o;
    limit_counts(rl, ls, id, &o);
    o.size = s->size;
    memcpy(s, &o, s->size < sizeof o ? s->size : sizeof o);
    return 0;
}

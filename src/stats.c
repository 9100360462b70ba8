#include <string.h>
#include "instance.h"
#include "structsize.h"

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

static void limit_counts(rl_limit_slot_t *ls, rl_limit_stats_t *o)
{
    o->admitted = rl__limit_stat_sum(ls, RL_STAT_ADMITTED);
    o->denied = rl__limit_stat_sum(ls, RL_STAT_DENIED);
    o->shadow_denied = rl__limit_stat_sum(ls, RL_STAT_SHADOW);
    o->noslot = rl__limit_stat_sum(ls, RL_STAT_NOSLOT);
    o->degraded = rl__limit_stat_sum(ls, RL_STAT_DEGRADED);
    /* relaxed: a statistic. */
    o->keys_live = atomic_load_explicit(&ls->nkeys, memory_order_relaxed);
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
        if (atomic_load_explicit(&ls->id, memory_order_relaxed) == 0)
            continue;
        rl_limit_stats_t l;
        limit_counts(ls, &l);
        o.admitted += l.admitted;
        o.denied += l.denied;
        o.shadow_denied += l.shadow_denied;
        o.noslot += l.noslot;
        o.degraded += l.degraded;
    }
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
    limit_counts(ls, &o);
    o.size = s->size;
    memcpy(s, &o, s->size < sizeof o ? s->size : sizeof o);
    return 0;
}

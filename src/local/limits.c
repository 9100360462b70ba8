/* SPDX-License-Identifier: MIT */
#include <string.h>
#include "local/limits.h"
#include "local/clock.h"
#include "base/alloc.h"
#include "local/keyhash.h"

int rl__limits_init(rl_limits_t *ls, const rl_allocator_t *a, uint32_t cap,
                    uint32_t expected_nodes, int synced, int pshared, uint64_t salt_seed)
{
    ls->slots = rl__calloc(a, (size_t)cap * sizeof *ls->slots, 64);
    if (ls->slots == NULL)
        return RL_ENOMEM;
    pthread_mutexattr_t attr;
    int bad = pthread_mutexattr_init(&attr) != 0;
    /* A shared instance's writers are processes: a process-shared lock, and
     * robust so that a writer's death does not block the others. */
    if (!bad && pshared)
        bad = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED) != 0 ||
              pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST) != 0;
    if (!bad) {
        bad = pthread_mutex_init(&ls->lock, &attr) != 0;
        pthread_mutexattr_destroy(&attr);
    }
    if (bad) {
        rl__free(a, ls->slots, (size_t)cap * sizeof *ls->slots, 64);
        ls->slots = NULL;
        return RL_ENOMEM;
    }
    ls->cap = cap;
    ls->expected_nodes = expected_nodes;
    ls->synced = synced;
    atomic_init(&ls->count, 0);
    atomic_init(&ls->folds_begun, 0);
    atomic_init(&ls->folds_ended, 0);
    for (uint32_t i = 0; i < cap; i++) {
        /* Salts only need to differ between limits and be unknown outside. */
        uint64_t k[2] = {salt_seed, i};
        ls->slots[i].salt = rl__siphash24(k, "limit-salt", 10);
    }
    return 0;
}

void rl__limits_destroy(rl_limits_t *ls, const rl_allocator_t *a)
{
    if (ls->slots == NULL)
        return;
    pthread_mutex_destroy(&ls->lock);
    rl__free(a, ls->slots, (size_t)ls->cap * sizeof *ls->slots, 64);
    ls->slots = NULL;
}

uint64_t rl__limit_stat_sum(rl_limit_slot_t *s, int which)
{
    uint64_t sum = 0;
    for (int i = 0; i < RL_STAT_STRIPES; i++)
        /* acquire: a stats read (stats.c) then sees the fold begun of any
         * harvest whose add it sees (rl__stat_fold_n). */
        sum += atomic_load_explicit(&s->stats[i].c[which], memory_order_acquire);
    return sum;
}

static int params_from_def(rl_limits_t *ls, const rl_limit_t *lim, const rl_clock_t *clk,
                           rl_limit_params_t *p)
{
    rl_limit_derived_t d;
    int rc = rl__limit_validate(lim, NULL, 0);
    if (rc != 0)
        return rc;
    rc = rl__limit_derive(&d, lim, ls->expected_nodes);
    if (rc != 0)
        return rc;
    memset(p, 0, sizeof *p);
    p->normal = d.normal;
    p->degraded = d.degraded;
    p->presync = d.presync;
    p->rate_count = lim->rate.count;
    p->period_ms = lim->rate.period_ms;
    p->mode = lim->mode;
    p->on_failure = lim->on_failure;
    p->shadow = lim->shadow;
    p->max_keys = lim->max_keys;
    p->hot_ppm = lim->hot_ppm;
    p->hot_every = lim->hot_policy != RL_HOT_POLICY_LOCAL ? 0
                   : lim->hot_every != 0                 ? lim->hot_every
                                                         : RL_HOT_EVERY_DEFAULT;
    p->epoch = 0;
    p->prev = d.normal;
    /* exact: decided in Redis per check (exact/exact.c), never synced; tiered is
     * synced like global and confirmed in Redis near the limit (check.c).
     * Local-only instances decide every mode locally. */
    /* An in-flight limit takes the exact branch on every instance: the
     * check path's one cold branch, where its checks are refused (check_exact.c). */
    p->synced = lim->kind == RL_KIND_INFLIGHT                  ? RL_SYNCED_EXACT
                : !ls->synced || lim->mode == RL_MODE_LOCAL ? 0
                : lim->mode == RL_MODE_EXACT              ? RL_SYNCED_EXACT
                : lim->mode == RL_MODE_TIERED             ? RL_SYNCED_TIERED
                                                          : 1;
    /* 128 bits: a burst defaulted from a large count times 10^6 may not
     * fit 64; the quotient is at most the burst. */
    uint64_t ppm = lim->near_ppm != 0 ? lim->near_ppm : RL_NEAR_PPM_DEFAULT;
    uint64_t cb = (uint64_t)(((unsigned __int128)d.normal.burst * ppm + RL_NEAR_PPM_MAX - 1) /
                             RL_NEAR_PPM_MAX);
    p->confirm_below = cb != 0 ? cb : 1;
    /* A new key's fleet-wide remaining is its burst: near from the start
     * when that is under the threshold, with the nodes expected. */
    p->presync_near = p->synced == RL_SYNCED_TIERED &&
                      d.normal.burst < p->confirm_below + ls->expected_nodes;
    /* One clock per limit, fit for both its normal and degraded buckets. */
    uint64_t slack_n = d.normal.tau_fp - d.normal.t_fp;
    uint64_t slack_d = d.degraded.tau_fp - d.degraded.t_fp;
    p->clock_source = rl__clock_pick(clk, slack_n < slack_d ? slack_n : slack_d);
    int plain = (p->synced == 0 || p->synced == 1) && !lim->shadow &&
                (lim->mode == RL_MODE_GLOBAL || lim->mode == RL_MODE_LOCAL ||
                 lim->mode == RL_MODE_EXACT || lim->mode == RL_MODE_TIERED);
    p->path = !plain                                 ? RL_PATH_SLOW
              : p->clock_source == RL_CLOCK_COARSE ? RL_PATH_COARSE
                                                   : RL_PATH_PRECISE;
    if (plain && p->synced)
        p->path |= RL_PATH_SYNCED;
    return 0;
}

/* Writer side of the double buffer; caller holds ls->lock. */
static void params_publish(rl_limit_slot_t *s, const rl_limit_params_t *p)
{
    const uint64_t *w = (const uint64_t *)(const void *)p;
    /* relaxed: only writers (serialised by the lock) store ver. */
    uint32_t next = atomic_load_explicit(&s->ver, memory_order_relaxed) + 1;
    rl_param_copy_t *c = &s->copy[next & 1];
    /* Readers still on this copy were sent to it two publishes ago; the last
     * publish's ver makes their re-read fail. */
    for (size_t i = 0; i < RL_PARAM_WORDS; i++)
        /* release: a reader that sees this word also sees that ver (or a
         * later one) on its re-read. */
        atomic_store_explicit(&c->w[i], w[i], memory_order_release);
    /* release: readers that load this ver see a complete copy. */
    atomic_store_explicit(&s->ver, next, memory_order_release);
}

static int find_locked(rl_limits_t *ls, const char *name)
{
    for (uint32_t i = 0; i < ls->cap; i++) {
        /* relaxed: under the writers' lock, which orders every id store. */
        uint32_t id = atomic_load_explicit(&ls->slots[i].id, memory_order_relaxed);
        if (id != 0 && strncmp(ls->slots[i].name, name, RL_NAME_MAX) == 0)
            return (int)id;
    }
    return RL_ENOTFOUND;
}

int rl__limits_add(rl_limits_t *ls, const rl_limit_t *lim, const rl_clock_t *clk)
{
    rl_limit_params_t p;
    /* Under the lock: the node count the shares divide by may change. */
    rl__limits_lock(ls);
    int rc = params_from_def(ls, lim, clk, &p);
    if (rc != 0) {
        pthread_mutex_unlock(&ls->lock);
        return rc;
    }
    if (find_locked(ls, lim->name) >= 0) {
        pthread_mutex_unlock(&ls->lock);
        return RL_EEXIST;
    }
    rl_limit_slot_t *s = NULL;
    uint32_t idx = 0;
    for (; idx < ls->cap; idx++) {
        rl_limit_slot_t *c = &ls->slots[idx];
        /* relaxed: under the lock. Skip indexes whose generations ran out. */
        if (atomic_load_explicit(&c->id, memory_order_relaxed) == 0 && c->gen < RL_LIMIT_GEN_MAX) {
            s = c;
            break;
        }
    }
    if (s == NULL) {
        pthread_mutex_unlock(&ls->lock);
        return RL_ELIMITS;
    }
    s->gen++;
    uint32_t id = (s->gen << RL_LIMIT_IDX_BITS) | idx;
    memcpy(s->name, lim->name, RL_NAME_MAX);
    s->def = *lim;
    s->def.size = sizeof s->def;
    /* relaxed: nothing reads these until the id is published below. */
    atomic_store_explicit(&s->nkeys, 0, memory_order_relaxed);
    atomic_store_explicit(&s->overflow_tat, 0, memory_order_relaxed);
    atomic_store_explicit(&s->epoch, 0, memory_order_relaxed);
    for (int i = 0; i < RL_STAT_STRIPES; i++)
        for (int j = 0; j < RL_STAT_N; j++)
            atomic_store_explicit(&s->stats[i].c[j], 0, memory_order_relaxed);
    atomic_store_explicit(&s->sync_keys, 0, memory_order_relaxed);
    atomic_store_explicit(&s->sync_over_keys, 0, memory_order_relaxed);
    atomic_store_explicit(&s->sync_usage_max_ppm, 0, memory_order_relaxed);
    atomic_store_explicit(&s->sync_skew_max_ppm, 0, memory_order_relaxed);
    atomic_store_explicit(&s->sync_nodes_max, 0, memory_order_relaxed);
    atomic_store_explicit(&s->deg_mark, 0, memory_order_relaxed);
    atomic_store_explicit(&s->deg_spells, 0, memory_order_relaxed);
    params_publish(s, &p);
    /* release: publishes name, params and zeroed counters with the id. */
    atomic_store_explicit(&s->id, id, memory_order_release);
    atomic_fetch_add_explicit(&ls->count, 1, memory_order_relaxed);
    pthread_mutex_unlock(&ls->lock);
    return (int)id;
}

int rl__limits_update(rl_limits_t *ls, int id, const rl_limit_t *lim, const rl_clock_t *clk,
                      rl_limits_convert_fn convert, void *ctx)
{
    rl_limit_params_t p;
    rl__limits_lock(ls);
    int rc = params_from_def(ls, lim, clk, &p);
    rl_limit_slot_t *s = rl__limit_get(ls, id);
    if (rc != 0)
        ;
    else if (s == NULL)
        rc = RL_ENOTFOUND;
    else if (strncmp(s->name, lim->name, RL_NAME_MAX) != 0)
        rc = RL_ENAME;
    else {
        rl_limit_params_t old;
        s->def = *lim;
        s->def.size = sizeof s->def;
        rl__params_read(s, &old);
        /* Same T: every word already means the same tokens (a new burst only
         * moves the threshold), so the epoch stays and nothing converts. */
        int bump = old.normal.t_fp != p.normal.t_fp;
        p.epoch = old.epoch + (uint64_t)bump;
        p.prev = bump ? old.normal : old.prev;
        params_publish(s, &p);
        if (bump) {
            /* seq_cst: after the publish (so a reader of the new epoch finds
             * the new params), and the store half of the store->load pairing
             * with a claiming inserter (local/table.c): either our sweep sees its
             * slot or it sees this epoch. */
            atomic_store_explicit(&s->epoch, p.epoch, memory_order_seq_cst);
            convert(ctx, id, s, &old, &p);
        }
    }
    pthread_mutex_unlock(&ls->lock);
    return rc;
}

int rl__limits_remove(rl_limits_t *ls, int id)
{
    rl__limits_lock(ls);
    rl_limit_slot_t *s = rl__limit_get(ls, id);
    if (s == NULL) {
        pthread_mutex_unlock(&ls->lock);
        return RL_ENOTFOUND;
    }
    /* seq_cst: pairs with the seq_cst publish + re-check of an inserting
     * checker (local/table.c), so either the purge sees its slot or it sees this. */
    atomic_store_explicit(&s->id, 0, memory_order_seq_cst);
    atomic_fetch_sub_explicit(&ls->count, 1, memory_order_relaxed);
    pthread_mutex_unlock(&ls->lock);
    return 0;
}

int rl__limits_find(rl_limits_t *ls, const char *name)
{
    rl__limits_lock(ls);
    int id = find_locked(ls, name);
    pthread_mutex_unlock(&ls->lock);
    return id;
}

int rl__limits_def(rl_limits_t *ls, int id, rl_limit_t *out)
{
    rl__limits_lock(ls);
    rl_limit_slot_t *s = rl__limit_get(ls, id);
    int rc = RL_ENOTFOUND;
    if (s != NULL) {
        /* Only the caller's size: an older, smaller struct gets the
         * fields it has (the appended ones are never written past it). */
        size_t keep = out->size;
        memcpy(out, &s->def, keep < sizeof s->def ? keep : sizeof s->def);
        out->size = keep;
        rc = 0;
    }
    pthread_mutex_unlock(&ls->lock);
    return rc;
}

int rl__limits_set_nodes(rl_limits_t *ls, uint32_t nodes, const rl_clock_t *clk)
{
    if (nodes == 0)
        return 0;
    rl__limits_lock(ls);
    int changed = ls->expected_nodes != nodes;
    ls->expected_nodes = nodes;
    for (uint32_t i = 0; changed && i < ls->cap; i++) {
        rl_limit_slot_t *s = &ls->slots[i];
        rl_limit_params_t p;
        /* relaxed: under the writers' lock, which orders every id store. A
         * definition that was valid when added stays valid for any count. */
        if (atomic_load_explicit(&s->id, memory_order_relaxed) != 0 &&
            params_from_def(ls, &s->def, clk, &p) == 0)
            params_publish(s, &p);
    }
    pthread_mutex_unlock(&ls->lock);
    return changed;
}

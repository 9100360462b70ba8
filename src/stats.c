/* SPDX-License-Identifier: MIT */
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include "core.h"
#include "stats.h"
#include "inflight/inflight.h"
#include "quota/quota.h"
#include "base/structsize.h"
#include "sync/sync.h"
#include "shm/host.h"
#include "redis/errclass.h"

/* The public per-class fields are the error-class table in its order, one
 * consecutive uint64_t each: a class added to the table without its field
 * (or out of order) fails here. */
#define RL_X_(up, word, doc)                                                        \
    _Static_assert(offsetof(rl_stats_t, sync_err_##word) ==                        \
                       offsetof(rl_stats_t, sync_err_connect) +                    \
                           RL_REDIS_ERR_##up * sizeof(uint64_t),                   \
                   "rl_stats_t.sync_err_" #word " follows redis/errclass.h");
RL_REDIS_ERR_MAP(RL_X_)
#undef RL_X_

/* A limit's totals: each rl_limit_stats_t field and the striped counter
 * (local/limits.h) it sums. rl_stats_t has a field of each name too: the sum over
 * the limits. */
#define RL_STATS_LIMIT_MAP(X)                                                      \
    X(admitted, RL_STAT_ADMITTED)                                                  \
    X(denied, RL_STAT_DENIED)                                                      \
    X(shadow_denied, RL_STAT_SHADOW)                                               \
    X(noslot, RL_STAT_NOSLOT)                                                      \
    X(degraded, RL_STAT_DEGRADED)

/* rl_stats_t's fields summed over the limits that rl_limit_stats_t lacks. */
#define RL_STATS_DEGRADED_MAP(X)                                                   \
    X(degraded_open, RL_STAT_DEG_OPEN)                                             \
    X(degraded_closed, RL_STAT_DEG_CLOSED)                                         \
    X(degraded_local, RL_STAT_DEG_LOCAL)

/* rl_stats_t's sync figures: each field and the sync thread's counter
 * (sync/sync.h, RL_SYNC_COUNTERS_*) it shows; the per-class errors are
 * RL_REDIS_ERR_MAP's rows. */
#define RL_STATS_SYNC_MAP(X)                                                       \
    X(sync_rounds, rounds)                                                         \
    X(sync_rounds_failed, rounds_failed)                                           \
    X(sync_reports, reports)                                                       \
    X(sync_errors, errors)                                                         \
    X(sync_connected, connected)                                                   \
    X(sync_rounds_completed, rounds_ok)                                            \
    X(sync_round_us_sum, round_us_sum)                                             \
    X(sync_round_us_last, round_us_last)                                           \
    X(sync_round_us_max, round_us_max)                                             \
    X(sync_reports_last_round, reports_last)

void rl_stats_init_sized(rl_stats_t *s, size_t size) { rl__struct_init(s, size, NULL, 0); }

void rl_limit_stats_init_sized(rl_limit_stats_t *s, size_t size)
{
    rl__struct_init(s, size, NULL, 0);
}

/*
 * The decision counts still in table slots (not yet folded into the limits'
 * totals) are summed by walking the table: O(max_keys). One walk serves a
 * window of RL_STATS_WINDOW consecutive limit indexes, so rl_stats and a
 * metrics scrape cost one walk per 64 limit indexes in use, not one per
 * limit (100 limits on a 1M-key table: 2 walks, where it took 100).
 */
#define RL_STATS_WINDOW 64

typedef struct window {
    uint32_t base;                   /* first limit index of the window */
    uint64_t present;                /* bit i: index base + i is wanted */
    uint32_t lref[RL_STATS_WINDOW];  /* the slot reference each one has */
    uint64_t admitted[RL_STATS_WINDOW];
    uint64_t denied[RL_STATS_WINDOW];
} window_t;

static void window_begin(window_t *w, uint32_t base)
{
    memset(w, 0, sizeof *w);
    w->base = base;
}

static void window_want(window_t *w, int id)
{
    uint32_t i = ((uint32_t)id & RL_LIMIT_IDX_MASK) - w->base;
    w->present |= UINT64_C(1) << i;
    w->lref[i] = rl__limit_ref(id);
}

static void window_walk(rl_t *rl, window_t *w)
{
    for (size_t i = 0; i < rl->table.nslots; i++) {
        rl_slot_t *s = &rl->table.slots[i];
        /* relaxed: statistics; a slot retired meanwhile was folded. */
        uint64_t c = atomic_load_explicit(&s->ctrl, memory_order_relaxed);
        if (RL_CTRL_STATE(c) != RL_SLOT_LIVE)
            continue;
        uint32_t lref = RL_CTRL_LREF(c);
        uint32_t idx = lref & RL_LIMIT_IDX_MASK;
        if (idx < w->base || idx - w->base >= RL_STATS_WINDOW)
            continue;
        uint32_t k = idx - w->base;
        if ((w->present >> k & 1) && w->lref[k] == lref) {
            /* acquire: a harvest's swap of these (release) seen here means
             * its fold is seen begun (rl__limit_stats_many). */
            w->admitted[k] += atomic_load_explicit(&s->admitted, memory_order_acquire);
            w->denied[k] += atomic_load_explicit(&s->denied, memory_order_acquire);
        }
    }
}

/* A limit's counters but the slot counts, which the window adds. */
static void limit_totals(rl_limit_slot_t *ls, rl_limit_stats_t *o)
{
    memset(o, 0, sizeof *o);
#define RL_X_(field, counter) o->field = rl__limit_stat_sum(ls, counter);
    RL_STATS_LIMIT_MAP(RL_X_)
#undef RL_X_
    /* relaxed: a statistic. */
    o->keys_live = atomic_load_explicit(&ls->nkeys, memory_order_relaxed);
    o->degraded_spells = atomic_load_explicit(&ls->deg_spells, memory_order_relaxed);
    rl__limit_sync_stats(ls, o);
}

/* Attempts at a read that no harvest overlapped; after them the last read
 * is returned (each figure then within what one harvest moved). */
#define RL_STATS_READ_TRIES 64

static void limit_stats_once(rl_t *rl, const int *ids, uint32_t n, rl_limit_stats_t *out)
{
    window_t w;
    for (uint32_t i = 0; i < n;) {
        window_begin(&w, (uint32_t)ids[i] & RL_LIMIT_IDX_MASK);
        uint32_t j = i;
        /* Ascending: every index from here on is >= base. */
        for (; j < n && ((uint32_t)ids[j] & RL_LIMIT_IDX_MASK) - w.base < RL_STATS_WINDOW; j++)
            window_want(&w, ids[j]);
        window_walk(rl, &w);
        for (; i < j; i++) {
            uint32_t k = ((uint32_t)ids[i] & RL_LIMIT_IDX_MASK) - w.base;
            rl_limit_slot_t *ls = &rl->limits.slots[(uint32_t)ids[i] & RL_LIMIT_IDX_MASK];
            limit_totals(ls, &out[i]);
            out[i].admitted += w.admitted[k];
            out[i].denied += w.denied[k];
        }
    }
}

/* The slot walk and the totals, with no harvest moving counts from one to
 * the other in between (local/limits.h: rl__limits_fold_begin): a seqlock read with
 * begun/ended counts, since harvests may overlap each other. */
void rl__limit_stats_many(rl_t *rl, const int *ids, uint32_t n, rl_limit_stats_t *out)
{
    for (int tries = 0;; tries++) {
        /* acquire: a harvest that ended has its moves visible to the reads. */
        uint64_t ended = atomic_load_explicit(&rl->limits.folds_ended, memory_order_acquire);
        uint64_t begun = atomic_load_explicit(&rl->limits.folds_begun, memory_order_relaxed);
        limit_stats_once(rl, ids, n, out);
        /* relaxed: the reads above are acquire loads; one that saw a move
         * of a harvest (a release operation after its begin) makes this
         * load see that harvest begun. */
        uint64_t begun2 = atomic_load_explicit(&rl->limits.folds_begun, memory_order_relaxed);
        if ((begun == ended && begun2 == begun) || tries + 1 >= RL_STATS_READ_TRIES)
            return;
        sched_yield(); /* let the harvest finish */
    }
}

static void health_stats(rl_t *rl, rl_stats_t *o)
{
    /* relaxed: statistics, and a self-contained state word. */
    uint64_t w = atomic_load_explicit(&rl->health.word, memory_order_relaxed);
    uint64_t now = rl__clock_now_fp(&rl->clock, RL_CLOCK_PRECISE);
    uint64_t since = RL_HEALTH_SINCE(w);
    uint64_t stay = rl__has_global(rl) && now > since ? (now - since) / RL_FP_PER_MS : 0;
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
    if (rl__has_global(rl)) {
        rl_sync_counters_t c;
        rl_sync_fleet_t f;
        if (rl->sync != NULL) {
            rl__sync_counters(rl->sync, &c);
            rl__sync_fleet(rl->sync, &f);
        } else { /* the host's, from any process */
            rl__shsync_counters(rl->shsync, &c);
            rl__shsync_fleet(rl->shsync, &f);
        }
#define RL_X_(field, counter) o->field = c.counter;
        RL_STATS_SYNC_MAP(RL_X_)
#undef RL_X_
#define RL_X_(up, word, doc) o->sync_err_##word = c.by_class[RL_REDIS_ERR_##up];
        RL_REDIS_ERR_MAP(RL_X_)
#undef RL_X_
        o->fleet_nodes = f.nodes;
        o->fleet_split_rounds = f.split_rounds;
        o->fleet_split_fingerprints = f.split_fps;
    }
    o->log_dropped = rl__log_dropped(&rl->logger);
    rl__quotas_stats(rl__quotas_of(rl), o);
}

void rl__stats_read(rl_t *rl, rl_stats_t *o, int slot_counts)
{
    memset(o, 0, sizeof *o);
    for (uint32_t base = 0; base < rl->limits.cap; base += RL_STATS_WINDOW) {
        int ids[RL_STATS_WINDOW];
        uint32_t k = 0;
        for (uint32_t j = 0; j < RL_STATS_WINDOW && base + j < rl->limits.cap; j++) {
            /* relaxed: a removed limit's counters are simply no longer summed. */
            int id = (int)atomic_load_explicit(&rl->limits.slots[base + j].id, memory_order_relaxed);
            if (id != 0)
                ids[k++] = id;
        }
        rl_limit_stats_t l[RL_STATS_WINDOW];
        if (slot_counts)
            rl__limit_stats_many(rl, ids, k, l);
        for (uint32_t j = 0; j < k; j++) {
            rl_limit_slot_t *ls = &rl->limits.slots[(uint32_t)ids[j] & RL_LIMIT_IDX_MASK];
            if (!slot_counts)
                limit_totals(ls, &l[j]);
            l[j].admitted += rl__inflight_admitted(rl, ids[j]);
#define RL_X_(field, counter) o->field += l[j].field;
            RL_STATS_LIMIT_MAP(RL_X_)
#undef RL_X_
#define RL_X_(field, counter) o->field += rl__limit_stat_sum(ls, counter);
            RL_STATS_DEGRADED_MAP(RL_X_)
#undef RL_X_
        }
    }
    health_stats(rl, o);
    /* relaxed: statistics. */
    o->keys_live = atomic_load_explicit(&rl->table.live, memory_order_relaxed);
    o->reclaimed = atomic_load_explicit(&rl->table.reclaimed, memory_order_relaxed);
    o->limits = atomic_load_explicit(&rl->limits.count, memory_order_relaxed);
    o->keys_capacity = rl->table.max_keys;
    o->table_slots = rl->table.nslots;
    o->table_bytes = rl__table_bytes(&rl->table);
    o->size = sizeof *o;
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
    rl__stats_read(rl, &o, 1);
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
    rl__limit_stats_many(rl, &id, 1, &o);
    o.size = sizeof o;
    rl__inflight_stats(rl, id, &o);
    o.size = s->size;
    memcpy(s, &o, s->size < sizeof o ? s->size : sizeof o);
    return 0;
}

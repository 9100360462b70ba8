/* SPDX-License-Identifier: MIT */
/*
 * The limit registry: a fixed array of limit slots allocated at rl_open.
 *
 * Writers (rl_limit_add/update/remove) serialise on one mutex; they are the
 * control path. Readers (rl_check) take no lock: a limit's parameters are
 * double-buffered, a version word counts the publishes and selects the copy
 * readers use, and a writer only ever writes the other copy. A copy is
 * rewritten only two publishes after readers were sent to it, the first of
 * which already moved the version, so a reader that finds the version
 * unchanged after its read read one whole copy; it retries only when an
 * update completed during its read (lock-free, never a wait on a preempted
 * writer).
 *
 * A limit id is (generation << RL_LIMIT_IDX_BITS) | index, so an id that was
 * removed stays RL_ENOTFOUND even after its index is reused.
 *
 * Epochs (local/bucket.h): an update that changes T publishes epoch + 1 with the
 * previous parameters in `prev`, stores the epoch in the slot, then, still
 * under the writers' lock, converts every bucket word of the limit. So when
 * an update returns, every word is in the current epoch, and during one a
 * word is in the current or the previous one; a check tells which by the
 * word's parity bit. A check whose own snapshot is older than a word it
 * meets reads the parameters again.
 */
#ifndef RL_LIMITS_H
#define RL_LIMITS_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "ratelimit.h"
#include "local/bucket.h"
#include "local/limitdef.h"

#define RL_LIMIT_IDX_BITS 12
#define RL_LIMIT_IDX_MASK ((1u << RL_LIMIT_IDX_BITS) - 1)
#define RL_LIMIT_GEN_MAX ((1u << (31 - RL_LIMIT_IDX_BITS)) - 1)

/* Stats counters are striped per limit so checks of different keys on
 * different threads do not bounce one cache line. */
#define RL_STAT_STRIPES 16
enum {
    RL_STAT_ADMITTED,
    RL_STAT_DENIED,
    RL_STAT_SHADOW,
    RL_STAT_NOSLOT,
    RL_STAT_DEGRADED, /* decided by on_failure, for any reason */
    RL_STAT_DEG_OPEN, /* ... while the instance was degraded, by policy */
    RL_STAT_DEG_CLOSED,
    RL_STAT_DEG_LOCAL,
    RL_STAT_N
};

typedef struct rl_stat_stripe {
    _Atomic uint64_t c[RL_STAT_N];
} __attribute__((aligned(64))) rl_stat_stripe_t;

/* Sized by the enum it is indexed by; a counter more than fits one cache
 * line must widen the stripe on purpose, not spill into a second line. */
_Static_assert(sizeof(rl_stat_stripe_t) == 64, "RL_STAT_N counters fit one cache line");

/* What the hot path needs of a limit, as one consistent snapshot. Every
 * field is a 64-bit integer: the reader stores the published words straight
 * into the struct (no copy through a buffer, whose wider reloads stall store
 * forwarding), and same-size integer lvalues may alias. The order matters:
 * a check reads only a prefix (rl__params_read_n). */
typedef struct rl_limit_params {
    /* every check */
    rl_gcra_t normal;
    int64_t clock_source;
    uint64_t synced; /* 1: keys report to the global tier (instance has Redis);
                        RL_SYNCED_EXACT: decided in Redis per check;
                        RL_SYNCED_TIERED: reported like 1, confirmed in
                        Redis near the limit */
    int64_t shadow;
    uint64_t max_keys;
    int64_t on_failure;
    uint64_t epoch; /* bumped by each update that changes normal.t_fp */
    uint64_t path;  /* RL_PATH_*: which check path the limit's keys take */
    /* checks of synced limits */
    rl_gcra_t presync; /* a synced key's share before its first sync */
    uint64_t presync_near; /* tiered: a key is near before its first sync
                              (its burst is under the confirm threshold) */
    /* checks whose caller reads the decision */
    uint64_t rate_count;
    uint64_t period_ms;
    /* the control path */
    int64_t mode;
    rl_gcra_t degraded;
    /* a check that meets a word of the previous epoch */
    rl_gcra_t prev; /* normal of epoch - 1 (of epoch 0: normal itself) */
    /* tiered: a key whose fleet-wide remaining is under this many tokens,
     * plus one a live node, is near its limit (the sync thread sets its
     * share word's NEAR bit) */
    uint64_t confirm_below;
    /* hot-key marking (hot/hot.c) */
    uint64_t hot_ppm;
    /* hot_policy=local: a hot key near its share reports every this many
     * rounds (sync/round.c); 0: hot_policy=sync */
    uint64_t hot_every;
} rl_limit_params_t;

/*
 * rl_limit_params_t.path: decided once per publish from the definition, so
 * a check branches once instead of testing each rare feature. The fast
 * paths (check_fast.c) answer a key of a limit that is not a shadow and is
 * decided locally (COARSE or PRECISE, its clock) or synced like global
 * (the same, | SYNCED: the key's share word decides); every other limit
 * (exact, tiered, shadow, a mode this build's fast path does not know) is
 * SLOW, the full check (check.c). A key's or the instance's rare states
 * (marked hot, a word of another epoch, not yet in the table, a synced
 * limit while the instance is degraded) send a check to the full one as
 * they are met.
 */
enum { RL_PATH_SLOW = 0, RL_PATH_COARSE = 1, RL_PATH_PRECISE = 2, RL_PATH_SYNCED = 4 };

/* One parameter of a copy, in place (acquire: as rl__params_read_n's). */
#define RL_PARAM_AT(c, field)                                                            \
    atomic_load_explicit(&(c)->w[offsetof(rl_limit_params_t, field) / 8], memory_order_acquire)

/* rl_limit_params_t.synced of an exact limit on an instance with Redis. */
#define RL_SYNCED_EXACT 2
/* ... of a tiered limit there: synced, and confirmed in Redis near the limit. */
#define RL_SYNCED_TIERED 3

#define RL_PARAM_HOT_WORDS (offsetof(rl_limit_params_t, presync) / 8)
#define RL_PARAM_SYNCED_WORDS (offsetof(rl_limit_params_t, rate_count) / 8)
#define RL_PARAM_DETAIL_WORDS (offsetof(rl_limit_params_t, mode) / 8)

#define RL_PARAM_WORDS (sizeof(rl_limit_params_t) / 8)

typedef struct rl_param_copy {
    _Atomic uint64_t w[RL_PARAM_WORDS];
} rl_param_copy_t;

typedef struct rl_limit_slot {
    _Atomic uint32_t id;  /* current id, 0 when free */
    _Atomic uint32_t ver; /* params publishes so far: readers use copy[ver & 1] */
    /* The published params' epoch, stored after them: a check that wrote a
     * word reads it to learn whether updates overtook its snapshot. */
    _Atomic uint64_t epoch;
    rl_param_copy_t copy[2];
    _Atomic uint64_t nkeys;       /* table slots held by this limit */
    _Atomic uint64_t overflow_tat; /* the shared bucket for keys with no slot */
    uint64_t salt;                /* spreads equal keys of different limits */
    uint32_t gen;                 /* writer-only: last generation handed out */
    char name[RL_NAME_MAX];       /* writer-only while live (readers take its address) */
    rl_limit_t def;               /* writer-only: as added/updated */
    rl_stat_stripe_t stats[RL_STAT_STRIPES];
    /* What Redis said of this limit's keys over the last complete window of
     * RL_STATS_SYNC_WINDOW rounds (rl_limit_stats_t): stored by the sync
     * thread at each window's end, zeroed when the limit is added. */
    _Atomic uint64_t sync_keys;
    _Atomic uint64_t sync_over_keys;
    _Atomic uint32_t sync_usage_max_ppm;
    _Atomic uint32_t sync_skew_max_ppm;
    _Atomic uint32_t sync_nodes_max;
    /* Degraded spells (src/degraded.c): the instance time the current one
     * began (0: none yet), and how many began. Written on degraded answers
     * only, zeroed when the limit is added. */
    _Atomic uint64_t deg_mark;
    _Atomic uint64_t deg_spells;
} rl_limit_slot_t;

typedef struct rl_limits {
    rl_limit_slot_t *slots;
    uint32_t cap;
    uint32_t expected_nodes; /* the pessimistic shares' divisor: expected_nodes,
                                then the registry's live count (under lock) */
    int synced; /* instance has a global tier */
    pthread_mutex_t lock;
    _Atomic uint32_t count;
    /* Harvests that move slot counters into the limits' totals (a sync
     * round's, rl_hotkeys's): begun and ended, so that rl_limit_stats,
     * which adds the two, can tell it read both sides of none
     * (rl__limits_fold_begin). */
    _Atomic uint64_t folds_begun, folds_ended;
} rl_limits_t;

_Static_assert(sizeof(rl_limit_params_t) % 8 == 0, "params are whole words");

/*
 * Take the registry writers' lock. In a shared instance (rl_open_shared) it
 * is process-shared and robust: if its holder died, the next taker gets it
 * (EOWNERDEAD) and marks it consistent. The registry is consistent whatever
 * point the dead writer reached: a limit's parameters are written to the copy
 * readers are not pointed at and published by one store, and a new limit by
 * the store of its id, so the interrupted change either happened or did not.
 */
static inline void rl__limits_lock(rl_limits_t *ls)
{
    if (pthread_mutex_lock(&ls->lock) == EOWNERDEAD)
        pthread_mutex_consistent(&ls->lock);
}

/*
 * Read a consistent copy of a limit's parameters: the words a check needs
 * (the hot prefix; the presync bucket if synced; the decision figures if
 * `detail`), or all of them (rl__params_read). The rest of *out is left
 * unset.
 */
static inline void rl__params_read_n(rl_limit_slot_t *ls, rl_limit_params_t *out, int all,
                                     int detail)
{
    uint64_t *w = (uint64_t *)(void *)out;
    for (;;) {
        /* acquire: pairs with the writer's release store of ver, so the copy
         * it selects is fully written when we start reading. */
        uint32_t v = atomic_load_explicit(&ls->ver, memory_order_acquire);
        const rl_param_copy_t *p = &ls->copy[v & 1];
        /* Constant counts, unrolled: the hot prefix, then the synced or the
         * decision words, with no loop. Each load is acquire: a word from a
         * newer write (release, after that writer's store of a newer ver)
         * carries that ver to the re-read below, which then fails. No
         * fence: TSan models acquire loads, and on x86 both are free. */
#pragma GCC unroll 16
        for (size_t i = 0; i < RL_PARAM_HOT_WORDS; i++)
            w[i] = atomic_load_explicit(&p->w[i], memory_order_acquire);
        if (all) {
            for (size_t i = RL_PARAM_HOT_WORDS; i < RL_PARAM_WORDS; i++)
                w[i] = atomic_load_explicit(&p->w[i], memory_order_acquire);
        } else if (detail) {
#pragma GCC unroll 16
            for (size_t i = RL_PARAM_HOT_WORDS; i < RL_PARAM_DETAIL_WORDS; i++)
                w[i] = atomic_load_explicit(&p->w[i], memory_order_acquire);
        } else if (out->synced) {
#pragma GCC unroll 16
            for (size_t i = RL_PARAM_HOT_WORDS; i < RL_PARAM_SYNCED_WORDS; i++)
                w[i] = atomic_load_explicit(&p->w[i], memory_order_acquire);
        }
        /* relaxed: ordered after the word loads by their acquire. */
        if (atomic_load_explicit(&ls->ver, memory_order_relaxed) == v)
            break;
    }
}

static inline void rl__params_read(rl_limit_slot_t *ls, rl_limit_params_t *out)
{
    rl__params_read_n(ls, out, 1, 1);
}

/* The live limit slot for an id, or NULL (unknown, removed). */
static inline rl_limit_slot_t *rl__limit_get(rl_limits_t *ls, int id)
{
    if (id <= 0)
        return NULL;
    uint32_t idx = (uint32_t)id & RL_LIMIT_IDX_MASK;
    if (idx >= ls->cap)
        return NULL;
    rl_limit_slot_t *s = &ls->slots[idx];
    /* acquire: a matching id means the add that published it (params, name)
     * happened before our reads of them. */
    return atomic_load_explicit(&s->id, memory_order_acquire) == (uint32_t)id ? s : NULL;
}

/* The 16-bit reference a table slot carries: index and low generation bits. */
static inline uint32_t rl__limit_ref(int id)
{
    uint32_t u = (uint32_t)id;
    return (u & RL_LIMIT_IDX_MASK) | (((u >> RL_LIMIT_IDX_BITS) & 0xf) << RL_LIMIT_IDX_BITS);
}

/* Count events on a limit's stripe (relaxed: counters, not publication).
 * The stripes are the totals of the limit: rare events (no slot, shadow,
 * degraded) go here directly; per-slot decision counts are folded in. */
static inline void rl__stat_add_n(rl_limit_slot_t *ls, unsigned stripe, int which, uint64_t n)
{
    if (n != 0)
        atomic_fetch_add_explicit(&ls->stats[stripe % RL_STAT_STRIPES].c[which], n,
                                  memory_order_relaxed);
}

/* The sync window's figures into a stats struct. */
static inline void rl__limit_sync_stats(rl_limit_slot_t *ls, rl_limit_stats_t *o)
{
    /* relaxed: statistics, each figure self-contained. */
    o->sync_keys = atomic_load_explicit(&ls->sync_keys, memory_order_relaxed);
    o->overshoot_keys = atomic_load_explicit(&ls->sync_over_keys, memory_order_relaxed);
    o->usage_max_ppm = atomic_load_explicit(&ls->sync_usage_max_ppm, memory_order_relaxed);
    o->share_skew_max_ppm = atomic_load_explicit(&ls->sync_skew_max_ppm, memory_order_relaxed);
    o->nodes_max = atomic_load_explicit(&ls->sync_nodes_max, memory_order_relaxed);
}

/* The same for a harvest's fold (rl__limits_fold_begin). release: a
 * stats read whose acquire load sees this add (or a later one) sees the
 * fold begun. */
static inline void rl__stat_fold_n(rl_limit_slot_t *ls, unsigned stripe, int which, uint64_t n)
{
    if (n != 0)
        atomic_fetch_add_explicit(&ls->stats[stripe % RL_STAT_STRIPES].c[which], n,
                                  memory_order_release);
}

static inline void rl__stat_add(rl_limit_slot_t *ls, unsigned stripe, int which)
{
    rl__stat_add_n(ls, stripe, which, 1);
}

/*
 * Around a harvest that moves slot counters into the limits' totals: a
 * stats read that overlapped one (and could have counted a decision in its
 * slot and again in the totals, or in neither) reads again. The retire
 * path's single-slot fold does not use them: a read racing a retire of a
 * key it is counting may still be off by that key's uncounted decisions.
 */
static inline void rl__limits_fold_begin(rl_limits_t *ls)
{
    /* relaxed: the harvest's moves that follow are release operations
     * (rl__stat_fold_n, the slot swaps), so a reader whose acquire load
     * sees one of them sees this count too. (No fence: GCC's TSan does not
     * model atomic_thread_fence.) */
    atomic_fetch_add_explicit(&ls->folds_begun, 1, memory_order_relaxed);
}

static inline void rl__limits_fold_end(rl_limits_t *ls)
{
    /* release: the moves happen before a reader that sees it ended. */
    atomic_fetch_add_explicit(&ls->folds_ended, 1, memory_order_release);
}

/* pshared: the registry is in a shared instance's mapping (its allocator
 * is the shared arena), written by several processes. */
int rl__limits_init(rl_limits_t *ls, const rl_allocator_t *a, uint32_t cap,
                    uint32_t expected_nodes, int synced, int pshared, uint64_t salt_seed);
void rl__limits_destroy(rl_limits_t *ls, const rl_allocator_t *a);
uint64_t rl__limit_stat_sum(rl_limit_slot_t *s, int which);

struct rl_table;
struct rl_clock;
int rl__limits_add(rl_limits_t *ls, const rl_limit_t *lim, const struct rl_clock *clk);

/* Converts a limit's bucket words from one epoch's T to the next; called
 * under the writers' lock, after the new parameters are published. */
typedef void (*rl_limits_convert_fn)(void *ctx, int id, rl_limit_slot_t *s,
                                     const rl_limit_params_t *from, const rl_limit_params_t *to);

/* Publish new parameters; if T changed, bump the epoch and run `convert`
 * before any other update can start. */
int rl__limits_update(rl_limits_t *ls, int id, const rl_limit_t *lim, const struct rl_clock *clk,
                      rl_limits_convert_fn convert, void *ctx);
/* Unpublish the limit; the caller then frees its table slots. */
int rl__limits_remove(rl_limits_t *ls, int id);
int rl__limits_find(rl_limits_t *ls, const char *name);
int rl__limits_def(rl_limits_t *ls, int id, rl_limit_t *out);
/* Divide the pessimistic shares (presync, default degraded) by `nodes` from
 * now on, republishing every limit's parameters if it changed (1), else 0.
 * nodes 0 is ignored. Takes the writers' lock: the sync thread's call. */
int rl__limits_set_nodes(rl_limits_t *ls, uint32_t nodes, const struct rl_clock *clk);

#endif

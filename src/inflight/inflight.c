/* SPDX-License-Identifier: MIT */
/*
 * The in-flight module's lifetime and its blocks: one per in-flight limit,
 * allocated by rl_limit_add (keys, permit records and the block in one
 * allocation), updated in place, unpublished by its removal and freed by
 * rl_close (internal.h, rl__ifl_enter: so calls never count themselves in).
 * Statistics, class names, and the refusal of checks.
 */
#include <string.h>
#include "inflight/keys.h"
#include "inflight/global.h"

int rl__inflight_create(const rl_allocator_t *a, const rl_inflight_cfg_t *cfg,
                        struct rl_inflight **out)
{
    struct rl_inflight *m = rl__calloc(a, sizeof *m, 64);
    if (m == NULL)
        return RL_ENOMEM;
    m->alloc = *a;
    m->cap = cfg->max_limits;
    m->tag = cfg->tag;
    m->expected_nodes = cfg->expected_nodes;
    m->blocks = rl__calloc(a, sizeof *m->blocks * m->cap, 64);
    if (m->blocks == NULL || pthread_mutex_init(&m->lock, NULL) != 0) {
        rl__free(a, (void *)m->blocks, sizeof *m->blocks * m->cap, 64);
        rl__free(a, m, sizeof *m, 64);
        return RL_ENOMEM;
    }
    *out = m;
    return 0;
}

static void block_free(struct rl_inflight *m, rl_ifl_t *b)
{
    rl__ifl_global_free(&m->alloc, b->g);
    rl__free(&m->alloc, b, b->bytes, 64);
}

/* An unpublished block onto the retired list (under the module's lock):
 * a call that loaded it before may still be inside, for a few atomic
 * operations or a sweep; rl_close, which runs alone, frees it. */
static void block_retire(struct rl_inflight *m, rl_ifl_t *b)
{
    b->retired = m->retired;
    m->retired = b;
    m->retired_bytes += b->bytes;
}

void rl__inflight_destroy(struct rl_inflight *m)
{
    if (m == NULL)
        return;
    for (uint32_t i = 0; i < m->cap; i++) {
        /* relaxed: rl_close runs alone. */
        rl_ifl_t *b = atomic_load_explicit(&m->blocks[i], memory_order_relaxed);
        if (b != NULL)
            block_free(m, b);
    }
    while (m->retired != NULL) {
        rl_ifl_t *b = m->retired;
        m->retired = b->retired;
        block_free(m, b);
    }
    pthread_mutex_destroy(&m->lock);
    rl__free(&m->alloc, (void *)m->blocks, sizeof *m->blocks * m->cap, 64);
    rl_allocator_t a = m->alloc;
    rl__free(&a, m, sizeof *m, 64);
}

static uint32_t pow2_at_least(uint64_t n)
{
    uint32_t p = 16;
    while (p < n)
        p <<= 1;
    return p;
}

/* The parameters acquires read; under the module's lock. */
static void params_store(rl_ifl_t *b, const rl_limit_t *lim, const rl_inflight_def_t *d)
{
    /* relaxed: parameters, each self-contained; an acquire racing an
     * update may use either value of each. */
    atomic_store_explicit(&b->max_hold_ns, d->max_hold_ns, memory_order_relaxed);
    atomic_store_explicit(&b->precise, d->algo != RL_INFLIGHT_FIXED, memory_order_relaxed);
    for (uint32_t i = 0; i < RL_INFLIGHT_CLASSES; i++) {
        atomic_store_explicit(&b->class_ppm[i], d->class_ppm[i], memory_order_relaxed);
        memcpy(b->class_name[i], lim->classes[i].name, RL_INFLIGHT_CLASS_NAME);
    }
    atomic_store_explicit(&b->nclasses, d->nclasses, memory_order_relaxed);
    rl__ifl_exact_store(b, lim);
}

static rl_ifl_t *block_new(struct rl_inflight *m, const rl_inflight_def_t *d)
{
    uint32_t entries = pow2_at_least((uint64_t)d->keys * 2);
    size_t head = (sizeof(rl_ifl_t) + 63) & ~(size_t)63;
    size_t bytes = head + sizeof(rl_ifl_key_t) * entries + sizeof(rl_ifl_rec_t) * d->pool;
    rl_ifl_t *b = rl__calloc(&m->alloc, bytes, 64);
    if (b == NULL)
        return NULL;
    b->bytes = bytes;
    b->mask = entries - 1;
    b->pool = d->pool;
    b->keys = (rl_ifl_key_t *)(void *)((char *)b + head);
    b->recs = (rl_ifl_rec_t *)(void *)(b->keys + entries);
    return b; /* zeroed: free entries, free records of generation 0 */
}

int rl__inflight_add(rl_t *rl, int id, const rl_limit_t *lim)
{
    struct rl_inflight *m = rl->inflight;
    rl_inflight_def_t d;
    rl__inflight_resolve(lim, &d);
    rl__ifl_exact_resolve(rl, lim, &d);
    rl_ifl_t *b = block_new(m, &d);
    if (b == NULL)
        return RL_ENOMEM;
    b->id = id;
    b->salt = rl__siphash24(rl->kh.name, &id, sizeof id);
    if (rl__inflight_is_global(rl, lim)) {
        /* The fleet's nodes name a key alike: its tag is the lease's key
         * in Redis, so the salt is the limit's name's, not its id's. */
        b->salt = rl__siphash24(rl->kh.name, lim->name, strnlen(lim->name, RL_NAME_MAX));
        b->g = rl__ifl_global_new(&m->alloc, b->mask + 1u, lim, d.max,
                                   rl->limits.expected_nodes);
        if (b->g == NULL) {
            block_free(m, b);
            return RL_ENOMEM;
        }
    }
    pthread_mutex_lock(&m->lock);
    if (m->retired_bytes >= RL_INFLIGHT_RETIRED_MAX) {
        uint64_t held = m->retired_bytes;
        pthread_mutex_unlock(&m->lock);
        block_free(m, b);
        rl__log(&rl->logger, RL_LOG_ERROR,
                "limit %.64s: not added: removed in-flight limits hold %llu MiB until rl_close "
                "(at most %llu MiB); change a limit in place with rl_limit_update",
                lim->name, (unsigned long long)(held >> 20),
                (unsigned long long)(RL_INFLIGHT_RETIRED_MAX >> 20));
        return RL_ENOMEM;
    }
    params_store(b, lim, &d);
    uint64_t now = rl__ifl_now(rl, b);
    atomic_store_explicit(&b->next_sweep_ns, now + d.max_hold_ns / 4, memory_order_relaxed);
    rl__ifl_sampler_reset(b, &d, now);
    /* A block still there is a removed limit's whose own removal step has
     * not run yet: retired here, as that step would. */
    _Atomic(rl_ifl_t *) *at = &m->blocks[(uint32_t)id & RL_LIMIT_IDX_MASK];
    /* relaxed: under the lock, which orders every store of the pointer. */
    rl_ifl_t *old = atomic_load_explicit(at, memory_order_relaxed);
    if (old != NULL)
        block_retire(m, old);
    /* release: the block's contents before an entry that loads it. */
    atomic_store_explicit(at, b, memory_order_release);
    pthread_mutex_unlock(&m->lock);
    return 0;
}

int rl__inflight_update(rl_t *rl, int id, const rl_limit_t *lim)
{
    struct rl_inflight *m = rl->inflight;
    rl_inflight_def_t d;
    rl__inflight_resolve(lim, &d);
    rl__ifl_exact_resolve(rl, lim, &d);
    pthread_mutex_lock(&m->lock); /* removals take it too: b stays */
    rl_ifl_t *b = rl__ifl_enter(m, id);
    if (b != NULL)
        rl__ifl_leave(rl->inflight, b);
    if (b != NULL && rl__inflight_is_global(rl, lim) != (b->g != NULL)) {
        pthread_mutex_unlock(&m->lock);
        rl__log(&rl->logger, RL_LOG_ERROR,
                "limit %.64s: an in-flight limit's mode (global or local) is fixed when it is "
                "added (remove and add it again to change it)", lim->name);
        return RL_EMODE;
    }
    if (b == NULL || pow2_at_least((uint64_t)d.keys * 2) != b->mask + 1u) {
        pthread_mutex_unlock(&m->lock);
        if (b == NULL)
            return RL_ENOTFOUND;
        rl__log(&rl->logger, RL_LOG_ERROR,
                "limit %.64s: an in-flight limit's max_keys is fixed when it is added (remove "
                "and add it again to change it)", lim->name);
        return RL_ERANGE;
    }
    params_store(b, lim, &d);
    if (b->g != NULL)
        rl__ifl_global_params(b->g, lim, d.max);
    /* A change of algorithm or bounds starts the algorithm afresh; the
     * same ones keep the limit they reached. */
    if (d.algo != b->algo || (d.algo != RL_INFLIGHT_FIXED &&
                              (d.min != b->adapt.min || d.max != b->adapt.max)) ||
        (d.algo == RL_INFLIGHT_FIXED &&
         atomic_load_explicit(&b->limit_now, memory_order_relaxed) != d.max))
        rl__ifl_sampler_reset(b, &d, rl__ifl_now(rl, b));
    pthread_mutex_unlock(&m->lock);
    return 0;
}

void rl__inflight_remove(rl_t *rl, int id)
{
    struct rl_inflight *m = rl->inflight;
    if (m == NULL || id <= 0 || ((uint32_t)id & RL_LIMIT_IDX_MASK) >= m->cap)
        return;
    pthread_mutex_lock(&m->lock);
    _Atomic(rl_ifl_t *) *at = &m->blocks[(uint32_t)id & RL_LIMIT_IDX_MASK];
    /* relaxed: under the lock, which orders every store of the pointer. */
    rl_ifl_t *b = atomic_load_explicit(at, memory_order_relaxed);
    if (b != NULL && b->id == id) {
        /* relaxed: the pointer's NULL publishes nothing; the block stays. */
        atomic_store_explicit(at, NULL, memory_order_relaxed);
        block_retire(m, b);
    }
    pthread_mutex_unlock(&m->lock);
}

int rl__inflight_refuse_check(rl_t *rl, const rl_limit_slot_t *ls)
{
    struct rl_inflight *m = rl->inflight;
    if (m == NULL)
        return 0;
    uint32_t idx = (uint32_t)(ls - rl->limits.slots);
    /* relaxed: the id's acquire load paired with its add already. */
    int id = (int)atomic_load_explicit(&ls->id, memory_order_relaxed);
    if (((uint32_t)id & RL_LIMIT_IDX_MASK) != idx)
        return 0;
    rl_ifl_t *b = rl__ifl_enter(m, id);
    if (b == NULL)
        return 0;
    /* relaxed: only who logs is decided. */
    if (atomic_exchange_explicit(&b->told_check, 1, memory_order_relaxed) == 0)
        rl__log(&rl->logger, RL_LOG_ERROR,
                "limit %.64s: an in-flight limit is taken with rl_inflight_acquire and given "
                "back with rl_inflight_release; rl_check and its forms refuse it "
                "(RL_ENOTSUP; logged once)", ls->name);
    rl__ifl_leave(rl->inflight, b);
    return RL_ENOTSUP;
}

static uint64_t block_admitted(const rl_ifl_t *b)
{
    /* Admissions are counted by the records' lives, not on a stripe: an
     * acquire spends no shared RMW on them. relaxed: statistics. */
    uint64_t n = 0;
    for (uint32_t i = 0; i < b->pool; i++)
        n += atomic_load_explicit(&b->recs[i].lives, memory_order_relaxed);
    return n;
}

uint64_t rl__inflight_admitted(rl_t *rl, int id)
{
    rl_ifl_t *b = rl__ifl_enter(rl->inflight, id);
    return b != NULL ? block_admitted(b) : 0;
}

void rl__inflight_stats(rl_t *rl, int id, rl_limit_stats_t *s)
{
    rl_ifl_t *b = rl__ifl_enter(rl->inflight, id);
    if (b == NULL)
        return;
    s->admitted += block_admitted(b);
    if (s->size < offsetof(rl_limit_stats_t, inflight_late) + sizeof s->inflight_late)
        return;
    uint64_t held = 0;
    for (uint32_t i = 0; i <= b->mask; i++)
        held += rl__ifl_key_count(b, i);
    s->inflight = held;
    /* relaxed: statistics. */
    s->inflight_limit = atomic_load_explicit(&b->limit_now, memory_order_relaxed);
    s->inflight_reclaimed = atomic_load_explicit(&b->reclaimed, memory_order_relaxed);
    s->inflight_late = atomic_load_explicit(&b->late, memory_order_relaxed);
    rl__ifl_exact_stats(b, s);
    rl__ifl_leave(rl->inflight, b);
}

int rl_inflight_class(rl_t *rl, int limit, const char *name)
{
    if (rl == NULL || name == NULL)
        return RL_EINVAL;
    int rc = rl__fork_check(rl);
    if (rc != 0)
        return rc;
    if (rl->inflight == NULL)
        return rl__limit_get(&rl->limits, limit) != NULL ? RL_EMODE : RL_ENOTFOUND;
    pthread_mutex_lock(&rl->inflight->lock); /* removals take it too: b stays */
    rl_ifl_t *b = rl__ifl_enter(rl->inflight, limit);
    if (b == NULL) {
        pthread_mutex_unlock(&rl->inflight->lock);
        return rl__limit_get(&rl->limits, limit) != NULL ? RL_EMODE : RL_ENOTFOUND;
    }
    rl__ifl_leave(rl->inflight, b);
    rc = RL_ENOTFOUND;
    for (int i = 0; i < RL_INFLIGHT_CLASSES && rc < 0; i++)
        if (b->class_name[i][0] != '\0' &&
            strncmp(b->class_name[i], name, RL_INFLIGHT_CLASS_NAME) == 0)
            rc = i;
    pthread_mutex_unlock(&rl->inflight->lock);
    return rc;
}

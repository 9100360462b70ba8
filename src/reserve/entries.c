/* SPDX-License-Identifier: MIT */
#include "reserve/entries.h"

static void write_data(rl_rent_t *e, const rl_rent_data_t *d)
{
    /* relaxed: the owner's writes, published by the release of HELD. */
    atomic_store_explicit(&e->id_lo, d->id_lo, memory_order_relaxed);
    atomic_store_explicit(&e->id_hi, d->id_hi, memory_order_relaxed);
    atomic_store_explicit(&e->limit, (uint64_t)(uint32_t)d->limit, memory_order_relaxed);
    atomic_store_explicit(&e->held, d->held, memory_order_relaxed);
    atomic_store_explicit(&e->deadline_fp, d->deadline_fp, memory_order_relaxed);
    atomic_store_explicit(&e->source, (uint64_t)(uint32_t)d->source, memory_order_relaxed);
}

static void read_data(rl_rent_t *e, rl_rent_data_t *d)
{
    /* relaxed: ordered after the take's acquire of HELD. */
    d->id_lo = atomic_load_explicit(&e->id_lo, memory_order_relaxed);
    d->id_hi = atomic_load_explicit(&e->id_hi, memory_order_relaxed);
    d->limit = (int)(uint32_t)atomic_load_explicit(&e->limit, memory_order_relaxed);
    d->held = atomic_load_explicit(&e->held, memory_order_relaxed);
    d->deadline_fp = atomic_load_explicit(&e->deadline_fp, memory_order_relaxed);
    d->source = (int32_t)(uint32_t)atomic_load_explicit(&e->source, memory_order_relaxed);
}

/* A HELD entry (word w) whose deadline has passed: take it and report it.
 * 1 if this thread expired it (the entry is FREE again, one generation on). */
static int try_expire(rl_rents_t *t, uint32_t i, uint64_t w, const rl_rent_expiry_t *x)
{
    rl_rent_t *e = &t->e[i];
    /* relaxed: a hint, validated by the CAS below (a newer use has a newer
     * generation, so the CAS fails if the deadline was another use's). */
    uint64_t dl = atomic_load_explicit(&e->deadline_fp, memory_order_relaxed);
    int32_t src = (int32_t)(uint32_t)atomic_load_explicit(&e->source, memory_order_relaxed);
    if (x->now_fp(x->ctx, src) <= dl)
        return 0;
    /* acquire: pairs with the publish's release; the payload is that use's. */
    if (!atomic_compare_exchange_strong_explicit(&e->state, &w,
                                                 RL_RENT_MAKE(RL_RENT_GEN(w), RL_RENT_BUSY),
                                                 memory_order_acquire, memory_order_relaxed))
        return 0;
    rl_rent_data_t d;
    read_data(e, &d);
    x->expired(x->ctx, &d);
    rl__rents_free(t, i, 1);
    return 1;
}

int rl__rents_claim(rl_rents_t *t, const rl_rent_expiry_t *x, uint32_t *index, uint64_t *gen)
{
    if (t->n == 0)
        return 0;
    /* relaxed: spreads claimers over the table; it orders nothing. */
    uint64_t start = atomic_fetch_add_explicit(&t->cursor, 1, memory_order_relaxed) % t->n;
    for (uint32_t k = 0; k < t->n; k++) {
        uint32_t i = (uint32_t)((start + k) % t->n);
        rl_rent_t *e = &t->e[i];
        /* acquire: a FREE word read here is the last free's (release), so
         * the previous use's reads of the payload are done before ours. */
        uint64_t w = atomic_load_explicit(&e->state, memory_order_acquire);
        if (RL_RENT_STATE(w) == RL_RENT_HELD) {
            if (!try_expire(t, i, w, x))
                continue;
            /* acquire: as above. */
            w = atomic_load_explicit(&e->state, memory_order_acquire);
        }
        if (RL_RENT_STATE(w) != RL_RENT_FREE)
            continue;
        uint64_t g = RL_RENT_GEN(w);
        /* acquire: as the load above. */
        if (!atomic_compare_exchange_strong_explicit(&e->state, &w,
                                                     RL_RENT_MAKE(g, RL_RENT_BUSY),
                                                     memory_order_acquire, memory_order_relaxed))
            continue;
        *index = i;
        *gen = g & RL_RENT_GEN_MASK;
        return 1;
    }
    return 0;
}

void rl__rents_publish(rl_rents_t *t, uint32_t index, const rl_rent_data_t *d)
{
    rl_rent_t *e = &t->e[index];
    write_data(e, d);
    /* relaxed: the owner's own word; it only reads the generation back. */
    uint64_t g = RL_RENT_GEN(atomic_load_explicit(&e->state, memory_order_relaxed));
    /* release: the payload is written before a taker can see HELD. */
    atomic_store_explicit(&e->state, RL_RENT_MAKE(g, RL_RENT_HELD), memory_order_release);
}

int rl__rents_take(rl_rents_t *t, uint32_t index, uint64_t gen, rl_rent_data_t *d)
{
    if (index >= t->n)
        return RL_EINVAL;
    rl_rent_t *e = &t->e[index];
    /* relaxed: validated by the CAS, whose acquire orders the payload. */
    uint64_t w = atomic_load_explicit(&e->state, memory_order_relaxed);
    for (;;) {
        uint64_t g = RL_RENT_GEN(w);
        if ((g & RL_RENT_GEN_MASK) != gen) {
            /* One generation on, FREE and marked: this use expired. */
            if (RL_RENT_STATE(w) == RL_RENT_FREE && (w & RL_RENT_EXPIRED) &&
                ((g - 1) & RL_RENT_GEN_MASK) == gen)
                return RL_EEXPIRED;
            return RL_EINVAL;
        }
        if (RL_RENT_STATE(w) != RL_RENT_HELD)
            return RL_EINVAL;
        /* acquire: pairs with the publish's release: the payload is this use's. */
        if (atomic_compare_exchange_weak_explicit(&e->state, &w, RL_RENT_MAKE(g, RL_RENT_BUSY),
                                                  memory_order_acquire, memory_order_relaxed))
            break;
    }
    read_data(e, d);
    return 0;
}

void rl__rents_free(rl_rents_t *t, uint32_t index, int expired)
{
    rl_rent_t *e = &t->e[index];
    /* relaxed: the owner's own word; it only reads the generation back. */
    uint64_t g = RL_RENT_GEN(atomic_load_explicit(&e->state, memory_order_relaxed));
    /* release: this use's payload reads happen before the next claim's writes. */
    atomic_store_explicit(&e->state,
                          RL_RENT_MAKE(g + 1, RL_RENT_FREE) | (expired ? RL_RENT_EXPIRED : 0),
                          memory_order_release);
}

uint64_t rl__rents_sweep(rl_rents_t *t, const rl_rent_expiry_t *x)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < t->n; i++) {
        /* acquire: as in rl__rents_claim. */
        uint64_t w = atomic_load_explicit(&t->e[i].state, memory_order_acquire);
        if (RL_RENT_STATE(w) == RL_RENT_HELD)
            n += (uint64_t)try_expire(t, i, w, x);
    }
    return n;
}

uint64_t rl__rents_in_flight(rl_rents_t *t)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < t->n; i++)
        /* relaxed: a snapshot count. */
        n += RL_RENT_STATE(atomic_load_explicit(&t->e[i].state, memory_order_relaxed)) !=
             RL_RENT_FREE;
    return n;
}

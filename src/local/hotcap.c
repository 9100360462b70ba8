/* SPDX-License-Identifier: MIT */
#include <string.h>
#include "local/hotcap.h"

rl_hotcap_t *rl__hotcap_new(const rl_allocator_t *a, size_t nslots)
{
    rl_hotcap_t *c = rl__calloc(a, sizeof *c, 64);
    if (c == NULL)
        return NULL;
    c->nslots = nslots;
    c->want = rl__calloc(a, (nslots + 63) / 64 * sizeof *c->want, 64);
    if (c->want == NULL) {
        rl__free(a, c, sizeof *c, 64);
        return NULL;
    }
    return c;
}

void rl__hotcap_free(rl_hotcap_t *c, const rl_allocator_t *a)
{
    if (c == NULL)
        return;
    rl__free(a, (void *)c->want, (c->nslots + 63) / 64 * sizeof *c->want, 64);
    rl__free(a, c, sizeof *c, 64);
}

void rl__hotcap_want(rl_hotcap_t *c, size_t i)
{
    if (i < c->nslots)
        /* relaxed: a request flag; the slot index is all it carries. */
        atomic_fetch_or_explicit(&c->want[i >> 6], UINT64_C(1) << (i & 63),
                                 memory_order_relaxed);
}

void rl__hotcap_offer(rl_hotcap_t *c, size_t i, uint64_t id_lo, uint64_t id_hi, uint32_t lref,
                      const void *key, size_t len)
{
    uint64_t bit = UINT64_C(1) << (i & 63);
    /* relaxed: a request flag (above); a cheap load before the RMW. */
    if (!(atomic_load_explicit(&c->want[i >> 6], memory_order_relaxed) & bit))
        return;
    /* relaxed: as above; the RMW makes one checker the capturer. */
    if (!(atomic_fetch_and_explicit(&c->want[i >> 6], ~bit, memory_order_relaxed) & bit))
        return;
    for (size_t k = 0; k < RL_HOTCAP_CELLS; k++) {
        rl_hotcap_cell_t *cell = &c->cell[k];
        uint32_t st = RL_HOTCAP_EMPTY;
        /* acquire: pairs with the owner's release of EMPTY, so its reads of
         * the cell's last contents are done before we write. */
        if (!atomic_compare_exchange_strong_explicit(&cell->state, &st, RL_HOTCAP_BUSY,
                                                     memory_order_acquire, memory_order_relaxed))
            continue;
        cell->lref = lref;
        cell->id_lo = id_lo;
        cell->id_hi = id_hi;
        cell->len = len;
        memcpy(cell->key, key, len < RL_HOTCAP_KEY_BYTES ? len : RL_HOTCAP_KEY_BYTES);
        /* release: the contents above are visible to the owner with FULL. */
        atomic_store_explicit(&cell->state, RL_HOTCAP_FULL, memory_order_release);
        return;
    }
    rl__hotcap_want(c, i); /* no free cell: ask again */
}

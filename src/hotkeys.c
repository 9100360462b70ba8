/* SPDX-License-Identifier: MIT */
#include <string.h>
#include "hotkeys.h"

int rl__hotkeys_init(rl_hotkeys_t *h, const rl_allocator_t *a, size_t k)
{
    memset(h, 0, sizeof *h);
    if (k == 0 || k > RL_HOTKEYS_K_MAX)
        return RL_EINVAL;
    k *= RL_HOTKEYS_SLACK;
    h->e = rl__calloc(a, k * sizeof *h->e, 64);
    if (h->e == NULL)
        return RL_ENOMEM;
    h->k = k;
    return 0;
}

void rl__hotkeys_destroy(rl_hotkeys_t *h, const rl_allocator_t *a)
{
    if (h->e != NULL)
        rl__free(a, h->e, h->k * sizeof *h->e, 64);
    memset(h, 0, sizeof *h);
}

rl_hk_entry_t *rl__hotkeys_add(rl_hotkeys_t *h, uint32_t lref, uint64_t id_lo, uint64_t id_hi,
                               uint64_t w)
{
    h->total += w;
    h->gone_valid = 0;
    size_t min = 0;
    for (size_t i = 0; i < h->n; i++) {
        rl_hk_entry_t *e = &h->e[i];
        if (e->id_lo == id_lo && e->id_hi == id_hi && e->lref == lref) {
            e->count += w;
            e->fed += w;
            return e;
        }
        if (e->count < h->e[min].count)
            min = i;
    }
    rl_hk_entry_t *e;
    uint64_t floor = 0;
    if (h->n < h->k) {
        e = &h->e[h->n++];
    } else {
        /* Space-Saving: the newcomer may have been counted as little as the
         * smallest held key, never more (it was not held), so it takes that
         * count as its possible overestimate. */
        e = &h->e[min];
        floor = e->count;
        h->gone = *e;
        h->gone_valid = 1;
    }
    memset(e, 0, sizeof *e);
    e->id_lo = id_lo;
    e->id_hi = id_hi;
    e->lref = lref;
    e->err = floor;
    e->count = floor + w;
    e->fed = w;
    return e;
}

rl_hk_entry_t *rl__hotkeys_find(rl_hotkeys_t *h, uint32_t lref, uint64_t id_lo, uint64_t id_hi)
{
    for (size_t i = 0; i < h->n; i++) {
        rl_hk_entry_t *e = &h->e[i];
        if (e->id_lo == id_lo && e->id_hi == id_hi && e->lref == lref)
            return e;
    }
    return NULL;
}

void rl__hotkeys_tick(rl_hotkeys_t *h, double dt_s, int smooth)
{
    for (size_t i = 0; i < h->n; i++) {
        rl_hk_entry_t *e = &h->e[i];
        double now = dt_s > 0 ? (double)e->fed / dt_s : 0;
        /* A new entry's first interval stands alone: it was not held
         * before, so it has no earlier rate to average with. */
        e->rate = smooth && e->count != e->fed + e->err ? (e->rate + now) / 2 : now;
        e->fed = 0;
    }
}

int rl__hot_mark(uint8_t *hot, uint8_t *streak, double demand, double thr)
{
    int other_side = thr <= 0 ? *hot
                     : *hot   ? demand < thr * RL_HOT_EXIT_FRAC
                              : demand >= thr;
    if (!other_side) {
        *streak = 0;
        return 0;
    }
    if (thr <= 0 || ++*streak >= (*hot ? RL_HOT_EXIT : RL_HOT_ENTER)) {
        *streak = 0;
        *hot = !*hot;
        return *hot ? 1 : -1;
    }
    return 0;
}

void rl__hotkeys_set_key(rl_hk_entry_t *e, const void *key, size_t len)
{
    size_t keep = len < RL_HOTKEY_BYTES ? len : RL_HOTKEY_BYTES;
    memcpy(e->key, key, keep);
    e->key_len = (uint32_t)len;
}

void rl__hotkeys_decay(rl_hotkeys_t *h, unsigned shift)
{
    if (shift >= 64)
        shift = 63;
    for (size_t i = 0; i < h->n; i++) {
        h->e[i].count >>= shift;
        h->e[i].err >>= shift;
    }
    h->total >>= shift;
}

size_t rl__hotkeys_top(const rl_hotkeys_t *h, int all, uint32_t lref, rl_hk_entry_t *out,
                       size_t n)
{
    size_t got = 0;
    /* Insertion into out, kept sorted by count, highest first: n and K are
     * small (a report, off the hot path). */
    for (size_t i = 0; i < h->n; i++) {
        const rl_hk_entry_t *e = &h->e[i];
        if (!all && e->lref != lref)
            continue;
        size_t at = got;
        while (at > 0 && out[at - 1].count < e->count)
            at--;
        if (at >= n)
            continue;
        size_t last = got < n ? got : n - 1;
        memmove(&out[at + 1], &out[at], (last - at) * sizeof *out);
        out[at] = *e;
        if (got < n)
            got++;
    }
    return got;
}

/* SPDX-License-Identifier: MIT */
#include <string.h>
#include "hot/sketch.h"

static size_t idx_slots(size_t cap)
{
    size_t n = 2;
    while (n < 2 * cap)
        n *= 2;
    return n;
}

int rl__hotkeys_init(rl_hotkeys_t *h, const rl_allocator_t *a, size_t k)
{
    memset(h, 0, sizeof *h);
    if (k == 0 || k > RL_HOTKEYS_K_MAX)
        return RL_EINVAL;
    k *= RL_HOTKEYS_SLACK;
    size_t slots = idx_slots(k);
    h->e = rl__calloc(a, k * sizeof *h->e, 64);
    h->heap = rl__calloc(a, k * sizeof *h->heap, 8);
    h->at = rl__calloc(a, k * sizeof *h->at, 8);
    h->idx = rl__calloc(a, slots * sizeof *h->idx, 8);
    h->k = h->cap = k;
    h->mask = slots - 1;
    if (h->e == NULL || h->heap == NULL || h->at == NULL || h->idx == NULL) {
        rl__hotkeys_destroy(h, a);
        return RL_ENOMEM;
    }
    return 0;
}

void rl__hotkeys_destroy(rl_hotkeys_t *h, const rl_allocator_t *a)
{
    rl__free(a, h->e, h->cap * sizeof *h->e, 64);
    rl__free(a, h->heap, h->cap * sizeof *h->heap, 8);
    rl__free(a, h->at, h->cap * sizeof *h->at, 8);
    if (h->idx != NULL)
        rl__free(a, h->idx, (h->mask + 1) * sizeof *h->idx, 8);
    memset(h, 0, sizeof *h);
}

/* The index's home slot of a key: ids are keyed hashes, mixed again so
 * every bit of both halves and the limit reaches the slot bits. */
static size_t index_home(const rl_hotkeys_t *h, uint32_t lref, uint64_t id_lo, uint64_t id_hi)
{
    uint64_t x = (id_lo ^ ((uint64_t)lref << 32)) * UINT64_C(0x9e3779b97f4a7c15);
    x ^= id_hi + (x >> 29);
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 32;
    return (size_t)x & h->mask;
}

static int same(const rl_hk_entry_t *e, uint32_t lref, uint64_t id_lo, uint64_t id_hi)
{
    return e->id_lo == id_lo && e->id_hi == id_hi && e->lref == lref;
}

static void idx_insert(rl_hotkeys_t *h, uint32_t p)
{
    const rl_hk_entry_t *e = &h->e[p];
    size_t i = index_home(h, e->lref, e->id_lo, e->id_hi);
    while (h->idx[i] != 0)
        i = (i + 1) & h->mask;
    h->idx[i] = p + 1;
}

/* Remove entry p's slot, shifting back the entries after it in its run
 * that may move (linear probing's deletion: no tombstones to pile up). */
static void idx_remove(rl_hotkeys_t *h, uint32_t p)
{
    const rl_hk_entry_t *e = &h->e[p];
    size_t i = index_home(h, e->lref, e->id_lo, e->id_hi);
    while (h->idx[i] != p + 1)
        i = (i + 1) & h->mask;
    for (size_t j = i;;) {
        j = (j + 1) & h->mask;
        if (h->idx[j] == 0)
            break;
        const rl_hk_entry_t *o = &h->e[h->idx[j] - 1];
        size_t k = index_home(h, o->lref, o->id_lo, o->id_hi);
        /* o stays if its home lies cyclically in (i, j]. */
        if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
            continue;
        h->idx[i] = h->idx[j];
        i = j;
    }
    h->idx[i] = 0;
}

static void heap_set(rl_hotkeys_t *h, size_t pos, uint32_t p)
{
    h->heap[pos] = p;
    h->at[p] = (uint32_t)pos;
}

/* Entry at heap position pos grew: move it down past smaller children. */
static void sift_down(rl_hotkeys_t *h, size_t pos)
{
    uint32_t p = h->heap[pos];
    uint64_t c = h->e[p].count;
    for (;;) {
        size_t l = 2 * pos + 1, m = pos;
        uint64_t mc = c;
        if (l < h->n && h->e[h->heap[l]].count < mc)
            m = l, mc = h->e[h->heap[l]].count;
        if (l + 1 < h->n && h->e[h->heap[l + 1]].count < mc)
            m = l + 1;
        if (m == pos)
            break;
        heap_set(h, pos, h->heap[m]);
        pos = m;
    }
    heap_set(h, pos, p);
}

/* A new entry at heap position pos: move it up past larger parents. */
static void sift_up(rl_hotkeys_t *h, size_t pos)
{
    uint32_t p = h->heap[pos];
    uint64_t c = h->e[p].count;
    while (pos > 0 && h->e[h->heap[(pos - 1) / 2]].count > c) {
        heap_set(h, pos, h->heap[(pos - 1) / 2]);
        pos = (pos - 1) / 2;
    }
    heap_set(h, pos, p);
}

rl_hk_entry_t *rl__hotkeys_add(rl_hotkeys_t *h, uint32_t lref, uint64_t id_lo, uint64_t id_hi,
                               uint64_t w)
{
    h->total += w;
    h->gone_valid = 0;
    rl_hk_entry_t *e = rl__hotkeys_find(h, lref, id_lo, id_hi);
    if (e != NULL) {
        e->count += w;
        e->fed += w;
        sift_down(h, h->at[e - h->e]);
        return e;
    }
    uint32_t p;
    uint64_t floor = 0;
    int fresh = h->n < h->k;
    if (fresh) {
        p = (uint32_t)h->n++;
        heap_set(h, h->n - 1, p);
    } else {
        /* Space-Saving: the newcomer may have been counted as little as the
         * smallest held key, never more (it was not held), so it takes that
         * count as its possible overestimate. */
        p = h->heap[0];
        floor = h->e[p].count;
        h->gone = h->e[p];
        h->gone_valid = 1;
        idx_remove(h, p);
    }
    e = &h->e[p];
    memset(e, 0, sizeof *e);
    e->id_lo = id_lo;
    e->id_hi = id_hi;
    e->lref = lref;
    e->err = floor;
    e->count = floor + w;
    e->fed = w;
    idx_insert(h, p);
    if (fresh)
        sift_up(h, h->at[p]);
    else
        sift_down(h, 0);
    return e;
}

rl_hk_entry_t *rl__hotkeys_find(rl_hotkeys_t *h, uint32_t lref, uint64_t id_lo, uint64_t id_hi)
{
    if (h->idx == NULL)
        return NULL;
    for (size_t i = index_home(h, lref, id_lo, id_hi); h->idx[i] != 0; i = (i + 1) & h->mask) {
        rl_hk_entry_t *e = &h->e[h->idx[i] - 1];
        if (same(e, lref, id_lo, id_hi))
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

/* SPDX-License-Identifier: MIT */
/*
 * A fleet-wide in-flight limit's lease (inflight/global.h): the blocks the
 * sync round writes per key entry, the demand acquires leave there, the
 * lease's validity and what on_failure admits once it is gone.
 */
#include <stdlib.h>
#include <string.h>
#include "inflight/global.h"
#include "inflight/keys.h"

#define GW_SHIFT KW_TAG_SHIFT
#define GW_COUNT KW_COUNT

/* One entry a round found something in: a held count, a demand or a block. */
typedef struct grec {
    uint64_t tag;
    uint32_t entry;
    uint32_t held, peak, cap;
    uint32_t own; /* the entry's first record: its block is written for this key */
} grec_t;

struct rl_ifl_global {
    _Atomic uint64_t *capw; /* per entry: tag << 24 | the key's block */
    _Atomic uint64_t *want; /* per entry: tag << 24 | the round's peak demand */
    /* Instance time the lease is valid until (0: never yet): a release
     * store after the blocks, so an acquire that sees it sees them. */
    _Atomic uint64_t until_ns;
    _Atomic uint32_t fail_cap; /* a key's cap while the lease is not valid */
    _Atomic uint32_t max;
    /* What fail_cap is made of: written by an update (on_failure) and the
     * sync thread (nodes), each recomputing it; relaxed, parameters. */
    _Atomic int32_t on_failure; /* RL_FAIL_*, resolved */
    _Atomic uint32_t nodes;     /* the fleet's size for local's cap */
    uint32_t entries;
    grec_t *recs;              /* sync thread: the round's scratch, 3 per entry */
    uint32_t nrecs;
    char name[RL_NAME_MAX];
    size_t bytes;
};

static size_t global_bytes(uint32_t entries)
{
    return sizeof(struct rl_ifl_global) + (size_t)entries * (2 * sizeof(uint64_t)) +
           (size_t)entries * 3 * sizeof(grec_t);
}

static void fail_cap_store(struct rl_ifl_global *g)
{
    /* relaxed: parameters, each self-contained; a racing update and round
     * may store either's cap, and the next round stores it again. */
    uint32_t max = atomic_load_explicit(&g->max, memory_order_relaxed);
    int32_t how = atomic_load_explicit(&g->on_failure, memory_order_relaxed);
    uint32_t nodes = atomic_load_explicit(&g->nodes, memory_order_relaxed);
    uint32_t cap = how == RL_FAIL_OPEN    ? max
                   : how == RL_FAIL_LOCAL ? max / (nodes > 0 ? nodes : 1u)
                                          : 0;
    atomic_store_explicit(&g->fail_cap, cap, memory_order_relaxed);
}

void rl__ifl_global_params(struct rl_ifl_global *g, const rl_limit_t *lim, uint32_t max)
{
    /* relaxed: parameters (the module's lock orders their writers). */
    atomic_store_explicit(&g->max, max, memory_order_relaxed);
    atomic_store_explicit(&g->on_failure,
                          lim->on_failure == RL_FAIL_DEFAULT ? RL_FAIL_CLOSED : lim->on_failure,
                          memory_order_relaxed);
    fail_cap_store(g);
}

struct rl_ifl_global *rl__ifl_global_new(const rl_allocator_t *a, uint32_t entries,
                                         const rl_limit_t *lim, uint32_t max, uint32_t nodes)
{
    size_t bytes = global_bytes(entries);
    struct rl_ifl_global *g = rl__calloc(a, bytes, 64);
    if (g == NULL)
        return NULL;
    g->bytes = bytes;
    g->entries = entries;
    g->capw = (_Atomic uint64_t *)(void *)(g + 1);
    g->want = g->capw + entries;
    g->recs = (grec_t *)(void *)(g->want + entries);
    atomic_init(&g->nodes, nodes > 0 ? nodes : 1u);
    memcpy(g->name, lim->name, sizeof g->name);
    g->name[sizeof g->name - 1] = '\0';
    rl__ifl_global_params(g, lim, max);
    return g;
}

void rl__ifl_global_free(const rl_allocator_t *a, struct rl_ifl_global *g)
{
    if (g != NULL)
        rl__free(a, g, g->bytes, 64);
}

void rl__ifl_global_nodes(rl_ifl_t *b, uint64_t nodes)
{
    /* relaxed: see fail_cap_store. */
    atomic_store_explicit(&b->g->nodes,
                          nodes == 0 ? 1u : nodes > UINT32_MAX ? UINT32_MAX : (uint32_t)nodes,
                          memory_order_relaxed);
    fail_cap_store(b->g);
}

/* ------------------------------------------------------ acquire side */

uint32_t rl__ifl_global_cap(const rl_ifl_t *b, uint32_t entry, uint64_t tag, uint64_t now)
{
    const struct rl_ifl_global *g = b->g;
    /* acquire: pairs with the apply's release, so the blocks of the lease
     * seen valid are that lease's (or newer). */
    uint64_t until = atomic_load_explicit(&g->until_ns, memory_order_acquire);
    if (now >= until)
        /* relaxed: a parameter. */
        return atomic_load_explicit(&g->fail_cap, memory_order_relaxed);
    /* relaxed: ordered by the acquire above. */
    uint64_t w = atomic_load_explicit(&g->capw[entry], memory_order_relaxed);
    return (w >> GW_SHIFT) == tag ? (uint32_t)(w & GW_COUNT) : 0;
}

/* Raise the key's demand word to at least v (a fresh word for another key). */
static void want_raise(_Atomic uint64_t *at, uint64_t tag, uint64_t v, int deny)
{
    /* relaxed: a demand figure; the round's exchange takes it whole. */
    uint64_t w = atomic_load_explicit(at, memory_order_relaxed), nw;
    do {
        uint64_t cur = (w >> GW_SHIFT) == tag ? (w & GW_COUNT) : 0;
        uint64_t to = (cur > v ? cur : v) + (deny ? 1u : 0u);
        if (to > GW_COUNT)
            to = GW_COUNT;
        if ((w >> GW_SHIFT) == tag && to == cur)
            return;
        nw = (tag << GW_SHIFT) | to;
    } while (!atomic_compare_exchange_weak_explicit(at, &w, nw, memory_order_relaxed,
                                                    memory_order_relaxed));
}

void rl__ifl_global_seen(rl_ifl_t *b, uint32_t entry, uint64_t tag, uint32_t held)
{
    _Atomic uint64_t *at = &b->g->want[entry];
    /* relaxed: as want_raise; the common case (the peak already this high)
     * is this one load. */
    uint64_t w = atomic_load_explicit(at, memory_order_relaxed);
    if ((w >> GW_SHIFT) != tag || (w & GW_COUNT) < held)
        want_raise(at, tag, held, 0);
}

void rl__ifl_global_denied(rl_ifl_t *b, uint32_t entry, uint64_t tag, uint32_t held)
{
    want_raise(&b->g->want[entry], tag, held, 1);
}

/* ------------------------------------------------------ sync side */

rl_ifl_t *rl__ifl_global_enter(struct rl_inflight *m, int id)
{
    rl_ifl_t *b = rl__ifl_enter(m, id);
    if (b != NULL && b->g == NULL) {
        rl__ifl_leave(m, b);
        return NULL;
    }
    return b;
}

const char *rl__ifl_global_name(const rl_ifl_t *b) { return b->g->name; }

static int grec_cmp(const void *x, const void *y)
{
    const grec_t *a = x, *b = y;
    return a->tag < b->tag ? -1 : a->tag > b->tag;
}

uint32_t rl__ifl_global_collect(rl_ifl_t *b, uint64_t now, rl_ifl_lease_key_t *out,
                                uint32_t cap)
{
    struct rl_ifl_global *g = b->g;
    uint32_t n = 0;
    for (uint32_t e = 0; e <= b->mask; e++) {
        uint32_t first = n;
        /* relaxed: figures; a permit taken after this load is within the
         * cap this round reports (the block, or on_failure's). */
        uint64_t w = atomic_load_explicit(&b->keys[e].word, memory_order_relaxed);
        if ((w & KW_COUNT) != 0 && !(w & KW_PENDING))
            g->recs[n++] = (grec_t){w >> KW_TAG_SHIFT, e, (uint32_t)(w & KW_COUNT), 0, 0, 0};
        /* relaxed: a demand figure, taken whole. */
        uint64_t d = atomic_exchange_explicit(&g->want[e], 0, memory_order_relaxed);
        if ((d & GW_COUNT) != 0)
            g->recs[n++] = (grec_t){d >> GW_SHIFT, e, 0, (uint32_t)(d & GW_COUNT), 0, 0};
        /* relaxed: this thread writes it. */
        uint64_t c = atomic_load_explicit(&g->capw[e], memory_order_relaxed);
        if ((c & GW_COUNT) != 0)
            g->recs[n++] = (grec_t){c >> GW_SHIFT, e, 0, 0, (uint32_t)(c & GW_COUNT), 0};
        /* The key the entry holds first, then one denied there, then the
         * block's: an entry's block is one key's. */
        if (n > first)
            g->recs[first].own = 1;
    }
    g->nrecs = n;
    qsort(g->recs, n, sizeof *g->recs, grec_cmp);
    /* What the node may admit before the reply applies: the block, or
     * on_failure's cap while it has no valid lease. */
    /* relaxed: this thread writes until_ns; fail_cap is a parameter. */
    uint64_t until = atomic_load_explicit(&g->until_ns, memory_order_relaxed);
    uint32_t fail = now >= until
                        ? atomic_load_explicit(&g->fail_cap, memory_order_relaxed)
                        : 0;
    uint32_t max = atomic_load_explicit(&g->max, memory_order_relaxed);
    uint32_t k = 0;
    for (uint32_t i = 0; i < n && k < cap;) {
        rl_ifl_lease_key_t key = {g->recs[i].tag, 0, 0, fail, 0};
        uint32_t peak = 0;
        for (; i < n && g->recs[i].tag == key.tag; i++) {
            key.held += g->recs[i].held;
            peak = g->recs[i].peak > peak ? g->recs[i].peak : peak;
            key.cap = g->recs[i].cap > key.cap ? g->recs[i].cap : key.cap;
        }
        uint32_t want = peak > key.held ? peak : key.held;
        key.want = want > max ? max : want;
        key.cap = key.cap > key.held ? key.cap : key.held;
        out[k++] = key;
    }
    return k;
}

void rl__ifl_global_apply(rl_ifl_t *b, const rl_ifl_lease_key_t *keys, uint32_t n,
                          uint64_t until)
{
    struct rl_ifl_global *g = b->g;
    uint32_t k = 0;
    for (uint32_t i = 0; i < g->nrecs; i++) {
        const grec_t *r = &g->recs[i];
        if (!r->own)
            continue;
        while (k < n && keys[k].tag < r->tag)
            k++;
        uint32_t grant = k < n && keys[k].tag == r->tag ? keys[k].grant : 0;
        /* relaxed: published by the release store of until_ns below. */
        atomic_store_explicit(&g->capw[r->entry], grant != 0 ? r->tag << GW_SHIFT | grant : 0,
                              memory_order_relaxed);
    }
    g->nrecs = 0;
    /* release: the blocks above before an acquire that sees the lease valid. */
    atomic_store_explicit(&g->until_ns, until, memory_order_release);
}

/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "hot/hot.h"
#include "core.h"
#include "local/shareword.h"
#include "base/structsize.h"
#include "base/decimal.h"

/* Bytes of one by-demand scratch array. */
static size_t by_bytes(size_t k) { return k * RL_HOTKEYS_SLACK * sizeof(rl_hk_entry_t *); }

int rl__hot_init(rl_t *rl, int synced, int shared, size_t k)
{
    if (shared)
        return 0; /* rl_hotkeys answers RL_ENOTSUP */
    if (k == 0 || k > RL_HOTKEYS_K_MAX)
        return RL_EINVAL;
    rl_hot_t *h = rl__calloc(&rl->alloc, sizeof *h, 64);
    if (h == NULL)
        return RL_ENOMEM;
    rl->hot = h;
    if (pthread_mutex_init(&h->mu, NULL) != 0) {
        rl__free(&rl->alloc, h, sizeof *h, 64);
        rl->hot = NULL;
        return RL_ENOMEM;
    }
    h->k = k;
    int rc = rl__hotkeys_init(&h->req, &rl->alloc, k);
    if (rc == 0 && synced)
        rc = rl__hotkeys_init(&h->round, &rl->alloc, k);
    if (rc == 0 && ((h->by_a = rl__calloc(&rl->alloc, by_bytes(k), 8)) == NULL ||
                    (h->by_b = rl__calloc(&rl->alloc, by_bytes(k), 8)) == NULL))
        rc = RL_ENOMEM;
    if (rc == 0 && (h->cap = rl__hotcap_new(&rl->alloc, rl->table.nslots)) == NULL)
        rc = RL_ENOMEM;
    if (rc != 0) {
        rl__hot_destroy(rl);
        return rc;
    }
    /* rl_open's "now": the clock hook is called once per source there. */
    h->req_last_fp = h->round_last_fp = RL_CLOCK_ORIGIN_FP;
    rl->table.hotcap = h->cap;
    return 0;
}

void rl__hot_destroy(rl_t *rl)
{
    rl_hot_t *h = rl->hot;
    if (h == NULL)
        return;
    rl->table.hotcap = NULL;
    rl__hotcap_free(h->cap, &rl->alloc);
    rl__hotkeys_destroy(&h->req, &rl->alloc);
    rl__hotkeys_destroy(&h->round, &rl->alloc);
    rl__free(&rl->alloc, h->by_a, by_bytes(h->k), 8);
    rl__free(&rl->alloc, h->by_b, by_bytes(h->k), 8);
    pthread_mutex_destroy(&h->mu);
    rl__free(&rl->alloc, h, sizeof *h, 64);
    rl->hot = NULL;
}

/* What a report needs of a key's limit. */
typedef struct lim {
    int id;
    int synced;
    double rate;      /* per second */
    double threshold; /* per second; 0: never hot */
    const char *name;
} lim_t;

static int lim_of(rl_t *rl, uint32_t lref, lim_t *o)
{
    uint32_t idx = lref & RL_LIMIT_IDX_MASK;
    if (idx >= rl->limits.cap)
        return 0;
    rl_limit_slot_t *ls = &rl->limits.slots[idx];
    /* acquire: as rl__limit_get (the add published params and name). */
    uint32_t id = atomic_load_explicit(&ls->id, memory_order_acquire);
    if (id == 0 || rl__limit_ref((int)id) != lref)
        return 0;
    rl_limit_params_t p;
    rl__params_read(ls, &p);
    o->id = (int)id;
    o->synced = p.synced != 0;
    o->rate = (double)p.rate_count * 1000.0 / (double)p.period_ms;
    o->threshold = (double)p.hot_ppm / 1e6 * o->rate;
    o->name = ls->name;
    return 1;
}

/* The slot still holds the entry's key (LIVE, same limit and id). */
static rl_slot_t *entry_slot(rl_t *rl, const rl_hk_entry_t *e, uint64_t *ctrl)
{
    if (e->slot == 0 || e->slot > rl->table.nslots)
        return NULL;
    rl_slot_t *s = &rl->table.slots[e->slot - 1];
    /* acquire: the key id written before LIVE is visible (local/table.h). */
    uint64_t c = atomic_load_explicit(&s->ctrl, memory_order_acquire);
    if (RL_CTRL_STATE(c) != RL_SLOT_LIVE || RL_CTRL_LREF(c) != e->lref)
        return NULL;
    /* relaxed: validated by the ctrl re-read (acquire above orders them). */
    if (atomic_load_explicit(&s->id_lo, memory_order_relaxed) != e->id_lo ||
        atomic_load_explicit(&s->id_hi, memory_order_relaxed) != e->id_hi)
        return NULL;
    *ctrl = c;
    return s;
}

/* Set or clear the key's hot bit in its slot's share word. */
static void mark_slot(rl_t *rl, const rl_hk_entry_t *e, int on)
{
    uint64_t c;
    rl_slot_t *s = entry_slot(rl, e, &c);
    if (s == NULL)
        return; /* gone: a new occupant starts with a zero share word */
    if (on) {
        /* acquire: pairs with a claimer's release store of 0 (local/table.c): if
         * our RMW comes after it, the claim's ctrl CAS happened before the
         * re-read below, which then sees the slot changed. If it comes
         * before, the claim's 0 wipes the mark. */
        atomic_fetch_or_explicit(&s->share, RL_SHAREWORD_HOT, memory_order_acquire);
        /* relaxed: ordered after the RMW by its acquire. The occupant changed
         * between the check above and the mark: take the mark back (a new
         * occupant's word has no mark of its own: marks are made under the
         * hot-key mutex, one marker at a time). */
        if (atomic_load_explicit(&s->ctrl, memory_order_relaxed) != c)
            atomic_fetch_and_explicit(&s->share, ~RL_SHAREWORD_HOT, memory_order_relaxed);
    } else {
        /* relaxed: as above. */
        atomic_fetch_and_explicit(&s->share, ~RL_SHAREWORD_HOT, memory_order_relaxed);
    }
}

/* The key as a log can show it: its kept bytes, escaped, or its id. */
static void key_text(const rl_hk_entry_t *e, char *buf, size_t cap)
{
    if (e->key_len == 0) {
        snprintf(buf, cap, "#%016llx", (unsigned long long)e->id_lo);
        return;
    }
    size_t keep = e->key_len < RL_HOTKEY_BYTES ? e->key_len : RL_HOTKEY_BYTES;
    size_t o = 0;
    buf[o++] = '"';
    for (size_t i = 0; i < keep && o + 8 < cap; i++) {
        unsigned char ch = e->key[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\')
            buf[o++] = (char)ch;
        else
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", ch);
    }
    if (keep < e->key_len && o + 4 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o++] = '"';
    buf[o] = '\0';
}

static void log_mark(rl_t *rl, const rl_hk_entry_t *e, const lim_t *l, int entered,
                     const char *why)
{
    /* Written after the mutex is released (unlock_and_log): the log hook
     * is never called while the library holds a lock a caller could need. */
    rl_hot_logs_t *lg = &rl->hot->logs;
    if (lg->n >= RL_HOT_LOG_MAX) {
        lg->dropped++;
        return;
    }
    char key[4 * RL_HOTKEY_BYTES + 8];
    key_text(e, key, sizeof key);
    snprintf(lg->line[lg->n++], sizeof lg->line[0],
             "hot key %s: limit %s key %s: %.1f/s against a threshold of %.1f/s%s",
             entered ? "enters" : "leaves", l != NULL ? l->name : "(removed)", key, e->fleet,
             l != NULL ? l->threshold : 0.0, why);
}

/* Release the mutex, then write the log lines collected under it. */
static void unlock_and_log(rl_t *rl)
{
    rl_hot_t *h = rl->hot;
    rl_hot_logs_t lg = h->logs;
    h->logs.n = 0;
    h->logs.dropped = 0;
    pthread_mutex_unlock(&h->mu);
    for (unsigned i = 0; i < lg.n; i++)
        rl__log(&rl->logger, RL_LOG_INFO, "%s", lg.line[i]);
    if (lg.dropped > 0)
        rl__log(&rl->logger, RL_LOG_INFO, "hot keys: %u more entries and exits not logged",
                lg.dropped);
}

/* An entry the sketch dropped to make room: its mark goes with it. */
static void drop_gone(rl_t *rl, rl_hotkeys_t *hk)
{
    if (!hk->gone_valid || !hk->gone.hot)
        return;
    hk->gone_valid = 0;
    mark_slot(rl, &hk->gone, 0);
    lim_t l;
    log_mark(rl, &hk->gone, lim_of(rl, hk->gone.lref, &l) ? &l : NULL, 0,
             " (no longer among the tracked keys)");
}

static void feed(rl_t *rl, rl_hotkeys_t *hk, size_t slot, uint32_t lref, uint64_t id_lo,
                 uint64_t id_hi, uint64_t w)
{
    rl_hk_entry_t *e = rl__hotkeys_add(hk, lref, id_lo, id_hi, w);
    e->slot = (uint32_t)slot + 1;
    drop_gone(rl, hk);
}

/* Order of entries by demand, highest first (insertion: O(n^2) in the
 * 8 x K entries, on the sync thread or an rl_hotkeys caller; 256 by
 * default). */
static size_t by_demand(rl_hotkeys_t *hk, rl_hk_entry_t **idx)
{
    size_t n = 0;
    for (size_t i = 0; i < hk->n; i++) {
        rl_hk_entry_t *e = &hk->e[i];
        size_t at = n++;
        while (at > 0 && (idx[at - 1]->rate < e->rate ||
                          (idx[at - 1]->rate == e->rate && idx[at - 1]->count < e->count))) {
            idx[at] = idx[at - 1];
            at--;
        }
        idx[at] = e;
    }
    return n;
}

/* After a tick: the fleet demand, share and mark of every entry; key bytes
 * asked for the reported and the hot ones that lack them. */
static void evaluate(rl_t *rl, rl_hotkeys_t *hk, int synced)
{
    rl_hk_entry_t **idx = rl->hot->by_a;
    size_t n = by_demand(hk, idx);
    for (size_t i = 0; i < n; i++) {
        rl_hk_entry_t *e = idx[i];
        lim_t l;
        if (!lim_of(rl, e->lref, &l)) {
            if (e->hot) {
                e->hot = 0;
                log_mark(rl, e, NULL, 0, " (its limit was removed)");
            }
            continue;
        }
        e->fleet = e->rate;
        e->share = 0;
        uint64_t c;
        rl_slot_t *s = synced ? entry_slot(rl, e, &c) : NULL;
        /* A key the round did not visit has had no demand here for a while
         * (a quiet key with demand is visited every round): its last fleet
         * usage is stale, and this node's view of it is its own demand. */
        if (synced && !e->visited)
            e->usage_q = 0;
        e->visited = 0;
        if (s != NULL) {
            double fleet = (double)e->usage_q / (double)(UINT64_C(1) << 24) * l.rate;
            if (fleet > e->fleet)
                e->fleet = fleet;
            /* relaxed: a self-contained word. */
            uint64_t w = atomic_load_explicit(&s->share, memory_order_relaxed);
            if (RL_SHAREWORD_SHARE(w) != 0) {
                rl_gcra_t g;
                rl__shareword_decode(w, &g);
                e->share = 1e9 * (double)RL_FP_PER_NS / (double)g.t_fp;
            }
        }
        int t = rl__hot_mark(&e->hot, &e->streak, e->fleet, l.threshold);
        if (t != 0) {
            mark_slot(rl, e, t > 0);
            log_mark(rl, e, &l, t > 0, "");
        }
        if (e->key_len == 0 && e->slot != 0 && (i < rl->hot->k || e->hot)) {
            rl__hotcap_want(rl->hot->cap, e->slot - 1);
            e->want = 1;
        }
    }
}

/* Hand every captured key to the entry it belongs to in one of the nh
 * sketches (keys whose entry is gone are dropped) and free the cells. */
static void drain_captured(rl_hotcap_t *c, rl_hotkeys_t *const *h, size_t nh)
{
    for (size_t k = 0; k < RL_HOTCAP_CELLS; k++) {
        rl_hotcap_cell_t *cell = &c->cell[k];
        /* acquire: pairs with the capturer's release of FULL. */
        if (atomic_load_explicit(&cell->state, memory_order_acquire) != RL_HOTCAP_FULL)
            continue;
        rl_hk_entry_t *e = NULL;
        for (size_t j = 0; j < nh && e == NULL; j++)
            e = rl__hotkeys_find(h[j], cell->lref, cell->id_lo, cell->id_hi);
        if (e != NULL) {
            rl__hotkeys_set_key(e, cell->key, cell->len);
            e->want = 0;
        }
        /* release: our reads of the cell happen before its next capture. */
        atomic_store_explicit(&cell->state, RL_HOTCAP_EMPTY, memory_order_release);
    }
}

static void drain(rl_t *rl)
{
    rl_hotkeys_t *hs[2] = {&rl->hot->req, &rl->hot->round};
    drain_captured(rl->hot->cap, hs, rl->hot->round.k != 0 ? 2 : 1);
}

void rl__hot_round_begin(rl_t *rl)
{
    if (rl->hot == NULL)
        return;
    pthread_mutex_lock(&rl->hot->mu);
    rl__hotkeys_decay(&rl->hot->round, 1);
}

void rl__hot_feed(rl_t *rl, size_t slot, uint32_t lref, uint64_t id_lo, uint64_t id_hi,
                  uint64_t w, uint64_t usage_q)
{
    rl_hot_t *h = rl->hot;
    if (h == NULL || h->round.k == 0)
        return;
    if (w > 0)
        feed(rl, &h->round, slot, lref, id_lo, id_hi, w);
    rl_hk_entry_t *e = rl__hotkeys_find(&h->round, lref, id_lo, id_hi);
    if (e != NULL) {
        e->usage_q = usage_q;
        e->slot = (uint32_t)slot + 1;
        e->visited = 1;
    }
}

void rl__hot_round_end(rl_t *rl)
{
    rl_hot_t *h = rl->hot;
    if (h == NULL)
        return;
    if (h->round.k != 0) {
        uint64_t now = rl__clock_now_fp(&rl->clock, RL_CLOCK_PRECISE);
        double dt = (double)(now - h->round_last_fp) / (double)RL_FP_PER_MS / 1000.0;
        h->round_last_fp = now;
        drain(rl);
        rl__hotkeys_tick(&h->round, dt, 1);
        evaluate(rl, &h->round, 1);
    }
    unlock_and_log(rl);
}

/* rl_hotkeys: fold the local limits' slot counters into their totals and
 * feed them to the `req` sketch. */
static void harvest_local(rl_t *rl)
{
    rl_hot_t *h = rl->hot;
    rl_table_t *t = &rl->table;
    uint32_t synced_lref = UINT32_MAX, local_lref = UINT32_MAX;
    for (size_t i = 0; i < t->nslots; i++) {
        rl_slot_t *s = &t->slots[i];
        /* acquire: the key id written before LIVE is visible (local/table.h). */
        uint64_t c = atomic_load_explicit(&s->ctrl, memory_order_acquire);
        if (RL_CTRL_STATE(c) != RL_SLOT_LIVE)
            continue;
        uint32_t lref = RL_CTRL_LREF(c);
        if (lref == synced_lref)
            continue;
        if (lref != local_lref) {
            lim_t l;
            if (!lim_of(rl, lref, &l))
                continue;
            if (l.synced) { /* the sync thread's */
                synced_lref = lref;
                continue;
            }
            local_lref = lref;
        }
        /* release: as the sync thread's harvest (a stats read that sees
         * the moved counts sees the fold begun, local/limits.h); the same swaps as
         * it and a retire, so each decision is folded once. */
        uint64_t a = atomic_exchange_explicit(&s->admitted, 0, memory_order_release);
        uint64_t d = atomic_exchange_explicit(&s->denied, 0, memory_order_release);
        if (a + d == 0)
            continue;
        rl_limit_slot_t *ls = &rl->limits.slots[lref & RL_LIMIT_IDX_MASK];
        rl__stat_fold_n(ls, (unsigned)i, RL_STAT_ADMITTED, a);
        rl__stat_fold_n(ls, (unsigned)i, RL_STAT_DENIED, d);
        /* relaxed: stable while ctrl is, re-read below. */
        uint64_t lo = atomic_load_explicit(&s->id_lo, memory_order_relaxed);
        uint64_t hi = atomic_load_explicit(&s->id_hi, memory_order_relaxed);
        /* acquire: orders the id loads before it (seqlock read side). */
        if (atomic_load_explicit(&s->ctrl, memory_order_acquire) != c)
            continue; /* retired meanwhile: its counts are folded, not fed */
        feed(rl, &h->req, i, lref, lo, hi, a + d);
    }
}

void rl_hotkey_init_sized(rl_hotkey_t *hk, size_t size) { rl__struct_init(hk, size, NULL, 0); }

static void to_public(const rl_hk_entry_t *e, int id, rl_hotkey_t *o)
{
    rl_hotkey_t k;
    memset(&k, 0, sizeof k);
    k.size = o->size;
    k.limit = id;
    k.hot = e->hot;
    k.key_len = e->key_len;
    k.key_kept = e->key_len < RL_HOTKEY_BYTES ? e->key_len : RL_HOTKEY_BYTES;
    memcpy(k.key, e->key, k.key_kept);
    k.demand_per_s = e->rate;
    k.share_per_s = e->share;
    k.fleet_per_s = e->fleet;
    k.count = e->count;
    k.count_err = e->err;
    memcpy(o, &k, o->size < sizeof k ? o->size : sizeof k);
}

_Static_assert(RL_HOTKEY_KEY_BYTES == RL_HOTKEY_BYTES, "a report carries what an entry keeps");
_Static_assert(RL_HOTCAP_KEY_BYTES == RL_HOTKEY_BYTES, "a capture keeps what an entry keeps");

int rl_hotkeys(rl_t *rl, int limit, rl_hotkey_t *out, size_t n)
{
    return rl__hot_report(rl, limit, out, n, 0);
}

int rl__hot_report(rl_t *rl, int limit, rl_hotkey_t *out, size_t n, uint64_t min_age_ms)
{
    if (rl == NULL || (out == NULL && n > 0))
        return RL_EINVAL;
    int rc = rl__fork_check(rl);
    if (rc != 0)
        return rc;
    size_t stride = n > 0 ? out->size : 0;
    for (size_t i = 0; i < n; i++) {
        const rl_hotkey_t *o = (const void *)((const char *)out + i * stride);
        if (o->size != stride ||
            rl__struct_ok(o, o->size, RL_HOTKEY_SIZE_MIN, sizeof *o) != 0)
            return RL_ESIZE;
    }
    uint32_t lref = 0;
    if (limit != -1) {
        if (rl__limit_get(&rl->limits, limit) == NULL)
            return RL_ENOTFOUND;
        lref = rl__limit_ref(limit);
    }
    rl_hot_t *h = rl->hot;
    if (h == NULL)
        return RL_ENOTSUP;
    pthread_mutex_lock(&h->mu);
    uint64_t now = rl__clock_now_fp(&rl->clock, RL_CLOCK_PRECISE);
    if (now - h->req_last_fp >= min_age_ms * RL_FP_PER_MS) {
        rl__hotkeys_decay(&h->req, 1);
        rl__limits_fold_begin(&rl->limits);
        harvest_local(rl);
        rl__limits_fold_end(&rl->limits);
        double dt = (double)(now - h->req_last_fp) / (double)RL_FP_PER_MS / 1000.0;
        h->req_last_fp = now;
        drain(rl);
        rl__hotkeys_tick(&h->req, dt, 0);
        evaluate(rl, &h->req, 0);
    }
    /* Both sketches' entries of the limit, by demand. */
    rl_hk_entry_t **a = h->by_a, **b = h->by_b;
    size_t na = by_demand(&h->req, a), nb = by_demand(&h->round, b), ia = 0, ib = 0, got = 0;
    while (got < n && (ia < na || ib < nb)) {
        rl_hk_entry_t *e = ib >= nb || (ia < na && a[ia]->rate >= b[ib]->rate) ? a[ia++]
                                                                                : b[ib++];
        lim_t l;
        if ((e->count == 0 && !e->hot) || (limit != -1 && e->lref != lref) ||
            !lim_of(rl, e->lref, &l))
            continue;
        to_public(e, l.id, (rl_hotkey_t *)(void *)((char *)out + got * stride));
        got++;
    }
    unlock_and_log(rl);
    return (int)got;
}

size_t rl__hot_publish(rl_t *rl, char *buf, size_t cap)
{
    rl_hot_t *h = rl->hot;
    if (cap > 0)
        buf[0] = '\0';
    if (h == NULL || h->round.k == 0 || cap == 0)
        return 0;
    size_t len = 0, items = 0;
    pthread_mutex_lock(&h->mu);
    rl_hk_entry_t **idx = h->by_a;
    size_t n = by_demand(&h->round, idx);
    /* Names are writer-owned while a limit lives: copied under its lock. */
    rl__limits_lock(&rl->limits);
    for (size_t i = 0; i < n && items < RL_HOT_WORD_ITEMS; i++) {
        const rl_hk_entry_t *e = idx[i];
        lim_t l;
        if (e->key_len == 0 || (e->rate <= 0 && !e->hot) || !lim_of(rl, e->lref, &l))
            continue;
        rl_hot_item_t it;
        memset(&it, 0, sizeof it);
        snprintf(it.limit, sizeof it.limit, "%s", l.name);
        it.kept = e->key_len < RL_HOTKEY_BYTES ? e->key_len : RL_HOTKEY_BYTES;
        memcpy(it.key, e->key, it.kept);
        it.key_len = e->key_len;
        it.demand_mps = (uint64_t)(e->rate * 1000.0 + 0.5);
        it.fleet_mps = (uint64_t)(e->fleet * 1000.0 + 0.5);
        it.hot = e->hot;
        char one[300];
        int k = rl__hot_item_format(&it, one, sizeof one);
        if (k <= 0 || (size_t)k >= sizeof one || len + (items > 0) + (size_t)k >= cap)
            break;
        if (items > 0)
            buf[len++] = ',';
        memcpy(buf + len, one, (size_t)k + 1);
        len += (size_t)k;
        items++;
    }
    pthread_mutex_unlock(&rl->limits.lock);
    pthread_mutex_unlock(&h->mu);
    return len;
}

/* ----------------------------------------------- the hot word (hot/hot.h) */

int rl__hot_item_format(const rl_hot_item_t *h, char *buf, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    char kh[2 * sizeof h->key + 1];
    size_t kept = h->kept < sizeof h->key ? h->kept : sizeof h->key;
    for (size_t i = 0; i < kept; i++) {
        kh[2 * i] = hex[h->key[i] >> 4];
        kh[2 * i + 1] = hex[h->key[i] & 15];
    }
    kh[2 * kept] = '\0';
    return snprintf(buf, cap, "%.63s/%s/%" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%d", h->limit, kh,
                    h->key_len, h->demand_mps, h->fleet_mps, h->hot ? 1 : 0);
}

static int hex_val(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int rl__hot_item_next(const char **p, const char *end, rl_hot_item_t *out)
{
    while (*p < end) {
        const char *s = *p;
        const char *e = memchr(s, ',', (size_t)(end - s));
        if (e == NULL)
            e = end;
        *p = e < end ? e + 1 : end;
        /* six fields separated by '/' */
        const char *f[7];
        int k = 0;
        f[k++] = s;
        for (const char *q = s; q < e && k < 7; q++)
            if (*q == '/')
                f[k++] = q + 1;
        if (k != 6)
            continue;
        f[6] = e + 1;
        size_t ln = (size_t)(f[1] - f[0] - 1), hn = (size_t)(f[2] - f[1] - 1);
        if (ln == 0 || ln >= sizeof out->limit || hn % 2 != 0 || hn / 2 > sizeof out->key)
            continue;
        memset(out, 0, sizeof *out);
        memcpy(out->limit, f[0], ln);
        if (!rl__name_valid(out->limit, sizeof out->limit))
            continue;
        int bad = 0;
        for (size_t i = 0; i < hn / 2; i++) {
            int a = hex_val(f[1][2 * i]), b = hex_val(f[1][2 * i + 1]);
            if (a < 0 || b < 0) {
                bad = 1;
                break;
            }
            out->key[i] = (unsigned char)(a << 4 | b);
        }
        out->kept = hn / 2;
        out->key_len = rl__decimal_u64(f[2], (size_t)(f[3] - f[2] - 1));
        out->demand_mps = rl__decimal_u64(f[3], (size_t)(f[4] - f[3] - 1));
        out->fleet_mps = rl__decimal_u64(f[4], (size_t)(f[5] - f[4] - 1));
        size_t hl = (size_t)(f[6] - f[5] - 1);
        if (bad || out->key_len < out->kept || out->kept == 0 || hl != 1 ||
            (f[5][0] != '0' && f[5][0] != '1'))
            continue;
        out->hot = f[5][0] == '1';
        return 1;
    }
    return 0;
}

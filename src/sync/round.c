/* SPDX-License-Identifier: MIT */
/*
 * One sync round (sync thread only): harvest the slots checkers marked,
 * decide which keys report, send one script call per (limit, virtual shard),
 * and apply the shares that come back.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "sync/internal.h"
#include "sync/reportargs.h"
#include "base/alloc.h"
#include "sync/share.h"
#include "local/shareword.h"
#include "hot/hot.h"


/* Beyond a burst's time and the quiet reporters' entries, how long a key's
 * hash lives unreported in Redis (ms). */
#define KEY_TTL_SLACK_MS 10000

/* A report call's arguments before its keys: EVALSHA, the SHA, the key
 * count. Its text: per key at most a key name (KEY_NAME_BYTES) and
 * RL_REPORT_KEY_ARGS_N numbers, and the fixed arguments (FIXED_ARGS_BYTES,
 * numbers and the incarnation). */
#define CALL_HEAD_ARGS 3
#define U64_TEXT_BYTES 24 /* 20 digits, the terminator, and room */
#define KEY_NAME_BYTES (96 + RL_NAME_MAX + 32)
#define FIXED_ARGS_BYTES 512

/* One script call in flight: which slots its reply answers. */
typedef struct call {
    rl_sync_t *s;
    uint64_t round_id;
    uint64_t sent_ns;
    uint32_t lidx;
    uint32_t n;
    uint32_t slot[RL_SYNC_KEYS_PER_CALL];
    uint64_t ctrl[RL_SYNC_KEYS_PER_CALL];
} call_t;

/* A reply is parsed into rl_sync_t.shares, one element per key of its call. */
_Static_assert(sizeof ((call_t *)0)->slot / sizeof ((call_t *)0)->slot[0] ==
                   sizeof ((rl_sync_t *)0)->shares / sizeof ((rl_sync_t *)0)->shares[0],
               "a call's keys and a reply's parsed shares are sized alike");
_Static_assert(sizeof ((call_t *)0)->ctrl / sizeof ((call_t *)0)->ctrl[0] == RL_SYNC_KEYS_PER_CALL,
               "a call records each key's occupant");

static void snapshot_limits(rl_sync_t *s)
{
    rl_limits_t *ls = &s->rl->limits;
    rl__limits_lock(ls); /* robust: a dead holder of a shared instance blocks nobody */
    for (uint32_t i = 0; i < ls->cap; i++) {
        rl_synclimit_t *l = &s->limits[i];
        /* relaxed: under the writers' lock, which orders every id store. */
        uint32_t id = atomic_load_explicit(&ls->slots[i].id, memory_order_relaxed);
        l->live = 0;
        if (id == 0)
            continue;
        rl__params_read(&ls->slots[i], &l->p);
        /* local, or exact (exact/exact.c) */
        if (l->p.synced != 1 && l->p.synced != RL_SYNCED_TIERED)
            continue;
        l->live = 1;
        l->lref = rl__limit_ref((int)id);
        memcpy(l->name, ls->slots[i].name, RL_NAME_MAX);
    }
    pthread_mutex_unlock(&ls->lock);
}

/* The limit a synced slot belongs to, or NULL. */
static rl_synclimit_t *slot_synclimit(rl_sync_t *s, uint64_t c)
{
    uint32_t lref = RL_CTRL_LREF(c);
    uint32_t idx = lref & RL_LIMIT_IDX_MASK;
    if (idx >= s->rl->limits.cap)
        return NULL;
    rl_synclimit_t *l = &s->limits[idx];
    return l->live && l->lref == lref ? l : NULL;
}

static const rl_gcra_t *current_gcra(rl_slot_t *slot, const rl_synclimit_t *l, rl_gcra_t *tmp)
{
    /* relaxed: a self-contained word; this thread is its only writer. */
    uint64_t w = atomic_load_explicit(&slot->share, memory_order_relaxed);
    if (RL_SHAREWORD_SHARE(w) == 0)
        return &l->p.presync;
    rl__shareword_decode(w, tmp);
    return tmp;
}

/* Visit slot i next round whatever checkers do. relaxed: only this thread
 * harvests the bitmap. */
static void mark_again(rl_table_t *t, size_t i)
{
    atomic_fetch_or_explicit(&t->dirty[i >> 6], UINT64_C(1) << (i & 63), memory_order_relaxed);
}

/* Fold a slot's new counts into its state; 1 if it should report now. */
static int harvest_slot(rl_sync_t *s, size_t i)
{
    rl_table_t *t = &s->rl->table;
    rl_slot_t *slot = &t->slots[i];
    rl_syncslot_t *ss = &s->store->slots[i];
    /* acquire: the occupant's identity and share are visible with LIVE. */
    uint64_t c = atomic_load_explicit(&slot->ctrl, memory_order_acquire);
    rl_synclimit_t *l;
    if (RL_CTRL_STATE(c) != RL_SLOT_LIVE || (l = slot_synclimit(s, c)) == NULL) {
        ss->ctrl = 0;
        return 0;
    }
    if (ss->ctrl != c) { /* a new occupant: a new epoch of counters */
        memset(ss, 0, sizeof *ss);
        ss->ctrl = c;
        ss->epoch = ++s->next_epoch;
        /* relaxed: read by the next holder of a host's lease (shm/host.h),
         * which the lease orders; a private store's only by this thread. */
        atomic_store_explicit(&s->store->next_epoch, s->next_epoch, memory_order_relaxed);
        ss->last_round = s->round_id - 1; /* its counts span this round */
    }
    /* release: a stats read that sees the moved counts sees this round's
     * fold begun (local/limits.h); the bitmap swap (acq_rel) ordered the values. */
    uint64_t a = atomic_exchange_explicit(&slot->admitted, 0, memory_order_release);
    uint64_t d = atomic_exchange_explicit(&slot->denied, 0, memory_order_release);
    rl_limit_slot_t *ls = &s->rl->limits.slots[RL_CTRL_LREF(c) & RL_LIMIT_IDX_MASK];
    rl__stat_fold_n(ls, (unsigned)i, RL_STAT_ADMITTED, a);
    rl__stat_fold_n(ls, (unsigned)i, RL_STAT_DENIED, d);
    ss->cum_a += a;
    ss->cum_o += a + d;
    ss->pend_a += a;
    ss->pend_o += a + d;
    /* relaxed: the key id is stable while ctrl is (validated on reply). */
    rl__hot_feed(s->rl, i, RL_CTRL_LREF(c), atomic_load_explicit(&slot->id_lo, memory_order_relaxed),
                 atomic_load_explicit(&slot->id_hi, memory_order_relaxed), a + d, ss->usage_q);
    /* "Could" counts the silent rounds too (the slot is not visited then):
     * judged against one round of its share, a sparse key's single request
     * looked near whenever the share rounded below one token a round, and
     * each such request cost a near report, three lingering ones and an
     * announcing one (bench/accuracy/README.md, many). Capped at the quiet
     * period: a key back from a long silence with a burst is still near. */
    rl_gcra_t tmp;
    const rl_gcra_t *g = current_gcra(slot, l, &tmp);
    uint64_t since = s->round_id - ss->last_round;
    uint64_t span = since < RL_REPORT_QUIET_MAX ? since : RL_REPORT_QUIET_MAX;
    uint64_t span_fp = span * s->rl->sync_interval_ms * RL_FP_PER_MS;
    /* relaxed: a self-contained word; this thread is its only writer. */
    uint64_t w = atomic_load_explicit(&slot->share, memory_order_relaxed);
    rl_report_view_t v = {
        .pend_o = ss->pend_o,
        .since = since,
        .could = span_fp / g->t_fp + g->burst,
        .period = ss->period,
        .linger = ss->linger,
        .has_share = RL_SHAREWORD_SHARE(w) != 0,
        .hot_every = (w & RL_SHAREWORD_HOT) != 0 ? (uint32_t)l->p.hot_every : 0,
        .round_o = a + d,
    };
    rl_report_action_t act;
    rl__sync_report_policy(&v, &act);
    if (ss->watch) { /* see rl_syncslot_t.watch */
        act.report = act.revisit = 1;
        act.announce = 1;
    }
    ss->linger = (uint8_t)act.linger;
    ss->announce = (uint8_t)act.announce;
    if (act.revisit)
        mark_again(t, i);
    return act.report;
}

void rl__sync_report_policy(const rl_report_view_t *v, rl_report_action_t *out)
{
    out->report = 0;
    out->revisit = 0;
    out->announce = RL_REPORT_QUIET_MAX;
    out->linger = v->linger;
    if (v->pend_o > 0 && v->pend_o * 2 >= v->could && v->hot_every > 1 && v->has_share &&
        v->round_o * 2 * v->since >= v->pend_o) {
        /* Near and hot, hot_policy=local, its demand not falling: every
         * hot_every rounds, its share frozen in between
         * (bench/accuracy/README.md, "Hot keys": rate / nodes instead
         * starved a fleet whose traffic is on a few nodes). Near
         * accumulates (`could` spans every round since the last report), so
         * a node whose traffic stopped would look near for rounds on its
         * old counts and hold its share: a round under half the mean since
         * the last report goes the near way below, at once (hot-shift). At
         * once too when the last report announced another period: Redis
         * would drop an entry announced for one round before this one. */
        out->revisit = 1;
        out->linger = RL_REPORT_LINGER;
        out->announce = v->hot_every;
        out->report = v->period != v->hot_every || v->since >= v->hot_every;
        return;
    }
    if (v->pend_o > 0 && v->pend_o * 2 >= v->could) {
        /* Near its limit: every round. (No counts is never near: a share of
         * no tokens and no rate could admit nothing, and 0 >= 0.) */
        out->report = out->revisit = 1;
        out->announce = 1;
        out->linger = RL_REPORT_LINGER;
        return;
    }
    if (v->linger > 0) {
        /* Near a moment ago and now not, silent or with a residue: its demand
         * fell, and Redis's EWMA moves a fraction alpha of the way per report.
         * Reporting every round for a few more rounds gets the new level into
         * Redis within (1 - alpha)^2 in two; one report and a quiet period
         * (the policy before) left a node whose traffic dropped from 80% of
         * the limit to 10% at 27% for a second, and another node taking over
         * the traffic that much short. Silent lingering reports also decay an
         * idle node's demand instead of freezing it until its entry expires. */
        out->report = out->revisit = 1;
        out->announce = 1;
        out->linger = v->linger - 1;
        return;
    }
    if (v->pend_o == 0) {
        /* Silent and done lingering. Its local share stays: going back to the
         * pre-sync share instead (tried) hands every node fresh tokens each
         * time a sparse key returns (10 nodes checking a 1/s key in turn
         * admitted 10/s). A stale share is used for at most one round before
         * the key's next report replaces it: the formula's one-round term
         * (bench/accuracy/README.md). */
        return;
    }
    /* Quiet: report every RL_REPORT_QUIET_MAX rounds, announcing that
     * period. A key whose last report announced a shorter period reports at
     * once to announce the longer one, before Redis drops its entry (3 short
     * periods) while this node still holds its share. A key whose last report
     * is a period or more old reports at once too: its entry may be gone (3
     * periods), and the stale share it admits at must be replaced within
     * this round, not a period later. So does a key without a share yet, so
     * the pre-sync share is used for one round at most (the bound's E_pre);
     * it announces the quiet period and does not linger: a quiet new key is
     * not busy, and lingering cost every new key four more reports on every
     * node (bench/accuracy/README.md, many). */
    if (!v->has_share || v->period < RL_REPORT_QUIET_MAX || v->since >= RL_REPORT_QUIET_MAX) {
        out->report = 1;
        return;
    }
    out->revisit = 1; /* come back next round even without new counts */
}

/* Redis name of the key in slot i (see rl__redis_key_name). */
static int key_name(rl_sync_t *s, const rl_synclimit_t *l, size_t i, char *buf, size_t cap)
{
    rl_slot_t *slot = &s->rl->table.slots[i];
    /* relaxed: ctrl was validated LIVE this round; a reply for a changed
     * occupant is discarded when it comes back. */
    rl_keyid_t id = {atomic_load_explicit(&slot->id_lo, memory_order_relaxed),
                     atomic_load_explicit(&slot->id_hi, memory_order_relaxed)};
    return rl__redis_key_name(&s->rl->kh, s->rl->key_prefix, l->name, id, buf, cap);
}

static void apply_share(rl_sync_t *s, size_t i, uint64_t c, const rl_share_reply_t *r)
{
    uint64_t q = r->q, tokens = r->tokens;
    rl_slot_t *slot = &s->rl->table.slots[i];
    rl_synclimit_t *l = slot_synclimit(s, c);
    /* acquire: pairs with a claimer's publish; see below. */
    if (l == NULL || atomic_load_explicit(&slot->ctrl, memory_order_acquire) != c)
        return; /* the occupant changed while the call was in flight */
    if (s->split_fps != 0) {
        /* A split fleet: the other secrets' nodes hold shares of their own
         * keys, which this reply knows nothing of. At most an even split
         * among every live node of the prefix, whatever the secret: each
         * node also runs new keys and outages at rate / live, so the
         * fleet as a whole stays within the limit until the split ends. */
        /* relaxed: written by this thread. */
        uint64_t live = atomic_load_explicit(&s->store->fleet_nodes, memory_order_relaxed);
        if (live > 1) {
            uint64_t cap_q = RL_SHARE_ONE / live;
            uint64_t cap_tokens = (l->p.normal.burst + live - 1) / live;
            q = q < cap_q ? q : cap_q;
            tokens = tokens < cap_tokens ? tokens : cap_tokens;
        }
    }
    /* The local interval: the global one divided by our fraction, rounded up
     * so the node never runs faster than its share. */
    uint64_t t_local = 0;
    if (q > 0) {
        unsigned __int128 t = ((unsigned __int128)l->p.normal.t_fp * RL_SHARE_ONE + q - 1) / q;
        t_local = t > RL_SHAREWORD_T_MAX ? RL_SHAREWORD_T_MAX : (uint64_t)t;
    }
    /* A tiered key near its limit: the fleet-wide remaining is under the
     * threshold, plus a token for each live node (each may admit one
     * before it hears of this round). Its checks then confirm in Redis,
     * which decides; the local pre-filter keeps at least a token at the
     * share's rate (a share of no tokens, which a burst split over more
     * nodes than tokens hands most nodes, would deny every check here and
     * starve the key: tiered-low admitted 2 in 60 s of a 1/s limit). */
    uint64_t near_below = l->p.confirm_below + r->nodes;
    int near = l->p.synced == RL_SYNCED_TIERED && r->remaining < near_below;
    if (near && tokens == 0)
        tokens = 1;
    /* relaxed: this thread writes the word (and its hot mark, hot/hot.c). */
    uint64_t hot = atomic_load_explicit(&slot->share, memory_order_relaxed) & RL_SHAREWORD_HOT;
    uint64_t w = rl__shareword_encode(t_local, tokens) | (near ? RL_SHAREWORD_NEAR : 0) | hot;
    /* Close to it: every round from now on (another node's admits may take
     * the key under the threshold while this one is silent). */
    s->store->slots[i].watch = l->p.synced == RL_SYNCED_TIERED && r->remaining < 2 * near_below;
    /* Marked here, not only when harvested: the report that first finds
     * the key close (a new key's, say) did not ask to come back, and a
     * node that then admits nothing would keep this round's view (not
     * near) while the others' admits take the key under the threshold. */
    if (s->store->slots[i].watch)
        mark_again(&s->rl->table, i);
    rl_gcra_t before, after, tmp;
    before = *current_gcra(slot, l, &tmp);
    /* relaxed: a self-contained word. A slot cannot be retired and reused
     * while its reply is in flight: it reported activity this round, and
     * reclaim waits for key_ttl (>= 1 s) of idleness, longer than any reply
     * is accepted (see call_reply). */
    atomic_store_explicit(&slot->share, w, memory_order_relaxed);
    rl__shareword_decode(w, &after);
    /* Keep the key's tokens, not its time debt, across the new share. */
    uint64_t now = rl__clock_now_fp(&s->rl->clock, l->p.clock_source);
    rl__bucket_rescale(&slot->tat, &before, &after, now);
}

int rl__sync_parse_shares(const redisReply *reply, uint32_t n, rl_share_reply_t *out)
{
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY || reply->elements != n)
        return -1;
    for (uint32_t j = 0; j < n; j++) {
        const redisReply *e = reply->element[j];
        rl_share_reply_t *o = &out[j];
        memset(o, 0, sizeof *o);
        o->q = UINT64_MAX;
        if (e == NULL || e->type != REDIS_REPLY_ARRAY || e->elements != RL_REPORT_REPLY_N)
            continue;
        long long v[RL_REPORT_REPLY_N];
        int ok = 1;
        for (int i = 0; i < RL_REPORT_REPLY_N; i++) {
            const redisReply *x = e->element[i];
            ok &= x != NULL && x->type == REDIS_REPLY_INTEGER;
            v[i] = ok ? x->integer : -1;
        }
        /* A share above the whole rate, a negative figure, or a usage no
         * fleet of that many nodes could reach is not one we sent for: skip
         * it rather than trust it. */
        long long q = v[RL_REPLY_Q], tokens = v[RL_REPLY_TOKENS];
        long long usage = v[RL_REPLY_USAGE], nodes = v[RL_REPLY_NODES];
        if (!ok || q < 0 || q > RL_SHARE_ONE || tokens < 0 ||
            (unsigned long long)tokens > RL_SHAREWORD_BURST_MAX || nodes < 0 ||
            nodes > RL_SYNC_NODES_MAX || usage < 0 || usage > nodes * RL_SHARE_ONE)
            continue;
        o->q = (uint64_t)q;
        o->tokens = (uint64_t)tokens;
        o->usage = (uint64_t)usage;
        o->nodes = (uint64_t)nodes;
        o->remaining = v[RL_REPLY_REMAINING] > 0 ? (uint64_t)v[RL_REPLY_REMAINING] : 0;
    }
    return 0;
}

/* Fold one key's answer into its limit's stats window: the maxima over
 * every answer, each key counted once (a near key reports every round). */
static void window_add(rl_sync_t *s, rl_synclimit_t *l, size_t slot, const rl_share_reply_t *r)
{
    const uint32_t over_bit = UINT32_C(1) << 31;
    uint32_t tag = s->window_no & ~over_bit;
    rl_syncslot_t *ss = &s->store->slots[slot];
    if ((ss->win_seen & ~over_bit) != tag) {
        ss->win_seen = tag;
        l->w_keys++;
    }
    if (r->usage > RL_SHARE_ONE && !(ss->win_seen & over_bit)) {
        ss->win_seen |= over_bit;
        l->w_over++;
    }
    if (r->usage > l->w_usage_max)
        l->w_usage_max = r->usage;
    if (r->nodes > l->w_nodes_max)
        l->w_nodes_max = r->nodes;
    /* This node's share against an even split: q x nodes, in ppm. */
    uint64_t skew = (uint64_t)(((unsigned __int128)r->q * r->nodes * 1000000u) >> 24);
    if (skew > l->w_skew_max)
        l->w_skew_max = skew;
}

static uint32_t clamp_u32(uint64_t v) { return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v; }

/* At a window's end: publish every synced limit's window to its slot, and
 * start the next one. */
static void window_publish(rl_sync_t *s)
{
    rl_limits_t *ls = &s->rl->limits;
    for (uint32_t i = 0; i < ls->cap; i++) {
        rl_synclimit_t *l = &s->limits[i];
        rl_limit_slot_t *slot = &ls->slots[i];
        /* relaxed: a statistic; a limit removed (or replaced) since the
         * window began gets nothing, and rl_limit_add zeroes a new one's. */
        uint32_t id = atomic_load_explicit(&slot->id, memory_order_relaxed);
        if (l->w_lref != 0 && id != 0 && rl__limit_ref((int)id) == l->w_lref) {
            /* relaxed: statistics, each figure self-contained. */
            atomic_store_explicit(&slot->sync_keys, l->w_keys, memory_order_relaxed);
            atomic_store_explicit(&slot->sync_over_keys, l->w_over, memory_order_relaxed);
            atomic_store_explicit(&slot->sync_usage_max_ppm,
                                  clamp_u32((uint64_t)(((unsigned __int128)l->w_usage_max *
                                                        1000000u) >> 24)),
                                  memory_order_relaxed);
            atomic_store_explicit(&slot->sync_skew_max_ppm, clamp_u32(l->w_skew_max),
                                  memory_order_relaxed);
            atomic_store_explicit(&slot->sync_nodes_max, clamp_u32(l->w_nodes_max),
                                  memory_order_relaxed);
        }
        l->w_lref = l->live ? l->lref : 0;
        l->w_keys = l->w_over = l->w_usage_max = l->w_skew_max = l->w_nodes_max = 0;
    }
    /* Never 0 in its low 31 bits: a fresh slot's win_seen (0) is no window. */
    s->window_no = (s->window_no + 1) & ~(UINT32_C(1) << 31);
    if (s->window_no == 0)
        s->window_no = 1;
}

/* An error reply: count it, and act on the classes that need more than a
 * failed round (reload the script; reconnect to the new primary). */
static void on_error_reply(rl_sync_t *s, const redisReply *reply)
{
    int cls = rl__redis_classify(reply);
    rl__sync_error(s, cls);
    if (cls == RL_REDIS_ERR_NOSCRIPT)
        rl__redis_scripts_forget(&s->scripts, RL_SYNC_SCRIPT_REPORT); /* reloaded before the next round */
    else if (cls == RL_REDIS_ERR_READONLY)
        s->drop_after_round = 1; /* failover: this server is a replica now */
    if (cls != RL_REDIS_ERR_NOSCRIPT)
        rl__sync_log(s, RL_LOG_WARN, "sync: script error: %.200s", reply->str);
}

static void ping_reply(redisAsyncContext *ac, void *r, void *priv)
{
    (void)ac;
    rl_sync_t *s = priv;
    redisReply *reply = r;
    uint64_t round = s->ping_round;
    if (reply != NULL && reply->type == REDIS_REPLY_ERROR)
        on_error_reply(s, reply);
    int failed = reply == NULL || reply->type == REDIS_REPLY_ERROR;
    if (round != s->round_id)
        return; /* a late answer to a round already judged */
    if (failed)
        s->round_failed = 1;
    if (s->in_flight > 0 && --s->in_flight == 0)
        rl__sync_round_done(s);
}

static void call_reply(redisAsyncContext *ac, void *r, void *priv)
{
    (void)ac;
    call_t *call = priv;
    rl_sync_t *s = call->s;
    redisReply *reply = r;
    uint64_t age_ms = (uv_hrtime() - call->sent_ns) / 1000000u;
    int current = call->round_id == s->round_id;
    if (reply == NULL || reply->type == REDIS_REPLY_ERROR) {
        if (reply != NULL)
            on_error_reply(s, reply);
        if (current)
            s->round_failed = 1;
    } else if (age_ms * 2 < s->cfg.key_ttl_ms &&
               rl__sync_parse_shares(reply, call->n, s->shares) == 0) {
        rl_synclimit_t *l = &s->limits[call->lidx];
        int windowed = l->w_lref != 0 && l->w_lref == l->lref && l->live;
        for (uint32_t j = 0; j < call->n; j++) {
            if (s->shares[j].q == UINT64_MAX)
                continue;
            apply_share(s, call->slot[j], call->ctrl[j], &s->shares[j]);
            /* Only for the occupant the report was for. */
            if (s->store->slots[call->slot[j]].ctrl == call->ctrl[j])
                s->store->slots[call->slot[j]].usage_q = s->shares[j].usage; /* hot/hot.c */
            if (windowed && s->store->slots[call->slot[j]].ctrl == call->ctrl[j])
                window_add(s, l, call->slot[j], &s->shares[j]);
        }
    } else if (age_ms * 2 >= s->cfg.key_ttl_ms) {
        /* too old to apply safely (see apply_share): dropped, not an error */
    } else {
        rl__sync_error(s, RL_REDIS_ERR_OTHER);
        if (current)
            s->round_failed = 1;
    }
    if (current && s->in_flight > 0 && --s->in_flight == 0)
        rl__sync_round_done(s);
    rl__free(&s->rl->alloc, call, sizeof *call, 8);
}

/* A command's arguments, formatted into one text buffer. */
typedef struct argbuf {
    const char **argv;
    size_t *argl;
    size_t argc, argv_bytes, k;
    char *text, *w;
    size_t text_cap;
} argbuf_t;

static int argbuf_init(argbuf_t *b, const rl_allocator_t *a, size_t argc, size_t text_cap)
{
    b->argc = argc;
    b->argv_bytes = argc * (sizeof(char *) + sizeof(size_t));
    b->argv = rl__calloc(a, b->argv_bytes, 8);
    b->text_cap = text_cap;
    b->text = b->w = rl__calloc(a, text_cap, 1);
    b->argl = b->argv != NULL ? (size_t *)(void *)(b->argv + argc) : NULL;
    b->k = 0;
    return b->argv != NULL && b->text != NULL ? 0 : -1;
}

static void argbuf_free(argbuf_t *b, const rl_allocator_t *a)
{
    rl__free(a, (void *)b->argv, b->argv_bytes, 8);
    rl__free(a, b->text, b->text_cap, 1);
}

/* Close the argument just written at b->w (len bytes). */
static void arg_done(argbuf_t *b, int len)
{
    b->argv[b->k] = b->w;
    b->argl[b->k++] = (size_t)len;
    b->w += len + 1;
}

static size_t arg_room(const argbuf_t *b) { return b->text_cap - (size_t)(b->w - b->text); }

static void arg_u64(argbuf_t *b, uint64_t v)
{
    arg_done(b, snprintf(b->w, arg_room(b), "%" PRIu64, v));
}

static void arg_str(argbuf_t *b, const char *v) { arg_done(b, snprintf(b->w, arg_room(b), "%s", v)); }

/* The call's fixed arguments, in sync/reportargs.h's order. */
static void put_fixed_args(rl_sync_t *s, const rl_synclimit_t *l, argbuf_t *b)
{
    for (unsigned i = 1; i <= RL_REPORT_ARGS_N; i++) {
        switch (i) {
        case RL_RA_INC: arg_str(b, s->store->incarnation); break;
        case RL_RA_RATE: arg_u64(b, l->p.rate_count); break;
        case RL_RA_PERIOD: arg_u64(b, l->p.period_ms); break;
        case RL_RA_BURST: arg_u64(b, l->p.normal.burst); break;
        case RL_RA_ALPHA: arg_u64(b, s->cfg.demand_alpha_q16); break;
        case RL_RA_RESERVE: arg_u64(b, RL_SHARE_RESERVE_DEFAULT); break;
        case RL_RA_GAIN: arg_u64(b, RL_SHARE_GAIN_DEFAULT); break;
        case RL_RA_MAX_CUT: arg_u64(b, RL_SHARE_MAX_CUT_DEFAULT); break;
        case RL_RA_TTL:
            /* The key hash outlives two bursts' worth of time and the
             * entries of its quietest reporters. */
            arg_u64(b, 2 * (l->p.normal.tau_fp / RL_FP_PER_MS) + KEY_TTL_SLACK_MS +
                           (uint64_t)RL_REPORT_QUIET_MAX * RL_REPORT_ENTRY_PERIODS *
                               s->rl->sync_interval_ms);
            break;
        case RL_RA_LEAVING: arg_u64(b, s->leaving ? 1 : 0); break;
        case RL_RA_NOW: arg_u64(b, s->round_virtual_ms); break;
        case RL_RA_EXPECTED: arg_u64(b, s->cfg.expected_nodes); break;
        case RL_RA_YOUNG: arg_u64(b, 2 * (uint64_t)s->rl->sync_interval_ms); break; /* two rounds */
        case RL_RA_FRESH: arg_u64(b, s->rl->sync_interval_ms); break;
        case RL_RA_TIERED: arg_u64(b, l->p.synced == RL_SYNCED_TIERED); break;
        }
    }
}

/* Slot i's report, in sync/reportargs.h's order; its pending counts are then
 * sent (zeroed) and it is no longer queued. */
static void put_key_args(rl_sync_t *s, uint32_t i, argbuf_t *b)
{
    rl_syncslot_t *ss = &s->store->slots[i];
    /* A key that reports every round lives 3 rounds unrefreshed; a quiet one
     * 3 of its longer periods: a dead node frees its busy keys' shares
     * within 3 rounds. */
    uint32_t period = ss->announce ? ss->announce : 1;
    ss->period = (uint8_t)period;
    for (unsigned j = 1; j <= RL_REPORT_KEY_ARGS_N; j++) {
        switch (j) {
        case RL_RK_EPOCH: arg_u64(b, ss->epoch); break;
        case RL_RK_CUM_A: arg_u64(b, ss->cum_a); break;
        case RL_RK_CUM_O: arg_u64(b, ss->cum_o); break;
        case RL_RK_STALE:
            arg_u64(b, (uint64_t)RL_REPORT_ENTRY_PERIODS * period * s->rl->sync_interval_ms);
            break;
        /* What is new since this node's last report, and the time it spans:
         * the script's rate sample for an entry it must create again (its
         * key hash flushed, evicted or expired), where the cumulative
         * counters would put the key's whole history into one round. */
        case RL_RK_NEW_A: arg_u64(b, ss->pend_a); break;
        case RL_RK_NEW_O: arg_u64(b, ss->pend_o); break;
        case RL_RK_SPAN:
            arg_u64(b, (s->round_id - ss->last_round) * s->rl->sync_interval_ms);
            break;
        }
    }
    ss->pend_a = 0;
    ss->pend_o = 0;
    ss->last_round = s->round_id;
    ss->queued = 0;
}

/* Send the reports of slots idx[0, n), all of limit l and one vshard
 * (n <= RL_SYNC_KEYS_PER_CALL). */
static int send_call(rl_sync_t *s, rl_synclimit_t *l, uint32_t lidx, const uint32_t *idx,
                     uint32_t n)
{
    const rl_allocator_t *a = &s->rl->alloc;
    call_t *call = rl__calloc(a, sizeof *call, 8);
    argbuf_t b;
    const char *body = rl__redis_scripts_body(&s->scripts, RL_SYNC_SCRIPT_REPORT);
    int ok = argbuf_init(&b, a,
                         CALL_HEAD_ARGS + n + RL_REPORT_ARGS_N + RL_REPORT_KEY_ARGS_N * (size_t)n,
                         (size_t)n * (KEY_NAME_BYTES + RL_REPORT_KEY_ARGS_N * U64_TEXT_BYTES) +
                             FIXED_ARGS_BYTES + strlen(body));
    if (call == NULL || ok != 0) {
        rl__free(a, call, sizeof *call, 8);
        argbuf_free(&b, a);
        return -1;
    }
    arg_str(&b, rl__redis_scripts_verb(&s->scripts, RL_SYNC_SCRIPT_REPORT));
    arg_str(&b, body);
    arg_u64(&b, n);
    for (uint32_t j = 0; j < n; j++)
        arg_done(&b, key_name(s, l, idx[j], b.w, arg_room(&b)));
    put_fixed_args(s, l, &b);
    for (uint32_t j = 0; j < n; j++) {
        call->slot[j] = idx[j];
        call->ctrl[j] = s->store->slots[idx[j]].ctrl;
        put_key_args(s, idx[j], &b);
    }
    call->s = s;
    call->round_id = s->round_id;
    call->sent_ns = uv_hrtime();
    call->lidx = lidx;
    call->n = n;
    /* Every key of a call shares one hash tag (its limit and vshard). */
    size_t tag_len;
    const char *tag = rl__redis_hash_tag(b.argv[CALL_HEAD_ARGS], b.argl[CALL_HEAD_ARGS], &tag_len);
    int rc = rl__redis_route_send(&s->route, tag, tag_len, call_reply, call, (int)b.k, b.argv,
                                  b.argl);
    argbuf_free(&b, a);
    if (rc != REDIS_OK) {
        /* The tag's server is down (a cluster master failing over): the
         * keys come back next round with their cumulative counters. */
        rl_table_t *t = &s->rl->table;
        for (uint32_t j = 0; j < n; j++)
            /* relaxed: only this thread harvests the bitmap. */
            atomic_fetch_or_explicit(&t->dirty[idx[j] >> 6], UINT64_C(1) << (idx[j] & 63),
                                     memory_order_relaxed);
        rl__free(a, call, sizeof *call, 8);
        return -1;
    }
    s->in_flight++;
    rl__sync_count(s, C_CALLS, 1);
    rl__sync_count(s, C_REPORTS, n);
    s->round_reports += n;
    return 0;
}

/* Group the reporting slots by (limit, vshard) with a counting sort, then
 * send each group in calls of at most RL_SYNC_KEYS_PER_CALL keys. */
static void send_reports(rl_sync_t *s, uint32_t n)
{
    rl_table_t *t = &s->rl->table;
    uint32_t groups = s->rl->limits.cap * RL_VSHARDS;
    uint32_t *count = s->bucket_of;
    memset(count, 0, (size_t)(groups + 1) * sizeof *count);
    uint32_t *grp = s->order + t->nslots; /* second half: group of each entry */
    for (uint32_t j = 0; j < n; j++) {
        uint32_t i = s->order[j];
        uint64_t c = s->store->slots[i].ctrl;
        /* relaxed: the key id is stable while ctrl is (validated on reply). */
        rl_keyid_t id = {atomic_load_explicit(&t->slots[i].id_lo, memory_order_relaxed),
                         atomic_load_explicit(&t->slots[i].id_hi, memory_order_relaxed)};
        grp[j] = (RL_CTRL_LREF(c) & RL_LIMIT_IDX_MASK) * RL_VSHARDS + rl__redis_vshard(id);
        count[grp[j] + 1]++;
    }
    for (uint32_t g = 0; g < groups; g++)
        count[g + 1] += count[g];
    uint32_t *sorted = s->order + 2 * (size_t)t->nslots;
    for (uint32_t j = 0; j < n; j++)
        sorted[count[grp[j]]++] = s->order[j];
    /* count[g] is now the end of group g. */
    uint32_t start = 0;
    for (uint32_t g = 0; g < groups && start < n; g++) {
        uint32_t end = count[g];
        uint32_t lidx = g / RL_VSHARDS;
        while (start < end) {
            uint32_t m = end - start < RL_SYNC_KEYS_PER_CALL ? end - start
                                                              : RL_SYNC_KEYS_PER_CALL;
            if (send_call(s, &s->limits[lidx], lidx, sorted + start, m) != 0)
                s->round_failed = 1;
            start += m;
        }
    }
}

/* Whether Redis may still count this node's entry for the key: it drops it
 * 3 announced periods after the report (Redis time). Rounds are at least
 * 90% of the interval apart (jitter), and the round that asks (rl_close's)
 * may come at once after the one before, so `since` rounds prove at least
 * 0.9 x (since - 1) intervals. */
static int entry_may_live(const rl_sync_t *s, const rl_syncslot_t *ss)
{
    uint64_t since = s->round_id - ss->last_round;
    return since <= 1 || (since - 1) * (RL_SYNC_JITTER_DEN - 1) <
                             (uint64_t)RL_REPORT_ENTRY_PERIODS * RL_SYNC_JITTER_DEN * ss->period;
}

/* Limits with at least one of order[0, n) (for the heartbeat). */
static uint64_t count_reported_limits(rl_sync_t *s, uint32_t n)
{
    uint64_t count = 0;
    for (uint32_t j = 0; j < n; j++) {
        uint32_t idx = RL_CTRL_LREF(s->store->slots[s->order[j]].ctrl) & RL_LIMIT_IDX_MASK;
        if (idx < s->rl->limits.cap && s->limits[idx].reported_round != s->round_id) {
            s->limits[idx].reported_round = s->round_id;
            count++;
        }
    }
    return count;
}

void rl__sync_round(rl_sync_t *s)
{
    rl_table_t *t = &s->rl->table;
    s->round_id++;
    /* relaxed: as the epoch's (harvest_slot). */
    atomic_store_explicit(&s->store->round_id, s->round_id, memory_order_relaxed);
    s->round_failed = 0;
    s->in_flight = 0;
    s->round_start_ns = uv_hrtime();
    s->round_reports = 0;
    rl__sync_count(s, C_ROUNDS, 1);
    snapshot_limits(s);
    /* Every RL_STATS_SYNC_WINDOW rounds, in which each quiet key reports
     * at least once (RL_REPORT_QUIET_MAX). */
    if (s->round_id % RL_STATS_SYNC_WINDOW == 1)
        window_publish(s);
    uint32_t n = 0;
    size_t words = (t->nslots + 63) / 64;
    rl__hot_round_begin(s->rl);
    rl__limits_fold_begin(&s->rl->limits);
    for (size_t wi = 0; wi < words; wi++) {
        /* acq_rel: see rl__table_count; the counter swaps below come after. */
        uint64_t bits = atomic_exchange_explicit(&t->dirty[wi], 0, memory_order_acq_rel);
        while (bits != 0) {
            size_t i = wi * 64 + (size_t)__builtin_ctzll(bits);
            bits &= bits - 1;
            if (harvest_slot(s, i)) {
                s->store->slots[i].queued = 1;
                s->order[n++] = (uint32_t)i;
            }
        }
    }
    rl__limits_fold_end(&s->rl->limits);
    rl__hot_round_end(s->rl);
    if (s->leaving) {
        /* Hand back the shares Redis still counts and report the usage it
         * has not seen. Not every key ever reported: one whose entry expired
         * long ago holds nothing in Redis, and its write-back would create
         * its hash again (five nodes closing after 8000 keys each made 28665
         * dead hashes, cost Redis 490 ms, ran every close into its deadline,
         * and under allkeys-lru evicted the live hot keys). */
        for (size_t i = 0; i < t->nslots; i++) {
            rl_syncslot_t *ss = &s->store->slots[i];
            if (ss->period != 0 && ss->ctrl != 0 && !ss->queued &&
                (ss->pend_o > 0 || entry_may_live(s, ss))) {
                ss->queued = 1;
                s->order[n++] = (uint32_t)i;
            }
        }
    }
    int ready = rl__redis_route_can_send(&s->route, NULL, 0) &&
                rl__redis_scripts_ready(&s->scripts, RL_SYNC_SCRIPT_REPORT);
    if (!ready)
        s->round_failed = 1; /* nothing reached Redis: the round failed */
    else
        rl__sync_heartbeat(s, n, count_reported_limits(s, n));
    if (n > 0 && ready) {
        send_reports(s, n);
    } else if (n == 0 && ready) {
        /* Nothing to report: probe, so a frozen or blackholed server is
         * still noticed within a round. */
        s->ping_round = s->round_id;
        static const char *const ping[] = {"PING"};
        static const size_t ping_len[] = {4};
        if (rl__redis_route_send(&s->route, NULL, 0, ping_reply, s, 1, (const char **)ping,
                                 ping_len) == REDIS_OK)
            s->in_flight++;
        else
            s->round_failed = 1;
    } else if (n > 0) {
        /* Not connected: the counts stay accumulated (cumulative counters)
         * and the keys come back next round. */
        s->round_failed = 1;
        for (uint32_t j = 0; j < n; j++) {
            size_t i = s->order[j];
            s->store->slots[i].queued = 0;
            /* relaxed: only this thread harvests the bitmap. */
            atomic_fetch_or_explicit(&t->dirty[i >> 6], UINT64_C(1) << (i & 63),
                                     memory_order_relaxed);
        }
    }
    if (s->in_flight == 0)
        rl__sync_round_done(s);
}

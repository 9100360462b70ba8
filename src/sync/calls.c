/* SPDX-License-Identifier: MIT */
/*
 * A round's report calls (sync thread only): one script call per (limit,
 * virtual shard), its arguments in sync/reportargs.h's order, and its reply:
 * the shares applied to the slots and the stats window's figures. The
 * round itself (harvest, the report policy) is sync/round.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "sync/internal.h"
#include "sync/reportargs.h"
#include "base/alloc.h"
#include "sync/share.h"
#include "local/shareword.h"

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
    rl_gcra_t before, after, tmp;
    before = *current_gcra(slot, l, &tmp);
    if (r->hold) {
        /* The key's hash was lost and is being rebuilt: the other nodes
         * still hold shares it does not count, so this one keeps at most
         * what it holds (its pre-sync share if it has none yet). */
        if (t_local != 0 && t_local < before.t_fp)
            t_local = before.t_fp;
        tokens = tokens < before.burst ? tokens : before.burst;
    }
    /* A tiered key near its limit: the fleet-wide remaining is under the
     * threshold, plus a token for each live node (each may admit one
     * before it hears of this round). Its checks then confirm in Redis,
     * which decides; the local pre-filter keeps at least a token at the
     * share's rate (a share of no tokens, which a burst split over more
     * nodes than tokens hands most nodes, would deny every check here and
     * starve the key, as the accuracy simulator's tiered-low shows in its
     * admitted count). */
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
    /* relaxed: a self-contained word. A slot cannot be retired and reused
     * while its reply is in flight: it reported activity this round, and
     * reclaim waits for key_ttl (>= 1 s) of idleness, longer than any reply
     * is accepted (see call_reply). */
    atomic_store_explicit(&slot->share, w, memory_order_relaxed);
    rl__shareword_decode(w, &after);
    /* Keep the key's tokens, not its time debt, across the new share: what
     * a debt or a wait owes beyond the burst whole, in tokens. */
    uint64_t now = rl__clock_now_fp(&s->rl->clock, l->p.clock_source);
    rl__bucket_rescale(&slot->tat, rl__table_over(&s->rl->table, slot), &before, &after, now);
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
        long long hold = v[RL_REPLY_HOLD];
        if (!ok || q < 0 || q > RL_SHARE_ONE || tokens < 0 ||
            (unsigned long long)tokens > RL_SHAREWORD_BURST_MAX || nodes < 0 ||
            nodes > RL_SYNC_NODES_MAX || usage < 0 || usage > nodes * RL_SHARE_ONE ||
            (hold != 0 && hold != 1))
            continue;
        o->q = (uint64_t)q;
        o->tokens = (uint64_t)tokens;
        o->usage = (uint64_t)usage;
        o->nodes = (uint64_t)nodes;
        o->remaining = v[RL_REPLY_REMAINING] > 0 ? (uint64_t)v[RL_REPLY_REMAINING] : 0;
        o->hold = (int)hold;
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
            if (s->store->slots[call->slot[j]].ctrl == call->ctrl[j]) {
                s->store->slots[call->slot[j]].usage_q = s->shares[j].usage; /* hot/hot.c */
                /* A reply during a hold counts the nodes back so far: the
                 * others still hold shares, and a loss again must wait for
                 * them too. */
                rl_syncslot_t *ss = &s->store->slots[call->slot[j]];
                uint32_t nodes = (uint32_t)s->shares[j].nodes;
                ss->seen = s->shares[j].hold && ss->seen > nodes ? ss->seen : nodes;
            }
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
        /* Nodes that may hold a share the key's hash counts: if the hash
         * is gone, the script holds every node's share until they are back. */
        case RL_RK_SEEN: arg_u64(b, ss->seen); break;
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
        for (uint32_t j = 0; j < n; j++)
            mark_again(&s->rl->table, idx[j]);
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
void rl__sync_send_reports(rl_sync_t *s, uint32_t n)
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

int rl__sync_send_ping(rl_sync_t *s)
{
    static const char *const ping[] = {"PING"};
    static const size_t ping_len[] = {4};
    s->ping_round = s->round_id;
    if (rl__redis_route_send(&s->route, NULL, 0, ping_reply, s, 1, (const char **)ping,
                             ping_len) != REDIS_OK)
        return -1;
    s->in_flight++;
    return 0;
}

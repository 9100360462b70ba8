/* SPDX-License-Identifier: MIT */
/*
 * One sync round (sync thread only): harvest the slots checkers marked,
 * decide which keys report (rl__sync_report_policy), publish the stats
 * window, and hand the reports to sync/calls.c, which sends one script call
 * per (limit, virtual shard) and applies the shares that come back.
 */
#include <string.h>
#include "sync/internal.h"
#include "hot/hot.h"

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

/*
 * The tokens a harvested slot's decisions (a admitted, d denied) stand for:
 * its rl_slottok_t's counts added (local/table.h), swapped to 0 as the
 * slot's counters are. A settle below its estimate takes tokens off; the
 * cumulative counters Redis folds (report.lua) only grow, so what a round
 * cannot take off its own admissions is owed (rl_syncslot_t.owed) and
 * taken off the next ones: Redis's count is the settled amounts once
 * later admissions have absorbed it. Cost 1 alone: *ta = a, *td = d.
 */
static void harvest_tokens(rl_slottok_t *x, rl_syncslot_t *ss, uint64_t a, uint64_t d,
                           uint64_t *ta, uint64_t *td)
{
    /* release: as the slot's counters' swaps (above); a relaxed add of
     * a checker is in the count or in the next harvest's. */
    int64_t more = atomic_exchange_explicit(&x->admitted, 0, memory_order_release);
    uint64_t more_d = atomic_exchange_explicit(&x->denied, 0, memory_order_release);
    /* Within range: a round's counts are far below 2^62 either way. */
    int64_t net = (int64_t)a + more + ss->owed;
    ss->owed = net < 0 ? net : 0;
    *ta = net > 0 ? (uint64_t)net : 0;
    *td = d + more_d;
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
    uint64_t ta, td;
    harvest_tokens(&t->tok[i], ss, a, d, &ta, &td);
    ss->cum_a += ta;
    ss->cum_o += ta + td;
    ss->pend_a += ta;
    ss->pend_o += ta + td;
    /* relaxed: the key id is stable while ctrl is (validated on reply). */
    rl__hot_feed(s->rl, i, RL_CTRL_LREF(c), atomic_load_explicit(&slot->id_lo, memory_order_relaxed),
                 atomic_load_explicit(&slot->id_hi, memory_order_relaxed), a + d, ss->usage_q);
    /* "Could" counts the silent rounds too (the slot is not visited then):
     * judged against one round of its share, a sparse key's single request
     * looks near whenever the share rounds below one token a round, and
     * each such request costs a near report and the lingering and
     * announcing ones after it (test_sync's sparse_keys_report_once_a_period).
     * Capped at the quiet period: a key back from a long silence with a
     * burst is still near. */
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
         * hot_every rounds, its share frozen in between (rate / nodes
         * instead would starve a fleet whose traffic is on a few nodes: the
         * accuracy simulator's hot-skew). Near
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
         * Redis within (1 - alpha)^2 in two; one report and then a quiet
         * period would leave Redis holding most of the old demand for that
         * period, and a node taking the traffic over that much short
         * (test_sync's falling_demand_reaches_redis_in_two_rounds,
         * test_sync_policy's report_policy_follows_a_fall). Silent lingering
         * reports also decay an idle node's demand instead of freezing it
         * until its entry expires. */
        out->report = out->revisit = 1;
        out->announce = 1;
        out->linger = v->linger - 1;
        return;
    }
    if (v->pend_o == 0) {
        /* Silent and done lingering. Its local share stays: going back to the
         * pre-sync share instead would hand every node fresh tokens each time
         * a sparse key returns, so nodes checking a key in turn would admit
         * a multiple of its limit (the accuracy simulator's low, against its
         * overshoot bound). A stale share is used for at most one round
         * before the key's next report replaces it: the bound's rate*I term
         * (bench/accuracy/README.md, "The overshoot bound"). */
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
     * not busy, and lingering would cost every new key more reports on every
     * node (the accuracy simulator's many, its reports per round;
     * test_sync's quiet_key_announces_its_period_and_reports_after_expiry). */
    if (!v->has_share || v->period < RL_REPORT_QUIET_MAX || v->since >= RL_REPORT_QUIET_MAX) {
        out->report = 1;
        return;
    }
    out->revisit = 1; /* come back next round even without new counts */
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

/* The final round's keys beyond the harvest: hand back the shares Redis
 * still counts and report the usage it has not seen. Not every key ever
 * reported: one whose entry expired long ago holds nothing in Redis, and its
 * write-back would create its hash again, a dead hash per key and node that
 * costs Redis script time, can run the close into its deadline, and under
 * allkeys-lru evicts live keys (test_sync's
 * close_writes_back_only_live_or_unreported). The new count of order[]. */
static uint32_t queue_leaving(rl_sync_t *s, uint32_t n)
{
    for (size_t i = 0; i < s->rl->table.nslots; i++) {
        rl_syncslot_t *ss = &s->store->slots[i];
        if (ss->period != 0 && ss->ctrl != 0 && !ss->queued &&
            (ss->pend_o > 0 || entry_may_live(s, ss))) {
            ss->queued = 1;
            s->order[n++] = (uint32_t)i;
        }
    }
    return n;
}

/* Not connected: the counts of order[0, n) stay accumulated (cumulative
 * counters) and the keys come back next round. */
static void requeue(rl_sync_t *s, uint32_t n)
{
    for (uint32_t j = 0; j < n; j++) {
        size_t i = s->order[j];
        s->store->slots[i].queued = 0;
        mark_again(&s->rl->table, i);
    }
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
    if (s->leaving)
        n = queue_leaving(s, n);
    int ready = rl__redis_route_can_send(&s->route, NULL, 0) &&
                rl__redis_scripts_ready(&s->scripts, RL_SYNC_SCRIPT_REPORT);
    if (!ready)
        s->round_failed = 1; /* nothing reached Redis: the round failed */
    else
        rl__sync_heartbeat(s, n, count_reported_limits(s, n));
    if (n > 0 && ready)
        rl__sync_send_reports(s, n);
    else if (n == 0 && ready && rl__sync_send_ping(s) != 0)
        s->round_failed = 1; /* nothing to report, and no PING to probe with */
    else if (n > 0)
        requeue(s, n); /* not connected: the round failed above */
    if (ready)
        rl__sync_inflight_round(s);
    if (s->in_flight == 0)
        rl__sync_round_done(s);
}

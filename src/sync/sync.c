/* SPDX-License-Identifier: MIT */
/*
 * The sync thread: its own libuv loop, one route to Redis (redis/route.h)
 * and its scripts (redis/scripts.h), the round timer (or the stepper,
 * sync/step.c), the round deadline, and the health state the rounds decide
 * (policy/policy.h). The round itself is sync/round.c, its script calls
 * sync/calls.c, the heartbeat sync/heartbeat.c.
 */
#include <sys/random.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "sync/internal.h"
#include "redis/route.h"
#include "base/alloc.h"
#include "base/thread.h"
#include "lua/scripts.h"
#include "base/backoff.h"
#include "policy/policy.h"
#include "redis/uvloop.h"

/* A round's replies are awaited 9/10 of the interval: the next round's
 * jittered start (at least 90% of it) never finds them outstanding. */
#define ROUND_DEADLINE_NUM (RL_SYNC_JITTER_DEN - 1)
#define ROUND_DEADLINE_DEN RL_SYNC_JITTER_DEN
/* rl_open waits for the first connection's outcome its connect deadline
 * and this much more (the setup's replies), never longer. */
#define FIRST_OUTCOME_SLACK_MS 100
/* Rounds in a row whose replies missed the deadline before the connection
 * is started over (a frozen or blackholed server). */
#define SILENT_ROUNDS_MAX 3

void rl__sync_log(rl_sync_t *s, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rl__logv(&s->rl->logger, level, fmt, ap);
    va_end(ap);
}

/* Jitter only, seeded per instance. */
static uint64_t next_random(rl_sync_t *s) { return rl__xorshift(&s->rng); }

static void set_connected(rl_sync_t *s, int on)
{
    /* relaxed: a statistic. */
    atomic_store_explicit(&s->store->counters[C_CONNECTED], (uint64_t)on, memory_order_relaxed);
}

/* Tell rl_open how the first connection went (once). */
static void first_outcome(rl_sync_t *s, int outcome)
{
    uv_mutex_lock(&s->step_mu);
    if (s->first_outcome == FIRST_PENDING) {
        s->first_outcome = outcome;
        uv_cond_broadcast(&s->step_cv);
    }
    uv_mutex_unlock(&s->step_mu);
}

/* Move to a health state: publish it with the time it was entered, account
 * the time spent in the old one, and log it (sync/healthlog.c). */
static void set_health(rl_sync_t *s, int state, const char *why)
{
    rl_health_t *h = &s->rl->health;
    /* relaxed: this thread is the only writer; readers need the value only. */
    uint64_t w = atomic_load_explicit(&h->word, memory_order_relaxed);
    int old = RL_HEALTH_STATE(w);
    if (old == state)
        return;
    uint64_t now = rl__clock_now_fp(&s->rl->clock, RL_CLOCK_PRECISE);
    uint64_t since = RL_HEALTH_SINCE(w);
    uint64_t stay_ms = now > since ? (now - since) / RL_FP_PER_MS : 0;
    /* relaxed: statistics and a self-contained value (see local/health.h). */
    atomic_fetch_add_explicit(&h->ms_in[old], stay_ms, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->transitions, 1, memory_order_relaxed);
    atomic_store_explicit(&h->since_round,
                          atomic_load_explicit(&s->store->counters[C_ROUNDS], memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&h->word, RL_HEALTH_MAKE(state, now), memory_order_relaxed);
    rl__sync_healthlog(s, old, state, why, since, now);
}

void rl__sync_drop_connection(rl_sync_t *s) { rl__redis_route_reset(&s->route); }

/* ---------------------------------------------- the connection's events */

static int conn_stopping(void *owner)
{
    rl_sync_t *s = owner;
    /* relaxed: stop requests are handled by on_wake; this only avoids work. */
    return atomic_load_explicit(&s->stopping, memory_order_relaxed);
}

static void conn_retry_scheduled(void *owner, uint64_t delay_ms)
{
    rl_sync_t *s = owner;
    uint64_t now = rl__clock_now_fp(&s->rl->clock, RL_CLOCK_PRECISE);
    /* relaxed: a value read by closed limits for their Retry-After. */
    atomic_store_explicit(&s->rl->health.next_try_fp, now + delay_ms * RL_FP_PER_MS,
                          memory_order_relaxed);
}

/* FNV-1a of a failure's text: whether it is the one already told. */
static uint64_t failure_fingerprint(const char *detail)
{
    uint64_t h = UINT64_C(14695981039346656037);
    for (const unsigned char *p = (const unsigned char *)detail; *p != '\0'; p++)
        h = (h ^ *p) * UINT64_C(1099511628211);
    return h | 1; /* never 0, which means none told */
}

static void conn_failed(void *owner, const char *why, const char *detail)
{
    rl_sync_t *s = owner;
    rl__sync_error(s, RL_REDIS_ERR_CONNECT);
    /* Once per reason until a connection succeeds: a reconnect's failures
     * repeat the first one's, and a round deadline that beats a slow first
     * handshake must not leave the reason (an expired certificate, say)
     * untold because the attempt that found it was not the first. */
    uint64_t fp = detail != NULL ? failure_fingerprint(detail) : 0;
    if (fp != 0 && (fp != s->told_failure || rl__redis_route_attempts(&s->route) <= 1)) {
        s->told_failure = fp;
        rl__sync_log(s, RL_LOG_WARN, "sync: cannot connect to %s: %s", s->where, detail);
    }
    first_outcome(s, FIRST_FAILED);
    set_health(s, RL_HEALTH_DEGRADED, why);
}

static void conn_lost(void *owner)
{
    rl_sync_t *s = owner;
    rl__redis_scripts_reset(&s->scripts);
    rl__sync_mirror_nodes(s);
    set_connected(s, 0);
    if (!conn_stopping(s))
        set_health(s, RL_HEALTH_DEGRADED, "connection lost");
}

static void conn_setup_error(void *owner, const redisReply *reply)
{
    rl_sync_t *s = owner;
    int cls = rl__redis_classify(reply);
    rl__sync_error(s, cls);
    rl__sync_log(s, RL_LOG_ERROR, "sync: connection setup failed: %.200s", reply->str);
    if (cls == RL_REDIS_ERR_AUTH)
        first_outcome(s, FIRST_AUTH);
}

void rl__sync_load_nodes(rl_sync_t *s)
{
    rl__redis_scripts_load(&s->scripts, rl__redis_route_context(&s->route, NULL, 0),
                           RL_SYNC_SCRIPT_NODES, uv_now(&s->loop));
    rl__sync_mirror_nodes(s);
}

static void load_script(rl_sync_t *s)
{
    rl__redis_scripts_load(&s->scripts, rl__redis_route_context(&s->route, NULL, 0),
                           RL_SYNC_SCRIPT_REPORT, uv_now(&s->loop));
    /* Pipelined behind it: the registry and the in-flight leases are ready
     * when the first round runs. */
    rl__sync_load_nodes(s);
    rl__redis_scripts_load(&s->scripts, rl__redis_route_context(&s->route, NULL, 0),
                           RL_SYNC_SCRIPT_LEASE, uv_now(&s->loop));
}

static void conn_connected(void *owner) { load_script(owner); }

static const char *conn_client_name(void *owner)
{
    return ((rl_sync_t *)owner)->client_name;
}

static const rl_redis_conn_ops_t conn_ops = {
    .connected = conn_connected,
    .failed = conn_failed,
    .lost = conn_lost,
    .setup_error = conn_setup_error,
    .retry_scheduled = conn_retry_scheduled,
    .stopping = conn_stopping,
    .client_name = conn_client_name,
};

/* A SCRIPT LOAD's answer (the registry's state already updated). */
static void script_loaded(void *owner, unsigned id, const redisReply *reply)
{
    rl_sync_t *s = owner;
    int ready = rl__redis_scripts_ready(&s->scripts, id);
    if (id == RL_SYNC_SCRIPT_LEASE) {
        /* Loaded again by the next round that needs it (sync/inflight.c). */
        if (!ready && reply != NULL && rl__redis_scripts_ready(&s->scripts, RL_SYNC_SCRIPT_REPORT))
            rl__sync_error(s, rl__redis_classify(reply));
        return;
    }
    if (id == RL_SYNC_SCRIPT_NODES) {
        rl__sync_mirror_nodes(s);
        if (ready || reply == NULL || !rl__redis_scripts_ready(&s->scripts, RL_SYNC_SCRIPT_REPORT))
            return;
        /* Only when the report script loaded: otherwise both failed for one
         * reason, already counted and logged. Retried next round. */
        rl__sync_error(s, rl__redis_classify(reply));
        rl__sync_count(s, C_NODES_ERRORS, 1);
        if (!s->nodes_failing)
            rl__sync_log(s, RL_LOG_WARN, "sync: node registry script not loaded (rate "
                         "limiting unaffected): %.200s", rl__redis_reply_text(reply));
        s->nodes_failing = 1;
        return;
    }
    if (ready) {
        rl__redis_route_ready(&s->route);
        set_connected(s, 1);
        s->told_failure = 0;
        first_outcome(s, FIRST_OK);
        rl__sync_log(s, RL_LOG_INFO, "sync: connected to %s", s->where);
        rl__sync_check_eviction(s);
    } else if (reply != NULL) {
        int cls = rl__redis_classify(reply);
        rl__sync_error(s, cls);
        first_outcome(s, cls == RL_REDIS_ERR_AUTH ? FIRST_AUTH : FIRST_FAILED);
        rl__sync_log(s, RL_LOG_ERROR, "sync: SCRIPT LOAD failed: %.200s",
                     rl__redis_reply_text(reply));
    }
}

static void finish_loop(rl_sync_t *s)
{
    uv_timer_stop(&s->round_timer);
    uv_timer_stop(&s->deadline_timer);
    rl__redis_route_close(&s->route);
    rl__sync_healthlog_close(s);
    uv_close((uv_handle_t *)&s->round_timer, NULL);
    uv_close((uv_handle_t *)&s->deadline_timer, NULL);
    uv_close((uv_handle_t *)&s->wake, NULL);
}

static void schedule_round(rl_sync_t *s);

/* A round's outcome drives the health state machine (policy/policy.h decides). */
static void judge_round(rl_sync_t *s)
{
    /* relaxed: this thread is the only writer. */
    int state = RL_HEALTH_STATE(atomic_load_explicit(&s->rl->health.word, memory_order_relaxed));
    rl_health_cfg_t cfg = {s->cfg.degrade_after_failures, s->cfg.recover_after_rounds};
    rl_health_move_t moves[RL_HEALTH_MOVES_MAX];
    int n = rl__policy_health_round(state, s->round_failed, &s->health_counts, &cfg, moves);
    for (int i = 0; i < n; i++)
        set_health(s, moves[i].state, moves[i].why);
}

/* A finished round's figures for rl_stats. This thread is the only writer of
 * these counters: plain (relaxed) stores, read as statistics. */
static void round_figures(rl_sync_t *s)
{
    /* relaxed: statistics. */
    atomic_store_explicit(&s->store->counters[C_REPORTS_LAST], s->round_reports,
                          memory_order_relaxed);
    if (s->round_failed)
        return;
    uint64_t us = (uv_hrtime() - s->round_start_ns) / 1000u;
    rl__sync_count(s, C_ROUND_US_SUM, us);
    /* relaxed: as above. */
    atomic_store_explicit(&s->store->counters[C_ROUND_US_LAST], us, memory_order_relaxed);
    if (us > atomic_load_explicit(&s->store->counters[C_ROUND_US_MAX], memory_order_relaxed))
        atomic_store_explicit(&s->store->counters[C_ROUND_US_MAX], us, memory_order_relaxed);
}

void rl__sync_round_done(rl_sync_t *s)
{
    uv_timer_stop(&s->deadline_timer);
    round_figures(s);
    if (s->round_failed)
        rl__sync_count(s, C_ROUNDS_FAILED, 1);
    else
        rl__sync_count(s, C_ROUNDS_OK, 1);
    if (!s->leaving)
        judge_round(s);
    if (!s->round_failed)
        s->timeouts_in_row = 0;
    if (s->drop_after_round && !s->leaving) {
        s->drop_after_round = 0;
        rl__sync_drop_connection(s);
    }
    if (s->driver->round_done != NULL)
        s->driver->round_done(s);
    if (s->leaving)
        finish_loop(s); /* the shares are handed back: stop */
}

static void on_round_deadline(uv_timer_t *timer)
{
    rl_sync_t *s = timer->data;
    if (s->in_flight == 0)
        return;
    /* Replies that come later are still applied (reports are idempotent),
     * but this round counts as failed. */
    rl__sync_error(s, RL_REDIS_ERR_TIMEOUT);
    s->round_failed = 1;
    s->in_flight = 0;
    rl__sync_round_done(s);
    /* A server that stopped answering (frozen, blackholed) would pile our
     * requests up on a dead connection: after 3 silent rounds, start over. */
    if (++s->timeouts_in_row >= SILENT_ROUNDS_MAX && !s->leaving) {
        s->timeouts_in_row = 0;
        rl__sync_drop_connection(s);
    }
}

static void on_round(uv_timer_t *timer)
{
    rl_sync_t *s = timer->data;
    rl_redis_script_t *report = &s->scripts.s[RL_SYNC_SCRIPT_REPORT];
    if (!rl__redis_route_can_send(&s->route, NULL, 0)) {
        rl__redis_route_retry(&s->route); /* no-op while one is pending */
    } else if (report->state == RL_SCRIPT_LOADING &&
               uv_now(&s->loop) - report->since_ms > RL_REDIS_CONNECT_DEADLINE_MS) {
        /* Connected, but setup is never answered (a server dying or frozen
         * as we connected): no round sends anything on such a connection,
         * so nothing else would notice. Start over. */
        rl__sync_error(s, RL_REDIS_ERR_TIMEOUT);
        rl__redis_scripts_forget(&s->scripts, RL_SYNC_SCRIPT_REPORT);
        rl__sync_drop_connection(s);
    } else if (report->state == RL_SCRIPT_UNLOADED && !rl__redis_route_connecting(&s->route))
        load_script(s); /* after NOSCRIPT (SCRIPT FLUSH) or a failed load */
    if (s->in_flight > 0) {
        /* The last round's deadline has not fired yet: never stack rounds. */
        schedule_round(s);
        return;
    }
    rl__sync_run_round(s, s->rl->sync_interval_ms * ROUND_DEADLINE_NUM / ROUND_DEADLINE_DEN);
    schedule_round(s);
}

void rl__sync_run_round(rl_sync_t *s, uint32_t deadline_ms)
{
    rl__sync_round(s);
    if (s->in_flight > 0)
        uv_timer_start(&s->deadline_timer, on_round_deadline, deadline_ms, 0);
}

static void schedule_round(rl_sync_t *s)
{
    /* +-10% jitter: nodes started together do not report in lockstep. */
    uint64_t base = s->rl->sync_interval_ms;
    uint64_t span = base / (RL_SYNC_JITTER_DEN / 2) + 1; /* both sides */
    uint64_t delay = base - base / RL_SYNC_JITTER_DEN + next_random(s) % span;
    uv_timer_start(&s->round_timer, on_round, delay, 0);
}

/* The production driver: a jittered timer starts each round. */
static const rl_sync_driver_t timer_driver = {
    .schedule = schedule_round,
};

static void on_wake(uv_async_t *async)
{
    rl_sync_t *s = async->data;
    /* relaxed: the flag itself is the message; uv_async_send orders it. */
    if (!atomic_load_explicit(&s->stopping, memory_order_relaxed)) {
        if (s->driver->woken != NULL)
            s->driver->woken(s);
        return;
    }
    if (s->leaving)
        return;
    uv_timer_stop(&s->round_timer);
    if (!s->hand_back || !rl__redis_route_can_send(&s->route, NULL, 0) ||
        !rl__redis_scripts_ready(&s->scripts, RL_SYNC_SCRIPT_REPORT)) {
        finish_loop(s); /* nothing to hand back to */
        return;
    }
    s->leaving = 1;
    if (s->in_flight > 0) {
        s->in_flight = 0; /* the last round's stragglers no longer matter */
        uv_timer_stop(&s->deadline_timer);
    }
    rl__sync_run_round(s, s->close_ms);
}

static void *thread_main(void *arg)
{
    rl_sync_t *s = arg;
    rl__redis_route_connect(&s->route);
    if (s->driver->schedule != NULL)
        s->driver->schedule(s);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    if (s->driver->loop_ended != NULL)
        s->driver->loop_ended(s);
    return NULL;
}

/* Wait for the first connection's outcome, at most its deadline and a
 * little: rl_open must never block longer. */
static int wait_first_outcome(rl_sync_t *s)
{
    uint64_t until =
        uv_hrtime() + (uint64_t)(RL_REDIS_CONNECT_DEADLINE_MS + FIRST_OUTCOME_SLACK_MS) * 1000000u;
    uv_mutex_lock(&s->step_mu);
    while (s->first_outcome == FIRST_PENDING) {
        uint64_t now = uv_hrtime();
        if (now >= until || uv_cond_timedwait(&s->step_cv, &s->step_mu, until - now) != 0)
            break;
    }
    int outcome = s->first_outcome;
    uv_mutex_unlock(&s->step_mu);
    return outcome;
}

static void free_sync(rl_sync_t *s)
{
    if (s->prims_ready) {
        uv_cond_destroy(&s->step_cv);
        uv_mutex_destroy(&s->step_mu);
    }
    const rl_allocator_t *a = &s->rl->alloc;
    size_t n = s->rl->table.nslots;
    if (s->store == &s->own_store) /* a shared host's store is the host's */
        rl__sync_store_free(s->store, a, n);
    rl__free(a, s->order, 3 * n * sizeof *s->order, 8);
    rl__free(a, s->bucket_of, ((size_t)s->rl->limits.cap * RL_VSHARDS + 1) * sizeof(uint32_t), 8);
    rl__free(a, s->limits, s->rl->limits.cap * sizeof *s->limits, 8);
    rl__free(a, s, sizeof *s, 64);
}

int rl__sync_store_init(rl_sync_store_t *st, const rl_allocator_t *a, size_t nslots,
                        const char *node_id)
{
    uint64_t rnd;
    st->slots = rl__calloc(a, nslots * sizeof *st->slots, 8);
    if (st->slots == NULL || getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        rl__sync_store_free(st, a, nslots);
        return RL_ENOMEM;
    }
    snprintf(st->incarnation, sizeof st->incarnation, "%s:%016llx", node_id,
             (unsigned long long)rnd);
    atomic_init(&st->round_id, 0);
    atomic_init(&st->next_epoch, 0);
    for (int i = 0; i < C_N; i++)
        atomic_init(&st->counters[i], 0);
    atomic_init(&st->fleet_nodes, 0);
    atomic_init(&st->fleet_split_rounds, 0);
    atomic_init(&st->fleet_split_fps, 0);
    return 0;
}

void rl__sync_store_fleet(const rl_sync_store_t *st, rl_sync_fleet_t *out)
{
    /* relaxed: statistics, each self-contained. */
    out->nodes = atomic_load_explicit(&st->fleet_nodes, memory_order_relaxed);
    out->split_rounds = atomic_load_explicit(&st->fleet_split_rounds, memory_order_relaxed);
    out->split_fps = atomic_load_explicit(&st->fleet_split_fps, memory_order_relaxed);
}

void rl__sync_store_free(rl_sync_store_t *st, const rl_allocator_t *a, size_t nslots)
{
    rl__free(a, st->slots, nslots * sizeof *st->slots, 8);
    st->slots = NULL;
}

/* The memory a sync thread needs, sized by the table and the limit
 * registry, on a store (NULL: its own, made here), and what the node
 * registry shows of this process (host, pid, start time). */
static rl_sync_t *alloc_sync(struct rl *rl, const rl_redisurl_t *url, const rl_sync_cfg_t *cfg,
                             rl_sync_store_t *store)
{
    const rl_allocator_t *a = &rl->alloc;
    rl_sync_t *s = rl__calloc(a, sizeof *s, 64);
    if (s == NULL)
        return NULL;
    s->rl = rl;
    s->cfg = *cfg;
    s->url = *url;
    s->hand_back = 1;
    rl__redisurl_where(url, s->where, sizeof s->where);
    size_t n = rl->table.nslots;
    s->store = store != NULL ? store : &s->own_store;
    if (store == NULL && rl__sync_store_init(&s->own_store, a, n, rl->node_id) != 0) {
        rl__free(a, s, sizeof *s, 64);
        return NULL;
    }
    s->order = rl__calloc(a, 3 * n * sizeof *s->order, 8);
    s->bucket_of = rl__calloc(a, ((size_t)rl->limits.cap * RL_VSHARDS + 1) * sizeof(uint32_t), 8);
    s->limits = rl__calloc(a, rl->limits.cap * sizeof *s->limits, 8);
    uint64_t seed;
    if (s->order == NULL || s->bucket_of == NULL || s->limits == NULL ||
        getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed) {
        free_sync(s);
        return NULL;
    }
    s->rng = seed | 1;
    /* CLIENT LIST then names the node and instance holding a connection
     * (cut to RL_REDIS_CONN_NAME_MAX - 1 bytes; a node_id is 64 at most). */
    snprintf(s->client_name, sizeof s->client_name, "%s%.*s", RL_SYNC_CLIENT_NAME_PREFIX,
             (int)(sizeof s->client_name - sizeof RL_SYNC_CLIENT_NAME_PREFIX),
             s->store->incarnation);
    /* What the node registry shows of this process (sync/nodes.h). */
    if (gethostname(s->host, sizeof s->host) != 0)
        s->host[0] = '\0';
    s->host[sizeof s->host - 1] = '\0';
    s->pid = (uint64_t)getpid();
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    s->start_ms = (uint64_t)wall.tv_sec * 1000u + (uint64_t)wall.tv_nsec / 1000000u;
    return s;
}

/* The stepper's and rl_open's mutex and condition. */
static int init_shared(rl_sync_t *s)
{
    atomic_init(&s->stopping, 0);
    if (uv_mutex_init(&s->step_mu) != 0)
        return -1;
    if (uv_cond_init(&s->step_cv) != 0) {
        uv_mutex_destroy(&s->step_mu);
        return -1;
    }
    s->prims_ready = 1;
    return 0;
}

/* The loop, its handles, the route to Redis and the script registry. */
static int init_loop(rl_sync_t *s)
{
    if (uv_loop_init(&s->loop) != 0)
        return -1;
    uv_timer_init(&s->loop, &s->round_timer);
    uv_timer_init(&s->loop, &s->deadline_timer);
    uv_async_init(&s->loop, &s->wake, on_wake);
    s->round_timer.data = s->deadline_timer.data = s->wake.data = s;
    rl__sync_healthlog_init(s);
    static const char *const sources[RL_SYNC_SCRIPT_N] = {
        [RL_SYNC_SCRIPT_REPORT] = rl__lua_report,
        [RL_SYNC_SCRIPT_NODES] = rl__lua_nodes,
        [RL_SYNC_SCRIPT_LEASE] = rl__lua_inflight_lease,
    };
    rl__redis_scripts_init(&s->scripts, sources, RL_SYNC_SCRIPT_N, script_loaded, s);
    rl_redis_route_cfg_t rc = {
        .loop = &s->loop,
        .alloc = &s->rl->alloc,
        .url = &s->url,
        .rng = &s->rng,
        .backoff_cap_ms = s->cfg.reconnect_max_ms,
        .ops = &conn_ops,
        .owner = s,
        .scripts = &s->scripts,
    };
    if (rl__redis_route_init(&s->route, &rc) != 0) {
        rl__sync_healthlog_close(s);
        uv_close((uv_handle_t *)&s->round_timer, NULL);
        uv_close((uv_handle_t *)&s->deadline_timer, NULL);
        uv_close((uv_handle_t *)&s->wake, NULL);
        uv_run(&s->loop, UV_RUN_DEFAULT);
        rl__uv_loop_close(&s->loop);
        return -1;
    }
    return 0;
}

/* Start the thread (base/thread.h: every signal blocked). On failure the
 * loop is closed. */
static int start_thread(rl_sync_t *s)
{
    if (rl__thread_start(&s->thread, thread_main, s) == 0)
        return 0;
    uv_close((uv_handle_t *)&s->round_timer, NULL);
    uv_close((uv_handle_t *)&s->deadline_timer, NULL);
    rl__sync_healthlog_close(s);
    rl__redis_route_close(&s->route);
    uv_close((uv_handle_t *)&s->wake, NULL);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    rl__uv_loop_close(&s->loop);
    return -1;
}

/* A new lease holder picks the host's sync up where the last one left it
 * (shm/host.h): the store's round and epoch numbers (read for every store:
 * a private one's are zero), nothing queued, and every slot visited once
 * (the last holder may have died between clearing a dirty word and taking
 * its counters). Every key Redis has an entry of reports in the first
 * round (one lingering round): the last holder may have died after
 * recording a report as sent and before sending it, and an entry it never
 * refreshed would expire while the host still admits at its share. */
static void resume_host(rl_sync_t *s)
{
    /* A dead holder left its connection's state: not ours. relaxed:
     * statistics. */
    atomic_store_explicit(&s->store->counters[C_CONNECTED], 0, memory_order_relaxed);
    atomic_store_explicit(&s->store->counters[C_NODES_READY], 0, memory_order_relaxed);
    rl_table_t *t = &s->rl->table;
    for (size_t i = 0; i < t->nslots; i++) {
        s->store->slots[i].queued = 0;
        if (s->store->slots[i].period != 0 && s->store->slots[i].linger == 0)
            s->store->slots[i].linger = 1;
        /* relaxed: only the lease holder harvests the bitmap. */
        atomic_fetch_or_explicit(&t->dirty[i >> 6], UINT64_C(1) << (i & 63),
                                 memory_order_relaxed);
    }
}

/* host: the store is a shared host's, continued (and Redis keeps its
 * shares when this start fails). */
static int sync_start(struct rl *rl, const rl_redisurl_t *url, const rl_sync_cfg_t *cfg,
                      int manual, rl_sync_store_t *host, rl_sync_t **out)
{
    rl_sync_t *s = alloc_sync(rl, url, cfg, host);
    if (s == NULL)
        return RL_ENOMEM;
    s->driver = manual ? &rl__sync_step_driver : &timer_driver;
    if (init_shared(s) != 0 || init_loop(s) != 0) {
        free_sync(s);
        return RL_ENOMEM;
    }
    /* relaxed: a host's lease (a mutex) ordered the last holder's stores;
     * a private store is this thread's. */
    s->round_id = atomic_load_explicit(&s->store->round_id, memory_order_relaxed);
    s->next_epoch = atomic_load_explicit(&s->store->next_epoch, memory_order_relaxed);
    if (host != NULL)
        resume_host(s);
    /* relaxed: published to the thread by its creation. Healthy until a
     * round fails: before its first sync each key runs at its pre-sync
     * share, not at its on_failure policy. Since rl_open (whose clock hook
     * is called once per source), or since a host's new lease holder took
     * over. */
    uint64_t since = host != NULL ? rl__clock_now_fp(&rl->clock, RL_CLOCK_PRECISE)
                                  : RL_CLOCK_ORIGIN_FP;
    atomic_store_explicit(&rl->health.word, RL_HEALTH_MAKE(RL_HEALTH_HEALTHY, since),
                          memory_order_relaxed);
    if (start_thread(s) != 0) {
        free_sync(s);
        return RL_ENOMEM;
    }
    *out = s;
    if (!manual && wait_first_outcome(s) == FIRST_AUTH) {
        rl__sync_stop_ex(s, s->cfg.close_ms, host == NULL);
        *out = NULL;
        return RL_EAUTH;
    }
    return 0;
}

int rl__sync_start(struct rl *rl, const rl_redisurl_t *url, const rl_sync_cfg_t *cfg, int manual,
                   rl_sync_t **out)
{
    return sync_start(rl, url, cfg, manual, NULL, out);
}

int rl__sync_start_host(struct rl *rl, const rl_redisurl_t *url, const rl_sync_cfg_t *cfg,
                        rl_sync_store_t *store, rl_sync_t **out)
{
    return sync_start(rl, url, cfg, 0, store, out);
}

void rl__sync_stop(rl_sync_t *s) { rl__sync_stop_ex(s, s->cfg.close_ms, 1); }

void rl__sync_stop_ex(rl_sync_t *s, uint32_t deadline_ms, int hand_back)
{
    /* Read by on_wake, on the loop thread: uv_async_send orders it. */
    s->hand_back = hand_back;
    /* Read by on_wake, on the loop thread: uv_async_send orders it. */
    s->close_ms = deadline_ms;
    /* relaxed: published to the loop thread by uv_async_send. */
    atomic_store_explicit(&s->stopping, 1, memory_order_relaxed);
    uv_async_send(&s->wake);
    pthread_join(s->thread, NULL);
    rl__uv_loop_close(&s->loop);
    free_sync(s);
}

void rl__sync_forget(rl_sync_t *s)
{
    /* The thread, its loop and its sockets belong to the parent process;
     * in the child only this memory is ours to release. */
    free_sync(s);
}

void rl__sync_counters(rl_sync_t *s, rl_sync_counters_t *out)
{
    rl__sync_counters_decode(s->store->counters, out);
}

void rl__sync_fleet(rl_sync_t *s, rl_sync_fleet_t *out) { rl__sync_store_fleet(s->store, out); }

void rl__sync_counters_decode(const _Atomic uint64_t *counters, rl_sync_counters_t *out)
{
    uint64_t v[C_N];
    for (int i = 0; i < C_N; i++)
        /* relaxed: statistics. */
        v[i] = atomic_load_explicit(&counters[i], memory_order_relaxed);
#define RL_X_(up, field) out->field = v[C_##up];
    RL_SYNC_COUNTERS_HEAD(RL_X_)
    RL_SYNC_COUNTERS_TAIL(RL_X_)
#undef RL_X_
    for (int i = 0; i < RL_REDIS_ERR_N; i++)
        out->by_class[i] = v[C_ERR_FIRST + i];
}

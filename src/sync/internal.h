/* SPDX-License-Identifier: MIT */
/* Internals shared by sync/sync.c (thread, connection), sync/round.c (a
 * round's harvest and report policy) and sync/calls.c (its script calls). */
#ifndef RL_SYNC_INTERNAL_H
#define RL_SYNC_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <hiredis/async.h>
#include <uv.h>
#include "sync/sync.h"
#include "redis/reply.h"
#include "redis/route.h"
#include "redis/scripts.h"
#include "core.h"
#include "policy/policy.h"
#include "local/shareword.h"

/* Indices of the counter array: sync/sync.h's table, the error classes between
 * its two parts (rl_sync_counters_t's order). */
enum {
#define RL_X_(up, field) C_##up,
    RL_SYNC_COUNTERS_HEAD(RL_X_)
    C_ERR_FIRST,
    C_ERR_END_ = C_ERR_FIRST + RL_REDIS_ERR_N - 1,
    RL_SYNC_COUNTERS_TAIL(RL_X_)
#undef RL_X_
    C_N
};
_Static_assert(C_N * sizeof(uint64_t) == sizeof(rl_sync_counters_t),
               "one counter per rl_sync_counters_t word");

/* Rounds start interval +- interval / RL_SYNC_JITTER_DEN apart (sync/sync.c's
 * schedule_round), so consecutive rounds are at least (DEN - 1) / DEN of the
 * interval apart: the round deadline and entry_may_live (sync/round.c) rely
 * on it. */
#define RL_SYNC_JITTER_DEN 10

/* The sync connection's CLIENT SETNAME: this prefix, then the incarnation. */
#define RL_SYNC_CLIENT_NAME_PREFIX "libratelimit:"

/* Most keys one report script call carries: the call's slot lists
 * (sync/calls.c) and the reply scratch below are sized by it. */
#define RL_SYNC_KEYS_PER_CALL 256u

/* One key's answer in a report script's reply (rl__sync_parse_shares). */
typedef struct rl_share_reply {
    uint64_t q;      /* this node's rate share, Q24; UINT64_MAX: skipped */
    uint64_t tokens; /* this node's burst tokens */
    uint64_t usage;  /* the fleet's admitted rate, Q24 of the limit's rate */
    uint64_t nodes;  /* live nodes on the key */
    uint64_t remaining; /* tiered: the fleet-wide remaining, tokens */
    int hold;        /* keep at most the share held (RL_REPLY_HOLD) */
} rl_share_reply_t;

/* What the sync thread remembers of one slot's occupant (sync thread only). */
typedef struct rl_syncslot {
    uint64_t ctrl;   /* the occupant this state belongs to; 0: none */
    uint64_t epoch;  /* occupancy number sent with its counters */
    uint64_t cum_a;  /* admitted since the occupancy began */
    uint64_t cum_o;  /* offered (admitted + denied) since then */
    uint64_t pend_a; /* admitted since the last report */
    uint64_t pend_o; /* offered since the last report */
    uint64_t last_round; /* the round of the last report (round_id) */
    int64_t owed;      /* tokens given back (settles below their estimate)
                          that the counters above, which only grow, have
                          yet to take off the next admissions (<= 0) */
    uint64_t usage_q;  /* the fleet's admitted rate at the last reply, Q24
                          of the limit's rate (hot-key marking, hot/hot.c) */
    uint32_t win_seen; /* the stats window (low 31 bits of window_no) that
                          counted this key; top bit: counted as over too */
    uint32_t seen;     /* live nodes the last reply counted on the key: a
                          report into a lost hash says how many still hold
                          shares (report.lua's hold) */
    uint8_t queued;    /* listed in this round's reports */
    uint8_t linger;    /* rounds still to report every round after a busy one */
    uint8_t period;    /* rounds between reports the last report announced
                          (Redis drops the entry after 3 such periods);
                          0: not reported yet in this occupancy */
    uint8_t announce;  /* the period this round's report announces */
    uint8_t watch;     /* tiered: the fleet-wide remaining is within twice the
                          confirm threshold: report every round, counts or
                          not, so the node learns it is near in time */
} rl_syncslot_t;
_Static_assert(RL_REPORT_QUIET_MAX <= UINT8_MAX, "a period fits rl_syncslot_t.period");

/*
 * What a node's sync keeps beyond one sync thread: a private instance's
 * own (inside its rl_sync_t), or a shared host's (in the mapping, shm/host.h),
 * from which the next lease holder continues, so Redis sees one node whose
 * reports go on. The sync thread that runs on it is its only writer (a
 * host's: under the lease), apart from the counters.
 */
typedef struct rl_sync_store {
    char incarnation[300]; /* this node in Redis; read-only once made */
    rl_syncslot_t *slots;  /* one per table slot; the sync thread only */
    /* The round and epoch numbers, written through by the rounds. */
    _Atomic uint64_t round_id;
    _Atomic uint64_t next_epoch;
    _Atomic uint64_t counters[C_N]; /* rl_sync_counters_t, in field order */
    /* rl_sync_fleet_t's, written by the heartbeat: a new lease holder's
     * rounds start from the last holder's view of the fleet. */
    _Atomic uint64_t fleet_nodes;
    _Atomic uint64_t fleet_split_rounds;
    _Atomic uint64_t fleet_split_fps;
} rl_sync_store_t;

/* A store for a table of nslots: its slots (from a), counters at zero, and
 * an incarnation of node_id plus a random instance id (two instances in one
 * process, or a restarted node, are different incarnations). 0, or
 * RL_ENOMEM (nothing left allocated). */
int rl__sync_store_init(rl_sync_store_t *st, const rl_allocator_t *a, size_t nslots,
                        const char *node_id);
void rl__sync_store_free(rl_sync_store_t *st, const rl_allocator_t *a, size_t nslots);
void rl__sync_store_fleet(const rl_sync_store_t *st, rl_sync_fleet_t *out);

/* One limit as a round sees it (snapshot taken at the round's start). */
typedef struct rl_synclimit {
    uint32_t lref;
    int live;
    uint64_t reported_round; /* the last round that reported one of its keys */
    rl_limit_params_t p;
    char name[RL_NAME_MAX];
    /* What the replies said of its keys in the current stats window (sync
     * thread only; published to the limit slot at the window's end). */
    uint32_t w_lref;      /* the limit the window belongs to; 0: none */
    uint64_t w_keys;
    uint64_t w_over;
    uint64_t w_usage_max; /* Q24 of the rate */
    uint64_t w_skew_max;  /* ppm of an even split */
    uint64_t w_nodes_max;
} rl_synclimit_t;

/* What the health transitions' log lines remember (sync thread only): one
 * line a second at most, the transitions between two lines coalesced into
 * the next, which a timer writes if no transition does. */
typedef struct rl_healthlog {
    uv_timer_t timer;       /* writes the coalesced line */
    uint64_t last_line_ms;  /* uv_now of the last line */
    int any_line;           /* a line was written */
    uint64_t outage_fp;     /* instance time healthy was left (the outage's
                               start); meaningful while not healthy */
    uint64_t healthy_ms;    /* how long healthy lasted before it */
    uint64_t ended_ms;      /* the length of the last outage that ended */
    int line_state;         /* the state the last line named */
    uint32_t coalesced;     /* transitions since the last line */
    int end_pending;        /* an outage's end is among them */
    char why[96];           /* the reason of the last of them */
} rl_healthlog_t;

struct rl_sync {
    struct rl *rl;
    rl_sync_cfg_t cfg;
    rl_redisurl_t url;
    char where[400];            /* the URL without credentials, for logs */
    pthread_t thread;
    uv_loop_t loop;
    uv_timer_t round_timer;
    uv_timer_t deadline_timer;
    uv_async_t wake;
    rl_redis_route_t route;     /* the connection(s), redis/route.h */
    rl_redis_scripts_t scripts; /* RL_SYNC_SCRIPT_*, redis/scripts.h */
    /* The store the rounds run on: own_store, or a shared host's. */
    rl_sync_store_t *store;
    char client_name[RL_REDIS_CONN_NAME_MAX]; /* RL_SYNC_CLIENT_NAME_PREFIX incarnation */
    /* The node registry (sync/nodes.h; sync thread only). */
    int nodes_failing;     /* the last registry command failed (log once a streak) */
    uint64_t split_fps;      /* other fingerprints at the last heartbeat */
    uint64_t split_logged_ms; /* uv_now of the last split log line */
    char host[65];
    uint64_t pid;
    uint64_t start_ms;     /* wall clock at rl_open, Unix ms (display only) */
    uint64_t rng;          /* jitter; sync thread only */
    uint64_t next_epoch;   /* the store's, written through */
    /* Health (sync thread only; published through rl->health). */
    rl_health_counts_t health_counts; /* policy/policy.h */
    uint32_t timeouts_in_row;
    rl_healthlog_t hlog;      /* the transitions' log lines (sync/healthlog.c) */
    /* Round state (sync thread only). */
    uint64_t round_id;     /* the store's, written through */
    uint32_t in_flight;    /* script calls of the current round unanswered */
    int round_failed;
    int drop_after_round;  /* READONLY seen: reconnect once the round ends */
    uint64_t ping_round;   /* the round the outstanding PING belongs to */
    int leaving;           /* the final round: hand shares back */
    uint32_t close_ms;     /* how long the final round's replies are awaited
                              (rl__sync_stop_ex's deadline) */
    uint32_t *order;       /* scratch: slot indices of this round's reports */
    rl_share_reply_t shares[RL_SYNC_KEYS_PER_CALL]; /* scratch: one reply's parsed shares */
    uint64_t round_start_ns;      /* uv_hrtime at the current round's start */
    uint32_t window_no;           /* the current stats window, from 1 */
    uint64_t round_reports;       /* key reports the current round sent */
    uint32_t *bucket_of;   /* scratch: group counts for the counting sort */
    rl_synclimit_t *limits; /* one per limit index */
    const struct rl_sync_driver *driver; /* what starts rounds */
    /* Manual rounds (sync/step.c, rl__sync_step). */
    uint64_t virtual_now_ms;  /* under step_mu: asked for by the stepper */
    uint64_t round_virtual_ms; /* sync thread: the current round's (0: TIME) */
    int prims_ready;          /* step_mu and step_cv initialised */
    int first_outcome;        /* under step_mu: how the first connect went */
    uint64_t told_failure;    /* sync thread: fingerprint of the connect
                                 failure last logged (0: none since the
                                 last connection) */
    uv_mutex_t step_mu;
    uv_cond_t step_cv;
    uint64_t step_asked;      /* under step_mu */
    uint64_t step_done;       /* under step_mu */
    int step_failed;          /* under step_mu */
    int hand_back;         /* the final round hands the shares back (leaving) */
    char evict_warned[32]; /* the eviction policy last warned of (sync/evict.c) */
    /* Shared with other threads. */
    _Atomic int stopping;
    rl_sync_store_t own_store; /* a private instance's store */
};

/* C_N counters (a store's) into *out. */
void rl__sync_counters_decode(const _Atomic uint64_t *counters, rl_sync_counters_t *out);

static inline void rl__sync_count(rl_sync_t *s, int which, uint64_t n)
{
    /* relaxed: statistics read by rl__sync_counters. */
    atomic_fetch_add_explicit(&s->store->counters[which], n, memory_order_relaxed);
}

enum { FIRST_PENDING, FIRST_OK, FIRST_AUTH, FIRST_FAILED };

/* The scripts the sync thread runs: entries of its script registry. */
enum { RL_SYNC_SCRIPT_REPORT, RL_SYNC_SCRIPT_NODES, RL_SYNC_SCRIPT_LEASE, RL_SYNC_SCRIPT_N };

/* The registry script's state, mirrored for rl__sync_counters. */
static inline void rl__sync_mirror_nodes(rl_sync_t *s)
{
    /* relaxed: a statistic. */
    atomic_store_explicit(&s->store->counters[C_NODES_READY],
                          (uint64_t)rl__redis_scripts_ready(&s->scripts, RL_SYNC_SCRIPT_NODES),
                          memory_order_relaxed);
}

/* Count an error of a class (and in the errors total). */
static inline void rl__sync_error(rl_sync_t *s, int cls)
{
    rl__sync_count(s, C_ERRORS, 1);
    rl__sync_count(s, C_ERR_FIRST + cls, 1);
}

/* What a round's harvest (sync/round.c) and its replies (sync/calls.c)
 * both read of a slot (sync thread only). */

/* The limit a synced slot belongs to, or NULL. */
static inline rl_synclimit_t *slot_synclimit(rl_sync_t *s, uint64_t c)
{
    uint32_t lref = RL_CTRL_LREF(c);
    uint32_t idx = lref & RL_LIMIT_IDX_MASK;
    if (idx >= s->rl->limits.cap)
        return NULL;
    rl_synclimit_t *l = &s->limits[idx];
    return l->live && l->lref == lref ? l : NULL;
}

static inline const rl_gcra_t *current_gcra(rl_slot_t *slot, const rl_synclimit_t *l,
                                            rl_gcra_t *tmp)
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
static inline void mark_again(rl_table_t *t, size_t i)
{
    atomic_fetch_or_explicit(&t->dirty[i >> 6], UINT64_C(1) << (i & 63), memory_order_relaxed);
}

/* sync/round.c: a round, from the harvest to its calls sent. */
void rl__sync_round(rl_sync_t *s);

/* sync/calls.c */

/* Send the reports of the slots order[0, n), grouped by (limit, vshard), in
 * calls of at most RL_SYNC_KEYS_PER_CALL keys; a call that cannot be sent
 * fails the round and its keys come back next round. */
void rl__sync_send_reports(rl_sync_t *s, uint32_t n);
/* A PING for a round with nothing to report, so a frozen or blackholed
 * server is still noticed within the round: 0 when sent (in flight). */
int rl__sync_send_ping(rl_sync_t *s);

/*
 * Interpret a report script's reply for n keys: per key {rate share (Q24),
 * burst tokens, the fleet's admitted rate (Q24 of the limit's rate, above
 * 2^24 when the fleet overshoots), live nodes, fleet remaining, hold (0 or
 * 1)}; q = UINT64_MAX for an element that is not a well-formed, in-range
 * sextuple (skipped). -1 if the reply is not an array of n. Pure: fuzzed in
 * tests/fuzz/fuzz_reply.c.
 */
int rl__sync_parse_shares(const redisReply *reply, uint32_t n, rl_share_reply_t *out);

/*
 * What starts rounds: the production driver (sync/sync.c: a jittered timer) or
 * the stepper (sync/step.c: rl__sync_step, the accuracy simulator's virtual
 * clock). The loop calls each hook that is not NULL, on its thread.
 */
typedef struct rl_sync_driver {
    void (*schedule)(rl_sync_t *s);   /* at the start: arrange the first round */
    void (*woken)(rl_sync_t *s);      /* the thread was woken, not to stop */
    void (*round_done)(rl_sync_t *s); /* a round was judged */
    void (*loop_ended)(rl_sync_t *s); /* the loop returned */
} rl_sync_driver_t;

extern const rl_sync_driver_t rl__sync_step_driver;

/* sync/sync.c: run a round now; its replies are awaited deadline_ms. */
void rl__sync_run_round(rl_sync_t *s, uint32_t deadline_ms);

/* sync/inflight.c: the round's lease calls of fleet-wide in-flight limits
 * (one per limit; each in flight counted in in_flight). */
void rl__sync_inflight_round(rl_sync_t *s);

/* sync/heartbeat.c: this node's heartbeat in the registry (rkeys keys of
 * rlimits limits report this round). */
void rl__sync_heartbeat(rl_sync_t *s, uint64_t rkeys, uint64_t rlimits);

/* sync/evict.c: ask the server whether it can evict the library's keys,
 * and warn once per policy that can. */
void rl__sync_check_eviction(rl_sync_t *s);

/* sync/healthlog.c: the log line of a transition old -> state at instance
 * time now_fp, whose old state began at since_fp. The timer is initialised
 * with the loop (rl__sync_healthlog_init) and closed with it. */
void rl__sync_healthlog_init(rl_sync_t *s);
void rl__sync_healthlog(rl_sync_t *s, int old, int state, const char *why, uint64_t since_fp,
                        uint64_t now_fp);
void rl__sync_healthlog_close(rl_sync_t *s);

/* sync/sync.c */
/* Every call of the round answered (or the round sent none): judge it. */
void rl__sync_round_done(rl_sync_t *s);
void rl__sync_drop_connection(rl_sync_t *s);
/* Send SCRIPT LOAD of the node registry's script (nodes.lua). */
void rl__sync_load_nodes(rl_sync_t *s);
void rl__sync_log(rl_sync_t *s, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The global tier: one background thread per instance that owns a libuv loop
 * and a hiredis async connection (attached with hiredis's libuv adapter and
 * used from that thread only). Every sync_interval_ms (+-10% jitter) a round
 * harvests the slots checkers marked dirty, reports cumulative counters per
 * key to Redis in one script call per (limit, virtual shard), and publishes
 * each returned share into its slot as one word. The hot path and this
 * thread share only atomics: slot counters, the dirty bitmap, share words.
 */
#ifndef RL_SYNC_H
#define RL_SYNC_H

#include <stddef.h>
#include <stdint.h>
#include "local/keyhash.h"
#include "redis/errclass.h"
#include "redis/keys.h"
#include "redis/url.h"

struct rl;
typedef struct rl_sync rl_sync_t;

#define RL_REPORT_QUIET_MAX 10 /* a quiet key reports at least every N rounds */
#define RL_REPORT_LINGER 3     /* rounds a key still reports every round after
                                  it was near its limit (silent or not) */
#define RL_REPORT_ENTRY_PERIODS 3 /* Redis drops a node's entry for a key after
                                     this many announced periods unreported */
#define RL_SYNC_NODES_MAX (1 << 20) /* live nodes on one key a reply may claim */
_Static_assert(RL_STATS_SYNC_WINDOW >= RL_REPORT_QUIET_MAX,
               "every quiet key reports within one stats window");

/*
 * The report policy of one key in one round (sync/round.c, harvest_slot):
 * pure, so tests drive it round by round. Sync traffic scales with the keys
 * near their limits, and Redis never holds a stale picture of a key in use:
 * - near (offered at least half of what its share could admit since its
 *   last report, over at most RL_REPORT_QUIET_MAX rounds): report every
 *   round, announcing a period of one round, and linger;
 * - lingering (near within the last RL_REPORT_LINGER rounds), silent or
 *   not: report every round, announcing one round, so a demand that fell,
 *   to nothing or to a residue, reaches Redis's EWMA in consecutive rounds
 *   (within (1 - alpha)^2 of the new level in two) instead of one step a
 *   quiet period;
 * - otherwise, with new counts: report once every RL_REPORT_QUIET_MAX
 *   rounds, announcing that period, and at once when the last report
 *   announced a shorter period, is a whole period old (its entry may be
 *   gone), or the key has no share yet;
 * - silent and not lingering: nothing (its share stays).
 * A key marked hot of a hot_policy=local limit (hot_every > 1) that is near
 * reports only every hot_every rounds, announcing that period, and keeps
 * its share frozen in between (its counts accumulate: the next report
 * carries them); it reports at once when it has no share yet, when its
 * last report announced another period (so Redis keeps its entry as long),
 * and when its demand fell (this round offered under half the mean of the
 * rounds since its last report): a node whose traffic stopped hands its
 * share back as soon as any key would.
 */
typedef struct rl_report_view {
    uint64_t pend_o;  /* offered since the key's last report */
    uint64_t since;   /* rounds since that report (>= 1) */
    uint64_t could;   /* what its share admits over min(since, QUIET_MAX) rounds */
    uint32_t period;  /* the period its last report announced; 0: none yet */
    uint32_t linger;  /* lingering rounds left */
    int has_share;    /* Redis has given it a share (its share word is set) */
    uint32_t hot_every; /* > 1: marked hot, hot_policy=local (the limit's
                           hot_every); 0: any other key */
    uint64_t round_o;   /* offered in this round alone (harvested now) */
} rl_report_view_t;

typedef struct rl_report_action {
    int report;        /* report this round */
    int revisit;       /* visit it next round even without new counts */
    uint32_t announce; /* the period the report announces, in rounds */
    uint32_t linger;   /* lingering rounds left after this one */
} rl_report_action_t;

void rl__sync_report_policy(const rl_report_view_t *v, rl_report_action_t *out);

/*
 * What an INFO memory reply (text, len bytes) says of eviction: the
 * maxmemory-policy into policy (cap bytes, cut and terminated) and
 * maxmemory into *maxmemory. 1 when the server can evict this library's
 * keys (a maxmemory and any policy but noeviction: every key the library
 * writes carries a TTL, so volatile-* policies may take them too), 0 when it
 * cannot, -1 when the text names no policy. Pure (sync/evict.c).
 */
int rl__sync_evict_policy(const char *text, size_t len, uint64_t *maxmemory, char *policy,
                          size_t cap);

/*
 * Counters of the sync thread, read by rl__sync_counters (rl_stats, tests),
 * one table: each row is a field of rl_sync_counters_t and its index in the
 * thread's counter array (sync/internal.h: C_<NAME>), in field order; the error
 * classes' counts (by_class, redis/errclass.h) sit between the two parts.
 */
#define RL_SYNC_COUNTERS_HEAD(X)                                                   \
    X(ROUNDS, rounds)               /* rounds started */                           \
    X(ROUNDS_OK, rounds_ok)         /* every reply came before the deadline */     \
    X(ROUNDS_FAILED, rounds_failed) /* missed the deadline or errored */           \
    X(REPORTS, reports)             /* key reports sent */                         \
    X(CALLS, calls)                 /* script calls sent */                        \
    X(ERRORS, errors)               /* error replies and failed connections */     \
    X(CONNECTED, connected)         /* 1 while connected with the script loaded */
/* The node registry (sync/nodes.h): heartbeat writes Redis acknowledged, and
 * those that failed (also counted in errors and by_class; they never fail a
 * round nor change the health state); then the latency of the rounds
 * counted in rounds_ok, from start to last reply, and the key reports of
 * the last finished round. */
#define RL_SYNC_COUNTERS_TAIL(X)                                                   \
    X(NODES_WRITES, nodes_writes)                                                  \
    X(NODES_ERRORS, nodes_errors)                                                  \
    X(NODES_READY, nodes_ready) /* 1 while the registry script is loaded */        \
    X(ROUND_US_SUM, round_us_sum)                                                  \
    X(ROUND_US_LAST, round_us_last)                                                \
    X(ROUND_US_MAX, round_us_max)                                                  \
    X(REPORTS_LAST, reports_last)

typedef struct rl_sync_counters {
#define RL_X_(up, field) uint64_t field;
    RL_SYNC_COUNTERS_HEAD(RL_X_)
    uint64_t by_class[RL_REDIS_ERR_N]; /* redis/errclass.h */
    RL_SYNC_COUNTERS_TAIL(RL_X_)
#undef RL_X_
} rl_sync_counters_t;

/* The sync thread's settings, from rl_config_t (the thread keeps a copy).
 * The round interval is the instance's (core.h: the check path reads it
 * too), and so are the node's name and key prefix. */
typedef struct rl_sync_cfg {
    uint32_t expected_nodes;  /* the fleet's size before the registry answers */
    uint64_t key_ttl_ms;      /* how long Redis keeps a key unreported */
    uint32_t demand_alpha_q16; /* the demand EWMA's weight (Q16) */
    uint32_t degrade_after_failures; /* the health policy's (policy/policy.h) */
    uint32_t recover_after_rounds;
    uint32_t reconnect_max_ms; /* the reconnect backoff's cap */
    uint32_t close_ms;        /* how long rl_close waits for the last round */
} rl_sync_cfg_t;

/* Start the thread; the instance is fully built. Errors: RL_ENOMEM.
 * manual: no round timer; rounds run only through rl__sync_step (the
 * accuracy simulator's virtual-clock mode). */
int rl__sync_start(struct rl *rl, const rl_redisurl_t *url, const rl_sync_cfg_t *cfg, int manual,
                   rl_sync_t **out);

/*
 * Manual mode: run one round now and return once its replies are applied
 * (or its deadline passed). virtual_now_ms, when non-zero, is the time the
 * Redis script uses instead of TIME, so a simulation is deterministic.
 * Returns 0, or -1 if the round could not reach Redis.
 */
int rl__sync_step(rl_sync_t *s, uint64_t virtual_now_ms);

/* Report the last usage and hand back this node's shares in one last round
 * whose replies are awaited at most its close_ms, then stop and join the
 * thread and free everything. */
void rl__sync_stop(rl_sync_t *s);

/* A shared instance's host sync (shm/host.h): start the thread as the lease
 * holder, continuing the host's store (sync/internal.h), which stays the
 * host's. Errors as rl__sync_start, and RL_EAUTH. */
struct rl_sync_store;
int rl__sync_start_host(struct rl *rl, const rl_redisurl_t *url, const rl_sync_cfg_t *cfg,
                        struct rl_sync_store *store, rl_sync_t **out);

/* rl__sync_stop; hand_back 0: no final round (another process of the host
 * takes the sync over, and Redis must keep the host's shares). */
void rl__sync_stop_ex(rl_sync_t *s, uint32_t deadline_ms, int hand_back);

/* In a fork child: free memory without touching the parent's thread. */
void rl__sync_forget(rl_sync_t *s);

void rl__sync_counters(rl_sync_t *s, rl_sync_counters_t *out);

/* The fleet as the node registry showed it at the last heartbeat (written
 * by the sync thread, read by rl_stats). */
typedef struct rl_sync_fleet {
    uint64_t nodes;        /* live nodes */
    uint64_t split_rounds; /* heartbeats that saw another fingerprint */
    uint64_t split_fps;    /* other fingerprints live at the last one */
} rl_sync_fleet_t;

void rl__sync_fleet(rl_sync_t *s, rl_sync_fleet_t *out);

#endif

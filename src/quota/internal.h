/* SPDX-License-Identifier: MIT */
/*
 * What the quota ledger's files share: quota/quota.c (the registry, the
 * blocking charges and reads), quota/call.c (one quota.lua call and the
 * answer made of it), quota/replay.c (the journal's replay thread) and
 * quota/async.c (rl_quota_charge_async).
 */
#ifndef RL_QUOTA_INTERNAL_H
#define RL_QUOTA_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>
#include "quota/quota.h"
#include "quota/journal.h"
#include "core.h"
#include "redis/caller.h"

/* Names: {prefix(32):q1:name(63):hex(32)} plus ":r:" and 32 hex. */
#define TAG_MAX 160

enum { Q_CHARGES, Q_DUPLICATES, Q_DEGRADED, Q_JOURNALED, Q_REPLAYED, Q_LOST, Q_N };

typedef struct qslot {
    rl_quota_t def;
    uint32_t gen;
    int live;
} qslot_t;

struct rl_quotas {
    struct rl *rl;
    pid_t pid; /* the process that made it (a shared instance's children
                  see a fork()'s copy until rl_shared_attach) */
    uint32_t journal_max;
    uint32_t timeout_ms;
    uv_mutex_t mu; /* slots, journal, the replay thread's state */
    uv_cond_t cv;  /* the replay thread's wake: an entry, or stop */
    qslot_t slots[RL_QUOTA_MAX];
    uint32_t count;
    rl_qjournal_t journal;
    /* The instance's per-request caller (the exact thread's: exact/exact.h),
     * published at the first rl_quota_add. */
    _Atomic(rl_redis_caller_t *) caller_pub;
    pthread_t replay;
    int started;      /* the journal exists and the replay thread runs */
    int replay_stop;  /* under mu */
    uint32_t lose_acks; /* test hook, under mu */
    _Atomic uint64_t counters[Q_N];
    _Atomic uint64_t time_ms; /* test hook: 0 = Redis TIME */
    _Atomic int64_t skew_ms;  /* Redis TIME minus this node's clock, as a
                                 period mismatch last showed it */
};

static inline void rl__quota_count(rl_quotas_t *qs, int c, uint64_t n)
{
    /* relaxed: statistics. */
    atomic_fetch_add_explicit(&qs->counters[c], n, memory_order_relaxed);
}

/* The test hook's time, or 0: Redis TIME. */
static inline uint64_t rl__quota_hook_time(rl_quotas_t *qs)
{
    /* relaxed: a test hook read as a plain value. */
    return atomic_load_explicit(&qs->time_ms, memory_order_relaxed);
}

/* ------------------------------------------------- quota/call.c: names */

/* The counters: the period holding the node's guess of Redis's clock, the
 * one before and the one after (quota.lua takes the one holding its TIME). */
enum { QN_COUNTERS = 3 };

typedef struct qnames {
    char tag[TAG_MAX];     /* {...} */
    size_t tag_len;
    char counter[QN_COUNTERS][TAG_MAX]; /* {...}:p:<start> */
    size_t counter_len[QN_COUNTERS];
    char rid[TAG_MAX];     /* {...}:r:<hex>; empty for a read */
    size_t rid_len;
} qnames_t;

/* The quota's hash tag for key, and the request id's name (rid NULL: a
 * read, no name); the counters are named by rl__quota_name_counters. */
void rl__quota_names(const rl_t *rl, const rl_quota_t *q, rl_keyid_t key, const uint64_t *rid,
                     qnames_t *n);
/* The counters around at_ms (Unix ms, the guess of Redis's now). */
void rl__quota_name_counters(qnames_t *n, const rl_quota_t *q, uint64_t at_ms);

/* quota.lua's arguments (its header comment has the order): KEYS[1..4],
 * then ARGV[1..7]. */
enum { QA_KEYS = 4, QA_ARGS = 7 };
typedef struct qargs {
    const char *v[QA_KEYS + QA_ARGS];
    size_t l[QA_KEYS + QA_ARGS];
    char num[6][24];
} qargs_t;

void rl__quota_args(const qnames_t *n, const rl_quota_t *q, int charge, uint64_t cost,
                    uint64_t time_ms, qargs_t *a);

/* ------------------------------------------ quota/call.c: call, answer */

typedef struct qreply {
    int ok;
    int64_t allowed, used, reset, dup;
    int64_t redis_now; /* not ok, a period mismatch: Redis's now; else -1 */
} qreply_t;

/* The caller's parse hook (ud: a qreply_t): {allowed, used, reset,
 * duplicate}, or not ok (an error reply: OOM, BUSY, ...; or {-1, now}: no
 * counter named was the period Redis's TIME is in). */
void rl__quota_parse_reply(void *ud, int status, const redisReply *r);
/* This node's wall clock (Unix ms), or the test hook's time. */
uint64_t rl__quota_wall_ms(rl_quotas_t *qs);
/* Where this node expects Redis's clock to be: its own plus the skew a
 * period mismatch last showed (the test hook's time is Redis's, exactly). */
uint64_t rl__quota_guess_ms(rl_quotas_t *qs);
/* Remember the skew a period mismatch showed (Redis's now, Unix ms). */
void rl__quota_learn_skew(rl_quotas_t *qs, int64_t redis_now);
/* One blocking script call (asked again once, from Redis's now, when the
 * node's clock named the wrong periods); 1 with *p filled when Redis
 * answered. */
int rl__quota_run(rl_quotas_t *qs, const rl_quota_t *q, qnames_t *n, int charge, uint64_t cost,
                  qreply_t *p);
/* *out (NULL: nothing) as far as its size reaches. */
void rl__quota_put_result(rl_quota_result_t *out, int allowed, uint32_t flags, uint64_t amount,
                          uint64_t used, uint64_t reset);
/* Redis could not answer: the quota's on_failure, flagged degraded; an
 * allowed charge (journal set) goes into the journal as e. */
int rl__quota_degraded(rl_quotas_t *qs, const rl_quota_t *q, int journal, const rl_qjentry_t *e,
                       rl_quota_result_t *out);

/* ------------------------------------------------------- quota/quota.c */

/* The common checks of a charge and a read (out, when not NULL, set to a
 * denial first); *q gets the quota, *slot and *gen its journal identity.
 * 0 or an RL_E* code. */
int rl__quota_begin(rl_t *rl, int quota, const void *key, size_t key_len, rl_quota_result_t *out,
                    rl_quota_t *q, uint32_t *slot, uint32_t *gen);

/* A charge's own arguments against its quota, after rl__quota_begin: the
 * request id (1..RL_QUOTA_ID_MAX bytes), a cost of 1..amount. 0 or an RL_E*
 * code; the blocking and the asynchronous charge ask the same. */
static inline int rl__quota_charge_args(const rl_quota_t *q, const void *request_id,
                                        size_t id_len, uint64_t cost)
{
    if (request_id == NULL && id_len > 0)
        return RL_EINVAL;
    if (id_len == 0 || id_len > RL_QUOTA_ID_MAX || cost == 0)
        return RL_ERANGE;
    if (cost > q->amount)
        return RL_ECOST;
    return 0;
}

/* ------------------------------------------------------ quota/replay.c */

/* The journal and the replay thread, at the first rl_quota_add (under mu);
 * charges go through the exact thread's caller x, connected here (in a
 * shared instance: started by this process's rl_shared_attach, which calls
 * this through rl__quotas_adopt; before it, definitions only). */
int rl__quota_start_replay(rl_quotas_t *qs, struct rl_exact *x);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The exact path (mode=exact): each check is one atomic token bucket in
 * Redis (lua/exact.lua), run through the per-request client
 * (redis/caller.h) on its own library thread, the "exact thread". This
 * header carries no Redis type: the check path (check.c) asks here and
 * turns the answer into a decision, with the limit's on_failure (policy/policy.h)
 * when Redis did not answer in time.
 */
#ifndef RL_EXACT_H
#define RL_EXACT_H

#include <stddef.h>
#include <stdint.h>
#include "ratelimit.h"
#include "local/keyhash.h"
#include "base/log.h"

struct rl_redisurl;
typedef struct rl_exact rl_exact_t;

/* Requests one instance may have queued or in flight, per pool connection. */
#define RL_EXACT_SLOTS_PER_CONN 256u

/* One check: the key's identity (rl__keyhash under the fleet secret) and
 * the limit's name and parameters, copied. */
typedef struct rl_exact_req {
    char limit[64];
    rl_keyid_t id;
    uint32_t cost;
    uint64_t rate_count, period_ms, burst;
} rl_exact_req_t;

/* Redis's answer; ok 0: none (deadline, no connection, an error reply). */
typedef struct rl_exact_answer {
    int ok;
    int allowed;
    uint64_t remaining, retry_ms, reset_ms;
} rl_exact_answer_t;

/* The exact thread's settings, from rl_config_t (the thread keeps what it
 * needs: the timeout; the pool's go to its caller), and the instance's
 * allocator, logger and key naming, by pointer: they outlive the thread. */
typedef struct rl_exact_cfg {
    uint32_t timeout_ms;       /* a blocking check's wait for Redis */
    uint32_t pool_size;        /* per-request connections */
    uint32_t reconnect_max_ms; /* the reconnect backoff's cap */
    const rl_allocator_t *alloc;
    rl_logger_t *logger;
    const rl_keyhash_t *kh;
    const char *key_prefix;
} rl_exact_cfg_t;

/* The exact path, without its thread and connections: rl__exact_connect
 * starts them, at the first exact or tiered limit or quota (a program that
 * has none opens no connection it never uses). 0 or RL_ENOMEM. */
int rl__exact_create(const struct rl_redisurl *url, const rl_exact_cfg_t *cfg, rl_exact_t **out);

/* Start the exact thread and its pool, once; any thread, concurrently
 * (a mutex serialises the first). 0 (running) or RL_ENOMEM. Until it has
 * run, a check answers as when Redis does not (ok 0; async: -1). */
int rl__exact_connect(rl_exact_t *x);

/* rl__exact_create and rl__exact_connect at once. 0 or RL_ENOMEM. */
int rl__exact_start(const struct rl_redisurl *url, const rl_exact_cfg_t *cfg, rl_exact_t **out);

/* Answer every check in flight (async ones: their callbacks run now, with
 * ok 0) and stop the thread. No check may race it. */
void rl__exact_stop(rl_exact_t *x);

/* In a child after fork(): free the memory only (the thread is the
 * parent's). */
void rl__exact_forget(rl_exact_t *x);

/* Blocking: ask Redis and wait up to the instance's exact_timeout_ms.
 * Always fills *a (ok 0 when Redis did not answer in time). */
void rl__exact_check(rl_exact_t *x, const rl_exact_req_t *r, rl_exact_answer_t *a);

/* The answer of an asynchronous check; ctx is the caller's bytes, copied. */
typedef void rl_exact_done_fn(void *ctx, const rl_exact_answer_t *a);

#define RL_EXACT_CTX_MAX 192

/* Non-blocking: 0 when queued (done runs once on the exact thread, with
 * ok 0 at the deadline at the latest); -1 when it could not be queued (every
 * slot busy, stopping): done never runs, the caller answers inline. */
int rl__exact_check_async(rl_exact_t *x, const rl_exact_req_t *r, rl_exact_done_fn *done,
                          const void *ctx, size_t ctx_len);

/* Simulations only (the accuracy simulator's virtual clock, whose sync
 * rounds pass report.lua a virtual now): exact.lua's now, in microseconds
 * on the same scale; 0 (the default) is Redis TIME. */
void rl__exact_virtual_now(rl_exact_t *x, uint64_t us);

/* The exact thread's caller (redis/caller.h) runs these scripts; the quota
 * ledger (quota/quota.c) sends RL_EXACT_SCRIPT_QUOTA through it, an exact
 * in-flight limit (inflight/exact.c) RL_EXACT_SCRIPT_INFLIGHT and an exact
 * reservation (reserve/exact.c) RL_EXACT_SCRIPT_RESERVE: one pool of
 * per-request connections per instance. */
enum {
    RL_EXACT_SCRIPT_EXACT,
    RL_EXACT_SCRIPT_QUOTA,
    RL_EXACT_SCRIPT_INFLIGHT,
    RL_EXACT_SCRIPT_RESERVE,
    RL_EXACT_SCRIPTS
};
struct rl_redis_caller;
/* The caller, connected first if it is not yet (rl__exact_connect); NULL
 * if that failed. */
struct rl_redis_caller *rl__exact_caller(rl_exact_t *x);

/* A blocking call's wait for Redis (exact_timeout_ms), in ns: the deadline
 * the other clients of the caller give their own calls. */
uint64_t rl__exact_timeout_ns(const rl_exact_t *x);

/* What exact/reserve.c shares with this file: a key's Redis name (the
 * bucket's, rl__redis_key_name under the instance's secret and prefix),
 * a blocking call's deadline (uv_hrtime() clock), and exact.lua's now
 * (0: Redis TIME; see rl__exact_virtual_now). */
int rl__exact_key(const rl_exact_t *x, const char *limit, rl_keyid_t id, char *buf, size_t cap);
uint64_t rl__exact_deadline(const rl_exact_t *x);
uint64_t rl__exact_now_us(const rl_exact_t *x);

/* Statistics of the exact thread. */
typedef struct rl_exact_counters {
    uint64_t sent, replies, timeouts, late, unsent, lost, full;
} rl_exact_counters_t;
void rl__exact_counters(rl_exact_t *x, rl_exact_counters_t *out);

#endif

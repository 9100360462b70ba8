/* SPDX-License-Identifier: MIT */
/* The exact path (see exact/exact.h): a client of the Redis layer, like sync/sync.c. */
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>
#include "exact/exact.h"
#include "lua/scripts.h"
#include "base/alloc.h"
#include "redis/caller.h"
#include "redis/keys.h"
#include "redis/reply.h"
#include "redis/url.h"

struct rl_exact {
    /* The pool's caller, made by the first rl__exact_connect (release;
     * read with acquire), NULL before: a program with no exact or tiered
     * limit and no quota opens none of its connections. */
    _Atomic(rl_redis_caller_t *) caller;
    uv_mutex_t start_mu;         /* serialises the connects */
    rl_redisurl_t url;           /* what the caller connects to */
    char where[400];             /* the URL without credentials, for logs */
    uint32_t pool_size, reconnect_max_ms;
    const rl_allocator_t *alloc;
    rl_logger_t *logger;
    const rl_keyhash_t *kh;
    const char *key_prefix;
    uint64_t timeout_ns;
    _Atomic uint64_t virtual_us; /* simulations: exact.lua's now (0: TIME) */
};

/* The arguments of one exact.lua call, formatted. */
typedef struct exact_args {
    char key[160];
    char num[6][24];
    const char *argv[7];
    size_t argl[7];
    rl_redis_call_t call;
} exact_args_t;

/* The caller's lines name neither the client nor the server: a user reads
 * which connections they are about, and where they go. */
static void exact_log(void *owner, int level, const char *msg)
{
    rl_exact_t *x = owner;
    rl__log(x->logger, level, "exact/quota connection to %s: %s", x->where, msg);
}

int rl__exact_create(const struct rl_redisurl *url, const rl_exact_cfg_t *xc, rl_exact_t **out)
{
    rl_exact_t *x = rl__calloc(xc->alloc, sizeof *x, 64);
    if (x == NULL)
        return RL_ENOMEM;
    if (uv_mutex_init(&x->start_mu) != 0) {
        rl__free(xc->alloc, x, sizeof *x, 64);
        return RL_ENOMEM;
    }
    atomic_init(&x->caller, NULL);
    x->url = *url;
    rl__redisurl_where(url, x->where, sizeof x->where);
    x->pool_size = xc->pool_size;
    x->reconnect_max_ms = xc->reconnect_max_ms;
    x->alloc = xc->alloc;
    x->logger = xc->logger;
    x->kh = xc->kh;
    x->key_prefix = xc->key_prefix;
    x->timeout_ns = (uint64_t)xc->timeout_ms * 1000000u;
    *out = x;
    return 0;
}

int rl__exact_connect(rl_exact_t *x)
{
    /* acquire: pairs with the release below; a caller seen is built. */
    if (atomic_load_explicit(&x->caller, memory_order_acquire) != NULL)
        return 0;
    uv_mutex_lock(&x->start_mu);
    int rc = 0;
    if (atomic_load_explicit(&x->caller, memory_order_relaxed) == NULL) {
        /* The instance's one per-request caller: the quota ledger's script
         * runs on it too (quota/quota.c), so quotas reuse this pool. */
        static const char *const sources[RL_EXACT_SCRIPTS] = {
            [RL_EXACT_SCRIPT_EXACT] = rl__lua_exact,
            [RL_EXACT_SCRIPT_QUOTA] = rl__lua_quota,
            [RL_EXACT_SCRIPT_INFLIGHT] = rl__lua_inflight,
            [RL_EXACT_SCRIPT_RESERVE] = rl__lua_reserve,
        };
        rl_redis_caller_cfg_t cfg = {
            .alloc = x->alloc,
            .url = &x->url,
            .pool = x->pool_size,
            .slots = x->pool_size * RL_EXACT_SLOTS_PER_CONN,
            .backoff_cap_ms = x->reconnect_max_ms,
            .scripts = sources,
            .nscripts = RL_EXACT_SCRIPTS,
            .log = exact_log,
            .owner = x,
        };
        rl_redis_caller_t *c = NULL;
        rc = rl__redis_caller_start(&c, &cfg);
        if (rc == 0)
            /* release: what the caller's start wrote, to every check and
             * charge that loads it with acquire. */
            atomic_store_explicit(&x->caller, c, memory_order_release);
    }
    uv_mutex_unlock(&x->start_mu);
    return rc;
}

int rl__exact_start(const struct rl_redisurl *url, const rl_exact_cfg_t *xc, rl_exact_t **out)
{
    rl_exact_t *x = NULL;
    int rc = rl__exact_create(url, xc, &x);
    if (rc == 0 && (rc = rl__exact_connect(x)) != 0) {
        rl__exact_forget(x);
        return rc;
    }
    *out = x;
    return rc;
}

/* The caller, or NULL before the first connect. */
static rl_redis_caller_t *caller_of(rl_exact_t *x)
{
    /* acquire: as in rl__exact_connect. */
    return atomic_load_explicit(&x->caller, memory_order_acquire);
}

static void free_exact(rl_exact_t *x)
{
    uv_mutex_destroy(&x->start_mu);
    rl__free(x->alloc, x, sizeof *x, 64);
}

void rl__exact_forget(rl_exact_t *x)
{
    if (x == NULL)
        return;
    if (caller_of(x) != NULL)
        rl__redis_caller_forget(caller_of(x));
    free_exact(x);
}

void rl__exact_stop(rl_exact_t *x)
{
    if (x == NULL)
        return;
    if (caller_of(x) != NULL)
        rl__redis_caller_stop(caller_of(x));
    free_exact(x);
}

/* The bucket's TTL: at least the time to refill a whole burst (a key that
 * expires is full again when it comes back), and 1 s. */
static uint64_t ttl_ms(const rl_exact_req_t *r)
{
    unsigned __int128 t = ((unsigned __int128)r->burst * r->period_ms + r->rate_count - 1) /
                          r->rate_count;
    uint64_t ms = t > UINT64_C(1) << 40 ? UINT64_C(1) << 40 : (uint64_t)t;
    return ms < 1000 ? 1000 : ms + 1000;
}

static void make_args(const rl_exact_t *x, const rl_exact_req_t *r, exact_args_t *a)
{
    int n = rl__redis_key_name(x->kh, x->key_prefix, r->limit, r->id, a->key,
                               sizeof a->key);
    a->argv[0] = a->key;
    a->argl[0] = n > 0 && (size_t)n < sizeof a->key ? (size_t)n : strlen(a->key);
    /* relaxed: a self-contained value, set by a simulation's driver. */
    uint64_t now = atomic_load_explicit(&x->virtual_us, memory_order_relaxed);
    uint64_t v[6] = {r->cost, r->rate_count, r->period_ms * 1000u, r->burst, ttl_ms(r), now};
    int nargs = now != 0 ? 6 : 5;
    for (int i = 0; i < nargs; i++) {
        a->argl[1 + i] = (size_t)snprintf(a->num[i], sizeof a->num[i], "%llu",
                                          (unsigned long long)v[i]);
        a->argv[1 + i] = a->num[i];
    }
    a->call = (rl_redis_call_t){RL_EXACT_SCRIPT_EXACT, 1, nargs, a->argv, a->argl,
                                uv_hrtime() + x->timeout_ns};
}

/* exact.lua's reply: {allowed, tokens, wait_us, full_us}. */
static void parse(void *ud, int status, const redisReply *reply)
{
    rl_exact_answer_t *a = ud;
    uint64_t v[4];
    a->ok = status == RL_CALL_REPLY && rl__redis_uint_array(reply, v, 4);
    if (!a->ok)
        return;
    a->allowed = v[0] == 1;
    a->remaining = v[1];
    a->retry_ms = (v[2] + 999u) / 1000u;
    a->reset_ms = (v[3] + 999u) / 1000u;
}

void rl__exact_check(rl_exact_t *x, const rl_exact_req_t *r, rl_exact_answer_t *a)
{
    exact_args_t args;
    make_args(x, r, &args);
    memset(a, 0, sizeof *a);
    rl_redis_caller_t *c = caller_of(x);
    if (c == NULL || rl__redis_caller_wait(c, &args.call, parse, a) != RL_CALL_REPLY)
        a->ok = 0;
}

/* What an asynchronous check's slot carries: the done hook and its bytes. */
typedef struct async_ctx {
    rl_exact_done_fn *done;
    alignas(max_align_t) unsigned char user[RL_EXACT_CTX_MAX];
} async_ctx_t;
_Static_assert(sizeof(async_ctx_t) <= RL_CALL_CTX_MAX, "fits a caller slot's context");

static void on_async(void *ud, int status, const redisReply *reply)
{
    async_ctx_t *c = ud;
    rl_exact_answer_t a;
    memset(&a, 0, sizeof a);
    parse(&a, status, reply);
    c->done(c->user, &a);
}

int rl__exact_check_async(rl_exact_t *x, const rl_exact_req_t *r, rl_exact_done_fn *done,
                          const void *ctx, size_t ctx_len)
{
    rl_redis_caller_t *caller = caller_of(x);
    if (ctx_len > RL_EXACT_CTX_MAX || caller == NULL)
        return -1;
    exact_args_t args;
    make_args(x, r, &args);
    async_ctx_t c;
    c.done = done;
    memcpy(c.user, ctx, ctx_len);
    return rl__redis_caller_send(caller, &args.call, on_async, &c,
                                 offsetof(async_ctx_t, user) + ctx_len) == 0
               ? 0
               : -1;
}

int rl__exact_key(const rl_exact_t *x, const char *limit, rl_keyid_t id, char *buf, size_t cap)
{
    return rl__redis_key_name(x->kh, x->key_prefix, limit, id, buf, cap);
}

uint64_t rl__exact_deadline(const rl_exact_t *x) { return uv_hrtime() + x->timeout_ns; }

uint64_t rl__exact_now_us(const rl_exact_t *x)
{
    /* relaxed: see make_args. */
    return atomic_load_explicit(&x->virtual_us, memory_order_relaxed);
}

void rl__exact_virtual_now(rl_exact_t *x, uint64_t us)
{
    /* relaxed: see make_args. */
    atomic_store_explicit(&x->virtual_us, us, memory_order_relaxed);
}

void rl__exact_counters(rl_exact_t *x, rl_exact_counters_t *out)
{
    rl_redis_caller_counters_t k = {0};
    if (caller_of(x) != NULL)
        rl__redis_caller_counters(caller_of(x), &k);
    *out = (rl_exact_counters_t){k.sent, k.replies, k.timeouts, k.late, k.unsent, k.lost, k.full};
}

struct rl_redis_caller *rl__exact_caller(rl_exact_t *x)
{
    return rl__exact_connect(x) == 0 ? caller_of(x) : NULL;
}

uint64_t rl__exact_timeout_ns(const rl_exact_t *x)
{
    return x->timeout_ns;
}

/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>
#include "instance.h"
#include "hot/hot.h"
#include "base/alloc.h"
#include "base/errors.h"
#include "base/structsize.h"
#include "shm/shared.h"
#include "shm/host.h"
#include "base/keyprefix.h"
#include "local/limitdef.h"
#include "sync/share.h"
#include "redis/url.h"
#include "redis/tls.h"
#include "sync/sync.h"
#include "exact/exact.h"
#include "quota/quota.h"
#include "inflight/inflight.h"
#include "reserve/reserve.h"

/* The numeric fields of rl_config_t: default, lowest and highest value, as
 * include/ratelimit.h documents them. One row each: rl_config_init and
 * validate_config both read this table. */
#define RL_CONFIG_RANGES(X)                                                        \
    X(sync_interval_ms, 100, 50, 200)                                              \
    X(max_keys, 65536, 16, UINT32_C(1) << 28)                                      \
    X(expected_nodes, 1, 1, 100000)                                                \
    X(key_ttl_ms, 60000, 1000, UINT64_C(86400000) * 30)                            \
    X(max_limits, 256, 1, RL_MAX_LIMITS)                                           \
    X(demand_alpha_pct, 75, 1, 100)                                                \
    X(degrade_after_failures, 1, 1, 100)                                           \
    X(recover_after_rounds, 2, 1, 100)                                             \
    X(reconnect_max_ms, 950, 10, 60000)                                            \
    X(degrade_ramp_ms, 1000, 0u, 3600000)                                          \
    X(clock_coarse_tick_ns, 0, 0u, 1000000000)                                     \
    X(exact_timeout_ms, 100, 1, 60000)                                             \
    X(exact_pool_size, 4, 1, 64)                                                   \
    X(quota_journal_max, 10000, 0u, 1000000)                                       \
    X(quota_timeout_ms, 500, 1, 60000)                                             \
    X(hotkeys_k, RL_HOTKEYS_K_DEFAULT, 1, RL_HOTKEYS_K_MAX)                         \
    X(max_reservations, 4096, 0u, RL_RENT_MAX)

_Static_assert(RL_HOTKEYS_K_DEFAULT == 32 && RL_HOTKEYS_K_MAX == 1024,
               "rl_config_t.hotkeys_k: the header documents its default and range");

/* node_id and key_prefix: their longest, and the buffers holding them. */
#define NODE_ID_MAX 64
#define KEY_PREFIX_MAX RL_KEY_PREFIX_MAX
/* key_secret's length, in bytes; without one, a random secret of SECRET_RANDOM. */
#define SECRET_MIN 16
#define SECRET_MAX 4096
#define SECRET_RANDOM 32
/* rl_close waits for the sync thread's last round this many rounds, and at
 * least CLOSE_MIN_MS. */
#define CLOSE_ROUNDS 3
#define CLOSE_MIN_MS 500

void rl_config_init_sized(rl_config_t *cfg, size_t size)
{
    rl_config_t d;
    memset(&d, 0, sizeof d);
#define RL_X_(field, def, lo, hi) d.field = (def);
    RL_CONFIG_RANGES(RL_X_)
#undef RL_X_
    rl__struct_init(cfg, size, &d, sizeof d);
}

void rl_limit_init_sized(rl_limit_t *lim, size_t size)
{
    /* All defaults are zero (mode global, burst = count, degraded_rate =
     * rate / expected_nodes, no own max_keys) but on_failure's, by mode. */
    static const rl_limit_t defaults = {.on_failure = RL_FAIL_DEFAULT};
    rl__struct_init(lim, size, &defaults, sizeof defaults);
}

/* The first byte of s (at most cap bytes) outside [A-Za-z0-9_.:-], as a
 * message tail naming its position; "" when the length is what is wrong. */
static void name_fault(const char *s, size_t cap, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (; n < cap && s[n] != '\0'; n++) {
        char one[2] = {s[n], '\0'};
        if (!rl__name_valid(one, 2)) {
            snprintf(buf, len, " (byte %zu is 0x%02x)", n, (unsigned)(unsigned char)s[n]);
            return;
        }
    }
    snprintf(buf, len, " (%s)", n == 0 ? "empty" : "too long");
}

static int bad_name(const char *field, const char *s, size_t cap, char *err, size_t errlen)
{
    char why[48];
    name_fault(s, cap, why, sizeof why);
    return rl__errf(err, errlen, RL_ERANGE, "%s: must be 1..%zu bytes of [A-Za-z0-9_.:-]%s",
                    field, cap - 1, why);
}

/* A uint32/uint64 field outside [lo, hi]: the message names it. */
#define RANGE(field, lo, hi)                                                                   \
    do {                                                                                       \
        uint64_t v_ = c->field, lo_ = (lo);                                                    \
        if (v_ < lo_ || v_ > (uint64_t)(hi))                                                   \
            return rl__errf(err, errlen, RL_ERANGE, #field ": %llu is outside %llu..%llu",     \
                            (unsigned long long)v_, (unsigned long long)lo_,                   \
                            (unsigned long long)(hi));                                         \
    } while (0)

static int validate_config(const rl_config_t *c, char *err, size_t errlen)
{
#define RL_X_(field, def, lo, hi) RANGE(field, lo, hi);
    RL_CONFIG_RANGES(RL_X_)
#undef RL_X_
    if (c->reserved0 != 0 || c->reserved1 != 0 || c->reserved2 != 0 || c->reserved3 != 0)
        return rl__errf(err, errlen, RL_ERANGE, "reserved%d: must be zero",
                        c->reserved0 != 0   ? 0
                        : c->reserved1 != 0 ? 1
                        : c->reserved2 != 0 ? 2
                                            : 3);
    if ((c->allocator.alloc == NULL) != (c->allocator.free == NULL))
        return rl__errf(err, errlen, RL_ERANGE, "allocator: alloc and free must both be set, "
                        "or both NULL");
    if (c->key_secret == NULL && c->key_secret_len != 0)
        return rl__errf(err, errlen, RL_ERANGE, "key_secret: NULL, but key_secret_len is %zu",
                        c->key_secret_len);
    if (c->key_secret != NULL &&
        (c->key_secret_len < SECRET_MIN || c->key_secret_len > SECRET_MAX))
        return rl__errf(err, errlen, RL_ERANGE,
                        "key_secret: %zu bytes (key_secret_len); a fleet's secret is %d..%d "
                        "bytes of high-entropy data",
                        c->key_secret_len, SECRET_MIN, SECRET_MAX);
    if (c->node_id != NULL && !rl__name_valid(c->node_id, NODE_ID_MAX + 1))
        return bad_name("node_id", c->node_id, NODE_ID_MAX + 1, err, errlen);
    if (c->key_prefix != NULL && !rl__name_valid(c->key_prefix, KEY_PREFIX_MAX + 1))
        return bad_name("key_prefix", c->key_prefix, KEY_PREFIX_MAX + 1, err, errlen);
    if (c->redis_url != NULL) {
        rl_redisurl_t u;
        int rc = rl__redisurl_parse(c->redis_url, &u, err, errlen);
        if (rc == 0 && u.tls.on)
            rc = rl__redis_tls_check(&u.tls, err, errlen); /* a wrong path fails here */
        if (rc != 0)
            return rc;
        /* A random per-node secret would give each node its own keys in
         * Redis: a fleet of N admitting N times the limit, silently. */
        if (c->key_secret == NULL)
            return rl__errf(err, errlen, RL_ERANGE,
                            "key_secret: required with a redis_url (every node of a fleet must "
                            "share it, or each node keeps its own keys and the fleet admits "
                            "the limit once per node)");
    }
    return 0;
}
#undef RANGE

/* The caller's config, of its own size, over the defaults; *err and
 * *errlen get its message buffer when its layout has one. */
static int config_copy(rl_config_t *c, const rl_config_t *cfg, char **err, size_t *errlen)
{
    rl_config_init(c);
    if (cfg == NULL)
        return 0;
    if (cfg->size >= offsetof(rl_config_t, errlen) + sizeof cfg->errlen) {
        *err = cfg->err;
        *errlen = cfg->errlen;
        if (*err != NULL && *errlen > 0)
            (*err)[0] = '\0';
    }
    int rc = rl__struct_ok(cfg, cfg->size, RL_CONFIG_SIZE_MIN, sizeof *cfg);
    /* Layouts end between fields only at the 0.1 size: any other size short
     * of ours would cut a field (a pointer) in two. */
    if (rc == 0 && !rl__config_size_known(cfg->size))
        rc = RL_ESIZE;
    if (rc != 0)
        return rl__errf(*err, *errlen, rc,
                        "size: %zu is no rl_config_t this library (%s) knows (%zu, %zu, %zu, "
                        "%zu, or larger with the unknown tail zero)",
                        cfg->size, rl_version(), (size_t)RL_CONFIG_SIZE_MIN,
                        (size_t)RL_CONFIG_SIZE_0_2, (size_t)RL_CONFIG_SIZE_RESERVE,
                        sizeof *cfg);
    memcpy(c, cfg, cfg->size < sizeof *c ? cfg->size : sizeof *c);
    return validate_config(c, *err, *errlen);
}

static size_t dirty_bytes(const rl_table_t *t) { return (t->nslots + 63) / 64 * sizeof(uint64_t); }

static void fork_guard_init(rl_t *rl)
{
    rl->owner_pid = getpid();
    if (rl__alloc_is_shared(&rl->alloc)) {
        /* A shared instance's guard is in the shared mapping: it reads 1
         * in every process forked from the opener, so they may all use it. */
        rl->fork_page = rl__calloc(&rl->alloc, 64, 64);
        if (rl->fork_page != NULL)
            /* relaxed: set before the instance is handed to anyone. */
            atomic_store_explicit(rl->fork_page, 1, memory_order_relaxed);
        return;
    }
    void *p = mmap(NULL, RL_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return;
#ifdef MADV_WIPEONFORK
    if (madvise(p, RL_PAGE_SIZE, MADV_WIPEONFORK) == 0) {
        rl->fork_page = p;
        /* relaxed: set before the instance is handed to any other thread. */
        atomic_store_explicit(rl->fork_page, 1, memory_order_relaxed);
        return;
    }
#endif
    munmap(p, RL_PAGE_SIZE);
}

static int random_secret(unsigned char *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = getrandom(buf + got, len - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)n;
    }
    return 0;
}

void rl_close(rl_t *rl)
{
    if (rl == NULL)
        return;
    if (rl__alloc_is_shared(&rl->alloc) && rl->fork_page != NULL) {
        rl__shsync_close(rl); /* detach this process from the host's sync */
        rl__shared_close(rl); /* this process's view; the others keep theirs */
        return;
    }
    rl_allocator_t a = rl->alloc;
    /* The replay thread first (it waits on the exact thread's caller), then
     * the exact thread, whose stop answers the asynchronous quota charges
     * in flight through the ledger, and only then the ledger's memory. */
    if (rl->quotas != NULL && rl__fork_check(rl) == 0)
        rl__quotas_stop(rl->quotas);
    if (rl->exact != NULL) {
        if (rl__fork_check(rl) == 0)
            rl__exact_stop(rl->exact);
        else
            rl__exact_forget(rl->exact); /* in a child: the thread is the parent's */
    }
    if (rl->quotas != NULL) {
        if (rl__fork_check(rl) == 0)
            rl__quotas_destroy(rl->quotas);
        else
            rl__quotas_forget(rl->quotas);
    }
    if (rl->sync != NULL) {
        if (rl__fork_check(rl) == 0)
            rl__sync_stop(rl->sync);
        else
            rl__sync_forget(rl->sync);
    }
    rl__shsync_free(rl);
    rl__inflight_destroy(rl->inflight);
    rl__hot_destroy(rl);
    rl__reserve_destroy(rl->reserve, &a);
    rl__leases_destroy(&rl->leases, &a);
    rl__free(&a, (void *)rl->table.dirty, dirty_bytes(&rl->table), 64);
    rl__free(&a, rl->table.tok, rl->table.nslots * sizeof *rl->table.tok, 64);
    rl__table_destroy(&rl->table, &a);
    rl__limits_destroy(&rl->limits, &a);
    rl__strfree(&a, rl->node_id);
    rl__strfree(&a, rl->key_prefix);
    if (rl->fork_page != NULL && !rl__alloc_is_shared(&a))
        munmap((void *)rl->fork_page, RL_PAGE_SIZE);
    rl__free(&a, rl, sizeof *rl, 64);
}

int rl_open(rl_t **out, const rl_config_t *cfg) { return rl__open(out, cfg, 0); }

static int open_valid(rl_t **out, rl_config_t *cfg, int manual_sync);

int rl__open(rl_t **out, const rl_config_t *cfg, int manual_sync)
{
    char *err = NULL;
    size_t errlen = 0;
    rl_config_t c;
    int rc = config_copy(&c, cfg, &err, &errlen);
    if (out == NULL)
        return rl__errf(err, errlen, RL_EINVAL, "out: NULL");
    *out = NULL;
    if (rc != 0)
        return rc;
    rc = open_valid(out, &c, manual_sync);
    if (rc == RL_ENOMEM)
        return rl__errf(err, errlen, rc, "out of memory (an allocation through %s failed), "
                        "or the system's random source (getrandom) did not answer",
                        c.allocator.alloc != NULL ? "the allocator hooks" : "malloc");
    if (rc == RL_EAUTH)
        return rl__errf(err, errlen, rc, "redis_url: Redis refused the user or password");
    return rc;
}

int rl__horizon_error(rl_t *rl)
{
    if (rl__clock_horizon_told(&rl->clock))
        rl__log(&rl->logger, RL_LOG_ERROR,
                "instance time reached its horizon (2^58 ns, about 9.1 years after rl_open): "
                "no bucket refills any more, so a check that would deny answers RL_ERANGE; "
                "reopen the instance (rl_close, rl_open)");
    return RL_ERANGE;
}

/* The log's rate limit runs on the instance clock (frozen with it in tests). */
static uint64_t log_now_ns(void *clock)
{
    return rl__clock_now_fp(clock, RL_CLOCK_PRECISE) >> RL_FP_SHIFT;
}

/* The settings the instance keeps (core.h: those several modules read),
 * in its units. */
static void copy_settings(rl_t *rl, const rl_config_t *c)
{
    rl->alloc = c->allocator;
    rl->sync_interval_ms = c->sync_interval_ms;
    rl->degrade_ramp_fp = (uint64_t)c->degrade_ramp_ms * RL_FP_PER_MS;
    rl__log_init(&rl->logger, c->log, c->log_ud, c->log_quiet != 0, log_now_ns, &rl->clock);
}

/* The sync thread's and the exact thread's settings, in their units. */
static void module_configs(rl_t *rl, const rl_config_t *c, rl_sync_cfg_t *sc, rl_exact_cfg_t *xc)
{
    uint32_t close_ms = CLOSE_ROUNDS * c->sync_interval_ms;
    *sc = (rl_sync_cfg_t){
        .expected_nodes = c->expected_nodes,
        .key_ttl_ms = c->key_ttl_ms,
        .demand_alpha_q16 = c->demand_alpha_pct * RL_SHARE_Q16_ONE / 100u,
        .degrade_after_failures = c->degrade_after_failures,
        .recover_after_rounds = c->recover_after_rounds,
        .reconnect_max_ms = c->reconnect_max_ms,
        .close_ms = close_ms > CLOSE_MIN_MS ? close_ms : CLOSE_MIN_MS,
    };
    *xc = (rl_exact_cfg_t){
        .timeout_ms = c->exact_timeout_ms,
        .pool_size = c->exact_pool_size,
        .reconnect_max_ms = c->reconnect_max_ms,
        .alloc = &rl->alloc,
        .logger = &rl->logger,
        .kh = &rl->kh,
        .key_prefix = rl->key_prefix,
    };
}

/* Who the instance is: its key hashing secret (a random one without a
 * fleet), clock, node_id (the host name by default) and key prefix. 0 or
 * RL_ENOMEM. */
static int init_identity(rl_t *rl, const rl_config_t *c)
{
    unsigned char rnd[SECRET_RANDOM];
    const void *secret = c->key_secret;
    size_t secret_len = c->key_secret_len;
    if (secret == NULL) {
        if (random_secret(rnd, sizeof rnd) != 0)
            return RL_ENOMEM;
        secret = rnd;
        secret_len = sizeof rnd;
    }
    rl__keyhash_init(&rl->kh, secret, secret_len);
    rl__clock_init(&rl->clock, c->clock, c->clock_ud, c->clock_coarse_tick_ns);
    char host[NODE_ID_MAX + 1];
    const char *node_id = c->node_id;
    if (node_id == NULL) {
        if (gethostname(host, sizeof host) != 0 || !rl__name_valid(host, sizeof host))
            strcpy(host, "node");
        host[NODE_ID_MAX] = '\0';
        node_id = host;
    }
    int ok = 1;
    rl->node_id = rl__strdup(&rl->alloc, node_id, &ok);
    rl->key_prefix = rl__strdup(&rl->alloc, c->key_prefix ? c->key_prefix : "rl", &ok);
    if (!ok)
        return RL_ENOMEM;
    rl->logger.node_id = rl->node_id;
    return 0;
}

/* The limit registry, the key table and the fork guard. */
static int init_local_tier(rl_t *rl, const rl_config_t *c)
{
    int rc = rl__limits_init(&rl->limits, &rl->alloc, c->max_limits, c->expected_nodes,
                             c->redis_url != NULL, rl__alloc_is_shared(&rl->alloc),
                             rl->kh.mix[0]);
    if (rc != 0)
        return rc;
    /* A reused slot must start past every value its last occupant held,
     * whichever clock source either used: two coarse ticks plus the user
     * clock's backward grain cover the sources' disagreement. */
    uint64_t guard_ns = 2 * rl->clock.coarse_tick_ns + 2 * RL_CLOCK_LAST_GRAIN_NS;
    rc = rl__table_init(&rl->table, &rl->alloc, c->max_keys, &rl->limits,
                        guard_ns << RL_FP_SHIFT, c->key_ttl_ms * RL_FP_PER_MS);
    if (rc != 0)
        return rc;
    fork_guard_init(rl);
    return 0;
}

/* With a redis_url: the dirty bitmap the sync thread harvests and the
 * slots' token counts (local/table.h), the quota ledger, the sync thread,
 * and the exact thread. */
static int start_global_tier(rl_t *rl, const rl_config_t *c, int manual_sync)
{
    rl->table.dirty = rl__calloc(&rl->alloc, dirty_bytes(&rl->table), 64);
    rl->table.tok = rl__calloc(&rl->alloc, rl->table.nslots * sizeof *rl->table.tok, 64);
    if (rl->table.dirty == NULL || rl->table.tok == NULL)
        return RL_ENOMEM;
    rl_redisurl_t url;
    rl__redisurl_parse(c->redis_url, &url, NULL, 0); /* validated above */
    rl_sync_cfg_t sc;
    rl_exact_cfg_t xc;
    module_configs(rl, c, &sc, &xc);
    if (manual_sync == RL__OPEN_SHARED) {
        /* No thread: after fork. */
        int rc = rl__shsync_create(rl, &url, &sc, &xc, &rl->shsync);
        if (rc == 0) {
            rl->shlocal->quota_journal_max = c->quota_journal_max;
            rl->shlocal->quota_timeout_ms = c->quota_timeout_ms;
        }
        return rc;
    }
    int rc = rl__quotas_create(rl, c->quota_journal_max, c->quota_timeout_ms, &rl->quotas);
    if (rc == 0)
        rc = rl__sync_start(rl, &url, &sc, manual_sync, &rl->sync);
    if (rc == 0)
        rc = rl__exact_create(&url, &xc, &rl->exact); /* connected at its first use */
    return rc;
}

/* In-flight limits: a block pointer per limit, and the tag that tells this
 * instance's permits from another's (random: two instances of one fleet
 * secret must not accept each other's). */
static int start_inflight(rl_t *rl, const rl_config_t *c)
{
    uint32_t tag = 0;
    while (tag == 0)
        if (random_secret((unsigned char *)&tag, sizeof tag) != 0)
            return RL_ENOMEM;
    rl_inflight_cfg_t ic = {.max_limits = c->max_limits, .tag = tag,
                            .expected_nodes = c->expected_nodes};
    return rl__inflight_create(&rl->alloc, &ic, &rl->inflight);
}

/* rl_open of a validated config. */
static int open_valid(rl_t **out, rl_config_t *cfg, int manual_sync)
{
    rl_config_t c = *cfg;
    rl__alloc_defaults(&c.allocator);
    rl_t *rl = rl__calloc(&c.allocator, sizeof *rl, 64);
    if (rl == NULL)
        return RL_ENOMEM;
    copy_settings(rl, &c);
    int rc = init_identity(rl, &c);
    if (rc == 0)
        rc = init_local_tier(rl, &c);
    if (rc == 0)
        rc = rl__hot_init(rl, c.redis_url != NULL, rl__alloc_is_shared(&rl->alloc), c.hotkeys_k);
    if (rc == 0 && rl->hot != NULL) /* only hot/hot.c marks keys hot */
        rc = rl__leases_init(&rl->leases, &rl->alloc);
    if (rc == 0 && !rl__alloc_is_shared(&rl->alloc))
        rc = start_inflight(rl, &c);
    if (rc == 0 && !rl__alloc_is_shared(&rl->alloc)) {
        rl_reserve_cfg_t rc_cfg = {
            .max_reservations = c.max_reservations, .alloc = &rl->alloc, .logger = &rl->logger};
        rc = rl__reserve_create(&rc_cfg, &rl->reserve);
    }
    if (rc == 0 && c.redis_url != NULL)
        rc = start_global_tier(rl, &c, manual_sync);
    if (rc != 0) {
        rl_close(rl);
        return rc;
    }
    *out = rl;
    return 0;
}

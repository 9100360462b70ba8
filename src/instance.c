/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>
#include "instance.h"
#include "alloc.h"
#include "structsize.h"
#include "limitdef.h"
#include "redisurl.h"
#include "sync.h"

#define PAGE 4096

void rl_config_init_sized(rl_config_t *cfg, size_t size)
{
    if (cfg == NULL || size < sizeof cfg->size)
        return;
    rl_config_t d;
    memset(&d, 0, sizeof d);
    d.sync_interval_ms = 100;
    d.max_keys = 65536;
    d.expected_nodes = 1;
    d.key_ttl_ms = 60000;
    d.max_limits = 256;
    d.demand_alpha_pct = 75;
    d.degrade_after_failures = 1;
    d.recover_after_rounds = 2;
    d.reconnect_max_ms = 950;
    d.degrade_ramp_ms = 1000;
    memset(cfg, 0, size);
    memcpy(cfg, &d, size < sizeof d ? size : sizeof d);
    cfg->size = size;
}

void rl_limit_init_sized(rl_limit_t *lim, size_t size)
{
    if (lim == NULL || size < sizeof lim->size)
        return;
    /* All defaults are zero: mode global, on_failure local, burst = count,
     * degraded_rate = rate / expected_nodes, no own max_keys. */
    memset(lim, 0, size);
    lim->size = size;
}

static int validate_config(const rl_config_t *c)
{
    int rc = rl__struct_ok(c, c->size, RL_CONFIG_SIZE_MIN, sizeof *c);
    if (rc != 0)
        return rc;
    if (c->sync_interval_ms < 50 || c->sync_interval_ms > 200)
        return RL_ERANGE;
    if (c->max_keys < 16 || c->max_keys > (UINT32_C(1) << 28))
        return RL_ERANGE;
    if (c->expected_nodes < 1 || c->expected_nodes > 100000)
        return RL_ERANGE;
    if (c->key_ttl_ms < 1000 || c->key_ttl_ms > UINT64_C(86400000) * 30)
        return RL_ERANGE;
    if (c->max_limits < 1 || c->max_limits > RL_MAX_LIMITS)
        return RL_ERANGE;
    if (c->reserved0 != 0 || c->reserved1 != 0)
        return RL_ERANGE;
    if (c->demand_alpha_pct < 1 || c->demand_alpha_pct > 100)
        return RL_ERANGE;
    if (c->degrade_after_failures < 1 || c->degrade_after_failures > 100 ||
        c->recover_after_rounds < 1 || c->recover_after_rounds > 100)
        return RL_ERANGE;
    if (c->reconnect_max_ms < 10 || c->reconnect_max_ms > 60000 ||
        c->degrade_ramp_ms > 3600000)
        return RL_ERANGE;
    if ((c->allocator.alloc == NULL) != (c->allocator.free == NULL))
        return RL_ERANGE;
    if (c->key_secret == NULL ? c->key_secret_len != 0
                              : (c->key_secret_len < 16 || c->key_secret_len > 4096))
        return RL_ERANGE;
    if (c->clock_coarse_tick_ns > UINT64_C(1000000000))
        return RL_ERANGE;
    if (c->node_id != NULL && !rl__name_valid(c->node_id, 65))
        return RL_ERANGE;
    if (c->key_prefix != NULL && !rl__name_valid(c->key_prefix, 33))
        return RL_ERANGE;
    if (c->redis_url != NULL) {
        rl_redisurl_t u;
        if (rl__redisurl_parse(c->redis_url, &u, NULL, 0) != 0)
            return RL_ERANGE;
    }
    return 0;
}

static size_t dirty_bytes(const rl_table_t *t) { return (t->nslots + 63) / 64 * sizeof(uint64_t); }

static void fork_guard_init(rl_t *rl)
{
    rl->owner_pid = getpid();
    void *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return;
#ifdef MADV_WIPEONFORK
    if (madvise(p, PAGE, MADV_WIPEONFORK) == 0) {
        rl->fork_page = p;
        /* relaxed: set before the instance is handed to any other thread. */
        atomic_store_explicit(rl->fork_page, 1, memory_order_relaxed);
        return;
    }
#endif
    munmap(p, PAGE);
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
    rl_allocator_t a = rl->alloc;
    if (rl->sync != NULL) {
        if (rl__fork_check(rl) == 0)
            rl__sync_stop(rl->sync, rl->sync_close_ms);
        else
            rl__sync_forget(rl->sync);
    }
    rl__free(&a, (void *)rl->table.dirty, dirty_bytes(&rl->table), 64);
    rl__table_destroy(&rl->table, &a);
    rl__limits_destroy(&rl->limits, &a);
    rl__strfree(&a, rl->node_id);
    rl__strfree(&a, rl->key_prefix);
    if (rl->fork_page != NULL)
        munmap((void *)rl->fork_page, PAGE);
    rl__free(&a, rl, sizeof *rl, 64);
}

int rl_open(rl_t **out, const rl_config_t *cfg) { return rl__open(out, cfg, 0); }

int rl__open(rl_t **out, const rl_config_t *cfg, int manual_sync)
{
    if (out == NULL)
        return RL_EINVAL;
    *out = NULL;
    rl_config_t c;
    if (cfg == NULL) {
        rl_config_init(&c);
    } else {
        int rc = validate_config(cfg);
        if (rc != 0)
            return rc;
        c = *cfg;
    }
    rl__alloc_defaults(&c.allocator);

    rl_t *rl = rl__calloc(&c.allocator, sizeof *rl, 64);
    if (rl == NULL)
        return RL_ENOMEM;
    rl->alloc = c.allocator;
    rl->sync_interval_ms = c.sync_interval_ms;
    rl->expected_nodes = c.expected_nodes;
    rl->max_limits = c.max_limits;
    rl->max_keys = c.max_keys;
    rl->key_ttl_ms = c.key_ttl_ms;
    rl->demand_alpha_q16 = c.demand_alpha_pct * 65536u / 100u;
    rl->degrade_after_failures = c.degrade_after_failures;
    rl->recover_after_rounds = c.recover_after_rounds;
    rl->reconnect_max_ms = c.reconnect_max_ms;
    rl->degrade_ramp_fp = (uint64_t)c.degrade_ramp_ms * RL_FP_PER_MS;
    rl->log = c.log;
    rl->log_ud = c.log_ud;

    unsigned char rnd[32];
    const void *secret = c.key_secret;
    size_t secret_len = c.key_secret_len;
    if (secret == NULL) {
        if (random_secret(rnd, sizeof rnd) != 0) {
            rl__free(&rl->alloc, rl, sizeof *rl, 64);
            return RL_ENOMEM;
        }
        secret = rnd;
        secret_len = sizeof rnd;
    }
    rl__keyhash_init(&rl->kh, secret, secret_len);
    rl__clock_init(&rl->clock, c.clock, c.clock_ud, c.clock_coarse_tick_ns);

    int ok = 1;
    char host[65];
    if (c.node_id == NULL) {
        if (gethostname(host, sizeof host) != 0 || !rl__name_valid(host, sizeof host))
            strcpy(host, "node");
        host[64] = '\0';
        c.node_id = host;
    }
    rl->node_id = rl__strdup(&rl->alloc, c.node_id, &ok);
    rl->key_prefix = rl__strdup(&rl->alloc, c.key_prefix ? c.key_prefix : "rl", &ok);
    rl->sync_close_ms = 3 * c.sync_interval_ms > 500 ? 3 * c.sync_interval_ms : 500;
    if (!ok) {
        rl_close(rl);
        return RL_ENOMEM;
    }
    int synced = c.redis_url != NULL;
    int rc = rl__limits_init(&rl->limits, &rl->alloc, c.max_limits, c.expected_nodes, synced,
                             rl->kh.mix[0]);
    if (rc != 0) {
        rl_close(rl);
        return rc;
    }
    /* A reused slot must start past every value its last occupant held,
     * whichever clock source either used: two coarse ticks plus the user
     * clock's backward grain cover the sources' disagreement. */
    uint64_t guard_ns = 2 * rl->clock.coarse_tick_ns + 2 * RL_CLOCK_LAST_GRAIN_NS;
    rc = rl__table_init(&rl->table, &rl->alloc, c.max_keys, &rl->limits,
                        guard_ns << RL_FP_SHIFT, c.key_ttl_ms * RL_FP_PER_MS);
    if (rc != 0) {
        rl_close(rl);
        return rc;
    }
    fork_guard_init(rl);
    if (synced) {
        rl_redisurl_t url;
        rl->table.dirty = rl__calloc(&rl->alloc, dirty_bytes(&rl->table), 64);
        if (rl->table.dirty == NULL) {
            rl_close(rl);
            return RL_ENOMEM;
        }
        rl__redisurl_parse(c.redis_url, &url, NULL, 0); /* validated above */
        if ((rc = rl__sync_start(rl, &url, manual_sync, &rl->sync)) != 0) {
            rl_close(rl);
            return rc;
        }
    }
    *out = rl;
    return 0;
}

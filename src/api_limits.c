/* SPDX-License-Identifier: MIT */
/* The limit-management entry points: validation, then the registry. */
#include <string.h>
#include "core.h"
#include "exact/exact.h"
#include "inflight/inflight.h"
#include "base/structsize.h"
#include "local/limitdef.h"

static int check_limit_arg(rl_t *rl, const rl_limit_t *lim)
{
    if (rl == NULL || lim == NULL)
        return RL_EINVAL;
    int rc = rl__fork_check(rl);
    if (rc != 0)
        return rc;
    /* Layouts end between fields only at the older sizes: any other size
     * short of ours would cut a field in two. */
    if (!rl__limit_size_known(lim->size))
        return RL_ESIZE;
    return rl__struct_ok(lim, lim->size, RL_LIMIT_SIZE_MIN, sizeof *lim);
}

/* The caller's limit in this library's layout: a struct of an older (smaller)
 * size gets the appended fields' defaults (all zero), never bytes read past
 * its end; an on_failure left at RL_FAIL_DEFAULT becomes its mode's. */
static const rl_limit_t *full_limit(const rl_limit_t *lim, rl_limit_t *tmp)
{
    size_t n = lim->size < sizeof *lim ? lim->size : sizeof *lim;
    memset(tmp, 0, sizeof *tmp);
    memcpy(tmp, lim, n);
    tmp->size = sizeof *tmp;
    rl__limit_resolve(tmp);
    return tmp;
}

/* An in-flight limit is per process (mode=local) or, on an instance with
 * Redis, fleet-wide (mode=global: a fixed max, no classes; one without
 * Redis reads global as local, as for a rate limit). A shared instance's
 * processes would each need the pool in the mapping: not built. */
static int inflight_ok(rl_t *rl, const rl_limit_t *lim)
{
    if (rl->inflight == NULL) {
        rl__log(&rl->logger, RL_LOG_ERROR,
                "limit %.64s: in-flight limits are not supported by a shared instance "
                "(rl_open_shared)", lim->name);
        return RL_ENOTSUP;
    }
    if (lim->mode == RL_MODE_EXACT && !rl->limits.synced) {
        rl__log(&rl->logger, RL_LOG_ERROR,
                "limit %.64s: mode exact needs Redis, and this instance has no redis_url "
                "(set rl_config_t.redis_url, or use mode local)", lim->name);
        return RL_ENOTSUP;
    }
    if (lim->mode == RL_MODE_GLOBAL && rl->limits.synced &&
        (lim->inflight_algo != RL_INFLIGHT_FIXED || lim->classes[0].name[0] != '\0')) {
        rl__log(&rl->logger, RL_LOG_ERROR,
                "limit %.64s: a fleet-wide in-flight limit (mode=global) has a fixed max and "
                "no classes; adaptive limits and partitions are per process (mode=local)",
                lim->name);
        return RL_EMODE;
    }
    if (lim->mode == RL_MODE_GLOBAL && rl->limits.synced && lim->max_keys > RL_IFL_GLOBAL_KEYS_MAX) {
        rl__log(&rl->logger, RL_LOG_ERROR,
                "limit %.64s: a fleet-wide in-flight limit keeps at most %u keys (max_keys)",
                lim->name, (unsigned)RL_IFL_GLOBAL_KEYS_MAX);
        return RL_ERANGE;
    }
    return 0;
}

/* A shared instance checks exact limits on the calling process's own
 * connections (rl_shared_attach starts them). Tiered limits are refused:
 * their NEAR bit is written by the host's one sync (in whichever process
 * holds the lease) and their confirm would go on the checking process's
 * connection; that split has no test racing it across processes yet, and
 * an untested "tiered" would promise more than it keeps. Refused, and
 * logged, since these calls have no message buffer. */
static int mode_ok(rl_t *rl, const rl_limit_t *lim)
{
    /* A limit's own fault is named first. */
    int rc = rl__limit_validate(lim, NULL, 0);
    if (rc != 0)
        return rc;
    if (lim->kind == RL_KIND_INFLIGHT)
        return inflight_ok(rl, lim);
    /* Refused, not run locally: a per-process bucket under a name that
     * says exact would admit nodes x burst and read healthy. */
    if (!rl->limits.synced && (lim->mode == RL_MODE_EXACT || lim->mode == RL_MODE_TIERED)) {
        rl__log(&rl->logger, RL_LOG_ERROR,
                "limit %.64s: mode %s needs Redis, and this instance has no redis_url "
                "(set rl_config_t.redis_url, or use mode local or global)",
                lim->name, lim->mode == RL_MODE_EXACT ? "exact" : "tiered");
        return RL_ENOTSUP;
    }
    if (rl->shsync == NULL || lim->mode != RL_MODE_TIERED)
        return 0;
    rl__log(&rl->logger, RL_LOG_ERROR,
            "limit %.64s: mode tiered is not supported by a shared instance (rl_open_shared): "
            "use exact, global or local", lim->name);
    return RL_ENOTSUP;
}

/* An exact or tiered limit is checked on the exact path's connections:
 * the first one starts them (rl_open opens none, so a program that has no
 * such limit and no quota never connects, nor logs, a pool it does not
 * use). A shared instance's are its processes' own (rl_shared_attach). */
static int connect_exact(rl_t *rl, const rl_limit_t *lim)
{
    if (rl->exact == NULL || (lim->mode != RL_MODE_EXACT && lim->mode != RL_MODE_TIERED))
        return 0;
    return rl__exact_connect(rl->exact);
}

int rl_limit_add(rl_t *rl, const rl_limit_t *lim)
{
    int rc = check_limit_arg(rl, lim);
    rl_limit_t tmp;
    if (rc == 0)
        rc = mode_ok(rl, full_limit(lim, &tmp));
    if (rc == 0)
        rc = connect_exact(rl, &tmp);
    if (rc != 0)
        return rc;
    int id = rl__limits_add(&rl->limits, full_limit(lim, &tmp), &rl->clock);
    if (id < 0 || tmp.kind != RL_KIND_INFLIGHT)
        return id;
    rc = rl__inflight_add(rl, id, &tmp);
    if (rc != 0)
        rl__limits_remove(&rl->limits, id);
    return rc != 0 ? rc : id;
}

/* A limit keeps its kind: a rate limit's keys and an in-flight limit's
 * permits have nothing to convert into each other. */
static int same_kind(rl_t *rl, int id, const rl_limit_t *lim)
{
    rl_limit_t old;
    rl_limit_init(&old);
    int rc = rl__limits_def(&rl->limits, id, &old);
    if (rc != 0)
        return rc;
    if (old.kind == lim->kind)
        return 0;
    rl__log(&rl->logger, RL_LOG_ERROR,
            "limit %.64s: an update cannot change a limit's kind (remove it and add it again)",
            lim->name);
    return RL_EMODE;
}

/* Under the writers' lock, the new epoch published: bring every bucket word
 * of the limit to it (local/limits.h, Epochs). */
static void convert_keys(void *ctx, int id, rl_limit_slot_t *ls, const rl_limit_params_t *from,
                         const rl_limit_params_t *to)
{
    rl_t *rl = ctx;
    uint64_t bit = rl__epoch_bit(to->epoch);
    rl__table_convert_limit(&rl->table, rl__limit_ref(id), from->normal.t_fp, to->normal.t_fp,
                            bit, &rl->clock, (int32_t)to->clock_source);
    rl__bucket_convert(&ls->overflow_tat, NULL, from->normal.t_fp, to->normal.t_fp, bit,
                       rl__clock_now_fp(&rl->clock, (int32_t)to->clock_source));
}

int rl_limit_update(rl_t *rl, int id, const rl_limit_t *lim)
{
    int rc = check_limit_arg(rl, lim);
    rl_limit_t tmp;
    if (rc == 0)
        rc = mode_ok(rl, full_limit(lim, &tmp));
    if (rc == 0)
        rc = connect_exact(rl, &tmp);
    if (rc == 0)
        rc = same_kind(rl, id, &tmp);
    if (rc == 0 && tmp.kind == RL_KIND_INFLIGHT)
        rc = rl__inflight_update(rl, id, &tmp);
    return rc != 0 ? rc
                   : rl__limits_update(&rl->limits, id, full_limit(lim, &tmp), &rl->clock,
                                       convert_keys, rl);
}

int rl_limit_remove(rl_t *rl, int id)
{
    if (rl == NULL)
        return RL_EINVAL;
    int rc = rl__fork_check(rl);
    if (rc != 0)
        return rc;
    if ((rc = rl__limits_remove(&rl->limits, id)) != 0)
        return rc;
    rl__inflight_remove(rl, id);
    rl__table_purge_limit(&rl->table, rl__limit_ref(id));
    return 0;
}

int rl_limit_find(rl_t *rl, const char *name)
{
    if (rl == NULL || name == NULL)
        return RL_EINVAL;
    int rc = rl__fork_check(rl);
    return rc != 0 ? rc : rl__limits_find(&rl->limits, name);
}

int rl_limit_get(rl_t *rl, int id, rl_limit_t *out)
{
    if (rl == NULL || out == NULL)
        return RL_EINVAL;
    int rc = rl__fork_check(rl);
    if (rc == 0)
        rc = rl__struct_ok(out, out->size, RL_LIMIT_SIZE_MIN, out->size);
    return rc != 0 ? rc : rl__limits_def(&rl->limits, id, out);
}

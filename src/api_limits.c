/* SPDX-License-Identifier: MIT */
/* The limit-management entry points: validation, then the registry. */
#include "instance.h"
#include "structsize.h"

static int check_limit_arg(rl_t *rl, const rl_limit_t *lim)
{
    if (rl == NULL || lim == NULL)
        return RL_EINVAL;
    int rc = rl__fork_check(rl);
    if (rc != 0)
        return rc;
    return rl__struct_ok(lim, lim->size, RL_LIMIT_SIZE_MIN, sizeof *lim);
}

int rl_limit_add(rl_t *rl, const rl_limit_t *lim)
{
    int rc = check_limit_arg(rl, lim);
    return rc != 0 ? rc : rl__limits_add(&rl->limits, lim, &rl->clock);
}

int rl_limit_update(rl_t *rl, int id, const rl_limit_t *lim)
{
    int rc = check_limit_arg(rl, lim);
    rl_limit_params_t old, now;
    if (rc != 0 || (rc = rl__limits_update(&rl->limits, id, lim, &rl->clock, &old)) != 0)
        return rc;
    /* Keys keep their tokens, not their time debt: a faster rate must not
     * leave a key more limited than before. Checks racing this sweep may be
     * charged once at either parameter set. */
    rl_limit_slot_t *ls = rl__limit_get(&rl->limits, id);
    if (ls == NULL)
        return 0; /* removed meanwhile */
    rl__params_read(ls, &now);
    uint64_t t = rl__clock_now_fp(&rl->clock, now.clock_source);
    rl__table_rescale_limit(&rl->table, rl__limit_ref(id), &old.normal, &now.normal, t);
    rl__bucket_rescale(&ls->overflow_tat, &old.normal, &now.normal, t);
    return 0;
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

/* SPDX-License-Identifier: MIT */
/*
 * Quotas (see quota/quota.h and the header's rl_quota_* blocks). A charge is one
 * call of quota.lua through the instance's per-request caller, the exact
 * thread's (redis/caller.h, exact/exact.h: one pool for both):
 * blocking, at most the instance's quota_timeout_ms. When Redis cannot
 * answer, the quota's on_failure decides (policy/policy.h, as for limits); an open
 * quota's charge goes into the journal, which the replay thread
 * (quota/replay.c) sends again until Redis answers it.
 *
 * This file: the ledger's lifetime, its registry of quotas, the blocking
 * charge and read, and the counters. The call itself is quota/call.c, the
 * asynchronous charge quota/async.c.
 */
#include <stdio.h>
#include <string.h>
#include "quota/internal.h"
#include "quota/spec.h"
#include "base/alloc.h"
#include "base/errors.h"
#include "base/structsize.h"
#include "exact/exact.h"
#include "redis/keys.h"

#define SLOT_BITS 8 /* RL_QUOTA_MAX == 1 << SLOT_BITS */
#define GEN_MAX ((UINT32_C(1) << (31 - SLOT_BITS)) - 1)

_Static_assert(RL_QUOTA_MAX == 1 << SLOT_BITS, "quota ids carry the slot in SLOT_BITS");

/* ------------------------------------------------------------- lifetime */

int rl__quotas_create(struct rl *rl, uint32_t journal_max, uint32_t timeout_ms,
                      rl_quotas_t **out)
{
    rl_quotas_t *qs = rl__calloc(&rl->alloc, sizeof *qs, 64);
    if (qs == NULL)
        return RL_ENOMEM;
    qs->rl = rl;
    qs->pid = getpid();
    qs->journal_max = journal_max;
    qs->timeout_ms = timeout_ms;
    if (uv_mutex_init(&qs->mu) != 0) {
        rl__free(&rl->alloc, qs, sizeof *qs, 64);
        return RL_ENOMEM;
    }
    if (uv_cond_init(&qs->cv) != 0) {
        uv_mutex_destroy(&qs->mu);
        rl__free(&rl->alloc, qs, sizeof *qs, 64);
        return RL_ENOMEM;
    }
    for (int i = 0; i < Q_N; i++)
        atomic_init(&qs->counters[i], 0);
    atomic_init(&qs->time_ms, 0);
    atomic_init(&qs->skew_ms, 0);
    atomic_init(&qs->caller_pub, NULL);
    *out = qs;
    return 0;
}

void rl__quotas_destroy(rl_quotas_t *qs)
{
    if (qs == NULL)
        return;
    rl__quotas_stop(qs);
    rl__qjournal_destroy(&qs->journal, &qs->rl->alloc);
    uv_cond_destroy(&qs->cv);
    uv_mutex_destroy(&qs->mu);
    rl__free(&qs->rl->alloc, qs, sizeof *qs, 64);
}

void rl__quotas_forget(rl_quotas_t *qs)
{
    /* The replay thread is the parent's: only this copy's memory is ours. */
    if (qs == NULL)
        return;
    rl__qjournal_destroy(&qs->journal, &qs->rl->alloc);
    rl__free(&qs->rl->alloc, qs, sizeof *qs, 64);
}

/* Make *slot (a shared instance's ledger this process sees) its own: a
 * fork()'s copy is replaced by a fresh ledger with the same definitions
 * (the copy's mutex and journal are a snapshot of another process's: never
 * locked here). 0 or RL_ENOMEM. */
static int own_ledger(struct rl *rl, rl_quotas_t **slot)
{
    rl_quotas_t *qs = *slot;
    if (qs == NULL || qs->pid == getpid())
        return 0;
    rl_quotas_t *mine = NULL;
    int rc = rl__quotas_create(rl, qs->journal_max, qs->timeout_ms, &mine);
    if (rc != 0)
        return rc;
    memcpy(mine->slots, qs->slots, sizeof mine->slots);
    mine->count = qs->count;
    rl__quotas_forget(qs);
    *slot = mine;
    return 0;
}

int rl__quotas_adopt(struct rl *rl, rl_quotas_t **slot, struct rl_exact *x)
{
    int rc = own_ledger(rl, slot);
    rl_quotas_t *qs = *slot;
    if (rc != 0 || qs == NULL)
        return rc;
    uv_mutex_lock(&qs->mu);
    rc = rl__quota_start_replay(qs, x);
    uv_mutex_unlock(&qs->mu);
    return rc;
}

void rl__quotas_drop(rl_quotas_t *qs)
{
    if (qs == NULL)
        return;
    if (qs->pid == getpid())
        rl__quotas_destroy(qs);
    else
        rl__quotas_forget(qs);
}

rl_quotas_t *rl__quotas_of(struct rl *rl)
{
    if (rl->shsync == NULL)
        return rl->quotas;
    rl_quotas_t *qs = rl->shlocal != NULL ? rl->shlocal->quotas : NULL;
    return qs != NULL && qs->pid == getpid() ? qs : NULL;
}

void rl__quotas_stats(rl_quotas_t *qs, rl_stats_t *o)
{
    if (qs == NULL)
        return;
    uint64_t v[Q_N];
    for (int i = 0; i < Q_N; i++)
        /* relaxed: statistics. */
        v[i] = atomic_load_explicit(&qs->counters[i], memory_order_relaxed);
    o->quota_charges = v[Q_CHARGES];
    o->quota_duplicates = v[Q_DUPLICATES];
    o->quota_degraded = v[Q_DEGRADED];
    o->quota_journaled = v[Q_JOURNALED];
    o->quota_replayed = v[Q_REPLAYED];
    o->quota_lost = v[Q_LOST];
    uv_mutex_lock(&qs->mu);
    o->quota_journal_len = qs->journal.len;
    uv_mutex_unlock(&qs->mu);
}

void rl__quota_set_time(struct rl *rl, uint64_t unix_ms)
{
    rl_quotas_t *qs = rl__quotas_of(rl);
    if (qs != NULL)
        /* relaxed: a test hook; each charge reads it once. */
        atomic_store_explicit(&qs->time_ms, unix_ms, memory_order_relaxed);
}

void rl__quota_lose_acks(struct rl *rl, uint32_t n)
{
    rl_quotas_t *qs = rl__quotas_of(rl);
    if (qs == NULL)
        return;
    uv_mutex_lock(&qs->mu);
    qs->lose_acks = n;
    uv_mutex_unlock(&qs->mu);
}

/* A shared instance's quotas are defined in a process that did not attach
 * (the opener, or a process forked from it before the workers, as a
 * daemon's master is): its private ledger, which every process forked
 * later inherits and rl_shared_attach turns into that process's own. The
 * only rule that keeps every worker's quota ids the same: an attached
 * process's ledger is its own, and a change there would be its alone.
 * RL_ENOTSUP, logged (no message buffer), in an attached process. */
static int shared_registry(rl_t *rl, const char *what, const char *name)
{
    if (rl->shsync == NULL || rl__exact_of(rl) == NULL)
        return 0;
    rl__log(&rl->logger, RL_LOG_ERROR,
            "quota %.64s: %s in process %d, attached to the shared instance "
            "(rl_shared_attach): quotas are defined before the workers fork, in a process "
            "that did not attach", name, what, (int)getpid());
    return RL_ENOTSUP;
}

/* A shared instance's ledger of the calling (unattached) process for
 * rl_quota_add and rl_quota_remove: one made here at the first quota
 * (after rl_open_shared sealed the mapping: from this process's heap), or
 * its own from the copy it inherited. */
static int shared_ledger(rl_t *rl, rl_quotas_t **out)
{
    rl_quotas_t **slot = &rl->shlocal->quotas;
    int rc = own_ledger(rl, slot);
    if (rc != 0)
        return rc;
    if (*slot == NULL)
        rc = rl__quotas_create(rl, rl->shlocal->quota_journal_max,
                               rl->shlocal->quota_timeout_ms, slot);
    *out = *slot;
    return rc;
}

/* ----------------------------------------------------------- registry */

int rl_quota_add(rl_t *rl, const rl_quota_t *q)
{
    if (rl == NULL || q == NULL)
        return RL_EINVAL;
    int rc = rl__fork_check(rl);
    if (rc != 0)
        return rc;
    if ((rc = rl__quota_validate(q, NULL, 0)) != 0)
        return rc;
    if ((rc = shared_registry(rl, "added", q->name)) != 0)
        return rc;
    rl_quotas_t *qs = rl->quotas;
    if (rl->shsync != NULL && (rc = shared_ledger(rl, &qs)) != 0)
        return rc;
    if (qs == NULL)
        return RL_ENOTSUP;
    rl_quota_t def;
    rl_quota_init(&def);
    memcpy(&def, q, q->size < sizeof def ? q->size : sizeof def);
    def.size = sizeof def;
    uv_mutex_lock(&qs->mu);
    int free_slot = -1;
    for (int i = 0; i < RL_QUOTA_MAX; i++) {
        if (qs->slots[i].live && strcmp(qs->slots[i].def.name, def.name) == 0) {
            uv_mutex_unlock(&qs->mu);
            return RL_EEXIST;
        }
        if (!qs->slots[i].live && free_slot < 0 && qs->slots[i].gen < GEN_MAX)
            free_slot = i;
    }
    if (free_slot < 0) {
        uv_mutex_unlock(&qs->mu);
        return RL_ELIMITS;
    }
    if ((rc = rl__quota_start_replay(qs, rl__exact_of(rl))) != 0) {
        uv_mutex_unlock(&qs->mu);
        return rc;
    }
    qslot_t *s = &qs->slots[free_slot];
    s->def = def;
    s->gen++;
    s->live = 1;
    qs->count++;
    int id = (int)((s->gen << SLOT_BITS) | (uint32_t)free_slot);
    uv_mutex_unlock(&qs->mu);
    return id;
}

/* The slot of a quota id, under qs->mu: NULL when unknown or removed. */
static qslot_t *slot_of(rl_quotas_t *qs, int quota)
{
    if (quota < 0)
        return NULL;
    qslot_t *s = &qs->slots[(uint32_t)quota & (RL_QUOTA_MAX - 1)];
    return s->live && s->gen == (uint32_t)quota >> SLOT_BITS ? s : NULL;
}

int rl_quota_remove(rl_t *rl, int quota)
{
    if (rl == NULL)
        return RL_EINVAL;
    int rc = rl__fork_check(rl);
    if (rc != 0)
        return rc;
    char name[24];
    snprintf(name, sizeof name, "id %d", quota);
    if ((rc = shared_registry(rl, "removed", name)) != 0)
        return rc;
    rl_quotas_t *qs = rl->quotas;
    if (rl->shsync != NULL && (rc = shared_ledger(rl, &qs)) != 0)
        return rc;
    if (qs == NULL)
        return RL_ENOTFOUND;
    uv_mutex_lock(&qs->mu);
    qslot_t *s = slot_of(qs, quota);
    if (s != NULL) {
        s->live = 0;
        qs->count--;
    }
    uv_mutex_unlock(&qs->mu);
    /* Its journal entries are dropped (and counted) as the replay meets
     * them: the journal is a FIFO, and removal is rare. */
    return s != NULL ? 0 : RL_ENOTFOUND;
}

/* ------------------------------------------------------------- charges */

int rl__quota_begin(rl_t *rl, int quota, const void *key, size_t key_len, rl_quota_result_t *out,
                    rl_quota_t *q, uint32_t *slot, uint32_t *gen)
{
    if (rl == NULL || (key == NULL && key_len > 0))
        return RL_EINVAL;
    if (out != NULL) {
        if (rl__struct_ok(out, out->size, RL_QUOTA_RESULT_SIZE_MIN, sizeof *out) != 0)
            return RL_ESIZE;
        rl__quota_put_result(out, RL_DENY, 0, 0, 0, 0);
    }
    int rc = rl__fork_check(rl);
    if (rc != 0)
        return rc;
    if (key_len == 0 || key_len > RL_MAX_KEY_LEN)
        return RL_EKEYLEN;
    if (rl->shsync != NULL && rl__exact_of(rl) == NULL) {
        rl__log(&rl->logger, RL_LOG_ERROR,
                "quota %d: process %d charges or reads a quota of a shared instance without "
                "rl_shared_attach (which starts its Redis connections)", quota, (int)getpid());
        return RL_ENOTSUP;
    }
    rl_quotas_t *qs = rl__quotas_of(rl);
    if (qs == NULL)
        return RL_ENOTFOUND;
    uv_mutex_lock(&qs->mu);
    qslot_t *s = slot_of(qs, quota);
    if (s != NULL) {
        *q = s->def;
        *slot = (uint32_t)(s - qs->slots);
        *gen = s->gen;
    }
    uv_mutex_unlock(&qs->mu);
    return s != NULL ? 0 : RL_ENOTFOUND;
}

int rl_quota_charge(rl_t *rl, int quota, const void *key, size_t key_len, uint64_t cost,
                    const void *request_id, size_t id_len, rl_quota_result_t *out)
{
    rl_quota_t q;
    uint32_t slot = 0, gen = 0;
    int rc = rl__quota_begin(rl, quota, key, key_len, out, &q, &slot, &gen);
    if (rc != 0)
        return rc;
    if ((rc = rl__quota_charge_args(&q, request_id, id_len, cost)) != 0)
        return rc;
    rl_quotas_t *qs = rl__quotas_of(rl);
    rl_qjentry_t e = {slot, gen, cost, rl__keyhash(&rl->kh, key, key_len), {0, 0}};
    rl__redis_quota_rid(&rl->kh, request_id, id_len, e.rid);
    qnames_t n;
    rl__quota_names(rl, &q, e.key, e.rid, &n);
    qreply_t p;
    if (!rl__quota_run(qs, &q, &n, 1, cost, &p))
        return rl__quota_degraded(qs, &q, 1, &e, out);
    rl__quota_count(qs, Q_CHARGES, 1);
    if (p.dup)
        rl__quota_count(qs, Q_DUPLICATES, 1);
    int allowed = p.allowed ? RL_ALLOW : RL_DENY;
    rl__quota_put_result(out, allowed, p.dup ? RL_FLAG_DUPLICATE : 0, q.amount, (uint64_t)p.used,
               (uint64_t)p.reset);
    return allowed;
}

int rl_quota_get(rl_t *rl, int quota, const void *key, size_t key_len, rl_quota_result_t *out)
{
    rl_quota_t q;
    uint32_t slot = 0, gen = 0;
    int rc = rl__quota_begin(rl, quota, key, key_len, out, &q, &slot, &gen);
    if (rc != 0)
        return rc;
    rl_quotas_t *qs = rl__quotas_of(rl);
    qnames_t n;
    rl__quota_names(rl, &q, rl__keyhash(&rl->kh, key, key_len), NULL, &n);
    qreply_t p;
    if (!rl__quota_run(qs, &q, &n, 0, 0, &p))
        return rl__quota_degraded(qs, &q, 0, NULL, out);
    int allowed = (uint64_t)p.used < q.amount ? RL_ALLOW : RL_DENY;
    rl__quota_put_result(out, allowed, 0, q.amount, (uint64_t)p.used, (uint64_t)p.reset);
    return allowed;
}

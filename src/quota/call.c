/* SPDX-License-Identifier: MIT */
/*
 * One quota.lua call through the instance's per-request caller: the keys it
 * names (the quota's hash tag, the counters around the node's guess of
 * Redis's clock, the request id), its arguments and reply, the clock skew a
 * period mismatch teaches, and the result made of the answer, or of
 * on_failure when Redis gave none.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "quota/internal.h"
#include "quota/period.h"
#include "policy/policy.h"
#include "exact/exact.h"
#include "redis/keys.h"

void rl__quota_names(const rl_t *rl, const rl_quota_t *q, rl_keyid_t key, const uint64_t *rid,
                     qnames_t *n)
{
    n->tag_len = (size_t)rl__redis_quota_tag(&rl->kh, rl->key_prefix, q->name, key, n->tag,
                                             sizeof n->tag);
    n->rid_len = 0;
    n->rid[0] = '\0';
    if (rid != NULL)
        n->rid_len = (size_t)snprintf(n->rid, sizeof n->rid, "%s:r:%016" PRIx64 "%016" PRIx64,
                                      n->tag, rid[0], rid[1]);
}

void rl__quota_name_counters(qnames_t *n, const rl_quota_t *q, uint64_t at_ms)
{
    uint64_t start, end, before = 0, unused;
    rl__quota_period(q->period, q->period_ms, at_ms, &start, &end);
    if (start > 0)
        rl__quota_period(q->period, q->period_ms, start - 1, &before, &unused);
    uint64_t starts[QN_COUNTERS] = {start, before, end};
    for (int i = 0; i < QN_COUNTERS; i++)
        n->counter_len[i] = (size_t)snprintf(n->counter[i], sizeof n->counter[i],
                                             "%s:p:%" PRIu64, n->tag, starts[i]);
}

void rl__quota_args(const qnames_t *n, const rl_quota_t *q, int charge, uint64_t cost,
                    uint64_t time_ms, qargs_t *a)
{
    uint64_t nums[6] = {cost, q->amount, (uint64_t)q->period, q->period_ms, q->dedup_ms,
                        time_ms};
    int keys[QA_KEYS] = {0, -1, 1, 2}; /* counter index; -1: the request id */
    for (int i = 0; i < QA_KEYS; i++) {
        int c = keys[i] < 0 && n->rid_len == 0 ? 0 : keys[i];
        a->v[i] = c < 0 ? n->rid : n->counter[c];
        a->l[i] = c < 0 ? n->rid_len : n->counter_len[c];
    }
    a->v[QA_KEYS] = charge ? "c" : "g";
    a->l[QA_KEYS] = 1;
    for (int i = 0; i < 6; i++) {
        a->l[QA_KEYS + 1 + i] = (size_t)snprintf(a->num[i], sizeof a->num[i], "%" PRIu64,
                                                 nums[i]);
        a->v[QA_KEYS + 1 + i] = a->num[i];
    }
}

void rl__quota_parse_reply(void *ud, int status, const redisReply *r)
{
    qreply_t *p = ud;
    p->ok = 0;
    p->redis_now = -1;
    if (status == RL_CALL_REPLY && r != NULL && r->type == REDIS_REPLY_ARRAY &&
        r->elements == 2 && r->element[0]->type == REDIS_REPLY_INTEGER &&
        r->element[0]->integer == -1 && r->element[1]->type == REDIS_REPLY_INTEGER &&
        r->element[1]->integer >= 0)
        p->redis_now = r->element[1]->integer;
    if (status != RL_CALL_REPLY || r == NULL || r->type != REDIS_REPLY_ARRAY ||
        r->elements != 4)
        return;
    int64_t v[4];
    for (int i = 0; i < 4; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER || r->element[i]->integer < 0)
            return;
        v[i] = r->element[i]->integer;
    }
    p->allowed = v[0];
    p->used = v[1];
    p->reset = v[2];
    p->dup = v[3];
    p->ok = 1;
}

uint64_t rl__quota_guess_ms(rl_quotas_t *qs)
{
    if (rl__quota_hook_time(qs) != 0)
        return rl__quota_hook_time(qs);
    /* relaxed: a hint; a stale one costs a round trip, never a count. */
    int64_t g = (int64_t)rl__quota_wall_ms(qs) +
                atomic_load_explicit(&qs->skew_ms, memory_order_relaxed);
    return g > 0 ? (uint64_t)g : 0;
}

void rl__quota_learn_skew(rl_quotas_t *qs, int64_t redis_now)
{
    /* relaxed: a hint, as rl__quota_guess_ms reads it. */
    atomic_store_explicit(&qs->skew_ms, redis_now - (int64_t)rl__quota_wall_ms(qs),
                          memory_order_relaxed);
}

int rl__quota_run(rl_quotas_t *qs, const rl_quota_t *q, qnames_t *n, int charge, uint64_t cost,
                  qreply_t *p)
{
    uint64_t at = rl__quota_guess_ms(qs);
    uint64_t deadline = uv_hrtime() + (uint64_t)qs->timeout_ms * 1000000u;
    /* acquire: pairs with rl__quota_start_replay's release (the caller
     * fully built). */
    rl_redis_caller_t *c = atomic_load_explicit(&qs->caller_pub, memory_order_acquire);
    for (int attempt = 0; attempt < 2; attempt++) {
        qargs_t a;
        rl__quota_name_counters(n, q, at);
        rl__quota_args(n, q, charge, cost, rl__quota_hook_time(qs), &a);
        rl_redis_call_t call = {RL_EXACT_SCRIPT_QUOTA, QA_KEYS, QA_ARGS, a.v, a.l, deadline};
        p->ok = 0;
        p->redis_now = -1;
        int rc = rl__redis_caller_wait(c, &call, rl__quota_parse_reply, p);
        if (rc != RL_CALL_REPLY || p->ok || p->redis_now < 0)
            return rc == RL_CALL_REPLY && p->ok;
        rl__quota_learn_skew(qs, p->redis_now);
        at = (uint64_t)p->redis_now;
    }
    return 0;
}

uint64_t rl__quota_wall_ms(rl_quotas_t *qs)
{
    uint64_t t = rl__quota_hook_time(qs);
    if (t != 0)
        return t;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void rl__quota_put_result(rl_quota_result_t *out, int allowed, uint32_t flags, uint64_t amount,
                          uint64_t used, uint64_t reset)
{
    if (out == NULL)
        return;
    rl_quota_result_t r;
    memset(&r, 0, sizeof r);
    r.size = out->size;
    r.allowed = allowed;
    r.flags = flags;
    r.amount = amount;
    r.used = used;
    r.remaining = used < amount ? amount - used : 0;
    r.reset_unix_ms = reset;
    memcpy(out, &r, out->size < sizeof r ? out->size : sizeof r);
}

int rl__quota_degraded(rl_quotas_t *qs, const rl_quota_t *q, int journal, const rl_qjentry_t *e,
                       rl_quota_result_t *out)
{
    rl__quota_count(qs, Q_DEGRADED, 1);
    rl_failure_answer_t a = rl__policy_on_failure(q->on_failure, q->amount, 0);
    int allowed = a.action == RL_FAILURE_ALLOW ? RL_ALLOW : RL_DENY;
    if (allowed == RL_ALLOW && journal) {
        uv_mutex_lock(&qs->mu);
        int full = rl__qjournal_push(&qs->journal, e) != 0;
        if (!full)
            uv_cond_signal(&qs->cv);
        uv_mutex_unlock(&qs->mu);
        rl__quota_count(qs, full ? Q_LOST : Q_JOURNALED, 1);
    }
    uint64_t start, end;
    rl__quota_period(q->period, q->period_ms, rl__quota_wall_ms(qs), &start, &end);
    rl__quota_put_result(out, allowed, RL_FLAG_DEGRADED, q->amount, 0, end);
    return allowed;
}

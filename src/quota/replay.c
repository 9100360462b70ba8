/* SPDX-License-Identifier: MIT */
/*
 * The fail-open journal's replay thread: an open quota's charge that Redis
 * could not answer waits in the journal (quota/journal.h), and this thread
 * sends it again, oldest first, one blocking call at a time, backing off
 * while Redis does not answer. An entry leaves the journal only when Redis
 * answered it.
 */
#include <pthread.h>
#include "quota/internal.h"
#include "base/errors.h"
#include "base/thread.h"
#include "exact/exact.h"

/* The replay's wait after a failed call: doubling from the first to the
 * last while Redis does not answer. */
#define REPLAY_BACKOFF_MIN_MS 20
#define REPLAY_BACKOFF_MAX_MS 1000

static int find_live(rl_quotas_t *qs, uint32_t slot, uint32_t gen, rl_quota_t *out)
{
    qslot_t *s = &qs->slots[slot];
    if (!s->live || s->gen != gen)
        return 0;
    *out = s->def;
    return 1;
}

/*
 * The replay thread: send the oldest entry of a live quota (entries of
 * removed quotas are dropped and counted lost), pop it once Redis answered,
 * else wait (backing off) and send it again. Redis's answer to a replayed
 * charge is not anyone's answer: allowed, denied or a duplicate, the entry
 * is done.
 */
static void *replay_main(void *arg)
{
    rl_quotas_t *qs = arg;
    uint64_t backoff = 0;
    uv_mutex_lock(&qs->mu);
    while (!qs->replay_stop) {
        rl_qjentry_t e;
        rl_quota_t q;
        if (rl__qjournal_peek(&qs->journal, &e) != 0) {
            uv_cond_wait(&qs->cv, &qs->mu);
            continue;
        }
        if (!find_live(qs, e.quota, e.gen, &q)) {
            rl__qjournal_pop(&qs->journal);
            rl__quota_count(qs, Q_LOST, 1);
            continue;
        }
        uv_mutex_unlock(&qs->mu);
        qnames_t n;
        rl__quota_names(qs->rl, &q, e.key, e.rid, &n);
        qreply_t p;
        int ok = rl__quota_run(qs, &q, &n, 1, e.cost, &p);
        uv_mutex_lock(&qs->mu);
        if (ok && qs->lose_acks > 0) {
            /* Test hook: as if the connection went before this answer. */
            qs->lose_acks--;
        } else if (ok) {
            rl__qjournal_pop(&qs->journal);
            rl__quota_count(qs, Q_REPLAYED, 1);
            backoff = 0;
        } else if (!qs->replay_stop) {
            backoff = backoff == 0 ? REPLAY_BACKOFF_MIN_MS
                                   : (backoff * 2 > REPLAY_BACKOFF_MAX_MS ? REPLAY_BACKOFF_MAX_MS
                                                                          : backoff * 2);
            uv_cond_timedwait(&qs->cv, &qs->mu, backoff * 1000000u);
        }
    }
    uv_mutex_unlock(&qs->mu);
    return NULL;
}

int rl__quota_start_replay(rl_quotas_t *qs, struct rl_exact *x)
{
    if (qs->started)
        return 0;
    if (x == NULL)
        return qs->rl->shsync != NULL ? 0 : RL_ENOTSUP;
    /* The first quota connects the exact path's pool (exact/exact.h). */
    struct rl_redis_caller *caller = rl__exact_caller(x);
    if (caller == NULL)
        return RL_ENOMEM;
    int rc = rl__qjournal_init(&qs->journal, &qs->rl->alloc, qs->journal_max);
    if (rc != 0)
        return rc;
    /* release: charges read the caller pointer with acquire; it was built
     * just above, before this rl_quota_add returns. */
    atomic_store_explicit(&qs->caller_pub, caller, memory_order_release);
    if (rl__thread_start(&qs->replay, replay_main, qs) != 0) {
        rl__qjournal_destroy(&qs->journal, &qs->rl->alloc);
        return RL_ENOMEM;
    }
    qs->started = 1;
    return 0;
}

void rl__quotas_stop(rl_quotas_t *qs)
{
    if (qs == NULL || !qs->started)
        return;
    uv_mutex_lock(&qs->mu);
    int joined = qs->replay_stop;
    qs->replay_stop = 1;
    uv_cond_signal(&qs->cv);
    uv_mutex_unlock(&qs->mu);
    if (!joined)
        pthread_join(qs->replay, NULL);
}

/* SPDX-License-Identifier: MIT */
/*
 * The node registry's client (sync/nodes.h): each round's heartbeat, one
 * script call queued before the round's reports, and what its reply says of
 * the fleet (live nodes, a split over key secrets). Observers' data: it
 * never fails a round nor changes the health state.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "sync/internal.h"
#include "sync/nodes.h"
#include "hot/hot.h"
#include "redis/keys.h"

/* 16 hex digits, as rl__nodes_fp_text writes them: anything else in the
 * fingerprint hash was not written by a node, and never reaches a log. */
static int is_fingerprint(const redisReply *e)
{
    if (e->type != REDIS_REPLY_STRING || e->len != 16)
        return 0;
    for (size_t i = 0; i < 16; i++)
        if (!((e->str[i] >= '0' && e->str[i] <= '9') || (e->str[i] >= 'a' && e->str[i] <= 'f')))
            return 0;
    return 1;
}

/* What a heartbeat's reply says of the fleet ({pruned, live, other
 * fingerprints...}, see sync/nodes.h): the live count becomes the divisor of
 * the pessimistic shares, and another fingerprint is a split fleet, logged
 * and counted. */
static void fleet_seen(rl_sync_t *s, const redisReply *reply)
{
    rl_t *rl = s->rl;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 ||
        reply->element[1]->type != REDIS_REPLY_INTEGER || reply->element[1]->integer < 1 ||
        reply->element[1]->integer > RL_SYNC_NODES_MAX)
        return; /* not a reply of this library's script: nothing to learn */
    uint64_t live = (uint64_t)reply->element[1]->integer;
    /* relaxed: statistics, each self-contained. */
    atomic_store_explicit(&s->store->fleet_nodes, live, memory_order_relaxed);
    if (rl__limits_set_nodes(&rl->limits, (uint32_t)live, &rl->clock))
        rl__sync_log(s, RL_LOG_INFO, "fleet: %" PRIu64 " live node%s: pessimistic shares are "
                     "rate / %" PRIu64, live, live == 1 ? "" : "s", live);
    uint64_t others = 0;
    const redisReply *first = NULL;
    for (size_t i = 2; i < reply->elements; i++)
        if (is_fingerprint(reply->element[i])) {
            others++;
            first = first != NULL ? first : reply->element[i];
        }
    /* relaxed: as above. */
    atomic_store_explicit(&s->store->fleet_split_fps, others, memory_order_relaxed);
    uint64_t now_ms = uv_now(&s->loop);
    if (others == 0) {
        if (s->split_fps != 0)
            rl__sync_log(s, RL_LOG_WARN, "fleet: split over: every live node of key_prefix "
                         "\"%s\" has this node's key_secret fingerprint",
                         rl->key_prefix);
        s->split_fps = 0;
        return;
    }
    /* relaxed: as above. */
    atomic_fetch_add_explicit(&s->store->fleet_split_rounds, 1, memory_order_relaxed);
    /* Once when it starts or changes, then once a minute while it lasts. */
    if (others != s->split_fps || now_ms >= s->split_logged_ms + 60000) {
        char mine[17];
        rl__nodes_fp_text(rl__nodes_fp(rl->kh.fingerprint, RL_REDIS_KEY_LAYOUT), mine);
        rl__sync_log(s, RL_LOG_ERROR,
                     "fleet split: %" PRIu64 " other key_secret fingerprint%s (%.16s%s) among "
                     "the live nodes of key_prefix \"%s\", this node's is %s: nodes with "
                     "different secrets, or of a release that names keys differently, keep "
                     "separate keys in Redis: until the split ends "
                     "this node takes at most rate / %" PRIu64 " (every live node) of each "
                     "key; give every node the same key_secret, and finish a rolling upgrade "
                     "(`ratelimit nodes` lists them with their versions)",
                     others, others == 1 ? "" : "s", first->str, others > 1 ? ", ..." : "",
                     rl->key_prefix, mine, live);
        s->split_logged_ms = now_ms;
    }
    s->split_fps = others;
}

static void heartbeat_reply(redisAsyncContext *ac, void *r, void *priv)
{
    (void)ac;
    rl_sync_t *s = priv;
    redisReply *reply = r;
    if (reply == NULL)
        return; /* the connection went: the round's own commands say so */
    if (reply->type != REDIS_REPLY_ERROR) {
        rl__sync_count(s, C_NODES_WRITES, 1);
        s->nodes_failing = 0;
        if (!s->leaving)
            fleet_seen(s, reply);
        return;
    }
    /* Counted and classified like any error, but the registry is for
     * observers only: it never fails a round nor touches health. */
    int cls = rl__redis_classify(reply);
    rl__sync_error(s, cls);
    rl__sync_count(s, C_NODES_ERRORS, 1);
    if (cls == RL_REDIS_ERR_NOSCRIPT) {
        rl__redis_scripts_forget(&s->scripts, RL_SYNC_SCRIPT_NODES); /* reloaded next round */
        rl__sync_mirror_nodes(s);
    }
    if (!s->nodes_failing && cls != RL_REDIS_ERR_NOSCRIPT)
        rl__sync_log(s, RL_LOG_WARN, "sync: node registry write failed (rate limiting "
                     "unaffected): %.200s", reply->str);
    s->nodes_failing = 1;
}

/* This node's heartbeat (or, leaving, its removal) in the registry: one
 * script call, queued before the round's reports so that on rl_close it is
 * executed before the replies that end the loop. */
void rl__sync_heartbeat(rl_sync_t *s, uint64_t rkeys, uint64_t rlimits)
{
    char hash[96], live[96], fps[96];
    if (!rl__redis_scripts_ready(&s->scripts, RL_SYNC_SCRIPT_NODES)) {
        /* Not loaded, or flushed (NOSCRIPT): load it now, write next round. */
        if (!rl__redis_scripts_loading(&s->scripts, RL_SYNC_SCRIPT_NODES) && !s->leaving)
            rl__sync_load_nodes(s);
        return;
    }
    if (rl__nodes_key_names(s->rl->key_prefix, hash, sizeof hash, live, sizeof live) != 0 ||
        rl__nodes_fp_key_name(s->rl->key_prefix, fps, sizeof fps) != 0)
        return;
    rl_nodes_record_t rec;
    memset(&rec, 0, sizeof rec);
    snprintf(rec.lib, sizeof rec.lib, "%s", rl_version());
    memcpy(rec.host, s->host, sizeof rec.host);
    rec.pid = s->pid;
    rec.start_ms = s->start_ms;
    rec.interval_ms = s->rl->sync_interval_ms;
    /* relaxed: this thread is the health word's only writer. */
    rec.health = RL_HEALTH_STATE(atomic_load_explicit(&s->rl->health.word, memory_order_relaxed));
    for (uint32_t i = 0; i < s->rl->limits.cap; i++)
        rec.limits += (uint64_t)s->limits[i].live;
    /* relaxed: a statistic (checkers change it as keys come and go). */
    rec.keys = atomic_load_explicit(&s->rl->table.live, memory_order_relaxed);
    rec.rkeys = rkeys;
    rec.rlimits = rlimits;
    /* relaxed: statistics, and this thread is their only writer. */
    rec.rounds = atomic_load_explicit(&s->store->counters[C_ROUNDS], memory_order_relaxed);
    rec.failed = atomic_load_explicit(&s->store->counters[C_ROUNDS_FAILED], memory_order_relaxed);
    rl__nodes_fp_text(rl__nodes_fp(s->rl->kh.fingerprint, RL_REDIS_KEY_LAYOUT), rec.fp);
    char hot[RL_HOT_WORD_TEXT_MAX];
    if (!s->leaving && rl__hot_publish(s->rl, hot, sizeof hot) > 0)
        rec.hot = hot;
    char record[RL_NODES_RECORD_MAX], stale[24], prune[16], fp_max[16];
    rl__nodes_format(&rec, record, sizeof record);
    snprintf(stale, sizeof stale, "%" PRIu64,
             (uint64_t)RL_NODES_STALE_ROUNDS * s->rl->sync_interval_ms);
    snprintf(prune, sizeof prune, "%u", (unsigned)RL_NODES_PRUNE_MAX);
    snprintf(fp_max, sizeof fp_max, "%u", (unsigned)RL_NODES_FP_MAX);
    const char *argv[] = {rl__redis_scripts_verb(&s->scripts, RL_SYNC_SCRIPT_NODES),
                          rl__redis_scripts_body(&s->scripts, RL_SYNC_SCRIPT_NODES), "3", hash, live, fps, s->store->incarnation,
                          record, stale, s->leaving ? "1" : "0", prune, rec.fp, fp_max};
    size_t argl[sizeof argv / sizeof argv[0]];
    for (size_t i = 0; i < sizeof argv / sizeof argv[0]; i++)
        argl[i] = strlen(argv[i]);
    size_t tag_len;
    const char *tag = rl__redis_hash_tag(hash, argl[3], &tag_len);
    rl__redis_route_send(&s->route, tag, tag_len, heartbeat_reply, s,
                         (int)(sizeof argv / sizeof argv[0]), argv, argl);
}

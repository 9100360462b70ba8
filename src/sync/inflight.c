/* SPDX-License-Identifier: MIT */
/*
 * A round's lease calls for fleet-wide in-flight limits (sync thread
 * only): per global in-flight limit, one inflight_lease.lua call with what
 * the node holds and wants per key, and the blocks that come back written
 * to the limit's entries (inflight/global.h). The lease is valid for 3/4
 * of its Redis life after the round began, on the instance clock: the
 * round starts before Redis reads its TIME, and the margin covers a clock
 * that runs fast against Redis's by up to a quarter.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "sync/internal.h"
#include "base/alloc.h"
#include "inflight/global.h"
#include "lua/scripts.h"

/* The Redis names: {prefix:f1:limit}:born and {prefix:f1:limit}:k:<32 hex>. */
#define LEASE_NAME_BYTES (64 + RL_NAME_MAX + 40)
/* EVALSHA, its SHA or body, the key count; the fixed ARGV. */
#define LEASE_HEAD_ARGS 3
#define LEASE_FIXED_ARGS 5
#define LEASE_KEY_ARGS 3
#define U64_TEXT 24

typedef struct lease_call {
    rl_sync_t *s;
    uint64_t round_id;
    int id;           /* the limit's */
    uint64_t until;   /* the lease's end if the reply comes (instance time) */
    uint32_t n;
    rl_ifl_lease_key_t keys[RL_IFL_LEASE_KEYS];
} lease_call_t;

static uint32_t lease_ms(const rl_sync_t *s) { return 2u * s->rl->sync_interval_ms; }

static int name_born(const rl_sync_t *s, const char *limit, char *buf, size_t cap)
{
    return snprintf(buf, cap, "{%s:f1:%s}:born", s->rl->key_prefix, limit);
}

/* The key's tag never leaves the process: a PRF of it names the hash. */
static int name_key(const rl_sync_t *s, const char *limit, uint64_t tag, char *buf, size_t cap)
{
    const uint64_t *k = s->rl->kh.name;
    uint64_t k2[2] = {k[1], k[0]};
    uint64_t h1 = rl__siphash24(k, &tag, sizeof tag), h2 = rl__siphash24(k2, &tag, sizeof tag);
    return snprintf(buf, cap, "{%s:f1:%s}:k:%016" PRIx64 "%016" PRIx64, s->rl->key_prefix,
                    limit, h1, h2);
}

/* The reply: one block per key, each 0..max; anything else fails the round. */
static int parse_blocks(const redisReply *r, lease_call_t *call, uint32_t max)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != call->n)
        return -1;
    for (uint32_t j = 0; j < call->n; j++) {
        const redisReply *e = r->element[j];
        if (e == NULL || e->type != REDIS_REPLY_INTEGER || e->integer < 0 ||
            (unsigned long long)e->integer > max)
            return -1;
        call->keys[j].grant = (uint32_t)e->integer;
    }
    return 0;
}

static void lease_reply(redisAsyncContext *ac, void *r, void *priv)
{
    (void)ac;
    lease_call_t *call = priv;
    rl_sync_t *s = call->s;
    redisReply *reply = r;
    int current = call->round_id == s->round_id;
    if (reply != NULL && reply->type == REDIS_REPLY_ERROR) {
        int cls = rl__redis_classify(reply);
        rl__sync_error(s, cls);
        if (cls == RL_REDIS_ERR_NOSCRIPT)
            rl__redis_scripts_forget(&s->scripts, RL_SYNC_SCRIPT_LEASE);
        else
            rl__sync_log(s, RL_LOG_WARN, "sync: in-flight lease script error: %.200s",
                         reply->str);
        if (current)
            s->round_failed = 1;
    } else if (reply == NULL) {
        if (current)
            s->round_failed = 1;
    } else if (current) {
        /* Only the round's own reply: a later round has collected since,
         * and a late block could be one Redis no longer counts. */
        rl_ifl_t *b = rl__ifl_enter(s->rl->inflight, call->id);
        if (b != NULL) {
            /* relaxed: a parameter. */
            uint32_t max = atomic_load_explicit(&b->limit_now, memory_order_relaxed);
            if (parse_blocks(reply, call, max) == 0) {
                rl__ifl_global_apply(b, call->keys, call->n, call->until);
            } else {
                rl__sync_error(s, RL_REDIS_ERR_OTHER);
                s->round_failed = 1;
            }
            rl__ifl_leave(s->rl->inflight, b);
        }
    }
    if (current && s->in_flight > 0 && --s->in_flight == 0)
        rl__sync_round_done(s);
    rl__free(&s->rl->alloc, call, sizeof *call, 8);
}

typedef struct lease_args {
    const char **argv;
    size_t *argl;
    size_t k, argc;
    char *text, *w;
    size_t cap;
} lease_args_t;

static void put(lease_args_t *a, int len)
{
    a->argv[a->k] = a->w;
    a->argl[a->k++] = (size_t)len;
    a->w += len + 1;
}

static size_t room(const lease_args_t *a) { return a->cap - (size_t)(a->w - a->text); }

static void put_u64(lease_args_t *a, uint64_t v)
{
    put(a, snprintf(a->w, room(a), "%" PRIu64, v));
}

static void put_str(lease_args_t *a, const char *v) { put(a, snprintf(a->w, room(a), "%s", v)); }

/* Send the call's keys; 0 when in flight. */
static int send_lease(rl_sync_t *s, lease_call_t *call, const char *limit, uint32_t max)
{
    const rl_allocator_t *al = &s->rl->alloc;
    const char *body = rl__redis_scripts_body(&s->scripts, RL_SYNC_SCRIPT_LEASE);
    lease_args_t a = {0};
    a.argc = LEASE_HEAD_ARGS + 1 + call->n + LEASE_FIXED_ARGS + LEASE_KEY_ARGS * (size_t)call->n;
    a.cap = (size_t)(call->n + 1) * (LEASE_NAME_BYTES + LEASE_KEY_ARGS * U64_TEXT) +
            sizeof s->store->incarnation + LEASE_FIXED_ARGS * U64_TEXT + strlen(body) + 64;
    size_t vbytes = a.argc * (sizeof(char *) + sizeof(size_t));
    a.argv = rl__calloc(al, vbytes, 8);
    a.text = a.w = rl__calloc(al, a.cap, 1);
    int rc = -1;
    if (a.argv != NULL && a.text != NULL) {
        a.argl = (size_t *)(void *)(a.argv + a.argc);
        put_str(&a, rl__redis_scripts_verb(&s->scripts, RL_SYNC_SCRIPT_LEASE));
        put_str(&a, body);
        put_u64(&a, 1u + call->n);
        put(&a, name_born(s, limit, a.w, room(&a)));
        for (uint32_t j = 0; j < call->n; j++)
            put(&a, name_key(s, limit, call->keys[j].tag, a.w, room(&a)));
        uint64_t lease = lease_ms(s);
        put_str(&a, s->store->incarnation);
        put_u64(&a, s->round_virtual_ms);
        put_u64(&a, lease);
        put_u64(&a, max);
        put_u64(&a, 10 * lease + 10000u); /* a hash unreported that long is idle */
        for (uint32_t j = 0; j < call->n; j++) {
            const rl_ifl_lease_key_t *k = &call->keys[j];
            int out = s->leaving; /* the node's permits end with it */
            put_u64(&a, out ? 0 : k->held);
            put_u64(&a, out ? 0 : k->want);
            put_u64(&a, out ? 0 : k->cap);
        }
        size_t tag_len;
        const char *tag = rl__redis_hash_tag(a.argv[LEASE_HEAD_ARGS], a.argl[LEASE_HEAD_ARGS],
                                             &tag_len);
        rc = rl__redis_route_send(&s->route, tag, tag_len, lease_reply, call, (int)a.k, a.argv,
                                  a.argl) == REDIS_OK
                 ? 0
                 : -1;
    }
    rl__free(al, (void *)a.argv, vbytes, 8);
    rl__free(al, a.text, a.cap, 1);
    return rc;
}

/* One global in-flight limit's call (b entered). */
static void lease_limit(rl_sync_t *s, rl_ifl_t *b, uint64_t nodes)
{
    const rl_allocator_t *al = &s->rl->alloc;
    lease_call_t *call = rl__calloc(al, sizeof *call, 8);
    if (call == NULL) {
        s->round_failed = 1;
        return;
    }
    uint64_t now = rl__ifl_now(s->rl, b);
    rl__ifl_global_nodes(b, nodes);
    call->s = s;
    call->round_id = s->round_id;
    call->id = b->id;
    call->until = now + (uint64_t)lease_ms(s) * 1000000u * 3u / 4u;
    call->n = rl__ifl_global_collect(b, now, call->keys, RL_IFL_LEASE_KEYS);
    /* relaxed: a parameter. */
    uint32_t max = atomic_load_explicit(&b->limit_now, memory_order_relaxed);
    if (send_lease(s, call, rl__ifl_global_name(b), max) != 0) {
        rl__free(al, call, sizeof *call, 8);
        s->round_failed = 1;
        return;
    }
    s->in_flight++;
    rl__sync_count(s, C_CALLS, 1);
}

void rl__sync_inflight_round(rl_sync_t *s)
{
    struct rl_inflight *m = s->rl->inflight;
    if (m == NULL)
        return;
    /* relaxed: written by this thread (the heartbeat). */
    uint64_t nodes = atomic_load_explicit(&s->store->fleet_nodes, memory_order_relaxed);
    if (nodes == 0)
        nodes = s->cfg.expected_nodes;
    for (uint32_t i = 0; i < s->rl->limits.cap; i++) {
        /* relaxed: rl__ifl_enter checks the id against its block. */
        uint32_t id = atomic_load_explicit(&s->rl->limits.slots[i].id, memory_order_relaxed);
        rl_ifl_t *b = id != 0 ? rl__ifl_global_enter(m, (int)id) : NULL;
        if (b == NULL)
            continue;
        if (rl__redis_scripts_ready(&s->scripts, RL_SYNC_SCRIPT_LEASE)) {
            lease_limit(s, b, nodes);
        } else {
            /* Loaded with the others on connect; after NOSCRIPT or a
             * failed load, here. The lease waits a round. */
            if (s->scripts.s[RL_SYNC_SCRIPT_LEASE].state == RL_SCRIPT_UNLOADED)
                rl__redis_scripts_load(&s->scripts, rl__redis_route_context(&s->route, NULL, 0),
                                       RL_SYNC_SCRIPT_LEASE, uv_now(&s->loop));
            s->round_failed = 1;
        }
        rl__ifl_leave(m, b);
    }
}

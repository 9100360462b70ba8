/* SPDX-License-Identifier: MIT */
/*
 * Redis key naming: what the library's keys are called in Redis. Pure; used
 * by the sync round and by the CLI (tools/ratelimit inspect), so both find
 * the same key.
 */
#ifndef RL_REDIS_KEYS_H
#define RL_REDIS_KEYS_H

#include <stddef.h>
#include <stdint.h>
#include "local/keyhash.h"

#define RL_VSHARDS 16 /* virtual shards per limit: one hash tag each */

/*
 * The key layout: which name a key gets in Redis under the data-model
 * version v1. Bumped whenever that changes while v1 stays (2: the vshard
 * mixed from both halves of the identity). Nodes of two layouts name most
 * keys differently, so they share nothing in Redis: the node registry must
 * see them as a split fleet (sync/nodes.h, rl__nodes_fp), not let each group
 * enforce the whole limit through a rolling upgrade.
 */
#define RL_REDIS_KEY_LAYOUT 2

/*
 * A key's virtual shard, mixed from both halves of its identity. The
 * identity's low bits alone do not do: it is an NH sum, whose low bits
 * depend only on the key bytes' low bits, so similar keys ("key-0" ..
 * "key-23") fell into 2 vshards of 16 and a limit's keys reached at most 2
 * of a Cluster's masters. Unkeyed: the identity is keyed already.
 */
unsigned rl__redis_vshard(rl_keyid_t id);

/*
 * The Redis name of a key's hash, {prefix:v1:limit:vshard}:k:<32 hex>, from
 * the key's identity (rl__keyhash of its bytes under the fleet's secret): the
 * vshard is rl__redis_vshard's, the hex a 128-bit PRF of the identity
 * (SipHash-2-4 under the secret's name key, twice), so the key bytes never
 * reach Redis. The part in braces is the hash tag: every key of one (limit,
 * vshard) lives on one Cluster slot, so one script call can carry them.
 * snprintf-style return.
 */
int rl__redis_key_name(const rl_keyhash_t *kh, const char *prefix, const char *limit,
                       rl_keyid_t id, char *buf, size_t cap);

/*
 * A quota's Redis names for one key. The hash tag {prefix:q1:quota:<32 hex>}
 * (the hex a PRF of the key's identity, as above) holds every name of the
 * (quota, key): its counters, "<tag>:p:<period start ms>", and its request
 * ids, "<tag>:r:<32 hex>" (a PRF of the id's bytes), so one script call
 * touches one Cluster slot. snprintf-style returns.
 */
int rl__redis_quota_tag(const rl_keyhash_t *kh, const char *prefix, const char *quota,
                        rl_keyid_t id, char *buf, size_t cap);

/* The 128-bit PRF of a request id's bytes (SipHash-2-4 under the secret's
 * name key, twice): ids of any length name keys of one length, and the
 * bytes never reach Redis. */
void rl__redis_quota_rid(const rl_keyhash_t *kh, const void *rid, size_t len, uint64_t out[2]);

/*
 * An exact in-flight limit's holders for one key (inflight/exact.c,
 * lua/inflight.lua): the sorted set {prefix:i1:limit:<16 hex>}, the hex a
 * 64-bit PRF of the key's identity (SipHash-2-4 under the secret's name key,
 * with words of its own), which the permit carries so that its release
 * names the set without the key's bytes. Two keys of one limit share a set
 * with a chance of 2^-64 per pair. snprintf-style return.
 */
uint64_t rl__redis_inflight_digest(const rl_keyhash_t *kh, rl_keyid_t id);
int rl__redis_inflight_key(const char *prefix, const char *limit, uint64_t digest, char *buf,
                           size_t cap);

#endif

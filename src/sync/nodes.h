/* SPDX-License-Identifier: MIT */
/*
 * The fleet's node registry: each node's sync thread writes a heartbeat
 * record once per round (src/lua/nodes.lua, pipelined with the round's other
 * commands), so `ratelimit nodes` can list the live nodes of a fleet.
 *
 * Redis data model (one fleet = one key_prefix; both keys share one hash tag,
 * so the script is one call on one slot, on a cluster too):
 *   {prefix:v1}:nodes       hash   field = incarnation ("node_id:16 hex"),
 *                                  value = "seen=<ms> " + record (below);
 *                                  field "t" = the last Redis time seen (ms),
 *                                  kept monotonic (TIME is a wall clock)
 *   {prefix:v1}:nodes:live  zset   member = incarnation,
 *                                  score = deadline: seen + stale ms
 *   {prefix:v1}:nodes:fp    hash   field = a key_secret fingerprint (fp below),
 *                                  value = the latest deadline of a node
 *                                  holding it; pruned once it passes
 * Each write returns {pruned, live, fp...}: the stale entries it pruned, the
 * live nodes of the prefix (deadline not passed, the writer included), and
 * the live fingerprints other than the writer's (at most RL_NODES_FP_MAX):
 * a node with another key_secret names every key differently, so the two
 * share nothing in Redis and each enforces the limit alone (a split fleet).
 * The fingerprint hash holds one field per secret in use, so a write's work
 * stays bounded by the number of distinct secrets, not of nodes.
 * stale = RL_NODES_STALE_ROUNDS x the node's sync interval. Every write prunes
 * at most RL_NODES_PRUNE_MAX entries past their deadline (readers show the
 * ones not pruned yet as stale); a clean rl_close removes the node's entry;
 * both keys expire 2 x stale after the last write, so a fleet that is gone
 * leaves nothing behind.
 *
 * The record is one line of space-separated word=value pairs, versioned by
 * its first word, v=1. Readers ignore words they do not know, so fields can be
 * added without a new version; a reader refuses a version it does not know.
 * Values never contain spaces. Fields (v=1):
 *   v        record version (1)
 *   lib      library version, MAJOR.MINOR.PATCH
 *   host     host name ([A-Za-z0-9_.:-], other bytes as '_'; "-" if unknown)
 *   pid      process id
 *   start    when the instance opened: the node's wall clock, Unix ms
 *            (display only: liveness uses Redis time)
 *   int      sync interval, ms
 *   health   healthy | degraded | recovering (the node's own judgement)
 *   limits   synced limits defined on the node
 *   keys     keys holding a table slot on the node
 *   rkeys    keys reported in this round
 *   rlimits  limits with at least one key reported in this round
 *   rounds   sync rounds started since rl_open
 *   failed   sync rounds failed since rl_open
 *   fp       the key_secret's fingerprint, 16 hex digits: a keyed hash of
 *            the secret (rl_keyhash_t.fingerprint), never the secret
 *   hot      the node's busiest keys of synced limits (rl_hotkeys): the
 *            hot word, whose items hot/hot.h formats and reads (the word is
 *            absent when the node has none, or runs an older library)
 * Pure functions: no I/O, no allocation, any thread.
 */
#ifndef RL_SYNC_NODES_H
#define RL_SYNC_NODES_H

#include <stddef.h>
#include <stdint.h>
#include "hot/hot.h"

#define RL_NODES_VERSION 1
/* A node's entry lives this many of its own sync intervals without a write. */
#define RL_NODES_STALE_ROUNDS 10
/* Most stale entries one write prunes: bounded work per call. */
#define RL_NODES_PRUNE_MAX 16
/* Longest record the library writes, "seen=..." included. */
#define RL_NODES_RECORD_MAX (512 + RL_HOT_WORD_TEXT_MAX)
/* Most foreign fingerprints one write returns. */
#define RL_NODES_FP_MAX 16

typedef struct rl_nodes_record {
    uint32_t version;      /* 0 when the value has no v= word */
    uint64_t seen_ms;      /* Redis time of the last write (from the script) */
    char lib[16];
    char host[65];
    uint64_t pid;
    uint64_t start_ms;
    uint32_t interval_ms;
    int32_t health;        /* RL_HEALTH_*, or -1 if absent or unknown */
    uint64_t limits;
    uint64_t keys;
    uint64_t rkeys;
    uint64_t rlimits;
    uint64_t rounds;
    uint64_t failed;
    char fp[17];           /* "" when the record has none (an older node) */
    /* The hot word's value: written when not NULL and not empty (format),
     * pointing into the parsed value (parse; NULL when absent). */
    const char *hot;
    size_t hot_len;
} rl_nodes_record_t;

/* The registry's first two Redis keys for a prefix. 0, or -1 if a name does
 * not fit. */
int rl__nodes_key_names(const char *prefix, char *hash, size_t hash_cap, char *live,
                        size_t live_cap);

/* The fingerprint hash's name, {prefix:v1}:nodes:fp. 0, or -1 if it does not fit. */
int rl__nodes_fp_key_name(const char *prefix, char *buf, size_t cap);

/* A fingerprint as the registry writes it: 16 lowercase hex digits. */
void rl__nodes_fp_text(uint64_t fingerprint, char out[17]);

/* The fingerprint a node publishes: its key_secret's (rl_keyhash_t), mixed
 * with the key layout (RL_REDIS_KEY_LAYOUT) when that is not the first, so
 * nodes that name keys differently, by secret or by release, see a split
 * fleet and cap their shares. Layout 1 publishes the secret's fingerprint
 * as it is: releases of that layout keep recognising each other. Pure. */
uint64_t rl__nodes_fp(uint64_t secret_fp, unsigned layout);

/* "healthy", "degraded", "recovering", or "unknown". */
const char *rl__nodes_health_name(int32_t health);

/*
 * Format a record (without seen=, which the script prepends) into buf,
 * NUL-terminated. snprintf-style: returns the length it needs. The host is
 * sanitised as described above.
 */
int rl__nodes_format(const rl_nodes_record_t *r, char *buf, size_t cap);

/*
 * Parse a registry hash value (as stored: "seen=... v=1 ...") of len bytes.
 * Unknown words are skipped; a malformed number leaves its field 0.
 * Returns 0, or -1 if the value names no version or a version other than
 * RL_NODES_VERSION (out->version says which; the other fields are what could
 * be read).
 */
int rl__nodes_parse(const char *value, size_t len, rl_nodes_record_t *out);

/*
 * Split an incarnation ("node_id:<16 hex>") at its last ':'. Returns the
 * node id's length, or -1 if there is no ':'.
 */
int rl__nodes_incarnation_split(const char *inc, size_t len);

#endif

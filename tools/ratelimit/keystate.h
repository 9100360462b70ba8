/* SPDX-License-Identifier: MIT */
/*
 * A key's hash in Redis, decoded exactly as src/lua/report.lua writes it
 * (the one reader of that layout in the project; keep the two in step):
 *
 *   <inc>|e  the node's occupancy epoch for the key     (kept after it leaves)
 *   <inc>|a  its cumulative admitted count, that epoch  (kept after it leaves)
 *   <inc>|o  its cumulative offered count, that epoch   (kept after it leaves)
 *   <inc>|d  its smoothed demand (offered rate), Q24 fraction of the rate
 *   <inc>|r  its smoothed admitted rate, Q24 fraction of the rate
 *   <inc>|t  Redis time of its last report, ms
 *   <inc>|x  Redis time after which its entry is stale, ms
 *   <inc>|q  its rate share (Q24) and <inc>|b its burst tokens, as the last
 *            computation of the key's shares gave them (once per round)
 *   a        admitted by all nodes since the hash was created
 *   t        the last Redis time any report saw (monotonic), ms
 *   c        Redis time the hash was created, ms
 *   k        Redis time of that last computation, ms; u and l the fleet's
 *            admitted rate (Q24) and the live nodes it saw; n the extra
 *            computations since the round's first
 *   g, h     while the hash is rebuilt after it was lost (evicted, flushed):
 *            the Redis time the hold ends, ms, and the live nodes it waits
 *            for; until then every reply tells its node to keep at most
 *            the share it holds
 *
 * and, for mode=exact and mode=tiered, the token bucket src/lua/exact.lua
 * keeps in the same hash (a tiered key's report.lua charges it too):
 *
 *   xn  tokens after the last charge (below 0 for a tiered key whose nodes
 *       admitted more than Redis had)    xl  Redis time of that charge, us
 *   xr  the refill remainder, token-us   xf  first check, us (exact.lua only)
 *   xc  tokens charged since the key was made (exact.lua only)
 *
 * A hash with the bucket and no node entry is an exact key; with both, a
 * tiered one; with node entries only, a global one.
 *
 * <inc> is the node's incarnation, "node_id:<16 hex>". A node whose d r t x
 * are gone has left (rl_close, or dropped as stale by another node's
 * report); one whose x is past is stale and is dropped by the next report.
 * Redis turns Lua numbers into strings; depending on its version a large
 * counter may read "1.2e+15": both forms are accepted. Pure: no I/O.
 */
#ifndef RL_CLI_KEYSTATE_H
#define RL_CLI_KEYSTATE_H

#include <stddef.h>
#include <stdint.h>

enum { KS_E = 1, KS_A = 2, KS_O = 4, KS_D = 8, KS_R = 16, KS_T = 32, KS_X = 64, KS_Q = 128,
       KS_B = 256 };
enum { KS_LIVE, KS_STALE, KS_LEFT };

#define KS_INC_MAX 256

typedef struct ks_node {
    char inc[KS_INC_MAX];
    unsigned have; /* KS_* bits: which fields the hash holds */
    uint64_t e, a, o, d, r, t, x, q, b;
} ks_node_t;

typedef struct ks_key {
    unsigned have; /* KS_A, KS_T, KS_C, KS_K, KS_U, KS_L, KS_N, KS_G, KS_H below: the
                      key's own fields */
    uint64_t a, t, c, k, u, l, extra; /* extra: the field n */
    uint64_t hold_until, hold_nodes;  /* the fields g and h */
    int64_t xn;                         /* the bucket's fields (KS_X*) */
    uint64_t xl, xr, xf, xc;
    ks_node_t *nodes; /* sorted by incarnation, as the script orders them */
    size_t n, cap;
    size_t malformed; /* fields this reader could not place or parse */
} ks_key_t;

enum { KS_C = 128, KS_K = 256, KS_U = 512, KS_L = 1024, KS_N = 2048, KS_XN = 4096,
       KS_XL = 8192, KS_XR = 16384, KS_XF = 32768, KS_XC = 65536, KS_G = 131072,
       KS_H = 262144 };

/* The key families a hash can hold (above). */
enum { KS_GLOBAL, KS_EXACT, KS_TIERED };

void ks_init(ks_key_t *k);
/* Fold in one field of HGETALL. 0, or -1 if out of memory. */
int ks_add(ks_key_t *k, const char *field, size_t flen, const char *value, size_t vlen);
/* Sort the nodes (strcmp order, as the script's table.sort). */
void ks_finish(ks_key_t *k);
void ks_free(ks_key_t *k);

/* KS_GLOBAL, KS_EXACT or KS_TIERED: what the hash holds (above). */
int ks_family(const ks_key_t *k);

/*
 * The bucket's tokens at Redis time now_us, refilled as exact.lua refills
 * it (rate tokens per period_us, at most burst; whole tokens, the remainder
 * carried), never below 0; *full_us the time until it is full again. The
 * key must hold the bucket (KS_XN, KS_XL, KS_XR).
 */
int64_t ks_bucket_now(const ks_key_t *k, uint64_t rate, uint64_t period_us, uint64_t burst,
                      uint64_t now_us, uint64_t *full_us);

/* The script's "now" for a report arriving at Redis time redis_now_ms. */
uint64_t ks_now(const ks_key_t *k, uint64_t redis_now_ms);
/* KS_LIVE, KS_STALE or KS_LEFT at script time now. */
int ks_node_state(const ks_node_t *n, uint64_t now);

/*
 * The rate share (Q24) and burst tokens the share rule (src/sync/share.h, the
 * library's own rl__share_compute) gives each live node now, from the stored
 * demands, with the parameters the sync round sends: what the next report of
 * any of them would return, bar its own EWMA step, the young-key stand-ins
 * of the key's first two rounds, and a hold (g, h: the node then keeps at
 * most what it holds). q and tokens have k->n entries; entries of
 * nodes that are not live are 0. Returns the live node count, or -1 (out of
 * memory, or more nodes than the rule takes).
 */
int ks_shares(const ks_key_t *k, uint64_t now, uint64_t burst, uint32_t *q, uint32_t *tokens);

/* Sum of the live nodes' admitted rates (r), Q24 of the limit's rate. */
uint64_t ks_live_admitted_q(const ks_key_t *k, uint64_t now);
/* Sum of the live nodes' demands (d), Q24. */
uint64_t ks_live_demand_q(const ks_key_t *k, uint64_t now);

#endif

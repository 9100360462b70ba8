/* SPDX-License-Identifier: MIT */
/*
 * The report script's arguments (src/lua/report.lua), one table. The sync
 * round (sync/calls.c, send_call) writes ARGV in this order, and the build
 * (cmake/embed_lua.cmake) generates the script's indices from these rows:
 * `local A_<word>=<position>` for the fixed arguments and `local
 * K_<word>=<offset>` for each key's, with A_N and K_N their counts, prepended to
 * the embedded report.lua. Key i's arguments start after A_N + K_N * (i-1).
 * A row is `X(NAME, word)` on a line of its own (the build parses them).
 */
#ifndef RL_REPORTARGS_H
#define RL_REPORTARGS_H

#define RL_REPORT_ARGS(X)                                                          \
    X(INC, inc)           /* this node's incarnation */                            \
    X(RATE, rate)         /* the limit's rate: count */                            \
    X(PERIOD, period)     /* and period, ms */                                     \
    X(BURST, burst)                                                                \
    X(ALPHA, alpha)       /* demand EWMA alpha, Q16 */                             \
    X(RESERVE, reserve)   /* floor reserve, Q24 */                                 \
    X(GAIN, gain)         /* correction gain, Q16 */                               \
    X(MAX_CUT, max_cut)   /* max cut, Q24 */                                       \
    X(TTL, ttl)           /* key hash TTL, ms */                                   \
    X(LEAVING, leaving)   /* 1: drop this node */                                  \
    X(NOW, now)           /* virtual now, ms (0: TIME, simulations only) */        \
    X(EXPECTED, expected) /* expected nodes */                                     \
    X(YOUNG, young)       /* young window, ms */                                   \
    X(FRESH, fresh)       /* ms a key's computed shares serve reports: a round */ \
    X(TIERED, tiered)     /* 1: keep the fleet bucket, reply its remaining */

#define RL_REPORT_KEY_ARGS(X)                                                      \
    X(EPOCH, epoch)       /* occupancy number */                                   \
    X(CUM_A, cum_a)       /* admitted since the occupancy began */                 \
    X(CUM_O, cum_o)       /* offered since then */                                 \
    X(STALE, stale)       /* ms this node's entry lives unreported */              \
    X(NEW_A, new_a)       /* admitted since the node's last report */              \
    X(NEW_O, new_o)       /* offered since then */                                 \
    X(SPAN, span)         /* the ms they span */                                   \
    X(SEEN, seen)         /* live nodes of the node's last reply for the key */

/* What the script returns per key, in this order (report.lua's header). */
enum {
    RL_REPLY_Q,
    RL_REPLY_TOKENS,
    RL_REPLY_USAGE,
    RL_REPLY_NODES,
    RL_REPLY_REMAINING, /* tiered: the fleet bucket's tokens left (else 0) */
    RL_REPLY_HOLD,      /* 1: the key's hash is rebuilt after a loss: keep at
                           most the rate and tokens held (report.lua) */
    RL_REPORT_REPLY_N
};

/* Positions, from 1 as in Lua's ARGV (fixed), offsets from 1 (per key). */
enum {
    RL_RA_ZERO_,
#define RL_X_(up, word) RL_RA_##up,
    RL_REPORT_ARGS(RL_X_)
#undef RL_X_
    RL_RA_END_
};
enum {
    RL_RK_ZERO_,
#define RL_X_(up, word) RL_RK_##up,
    RL_REPORT_KEY_ARGS(RL_X_)
#undef RL_X_
    RL_RK_END_
};
#define RL_REPORT_ARGS_N ((unsigned)RL_RA_END_ - 1u)     /* fixed arguments */
#define RL_REPORT_KEY_ARGS_N ((unsigned)RL_RK_END_ - 1u) /* per key */

#endif

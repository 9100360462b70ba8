/* SPDX-License-Identifier: MIT */
/*
 * Token leases for hot keys: one key, many threads.
 *
 * Two threads charging one key's bucket word take turns owning its cache
 * line, so two threads admit less than one (bench/README.md, "One key, many
 * threads", measures it). A key marked hot (RL_SHAREWORD_HOT) instead takes its
 * tokens from the key's bucket in batches of B with one charge, and hands
 * them out one check at a time from a lease word on a line of the running
 * CPU's own. The key's bucket word stays the only bucket: a lease holds
 * tokens already charged to it, so every admission is paid for in the
 * bucket first and the bound is unchanged (admitted <= burst + rate x
 * elapsed, no growth). What leases cost is the other way: tokens charged but
 * not yet handed out. A check that finds neither its lease nor the bucket
 * able to pay takes a token from its key's other CPUs' leases before it
 * denies, so tokens wait in a lease only while no check of the key is being
 * denied; at any instant a key holds at most stripes x B of them.
 *
 * The harvest and the stats count a lease's tokens as admitted when they are
 * leased (one add of 1 + the tokens kept, on the slot's counter, where every
 * admitted check of the key is counted), so the sync thread reports each
 * once, never twice, and none is lost; what is reported runs ahead of what
 * checks were answered by at most stripes x B per key. A refund goes to the
 * bucket word as for any key.
 *
 * Layout: RL_LEASE_GROUPS groups of `stripes` lease lines (one line per
 * CPU, stripes a power of two <= RL_LEASE_STRIPES_MAX); a key's group is its
 * slot index's low bits. A lease word is owner (52 bits) | tokens (12): the
 * owner names the slot by its index's high bits, its generation and 14 bits
 * of its tag, so a retired key's lease is not its slot's next occupant's
 * (unless the generation wrapped and the tag bits match while the lease
 * still held tokens). A line a live hot key of the same group holds tokens
 * in is not taken from it: the other key charges its bucket as any key.
 *
 * Fixed memory, allocated at rl_open; none in an rl_open_shared instance
 * (which marks no key hot: hot/hot.h), so leases are off there.
 */
#ifndef RL_LEASE_H
#define RL_LEASE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "ratelimit.h"
#include "local/bucket.h"
#if defined(__GLIBC__) && defined(__x86_64__) &&                                          \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#include <sys/rseq.h>
#define RL_HAVE_RSEQ 1
#endif

#define RL_LEASE_GROUPS 64u
#define RL_LEASE_GROUP_BITS 6
#define RL_LEASE_STRIPES_MAX 8u
/* The largest batch: the bucket line is written once per B checks a CPU
 * serves; B x stripes is the most a key holds unhanded. */
#define RL_LEASE_BATCH_MAX 64u
#define RL_LEASE_TOK_BITS 12
#define RL_LEASE_TOK_MASK ((UINT64_C(1) << RL_LEASE_TOK_BITS) - 1)
#define RL_LEASE_OWNER(w) ((w) >> RL_LEASE_TOK_BITS)
#define RL_LEASE_TOK(w) ((w)&RL_LEASE_TOK_MASK)
#define RL_LEASE_MAKE(owner, tok) (((owner) << RL_LEASE_TOK_BITS) | (tok))

typedef struct rl_lease_line {
    _Atomic uint64_t w;
    char pad[56];
} __attribute__((aligned(64))) rl_lease_line_t;

typedef struct rl_leases {
    rl_lease_line_t *line; /* RL_LEASE_GROUPS x stripes; NULL: leases off */
    unsigned stripes;      /* lines per group: a power of two */
    unsigned shift;        /* log2(4 x stripes): the batch is burst >> shift */
} rl_leases_t;

/* Allocate the lines (stripes from the CPUs configured, at most
 * RL_LEASE_STRIPES_MAX). 0 or RL_ENOMEM. */
int rl__leases_init(rl_leases_t *l, const rl_allocator_t *a);
void rl__leases_destroy(rl_leases_t *l, const rl_allocator_t *a);

/* The CPU the calling thread runs on (0 when unknown). A hint only: a
 * thread that migrates after reading it uses another CPU's line, which the
 * CAS on it keeps correct. Out of line: sched_getcpu. */
unsigned rl__lease_cpu_slow(void);

/* The same, from the thread's rseq area when glibc registered one (2.35 and
 * later; the kernel keeps its cpu_id_start current): one load, where
 * sched_getcpu is a call. */
static inline unsigned rl__lease_cpu(void)
{
#if defined(RL_HAVE_RSEQ)
    if (__builtin_expect(__rseq_size != 0, 1)) {
        const struct rseq *r =
            (const struct rseq *)(void *)((char *)__builtin_thread_pointer() + __rseq_offset);
        /* relaxed: the running thread's own area, written by the kernel
         * only between its instructions; any value read is a CPU number. */
        return __atomic_load_n(&r->cpu_id_start, __ATOMIC_RELAXED);
    }
#endif
    return rl__lease_cpu_slow();
}

/* The slowest rate that leases: 100,000 per second (T = 10 us). A key
 * admits at most its rate, so a slower one cannot admit often enough for
 * two threads to contend on its line (its denials do not lease: they write
 * the slot's denied counter as any key's); and its counters, which run
 * ahead by the tokens leased, keep the figures of a rate a person reads
 * (hot keys' demand, rl_stats) exact. */
#define RL_LEASE_T_FP_MAX (UINT64_C(10000) << RL_FP_SHIFT)

/* The batch a key of these parameters (local/bucket.h) leases: burst /
 * (4 x stripes), at most RL_LEASE_BATCH_MAX; 0 for a rate under the above.
 * A key with a batch under 2 (a burst under 8 x stripes) is charged as any
 * key: its leases would hold a large part of its burst. */
static inline uint64_t rl__lease_batch(const rl_leases_t *l, const rl_gcra_t *g)
{
    if (g->t_fp > RL_LEASE_T_FP_MAX)
        return 0;
    uint64_t b = g->burst >> l->shift;
    return b < RL_LEASE_BATCH_MAX ? b : RL_LEASE_BATCH_MAX;
}

/* The owner word of the slot at index i whose ctrl word is c (local/table.h). */
static inline uint64_t rl__lease_owner(size_t i, uint64_t c)
{
    return ((uint64_t)(i >> RL_LEASE_GROUP_BITS) << 28) | (((c >> 2) & 0x3fffu) << 14) |
           ((c >> 32) & 0x3fffu);
}

/* Whether a lease owner still names the slot at index i with ctrl c. */
static inline int rl__lease_owner_is(uint64_t owner, size_t i, uint64_t c)
{
    return owner == rl__lease_owner(i, c);
}

/* The lease line of slot index i for the given CPU. */
static inline _Atomic uint64_t *rl__lease_line(const rl_leases_t *l, size_t i, unsigned cpu)
{
    size_t g = i & (RL_LEASE_GROUPS - 1);
    return &l->line[g * l->stripes + (cpu & (l->stripes - 1))].w;
}

#endif

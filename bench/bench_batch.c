/* SPDX-License-Identifier: MIT */
/*
 * rl_bench_batch: rl_check_batch on cold keys, beside what the memory allows.
 *
 *   rl_bench_batch [--runs N] [--ops N]
 *
 * 1M keys (max_keys 1.25M: a table of 1.875M slots, 120 MB), keys drawn uniformly, so nearly
 * every check misses the caches. In one process, each round runs every
 * contender once, one after the other (a slow spell of this shared machine
 * slows all alike); a figure is the median of its runs in ns per key, a
 * ratio the median of the per-round ratios.
 *
 *   dependent load   a pointer chase over a 96 MB array: one DRAM latency
 *   independent load random loads over the same 96 MB, no dependence
 *   independent CAS  the same with a CAS on each line (the bucket update)
 *   rl_check         one call per key
 *   batch of B       rl_check_batch with B requests per call (1, 8, 32)
 *
 * Every contender runs twice a round: on base (4 KB) pages and on huge
 * (2 MB) pages. The library's key table gets huge pages from its default
 * allocator (src/base/alloc.h); its base-page twin is an instance opened with
 * bench_small_pages_allocator (pages.h). The baselines' memory is made
 * either way by bench_pages_alloc. Each figure's ratio is to the
 * independent-CAS loop on the same page size, in the same round.
 *
 * The target: a batch of 32 at most 3x the independent-CAS loop.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ratelimit.h"
#include "instance.h" /* internals: where the key table is, for smaps */
#include "pages.h"

#define NKEYS (1u << 20)
#define KEY_STRIDE 16
#define MAX_RUNS 31

typedef struct line {
    _Atomic uint64_t v;
    uint64_t pad[7];
} __attribute__((aligned(64))) line_t;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static void *xalloc(size_t n)
{
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (p == NULL) {
        fprintf(stderr, "rl_bench_batch: out of memory\n");
        exit(2);
    }
    return p;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

static volatile uint64_t g_sink;

static rl_t *open_instance(int small_pages, int *id)
{
    rl_config_t cfg;
    rl_config_init(&cfg);
    /* Room for every key plus a quarter, as rl_bench: the timed runs never
     * insert, reclaim or overflow. */
    cfg.max_keys = NKEYS + NKEYS / 4;
    if (small_pages)
        cfg.allocator = bench_small_pages_allocator();
    rl_t *rl;
    int rc = rl_open(&rl, &cfg);
    if (rc != 0) {
        fprintf(stderr, "rl_open: %s\n", rl_strerror(rc));
        exit(2);
    }
    rl_limit_t lim;
    char err[256];
    if (rl_limit_parse(&lim, "name=b rate=100000/1ms burst=1000000 mode=local", err,
                       sizeof err) != 0) {
        fprintf(stderr, "rl_limit_parse: %s\n", err);
        exit(2);
    }
    *id = rl_limit_add(rl, &lim);
    if (*id < 0) {
        fprintf(stderr, "rl_limit_add: %s\n", rl_strerror(*id));
        exit(2);
    }
    return rl;
}

static void print_thp(const char *what, const void *p)
{
    long size_kb, thp = bench_thp_kb(p, &size_kb);
    printf("  %-34s AnonHugePages %7ld kB of a %7ld kB mapping (%.0f%%)\n", what, thp, size_kb,
           size_kb > 0 && thp >= 0 ? 100.0 * (double)thp / (double)size_kb : 0.0);
}

enum { DEP, LOAD, CAS, PCAS, CHECK, B1, B8, B32, N };
enum { P4K, P2M, NP };

static double run_one(int c, rl_t *rl, int id, line_t *mem, const rl_request_t *req,
                      const uint32_t *lidx, size_t ops)
{
    uint64_t acc = 0, t0 = mono_ns();
    switch (c) {
    case DEP: {
        uint64_t p = lidx[0];
        for (size_t i = 0; i < ops; i++)
            p = mem[p].pad[0];
        acc = p;
        break;
    }
    case LOAD:
        for (size_t i = 0; i < ops; i++)
            /* relaxed: a plain load; nothing is shared. */
            acc += atomic_load_explicit(&mem[lidx[i]].v, memory_order_relaxed);
        break;
    case CAS:
        for (size_t i = 0; i < ops; i++) {
            _Atomic uint64_t *w = &mem[lidx[i]].v;
            /* relaxed: single-threaded; the locked RMW is the cost. */
            uint64_t o = atomic_load_explicit(w, memory_order_relaxed);
            atomic_compare_exchange_weak_explicit(w, &o, o + i, memory_order_relaxed,
                                                  memory_order_relaxed);
        }
        break;
    case PCAS:
        for (size_t i = 0; i < ops; i += 32) {
            for (size_t j = i; j < i + 32; j++)
                __builtin_prefetch(&mem[lidx[j]], 1, 3);
            for (size_t j = i; j < i + 32; j++) {
                _Atomic uint64_t *w = &mem[lidx[j]].v;
                /* relaxed: as above. */
                uint64_t o = atomic_load_explicit(w, memory_order_relaxed);
                atomic_compare_exchange_weak_explicit(w, &o, o + j, memory_order_relaxed,
                                                      memory_order_relaxed);
            }
        }
        break;
    case CHECK:
        for (size_t i = 0; i < ops; i++)
            acc += (uint64_t)rl_check(rl, id, req[i].key, 13, 1, NULL);
        break;
    default: {
        size_t b = c == B1 ? 1 : c == B8 ? 8 : 32;
        for (size_t i = 0; i < ops; i += b)
            acc += (uint64_t)rl_check_batch(rl, req + i, b, sizeof *req, NULL, NULL);
    }
    }
    g_sink += acc;
    return (double)(mono_ns() - t0) / (double)ops;
}

int main(int argc, char **argv)
{
    int runs = 7;
    size_t ops = 1u << 20;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc)
            ops = (size_t)atol(argv[++i]);
        else {
            fprintf(stderr, "usage: rl_bench_batch [--runs N] [--ops N]\n");
            return 2;
        }
    }
    if (runs < 1 || runs > MAX_RUNS || ops < 32 || ops > (1u << 26)) {
        fprintf(stderr, "rl_bench_batch: --runs 1..%d, --ops 32..2^26\n", MAX_RUNS);
        return 2;
    }
    ops &= ~(size_t)31;

    rl_t *rl[NP];
    int id[NP];
    rl[P4K] = open_instance(1, &id[P4K]);
    rl[P2M] = open_instance(0, &id[P2M]);

    /* Keys, the op stream and the requests, all made before any timing. */
    char *keys = xalloc((size_t)NKEYS * KEY_STRIDE);
    for (uint32_t k = 0; k < NKEYS; k++)
        snprintf(keys + (size_t)k * KEY_STRIDE, KEY_STRIDE, "user:%08x", k);
    uint64_t seed = 1;
    /* Each op's key bytes in op order, as a gateway has the key of the
     * request at hand in its own buffer: only the table is cold. */
    char *opkeys = xalloc(ops * KEY_STRIDE);
    rl_request_t *req[NP];
    for (int pg = 0; pg < NP; pg++)
        req[pg] = xalloc(ops * sizeof *req[pg]);
    for (size_t i = 0; i < ops; i++) {
        uint32_t k = (uint32_t)(splitmix(&seed) % NKEYS);
        memcpy(opkeys + i * KEY_STRIDE, keys + (size_t)k * KEY_STRIDE, KEY_STRIDE);
        for (int pg = 0; pg < NP; pg++) {
            rl_request_init(&req[pg][i]);
            req[pg][i].limit = id[pg];
            req[pg][i].key = opkeys + i * KEY_STRIDE;
            req[pg][i].key_len = 13;
        }
    }
    /* Every key in the table before timing: the checks find, never insert. */
    for (int pg = 0; pg < NP; pg++)
        for (uint32_t k = 0; k < NKEYS; k++)
            rl_check(rl[pg], id[pg], keys + (size_t)k * KEY_STRIDE, 13, 1, NULL);

    /* The baselines' memory: as many lines as the table has slots, once
     * on each page size. */
    size_t nlines = (size_t)rl[P2M]->table.nslots;
    line_t *mem[NP];
    for (int pg = 0; pg < NP; pg++)
        mem[pg] = bench_pages_alloc(nlines * sizeof(line_t), pg == P2M);
    /* A single random cycle through every line, for the dependent chase. */
    uint32_t *perm = xalloc(nlines * sizeof *perm);
    for (size_t i = 0; i < nlines; i++)
        perm[i] = (uint32_t)i;
    for (size_t i = nlines - 1; i > 0; i--) {
        size_t j = splitmix(&seed) % (i + 1);
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int pg = 0; pg < NP; pg++)
        for (size_t i = 0; i < nlines; i++)
            mem[pg][perm[i]].pad[0] = perm[(i + 1) % nlines];
    free(perm);
    uint32_t *lidx = xalloc(ops * sizeof *lidx);
    for (size_t i = 0; i < ops; i++)
        lidx[i] = (uint32_t)(splitmix(&seed) % nlines);

    static const char *const name[N] = {"dependent load",    "independent load",
                                        "independent CAS",   "prefetch 32, CAS 32", "rl_check, one per key",
                                        "rl_check_batch, 1", "rl_check_batch, 8",
                                        "rl_check_batch, 32"};
    static double fig[NP][N][MAX_RUNS], ratio[NP][N][MAX_RUNS], huge_gain[N][MAX_RUNS];
    for (int r = 0; r < runs; r++) {
        /* 4K then 2M for each contender, so a slow spell hits both alike. */
        for (int c = 0; c < N; c++)
            for (int pg = 0; pg < NP; pg++)
                fig[pg][c][r] = run_one(c, rl[pg], id[pg], mem[pg], req[pg], lidx, ops);
        for (int c = 0; c < N; c++) {
            for (int pg = 0; pg < NP; pg++)
                ratio[pg][c][r] = fig[pg][c][r] / fig[pg][CAS][r];
            huge_gain[c][r] = fig[P4K][c][r] / fig[P2M][c][r];
        }
    }
    printf("rl_bench_batch: %u keys (table %zu MB), %zu ops per run, median of %d runs\n", NKEYS,
           nlines * 64 >> 20, ops, runs);
    printf("what the kernel backed each with (/proc/self/smaps):\n");
    print_thp("key table, default allocator", rl[P2M]->table.slots);
    print_thp("key table, base-page allocator", rl[P4K]->table.slots);
    print_thp("baselines, MADV_HUGEPAGE", mem[P2M]);
    print_thp("baselines, MADV_NOHUGEPAGE", mem[P4K]);
    printf("%-22s | %8s %10s | %8s %10s | %9s\n", "contender", "4K ns/key", "/ ind. CAS",
           "2M ns/key", "/ ind. CAS", "4K / 2M");
    double rmed[NP][N];
    for (int c = 0; c < N; c++) {
        double med[NP];
        for (int pg = 0; pg < NP; pg++) {
            med[pg] = median(fig[pg][c], runs);
            rmed[pg][c] = median(ratio[pg][c], runs);
        }
        printf("%-22s | %9.1f %9.2fx | %9.1f %9.2fx | %8.2fx\n", name[c], med[P4K], rmed[P4K][c],
               med[P2M], rmed[P2M][c], median(huge_gain[c], runs));
    }
    for (int pg = 0; pg < NP; pg++) {
        rl_stats_t st;
        rl_stats_init(&st);
        if (rl_stats(rl[pg], &st) == 0)
            printf("%s: keys reclaimed during the runs: %llu (0: every check found its key)\n",
                   pg == P2M ? "2M" : "4K", (unsigned long long)st.reclaimed);
    }
    printf("target: batch of 32 <= 3x the independent-CAS loop: 4K pages %.2fx, %s; 2M pages "
           "%.2fx, %s\n",
           rmed[P4K][B32], rmed[P4K][B32] <= 3.0 ? "PASS" : "MISS", rmed[P2M][B32],
           rmed[P2M][B32] <= 3.0 ? "PASS" : "MISS");
    free(lidx);
    for (int pg = 0; pg < NP; pg++) {
        bench_pages_free(mem[pg], nlines * sizeof(line_t));
        free(req[pg]);
        rl_close(rl[pg]);
    }
    free(opkeys);
    free(keys);
    return 0;
}

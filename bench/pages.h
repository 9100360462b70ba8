/* SPDX-License-Identifier: MIT */
/*
 * Huge pages or not, side by side in one run: memory for the benches'
 * baselines in either page size, a user allocator that gives the library's
 * key table base pages (the library's default gives it huge pages:
 * src/base/alloc.h, rl__calloc_big), and what the kernel really backed a range
 * with (/proc/self/smaps).
 */
#ifndef RL_BENCH_PAGES_H
#define RL_BENCH_PAGES_H

#include <stddef.h>
#include "ratelimit.h"

/* Zeroed, touched memory aligned to 2 MB, advised MADV_HUGEPAGE (huge != 0)
 * or MADV_NOHUGEPAGE. Exits 2 when out of memory. */
void *bench_pages_alloc(size_t size, int huge);
void bench_pages_free(void *p, size_t size);

/* Hooks that give every block of 2 MB or more base pages (MADV_NOHUGEPAGE,
 * also under THP "always"), the rest from posix_memalign. */
rl_allocator_t bench_small_pages_allocator(void);

/* kB of the mapping holding p that the kernel backs with huge pages
 * (AnonHugePages), and the mapping's size in kB; -1 when not found. */
long bench_thp_kb(const void *p, long *size_kb);

#endif

/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "pages.h"

#define HUGE ((size_t)2 << 20)

static size_t span_of(size_t size) { return (size + HUGE - 1) & ~(HUGE - 1); }

void *bench_pages_alloc(size_t size, int huge)
{
    size_t span = span_of(size), over = span + HUGE;
    char *raw = mmap(NULL, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        fprintf(stderr, "bench: out of memory (%zu bytes)\n", size);
        exit(2);
    }
    char *p = (char *)(((uintptr_t)raw + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    if (raw + over > p + span)
        munmap(p + span, (size_t)(raw + over - (p + span)));
    (void)madvise(p, span, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    /* Touch every page now, as a warm-up touches the library's table, so
     * no timed run pays for first-touch faults. */
    memset(p, 0, span);
    return p;
}

void bench_pages_free(void *p, size_t size)
{
    if (p != NULL)
        munmap(p, span_of(size));
}

static void *small_alloc(void *opaque, size_t size, size_t align)
{
    (void)opaque;
    if (size >= HUGE)
        return bench_pages_alloc(size, 0);
    void *p = NULL;
    return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size) == 0 ? p
                                                                                         : NULL;
}

static void small_free(void *opaque, void *p, size_t size, size_t align)
{
    (void)opaque;
    (void)align;
    if (size >= HUGE)
        bench_pages_free(p, size);
    else
        free(p);
}

rl_allocator_t bench_small_pages_allocator(void)
{
    return (rl_allocator_t){small_alloc, small_free, NULL};
}

long bench_thp_kb(const void *p, long *size_kb)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (f == NULL)
        return -1;
    char line[512];
    int in = 0;
    long thp = -1;
    *size_kb = -1;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long lo, hi;
        long kb;
        /* A mapping's header line: "lo-hi perms offset dev inode path". */
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            if (in)
                break;
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        } else if (in && sscanf(line, "Size: %ld kB", &kb) == 1) {
            *size_kb = kb;
        } else if (in && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) {
            thp = kb;
        }
    }
    fclose(f);
    return thp;
}

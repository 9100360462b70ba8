/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "base/alloc.h"

static void *default_alloc(void *opaque, size_t size, size_t align)
{
    (void)opaque;
    void *p = NULL;
    if (align < sizeof(void *))
        align = sizeof(void *);
    return posix_memalign(&p, align, size) == 0 ? p : NULL;
}

static void default_free(void *opaque, void *ptr, size_t size, size_t align)
{
    (void)opaque;
    (void)size;
    (void)align;
    free(ptr);
}

void rl__alloc_defaults(rl_allocator_t *a)
{
    if (a->alloc == NULL && a->free == NULL) {
        a->alloc = default_alloc;
        a->free = default_free;
        a->opaque = NULL;
    }
}

void *rl__calloc(const rl_allocator_t *a, size_t size, size_t align)
{
    void *p = a->alloc(a->opaque, size, align);
    if (p != NULL)
        memset(p, 0, size);
    return p;
}

void rl__free(const rl_allocator_t *a, void *p, size_t size, size_t align)
{
    if (p != NULL)
        a->free(a->opaque, p, size, align);
}

char *rl__strdup(const rl_allocator_t *a, const char *s, int *ok)
{
    if (s == NULL)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = a->alloc(a->opaque, n, 1);
    if (d == NULL) {
        *ok = 0;
        return NULL;
    }
    memcpy(d, s, n);
    return d;
}

void rl__strfree(const rl_allocator_t *a, char *s)
{
    if (s != NULL)
        a->free(a->opaque, s, strlen(s) + 1, 1);
}

int rl__alloc_is_default(const rl_allocator_t *a) { return a->alloc == default_alloc; }

/* The region a huge-page block really spans: whole huge pages. */
static size_t huge_span(size_t size)
{
    return (size + RL_HUGE_PAGE - 1) & ~(size_t)(RL_HUGE_PAGE - 1);
}

/* Make every page of a fresh mapping now (after the huge-page advice, so
 * they come as huge pages where they can): the table's memory is committed
 * at rl_open, as the fixed-memory promise says, so a check never takes a
 * page fault (a 2 MB zero-fill is tens of microseconds) and an overcommitted
 * host fails rl_open with RL_ENOMEM instead of a worker dying mid-traffic.
 * MADV_POPULATE_WRITE (Linux 5.14) reports ENOMEM; an older kernel gets the
 * pages by a write to each (already zero: writing zero keeps them so). */
static int populate(char *p, size_t len)
{
#ifdef MADV_POPULATE_WRITE
    if (madvise(p, len, MADV_POPULATE_WRITE) == 0)
        return 0;
    if (errno != EINVAL)
        return -1;
#endif
    for (size_t off = 0; off < len; off += RL_PAGE_SIZE)
        ((volatile char *)p)[off] = 0;
    return 0;
}

void *rl__calloc_big(const rl_allocator_t *a, size_t size, size_t align)
{
    if (!rl__alloc_is_default(a) || size < RL_HUGE_PAGE || size > SIZE_MAX - 2 * RL_HUGE_PAGE)
        return rl__calloc(a, size, align);
    /* Over-map by one huge page and trim both ends, so the block starts on a
     * huge-page boundary and ends on one: every part of it can be backed
     * by a huge page. */
    size_t span = huge_span(size);
    size_t over = span + RL_HUGE_PAGE;
    char *raw = mmap(NULL, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    char *p = (char *)(((uintptr_t)raw + RL_HUGE_PAGE - 1) & ~(uintptr_t)(RL_HUGE_PAGE - 1));
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    if (raw + over > p + span)
        munmap(p + span, (size_t)(raw + over - (p + span)));
#ifdef MADV_HUGEPAGE
    /* Advice only: under THP "never", or when the kernel has no free huge
     * page at the first touch, the block stays in base pages. */
    (void)madvise(p, span, MADV_HUGEPAGE);
#endif
    if (populate(p, span) != 0) {
        munmap(p, span);
        return NULL;
    }
    return p;
}

void rl__free_big(const rl_allocator_t *a, void *p, size_t size, size_t align)
{
    if (p == NULL)
        return;
    if (!rl__alloc_is_default(a) || size < RL_HUGE_PAGE || size > SIZE_MAX - 2 * RL_HUGE_PAGE)
        rl__free(a, p, size, align);
    else
        munmap(p, huge_span(size));
}

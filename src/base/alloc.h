/* SPDX-License-Identifier: MIT */
/* Per-instance allocation through the caller's hooks (never process-global ones). */
#ifndef RL_ALLOC_H
#define RL_ALLOC_H

#include <stddef.h>
#include "ratelimit.h"

/* Fill in the malloc-based hooks when the caller gave none. */
void rl__alloc_defaults(rl_allocator_t *a);

/* Zeroed memory aligned to `align` (power of two, <= 64), or NULL. */
void *rl__calloc(const rl_allocator_t *a, size_t size, size_t align);
void rl__free(const rl_allocator_t *a, void *p, size_t size, size_t align);

/* The page the library's own mappings are sized in: the fork guard's and a
 * shared host's private page, the shared mapping's rounding, the stride that
 * touches each page of a block. The smallest page of the targets (x86-64,
 * arm64's 4K granule); a larger page only makes each mapping a page. */
#define RL_PAGE_SIZE ((size_t)4096)

/* The huge-page size rl__calloc_big aligns to (x86-64's and arm64's 4K-granule PMD size). */
#define RL_HUGE_PAGE ((size_t)2 << 20)

/* Were a's hooks filled in by rl__alloc_defaults? */
int rl__alloc_is_default(const rl_allocator_t *a);

/*
 * Zeroed memory for a large, randomly accessed block (the key table). With
 * the default hooks and size >= RL_HUGE_PAGE: a private anonymous mapping of
 * its own, aligned to RL_HUGE_PAGE and advised MADV_HUGEPAGE, so a random
 * lookup's TLB miss walks to a 2 MB entry instead of a 4 KB one.
 * Otherwise exactly rl__calloc: a caller's hooks (rl_open_shared's arena
 * included) get the block from their own allocator. Free with rl__free_big, same arguments.
 */
void *rl__calloc_big(const rl_allocator_t *a, size_t size, size_t align);
void rl__free_big(const rl_allocator_t *a, void *p, size_t size, size_t align);

/* A NUL-terminated copy of s (NULL stays NULL; *ok is cleared on failure). */
char *rl__strdup(const rl_allocator_t *a, const char *s, int *ok);
void rl__strfree(const rl_allocator_t *a, char *s);

#endif

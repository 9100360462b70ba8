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

/* A NUL-terminated copy of s (NULL stays NULL; *ok is cleared on failure). */
char *rl__strdup(const rl_allocator_t *a, const char *s, int *ok);
void rl__strfree(const rl_allocator_t *a, char *s);

#endif

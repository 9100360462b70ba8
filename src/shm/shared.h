/* SPDX-License-Identifier: MIT */
/*
 * Shared instances (rl_open_shared): the whole instance in one MAP_SHARED
 * anonymous mapping that fork() hands to every child at the same address.
 */
#ifndef RL_SHARED_H
#define RL_SHARED_H

#include "ratelimit.h"

/* Whether `a` is a shared instance's arena allocator. */
int rl__alloc_is_shared(const rl_allocator_t *a);

/* rl_close of a shared instance: drop this process's view of the mapping
 * (other processes keep theirs). */
void rl__shared_close(rl_t *rl);

#endif

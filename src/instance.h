/* SPDX-License-Identifier: MIT */
/* The instance's constructor, for rl_open and rl_open_shared (shm/shared.c);
 * the context it builds is core.h. */
#ifndef RL_INSTANCE_H
#define RL_INSTANCE_H

#include "core.h"

/* rl_open, optionally with manual sync rounds (see rl__sync_step), or
 * RL__OPEN_SHARED: rl_open_shared's passes, where a redis_url builds the
 * host's sync state (shm/host.h) and starts no thread. */
#define RL__OPEN_SHARED 2
int rl__open(rl_t **out, const rl_config_t *cfg, int manual_sync);

#endif

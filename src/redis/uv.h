/* SPDX-License-Identifier: MIT */
/*
 * hiredis on the sync thread's libuv loop. hiredis ships an adapter
 * (hiredis/adapters/libuv.h); this one differs where it matters here:
 * - A poll error (a refused or reset connection: libuv reports status < 0
 *   and no events) is handed to hiredis as the events it was waiting for,
 *   so hiredis reads the socket's error and fails the connect or the
 *   connection at once. hiredis 0.14's adapter drops such a callback, and a
 *   refused connect was noticed only at the 1 s connect deadline: rl_open
 *   with Redis down took 1.1 s, and every reconnect attempt a second.
 * - Its memory comes from the instance's allocator, and a failed attach
 *   frees it (0.14's leaks it).
 */
#ifndef RL_REDISUV_H
#define RL_REDISUV_H

#include <hiredis/async.h>
#include <uv.h>
#include "ratelimit.h"

/* Attach ac to loop; REDIS_OK or REDIS_ERR (already attached, no memory,
 * or libuv refused the socket). `alloc` must outlive the context. */
int rl__redisuv_attach(redisAsyncContext *ac, uv_loop_t *loop, const rl_allocator_t *alloc);

#endif

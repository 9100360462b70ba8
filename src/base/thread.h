/* SPDX-License-Identifier: MIT */
/* The library's own threads (sync, exact caller, quota replay, the shared
 * host's lease waiter) are started here, and only here. */
#ifndef RL_THREAD_H
#define RL_THREAD_H

#include <pthread.h>

/* pthread_create with every signal blocked in the new thread: the host's
 * handlers run on the host's threads only, and a SIGPIPE from a write to a
 * closed socket stays pending on ours instead of killing the process. The
 * mask is inherited at creation, so it is set around the call and the
 * caller's own mask is restored before returning. 0 or an errno value. */
int rl__thread_start(pthread_t *thread, void *(*fn)(void *), void *arg);

#endif

/* SPDX-License-Identifier: MIT */
#include <signal.h>
#include "base/thread.h"

int rl__thread_start(pthread_t *thread, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(thread, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

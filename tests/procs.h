/* SPDX-License-Identifier: MIT */
/*
 * Node processes for the suites that run a fleet as separate processes in
 * lockstep (test_evict, test_reserve_fleet, test_inflight_global): each
 * child answers its parent's fixed-size commands on a pipe and replies on
 * another, so the parent decides every step and a SIGKILL is a real one.
 */
#ifndef RL_TEST_PROCS_H
#define RL_TEST_PROCS_H

#include <stddef.h>
#include <sys/types.h>

#define RL_TEST_PROCS_MAX 8

typedef struct rl_test_procs {
    int n;
    pid_t pid[RL_TEST_PROCS_MAX]; /* 0: not running (killed, or never) */
    int to[RL_TEST_PROCS_MAX];    /* the parent's end of each command pipe */
    int from[RL_TEST_PROCS_MAX];  /* and of each reply pipe */
} rl_test_procs_t;

/* A child's body: reads commands from `in`, replies on `out`, and first
 * writes its idx (an int) on `out` once it is ready. Never returns. */
typedef void (*rl_test_proc_main_fn)(int idx, int in, int out, void *arg);

/* Fork n children (at most RL_TEST_PROCS_MAX), each running main with its
 * index, and wait until each has said it is ready. */
void rl_test_procs_start(rl_test_procs_t *p, int n, rl_test_proc_main_fn main, void *arg);

/* SIGKILL child i and reap it; nothing if it is not running. */
void rl_test_procs_kill(rl_test_procs_t *p, int i);

/* Wait for child i to end by itself (told to close) and reap it: fails
 * the test unless it exited with status 0. */
void rl_test_procs_reap(rl_test_procs_t *p, int i);

/* rl_test_procs_kill of every child. */
void rl_test_procs_stop(rl_test_procs_t *p);

/* One whole message on a pipe; a short write, or a read that meets the
 * end of the pipe, exits the process (3 and 4): in a child, its parent is
 * gone; in the parent, a child died, which the test then sees. */
void rl_test_put(int fd, const void *buf, size_t n);
void rl_test_get(int fd, void *buf, size_t n);

#endif

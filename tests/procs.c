/* SPDX-License-Identifier: MIT */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "procs.h"
#include "testutil.h"

void rl_test_put(int fd, const void *buf, size_t n)
{
    if (write(fd, buf, n) != (ssize_t)n)
        _exit(3);
}

void rl_test_get(int fd, void *buf, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r <= 0)
            _exit(4);
        got += (size_t)r;
    }
}

void rl_test_procs_start(rl_test_procs_t *p, int n, rl_test_proc_main_fn main, void *arg)
{
    ck_assert_int_le(n, RL_TEST_PROCS_MAX);
    p->n = n;
    for (int i = 0; i < n; i++) {
        int down[2], up[2];
        ck_assert_int_eq(pipe(down), 0);
        ck_assert_int_eq(pipe(up), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            close(down[1]);
            close(up[0]);
            main(i, down[0], up[1], arg);
            _exit(9); /* a main must not return */
        }
        close(down[0]);
        close(up[1]);
        p->pid[i] = pid;
        p->to[i] = down[1];
        p->from[i] = up[0];
    }
    for (int i = 0; i < n; i++) {
        int ready = -1;
        rl_test_get(p->from[i], &ready, sizeof ready);
        ck_assert_int_eq(ready, i);
    }
}

static void forget(rl_test_procs_t *p, int i)
{
    p->pid[i] = 0;
    close(p->to[i]);
    close(p->from[i]);
}

void rl_test_procs_kill(rl_test_procs_t *p, int i)
{
    if (p->pid[i] <= 0)
        return;
    kill(p->pid[i], SIGKILL);
    waitpid(p->pid[i], NULL, 0);
    forget(p, i);
}

void rl_test_procs_reap(rl_test_procs_t *p, int i)
{
    int st = 0;
    ck_assert_int_eq(waitpid(p->pid[i], &st, 0), p->pid[i]);
    forget(p, i);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "node %d ended with status %d", i, st);
}

void rl_test_procs_stop(rl_test_procs_t *p)
{
    for (int i = 0; i < p->n; i++)
        rl_test_procs_kill(p, i);
}

/* SPDX-License-Identifier: MIT */
/*
 * A throwaway redis-server for the benchmarks: tests/redis_harness.c starts
 * and stops it (one launcher for tests, benchmarks and the simulator); this
 * adds what a bench needs and a test fixture does not: stopping the server
 * at exit and on fatal signals (Ctrl-C on a three-minute run).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "redis_server.h"

static volatile sig_atomic_t g_server_pid;

static void on_fatal_signal(int sig)
{
    pid_t pid = (pid_t)g_server_pid;
    if (pid > 0)
        kill(pid, SIGKILL);
    /* SA_RESETHAND restored the default action: die of the same signal. */
    raise(sig);
}

static void on_exit_stop(void)
{
    pid_t pid = (pid_t)g_server_pid;
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

static void install_cleanup(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    atexit(on_exit_stop);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
}

int bench_redis_start(bench_redis_t *r, char *why, size_t len)
{
    memset(r, 0, sizeof *r);
    if (!rl_test_on_path("redis-server")) {
        snprintf(why, len, "redis-server not found on PATH");
        return 1;
    }
    install_cleanup();
    if (rl_test_redis_start(&r->srv, why, len) != 0)
        return -1;
    r->pid = r->srv.pid;
    r->port = r->srv.port;
    g_server_pid = r->pid;
    return 0;
}

void bench_redis_stop(bench_redis_t *r)
{
    if (r->pid <= 0)
        return;
    rl_test_redis_stop(&r->srv);
    r->pid = 0;
    g_server_pid = 0;
}

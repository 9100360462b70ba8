/* SPDX-License-Identifier: MIT */
/* Topologies for the routing suites (redis_harness.h): a 3-master Redis
 * Cluster with a replica each, and a primary with a replica under 3
 * Sentinels. Every wait is for an event, with a generous deadline. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <hiredis/hiredis.h>
#include "redis_harness.h"

#define TOPOLOGY_DEADLINE_MS 60000

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int rl_test_run_prog(const char *const *argv, unsigned timeout_ms, char *out, size_t outlen)
{
    char path[] = "/tmp/rl-prog-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(126);
        int null_fd = open("/dev/null", O_RDONLY);
        if (null_fd >= 0)
            dup2(null_fd, STDIN_FILENO);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status = -1, rc = -1;
    if (pid > 0) {
        uint64_t deadline = mono_ms() + timeout_ms;
        for (;;) {
            pid_t w = waitpid(pid, &status, WNOHANG);
            if (w == pid) {
                rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
                break;
            }
            if (w < 0 || mono_ms() > deadline) {
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                break;
            }
            pause_ms(10);
        }
    }
    if (outlen > 0) {
        ssize_t got = pread(fd, out, outlen - 1, 0);
        out[got > 0 ? got : 0] = '\0';
    }
    close(fd);
    unlink(path);
    return rc;
}

static redisReply *ask(int port, const char *cmd)
{
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    redisReply *r = NULL;
    if (c != NULL && c->err == 0) {
        redisSetTimeout(c, tv);
        r = redisCommand(c, cmd);
    }
    if (c != NULL)
        redisFree(c);
    return r;
}

/* ------------------------------------------------------------- Cluster */

/* Every node says ok and sees 3 masters with a replica each. */
static int cluster_settled(const rl_test_cluster_t *c)
{
    for (int i = 0; i < 6; i++) {
        redisReply *r = ask(c->node[i].port, "CLUSTER INFO");
        int ok = r != NULL && r->type == REDIS_REPLY_STRING &&
                 strstr(r->str, "cluster_state:ok") != NULL;
        freeReplyObject(r);
        if (!ok)
            return 0;
        r = ask(c->node[i].port, "CLUSTER SLOTS");
        ok = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 3;
        for (size_t j = 0; ok && j < r->elements; j++)
            ok = r->element[j]->elements == 4; /* start, end, master, replica */
        freeReplyObject(r);
        if (!ok)
            return 0;
    }
    return 1;
}

int rl_test_cluster_start(rl_test_cluster_t *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    for (int i = 0; i < 6; i++) {
        int rc = rl_test_redis_start_as(&c->node[i], RL_TEST_REDIS_CLUSTER, 0, err, errlen);
        if (rc != 0) {
            rl_test_cluster_stop(c);
            return rc;
        }
    }
    char addr[6][32];
    const char *argv[16] = {rl_test_cli_prog(), "--cluster", "create"};
    int n = 3;
    for (int i = 0; i < 6; i++) {
        snprintf(addr[i], sizeof addr[i], "127.0.0.1:%d", c->node[i].port);
        argv[n++] = addr[i];
    }
    argv[n++] = "--cluster-replicas";
    argv[n++] = "1";
    argv[n++] = "--cluster-yes";
    argv[n] = NULL;
    char out[4096];
    int rc = rl_test_run_prog(argv, TOPOLOGY_DEADLINE_MS, out, sizeof out);
    if (rc != 0) {
        snprintf(err, errlen, "%s --cluster create: status %d: %.600s", rl_test_cli_prog(), rc,
                 out);
        rl_test_cluster_stop(c);
        return -1;
    }
    uint64_t deadline = mono_ms() + TOPOLOGY_DEADLINE_MS;
    while (!cluster_settled(c)) {
        if (mono_ms() > deadline) {
            snprintf(err, errlen, "the cluster did not settle in %d ms", TOPOLOGY_DEADLINE_MS);
            rl_test_cluster_stop(c);
            return -1;
        }
        pause_ms(50);
    }
    return 0;
}

void rl_test_cluster_stop(rl_test_cluster_t *c)
{
    for (int i = 0; i < 6; i++)
        rl_test_redis_stop(&c->node[i]);
}

/* ------------------------------------------------------------ Sentinel */

static int reply_field(const redisReply *r, const char *name, long long *out)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        return 0;
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        if (r->element[i]->type == REDIS_REPLY_STRING && strcmp(r->element[i]->str, name) == 0 &&
            r->element[i + 1]->type == REDIS_REPLY_STRING) {
            *out = atoll(r->element[i + 1]->str);
            return 1;
        }
    return 0;
}

static int sentinels_settled(const rl_test_sentinels_t *s)
{
    redisReply *r = ask(s->replica.port, "INFO replication");
    int ok = r != NULL && r->type == REDIS_REPLY_STRING &&
             strstr(r->str, "master_link_status:up") != NULL;
    freeReplyObject(r);
    for (int i = 0; ok && i < 3; i++) {
        r = ask(s->sentinel[i].port, "SENTINEL master " RL_TEST_SENTINEL_MASTER);
        long long replicas = 0, others = 0;
        ok = reply_field(r, "num-slaves", &replicas) && replicas == 1 &&
             reply_field(r, "num-other-sentinels", &others) && others == 2;
        freeReplyObject(r);
    }
    return ok;
}

int rl_test_sentinels_start(rl_test_sentinels_t *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    int rc = rl_test_redis_start_as(&s->primary, RL_TEST_REDIS_PLAIN, 0, err, errlen);
    if (rc == 0)
        rc = rl_test_redis_start_as(&s->replica, RL_TEST_REDIS_REPLICA, s->primary.port, err,
                                    errlen);
    for (int i = 0; rc == 0 && i < 3; i++)
        rc = rl_test_redis_start_as(&s->sentinel[i], RL_TEST_REDIS_SENTINEL, s->primary.port,
                                    err, errlen);
    if (rc != 0) {
        rl_test_sentinels_stop(s);
        return rc;
    }
    uint64_t deadline = mono_ms() + TOPOLOGY_DEADLINE_MS;
    while (!sentinels_settled(s)) {
        if (mono_ms() > deadline) {
            snprintf(err, errlen, "the Sentinels did not settle in %d ms", TOPOLOGY_DEADLINE_MS);
            rl_test_sentinels_stop(s);
            return -1;
        }
        pause_ms(50);
    }
    return 0;
}

void rl_test_sentinels_stop(rl_test_sentinels_t *s)
{
    for (int i = 0; i < 3; i++)
        rl_test_redis_stop(&s->sentinel[i]);
    rl_test_redis_stop(&s->replica);
    rl_test_redis_stop(&s->primary);
}

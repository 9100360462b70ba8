/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <hiredis/hiredis.h>
#include "redis_harness.h"

/* Deadlines, not assertions: generous for a loaded 2-core machine. */
#define START_DEADLINE_MS 15000
#define STOP_DEADLINE_MS 5000
#define START_ATTEMPTS 3

int rl_test_on_path(const char *prog)
{
    const char *path = getenv("PATH");
    if (path == NULL || *path == '\0')
        path = "/usr/bin:/bin";
    while (*path != '\0') {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        char full[4096];
        /* An empty PATH entry means the current directory. */
        int w = len == 0 ? snprintf(full, sizeof full, "./%s", prog)
                         : snprintf(full, sizeof full, "%.*s/%s", (int)len, path, prog);
        if (w > 0 && (size_t)w < sizeof full && access(full, X_OK) == 0)
            return 1;
        if (end == NULL)
            break;
        path = end + 1;
    }
    return 0;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* A port nobody listens on right now: bind port 0 and ask which one the
 * kernel picked. Another process may take it before redis does; the caller
 * retries when the server exits early. */
static int free_loopback_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* In the child: the server must not outlive the process that started it. */
static void exec_server(int port, int log_fd, pid_t parent, const char *const *extra)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(126);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0)
        dup2(null_fd, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    /* DEBUG is enabled for the fault suite (DEBUG SLEEP); the server only
     * listens on loopback and lives as long as the test. */
    const char *argv[64] = {"redis-server", "--port", port_s, "--bind", "127.0.0.1",
                            "--save", "", "--appendonly", "no", "--daemonize", "no",
                            "--enable-debug-command", "yes"};
    int argc = 13;
    for (int i = 0; extra != NULL && extra[i] != NULL && argc < 63; i++)
        argv[argc++] = extra[i];
    argv[argc] = NULL;
    execvp("redis-server", (char *const *)argv);
    _exit(127);
}

static int answers_ping(int port)
{
    struct timeval tv = {0, 200000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    int ok = 0;
    if (c != NULL && c->err == 0) {
        redisReply *r = redisCommand(c, "PING");
        ok = r != NULL && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
        if (r != NULL)
            freeReplyObject(r);
    }
    if (c != NULL)
        redisFree(c);
    return ok;
}

/* The end of the server's log, for an error message. */
static void log_tail(const char *log, char *buf, size_t len)
{
    buf[0] = '\0';
    int fd = open(log, O_RDONLY);
    if (fd < 0)
        return;
    off_t size = lseek(fd, 0, SEEK_END);
    off_t from = size > (off_t)len - 1 ? size - ((off_t)len - 1) : 0;
    ssize_t got = pread(fd, buf, len - 1, from);
    buf[got > 0 ? got : 0] = '\0';
    close(fd);
}

/* 1: up; 0: exited early (port taken?), reaped; -1: never answered. */
static int wait_until_up(rl_test_redis_t *srv)
{
    uint64_t deadline = now_ms() + START_DEADLINE_MS;
    while (now_ms() < deadline) {
        int status;
        if (waitpid(srv->pid, &status, WNOHANG) == srv->pid) {
            srv->pid = 0;
            return 0;
        }
        if (answers_ping(srv->port))
            return 1;
        sleep_ms(10);
    }
    return -1;
}

static int spawn_on_port(rl_test_redis_t *srv, char *err, size_t errlen);

static int spawn_once(rl_test_redis_t *srv, char *err, size_t errlen)
{
    srv->port = free_loopback_port();
    if (srv->port <= 0) {
        snprintf(err, errlen, "no free loopback port: %s", strerror(errno));
        return -1;
    }
    return spawn_on_port(srv, err, errlen);
}

static int spawn_on_port(rl_test_redis_t *srv, char *err, size_t errlen)
{
    int log_fd = open(srv->log, O_WRONLY | O_TRUNC);
    if (log_fd < 0) {
        snprintf(err, errlen, "open %s: %s", srv->log, strerror(errno));
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        exec_server(srv->port, log_fd, parent, srv->extra);
    close(log_fd);
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        return -1;
    }
    srv->pid = pid;
    return wait_until_up(srv);
}

int rl_test_redis_start(rl_test_redis_t *srv, char *err, size_t errlen)
{
    return rl_test_redis_start_args(srv, NULL, err, errlen);
}

int rl_test_redis_start_args(rl_test_redis_t *srv, const char *const *extra, char *err,
                             size_t errlen)
{
    memset(srv, 0, sizeof *srv);
    srv->extra = extra;
    if (errlen > 0)
        err[0] = '\0';
    if (!rl_test_on_path("redis-server")) {
        const char *skip = getenv("RL_SKIP_REDIS");
        if (skip != NULL && strcmp(skip, "1") == 0) {
            snprintf(err, errlen, "redis-server not on PATH: skipped (RL_SKIP_REDIS=1)");
            return 1;
        }
        snprintf(err, errlen, "redis-server not on PATH: install redis-server, "
                              "or set RL_SKIP_REDIS=1 to skip the Redis suites");
        return -1;
    }
    snprintf(srv->log, sizeof srv->log, "/tmp/rl-redis-XXXXXX");
    int fd = mkstemp(srv->log);
    if (fd < 0) {
        snprintf(err, errlen, "mkstemp: %s", strerror(errno));
        srv->log[0] = '\0';
        return -1;
    }
    close(fd);
    for (int attempt = 0; attempt < START_ATTEMPTS; attempt++) {
        int rc = spawn_once(srv, err, errlen);
        if (rc == 1) {
            /* The log only explains a failed start; a runner killed later
             * should leave nothing behind in /tmp. */
            unlink(srv->log);
            srv->log[0] = '\0';
            return 0;
        }
        if (rc < 0)
            break;
    }
    char tail[512];
    log_tail(srv->log, tail, sizeof tail);
    if (srv->pid != 0 || err[0] == '\0')
        snprintf(err, errlen, "redis-server on port %d did not answer PING; log: %s",
                 srv->port, tail);
    rl_test_redis_stop(srv);
    return -1;
}

/* Reap within the deadline; 1 if the server is gone. */
static int reap(pid_t pid, uint64_t deadline)
{
    do {
        int status;
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid || (w < 0 && errno == ECHILD))
            return 1;
        sleep_ms(10);
    } while (now_ms() < deadline);
    return 0;
}

void rl_test_redis_stop(rl_test_redis_t *srv)
{
    if (srv->pid > 0) {
        kill(srv->pid, SIGTERM);
        if (!reap(srv->pid, now_ms() + STOP_DEADLINE_MS)) {
            kill(srv->pid, SIGKILL);
            waitpid(srv->pid, NULL, 0);
        }
        srv->pid = 0;
    }
    if (srv->log[0] != '\0') {
        unlink(srv->log);
        srv->log[0] = '\0';
    }
}

int rl_test_redis_crash_restart(rl_test_redis_t *srv, char *err, size_t errlen)
{
    if (srv->pid > 0) {
        kill(srv->pid, SIGKILL);
        /* Reaped here if it is ours; a forked test's parent reaps it later. */
        reap(srv->pid, now_ms() + STOP_DEADLINE_MS);
        srv->pid = 0;
    }
    snprintf(srv->log, sizeof srv->log, "/tmp/rl-redis-XXXXXX");
    int fd = mkstemp(srv->log);
    if (fd < 0) {
        snprintf(err, errlen, "mkstemp: %s", strerror(errno));
        srv->log[0] = '\0';
        return -1;
    }
    close(fd);
    /* The dead server's port may need a moment before it binds again. */
    for (int attempt = 0; attempt < 50; attempt++) {
        if (spawn_on_port(srv, err, errlen) == 1) {
            unlink(srv->log);
            srv->log[0] = '\0';
            return 0;
        }
        if (srv->pid > 0) {
            kill(srv->pid, SIGKILL);
            reap(srv->pid, now_ms() + STOP_DEADLINE_MS);
            srv->pid = 0;
        }
        sleep_ms(20);
    }
    snprintf(err, errlen, "redis-server did not come back on port %d", srv->port);
    return -1;
}

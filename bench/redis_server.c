/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <hiredis/hiredis.h>
#include "redis_server.h"

#define START_DEADLINE_MS 10000
#define STOP_DEADLINE_MS 3000
#define START_ATTEMPTS 3

/* The running server, for the signal handler: it can only kill by PID. */
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

static int on_path(const char *prog)
{
    const char *path = getenv("PATH");
    if (path == NULL || *path == '\0')
        path = "/usr/local/bin:/usr/bin:/bin";
    for (;;) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        char full[4096];
        int w = len == 0 ? snprintf(full, sizeof full, "./%s", prog)
                         : snprintf(full, sizeof full, "%.*s/%s", (int)len, path, prog);
        if (w > 0 && (size_t)w < sizeof full && access(full, X_OK) == 0)
            return 1;
        if (end == NULL)
            return 0;
        path = end + 1;
    }
}

/* Bind 127.0.0.1:0 and ask which port the kernel chose. Another process may
 * take it before the server binds; the caller retries when the server exits
 * early. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &alen) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
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

static void exec_server(int port, pid_t parent)
{
    /* Die with the bench even if it is SIGKILLed (no handler runs then). */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(126);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int null_fd = open("/dev/null", O_RDWR);
    if (null_fd >= 0) {
        dup2(null_fd, STDIN_FILENO);
        dup2(null_fd, STDOUT_FILENO);
        dup2(null_fd, STDERR_FILENO);
    }
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    execlp("redis-server", "redis-server", "--port", port_s, "--bind", "127.0.0.1", "--save", "",
           "--appendonly", "no", (char *)NULL);
    _exit(127);
}

/* 1 up, 0 exited early (port taken?), -1 never answered or fork failed. */
static int spawn_once(bench_redis_t *r)
{
    r->port = free_port();
    if (r->port <= 0)
        return -1;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0)
        exec_server(r->port, parent);
    r->pid = pid;
    g_server_pid = pid;
    uint64_t deadline = now_ms() + START_DEADLINE_MS;
    while (now_ms() < deadline) {
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            r->pid = 0;
            g_server_pid = 0;
            return 0;
        }
        if (answers_ping(r->port))
            return 1;
        sleep_ms(10);
    }
    return -1;
}

int bench_redis_start(bench_redis_t *r, char *why, size_t len)
{
    memset(r, 0, sizeof *r);
    if (!on_path("redis-server")) {
        snprintf(why, len, "redis-server not found on PATH");
        return 1;
    }
    install_cleanup();
    for (int attempt = 0; attempt < START_ATTEMPTS; attempt++) {
        int rc = spawn_once(r);
        if (rc == 1)
            return 0;
        if (rc < 0) {
            bench_redis_stop(r);
            snprintf(why, len, "redis-server did not answer PING within %d ms",
                     START_DEADLINE_MS);
            return -1;
        }
    }
    snprintf(why, len, "redis-server exited at start %d times (port taken?)", START_ATTEMPTS);
    return -1;
}

void bench_redis_stop(bench_redis_t *r)
{
    if (r->pid <= 0)
        return;
    kill(r->pid, SIGTERM);
    uint64_t deadline = now_ms() + STOP_DEADLINE_MS;
    int reaped = 0;
    while (!reaped && now_ms() < deadline) {
        if (waitpid(r->pid, NULL, WNOHANG) == r->pid)
            reaped = 1;
        else
            sleep_ms(10);
    }
    if (!reaped) {
        kill(r->pid, SIGKILL);
        waitpid(r->pid, NULL, 0);
    }
    r->pid = 0;
    g_server_pid = 0;
}

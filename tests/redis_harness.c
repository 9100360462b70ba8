/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <dirent.h>
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

int rl_test_valkey(void)
{
    const char *e = getenv("RL_TEST_SERVER");
    return e != NULL && strcmp(e, "valkey") == 0;
}

const char *rl_test_server_prog(void) { return rl_test_valkey() ? "valkey-server" : "redis-server"; }

const char *rl_test_cli_prog(void) { return rl_test_valkey() ? "valkey-cli" : "redis-cli"; }

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

int rl_test_free_port(void) { return free_loopback_port(); }

/* Whether a loopback port can be bound right now. */
static int port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* A Cluster node also listens on its bus port, port + 10000, so Redis
 * refuses a port above 55535 (the kernel's ephemeral range, where
 * free_loopback_port's picks fall, reaches 60999): a port at most that
 * whose bus port is free too. Candidates come from the kernel's pick
 * folded into range, so concurrent runs rarely try the same ones. */
#define CLUSTER_PORT_MAX 55535
#define CLUSTER_PORT_MIN 20000
static int free_cluster_port(void)
{
    for (int i = 0; i < 200; i++) {
        int p = free_loopback_port();
        if (p <= 0)
            return -1;
        if (p > CLUSTER_PORT_MAX)
            p = CLUSTER_PORT_MIN + (p * 7919 + i * 104729) % (CLUSTER_PORT_MAX - CLUSTER_PORT_MIN);
        if (port_free(p) && port_free(p + 10000))
            return p;
    }
    return -1;
}

/* A Sentinel's configuration (it rewrites the file as it learns). */
static int write_sentinel_conf(const rl_test_redis_t *srv, char *path, size_t cap)
{
    snprintf(path, cap, "%s/sentinel.conf", srv->dir);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    const char *m = RL_TEST_SENTINEL_MASTER;
    fprintf(f,
            "port %d\nbind 127.0.0.1\ndaemonize no\ndir %s\n"
            "sentinel monitor %s 127.0.0.1 %d 2\n"
            "sentinel down-after-milliseconds %s %d\n"
            "sentinel failover-timeout %s %d\n"
            "sentinel parallel-syncs %s 1\n",
            srv->port, srv->dir, m, srv->peer_port, m, RL_TEST_SENTINEL_DOWN_MS, m,
            RL_TEST_SENTINEL_FAILOVER_MS, m);
    return fclose(f) == 0 ? 0 : -1;
}

/* In the child: the server must not outlive the process that started it. */
static void exec_server(const rl_test_redis_t *srv, int log_fd, pid_t parent)
{
    int port = srv->port;
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
    if (srv->mode == RL_TEST_REDIS_SENTINEL) {
        char conf[128];
        if (write_sentinel_conf(srv, conf, sizeof conf) != 0)
            _exit(125);
        execlp(rl_test_server_prog(), rl_test_server_prog(), conf, "--sentinel", (char *)NULL);
        _exit(127);
    }
    /* DEBUG is enabled for the fault suite (DEBUG SLEEP); the server only
     * listens on loopback and lives as long as the test. */
    const char *argv[40] = {rl_test_server_prog(), "--port", port_s, "--bind", "127.0.0.1",
                            "--save", "", "--appendonly", "no", "--daemonize", "no",
                            "--enable-debug-command", "yes"};
    int n = 13;
    char peer_s[16];
    snprintf(peer_s, sizeof peer_s, "%d", srv->peer_port);
    if (srv->mode == RL_TEST_REDIS_CLUSTER) {
        /* A node is failed after 1 s without an answer; its replica may be
         * promoted however long it was cut off (validity factor 0). */
        const char *more[] = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                              "--dir", srv->dir, "--cluster-node-timeout", "1000",
                              "--cluster-replica-validity-factor", "0"};
        for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
            argv[n++] = more[i];
    } else if (srv->mode == RL_TEST_REDIS_UNIX) {
        static char sock[96];
        snprintf(sock, sizeof sock, "%s/redis.sock", srv->dir);
        argv[n++] = "--unixsocket";
        argv[n++] = sock;
        argv[n++] = "--unixsocketperm";
        argv[n++] = "700";
    } else if (srv->mode == RL_TEST_REDIS_REPLICA) {
        argv[n++] = "--replicaof";
        argv[n++] = "127.0.0.1";
        argv[n++] = peer_s;
    }
    if (srv->mode != RL_TEST_REDIS_CLUSTER) {
        argv[n++] = "--dir";
        argv[n++] = srv->dir;
    }
    for (int i = 0; srv->extra != NULL && srv->extra[i] != NULL && n < 39; i++)
        argv[n++] = srv->extra[i];
    argv[n] = NULL;
    execvp(rl_test_server_prog(), (char *const *)argv);
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
    srv->port = srv->mode == RL_TEST_REDIS_CLUSTER ? free_cluster_port() : free_loopback_port();
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
        exec_server(srv, log_fd, parent);
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
    return rl_test_redis_start_as(srv, RL_TEST_REDIS_PLAIN, 0, err, errlen);
}

/* Every server gets its own directory: a replica's full sync writes an
 * RDB there even without persistence, never into the working one. A server
 * stopped and started again (rl_test_redis_restart) gets a new one: the
 * stop removed the old. */
static int make_dir(rl_test_redis_t *srv, char *err, size_t errlen)
{
    if (srv->dir[0] != '\0')
        return 0;
    snprintf(srv->dir, sizeof srv->dir, "/tmp/rl-redis-dir-XXXXXX");
    if (mkdtemp(srv->dir) == NULL) {
        snprintf(err, errlen, "mkdtemp: %s", strerror(errno));
        srv->dir[0] = '\0';
        return -1;
    }
    return 0;
}

static int start_with(rl_test_redis_t *srv, int mode, int peer_port,
                      const char *const *extra, char *err, size_t errlen);

int rl_test_redis_start_args(rl_test_redis_t *srv, const char *const *extra, char *err,
                             size_t errlen)
{
    return start_with(srv, RL_TEST_REDIS_PLAIN, 0, extra, err, errlen);
}

int rl_test_redis_start_as(rl_test_redis_t *srv, int mode, int peer_port, char *err,
                           size_t errlen)
{
    return start_with(srv, mode, peer_port, NULL, err, errlen);
}

static int start_with(rl_test_redis_t *srv, int mode, int peer_port,
                      const char *const *extra, char *err, size_t errlen)
{
    memset(srv, 0, sizeof *srv);
    srv->mode = mode;
    srv->peer_port = peer_port;
    srv->extra = extra;
    if (errlen > 0)
        err[0] = '\0';
    const char *prog = rl_test_server_prog();
    if (!rl_test_on_path(prog)) {
        const char *skip = getenv("RL_SKIP_REDIS");
        if (skip != NULL && strcmp(skip, "1") == 0) {
            snprintf(err, errlen, "%s not on PATH: skipped (RL_SKIP_REDIS=1)", prog);
            return 1;
        }
        snprintf(err, errlen, "%s not on PATH: install it, "
                              "or set RL_SKIP_REDIS=1 to skip the Redis suites", prog);
        return -1;
    }
    if (make_dir(srv, err, errlen) != 0)
        return -1;
    snprintf(srv->log, sizeof srv->log, "/tmp/rl-redis-XXXXXX");
    int fd = mkstemp(srv->log);
    if (fd < 0) {
        snprintf(err, errlen, "mkstemp: %s", strerror(errno));
        srv->log[0] = '\0';
        rl_test_redis_stop(srv);
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
        snprintf(err, errlen, "%s on port %d did not answer PING; log: %s",
                 rl_test_server_prog(), srv->port, tail);
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

/* A cluster node's or Sentinel's files, and their directory. */
static void remove_dir(rl_test_redis_t *srv)
{
    if (srv->dir[0] == '\0')
        return;
    DIR *d = opendir(srv->dir);
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char path[400];
            snprintf(path, sizeof path, "%s/%s", srv->dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(srv->dir);
    srv->dir[0] = '\0';
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
    remove_dir(srv);
}

void rl_test_redis_kill(rl_test_redis_t *srv)
{
    if (srv->pid > 0) {
        kill(srv->pid, SIGKILL);
        reap(srv->pid, now_ms() + STOP_DEADLINE_MS);
        srv->pid = 0;
    }
}

int rl_test_redis_restart(rl_test_redis_t *srv, char *err, size_t errlen)
{
    if (make_dir(srv, err, errlen) != 0)
        return -1;
    snprintf(srv->log, sizeof srv->log, "/tmp/rl-redis-XXXXXX");
    int fd = mkstemp(srv->log);
    if (fd < 0) {
        snprintf(err, errlen, "mkstemp: %s", strerror(errno));
        srv->log[0] = '\0';
        return -1;
    }
    close(fd);
    for (int attempt = 0; attempt < 50; attempt++) {
        if (spawn_on_port(srv, err, errlen) == 1) {
            unlink(srv->log);
            srv->log[0] = '\0';
            return 0;
        }
        rl_test_redis_kill(srv);
        sleep_ms(20);
    }
    snprintf(err, errlen, "redis-server did not come back on port %d", srv->port);
    return -1;
}

int rl_test_redis_crash_restart(rl_test_redis_t *srv, char *err, size_t errlen)
{
    if (srv->pid > 0) {
        kill(srv->pid, SIGKILL);
        /* Reaped here if it is ours; a forked test's parent reaps it later. */
        reap(srv->pid, now_ms() + STOP_DEADLINE_MS);
        srv->pid = 0;
    }
    if (make_dir(srv, err, errlen) != 0)
        return -1;
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

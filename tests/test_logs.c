/* SPDX-License-Identifier: MIT */
/* Log lines a person can act on: an outage's start and end, with its
 * length, through a real redis-server killed and restarted; the last
 * transition of a burst written, not dropped. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>
#include "base/log.h"
#include "testutil.h"
#include "redis_harness.h"

static const char secret[] = "logs-suite-secret-0123456789abcdef";

#define LINES_MAX 512

/* Every line the hook got, with its level (any thread). */
typedef struct lines {
    pthread_mutex_t mu;
    int n;
    int level[LINES_MAX];
    char text[LINES_MAX][256];
} lines_t;

static lines_t logged = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void keep(void *ud, int32_t level, const char *msg)
{
    lines_t *l = ud;
    pthread_mutex_lock(&l->mu);
    if (l->n < LINES_MAX) {
        l->level[l->n] = level;
        snprintf(l->text[l->n], sizeof l->text[0], "%s", msg);
        l->n++;
    }
    pthread_mutex_unlock(&l->mu);
}

static int lines_count(void)
{
    pthread_mutex_lock(&logged.mu);
    int n = logged.n;
    pthread_mutex_unlock(&logged.mu);
    return n;
}

/* The index of the first line from `from` on holding every word of
 * `words` (a NULL-terminated list) at `level` or more urgent (-1: any
 * level); -1 if none. The line is copied into out. */
static int find_line(int from, int level, const char *const *words, char *out, size_t outlen)
{
    int found = -1;
    pthread_mutex_lock(&logged.mu);
    for (int i = from; i < logged.n && found < 0; i++) {
        if (level >= 0 && logged.level[i] > level)
            continue;
        int all = 1;
        for (const char *const *w = words; *w != NULL && all; w++)
            all = strstr(logged.text[i], *w) != NULL;
        if (all) {
            found = i;
            if (out != NULL)
                snprintf(out, outlen, "%s", logged.text[i]);
        }
    }
    pthread_mutex_unlock(&logged.mu);
    return found;
}

static rl_t *open_logged(const char *url, uint32_t interval_ms)
{
    pthread_mutex_lock(&logged.mu);
    logged.n = 0;
    pthread_mutex_unlock(&logged.mu);
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = url;
    c.key_secret = secret;
    c.key_secret_len = sizeof secret - 1;
    c.sync_interval_ms = interval_ms;
    c.recover_after_rounds = 2;
    c.reconnect_max_ms = 100;
    c.log = keep;
    c.log_ud = &logged;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    return rl_test_hold(rl, rl_test_close_fn);
}

static void stop_server(void *srv)
{
    rl_test_redis_stop(srv);
    free(srv);
}

/* A server of the test's own, to kill and restart (the fixture's lives in
 * the runner; one this test's process restarts dies with it). On the heap:
 * the hold stops it after the test's frame is gone. */
static rl_test_redis_t *own_server(char *url, size_t urllen)
{
    char err[256];
    rl_test_redis_t *srv = calloc(1, sizeof *srv);
    ck_assert_ptr_nonnull(srv);
    rl_test_hold(srv, stop_server);
    ck_assert_msg(rl_test_redis_start(srv, err, sizeof err) == 0, "%s", err);
    snprintf(url, urllen, "redis://127.0.0.1:%d", srv->port);
    return srv;
}

static uint64_t now_ms(void) { return rl_test_now_ns() / 1000000u; }

/* The number after `word` in a line; fails the test without one. */
static unsigned long long number_after(const char *line, const char *word)
{
    const char *p = strstr(line, word);
    ck_assert_msg(p != NULL, "\"%s\" in \"%s\"", word, line);
    return strtoull(p + strlen(word), NULL, 10);
}

/* Redis killed and restarted: the outage's end is a WARN line (a hook gets
 * every level, but stderr only WARN and ERROR) that says how long the
 * outage lasted, and the figure covers what the test saw of it; the
 * outage's start says what its figure measures. */
START_TEST(outage_end_warned_with_its_length)
{
    char url[64];
    rl_test_redis_t *srv = own_server(url, sizeof url);
    rl_t *rl = open_logged(url, 50);
    WAIT_FOR(rl_test_health(rl) == RL_HEALTH_HEALTHY);
    uint64_t killed = now_ms();
    rl_test_redis_kill(srv);
    WAIT_FOR(rl_test_health(rl) == RL_HEALTH_DEGRADED);
    uint64_t seen_degraded = now_ms();
    char err[256];
    uint64_t restarted = now_ms();
    ck_assert_msg(rl_test_redis_restart(srv, err, sizeof err) == 0, "%s", err);
    WAIT_FOR(rl_test_health(rl) == RL_HEALTH_HEALTHY);
    uint64_t seen_healthy = now_ms();
    static const char *const end[] = {"-> healthy", "outage over, it lasted ", NULL};
    char line[256];
    WAIT_FOR(find_line(0, RL_LOG_WARN, end, line, sizeof line) >= 0);
    unsigned long long lasted = number_after(line, "it lasted ");
    ck_assert_msg(lasted + 1 >= restarted - seen_degraded && lasted <= seen_healthy - killed + 1,
                  "\"%s\": the test saw the outage last at least %llu ms and at most %llu",
                  line, (unsigned long long)(restarted - seen_degraded),
                  (unsigned long long)(seen_healthy - killed));
    static const char *const start[] = {"healthy -> degraded", "outage began", "ms healthy",
                                        NULL};
    ck_assert_msg(find_line(0, RL_LOG_WARN, start, NULL, 0) >= 0,
                  "the outage's start says what its figure measures");
}
END_TEST

/* A transition right after a line (Redis killed as soon as the instance is
 * healthy again) falls inside the one-line-a-second window: it is
 * coalesced and written when the window ends, never dropped. */
START_TEST(last_transition_of_a_burst_written)
{
    char url[64];
    rl_test_redis_t *srv = own_server(url, sizeof url);
    rl_t *rl = open_logged(url, 50);
    WAIT_FOR(rl_test_health(rl) == RL_HEALTH_HEALTHY);
    rl_test_redis_kill(srv);
    WAIT_FOR(rl_test_health(rl) == RL_HEALTH_DEGRADED);
    char err[256];
    ck_assert_msg(rl_test_redis_restart(srv, err, sizeof err) == 0, "%s", err);
    WAIT_FOR(rl_test_health(rl) == RL_HEALTH_HEALTHY);
    int mark = lines_count();
    rl_test_redis_kill(srv);
    WAIT_FOR(rl_test_health(rl) == RL_HEALTH_DEGRADED);
    static const char *const down[] = {"-> degraded", NULL};
    WAIT_FOR(find_line(mark, RL_LOG_WARN, down, NULL, 0) >= 0);
    ck_assert_msg(rl_test_redis_restart(srv, err, sizeof err) == 0, "%s", err);
}
END_TEST

static void *no_op(void *arg) { return arg; }

/* Threads of this process now. The first call starts and joins a thread of
 * its own first: a sanitizer's runtime (ThreadSanitizer's) starts a thread
 * of its own at a process's first pthread_create, which must not be
 * counted as the library's. */
static int threads(void)
{
    static int warmed;
    if (!warmed) {
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, no_op, NULL), 0);
        pthread_join(t, NULL);
        warmed = 1;
    }
    DIR *d = opendir("/proc/self/task");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* A program with only global limits opens no exact/quota connection, so
 * an outage logs none of their lines; the first exact limit connects them,
 * and their lines say which connections they are about and where to. */
START_TEST(global_only_opens_no_exact_pool)
{
    static const char dead[] = "redis://127.0.0.1:1"; /* nothing listens */
    int before = threads();
    rl_t *rl = open_logged(dead, 50);
    rl_test_add(rl, "name=api rate=100/s");
    static const char *const sync_down[] = {"sync: cannot connect to 127.0.0.1:1", NULL};
    WAIT_FOR(find_line(0, RL_LOG_WARN, sync_down, NULL, 0) >= 0);
    WAIT_FOR(rl_test_health(rl) == RL_HEALTH_DEGRADED);
    ck_assert_int_eq(threads(), before + 1); /* the sync thread alone */
    static const char *const pool[] = {"exact/quota", NULL};
    static const char *const caller[] = {"redis caller", NULL};
    ck_assert_int_lt(find_line(0, -1, pool, NULL, 0), 0);
    ck_assert_int_lt(find_line(0, -1, caller, NULL, 0), 0);
    rl_test_add(rl, "name=login rate=5/m burst=5 mode=exact");
    ck_assert_int_eq(threads(), before + 2); /* and the exact thread */
    static const char *const named[] = {"exact/quota connection to 127.0.0.1:1: cannot connect",
                                        NULL};
    WAIT_FOR(find_line(0, RL_LOG_WARN, named, NULL, 0) >= 0);
    ck_assert_int_lt(find_line(0, -1, caller, NULL, 0), 0);
}
END_TEST

/* A limit's first degraded answer is logged (WARN, naming the limit) and
 * begins a spell, counted in rl_limit_stats and the metrics; the answers
 * after it, in the same outage, are counted as degraded only. */
START_TEST(first_degraded_answer_logged_and_counted)
{
    rl_t *rl = open_logged("redis://127.0.0.1:1", 50); /* nothing listens */
    WAIT_FOR(rl_test_health(rl) == RL_HEALTH_DEGRADED);
    int id = rl_test_add(rl, "name=api rate=100/s on_failure=closed");
    for (int i = 0; i < 100; i++)
        rl_check(rl, id, "k", 1, 1, NULL);
    static const char *const first[] = {"limit api: answering by on_failure=closed",
                                        "the global tier is degraded", NULL};
    char line[256];
    int at = find_line(0, RL_LOG_WARN, first, line, sizeof line);
    ck_assert_msg(at >= 0, "the first degraded answer is logged, naming the limit");
    ck_assert_msg(find_line(at + 1, -1, first, NULL, 0) < 0, "once a spell: %s", line);
    rl_limit_stats_t ls;
    rl_limit_stats_init(&ls);
    ck_assert_int_eq(rl_limit_stats(rl, id, &ls), 0);
    ck_assert_uint_eq(ls.degraded, 100);
    ck_assert_uint_eq(ls.degraded_spells, 1);
    static char text[1 << 16];
    ck_assert_int_ge(rl_metrics_text(rl, text, sizeof text), 0);
    ck_assert_msg(strstr(text, "ratelimit_limit_degraded_spells_total{limit=\"api\"} 1\n") != NULL,
                  "the metric");
}
END_TEST

static uint64_t frozen_ns(void *ctx) { return *(uint64_t *)ctx; }

/* A line that must not be lost waits for the stderr rate limit's room
 * instead of being dropped; once there is room it is written. */
START_TEST(kept_line_waits_for_room)
{
    uint64_t t = 1000000000u;
    rl_logger_t lg;
    rl__log_init(&lg, NULL, NULL, 0, frozen_ns, &t);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    lg.fd = fds[1];
    for (int i = 0; i < RL_LOG_BURST; i++)
        rl__log(&lg, RL_LOG_WARN, "line %d", i);
    uint64_t wait_ms = rl__log_keep(&lg, RL_LOG_WARN, "the final state");
    ck_assert_uint_gt(wait_ms, 0);
    ck_assert_uint_le(wait_ms, RL_LOG_EVERY_MS);
    ck_assert_uint_eq(rl__log_dropped(&lg), 0);
    t += wait_ms * 1000000u;
    ck_assert_uint_eq(rl__log_keep(&lg, RL_LOG_WARN, "the final state"), 0);
    close(fds[1]);
    char buf[4096];
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    ck_assert_int_gt(n, 0);
    buf[n] = '\0';
    ck_assert_msg(strstr(buf, "WARN [-] the final state\n") != NULL, "%s", buf);
    ck_assert_msg(strstr(buf, "dropped") == NULL, "nothing was dropped: %s", buf);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("logs");
    TCase *unit = tcase_create("unit");
    tcase_add_test(unit, kept_line_waits_for_room);
    suite_add_tcase(s, unit);
    TCase *redis = tcase_create("redis");
    tcase_add_checked_fixture(redis, NULL, rl_test_release_all);
    tcase_set_timeout(redis, 120);
    tcase_add_test(redis, outage_end_warned_with_its_length);
    tcase_add_test(redis, last_transition_of_a_burst_written);
    tcase_add_test(redis, global_only_opens_no_exact_pool);
    tcase_add_test(redis, first_degraded_answer_logged_and_counted);
    suite_add_tcase(s, redis);
    return s;
}

int main(void) { return rl_test_run(suite()); }

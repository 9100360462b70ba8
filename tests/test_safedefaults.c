/* SPDX-License-Identifier: MIT */
/* A limit does what its spec says with nothing else set: the exact deadline
 * a loaded machine meets, exact and tiered limits closed while Redis cannot
 * answer, exact and tiered refused without a redis_url, and the README's
 * password limit held across two processes on a loaded machine. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil.h"
#include "redis_fixture.h"

static const char secret[] = "safe-defaults-secret-0123456789ab";

static rl_limit_t parse(const char *spec)
{
    rl_limit_t lim;
    char err[256];
    ck_assert_msg(rl_limit_parse_sized(&lim, sizeof lim, spec, err, sizeof err) == 0, "%s: %s",
                  spec, err);
    return lim;
}

START_TEST(exact_deadline_default)
{
    rl_config_t c;
    rl_config_init(&c);
    /* The nginx module's default too: a loaded 2-core box meets it. */
    ck_assert_uint_eq(c.exact_timeout_ms, 100);
}
END_TEST

START_TEST(exact_and_tiered_default_closed)
{
    ck_assert_int_eq(parse("name=login rate=5/m burst=5 mode=exact").on_failure,
                     RL_FAIL_CLOSED);
    ck_assert_int_eq(parse("name=t rate=5/m mode=tiered").on_failure, RL_FAIL_CLOSED);
    ck_assert_int_eq(parse("name=g rate=5/m").on_failure, RL_FAIL_LOCAL);
    ck_assert_int_eq(parse("name=l rate=5/m mode=local").on_failure, RL_FAIL_LOCAL);
    /* the spec's own word wins */
    ck_assert_int_eq(parse("name=e rate=5/m mode=exact on_failure=local").on_failure,
                     RL_FAIL_LOCAL);
    ck_assert_int_eq(parse("name=e rate=5/m mode=exact on_failure=open").on_failure,
                     RL_FAIL_OPEN);
    /* rl_limit_init, then a mode: resolved when the limit is added */
    rl_limit_t lim;
    rl_limit_init(&lim);
    ck_assert_int_eq(lim.on_failure, RL_FAIL_DEFAULT);
}
END_TEST

/* rl_limit_init's default, resolved by mode at rl_limit_add (an instance
 * with a redis_url: exact and tiered need one). */
START_TEST(struct_default_resolved_at_add)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = rl_test_redis_url();
    c.key_secret = secret;
    c.key_secret_len = sizeof secret - 1;
    c.log_quiet = 1;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    const int32_t modes[] = {RL_MODE_GLOBAL, RL_MODE_LOCAL, RL_MODE_EXACT, RL_MODE_TIERED};
    const int32_t want[] = {RL_FAIL_LOCAL, RL_FAIL_LOCAL, RL_FAIL_CLOSED, RL_FAIL_CLOSED};
    for (int i = 0; i < 4; i++) {
        rl_limit_t lim, got;
        rl_limit_init(&lim);
        snprintf(lim.name, sizeof lim.name, "m%d", i);
        lim.rate = (rl_rate_t){10, 1000};
        lim.mode = modes[i];
        int id = rl_limit_add(rl, &lim);
        ck_assert_int_ge(id, 0);
        rl_limit_init(&got);
        ck_assert_int_eq(rl_limit_get(rl, id, &got), 0);
        ck_assert_int_eq(got.on_failure, want[i]);
    }
    rl_close(rl);
}
END_TEST

typedef struct logged {
    char text[512];
} logged_t;

static void keep_log(void *ud, int32_t level, const char *msg)
{
    logged_t *l = ud;
    if (level == RL_LOG_ERROR)
        snprintf(l->text, sizeof l->text, "%s", msg);
}

START_TEST(exact_needs_redis_url)
{
    logged_t l = {""};
    rl_config_t c;
    rl_config_init(&c);
    c.log = keep_log;
    c.log_ud = &l;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    const char *specs[] = {"name=login rate=5/m burst=5 mode=exact", "name=t rate=5/m mode=tiered"};
    for (int i = 0; i < 2; i++) {
        l.text[0] = '\0';
        rl_limit_t lim = parse(specs[i]);
        ck_assert_int_eq(rl_limit_add(rl, &lim), RL_ENOTSUP);
        ck_assert_msg(strstr(l.text, lim.name) != NULL && strstr(l.text, "redis_url") != NULL,
                      "the refusal names the limit and the missing redis_url: \"%s\"", l.text);
    }
    /* an update into exact is refused the same way */
    rl_limit_t g = parse("name=g rate=5/m");
    int id = rl_limit_add(rl, &g);
    ck_assert_int_ge(id, 0);
    g.mode = RL_MODE_EXACT;
    ck_assert_int_eq(rl_limit_update(rl, id, &g), RL_ENOTSUP);
    rl_close(rl);
}
END_TEST

/* One process of the password test: 10 s of checks on one key at `hz`,
 * nothing set but the fleet's url, secret and node name; its allows. */
static long login_node(const char *node, unsigned hz, unsigned seconds)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = rl_test_redis_url();
    c.key_secret = secret;
    c.key_secret_len = sizeof secret - 1;
    c.node_id = node;
    rl_t *rl = NULL;
    if (rl_open(&rl, &c) != 0)
        return -1;
    rl_limit_t lim = parse("name=login rate=5/m burst=5 mode=exact");
    int id = rl_limit_add(rl, &lim);
    if (id < 0)
        return -1;
    long allowed = 0;
    uint64_t gap = 1000000000u / hz, start = rl_test_now_ns();
    for (uint64_t n = 0; n < (uint64_t)hz * seconds; n++) {
        uint64_t at = start + n * gap, now = rl_test_now_ns();
        if (now < at)
            usleep((useconds_t)((at - now) / 1000u));
        if (rl_check(rl, id, "alice", 5, 1, NULL) == RL_ALLOW)
            allowed++;
    }
    rl_close(rl);
    return allowed;
}

START_TEST(password_example_two_processes_loaded)
{
    const unsigned seconds = 10, hz = 100; /* each: 200 req/s together */
    pid_t busy = fork();
    ck_assert_int_ge(busy, 0);
    if (busy == 0) {
        /* Load beside the fleet: a busy loop competing for the cores. */
        if (nice(10) == -1) {
            /* still a busy loop, at the caller's priority */
        }
        for (volatile unsigned long x = 0;; x++) {
        }
    }
    int fds[2][2];
    pid_t kid[2];
    uint64_t t0 = rl_test_now_ns();
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(pipe(fds[i]), 0);
        kid[i] = fork();
        ck_assert_int_ge(kid[i], 0);
        if (kid[i] == 0) {
            close(fds[i][0]);
            long got = login_node(i == 0 ? "login-a" : "login-b", hz, seconds);
            ssize_t w = write(fds[i][1], &got, sizeof got);
            _exit(w == (ssize_t)sizeof got ? 0 : 1);
        }
        close(fds[i][1]);
    }
    long total = 0;
    for (int i = 0; i < 2; i++) {
        long got = -1;
        ck_assert_int_eq(read(fds[i][0], &got, sizeof got), (ssize_t)sizeof got);
        close(fds[i][0]);
        int st;
        ck_assert_int_eq(waitpid(kid[i], &st, 0), kid[i]);
        ck_assert_msg(got >= 0, "node %d could not open or add the limit", i);
        total += got;
    }
    uint64_t elapsed_ms = (rl_test_now_ns() - t0) / 1000000u;
    kill(busy, SIGKILL);
    waitpid(busy, NULL, 0);
    /* burst + rate x elapsed, in whole tokens */
    long bound = 5 + (long)(elapsed_ms * 5 / 60000u);
    ck_assert_msg(total <= bound, "2 processes admitted %ld over %llu ms; the bound is %ld",
                  total, (unsigned long long)elapsed_ms, bound);
    ck_assert_msg(total >= 1, "nothing admitted: Redis never answered");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("safedefaults");
    TCase *unit = tcase_create("unit");
    tcase_add_test(unit, exact_deadline_default);
    tcase_add_test(unit, exact_and_tiered_default_closed);
    tcase_add_test(unit, exact_needs_redis_url);
    suite_add_tcase(s, unit);
    TCase *redis = tcase_create("redis");
    rl_test_redis_fixture(redis);
    tcase_set_timeout(redis, 120);
    tcase_add_test(redis, struct_default_resolved_at_add);
    tcase_add_test(redis, password_example_two_processes_loaded);
    suite_add_tcase(s, redis);
    return s;
}

int main(void) { return rl_test_run(suite()); }

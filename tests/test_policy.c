/* SPDX-License-Identifier: MIT */
/*
 * The policy module (policy/policy.h) without Redis: health transitions round by
 * round, the on_failure decision, the degraded ramp; and the Redis layer's
 * pure parts (reply classification, SHA replies, key names).
 */
#include <stdio.h>
#include <string.h>
#include "testutil.h"
#include "policy/policy.h"
#include "redis/keys.h"
#include "redis/reply.h"
#include "sync/reportargs.h"
#include "lua/scripts.h"

static int after(int state, int failed, rl_health_counts_t *c, const rl_health_cfg_t *cfg,
                 int *moves_out)
{
    rl_health_move_t m[RL_HEALTH_MOVES_MAX];
    int n = rl__policy_health_round(state, failed, c, cfg, m);
    ck_assert_int_le(n, RL_HEALTH_MOVES_MAX);
    for (int i = 0; i < n; i++) {
        ck_assert_int_ne(m[i].state, state); /* every move changes the state */
        ck_assert_ptr_nonnull(m[i].why);
        state = m[i].state;
    }
    if (moves_out != NULL)
        *moves_out = n;
    return state;
}

START_TEST(health_defaults)
{
    rl_health_cfg_t cfg = {1, 2};
    rl_health_counts_t c = {0, 0};
    int n, st = RL_HEALTH_HEALTHY;
    st = after(st, 0, &c, &cfg, &n);
    ck_assert_int_eq(st, RL_HEALTH_HEALTHY);
    ck_assert_int_eq(n, 0);
    st = after(st, 1, &c, &cfg, &n); /* one failure degrades */
    ck_assert_int_eq(st, RL_HEALTH_DEGRADED);
    ck_assert_int_eq(n, 1);
    st = after(st, 1, &c, &cfg, &n); /* still degraded: no move */
    ck_assert_int_eq(st, RL_HEALTH_DEGRADED);
    ck_assert_int_eq(n, 0);
    st = after(st, 0, &c, &cfg, &n);
    ck_assert_int_eq(st, RL_HEALTH_RECOVERING);
    st = after(st, 0, &c, &cfg, &n); /* the second success in a row heals */
    ck_assert_int_eq(st, RL_HEALTH_HEALTHY);
    ck_assert_int_eq(n, 1);
    /* recovering falls back on one failure, whatever degrade_after says */
    rl_health_cfg_t lax = {5, 3};
    c = (rl_health_counts_t){0, 0};
    st = after(RL_HEALTH_DEGRADED, 0, &c, &lax, NULL);
    ck_assert_int_eq(st, RL_HEALTH_RECOVERING);
    st = after(st, 1, &c, &lax, NULL);
    ck_assert_int_eq(st, RL_HEALTH_DEGRADED);
}
END_TEST

START_TEST(health_thresholds)
{
    rl_health_cfg_t cfg = {3, 1};
    rl_health_counts_t c = {0, 0};
    int n, st = RL_HEALTH_HEALTHY;
    st = after(st, 1, &c, &cfg, NULL);
    st = after(st, 1, &c, &cfg, NULL);
    ck_assert_int_eq(st, RL_HEALTH_HEALTHY);
    st = after(st, 0, &c, &cfg, NULL); /* a success resets the streak */
    st = after(st, 1, &c, &cfg, NULL);
    st = after(st, 1, &c, &cfg, NULL);
    ck_assert_int_eq(st, RL_HEALTH_HEALTHY);
    st = after(st, 1, &c, &cfg, NULL);
    ck_assert_int_eq(st, RL_HEALTH_DEGRADED);
    /* recover_after 1: degraded -> recovering -> healthy in one round, two
     * moves (each logged and timed) */
    st = after(st, 0, &c, &cfg, &n);
    ck_assert_int_eq(st, RL_HEALTH_HEALTHY);
    ck_assert_int_eq(n, 2);
}
END_TEST

/* Random outcome sequences against a model written from local/health.h's words. */
START_TEST(health_matches_model)
{
    uint64_t seed = 0x9e3779b97f4a7c15u, rng;
    for (int trial = 0; trial < 2000; trial++) {
        rng = next_u64(&seed);
        rl_health_cfg_t cfg = {1 + (uint32_t)(rng % 4), 1 + (uint32_t)((rng >> 8) % 4)};
        rl_health_counts_t c = {0, 0};
        int st = RL_HEALTH_HEALTHY, model = RL_HEALTH_HEALTHY;
        uint32_t fails = 0, oks = 0; /* the model's streaks */
        for (int r = 0; r < 64; r++) {
            rng = next_u64(&seed);
            int failed = (rng >> 20) % 3 == 0;
            st = after(st, failed, &c, &cfg, NULL);
            if (failed) {
                fails++;
                oks = 0;
                if (model == RL_HEALTH_RECOVERING || fails >= cfg.degrade_after_failures)
                    model = RL_HEALTH_DEGRADED;
            } else {
                fails = 0;
                oks = model == RL_HEALTH_DEGRADED ? 1 : oks + 1;
                if (model == RL_HEALTH_DEGRADED)
                    model = RL_HEALTH_RECOVERING;
                if (model == RL_HEALTH_RECOVERING && oks >= cfg.recover_after_rounds)
                    model = RL_HEALTH_HEALTHY;
            }
            ck_assert_int_eq(st, model);
        }
    }
}
END_TEST

START_TEST(on_failure_decision)
{
    rl_failure_answer_t a = rl__policy_on_failure(RL_FAIL_OPEN, 7, 1000);
    ck_assert_int_eq(a.action, RL_FAILURE_ALLOW);
    ck_assert_uint_eq(a.remaining, 7);
    ck_assert_uint_eq(a.retry_ms, 0);
    a = rl__policy_on_failure(RL_FAIL_CLOSED, 7, 1000);
    ck_assert_int_eq(a.action, RL_FAILURE_DENY);
    ck_assert_uint_eq(a.remaining, 0);
    ck_assert_uint_eq(a.retry_ms, 1000);
    a = rl__policy_on_failure(RL_FAIL_LOCAL, 7, 1000);
    ck_assert_int_eq(a.action, RL_FAILURE_LOCAL);
}
END_TEST

START_TEST(degraded_ramp)
{
    rl_gcra_t last = {0}, to = {0}, g;
    last.t_fp = 1000, last.burst = 100, last.tau_fp = 100000;
    to.t_fp = 5000, to.burst = 10, to.tau_fp = 50000;
    rl__policy_degraded_gcra(&last, &to, 0, 1 << 20, &g); /* the outage's start */
    ck_assert_uint_eq(g.t_fp, 1000);
    ck_assert_uint_eq(g.burst, 100);
    ck_assert_uint_eq(g.tau_fp, 100000);
    rl__policy_degraded_gcra(&last, &to, 1 << 19, 1 << 20, &g); /* half way */
    ck_assert_uint_eq(g.t_fp, 3000);
    ck_assert_uint_eq(g.burst, 55);
    ck_assert_uint_eq(g.tau_fp, 55 * 3000);
    rl__policy_degraded_gcra(&last, &to, 1 << 21, 1 << 20, &g); /* past the ramp */
    ck_assert_uint_eq(g.t_fp, 5000);
    ck_assert_uint_eq(g.burst, 10);
    rl__policy_degraded_gcra(&last, &to, 0, 0, &g); /* no ramp: at once */
    ck_assert_uint_eq(g.t_fp, 5000);
    to.burst = 0;
    rl__policy_degraded_gcra(&last, &to, 0, 0, &g); /* never a zero burst */
    ck_assert_uint_eq(g.burst, 1);
}
END_TEST

static redisReply err_reply(const char *text)
{
    redisReply r;
    memset(&r, 0, sizeof r);
    r.type = REDIS_REPLY_ERROR;
    r.str = (char *)text;
    r.len = strlen(text);
    return r;
}

START_TEST(reply_classes)
{
    static const struct {
        const char *text;
        int cls;
    } cases[] = {
        {"NOSCRIPT No matching script", RL_REDIS_ERR_NOSCRIPT},
        {"READONLY You can't write against a read only replica.", RL_REDIS_ERR_READONLY},
        {"LOADING Redis is loading the dataset in memory", RL_REDIS_ERR_LOADING},
        {"MASTERDOWN Link with MASTER is down", RL_REDIS_ERR_LOADING},
        {"BUSY Redis is busy running a script", RL_REDIS_ERR_BUSY},
        {"OOM command not allowed", RL_REDIS_ERR_OOM},
        {"NOAUTH Authentication required.", RL_REDIS_ERR_AUTH},
        {"WRONGPASS invalid username-password pair", RL_REDIS_ERR_AUTH},
        {"NOPERM this user has no permissions", RL_REDIS_ERR_AUTH},
        {"ERR AUTH <password> called without any password configured", RL_REDIS_ERR_AUTH},
        {"ERR unknown command", RL_REDIS_ERR_OTHER},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        redisReply r = err_reply(cases[i].text);
        ck_assert_int_eq(rl__redis_classify(&r), cases[i].cls);
        ck_assert_str_eq(rl__redis_reply_text(&r), cases[i].text);
    }
    ck_assert_int_eq(rl__redis_classify(NULL), RL_REDIS_ERR_OTHER);
    redisReply s;
    memset(&s, 0, sizeof s);
    s.type = REDIS_REPLY_STRING;
    s.str = (char *)"0123456789abcdef0123456789abcdef01234567";
    s.len = 40;
    ck_assert_int_eq(rl__redis_classify(&s), RL_REDIS_ERR_OTHER);
    ck_assert_str_eq(rl__redis_reply_text(&s), "unexpected reply");
    char sha[41] = "";
    ck_assert_int_eq(rl__redis_sha_reply(&s, sha), 1);
    ck_assert_str_eq(sha, s.str);
    s.len = 39;
    ck_assert_int_eq(rl__redis_sha_reply(&s, sha), 0);
    ck_assert_int_eq(rl__redis_sha_reply(NULL, sha), 0);
}
END_TEST

START_TEST(key_names)
{
    rl_keyhash_t kh;
    static const unsigned char secret[] = "a fleet secret of enough bytes!!";
    rl__keyhash_init(&kh, secret, sizeof secret - 1);
    rl_keyid_t id = {RL_VSHARDS * 3 + 5, 42};
    char tag[32];
    snprintf(tag, sizeof tag, "{rl:v1:api:%u}:k:", rl__redis_vshard(id));
    char a[160], b[160];
    int n = rl__redis_key_name(&kh, "rl", "api", id, a, sizeof a);
    ck_assert_int_eq(n, (int)strlen(a));
    ck_assert_int_eq(strncmp(a, tag, strlen(tag)), 0); /* the hash tag: its vshard */
    ck_assert_int_eq((int)strlen(a), (int)strlen(tag) + 32);
    ck_assert_int_eq(rl__redis_key_name(&kh, "rl", "api", id, b, sizeof b), n);
    ck_assert_str_eq(a, b); /* a function of the identity only */
    id.hi++;
    rl__redis_key_name(&kh, "rl", "api", id, b, sizeof b);
    ck_assert_str_ne(a, b);
    ck_assert_int_eq(rl__redis_key_name(&kh, "rl", "api", id, b, 8), n); /* snprintf-style */
    ck_assert_uint_eq(strlen(b), 7);
    /* Similar keys spread over the vshards (their identities' low bits
     * alone put 24 of them in 2). */
    unsigned seen = 0;
    for (int k = 0; k < 24; k++) {
        char key[16];
        int kn = snprintf(key, sizeof key, "key-%d", k);
        seen |= 1u << rl__redis_vshard(rl__keyhash(&kh, key, (size_t)kn));
    }
    ck_assert_int_ge(__builtin_popcount(seen), 10);
}
END_TEST

/* The embedded report script reads each argument where the C table puts it. */
START_TEST(report_args_generated)
{
    char line[64];
#define RL_X_(up, word)                                                            \
    snprintf(line, sizeof line, "\nlocal A_%s=%u\n", #word, (unsigned)RL_RA_##up);     \
    ck_assert_msg(strstr(rl__lua_report, line) != NULL, "missing: %s", line);
    RL_REPORT_ARGS(RL_X_)
#undef RL_X_
#define RL_X_(up, word)                                                            \
    snprintf(line, sizeof line, "\nlocal K_%s=%u\n", #word, (unsigned)RL_RK_##up);     \
    ck_assert_msg(strstr(rl__lua_report, line) != NULL, "missing: %s", line);
    RL_REPORT_KEY_ARGS(RL_X_)
#undef RL_X_
    snprintf(line, sizeof line, "\nlocal A_N=%u\nlocal K_N=%u\n", RL_REPORT_ARGS_N,
             RL_REPORT_KEY_ARGS_N);
    ck_assert_ptr_nonnull(strstr(rl__lua_report, line));
    ck_assert_uint_eq(RL_REPORT_ARGS_N, 15);
    ck_assert_uint_eq(RL_REPORT_KEY_ARGS_N, 8);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("policy");
    TCase *tc = tcase_create("policy");
    tcase_add_test(tc, health_defaults);
    tcase_add_test(tc, health_thresholds);
    tcase_add_test(tc, health_matches_model);
    tcase_add_test(tc, on_failure_decision);
    tcase_add_test(tc, degraded_ramp);
    suite_add_tcase(s, tc);
    TCase *rc = tcase_create("redis_pure");
    tcase_add_test(rc, reply_classes);
    tcase_add_test(rc, key_names);
    tcase_add_test(rc, report_args_generated);
    suite_add_tcase(s, rc);
    return s;
}

int main(void) { return rl_test_run(suite()); }

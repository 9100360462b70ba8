/* SPDX-License-Identifier: MIT */
/* src/lua/share.lua against src/sync/share.c: the same inputs through EVALSHA on
 * a real redis-server and through the C function must give the same numbers,
 * bit for bit. Needs redis-server on PATH (RL_SKIP_REDIS=1 skips instead). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hiredis/hiredis.h>
#include "redis_fixture.h"
#include "sync/share.h"
#include "testutil.h"

#ifdef RL_SOURCE_DIR
#define SHARE_LUA RL_SOURCE_DIR "/src/lua/share.lua"
#else
#define SHARE_LUA "src/lua/share.lua"
#endif

#define ONE RL_SHARE_ONE

/* A script error names the line; keep the driver after share.lua so the
 * line numbers of share.lua itself stay right. */
static const char driver[] =
    "\n-- test driver\n"
    "if ARGV[1] == 'ewma' then\n"
    "  local out = {}\n"
    "  local i = 2\n"
    "  while i + 2 <= #ARGV do\n"
    "    out[#out + 1] = share_ewma(tonumber(ARGV[i]), tonumber(ARGV[i + 1]),\n"
    "                               tonumber(ARGV[i + 2]))\n"
    "    i = i + 3\n"
    "  end\n"
    "  return out\n"
    "end\n"
    "local n = tonumber(ARGV[7])\n"
    "local demand = {}\n"
    "for i = 1, n do demand[i] = tonumber(ARGV[7 + i]) end\n"
    "local rate, tokens = share_compute(tonumber(ARGV[2]), tonumber(ARGV[3]),\n"
    "  tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), demand)\n"
    "return {rate, tokens}\n";

#define EXPECT(cond, ...)              \
    do {                               \
        if (!(cond))                   \
            ck_abort_msg(__VA_ARGS__); \
    } while (0)

/* ------------------------------------------------------------ fixture */

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s (run from the source tree or define "
                             "RL_SOURCE_DIR)", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
    buf[len] = '\0';
    fclose(f);
    return buf;
}

typedef struct lua_conn {
    redisContext *c;
    char sha[41];
} lua_conn_t;

/* 1 with a connection and the script loaded; 0 when Redis is skipped. */
static int lua_open(lua_conn_t *lc, const char *tail)
{
    if (rl_test_redis_skipped())
        return 0;
    struct timeval tv = {30, 0};
    lc->c = redisConnectWithTimeout("127.0.0.1", rl_test_redis()->port, tv);
    ck_assert_msg(lc->c != NULL && lc->c->err == 0, "connect to redis on port %d: %s",
                  rl_test_redis()->port, lc->c ? lc->c->errstr : "out of memory");
    redisSetTimeout(lc->c, tv);
    char *lua = read_file(SHARE_LUA);
    size_t len = strlen(lua) + strlen(tail);
    char *script = malloc(len + 1);
    ck_assert_ptr_nonnull(script);
    snprintf(script, len + 1, "%s%s", lua, tail);
    free(lua);
    redisReply *r = redisCommand(lc->c, "SCRIPT LOAD %s", script);
    free(script);
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(r->type == REDIS_REPLY_STRING, "SCRIPT LOAD: %s",
                  r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    snprintf(lc->sha, sizeof lc->sha, "%s", r->str);
    freeReplyObject(r);
    return 1;
}

static void lua_close(lua_conn_t *lc)
{
    redisFree(lc->c);
}

/* EVALSHA sha 0 argv...: argv are numbers, printed here. */
typedef struct args {
    size_t n, cap;
    char **v;
    size_t *len;
} args_t;

static void args_init(args_t *a, const char *sha, size_t cap)
{
    a->cap = cap + 3;
    a->n = 0;
    a->v = calloc(a->cap, sizeof *a->v);
    a->len = calloc(a->cap, sizeof *a->len);
    ck_assert(a->v != NULL && a->len != NULL);
    a->v[a->n++] = strdup("EVALSHA");
    a->v[a->n++] = strdup(sha);
    a->v[a->n++] = strdup("0");
}

static void args_str(args_t *a, const char *s)
{
    EXPECT(a->n < a->cap, "args overflow");
    a->v[a->n++] = strdup(s);
}

static void args_u(args_t *a, uint64_t x)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)x);
    args_str(a, buf);
}

static redisReply *args_call(redisContext *c, args_t *a)
{
    for (size_t i = 0; i < a->n; i++)
        a->len[i] = strlen(a->v[i]);
    redisReply *r = redisCommandArgv(c, (int)a->n, (const char **)a->v, a->len);
    for (size_t i = 0; i < a->n; i++)
        free(a->v[i]);
    free(a->v);
    free(a->len);
    ck_assert_msg(r != NULL, "EVALSHA: %s", c->errstr);
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "EVALSHA: %s", r->str);
    return r;
}

/* -------------------------------------------------------- comparisons */

static void expect_ints(const redisReply *arr, const uint32_t *want, size_t n,
                        const char *what, size_t round)
{
    EXPECT(arr->type == REDIS_REPLY_ARRAY && arr->elements == n,
           "round %zu: %s: want an array of %zu, got type %d with %zu", round, what, n,
           arr->type, arr->elements);
    for (size_t i = 0; i < n; i++) {
        const redisReply *e = arr->element[i];
        EXPECT(e->type == REDIS_REPLY_INTEGER && e->integer == (long long)want[i],
               "round %zu: %s[%zu]: Lua %lld, C %u", round, what, i,
               e->type == REDIS_REPLY_INTEGER ? e->integer : -1LL, want[i]);
    }
}

static void compare_one(lua_conn_t *lc, const rl_share_params_t *p, const uint32_t *demand,
                        size_t n, size_t round)
{
    uint32_t *rate = calloc(n + 1, sizeof *rate), *burst = calloc(n + 1, sizeof *burst);
    ck_assert(rate != NULL && burst != NULL);
    ck_assert_int_eq(rl__share_compute(p, demand, n, rate, burst), 0);
    args_t a;
    args_init(&a, lc->sha, 7 + n);
    args_str(&a, "compute");
    args_u(&a, p->burst);
    args_u(&a, p->reserve_q);
    args_u(&a, p->over_q);
    args_u(&a, p->gain_q16);
    args_u(&a, p->max_cut_q);
    args_u(&a, n);
    for (size_t i = 0; i < n; i++)
        args_u(&a, demand[i]);
    redisReply *r = args_call(lc->c, &a);
    EXPECT(r->type == REDIS_REPLY_ARRAY && r->elements == 2, "round %zu: reply shape", round);
    expect_ints(r->element[0], rate, n, "rate_q", round);
    expect_ints(r->element[1], burst, n, "burst", round);
    freeReplyObject(r);
    free(rate);
    free(burst);
}

/* ------------------------------------------------------------- inputs */

static uint64_t rng_state;

static uint64_t rng(void)
{
    uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static uint32_t rng_below(uint64_t n)
{
    return (uint32_t)(rng() % n);
}

static uint32_t random_demand(int kind)
{
    switch (kind) {
    case 0: return 0;
    case 1: return rng_below(64);
    case 2: return ONE + rng_below(UINT32_MAX - ONE);
    case 3: return (uint32_t)((uint64_t)ONE * rng_below(5) / 4);
    default: return rng_below(ONE + 1);
    }
}

static rl_share_params_t random_params(void)
{
    static const uint32_t bursts[] = {0, 1, 2, 3, 7, 10, 100, 1000000000, UINT32_MAX};
    rl_share_params_t p;
    rl__share_params_init(&p);
    p.burst = rng() & 1 ? bursts[rng_below(9)] : rng_below(100000);
    p.reserve_q = rng() & 1 ? RL_SHARE_RESERVE_DEFAULT : rng_below(UINT64_C(2) * ONE);
    p.over_q = rng() & 1 ? 0 : (rng() & 1 ? rng_below(ONE / 4) : (uint32_t)rng());
    p.gain_q16 = rng() & 1 ? RL_SHARE_GAIN_DEFAULT : (uint32_t)rng() >> rng_below(32);
    p.max_cut_q = rng() & 1 ? RL_SHARE_MAX_CUT_DEFAULT : rng_below(UINT64_C(2) * ONE);
    return p;
}

/* near_n: a burst within 3 of the node count, where the rule switches
 * between a token each and tokens to the largest shares plus a handover. */
static void compare_random(lua_conn_t *lc, size_t n, size_t round, int near_n)
{
    uint32_t *d = calloc(n + 1, sizeof *d);
    ck_assert_ptr_nonnull(d);
    int mix = (int)rng_below(6);
    for (size_t i = 0; i < n; i++)
        d[i] = random_demand(mix == 5 ? (int)rng_below(5) : mix);
    rl_share_params_t p = random_params();
    if (near_n) {
        uint64_t b = n + rng_below(7);
        p.burst = b >= 3 ? (uint32_t)(b - 3) : 0;
    }
    compare_one(lc, &p, d, n, round);
    free(d);
}

/* -------------------------------------------------------------- tests */

START_TEST(test_lua_is_embeddable)
{
    /* Prepended to other scripts: no redis.* calls of its own, and no
     * globals (Redis 7 refuses a script that creates one). */
    char *lua = read_file(SHARE_LUA);
    int line = 1;
    for (char *l = lua, *next; l != NULL; l = next, line++) {
        next = strchr(l, '\n');
        if (next != NULL)
            *next++ = '\0';
        char *comment = strstr(l, "--");
        if (comment != NULL)
            *comment = '\0';
        ck_assert_msg(strstr(l, "redis") == NULL, "share.lua:%d uses redis: %s", line, l);
    }
    free(lua);
    lua_conn_t lc;
    if (!lua_open(&lc, "\nreturn share_compute(1, 0, 0, 0, 0, {5})[1]\n"))
        return;
    redisReply *r = redisCommand(lc.c, "EVALSHA %s 0", lc.sha);
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "EVALSHA: %s",
                  r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    ck_assert_int_eq(r->integer, ONE);
    freeReplyObject(r);
    lua_close(&lc);
}
END_TEST

START_TEST(test_lua_hand_cases)
{
    lua_conn_t lc;
    if (!lua_open(&lc, driver))
        return;
    rl_share_params_t p;
    rl__share_params_init(&p);
    uint32_t d3[3] = {1048576, 8388608, 10000000};
    uint32_t d4[4] = {2, ONE, UINT32_MAX, ONE + 5};
    uint32_t d10[10] = {0, 0, 0, 0, 0, 0, 0, ONE, 0, 0};
    static uint32_t big[10000];
    for (size_t i = 0; i < 10000; i++)
        big[i] = i % 2 ? ONE / 1000 : 0;
    size_t round = 0;
    for (uint32_t burst = 0; burst < 4; burst++) {
        p.burst = burst * 333333333;
        compare_one(&lc, &p, NULL, 0, round++);
        compare_one(&lc, &p, d3, 3, round++);
        compare_one(&lc, &p, d4, 4, round++);
        compare_one(&lc, &p, d10, 10, round++);
        compare_one(&lc, &p, big, 10000, round++);
    }
    /* Around B == n, where tokens go first one each or to the largest
     * shares with a handover of the rest's rate. */
    static const uint32_t near[] = {1, 2, 3, 9, 10, 11, 12};
    for (size_t k = 0; k < sizeof near / sizeof near[0]; k++) {
        p.burst = near[k];
        compare_one(&lc, &p, d3, 3, round++);
        compare_one(&lc, &p, d4, 4, round++);
        compare_one(&lc, &p, d10, 10, round++);
        p.burst = 9990 + near[k];
        compare_one(&lc, &p, big, 10000, round++);
        p.burst = 4996 + near[k];
        compare_one(&lc, &p, big, 10000, round++);
    }
    /* Saturated correction, full cut with no reserve, clamped inputs. */
    p.over_q = UINT32_MAX;
    p.gain_q16 = UINT32_MAX;
    compare_one(&lc, &p, d4, 4, round++);
    p.max_cut_q = UINT32_MAX;
    p.reserve_q = 0;
    p.burst = UINT32_MAX;
    compare_one(&lc, &p, d10, 10, round++);
    p.reserve_q = UINT32_MAX;
    compare_one(&lc, &p, d10, 10, round++);
    lua_close(&lc);
}
END_TEST

START_TEST(test_lua_random_small)
{
    lua_conn_t lc;
    if (!lua_open(&lc, driver))
        return;
    rng_state = 20240601;
    for (size_t k = 0; k < 3000; k++)
        compare_random(&lc, rng_below(201), k, 0);
    lua_close(&lc);
}
END_TEST

START_TEST(test_lua_random_big)
{
    lua_conn_t lc;
    if (!lua_open(&lc, driver))
        return;
    rng_state = 777;
    static const size_t sizes[] = {1000, 2500, 5000, 10000};
    for (size_t k = 0; k < 4; k++)
        compare_random(&lc, sizes[k], k, 0);
    for (size_t k = 0; k < 4; k++)
        compare_random(&lc, sizes[k], 4 + k, 1);
    lua_close(&lc);
}
END_TEST

START_TEST(test_lua_random_near_n)
{
    lua_conn_t lc;
    if (!lua_open(&lc, driver))
        return;
    rng_state = 31337;
    for (size_t k = 0; k < 2000; k++)
        compare_random(&lc, 1 + rng_below(200), k, 1);
    lua_close(&lc);
}
END_TEST

START_TEST(test_lua_ewma)
{
    lua_conn_t lc;
    if (!lua_open(&lc, driver))
        return;
    enum { BATCH = 2000 };
    static uint32_t in[BATCH][3], want[BATCH];
    static const uint32_t edge[][3] = {
        {0, ONE, 32768}, {1, 0, 32768}, {100, 0, 1}, {3, 10, 0}, {3, 10, UINT32_MAX},
        {UINT32_MAX, UINT32_MAX, 30000}, {0, UINT32_MAX, 65536}, {ONE, 0, 1},
        {ONE - 1, ONE, 65535}, {7, 7, 12345},
    };
    rng_state = 99;
    for (size_t round = 0; round < 10; round++) {
        for (size_t i = 0; i < BATCH; i++) {
            if (round == 0 && i < sizeof edge / sizeof edge[0]) {
                memcpy(in[i], edge[i], sizeof in[i]);
            } else {
                in[i][0] = rng() & 7 ? rng_below(ONE + 1) : (uint32_t)rng();
                in[i][1] = rng() & 7 ? rng_below(ONE + 1) : (uint32_t)rng();
                in[i][2] = rng() & 7 ? rng_below(65537) : (uint32_t)rng();
            }
            want[i] = rl__share_ewma(in[i][0], in[i][1], in[i][2]);
        }
        args_t a;
        args_init(&a, lc.sha, 1 + 3 * BATCH);
        args_str(&a, "ewma");
        for (size_t i = 0; i < BATCH; i++)
            for (size_t j = 0; j < 3; j++)
                args_u(&a, in[i][j]);
        redisReply *r = args_call(lc.c, &a);
        expect_ints(r, want, BATCH, "ewma", round);
        freeReplyObject(r);
    }
    lua_close(&lc);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("share_lua");
    TCase *t = tcase_create("lua_vs_c");
    /* Unchecked: runs in the runner process, so the server is stopped by
     * PID even when a test fails or times out in its forked child. */
    rl_test_redis_fixture(t);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_lua_is_embeddable);
    tcase_add_test(t, test_lua_hand_cases);
    tcase_add_test(t, test_lua_random_small);
    tcase_add_test(t, test_lua_random_big);
    tcase_add_test(t, test_lua_random_near_n);
    tcase_add_test(t, test_lua_ewma);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return rl_test_run(suite());
}

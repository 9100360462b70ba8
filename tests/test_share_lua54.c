/* SPDX-License-Identifier: MIT */
/*
 * src/lua/share.lua on Lua 5.4 (integer and float subtypes: Dragonfly's
 * Lua, and what a future Valkey may run) against src/sync/share.c, as
 * tests/test_share_lua.c does on Redis's Lua 5.1. Every result must be the
 * C value and an integer subtype: a float would print as "3.0" where an
 * engine turns a number into a command argument or a reply, so the
 * scripts' arithmetic must not depend on the number type. Also exact.lua's
 * bucket refill arithmetic (idiv on big products) in 5.4 against the same
 * floor in C.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sync/share.h"
#include "testutil.h"

#ifdef RL_HAVE_LUA54
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#ifdef RL_SOURCE_DIR
#define LUA_DIR RL_SOURCE_DIR "/src/lua/"
#else
#define LUA_DIR "src/lua/"
#endif

#define ONE RL_SHARE_ONE

/* Run after share.lua, in its chunk, so its locals are in scope: exposes
 * the functions under test as globals (plain Lua here, no sandbox). */
static const char driver[] =
    "\nshare_test = {compute = share_compute, ewma = share_ewma, idiv = share_idiv}\n";

/* exact.lua's idiv, as the script has it (it is local there too). */
static const char exact_idiv[] =
    "local function idiv(a, b)\n"
    "  local q = math.floor(a / b)\n"
    "  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end\n"
    "  return q\n"
    "end\n"
    "exact_idiv = idiv\n";

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + sizeof driver);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
    memcpy(buf + len, driver, sizeof driver);
    fclose(f);
    return buf;
}

static lua_State *open_lua(void)
{
    lua_State *L = luaL_newstate();
    ck_assert_ptr_nonnull(L);
    luaL_openlibs(L);
    char *src = read_file(LUA_DIR "share.lua");
    ck_assert_msg(luaL_dostring(L, src) == LUA_OK, "share.lua: %s", lua_tostring(L, -1));
    free(src);
    ck_assert_msg(luaL_dostring(L, exact_idiv) == LUA_OK, "%s", lua_tostring(L, -1));
    return L;
}

/* The integer at the top of the stack, which must be of integer subtype. */
static long long pop_int(lua_State *L, const char *what, size_t i)
{
    REQUIRE(lua_isinteger(L, -1), "%s[%zu] is a %s (%s), not an integer", what, i,
            luaL_typename(L, -1), lua_tostring(L, -1));
    long long v = (long long)lua_tointeger(L, -1);
    lua_pop(L, 1);
    return v;
}

static void push_fn(lua_State *L, const char *name)
{
    lua_getglobal(L, "share_test");
    lua_getfield(L, -1, name);
    lua_remove(L, -2);
}

static uint64_t rng_state;
static uint32_t rng_below(uint64_t n) { return (uint32_t)(next_u64(&rng_state) % n); }

static void compare(lua_State *L, const rl_share_params_t *p, const uint32_t *d, size_t n)
{
    uint32_t *rate = calloc(n + 1, sizeof *rate), *burst = calloc(n + 1, sizeof *burst);
    ck_assert(rate != NULL && burst != NULL);
    ck_assert_int_eq(rl__share_compute(p, d, n, rate, burst), 0);
    push_fn(L, "compute");
    lua_Integer args[5] = {p->burst, p->reserve_q, p->over_q, p->gain_q16, p->max_cut_q};
    for (int i = 0; i < 5; i++)
        lua_pushinteger(L, args[i]);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushinteger(L, d[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    REQUIRE(lua_pcall(L, 6, 2, 0) == LUA_OK, "share_compute: %s", lua_tostring(L, -1));
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, -2, (lua_Integer)i + 1);
        long long v = pop_int(L, "rate", i);
        REQUIRE(v == rate[i], "n %zu burst %u: rate[%zu] Lua %lld, C %u", n, p->burst, i, v,
                rate[i]);
        lua_rawgeti(L, -1, (lua_Integer)i + 1);
        v = pop_int(L, "tokens", i);
        REQUIRE(v == burst[i], "n %zu burst %u: tokens[%zu] Lua %lld, C %u", n, p->burst, i, v,
                burst[i]);
    }
    lua_pop(L, 2);
    free(rate);
    free(burst);
}

START_TEST(share_matches_c_on_lua54)
{
    static const uint32_t bursts[] = {0, 1, 2, 3, 7, 10, 100, 1000000000, UINT32_MAX};
    lua_State *L = open_lua();
    rng_state = 54;
    for (unsigned round = 0; round < 3000; round++) {
        size_t n = 1 + rng_below(round % 10 == 0 ? 300 : 12);
        uint32_t *d = calloc(n, sizeof *d);
        ck_assert_ptr_nonnull(d);
        int mix = (int)rng_below(5);
        for (size_t i = 0; i < n; i++)
            d[i] = mix == 0   ? 0
                   : mix == 1 ? rng_below(64)
                   : mix == 2 ? ONE + rng_below(UINT32_MAX - ONE)
                              : rng_below(ONE + 1);
        rl_share_params_t p;
        rl__share_params_init(&p);
        p.burst = rng_below(2) ? bursts[rng_below(9)] : (uint32_t)(n + rng_below(7));
        p.reserve_q = rng_below(2) ? RL_SHARE_RESERVE_DEFAULT : rng_below(UINT64_C(2) * ONE);
        p.over_q = rng_below(2) ? 0 : (uint32_t)next_u64(&rng_state);
        p.gain_q16 = rng_below(2) ? RL_SHARE_GAIN_DEFAULT : (uint32_t)next_u64(&rng_state) >> 12;
        compare(L, &p, d, n);
        free(d);
    }
    lua_close(L);
}
END_TEST

START_TEST(ewma_matches_c_on_lua54)
{
    lua_State *L = open_lua();
    rng_state = 5;
    for (unsigned i = 0; i < 20000; i++) {
        uint32_t prev = rng_below(ONE + 1), sample = i % 3 ? rng_below(ONE + 1) : prev + 1;
        uint32_t alpha = i % 5 ? rng_below(65537) : 1;
        push_fn(L, "ewma");
        lua_pushinteger(L, prev);
        lua_pushinteger(L, sample);
        lua_pushinteger(L, alpha);
        REQUIRE(lua_pcall(L, 3, 1, 0) == LUA_OK, "share_ewma: %s", lua_tostring(L, -1));
        long long v = pop_int(L, "ewma", i);
        uint32_t want = rl__share_ewma(prev, sample, alpha);
        REQUIRE(v == want, "ewma(%u, %u, %u): Lua %lld, C %u", prev, sample, alpha, v, want);
    }
    lua_close(L);
}
END_TEST

/* The bucket's refill: floor(acc / per) for acc, per below 2^53 (exact.lua's
 * idiv and report.lua's share_idiv), integers on 5.4 as on 5.1's doubles. */
START_TEST(bucket_division_matches_c_on_lua54)
{
    lua_State *L = open_lua();
    rng_state = 53;
    for (unsigned i = 0; i < 50000; i++) {
        uint64_t per = 1 + next_u64(&rng_state) % (i % 2 ? UINT64_C(1) << 40 : 1000000);
        uint64_t acc = next_u64(&rng_state) % (UINT64_C(1) << 53);
        if (i % 7 == 0)
            acc = acc / per * per - (i % 14 == 0); /* on and just below a multiple */
        for (int f = 0; f < 2; f++) {
            if (f == 0) {
                lua_getglobal(L, "exact_idiv");
            } else {
                push_fn(L, "idiv");
            }
            lua_pushinteger(L, (lua_Integer)acc);
            lua_pushinteger(L, (lua_Integer)per);
            REQUIRE(lua_pcall(L, 2, 1, 0) == LUA_OK, "idiv: %s", lua_tostring(L, -1));
            long long v = pop_int(L, f ? "share_idiv" : "idiv", i);
            REQUIRE((uint64_t)v == acc / per, "%s(%llu, %llu): Lua %lld, C %llu",
                    f ? "share_idiv" : "idiv", (unsigned long long)acc,
                    (unsigned long long)per, v, (unsigned long long)(acc / per));
        }
    }
    lua_close(L);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("share_lua54");
    TCase *tc = tcase_create("lua54");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, share_matches_c_on_lua54);
    tcase_add_test(tc, ewma_matches_c_on_lua54);
    tcase_add_test(tc, bucket_division_matches_c_on_lua54);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }

#else

int main(void)
{
    /* ctest's SKIP_RETURN_CODE: configured without liblua5.4-dev. */
    printf("test_share_lua54: skipped: built without liblua5.4 (install liblua5.4-dev)\n");
    return 77;
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Hardening: what an attacker (or a hostile environment) can throw at the
 * limiter and what must hold anyway.
 *
 * - memory: a flood of unique keys far past max_keys costs no memory beyond
 *   the table allocated at rl_open; a key that was over its limit before the
 *   flood is still limited after it; a limit's own max_keys keeps a flood on
 *   it from touching other limits' keys.
 * - numbers: over the whole accepted (rate, burst, cost) range and clock
 *   spans up to 2^62 ns, a bucket never admits more than burst + rate x
 *   elapsed, never reports more than its burst, never a wait longer than a
 *   whole refill; out-of-range limits are RL_ERANGE.
 * - clock jumps (the injectable clock): back 1 h under load creates no
 *   tokens, forward 1 h at most one burst.
 * - bad inputs: every public function, given NULL, zero, oversized,
 *   negative or malformed arguments, returns its error and changes nothing.
 * - libfaketime (RL_FAKETIME=1): the built-in clocks jumped under the whole
 *   process; see faketime_child() and docs/hardening.md.
 * - regressions: reproducers of library bugs, each guarding its fix; they
 *   run by default in every build (TCase regressions; docs/hardening.md,
 *   "Findings in src/").
 *
 * Everything is deterministic: fixed PRNG seeds, fixed key secrets, the
 * injectable clock; no assertion depends on how fast the machine is. Sizes
 * shrink under valgrind and the sanitizers (scale()); RL_SOAK=1 runs the
 * full 10M-key flood whatever the build.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "testutil.h"
#include "instance.h"

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define RL_HAVE_VALGRIND_H 1
#endif
#endif

/* ------------------------------------------------------------ helpers */


/* Uniform in [lo, hi] (hi - lo < 2^64 - 1). */
static uint64_t uniform(uint64_t *s, uint64_t lo, uint64_t hi)
{
    return lo + next_u64(s) % (hi - lo + 1);
}

static unsigned bits(uint64_t v) { return v ? 64u - (unsigned)__builtin_clzll(v) : 0; }

/* Roughly log-uniform in [lo, hi] (lo >= 1): a bit length drawn uniformly,
 * then a value of that length, so every order of magnitude gets its turn. */
static uint64_t log_uniform(uint64_t *s, uint64_t lo, uint64_t hi)
{
    unsigned k = (unsigned)uniform(s, bits(lo), bits(hi));
    uint64_t a = UINT64_C(1) << (k - 1), b = k == 64 ? UINT64_MAX : (UINT64_C(1) << k) - 1;
    a = a < lo ? lo : a;
    b = b > hi ? hi : b;
    return uniform(s, a, b);
}

static int running_on_valgrind(void)
{
#ifdef RL_HAVE_VALGRIND_H
    if (RUNNING_ON_VALGRIND)
        return 1;
#endif
    const char *pre = getenv("LD_PRELOAD");
    return pre != NULL && strstr(pre, "vgpreload") != NULL;
}

static int sanitized(void)
{
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
    return 1;
#else
    return 0;
#endif
}

/* Loop divisor: valgrind ~50x slower, TSan ~10x, ASan ~3x. */
static unsigned scale(void)
{
    const char *e = getenv("RL_TEST_SCALE");
    if (e != NULL && atoi(e) > 0)
        return (unsigned)atoi(e);
    if (running_on_valgrind())
        return 64;
#if defined(__SANITIZE_THREAD__)
    return 16;
#elif defined(__SANITIZE_ADDRESS__)
    return 4;
#else
    return 1;
#endif
}

static int env_on(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

static const char test_secret[] = "test_hardening fixed secret 0123456789";

/* An instance on a test clock with a fixed key secret (reproducible). */
static rl_t *open_inst(rl_test_clock_t *clk, uint32_t max_keys)
{
    rl_config_t c;
    rl_config_init(&c);
    c.clock = rl_test_clock_fn;
    c.clock_ud = clk;
    c.clock_coarse_tick_ns = clk->coarse_tick_ns;
    c.key_secret = test_secret;
    c.key_secret_len = sizeof test_secret - 1;
    c.max_keys = max_keys;
    rl_t *rl = NULL;
    int rc = rl_open(&rl, &c);
    ck_assert_msg(rc == 0, "rl_open: %s", rl_err_name(rc));
    return rl;
}

static void clock_set(rl_test_clock_t *c, uint64_t ns)
{
    /* relaxed: time is data; checkers only need some recent value. */
    atomic_store_explicit(&c->precise_ns, ns, memory_order_relaxed);
}

static uint64_t clock_get(rl_test_clock_t *c)
{
    /* relaxed: as clock_set. */
    return atomic_load_explicit(&c->precise_ns, memory_order_relaxed);
}

static rl_decision_t peek(rl_t *rl, int id, const void *key, size_t len)
{
    rl_decision_t d;
    rl_decision_init(&d);
    int rc = rl_check(rl, id, key, len, 0, &d);
    REQUIRE(rc == RL_ALLOW || rc == RL_DENY, "peek: %s", rl_err_name(rc));
    return d;
}

static rl_limit_stats_t lstats(rl_t *rl, int id)
{
    rl_limit_stats_t s;
    rl_limit_stats_init(&s);
    ck_assert_int_eq(rl_limit_stats(rl, id, &s), 0);
    return s;
}

/* Resident set size in bytes, from /proc/self/statm (pages). */
static uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    ck_assert_ptr_nonnull(f);
    unsigned long size = 0, resident = 0;
    ck_assert_int_eq(fscanf(f, "%lu %lu", &size, &resident), 2);
    fclose(f);
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

#define MIB(x) ((double)(x) / 1048576.0)

/* ----------------------------------------------------- (a) memory bound */

/* Flood key number i: 16 pseudo-random bytes (distinct for all practical
 * purposes), regenerated from i so the test itself stores nothing. */
static void flood_key(uint64_t tag, uint64_t i, unsigned char key[16])
{
    uint64_t s = tag ^ (i * UINT64_C(0xd1342543de82ef95));
    uint64_t a = next_u64(&s), b = next_u64(&s);
    memcpy(key, &a, 8);
    memcpy(key + 8, &b, 8);
}

START_TEST(flood_memory_bound)
{
    /*
     * 10M unique keys against max_keys = 1M: 10x the table, every key new.
     * The flood limit's keys are idle (full again) 1 us after their check,
     * so the table reclaims them as it goes; the clock advances 1 us per
     * check. Full size in a plain build (~20 s); scale() shrinks it under
     * the sanitizers and valgrind; RL_SOAK=1 forces the full size.
     */
    const int soak = env_on("RL_SOAK");
    const unsigned div = soak ? 1 : scale();
    const uint32_t max_keys = 1000000u / div;
    const uint64_t nflood = UINT64_C(10000000) / div;
    const uint64_t ncapped = 1000000u / div;

    uint64_t rss0 = rss_bytes();
    rl_test_clock_t clk = {UINT64_C(5000000000), 0};
    rl_t *rl = open_inst(&clk, max_keys);
    int flood = rl_test_add(rl, "name=flood rate=1000000/s burst=2");
    int victim = rl_test_add(rl, "name=victim rate=1/h burst=3");
    int capped = rl_test_add(rl, "name=capped rate=1/h burst=1 max_keys=1000");
    rl_stats_t st;
    rl_stats_init(&st);
    ck_assert_int_eq(rl_stats(rl, &st), 0);
    const uint64_t table = st.table_bytes;
    uint64_t rss_open = rss_bytes();

    /* Before the flood: a key over its limit, and bystanders with one token
     * used, on the victim limit. */
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(rl_check(rl, victim, "victim", 6, 1, NULL), RL_ALLOW);
    ck_assert_int_eq(rl_check(rl, victim, "victim", 6, 1, NULL), RL_DENY);
    char bk[32];
    for (int i = 0; i < 100; i++) {
        int n = snprintf(bk, sizeof bk, "bystander-%d", i);
        ck_assert_int_eq(rl_check(rl, victim, bk, (size_t)n, 1, NULL), RL_ALLOW);
    }

    uint64_t rss_max = rss_open, rss_mid = 0, noslot = 0;
    unsigned char key[16];
    for (uint64_t i = 0; i < nflood; i++) {
        rl_test_clock_advance(&clk, 1000);
        flood_key(0xF100D, i, key);
        rl_decision_t d;
        rl_decision_init(&d);
        int rc = rl_check(rl, flood, key, sizeof key, 1, &d);
        /* A fresh key has a full bucket; a key with no slot shares the
         * overflow bucket, which refills at the same 1/us: admitted too. */
        REQUIRE(rc == RL_ALLOW, "flood key %llu: %s", (unsigned long long)i, rl_err_name(rc));
        noslot += (d.flags & RL_FLAG_NOSLOT) != 0;
        if ((i + 1) % (nflood / 20) == 0) {
            uint64_t r = rss_bytes();
            rss_max = r > rss_max ? r : rss_max;
            if (i + 1 == nflood / 2)
                rss_mid = r;
        }
    }
    uint64_t rss_end = rss_bytes();
    ck_assert_int_eq(rl_stats(rl, &st), 0);
    printf("test_hardening: flood of %llu keys, max_keys %u: table %.1f MiB; RSS before open "
           "%.1f MiB, after open +%.1f MiB, peak +%.1f MiB, mid +%.1f MiB, end +%.1f MiB; "
           "keys_live %llu, reclaimed %llu, no slot %llu\n",
           (unsigned long long)nflood, max_keys, MIB(table), MIB(rss0), MIB(rss_open - rss0),
           MIB(rss_max - rss0), MIB(rss_mid - rss0), MIB(rss_end - rss0),
           (unsigned long long)st.keys_live, (unsigned long long)st.reclaimed,
           (unsigned long long)noslot);
    fflush(stdout);

    /* Only an uninstrumented process's RSS is the library's: ASan and TSan
     * add shadow memory per byte touched, valgrind its own heap. */
    if (!sanitized() && !running_on_valgrind()) {
        /* The table + 10%, and 1 MiB for the fixed-size rest of rl_open
         * (the limit registry: 256 slots of ~1.6 KiB), which matters only
         * when RL_TEST_SCALE shrinks the table. */
        ck_assert_uint_le(rss_max - rss0, table + table / 10 + (UINT64_C(1) << 20));
        /* Flat in the second half: nothing is allocated per key. */
        ck_assert_uint_le(rss_end - rss_mid, table / 100 + (UINT64_C(1) << 20));
    }
    ck_assert_uint_le(st.keys_live, max_keys);
    ck_assert_uint_ge(st.reclaimed, nflood - noslot - max_keys);

    /* The victim is still limited, the bystanders kept their state. */
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(rl_check(rl, victim, "victim", 6, 1, &d), RL_DENY);
    ck_assert_uint_eq(d.flags & RL_FLAG_NOSLOT, 0);
    ck_assert_uint_gt(d.retry_after_ms, 0);
    for (int i = 0; i < 100; i++) {
        int n = snprintf(bk, sizeof bk, "bystander-%d", i);
        ck_assert_uint_eq(peek(rl, victim, bk, (size_t)n).remaining, 2);
    }

    /* A flood on the capped limit (keys that never go idle): it gets its
     * 1000 slots and then its on_failure; nobody else is touched. */
    uint64_t victim_live = lstats(rl, victim).keys_live;
    rl_limit_stats_t before_flood = lstats(rl, flood);
    for (uint64_t i = 0; i < ncapped; i++) {
        flood_key(0xCA99ED, i, key);
        int rc = rl_check(rl, capped, key, sizeof key, 1, NULL);
        REQUIRE(rc == RL_ALLOW || rc == RL_DENY, "capped key %llu: %s", (unsigned long long)i,
                rl_err_name(rc));
    }
    rl_limit_stats_t cs = lstats(rl, capped);
    ck_assert_uint_le(cs.keys_live, 1000);
    ck_assert_uint_eq(cs.noslot, ncapped - cs.keys_live);
    ck_assert_uint_eq(lstats(rl, victim).keys_live, victim_live);
    ck_assert_uint_eq(lstats(rl, flood).admitted, before_flood.admitted);
    ck_assert_int_eq(rl_check(rl, victim, "victim", 6, 1, NULL), RL_DENY);
    for (int i = 0; i < 100; i++) {
        int n = snprintf(bk, sizeof bk, "bystander-%d", i);
        ck_assert_uint_eq(peek(rl, victim, bk, (size_t)n).remaining, 2);
    }
    rl_close(rl);
}
END_TEST

/* ---------------------------------------------------- (b) numeric safety */

#define NS_PER_MS UINT64_C(1000000)
#define PERIOD_MS_MAX (UINT64_C(30) * 86400 * 1000)
#define TAU_FP_MAX ((UINT64_C(4) * 36525 * 864 * 1000000000) << 4) /* 4 years, 1/16 ns */

/* The accepted range, restated from ratelimit.h (T rounded up to 1/16 ns,
 * as local/bucket.h documents). 1: valid, with *burst_eff and *tau_fp set. */
static int oracle_valid(uint64_t count, uint64_t period_ms, uint64_t burst, uint64_t *burst_eff,
                        unsigned __int128 *tau_fp)
{
    if (count == 0 || period_ms == 0 || period_ms > PERIOD_MS_MAX)
        return 0;
    unsigned __int128 period_ns = (unsigned __int128)period_ms * NS_PER_MS;
    if ((unsigned __int128)count * 10 > period_ns) /* faster than 100M/s */
        return 0;
    unsigned __int128 period_fp = period_ns * 16;
    unsigned __int128 t = (period_fp + count - 1) / count;
    uint64_t b = burst ? burst : count;
    if (b > UINT64_C(1000000000) || (unsigned __int128)b * t > TAU_FP_MAX)
        return 0;
    *burst_eff = b;
    *tau_fp = (unsigned __int128)b * t;
    return 1;
}

static void draw_limit(uint64_t *s, uint64_t *count, uint64_t *period_ms, uint64_t *burst)
{
    *period_ms = log_uniform(s, 1, PERIOD_MS_MAX);
    /* count from 1 up to the 100M/s ceiling for this period (and a little
     * past it, for the rejections). */
    uint64_t cmax = *period_ms * 100000;
    *count = log_uniform(s, 1, cmax + cmax / 8 + 1);
    switch (next_u64(s) % 4) {
    case 0: *burst = 0; break; /* one period's worth */
    case 1: *burst = 1; break;
    default: *burst = log_uniform(s, 1, UINT64_C(1200000000)); break;
    }
}

START_TEST(numeric_safety_properties)
{
    const unsigned rounds = 3000 / scale() + 20, steps = 300;
    uint64_t s = 0x5AFE;
    unsigned valid = 0, rejected = 0;
    for (unsigned round = 0; round < rounds; round++) {
        uint64_t count, period_ms, burst, b = 0;
        unsigned __int128 tau_fp = 0;
        draw_limit(&s, &count, &period_ms, &burst);
        int ok = oracle_valid(count, period_ms, burst, &b, &tau_fp);

        /* A raw clock starting anywhere, wrap-around of uint64 included:
         * only differences matter to the instance. */
        rl_test_clock_t clk = {next_u64(&s), 0};
        const uint64_t start = clock_get(&clk);
        rl_t *rl = open_inst(&clk, 16);
        rl_limit_t lim;
        rl_limit_init(&lim);
        snprintf(lim.name, sizeof lim.name, "r%u", round);
        lim.rate.count = count;
        lim.rate.period_ms = period_ms;
        lim.burst = burst;
        lim.mode = RL_MODE_LOCAL;
        int id = rl_limit_add(rl, &lim);
        /* The same limit as text: the parser accepts exactly what the
         * struct path accepts. */
        char spec[160], err[200];
        snprintf(spec, sizeof spec, "name=t rate=%llu/%llums%s%llu", (unsigned long long)count,
                 (unsigned long long)period_ms, burst ? " burst=" : "",
                 (unsigned long long)burst);
        if (!burst)
            snprintf(spec, sizeof spec, "name=t rate=%llu/%llums", (unsigned long long)count,
                     (unsigned long long)period_ms);
        rl_limit_t parsed;
        int prc = rl_limit_parse(&parsed, spec, err, sizeof err);
        if (!ok) {
            ck_assert_msg(id == RL_ERANGE, "%s: add gave %s, want RL_ERANGE", spec,
                          rl_err_name(id));
            ck_assert_msg(prc == RL_ERANGE, "%s: parse gave %s (%s)", spec, rl_err_name(prc),
                          err);
            rejected++;
            rl_close(rl);
            continue;
        }
        ck_assert_msg(id >= 0, "%s: add gave %s", spec, rl_err_name(id));
        ck_assert_msg(prc == 0, "%s: parse gave %s (%s)", spec, rl_err_name(prc), err);
        valid++;

        /* ceil(tau / 1 ms): the longest any wait can honestly be. */
        const uint64_t refill_ms = (uint64_t)((tau_fp + 16 * NS_PER_MS - 1) / (16 * NS_PER_MS));
        const uint64_t refill_ns = (uint64_t)((tau_fp + 15) / 16);
        uint64_t admitted = 0;
        for (unsigned st = 0; st < steps; st++) {
            uint64_t elapsed = clock_get(&clk) - start;
            /* Move the clock: not at all, by a fraction of a token, by a
             * few ms, or by 2^k ns up to the 2^62 ns this test spans. */
            uint64_t room = (UINT64_C(1) << 62) - elapsed, delta;
            switch (next_u64(&s) % 6) {
            case 0: delta = 0; break;
            case 1: delta = next_u64(&s) % 1000; break;
            case 2: delta = next_u64(&s) % (100 * NS_PER_MS); break;
            case 3: delta = refill_ns + NS_PER_MS; break;
            case 4: delta = UINT64_C(1) << (next_u64(&s) % 63); break;
            default: delta = next_u64(&s) % (refill_ns + 1); break;
            }
            delta = delta < room ? delta : room;
            rl_test_clock_advance(&clk, delta);
            elapsed += delta;

            uint32_t cost;
            switch (next_u64(&s) % 5) {
            case 0: cost = 0; break;
            case 1: cost = 1; break;
            case 2: cost = (uint32_t)b; break;
            default: cost = (uint32_t)uniform(&s, 0, b); break;
            }
            rl_decision_t d;
            rl_decision_init(&d);
            int rc = rl_check(rl, id, "k", 1, cost, &d);
            /* Past instance time's horizon (2^58 ns from an origin of 1 s:
             * ratelimit.h, rl_clock_fn) a deny is RL_ERANGE, and only there. */
            REQUIRE(rc != RL_ERANGE || elapsed + UINT64_C(1000000000) >= UINT64_C(1) << 58,
                    "%s: RL_ERANGE %llu ns after the open", spec, (unsigned long long)elapsed);
            if (rc == RL_ERANGE)
                rc = RL_DENY;
            REQUIRE(rc == RL_ALLOW || rc == RL_DENY, "%s: %s", spec, rl_err_name(rc));
            if (rc == RL_ALLOW && cost > 0)
                admitted += cost;
            REQUIRE(d.burst == b && d.remaining <= b, "%s: remaining %llu of burst %llu", spec,
                    (unsigned long long)d.remaining, (unsigned long long)d.burst);
            REQUIRE(d.reset_ms <= refill_ms + 1 && d.retry_after_ms <= refill_ms + 1,
                    "%s: reset %llu ms, retry %llu ms, refill %llu ms", spec,
                    (unsigned long long)d.reset_ms, (unsigned long long)d.retry_after_ms,
                    (unsigned long long)refill_ms);
            REQUIRE(rc != RL_ALLOW || d.retry_after_ms == 0, "%s: allowed with a retry", spec);
            /* admitted <= burst + rate x elapsed (+1 for rounding), in
             * exact integers: admitted x period <= (burst+1) x period +
             * count x elapsed. */
            unsigned __int128 lhs = (unsigned __int128)admitted * period_ms * NS_PER_MS;
            unsigned __int128 rhs = (unsigned __int128)(b + 1) * period_ms * NS_PER_MS +
                                    (unsigned __int128)count * elapsed;
            REQUIRE(lhs <= rhs, "%s: admitted %llu after %llu ns", spec,
                    (unsigned long long)admitted, (unsigned long long)elapsed);
            /* And time is not frozen: a whole refill later the bucket is
             * full, while instance time has not saturated (2^59 ns). */
            if (delta >= refill_ns + NS_PER_MS && elapsed < (UINT64_C(1) << 58)) {
                REQUIRE(rc == RL_ALLOW && d.remaining + cost == b,
                        "%s: not full a whole refill later (remaining %llu, cost %u)", spec,
                        (unsigned long long)d.remaining, cost);
            }
        }
        /* An impossible cost is refused, not admitted. */
        if (b < UINT32_MAX)
            ck_assert_int_eq(rl_check(rl, id, "k", 1, (uint32_t)b + 1, NULL), RL_ECOST);
        rl_close(rl);
    }
    printf("test_hardening: numeric properties: %u valid limits x %u steps, %u rejected "
           "as out of range\n",
           valid, steps, rejected);
    ck_assert_uint_gt(valid, rounds / 4);
    ck_assert_uint_gt(rejected, rounds / 20);
}
END_TEST

START_TEST(out_of_range_specs)
{
    /* Each just past a documented bound, or not a number the field can
     * take: RL_ERANGE, never a silently clamped limit. */
    static const char *const specs[] = {
        "name=a rate=0/s",
        "name=a rate=1/0s",
        "name=a rate=1/2592001s",           /* period over 30 days */
        "name=a rate=1/31d",
        "name=a rate=100000001/s",          /* over 100M/s */
        "name=a rate=100001/ms",
        "name=a rate=18446744073709551616/s", /* past uint64 */
        "name=a rate=1/18446744073709551615ms",
        "name=a rate=-1/s",
        "name=a rate=-0/s",
        "name=a rate=nan/s",
        "name=a rate=NaN/s",
        "name=a rate=inf/s",
        "name=a rate=-Infinity/s",
        "name=a rate=1/s burst=0",
        "name=a rate=1/s burst=1000000001",
        "name=a rate=1/s burst=-3",
        "name=a rate=1/s burst=inf",
        "name=a rate=1/30d burst=49",       /* refill 49 x 30 d > 4 years */
        "name=a rate=1/h burst=35065",      /* 35065 h > 4 years */
        "name=a rate=1/s degraded_rate=0/s",
        "name=a rate=1/s degraded_rate=1/31d",
        "name=a rate=1/s max_keys=0",
        "name=a rate=1/s max_keys=4294967296",
        "name=a rate=1/s shadow=2",
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        rl_limit_t l;
        char err[256] = "";
        int rc = rl_limit_parse(&l, specs[i], err, sizeof err);
        ck_assert_msg(rc == RL_ERANGE, "%s: %s (%s)", specs[i], rl_err_name(rc), err);
        ck_assert_msg(err[0] != '\0', "%s: no message", specs[i]);
    }
    /* The bounds themselves are accepted. */
    static const char *const edges[] = {
        "name=a rate=100000000/s burst=1000000000",
        "name=a rate=1/30d burst=48",
        "name=a rate=1/2592000s",
        "name=a rate=1/h burst=35064",
        "name=a rate=1/ms",
        "name=a rate=1/s max_keys=4294967295",
    };
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        rl_limit_t l;
        char err[256] = "";
        ck_assert_msg(rl_limit_parse(&l, edges[i], err, sizeof err) == 0, "%s: %s", edges[i],
                      err);
    }
}
END_TEST

/* ------------------------------------------------------ (c) clock jumps */

typedef struct loader {
    rl_t *rl;
    int ids[2];
    _Atomic int *stop;
    _Atomic int *pause;  /* main asks the loaders to hold still */
    _Atomic int *parked; /* loaders holding still */
    _Atomic uint64_t admitted[2];
} loader_t;

static void *loader_run(void *arg)
{
    loader_t *l = arg;
    const char *keys[] = {"hot", "warm"};
    unsigned n = 0;
    /* seq_cst on the handshake flags: simple, and off the measured path. */
    while (!atomic_load(l->stop)) {
        if (atomic_load(l->pause)) {
            atomic_fetch_add(l->parked, 1);
            while (atomic_load(l->pause) && !atomic_load(l->stop))
                sched_yield();
            atomic_fetch_sub(l->parked, 1);
            continue;
        }
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 2; j++)
                if (rl_check(l->rl, l->ids[j], keys[k], strlen(keys[k]), 1, NULL) == RL_ALLOW)
                    atomic_fetch_add(&l->admitted[j], 1);
        if (++n % 16 == 0)
            sched_yield(); /* let the clock thread move on a 2-core box */
    }
    return NULL;
}

/* Stop the loaders between two checks (a jump happens in between, never
 * while a check is in flight: see regress_stale_reading_mints_no_token for why). */
static void hold(loader_t *l, int nthreads)
{
    atomic_store(l->pause, 1);
    while (atomic_load(l->parked) < nthreads)
        sched_yield();
}

static void release(loader_t *l) { atomic_store(l->pause, 0); }

START_TEST(clock_jumps_under_load)
{
    enum { THREADS = 2, STEPS = 2000 };
    const uint64_t step_ns = 100000; /* 100 us per step */
    const uint64_t hour = UINT64_C(3600) * 1000000000u;
    rl_test_clock_t clk = {UINT64_C(10) * hour, 0};
    rl_t *rl = open_inst(&clk, 1024);
    /* One limit on each clock source (slack tau - T over/under the tick). */
    int ids[2] = {rl_test_add(rl, "name=c rate=1000/s burst=50"),
                  rl_test_add(rl, "name=p rate=200/s burst=1")};
    const uint64_t rate[2] = {1000, 200}, burst[2] = {50, 1};
    const int keys = 2; /* each loader alternates two keys per limit */
    _Atomic int stop = 0, pause = 0, parked = 0;
    loader_t l = {rl, {ids[0], ids[1]}, &stop, &pause, &parked, {0, 0}};
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, loader_run, &l), 0);

    uint64_t forward = 0; /* the clock's forward movement, jumps excluded */
    uint64_t extra_bursts = 0;
    for (int phase = 0; phase < 3; phase++) {
        for (int i = 0; i < STEPS; i++) {
            rl_test_clock_advance(&clk, step_ns);
            forward += step_ns;
            if (i % 8 == 0)
                sched_yield();
        }
        hold(&l, THREADS);
        /* Bound so far: per key, burst (+ one burst per forward jump) +
         * rate x forward movement, + 1 for rounding. */
        for (int j = 0; j < 2; j++) {
            uint64_t got = atomic_load(&l.admitted[j]);
            uint64_t bound = (uint64_t)keys *
                             ((1 + extra_bursts) * burst[j] + rate[j] * forward / 1000000000u + 1);
            printf("test_hardening: clock jumps, phase %d, limit %s: admitted %llu, bound %llu\n",
                   phase, j ? "p" : "c", (unsigned long long)got, (unsigned long long)bound);
            ck_assert_uint_le(got, bound);
        }
        if (phase == 0) {
            /* Back 1 h: absorbed, no tokens, and time goes on (below). */
            clock_set(&clk, clock_get(&clk) - hour);
        } else if (phase == 1) {
            /* Forward 1 h (back where the raw clock was): every bucket may
             * refill once, no more. */
            clock_set(&clk, clock_get(&clk) + hour);
            extra_bursts++;
        }
        /* Not frozen after the jump: 100 ms later (two refills of c), a
         * full bucket. The first reading after the jump absorbs it (a step
         * the library has not seen cannot be told from the 100 ms after). */
        if (phase == 0) {
            peek(rl, ids[0], "cold", 4);
            peek(rl, ids[1], "cold", 4);
            rl_test_clock_advance(&clk, 100000000u);
            forward += 100000000u;
            ck_assert_uint_eq(peek(rl, ids[0], "cold", 4).remaining, burst[0]);
            ck_assert_uint_eq(peek(rl, ids[0], "hot", 3).remaining, burst[0]);
        }
        release(&l);
    }
    atomic_store(&stop, 1);
    release(&l);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    rl_close(rl);
}
END_TEST

/* ------------------------------------------------ (d) bad-input matrix */

/* Everything a caller can observe of an instance, without changing it. */
typedef struct snapshot {
    rl_decision_t peeks[3][4];
    rl_stats_t stats;
    rl_limit_stats_t lstats[3];
    rl_limit_t defs[3];
} snapshot_t;

typedef struct matrix {
    rl_test_clock_t clk;
    rl_t *rl;
    int ids[3];
    int stale;
} matrix_t;

static const char *const mkeys[4] = {"alice", "bob", "k\0nul", "x"};
static const size_t mlens[4] = {5, 3, 5, 1};

static void snap(matrix_t *m, snapshot_t *s)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < 3; i++) {
        for (int k = 0; k < 4; k++)
            s->peeks[i][k] = peek(m->rl, m->ids[i], mkeys[k], mlens[k]);
        s->lstats[i] = lstats(m->rl, m->ids[i]);
        rl_limit_init(&s->defs[i]);
        ck_assert_int_eq(rl_limit_get(m->rl, m->ids[i], &s->defs[i]), 0);
    }
    rl_stats_init(&s->stats);
    ck_assert_int_eq(rl_stats(m->rl, &s->stats), 0);
}

static void same(const snapshot_t *a, const snapshot_t *b, const char *what)
{
    for (int i = 0; i < 3; i++) {
        for (int k = 0; k < 4; k++) {
            const rl_decision_t *x = &a->peeks[i][k], *y = &b->peeks[i][k];
            ck_assert_msg(x->remaining == y->remaining && x->reset_ms == y->reset_ms &&
                              x->allowed == y->allowed,
                          "%s changed limit %d key %d", what, i, k);
        }
        ck_assert_msg(memcmp(&a->lstats[i], &b->lstats[i], sizeof a->lstats[i]) == 0,
                      "%s changed limit %d's counters", what, i);
        ck_assert_msg(memcmp(&a->defs[i], &b->defs[i], sizeof a->defs[i]) == 0,
                      "%s changed limit %d's definition", what, i);
    }
    ck_assert_msg(memcmp(&a->stats, &b->stats, sizeof a->stats) == 0,
                  "%s changed the instance counters", what);
}

/* Run one bad call: it must return `want` and leave everything as it was. */
#define EXPECT(m, want, call)                                                            \
    do {                                                                                 \
        snapshot_t before_, after_;                                                      \
        snap((m), &before_);                                                             \
        int got_ = (call);                                                               \
        ck_assert_msg(got_ == (want), "%s: got %s, want %s", #call, rl_err_name(got_),    \
                      rl_err_name(want));                                                \
        snap((m), &after_);                                                              \
        same(&before_, &after_, #call);                                                  \
    } while (0)

static void matrix_open(matrix_t *m)
{
    memset(m, 0, sizeof *m);
    clock_set(&m->clk, UINT64_C(7000000000));
    m->rl = open_inst(&m->clk, 256);
    m->ids[0] = rl_test_add(m->rl, "name=a rate=10/s burst=5");
    m->ids[1] = rl_test_add(m->rl, "name=b rate=1/h burst=2 on_failure=closed max_keys=3");
    m->ids[2] = rl_test_add(m->rl, "name=c rate=100/s burst=100 shadow=1");
    m->stale = rl_test_add(m->rl, "name=gone rate=1/s");
    ck_assert_int_eq(rl_limit_remove(m->rl, m->stale), 0);
    /* Some state worth protecting. */
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++)
            ck_assert_int_ge(rl_check(m->rl, m->ids[i], mkeys[k], mlens[k], 1, NULL), 0);
}

START_TEST(bad_input_checks)
{
    matrix_t m;
    matrix_open(&m);
    rl_t *rl = m.rl;
    int a = m.ids[0];
    rl_decision_t d;
    rl_decision_init(&d);
    char big[RL_MAX_KEY_LEN + 1];
    memset(big, 'x', sizeof big);

    EXPECT(&m, RL_EINVAL, rl_check(NULL, a, "alice", 5, 1, &d));
    EXPECT(&m, RL_EINVAL, rl_check(rl, a, NULL, 5, 1, &d));
    EXPECT(&m, RL_EKEYLEN, rl_check(rl, a, NULL, 0, 1, &d));
    EXPECT(&m, RL_EKEYLEN, rl_check(rl, a, "alice", 0, 1, &d));
    EXPECT(&m, RL_EKEYLEN, rl_check(rl, a, big, sizeof big, 1, &d));
    EXPECT(&m, RL_EKEYLEN, rl_check(rl, a, big, SIZE_MAX, 1, &d));
    EXPECT(&m, RL_ENOTFOUND, rl_check(rl, m.stale, "alice", 5, 1, &d));
    EXPECT(&m, RL_ENOTFOUND, rl_check(rl, -1, "alice", 5, 1, &d));
    EXPECT(&m, RL_ENOTFOUND, rl_check(rl, 0, "alice", 5, 1, &d));
    EXPECT(&m, RL_ENOTFOUND, rl_check(rl, INT32_MAX, "alice", 5, 1, &d));
    EXPECT(&m, RL_ENOTFOUND, rl_check(rl, INT32_MIN, "alice", 5, 1, &d));
    EXPECT(&m, RL_ENOTFOUND, rl_check(rl, a + (1 << 12), "alice", 5, 1, &d)); /* next generation */
    EXPECT(&m, RL_ECOST, rl_check(rl, a, "alice", 5, 6, &d));
    EXPECT(&m, RL_ECOST, rl_check(rl, a, "alice", 5, UINT32_MAX, &d));
    ck_assert_int_eq(d.allowed, RL_DENY); /* an error never reads as an allow */
    d.size = 0;
    EXPECT(&m, RL_ESIZE, rl_check(rl, a, "alice", 5, 1, &d));
    d.size = offsetof(rl_decision_t, window_ms) - 1;
    EXPECT(&m, RL_ESIZE, rl_check(rl, a, "alice", 5, 1, &d));

    /* A decision larger than this library knows: the library writes only
     * what it knows; the tail is the caller's (checked with a peek, which
     * changes nothing either way). */
    struct {
        rl_decision_t d;
        unsigned char tail[32];
    } newer;
    rl_decision_init_sized(&newer.d, sizeof newer);
    memset(newer.tail, 0x5A, sizeof newer.tail);
    int rc = rl_check(rl, a, "alice", 5, 0, &newer.d);
    ck_assert(rc == RL_ESIZE || rc == RL_ALLOW || rc == RL_DENY);
    for (size_t i = 0; i < sizeof newer.tail; i++)
        ck_assert_uint_eq(newer.tail[i], 0x5A);

    EXPECT(&m, RL_EINVAL, rl_refund(NULL, a, "alice", 5, 1));
    EXPECT(&m, RL_EINVAL, rl_refund(rl, a, NULL, 5, 1));
    EXPECT(&m, RL_EKEYLEN, rl_refund(rl, a, "alice", 0, 1));
    EXPECT(&m, RL_EKEYLEN, rl_refund(rl, a, big, sizeof big, 1));
    EXPECT(&m, RL_ENOTFOUND, rl_refund(rl, m.stale, "alice", 5, 1));
    EXPECT(&m, RL_ENOTFOUND, rl_refund(rl, -7, "alice", 5, 1));
    /* A refund of a key that has no state, or of nothing: nothing to do. */
    EXPECT(&m, 0, rl_refund(rl, a, "never-seen", 10, 3));
    EXPECT(&m, 0, rl_refund(rl, a, "alice", 5, 0));
    rl_close(rl);
}
END_TEST

static void req(rl_request_t *r, int id, const char *key, size_t len, uint32_t cost)
{
    rl_request_init(r);
    r->limit = id;
    r->key = key;
    r->key_len = len;
    r->cost = cost;
}

START_TEST(bad_input_multi)
{
    matrix_t m;
    matrix_open(&m);
    rl_t *rl = m.rl;
    int a = m.ids[0], c = m.ids[2];
    rl_request_t r[3];
    rl_decision_t d[3];
    for (int i = 0; i < 3; i++)
        rl_decision_init(&d[i]);
    size_t bad = 99;

    /* A valid batch but for one request: nothing is charged, and the
     * index names the bad one. */
    static const struct {
        int which; /* 0 bad key, 1 bad id, 2 bad cost, 3 bad len, 4 bad size */
        int want;
    } cases[] = {{0, RL_EINVAL}, {1, RL_ENOTFOUND}, {2, RL_ECOST}, {3, RL_EKEYLEN}, {4, RL_ESIZE}};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        for (size_t pos = 0; pos < 3; pos++) {
            for (int i = 0; i < 3; i++)
                req(&r[i], i == 1 ? c : a, mkeys[i], mlens[i], 1);
            switch (cases[ci].which) {
            case 0: r[pos].key = NULL; break;
            case 1: r[pos].limit = m.stale; break;
            case 2: r[pos].cost = 1000; break;
            case 3: r[pos].key_len = RL_MAX_KEY_LEN + 1; break;
            default: r[pos].size = sizeof r[0] + 8; break;
            }
            bad = 99;
            EXPECT(&m, cases[ci].want, rl_check_multi(rl, r, 3, sizeof r[0], d, &bad));
            ck_assert_uint_eq(bad, pos);
            if (cases[ci].want != RL_ESIZE)
                for (int i = 0; i < 3; i++)
                    ck_assert_int_eq(d[i].allowed, RL_DENY);
        }
    }
    for (int i = 0; i < 3; i++)
        req(&r[i], a, mkeys[i], mlens[i], 1);
    EXPECT(&m, RL_EINVAL, rl_check_multi(NULL, r, 3, sizeof r[0], d, &bad));
    EXPECT(&m, RL_EINVAL, rl_check_multi(rl, NULL, 3, sizeof r[0], d, &bad));
    EXPECT(&m, RL_ERANGE, rl_check_multi(rl, r, RL_MULTI_MAX + 1, sizeof r[0], NULL, NULL));
    EXPECT(&m, RL_ERANGE, rl_check_multi(rl, r, SIZE_MAX, sizeof r[0], NULL, NULL));
    EXPECT(&m, RL_ESIZE, rl_check_multi(rl, r, 3, 0, d, &bad));
    EXPECT(&m, RL_ESIZE, rl_check_multi(rl, r, 3, sizeof r[0] - 1, d, &bad));
    d[0].size = 3;
    EXPECT(&m, RL_ESIZE, rl_check_multi(rl, r, 3, sizeof r[0], d, &bad));
    rl_decision_init(&d[0]);
    /* A request struct larger than known with a non-zero tail. */
    struct {
        rl_request_t r;
        uint64_t future;
    } nr;
    rl_request_init_sized(&nr.r, sizeof nr);
    nr.r.limit = a;
    nr.r.key = "alice";
    nr.r.key_len = 5;
    nr.future = 1;
    EXPECT(&m, RL_ESIZE, rl_check_multi(rl, &nr.r, 1, sizeof nr, NULL, &bad));
    nr.future = 0;
    ck_assert_int_ge(rl_check_multi(rl, &nr.r, 1, sizeof nr, NULL, &bad), 0);
    /* An empty batch is a trivial allow that touches nothing. */
    EXPECT(&m, RL_ALLOW, rl_check_multi(rl, NULL, 0, sizeof r[0], NULL, NULL));
    rl_close(rl);
}
END_TEST

START_TEST(bad_input_limits)
{
    matrix_t m;
    matrix_open(&m);
    rl_t *rl = m.rl;
    int a = m.ids[0];
    rl_limit_t l;

    EXPECT(&m, RL_EINVAL, rl_limit_add(NULL, &l));
    EXPECT(&m, RL_EINVAL, rl_limit_add(rl, NULL));
    EXPECT(&m, RL_EINVAL, rl_limit_update(NULL, a, &l));
    EXPECT(&m, RL_EINVAL, rl_limit_update(rl, a, NULL));
    EXPECT(&m, RL_EINVAL, rl_limit_remove(NULL, a));
    EXPECT(&m, RL_EINVAL, rl_limit_find(NULL, "a"));
    EXPECT(&m, RL_EINVAL, rl_limit_find(rl, NULL));
    EXPECT(&m, RL_EINVAL, rl_limit_get(NULL, a, &l));
    EXPECT(&m, RL_EINVAL, rl_limit_get(rl, a, NULL));

    /* Each field out of range in turn, through add and through update of
     * a live limit (whose definition and keys must stay as they were). */
    static const struct {
        const char *what;
        int want;
    } fields[] = {
        {"size 0", RL_ESIZE},
        {"size small", RL_ESIZE},
        {"name empty", RL_ENAME},
        {"name space", RL_ENAME},
        {"name unterminated", RL_ENAME},
        {"mode -1", RL_EMODE},
        {"mode 4", RL_EMODE},
        {"on_failure 3", RL_EMODE},
        {"on_failure INT32_MIN", RL_EMODE},
        {"shadow -1", RL_ERANGE},
        {"count 0", RL_ERANGE},
        {"period 0", RL_ERANGE},
        {"count max", RL_ERANGE},
        {"period max", RL_ERANGE},
        {"burst max", RL_ERANGE},
        {"burst 1e9+1", RL_ERANGE},
        {"degraded half", RL_ERANGE},
        {"degraded fast", RL_ERANGE},
    };
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
        for (int upd = 0; upd < 2; upd++) {
            rl_limit_init(&l);
            strcpy(l.name, upd ? "a" : "fresh");
            l.rate.count = 10;
            l.rate.period_ms = 1000;
            l.burst = 5;
            switch (f) {
            case 0: l.size = 0; break;
            case 1: l.size = sizeof l - 1; break;
            case 2: l.name[0] = '\0'; break;
            case 3: strcpy(l.name, "a b"); break;
            case 4: memset(l.name, 'n', sizeof l.name); break;
            case 5: l.mode = -1; break;
            case 6: l.mode = 4; break;
            case 7: l.on_failure = 3; break;
            case 8: l.on_failure = INT32_MIN; break;
            case 9: l.shadow = -1; break;
            case 10: l.rate.count = 0; break;
            case 11: l.rate.period_ms = 0; break;
            case 12: l.rate.count = UINT64_MAX; break;
            case 13: l.rate.period_ms = UINT64_MAX; break;
            case 14: l.burst = UINT64_MAX; break;
            case 15: l.burst = UINT64_C(1000000001); break;
            case 16: l.degraded_rate.count = 0; l.degraded_rate.period_ms = 5; break;
            default: l.degraded_rate.count = UINT64_MAX; l.degraded_rate.period_ms = 1; break;
            }
            int want = fields[f].want;
            /* An update with a bad name is a rename attempt: RL_ENAME. */
            if (upd)
                EXPECT(&m, want, rl_limit_update(rl, a, &l));
            else
                EXPECT(&m, want, rl_limit_add(rl, &l));
        }
    }
    /* A newer caller's larger struct: only with a zero tail. */
    struct {
        rl_limit_t l;
        uint64_t future;
    } nl;
    memset(&nl, 0, sizeof nl);
    rl_limit_init_sized(&nl.l, sizeof nl);
    strcpy(nl.l.name, "newer");
    nl.l.rate.count = 1;
    nl.l.rate.period_ms = 1000;
    nl.future = 0xFF;
    EXPECT(&m, RL_ESIZE, rl_limit_add(rl, &nl.l));

    ck_assert_int_eq(rl_limit_parse(&l, "name=a rate=10/s burst=5", NULL, 0), 0);
    EXPECT(&m, RL_EEXIST, rl_limit_add(rl, &l));
    strcpy(l.name, "renamed");
    EXPECT(&m, RL_ENAME, rl_limit_update(rl, a, &l));
    EXPECT(&m, RL_ENOTFOUND, rl_limit_update(rl, m.stale, &l));
    EXPECT(&m, RL_ENOTFOUND, rl_limit_update(rl, -1, &l));
    EXPECT(&m, RL_ENOTFOUND, rl_limit_remove(rl, m.stale));
    EXPECT(&m, RL_ENOTFOUND, rl_limit_remove(rl, 0));
    EXPECT(&m, RL_ENOTFOUND, rl_limit_remove(rl, -1));
    EXPECT(&m, RL_ENOTFOUND, rl_limit_remove(rl, INT32_MAX));
    EXPECT(&m, RL_ENOTFOUND, rl_limit_remove(rl, INT32_MIN));
    EXPECT(&m, RL_ENOTFOUND, rl_limit_find(rl, ""));
    EXPECT(&m, RL_ENOTFOUND, rl_limit_find(rl, "gone"));
    char longname[1000];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    EXPECT(&m, RL_ENOTFOUND, rl_limit_find(rl, longname));
    rl_limit_init(&l);
    EXPECT(&m, RL_ENOTFOUND, rl_limit_get(rl, m.stale, &l));
    l.size = 0;
    EXPECT(&m, RL_ESIZE, rl_limit_get(rl, a, &l));

    /* The parser: every class of bad spec, with and without a buffer. */
    static const struct {
        const char *spec;
        int want;
    } specs[] = {
        {"", RL_ESPEC},
        {"   \t ", RL_ESPEC},
        {"rate=1/s", RL_ESPEC},
        {"name=x", RL_ESPEC},
        {"name=x rate=1/s name=y", RL_ESPEC},
        {"name=x rate=1/s bogus=1", RL_ESPEC},
        {"name=x rate=1/s burst", RL_ESPEC},
        {"name=x rate=1/s burst=", RL_ESPEC},
        {"name=x rate=1.5/s", RL_ESPEC},
        {"name=x rate=1e3/s", RL_ESPEC},
        {"name=x rate=+5/s", RL_ESPEC},
        {"name=x rate=0x10/s", RL_ESPEC},
        {"name=x rate=10", RL_ESPEC},
        {"name=x rate=10/", RL_ESPEC},
        {"name=x rate=10/fortnight", RL_ESPEC},
        {"name=x rate=10/s shadow=yes", RL_ESPEC},
        {"name=x rate=nan/s", RL_ERANGE},
        {"name=x rate=1/s burst=-1", RL_ERANGE},
        {"name=x rate=1/s burst=INF", RL_ERANGE},
        {"name=x rate=1/s shadow=2", RL_ERANGE},
        {"name=x rate=1/s mode=fast", RL_EMODE},
        {"name=x rate=1/s on_failure=maybe", RL_EMODE},
        {"name=bad/name rate=1/s", RL_ENAME},
        {"name=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa rate=1/s", RL_ENAME},
        {"name=\xff rate=1/s", RL_ENAME},
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        char err[8];
        ck_assert_msg(rl_limit_parse(&l, specs[i].spec, NULL, 0) == specs[i].want, "%s",
                      specs[i].spec);
        /* A tiny buffer: truncated, still terminated. */
        memset(err, 'Z', sizeof err);
        ck_assert_int_eq(rl_limit_parse(&l, specs[i].spec, err, sizeof err), specs[i].want);
        ck_assert_ptr_nonnull(memchr(err, '\0', sizeof err));
    }
    ck_assert_int_eq(rl_limit_parse(NULL, "name=x rate=1/s", NULL, 0), RL_EINVAL);
    ck_assert_int_eq(rl_limit_parse(&l, NULL, NULL, 0), RL_EINVAL);
    rl_close(rl);
}
END_TEST

START_TEST(bad_input_instance)
{
    matrix_t m;
    matrix_open(&m);
    rl_t *rl = m.rl;
    int a = m.ids[0];

    rl_stats_t s;
    rl_stats_init(&s);
    EXPECT(&m, RL_EINVAL, rl_stats(NULL, &s));
    EXPECT(&m, RL_EINVAL, rl_stats(rl, NULL));
    s.size = 0;
    EXPECT(&m, RL_ESIZE, rl_stats(rl, &s));
    /* Older layouts (up to health_since_round) are accepted; shorter not. */
    s.size = offsetof(rl_stats_t, health_since_round) - 1;
    EXPECT(&m, RL_ESIZE, rl_stats(rl, &s));
    s.size = offsetof(rl_stats_t, health_since_round);
    EXPECT(&m, 0, rl_stats(rl, &s));
    rl_limit_stats_t ls;
    rl_limit_stats_init(&ls);
    EXPECT(&m, RL_EINVAL, rl_limit_stats(NULL, a, &ls));
    EXPECT(&m, RL_EINVAL, rl_limit_stats(rl, a, NULL));
    EXPECT(&m, RL_ENOTFOUND, rl_limit_stats(rl, m.stale, &ls));
    EXPECT(&m, RL_ENOTFOUND, rl_limit_stats(rl, -1, &ls));
    ls.size = 1;
    EXPECT(&m, RL_ESIZE, rl_limit_stats(rl, a, &ls));
    /* 0.1's layout (up to keys_live) is accepted and gets only its fields;
     * shorter is not. */
    size_t old_size = offsetof(rl_limit_stats_t, sync_keys);
    ls.size = old_size - 1;
    EXPECT(&m, RL_ESIZE, rl_limit_stats(rl, a, &ls));
    memset(&ls, 0xa5, sizeof ls);
    ls.size = old_size;
    EXPECT(&m, 0, rl_limit_stats(rl, a, &ls));
    ck_assert_uint_eq(ls.size, old_size);
    ck_assert_uint_eq(ls.sync_keys, UINT64_C(0xa5a5a5a5a5a5a5a5)); /* past its end: untouched */

    /* rl_headers: errors, and the contract with a zero-length buffer. */
    rl_decision_t d;
    rl_decision_init(&d);
    char buf[8] = "unused";
    EXPECT(&m, RL_EINVAL, rl_headers(NULL, buf, sizeof buf));
    EXPECT(&m, RL_EINVAL, rl_headers(&d, NULL, 1));
    d.size = 3;
    EXPECT(&m, RL_ESIZE, rl_headers(&d, buf, sizeof buf));
    ck_assert_str_eq(buf, "unused");
    rl_decision_init(&d);
    ck_assert_int_gt(rl_headers(&d, buf, 0), 0);
    ck_assert_str_eq(buf, "unused"); /* len 0: nothing written */

    /* rl_open: every config field out of range; *out is NULL on error. */
    for (int f = 0; f < 16; f++) {
        rl_config_t c;
        rl_config_init(&c);
        char node[300];
        int want = RL_ERANGE;
        switch (f) {
        case 0: c.size = 0; want = RL_ESIZE; break;
        case 1: c.size = sizeof c - 1; want = RL_ESIZE; break;
        case 2: c.max_keys = 0; break;
        case 3: c.max_keys = UINT32_MAX; break;
        case 4: c.sync_interval_ms = 0; break;
        case 5: c.expected_nodes = 0; break;
        case 6: c.expected_nodes = UINT32_MAX; break;
        case 7: c.key_ttl_ms = 0; break;
        case 8: c.key_ttl_ms = UINT64_MAX; break;
        case 9: c.max_limits = 0; break;
        case 10: c.max_limits = UINT32_MAX; break;
        case 11: c.key_secret = NULL; c.key_secret_len = 32; break;
        case 12: c.key_secret = test_secret; c.key_secret_len = 15; break;
        case 13: c.clock_coarse_tick_ns = UINT64_MAX; break;
        case 14:
            memset(node, 'n', sizeof node - 1);
            node[sizeof node - 1] = '\0';
            c.node_id = node;
            break;
        default: c.reserved0 = 1; break;
        }
        rl_t *x = (rl_t *)(void *)&m; /* not NULL: rl_open must clear it */
        ck_assert_msg(rl_open(&x, &c) == want, "config case %d", f);
        ck_assert_ptr_null(x);
    }
    EXPECT(&m, RL_EINVAL, rl_open(NULL, NULL));

    /* Initialisers: NULL, or a size too small for the size field, writes
     * nothing. */
    unsigned char raw[sizeof(rl_config_t)];
    memset(raw, 0xEE, sizeof raw);
    rl_config_init_sized((rl_config_t *)(void *)raw, sizeof(size_t) - 1);
    rl_limit_init_sized((rl_limit_t *)(void *)raw, 0);
    rl_decision_init_sized((rl_decision_t *)(void *)raw, 1);
    rl_request_init_sized((rl_request_t *)(void *)raw, 2);
    rl_stats_init_sized((rl_stats_t *)(void *)raw, 3);
    rl_limit_stats_init_sized((rl_limit_stats_t *)(void *)raw, 4);
    for (size_t i = 0; i < sizeof raw; i++)
        ck_assert_uint_eq(raw[i], 0xEE);
    rl_config_init_sized(NULL, sizeof(rl_config_t));
    rl_limit_init_sized(NULL, sizeof(rl_limit_t));
    rl_decision_init_sized(NULL, sizeof(rl_decision_t));
    rl_request_init_sized(NULL, sizeof(rl_request_t));
    rl_stats_init_sized(NULL, sizeof(rl_stats_t));
    rl_limit_stats_init_sized(NULL, sizeof(rl_limit_stats_t));
    rl_close(NULL);

    /* Codes outside the table have a name and a message too. */
    static const int odd[] = {INT32_MIN, -1000, -9999, 1, 2, INT32_MAX};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        ck_assert_str_eq(rl_err_name(odd[i]), "RL_EUNKNOWN");
        ck_assert_str_eq(rl_strerror(odd[i]), "unknown error");
    }
    rl_close(rl);
}
END_TEST

/* ------------------------------- regressions: run by default */

/*
 * A refund with cost x T >= 2^64 (T in 1/16 ns: any cost past ~320k tokens
 * on a 1/h limit) must fill the bucket: a plain product would wrap and give
 * back (cost x T) mod 2^64 instead, which is why rl__gcra_refund (local/bucket.h)
 * saturates it.
 */
START_TEST(regress_huge_refund_fills_bucket)
{
    rl_test_clock_t clk = {UINT64_C(5000000000), 0};
    rl_t *rl = open_inst(&clk, 64);
    int id = rl_test_add(rl, "name=a rate=1/h burst=1");
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, NULL), RL_ALLOW);
    ck_assert_int_eq(rl_refund(rl, id, "k", 1, 320256), 0); /* 320256 x T wraps to ~33 ms */
    ck_assert_uint_eq(peek(rl, id, "k", 1).remaining, 1);
    rl_close(rl);
}
END_TEST

/*
 * The hook path loads the absorbed-jump offset (acquire) before it calls
 * the hook. Read the other way round, a checker that read the hook just
 * before a backward jump and loads the offset just after another checker
 * absorbed that jump computes now = old reading + new offset: the instance
 * clock leaps forward by the size of the jump (and `last` with it, for
 * everyone), refilling every bucket. A hook that stalls one thread makes
 * that preemption deterministic here.
 */
typedef struct stall_clock {
    _Atomic uint64_t ns;
    _Atomic int armed, stalled, go;
} stall_clock_t;

static _Thread_local int stall_me;

static uint64_t stall_clock_fn(void *ud, int32_t source)
{
    stall_clock_t *c = ud;
    (void)source;
    uint64_t v = atomic_load(&c->ns);
    if (stall_me && atomic_exchange(&c->armed, 0)) {
        atomic_store(&c->stalled, 1);
        while (!atomic_load(&c->go))
            sched_yield();
    }
    return v;
}

typedef struct stall_arg {
    rl_t *rl;
    int id;
    int rc;
} stall_arg_t;

static void *stalled_checker(void *arg)
{
    stall_arg_t *a = arg;
    stall_me = 1;
    a->rc = rl_check(a->rl, a->id, "k", 1, 1, NULL);
    return NULL;
}

START_TEST(regress_stale_reading_mints_no_token)
{
    const uint64_t hour = UINT64_C(3600) * 1000000000u;
    stall_clock_t clk;
    atomic_init(&clk.ns, 10 * hour);
    atomic_init(&clk.armed, 0);
    atomic_init(&clk.stalled, 0);
    atomic_init(&clk.go, 0);
    rl_config_t c;
    rl_config_init(&c);
    c.clock = stall_clock_fn;
    c.clock_ud = &clk;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    int id = rl_test_add(rl, "name=a rate=1/s burst=1");
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, NULL), RL_ALLOW); /* now empty */

    stall_arg_t arg = {rl, id, -100};
    atomic_store(&clk.armed, 1);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, stalled_checker, &arg), 0);
    while (!atomic_load(&clk.stalled))
        sched_yield();
    /* The checker holds a reading from before the jump. Jump back 1 h and
     * let another check absorb it. */
    atomic_store(&clk.ns, 9 * hour);
    ck_assert_int_eq(rl_check(rl, id, "other", 5, 1, NULL), RL_ALLOW);
    atomic_store(&clk.go, 1);
    pthread_join(th, NULL);
    /* No time passed for the bucket: a second admission is a token made
     * out of the jump. */
    ck_assert_int_eq(arg.rc, RL_DENY);
    rl_close(rl);
}
END_TEST

/*
 * A hook that swings by more than 2^62 ns around the origin (or swings
 * repeatedly until the absorbed offset passes 2^62) must not overflow the
 * hook path's `last - rel` and `rel + off`: in int64_t that is undefined
 * behaviour (UBSan: "signed integer overflow", local/clock.c), which is why
 * rl__clock_guard clamps readings and sums in __int128. Only a UBSan build
 * (scripts/test.sh --asan, scripts/fuzz.sh) reports the overflow; here it
 * also checks the instance does not hand out a fresh burst.
 */
START_TEST(regress_clock_swing_does_not_overflow)
{
    rl_test_clock_t clk = {UINT64_C(1) << 40, 0};
    rl_t *rl = open_inst(&clk, 64);
    int id = rl_test_add(rl, "name=a rate=1/h burst=1");
    rl_test_clock_advance(&clk, UINT64_C(1) << 62);
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, NULL), RL_ALLOW);
    clock_set(&clk, clock_get(&clk) - (UINT64_C(1) << 63) - (UINT64_C(1) << 61));
    /* No fresh burst: the deny of an instance past its time's horizon
     * (2^58 ns, ratelimit.h rl_clock_fn) is RL_ERANGE. */
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, NULL), RL_ERANGE);
    rl_close(rl);
}
END_TEST

/* ------------------------------------------ libfaketime (RL_FAKETIME=1) */

/* The real CLOCK_MONOTONIC, by system call: libfaketime interposes the libc
 * function, not the system call, so this is the time that really passed. */
static uint64_t real_mono_ns(void)
{
    struct timespec ts;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t libc_mono_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void write_offset(const char *file, const char *offset)
{
    FILE *f = fopen(file, "w");
    if (f == NULL || fprintf(f, "%s\n", offset) < 0 || fclose(f) != 0) {
        fprintf(stderr, "faketime child: cannot write %s\n", file);
        exit(2);
    }
}

/*
 * The checker, run as `test_hardening --faketime-child FILE` with
 * libfaketime preloaded and FAKETIME_TIMESTAMP_FILE=FILE. It uses the
 * built-in clocks (no hook), steps the faked offset through 0, -1 h, 0,
 * +1 h, hammers one key per limit in each phase for at least 150 ms of real
 * time, and checks against the real elapsed time:
 *   - libfaketime really moved CLOCK_MONOTONIC by each step (else the test
 *     would prove nothing);
 *   - no tokens from a backward jump, at most one burst per forward jump:
 *     admitted so far <= burst x (1 + forward jumps) + rate x real elapsed
 *     (+1, + a coarse tick's worth);
 *   - not frozen after the backward jump: each limit admits again within
 *     the phase (its bucket refills in 10 ms / 100 ms of real time; a clock
 *     clamped until it catches up would deny for the whole hour). The phase
 *     waits up to 5 s for that first admission, so a loaded machine cannot
 *     fail it.
 * The step back to 0 is a forward jump of 1 h for an instance that absorbed
 * the backward one. Exit 0 on success; prints what it saw either way.
 */
static int faketime_child(const char *file)
{
    static const char *const offsets[] = {"+0", "-3600", "+0", "+3600"};
    static const int step_s[] = {0, -3600, 3600, 3600}; /* offset change per phase */
    static const int forward_jump[] = {0, 0, 1, 1};      /* phase starts with one */
    write_offset(file, offsets[0]);
    rl_t *rl = NULL;
    if (rl_open(&rl, NULL) != 0)
        return 2;
    rl_limit_t l;
    /* p: the precise clock; c: the coarse one; f: the precise clock, its
     * denies coarse-first (local/clock.h: burst 1, T >= two margins). */
    int ids[3];
    const char *specs[3] = {"name=p rate=100/s burst=1", "name=c rate=1000/s burst=100",
                            "name=f rate=20/s burst=1"};
    const uint64_t rate[3] = {100, 1000, 20}, burst[3] = {1, 100, 1};
    for (int j = 0; j < 3; j++) {
        if (rl_limit_parse(&l, specs[j], NULL, 0) != 0 || (ids[j] = rl_limit_add(rl, &l)) < 0)
            return 2;
    }
    const char *src[3];
    uint64_t tick_slack[3];
    for (int j = 0; j < 3; j++) {
        rl_limit_params_t p;
        rl__params_read(rl__limit_get(&rl->limits, ids[j]), &p);
        int coarse = p.clock_source == RL_CLOCK_COARSE;
        src[j] = coarse ? "CLOCK_MONOTONIC_COARSE" : "CLOCK_MONOTONIC";
        /* Elapsed is measured on the precise clock; a coarse reading lags
         * it by up to a tick, so the first check can see the span start a
         * tick early: a tick's worth of tokens more (+1 for rounding). */
        tick_slack[j] = coarse ? rate[j] * rl->clock.coarse_tick_ns / 1000000000u + 1 : 0;
    }
    uint64_t t0 = real_mono_ns(), admitted[3] = {0, 0, 0};
    int failed = 0, jumps = 0;
    for (int phase = 0; phase < 4; phase++) {
        uint64_t before = libc_mono_ns(CLOCK_MONOTONIC);
        write_offset(file, offsets[phase]);
        uint64_t after = libc_mono_ns(CLOCK_MONOTONIC);
        double moved = ((double)after - (double)before) / 1e9;
        /* The faked clock moved by the step, give or take the real time
         * between the two readings. */
        int faked = moved > step_s[phase] - 2.0 && moved < step_s[phase] + 2.0;
        failed |= !faked;
        printf("faketime: offset %-5s: libc CLOCK_MONOTONIC moved %+.3f s (want %+d s): %s\n",
               offsets[phase], moved, step_s[phase], faked ? "ok" : "NOT FAKED");
        jumps += forward_jump[phase];
        uint64_t in_phase[3] = {0, 0, 0}, start = real_mono_ns();
        uint64_t end = start + 150000000u, give_up = start + UINT64_C(5000000000);
        for (;;) {
            uint64_t now = real_mono_ns();
            if (now >= give_up ||
                (now >= end && in_phase[0] > 0 && in_phase[1] > 0 && in_phase[2] > 0))
                break;
            for (int j = 0; j < 3; j++)
                in_phase[j] += rl_check(rl, ids[j], "hot", 3, 1, NULL) == RL_ALLOW;
        }
        uint64_t real = real_mono_ns() - t0;
        for (int j = 0; j < 3; j++) {
            admitted[j] += in_phase[j];
            uint64_t bound = (1 + (uint64_t)jumps) * burst[j] + rate[j] * real / 1000000000u + 1 +
                             tick_slack[j];
            int ok = admitted[j] <= bound, alive = in_phase[j] > 0;
            failed |= !ok || !alive;
            printf("faketime: offset %-5s, limit %s on %s: %llu admitted in phase (%s), "
                   "%llu in total, bound %llu: %s\n",
                   offsets[phase], specs[j], src[j], (unsigned long long)in_phase[j],
                   alive ? "not frozen" : "FROZEN", (unsigned long long)admitted[j],
                   (unsigned long long)bound, ok ? "ok" : "EXCEEDED");
        }
    }
    rl_close(rl);
    fflush(stdout);
    return failed ? 1 : 0;
}

static const char *faketime_lib(void)
{
    static const char *const paths[] = {
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
        "/usr/local/lib/faketime/libfaketime.so.1",
    };
    const char *e = getenv("RL_FAKETIME_LIB");
    if (e != NULL)
        return e;
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (access(paths[i], R_OK) == 0)
            return paths[i];
    return NULL;
}

START_TEST(faketime_jumps)
{
    const char *lib = faketime_lib();
    ck_assert_msg(lib != NULL, "libfaketime not found (apt-get install faketime libfaketime)");
    char file[] = "/tmp/rl-faketime-XXXXXX";
    int fd = mkstemp(file);
    ck_assert_int_ge(fd, 0);
    close(fd);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setenv("LD_PRELOAD", lib, 1);
        setenv("FAKETIME_TIMESTAMP_FILE", file, 1);
        setenv("FAKETIME_NO_CACHE", "1", 1);
        unsetenv("FAKETIME"); /* it would take priority over the file */
        /* Either spelling would leave the monotonic clocks real. */
        unsetenv("DONT_FAKE_MONOTONIC");
        unsetenv("FAKETIME_DONT_FAKE_MONOTONIC");
        execl("/proc/self/exe", "test_hardening", "--faketime-child", file, (char *)NULL);
        _exit(3);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    unlink(file);
    ck_assert(WIFEXITED(status));
    ck_assert_msg(WEXITSTATUS(status) == 0, "faketime checker exit %d", WEXITSTATUS(status));
}
END_TEST

/* ----------------------------------------------------------------- main */

static Suite *suite(void)
{
    Suite *s = suite_create("hardening");
    TCase *mem = tcase_create("memory");
    tcase_set_timeout(mem, 900);
    tcase_add_test(mem, flood_memory_bound);
    suite_add_tcase(s, mem);

    TCase *num = tcase_create("numeric");
    tcase_set_timeout(num, 600);
    tcase_add_test(num, numeric_safety_properties);
    tcase_add_test(num, out_of_range_specs);
    tcase_add_test(num, clock_jumps_under_load);
    suite_add_tcase(s, num);

    TCase *bad = tcase_create("bad_input");
    tcase_set_timeout(bad, 300);
    tcase_add_test(bad, bad_input_checks);
    tcase_add_test(bad, bad_input_multi);
    tcase_add_test(bad, bad_input_limits);
    tcase_add_test(bad, bad_input_instance);
    suite_add_tcase(s, bad);

    /* Reproducers of library bugs, each guarding its fix. */
    TCase *kb = tcase_create("regressions");
    tcase_add_test(kb, regress_huge_refund_fills_bucket);
    tcase_add_test(kb, regress_stale_reading_mints_no_token);
    tcase_add_test(kb, regress_clock_swing_does_not_overflow);
    suite_add_tcase(s, kb);
    if (env_on("RL_FAKETIME")) {
        TCase *ft = tcase_create("faketime");
        tcase_set_timeout(ft, 60);
        tcase_add_test(ft, faketime_jumps);
        suite_add_tcase(s, ft);
    }
    return s;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--faketime-child") == 0)
        return faketime_child(argv[2]);
    return rl_test_run(suite());
}

/* SPDX-License-Identifier: MIT */
/*
 * The share word's decode (local/shareword.h) against its division form,
 * the decode as first written: tau = burst * t unless that passes
 * RL_TAU_FP_MAX, tested as t > RL_TAU_FP_MAX / burst. The check path now
 * tests the product instead; every word must decode to the same (t, burst,
 * tau) either way. The outcome turns on the product alone, so the sweep
 * covers every exponent and a spread of bursts with the mantissas on both
 * sides of the cap, and the products that land on RL_TAU_FP_MAX itself;
 * random words cover the rest, with the NEAR and hot bits set at random
 * (the decode ignores both).
 */
#include "testutil.h"
#include "local/shareword.h"

static void decode_by_division(uint64_t w, rl_gcra_t *g)
{
    uint64_t t = (w >> 36) << ((w >> 30) & 31);
    uint64_t burst = w & RL_SHAREWORD_BURST_MAX;
    g->t_fp = t;
    g->burst = burst;
    g->tau_fp = burst != 0 && t > RL_TAU_FP_MAX / burst ? (RL_TAU_FP_MAX / t) * t : burst * t;
}

#define MANT_MAX ((UINT64_C(1) << RL_SHAREWORD_MANT_BITS) - 1)

static uint64_t word(uint64_t mant, unsigned exp, uint64_t burst, uint64_t extra)
{
    return (mant << 36) | ((uint64_t)exp << 30) | burst |
           (extra & (RL_SHAREWORD_NEAR | RL_SHAREWORD_HOT));
}

/* 1 if w decodes alike both ways; counts the capped words. */
static int same_decode(uint64_t w, unsigned long *capped)
{
    rl_gcra_t a, b;
    rl__shareword_decode(w, &a);
    decode_by_division(w, &b);
    if ((unsigned __int128)b.burst * b.t_fp != b.tau_fp)
        (*capped)++;
    return a.t_fp == b.t_fp && a.burst == b.burst && a.tau_fp == b.tau_fp;
}

START_TEST(decode_matches_division_form_at_the_cap)
{
    uint64_t s = 0x5A4E;
    uint64_t bursts[64];
    size_t nb = 0;
    static const uint64_t fixed[] = {0, 1, 2, 3, 7, 10, 100, 1000, 12345, 1000000};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        bursts[nb++] = fixed[i];
    for (unsigned b = 4; b <= 28; b += 4) { /* powers of two and their neighbours */
        bursts[nb++] = (UINT64_C(1) << b) - 1;
        bursts[nb++] = UINT64_C(1) << b;
        bursts[nb++] = (UINT64_C(1) << b) + 1;
    }
    bursts[nb++] = RL_SHAREWORD_BURST_MAX;
    while (nb < sizeof bursts / sizeof bursts[0])
        bursts[nb++] = next_u64(&s) & RL_SHAREWORD_BURST_MAX;
    unsigned long n = 0, capped = 0;
    for (size_t i = 0; i < nb; i++) {
        uint64_t burst = bursts[i];
        for (unsigned exp = 0; exp < 32; exp++) {
            /* The largest mantissa whose product stays in range, and its
             * neighbours: the cap's edge for this (burst, exponent). */
            uint64_t edge = burst == 0 ? MANT_MAX : (RL_TAU_FP_MAX / burst) >> exp;
            for (uint64_t d = 0; d < 7; d++) {
                if (edge + d < 3)
                    continue;
                uint64_t m = edge + d - 3;
                if (m > MANT_MAX)
                    continue;
                uint64_t w = word(m, exp, burst, next_u64(&s));
                REQUIRE(same_decode(w, &capped), "word %016llx (mantissa %llu, exponent %u, "
                        "burst %llu)", (unsigned long long)w, (unsigned long long)m, exp,
                        (unsigned long long)burst);
                n++;
            }
            /* The extremes of the mantissa too. */
            for (uint64_t m = 0; m <= 1; m++) {
                REQUIRE(same_decode(word(m, exp, burst, 0), &capped), "mantissa %llu",
                        (unsigned long long)m);
                REQUIRE(same_decode(word(MANT_MAX - m, exp, burst, 0), &capped),
                        "mantissa max - %llu", (unsigned long long)m);
                n += 2;
            }
        }
    }
    /* Words whose product is RL_TAU_FP_MAX itself (not capped) and their
     * neighbours: t is a divisor of it, and RL_TAU_FP_MAX is
     * 4 * 36525 * 864 * 10^9 * 16 = 2^20 * 3^4 * 5^11 * 487. */
    unsigned long exact = 0;
    for (uint64_t m2 = 1; m2 <= (UINT64_C(1) << 20); m2 *= 2)
        for (uint64_t m3 = 1; m3 <= 81; m3 *= 3)
            for (uint64_t m5 = 1; m5 <= UINT64_C(48828125); m5 *= 5)
                for (uint64_t m487 = 1; m487 <= 487; m487 += 486) {
                    uint64_t m = m2 * m3 * m5 * m487;
                    for (unsigned exp = 0; m <= MANT_MAX && exp < 32; exp++) {
                        uint64_t t = m << exp;
                        if (RL_TAU_FP_MAX % t != 0 || RL_TAU_FP_MAX / t > RL_SHAREWORD_BURST_MAX)
                            continue;
                        uint64_t burst = RL_TAU_FP_MAX / t;
                        for (uint64_t b = burst - 1; b <= burst + 1; b++)
                            REQUIRE(same_decode(word(m, exp, b, 0), &capped),
                                    "mantissa %llu, exponent %u, burst %llu",
                                    (unsigned long long)m, exp, (unsigned long long)b);
                        REQUIRE(same_decode(word(m + 1, exp, burst, 0), &capped), "m + 1");
                        REQUIRE(same_decode(word(m - 1, exp, burst, 0), &capped), "m - 1");
                        exact++;
                        n += 5;
                    }
                }
    ck_assert_uint_gt(exact, 100);
    /* Both sides of the cap were reached, and often. */
    ck_assert_uint_gt(capped, n / 4);
    ck_assert_uint_lt(capped, n - n / 4);
}
END_TEST

START_TEST(decode_matches_division_form_on_random_words)
{
    uint64_t s = 0xD1F;
    unsigned long capped = 0;
    const unsigned long n = 4000000;
    for (unsigned long i = 0; i < n; i++) {
        uint64_t w = next_u64(&s);
        /* Small bursts and mantissas as often as large ones: a random word's
         * are nearly always large, and nearly always capped. */
        if (i % 2)
            w = word((w >> 36) >> (next_u64(&s) % 28), (unsigned)(w >> 30) & 31,
                     (w & RL_SHAREWORD_BURST_MAX) >> (next_u64(&s) % 29), w);
        REQUIRE(same_decode(w, &capped), "word %016llx", (unsigned long long)w);
    }
    ck_assert_uint_gt(capped, n / 8);
    ck_assert_uint_lt(capped, n - n / 8);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("shareword");
    TCase *tc = tcase_create("decode");
    tcase_add_test(tc, decode_matches_division_form_at_the_cap);
    tcase_add_test(tc, decode_matches_division_form_on_random_words);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }

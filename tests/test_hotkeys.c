/* SPDX-License-Identifier: MIT */
/* The hot-key sketch (src/hot/sketch.c): Space-Saving's bounds against exact
 * counts, and a zipf workload with planted heavy keys. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "base/alloc.h"
#include "hot/sketch.h"

static rl_allocator_t alloc;

static void setup(void) { rl__alloc_defaults(&alloc); }

START_TEST(bad_sizes)
{
    rl_hotkeys_t h;
    ck_assert_int_eq(rl__hotkeys_init(&h, &alloc, 0), RL_EINVAL);
    ck_assert_int_eq(rl__hotkeys_init(&h, &alloc, RL_HOTKEYS_K_MAX + 1), RL_EINVAL);
    rl__hotkeys_destroy(&h, &alloc); /* after a failed init: harmless */
}
END_TEST

START_TEST(counts_replacement_order_and_filter)
{
    rl_hotkeys_t h;
    ck_assert_int_eq(rl__hotkeys_init(&h, &alloc, 1), 0);
    h.k = 3; /* three counters, to see replacement at work */
    rl__hotkeys_add(&h, 1, 10, 0, 5);
    rl__hotkeys_add(&h, 1, 11, 0, 7);
    rl__hotkeys_add(&h, 2, 10, 0, 2); /* same id, another limit: another key */
    rl__hotkeys_add(&h, 1, 10, 0, 1);
    /* full: a newcomer replaces the smallest (limit 2's, count 2) */
    rl_hk_entry_t *e = rl__hotkeys_add(&h, 1, 12, 0, 4);
    ck_assert_uint_eq(e->err, 2);
    ck_assert_uint_eq(e->count, 6);
    rl_hk_entry_t top[4];
    ck_assert_uint_eq(rl__hotkeys_top(&h, 1, 0, top, 4), 3);
    ck_assert_uint_eq(top[0].id_lo, 11);
    ck_assert_uint_eq(top[0].count, 7);
    ck_assert_uint_eq(top[1].count, 6);
    ck_assert_uint_eq(top[2].count, 6);
    ck_assert_uint_eq(rl__hotkeys_top(&h, 1, 0, top, 1), 1);
    ck_assert_uint_eq(top[0].id_lo, 11);
    ck_assert_uint_eq(rl__hotkeys_top(&h, 0, 2, top, 4), 0);
    ck_assert_uint_eq(rl__hotkeys_top(&h, 0, 1, top, 4), 3);
    ck_assert_uint_eq(h.total, 19);
    /* key bytes: bounded copy, full length kept */
    char longkey[100];
    memset(longkey, 'x', sizeof longkey);
    rl__hotkeys_set_key(e, longkey, sizeof longkey);
    ck_assert_uint_eq(e->key_len, 100);
    ck_assert_int_eq(memcmp(e->key, longkey, RL_HOTKEY_BYTES), 0);
    rl__hotkeys_decay(&h, 1);
    ck_assert_uint_eq(rl__hotkeys_top(&h, 1, 0, top, 1), 1);
    ck_assert_uint_eq(top[0].count, 3);
    h.k = RL_HOTKEYS_SLACK;
    rl__hotkeys_destroy(&h, &alloc);
}
END_TEST

/* The index and the heap against the sketch's own entries, after every
 * update of a random stream with decays: every held key is found where it
 * is, no other is, the heap is a min-heap whose root is the smallest
 * count, a replacement evicts that smallest count and inherits it as err,
 * and each held count brackets the key's exact (decayed) demand. */
#define HK_KEYS 300
/* Millions of checks: Check's own asserts record each one (fork mode), so
 * only a failure goes through it. */
#define HK_CHECK(c)                                                                        \
    do {                                                                                   \
        if (!(c))                                                                          \
            ck_abort_msg("K %zu, op %d: %s", ks[t], op, #c);                               \
    } while (0)
START_TEST(index_and_heap_against_the_entries)
{
    static const size_t ks[] = {1, 2, 32};
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        rl_hotkeys_t h;
        ck_assert_int_eq(rl__hotkeys_init(&h, &alloc, ks[t]), 0);
        static uint64_t exact[HK_KEYS];
        memset(exact, 0, sizeof exact);
        uint64_t seed = 12345 + t;
        for (int op = 0; op < 20000; op++) {
            uint64_t r = next_u64(&seed);
            if (r % 997 == 0) {
                rl__hotkeys_decay(&h, 1);
                for (int k = 0; k < HK_KEYS; k++)
                    exact[k] >>= 1;
            }
            /* skewed: low keys far more often */
            int key = (int)((r >> 8) % HK_KEYS);
            if ((r >> 40) % 4 != 0)
                key %= 20;
            uint64_t w = 1 + (r >> 50) % 9;
            uint64_t min = UINT64_MAX;
            for (size_t i = 0; i < h.n; i++)
                min = h.e[i].count < min ? h.e[i].count : min;
            size_t n_before = h.n;
            int held = rl__hotkeys_find(&h, (uint32_t)(key & 1), (uint64_t)key * 7919, 0) != NULL;
            rl_hk_entry_t *e = rl__hotkeys_add(&h, (uint32_t)(key & 1), (uint64_t)key * 7919, 0, w);
            exact[key] += w;
            HK_CHECK(rl__hotkeys_find(&h, (uint32_t)(key & 1), (uint64_t)key * 7919, 0) == e);
            if (!held && n_before == h.k) {
                HK_CHECK(h.gone_valid == 1);
                HK_CHECK(h.gone.count == min);
                HK_CHECK(e->err == min);
                HK_CHECK(rl__hotkeys_find(&h, h.gone.lref, h.gone.id_lo, h.gone.id_hi) == NULL);
            }
            for (size_t i = 0; i < h.n; i++) {
                const rl_hk_entry_t *x = &h.e[i];
                HK_CHECK(rl__hotkeys_find(&h, x->lref, x->id_lo, x->id_hi) == x);
                HK_CHECK(h.heap[h.at[i]] == i);
                HK_CHECK(i == 0 || h.e[h.heap[(i - 1) / 2]].count <= h.e[h.heap[i]].count);
                HK_CHECK(h.e[h.heap[0]].count <= x->count);
                int k = (int)(x->id_lo / 7919);
                /* decays round each half down: the bracket loosens by the
                 * decays' rounding, never more than one per decay */
                HK_CHECK(x->count - x->err <= exact[k] + 64);
                HK_CHECK(x->count + 64 >= exact[k]);
            }
        }
        rl__hotkeys_destroy(&h, &alloc);
    }
}
END_TEST

#define NZ 100000
#define NPLANT 10

/* Keys 0..NZ-1 zipf, NZ..NZ+9 planted at 1.5% of all demand each (below
 * the zipf head: they rank about 5th to 14th). Fed as the sync harvest
 * would: per round, one weighted update per key that had demand, in table
 * (hash) order. K = 32: at least 9 of the 10 planted keys are among the
 * 32 hottest, and every held count brackets the exact one. */
START_TEST(zipf_with_planted_heavy_keys)
{
    double *cdf = rl_test_zipf_cdf(NZ);
    uint32_t *round_count = calloc(NZ + NPLANT, sizeof *round_count);
    uint64_t *exact = calloc(NZ + NPLANT, sizeof *exact);
    uint32_t *touched = malloc((NZ + NPLANT) * sizeof *touched);
    ck_assert(round_count && exact && touched);
    rl_hotkeys_t h;
    ck_assert_int_eq(rl__hotkeys_init(&h, &alloc, RL_HOTKEYS_K_DEFAULT), 0);
    uint64_t seed = 2026;
    for (int round = 0; round < 100; round++) {
        size_t nt = 0;
        for (int i = 0; i < 20000; i++) {
            uint64_t r = next_u64(&seed) % 1000;
            uint32_t k = r < 150 ? (uint32_t)(NZ + r % NPLANT) : (uint32_t)rl_test_zipf_draw(cdf, NZ, &seed);
            if (round_count[k]++ == 0)
                touched[nt++] = k;
        }
        /* table order: by a hash of the key, not by rank */
        for (size_t i = 0; i < nt; i++) {
            size_t j = i + next_u64(&seed) % (nt - i);
            uint32_t t = touched[i];
            touched[i] = touched[j];
            touched[j] = t;
        }
        for (size_t i = 0; i < nt; i++) {
            uint32_t k = touched[i];
            rl__hotkeys_add(&h, 7, k, UINT64_C(0xabc), round_count[k]);
            exact[k] += round_count[k];
            round_count[k] = 0;
        }
    }
    rl_hk_entry_t top[RL_HOTKEYS_K_DEFAULT];
    size_t n = rl__hotkeys_top(&h, 0, 7, top, RL_HOTKEYS_K_DEFAULT);
    ck_assert_uint_eq(n, RL_HOTKEYS_K_DEFAULT);
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t k = top[i].id_lo;
        ck_assert_uint_lt(k, NZ + NPLANT);
        ck_assert_msg(top[i].count - top[i].err <= exact[k] && exact[k] <= top[i].count,
                      "key %llu: count %llu err %llu exact %llu", (unsigned long long)k,
                      (unsigned long long)top[i].count, (unsigned long long)top[i].err,
                      (unsigned long long)exact[k]);
        found += k >= NZ;
    }
    ck_assert_msg(found >= 9, "found %d of the %d planted keys", found, NPLANT);
    /* the zipf head (rank 1: ~7% of demand) is there too, and first */
    ck_assert_uint_eq(top[0].id_lo, 0);
    rl__hotkeys_destroy(&h, &alloc);
    free(cdf);
    free(round_count);
    free(exact);
    free(touched);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("hotkeys");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, bad_sizes);
    tcase_add_test(tc, counts_replacement_order_and_filter);
    tcase_add_test(tc, index_and_heap_against_the_entries);
    tcase_add_test(tc, zipf_with_planted_heavy_keys);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }

/* SPDX-License-Identifier: MIT */
/* The quota journal (quota/journal.c): a bounded FIFO ring of the charges
 * waiting for Redis. */
#include "testutil.h"
#include "quota/journal.h"
#include "base/alloc.h"

START_TEST(journal_is_a_bounded_fifo)
{
    rl_allocator_t a = {0};
    rl__alloc_defaults(&a);
    rl_qjournal_t j;
    ck_assert_int_eq(rl__qjournal_init(&j, &a, 4), 0);
    rl_qjentry_t e = {0}, out;
    ck_assert_int_eq(rl__qjournal_peek(&j, &out), -1);
    uint64_t next_in = 1, next_out = 1;
    /* Around the ring several times: full refuses, order is kept. */
    for (int round = 0; round < 5; round++) {
        while (j.len < 4) {
            e.cost = next_in++;
            ck_assert_int_eq(rl__qjournal_push(&j, &e), 0);
        }
        e.cost = 999;
        ck_assert_int_eq(rl__qjournal_push(&j, &e), -1);
        for (int k = 0; k < 3; k++) {
            ck_assert_int_eq(rl__qjournal_peek(&j, &out), 0);
            ck_assert_uint_eq(out.cost, next_out++);
            rl__qjournal_pop(&j);
        }
    }
    rl__qjournal_destroy(&j, &a);
    /* A journal of 0 keeps nothing. */
    ck_assert_int_eq(rl__qjournal_init(&j, &a, 0), 0);
    ck_assert_int_eq(rl__qjournal_push(&j, &e), -1);
    rl__qjournal_pop(&j);
    rl__qjournal_destroy(&j, &a);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("quota_journal");
    TCase *tc = tcase_create("journal");
    tcase_add_test(tc, journal_is_a_bounded_fifo);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }

/* SPDX-License-Identifier: MIT */
/* The sync round's report policy (rl__sync_report_policy, sync/round.c),
 * without Redis: which keys report in a round, what period they announce,
 * how long they linger, round by round against the model. */
#include <stdint.h>
#include "testutil.h"
#include "sync/sync.h"

/* A hot key of a hot_policy=local limit (hot_every 4), round by
 * round against the model: near and steady, it reports every 4th round
 * announcing 4 and is revisited in between; at once when its last report
 * announced another period, when it has no share, and when its demand
 * falls; without the hot mark, every round. */
START_TEST(report_policy_hot_every)
{
    rl_report_action_t a;
    /* entering: the last report announced one round */
    rl_report_view_t v = {.pend_o = 200, .since = 1, .could = 150, .period = 1,
                          .has_share = 1, .hot_every = 4, .round_o = 200};
    rl__sync_report_policy(&v, &a);
    ck_assert_int_eq(a.report, 1);
    ck_assert_uint_eq(a.announce, 4);
    for (uint64_t since = 1; since <= 6; since++) {
        v = (rl_report_view_t){.pend_o = 200 * since, .since = since, .could = 100 * since + 50,
                               .period = 4, .linger = RL_REPORT_LINGER, .has_share = 1,
                               .hot_every = 4, .round_o = 200};
        rl__sync_report_policy(&v, &a);
        ck_assert_msg(a.report == (since >= 4), "since %llu", (unsigned long long)since);
        ck_assert_int_eq(a.revisit, 1);
        ck_assert_uint_eq(a.announce, 4);
        ck_assert_uint_eq(a.linger, RL_REPORT_LINGER);
        /* the same key not hot (or hot_policy=sync): every round, one */
        v.hot_every = 0;
        rl__sync_report_policy(&v, &a);
        ck_assert_int_eq(a.report, 1);
        ck_assert_uint_eq(a.announce, 1);
    }
    /* no share yet: at once, as any near key */
    v = (rl_report_view_t){.pend_o = 200, .since = 1, .could = 150, .period = 4,
                           .has_share = 0, .hot_every = 4, .round_o = 200};
    rl__sync_report_policy(&v, &a);
    ck_assert_int_eq(a.report, 1);
    ck_assert_uint_eq(a.announce, 1);
    /* demand fell: two rounds of counts, none in this one (still near on
     * its old counts): at once, announcing one round; so does a round
     * under half the mean */
    v = (rl_report_view_t){.pend_o = 400, .since = 3, .could = 350, .period = 4,
                           .linger = RL_REPORT_LINGER, .has_share = 1, .hot_every = 4,
                           .round_o = 0};
    rl__sync_report_policy(&v, &a);
    ck_assert_int_eq(a.report, 1);
    ck_assert_uint_eq(a.announce, 1);
    v.round_o = 66; /* 66 * 2 * 3 < 400 */
    rl__sync_report_policy(&v, &a);
    ck_assert_int_eq(a.report, 1);
    v.round_o = 67; /* 67 * 2 * 3 >= 400: steady enough, frozen */
    rl__sync_report_policy(&v, &a);
    ck_assert_int_eq(a.report, 0);
    ck_assert_uint_eq(a.announce, 4);
    /* not near: the usual quiet policy, hot or not */
    v = (rl_report_view_t){.pend_o = 5, .since = 1, .could = 150, .period = 10,
                           .has_share = 1, .hot_every = 4, .round_o = 5};
    rl__sync_report_policy(&v, &a);
    ck_assert_int_eq(a.report, 0);
    ck_assert_uint_eq(a.announce, RL_REPORT_QUIET_MAX);
}
END_TEST

START_TEST(report_policy_follows_a_fall)
{
    /* One key, round by round. Near its limit it reports every round
     * and lingers; when its traffic drops to a residue (new counts, far from
     * near) it keeps reporting every round while it lingers, so Redis's
     * EWMA takes the fall in consecutive steps, then announces the quiet
     * period once and goes quiet (reported once and then every tenth
     * round, the fall would reach Redis over ten rounds). */
    rl_report_view_t v = {.pend_o = 60, .since = 1, .could = 110, .period = 1, .linger = 0,
                          .has_share = 1};
    rl_report_action_t a;
    rl__sync_report_policy(&v, &a);
    ck_assert_int_eq(a.report, 1);
    ck_assert_int_eq(a.revisit, 1);
    ck_assert_uint_eq(a.announce, 1);
    ck_assert_uint_eq(a.linger, RL_REPORT_LINGER);
    uint32_t linger = a.linger;
    for (int r = 1; r <= RL_REPORT_LINGER; r++) { /* a residue: 5 of 110 */
        v = (rl_report_view_t){.pend_o = 5, .since = 1, .could = 110, .period = 1,
                               .linger = linger, .has_share = 1};
        rl__sync_report_policy(&v, &a);
        ck_assert_msg(a.report == 1 && a.announce == 1, "round %d after the fall: report %d "
                      "announcing %u", r, a.report, a.announce);
        ck_assert_uint_eq(a.linger, linger - 1);
        linger = a.linger;
    }
    /* Done lingering: one report announcing the quiet period... */
    v = (rl_report_view_t){.pend_o = 5, .since = 1, .could = 110, .period = 1, .linger = 0,
                           .has_share = 1};
    rl__sync_report_policy(&v, &a);
    ck_assert_int_eq(a.report, 1);
    ck_assert_uint_eq(a.announce, RL_REPORT_QUIET_MAX);
    ck_assert_uint_eq(a.linger, 0);
    /* ...then quiet until the period is over, visited meanwhile. */
    for (uint64_t since = 1; since <= RL_REPORT_QUIET_MAX; since++) {
        v = (rl_report_view_t){.pend_o = 5 * since, .since = since, .could = 1000,
                               .period = RL_REPORT_QUIET_MAX, .linger = 0, .has_share = 1};
        rl__sync_report_policy(&v, &a);
        ck_assert_int_eq(a.report, since == RL_REPORT_QUIET_MAX);
        ck_assert_int_eq(a.revisit, since < RL_REPORT_QUIET_MAX);
    }
    /* Silent and not lingering: nothing, not even a visit. */
    v = (rl_report_view_t){.pend_o = 0, .since = 3, .could = 0, .period = 1, .linger = 0,
                           .has_share = 1};
    rl__sync_report_policy(&v, &a);
    ck_assert_int_eq(a.report + a.revisit, 0);
    /* Silent while lingering: reports (its demand decays in Redis). */
    v.linger = 2;
    rl__sync_report_policy(&v, &a);
    ck_assert_int_eq(a.report, 1);
    ck_assert_uint_eq(a.announce, 1);
    ck_assert_uint_eq(a.linger, 1);
    /* A key without a share yet reports at once, quiet, without lingering. */
    v = (rl_report_view_t){.pend_o = 1, .since = 1, .could = 50, .period = 0, .linger = 0,
                           .has_share = 0};
    rl__sync_report_policy(&v, &a);
    ck_assert_int_eq(a.report, 1);
    ck_assert_uint_eq(a.announce, RL_REPORT_QUIET_MAX);
    ck_assert_uint_eq(a.linger, 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("sync_policy");
    TCase *tc = tcase_create("policy");
    tcase_add_test(tc, report_policy_follows_a_fall);
    tcase_add_test(tc, report_policy_hot_every);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }

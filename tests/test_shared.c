/* SPDX-License-Identifier: MIT */
/* rl_open_shared: one instance across forked processes. Exactness raced
 * from several processes with the clock frozen through the clock hook (the
 * clock's value lives in a shared page the parent controls), the limit
 * registry across processes, a registry writer that dies holding the lock,
 * a checker killed mid-run, rl_close in one process, and the errors. */
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil.h"
#include "instance.h"
#include "local/limits.h"

#define NPROC 4

/* What the processes share besides the instance: the frozen clock, a start
 * line, and each child's tally. */
typedef struct {
    _Atomic uint64_t now_ns;
    _Atomic uint32_t go;
    _Atomic uint32_t ready;
    _Atomic uint64_t admitted[NPROC];
    _Atomic uint64_t denied[NPROC];
    _Atomic uint64_t checks[NPROC];
} shared_ctl_t;

static shared_ctl_t *ctl_map(void)
{
    void *p = mmap(NULL, sizeof(shared_ctl_t), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    shared_ctl_t *c = p;
    /* relaxed: before any fork. */
    atomic_store_explicit(&c->now_ns, UINT64_C(5000000000), memory_order_relaxed);
    return c;
}

static uint64_t frozen_clock(void *ud, int32_t source)
{
    (void)source;
    /* relaxed: the parent moves it only while no child checks. */
    return atomic_load_explicit(&((shared_ctl_t *)ud)->now_ns, memory_order_relaxed);
}

static rl_t *open_shared(shared_ctl_t *ctl, uint32_t max_keys)
{
    rl_config_t cfg;
    rl_config_init(&cfg);
    cfg.max_keys = max_keys;
    cfg.clock = frozen_clock;
    cfg.clock_ud = ctl;
    rl_t *rl = NULL;
    int rc = rl_open_shared(&rl, &cfg);
    ck_assert_msg(rc == 0, "rl_open_shared: %s", rl_err_name(rc));
    return rl;
}

static void wait_children(pid_t *pids, int n)
{
    for (int i = 0; i < n; i++) {
        int st = 0;
        ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d: status %#x", i, st);
    }
}

/* Each child: wait for the start line, then check every key of `nkeys`
 * round robin `rounds` times, tallying the answers. */
static void hammer(rl_t *rl, shared_ctl_t *ctl, int me, int id, int nkeys, int rounds)
{
    /* release/acquire: the parent starts everyone at once. */
    atomic_fetch_add_explicit(&ctl->ready, 1, memory_order_release);
    while (!atomic_load_explicit(&ctl->go, memory_order_acquire))
        ;
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < nkeys; k++) {
            char key[16];
            int len = snprintf(key, sizeof key, "k%d", (k + me) % nkeys);
            int rc = rl_check(rl, id, key, (size_t)len, 1, NULL);
            if (rc != RL_ALLOW && rc != RL_DENY)
                _exit(10);
            /* relaxed: read after waitpid, which orders it. */
            atomic_fetch_add_explicit(rc == RL_ALLOW ? &ctl->admitted[me] : &ctl->denied[me], 1,
                                      memory_order_relaxed);
            atomic_fetch_add_explicit(&ctl->checks[me], 1, memory_order_relaxed);
        }
    }
}

/* The model: with the clock frozen, each key admits exactly its burst, and
 * no more, whatever the processes' interleaving. */
START_TEST(exact_across_processes)
{
    shared_ctl_t *ctl = ctl_map();
    rl_t *rl = open_shared(ctl, 4096);
    rl_limit_t lim;
    ck_assert_int_eq(rl_limit_parse(&lim, "name=api rate=1/h burst=300 mode=local", NULL, 0), 0);
    int id = rl_limit_add(rl, &lim);
    ck_assert_int_ge(id, 0);
    enum { KEYS = 8, ROUNDS = 200 };
    pid_t pids[NPROC];
    for (int i = 0; i < NPROC; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0) {
            hammer(rl, ctl, i, id, KEYS, ROUNDS);
            _exit(0);
        }
    }
    WAIT_FOR(atomic_load_explicit(&ctl->ready, memory_order_acquire) == NPROC);
    atomic_store_explicit(&ctl->go, 1, memory_order_release);
    wait_children(pids, NPROC);
    uint64_t admitted = 0, denied = 0;
    for (int i = 0; i < NPROC; i++) {
        admitted += atomic_load_explicit(&ctl->admitted[i], memory_order_relaxed);
        denied += atomic_load_explicit(&ctl->denied[i], memory_order_relaxed);
    }
    ck_assert_uint_eq(admitted, (uint64_t)KEYS * 300);
    ck_assert_uint_eq(admitted + denied, (uint64_t)NPROC * KEYS * ROUNDS);
    /* The parent sees the children's work: counters and buckets. */
    rl_stats_t st;
    rl_stats_init(&st);
    ck_assert_int_eq(rl_stats(rl, &st), 0);
    ck_assert_uint_eq(st.admitted, admitted);
    ck_assert_uint_eq(st.denied, denied);
    ck_assert_uint_eq(st.keys_live, KEYS);
    ck_assert_int_eq(rl_check(rl, id, "k0", 2, 1, NULL), RL_DENY);
    /* Time moves for everyone: one token per key after an hour. */
    atomic_store_explicit(&ctl->now_ns, UINT64_C(5000000000) + UINT64_C(3600000000000),
                          memory_order_relaxed);
    ck_assert_int_eq(rl_check(rl, id, "k0", 2, 1, NULL), RL_ALLOW);
    ck_assert_int_eq(rl_check(rl, id, "k0", 2, 1, NULL), RL_DENY);
    rl_close(rl);
    munmap(ctl, sizeof *ctl);
}
END_TEST

/* Contrast, and the reason for the mode: a plain instance is unusable in a
 * forked child (each worker would need its own, and a limit would hold per
 * process). */
START_TEST(plain_instance_is_per_process)
{
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, NULL), 0);
    rl_limit_t lim;
    ck_assert_int_eq(rl_limit_parse(&lim, "name=api rate=1/h burst=5", NULL, 0), 0);
    int id = rl_limit_add(rl, &lim);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(rl_check(rl, id, "k", 1, 1, NULL) == RL_EFORKED ? 0 : 1);
    wait_children(&pid, 1);
    rl_close(rl);
}
END_TEST

/* Limits added, updated and removed in one process are seen by all, with
 * the same ids; the bucket state survives an update made elsewhere. */
START_TEST(registry_across_processes)
{
    shared_ctl_t *ctl = ctl_map();
    rl_t *rl = open_shared(ctl, 1024);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        rl_limit_t lim;
        if (rl_limit_parse(&lim, "name=child rate=1/h burst=3", NULL, 0) != 0)
            _exit(1);
        int id = rl_limit_add(rl, &lim);
        if (id < 0 || rl_check(rl, id, "k", 1, 2, NULL) != RL_ALLOW)
            _exit(2);
        _exit(0);
    }
    wait_children(&pid, 1);
    int id = rl_limit_find(rl, "child");
    ck_assert_int_ge(id, 0);
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 0, &d), RL_ALLOW); /* a peek */
    ck_assert_uint_eq(d.remaining, 1);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        rl_limit_t lim;
        if (rl_limit_parse(&lim, "name=child rate=2/h burst=6", NULL, 0) != 0 ||
            rl_limit_update(rl, id, &lim) != 0)
            _exit(1);
        _exit(0);
    }
    wait_children(&pid, 1);
    rl_limit_t got;
    rl_limit_init(&got);
    ck_assert_int_eq(rl_limit_get(rl, id, &got), 0);
    ck_assert_uint_eq(got.burst, 6);
    /* The child's 2 tokens stay consumed across its update: 4 of 6 left. */
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 0, &d), RL_ALLOW);
    ck_assert_uint_eq(d.remaining, 4);
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 4, NULL), RL_ALLOW);
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, NULL), RL_DENY);
    ck_assert_int_eq(rl_limit_remove(rl, id), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(rl_check(rl, id, "k", 1, 1, NULL) == RL_ENOTFOUND &&
                      rl_limit_find(rl, "child") == RL_ENOTFOUND
                  ? 0
                  : 1);
    wait_children(&pid, 1);
    rl_close(rl);
    munmap(ctl, sizeof *ctl);
}
END_TEST

/* A process that dies holding the registry's lock blocks nobody: the next
 * writer takes it over (a private, non-robust mutex would hang here until
 * the test's timeout). */
START_TEST(writer_dies_holding_the_lock)
{
    shared_ctl_t *ctl = ctl_map();
    rl_t *rl = open_shared(ctl, 1024);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        rl__limits_lock(&rl->limits);
        _exit(0); /* never unlocks */
    }
    wait_children(&pid, 1);
    rl_limit_t lim;
    ck_assert_int_eq(rl_limit_parse(&lim, "name=after rate=1/h burst=1", NULL, 0), 0);
    ck_assert_int_ge(rl_limit_add(rl, &lim), 0);
    ck_assert_int_ge(rl_limit_find(rl, "after"), 0);
    char buf[8192];
    ck_assert_int_gt(rl_metrics_text(rl, buf, sizeof buf), 0);
    ck_assert_ptr_nonnull(strstr(buf, "limit=\"after\""));
    rl_close(rl);
    munmap(ctl, sizeof *ctl);
}
END_TEST

/* A checker killed at an arbitrary point of its run: the others go on, and
 * with the clock frozen no key ever admits more than its burst. */
START_TEST(checker_killed_midway)
{
    shared_ctl_t *ctl = ctl_map();
    rl_t *rl = open_shared(ctl, 4096);
    rl_limit_t lim;
    ck_assert_int_eq(rl_limit_parse(&lim, "name=api rate=1/h burst=1000 mode=local", NULL, 0), 0);
    int id = rl_limit_add(rl, &lim);
    pid_t victim = fork();
    ck_assert_int_ge(victim, 0);
    if (victim == 0) {
        hammer(rl, ctl, 0, id, 64, 1000000);
        _exit(0);
    }
    atomic_store_explicit(&ctl->go, 1, memory_order_release);
    /* Let it get going, then kill it wherever it is. */
    WAIT_FOR(atomic_load_explicit(&ctl->checks[0], memory_order_relaxed) > 20000);
    kill(victim, SIGKILL);
    int st;
    ck_assert_int_eq(waitpid(victim, &st, 0), victim);
    uint64_t before = atomic_load_explicit(&ctl->admitted[0], memory_order_relaxed);
    pid_t pids[NPROC - 1];
    for (int i = 0; i < NPROC - 1; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0) {
            hammer(rl, ctl, i + 1, id, 64, 1100);
            _exit(0);
        }
    }
    wait_children(pids, NPROC - 1);
    uint64_t after = 0;
    for (int i = 1; i < NPROC; i++)
        after += atomic_load_explicit(&ctl->admitted[i], memory_order_relaxed);
    /* The victim may have been killed between its charge and its tally:
     * up to one admission it made is not in `before`. */
    ck_assert_uint_le(before + after, 64u * 1000);
    ck_assert_uint_ge(before + after + 1, 64u * 1000);
    rl_close(rl);
    munmap(ctl, sizeof *ctl);
}
END_TEST

/* rl_close in one process drops its view only. */
START_TEST(close_in_one_process)
{
    shared_ctl_t *ctl = ctl_map();
    rl_t *rl = open_shared(ctl, 1024);
    rl_limit_t lim;
    ck_assert_int_eq(rl_limit_parse(&lim, "name=api rate=1/h burst=2", NULL, 0), 0);
    int id = rl_limit_add(rl, &lim);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int ok = rl_check(rl, id, "k", 1, 1, NULL) == RL_ALLOW;
        rl_close(rl);
        _exit(ok ? 0 : 1);
    }
    wait_children(&pid, 1);
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, NULL), RL_ALLOW);
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, NULL), RL_DENY);
    rl_close(rl);
    munmap(ctl, sizeof *ctl);
}
END_TEST

static void *no_alloc(void *opaque, size_t size, size_t align)
{
    (void)opaque;
    (void)size;
    (void)align;
    return NULL;
}

static void no_free(void *opaque, void *p, size_t size, size_t align)
{
    (void)opaque;
    (void)p;
    (void)size;
    (void)align;
}

START_TEST(errors)
{
    rl_t *rl = (rl_t *)1;
    ck_assert_int_eq(rl_open_shared(NULL, NULL), RL_EINVAL);
    rl_config_t cfg;
    rl_config_init(&cfg);
    char msg[256];
    cfg.allocator.alloc = no_alloc;
    cfg.allocator.free = no_free;
    cfg.err = msg;
    cfg.errlen = sizeof msg;
    ck_assert_int_eq(rl_open_shared(&rl, &cfg), RL_ENOTSUP);
    ck_assert_ptr_null(rl);
    ck_assert_msg(strstr(msg, "allocator") != NULL, "%s", msg);
    rl_config_init(&cfg);
    cfg.max_keys = 1;
    cfg.err = msg;
    cfg.errlen = sizeof msg;
    ck_assert_int_eq(rl_open_shared(&rl, &cfg), RL_ERANGE);
    ck_assert_msg(strstr(msg, "max_keys") != NULL, "%s", msg);
    rl_config_init(&cfg);
    cfg.size = 8;
    ck_assert_int_eq(rl_open_shared(&rl, &cfg), RL_ESIZE);
    ck_assert_int_eq(rl_open_shared(&rl, NULL), 0);
    ck_assert_ptr_nonnull(rl);
    rl_close(rl);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shared");
    TCase *tc = tcase_create("shared");
    tcase_add_test(tc, plain_instance_is_per_process);
    tcase_add_test(tc, registry_across_processes);
    tcase_add_test(tc, writer_dies_holding_the_lock);
    tcase_add_test(tc, close_in_one_process);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    /* Several children checking at once: not under the integer sanitizer
     * (scripts/test.sh --integer says why). */
    TCase *race = tcase_create("race");
    tcase_set_tags(race, "nointeger");
    tcase_add_test(race, exact_across_processes);
    tcase_add_test(race, checker_killed_midway);
    suite_add_tcase(s, race);
    return rl_test_run(s);
}

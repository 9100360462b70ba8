/* SPDX-License-Identifier: MIT */
/* The public API's contract: bad inputs, errors, versions, struct sizes,
 * config ranges, out-of-memory, check_multi, fork. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil.h"

static rl_t *rl;
static int lim;

static void setup(void)
{
    rl = rl_test_open(NULL, 1024);
    lim = rl_test_add(rl, "name=api rate=1/h burst=5");
}

static void teardown(void) { rl_close(rl); }

START_TEST(null_handle)
{
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(rl_check(NULL, lim, "k", 1, 1, &d), RL_EINVAL);
    ck_assert_int_eq(d.allowed, RL_DENY);
    ck_assert_int_eq(rl_refund(NULL, lim, "k", 1, 1), RL_EINVAL);
    rl_limit_t l;
    rl_limit_init(&l);
    ck_assert_int_eq(rl_limit_add(NULL, &l), RL_EINVAL);
    ck_assert_int_eq(rl_limit_add(rl, NULL), RL_EINVAL);
    ck_assert_int_eq(rl_limit_update(NULL, lim, &l), RL_EINVAL);
    ck_assert_int_eq(rl_limit_remove(NULL, lim), RL_EINVAL);
    ck_assert_int_eq(rl_limit_find(NULL, "api"), RL_EINVAL);
    ck_assert_int_eq(rl_limit_find(rl, NULL), RL_EINVAL);
    ck_assert_int_eq(rl_limit_get(NULL, lim, &l), RL_EINVAL);
    rl_stats_t s;
    rl_stats_init(&s);
    ck_assert_int_eq(rl_stats(NULL, &s), RL_EINVAL);
    ck_assert_int_eq(rl_stats(rl, NULL), RL_EINVAL);
    ck_assert_int_eq(rl_open(NULL, NULL), RL_EINVAL);
    rl_close(NULL); /* a no-op */
    rl_config_init(NULL);
    rl_limit_init(NULL);
    rl_decision_init(NULL);
}
END_TEST

START_TEST(key_inputs)
{
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(rl_check(rl, lim, NULL, 3, 1, &d), RL_EINVAL);
    ck_assert_int_eq(rl_check(rl, lim, NULL, 0, 1, &d), RL_EKEYLEN);
    ck_assert_int_eq(rl_check(rl, lim, "k", 0, 1, &d), RL_EKEYLEN);
    char big[RL_MAX_KEY_LEN + 1];
    memset(big, 'x', sizeof big);
    ck_assert_int_eq(rl_check(rl, lim, big, RL_MAX_KEY_LEN + 1, 1, &d), RL_EKEYLEN);
    ck_assert_int_eq(rl_check(rl, lim, big, RL_MAX_KEY_LEN, 1, &d), RL_ALLOW);
    ck_assert_int_eq(rl_check(rl, lim, big, SIZE_MAX, 1, &d), RL_EKEYLEN);
    ck_assert_int_eq(rl_refund(rl, lim, NULL, 2, 1), RL_EINVAL);
    ck_assert_int_eq(rl_refund(rl, lim, "k", 0, 1), RL_EKEYLEN);
    /* Binary keys: NUL bytes and prefixes are distinct keys. */
    const char a[] = {'a', 0, 'b'};
    const char b[] = {'a', 0, 'c'};
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(rl_check(rl, lim, a, 3, 1, &d), RL_ALLOW);
    ck_assert_int_eq(rl_check(rl, lim, a, 3, 1, &d), RL_DENY);
    ck_assert_int_eq(rl_check(rl, lim, b, 3, 1, &d), RL_ALLOW);
    ck_assert_int_eq(rl_check(rl, lim, a, 2, 1, &d), RL_ALLOW);
    ck_assert_int_eq(rl_check(rl, lim, a, 1, 1, &d), RL_ALLOW);
}
END_TEST

START_TEST(limit_ids)
{
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(rl_check(rl, -1, "k", 1, 1, &d), RL_ENOTFOUND);
    ck_assert_int_eq(rl_check(rl, 0, "k", 1, 1, &d), RL_ENOTFOUND);
    ck_assert_int_eq(rl_check(rl, lim + 1, "k", 1, 1, &d), RL_ENOTFOUND);
    ck_assert_int_eq(rl_check(rl, lim + 4096, "k", 1, 1, &d), RL_ENOTFOUND);
    ck_assert_int_eq(rl_check(rl, 0x7fffffff, "k", 1, 1, &d), RL_ENOTFOUND);
    ck_assert_int_eq(rl_limit_find(rl, "nope"), RL_ENOTFOUND);
    ck_assert_int_eq(rl_limit_find(rl, "api"), lim);
    rl_limit_t l;
    rl_limit_init(&l);
    ck_assert_int_eq(rl_limit_get(rl, lim, &l), 0);
    ck_assert_str_eq(l.name, "api");
    ck_assert_uint_eq(l.rate.count, 1);
    ck_assert_uint_eq(l.rate.period_ms, 3600000);
    ck_assert_int_eq(rl_limit_get(rl, lim + 1, &l), RL_ENOTFOUND);
    ck_assert_int_eq(rl_limit_remove(rl, lim), 0);
    ck_assert_int_eq(rl_check(rl, lim, "k", 1, 1, &d), RL_ENOTFOUND);
    ck_assert_int_eq(rl_refund(rl, lim, "k", 1, 1), RL_ENOTFOUND);
    ck_assert_int_eq(rl_limit_update(rl, lim, &l), RL_ENOTFOUND);
}
END_TEST

START_TEST(limit_add_errors)
{
    rl_limit_t l;
    char err[200];
    ck_assert_int_eq(rl_limit_parse(&l, "name=api rate=5/s", err, sizeof err), 0);
    ck_assert_int_eq(rl_limit_add(rl, &l), RL_EEXIST);
    rl_limit_init(&l);
    ck_assert_int_eq(rl_limit_add(rl, &l), RL_ENAME);
    strcpy(l.name, "x");
    ck_assert_int_eq(rl_limit_add(rl, &l), RL_ERANGE); /* no rate */
    l.rate.count = 10;
    l.rate.period_ms = 1000;
    l.mode = 9;
    ck_assert_int_eq(rl_limit_add(rl, &l), RL_EMODE);
    l.mode = RL_MODE_LOCAL;
    l.on_failure = -2; /* below RL_FAIL_DEFAULT */
    ck_assert_int_eq(rl_limit_add(rl, &l), RL_EMODE);
    l.on_failure = RL_FAIL_OPEN;
    l.burst = UINT64_C(2000000000);
    ck_assert_int_eq(rl_limit_add(rl, &l), RL_ERANGE);
    l.burst = 0;
    l.rate.count = UINT64_MAX;
    ck_assert_int_eq(rl_limit_add(rl, &l), RL_ERANGE);
    l.rate.count = 10;
    l.shadow = 7;
    ck_assert_int_eq(rl_limit_add(rl, &l), RL_ERANGE);
    l.shadow = 0;
    l.size = sizeof l - 1;
    ck_assert_int_eq(rl_limit_add(rl, &l), RL_ESIZE);
    l.size = sizeof l;
    ck_assert_int_ge(rl_limit_add(rl, &l), 0);
}
END_TEST

/* A caller built against a newer header: a larger struct is fine only if
 * the fields this library does not know are zero. */
START_TEST(struct_sizes)
{
    struct {
        rl_limit_t l;
        uint64_t future;
    } big;
    memset(&big, 0, sizeof big);
    rl_limit_init_sized(&big.l, sizeof big);
    ck_assert_uint_eq(big.l.size, sizeof big);
    strcpy(big.l.name, "newer");
    big.l.rate.count = 1;
    big.l.rate.period_ms = 1000;
    ck_assert_int_ge(rl_limit_add(rl, &big.l), 0);
    big.future = 1;
    strcpy(big.l.name, "newer2");
    ck_assert_int_eq(rl_limit_add(rl, &big.l), RL_ESIZE);

    rl_decision_t d;
    rl_decision_init(&d);
    d.size = 4;
    ck_assert_int_eq(rl_check(rl, lim, "k", 1, 1, &d), RL_ESIZE);
    /* An older, smaller decision gets only the fields it has. */
    struct {
        rl_decision_t d;
    } old;
    memset(&old, 0xAB, sizeof old);
    size_t old_size = offsetof(rl_decision_t, window_ms);
    rl_decision_init_sized(&old.d, old_size);
    ck_assert_int_eq(rl_check(rl, lim, "k", 1, 1, &old.d), RL_ALLOW);
    ck_assert_uint_eq(old.d.remaining, 4);
    const unsigned char *tail = (const unsigned char *)&old.d + old_size;
    for (size_t i = 0; i < sizeof old.d - old_size; i++)
        ck_assert_uint_eq(tail[i], 0xAB);

    rl_stats_t s;
    rl_stats_init(&s);
    s.size = 8;
    ck_assert_int_eq(rl_stats(rl, &s), RL_ESIZE);

    rl_config_t c;
    rl_config_init(&c);
    c.size = sizeof c - 4; /* no layout ends there */
    rl_t *x = (rl_t *)1;
    ck_assert_int_eq(rl_open(&x, &c), RL_ESIZE);
    ck_assert_ptr_null(x);
    /* The layout before exact mode's fields (0.2) opens, with their defaults. */
    rl_config_init(&c);
    c.size = offsetof(rl_config_t, exact_timeout_ms);
    ck_assert_int_eq(rl_open(&x, &c), 0);
    rl_close(x);
}
END_TEST

/*
 * A decision of every size from the oldest layout to a newer, larger one
 * (rl_decision_t's size field): the library writes each field that fits
 * whole, the bytes of a field the size cuts that fit, and nothing past
 * its own struct or the caller's size. Padding between fields is no one's.
 */
START_TEST(decision_written_by_its_size)
{
    static const struct {
        size_t off, len;
    } fields[] = {
#define F(m) {offsetof(rl_decision_t, m), sizeof(((rl_decision_t *)0)->m)}
        F(size), F(allowed),   F(limit), F(remaining), F(reset_ms),
        F(retry_after_ms), F(flags), F(window_ms), F(burst), F(policy),
#undef F
    };
    rl_test_clock_t clk = {UINT64_C(1000000000), 0};
    rl_t *r = rl_test_open(&clk, 1024);
    int id = rl_test_add(r, "name=sizes rate=10/s burst=5");
    for (size_t size = offsetof(rl_decision_t, window_ms); size <= sizeof(rl_decision_t) + 24;
         size++) {
        char key[32];
        rl_decision_t ref;
        rl_decision_init(&ref);
        snprintf(key, sizeof key, "r%zu", size);
        ck_assert_int_eq(rl_check(r, id, key, strlen(key), 2, &ref), RL_ALLOW);
        union {
            rl_decision_t d;
            unsigned char b[sizeof(rl_decision_t) + 32];
        } u;
        memset(&u, 0xAB, sizeof u);
        rl_decision_init_sized(&u.d, size);
        snprintf(key, sizeof key, "k%zu", size);
        ck_assert_int_eq(rl_check(r, id, key, strlen(key), 2, &u.d), RL_ALLOW);
        ck_assert_uint_eq(u.d.size, size);
        const unsigned char *want = (const unsigned char *)&ref;
        for (size_t i = sizeof u.d.size; i < sizeof u.b; i++) {
            int in_field = 0;
            for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
                in_field |= i >= fields[f].off && i < fields[f].off + fields[f].len;
            if (i >= size)
                REQUIRE(u.b[i] == 0xAB, "size %zu: byte %zu past the size written", size, i);
            else if (i >= sizeof ref)
                REQUIRE(u.b[i] == 0, "size %zu: byte %zu of a newer tail written", size, i);
            else if (in_field)
                REQUIRE(u.b[i] == want[i], "size %zu: byte %zu is not the decision's", size, i);
        }
    }
    rl_close(r);
}
END_TEST

/* ------------------------------------------------------------ allocator */

typedef struct counting_alloc {
    long fail_at; /* the allocation number that fails (-1: never) */
    long calls;
    long outstanding;
    size_t bytes;
} counting_alloc_t;

static void *cnt_alloc(void *opaque, size_t size, size_t align)
{
    counting_alloc_t *a = opaque;
    if (a->calls++ == a->fail_at)
        return NULL;
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size) != 0)
        return NULL;
    a->outstanding++;
    a->bytes += size;
    return p;
}

static void cnt_free(void *opaque, void *ptr, size_t size, size_t align)
{
    counting_alloc_t *a = opaque;
    (void)align;
    a->outstanding--;
    a->bytes -= size;
    free(ptr);
}

START_TEST(config_ranges)
{
    rl_config_t c;
    rl_t *x;
#define EXPECT_RANGE(stmt)                                   \
    do {                                                     \
        rl_config_init(&c);                                  \
        stmt;                                                \
        ck_assert_int_eq(rl_open(&x, &c), RL_ERANGE);        \
    } while (0)
    EXPECT_RANGE(c.sync_interval_ms = 49);
    EXPECT_RANGE(c.sync_interval_ms = 201);
    EXPECT_RANGE(c.max_keys = 15);
    EXPECT_RANGE(c.max_keys = (1u << 28) + 1);
    EXPECT_RANGE(c.expected_nodes = 0);
    EXPECT_RANGE(c.key_ttl_ms = 999);
    EXPECT_RANGE(c.max_limits = 0);
    EXPECT_RANGE(c.max_limits = RL_MAX_LIMITS + 1);
    EXPECT_RANGE(c.reserved0 = 1);
    EXPECT_RANGE(c.reserved1 = 1);
    EXPECT_RANGE(c.demand_alpha_pct = 0);
    EXPECT_RANGE(c.demand_alpha_pct = 101);
    EXPECT_RANGE(c.key_secret = "short"; c.key_secret_len = 5);
    EXPECT_RANGE(c.key_secret_len = 16);
    EXPECT_RANGE(c.allocator.alloc = cnt_alloc); /* free missing */
    EXPECT_RANGE(c.redis_url = "http://127.0.0.1:6379");
    EXPECT_RANGE(c.redis_url = "redis://127.0.0.1:0");
    EXPECT_RANGE(c.redis_url = "redis://:6379");
    EXPECT_RANGE(c.node_id = "has space");
    EXPECT_RANGE(c.key_prefix = "{tag}");
    /* Nothing listening: rl_open does not wait for Redis, and rl_close
     * returns promptly with nothing to hand back. */
    rl_config_init(&c);
    c.redis_url = "redis://127.0.0.1:1";
    c.key_secret = "fleet-secret-0123456789";
    c.key_secret_len = 23;
    ck_assert_int_eq(rl_open(&x, &c), 0);
    rl_close(x);
#undef EXPECT_RANGE
    /* Too many limits. */
    rl_config_init(&c);
    c.max_limits = 2;
    ck_assert_int_eq(rl_open(&x, &c), 0);
    ck_assert_int_ge(rl_test_add(x, "name=a rate=1/s"), 0);
    ck_assert_int_ge(rl_test_add(x, "name=b rate=1/s"), 0);
    rl_limit_t l;
    ck_assert_int_eq(rl_limit_parse(&l, "name=c rate=1/s", NULL, 0), 0);
    ck_assert_int_eq(rl_limit_add(x, &l), RL_ELIMITS);
    rl_close(x);
}
END_TEST

/* Which modes the global tier governs: with Redis unreachable (degraded),
 * on_failure=closed denies, flagged, exactly the limits that are synced.
 * mode=exact has no per-request Redis path yet, so it must at least be
 * synced like global; were it decided locally, a fleet of N nodes would
 * admit N times its rate. */
START_TEST(modes_governed_by_global_tier)
{
    rl_t *x = rl_test_open_degraded(50);
    static const struct {
        const char *spec;
        int synced;
    } modes[] = {
        {"name=l rate=10/s mode=local on_failure=closed", 0},
        {"name=g rate=10/s mode=global on_failure=closed", 1},
        {"name=e rate=10/s mode=exact on_failure=closed", 1},
        {"name=t rate=10/s mode=tiered on_failure=closed", 1},
    };
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        int id = rl_test_add(x, modes[i].spec);
        ck_assert_int_gt(id, 0);
        rl_decision_t d;
        rl_decision_init(&d);
        int rc = rl_check(x, id, "k", 1, 1, &d);
        ck_assert_msg(rc == (modes[i].synced ? RL_DENY : RL_ALLOW), "%s: %d", modes[i].spec, rc);
        ck_assert_msg(((d.flags & RL_FLAG_DEGRADED) != 0) == modes[i].synced, "%s: flags %#x",
                      modes[i].spec, (unsigned)d.flags);
    }
    rl_close(x);
}
END_TEST

START_TEST(error_table)
{
    /* Every code has its own name and message; unknown codes are named. */
    int codes[] = {
#define RL__CODE(name, value, msg) RL_##name,
        RL_ERRNO_MAP(RL__CODE)
#undef RL__CODE
    };
    size_t n = sizeof codes / sizeof codes[0];
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_lt(codes[i], 0);
        ck_assert_str_ne(rl_err_name(codes[i]), "RL_EUNKNOWN");
        ck_assert_str_ne(rl_strerror(codes[i]), "unknown error");
        for (size_t j = 0; j < i; j++) {
            ck_assert_int_ne(codes[i], codes[j]);
            ck_assert_str_ne(rl_err_name(codes[i]), rl_err_name(codes[j]));
        }
    }
    ck_assert_str_eq(rl_err_name(RL_ENOMEM), "RL_ENOMEM");
    ck_assert_str_eq(rl_err_name(-9999), "RL_EUNKNOWN");
    ck_assert_str_eq(rl_strerror(-9999), "unknown error");
    ck_assert_str_eq(rl_strerror(0), "success");
    char v[32];
    snprintf(v, sizeof v, "%d.%d.%d", RL_VERSION_MAJOR, RL_VERSION_MINOR, RL_VERSION_PATCH);
    ck_assert_str_eq(rl_version(), v);
    ck_assert_uint_eq(rl_version_hex(), RL_VERSION_HEX);
}
END_TEST

START_TEST(out_of_memory_every_allocation)
{
    /* Fail the Nth allocation of rl_open for every N until it succeeds:
     * each failure is RL_ENOMEM and leaves nothing allocated. */
    long n;
    for (n = 0;; n++) {
        counting_alloc_t a = {n, 0, 0, 0};
        rl_config_t c;
        rl_config_init(&c);
        c.allocator.alloc = cnt_alloc;
        c.allocator.free = cnt_free;
        c.allocator.opaque = &a;
        c.node_id = "node-a";
        rl_t *x = NULL;
        int rc = rl_open(&x, &c);
        if (rc == 0) {
            ck_assert_int_ge(rl_test_add(x, "name=a rate=1/s"), 0);
            ck_assert_int_eq(rl_check(x, rl_limit_find(x, "a"), "k", 1, 1, NULL), RL_ALLOW);
            rl_close(x);
            ck_assert_int_eq(a.outstanding, 0);
            ck_assert_uint_eq(a.bytes, 0);
            break;
        }
        ck_assert_int_eq(rc, RL_ENOMEM);
        ck_assert_ptr_null(x);
        ck_assert_int_eq(a.outstanding, 0);
        ck_assert_uint_eq(a.bytes, 0);
    }
    ck_assert_int_ge(n, 3); /* instance, node id, limits, table at least */
}
END_TEST

/* ------------------------------------------------------------ multi */

static void req(rl_request_t *r, int id, const char *key, uint32_t cost)
{
    rl_request_init(r);
    r->limit = id;
    r->key = key;
    r->key_len = strlen(key);
    r->cost = cost;
}

START_TEST(multi_all_or_nothing)
{
    int a = rl_test_add(rl, "name=ma rate=1/h burst=5");
    int b = rl_test_add(rl, "name=mb rate=1/h burst=2");
    rl_request_t r[2];
    req(&r[0], a, "user", 1);
    req(&r[1], b, "user", 1);
    rl_decision_t d[2];
    rl_decision_init(&d[0]);
    rl_decision_init(&d[1]);
    size_t denied = 99;
    ck_assert_int_eq(rl_check_multi(rl, r, 2, sizeof r[0], d, &denied), RL_ALLOW);
    ck_assert_uint_eq(denied, 2);
    ck_assert_int_eq(rl_check_multi(rl, r, 2, sizeof r[0], d, &denied), RL_ALLOW);
    ck_assert_int_eq(rl_check_multi(rl, r, 2, sizeof r[0], d, &denied), RL_DENY);
    ck_assert_uint_eq(denied, 1);
    ck_assert_int_eq(d[0].allowed, RL_DENY);
    ck_assert_uint_eq(d[0].remaining, 3); /* refunded */
    ck_assert_int_eq(d[1].allowed, RL_DENY);
    ck_assert_uint_gt(d[1].retry_after_ms, 0);
    rl_decision_t p;
    rl_decision_init(&p);
    ck_assert_int_eq(rl_check(rl, a, "user", 4, 0, &p), RL_ALLOW);
    ck_assert_uint_eq(p.remaining, 3);
    /* Invalid requests charge nothing and name the bad index. */
    req(&r[1], b, "", 1);
    ck_assert_int_eq(rl_check_multi(rl, r, 2, sizeof r[0], d, &denied), RL_EKEYLEN);
    ck_assert_uint_eq(denied, 1);
    req(&r[1], b + 1, "user", 1);
    ck_assert_int_eq(rl_check_multi(rl, r, 2, sizeof r[0], d, &denied), RL_ENOTFOUND);
    req(&r[1], b, "user", 3);
    ck_assert_int_eq(rl_check_multi(rl, r, 2, sizeof r[0], d, &denied), RL_ECOST);
    req(&r[1], b, "user", 1);
    ck_assert_int_eq(rl_check_multi(rl, r, 2, sizeof r[0] - 1, d, &denied), RL_ESIZE);
    ck_assert_int_eq(rl_check_multi(rl, NULL, 2, sizeof r[0], d, &denied), RL_EINVAL);
    ck_assert_int_eq(rl_check_multi(rl, r, RL_MULTI_MAX + 1, sizeof r[0], NULL, NULL), RL_ERANGE);
    ck_assert_int_eq(rl_check(rl, a, "user", 4, 0, &p), RL_ALLOW);
    ck_assert_uint_eq(p.remaining, 3);
    ck_assert_int_eq(rl_check_multi(rl, r, 0, sizeof r[0], NULL, &denied), RL_ALLOW);
    ck_assert_uint_eq(denied, 0);
}
END_TEST

typedef struct multi_worker {
    rl_t *rl;
    int a, b;
    int rounds;
    int admitted;
} multi_worker_t;

static void *multi_run(void *arg)
{
    multi_worker_t *w = arg;
    rl_request_t r[2];
    req(&r[0], w->a, "shared", 1);
    req(&r[1], w->b, "shared", 1);
    for (int i = 0; i < w->rounds; i++)
        w->admitted += rl_check_multi(w->rl, r, 2, sizeof r[0], NULL, NULL) == RL_ALLOW;
    return NULL;
}

START_TEST(multi_all_or_nothing_concurrent)
{
    /* 4 threads race batches over two limits with different bursts: every
     * admitted batch charged both, every denied batch neither, so the
     * difference of what is left equals the difference of the bursts. */
    int a = rl_test_add(rl, "name=ca rate=1/h burst=1000");
    int b = rl_test_add(rl, "name=cb rate=1/h burst=400");
    multi_worker_t w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (multi_worker_t){rl, a, b, 5000, 0};
        pthread_create(&th[i], NULL, multi_run, &w[i]);
    }
    int admitted = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        admitted += w[i].admitted;
    }
    ck_assert_int_eq(admitted, 400);
    rl_decision_t da, db;
    rl_decision_init(&da);
    rl_decision_init(&db);
    rl_check(rl, a, "shared", 6, 0, &da);
    rl_check(rl, b, "shared", 6, 0, &db);
    ck_assert_uint_eq(da.remaining, 600);
    ck_assert_uint_eq(db.remaining, 0);
}
END_TEST

/* ------------------------------------------------------------ fork */

START_TEST(forked_child_gets_eforked)
{
    ck_assert_int_eq(rl_check(rl, lim, "k", 1, 1, NULL), RL_ALLOW);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int ok = rl_check(rl, lim, "k", 1, 1, NULL) == RL_EFORKED &&
                 rl_refund(rl, lim, "k", 1, 1) == RL_EFORKED &&
                 rl_limit_find(rl, "api") == RL_EFORKED;
        rl_close(rl); /* safe in the child: frees its own copy */
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    ck_assert_int_eq(rl_check(rl, lim, "k", 1, 1, NULL), RL_ALLOW); /* parent unaffected */
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("contract");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, null_handle);
    tcase_add_test(tc, key_inputs);
    tcase_add_test(tc, limit_ids);
    tcase_add_test(tc, limit_add_errors);
    tcase_add_test(tc, struct_sizes);
    tcase_add_test(tc, decision_written_by_its_size);
    tcase_add_test(tc, config_ranges);
    tcase_add_test(tc, error_table);
    tcase_add_test(tc, modes_governed_by_global_tier);
    tcase_add_test(tc, out_of_memory_every_allocation);
    tcase_add_test(tc, multi_all_or_nothing);
    tcase_add_test(tc, multi_all_or_nothing_concurrent);
    tcase_add_test(tc, forked_child_gets_eforked);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }

/* SPDX-License-Identifier: MIT */
/* The key table under concurrency: inserts, reclamation, capacity, removal. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "testutil.h"
#include "instance.h"

static uint64_t mono_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Live slots whose identity is this key's, scanning the key's whole window. */
static int copies_of(rl_t *rl, int id, const void *key, size_t len)
{
    rl_limit_slot_t *ls = rl__limit_get(&rl->limits, id);
    rl_probe_t p;
    rl__probe_init(&p, &rl->table, &rl->kh, rl__keyhash(&rl->kh, key, len), rl__limit_ref(id),
                   ls->salt);
    int n = 0;
    for (size_t d = 0; d < RL_PROBE_MAX; d++) {
        size_t i = (p.home + d) % rl->table.nslots;
        rl_slot_t *s = &rl->table.slots[i];
        uint64_t c = atomic_load(&s->ctrl);
        if (RL_CTRL_STATE(c) == RL_SLOT_LIVE && RL_CTRL_KEYBITS(c) == p.keybits &&
            atomic_load(&s->id_lo) == p.id.lo && atomic_load(&s->id_hi) == p.id.hi &&
            atomic_load(&s->tat) != RL_TAT_DEAD)
            n++;
    }
    return n;
}

/* ---------------------------------------------------------------- one key */

typedef struct hammer {
    rl_t *rl;
    int id;
    const char *key;
    uint64_t stop_ns;
    clockid_t clock;
    uint64_t admitted;
    pthread_barrier_t *start;
} hammer_t;

static void *hammer_run(void *arg)
{
    hammer_t *h = arg;
    pthread_barrier_wait(h->start);
    /* A minimum count as well as a time: under valgrind, which runs one
     * thread at a time, a thread may not get the CPU before the deadline. */
    for (int n = 0; n < 200 || mono_ns(CLOCK_MONOTONIC) < h->stop_ns; n++)
        h->admitted += rl_check(h->rl, h->id, h->key, strlen(h->key), 1, NULL) == RL_ALLOW;
    return NULL;
}

/* n threads on one key for a fixed time: admitted <= burst + rate x elapsed,
 * elapsed measured on the clock source the limit itself uses. */
static void one_key_bound(const char *spec, uint64_t rate, uint64_t burst, int nthreads)
{
    rl_t *rl = rl_test_open(NULL, 1024);
    int id = rl_test_add(rl, spec);
    rl_limit_params_t p;
    rl__params_read(rl__limit_get(&rl->limits, id), &p);
    clockid_t cid = p.clock_source == RL_CLOCK_COARSE ? CLOCK_MONOTONIC_COARSE : CLOCK_MONOTONIC;
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)nthreads + 1);
    hammer_t h[8];
    pthread_t th[8];
    uint64_t stop = mono_ns(CLOCK_MONOTONIC) + 300000000u;
    for (int i = 0; i < nthreads; i++) {
        h[i] = (hammer_t){rl, id, "hot", stop, cid, 0, &start};
        pthread_create(&th[i], NULL, hammer_run, &h[i]);
    }
    uint64_t t0 = mono_ns(cid);
    pthread_barrier_wait(&start);
    uint64_t admitted = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        admitted += h[i].admitted;
    }
    uint64_t t1 = mono_ns(cid);
    /* floor(burst + rate * elapsed), in integers. */
    uint64_t bound = burst + (uint64_t)(((unsigned __int128)rate * (t1 - t0)) / 1000000000u);
    ck_assert_uint_le(admitted, bound);
    ck_assert_uint_ge(admitted, burst); /* and it did admit */
    pthread_barrier_destroy(&start);
    rl_close(rl);
}

START_TEST(one_key_many_threads)
{
    int n = 2 + _i; /* 2..8 threads */
    one_key_bound("name=hot rate=20000/s burst=50", 20000, 50, n);  /* coarse clock */
    one_key_bound("name=hot rate=1000000/s burst=5", 1000000, 5, n); /* precise clock */
}
END_TEST

/* ------------------------------------------------- same new key, many inserts */

typedef struct racer {
    rl_t *rl;
    int id;
    int nkeys;
    pthread_barrier_t *start;
    uint64_t admitted;
} racer_t;

static void *racer_run(void *arg)
{
    racer_t *r = arg;
    char key[32];
    for (int k = 0; k < r->nkeys; k++) {
        snprintf(key, sizeof key, "new-%d", k);
        pthread_barrier_wait(r->start); /* every thread meets the key new */
        r->admitted += rl_check(r->rl, r->id, key, strlen(key), 1, NULL) == RL_ALLOW;
    }
    return NULL;
}

START_TEST(concurrent_inserts_one_slot)
{
    enum { THREADS = 4, KEYS = 3000 };
    rl_t *rl = rl_test_open(NULL, 16384);
    int id = rl_test_add(rl, "name=ins rate=1/h burst=1000");
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    racer_t r[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        r[i] = (racer_t){rl, id, KEYS, &start, 0};
        pthread_create(&th[i], NULL, racer_run, &r[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    char key[32];
    for (int k = 0; k < KEYS; k++) {
        snprintf(key, sizeof key, "new-%d", k);
        ck_assert_int_eq(copies_of(rl, id, key, strlen(key)), 1);
        rl_decision_t d;
        rl_decision_init(&d);
        ck_assert_int_eq(rl_check(rl, id, key, strlen(key), 0, &d), RL_ALLOW);
        /* All four charges landed on the key's one bucket: a claim is
         * charged only once it is the key's only slot. */
        ck_assert_uint_eq(d.remaining, 1000 - THREADS);
    }
    rl_stats_t s;
    rl_stats_init(&s);
    rl_stats(rl, &s);
    ck_assert_uint_eq(s.keys_live, KEYS);
    pthread_barrier_destroy(&start);
    rl_close(rl);
}
END_TEST

/* ---------------------------------------------- checkers racing reclamation */

#define POOL 400

typedef struct churn {
    rl_t *rl;
    int id;
    _Atomic int *stop;
    unsigned seed;
    uint64_t admitted[POOL];
} churn_t;

static void *churn_run(void *arg)
{
    churn_t *c = arg;
    char key[32];
    uint64_t now;
    while (!atomic_load(c->stop)) {
        now = mono_ns(CLOCK_MONOTONIC);
        /* The working set moves every 25 ms through 8 sets of 50 keys, so
         * keys of the last set go idle while threads still straddle sets. */
        int set = (int)((now / 25000000u) % 8);
        int k = set * (POOL / 8) + (int)(rand_r(&c->seed) % (POOL / 8));
        snprintf(key, sizeof key, "churn-%d", k);
        c->admitted[k] += rl_check(c->rl, c->id, key, strlen(key), 1, NULL) == RL_ALLOW;
    }
    return NULL;
}

enum { CHURN_THREADS = 4 };

/* The churners, held (testutil.h) so a failed test stops them before the
 * instance they use is closed. */
static struct churners {
    _Atomic int stop;
    pthread_t th[CHURN_THREADS];
} churners;

static void churners_stop(void *arg)
{
    struct churners *w = arg;
    atomic_store(&w->stop, 1);
    for (int i = 0; i < CHURN_THREADS; i++)
        pthread_join(w->th[i], NULL);
}

static uint64_t reclaimed_of(rl_t *rl)
{
    rl_stats_t s;
    rl_stats_init(&s);
    ck_assert_int_eq(rl_stats(rl, &s), 0);
    return s.reclaimed;
}

START_TEST(checkers_race_reclamation)
{
    /* 400 keys through a table of 64: keys go idle (full) within ~14 ms and
     * their slots are reclaimed and reused under running checkers. Losing a
     * full bucket is lossless, so every key still obeys its own bound, and
     * no key ever holds two slots. The checkers run at least 500 ms, and
     * until slots have been reclaimed (a loaded machine, or valgrind, may
     * give them little of that time). */
    enum { THREADS = CHURN_THREADS };
    rl_t *rl = rl_test_hold(rl_test_open(NULL, 64), rl_test_close_fn);
    int id = rl_test_add(rl, "name=churn rate=500/s burst=2 on_failure=closed");
    uint64_t t0 = mono_ns(CLOCK_MONOTONIC);
    churn_t *c = rl_test_hold(calloc(THREADS, sizeof *c), free);
    atomic_init(&churners.stop, 0);
    for (int i = 0; i < THREADS; i++) {
        c[i].rl = rl;
        c[i].id = id;
        c[i].stop = &churners.stop;
        c[i].seed = (unsigned)i * 7919u + 1;
        ck_assert_int_eq(pthread_create(&churners.th[i], NULL, churn_run, &c[i]), 0);
    }
    rl_test_hold(&churners, churners_stop);
    WAIT_FOR(mono_ns(CLOCK_MONOTONIC) >= t0 + 500000000u && reclaimed_of(rl) > 0);
    rl_test_release(&churners);
    uint64_t t1 = mono_ns(CLOCK_MONOTONIC);
    uint64_t bound = 2 + (uint64_t)(((unsigned __int128)500 * (t1 - t0)) / 1000000000u);
    char key[32];
    for (int k = 0; k < POOL; k++) {
        uint64_t a = 0;
        for (int i = 0; i < THREADS; i++)
            a += c[i].admitted[k];
        ck_assert_uint_le(a, bound);
        snprintf(key, sizeof key, "churn-%d", k);
        ck_assert_int_le(copies_of(rl, id, key, strlen(key)), 1);
    }
    rl_stats_t s;
    rl_stats_init(&s);
    rl_stats(rl, &s);
    ck_assert_uint_gt(s.reclaimed, 0);
    ck_assert_uint_le(s.keys_live, 64);
    rl_test_release(c);
    rl_test_release(rl);
}
END_TEST

/* ------------------------------------------------------------ capacity */

static int check1(rl_t *rl, int id, const char *key, rl_decision_t *d)
{
    rl_decision_init(d);
    return rl_check(rl, id, key, strlen(key), 1, d);
}

START_TEST(many_keys)
{
    rl_t *rl = rl_test_open(NULL, 60000);
    int id = rl_test_add(rl, "name=many rate=1/h burst=2");
    char key[32];
    rl_decision_t d;
    for (int k = 0; k < 50000; k++) {
        snprintf(key, sizeof key, "k%d", k);
        ck_assert_int_eq(check1(rl, id, key, &d), RL_ALLOW);
        ck_assert_uint_eq(d.flags, 0);
    }
    for (int k = 0; k < 50000; k++) {
        snprintf(key, sizeof key, "k%d", k);
        ck_assert_int_eq(check1(rl, id, key, &d), RL_ALLOW);
        ck_assert_uint_eq(d.remaining, 0);
    }
    rl_stats_t s;
    rl_stats_init(&s);
    rl_stats(rl, &s);
    ck_assert_uint_eq(s.keys_live, 50000);
    ck_assert_uint_eq(s.noslot, 0);
    ck_assert_uint_le(s.table_bytes / s.table_slots, 64);
    rl_close(rl);
}
END_TEST

START_TEST(table_full_uses_on_failure)
{
    rl_test_clock_t clk;
    atomic_init(&clk.precise_ns, UINT64_C(1000000000000));
    clk.coarse_tick_ns = 0;
    rl_t *rl = rl_test_open(&clk, 16);
    int closed = rl_test_add(rl, "name=c rate=1/h burst=3 on_failure=closed");
    int open = rl_test_add(rl, "name=o rate=1/h burst=3 on_failure=open");
    int local = rl_test_add(rl, "name=l rate=1/h burst=2 on_failure=local");
    char key[32];
    rl_decision_t d;
    for (int k = 0; k < 16; k++) {
        snprintf(key, sizeof key, "busy%d", k);
        ck_assert_int_eq(check1(rl, closed, key, &d), RL_ALLOW);
    }
    /* Full of keys that are not idle: a new key gets the on_failure verdict. */
    ck_assert_int_eq(check1(rl, closed, "new", &d), RL_DENY);
    ck_assert_uint_eq(d.flags, RL_FLAG_NOSLOT | RL_FLAG_DEGRADED);
    ck_assert_uint_gt(d.retry_after_ms, 0);
    ck_assert_int_eq(check1(rl, open, "new", &d), RL_ALLOW);
    ck_assert_uint_eq(d.flags, RL_FLAG_NOSLOT | RL_FLAG_DEGRADED);
    /* local: all slotless keys of the limit share one bucket. */
    ck_assert_int_eq(check1(rl, local, "x", &d), RL_ALLOW);
    ck_assert_int_eq(check1(rl, local, "y", &d), RL_ALLOW);
    ck_assert_int_eq(check1(rl, local, "z", &d), RL_DENY);
    ck_assert(d.flags & RL_FLAG_NOSLOT);
    /* No other key's state was touched: busy0 still has 2 of 3. */
    rl_decision_init(&d);
    ck_assert_int_eq(rl_check(rl, closed, "busy0", 5, 0, &d), RL_ALLOW);
    ck_assert_uint_eq(d.remaining, 2);
    rl_limit_stats_t ls;
    rl_limit_stats_init(&ls);
    rl_limit_stats(rl, closed, &ls);
    ck_assert_uint_eq(ls.noslot, 1);
    ck_assert_uint_eq(ls.degraded, 1);
    ck_assert_uint_eq(ls.keys_live, 16);
    /* Once the busy keys are full again (idle), new keys get slots: at once
     * if an idle key shares the new key's window, else after the shared
     * sweep cursor has passed the idle ones (RL_SWEEP_BATCH per attempt,
     * 4 attempts per failed check; the secret, so the layout, is random). */
    rl_test_clock_advance(&clk, UINT64_C(3) * 3600 * 1000000000);
    size_t tries = 0, bound = rl->table.nslots / (4 * RL_SWEEP_BATCH) + 1;
    do {
        tries++;
        check1(rl, closed, "new", &d);
    } while (d.allowed != RL_ALLOW && tries <= bound);
    ck_assert_int_eq(d.allowed, RL_ALLOW);
    ck_assert_uint_eq(d.flags, 0);
    ck_assert_uint_le(tries, bound);
    rl_close(rl);
}
END_TEST

START_TEST(per_limit_max_keys)
{
    rl_t *rl = rl_test_open(NULL, 1000);
    int flood = rl_test_add(rl, "name=ip rate=1/h burst=1 max_keys=10 on_failure=closed");
    int other = rl_test_add(rl, "name=api rate=1/h burst=1 on_failure=closed");
    char key[32];
    rl_decision_t d;
    int slotless = 0;
    for (int k = 0; k < 500; k++) {
        snprintf(key, sizeof key, "ip%d", k);
        check1(rl, flood, key, &d);
        slotless += (d.flags & RL_FLAG_NOSLOT) != 0;
    }
    ck_assert_int_eq(slotless, 490);
    for (int k = 0; k < 500; k++) {
        snprintf(key, sizeof key, "tenant%d", k);
        ck_assert_int_eq(check1(rl, other, key, &d), RL_ALLOW);
        ck_assert_uint_eq(d.flags, 0);
    }
    rl_limit_stats_t s;
    rl_limit_stats_init(&s);
    rl_limit_stats(rl, flood, &s);
    ck_assert_uint_eq(s.keys_live, 10);
    rl_close(rl);
}
END_TEST

START_TEST(remove_frees_slots)
{
    rl_t *rl = rl_test_open(NULL, 1000);
    int a = rl_test_add(rl, "name=a rate=1/h burst=1");
    int b = rl_test_add(rl, "name=b rate=1/h burst=1");
    char key[32];
    rl_decision_t d;
    for (int k = 0; k < 300; k++) {
        snprintf(key, sizeof key, "k%d", k);
        check1(rl, a, key, &d);
        check1(rl, b, key, &d);
    }
    rl_stats_t s;
    rl_stats_init(&s);
    rl_stats(rl, &s);
    ck_assert_uint_eq(s.keys_live, 600);
    ck_assert_int_eq(rl_limit_remove(rl, a), 0);
    rl_stats(rl, &s);
    ck_assert_uint_eq(s.keys_live, 300);
    ck_assert_uint_eq(s.limits, 1);
    ck_assert_int_eq(check1(rl, a, "k1", &d), RL_ENOTFOUND);
    ck_assert_int_eq(rl_limit_remove(rl, a), RL_ENOTFOUND);
    /* Same name again: a new id, fresh buckets; the old id stays dead. */
    int a2 = rl_test_add(rl, "name=a rate=1/h burst=1");
    ck_assert_int_ne(a2, a);
    ck_assert_int_eq(check1(rl, a2, "k1", &d), RL_ALLOW);
    ck_assert_int_eq(check1(rl, a, "k1", &d), RL_ENOTFOUND);
    ck_assert_int_eq(rl_limit_find(rl, "a"), a2);
    /* b untouched: its keys are still spent. */
    ck_assert_int_eq(check1(rl, b, "k1", &d), RL_DENY);
    rl_close(rl);
}
END_TEST

/* Checkers on a limit while another thread removes and re-adds it. */
typedef struct remover {
    rl_t *rl;
    _Atomic int id;
    _Atomic int stop;
} remover_t;

static void *checker_run(void *arg)
{
    remover_t *r = arg;
    char key[32];
    unsigned seed = 42;
    while (!atomic_load(&r->stop)) {
        snprintf(key, sizeof key, "k%u", rand_r(&seed) % 200);
        int rc = rl_check(r->rl, atomic_load(&r->id), key, strlen(key), 1, NULL);
        ck_assert(rc == RL_ALLOW || rc == RL_DENY || rc == RL_ENOTFOUND);
    }
    return NULL;
}

START_TEST(remove_races_checkers)
{
    rl_t *rl = rl_test_open(NULL, 1000);
    remover_t r;
    r.rl = rl;
    atomic_init(&r.id, rl_test_add(rl, "name=r rate=1/h burst=5"));
    atomic_init(&r.stop, 0);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, checker_run, &r);
    for (int round = 0; round < 200; round++) {
        ck_assert_int_eq(rl_limit_remove(rl, atomic_load(&r.id)), 0);
        atomic_store(&r.id, rl_test_add(rl, "name=r rate=1/h burst=5"));
    }
    atomic_store(&r.stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    ck_assert_int_eq(rl_limit_remove(rl, atomic_load(&r.id)), 0);
    rl_stats_t s;
    rl_stats_init(&s);
    rl_stats(rl, &s);
    ck_assert_uint_eq(s.keys_live, 0); /* nothing leaked into a dead limit */
    rl_close(rl);
}
END_TEST

/* ------------------------------------------------------------- memory */

/* The VmFlags line of the mapping that holds p (smaps), "" if none. */
static void vm_flags_of(const void *p, char *out, size_t len)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/self/smaps", "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    int in = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long lo, hi;
        char *dash = strchr(line, '-'), *sp = strchr(line, ' ');
        if (dash != NULL && sp != NULL && dash < sp && sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (in && strncmp(line, "VmFlags:", 8) == 0) {
            size_t n = strlen(line + 8);
            n = n < len - 1 ? n : len - 1;
            memcpy(out, line + 8, n);
            out[n] = '\0';
            break;
        }
    }
    fclose(f);
}

static int thp_configured(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f == NULL)
        return 0;
    fclose(f);
    return 1;
}

/* A key table of 2 MB or more from the default allocator is its own
 * mapping, aligned to a huge page and advised MADV_HUGEPAGE ("hg" in
 * VmFlags, whether or not the kernel found a huge page for it), zeroed, and
 * works as any other. */
START_TEST(big_table_asks_for_huge_pages)
{
    rl_t *rl = rl_test_open(NULL, 65536); /* 98304 slots: 6 MB */
    size_t bytes = rl->table.nslots * sizeof(rl_slot_t);
    ck_assert_uint_ge(bytes, 2u << 20);
    ck_assert_uint_eq((uintptr_t)rl->table.slots % (2u << 20), 0);
    /* Committed at rl_open (before anything here reads it): every page is
     * resident, so no check takes a page fault. */
    size_t pages = (bytes + 4095) / 4096;
    unsigned char *resident = malloc(pages);
    ck_assert_ptr_nonnull(resident);
    ck_assert_int_eq(mincore(rl->table.slots, bytes, resident), 0);
    for (size_t i = 0; i < pages; i++)
        ck_assert_msg(resident[i] & 1, "page %zu of %zu not resident", i, pages);
    free(resident);
    for (size_t i = 0; i < rl->table.nslots; i += 97)
        ck_assert_uint_eq(atomic_load(&rl->table.slots[i].ctrl), 0);
    if (thp_configured()) {
        char flags[512];
        vm_flags_of(rl->table.slots, flags, sizeof flags);
        ck_assert_msg(strstr(flags, " hg") != NULL, "VmFlags:%s", flags);
        /* ... and only the table: the mapping ends with it (rounded up to a
         * huge page), so nothing else shares the advice. */
        vm_flags_of((char *)rl->table.slots + bytes - 1, flags, sizeof flags);
        ck_assert_msg(strstr(flags, " hg") != NULL, "VmFlags:%s", flags);
    }
    int id = rl_test_add(rl, "name=h rate=1/h burst=1");
    char key[32];
    for (int k = 0; k < 2000; k++) {
        snprintf(key, sizeof key, "h%d", k);
        ck_assert_int_eq(rl_check(rl, id, key, strlen(key), 1, NULL), RL_ALLOW);
        ck_assert_int_eq(rl_check(rl, id, key, strlen(key), 1, NULL), RL_DENY);
    }
    rl_stats_t st;
    rl_stats_init(&st);
    ck_assert_int_eq(rl_stats(rl, &st), 0);
    ck_assert_uint_eq(st.keys_live, 2000);
    ck_assert_uint_eq(st.table_bytes, bytes);
    rl_close(rl);
}
END_TEST

typedef struct counting {
    size_t biggest;
    long live;
} counting_t;

static void *counting_alloc(void *opaque, size_t size, size_t align)
{
    counting_t *c = opaque;
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size) != 0)
        return NULL;
    c->biggest = size > c->biggest ? size : c->biggest;
    c->live++;
    return p;
}

static void counting_free(void *opaque, void *p, size_t size, size_t align)
{
    (void)size;
    (void)align;
    ((counting_t *)opaque)->live--;
    free(p);
}

/* A caller's allocator still gets the key table, whatever its size. */
START_TEST(user_allocator_gets_big_table)
{
    counting_t c = {0, 0};
    rl_config_t cfg;
    rl_config_init(&cfg);
    cfg.max_keys = 65536;
    cfg.allocator = (rl_allocator_t){counting_alloc, counting_free, &c};
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &cfg), 0);
    ck_assert_uint_eq(c.biggest, rl->table.nslots * sizeof(rl_slot_t));
    int id = rl_test_add(rl, "name=u rate=1/h burst=1");
    ck_assert_int_eq(rl_check(rl, id, "u", 1, 1, NULL), RL_ALLOW);
    ck_assert_int_eq(rl_check(rl, id, "u", 1, 1, NULL), RL_DENY);
    rl_close(rl);
    ck_assert_int_eq(c.live, 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("table");
    TCase *tc = tcase_create("concurrency");
    tcase_add_checked_fixture(tc, NULL, rl_test_release_all);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, one_key_many_threads, 0, 7);
    tcase_add_test(tc, concurrent_inserts_one_slot);
    tcase_add_test(tc, checkers_race_reclamation);
    tcase_add_test(tc, remove_races_checkers);
    suite_add_tcase(s, tc);
    TCase *cap = tcase_create("capacity");
    tcase_set_timeout(cap, 120);
    tcase_add_test(cap, many_keys);
    tcase_add_test(cap, table_full_uses_on_failure);
    tcase_add_test(cap, per_limit_max_keys);
    tcase_add_test(cap, remove_frees_slots);
    suite_add_tcase(s, cap);
    TCase *mem = tcase_create("memory");
    tcase_add_checked_fixture(mem, NULL, rl_test_release_all);
    tcase_add_test(mem, big_table_asks_for_huge_pages);
    tcase_add_test(mem, user_allocator_gets_big_table);
    suite_add_tcase(s, mem);
    return s;
}

int main(void) { return rl_test_run(suite()); }

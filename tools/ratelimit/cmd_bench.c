/* SPDX-License-Identifier: MIT */
/*
 * ratelimit bench: a quick figure for the hot path on this machine. ns per
 * rl_check for one hot key and for N random keys, each against a floor
 * measured in the same run: the library's own key hash and clock read plus
 * one uncontended CAS (bench/bench_check.c's floor: what no implementation of
 * this design can go below). Every figure is the median of several short
 * runs, taken in rounds that run each figure once, so a machine slowing down
 * for a while slows all of them alike. For the full comparison against
 * baselines (mutex map, per-request Redis), see bench/README.md.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include "args.h"
#include "cli.h"
#include "instance.h" /* internals: the instance's own clock and key hash, for the floor */
#include "output.h"

#define CMD "bench"
#define RUNS 5
#define THREADS_MAX 64
/* 4M keys: a table of about 5M slots, a few hundred MB; beyond that the
 * figure is about the memory system more than about rl_check. */
#define KEYS_MAX (UINT32_C(1) << 22)
#define KEY_STRIDE 16
/* Ops before a thread's key sequence repeats: far more than any cache. */
#define STREAM_LEN (UINT32_C(1) << 20)
/* Mostly-allow, as bench/bench_check.c: 100M/s (the fastest rate accepted),
 * burst 1M: faster than any thread here can check. */
#define BENCH_SPEC "name=bench rate=100000/ms burst=1000000"

enum { F_FLOOR_HOT, F_CHECK_HOT, F_FLOOR_KEYS, F_CHECK_KEYS, F_N };
static const char *const fig_id[F_N] = {"floor_hot_key", "rl_check_hot_key", "floor_keys",
                                        "rl_check_keys"};

typedef struct line {
    _Atomic uint64_t v;
    char pad[56];
} __attribute__((aligned(64))) line_t;

typedef struct bench {
    rl_t *rl;
    int id;
    int32_t source;      /* the limit's clock source */
    char *keys;          /* STREAM_LEN keys in op order, KEY_STRIDE apart */
    size_t key_len;
    char hot[KEY_STRIDE];
    unsigned threads;
    _Atomic int err;     /* the first rl_check error */
    line_t word[THREADS_MAX];
} bench_t;

typedef struct job {
    bench_t *b;
    int fig;
    unsigned tid;
    uint64_t n;
    pthread_barrier_t *start;
    uint64_t t0, t1;
    uint64_t result; /* kept, so the compiler cannot drop the loop */
    pthread_t th;
} job_t;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static volatile uint64_t sink;

static void *job_main(void *arg)
{
    job_t *j = arg;
    bench_t *b = j->b;
    int hot = j->fig == F_FLOOR_HOT || j->fig == F_CHECK_HOT;
    /* Threads walk the same stream from different places. */
    size_t at = (size_t)j->tid * (STREAM_LEN / b->threads);
    uint64_t acc = 0;
    pthread_barrier_wait(j->start);
    j->t0 = mono_ns();
    if (j->fig == F_CHECK_HOT || j->fig == F_CHECK_KEYS) {
        for (uint64_t i = 0; i < j->n; i++) {
            const char *key = hot ? b->hot : b->keys + ((at + i) & (STREAM_LEN - 1)) * KEY_STRIDE;
            int rc = rl_check(b->rl, b->id, key, b->key_len, 1, NULL);
            if (__builtin_expect(rc < 0, 0)) {
                /* relaxed: read after the threads are joined. */
                atomic_store_explicit(&b->err, rc, memory_order_relaxed);
                break;
            }
            acc += (uint64_t)rc;
        }
    } else {
        _Atomic uint64_t *w = &b->word[j->tid].v;
        for (uint64_t i = 0; i < j->n; i++) {
            const char *key = hot ? b->hot : b->keys + ((at + i) & (STREAM_LEN - 1)) * KEY_STRIDE;
            rl_keyid_t id = rl__keyhash(&b->rl->kh, key, b->key_len);
            uint64_t now = rl__clock_now_fp(&b->rl->clock, b->source);
            /* relaxed: nothing is published; the CAS is the cost measured. */
            uint64_t old = atomic_load_explicit(w, memory_order_relaxed);
            atomic_compare_exchange_weak_explicit(w, &old, old + (id.lo ^ now),
                                                  memory_order_relaxed, memory_order_relaxed);
        }
        /* relaxed: this thread's own word. */
        acc = atomic_load_explicit(w, memory_order_relaxed);
    }
    j->t1 = mono_ns();
    j->result = acc;
    return NULL;
}

/* n ops on every thread; ns per op of the whole batch (wall / all ops). */
static double run(bench_t *b, int fig, uint64_t n)
{
    job_t jobs[THREADS_MAX];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, b->threads);
    unsigned started = 0;
    for (unsigned t = 0; t < b->threads; t++) {
        jobs[t] = (job_t){.b = b, .fig = fig, .tid = t, .n = n, .start = &start};
        if (pthread_create(&jobs[t].th, NULL, job_main, &jobs[t]) != 0)
            break;
        started++;
    }
    if (started < b->threads) {
        /* The barrier waits for every thread: without them, give up. */
        fprintf(stderr, "ratelimit: bench: cannot start %u threads\n", b->threads);
        exit(CLI_RUNTIME);
    }
    uint64_t t0 = UINT64_MAX, t1 = 0;
    for (unsigned t = 0; t < b->threads; t++) {
        pthread_join(jobs[t].th, NULL);
        sink += jobs[t].result;
        t0 = jobs[t].t0 < t0 ? jobs[t].t0 : t0;
        t1 = jobs[t].t1 > t1 ? jobs[t].t1 : t1;
    }
    pthread_barrier_destroy(&start);
    return (double)(t1 > t0 ? t1 - t0 : 1) / ((double)n * b->threads);
}

/* Ops per thread for one run of about run_ns: grow until a pilot lasts a
 * tenth of it (which also warms caches and predictors), then scale. */
static uint64_t calibrate(bench_t *b, int fig, uint64_t run_ns)
{
    uint64_t n = 256;
    for (;;) {
        double ns = run(b, fig, n) * (double)n * b->threads;
        if (ns >= (double)run_ns / 10 || n >= (UINT64_C(1) << 36)) {
            double per = ns / (double)n;
            uint64_t want = (uint64_t)((double)run_ns / (per > 0 ? per : 1));
            return want > 0 ? want : 1;
        }
        n *= 4;
    }
}

static int cmp_double(const void *a, const void *c)
{
    double x = *(const double *)a, y = *(const double *)c;
    return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
    double s[RUNS];
    memcpy(s, v, (size_t)n * sizeof *v);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

typedef struct machine {
    char cpu[128];
    long cores;
    struct utsname u;
} machine_t;

static void read_machine(machine_t *m)
{
    snprintf(m->cpu, sizeof m->cpu, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f != NULL) {
        char line[512];
        while (fgets(line, sizeof line, f) != NULL) {
            const char *v = strchr(line, ':');
            if (v != NULL && strncmp(line, "model name", 10) == 0) {
                v += 1 + strspn(v + 1, " \t");
                snprintf(m->cpu, sizeof m->cpu, "%.*s", (int)strcspn(v, "\n"), v);
                break;
            }
        }
        fclose(f);
    }
    m->cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (uname(&m->u) != 0)
        memset(&m->u, 0, sizeof m->u);
}

typedef struct figs {
    double v[F_N][RUNS];
    double med[F_N], lo[F_N], hi[F_N];
} figs_t;

static void print_json(const bench_t *b, const machine_t *m, const figs_t *f, uint64_t keys,
                       uint64_t run_ms)
{
    json_t j;
    json_init(&j, stdout);
    json_object(&j, NULL);
    json_bool(&j, "ok", 1);
    json_str(&j, "library_version", rl_version());
    json_object(&j, "machine");
    json_str(&j, "cpu", m->cpu);
    json_i64(&j, "cores", m->cores);
    json_str(&j, "kernel", m->u.release);
    json_str(&j, "arch", m->u.machine);
    json_end(&j);
    json_u64(&j, "threads", b->threads);
    json_u64(&j, "keys", keys);
    json_u64(&j, "runs", RUNS);
    json_u64(&j, "run_ms", run_ms);
    json_str(&j, "clock_source", b->source == RL_CLOCK_COARSE ? "coarse" : "precise");
    json_array(&j, "figures");
    for (int i = 0; i < F_N; i++) {
        json_object(&j, NULL);
        json_str(&j, "name", fig_id[i]);
        json_double(&j, "ns_median", f->med[i]);
        json_double(&j, "ns_min", f->lo[i]);
        json_double(&j, "ns_max", f->hi[i]);
        json_end(&j);
    }
    json_end(&j);
    json_object(&j, "ratios");
    /* Medians of the per-round ratios, as bench/bench_check.c computes them. */
    double q[RUNS];
    for (int r = 0; r < RUNS; r++)
        q[r] = f->v[F_CHECK_HOT][r] / f->v[F_FLOOR_HOT][r];
    json_double(&j, "hot_key_vs_floor", median(q, RUNS));
    for (int r = 0; r < RUNS; r++)
        q[r] = f->v[F_CHECK_KEYS][r] / f->v[F_FLOOR_KEYS][r];
    json_double(&j, "keys_vs_floor", median(q, RUNS));
    json_end(&j);
    json_finish(&j);
}

static void print_text(const bench_t *b, const machine_t *m, const figs_t *f, uint64_t keys,
                       uint64_t run_ms)
{
    printf("libratelimit %s, ratelimit bench: %d runs of ~%" PRIu64 " ms per figure, "
           "%u thread%s, %" PRIu64 " random keys, %s clock\n",
           rl_version(), RUNS, run_ms, b->threads, b->threads == 1 ? "" : "s", keys,
           b->source == RL_CLOCK_COARSE ? "coarse" : "precise");
    printf("machine: CPU %s | cores %ld | %s %s %s\n\n", m->cpu, m->cores, m->u.sysname,
           m->u.release, m->u.machine);
    static const char *const head[] = {"FIGURE", "NS/CHECK (MEDIAN)", "MIN", "MAX", "VS FLOOR"};
    table_t t;
    table_init(&t, 5, head, "lrrrr");
    char what[F_N][80];
    snprintf(what[F_FLOOR_HOT], sizeof what[0], "floor, hot key");
    snprintf(what[F_CHECK_HOT], sizeof what[0], "rl_check, hot key");
    snprintf(what[F_FLOOR_KEYS], sizeof what[0], "floor, %" PRIu64 " keys", keys);
    snprintf(what[F_CHECK_KEYS], sizeof what[0], "rl_check, %" PRIu64 " keys", keys);
    for (int i = 0; i < F_N; i++) {
        table_cell(&t, "%s", what[i]);
        table_cell(&t, "%.1f", f->med[i]);
        table_cell(&t, "%.1f", f->lo[i]);
        table_cell(&t, "%.1f", f->hi[i]);
        int floor = i == F_CHECK_HOT ? F_FLOOR_HOT : i == F_CHECK_KEYS ? F_FLOOR_KEYS : -1;
        if (floor < 0) {
            table_cell(&t, "-");
        } else {
            double q[RUNS];
            for (int r = 0; r < RUNS; r++)
                q[r] = f->v[i][r] / f->v[floor][r];
            table_cell(&t, "%.2fx", median(q, RUNS));
        }
    }
    table_print(&t, stdout);
    table_free(&t);
    printf("\nfloor: the library's key hash + clock read + one uncontended CAS. With more "
           "than one thread, ns/check is wall time / all checks (inverse throughput).\n"
           "A busy or shared machine inflates every figure; compare only runs on one machine.\n");
}

static void bench_close(bench_t *b)
{
    rl_close(b->rl);
    free(b->keys);
    free(b);
}

/* Keys "key:%08x" (12 bytes), drawn uniformly; every key is inserted
 * before any timing, so the runs measure checks, not inserts. */
static void fill_keys(bench_t *b, uint64_t keys)
{
    b->key_len = 12;
    snprintf(b->hot, sizeof b->hot, "key:%08x", 0u);
    char key[KEY_STRIDE];
    for (uint64_t k = 0; k < keys; k++) {
        snprintf(key, sizeof key, "key:%08x", (unsigned)k);
        rl_check(b->rl, b->id, key, b->key_len, 1, NULL);
    }
    uint64_t seed = UINT64_C(0x5eed5eed);
    for (uint32_t i = 0; i < STREAM_LEN; i++)
        snprintf(b->keys + (size_t)i * KEY_STRIDE, KEY_STRIDE, "key:%08x",
                 (unsigned)(((splitmix64(&seed) >> 32) * keys) >> 32));
}

/* The instance with the bench limit and its keys. CLI_OK, or the failure
 * reported. */
static int bench_open(cli_t *cli, uint64_t keys, uint64_t threads, bench_t **out)
{
    bench_t *b = aligned_alloc(64, (sizeof *b + 63) & ~(size_t)63);
    if (b == NULL)
        return cli_fail(cli, CMD, CLI_RUNTIME, "internal", "out of memory");
    memset(b, 0, sizeof *b);
    b->threads = (unsigned)threads;
    atomic_init(&b->err, 0);
    rl_config_t cfg;
    rl_config_init(&cfg);
    /* Room for every key plus a quarter: timed runs never insert or reclaim. */
    uint64_t mk = keys + keys / 4;
    cfg.max_keys = (uint32_t)(mk < 1024 ? 1024 : mk);
    rl_limit_t lim;
    char why[256] = "";
    cfg.err = why;
    cfg.errlen = sizeof why;
    int rc = rl_limit_parse_sized(&lim, sizeof lim, BENCH_SPEC, NULL, 0);
    if (rc == 0)
        rc = rl_open(&b->rl, &cfg);
    if (rc == 0 && (b->id = rl_limit_add(b->rl, &lim)) < 0)
        rc = b->id;
    b->keys = malloc((size_t)STREAM_LEN * KEY_STRIDE);
    if (rc != 0 || b->keys == NULL) {
        bench_close(b);
        return cli_fail(cli, CMD, CLI_RUNTIME, "internal", "cannot set up: %s",
                        rc ? (why[0] ? why : rl_strerror(rc)) : "out of memory");
    }
    rl_limit_params_t p;
    rl__params_read(rl__limit_get(&b->rl->limits, b->id), &p);
    b->source = (int32_t)p.clock_source;
    fill_keys(b, keys);
    *out = b;
    return CLI_OK;
}

/* RUNS rounds of every figure (n[i] ops each), and each figure's median,
 * lowest and highest. */
static void measure(bench_t *b, const uint64_t *n, figs_t *f)
{
    for (int r = 0; r < RUNS; r++)
        for (int i = 0; i < F_N; i++)
            f->v[i][r] = run(b, i, n[i]);
    for (int i = 0; i < F_N; i++) {
        f->med[i] = median(f->v[i], RUNS);
        f->lo[i] = f->hi[i] = f->v[i][0];
        for (int r = 1; r < RUNS; r++) {
            f->lo[i] = f->v[i][r] < f->lo[i] ? f->v[i][r] : f->lo[i];
            f->hi[i] = f->v[i][r] > f->hi[i] ? f->v[i][r] : f->hi[i];
        }
    }
}

int cli_bench(cli_t *cli, int argc, char **argv)
{
    const char *seconds_s = NULL, *keys_s = NULL, *threads_s = NULL;
    const cli_opt_t opts[] = {{"--seconds", &seconds_s, NULL},
                              {"--keys", &keys_s, NULL},
                              {"--threads", &threads_s, NULL},
                              {NULL, NULL, NULL}};
    const char *pos[1];
    if (cli_parse_args(cli, CMD, argc, argv, opts, pos, 0) < 0)
        return CLI_USAGE;
    uint64_t seconds = 3, keys = 100000, threads = 1;
    if (seconds_s && cli_parse_u64(seconds_s, 1, 600, &seconds) != 0)
        return cli_usage_error(cli, CMD, "--seconds: a whole number, 1..600");
    if (keys_s && cli_parse_u64(keys_s, 1, KEYS_MAX, &keys) != 0)
        return cli_usage_error(cli, CMD, "--keys: a whole number, 1..%" PRIu32, KEYS_MAX);
    if (threads_s && cli_parse_u64(threads_s, 1, THREADS_MAX, &threads) != 0)
        return cli_usage_error(cli, CMD, "--threads: a whole number, 1..%d", THREADS_MAX);
    bench_t *b = NULL;
    int rc = bench_open(cli, keys, threads, &b);
    if (rc != CLI_OK)
        return rc;
    /* The budget: calibration takes about a tenth of each figure's runs. */
    uint64_t run_ns = seconds * UINT64_C(1000000000) * 10 / 11 / (RUNS * F_N);
    uint64_t n[F_N];
    for (int i = 0; i < F_N; i++)
        n[i] = calibrate(b, i, run_ns);
    figs_t *f = calloc(1, sizeof *f);
    if (f == NULL) {
        bench_close(b);
        return cli_fail(cli, CMD, CLI_RUNTIME, "internal", "out of memory");
    }
    measure(b, n, f);
    /* relaxed: the threads are joined. */
    int err = atomic_load_explicit(&b->err, memory_order_relaxed);
    if (err != 0) {
        rc = cli_fail(cli, CMD, CLI_RUNTIME, "internal", "rl_check failed: %s (%s)",
                      rl_strerror(err), rl_err_name(err));
    } else {
        machine_t m;
        read_machine(&m);
        if (cli->json)
            print_json(b, &m, f, keys, run_ns / 1000000);
        else
            print_text(b, &m, f, keys, run_ns / 1000000);
        rc = CLI_OK;
    }
    free(f);
    bench_close(b);
    return rc;
}

/* SPDX-License-Identifier: MIT */
/*
 * rl_accuracy: does the global tier hold a limit across nodes?
 *
 *   rl_accuracy [options] [scenario...]     (default: every scenario)
 *
 * Scenarios: uniform skew shift churn high low cold flush residual partition
 * many. Options:
 *   --quick        shortened scenarios (CI: well under a minute in all)
 *   --realtime     real clocks, automatic sync rounds, load threads
 *                  (figures reported, never gated)
 *   --processes    real-time with one process per node
 *   --csv DIR      where CSV files and plots go (default bench/results)
 *   --no-csv       write no files
 *   --seed N       load generator seed (default 1)
 *   --load MODEL   poisson (default) or even
 *   --all-rounds   print every round, not a summary
 *   --threads N    real-time load generator threads (default 2)
 *   --matrix       also run the fleet matrix (virtual only; with --quick
 *                  its CI subset), its claims gated
 *   --report FILE  run the matrix and write its report (REPORT.md) to FILE
 *                  ("-": stdout); no scenario runs unless named
 *   --family F, --nodes N, --interval MS
 *                  run only the matrix cells of that family, fleet size or
 *                  sync interval (each implies --matrix)
 *   --keys K       run only the matrix cells of K keys per limit: 1 (the
 *                  single-key cells), 1000 or 100000 (keys.c; implies --matrix)
 * Environment: REDIS_URL uses that server instead of starting one.
 * Exit status: 0 all gated targets met, 1 a gated target missed (virtual
 * mode only), 2 the simulation itself failed.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "acc.h"
#include "redis_harness.h"

volatile sig_atomic_t acc_interrupted = 0;

static void on_signal(int sig)
{
    (void)sig;
    acc_interrupted = 1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: rl_accuracy [--quick] [--realtime | --processes] [--csv DIR | --no-csv]\n"
               "                   [--seed N] [--load poisson|even] [--all-rounds] "
               "[--threads N]\n"
               "                   [--matrix] [--report FILE] [--family F] [--nodes N] "
               "[--interval MS] [--keys K]\n"
               "                   [scenario...]\n"
               "scenarios (default: all):");
    for (int i = 0; acc_scen_names[i] != NULL; i++)
        fprintf(f, " %s", acc_scen_names[i]);
    fprintf(f, "\n");
}

/* Scenarios one run takes: every one, each at most once over. */
#define ACC_SCEN_MAX 32

typedef struct args {
    acc_opts_t o;
    const char *scen[ACC_SCEN_MAX];
    int nscen;
} args_t;

static int known_scenario(const char *s)
{
    for (int i = 0; acc_scen_names[i] != NULL; i++)
        if (strcmp(acc_scen_names[i], s) == 0)
            return 1;
    return 0;
}

static int parse_option(args_t *a, int argc, char **argv, int *i)
{
    const char *arg = argv[*i];
    const char *val = *i + 1 < argc ? argv[*i + 1] : NULL;
    acc_opts_t *o = &a->o;
    if (strcmp(arg, "--quick") == 0) {
        o->quick = 1;
    } else if (strcmp(arg, "--realtime") == 0) {
        o->mode = ACC_REALTIME;
    } else if (strcmp(arg, "--processes") == 0) {
        o->mode = ACC_PROCESSES;
    } else if (strcmp(arg, "--no-csv") == 0) {
        o->csv_dir = NULL;
    } else if (strcmp(arg, "--all-rounds") == 0) {
        o->all_rounds = 1;
    } else if (strcmp(arg, "--matrix") == 0) {
        o->matrix = 1;
    } else if (val != NULL && strcmp(arg, "--report") == 0) {
        o->matrix = 1;
        o->report_path = val;
        ++*i;
    } else if (val != NULL && strcmp(arg, "--family") == 0) {
        o->matrix = 1;
        o->only_family = val;
        ++*i;
    } else if (val != NULL && strcmp(arg, "--nodes") == 0) {
        o->matrix = 1;
        o->only_nodes = atoi(val);
        ++*i;
    } else if (val != NULL && strcmp(arg, "--interval") == 0) {
        o->matrix = 1;
        o->only_interval = (uint32_t)atoi(val);
        ++*i;
    } else if (val != NULL && strcmp(arg, "--keys") == 0) {
        o->matrix = 1;
        o->only_keys = (uint32_t)atoi(val);
        ++*i;
        if (o->only_keys != 1 && o->only_keys != 1000 && o->only_keys != 100000)
            return -1;
    } else if (val != NULL && strcmp(arg, "--csv") == 0) {
        o->csv_dir = val;
        ++*i;
    } else if (val != NULL && strcmp(arg, "--seed") == 0) {
        o->seed = strtoull(val, NULL, 10);
        ++*i;
    } else if (val != NULL && strcmp(arg, "--threads") == 0) {
        o->driver_threads = atoi(val);
        ++*i;
        if (o->driver_threads < 1 || o->driver_threads > ACC_MAX_RT_NODES)
            return -1;
    } else if (val != NULL && strcmp(arg, "--load") == 0) {
        if (strcmp(val, "even") == 0)
            o->load = ACC_LOAD_EVEN;
        else if (strcmp(val, "poisson") == 0)
            o->load = ACC_LOAD_POISSON;
        else
            return -1;
        ++*i;
    } else {
        return -1;
    }
    return 0;
}

static int parse_args(args_t *a, int argc, char **argv)
{
    memset(a, 0, sizeof *a);
    a->o.seed = 1;
    a->o.csv_dir = "bench/results";
    a->o.driver_threads = 2;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (argv[i][0] == '-') {
            if (parse_option(a, argc, argv, &i) != 0)
                return -1;
        } else if (known_scenario(argv[i]) && a->nscen < ACC_SCEN_MAX) {
            a->scen[a->nscen++] = argv[i];
        } else {
            fprintf(stderr, "rl_accuracy: unknown scenario '%s'\n", argv[i]);
            return -1;
        }
    }
    if (a->nscen == 0 && !a->o.matrix)
        for (int i = 0; acc_scen_names[i] != NULL && a->nscen < ACC_SCEN_MAX; i++)
            a->scen[a->nscen++] = acc_scen_names[i];
    return 0;
}

static void print_machine(void)
{
    char model[256] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f != NULL) {
        char line[512];
        while (fgets(line, sizeof line, f) != NULL) {
            char *c = strchr(line, ':');
            if (strncmp(line, "model name", 10) == 0 && c != NULL) {
                snprintf(model, sizeof model, "%s", c + 2);
                model[strcspn(model, "\n")] = '\0';
                break;
            }
        }
        fclose(f);
    }
    printf("machine: %s, %ld online CPUs; libratelimit %s\n", model,
           sysconf(_SC_NPROCESSORS_ONLN), rl_version());
}

/* One single-key scenario: run, print, judge, write files. */
static int run_scenario(const acc_opts_t *o, const char *name, acc_verdicts_t *v)
{
    if (strcmp(name, "many") == 0)
        return acc_run_many(o, v);
    acc_scen_t sc;
    acc_result_t res;
    if (acc_scen_make(name, o, &sc) != 0 || acc_result_init(&res, &sc) != 0)
        return -1;
    int rc = o->mode == ACC_VIRTUAL    ? acc_run_virtual(o, &sc, &res)
             : o->mode == ACC_REALTIME ? acc_run_realtime(o, &sc, &res)
                                       : acc_run_processes(o, &sc, &res);
    acc_print_scenario(o, &sc, &res);
    if (rc == 0) {
        int from = v->n;
        sc.judge(&sc, &res, o->mode == ACC_VIRTUAL, v);
        acc_print_verdicts(v, from, o->mode == ACC_VIRTUAL);
        if (o->mode == ACC_VIRTUAL)
            acc_compare(&sc, &res, acc_policy_name(&sc), NULL, NULL, 1);
        acc_write_csv(o, &sc, &res);
        acc_plot_strategies(o, &sc, &res);
    } else {
        printf("  run failed%s\n", acc_interrupted ? " (interrupted)" : "");
    }
    acc_result_free(&res);
    return rc;
}

/* Start a redis-server unless REDIS_URL names one; 0, or -1. */
static int setup_redis(acc_opts_t *o, rl_test_redis_t *srv)
{
    const char *env = getenv("REDIS_URL");
    if (env != NULL && *env != '\0') {
        snprintf(o->redis_url, sizeof o->redis_url, "%s", env);
        return 0;
    }
    char err[512];
    if (rl_test_redis_start(srv, err, sizeof err) != 0) {
        fprintf(stderr, "rl_accuracy: %s\n", err);
        return -1;
    }
    snprintf(o->redis_url, sizeof o->redis_url, "redis://127.0.0.1:%d", srv->port);
    return 0;
}

static int final_summary(const acc_opts_t *o, const acc_verdicts_t *v, uint64_t t0)
{
    int missed = 0;
    printf("\n== summary (%s%s), %.1f s\n", acc_mode_name(o->mode), o->quick ? ", quick" : "",
           (double)(acc_now_ns() - t0) / 1e9);
    for (int i = 0; i < v->n; i++) {
        const acc_verdict_t *x = &v->v[i];
        if (x->gated == ACC_INFO)
            continue; /* figures, printed with their scenario */
        int gated = x->gated == 1 && o->mode == ACC_VIRTUAL;
        printf("  %-9s [%s]%s %s\n", x->scenario,
               x->pass ? "PASS" : gated ? "MISS" : "miss", gated ? "" : " (not gated)",
               x->target);
        missed += gated && !x->pass;
    }
    if (v->dropped > 0) {
        printf("\n%d verdict(s) did not fit (acc_verdicts_t): counted as missed\n", v->dropped);
        missed += v->dropped;
    }
    if (missed > 0) {
        printf("\nMISSED %d gated target(s):\n", missed);
        for (int i = 0; i < v->n; i++)
            if (v->v[i].gated == 1 && !v->v[i].pass)
                printf("  %s: %s -- %s\n", v->v[i].scenario, v->v[i].target,
                       v->v[i].measured);
    }
    acc_write_summary(o, v);
    return missed;
}

int main(int argc, char **argv)
{
    args_t a;
    if (parse_args(&a, argc, argv) != 0) {
        usage(stderr);
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    a.o.run_tag = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
    print_machine();
    if (a.o.csv_dir != NULL && acc_mkdir_p(a.o.csv_dir) != 0) {
        fprintf(stderr, "rl_accuracy: cannot create %s\n", a.o.csv_dir);
        return 2;
    }
    rl_test_redis_t srv;
    memset(&srv, 0, sizeof srv);
    if (setup_redis(&a.o, &srv) != 0)
        return 2;
    printf("redis: %s%s\n", a.o.redis_url, srv.pid > 0 ? " (started for this run)" : "");
    acc_verdicts_t *verdicts = calloc(1, sizeof *verdicts); /* large: not on the stack */
    if (verdicts == NULL) {
        rl_test_redis_stop(&srv);
        return 2;
    }
    uint64_t t0 = acc_now_ns();
    int failed = 0;
    for (int i = 0; i < a.nscen && !acc_interrupted; i++)
        failed |= run_scenario(&a.o, a.scen[i], verdicts) != 0;
    if (a.o.matrix && a.o.mode != ACC_VIRTUAL) {
        fprintf(stderr, "rl_accuracy: the matrix runs on the virtual clock only\n");
        failed = 1;
    } else if (a.o.matrix && !acc_interrupted) {
        failed |= acc_run_matrix(&a.o, verdicts) != 0;
    }
    int missed = final_summary(&a.o, verdicts, t0);
    free(verdicts);
    rl_test_redis_stop(&srv);
    if (failed || acc_interrupted) {
        fprintf(stderr, "rl_accuracy: the simulation failed%s\n",
                acc_interrupted ? " (interrupted)" : "");
        return 2;
    }
    return missed > 0 ? 1 : 0;
}

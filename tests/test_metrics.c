/* SPDX-License-Identifier: MIT */
/* rl_metrics_text: the exact text of a small instance, the snprintf
 * contract at every length, label escaping, the format's rules, errors, and
 * safety against concurrent checks and limit changes. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "metrics.h"
#include "testutil.h"

/* The whole text, in a buffer the caller frees. As the header says to:
 * the text of an instance with a global tier may change between the sizing
 * call and the next (a sync round lands between them: its counters, its hot
 * keys), so a fill that needed more is sized again. A local-only instance on
 * a frozen clock gives the same text twice (snprintf_every_length). */
static char *render(rl_t *rl)
{
    for (int attempt = 0;; attempt++) {
        int n = rl_metrics_text(rl, NULL, 0);
        ck_assert_int_ge(n, 0);
        char *buf = malloc((size_t)n + 1);
        ck_assert_ptr_nonnull(buf);
        int m = rl_metrics_text(rl, buf, (size_t)n + 1);
        ck_assert_int_ge(m, 0);
        if (m <= n) {
            ck_assert_uint_eq(strlen(buf), (size_t)m);
            return buf;
        }
        free(buf);
        ck_assert_int_lt(attempt, 100);
    }
}

/* Check the text against the 0.0.4 format's rules as far as we use them:
 * every line ends in '\n'; a family is "# HELP name text", "# TYPE name
 * counter|gauge", then samples of that name only; counters end in _total;
 * a sample is name[{label="value"}] value, the value a decimal number; no
 * family appears twice. Returns the number of samples. */
static int check_format(const char *text)
{
    char families[64][96];
    int nfam = 0, nsamples = 0;
    char cur[96] = "";
    int summary = 0; /* the current family is a summary: _sum and _count */
    const char *p = text;
    ck_assert_msg(*p != '\0', "empty text");
    while (*p != '\0') {
        const char *nl = strchr(p, '\n');
        ck_assert_msg(nl != NULL, "unterminated line: %s", p);
        char line[512];
        size_t ll = (size_t)(nl - p);
        ck_assert_uint_lt(ll, sizeof line);
        memcpy(line, p, ll);
        line[ll] = '\0';
        p = nl + 1;
        if (strncmp(line, "# HELP ", 7) == 0) {
            char name[96];
            ck_assert_int_eq(sscanf(line + 7, "%95s", name), 1);
            for (int i = 0; i < nfam; i++)
                ck_assert_msg(strcmp(families[i], name) != 0, "family %s twice", name);
            ck_assert_int_lt(nfam, 64);
            strcpy(families[nfam++], name);
            strcpy(cur, name);
            ck_assert_uint_gt(strlen(line), 7 + strlen(name) + 1); /* has text */
            /* The TYPE line follows at once. */
            nl = strchr(p, '\n');
            ck_assert_ptr_nonnull(nl);
            char want_c[128], want_g[128], want_s[128];
            snprintf(want_c, sizeof want_c, "# TYPE %s counter\n", name);
            snprintf(want_g, sizeof want_g, "# TYPE %s gauge\n", name);
            snprintf(want_s, sizeof want_s, "# TYPE %s summary\n", name);
            size_t tl = (size_t)(nl + 1 - p);
            int is_counter = strlen(want_c) == tl && strncmp(p, want_c, tl) == 0;
            int is_gauge = strlen(want_g) == tl && strncmp(p, want_g, tl) == 0;
            summary = strlen(want_s) == tl && strncmp(p, want_s, tl) == 0;
            ck_assert_msg(is_counter || is_gauge || summary, "no TYPE after HELP of %s", name);
            size_t nlen = strlen(name);
            int total = nlen > 6 && strcmp(name + nlen - 6, "_total") == 0;
            ck_assert_msg(is_counter == total, "%s: counters, and only they, end in _total", name);
            p = nl + 1;
            continue;
        }
        ck_assert_msg(line[0] != '#', "stray comment: %s", line);
        /* A sample of the current family. */
        size_t cl = strlen(cur);
        ck_assert_msg(cl > 0 && strncmp(line, cur, cl) == 0, "sample outside its family: %s", line);
        if (summary) {
            const char *suffix = strncmp(line + cl, "_sum", 4) == 0     ? "_sum"
                                 : strncmp(line + cl, "_count", 6) == 0 ? "_count"
                                                                        : "";
            ck_assert_msg(*suffix != '\0', "summary sample neither _sum nor _count: %s", line);
            cl += strlen(suffix);
        }
        ck_assert_msg(line[cl] == ' ' || line[cl] == '{', "sample outside its family: %s", line);
        const char *v = line + cl;
        if (*v == '{') {
            const char *q = v;
            do { /* label="value", comma-separated */
                const char *name = ++q;
                while (*q >= 'a' && *q <= 'z')
                    q++;
                ck_assert_msg(q > name && q[0] == '=' && q[1] == '"', "bad label: %s", line);
                for (q += 2; *q != '"'; q++) {
                    ck_assert_msg(*q != '\0', "unterminated label value: %s", line);
                    if (*q == '\\') {
                        q++;
                        ck_assert_msg(*q == '\\' || *q == '"' || *q == 'n', "bad escape: %s",
                                      line);
                    }
                }
                q++;
            } while (*q == ',');
            ck_assert_msg(q[0] == '}', "bad label end: %s", line);
            v = q + 1;
        }
        ck_assert_msg(*v == ' ', "no value: %s", line);
        v++;
        ck_assert_msg(*v >= '0' && *v <= '9', "bad value: %s", line);
        while (*v >= '0' && *v <= '9')
            v++;
        if (*v == '.')
            for (v++; *v >= '0' && *v <= '9'; v++)
                ;
        ck_assert_msg(*v == '\0', "trailing bytes: %s", line);
        nsamples++;
    }
    return nsamples;
}

/* ------------------------------------------------------------ exact text */

/* ck_assert_str_eq on the whole text overflows Check's message limit when
 * it fails: compare line by line, so a failure names the first line that
 * differs. */
static void assert_text_eq(const char *got, const char *want)
{
    for (int line = 1;; line++) {
        const char *g = strchr(got, '\n'), *w = strchr(want, '\n');
        size_t gl = g != NULL ? (size_t)(g - got) : strlen(got);
        size_t wl = w != NULL ? (size_t)(w - want) : strlen(want);
        ck_assert_msg(gl == wl && memcmp(got, want, gl) == 0, "line %d: got \"%.*s\", want \"%.*s\"",
                      line, (int)gl, got, (int)wl, want);
        if (g == NULL || w == NULL) {
            ck_assert_msg(g == NULL && w == NULL, "line %d: one text ends early", line);
            break;
        }
        got = g + 1;
        want = w + 1;
    }
}

static rl_test_clock_t clk;
static rl_t *rl;

static void setup(void)
{
    memset(&clk, 0, sizeof clk);
    atomic_store(&clk.precise_ns, UINT64_C(1000000000));
    clk.coarse_tick_ns = 4000000;
    rl = rl_test_open(&clk, 64);
}

static void teardown(void)
{
    rl_close(rl);
    rl = NULL;
}

/* Two limits and a capped one, after a few checks at one instant (the clock
 * stands still, so every count is exact). */
static void small_instance(void)
{
    int api = rl_test_add(rl, "name=api rate=10/s burst=3");
    int sh = rl_test_add(rl, "name=beta.shadow:v1 rate=1/s burst=1 shadow=1");
    int cap = rl_test_add(rl, "name=capped rate=5/s burst=5 max_keys=1 on_failure=closed");
    for (int i = 0; i < 5; i++) /* 3 fit the burst, 2 denied */
        ck_assert_int_ge(rl_check(rl, api, "user-1", 6, 1, NULL), 0);
    for (int i = 0; i < 2; i++) /* the second would deny: allowed, counted */
        ck_assert_int_eq(rl_check(rl, sh, "user-1", 6, 1, NULL), RL_ALLOW);
    ck_assert_int_eq(rl_check(rl, cap, "a", 1, 1, NULL), RL_ALLOW);
    /* The limit's one slot is taken: "b" has none, and closed denies it. */
    ck_assert_int_eq(rl_check(rl, cap, "b", 1, 1, NULL), RL_DENY);
}

static const char exact_fmt[] =
    "# HELP ratelimit_limit_admitted_total Requests answered allow (shadow would-denies "
    "included; a denied rl_check_multi admits none of its requests), by limit.\n"
    "# TYPE ratelimit_limit_admitted_total counter\n"
    "ratelimit_limit_admitted_total{limit=\"api\"} 3\n"
    "ratelimit_limit_admitted_total{limit=\"beta.shadow:v1\"} 2\n"
    "ratelimit_limit_admitted_total{limit=\"capped\"} 1\n"
    "# HELP ratelimit_limit_denied_total Requests answered deny (each one a denied "
    "rl_check_multi checked), by limit.\n"
    "# TYPE ratelimit_limit_denied_total counter\n"
    "ratelimit_limit_denied_total{limit=\"api\"} 2\n"
    "ratelimit_limit_denied_total{limit=\"beta.shadow:v1\"} 0\n"
    "ratelimit_limit_denied_total{limit=\"capped\"} 1\n"
    "# HELP ratelimit_limit_shadow_denied_total Checks of a shadow limit that would have denied "
    "(they were allowed), by limit.\n"
    "# TYPE ratelimit_limit_shadow_denied_total counter\n"
    "ratelimit_limit_shadow_denied_total{limit=\"api\"} 0\n"
    "ratelimit_limit_shadow_denied_total{limit=\"beta.shadow:v1\"} 1\n"
    "ratelimit_limit_shadow_denied_total{limit=\"capped\"} 0\n"
    "# HELP ratelimit_limit_noslot_total Checks whose key found no table slot, decided by "
    "on_failure, by limit.\n"
    "# TYPE ratelimit_limit_noslot_total counter\n"
    "ratelimit_limit_noslot_total{limit=\"api\"} 0\n"
    "ratelimit_limit_noslot_total{limit=\"beta.shadow:v1\"} 0\n"
    "ratelimit_limit_noslot_total{limit=\"capped\"} 1\n"
    "# HELP ratelimit_limit_degraded_total Checks decided by the limit's on_failure policy (no "
    "table slot, or the global tier degraded), by limit.\n"
    "# TYPE ratelimit_limit_degraded_total counter\n"
    "ratelimit_limit_degraded_total{limit=\"api\"} 0\n"
    "ratelimit_limit_degraded_total{limit=\"beta.shadow:v1\"} 0\n"
    "ratelimit_limit_degraded_total{limit=\"capped\"} 1\n"
    "# HELP ratelimit_limit_degraded_spells_total Runs of the limit's degraded answers, each "
    "begun by the first after the instance's health changed or a minute after the last began "
    "(each logged), by limit.\n"
    "# TYPE ratelimit_limit_degraded_spells_total counter\n"
    "ratelimit_limit_degraded_spells_total{limit=\"api\"} 0\n"
    "ratelimit_limit_degraded_spells_total{limit=\"beta.shadow:v1\"} 0\n"
    "ratelimit_limit_degraded_spells_total{limit=\"capped\"} 1\n"
    "# HELP ratelimit_limit_keys Table slots held by the limit's keys now.\n"
    "# TYPE ratelimit_limit_keys gauge\n"
    "ratelimit_limit_keys{limit=\"api\"} 1\n"
    "ratelimit_limit_keys{limit=\"beta.shadow:v1\"} 1\n"
    "ratelimit_limit_keys{limit=\"capped\"} 1\n"
    "# HELP ratelimit_hot_key_demand_per_second The busiest keys of each limit (at most 3 per "
    "limit): requests offered per second on this node, label key the key's first 64 bytes "
    "(other than printable ASCII as \\\\xNN).\n"
    "# TYPE ratelimit_hot_key_demand_per_second gauge\n"
    "ratelimit_hot_key_demand_per_second{limit=\"api\",key=\"#1\"} 5.000\n"
    "ratelimit_hot_key_demand_per_second{limit=\"beta.shadow:v1\",key=\"#1\"} 2.000\n"
    "ratelimit_hot_key_demand_per_second{limit=\"capped\",key=\"#1\"} 1.000\n"
    "# HELP ratelimit_hot_keys Keys of the limit marked hot now (their demand passed the "
    "limit's hot= share of its rate).\n"
    "# TYPE ratelimit_hot_keys gauge\n"
    "ratelimit_hot_keys{limit=\"api\"} 0\n"
    "ratelimit_hot_keys{limit=\"beta.shadow:v1\"} 0\n"
    "ratelimit_hot_keys{limit=\"capped\"} 0\n"
    "# HELP ratelimit_limits Limits defined now.\n"
    "# TYPE ratelimit_limits gauge\n"
    "ratelimit_limits 3\n"
    "# HELP ratelimit_keys_live Keys holding a table slot now.\n"
    "# TYPE ratelimit_keys_live gauge\n"
    "ratelimit_keys_live 3\n"
    "# HELP ratelimit_keys_capacity Key table capacity in keys (max_keys).\n"
    "# TYPE ratelimit_keys_capacity gauge\n"
    "ratelimit_keys_capacity 64\n"
    "# HELP ratelimit_keys_reclaimed_total Idle key slots reclaimed since the instance opened.\n"
    "# TYPE ratelimit_keys_reclaimed_total counter\n"
    "ratelimit_keys_reclaimed_total 0\n"
    "# HELP ratelimit_table_slots Key table slots allocated (max_keys plus headroom).\n"
    "# TYPE ratelimit_table_slots gauge\n"
    "ratelimit_table_slots %llu\n"
    "# HELP ratelimit_table_bytes Bytes allocated for the key table.\n"
    "# TYPE ratelimit_table_bytes gauge\n"
    "ratelimit_table_bytes %llu\n"
    "# HELP ratelimit_reserve_reserved_total Reservations admitted (rl_reserve, rl_reserve_wait).\n"
    "# TYPE ratelimit_reserve_reserved_total counter\n"
    "ratelimit_reserve_reserved_total 0\n"
    "# HELP ratelimit_reserve_denied_total Reservations denied.\n"
    "# TYPE ratelimit_reserve_denied_total counter\n"
    "ratelimit_reserve_denied_total 0\n"
    "# HELP ratelimit_reserve_settled_up_total Reservations settled above their estimate (the difference charged as debt).\n"
    "# TYPE ratelimit_reserve_settled_up_total counter\n"
    "ratelimit_reserve_settled_up_total 0\n"
    "# HELP ratelimit_reserve_settled_down_total Reservations settled below their estimate (the difference given back).\n"
    "# TYPE ratelimit_reserve_settled_down_total counter\n"
    "ratelimit_reserve_settled_down_total 0\n"
    "# HELP ratelimit_reserve_settled_even_total Reservations settled at their estimate.\n"
    "# TYPE ratelimit_reserve_settled_even_total counter\n"
    "ratelimit_reserve_settled_even_total 0\n"
    "# HELP ratelimit_reserve_released_total Reservations released whole (rl_release).\n"
    "# TYPE ratelimit_reserve_released_total counter\n"
    "ratelimit_reserve_released_total 0\n"
    "# HELP ratelimit_reserve_expired_total Reservations neither settled nor released within their ttl.\n"
    "# TYPE ratelimit_reserve_expired_total counter\n"
    "ratelimit_reserve_expired_total 0\n"
    "# HELP ratelimit_reserve_debt_tokens_total Tokens charged by settles above the estimate.\n"
    "# TYPE ratelimit_reserve_debt_tokens_total counter\n"
    "ratelimit_reserve_debt_tokens_total 0\n"
    "# HELP ratelimit_reserve_refund_tokens_total Tokens given back by settles below the estimate and by releases.\n"
    "# TYPE ratelimit_reserve_refund_tokens_total counter\n"
    "ratelimit_reserve_refund_tokens_total 0\n"
    "# HELP ratelimit_reserve_in_flight Reservations held now.\n"
    "# TYPE ratelimit_reserve_in_flight gauge\n"
    "ratelimit_reserve_in_flight 0\n"
    "# HELP ratelimit_reserve_capacity Reservations that can be held at once (max_reservations).\n"
    "# TYPE ratelimit_reserve_capacity gauge\n"
    "ratelimit_reserve_capacity 4096\n"
    "# HELP ratelimit_reserve_full_total rl_reserve calls refused because every entry was held.\n"
    "# TYPE ratelimit_reserve_full_total counter\n"
    "ratelimit_reserve_full_total 0\n"
    "# HELP ratelimit_wait_admitted_total rl_wait calls admitted.\n"
    "# TYPE ratelimit_wait_admitted_total counter\n"
    "ratelimit_wait_admitted_total 0\n"
    "# HELP ratelimit_wait_slept_total rl_wait calls admitted after a sleep.\n"
    "# TYPE ratelimit_wait_slept_total counter\n"
    "ratelimit_wait_slept_total 0\n"
    "# HELP ratelimit_wait_refused_total rl_wait calls refused at once: the wait needed exceeded max_wait_ms.\n"
    "# TYPE ratelimit_wait_refused_total counter\n"
    "ratelimit_wait_refused_total 0\n";

/* The expected text: the table's size comes from rl_stats, so a change of
 * the table's layout does not break this test. */
static char *expected_text(void)
{
    rl_stats_t st;
    rl_stats_init(&st);
    ck_assert_int_eq(rl_stats(rl, &st), 0);
    static char want[8192];
    int n = snprintf(want, sizeof want, exact_fmt, (unsigned long long)st.table_slots,
                     (unsigned long long)st.table_bytes);
    ck_assert_int_lt(n, (int)sizeof want);
    return want;
}

START_TEST(exact_text)
{
    small_instance();
    /* A second later: the scrape harvests the keys' demand over it (the
     * checks' counts are folded into the totals, which stay as they were);
     * their bytes are asked for then, so the keys show as #rank. */
    rl_test_clock_advance(&clk, 1000000000);
    char *got = render(rl);
    assert_text_eq(got, expected_text());
    ck_assert_int_eq(check_format(got), 21 + 6 + 6 + 15); /* + reservations and waits */
    /* Local-only: no global-tier families. */
    ck_assert_ptr_null(strstr(got, "ratelimit_health"));
    ck_assert_ptr_null(strstr(got, "ratelimit_sync"));
    free(got);
}
END_TEST

START_TEST(no_limits)
{
    /* The per-limit families keep their HELP/TYPE lines with no samples. */
    char *got = render(rl);
    ck_assert_ptr_nonnull(strstr(got, "# TYPE ratelimit_limit_admitted_total counter\n"
                                      "# HELP ratelimit_limit_denied_total"));
    ck_assert_ptr_nonnull(strstr(got, "\nratelimit_limits 0\n"));
    ck_assert_int_eq(check_format(got), 6 + 15); /* + reservations and waits */
    free(got);
}
END_TEST

START_TEST(removed_limit_left_out)
{
    small_instance();
    int sh = rl_limit_find(rl, "beta.shadow:v1");
    ck_assert_int_gt(sh, 0);
    ck_assert_int_eq(rl_limit_remove(rl, sh), 0);
    char *got = render(rl);
    ck_assert_ptr_null(strstr(got, "beta.shadow"));
    ck_assert_ptr_nonnull(strstr(got, "\nratelimit_limit_admitted_total{limit=\"api\"} 3\n"
                                      "ratelimit_limit_admitted_total{limit=\"capped\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(got, "\nratelimit_limits 2\n"));
    ck_assert_int_eq(check_format(got), 14 + 6 + 2 + 15); /* hot_keys, no demand yet; reservations */
    free(got);
}
END_TEST

/* ------------------------------------------------------ snprintf contract */

START_TEST(snprintf_every_length)
{
    small_instance();
    char *want = render(rl); /* exact_text checks its content */
    size_t need = strlen(want);
    ck_assert_int_eq(rl_metrics_text(rl, NULL, 0), (int)need);
    char guard = 'x';
    ck_assert_int_eq(rl_metrics_text(rl, &guard, 0), (int)need);
    ck_assert_int_eq(guard, 'x'); /* len 0: nothing written, not even a NUL */
    for (size_t len = 1; len <= need + 1; len++) {
        /* Exactly len bytes plus a canary, so an overrun shows (and ASan
         * sees any write past len). */
        char *buf = malloc(len + 1);
        ck_assert_ptr_nonnull(buf);
        memset(buf, '#', len + 1);
        ck_assert_int_eq(rl_metrics_text(rl, buf, len), (int)need);
        size_t keep = len - 1 < need ? len - 1 : need;
        ck_assert_msg(memcmp(buf, want, keep) == 0, "prefix differs at len %zu", len);
        ck_assert_int_eq(buf[keep], '\0');
        ck_assert_int_eq(buf[len], '#');
        free(buf);
    }
    free(want);
}
END_TEST

/* ------------------------------------------------------------- escaping */

START_TEST(escape_label_values)
{
    /* A limit name cannot hold these bytes; the escaper sees them here. */
    static const char in[] = "a\\b\"c\nd\0e\r{}=,\xc3\xa9";
    static const char out[] = "a\\\\b\\\"c\\nd\0e\r{}=,\xc3\xa9";
    size_t n = sizeof in - 1, want = sizeof out - 1;
    ck_assert_uint_eq(rl__prom_escape(in, n, NULL, 0), want);
    char buf[64];
    ck_assert_uint_eq(rl__prom_escape(in, n, buf, sizeof buf), want);
    ck_assert_mem_eq(buf, out, want + 1); /* with its NUL */
    /* Truncated at every capacity: a prefix, NUL-terminated, nothing past. */
    for (size_t cap = 1; cap <= want + 1; cap++) {
        memset(buf, '#', sizeof buf);
        ck_assert_uint_eq(rl__prom_escape(in, n, buf, cap), want);
        ck_assert_mem_eq(buf, out, cap - 1);
        ck_assert_int_eq(buf[cap - 1], '\0');
        ck_assert_int_eq(buf[cap], '#');
    }
    /* Plain names pass through; the empty string is empty. */
    ck_assert_uint_eq(rl__prom_escape("api-v1.2:x_y", 12, buf, sizeof buf), 12);
    ck_assert_str_eq(buf, "api-v1.2:x_y");
    ck_assert_uint_eq(rl__prom_escape("", 0, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "");
}
END_TEST

/* --------------------------------------------------------------- errors */

START_TEST(einval)
{
    char buf[16];
    ck_assert_int_eq(rl_metrics_text(NULL, buf, sizeof buf), RL_EINVAL);
    ck_assert_int_eq(rl_metrics_text(NULL, NULL, 0), RL_EINVAL);
    ck_assert_int_eq(rl_metrics_text(rl, NULL, 1), RL_EINVAL);
    ck_assert_int_eq(rl_metrics_text(rl, NULL, sizeof buf), RL_EINVAL);
}
END_TEST

START_TEST(eforked)
{
    small_instance();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char buf[64];
        int ok = rl_metrics_text(rl, buf, sizeof buf) == RL_EFORKED &&
                 rl_metrics_text(rl, NULL, 0) == RL_EFORKED;
        rl_close(rl); /* safe in the child: frees its own copy */
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    ck_assert_int_gt(rl_metrics_text(rl, NULL, 0), 0); /* parent unaffected */
}
END_TEST

/* An allocator that fails on demand, counting what is outstanding. */
typedef struct fail_alloc {
    atomic_int fail;
    atomic_long live;
} fail_alloc_t;

static void *fa_alloc(void *opaque, size_t size, size_t align)
{
    fail_alloc_t *fa = opaque;
    if (atomic_load(&fa->fail))
        return NULL;
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size) != 0)
        return NULL;
    atomic_fetch_add(&fa->live, 1);
    return p;
}

static void fa_free(void *opaque, void *ptr, size_t size, size_t align)
{
    (void)size;
    (void)align;
    fail_alloc_t *fa = opaque;
    if (ptr != NULL)
        atomic_fetch_sub(&fa->live, 1);
    free(ptr);
}

START_TEST(enomem)
{
    static fail_alloc_t fa;
    rl_config_t c;
    rl_config_init(&c);
    c.allocator.alloc = fa_alloc;
    c.allocator.free = fa_free;
    c.allocator.opaque = &fa;
    rl_t *r = NULL;
    ck_assert_int_eq(rl_open(&r, &c), 0);
    rl_test_add(r, "name=api rate=10/s");
    long before = atomic_load(&fa.live);
    atomic_store(&fa.fail, 1);
    char buf[64];
    ck_assert_int_eq(rl_metrics_text(r, buf, sizeof buf), RL_ENOMEM);
    atomic_store(&fa.fail, 0);
    int n = rl_metrics_text(r, buf, sizeof buf);
    ck_assert_int_gt(n, (int)sizeof buf);
    ck_assert_uint_eq(strlen(buf), sizeof buf - 1);
    ck_assert_int_eq(atomic_load(&fa.live), before); /* the snapshot was freed */
    rl_close(r);
    ck_assert_int_eq(atomic_load(&fa.live), 0);
}
END_TEST

/* ------------------------------------------------------------ concurrency */

typedef struct churn {
    rl_t *rl;
    atomic_int stop;
    atomic_long ops;
} churn_t;

/* Adds and removes limits (reusing registry slots) as fast as it can. */
static void *churn_limits(void *arg)
{
    churn_t *c = arg;
    unsigned i = 0;
    while (!atomic_load_explicit(&c->stop, memory_order_relaxed)) {
        char spec[64];
        snprintf(spec, sizeof spec, "name=tmp%u rate=100/s", i++ % 8);
        rl_limit_t lim;
        ck_assert_int_eq(rl_limit_parse(&lim, spec, NULL, 0), 0);
        int id = rl_limit_add(c->rl, &lim);
        if (id >= 0) {
            char key[8];
            snprintf(key, sizeof key, "k%u", i % 5);
            rl_check(c->rl, id, key, strlen(key), 1, NULL);
            ck_assert_int_eq(rl_limit_remove(c->rl, id), 0);
        }
        atomic_fetch_add_explicit(&c->ops, 1, memory_order_relaxed);
    }
    return NULL;
}

/* Checks a stable limit on many keys. */
static void *check_keys(void *arg)
{
    churn_t *c = arg;
    int api = rl_limit_find(c->rl, "api");
    unsigned i = 0;
    while (!atomic_load_explicit(&c->stop, memory_order_relaxed)) {
        char key[8];
        snprintf(key, sizeof key, "u%u", i++ % 40);
        ck_assert_int_ge(rl_check(c->rl, api, key, strlen(key), 1, NULL), 0);
    }
    return NULL;
}

START_TEST(concurrent_checks_and_limit_churn)
{
    rl_t *r = rl_test_open(NULL, 256);
    rl_test_add(r, "name=api rate=1000/s burst=100");
    churn_t c = {.rl = r};
    pthread_t th[2];
    ck_assert_int_eq(pthread_create(&th[0], NULL, churn_limits, &c), 0);
    ck_assert_int_eq(pthread_create(&th[1], NULL, check_keys, &c), 0);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int renders = 0;
    long elapsed_ms;
    do {
        /* The text may grow between the two calls: give it headroom. */
        int n = rl_metrics_text(r, NULL, 0);
        ck_assert_int_gt(n, 0);
        size_t cap = (size_t)n + 4096;
        char *buf = malloc(cap);
        ck_assert_ptr_nonnull(buf);
        int m = rl_metrics_text(r, buf, cap);
        ck_assert_int_gt(m, 0);
        ck_assert_int_lt(m, (int)cap);
        ck_assert_uint_eq(strlen(buf), (size_t)m);
        check_format(buf);
        ck_assert_ptr_nonnull(strstr(buf, "ratelimit_limit_admitted_total{limit=\"api\"} "));
        free(buf);
        renders++;
        clock_gettime(CLOCK_MONOTONIC, &t);
        elapsed_ms = (t.tv_sec - t0.tv_sec) * 1000L + (t.tv_nsec - t0.tv_nsec) / 1000000L;
        /* At least 300 ms, 20 renders and 100 limit changes (a loaded
         * machine may run the other threads late), at most RL_TEST_WAIT_MS. */
    } while ((elapsed_ms < 300 || renders < 20 ||
              atomic_load_explicit(&c.ops, memory_order_relaxed) < 100) &&
             elapsed_ms < RL_TEST_WAIT_MS);
    atomic_store(&c.stop, 1);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    ck_assert_msg(atomic_load(&c.ops) >= 100, "limit changes %ld, renders %d in %ld ms",
                  atomic_load(&c.ops), renders, elapsed_ms);
    rl_close(r);
}
END_TEST

/* The slot counts are summed one table walk per window of 64 limit
 * indexes: limits in several windows, removed ones, and indexes reused by a
 * later generation must each get exactly their own counts. */
START_TEST(stats_across_index_windows)
{
    rl_config_t c;
    rl_config_init(&c);
    c.max_limits = 200;
    c.max_keys = 4096;
    rl_t *r = NULL;
    ck_assert_int_eq(rl_open(&r, &c), 0);
    enum { N = 150 };
    int ids[N];
    uint64_t want_a[N], want_d[N];
    char spec[64], key[16];
    for (int i = 0; i < N; i++) {
        snprintf(spec, sizeof spec, "name=l%d rate=1/h burst=5", i);
        ids[i] = rl_test_add(r, spec);
        ck_assert_int_gt(ids[i], 0);
        int checks = i % 9 + 1, keys = i % 4 + 1;
        want_a[i] = want_d[i] = 0;
        for (int k = 0; k < keys; k++) {
            snprintf(key, sizeof key, "key%d", k);
            for (int j = 0; j < checks; j++)
                ck_assert_int_eq(rl_check(r, ids[i], key, strlen(key), 1, NULL),
                                 j < 5 ? RL_ALLOW : RL_DENY);
            want_a[i] += checks < 5 ? (uint64_t)checks : 5;
            want_d[i] += checks > 5 ? (uint64_t)checks - 5 : 0;
        }
    }
    /* Every 10th goes; new limits take the freed indexes with a new
     * generation, and their keys' slots must not count for the old ones. */
    for (int i = 0; i < N; i += 10)
        ck_assert_int_eq(rl_limit_remove(r, ids[i]), 0);
    for (int i = 0; i < N; i += 10) {
        snprintf(spec, sizeof spec, "name=n%d rate=1/h burst=5", i);
        ids[i] = rl_test_add(r, spec);
        ck_assert_int_gt(ids[i], 0);
        ck_assert_int_eq(rl_check(r, ids[i], "key0", 4, 1, NULL), RL_ALLOW);
        want_a[i] = 1;
        want_d[i] = 0;
    }
    uint64_t sum_a = 0, sum_d = 0;
    for (int i = 0; i < N; i++) {
        rl_limit_stats_t ls;
        rl_limit_stats_init(&ls);
        ck_assert_int_eq(rl_limit_stats(r, ids[i], &ls), 0);
        ck_assert_msg(ls.admitted == want_a[i] && ls.denied == want_d[i],
                      "limit %d: admitted %llu denied %llu, want %llu %llu", i,
                      (unsigned long long)ls.admitted, (unsigned long long)ls.denied,
                      (unsigned long long)want_a[i], (unsigned long long)want_d[i]);
        sum_a += want_a[i];
        sum_d += want_d[i];
    }
    rl_stats_t st;
    rl_stats_init(&st);
    ck_assert_int_eq(rl_stats(r, &st), 0);
    ck_assert_uint_eq(st.admitted, sum_a);
    ck_assert_uint_eq(st.denied, sum_d);
    char *got = render(r);
    check_format(got);
    char line[96];
    snprintf(line, sizeof line, "\nratelimit_limit_admitted_total{limit=\"l149\"} %llu\n",
             (unsigned long long)want_a[149]);
    ck_assert_ptr_nonnull(strstr(got, line));
    snprintf(line, sizeof line, "\nratelimit_limit_denied_total{limit=\"l71\"} %llu\n",
             (unsigned long long)want_d[71]);
    ck_assert_ptr_nonnull(strstr(got, line));
    ck_assert_ptr_nonnull(strstr(got, "\nratelimit_limit_admitted_total{limit=\"n140\"} 1\n"));
    ck_assert_ptr_null(strstr(got, "{limit=\"l140\"}"));
    free(got);
    rl_close(r);
}
END_TEST

/* ------------------------------------------------------------ global tier */

START_TEST(global_tier_families)
{
    rl_t *r = rl_test_open_degraded(50);
    rl_stats_t st;
    int closed = rl_test_add(r, "name=c rate=10/s on_failure=closed");
    ck_assert_int_eq(rl_check(r, closed, "k", 1, 1, NULL), RL_DENY);
    char *got = render(r);
    check_format(got);
    ck_assert_ptr_nonnull(strstr(got, "\nratelimit_health{state=\"healthy\"} 0\n"
                                      "ratelimit_health{state=\"degraded\"} 1\n"
                                      "ratelimit_health{state=\"recovering\"} 0\n"));
    ck_assert_ptr_nonnull(strstr(got, "\nratelimit_degraded_decisions_total{policy=\"open\"} 0\n"
                                      "ratelimit_degraded_decisions_total{policy=\"closed\"} 1\n"
                                      "ratelimit_degraded_decisions_total{policy=\"local\"} 0\n"));
    ck_assert_ptr_nonnull(strstr(got, "\nratelimit_limit_degraded_total{limit=\"c\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(got, "\nratelimit_sync_connected 0\n"));
    ck_assert_ptr_nonnull(strstr(got, "\n# TYPE ratelimit_health_seconds_total counter\n"
                                      "ratelimit_health_seconds_total{state=\"healthy\"} "));
    ck_assert_ptr_nonnull(strstr(got, "\n# TYPE ratelimit_sync_rounds_failed_total counter\n"));
    ck_assert_ptr_nonnull(strstr(got, "\n# TYPE ratelimit_sync_errors_total counter\n"));
    /* Nothing listens: connect errors, and no class that needs a server. */
    rl_stats_init(&st);
    ck_assert_int_eq(rl_stats(r, &st), 0);
    ck_assert_uint_ge(st.sync_err_connect, 1);
    ck_assert_uint_eq(st.sync_err_auth + st.sync_err_noscript + st.sync_err_readonly, 0);
    ck_assert_uint_eq(st.sync_rounds_completed, 0);
    ck_assert_ptr_nonnull(strstr(got, "\n# TYPE ratelimit_sync_errors_by_class_total counter\n"
                                      "ratelimit_sync_errors_by_class_total{class=\"connect\"} "));
    ck_assert_ptr_nonnull(strstr(got, "\nratelimit_sync_errors_by_class_total{class=\"auth\"} 0\n"));
    ck_assert_ptr_nonnull(strstr(got, "\n# TYPE ratelimit_sync_round_seconds summary\n"
                                      "ratelimit_sync_round_seconds_sum 0.000000\n"
                                      "ratelimit_sync_round_seconds_count 0\n"));
    ck_assert_ptr_nonnull(strstr(got, "\nratelimit_limit_usage_max_ratio{limit=\"c\"} 0.000000\n"));
    ck_assert_ptr_nonnull(strstr(got, "\nratelimit_limit_sync_keys{limit=\"c\"} 0\n"));
    ck_assert_ptr_nonnull(strstr(got, "\n# TYPE ratelimit_sync_reports_total counter\n"));
    ck_assert_ptr_nonnull(strstr(got, "\n# TYPE ratelimit_health_transitions_total counter\n"));
    ck_assert_ptr_nonnull(strstr(got, "\n# TYPE ratelimit_health_state_seconds gauge\n"
                                      "ratelimit_health_state_seconds "));
    free(got);
    rl_close(r);
}
END_TEST

START_TEST(seconds_are_exact_decimals)
{
    /* Time in a state is rendered from milliseconds as d.ddd: check that the
     * value after the label parses back to the stats' figure (to the ms). */
    rl_t *r = rl_test_open_degraded(50);
    rl_stats_t st;
    /* Some whole milliseconds in the state, so the figure is not 0. */
    WAIT_FOR((rl_stats_init(&st), rl_stats(r, &st) == 0 && st.ms_degraded >= 2));
    char *got = render(r);
    rl_stats_init(&st);
    ck_assert_int_eq(rl_stats(r, &st), 0);
    const char *k = "\nratelimit_health_seconds_total{state=\"degraded\"} ";
    const char *p = strstr(got, k);
    ck_assert_ptr_nonnull(p);
    p += strlen(k);
    unsigned long long whole = 0, frac = 0;
    int used = 0;
    ck_assert_int_eq(sscanf(p, "%llu.%3llu%n", &whole, &frac, &used), 2);
    ck_assert_int_eq(p[used], '\n');
    ck_assert_int_eq(p[used - 4], '.'); /* exactly three decimals */
    uint64_t ms = whole * 1000 + frac;
    ck_assert_uint_gt(ms, 0);
    ck_assert_uint_le(ms, st.ms_degraded); /* read before the stats */
    free(got);
    rl_close(r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("text");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, exact_text);
    tcase_add_test(tc, no_limits);
    tcase_add_test(tc, removed_limit_left_out);
    tcase_add_test(tc, snprintf_every_length);
    tcase_add_test(tc, escape_label_values);
    tcase_add_test(tc, einval);
    tcase_add_test(tc, eforked);
    tcase_add_test(tc, enomem);
    tcase_add_test(tc, stats_across_index_windows);
    suite_add_tcase(s, tc);
    TCase *cc = tcase_create("concurrency");
    tcase_set_timeout(cc, 120);
    tcase_add_test(cc, concurrent_checks_and_limit_churn);
    suite_add_tcase(s, cc);
    TCase *gt = tcase_create("global");
    tcase_set_timeout(gt, 60);
    tcase_add_test(gt, global_tier_families);
    tcase_add_test(gt, seconds_are_exact_decimals);
    suite_add_tcase(s, gt);
    return s;
}

int main(void) { return rl_test_run(suite()); }

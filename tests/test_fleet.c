/* SPDX-License-Identifier: MIT */
/*
 * A fleet must never split silently (include/ratelimit.h, rl_open):
 * - rl_open names the field at fault in cfg->err, and refuses a redis_url
 *   without a key_secret, a URL with a control byte, TLS, a bad unix socket path,
 *   an empty cluster host list, a bad port, a Sentinel URL without a master;
 * - nodes of one key_prefix with different secrets see each other through
 *   the registry's fingerprints, and log, count and expose the split;
 * - a node that has seen its fleet divides its pessimistic shares by the
 *   live count it saw, not by expected_nodes;
 * - with no log hook, warnings and errors reach stderr, rate-limited per
 *   instance, and log_quiet silences them;
 * - rl_limit_parse_sized writes the caller's size, no more.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "testutil.h"
#include "redis_fixture.h"
#include "instance.h"
#include "base/structsize.h"
#include "sync/sync.h"
#include "sync/nodes.h"
#include "redis/keys.h"
#include <hiredis/hiredis.h>

static const char secret_a[] = "fleet-secret-A-0123456789";
static const char secret_b[] = "fleet-secret-B-0123456789";

/* ------------------------------------------------------ rl_open's message */

typedef struct open_case {
    const char *what;
    const char *redis_url;
    const char *secret; /* NULL: none */
    size_t secret_len;
    const char *node_id;
    const char *key_prefix;
    uint32_t sync_interval_ms; /* 0: default */
    int want;
    const char *says[3]; /* substrings the message must hold */
} open_case_t;

static const open_case_t open_cases[] = {
    {"redis_url without key_secret", "redis://127.0.0.1:1", NULL, 0, NULL, NULL, 0, RL_ERANGE,
     {"key_secret", "required with a redis_url", NULL}},
    {"no scheme", "127.0.0.1:6379", secret_a, 25, NULL, NULL, 0, RL_ERANGE,
     {"redis_url", "no scheme", NULL}},
    {"TLS", "rediss://127.0.0.1:6379", secret_a, 25, NULL, NULL, 0, RL_ERANGE,
     {"redis_url", "rediss://", "TLS"}},
    {"relative unix socket", "unix://var/run/redis.sock", secret_a, 25, NULL, NULL, 0,
     RL_ERANGE, {"redis_url", "socket path", "absolute"}},
    {"redis+unix without a path", "redis+unix://", secret_a, 25, NULL, NULL, 0, RL_ERANGE,
     {"redis_url", "socket path", NULL}},
    {"empty cluster host list", "redis+cluster://", secret_a, 25, NULL, NULL, 0, RL_ERANGE,
     {"redis_url", "host list", "empty"}},
    {"bad cluster port", "redis+cluster://127.0.0.1:7000,127.0.0.1:0", secret_a, 25, NULL,
     NULL, 0, RL_ERANGE, {"redis_url", "port", "host 2"}},
    {"sentinel without a master name", "redis+sentinel://127.0.0.1:26379", secret_a, 25, NULL,
     NULL, 0, RL_ERANGE, {"redis_url", "master name", "missing"}},
    {"other scheme", "http://127.0.0.1:6379", secret_a, 25, NULL, NULL, 0, RL_ERANGE,
     {"redis_url", "must start with redis://", "\"http\""}},
    {"CR/LF in the host", "redis://bad\r\nInjected-Line=yes", secret_a, 25, NULL, NULL, 0,
     RL_ERANGE, {"redis_url", "byte 11 is 0x0d", NULL}},
    {"a tab in the host", "redis://bad\thost:6379", secret_a, 25, NULL, NULL, 0, RL_ERANGE,
     {"redis_url", "0x09", NULL}},
    {"DEL in the password", "redis://:pa\x7fss@127.0.0.1:6379", secret_a, 25, NULL, NULL, 0,
     RL_ERANGE, {"redis_url", "0x7f", NULL}},
    {"a host byte outside a name", "redis://bad!host:6379", secret_a, 25, NULL, NULL, 0,
     RL_ERANGE, {"redis_url", "host byte 3 is 0x21", NULL}},
    {"port 0", "redis://127.0.0.1:0", secret_a, 25, NULL, NULL, 0, RL_ERANGE,
     {"redis_url", "port", NULL}},
    {"5-byte secret", NULL, "short", 5, NULL, NULL, 0, RL_ERANGE,
     {"key_secret", "5 bytes", "16..4096"}},
    {"5-byte secret with a URL", "redis://127.0.0.1:1", "short", 5, NULL, NULL, 0, RL_ERANGE,
     {"key_secret", "5 bytes", NULL}},
    {"NULL secret with a length", NULL, NULL, 32, NULL, NULL, 0, RL_ERANGE,
     {"key_secret", "key_secret_len is 32", NULL}},
    {"node id with a space", NULL, NULL, 0, "has space", NULL, 0, RL_ERANGE,
     {"node_id", "byte 3 is 0x20", NULL}},
    {"empty node id", NULL, NULL, 0, "", NULL, 0, RL_ERANGE, {"node_id", "empty", NULL}},
    {"key prefix with braces", NULL, NULL, 0, NULL, "{tag}", 0, RL_ERANGE,
     {"key_prefix", "byte 0 is 0x7b", NULL}},
    {"sync interval", NULL, NULL, 0, NULL, NULL, 20, RL_ERANGE,
     {"sync_interval_ms", "20 is outside 50..200", NULL}},
};

START_TEST(open_errors_name_the_field)
{
    const open_case_t *k = &open_cases[_i];
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = k->redis_url;
    c.key_secret = k->secret;
    c.key_secret_len = k->secret_len;
    c.node_id = k->node_id;
    c.key_prefix = k->key_prefix;
    if (k->sync_interval_ms != 0)
        c.sync_interval_ms = k->sync_interval_ms;
    char err[256];
    memset(err, 'x', sizeof err);
    c.err = err;
    c.errlen = sizeof err;
    rl_t *rl = (rl_t *)1;
    ck_assert_msg(rl_open(&rl, &c) == k->want, "%s: code", k->what);
    ck_assert_ptr_null(rl);
    ck_assert_msg(memchr(err, '\0', sizeof err) != NULL, "%s: message not terminated", k->what);
    for (int i = 0; i < 3 && k->says[i] != NULL; i++)
        ck_assert_msg(strstr(err, k->says[i]) != NULL, "%s: \"%s\" lacks \"%s\"", k->what, err,
                      k->says[i]);
    /* No message ever carries a control byte (it ends up in logs). */
    for (const char *p = err; *p != '\0'; p++)
        ck_assert_msg((unsigned char)*p >= 0x20 && *p != 0x7f, "%s: control byte in \"%s\"",
                      k->what, err);
}
END_TEST

START_TEST(open_message_buffer_contract)
{
    rl_config_t c;
    rl_config_init(&c);
    char err[64];
    /* Success clears a stale message. */
    strcpy(err, "stale");
    c.err = err;
    c.errlen = sizeof err;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    ck_assert_str_eq(err, "");
    rl_close(rl);
    /* A short buffer gets a cut, terminated message; errlen 0 writes nothing. */
    c.node_id = "bad id";
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    c.err = tiny;
    c.errlen = sizeof tiny;
    ck_assert_int_eq(rl_open(&rl, &c), RL_ERANGE);
    ck_assert_str_eq(tiny, "node_id");
    memset(tiny, 'x', sizeof tiny);
    c.errlen = 0;
    ck_assert_int_eq(rl_open(&rl, &c), RL_ERANGE);
    ck_assert_int_eq(tiny[0], 'x');
    c.err = NULL;
    c.errlen = 100;
    ck_assert_int_eq(rl_open(&rl, &c), RL_ERANGE);
    /* out NULL: RL_EINVAL, said so. */
    rl_config_init(&c);
    c.err = err;
    c.errlen = sizeof err;
    ck_assert_int_eq(rl_open(NULL, &c), RL_EINVAL);
    ck_assert_str_eq(err, "out: NULL");
    /* A size between two layouts would cut a field: RL_ESIZE, said so. */
    c.size = sizeof c - 4;
    ck_assert_int_eq(rl_open(&rl, &c), RL_ESIZE);
    ck_assert_ptr_nonnull(strstr(err, "size"));
}
END_TEST

START_TEST(open_accepts_the_old_config_layout)
{
    /* A program built against the 0.1 header passes its own, smaller size:
     * the fields it cannot see take their defaults (stderr logging on). */
    union {
        rl_config_t c;
        unsigned char bytes[sizeof(rl_config_t)];
    } u;
    rl_config_init_sized(&u.c, RL_CONFIG_SIZE_MIN);
    ck_assert_uint_eq(u.c.size, RL_CONFIG_SIZE_MIN);
    /* Garbage where the new fields would be: never read. */
    memset(u.bytes + RL_CONFIG_SIZE_MIN, 0xAB, sizeof u.bytes - RL_CONFIG_SIZE_MIN);
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &u.c), 0);
    ck_assert_int_eq(rl->logger.quiet, 0);
    ck_assert_ptr_null(rl->logger.fn);
    rl_close(rl);
}
END_TEST

/* ------------------------------------------------- rl_limit_parse_sized */

START_TEST(limit_parse_sized_writes_the_callers_size)
{
    enum { EXTRA = 32, GUARD = 64 };
    union {
        rl_limit_t l;
        unsigned char b[sizeof(rl_limit_t) + EXTRA + GUARD];
    } u;
    char err[128];
    /* A newer caller's larger struct: its tail zeroed, nothing past it. */
    memset(&u, 0xAB, sizeof u);
    ck_assert_int_eq(rl_limit_parse_sized(&u.l, sizeof(rl_limit_t) + EXTRA,
                                          "name=a rate=5/s burst=7", err, sizeof err),
                     0);
    ck_assert_uint_eq(u.l.size, sizeof(rl_limit_t) + EXTRA);
    ck_assert_str_eq(u.l.name, "a");
    ck_assert_uint_eq(u.l.burst, 7);
    for (size_t i = sizeof(rl_limit_t); i < sizeof(rl_limit_t) + EXTRA; i++)
        ck_assert_uint_eq(u.b[i], 0);
    for (size_t i = sizeof(rl_limit_t) + EXTRA; i < sizeof u; i++)
        ck_assert_uint_eq(u.b[i], 0xAB);
    /* The struct it fills is accepted as is. */
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, NULL), 0);
    ck_assert_int_ge(rl_limit_add(rl, &u.l), 0);
    rl_close(rl);
    /* The exported rl_limit_parse (what a 0.1 binary calls; the header's
     * macro of that name passes this header's size) writes the 0.1
     * layout, exactly. */
    memset(&u, 0xAB, sizeof u);
    ck_assert_int_eq((rl_limit_parse)(&u.l, "name=b rate=1/m", err, sizeof err), 0);
    ck_assert_uint_eq(u.l.size, RL_LIMIT_SIZE_MIN);
    for (size_t i = RL_LIMIT_SIZE_MIN; i < sizeof u; i++)
        ck_assert_uint_eq(u.b[i], 0xAB);
    /* Smaller than any layout: RL_ESIZE, nothing written, said so. */
    memset(&u, 0xAB, sizeof u);
    ck_assert_int_eq(rl_limit_parse_sized(&u.l, RL_LIMIT_SIZE_MIN - 1, "name=c rate=1/s", err,
                                          sizeof err),
                     RL_ESIZE);
    ck_assert_ptr_nonnull(strstr(err, "size"));
    for (size_t i = 0; i < sizeof u; i++)
        ck_assert_uint_eq(u.b[i], 0xAB);
    /* Errors still name the word. */
    ck_assert_int_eq(rl_limit_parse_sized(&u.l, sizeof u.l, "name=c rate=0/s", err, sizeof err),
                     RL_ERANGE);
    ck_assert_ptr_nonnull(strstr(err, "rate"));
}
END_TEST

/* ------------------------------------------------------ the default log */

typedef struct captured {
    int fd[2];
} captured_t;

/* Point the instance's stderr at a pipe (base/log.h: the fd is the test hook). */
static void capture(rl_t *rl, captured_t *cap)
{
    ck_assert_int_eq(pipe(cap->fd), 0);
    ck_assert_int_eq(fcntl(cap->fd[0], F_SETFL, O_NONBLOCK), 0);
    rl->logger.fd = cap->fd[1];
}

/* Everything written so far, NUL-terminated (the caller frees it). */
static char *drain(captured_t *cap)
{
    size_t cap_bytes = 1 << 16, n = 0;
    char *buf = malloc(cap_bytes + 1);
    ck_assert_ptr_nonnull(buf);
    for (;;) {
        ssize_t r = read(cap->fd[0], buf + n, cap_bytes - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    return buf;
}

static int count_lines(const char *s, const char *with)
{
    int n = 0;
    for (const char *line = s; *line != '\0';) {
        const char *end = strchr(line, '\n');
        ck_assert_msg(end != NULL, "a line without its newline: \"%s\"", line);
        if (strstr(line, with) != NULL && strstr(line, with) < end)
            n++;
        line = end + 1;
    }
    return n;
}

static rl_t *open_logging(rl_test_clock_t *clk, int quiet, rl_log_fn fn, void *ud)
{
    rl_config_t c;
    rl_config_init(&c);
    c.node_id = "logger-1";
    c.clock = rl_test_clock_fn;
    c.clock_ud = clk;
    c.log_quiet = (uint32_t)quiet;
    c.log = fn;
    c.log_ud = ud;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    return rl;
}

START_TEST(stderr_default_is_rate_limited)
{
    rl_test_clock_t clk = {5000000000u, 0};
    rl_t *rl = open_logging(&clk, 0, NULL, NULL);
    captured_t cap;
    capture(rl, &cap);
    /* Time stands still: the burst, then nothing. */
    for (int i = 0; i < 3 * RL_LOG_BURST; i++)
        rl__log(&rl->logger, i % 2 ? RL_LOG_ERROR : RL_LOG_WARN, "event %d\r\nforged line", i);
    rl__log(&rl->logger, RL_LOG_INFO, "info is not written");
    char *out = drain(&cap);
    ck_assert_int_eq(count_lines(out, "libratelimit: "), RL_LOG_BURST);
    ck_assert_int_eq(count_lines(out, "libratelimit: WARN [logger-1] event 0??forged line"), 1);
    ck_assert_int_eq(count_lines(out, "libratelimit: ERROR [logger-1] event 1??forged line"), 1);
    ck_assert_int_eq(count_lines(out, "forged"), RL_LOG_BURST); /* never a line of its own */
    ck_assert_ptr_null(strstr(out, "info is not written"));
    free(out);
    rl_stats_t st;
    rl_stats_init(&st);
    ck_assert_int_eq(rl_stats(rl, &st), 0);
    ck_assert_uint_eq(st.log_dropped, 2 * RL_LOG_BURST);
    /* One interval later: one line, which says how many were dropped. */
    rl_test_clock_advance(&clk, (uint64_t)RL_LOG_EVERY_MS * 1000000u);
    rl__log(&rl->logger, RL_LOG_WARN, "after");
    rl__log(&rl->logger, RL_LOG_WARN, "too soon");
    out = drain(&cap);
    ck_assert_int_eq(count_lines(out, "libratelimit: "), 1);
    ck_assert_int_eq(count_lines(out, "after (20 earlier lines dropped by the log rate limit)"),
                     1);
    free(out);
    ck_assert_int_eq(rl_stats(rl, &st), 0);
    ck_assert_uint_eq(st.log_dropped, 2 * RL_LOG_BURST + 1);
    rl_close(rl);
    close(cap.fd[0]);
    close(cap.fd[1]);
}
END_TEST

/* The model of the limiter: GCRA, burst RL_LOG_BURST, one per interval. */
typedef struct racer {
    rl_t *rl;
    int lines;
} racer_t;

static void *race_logs(void *arg)
{
    racer_t *r = arg;
    for (int i = 0; i < r->lines; i++)
        rl__log(&r->rl->logger, RL_LOG_WARN, "racer line %d", i);
    return NULL;
}

START_TEST(stderr_default_is_thread_safe)
{
    /* Four threads log at once with the clock frozen: exactly the burst is
     * written, each line whole, and every other line is counted dropped. */
    enum { THREADS = 4, EACH = 200 };
    rl_test_clock_t clk = {5000000000u, 0};
    rl_t *rl = open_logging(&clk, 0, NULL, NULL);
    captured_t cap;
    capture(rl, &cap);
    pthread_t th[THREADS];
    racer_t r = {rl, EACH};
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, race_logs, &r), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    char *out = drain(&cap);
    ck_assert_int_eq(count_lines(out, "libratelimit: WARN [logger-1] racer line "), RL_LOG_BURST);
    ck_assert_int_eq(count_lines(out, ""), RL_LOG_BURST);
    free(out);
    rl_stats_t st;
    rl_stats_init(&st);
    ck_assert_int_eq(rl_stats(rl, &st), 0);
    ck_assert_uint_eq(st.log_dropped, THREADS * EACH - RL_LOG_BURST);
    rl_close(rl);
    close(cap.fd[0]);
    close(cap.fd[1]);
}
END_TEST

static void count_hook(void *ud, int32_t level, const char *msg)
{
    (void)level;
    (void)msg;
    atomic_fetch_add_explicit((_Atomic int *)ud, 1, memory_order_relaxed);
}

START_TEST(stderr_default_silenced)
{
    rl_test_clock_t clk = {5000000000u, 0};
    /* log_quiet: nothing at all. */
    rl_t *rl = open_logging(&clk, 1, NULL, NULL);
    captured_t cap;
    capture(rl, &cap);
    rl__log(&rl->logger, RL_LOG_ERROR, "must not appear");
    char *out = drain(&cap);
    ck_assert_str_eq(out, "");
    free(out);
    rl_close(rl);
    close(cap.fd[0]);
    close(cap.fd[1]);
    /* A hook gets every line, every level, unlimited; stderr none. */
    _Atomic int calls = 0;
    rl = open_logging(&clk, 0, count_hook, &calls);
    capture(rl, &cap);
    for (int i = 0; i < 3 * RL_LOG_BURST; i++)
        rl__log(&rl->logger, RL_LOG_INFO, "to the hook");
    out = drain(&cap);
    ck_assert_str_eq(out, "");
    free(out);
    ck_assert_int_eq(atomic_load(&calls), 3 * RL_LOG_BURST);
    rl_close(rl);
    close(cap.fd[0]);
    close(cap.fd[1]);
}
END_TEST

START_TEST(stderr_default_reports_a_wrong_redis_address)
{
    /* A wrong address opens (availability), and says so on the real
     * stderr of the process, with no log hook set: an operator who set no
     * hook still learns why the fleet is degraded. */
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        close(fd[1]);
        rl_config_t c;
        rl_config_init(&c);
        c.redis_url = "redis://127.0.0.1:1";
        c.key_secret = secret_a;
        c.key_secret_len = sizeof secret_a - 1;
        c.node_id = "wrong-address";
        rl_t *rl = NULL;
        if (rl_open(&rl, &c) != 0)
            _exit(2);
        rl_stats_t st;
        for (int i = 0; i < 3000; i++) {
            rl_stats_init(&st);
            rl_stats(rl, &st);
            if (st.health == RL_HEALTH_DEGRADED)
                break;
            rl_test_sleep_ms(10);
        }
        rl_close(rl);
        _exit(st.health == RL_HEALTH_DEGRADED ? 0 : 3);
    }
    close(fd[1]);
    char buf[8192];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(fd[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    ck_assert_msg(strstr(buf, "libratelimit: WARN [wrong-address] sync: healthy -> degraded") !=
                      NULL,
                  "stderr was \"%s\"", buf);
}
END_TEST

/* ------------------------------------------------------- split detection */

typedef struct log_capture {
    pthread_mutex_t mu;
    char text[8192];
    size_t n;
} log_capture_t;

static void capture_hook(void *ud, int32_t level, const char *msg)
{
    log_capture_t *lc = ud;
    pthread_mutex_lock(&lc->mu);
    int w = snprintf(lc->text + lc->n, sizeof lc->text - lc->n, "%d %s\n", (int)level, msg);
    if (w > 0 && lc->n + (size_t)w < sizeof lc->text)
        lc->n += (size_t)w;
    pthread_mutex_unlock(&lc->mu);
}

static int captured_has(log_capture_t *lc, const char *s)
{
    pthread_mutex_lock(&lc->mu);
    int has = strstr(lc->text, s) != NULL;
    pthread_mutex_unlock(&lc->mu);
    return has;
}

static rl_t *open_node(const char *node, const char *prefix, const char *secret, int manual,
                       rl_test_clock_t *clk, log_capture_t *lc)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = rl_test_redis_url();
    c.node_id = node;
    c.sync_interval_ms = 100;
    c.key_secret = secret;
    c.key_secret_len = strlen(secret);
    c.key_prefix = prefix;
    if (clk != NULL) {
        c.clock = rl_test_clock_fn;
        c.clock_ud = clk;
        /* A frozen clock would hold the degraded ramp at its start: no
         * ramp, so a degraded check is at the degraded share at once. */
        c.degrade_ramp_ms = 0;
        c.key_ttl_ms = 600000; /* clock moves in the tests stay below it */
    }
    if (lc != NULL) {
        c.log = capture_hook;
        c.log_ud = lc;
    }
    char err[256];
    c.err = err;
    c.errlen = sizeof err;
    rl_t *rl = NULL;
    int rc = rl__open(&rl, &c, manual);
    ck_assert_msg(rc == 0, "rl_open: %s: %s", rl_err_name(rc), err);
    return rl;
}

static rl_stats_t stats_of(rl_t *rl)
{
    rl_stats_t st;
    rl_stats_init(&st);
    ck_assert_int_eq(rl_stats(rl, &st), 0);
    return st;
}

static char *metrics_of(rl_t *rl)
{
    int need = rl_metrics_text(rl, NULL, 0);
    ck_assert_int_gt(need, 0);
    char *buf = malloc((size_t)need + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(rl_metrics_text(rl, buf, (size_t)need + 1), need);
    return buf;
}

/* The value of an unlabelled sample line "name value". */
static long long metric(const char *text, const char *name)
{
    char pat[128];
    snprintf(pat, sizeof pat, "\n%s ", name);
    const char *p = strstr(text, pat);
    ck_assert_msg(p != NULL, "no sample %s", name);
    return atoll(p + strlen(pat));
}

START_TEST(split_fleet_is_seen_logged_and_counted)
{
    log_capture_t la = {PTHREAD_MUTEX_INITIALIZER, "", 0};
    rl_t *a = open_node("split-a", "sp", secret_a, 0, NULL, &la);
    rl_t *b = open_node("split-b", "sp", secret_b, 0, NULL, NULL);
    /* Poll: both see the other's fingerprint (generous deadline). */
    rl_stats_t sa, sb;
    for (int i = 0; i < 3000; i++) {
        sa = stats_of(a);
        sb = stats_of(b);
        if (sa.fleet_split_rounds > 0 && sb.fleet_split_rounds > 0 &&
            captured_has(&la, "fleet split"))
            break;
        rl_test_sleep_ms(10);
    }
    ck_assert_uint_gt(sa.fleet_split_rounds, 0);
    ck_assert_uint_gt(sb.fleet_split_rounds, 0);
    ck_assert_uint_eq(sa.fleet_split_fingerprints, 1);
    ck_assert_uint_eq(sb.fleet_split_fingerprints, 1);
    ck_assert_uint_eq(sa.fleet_nodes, 2);
    /* Logged as an error that names the remedy and this node's fingerprint
     * (never the secret). */
    char mine[17];
    rl__nodes_fp_text(rl__nodes_fp(a->kh.fingerprint, RL_REDIS_KEY_LAYOUT), mine);
    ck_assert(captured_has(&la, "0 fleet split: 1 other key_secret fingerprint"));
    ck_assert(captured_has(&la, mine));
    ck_assert(captured_has(&la, "give every node the same key_secret"));
    ck_assert(!captured_has(&la, secret_a));
    ck_assert(!captured_has(&la, secret_b));
    /* In the metrics too. */
    char *m = metrics_of(a);
    ck_assert_int_gt(metric(m, "ratelimit_fleet_split_total"), 0);
    ck_assert_int_eq(metric(m, "ratelimit_fleet_split_fingerprints"), 1);
    ck_assert_int_eq(metric(m, "ratelimit_fleet_nodes"), 2);
    free(m);
    /* b leaves: once its fingerprint's deadline passes, a is whole again. */
    rl_close(b);
    for (int i = 0; i < 3000; i++) {
        sa = stats_of(a);
        if (sa.fleet_split_fingerprints == 0 && sa.fleet_nodes == 1)
            break;
        rl_test_sleep_ms(10);
    }
    ck_assert_uint_eq(sa.fleet_split_fingerprints, 0);
    ck_assert_uint_eq(sa.fleet_nodes, 1);
    ck_assert(captured_has(&la, "fleet: split over"));
    rl_close(a);
}
END_TEST

START_TEST(one_secret_is_no_split)
{
    rl_t *a = open_node("same-a", "same", secret_a, 0, NULL, NULL);
    rl_t *b = open_node("same-b", "same", secret_a, 0, NULL, NULL);
    rl_stats_t sa, sb;
    for (int i = 0; i < 3000; i++) {
        sa = stats_of(a);
        sb = stats_of(b);
        if (sa.fleet_nodes == 2 && sb.fleet_nodes == 2)
            break;
        rl_test_sleep_ms(10);
    }
    ck_assert_uint_eq(sa.fleet_nodes, 2);
    ck_assert_uint_eq(sb.fleet_nodes, 2);
    ck_assert_uint_eq(sa.fleet_split_rounds + sb.fleet_split_rounds, 0);
    ck_assert_uint_eq(sa.fleet_split_fingerprints + sb.fleet_split_fingerprints, 0);
    rl_close(a);
    rl_close(b);
}
END_TEST

/* A node of the previous key layout (0.2: the vshard from the identity's low
 * bits) names most keys differently under the same secret: a rolling upgrade
 * must show as a split fleet (both groups cap their shares), not as one
 * fleet where each group enforces the whole limit. Such a node publishes
 * its secret's fingerprint unmixed; this writes that record as it would. */
START_TEST(previous_key_layout_is_a_split)
{
    ck_assert_uint_ne(rl__nodes_fp(0x1234, 1), rl__nodes_fp(0x1234, 2));
    ck_assert_uint_eq(rl__nodes_fp(0x1234, 1), 0x1234);
    log_capture_t la = {PTHREAD_MUTEX_INITIALIZER, "", 0};
    rl_t *a = open_node("layout-new", "lay", secret_a, 0, NULL, &la);
    redisContext *rc = redisConnect("127.0.0.1", rl_test_redis()->port);
    ck_assert(rc != NULL && rc->err == 0);
    char old_fp[17];
    rl__nodes_fp_text(rl__nodes_fp(a->kh.fingerprint, 1), old_fp);
    /* Its deadline an hour ahead of Redis's clock: live for the test. */
    redisReply *t = redisCommand(rc, "TIME");
    ck_assert(t != NULL && t->type == REDIS_REPLY_ARRAY && t->elements == 2);
    long long deadline = atoll(t->element[0]->str) * 1000 + 3600 * 1000;
    freeReplyObject(t);
    redisReply *r = redisCommand(rc, "HSET {lay:v1}:nodes:fp %s %lld", old_fp, deadline);
    ck_assert(r != NULL && r->type == REDIS_REPLY_INTEGER);
    freeReplyObject(r);
    rl_stats_t sa;
    WAIT_FOR((sa = stats_of(a)).fleet_split_fingerprints == 1 && captured_has(&la, "fleet split"));
    ck_assert(captured_has(&la, "of a release that names keys differently"));
    /* The old node gone (its entry removed), the split is over. */
    r = redisCommand(rc, "HDEL {lay:v1}:nodes:fp %s", old_fp);
    ck_assert(r != NULL && r->integer == 1);
    freeReplyObject(r);
    WAIT_FOR((sa = stats_of(a)).fleet_split_fingerprints == 0);
    redisFree(rc);
    rl_close(a);
}
END_TEST

/* ------------------------------------------- the last live count's share */

static void step(rl_t *rl)
{
    ck_assert_int_eq(rl__sync_step(rl->sync, 0), 0);
}

/* Until the report and registry scripts are both loaded (bounded). */
static void wait_ready(rl_t *rl)
{
    for (int tries = 0; tries < 3000; tries++) {
        rl_sync_counters_t c;
        rl__sync_counters(rl->sync, &c);
        if (c.connected == 1 && c.nodes_ready == 1)
            return;
        rl_test_sleep_ms(10);
    }
    ck_abort_msg("node did not connect to redis on port %d", rl_test_redis()->port);
}

/* Checks of a fresh key until the first deny (at most `max`). */
static int admitted_at_once(rl_t *rl, int id, const char *key, int max)
{
    int n = 0;
    while (n < max && rl_check(rl, id, key, strlen(key), 1, NULL) == RL_ALLOW)
        n++;
    return n;
}

START_TEST(pessimistic_share_uses_the_last_live_count)
{
    /* Three nodes with expected_nodes 1 (the default): once a node has seen
     * three live nodes in the registry, a new key's pre-sync share and the
     * degraded share are a third, not the whole limit. The clock is frozen:
     * no token refills while the checks count. */
    rl_test_clock_t clk = {5000000000u, 0};
    rl_t *n[3];
    const char *names[3] = {"share-a", "share-b", "share-c"};
    for (int i = 0; i < 3; i++) {
        n[i] = open_node(names[i], "share", secret_a, 1, &clk, NULL);
        wait_ready(n[i]);
    }
    int id = rl_test_add(n[0], "name=s rate=300/h burst=300 on_failure=local");
    /* Before the registry: expected_nodes (1), the whole burst. */
    ck_assert_int_eq(admitted_at_once(n[0], id, "before", 1000), 300);
    /* Rounds until node 0 has seen all three (the first connects and loads
     * the scripts; each later one heartbeats). */
    for (int r = 0; r < 50 && stats_of(n[0]).fleet_nodes != 3; r++)
        for (int i = 0; i < 3; i++)
            step(n[i]);
    ck_assert_uint_eq(stats_of(n[0]).fleet_nodes, 3);
    ck_assert_int_eq(stats_of(n[0]).health, RL_HEALTH_HEALTHY);
    ck_assert_int_eq(admitted_at_once(n[0], id, "after", 1000), 100);
    /* A limit added later gets the same divisor. */
    int id2 = rl_test_add(n[0], "name=t rate=90/h burst=90");
    ck_assert_int_eq(admitted_at_once(n[0], id2, "later", 1000), 30);
    /* Redis gone (the other nodes with it, never having left): degraded,
     * and the degraded share is still a third of the limit. */
    rl_test_redis_stop(rl_test_redis());
    time_t until = time(NULL) + 30;
    while (stats_of(n[0]).health != RL_HEALTH_DEGRADED && time(NULL) < until)
        rl__sync_step(n[0]->sync, 0);
    ck_assert_int_eq(stats_of(n[0]).health, RL_HEALTH_DEGRADED);
    ck_assert_uint_eq(stats_of(n[0]).fleet_nodes, 3); /* the last one seen */
    ck_assert_int_eq(admitted_at_once(n[0], id, "degraded", 1000), 100);
    rl_close(n[1]);
    rl_close(n[2]);
    rl_close(n[0]);
}
END_TEST

START_TEST(split_fleet_takes_an_even_split_at_most)
{
    /* Nodes a and b have different secrets: each is alone in its keyspace,
     * so Redis would lease each the whole limit. Once they see the split,
     * a takes at most rate / 2 of a key it alone uses, and so would b: the
     * two stay within the limit together. Frozen clock, manual rounds; the
     * clock is moved only to refill the bucket (less than key_ttl_ms, so
     * the key keeps its slot and its share). */
    rl_test_clock_t clk = {5000000000u, 0};
    rl_t *a = open_node("even-a", "even", secret_a, 1, &clk, NULL);
    rl_t *b = open_node("even-b", "even", secret_b, 1, &clk, NULL);
    wait_ready(a);
    wait_ready(b);
    for (int r = 0; r < 50 && stats_of(a).fleet_split_fingerprints != 1; r++) {
        step(a);
        step(b);
    }
    ck_assert_uint_eq(stats_of(a).fleet_split_fingerprints, 1);
    ck_assert_uint_eq(stats_of(a).fleet_nodes, 2);
    int id = rl_test_add(a, "name=e rate=300/m burst=300");
    /* Pre-sync: rate / 2 live nodes. */
    ck_assert_int_eq(admitted_at_once(a, id, "k", 1000), 150);
    /* Rounds: Redis answers a's demand with its whole keyspace's limit. */
    for (int r = 0; r < 3; r++)
        step(a);
    rl_test_clock_advance(&clk, 70ull * 1000000000u); /* a full refill: 60 s */
    int after = admitted_at_once(a, id, "k", 1000);
    ck_assert_int_gt(after, 0);
    ck_assert_int_le(after, 150);
    rl_close(a);
    rl_close(b);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fleet");
    TCase *open = tcase_create("open");
    tcase_add_loop_test(open, open_errors_name_the_field, 0,
                        (int)(sizeof open_cases / sizeof open_cases[0]));
    tcase_add_test(open, open_message_buffer_contract);
    tcase_add_test(open, open_accepts_the_old_config_layout);
    tcase_add_test(open, limit_parse_sized_writes_the_callers_size);
    suite_add_tcase(s, open);
    TCase *log = tcase_create("log");
    tcase_set_timeout(log, 60);
    tcase_add_test(log, stderr_default_is_rate_limited);
    tcase_add_test(log, stderr_default_is_thread_safe);
    tcase_add_test(log, stderr_default_silenced);
    tcase_add_test(log, stderr_default_reports_a_wrong_redis_address);
    suite_add_tcase(s, log);
    TCase *tc = tcase_create("redis");
    rl_test_redis_fixture(tc);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, split_fleet_is_seen_logged_and_counted);
    tcase_add_test(tc, one_secret_is_no_split);
    tcase_add_test(tc, previous_key_layout_is_a_split);
    suite_add_tcase(s, tc);
    /* Its own server: the case stops it. */
    TCase *share = tcase_create("share");
    rl_test_redis_fixture(share);
    tcase_set_timeout(share, 90);
    tcase_add_test(share, split_fleet_takes_an_even_split_at_most);
    tcase_add_test(share, pessimistic_share_uses_the_last_live_count);
    suite_add_tcase(s, share);
    return s;
}

int main(void) { return rl_test_run(suite()); }

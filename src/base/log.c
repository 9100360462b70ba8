/* SPDX-License-Identifier: MIT */
/* The instance's log (see base/log.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "base/log.h"

void rl__log_init(rl_logger_t *lg, rl_log_fn fn, void *ud, int quiet, rl_log_now_fn now_ns,
                  void *now_ctx)
{
    lg->fn = fn;
    lg->ud = ud;
    lg->quiet = quiet;
    lg->node_id = NULL;
    lg->now_ns = now_ns;
    lg->now_ctx = now_ctx;
    lg->fd = 2;
    atomic_init(&lg->tat, 0);
    atomic_init(&lg->dropped, 0);
    atomic_init(&lg->unreported, 0);
}

/* GCRA: 0 if a line may be written now (and it is charged), else the ns
 * until one may. */
static uint64_t admit(rl_logger_t *lg)
{
    const uint64_t t = (uint64_t)RL_LOG_EVERY_MS * 1000000u;
    const uint64_t tau = (uint64_t)RL_LOG_BURST * t;
    uint64_t now = lg->now_ns(lg->now_ctx);
    /* relaxed: the word is the whole state; nothing else is published. */
    uint64_t tat = atomic_load_explicit(&lg->tat, memory_order_relaxed);
    for (;;) {
        uint64_t next = (tat > now ? tat : now) + t;
        if (next - now > tau)
            return next - now - tau;
        /* relaxed: as above. */
        if (atomic_compare_exchange_weak_explicit(&lg->tat, &tat, next, memory_order_relaxed,
                                                  memory_order_relaxed))
            return 0;
    }
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* stderr closed or full: a log line is not worth more */
        p += w;
        n -= (size_t)w;
    }
}

/* A line, or with keep the ns until the rate limit would admit it (it is
 * then neither written nor counted as dropped). */
static uint64_t logv(rl_logger_t *lg, int level, int keep, const char *fmt, va_list ap)
{
    char msg[RL_LOG_LINE_MAX];
    if (lg->fn != NULL) {
        vsnprintf(msg, sizeof msg, fmt, ap);
        lg->fn(lg->ud, level, msg);
        return 0;
    }
    if (lg->quiet || level > RL_LOG_WARN)
        return 0;
    uint64_t wait = admit(lg);
    if (wait != 0 && keep)
        return wait;
    if (wait != 0) {
        /* relaxed: counters. */
        atomic_fetch_add_explicit(&lg->dropped, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&lg->unreported, 1, memory_order_relaxed);
        return 0;
    }
    /* relaxed: a counter; a drop racing this line is reported by the next. */
    uint64_t gap = atomic_exchange_explicit(&lg->unreported, 0, memory_order_relaxed);
    char line[RL_LOG_LINE_MAX + 96];
    int n = snprintf(line, sizeof line, "libratelimit: %s [%s] ",
                     level == RL_LOG_ERROR ? "ERROR" : "WARN",
                     lg->node_id != NULL ? lg->node_id : "-");
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* The message may quote a Redis reply: no control byte reaches the
     * terminal or splits the line. */
    for (char *c = msg; *c != '\0'; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    n += snprintf(line + n, sizeof line - (size_t)n, "%s", msg);
    if (gap != 0 && (size_t)n < sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n,
                      " (%llu earlier line%s dropped by the log rate limit)",
                      (unsigned long long)gap, gap == 1 ? "" : "s");
    if ((size_t)n >= sizeof line - 1)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    write_all(lg->fd, line, (size_t)n);
    return 0;
}

void rl__logv(rl_logger_t *lg, int level, const char *fmt, va_list ap)
{
    logv(lg, level, 0, fmt, ap);
}

void rl__log(rl_logger_t *lg, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rl__logv(lg, level, fmt, ap);
    va_end(ap);
}

uint64_t rl__log_keep(rl_logger_t *lg, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    uint64_t wait_ns = logv(lg, level, 1, fmt, ap);
    va_end(ap);
    return wait_ns == 0 ? 0 : (wait_ns + 999999u) / 1000000u;
}

uint64_t rl__log_dropped(rl_logger_t *lg)
{
    /* relaxed: a statistic. */
    return atomic_load_explicit(&lg->dropped, memory_order_relaxed);
}

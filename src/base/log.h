/* SPDX-License-Identifier: MIT */
/*
 * The instance's log: the caller's hook when there is one (every level,
 * never filtered), else stderr for warnings and errors, rate-limited per
 * instance (a host whose Redis is gone must not have its stderr flooded),
 * unless rl_config_t.log_quiet. Any thread may log: the stderr path takes
 * no lock (one CAS on the rate limiter, one write(2) per line).
 */
#ifndef RL_LOG_H
#define RL_LOG_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include "ratelimit.h"

/* stderr: a burst of RL_LOG_BURST lines, then one per RL_LOG_EVERY_MS. */
#define RL_LOG_BURST 10
#define RL_LOG_EVERY_MS 6000
/* Longest line written, prefix and newline included (longer ones are cut). */
#define RL_LOG_LINE_MAX 640

/* The rate limiter's time: monotonic nanoseconds from the instance's clock,
 * so a test that freezes the clock freezes the limiter too. */
typedef uint64_t (*rl_log_now_fn)(void *ctx);

typedef struct rl_logger {
    rl_log_fn fn; /* NULL: stderr (unless quiet) */
    void *ud;
    int quiet;
    const char *node_id;     /* the instance's copy; NULL before it exists */
    rl_log_now_fn now_ns;    /* the rate limiter's time */
    void *now_ctx;
    int fd;                  /* 2; tests point it at a pipe */
    _Atomic uint64_t tat;    /* GCRA state of the rate limiter, ns */
    _Atomic uint64_t dropped;      /* lines dropped since rl_open (stats) */
    _Atomic uint64_t unreported;   /* dropped since the last line written */
} rl_logger_t;

void rl__log_init(rl_logger_t *lg, rl_log_fn fn, void *ud, int quiet, rl_log_now_fn now_ns,
                  void *now_ctx);
void rl__logv(rl_logger_t *lg, int level, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
void rl__log(rl_logger_t *lg, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A line that must not be lost (a state's last change, say): as rl__log,
 * but when the stderr rate limit has no room the line is neither written
 * nor dropped: the ms until it would have room (at least 1) is returned,
 * for the caller to try again then with what is true by that time. 0:
 * written, handed to the hook, or filtered out by level or log_quiet. */
uint64_t rl__log_keep(rl_logger_t *lg, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
uint64_t rl__log_dropped(rl_logger_t *lg);

#endif

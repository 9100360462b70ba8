/* SPDX-License-Identifier: MIT */
/*
 * The gateway's own counters, served at GET /metrics after the library's
 * (rl_metrics_text). Everything runs on the event loop's one thread, so
 * they are plain integers: no other thread reads or writes them.
 */
#ifndef GATEWAY_METRICS_H
#define GATEWAY_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include <ratelimit.h>

#include "http_parser.h"

/* Every status the gateway answers with; others are counted as "other". */
#define GW_STATUSES(XX) \
    XX(100) XX(200) XX(400) XX(405) XX(408) XX(411) XX(413) XX(414) XX(417) XX(429) XX(431) \
    XX(500) XX(501) XX(503) XX(505)

typedef struct gw_metrics {
    uint64_t responses[16];            /* by status, GW_STATUSES order, then other */
    uint64_t parse_errors[HTTP_ERR_COUNT];
    uint64_t connections_open;         /* gauge */
    uint64_t connections_total;
    uint64_t connections_rejected;     /* over --max-connections */
    uint64_t timeouts;                 /* idle or request deadline reached */
    uint64_t reloads_ok;
    uint64_t reloads_failed;
    uint64_t limit_rules;              /* gauge: rules in force */
    uint64_t check_errors;             /* rl_check_multi errors (answered 500) */
} gw_metrics_t;

void metrics_count_response(gw_metrics_t *m, int status);

/*
 * The whole scrape: the gateway's families (gateway_*), then the
 * library's. Returns a malloc'd NUL-terminated text and its length in
 * *len, or NULL (out of memory, or an rl_metrics_text error in *rc).
 */
char *metrics_render(const gw_metrics_t *m, rl_t *rl, size_t *len, int *rc);

#endif

/* SPDX-License-Identifier: MIT */
/* Prometheus text for the gateway's counters, followed by the library's. */
#include "metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int statuses[] = {
#define GW_STATUS_(code) code,
    GW_STATUSES(GW_STATUS_)
#undef GW_STATUS_
};
#define NSTATUSES (sizeof statuses / sizeof statuses[0])

_Static_assert(NSTATUSES + 1 <= sizeof((gw_metrics_t *)0)->responses /
                                     sizeof((gw_metrics_t *)0)->responses[0],
               "room for every status and \"other\"");

void metrics_count_response(gw_metrics_t *m, int status)
{
    size_t i = 0;
    while (i < NSTATUSES && statuses[i] != status)
        i++;
    m->responses[i]++; /* i == NSTATUSES: "other" */
}

/* An append-only text buffer that remembers whether it ran out. */
typedef struct text {
    char *buf;
    size_t cap, len;
    int overflow;
} text_t;

__attribute__((format(printf, 2, 3))) static void put(text_t *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = t->len < t->cap ? t->cap - t->len : 0;
    int n = vsnprintf(t->buf + t->len, room, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= room)
        t->overflow = 1;
    else
        t->len += (size_t)n;
}

static void family(text_t *t, const char *name, const char *type, const char *help)
{
    put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void gateway_text(const gw_metrics_t *m, text_t *t)
{
    family(t, "gateway_responses_total", "counter", "Responses sent, by status code.");
    for (size_t i = 0; i < NSTATUSES; i++)
        put(t, "gateway_responses_total{status=\"%d\"} %llu\n", statuses[i],
            (unsigned long long)m->responses[i]);
    put(t, "gateway_responses_total{status=\"other\"} %llu\n",
        (unsigned long long)m->responses[NSTATUSES]);
    family(t, "gateway_parse_errors_total", "counter",
           "Requests refused by the HTTP parser, by reason.");
    for (int e = 1; e < HTTP_ERR_COUNT; e++)
        put(t, "gateway_parse_errors_total{reason=\"%s\"} %llu\n", http_error_name((http_error_t)e),
            (unsigned long long)m->parse_errors[e]);
    family(t, "gateway_connections_open", "gauge", "Client connections open now.");
    put(t, "gateway_connections_open %llu\n", (unsigned long long)m->connections_open);
    family(t, "gateway_connections_total", "counter", "Client connections accepted.");
    put(t, "gateway_connections_total %llu\n", (unsigned long long)m->connections_total);
    family(t, "gateway_connections_rejected_total", "counter",
           "Connections refused because --max-connections were open.");
    put(t, "gateway_connections_rejected_total %llu\n",
        (unsigned long long)m->connections_rejected);
    family(t, "gateway_timeouts_total", "counter",
           "Connections closed by the idle or the request timeout.");
    put(t, "gateway_timeouts_total %llu\n", (unsigned long long)m->timeouts);
    family(t, "gateway_reloads_total", "counter", "Limits file reloads (SIGHUP), by result.");
    put(t, "gateway_reloads_total{result=\"ok\"} %llu\n", (unsigned long long)m->reloads_ok);
    put(t, "gateway_reloads_total{result=\"failed\"} %llu\n", (unsigned long long)m->reloads_failed);
    family(t, "gateway_limit_rules", "gauge", "Rules of the limits file in force.");
    put(t, "gateway_limit_rules %llu\n", (unsigned long long)m->limit_rules);
    family(t, "gateway_check_errors_total", "counter",
           "Rate-limit checks that failed with an error (answered 500).");
    put(t, "gateway_check_errors_total %llu\n", (unsigned long long)m->check_errors);
}

char *metrics_render(const gw_metrics_t *m, rl_t *rl, size_t *len, int *rc)
{
    *rc = 0;
    /* The library's part can grow between two calls (a counter gains a
     * digit): size it, leave headroom, and retry if that was not enough. */
    for (size_t headroom = 4096; headroom <= 65536; headroom *= 4) {
        int need = rl_metrics_text(rl, NULL, 0);
        if (need < 0) {
            *rc = need;
            return NULL;
        }
        text_t t = {NULL, 16384 + (size_t)need + headroom, 0, 0};
        t.buf = malloc(t.cap);
        if (t.buf == NULL)
            return NULL;
        gateway_text(m, &t);
        if (!t.overflow) {
            int n = rl_metrics_text(rl, t.buf + t.len, t.cap - t.len);
            if (n < 0) {
                *rc = n;
                free(t.buf);
                return NULL;
            }
            if ((size_t)n < t.cap - t.len) {
                *len = t.len + (size_t)n;
                return t.buf;
            }
        }
        free(t.buf);
    }
    return NULL;
}

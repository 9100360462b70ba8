/* SPDX-License-Identifier: MIT */
/* Routing and the rate-limit decision for one request. */
#include "handler.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

#define JSON "application/json"

static void reply_init(reply_t *r, int status)
{
    memset(&r->resp, 0, sizeof r->resp);
    r->resp.status = status;
    r->resp.version_minor = 1;
    r->headers[0] = '\0';
    r->owned = NULL;
}

__attribute__((format(printf, 2, 3))) static void json_body(reply_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(r->body, sizeof r->body, fmt, ap);
    va_end(ap);
    r->resp.content_type = JSON;
    r->resp.body = r->body;
    r->resp.body_len = n < 0 ? 0 : ((size_t)n < sizeof r->body ? (size_t)n : sizeof r->body - 1);
}

/* The parser lets only visible ASCII into a target: in a JSON string only
 * '"' and '\\' need escaping. out has room for 2 x len + 1. */
static void json_string(char *out, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '"' || s[i] == '\\')
            *out++ = '\\';
        *out++ = s[i];
    }
    *out = '\0';
}

void reply_free(reply_t *r)
{
    free(r->owned);
    r->owned = NULL;
}

/*
 * Check every rule that matches the path, all or nothing. *shown is the
 * decision the response's RateLimit headers describe: the denying limit's,
 * or on an allow the one with the fewest tokens left (the next to bite).
 * Returns RL_ALLOW, RL_DENY or an RL_E* error; *nrules 0: nothing applies.
 */
/* The rules matching a request, split: rate limits (checked together) and
 * quotas (charged once the limits allowed it), with their keys. */
typedef struct matched {
    const limit_rule_t *quotas[RL_MULTI_MAX];
    const char *quota_keys[RL_MULTI_MAX];
    size_t nquotas;
    rl_request_t reqs[RL_MULTI_MAX]; /* the limits' charges, to refund */
    size_t nreqs;
    /* Keys carry their kind, so an API key spelled like an address can
     * never share a bucket with that address. */
    char client_key[8 + HTTP_API_KEY_CAP], ip_key[8 + 64];
} matched_t;

static const char *rule_key(const matched_t *m, const limit_rule_t *r)
{
    if (r->scope == SCOPE_CLIENT)
        return m->client_key;
    if (r->scope == SCOPE_IP)
        return m->ip_key;
    return "shared"; /* one bucket: the limit is this rule's alone */
}

static int check_limits(gateway_t *g, const char *path, size_t path_len,
                        const http_request_t *req, const char *client_ip, rl_decision_t *shown,
                        size_t *nrules, matched_t *m)
{
    const limit_rule_t *all[RL_MULTI_MAX], *rules[RL_MULTI_MAX];
    size_t nall = limits_match(g->limits, path, path_len, all);
    *nrules = nall;
    snprintf(m->ip_key, sizeof m->ip_key, "ip:%s", client_ip);
    if (req->api_key_len > 0)
        snprintf(m->client_key, sizeof m->client_key, "key:%s", req->api_key);
    else
        snprintf(m->client_key, sizeof m->client_key, "%s", m->ip_key);
    size_t n = 0;
    m->nquotas = 0;
    for (size_t i = 0; i < nall; i++) {
        if (all[i]->is_quota) {
            m->quota_keys[m->nquotas] = rule_key(m, all[i]);
            m->quotas[m->nquotas++] = all[i];
        } else {
            rules[n++] = all[i];
        }
    }
    m->nreqs = n;
    if (n == 0)
        return RL_ALLOW;
    rl_request_t *reqs = m->reqs;
    rl_decision_t out[RL_MULTI_MAX];
    for (size_t i = 0; i < n; i++) {
        const char *key = rule_key(m, rules[i]);
        rl_request_init(&reqs[i]);
        reqs[i].limit = rules[i]->id;
        reqs[i].key = key;
        reqs[i].key_len = strlen(key);
        reqs[i].cost = 1;
        rl_decision_init(&out[i]);
    }
    size_t denied = n;
    int rc = rl_check_multi(g->rl, reqs, n, sizeof reqs[0], out, &denied);
    if (rc == RL_DENY) {
        *shown = out[denied];
    } else if (rc == RL_ALLOW) {
        size_t least = 0;
        for (size_t i = 1; i < n; i++)
            if (out[i].remaining < out[least].remaining)
                least = i;
        *shown = out[least];
    }
    return rc;
}

/*
 * The quotas of an allowed request, after its rate limits (so a request
 * the per-second limit turns away never uses the month's quota). A quota
 * that denies gets a 429 with Retry-After up to the quota's reset, and the
 * rate limits' charges are refunded: the request was not served. Each
 * request gets its own id here; a gateway that takes an idempotency key
 * from its clients passes that instead, so a client's retry is charged
 * once. Returns true when the reply is made (a deny or an error).
 */
static bool charge_quotas(gateway_t *g, const matched_t *m, reply_t *out)
{
    char rid[96];
    int rid_len = snprintf(rid, sizeof rid, "%s:%llu", g->node_id ? g->node_id : "gw",
                           (unsigned long long)++g->request_seq);
    for (size_t i = 0; i < m->nquotas; i++) {
        rl_quota_result_t q;
        rl_quota_result_init(&q);
        const char *key = m->quota_keys[i];
        int rc = rl_quota_charge(g->rl, m->quotas[i]->id, key, strlen(key), 1, rid,
                                 (size_t)rid_len, &q);
        if (rc == RL_ALLOW)
            continue;
        for (size_t k = 0; k < m->nreqs; k++)
            rl_refund(g->rl, m->reqs[k].limit, m->reqs[k].key, m->reqs[k].key_len, 1);
        if (rc < 0) {
            g->metrics.check_errors++;
            gw_log("quota charge failed: %s (%s)", rl_strerror(rc), rl_err_name(rc));
            out->resp.status = 500;
            out->resp.headers = NULL;
            json_body(out, "{\"error\":\"quota check failed\"}\n");
            return true;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t now = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
        uint64_t wait_s = q.reset_unix_ms > now ? (q.reset_unix_ms - now + 999) / 1000 : 1;
        out->resp.status = 429;
        snprintf(out->headers, sizeof out->headers, "Retry-After: %llu\r\n",
                 (unsigned long long)(wait_s ? wait_s : 1));
        out->resp.headers = out->headers;
        json_body(out, "{\"error\":\"quota exhausted\",\"quota\":\"%s\",\"used\":%llu,"
                       "\"amount\":%llu,\"reset_unix_ms\":%llu}\n",
                  m->quotas[i]->quota.name, (unsigned long long)q.used,
                  (unsigned long long)q.amount, (unsigned long long)q.reset_unix_ms);
        return true;
    }
    return false;
}

static void metrics_reply(gateway_t *g, reply_t *out)
{
    size_t len = 0;
    int rc = 0;
    char *text = metrics_render(&g->metrics, g->rl, &len, &rc);
    if (text == NULL) {
        gw_log("metrics: %s", rc < 0 ? rl_strerror(rc) : "out of memory");
        out->resp.status = 500;
        json_body(out, "{\"error\":\"metrics unavailable\"}\n");
        return;
    }
    out->owned = text;
    out->resp.content_type = "text/plain; version=0.0.4; charset=utf-8";
    out->resp.body = text;
    out->resp.body_len = len;
}

void handler_request(gateway_t *g, const http_request_t *req, const char *client_ip, reply_t *out)
{
    reply_init(out, 200);
    out->resp.version_minor = req->version_minor;
    bool head = strcmp(req->method, "HEAD") == 0;
    out->resp.head_only = head;
    size_t path_len = strcspn(req->target, "?");
    bool metrics = path_len == 8 && memcmp(req->target, "/metrics", 8) == 0;
    if (metrics && !head && strcmp(req->method, "GET") != 0) {
        out->resp.status = 405;
        snprintf(out->headers, sizeof out->headers, "Allow: GET, HEAD\r\n");
        out->resp.headers = out->headers;
        json_body(out, "{\"error\":\"method not allowed\"}\n");
        return;
    }
    rl_decision_t d;
    size_t nrules = 0;
    matched_t m;
    int rc = check_limits(g, req->target, path_len, req, client_ip, &d, &nrules, &m);
    if (rc < 0) {
        g->metrics.check_errors++;
        gw_log("rate-limit check failed: %s (%s)", rl_strerror(rc), rl_err_name(rc));
        out->resp.status = 500;
        json_body(out, "{\"error\":\"rate limit check failed\"}\n");
        return;
    }
    if (m.nreqs > 0 && rl_headers(&d, out->headers, sizeof out->headers) >= 0)
        out->resp.headers = out->headers;
    if (rc == RL_ALLOW && m.nquotas > 0 && charge_quotas(g, &m, out))
        return;
    if (rc == RL_DENY) {
        out->resp.status = 429;
        json_body(out, "{\"error\":\"rate limited\",\"limit\":\"%s\",\"retry_after_ms\":%llu}\n",
                  d.policy != NULL ? d.policy : "", (unsigned long long)d.retry_after_ms);
        return;
    }
    if (metrics) {
        metrics_reply(g, out);
        return;
    }
    char path[2 * HTTP_TARGET_CAP + 1];
    json_string(path, req->target, path_len);
    json_body(out, "{\"status\":\"ok\",\"path\":\"%s\",\"client\":\"%s\",\"limits\":%zu}\n", path,
              req->api_key_len > 0 ? "key" : "ip", nrules);
}

void handler_parse_error(gateway_t *g, http_error_t e, reply_t *out)
{
    if ((unsigned)e < HTTP_ERR_COUNT)
        g->metrics.parse_errors[e]++;
    reply_init(out, http_error_status(e));
    out->resp.close = true;
    json_body(out, "{\"error\":\"%s\"}\n", http_error_message(e));
}

void handler_timeout(reply_t *out)
{
    reply_init(out, 408);
    out->resp.close = true;
    json_body(out, "{\"error\":\"request not received in time\"}\n");
}

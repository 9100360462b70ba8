/* SPDX-License-Identifier: MIT */
/* Routing and the rate-limit decision for one request. */
#include "handler.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
static int check_limits(gateway_t *g, const char *path, size_t path_len,
                        const http_request_t *req, const char *client_ip, rl_decision_t *shown,
                        size_t *nrules)
{
    const limit_rule_t *rules[RL_MULTI_MAX];
    size_t n = limits_match(g->limits, path, path_len, rules);
    *nrules = n;
    if (n == 0)
        return RL_ALLOW;
    /* Keys carry their kind, so an API key spelled like an address can
     * never share a bucket with that address. */
    char client_key[8 + HTTP_API_KEY_CAP], ip_key[8 + 64];
    snprintf(ip_key, sizeof ip_key, "ip:%s", client_ip);
    if (req->api_key_len > 0)
        snprintf(client_key, sizeof client_key, "key:%s", req->api_key);
    else
        snprintf(client_key, sizeof client_key, "%s", ip_key);
    rl_request_t reqs[RL_MULTI_MAX];
    rl_decision_t out[RL_MULTI_MAX];
    for (size_t i = 0; i < n; i++) {
        const char *key = "shared"; /* one bucket: the limit is this rule's alone */
        if (rules[i]->scope == SCOPE_CLIENT)
            key = client_key;
        else if (rules[i]->scope == SCOPE_IP)
            key = ip_key;
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
    int rc = check_limits(g, req->target, path_len, req, client_ip, &d, &nrules);
    if (rc < 0) {
        g->metrics.check_errors++;
        gw_log("rate-limit check failed: %s (%s)", rl_strerror(rc), rl_err_name(rc));
        out->resp.status = 500;
        json_body(out, "{\"error\":\"rate limit check failed\"}\n");
        return;
    }
    if (nrules > 0 && rl_headers(&d, out->headers, sizeof out->headers) >= 0)
        out->resp.headers = out->headers;
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

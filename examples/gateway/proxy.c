/* SPDX-License-Identifier: MIT */
/* In-flight permits, token reservations, forwarding, settling. */
#include "proxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "upstream.h"

/* How long a reservation may stay unsettled beyond the upstream's deadline
 * before the library settles it at its estimate. */
#define TTL_MARGIN_MS 5000u

typedef struct proxy {
    gateway_t *g;
    void *conn;
    uint64_t t0_ns; /* uv_hrtime at the acquire: the permits' latency */
    bool head, by_key, pending;
    int version_minor;
    size_t nrules;
    rl_decision_t shown;
    bool have_shown;
    size_t npermits, nres;
    rl_permit_t permits[RL_MULTI_MAX];
    rl_reservation_t res[RL_MULTI_MAX];
    uint64_t estimate;
    char path[2 * HTTP_TARGET_CAP + 1];
} proxy_t;

static void refund(gateway_t *g, const proxy_local_t *local)
{
    for (size_t i = 0; i < local->n; i++)
        rl_refund(g->rl, local->reqs[i].limit, local->reqs[i].key, local->reqs[i].key_len, 1);
}

static void release_permits(proxy_t *p, int32_t outcome, uint64_t latency_ns)
{
    for (size_t i = 0; i < p->npermits; i++) {
        int rc = rl_inflight_release(p->g->rl, &p->permits[i], outcome, latency_ns);
        if (rc < 0)
            gw_log("in-flight release: %s (%s)", rl_strerror(rc), rl_err_name(rc));
    }
    p->npermits = 0;
}

static void show(reply_t *out, const rl_decision_t *d)
{
    if (rl_headers(d, out->headers, sizeof out->headers) >= 0)
        out->resp.headers = out->headers;
}

/* The permits of the request's in-flight rules, in order; a full one
 * answers 503 with its Retry-After, and the permits taken before it go back
 * unsampled. true when all were taken. */
static bool acquire_all(proxy_t *p, const proxy_rules_t *rules, reply_t *out)
{
    for (size_t i = 0; i < rules->ninflight; i++) {
        const char *key = rules->inflight_key[i];
        rl_decision_t d;
        rl_decision_init(&d);
        int rc = rl_inflight_acquire(p->g->rl, rules->inflight[i]->id, key, strlen(key),
                                     RL_INFLIGHT_NO_CLASS, &p->permits[p->npermits], &d);
        if (rc == RL_ALLOW) {
            p->npermits++;
            continue;
        }
        release_permits(p, RL_INFLIGHT_IGNORED, 0);
        if (rc < 0) {
            p->g->metrics.check_errors++;
            gw_log("in-flight acquire failed: %s (%s)", rl_strerror(rc), rl_err_name(rc));
            out->resp.status = 500;
            json_body(out, "{\"error\":\"in-flight check failed\"}\n");
            return false;
        }
        out->resp.status = 503;
        show(out, &d);
        json_body(out, "{\"error\":\"too many requests in flight\",\"limit\":\"%s\","
                       "\"inflight\":%llu,\"max\":%llu,\"retry_after_ms\":%llu}\n",
                  d.policy != NULL ? d.policy : "", (unsigned long long)d.inflight,
                  (unsigned long long)d.limit, (unsigned long long)d.retry_after_ms);
        return false;
    }
    return true;
}

/* The token rules' reservations, all or nothing, on the estimate. */
static bool reserve_all(proxy_t *p, const proxy_rules_t *rules, uint32_t ttl_ms, reply_t *out)
{
    size_t n = rules->ntokens;
    if (n == 0)
        return true;
    rl_request_t reqs[RL_MULTI_MAX];
    rl_decision_t d[RL_MULTI_MAX];
    for (size_t i = 0; i < n; i++) {
        rl_request_init(&reqs[i]);
        reqs[i].limit = rules->tokens[i]->id;
        reqs[i].key = rules->tokens_key[i];
        reqs[i].key_len = strlen(rules->tokens_key[i]);
        reqs[i].cost = (uint32_t)p->estimate;
        rl_reservation_init(&p->res[i]);
        rl_decision_init(&d[i]);
    }
    size_t denied = n;
    int rc = rl_reserve_multi(p->g->rl, reqs, n, sizeof reqs[0], ttl_ms, p->res, d, &denied);
    if (rc == RL_ALLOW) {
        p->nres = n;
        size_t least = 0;
        for (size_t i = 1; i < n; i++)
            if (d[i].remaining < d[least].remaining)
                least = i;
        p->shown = d[least]; /* on a token route the tokens bite first */
        p->have_shown = true;
        return true;
    }
    if (rc == RL_DENY) {
        out->resp.status = 429;
        show(out, &d[denied]);
        json_body(out, "{\"error\":\"rate limited\",\"limit\":\"%s\",\"estimate\":%llu,"
                       "\"retry_after_ms\":%llu}\n",
                  d[denied].policy != NULL ? d[denied].policy : "",
                  (unsigned long long)p->estimate, (unsigned long long)d[denied].retry_after_ms);
        return false;
    }
    if (rc == RL_ECOST) {
        out->resp.status = 400;
        json_body(out, "{\"error\":\"X-Max-Tokens above the limit's burst\",\"limit\":\"%s\"}\n",
                  denied < n ? rules->tokens[denied]->limit.name : "");
        return false;
    }
    p->g->metrics.check_errors++;
    gw_log("token reservation failed: %s (%s)", rl_strerror(rc), rl_err_name(rc));
    out->resp.status = 500;
    json_body(out, "{\"error\":\"token reservation failed\"}\n");
    return false;
}

/* The upstream answered (or failed: status 0): settle, release, reply. */
static void complete(proxy_t *p, const upstream_result_t *res, reply_t *out)
{
    gateway_t *g = p->g;
    uint64_t latency = uv_hrtime() - p->t0_ns;
    bool failed = res->status == 0 || res->status >= 500;
    uint64_t actual = res->has_usage ? res->usage : p->estimate;
    if (actual > RL_COST_SETTLE_MAX)
        actual = RL_COST_SETTLE_MAX;
    for (size_t i = 0; i < p->nres; i++) {
        int rc = failed ? rl_release(g->rl, &p->res[i]) : rl_settle(g->rl, &p->res[i], (uint32_t)actual);
        if (rc < 0)
            gw_log("%s: %s (%s)", failed ? "release" : "settle", rl_strerror(rc), rl_err_name(rc));
    }
    release_permits(p, failed ? RL_INFLIGHT_DROPPED
                              : res->status >= 400 ? RL_INFLIGHT_IGNORED : RL_INFLIGHT_SUCCESS,
                    latency);
    reply_init(out, res->status != 0 ? res->status : 502);
    out->resp.version_minor = p->version_minor;
    out->resp.head_only = p->head;
    if (p->have_shown && p->nrules > 0)
        show(out, &p->shown);
    if (res->has_usage)
        add_header(out, "X-Usage-Tokens: %llu\r\n", (unsigned long long)res->usage);
    if (res->status == 0) {
        json_body(out, "{\"error\":\"upstream failed\"}\n");
        return;
    }
    if (res->body == NULL) { /* answered by the gateway itself */
        json_body(out, "{\"status\":\"ok\",\"path\":\"%s\",\"client\":\"%s\",\"limits\":%zu}\n",
                  p->path, p->by_key ? "key" : "ip", p->nrules);
        return;
    }
    out->owned = malloc(res->body_len + 1);
    if (out->owned == NULL) {
        json_body(out, "{\"error\":\"out of memory\"}\n");
        out->resp.status = 502;
        return;
    }
    memcpy(out->owned, res->body, res->body_len);
    out->resp.body = out->owned;
    out->resp.body_len = res->body_len;
    out->resp.content_type = res->content_type[0] != '\0' ? res->content_type : "application/json";
}

/* upstream_done_fn: on the loop. */
static void on_upstream(void *ud, const upstream_result_t *res)
{
    proxy_t *p = ud;
    gateway_t *g = p->g;
    reply_t r;
    complete(p, res, &r);
    g->pending--;
    g->done(p->conn, &r);
    free(p);
    if (g->wake_closed && g->pending == 0 && !uv_is_closing((uv_handle_t *)&g->wake))
        uv_close((uv_handle_t *)&g->wake, NULL);
}

int proxy_start(gateway_t *g, const http_request_t *req, const proxy_rules_t *rules,
                const proxy_local_t *local, const char *path_json, reply_t *out, void *conn)
{
    if (rules->ntokens > 0 && req->max_tokens == 0) {
        refund(g, local);
        out->resp.status = 400;
        json_body(out, "{\"error\":\"X-Max-Tokens required: this route is limited in tokens\"}\n");
        return 0;
    }
    proxy_t *p = calloc(1, sizeof *p);
    if (p == NULL) {
        refund(g, local);
        out->resp.status = 503;
        json_body(out, "{\"error\":\"out of memory\"}\n");
        return 0;
    }
    p->g = g;
    p->conn = conn;
    p->head = strcmp(req->method, "HEAD") == 0;
    p->by_key = req->api_key_len > 0;
    p->version_minor = req->version_minor;
    p->nrules = local->nrules;
    p->estimate = req->max_tokens;
    p->have_shown = local->shown != NULL;
    if (local->shown != NULL)
        p->shown = *local->shown;
    snprintf(p->path, sizeof p->path, "%s", path_json);
    uint64_t timeout = g->upstream != NULL ? g->upstream->timeout_ms : 0;
    uint32_t ttl = (uint32_t)(timeout + TTL_MARGIN_MS);
    p->t0_ns = uv_hrtime();
    if (!acquire_all(p, rules, out) || !reserve_all(p, rules, ttl, out)) {
        release_permits(p, RL_INFLIGHT_IGNORED, 0);
        refund(g, local);
        free(p);
        return 0;
    }
    upstream_result_t none = {.status = 200, .content_type = ""};
    if (g->upstream == NULL) { /* the gateway answers: nothing reported */
        complete(p, &none, out);
        free(p);
        return 0;
    }
    int rc = upstream_request(g->upstream, req->method, req->target, req->api_key,
                              req->max_tokens, on_upstream, p);
    if (rc != 0) {
        gw_log("upstream: %s", uv_strerror(rc));
        none.status = 0;
        complete(p, &none, out);
        free(p);
        return 0;
    }
    g->pending++;
    return HANDLER_PENDING;
}

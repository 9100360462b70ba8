/* SPDX-License-Identifier: MIT */
/* Routing and the rate-limit decision for one request. */
#include "handler.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <time.h>

#include "log.h"
#include "proxy.h"

#define JSON "application/json"

void reply_init(reply_t *r, int status)
{
    memset(&r->resp, 0, sizeof r->resp);
    r->resp.status = status;
    r->resp.version_minor = 1;
    r->headers[0] = '\0';
    r->owned = NULL;
}

void json_body(reply_t *r, const char *fmt, ...)
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

/* The keys of one request: they carry their kind, so an API key spelled
 * like an address can never share a bucket with that address. */
typedef struct keys {
    char client[8 + HTTP_API_KEY_CAP], ip[8 + 64];
} keys_t;

static void keys_make(keys_t *k, const http_request_t *req, const char *client_ip)
{
    snprintf(k->ip, sizeof k->ip, "ip:%s", client_ip);
    if (req->api_key_len > 0)
        snprintf(k->client, sizeof k->client, "key:%s", req->api_key);
    else
        snprintf(k->client, sizeof k->client, "%s", k->ip);
}

static const char *rule_key(const limit_rule_t *r, const keys_t *k)
{
    if (r->scope == SCOPE_CLIENT)
        return k->client;
    if (r->scope == SCOPE_IP)
        return k->ip;
    return "shared"; /* one bucket: the limit is this rule's alone */
}

/* A request waiting for Redis: first its quotas' charges, then (all
 * allowed) its exact rules' answers. Its local rules are already charged
 * (all admitted). */
enum { PHASE_QUOTAS, PHASE_EXACT };

typedef struct pending {
    struct pending *next;
    gateway_t *g;
    void *conn;
    int phase;
    unsigned n;                /* answers awaited in this phase */
    _Atomic unsigned answered; /* of them, answered (exact thread or inline) */
    struct ref {
        struct pending *p;
        unsigned i;
    } refs[RL_MULTI_MAX];
    /* the exact rules, asked once the quotas allowed */
    size_t nexact;
    int exact_id[RL_MULTI_MAX];
    const char *exact_key[RL_MULTI_MAX]; /* into keys */
    int rc[RL_MULTI_MAX];
    bool have_d[RL_MULTI_MAX];
    rl_decision_t d[RL_MULTI_MAX];
    /* the quotas, charged first, all with one request id */
    size_t nquotas;
    int quota_id[RL_MULTI_MAX];
    const char *quota_key[RL_MULTI_MAX]; /* into keys */
    char quota_name[RL_MULTI_MAX][RL_NAME_MAX];
    int qrc[RL_MULTI_MAX];
    rl_quota_result_t qres[RL_MULTI_MAX];
    char rid[RL_QUOTA_ID_MAX];
    size_t rid_len;
    /* the local part, to refund when a quota or an exact rule denies */
    size_t nlocal;
    int local_id[RL_MULTI_MAX];
    const char *local_key[RL_MULTI_MAX]; /* into keys */
    keys_t keys;
    rl_decision_t shown; /* the local rules' decision for the headers */
    bool have_shown;
    size_t nrules;
    bool head;
    int version_minor;
    bool by_key;
    char path[2 * HTTP_TARGET_CAP + 1];
} pending_t;

/* Counted once per answer of the phase, from whichever thread answers it;
 * the one that answers last hands the request back to the loop. */
static void exact_answered(pending_t *p)
{
    /* acq_rel: the last one sees every other answer's writes. */
    if (atomic_fetch_add_explicit(&p->answered, 1, memory_order_acq_rel) + 1 != p->n)
        return;
    gateway_t *g = p->g;
    uv_mutex_lock(&g->done_mu);
    p->next = g->done_head;
    g->done_head = p;
    uv_mutex_unlock(&g->done_mu);
    uv_async_send(&g->wake); /* the loop finishes it (on_exact_done) */
}

/* rl_check_cb: on the library's exact thread. */
static void on_exact(void *ud, int rc, const rl_decision_t *d)
{
    struct ref *r = ud;
    pending_t *p = r->p;
    p->rc[r->i] = rc;
    if (d != NULL) {
        p->d[r->i] = *d;
        p->have_d[r->i] = true;
    }
    exact_answered(p);
}

/* rl_quota_cb: on the library's exact thread. */
static void on_quota(void *ud, int rc, const rl_quota_result_t *q)
{
    struct ref *r = ud;
    pending_t *p = r->p;
    p->qrc[r->i] = rc;
    p->qres[r->i] = *q;
    exact_answered(p);
}

/*
 * Check every rule that matches the path. The local ones (every rule but an
 * exact one on an instance with Redis) go through rl_check_multi, all or
 * nothing. *shown is the decision the response's RateLimit headers
 * describe: the denying limit's, or on an allow the one with the fewest
 * tokens left (the next to bite). Returns RL_ALLOW, RL_DENY or an RL_E*
 * error; *nrules 0: nothing applies. When the local rules admit and exact
 * rules remain, *exact gets them (*nexact) and the answer is theirs.
 */
static int check_limits(gateway_t *g, const char *path, size_t path_len, const keys_t *k,
                        rl_decision_t *shown, size_t *nrules, const limit_rule_t **exact,
                        size_t *nexact, rl_request_t *reqs, size_t *nlocal,
                        const limit_rule_t **quotas, size_t *nquotas, proxy_rules_t *pr)
{
    const limit_rule_t *rules[RL_MULTI_MAX];
    size_t n = limits_match(g->limits, path, path_len, rules);
    *nrules = n;
    *nexact = 0;
    *nlocal = 0;
    *nquotas = 0;
    pr->ninflight = pr->ntokens = 0;
    if (n == 0)
        return RL_ALLOW;
    rl_decision_t out[RL_MULTI_MAX];
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (rules[i]->is_quota) { /* charged once the rate limits allowed */
            quotas[(*nquotas)++] = rules[i];
            continue;
        }
        if (rules[i]->limit.kind == RL_KIND_INFLIGHT) { /* the proxy stage's */
            pr->inflight_key[pr->ninflight] = rule_key(rules[i], k);
            pr->inflight[pr->ninflight++] = rules[i];
            continue;
        }
        if (rules[i]->tokens) { /* reserved on the estimate by the proxy stage */
            pr->tokens_key[pr->ntokens] = rule_key(rules[i], k);
            pr->tokens[pr->ntokens++] = rules[i];
            continue;
        }
        if (g->exact_async && rules[i]->limit.mode == RL_MODE_EXACT) {
            exact[(*nexact)++] = rules[i];
            continue;
        }
        const char *key = rule_key(rules[i], k);
        rl_request_init(&reqs[m]);
        reqs[m].limit = rules[i]->id;
        reqs[m].key = key;
        reqs[m].key_len = strlen(key);
        reqs[m].cost = 1;
        rl_decision_init(&out[m]);
        m++;
    }
    *nlocal = m;
    if (m == 0)
        return RL_ALLOW;
    size_t denied = m;
    int rc = rl_check_multi(g->rl, reqs, m, sizeof reqs[0], out, &denied);
    if (rc == RL_DENY) {
        *shown = out[denied];
        *nexact = 0; /* denied locally: Redis is not asked */
    } else if (rc == RL_ALLOW) {
        size_t least = 0;
        for (size_t i = 1; i < m; i++)
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

/* The reply for a decided request (rc RL_ALLOW, RL_DENY or an error). */
static void decided(gateway_t *g, int rc, const rl_decision_t *d, size_t nrules, bool metrics,
                    const char *path, bool by_key, reply_t *out)
{
    if (rc < 0) {
        g->metrics.check_errors++;
        gw_log("rate-limit check failed: %s (%s)", rl_strerror(rc), rl_err_name(rc));
        out->resp.status = 500;
        json_body(out, "{\"error\":\"rate limit check failed\"}\n");
        return;
    }
    if (nrules > 0 && d != NULL && rl_headers(d, out->headers, sizeof out->headers) >= 0)
        out->resp.headers = out->headers;
    if (rc == RL_DENY) {
        out->resp.status = 429;
        json_body(out, "{\"error\":\"rate limited\",\"limit\":\"%s\",\"retry_after_ms\":%llu}\n",
                  d != NULL && d->policy != NULL ? d->policy : "",
                  d != NULL ? (unsigned long long)d->retry_after_ms : 0ull);
        return;
    }
    if (metrics) {
        metrics_reply(g, out);
        return;
    }
    json_body(out, "{\"status\":\"ok\",\"path\":\"%s\",\"client\":\"%s\",\"limits\":%zu}\n", path,
              by_key ? "key" : "ip", nrules);
}

/* Append one header line to a reply's headers (whatever rl_headers put
 * there first); a line that does not fit is left out. */
void add_header(reply_t *out, const char *fmt, ...)
{
    size_t used = out->resp.headers != NULL ? strlen(out->headers) : 0;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out->headers + used, sizeof out->headers - used, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof out->headers - used) {
        out->headers[used] = '\0';
        return;
    }
    out->resp.headers = out->headers;
}

/* What the quotas said, on a reply: the fewest units left among them, and
 * whether this request id was seen before (a client's retry, not charged
 * again). */
static void quota_headers(const pending_t *p, reply_t *out)
{
    if (p->nquotas == 0)
        return;
    uint64_t least = UINT64_MAX;
    bool dup = false;
    for (size_t i = 0; i < p->nquotas; i++) {
        if (p->qrc[i] < 0)
            continue;
        if (p->qres[i].remaining < least)
            least = p->qres[i].remaining;
        dup = dup || (p->qres[i].flags & RL_FLAG_DUPLICATE);
    }
    if (least != UINT64_MAX)
        add_header(out, "X-Quota-Remaining: %llu\r\n", (unsigned long long)least);
    if (dup)
        add_header(out, "X-Quota-Duplicate: true\r\n");
}

static void refund_local(pending_t *p)
{
    for (size_t i = 0; i < p->nlocal; i++)
        rl_refund(p->g->rl, p->local_id[i], p->local_key[i], strlen(p->local_key[i]), 1);
}

/* On the loop: a pending request's quota answers are all in. true with
 * *out made when the request is decided by them (a deny, an error); false
 * when every quota allowed. A quota that denies gets a 429 with
 * Retry-After up to the quota's reset, and the local rate charges are
 * refunded: the request was not served. */
static bool quotas_decide(pending_t *p, reply_t *out)
{
    gateway_t *g = p->g;
    for (size_t i = 0; i < p->nquotas; i++) {
        int rc = p->qrc[i];
        if (rc == RL_ALLOW)
            continue;
        refund_local(p);
        if (rc < 0) {
            g->metrics.check_errors++;
            gw_log("quota charge failed: %s (%s)", rl_strerror(rc), rl_err_name(rc));
            out->resp.status = 500;
            json_body(out, "{\"error\":\"quota check failed\"}\n");
            return true;
        }
        const rl_quota_result_t *q = &p->qres[i];
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t now = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
        uint64_t wait_s = q->reset_unix_ms > now ? (q->reset_unix_ms - now + 999) / 1000 : 1;
        out->resp.status = 429;
        add_header(out, "Retry-After: %llu\r\n", (unsigned long long)(wait_s > 0 ? wait_s : 1));
        quota_headers(p, out);
        json_body(out, "{\"error\":\"quota exhausted\",\"quota\":\"%s\",\"used\":%llu,"
                       "\"amount\":%llu,\"reset_unix_ms\":%llu}\n",
                  p->quota_name[i], (unsigned long long)q->used, (unsigned long long)q->amount,
                  (unsigned long long)q->reset_unix_ms);
        return true;
    }
    return false;
}

/* On the loop: a pending request's exact answers are all in (or it had
 * none: its quotas allowed it). */
static void finish_pending(pending_t *p, reply_t *out)
{
    gateway_t *g = p->g;
    int rc = RL_ALLOW;
    const rl_decision_t *shown = p->have_shown ? &p->shown : NULL;
    for (unsigned i = 0; i < p->nexact; i++) {
        if (p->rc[i] < 0 && rc >= 0)
            rc = p->rc[i];
        if (p->rc[i] == RL_DENY && rc == RL_ALLOW) {
            rc = RL_DENY;
            shown = p->have_d[i] ? &p->d[i] : NULL;
        }
        if (rc == RL_ALLOW && p->have_d[i] && (shown == NULL || p->d[i].remaining < shown->remaining))
            shown = &p->d[i];
    }
    if (rc != RL_ALLOW) /* the local rules' charges go back; Redis's stay */
        refund_local(p);
    decided(g, rc, shown, p->nrules, false, p->path, p->by_key, out);
    quota_headers(p, out);
}

/* Send a pending request's exact checks: the answers come back through
 * on_exact. On the loop. */
static void send_exact(pending_t *p)
{
    p->phase = PHASE_EXACT;
    p->n = (unsigned)p->nexact;
    /* relaxed: the callbacks that read it are queued after this store (the
     * library's queue publishes it). */
    atomic_store_explicit(&p->answered, 0, memory_order_relaxed);
    for (size_t i = 0; i < p->nexact; i++) {
        p->refs[i] = (struct ref){p, (unsigned)i};
        int rc = rl_check_async(p->g->rl, p->exact_id[i], p->exact_key[i],
                                strlen(p->exact_key[i]), 1, on_exact, &p->refs[i]);
        if (rc != RL_PENDING) { /* decided inline (no room in flight, an error) */
            p->rc[i] = rc;
            exact_answered(p);
        }
    }
}

/* Send a pending request's quota charges: the answers come back through
 * on_quota. On the loop. */
static void send_quotas(pending_t *p)
{
    p->phase = PHASE_QUOTAS;
    p->n = (unsigned)p->nquotas;
    /* relaxed: as in send_exact. */
    atomic_store_explicit(&p->answered, 0, memory_order_relaxed);
    for (size_t i = 0; i < p->nquotas; i++) {
        p->refs[i] = (struct ref){p, (unsigned)i};
        rl_quota_result_init(&p->qres[i]);
        int rc = rl_quota_charge_async(p->g->rl, p->quota_id[i], p->quota_key[i],
                                       strlen(p->quota_key[i]), 1, p->rid, p->rid_len,
                                       on_quota, &p->refs[i]);
        if (rc != RL_PENDING) { /* on_failure inline (no room in flight), an error */
            p->qrc[i] = rc;
            if (rc >= 0)
                p->qres[i].flags = RL_FLAG_DEGRADED;
            exact_answered(p);
        }
    }
}

static void on_exact_done(uv_async_t *h)
{
    gateway_t *g = h->data;
    uv_mutex_lock(&g->done_mu);
    pending_t *p = g->done_head;
    g->done_head = NULL;
    uv_mutex_unlock(&g->done_mu);
    while (p != NULL) {
        pending_t *next = p->next;
        reply_t r;
        reply_init(&r, 200);
        r.resp.version_minor = p->version_minor;
        r.resp.head_only = p->head;
        if (p->phase == PHASE_QUOTAS && !quotas_decide(p, &r) && p->nexact > 0) {
            send_exact(p); /* the quotas allowed: now the exact rules */
            p = next;
            continue;
        }
        if (r.resp.status == 200)
            finish_pending(p, &r);
        g->pending--;
        g->done(p->conn, &r);
        free(p);
        p = next;
    }
    if (g->wake_closed && g->pending == 0 && !uv_is_closing((uv_handle_t *)&g->wake))
        uv_close((uv_handle_t *)&g->wake, NULL);
}

int handler_init(gateway_t *g, uv_loop_t *loop, bool exact_async, handler_done_fn *done)
{
    g->exact_async = exact_async;
    g->done = done;
    g->done_head = NULL;
    g->pending = 0;
    g->wake_closed = false;
    int rc = uv_mutex_init(&g->done_mu);
    if (rc != 0)
        return rc;
    rc = uv_async_init(loop, &g->wake, on_exact_done);
    g->wake.data = g;
    return rc;
}

void handler_stop(gateway_t *g)
{
    g->wake_closed = true;
    if (g->pending == 0 && !uv_is_closing((uv_handle_t *)&g->wake))
        uv_close((uv_handle_t *)&g->wake, NULL);
}

/* A key of keys_make's, moved into the pending request's copy. */
static const char *moved_key(const char *key, const keys_t *from, const keys_t *to)
{
    return key == from->client ? to->client : key == from->ip ? to->ip : "shared";
}

/*
 * The quotas' request id: the client's Idempotency-Key when it sent one, so
 * its retry through the gateway is charged once, scoped to the client (two
 * clients' equal keys never meet, even on a shared quota); else one of the
 * gateway's own (node id + a sequence number: each request charged once).
 * false when the client's identity and key together are too long for an
 * id (RL_QUOTA_ID_MAX).
 */
static bool request_id(gateway_t *g, const http_request_t *req, const keys_t *k, char *rid,
                       size_t *rid_len)
{
    int n;
    if (req->idem_key_len > 0)
        n = snprintf(rid, RL_QUOTA_ID_MAX, "i:%s %s", k->client, req->idem_key);
    else
        n = snprintf(rid, RL_QUOTA_ID_MAX, "g:%s:%llu", g->node_id ? g->node_id : "gw",
                     (unsigned long long)++g->request_seq);
    if (n < 0 || n >= RL_QUOTA_ID_MAX)
        return false;
    *rid_len = (size_t)n;
    return true;
}

/* Start a request's Redis part: quotas first, then exact rules (the local
 * ones admitted it). HANDLER_PENDING, or RL_ENOMEM. */
static int start_pending(gateway_t *g, const http_request_t *req, const keys_t *k,
                         const rl_decision_t *shown, size_t nrules, const limit_rule_t **exact,
                         size_t nexact, const limit_rule_t **quotas, size_t nquotas,
                         const char *rid, size_t rid_len, const rl_request_t *local,
                         size_t nlocal, void *conn, const char *path)
{
    pending_t *p = calloc(1, sizeof *p);
    if (p == NULL)
        return RL_ENOMEM;
    p->g = g;
    p->conn = conn;
    atomic_init(&p->answered, 0);
    p->keys = *k;
    p->nlocal = nlocal;
    for (size_t i = 0; i < nlocal; i++) {
        p->local_id[i] = local[i].limit;
        p->local_key[i] = moved_key(local[i].key, k, &p->keys);
    }
    p->nexact = nexact;
    for (size_t i = 0; i < nexact; i++) {
        p->exact_id[i] = exact[i]->id;
        p->exact_key[i] = moved_key(rule_key(exact[i], k), k, &p->keys);
    }
    p->nquotas = nquotas;
    for (size_t i = 0; i < nquotas; i++) {
        p->quota_id[i] = quotas[i]->id;
        p->quota_key[i] = moved_key(rule_key(quotas[i], k), k, &p->keys);
        snprintf(p->quota_name[i], sizeof p->quota_name[i], "%s", quotas[i]->quota.name);
    }
    memcpy(p->rid, rid, rid_len);
    p->rid_len = rid_len;
    p->have_shown = nlocal > 0;
    if (nlocal > 0)
        p->shown = *shown;
    p->nrules = nrules;
    p->head = strcmp(req->method, "HEAD") == 0;
    p->version_minor = req->version_minor;
    p->by_key = req->api_key_len > 0;
    snprintf(p->path, sizeof p->path, "%s", path);
    g->pending++;
    if (nquotas > 0)
        send_quotas(p);
    else
        send_exact(p);
    return HANDLER_PENDING;
}

int handler_request(gateway_t *g, const http_request_t *req, const char *client_ip, reply_t *out,
                    void *conn)
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
        return 0;
    }
    keys_t k;
    keys_make(&k, req, client_ip);
    rl_decision_t d;
    size_t nrules = 0, nexact = 0, nlocal = 0, nquotas = 0;
    const limit_rule_t *exact[RL_MULTI_MAX], *quotas[RL_MULTI_MAX];
    rl_request_t local[RL_MULTI_MAX];
    proxy_rules_t pr;
    int rc = check_limits(g, req->target, path_len, &k, &d, &nrules, exact, &nexact, local,
                          &nlocal, quotas, &nquotas, &pr);
    char path[2 * HTTP_TARGET_CAP + 1];
    json_string(path, req->target, path_len);
    if (metrics)
        nquotas = nexact = pr.ninflight = pr.ntokens = 0;
    bool proxied = !metrics && (pr.ninflight > 0 || pr.ntokens > 0 || g->upstream != NULL);
    if (rc == RL_ALLOW && proxied && (nquotas > 0 || nexact > 0)) {
        for (size_t j = 0; j < nlocal; j++)
            rl_refund(g->rl, local[j].limit, local[j].key, local[j].key_len, 1);
        out->resp.status = 501;
        json_body(out, "{\"error\":\"this example does not combine quota or exact rules with "
                       "in-flight, token or upstream routes\"}\n");
        return 0;
    }
    if (rc == RL_ALLOW && proxied) {
        proxy_local_t pl = {local, nlocal, nlocal > 0 ? &d : NULL, nrules};
        return proxy_start(g, req, &pr, &pl, path, out, conn);
    }
    if (rc == RL_ALLOW && (nquotas > 0 || nexact > 0)) {
        char rid[RL_QUOTA_ID_MAX];
        size_t rid_len = 0;
        if (nquotas > 0 && !request_id(g, req, &k, rid, &rid_len)) {
            for (size_t j = 0; j < nlocal; j++)
                rl_refund(g->rl, local[j].limit, local[j].key, local[j].key_len, 1);
            out->resp.status = 400;
            json_body(out, "{\"error\":\"X-API-Key and Idempotency-Key together too long "
                           "for a quota request id (%d bytes)\"}\n",
                      RL_QUOTA_ID_MAX - 1);
            return 0;
        }
        rc = start_pending(g, req, &k, &d, nrules, exact, nexact, quotas, nquotas, rid, rid_len,
                           local, nlocal, conn, path);
        if (rc == HANDLER_PENDING)
            return HANDLER_PENDING;
    }
    decided(g, rc, nrules > 0 && nlocal > 0 ? &d : NULL, nrules, metrics, path,
            req->api_key_len > 0, out);
    return 0;
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

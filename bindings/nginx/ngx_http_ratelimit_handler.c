/* SPDX-License-Identifier: MIT */
/*
 * The request path: the preaccess handler charges a location's rules, all
 * or nothing, and answers with the verdict; a rule that waits for Redis (a
 * mode=exact limit's, a quota's) suspends the request until
 * ngx_http_ratelimit_exact.c brings the answer back.
 */
#include "ngx_http_ratelimit.h"

/* Longest request id a client may give through id= (the rest of
 * RL_QUOTA_ID_MAX is the prefix that keeps it apart from the worker's own). */
#define RL_NGX_ID_MAX (RL_QUOTA_ID_MAX - 2)

/* $ratelimit_status values; the variable also marks a request as checked,
 * because a request's variables (unlike its module contexts) survive an
 * internal redirect: an error_page or try_files target is not charged twice. */
static ngx_str_t ngx_http_ratelimit_status_text[] = {
    ngx_string("PASSED"), ngx_string("REJECTED"), ngx_string("REJECTED_DRY_RUN"),
    ngx_string("ERROR"),
};
enum { RL_NGX_PASSED, RL_NGX_REJECTED, RL_NGX_DRY, RL_NGX_ERROR };

static void
ngx_http_ratelimit_set_status(ngx_http_request_t *r, ngx_uint_t status)
{
    ngx_http_variable_value_t *v = &r->main->variables[ngx_http_ratelimit_status_index];

    v->len = ngx_http_ratelimit_status_text[status].len;
    v->data = ngx_http_ratelimit_status_text[status].data;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;
}

/* Append rl_headers' CRLF lines ("Name: value") to the response. */
static ngx_int_t
ngx_http_ratelimit_add_headers(ngx_http_request_t *r, const rl_decision_t *d)
{
    char text[1024];
    u_char *p, *end, *eol, *colon;
    ngx_table_elt_t *h;
    int n;

    n = rl_headers(d, text, sizeof(text));
    if (n < 0 || (size_t) n >= sizeof(text)) {
        return NGX_ERROR;
    }
    p = (u_char *) text;
    end = p + n;
    while (p < end) {
        eol = ngx_strlchr(p, end, '\r');
        colon = ngx_strlchr(p, eol ? eol : end, ':');
        if (eol == NULL || colon == NULL) {
            return NGX_ERROR;
        }
        h = ngx_list_push(&r->headers_out.headers);
        if (h == NULL) {
            return NGX_ERROR;
        }
        h->hash = 1;
        h->key.len = colon - p;
        h->key.data = ngx_pnalloc(r->pool, h->key.len + (eol - colon));
        if (h->key.data == NULL) {
            return NGX_ERROR;
        }
        ngx_memcpy(h->key.data, p, h->key.len);
        colon++;
        while (colon < eol && *colon == ' ') {
            colon++;
        }
        h->value.len = eol - colon;
        h->value.data = h->key.data + h->key.len;
        ngx_memcpy(h->value.data, colon, h->value.len);
        h->lowcase_key = NULL;
        p = eol + 2;
    }
    return NGX_OK;
}

/* Give back what a request's local rules charged (its exact rule denied,
 * or it ended while it waited for Redis). */
void
ngx_http_ratelimit_refund(ngx_http_request_t *r, ngx_http_ratelimit_ctx_t *ctx)
{
    size_t i;
    int rc;

    for (i = 0; i < ctx->nlocal; i++) {
        rc = rl_refund(ctx->mcf->rl, ctx->local[i].limit, ctx->local[i].key,
                       ctx->local[i].key_len, ctx->local[i].cost);
        if (rc < 0 && r != NULL) {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "ratelimit: rl_refund failed: %s (%s)",
                          rl_strerror(rc), rl_err_name(rc));
        }
    }
    ctx->nlocal = 0;
}

static ngx_int_t
ngx_http_ratelimit_error(ngx_http_request_t *r, const char *what, int rc)
{
    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                  "ratelimit: %s failed: %s (%s): request allowed", what, rl_strerror(rc),
                  rl_err_name(rc));
    ngx_http_ratelimit_set_status(r, RL_NGX_ERROR);
    return NGX_DECLINED;
}

/* A verdict for the whole location: allowed (out: every rule's decision,
 * the one closest to denying is shown) or denied by rule `rule` (d its
 * decision, NULL when the library gave none). */
static ngx_int_t
ngx_http_ratelimit_verdict(ngx_http_request_t *r, ngx_http_ratelimit_main_conf_t *mcf,
                           ngx_http_ratelimit_loc_conf_t *lcf, int allowed,
                           const rl_decision_t *out, size_t n, ngx_uint_t rule,
                           const rl_decision_t *d, const char *how)
{
    ngx_http_ratelimit_rule_t *rules = lcf->rules->elts;
    ngx_http_ratelimit_def_t *defs = mcf->defs.elts;
    const rl_decision_t *shown = NULL;
    size_t i;

    if (allowed) {
        /* Show the limit closest to denying. */
        for (i = 0; i < n; i++) {
            if (shown == NULL || out[i].remaining < shown->remaining) {
                shown = &out[i];
            }
        }
        ngx_http_ratelimit_set_status(r, RL_NGX_PASSED);
        if (lcf->headers && shown != NULL && ngx_http_ratelimit_add_headers(r, shown) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        return NGX_DECLINED;
    }
    ngx_log_error(lcf->log_level, r->connection->log, 0,
                  "ratelimit: %s by limit \"%s\"%s, retry after %uL ms",
                  lcf->dry_run ? "would deny (dry run)" : "denied", defs[rules[rule].def].lim.name,
                  how, d != NULL ? d->retry_after_ms : 0);
    if (lcf->dry_run) {
        ngx_http_ratelimit_set_status(r, RL_NGX_DRY);
        return NGX_DECLINED;
    }
    ngx_http_ratelimit_set_status(r, RL_NGX_REJECTED);
    if (lcf->headers && d != NULL && ngx_http_ratelimit_add_headers(r, d) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    return (ngx_int_t) lcf->status;
}

/* One header line on the response. */
static ngx_int_t
ngx_http_ratelimit_header(ngx_http_request_t *r, const char *name, uint64_t v, ngx_flag_t num)
{
    ngx_table_elt_t *h;

    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NGX_ERROR;
    }
    h->hash = 1;
    h->key.len = ngx_strlen(name);
    h->key.data = (u_char *) name;
    h->value.data = ngx_pnalloc(r->pool, NGX_INT64_LEN);
    if (h->value.data == NULL) {
        return NGX_ERROR;
    }
    h->value.len = num ? (size_t) (ngx_sprintf(h->value.data, "%uL", v) - h->value.data)
                       : (size_t) (ngx_cpymem(h->value.data, "true", 4) - h->value.data);
    h->lowcase_key = NULL;
    return NGX_OK;
}

/* What a quota said, on the response: the units left and, for a request id
 * seen before (a client's retry: the first answer, not charged again),
 * X-Quota-Duplicate. */
static ngx_int_t
ngx_http_ratelimit_quota_headers(ngx_http_request_t *r, const rl_quota_result_t *q)
{
    if (ngx_http_ratelimit_header(r, "X-Quota-Remaining", q->remaining, 1) != NGX_OK) {
        return NGX_ERROR;
    }
    if ((q->flags & RL_FLAG_DUPLICATE)
        && ngx_http_ratelimit_header(r, "X-Quota-Duplicate", 0, 0) != NGX_OK)
    {
        return NGX_ERROR;
    }
    return NGX_OK;
}

/* The quota's answer is in: allowed with the local rules' decisions, or
 * denied (the local charges refunded) with Retry-After up to the quota's
 * reset. */
static ngx_int_t
ngx_http_ratelimit_quota_finish(ngx_http_request_t *r, ngx_http_ratelimit_loc_conf_t *lcf,
                                ngx_http_ratelimit_ctx_t *ctx)
{
    ngx_http_ratelimit_qdef_t *qdefs = ctx->mcf->qdefs.elts;
    ngx_http_ratelimit_rule_t *rules = lcf->rules->elts;
    const rl_quota_result_t *q = &ctx->qr;
    const char *name = qdefs[rules[ctx->exact_rule].quota].q.name;
    ngx_int_t rc;
    uint64_t now, wait_s;
    ngx_time_t *tp;

    if (ctx->rc < 0) {
        /* Like any library error: allowed, the local charges kept. */
        return ngx_http_ratelimit_error(r, "rl_quota_charge_async", ctx->rc);
    }
    if (ctx->rc == RL_ALLOW) {
        rc = ngx_http_ratelimit_verdict(r, ctx->mcf, lcf, 1, ctx->out, ctx->nlocal, 0, NULL, "");
        if (rc == NGX_DECLINED && lcf->headers && ngx_http_ratelimit_quota_headers(r, q) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        return rc;
    }
    ngx_http_ratelimit_refund(r, ctx);
    tp = ngx_timeofday();
    now = (uint64_t) tp->sec * 1000 + tp->msec;
    wait_s = q->reset_unix_ms > now ? (q->reset_unix_ms - now + 999) / 1000 : 1;
    ngx_log_error(lcf->log_level, r->connection->log, 0,
                  "ratelimit: %s by quota \"%s\" (used %uL of %uL%s), retry after %uL s",
                  lcf->dry_run ? "would deny (dry run)" : "denied", name, q->used, q->amount,
                  (q->flags & RL_FLAG_DUPLICATE) ? ", a retried id" : "", wait_s);
    if (lcf->dry_run) {
        ngx_http_ratelimit_set_status(r, RL_NGX_DRY);
        return NGX_DECLINED;
    }
    ngx_http_ratelimit_set_status(r, RL_NGX_REJECTED);
    if (lcf->headers
        && (ngx_http_ratelimit_header(r, "Retry-After", wait_s ? wait_s : 1, 1) != NGX_OK
            || ngx_http_ratelimit_quota_headers(r, q) != NGX_OK))
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    return (ngx_int_t) lcf->status;
}

/* The exact rule's (or quota's) answer is in: finish the location's check. */
static ngx_int_t
ngx_http_ratelimit_exact_finish(ngx_http_request_t *r, ngx_http_ratelimit_loc_conf_t *lcf,
                                ngx_http_ratelimit_ctx_t *ctx)
{
    const rl_decision_t *d = ctx->has_d ? &ctx->d : NULL;

    if (ctx->rc == RL_NGX_NO_ANSWER) {
        ngx_http_ratelimit_set_status(r, RL_NGX_ERROR); /* logged by the watchdog */
        return NGX_DECLINED;
    }
    if (ctx->is_quota) {
        return ngx_http_ratelimit_quota_finish(r, lcf, ctx);
    }
    if (ctx->rc < 0) {
        /* Like any library error: allowed, and what the local rules charged
         * stays charged, as it would for an error of rl_check_multi. */
        return ngx_http_ratelimit_error(r, "rl_check_async", ctx->rc);
    }
    if (ctx->rc == RL_ALLOW) {
        if (d != NULL) {
            ctx->out[ctx->nlocal] = *d; /* shown with the local ones */
        }
        return ngx_http_ratelimit_verdict(r, ctx->mcf, lcf, 1, ctx->out,
                                          ctx->nlocal + (d != NULL), 0, NULL, "");
    }
    /* Denied by Redis: none of the local rules keeps its charge. */
    ngx_http_ratelimit_refund(r, ctx);
    return ngx_http_ratelimit_verdict(r, ctx->mcf, lcf, 0, NULL, 0, ctx->exact_rule, d,
                                      " (exact)");
}

/* What a location's rules ask of one request, gathered before anything is
 * charged. */
typedef struct {
    rl_request_t reqs[RL_MULTI_MAX]; /* the rules that decide here */
    rl_decision_t out[RL_MULTI_MAX];
    ngx_uint_t map[RL_MULTI_MAX];    /* reqs[i] is rule map[i] */
    size_t n;
    ngx_uint_t exact_rule;           /* the rule that waits for Redis, if any: */
    ngx_flag_t has_exact;            /* a mode=exact limit's (exact below), */
    rl_request_t exact;
    ngx_flag_t has_quota;            /* or a quota's (its key and request id) */
    ngx_str_t qkey;
    u_char rid[RL_QUOTA_ID_MAX];
    size_t rid_len;
} ngx_http_ratelimit_plan_t;

/* A client chooses its header values: an over-long key is refused like an
 * over-limit request, never a 500. */
static ngx_int_t
ngx_http_ratelimit_long_key(ngx_http_request_t *r, ngx_http_ratelimit_loc_conf_t *lcf,
                            ngx_http_ratelimit_main_conf_t *mcf,
                            const ngx_http_ratelimit_rule_t *rule, size_t len)
{
    ngx_http_ratelimit_def_t *defs = mcf->defs.elts;
    ngx_http_ratelimit_qdef_t *qdefs = mcf->qdefs.elts;

    ngx_log_error(lcf->log_level, r->connection->log, 0,
                  "ratelimit: key of %s \"%s\" is %uz bytes (at most %d): refused",
                  rule->quota >= 0 ? "quota" : "limit",
                  rule->quota >= 0 ? qdefs[rule->quota].q.name : defs[rule->def].lim.name,
                  len, RL_MAX_KEY_LEN);
    ngx_http_ratelimit_set_status(r, lcf->dry_run ? RL_NGX_DRY : RL_NGX_REJECTED);
    return lcf->dry_run ? NGX_DECLINED : (ngx_int_t) lcf->status;
}

/* Each rule's key and cost into p. NGX_OK, or the request's answer. */
static ngx_int_t
ngx_http_ratelimit_plan(ngx_http_request_t *r, ngx_http_ratelimit_loc_conf_t *lcf,
                        ngx_http_ratelimit_main_conf_t *mcf, ngx_http_ratelimit_plan_t *p)
{
    ngx_http_ratelimit_rule_t *rules = lcf->rules->elts;
    ngx_http_ratelimit_def_t *defs = mcf->defs.elts;
    rl_request_t *req;
    ngx_str_t key;
    ngx_uint_t i;

    for (i = 0; i < lcf->rules->nelts; i++) {
        if (ngx_http_complex_value(r, &rules[i].key, &key) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        if (key.len == 0) {
            continue; /* like limit_req: an empty key is not limited */
        }
        if (key.len > RL_MAX_KEY_LEN) {
            return ngx_http_ratelimit_long_key(r, lcf, mcf, &rules[i], key.len);
        }
        if (rules[i].quota >= 0) {
            /* A quota: charged last, once the limits admitted. */
            if (mcf->qids == NULL) {
                continue; /* a worker without Redis never gets here: -t refuses it */
            }
            p->qkey = key;
            p->exact_rule = i;
            p->has_quota = 1;
            continue;
        }
        if (mcf->exact != NULL && defs[rules[i].def].lim.mode == RL_MODE_EXACT) {
            /* Redis's bucket: asked last, without blocking. */
            req = &p->exact;
            p->exact_rule = i;
            p->has_exact = 1;
        } else {
            req = &p->reqs[p->n];
            rl_decision_init(&p->out[p->n]);
            p->map[p->n++] = i;
        }
        rl_request_init(req);
        req->limit = mcf->ids[rules[i].def];
        req->key = key.data;
        req->key_len = key.len;
        req->cost = (uint32_t) rules[i].cost;
    }
    return NGX_OK;
}

/* The quota's request id into p: the client's (id=, kept apart from the
 * worker's own by its prefix), or one of this worker's. NGX_OK, or the
 * request's answer. */
static ngx_int_t
ngx_http_ratelimit_request_id(ngx_http_request_t *r, ngx_http_ratelimit_loc_conf_t *lcf,
                              ngx_http_ratelimit_main_conf_t *mcf, ngx_http_ratelimit_plan_t *p)
{
    ngx_http_ratelimit_rule_t *rule = (ngx_http_ratelimit_rule_t *) lcf->rules->elts
                                      + p->exact_rule;
    ngx_str_t idv;

    idv.len = 0;
    if (rule->id != NULL && ngx_http_complex_value(r, rule->id, &idv) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (idv.len > RL_NGX_ID_MAX) {
        ngx_log_error(lcf->log_level, r->connection->log, 0,
                      "ratelimit: request id of quota rule %ui is %uz bytes (at most %d): "
                      "refused", p->exact_rule + 1, idv.len, RL_NGX_ID_MAX);
        return NGX_HTTP_BAD_REQUEST;
    }
    if (idv.len > 0) {
        p->rid_len = ngx_cpymem(ngx_cpymem(p->rid, "i:", 2), idv.data, idv.len) - p->rid;
    } else {
        /* At most 64 bytes of the host name: the rest always fits. */
        p->rid_len = ngx_snprintf(p->rid, sizeof(p->rid), "g:%*s:%P:%T:%uL",
                                  ngx_min(ngx_cycle->hostname.len, (size_t) 64),
                                  ngx_cycle->hostname.data, ngx_pid, mcf->rid_epoch,
                                  ++mcf->rid_seq) - p->rid;
    }
    return NGX_OK;
}

/* The rule that waits for Redis: the others passed and hold their charges
 * while Redis decides (they are refunded if it denies). The worker goes on
 * serving other requests meanwhile. */
static ngx_int_t
ngx_http_ratelimit_ask_redis(ngx_http_request_t *r, ngx_http_ratelimit_loc_conf_t *lcf,
                             ngx_http_ratelimit_main_conf_t *mcf, ngx_http_ratelimit_plan_t *p)
{
    ngx_http_ratelimit_rule_t *rules = lcf->rules->elts;
    ngx_http_ratelimit_ctx_t *ctx;
    size_t n = p->n;
    int rc;

    ctx = ngx_pcalloc(r->pool, sizeof(*ctx));
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ctx->mcf = mcf;
    ctx->exact_rule = p->exact_rule;
    ctx->nlocal = n;
    ctx->local = ngx_palloc(r->pool, sizeof(rl_request_t) * (n + 1));
    ctx->out = ngx_palloc(r->pool, sizeof(rl_decision_t) * (n + 1));
    ctx->map = ngx_palloc(r->pool, sizeof(ngx_uint_t) * (n + 1));
    if (ctx->local == NULL || ctx->out == NULL || ctx->map == NULL) {
        ngx_http_ratelimit_refund(r, ctx);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ngx_memcpy(ctx->local, p->reqs, sizeof(rl_request_t) * n);
    ngx_memcpy(ctx->out, p->out, sizeof(rl_decision_t) * n);
    ngx_memcpy(ctx->map, p->map, sizeof(ngx_uint_t) * n);
    ngx_http_set_ctx(r, ctx, ngx_http_ratelimit_module);
    if (p->has_quota) {
        ctx->is_quota = 1;
        rc = ngx_http_ratelimit_quota_charge(r, ctx, mcf->qids[rules[p->exact_rule].quota],
                                             &p->qkey, rules[p->exact_rule].cost, p->rid,
                                             p->rid_len, &ctx->qr);
        if (rc == RL_PENDING) {
            return NGX_AGAIN;
        }
        ctx->rc = rc;
        return ngx_http_ratelimit_quota_finish(r, lcf, ctx);
    }
    rc = ngx_http_ratelimit_exact_check(r, ctx, &p->exact);
    if (rc == RL_PENDING) {
        return NGX_AGAIN;
    }
    /* Decided inline (no room for another check in flight: the limit's
     * on_failure answered) or refused. */
    ctx->rc = rc;
    ctx->has_d = 0;
    return ngx_http_ratelimit_exact_finish(r, lcf, ctx);
}

ngx_int_t
ngx_http_ratelimit_handler(ngx_http_request_t *r)
{
    ngx_http_ratelimit_main_conf_t *mcf;
    ngx_http_ratelimit_loc_conf_t *lcf;
    ngx_http_ratelimit_ctx_t *ctx;
    ngx_http_ratelimit_plan_t p;
    size_t denied = 0;
    ngx_int_t answer;
    int rc;

    lcf = ngx_http_get_module_loc_conf(r, ngx_http_ratelimit_module);
    ctx = ngx_http_get_module_ctx(r, ngx_http_ratelimit_module);
    if (ctx != NULL) {
        if (ctx->pending != NULL) {
            return NGX_AGAIN; /* still waiting for Redis */
        }
        if (ctx->answered) {
            ctx->answered = 0;
            return ngx_http_ratelimit_exact_finish(r, lcf, ctx);
        }
    }
    if (lcf->rules == NULL || r->main->variables[ngx_http_ratelimit_status_index].valid) {
        return NGX_DECLINED;
    }
    mcf = ngx_http_get_module_main_conf(r, ngx_http_ratelimit_module);
    if (mcf->rl == NULL) {
        return NGX_DECLINED;
    }
    p.n = 0;
    p.exact_rule = 0;
    p.has_exact = 0;
    p.has_quota = 0;
    ngx_str_null(&p.qkey);
    p.rid_len = 0;
    answer = ngx_http_ratelimit_plan(r, lcf, mcf, &p);
    if (answer != NGX_OK) {
        return answer;
    }
    if (p.n == 0 && !p.has_exact && !p.has_quota) {
        return NGX_DECLINED;
    }
    if (p.has_quota && (answer = ngx_http_ratelimit_request_id(r, lcf, mcf, &p)) != NGX_OK) {
        return answer;
    }
    /* All-or-nothing: a request denied by one limit charges none. Local and
     * global limits decide here without waiting. */
    if (p.n > 0) {
        rc = rl_check_multi(mcf->rl, p.reqs, p.n, sizeof(rl_request_t), p.out, &denied);
        if (rc < 0) {
            return ngx_http_ratelimit_error(r, "rl_check_multi", rc);
        }
        if (rc != RL_ALLOW) {
            return ngx_http_ratelimit_verdict(r, mcf, lcf, 0, NULL, 0, p.map[denied],
                                              &p.out[denied], "");
        }
        if (!p.has_exact && !p.has_quota) {
            return ngx_http_ratelimit_verdict(r, mcf, lcf, 1, p.out, p.n, 0, NULL, "");
        }
    }
    return ngx_http_ratelimit_ask_redis(r, lcf, mcf, &p);
}

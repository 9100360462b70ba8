/* SPDX-License-Identifier: MIT */
/*
 * One scrape answers for every worker of the host: the workers share one
 * instance (rl_open_shared; with a Redis each attaches, rl_shared_attach),
 * whose text already counts all of them. The location makes that text at
 * each scrape and serves it as it is, plus the answering worker's own gauge.
 */
#include "ngx_http_ratelimit.h"

ngx_int_t
ngx_http_ratelimit_metrics_handler(ngx_http_request_t *r)
{
    ngx_http_ratelimit_main_conf_t *mcf;
    u_char *o, *out;
    ngx_chain_t cl;
    ngx_buf_t *b;
    ngx_int_t rc;
    size_t total, len;
    int n;

    if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }
    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }
    mcf = ngx_http_get_module_main_conf(r, ngx_http_ratelimit_module);
    if (mcf->rl == NULL) {
        return NGX_HTTP_SERVICE_UNAVAILABLE;
    }
    /* One instance for the whole host: its text is every worker's. */
    n = rl_metrics_text(mcf->rl, NULL, 0);
    for (;;) {
        if (n < 0) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        total = (size_t) n + 4096; /* it may grow between two calls */
        out = ngx_pnalloc(r->pool, total);
        if (out == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        n = rl_metrics_text(mcf->rl, (char *) out, total);
        if (n >= 0 && (size_t) n < total) {
            break;
        }
    }
    o = out + n;
    /* The answering worker's own gauge, what no instance counts (a test
     * reads it to see a worker serve while its checks wait). */
    if (mcf->exact != NULL && (size_t) n + 256 <= total) {
        o = ngx_snprintf(o, 256, "# HELP ratelimit_nginx_exact_pending Requests of the "
                         "answering worker waiting for Redis (an exact limit or a "
                         "quota).\n"
                         "# TYPE ratelimit_nginx_exact_pending gauge\n"
                         "ratelimit_nginx_exact_pending %ui\n", mcf->exact_pending);
    }
    len = o - out;

    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = (off_t) len;
    ngx_str_set(&r->headers_out.content_type, "text/plain; version=0.0.4");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only || len == 0) {
        return rc == NGX_OK && len == 0 ? ngx_http_send_special(r, NGX_HTTP_LAST) : rc;
    }
    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    b->pos = out;
    b->last = o;
    b->memory = 1;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;
    cl.buf = b;
    cl.next = NULL;
    return ngx_http_output_filter(r, &cl);
}

/* SPDX-License-Identifier: MIT */
/*
 * ngx_http_ratelimit_module: what the directives, the request handler and
 * the cross-worker metrics share.
 */
#ifndef NGX_HTTP_RATELIMIT_H
#define NGX_HTTP_RATELIMIT_H

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <ratelimit.h>

/* One `ratelimit_limit` definition: parsed at configuration time so that
 * `nginx -t` rejects a bad spec, added to each worker's instance. */
typedef struct {
    rl_limit_t lim;
    ngx_uint_t line; /* where it was defined, for messages */
} ngx_http_ratelimit_def_t;

typedef struct {
    ngx_str_t redis_url;  /* empty: local-only */
    ngx_str_t secret;     /* the bytes of ratelimit_secret_file */
    ngx_str_t secret_file;
    ngx_str_t node_id;    /* empty: the host name */
    ngx_uint_t expected_nodes;
    ngx_uint_t max_keys;
    ngx_array_t defs;     /* ngx_http_ratelimit_def_t */
    size_t metrics_slot;  /* bytes of one worker's metrics text */
    ngx_shm_zone_t *metrics_zone; /* NULL: no ratelimit_metrics anywhere */
    /* Local-only: one instance for all workers (rl_open_shared), opened by
     * the master in init_module and inherited by the workers. With a Redis:
     * each worker's own, from init_process to exit_process. */
    rl_t *rl;
    ngx_flag_t shared;
    int *ids;             /* limit id of defs[i] in rl */
    ngx_event_t publish;  /* the metrics publishing timer */
} ngx_http_ratelimit_main_conf_t;

extern ngx_module_t ngx_http_ratelimit_module;

/* ngx_http_ratelimit_metrics.c */
char *ngx_http_ratelimit_metrics_zone(ngx_conf_t *cf, ngx_http_ratelimit_main_conf_t *mcf);
void ngx_http_ratelimit_metrics_start(ngx_cycle_t *cycle, ngx_http_ratelimit_main_conf_t *mcf);
void ngx_http_ratelimit_metrics_publish(ngx_http_ratelimit_main_conf_t *mcf, ngx_log_t *log);
ngx_int_t ngx_http_ratelimit_metrics_handler(ngx_http_request_t *r);

#endif

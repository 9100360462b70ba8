/* SPDX-License-Identifier: MIT */
/*
 * ngx_http_ratelimit_module: what its parts share. The module's tables and
 * configuration structs (ngx_http_ratelimit_module.c), the directives
 * (_directives.c), the master's shared instance and the workers' start and
 * exit (_lifecycle.c), the request path (_handler.c), the exact-check
 * channel (_exact.c) and the metrics location (_metrics.c).
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

/* One `ratelimit_quota` definition, likewise (quotas need a Redis). */
typedef struct {
    rl_quota_t q;
    ngx_uint_t line;
} ngx_http_ratelimit_qdef_t;

/* The longest rl_config_t.node_id and key_prefix (include/ratelimit.h:
 * [A-Za-z0-9_.:-]{1,64} and {1,32}); rl_open refuses longer ones. */
#define NGX_HTTP_RATELIMIT_NODE_ID_MAX 64
#define NGX_HTTP_RATELIMIT_PREFIX_MAX 32

typedef struct {
    ngx_str_t redis_url;  /* empty: local-only */
    ngx_str_t secret;     /* the bytes of ratelimit_secret_file */
    ngx_str_t secret_file;
    ngx_str_t node_id;    /* empty: the host name */
    ngx_str_t key_prefix; /* ratelimit_key_prefix; empty: the library's ("rl") */
    ngx_uint_t expected_nodes;
    ngx_uint_t max_keys;
    ngx_array_t defs;     /* ngx_http_ratelimit_def_t */
    ngx_array_t qdefs;    /* ngx_http_ratelimit_qdef_t */
    size_t metrics_slot;  /* deprecated ratelimit_metrics_slot: parsed, unused */
    ngx_flag_t metrics;   /* a location has ratelimit_metrics */
    /* One instance for all workers (rl_open_shared), opened by the master in
     * init_module and inherited by the workers (with a Redis, each attaches
     * in init_process: the host's sync, and its own connections for exact
     * limits and quotas). */
    rl_t *rl;
    ngx_flag_t shared;
    int *ids;             /* limit id of defs[i] in rl */
    int *qids;            /* quota id of qdefs[i] in rl */
    uint64_t rid_seq;     /* this worker's own request ids (worker only): */
    time_t rid_epoch;     /* pid, start time and this sequence number */
    ngx_msec_t exact_timeout;     /* ratelimit_exact_timeout: exact_timeout_ms */
    /* With a Redis and a mode=exact limit: this worker's completion channel
     * (ngx_http_ratelimit_exact.c); NULL otherwise. Worker only. */
    struct ngx_http_ratelimit_exact_s *exact;
    ngx_uint_t exact_pending;     /* requests waiting for Redis now */
} ngx_http_ratelimit_main_conf_t;

/* One `ratelimit NAME KEY [cost=N] [id=VALUE]` rule of a location: a
 * limit's, or a quota's (quota >= 0). */
typedef struct {
    ngx_uint_t def;                /* index into the main conf's defs */
    ngx_int_t quota;               /* index into its qdefs, or -1: a limit */
    ngx_http_complex_value_t key;
    ngx_http_complex_value_t *id;  /* a quota's request id; NULL: the worker's own */
    uint64_t cost;
} ngx_http_ratelimit_rule_t;

typedef struct {
    ngx_array_t *rules;   /* ngx_http_ratelimit_rule_t; NULL: inherit */
    ngx_uint_t status;
    ngx_flag_t headers;
    ngx_flag_t dry_run;
    ngx_uint_t log_level;
} ngx_http_ratelimit_loc_conf_t;

/* ctx->rc when the answer never came (the watchdog went on without it). */
#define RL_NGX_NO_ANSWER (-1000)

typedef struct ngx_http_ratelimit_pending_s ngx_http_ratelimit_pending_t;

/* A request whose exact rule went to Redis: what it charged locally (to
 * refund on a deny) and, once the answer is back, the answer. Lives in the
 * request's pool; the record the library thread writes does not (see
 * ngx_http_ratelimit_exact.c). */
typedef struct {
    ngx_http_ratelimit_pending_t *pending; /* non-NULL while waiting */
    ngx_flag_t answered;
    int rc;                       /* rl_check_async's verdict */
    ngx_flag_t has_d;
    rl_decision_t d;              /* the exact limit's decision, if has_d */
    ngx_uint_t exact_rule;        /* the location's rule of the exact limit or quota */
    ngx_flag_t is_quota;          /* the rule waited for is a quota's */
    rl_quota_result_t qr;         /* its answer, when rc is RL_ALLOW or RL_DENY */
    size_t nlocal;                /* the location's other rules, charged */
    rl_request_t *local;
    rl_decision_t *out;
    ngx_uint_t *map;              /* local[i] is rule map[i] */
    ngx_http_ratelimit_main_conf_t *mcf;
} ngx_http_ratelimit_ctx_t;

extern ngx_module_t ngx_http_ratelimit_module;

/* $ratelimit_status's index (ngx_http_ratelimit_module.c), set once at
 * configuration time; the handler marks a checked request with it. */
extern ngx_int_t ngx_http_ratelimit_status_index;

/* ngx_http_ratelimit_directives.c */
char *ngx_http_ratelimit_limit(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_http_ratelimit_quota(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_http_ratelimit_rule(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_http_ratelimit_secret_file(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_http_ratelimit_node_id(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_http_ratelimit_key_prefix(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_http_ratelimit_metrics(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
/* A byte of the library's node id alphabet, [A-Za-z0-9_.:-]. */
ngx_int_t ngx_http_ratelimit_node_char(u_char c);

/* ngx_http_ratelimit_lifecycle.c */
ngx_int_t ngx_http_ratelimit_init_module(ngx_cycle_t *cycle);
ngx_int_t ngx_http_ratelimit_init_process(ngx_cycle_t *cycle);
void ngx_http_ratelimit_exit_process(ngx_cycle_t *cycle);

/* ngx_http_ratelimit_handler.c */
ngx_int_t ngx_http_ratelimit_handler(ngx_http_request_t *r);

/* ngx_http_ratelimit_metrics.c */
ngx_int_t ngx_http_ratelimit_metrics_handler(ngx_http_request_t *r);

/* ngx_http_ratelimit_exact.c */
ngx_int_t ngx_http_ratelimit_exact_start(ngx_cycle_t *cycle, ngx_http_ratelimit_main_conf_t *mcf);
void ngx_http_ratelimit_exact_stop(ngx_cycle_t *cycle, ngx_http_ratelimit_main_conf_t *mcf);
int ngx_http_ratelimit_exact_check(ngx_http_request_t *r, ngx_http_ratelimit_ctx_t *ctx,
                                   const rl_request_t *req);
void ngx_http_ratelimit_refund(ngx_http_request_t *r, ngx_http_ratelimit_ctx_t *ctx);
int ngx_http_ratelimit_quota_charge(ngx_http_request_t *r, ngx_http_ratelimit_ctx_t *ctx,
                                    int quota, const ngx_str_t *key, uint64_t cost,
                                    const u_char *rid, size_t rid_len, rl_quota_result_t *inl);

#endif

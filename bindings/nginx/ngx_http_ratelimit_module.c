/* SPDX-License-Identifier: MIT */
/*
 * ngx_http_ratelimit_module: libratelimit's limits as nginx directives.
 *
 * Configuration is parsed and validated in the master (so `nginx -t` fails on
 * a bad spec, an unknown limit or an unreadable secret). The master opens one
 * shared instance for the host (rl_open_shared: no thread, no connection a
 * fork would break); with a Redis each worker joins the host's sync in
 * init_process (rl_shared_attach, which also starts the worker's own Redis
 * connections for mode=exact limits and quotas) and leaves it in
 * exit_process (rl_close). A local limit is per host whatever else the
 * configuration holds. See README.md.
 *
 * This file holds the module's tables, the life of its configuration
 * structs and the check of a configuration as a whole; the directives, the
 * shared instance's lifecycle and the request path have files of their own
 * (ngx_http_ratelimit.h lists them).
 */
#include "ngx_http_ratelimit.h"

static ngx_conf_enum_t ngx_http_ratelimit_log_levels[] = {
    { ngx_string("info"), NGX_LOG_INFO },
    { ngx_string("notice"), NGX_LOG_NOTICE },
    { ngx_string("warn"), NGX_LOG_WARN },
    { ngx_string("error"), NGX_LOG_ERR },
    { ngx_null_string, 0 }
};

static ngx_conf_num_bounds_t ngx_http_ratelimit_status_bounds = {
    ngx_conf_check_num_bounds, 400, 599
};

ngx_int_t ngx_http_ratelimit_status_index = NGX_ERROR;

static ngx_int_t ngx_http_ratelimit_add_variables(ngx_conf_t *cf);
static ngx_int_t ngx_http_ratelimit_init(ngx_conf_t *cf);
static void *ngx_http_ratelimit_create_main_conf(ngx_conf_t *cf);
static char *ngx_http_ratelimit_init_main_conf(ngx_conf_t *cf, void *conf);
static void *ngx_http_ratelimit_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_ratelimit_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child);

static ngx_command_t ngx_http_ratelimit_commands[] = {
    { ngx_string("ratelimit_redis"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_str_slot, NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_ratelimit_main_conf_t, redis_url), NULL },
    { ngx_string("ratelimit_secret_file"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
      ngx_http_ratelimit_secret_file, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL },
    { ngx_string("ratelimit_node_id"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
      ngx_http_ratelimit_node_id, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL },
    { ngx_string("ratelimit_key_prefix"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
      ngx_http_ratelimit_key_prefix, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL },
    { ngx_string("ratelimit_expected_nodes"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_num_slot, NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_ratelimit_main_conf_t, expected_nodes), NULL },
    { ngx_string("ratelimit_max_keys"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_num_slot, NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_ratelimit_main_conf_t, max_keys), NULL },
    /* Deprecated, no effect: it sized the per-worker metrics slots of the
     * time each worker had its own instance. Still parsed as a size so an
     * old configuration's typo fails `nginx -t` as it did. */
    { ngx_string("ratelimit_metrics_slot"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_size_slot, NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_ratelimit_main_conf_t, metrics_slot), NULL },
    { ngx_string("ratelimit_exact_timeout"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot, NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_ratelimit_main_conf_t, exact_timeout), NULL },
    { ngx_string("ratelimit_limit"), NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE,
      ngx_http_ratelimit_limit, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL },
    { ngx_string("ratelimit_quota"), NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE,
      ngx_http_ratelimit_quota, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL },
    { ngx_string("ratelimit"),
      NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_2MORE,
      ngx_http_ratelimit_rule, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL },
    { ngx_string("ratelimit_status"),
      NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_num_slot, NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_ratelimit_loc_conf_t, status), &ngx_http_ratelimit_status_bounds },
    { ngx_string("ratelimit_headers"),
      NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_FLAG,
      ngx_conf_set_flag_slot, NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_ratelimit_loc_conf_t, headers), NULL },
    { ngx_string("ratelimit_dry_run"),
      NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_FLAG,
      ngx_conf_set_flag_slot, NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_ratelimit_loc_conf_t, dry_run), NULL },
    { ngx_string("ratelimit_log_level"),
      NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot, NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_ratelimit_loc_conf_t, log_level), &ngx_http_ratelimit_log_levels },
    { ngx_string("ratelimit_metrics"), NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS,
      ngx_http_ratelimit_metrics, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL },
    ngx_null_command
};

static ngx_http_module_t ngx_http_ratelimit_module_ctx = {
    ngx_http_ratelimit_add_variables, /* preconfiguration */
    ngx_http_ratelimit_init,          /* postconfiguration */
    ngx_http_ratelimit_create_main_conf,
    ngx_http_ratelimit_init_main_conf,
    NULL, NULL,                       /* server conf */
    ngx_http_ratelimit_create_loc_conf,
    ngx_http_ratelimit_merge_loc_conf
};

ngx_module_t ngx_http_ratelimit_module = {
    NGX_MODULE_V1,
    &ngx_http_ratelimit_module_ctx,
    ngx_http_ratelimit_commands,
    NGX_HTTP_MODULE,
    NULL,                             /* init master */
    ngx_http_ratelimit_init_module,
    ngx_http_ratelimit_init_process,
    NULL,                             /* init thread */
    NULL,                             /* exit thread */
    ngx_http_ratelimit_exit_process,
    NULL,                             /* exit master */
    NGX_MODULE_V1_PADDING
};

static void *
ngx_http_ratelimit_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_ratelimit_main_conf_t *mcf;

    mcf = ngx_pcalloc(cf->pool, sizeof(*mcf));
    if (mcf == NULL) {
        return NULL;
    }
    if (ngx_array_init(&mcf->defs, cf->pool, 4, sizeof(ngx_http_ratelimit_def_t)) != NGX_OK
        || ngx_array_init(&mcf->qdefs, cf->pool, 2, sizeof(ngx_http_ratelimit_qdef_t))
               != NGX_OK)
    {
        return NULL;
    }
    mcf->expected_nodes = NGX_CONF_UNSET_UINT;
    mcf->max_keys = NGX_CONF_UNSET_UINT;
    mcf->metrics_slot = NGX_CONF_UNSET_SIZE;
    mcf->exact_timeout = NGX_CONF_UNSET_MSEC;
    return mcf;
}

static char *
ngx_http_ratelimit_init_main_conf(ngx_conf_t *cf, void *conf)
{
    ngx_http_ratelimit_main_conf_t *mcf = conf;
    rl_config_t lib;

    (void) cf;
    rl_config_init(&lib); /* the library's exact deadline: one default */
    ngx_conf_init_uint_value(mcf->expected_nodes, 0);
    ngx_conf_init_uint_value(mcf->max_keys, 65536);
    ngx_conf_init_msec_value(mcf->exact_timeout, lib.exact_timeout_ms);
    return NGX_CONF_OK;
}

static void *
ngx_http_ratelimit_create_loc_conf(ngx_conf_t *cf)
{
    ngx_http_ratelimit_loc_conf_t *lcf;

    lcf = ngx_pcalloc(cf->pool, sizeof(*lcf));
    if (lcf == NULL) {
        return NULL;
    }
    lcf->status = NGX_CONF_UNSET_UINT;
    lcf->headers = NGX_CONF_UNSET;
    lcf->dry_run = NGX_CONF_UNSET;
    lcf->log_level = NGX_CONF_UNSET_UINT;
    return lcf;
}

static char *
ngx_http_ratelimit_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_http_ratelimit_loc_conf_t *prev = parent, *conf = child;

    (void) cf;
    /* Like limit_req: a level with its own rules replaces the outer ones. */
    if (conf->rules == NULL) {
        conf->rules = prev->rules;
    }
    ngx_conf_merge_uint_value(conf->status, prev->status, NGX_HTTP_TOO_MANY_REQUESTS);
    ngx_conf_merge_value(conf->headers, prev->headers, 1);
    ngx_conf_merge_value(conf->dry_run, prev->dry_run, 0);
    ngx_conf_merge_uint_value(conf->log_level, prev->log_level, NGX_LOG_ERR);
    return NGX_CONF_OK;
}

static ngx_int_t
ngx_http_ratelimit_status_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v,
                                   uintptr_t data)
{
    (void) r;
    (void) data;
    /* Set by the handler when it decides; unset means not checked. */
    v->not_found = 1;
    return NGX_OK;
}

static ngx_int_t
ngx_http_ratelimit_add_variables(ngx_conf_t *cf)
{
    ngx_str_t name = ngx_string("ratelimit_status");
    ngx_http_variable_t *var;

    var = ngx_http_add_variable(cf, &name, 0);
    if (var == NULL) {
        return NGX_ERROR;
    }
    var->get_handler = ngx_http_ratelimit_status_variable;
    ngx_http_ratelimit_status_index = ngx_http_get_variable_index(cf, &name);
    return ngx_http_ratelimit_status_index == NGX_ERROR ? NGX_ERROR : NGX_OK;
}

/*
 * The library's own URL parser (rl_redis_url_check), without a connection:
 * the message names the bad part and never echoes a password.
 */
static char *
ngx_http_ratelimit_check_url(ngx_conf_t *cf, ngx_http_ratelimit_main_conf_t *mcf)
{
    char url[2048], err[512];
    int rc;

    if (mcf->redis_url.len >= sizeof(url)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratelimit_redis: URL longer than %uz bytes",
                           sizeof(url) - 1);
        return NGX_CONF_ERROR;
    }
    ngx_cpystrn((u_char *) url, mcf->redis_url.data, mcf->redis_url.len + 1);
    err[0] = '\0';
    rc = rl_redis_url_check(url, err, sizeof(err));
    if (rc == 0) {
        return NGX_CONF_OK;
    }
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratelimit_redis: %s (%s)",
                       err[0] ? err : rl_strerror(rc), rl_err_name(rc));
    return NGX_CONF_ERROR;
}

/* The directives a fleet (ratelimit_redis) and its quotas depend on. */
static char *
ngx_http_ratelimit_validate_fleet(ngx_conf_t *cf, ngx_http_ratelimit_main_conf_t *mcf)
{
    if (mcf->redis_url.len > 0 && ngx_http_ratelimit_check_url(cf, mcf) != NGX_CONF_OK) {
        return NGX_CONF_ERROR;
    }
    if (mcf->redis_url.len > 0 && mcf->secret.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "ratelimit_redis: a fleet needs ratelimit_secret_file (the key "
                           "secret every node shares)");
        return NGX_CONF_ERROR;
    }
    if (mcf->qdefs.nelts > 0 && mcf->redis_url.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "ratelimit_quota: quota \"%s\" needs ratelimit_redis (a quota in "
                           "volatile memory is not a quota)",
                           ((ngx_http_ratelimit_qdef_t *) mcf->qdefs.elts)[0].q.name);
        return NGX_CONF_ERROR;
    }
    if (mcf->exact_timeout < 1 || mcf->exact_timeout > 60000) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "ratelimit_exact_timeout: %M ms is outside 1ms..60s",
                           mcf->exact_timeout);
        return NGX_CONF_ERROR;
    }
    return NGX_CONF_OK;
}

/* One ratelimit_limit, added to the local-only check instance rl. */
static char *
ngx_http_ratelimit_validate_limit(ngx_conf_t *cf, ngx_http_ratelimit_main_conf_t *mcf, rl_t *rl,
                                  const ngx_http_ratelimit_def_t *def)
{
    rl_limit_t lim;
    int rc;

    if (def->lim.mode == RL_MODE_TIERED && mcf->redis_url.len > 0) {
        /* The workers' shared instance has no tiered mode
         * (rl_open_shared): refused here, not at the first worker. */
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "ratelimit_limit: limit \"%s\" (line %ui): mode=tiered is not "
                           "supported by the workers' shared instance; use mode=exact "
                           "(every check in Redis) or mode=global",
                           def->lim.name, def->line);
        return NGX_CONF_ERROR;
    }
    lim = def->lim;
    if (lim.mode == RL_MODE_EXACT || lim.mode == RL_MODE_TIERED) {
        if (mcf->redis_url.len == 0) {
            /* Refused, as the library refuses it: each worker alone
             * would admit workers x burst under a name saying exact. */
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "ratelimit_limit: limit \"%s\" (line %ui): mode=%s needs "
                               "Redis, and there is no ratelimit_redis",
                               lim.name, def->line,
                               lim.mode == RL_MODE_EXACT ? "exact" : "tiered");
            return NGX_CONF_ERROR;
        }
        /* The check instance has no Redis: the rest of the limit is
         * checked as a global one (rl_limit_parse checked the mode's
         * own bounds). */
        lim.mode = RL_MODE_GLOBAL;
        lim.near_ppm = 0;
    }
    rc = rl_limit_add(rl, &lim);
    if (rc < 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "ratelimit_limit: limit \"%s\" (line %ui): %s (%s)",
                           def->lim.name, def->line, rl_strerror(rc), rl_err_name(rc));
        return NGX_CONF_ERROR;
    }
    return NGX_CONF_OK;
}

/*
 * Validate the whole configuration the way each worker will use it: a
 * local-only instance (no thread, no socket) takes every limit, so `nginx -t`
 * reports what rl_limit_add would refuse in a worker.
 */
static char *
ngx_http_ratelimit_validate(ngx_conf_t *cf, ngx_http_ratelimit_main_conf_t *mcf)
{
    ngx_http_ratelimit_def_t *defs = mcf->defs.elts;
    rl_config_t cfg;
    ngx_uint_t i;
    rl_t *rl;
    int rc;

    if (ngx_http_ratelimit_validate_fleet(cf, mcf) != NGX_CONF_OK) {
        return NGX_CONF_ERROR;
    }
    rl_config_init(&cfg);
    cfg.log_quiet = 1; /* its refusals are named here, by directive */
    cfg.max_keys = (uint32_t) mcf->max_keys;
    cfg.max_limits = mcf->defs.nelts > 256 ? (uint32_t) mcf->defs.nelts : 256;
    if (mcf->expected_nodes > 0) {
        cfg.expected_nodes = (uint32_t) mcf->expected_nodes;
    }
    rc = rl_open(&rl, &cfg);
    if (rc < 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "ratelimit_max_keys / ratelimit_expected_nodes / ratelimit_limit "
                           "count: %s (%s)", rl_strerror(rc), rl_err_name(rc));
        return NGX_CONF_ERROR;
    }
    for (i = 0; i < mcf->defs.nelts; i++) {
        if (ngx_http_ratelimit_validate_limit(cf, mcf, rl, &defs[i]) != NGX_CONF_OK) {
            rl_close(rl);
            return NGX_CONF_ERROR;
        }
    }
    rl_close(rl);
    return NGX_CONF_OK;
}

static ngx_int_t
ngx_http_ratelimit_init(ngx_conf_t *cf)
{
    ngx_http_ratelimit_main_conf_t *mcf;
    ngx_http_core_main_conf_t *cmcf;
    ngx_http_handler_pt *h;

    mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_ratelimit_module);
    if (ngx_http_ratelimit_validate(cf, mcf) != NGX_CONF_OK) {
        return NGX_ERROR;
    }
    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
    h = ngx_array_push(&cmcf->phases[NGX_HTTP_PREACCESS_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }
    *h = ngx_http_ratelimit_handler;
    return NGX_OK;
}

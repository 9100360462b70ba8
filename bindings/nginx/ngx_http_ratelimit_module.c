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
 */
#include "ngx_http_ratelimit.h"

/* One `ratelimit NAME KEY [cost=N] [id=VALUE]` rule of a location: a
 * limit's, or a quota's (quota >= 0). */
typedef struct {
    ngx_uint_t def;                /* index into the main conf's defs */
    ngx_int_t quota;               /* index into its qdefs, or -1: a limit */
    ngx_http_complex_value_t key;
    ngx_http_complex_value_t *id;  /* a quota's request id; NULL: the worker's own */
    uint64_t cost;
} ngx_http_ratelimit_rule_t;

/* Longest request id a client may give through id= (the rest of
 * RL_QUOTA_ID_MAX is the prefix that keeps it apart from the worker's own). */
#define RL_NGX_ID_MAX (RL_QUOTA_ID_MAX - 2)

typedef struct {
    ngx_array_t *rules;   /* ngx_http_ratelimit_rule_t; NULL: inherit */
    ngx_uint_t status;
    ngx_flag_t headers;
    ngx_flag_t dry_run;
    ngx_uint_t log_level;
} ngx_http_ratelimit_loc_conf_t;

/* $ratelimit_status values; the variable also marks a request as checked,
 * because a request's variables (unlike its module contexts) survive an
 * internal redirect: an error_page or try_files target is not charged twice. */
static ngx_str_t ngx_http_ratelimit_status_text[] = {
    ngx_string("PASSED"), ngx_string("REJECTED"), ngx_string("REJECTED_DRY_RUN"),
    ngx_string("ERROR"),
};
enum { RL_NGX_PASSED, RL_NGX_REJECTED, RL_NGX_DRY, RL_NGX_ERROR };

static ngx_int_t ngx_http_ratelimit_status_index = NGX_ERROR;

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

static char *ngx_http_ratelimit_limit(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_ratelimit_quota(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_ratelimit_rule(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_ratelimit_secret_file(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_ratelimit_node_id(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_ratelimit_metrics(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static ngx_int_t ngx_http_ratelimit_add_variables(ngx_conf_t *cf);
static ngx_int_t ngx_http_ratelimit_init(ngx_conf_t *cf);
static void *ngx_http_ratelimit_create_main_conf(ngx_conf_t *cf);
static char *ngx_http_ratelimit_init_main_conf(ngx_conf_t *cf, void *conf);
static void *ngx_http_ratelimit_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_ratelimit_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child);
static ngx_int_t ngx_http_ratelimit_init_module(ngx_cycle_t *cycle);
static ngx_int_t ngx_http_ratelimit_init_process(ngx_cycle_t *cycle);
static void ngx_http_ratelimit_exit_process(ngx_cycle_t *cycle);

static ngx_command_t ngx_http_ratelimit_commands[] = {
    { ngx_string("ratelimit_redis"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_str_slot, NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_ratelimit_main_conf_t, redis_url), NULL },
    { ngx_string("ratelimit_secret_file"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
      ngx_http_ratelimit_secret_file, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL },
    { ngx_string("ratelimit_node_id"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
      ngx_http_ratelimit_node_id, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL },
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

/* ---------------------------------------------------------------- config */

/* A `ratelimit` rule names a limit or a quota: one name may not be both. */
static char *
ngx_http_ratelimit_name_free(ngx_conf_t *cf, ngx_command_t *cmd,
                             ngx_http_ratelimit_main_conf_t *mcf, const char *name,
                             ngx_flag_t is_limit)
{
    ngx_http_ratelimit_def_t *defs = mcf->defs.elts;
    ngx_http_ratelimit_qdef_t *qdefs = mcf->qdefs.elts;
    ngx_uint_t i;

    if (is_limit) {
        for (i = 0; i < mcf->qdefs.nelts; i++) {
            if (ngx_strcmp(qdefs[i].q.name, name) == 0) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "%V: \"%s\" is already a quota's name (line %ui)",
                                   &cmd->name, name, qdefs[i].line);
                return NGX_CONF_ERROR;
            }
        }
    } else {
        for (i = 0; i < mcf->defs.nelts; i++) {
            if (ngx_strcmp(defs[i].lim.name, name) == 0) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "%V: \"%s\" is already a limit's name (line %ui)",
                                   &cmd->name, name, defs[i].line);
                return NGX_CONF_ERROR;
            }
        }
    }
    return NGX_CONF_OK;
}

static char *
ngx_http_ratelimit_limit(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_ratelimit_main_conf_t *mcf = conf;
    ngx_str_t *value = cf->args->elts;
    ngx_http_ratelimit_def_t *def, *defs;
    u_char *spec, *p;
    size_t len = 0;
    char err[256];
    ngx_uint_t i;
    int rc;

    /* The spec may be one quoted argument or several words. */
    for (i = 1; i < cf->args->nelts; i++) {
        len += value[i].len + 1;
    }
    spec = ngx_pnalloc(cf->pool, len + 1);
    if (spec == NULL) {
        return NGX_CONF_ERROR;
    }
    p = spec;
    for (i = 1; i < cf->args->nelts; i++) {
        if (i > 1) {
            *p++ = ' ';
        }
        p = ngx_cpymem(p, value[i].data, value[i].len);
    }
    *p = '\0';

    def = ngx_array_push(&mcf->defs);
    if (def == NULL) {
        return NGX_CONF_ERROR;
    }
    ngx_memzero(def, sizeof(*def));
    def->line = cf->conf_file->line;
    err[0] = '\0';
    rc = rl_limit_parse(&def->lim, (const char *) spec, err, sizeof(err));
    if (rc < 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V: %s (%s) in \"%s\"", &cmd->name,
                           err[0] ? err : rl_strerror(rc), rl_err_name(rc), spec);
        return NGX_CONF_ERROR;
    }
    defs = mcf->defs.elts;
    for (i = 0; i + 1 < mcf->defs.nelts; i++) {
        if (ngx_strcmp(defs[i].lim.name, def->lim.name) == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "%V: limit \"%s\" is already defined (line %ui)", &cmd->name,
                               def->lim.name, defs[i].line);
            return NGX_CONF_ERROR;
        }
    }
    return ngx_http_ratelimit_name_free(cf, cmd, mcf, def->lim.name, 1);
}

/* The spec of a directive: its words joined by spaces (one quoted argument
 * or several words), NUL-terminated, in the configuration's pool. */
static u_char *
ngx_http_ratelimit_spec(ngx_conf_t *cf)
{
    ngx_str_t *value = cf->args->elts;
    u_char *spec, *p;
    size_t len = 0;
    ngx_uint_t i;

    for (i = 1; i < cf->args->nelts; i++) {
        len += value[i].len + 1;
    }
    spec = ngx_pnalloc(cf->pool, len + 1);
    if (spec == NULL) {
        return NULL;
    }
    p = spec;
    for (i = 1; i < cf->args->nelts; i++) {
        if (i > 1) {
            *p++ = ' ';
        }
        p = ngx_cpymem(p, value[i].data, value[i].len);
    }
    *p = '\0';
    return spec;
}

static char *
ngx_http_ratelimit_quota(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_ratelimit_main_conf_t *mcf = conf;
    ngx_http_ratelimit_qdef_t *def, *qdefs;
    u_char *spec;
    char err[256];
    ngx_uint_t i;
    int rc;

    spec = ngx_http_ratelimit_spec(cf);
    def = ngx_array_push(&mcf->qdefs);
    if (spec == NULL || def == NULL) {
        return NGX_CONF_ERROR;
    }
    ngx_memzero(def, sizeof(*def));
    def->line = cf->conf_file->line;
    err[0] = '\0';
    rc = rl_quota_parse(&def->q, (const char *) spec, err, sizeof(err));
    if (rc < 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V: %s (%s) in \"%s\"", &cmd->name,
                           err[0] ? err : rl_strerror(rc), rl_err_name(rc), spec);
        return NGX_CONF_ERROR;
    }
    qdefs = mcf->qdefs.elts;
    for (i = 0; i + 1 < mcf->qdefs.nelts; i++) {
        if (ngx_strcmp(qdefs[i].q.name, def->q.name) == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "%V: quota \"%s\" is already defined (line %ui)", &cmd->name,
                               def->q.name, qdefs[i].line);
            return NGX_CONF_ERROR;
        }
    }
    return ngx_http_ratelimit_name_free(cf, cmd, mcf, def->q.name, 0);
}

static uint64_t
ngx_http_ratelimit_burst(const rl_limit_t *lim)
{
    return lim->burst ? lim->burst : lim->rate.count;
}

/* Rules that suspend the request (a mode=exact limit's, a quota's): all
 * or nothing needs refunds, and Redis takes none, so a location has at
 * most one, asked last. */
static ngx_flag_t
ngx_http_ratelimit_suspends(ngx_http_ratelimit_main_conf_t *mcf,
                            const ngx_http_ratelimit_rule_t *rule)
{
    ngx_http_ratelimit_def_t *defs = mcf->defs.elts;

    return rule->quota >= 0 || defs[rule->def].lim.mode == RL_MODE_EXACT;
}

static char *
ngx_http_ratelimit_rule(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_ratelimit_loc_conf_t *lcf = conf;
    ngx_http_ratelimit_main_conf_t *mcf;
    ngx_http_compile_complex_value_t ccv;
    ngx_http_ratelimit_def_t *defs;
    ngx_http_ratelimit_qdef_t *qdefs;
    ngx_http_ratelimit_rule_t *rule, *rules;
    ngx_str_t *value = cf->args->elts, id;
    ngx_flag_t has_cost = 0, has_id = 0;
    uint64_t most;
    ngx_int_t cost = 1;
    ngx_uint_t i, k;

    mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_ratelimit_module);
    if (cf->args->nelts > 5) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V: too many words: \"%V\"", &cmd->name,
                           &value[5]);
        return NGX_CONF_ERROR;
    }
    if (lcf->rules == NULL) {
        lcf->rules = ngx_array_create(cf->pool, 2, sizeof(ngx_http_ratelimit_rule_t));
        if (lcf->rules == NULL) {
            return NGX_CONF_ERROR;
        }
    }
    if (lcf->rules->nelts >= RL_MULTI_MAX) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V: more than %d rules in one location",
                           &cmd->name, RL_MULTI_MAX);
        return NGX_CONF_ERROR;
    }
    rule = ngx_array_push(lcf->rules);
    if (rule == NULL) {
        return NGX_CONF_ERROR;
    }
    ngx_memzero(rule, sizeof(*rule));
    rule->quota = -1;

    defs = mcf->defs.elts;
    qdefs = mcf->qdefs.elts;
    for (i = 0; i < mcf->defs.nelts; i++) {
        if (ngx_strlen(defs[i].lim.name) == value[1].len
            && ngx_strncmp(defs[i].lim.name, value[1].data, value[1].len) == 0)
        {
            break;
        }
    }
    rule->def = i;
    if (i == mcf->defs.nelts) {
        for (k = 0; k < mcf->qdefs.nelts; k++) {
            if (ngx_strlen(qdefs[k].q.name) == value[1].len
                && ngx_strncmp(qdefs[k].q.name, value[1].data, value[1].len) == 0)
            {
                break;
            }
        }
        if (k == mcf->qdefs.nelts) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "%V: unknown limit or quota \"%V\" (define it with "
                               "ratelimit_limit or ratelimit_quota first)",
                               &cmd->name, &value[1]);
            return NGX_CONF_ERROR;
        }
        rule->quota = (ngx_int_t) k;
        rule->def = 0;
    }
    if (ngx_http_ratelimit_suspends(mcf, rule)) {
        rules = lcf->rules->elts;
        for (k = 0; k + 1 < lcf->rules->nelts; k++) {
            if (ngx_http_ratelimit_suspends(mcf, &rules[k])) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "%V: a second mode=exact or quota rule (\"%V\") in one "
                                   "location: all or nothing cannot refund Redis",
                                   &cmd->name, &value[1]);
                return NGX_CONF_ERROR;
            }
        }
    }

    ngx_memzero(&ccv, sizeof(ccv));
    ccv.cf = cf;
    ccv.value = &value[2];
    ccv.complex_value = &rule->key;
    if (ngx_http_compile_complex_value(&ccv) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    most = rule->quota >= 0 ? qdefs[rule->quota].q.amount : ngx_http_ratelimit_burst(&defs[i].lim);
    for (k = 3; k < cf->args->nelts; k++) {
        if (value[k].len > 5 && ngx_strncmp(value[k].data, "cost=", 5) == 0 && !has_cost) {
            has_cost = 1;
            cost = ngx_atoi(value[k].data + 5, value[k].len - 5);
            if (cost == NGX_ERROR || cost < 1 || cost > (ngx_int_t) UINT32_MAX) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V: invalid cost \"%V\"", &cmd->name,
                                   &value[k]);
                return NGX_CONF_ERROR;
            }
            if ((uint64_t) cost > most) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "%V: cost \"%V\" exceeds the %s of \"%V\" (%uL): it "
                                   "could never be admitted", &cmd->name, &value[k],
                                   rule->quota >= 0 ? "amount" : "burst", &value[1], most);
                return NGX_CONF_ERROR;
            }
            continue;
        }
        if (value[k].len > 3 && ngx_strncmp(value[k].data, "id=", 3) == 0 && !has_id) {
            has_id = 1;
            if (rule->quota < 0) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "%V: \"%V\": only a quota's rule takes a request id, and "
                                   "\"%V\" is a limit", &cmd->name, &value[k], &value[1]);
                return NGX_CONF_ERROR;
            }
            id.data = value[k].data + 3;
            id.len = value[k].len - 3;
            rule->id = ngx_pcalloc(cf->pool, sizeof(ngx_http_complex_value_t));
            if (rule->id == NULL) {
                return NGX_CONF_ERROR;
            }
            ngx_memzero(&ccv, sizeof(ccv));
            ccv.cf = cf;
            ccv.value = &id;
            ccv.complex_value = rule->id;
            if (ngx_http_compile_complex_value(&ccv) != NGX_OK) {
                return NGX_CONF_ERROR;
            }
            continue;
        }
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "%V: unknown or repeated word \"%V\" (expected cost=N%s)", &cmd->name,
                           &value[k], rule->quota >= 0 ? " or id=VALUE" : "");
        return NGX_CONF_ERROR;
    }
    rule->cost = (uint64_t) cost;
    return NGX_CONF_OK;
}

static char *
ngx_http_ratelimit_secret_file(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_ratelimit_main_conf_t *mcf = conf;
    ngx_str_t *value = cf->args->elts;
    ngx_file_info_t fi;
    ngx_file_t file;
    ssize_t n;
    size_t len;

    if (mcf->secret_file.data != NULL) {
        return "is duplicate";
    }
    mcf->secret_file = value[1];
    if (ngx_conf_full_name(cf->cycle, &mcf->secret_file, 1) != NGX_OK) {
        return NGX_CONF_ERROR;
    }
    ngx_memzero(&file, sizeof(file));
    file.name = mcf->secret_file;
    file.log = cf->log;
    file.fd = ngx_open_file(file.name.data, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
    if (file.fd == NGX_INVALID_FILE) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno, "%V: cannot open \"%V\"", &cmd->name,
                           &file.name);
        return NGX_CONF_ERROR;
    }
    if (ngx_fd_info(file.fd, &fi) == NGX_FILE_ERROR || ngx_file_size(&fi) > 4096) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V: \"%V\" is not a file of at most 4096 bytes",
                           &cmd->name, &file.name);
        ngx_close_file(file.fd);
        return NGX_CONF_ERROR;
    }
    len = (size_t) ngx_file_size(&fi);
    mcf->secret.data = ngx_pnalloc(cf->pool, len ? len : 1);
    if (mcf->secret.data == NULL) {
        ngx_close_file(file.fd);
        return NGX_CONF_ERROR;
    }
    n = ngx_read_file(&file, mcf->secret.data, len, 0);
    ngx_close_file(file.fd);
    if (n < 0 || (size_t) n != len) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V: cannot read \"%V\"", &cmd->name, &file.name);
        return NGX_CONF_ERROR;
    }
    /* A trailing newline is the editor's, not the secret's. */
    while (len > 0 && (mcf->secret.data[len - 1] == '\n' || mcf->secret.data[len - 1] == '\r')) {
        len--;
    }
    mcf->secret.len = len;
    if (len < 16) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "%V: \"%V\" holds %uz bytes: the key secret needs at least 16",
                           &cmd->name, &file.name, len);
        return NGX_CONF_ERROR;
    }
    return NGX_CONF_OK;
}

static ngx_int_t
ngx_http_ratelimit_node_char(u_char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
           || c == '_' || c == '.' || c == ':' || c == '-';
}

static char *
ngx_http_ratelimit_node_id(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_ratelimit_main_conf_t *mcf = conf;
    ngx_str_t *value = cf->args->elts;
    ngx_uint_t i;

    if (mcf->node_id.data != NULL) {
        return "is duplicate";
    }
    /* Room for the "-w<worker>-<pid>" suffix inside the library's 64 bytes. */
    if (value[1].len == 0 || value[1].len > 32) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V: \"%V\" must be 1 to 32 bytes", &cmd->name,
                           &value[1]);
        return NGX_CONF_ERROR;
    }
    for (i = 0; i < value[1].len; i++) {
        if (!ngx_http_ratelimit_node_char(value[1].data[i])) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "%V: \"%V\" has a byte outside [A-Za-z0-9_.:-]", &cmd->name,
                               &value[1]);
            return NGX_CONF_ERROR;
        }
    }
    mcf->node_id = value[1];
    return NGX_CONF_OK;
}

static char *
ngx_http_ratelimit_metrics(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_core_loc_conf_t *clcf;
    ngx_http_ratelimit_main_conf_t *mcf;

    (void) cmd;
    (void) conf;
    mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_ratelimit_module);
    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_ratelimit_metrics_handler;
    /* A configuration with only this location still opens the instance. */
    mcf->metrics = 1;
    return NGX_CONF_OK;
}

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
    rl_limit_t lim;
    ngx_uint_t i;
    rl_t *rl;
    int rc;

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
        if (defs[i].lim.mode == RL_MODE_TIERED && mcf->redis_url.len > 0) {
            /* The workers' shared instance has no tiered mode
             * (rl_open_shared): refused here, not at the first worker. */
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "ratelimit_limit: limit \"%s\" (line %ui): mode=tiered is not "
                               "supported by the workers' shared instance; use mode=exact "
                               "(every check in Redis) or mode=global",
                               defs[i].lim.name, defs[i].line);
            rl_close(rl);
            return NGX_CONF_ERROR;
        }
        lim = defs[i].lim;
        if (lim.mode == RL_MODE_EXACT || lim.mode == RL_MODE_TIERED) {
            if (mcf->redis_url.len == 0) {
                /* Refused, as the library refuses it: each worker alone
                 * would admit workers x burst under a name saying exact. */
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "ratelimit_limit: limit \"%s\" (line %ui): mode=%s needs "
                                   "Redis, and there is no ratelimit_redis",
                                   lim.name, defs[i].line,
                                   lim.mode == RL_MODE_EXACT ? "exact" : "tiered");
                rl_close(rl);
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
                               defs[i].lim.name, defs[i].line, rl_strerror(rc), rl_err_name(rc));
            rl_close(rl);
            return NGX_CONF_ERROR;
        }
    }
    rl_close(rl);
    return NGX_CONF_OK;
}

static ngx_int_t ngx_http_ratelimit_handler(ngx_http_request_t *r);

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

/* ---------------------------------------------------------------- workers */

static void
ngx_http_ratelimit_log(void *ud, int32_t level, const char *msg)
{
    static const ngx_uint_t map[] = { NGX_LOG_ERR, NGX_LOG_WARN, NGX_LOG_INFO, NGX_LOG_DEBUG };
    ngx_log_t *log = ud != NULL ? ud : ngx_cycle->log;

    /* Called from the library's sync thread too: nginx's thread pools log
     * through the same path (one write(2) per line). A shared instance
     * outlives the cycle that opened it: it logs to the current one. */
    ngx_log_error(map[level >= 0 && level <= 3 ? level : 0], log, 0, "ratelimit: %s", msg);
}

/*
 * The master's shared instance, kept across reloads so the new workers go on
 * from the old workers' buckets (and, with a Redis, the host stays the same
 * node with the same shares): a reload neither refills nor empties a limit.
 * It is replaced only when its sizing changes (ratelimit_max_keys, the
 * number of limits past its room) or its fleet does (ratelimit_redis, the
 * secret, the node id, ratelimit_expected_nodes).
 */
static rl_t *ngx_http_ratelimit_shared;
static uint64_t ngx_http_ratelimit_shared_fleet;
static ngx_uint_t ngx_http_ratelimit_shared_keys;
static ngx_uint_t ngx_http_ratelimit_shared_cap;
static char (*ngx_http_ratelimit_shared_names)[RL_NAME_MAX];
static ngx_uint_t ngx_http_ratelimit_shared_n;
static ngx_msec_t ngx_http_ratelimit_shared_timeout;
/* The quotas the master defined in it (a shared instance's quotas are
 * defined in the process that opened it, and each worker forked later
 * inherits them: rl_open_shared); replaced at each reload (their state is
 * in Redis, under their names: nothing is lost). */
static int *ngx_http_ratelimit_shared_qids;
static ngx_uint_t ngx_http_ratelimit_shared_qn;

static ngx_int_t
ngx_http_ratelimit_shared_quotas(ngx_cycle_t *cycle, ngx_http_ratelimit_main_conf_t *mcf)
{
    ngx_http_ratelimit_qdef_t *qdefs = mcf->qdefs.elts;
    ngx_uint_t i;
    int *qids, rc;

    for (i = 0; i < ngx_http_ratelimit_shared_qn; i++) {
        rl_quota_remove(ngx_http_ratelimit_shared, ngx_http_ratelimit_shared_qids[i]);
    }
    ngx_http_ratelimit_shared_qn = 0;
    qids = ngx_alloc(sizeof(int) * (mcf->qdefs.nelts + 1), cycle->log);
    if (qids == NULL) {
        return NGX_ERROR;
    }
    if (ngx_http_ratelimit_shared_qids != NULL) {
        ngx_free(ngx_http_ratelimit_shared_qids);
    }
    ngx_http_ratelimit_shared_qids = qids;
    for (i = 0; i < mcf->qdefs.nelts; i++) {
        rc = rl_quota_add(ngx_http_ratelimit_shared, &qdefs[i].q);
        if (rc < 0) {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, 0, "ratelimit: quota \"%s\": %s (%s)",
                          qdefs[i].q.name, rl_strerror(rc), rl_err_name(rc));
            return NGX_ERROR;
        }
        qids[ngx_http_ratelimit_shared_qn++] = rc;
    }
    mcf->qids = ngx_pcalloc(cycle->pool, sizeof(int) * (mcf->qdefs.nelts + 1));
    if (mcf->qids == NULL) {
        return NGX_ERROR;
    }
    ngx_memcpy(mcf->qids, qids, sizeof(int) * mcf->qdefs.nelts);
    return NGX_OK;
}

static ngx_int_t
ngx_http_ratelimit_shared_sync(ngx_cycle_t *cycle, ngx_http_ratelimit_main_conf_t *mcf)
{
    ngx_http_ratelimit_def_t *defs = mcf->defs.elts;
    char (*names)[RL_NAME_MAX];
    ngx_uint_t i, j;
    int id;

    names = ngx_alloc(sizeof(*names) * (mcf->defs.nelts + 1), cycle->log);
    if (names == NULL) {
        return NGX_ERROR;
    }
    /* Limits the new configuration dropped go; the old workers' rules on
     * them answer RL_ENOTFOUND (logged, allowed) until those workers exit. */
    for (i = 0; i < ngx_http_ratelimit_shared_n; i++) {
        for (j = 0; j < mcf->defs.nelts; j++) {
            if (ngx_strcmp(defs[j].lim.name, ngx_http_ratelimit_shared_names[i]) == 0) {
                break;
            }
        }
        id = rl_limit_find(ngx_http_ratelimit_shared, ngx_http_ratelimit_shared_names[i]);
        if (j == mcf->defs.nelts && id >= 0) {
            rl_limit_remove(ngx_http_ratelimit_shared, id);
        }
    }
    for (i = 0; i < mcf->defs.nelts; i++) {
        id = rl_limit_find(ngx_http_ratelimit_shared, defs[i].lim.name);
        if (id >= 0) {
            /* Keeps every key's tokens, rescaled to the new parameters. */
            int rc = rl_limit_update(ngx_http_ratelimit_shared, id, &defs[i].lim);
            if (rc < 0) {
                id = rc;
            }
        } else {
            id = rl_limit_add(ngx_http_ratelimit_shared, &defs[i].lim);
        }
        if (id < 0) {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, 0, "ratelimit: limit \"%s\": %s (%s)",
                          defs[i].lim.name, rl_strerror(id), rl_err_name(id));
            ngx_free(names);
            return NGX_ERROR;
        }
        mcf->ids[i] = id;
        ngx_memcpy(names[i], defs[i].lim.name, RL_NAME_MAX);
    }
    if (ngx_http_ratelimit_shared_names != NULL) {
        ngx_free(ngx_http_ratelimit_shared_names);
    }
    ngx_http_ratelimit_shared_names = names;
    ngx_http_ratelimit_shared_n = mcf->defs.nelts;
    return NGX_OK;
}

/* The node id into node (cap bytes): ratelimit_node_id or the host name
 * (at most 32 bytes), bytes outside the library's alphabet replaced; its
 * end. */
static u_char *
ngx_http_ratelimit_node_name(ngx_cycle_t *cycle, ngx_http_ratelimit_main_conf_t *mcf,
    char *node, size_t cap)
{
    ngx_str_t host;
    ngx_uint_t i;
    u_char *p;

    host = mcf->node_id.len ? mcf->node_id : cycle->hostname;
    p = ngx_snprintf((u_char *) node, cap - 1, "%*s", ngx_min(host.len, (size_t) 32), host.data);
    for (i = 0; i < (ngx_uint_t) (p - (u_char *) node); i++) {
        if (!ngx_http_ratelimit_node_char((u_char) node[i])) {
            node[i] = '_';
        }
    }
    *p = '\0';
    return p;
}

/* FNV-1a of the settings that make the host's node: a change reopens. */
static uint64_t
ngx_http_ratelimit_fleet_hash(ngx_http_ratelimit_main_conf_t *mcf, const char *node)
{
    const ngx_str_t parts[] = { mcf->redis_url, mcf->secret,
                                { ngx_strlen(node), (u_char *) node } };
    uint64_t h = 14695981039346656037ULL;
    ngx_uint_t i, j;

    for (i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
        for (j = 0; j < parts[i].len; j++) {
            h = (h ^ parts[i].data[j]) * 1099511628211ULL;
        }
        h = (h ^ 0xff ^ parts[i].len) * 1099511628211ULL;
    }
    return (h ^ mcf->expected_nodes) * 1099511628211ULL;
}

/* Master, at start and at each reload (before the workers are forked). */
static ngx_int_t
ngx_http_ratelimit_init_module(ngx_cycle_t *cycle)
{
    ngx_http_ratelimit_main_conf_t *mcf;
    char node[RL_NAME_MAX], url[2048];
    uint64_t fleet;
    ngx_uint_t cap;
    rl_config_t cfg;
    rl_t *rl;
    int rc;

    mcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_ratelimit_module);
    if (mcf == NULL
        || (mcf->defs.nelts == 0 && mcf->qdefs.nelts == 0 && !mcf->metrics))
    {
        return NGX_OK;
    }
    if (mcf->redis_url.len >= sizeof(url)) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0, "ratelimit_redis: URL too long");
        return NGX_ERROR;
    }
    ngx_http_ratelimit_node_name(cycle, mcf, node, sizeof(node));
    fleet = ngx_http_ratelimit_fleet_hash(mcf, node);
    mcf->ids = ngx_pcalloc(cycle->pool, sizeof(int) * (mcf->defs.nelts + 1));
    if (mcf->ids == NULL) {
        return NGX_ERROR;
    }
    /* Room for the limits of this configuration and of the last one at
     * once (a reload adds before the old names are gone). */
    cap = ngx_max(256, 2 * mcf->defs.nelts);
    if (ngx_http_ratelimit_shared == NULL || ngx_http_ratelimit_shared_keys != mcf->max_keys
        || ngx_http_ratelimit_shared_cap < 2 * mcf->defs.nelts
        || ngx_http_ratelimit_shared_fleet != fleet
        || ngx_http_ratelimit_shared_timeout != mcf->exact_timeout)
    {
        rl_config_init(&cfg);
        cfg.max_keys = (uint32_t) mcf->max_keys;
        cfg.max_limits = (uint32_t) ngx_min(cap, RL_MAX_LIMITS);
        cfg.log = ngx_http_ratelimit_log;
        cfg.log_ud = NULL;
        if (mcf->expected_nodes > 0) {
            cfg.expected_nodes = (uint32_t) mcf->expected_nodes;
        }
        if (mcf->redis_url.len > 0) {
            /* The host is one node of the fleet: its workers attach in
             * init_process; nothing runs in the master. */
            ngx_cpystrn((u_char *) url, mcf->redis_url.data, mcf->redis_url.len + 1);
            cfg.redis_url = url;
            cfg.key_secret = mcf->secret.data;
            cfg.key_secret_len = mcf->secret.len;
            cfg.node_id = node;
            cfg.expected_nodes = (uint32_t) (mcf->expected_nodes ? mcf->expected_nodes : 1);
            cfg.exact_timeout_ms = (uint32_t) mcf->exact_timeout;
            cfg.quota_timeout_ms = (uint32_t) mcf->exact_timeout;
        }
        rc = rl_open_shared(&rl, &cfg);
        if (rc < 0) {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                          "ratelimit: rl_open_shared failed: %s (%s); ratelimit_max_keys %ui",
                          rl_strerror(rc), rl_err_name(rc), mcf->max_keys);
            return NGX_ERROR;
        }
        /* The old workers keep their own view of the old instance until
         * they exit; the master lets go of its view now. */
        rl_close(ngx_http_ratelimit_shared);
        ngx_http_ratelimit_shared = rl;
        ngx_http_ratelimit_shared_fleet = fleet;
        ngx_http_ratelimit_shared_keys = mcf->max_keys;
        ngx_http_ratelimit_shared_cap = cfg.max_limits;
        ngx_http_ratelimit_shared_timeout = mcf->exact_timeout;
        ngx_http_ratelimit_shared_n = 0;
        ngx_http_ratelimit_shared_qn = 0;
    }
    if (ngx_http_ratelimit_shared_sync(cycle, mcf) != NGX_OK
        || ngx_http_ratelimit_shared_quotas(cycle, mcf) != NGX_OK)
    {
        return NGX_ERROR;
    }
    mcf->rl = ngx_http_ratelimit_shared;
    mcf->shared = 1;
    return NGX_OK;
}

static ngx_int_t
ngx_http_ratelimit_init_process(ngx_cycle_t *cycle)
{
    ngx_http_ratelimit_main_conf_t *mcf;
    ngx_http_ratelimit_def_t *defs;
    ngx_flag_t waits;
    ngx_uint_t i;
    int rc;

    mcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_ratelimit_module);
    if (mcf == NULL || !mcf->shared || mcf->redis_url.len == 0) {
        return NGX_OK; /* nothing configured, or local-only: nothing to join */
    }
    /* The master's shared instance, inherited: this worker joins the host's
     * sync (one worker at a time runs it) and gets its own connections for
     * exact checks and quota charges. */
    rc = rl_shared_attach(mcf->rl);
    if (rc < 0) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0, "ratelimit: rl_shared_attach failed: "
                      "%s (%s)", rl_strerror(rc), rl_err_name(rc));
        return NGX_ERROR;
    }
    mcf->rid_epoch = ngx_time();
    /* Rules that wait for Redis answer through this worker's channel. */
    waits = mcf->qdefs.nelts > 0;
    defs = mcf->defs.elts;
    for (i = 0; i < mcf->defs.nelts; i++) {
        waits |= defs[i].lim.mode == RL_MODE_EXACT;
    }
    if (waits && ngx_http_ratelimit_exact_start(cycle, mcf) != NGX_OK) {
        return NGX_ERROR;
    }
    return NGX_OK;
}

static void
ngx_http_ratelimit_exit_process(ngx_cycle_t *cycle)
{
    ngx_http_ratelimit_main_conf_t *mcf;

    mcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_ratelimit_module);
    if (mcf == NULL || mcf->rl == NULL) {
        return;
    }
    /* A shared instance outlives its workers. With a Redis, this worker
     * leaves the host's sync (another worker takes it over, and the last
     * one out hands the host's shares back) and stops its own connections,
     * which answers every exact check and quota charge still in flight. */
    if (mcf->shared && mcf->redis_url.len > 0) {
        rl_close(mcf->rl);
        mcf->rl = NULL;
        /* rl_close answered them all: free their records. */
        ngx_http_ratelimit_exact_stop(cycle, mcf);
    }
}

/* ---------------------------------------------------------------- requests */

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

static ngx_int_t
ngx_http_ratelimit_handler(ngx_http_request_t *r)
{
    ngx_http_ratelimit_main_conf_t *mcf;
    ngx_http_ratelimit_loc_conf_t *lcf;
    ngx_http_ratelimit_rule_t *rules;
    ngx_http_ratelimit_def_t *defs;
    ngx_http_ratelimit_qdef_t *qdefs;
    ngx_http_ratelimit_ctx_t *ctx;
    rl_request_t reqs[RL_MULTI_MAX], exact;
    rl_decision_t out[RL_MULTI_MAX];
    ngx_uint_t map[RL_MULTI_MAX], exact_rule = 0;
    ngx_flag_t has_exact = 0, has_quota = 0;
    ngx_str_t key, qkey = ngx_null_string;
    u_char rid[RL_QUOTA_ID_MAX];
    size_t rid_len = 0;
    ngx_str_t idv;
    size_t n = 0, denied = 0, i;
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
    rules = lcf->rules->elts;
    defs = mcf->defs.elts;
    qdefs = mcf->qdefs.elts;
    for (i = 0; i < lcf->rules->nelts; i++) {
        if (ngx_http_complex_value(r, &rules[i].key, &key) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        if (key.len == 0) {
            continue; /* like limit_req: an empty key is not limited */
        }
        if (key.len > RL_MAX_KEY_LEN) {
            /* A client chooses its header values: an over-long key is
             * refused like an over-limit request, never a 500. */
            ngx_log_error(lcf->log_level, r->connection->log, 0,
                          "ratelimit: key of %s \"%s\" is %uz bytes (at most %d): refused",
                          rules[i].quota >= 0 ? "quota" : "limit",
                          rules[i].quota >= 0 ? qdefs[rules[i].quota].q.name
                                              : defs[rules[i].def].lim.name,
                          key.len, RL_MAX_KEY_LEN);
            ngx_http_ratelimit_set_status(r, lcf->dry_run ? RL_NGX_DRY : RL_NGX_REJECTED);
            return lcf->dry_run ? NGX_DECLINED : (ngx_int_t) lcf->status;
        }
        if (rules[i].quota >= 0) {
            /* A quota: charged last, once the limits admitted (below). */
            if (mcf->qids == NULL) {
                continue; /* a worker without Redis never gets here: -t refuses it */
            }
            qkey = key;
            exact_rule = i;
            has_quota = 1;
            continue;
        }
        if (mcf->exact != NULL && defs[rules[i].def].lim.mode == RL_MODE_EXACT) {
            /* Redis's bucket: asked last, without blocking (below). */
            rl_request_init(&exact);
            exact.limit = mcf->ids[rules[i].def];
            exact.key = key.data;
            exact.key_len = key.len;
            exact.cost = (uint32_t) rules[i].cost;
            exact_rule = i;
            has_exact = 1;
            continue;
        }
        rl_request_init(&reqs[n]);
        reqs[n].limit = mcf->ids[rules[i].def];
        reqs[n].key = key.data;
        reqs[n].key_len = key.len;
        reqs[n].cost = (uint32_t) rules[i].cost;
        rl_decision_init(&out[n]);
        map[n] = i;
        n++;
    }
    if (n == 0 && !has_exact && !has_quota) {
        return NGX_DECLINED;
    }
    if (has_quota) {
        /* The quota's request id: the client's (id=, kept apart from the
         * worker's own by its prefix), or one of this worker's. */
        idv.len = 0;
        if (rules[exact_rule].id != NULL
            && ngx_http_complex_value(r, rules[exact_rule].id, &idv) != NGX_OK)
        {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        if (idv.len > RL_NGX_ID_MAX) {
            ngx_log_error(lcf->log_level, r->connection->log, 0,
                          "ratelimit: request id of quota rule %ui is %uz bytes (at most %d): "
                          "refused", exact_rule + 1, idv.len, RL_NGX_ID_MAX);
            return NGX_HTTP_BAD_REQUEST;
        }
        if (idv.len > 0) {
            rid_len = ngx_cpymem(ngx_cpymem(rid, "i:", 2), idv.data, idv.len) - rid;
        } else {
            /* At most 64 bytes of the host name: the rest always fits. */
            rid_len = ngx_snprintf(rid, sizeof(rid), "g:%*s:%P:%T:%uL",
                                   ngx_min(ngx_cycle->hostname.len, (size_t) 64),
                                   ngx_cycle->hostname.data, ngx_pid, mcf->rid_epoch,
                                   ++mcf->rid_seq) - rid;
        }
    }
    /* All-or-nothing: a request denied by one limit charges none. Local and
     * global limits decide here without waiting. */
    if (n > 0) {
        rc = rl_check_multi(mcf->rl, reqs, n, sizeof(rl_request_t), out, &denied);
        if (rc < 0) {
            return ngx_http_ratelimit_error(r, "rl_check_multi", rc);
        }
        if (rc != RL_ALLOW) {
            return ngx_http_ratelimit_verdict(r, mcf, lcf, 0, NULL, 0, map[denied], &out[denied],
                                              "");
        }
        if (!has_exact && !has_quota) {
            return ngx_http_ratelimit_verdict(r, mcf, lcf, 1, out, n, 0, NULL, "");
        }
    }
    /* An exact limit: the others passed and hold their charges while Redis
     * decides (they are refunded if it denies). The worker goes on serving
     * other requests meanwhile. */
    ctx = ngx_pcalloc(r->pool, sizeof(*ctx));
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ctx->mcf = mcf;
    ctx->exact_rule = exact_rule;
    ctx->nlocal = n;
    ctx->local = ngx_palloc(r->pool, sizeof(rl_request_t) * (n + 1));
    ctx->out = ngx_palloc(r->pool, sizeof(rl_decision_t) * (n + 1));
    ctx->map = ngx_palloc(r->pool, sizeof(ngx_uint_t) * (n + 1));
    if (ctx->local == NULL || ctx->out == NULL || ctx->map == NULL) {
        ngx_http_ratelimit_refund(r, ctx);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ngx_memcpy(ctx->local, reqs, sizeof(rl_request_t) * n);
    ngx_memcpy(ctx->out, out, sizeof(rl_decision_t) * n);
    ngx_memcpy(ctx->map, map, sizeof(ngx_uint_t) * n);
    ngx_http_set_ctx(r, ctx, ngx_http_ratelimit_module);
    if (has_quota) {
        ctx->is_quota = 1;
        rc = ngx_http_ratelimit_quota_charge(r, ctx, mcf->qids[rules[exact_rule].quota], &qkey,
                                             rules[exact_rule].cost, rid, rid_len, &ctx->qr);
        if (rc == RL_PENDING) {
            return NGX_AGAIN;
        }
        ctx->rc = rc;
        return ngx_http_ratelimit_quota_finish(r, lcf, ctx);
    }
    rc = ngx_http_ratelimit_exact_check(r, ctx, &exact);
    if (rc == RL_PENDING) {
        return NGX_AGAIN;
    }
    /* Decided inline (no room for another check in flight: the limit's
     * on_failure answered) or refused. */
    ctx->rc = rc;
    ctx->has_d = 0;
    return ngx_http_ratelimit_exact_finish(r, lcf, ctx);
}

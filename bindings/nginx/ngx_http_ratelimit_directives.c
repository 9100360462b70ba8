/* SPDX-License-Identifier: MIT */
/*
 * The module's own directives: each parsed and checked where nginx reads it,
 * so `nginx -t` names the line at fault (ngx_http_ratelimit_module.c then
 * checks the configuration as a whole).
 */
#include "ngx_http_ratelimit.h"

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

char *
ngx_http_ratelimit_limit(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_ratelimit_main_conf_t *mcf = conf;
    ngx_http_ratelimit_def_t *def, *defs;
    u_char *spec;
    char err[256];
    ngx_uint_t i;
    int rc;

    spec = ngx_http_ratelimit_spec(cf);
    if (spec == NULL) {
        return NGX_CONF_ERROR;
    }
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

char *
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

/* A new rule in the location's list (at most RL_MULTI_MAX), zeroed: a
 * limit's until its name says otherwise. */
static ngx_http_ratelimit_rule_t *
ngx_http_ratelimit_rule_push(ngx_conf_t *cf, ngx_command_t *cmd,
                             ngx_http_ratelimit_loc_conf_t *lcf)
{
    ngx_http_ratelimit_rule_t *rule;

    if (lcf->rules == NULL) {
        lcf->rules = ngx_array_create(cf->pool, 2, sizeof(ngx_http_ratelimit_rule_t));
        if (lcf->rules == NULL) {
            return NULL;
        }
    }
    if (lcf->rules->nelts >= RL_MULTI_MAX) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V: more than %d rules in one location",
                           &cmd->name, RL_MULTI_MAX);
        return NULL;
    }
    rule = ngx_array_push(lcf->rules);
    if (rule == NULL) {
        return NULL;
    }
    ngx_memzero(rule, sizeof(*rule));
    rule->quota = -1;
    return rule;
}

/* The limit or the quota a rule names: rule->def, or rule->quota. */
static char *
ngx_http_ratelimit_rule_target(ngx_conf_t *cf, ngx_command_t *cmd,
                               ngx_http_ratelimit_main_conf_t *mcf,
                               ngx_http_ratelimit_rule_t *rule, ngx_str_t *name)
{
    ngx_http_ratelimit_def_t *defs = mcf->defs.elts;
    ngx_http_ratelimit_qdef_t *qdefs = mcf->qdefs.elts;
    ngx_uint_t i, k;

    for (i = 0; i < mcf->defs.nelts; i++) {
        if (ngx_strlen(defs[i].lim.name) == name->len
            && ngx_strncmp(defs[i].lim.name, name->data, name->len) == 0)
        {
            break;
        }
    }
    rule->def = i;
    if (i < mcf->defs.nelts) {
        return NGX_CONF_OK;
    }
    for (k = 0; k < mcf->qdefs.nelts; k++) {
        if (ngx_strlen(qdefs[k].q.name) == name->len
            && ngx_strncmp(qdefs[k].q.name, name->data, name->len) == 0)
        {
            break;
        }
    }
    if (k == mcf->qdefs.nelts) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "%V: unknown limit or quota \"%V\" (define it with "
                           "ratelimit_limit or ratelimit_quota first)",
                           &cmd->name, name);
        return NGX_CONF_ERROR;
    }
    rule->quota = (ngx_int_t) k;
    rule->def = 0;
    return NGX_CONF_OK;
}

/* The location's last rule, if it suspends the request, is its only one
 * that does. */
static char *
ngx_http_ratelimit_rule_one_wait(ngx_conf_t *cf, ngx_command_t *cmd,
                                 ngx_http_ratelimit_main_conf_t *mcf,
                                 ngx_http_ratelimit_loc_conf_t *lcf, ngx_str_t *name)
{
    ngx_http_ratelimit_rule_t *rules = lcf->rules->elts;
    ngx_uint_t k, last = lcf->rules->nelts - 1;

    if (!ngx_http_ratelimit_suspends(mcf, &rules[last])) {
        return NGX_CONF_OK;
    }
    for (k = 0; k < last; k++) {
        if (ngx_http_ratelimit_suspends(mcf, &rules[k])) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "%V: a second mode=exact or quota rule (\"%V\") in one "
                               "location: all or nothing cannot refund Redis",
                               &cmd->name, name);
            return NGX_CONF_ERROR;
        }
    }
    return NGX_CONF_OK;
}

static char *
ngx_http_ratelimit_compile(ngx_conf_t *cf, ngx_str_t *value, ngx_http_complex_value_t *cv)
{
    ngx_http_compile_complex_value_t ccv;

    ngx_memzero(&ccv, sizeof(ccv));
    ccv.cf = cf;
    ccv.value = value;
    ccv.complex_value = cv;
    return ngx_http_compile_complex_value(&ccv) == NGX_OK ? NGX_CONF_OK : NGX_CONF_ERROR;
}

/* cost=N: at least 1, and no more than the limit's burst or the quota's
 * amount (a request that could never be admitted is a typo). */
static char *
ngx_http_ratelimit_rule_cost(ngx_conf_t *cf, ngx_command_t *cmd,
                             ngx_http_ratelimit_main_conf_t *mcf,
                             ngx_http_ratelimit_rule_t *rule, ngx_str_t *word, ngx_str_t *name)
{
    ngx_http_ratelimit_def_t *defs = mcf->defs.elts;
    ngx_http_ratelimit_qdef_t *qdefs = mcf->qdefs.elts;
    uint64_t most;
    ngx_int_t cost;

    most = rule->quota >= 0 ? qdefs[rule->quota].q.amount
                            : ngx_http_ratelimit_burst(&defs[rule->def].lim);
    cost = ngx_atoi(word->data + 5, word->len - 5);
    if (cost == NGX_ERROR || cost < 1 || cost > (ngx_int_t) UINT32_MAX) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V: invalid cost \"%V\"", &cmd->name, word);
        return NGX_CONF_ERROR;
    }
    if ((uint64_t) cost > most) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "%V: cost \"%V\" exceeds the %s of \"%V\" (%uL): it "
                           "could never be admitted", &cmd->name, word,
                           rule->quota >= 0 ? "amount" : "burst", name, most);
        return NGX_CONF_ERROR;
    }
    rule->cost = (uint64_t) cost;
    return NGX_CONF_OK;
}

/* id=VALUE: a quota's request id, from the request (a client's retry is
 * charged once). */
static char *
ngx_http_ratelimit_rule_id(ngx_conf_t *cf, ngx_command_t *cmd, ngx_http_ratelimit_rule_t *rule,
                           ngx_str_t *word, ngx_str_t *name)
{
    ngx_str_t id;

    if (rule->quota < 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "%V: \"%V\": only a quota's rule takes a request id, and "
                           "\"%V\" is a limit", &cmd->name, word, name);
        return NGX_CONF_ERROR;
    }
    id.data = word->data + 3;
    id.len = word->len - 3;
    rule->id = ngx_pcalloc(cf->pool, sizeof(ngx_http_complex_value_t));
    if (rule->id == NULL) {
        return NGX_CONF_ERROR;
    }
    return ngx_http_ratelimit_compile(cf, &id, rule->id);
}

char *
ngx_http_ratelimit_rule(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_ratelimit_loc_conf_t *lcf = conf;
    ngx_http_ratelimit_main_conf_t *mcf;
    ngx_http_ratelimit_rule_t *rule;
    ngx_str_t *value = cf->args->elts;
    ngx_flag_t has_cost = 0, has_id = 0;
    ngx_uint_t k;

    mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_ratelimit_module);
    if (cf->args->nelts > 5) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V: too many words: \"%V\"", &cmd->name,
                           &value[5]);
        return NGX_CONF_ERROR;
    }
    rule = ngx_http_ratelimit_rule_push(cf, cmd, lcf);
    if (rule == NULL
        || ngx_http_ratelimit_rule_target(cf, cmd, mcf, rule, &value[1]) != NGX_CONF_OK
        || ngx_http_ratelimit_rule_one_wait(cf, cmd, mcf, lcf, &value[1]) != NGX_CONF_OK
        || ngx_http_ratelimit_compile(cf, &value[2], &rule->key) != NGX_CONF_OK)
    {
        return NGX_CONF_ERROR;
    }
    rule->cost = 1;
    for (k = 3; k < cf->args->nelts; k++) {
        if (value[k].len > 5 && ngx_strncmp(value[k].data, "cost=", 5) == 0 && !has_cost) {
            has_cost = 1;
            if (ngx_http_ratelimit_rule_cost(cf, cmd, mcf, rule, &value[k], &value[1])
                != NGX_CONF_OK)
            {
                return NGX_CONF_ERROR;
            }
            continue;
        }
        if (value[k].len > 3 && ngx_strncmp(value[k].data, "id=", 3) == 0 && !has_id) {
            has_id = 1;
            if (ngx_http_ratelimit_rule_id(cf, cmd, rule, &value[k], &value[1]) != NGX_CONF_OK) {
                return NGX_CONF_ERROR;
            }
            continue;
        }
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "%V: unknown or repeated word \"%V\" (expected cost=N%s)", &cmd->name,
                           &value[k], rule->quota >= 0 ? " or id=VALUE" : "");
        return NGX_CONF_ERROR;
    }
    return NGX_CONF_OK;
}

char *
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
    /* 4096 bytes of secret and the line ending the rule below drops. */
    if (ngx_fd_info(file.fd, &fi) == NGX_FILE_ERROR || ngx_file_size(&fi) > 4098) {
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
    /* One final "\n" or "\r\n" is the editor's, not the secret's: the rule
     * of every component that reads a secret file (docs/fleet.md, "The
     * secret file"). */
    if (len > 0 && mcf->secret.data[len - 1] == '\n') {
        len -= (len > 1 && mcf->secret.data[len - 2] == '\r') ? 2 : 1;
    }
    mcf->secret.len = len;
    if (len > 4096) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V: \"%V\" is not a file of at most 4096 bytes",
                           &cmd->name, &file.name);
        return NGX_CONF_ERROR;
    }
    if (len < 16) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "%V: \"%V\" holds %uz bytes: the key secret needs at least 16",
                           &cmd->name, &file.name, len);
        return NGX_CONF_ERROR;
    }
    return NGX_CONF_OK;
}

ngx_int_t
ngx_http_ratelimit_node_char(u_char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
           || c == '_' || c == '.' || c == ':' || c == '-';
}

/* A name directive's argument: 1..max bytes of the library's alphabet. */
static char *
ngx_http_ratelimit_name_arg(ngx_conf_t *cf, ngx_command_t *cmd, ngx_str_t *slot, size_t max)
{
    ngx_str_t *value = cf->args->elts;
    ngx_uint_t i;

    if (slot->data != NULL) {
        return "is duplicate";
    }
    if (value[1].len == 0 || value[1].len > max) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V: \"%V\" must be 1 to %uz bytes", &cmd->name,
                           &value[1], max);
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
    *slot = value[1];
    return NGX_CONF_OK;
}

char *
ngx_http_ratelimit_node_id(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_ratelimit_main_conf_t *mcf = conf;

    /* The host is one node (no worker suffix): the library's whole length. */
    return ngx_http_ratelimit_name_arg(cf, cmd, &mcf->node_id, NGX_HTTP_RATELIMIT_NODE_ID_MAX);
}

char *
ngx_http_ratelimit_key_prefix(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_ratelimit_main_conf_t *mcf = conf;

    return ngx_http_ratelimit_name_arg(cf, cmd, &mcf->key_prefix, NGX_HTTP_RATELIMIT_PREFIX_MAX);
}

char *
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

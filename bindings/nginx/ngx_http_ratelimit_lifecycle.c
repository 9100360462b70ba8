/* SPDX-License-Identifier: MIT */
/*
 * The master's shared instance and the workers' part in it: init_module
 * opens or keeps it and defines the configuration's limits and quotas in
 * it; with a Redis, init_process attaches a worker to the host's sync and
 * exit_process detaches it.
 */
#include "ngx_http_ratelimit.h"

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
 * (at most the library's 64 bytes, as rl_open cuts a host name), bytes
 * outside the library's alphabet replaced; its end. */
static u_char *
ngx_http_ratelimit_node_name(ngx_cycle_t *cycle, ngx_http_ratelimit_main_conf_t *mcf,
    char *node, size_t cap)
{
    ngx_str_t host;
    ngx_uint_t i;
    u_char *p;

    host = mcf->node_id.len ? mcf->node_id : cycle->hostname;
    p = ngx_snprintf((u_char *) node, cap - 1, "%*s", ngx_min(host.len, (size_t) NGX_HTTP_RATELIMIT_NODE_ID_MAX), host.data);
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
    const ngx_str_t parts[] = { mcf->redis_url, mcf->secret, mcf->key_prefix,
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

/* The longest ratelimit_redis URL the instance is given (NUL included). */
#define RL_NGX_URL_MAX 2048

/* The shared instance cannot serve this configuration: there is none yet,
 * or its sizing, its fleet or its exact timeout changed. */
static ngx_flag_t
ngx_http_ratelimit_shared_stale(ngx_http_ratelimit_main_conf_t *mcf, uint64_t fleet)
{
    return ngx_http_ratelimit_shared == NULL || ngx_http_ratelimit_shared_keys != mcf->max_keys
           || ngx_http_ratelimit_shared_cap < 2 * mcf->defs.nelts
           || ngx_http_ratelimit_shared_fleet != fleet
           || ngx_http_ratelimit_shared_timeout != mcf->exact_timeout;
}

/* A new shared instance for this configuration, in place of the last one
 * (node: the host's node id, fleet: its settings' hash). */
static ngx_int_t
ngx_http_ratelimit_shared_open(ngx_cycle_t *cycle, ngx_http_ratelimit_main_conf_t *mcf,
                               char *node, uint64_t fleet)
{
    char url[RL_NGX_URL_MAX], prefix[NGX_HTTP_RATELIMIT_PREFIX_MAX + 1];
    ngx_uint_t cap;
    rl_config_t cfg;
    rl_t *rl;
    int rc;

    /* Room for the limits of this configuration and of the last one at
     * once (a reload adds before the old names are gone). */
    cap = ngx_max(256, 2 * mcf->defs.nelts);
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
        if (mcf->key_prefix.len > 0) {
            ngx_cpystrn((u_char *) prefix, mcf->key_prefix.data, mcf->key_prefix.len + 1);
            cfg.key_prefix = prefix;
        }
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
    return NGX_OK;
}

/* Master, at start and at each reload (before the workers are forked). */
ngx_int_t
ngx_http_ratelimit_init_module(ngx_cycle_t *cycle)
{
    ngx_http_ratelimit_main_conf_t *mcf;
    char node[NGX_HTTP_RATELIMIT_NODE_ID_MAX + 1];
    uint64_t fleet;

    mcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_ratelimit_module);
    if (mcf == NULL
        || (mcf->defs.nelts == 0 && mcf->qdefs.nelts == 0 && !mcf->metrics))
    {
        return NGX_OK;
    }
    if (mcf->redis_url.len >= RL_NGX_URL_MAX) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0, "ratelimit_redis: URL too long");
        return NGX_ERROR;
    }
    ngx_http_ratelimit_node_name(cycle, mcf, node, sizeof(node));
    fleet = ngx_http_ratelimit_fleet_hash(mcf, node);
    mcf->ids = ngx_pcalloc(cycle->pool, sizeof(int) * (mcf->defs.nelts + 1));
    if (mcf->ids == NULL) {
        return NGX_ERROR;
    }
    if (ngx_http_ratelimit_shared_stale(mcf, fleet)
        && ngx_http_ratelimit_shared_open(cycle, mcf, node, fleet) != NGX_OK)
    {
        return NGX_ERROR;
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

ngx_int_t
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

void
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

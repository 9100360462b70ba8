/* SPDX-License-Identifier: MIT */
/*
 * The Lua scripts a client runs, one table entry each: its source, its SHA
 * once loaded, and its load state. SCRIPT LOAD, and forgetting a script on
 * NOSCRIPT or a lost connection, are handled here once for every script;
 * EVALSHA callers only ask whether a script is ready and for its SHA. The
 * owner's `loaded` hook runs after each SCRIPT LOAD reply (the state already
 * updated), for what a load means to it (connected, a counter, a log line).
 */
#ifndef RL_REDIS_SCRIPTS_H
#define RL_REDIS_SCRIPTS_H

#include <stdint.h>
#include <hiredis/async.h>

#define RL_REDIS_SCRIPTS_MAX 4

enum { RL_SCRIPT_UNLOADED, RL_SCRIPT_LOADING, RL_SCRIPT_READY };

struct rl_redis_scripts;

typedef struct rl_redis_script {
    const char *source;
    char sha[41];
    int state;
    uint64_t since_ms; /* the loop time its SCRIPT LOAD was sent */
    struct rl_redis_scripts *reg;
} rl_redis_script_t;

/* reply: NULL when the connection went before the answer. */
typedef void rl_redis_script_loaded_fn(void *owner, unsigned id, const redisReply *reply);

typedef struct rl_redis_scripts {
    rl_redis_script_t s[RL_REDIS_SCRIPTS_MAX];
    unsigned n;
    rl_redis_script_loaded_fn *loaded;
    void *owner;
} rl_redis_scripts_t;

/* sources[0, n) (n <= RL_REDIS_SCRIPTS_MAX) must outlive the registry. */
void rl__redis_scripts_init(rl_redis_scripts_t *r, const char *const *sources, unsigned n,
                            rl_redis_script_loaded_fn *loaded, void *owner);

/* Queue SCRIPT LOAD of script id on ac (state: loading). 0, or -1 if
 * hiredis refused the command or ac is NULL (state still loading: see
 * scripts.c). */
int rl__redis_scripts_load(rl_redis_scripts_t *r, redisAsyncContext *ac, unsigned id,
                           uint64_t now_ms);

/* Script id is no longer in the server's cache (NOSCRIPT): load it again. */
static inline void rl__redis_scripts_forget(rl_redis_scripts_t *r, unsigned id)
{
    r->s[id].state = RL_SCRIPT_UNLOADED;
}

/* The connection went: every script must be loaded again. */
void rl__redis_scripts_reset(rl_redis_scripts_t *r);

static inline int rl__redis_scripts_ready(const rl_redis_scripts_t *r, unsigned id)
{
    return r->s[id].state == RL_SCRIPT_READY;
}

static inline int rl__redis_scripts_loading(const rl_redis_scripts_t *r, unsigned id)
{
    return r->s[id].state == RL_SCRIPT_LOADING;
}

static inline const char *rl__redis_scripts_sha(const rl_redis_scripts_t *r, unsigned id)
{
    return r->s[id].sha;
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The Lua scripts a client runs, one table entry each: its source, its SHA
 * once loaded, and its load state. SCRIPT LOAD, and forgetting a script on
 * NOSCRIPT or a lost connection, are handled here once for every script;
 * EVALSHA callers only ask whether a script is ready and for its SHA. The
 * owner's `loaded` hook runs after each SCRIPT LOAD reply (the state already
 * updated), for what a load means to it (connected, a counter, a log line).
 *
 * Some servers do not keep scripts: SCRIPT may be disabled (rename-command,
 * managed services), or a proxy before several servers answers NOSCRIPT
 * for a SHA it loaded. A script whose SCRIPT LOAD is refused as an unknown
 * command, or that is forgotten a second time on one connection, is run
 * with EVAL and its source from then on (until the connection is made
 * again): callers take the command and its first argument from
 * rl__redis_scripts_verb and rl__redis_scripts_body.
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
    int eval;          /* run with EVAL and the source (see above) */
    unsigned forgotten; /* NOSCRIPTs on this connection */
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
    rl_redis_script_t *sc = &r->s[id];
    sc->forgotten++;
    sc->eval |= sc->forgotten > 1;
    sc->state = sc->eval ? RL_SCRIPT_READY : RL_SCRIPT_UNLOADED;
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

/* The command that runs a ready script: EVALSHA and its SHA, or EVAL and
 * its source. */
static inline const char *rl__redis_scripts_verb(const rl_redis_scripts_t *r, unsigned id)
{
    return r->s[id].eval ? "EVAL" : "EVALSHA";
}

static inline const char *rl__redis_scripts_body(const rl_redis_scripts_t *r, unsigned id)
{
    return r->s[id].eval ? r->s[id].source : r->s[id].sha;
}

#endif

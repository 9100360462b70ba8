/* SPDX-License-Identifier: MIT */
/* The script registry (see lua/scripts.h). */
#include "redis/scripts.h"
#include <string.h>
#include "redis/reply.h"

void rl__redis_scripts_init(rl_redis_scripts_t *r, const char *const *sources, unsigned n,
                            rl_redis_script_loaded_fn *loaded, void *owner)
{
    r->n = n < RL_REDIS_SCRIPTS_MAX ? n : RL_REDIS_SCRIPTS_MAX;
    r->loaded = loaded;
    r->owner = owner;
    for (unsigned i = 0; i < r->n; i++) {
        r->s[i].source = sources[i];
        r->s[i].sha[0] = '\0';
        r->s[i].state = RL_SCRIPT_UNLOADED;
        r->s[i].since_ms = 0;
        r->s[i].eval = 0;
        r->s[i].forgotten = 0;
        r->s[i].reg = r;
    }
}

/* SCRIPT itself refused (renamed away, or not offered): EVAL still runs. */
static int script_refused(const redisReply *r)
{
    return r != NULL && r->type == REDIS_REPLY_ERROR &&
           (strncmp(r->str, "ERR unknown command", 19) == 0 ||
            strncmp(r->str, "ERR unknown subcommand", 22) == 0);
}

static void on_loaded(redisAsyncContext *ac, void *reply, void *priv)
{
    (void)ac;
    rl_redis_script_t *sc = priv;
    rl_redis_scripts_t *r = sc->reg;
    /* A load answered after the connection was lost (reset) and a new one
     * sent (loading again) is this one's answer: replies come in order on
     * one connection, and a lost one answers every pending load with NULL. */
    if (script_refused(reply))
        sc->eval = 1;
    sc->state = sc->eval || rl__redis_sha_reply(reply, sc->sha) ? RL_SCRIPT_READY
                                                                : RL_SCRIPT_UNLOADED;
    r->loaded(r->owner, (unsigned)(sc - r->s), reply);
}

int rl__redis_scripts_load(rl_redis_scripts_t *r, redisAsyncContext *ac, unsigned id,
                           uint64_t now_ms)
{
    rl_redis_script_t *sc = &r->s[id];
    sc->state = RL_SCRIPT_LOADING;
    sc->since_ms = now_ms;
    if (ac == NULL)
        return -1; /* no server connected: as a refused command */
    /* A command hiredis refuses (a connection being torn down) stays
     * "loading": the owner's load deadline notices it like an unanswered
     * one, and the connection's loss resets it anyway. */
    return redisAsyncCommand(ac, on_loaded, sc, "SCRIPT LOAD %s", sc->source) == REDIS_OK ? 0
                                                                                           : -1;
}

void rl__redis_scripts_reset(rl_redis_scripts_t *r)
{
    for (unsigned i = 0; i < r->n; i++) {
        r->s[i].state = RL_SCRIPT_UNLOADED;
        r->s[i].eval = 0;
        r->s[i].forgotten = 0;
    }
}

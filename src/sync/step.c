/* SPDX-License-Identifier: MIT */
/*
 * Manual rounds (sync/sync.h: rl__sync_step): the driver that starts a round
 * only when another thread asks, with the virtual time the Redis scripts
 * use instead of TIME, and hands the round's outcome back. The accuracy
 * simulator and the deterministic tests run on it; the production loop
 * never sees it (sync/sync.c only calls the driver's hooks).
 */
#include "sync/internal.h"

/* A manual round's deadline. Manual rounds are not timed: their callers
 * (the simulator, deterministic tests) judge outcomes on virtual time, so
 * the deadline only guards against a hung server. A round that fails for
 * any other reason (a cut or refused connection, an error reply) fails at
 * once; a slow one under valgrind or on a loaded box (a round of a few
 * thousand key reports took over 2 s there) must not. */
#define MANUAL_ROUND_DEADLINE_MS 30000

/* Woken: run the round rl__sync_step asked for, if one is pending. */
static void step_woken(rl_sync_t *s)
{
    uv_mutex_lock(&s->step_mu);
    int asked = s->step_asked != s->step_done;
    s->round_virtual_ms = s->virtual_now_ms;
    uv_mutex_unlock(&s->step_mu);
    if (!asked || s->in_flight > 0)
        return;
    if (!rl__redis_route_can_send(&s->route, NULL, 0))
        rl__redis_route_connect(&s->route);
    rl__sync_run_round(s, MANUAL_ROUND_DEADLINE_MS);
}

static void step_round_done(rl_sync_t *s)
{
    uv_mutex_lock(&s->step_mu);
    s->step_failed = s->round_failed;
    s->step_done = s->step_asked;
    uv_cond_broadcast(&s->step_cv);
    uv_mutex_unlock(&s->step_mu);
}

/* Release a stepper waiting on a loop that ended. */
static void step_loop_ended(rl_sync_t *s)
{
    uv_mutex_lock(&s->step_mu);
    s->step_failed = 1;
    s->step_done = s->step_asked;
    uv_cond_broadcast(&s->step_cv);
    uv_mutex_unlock(&s->step_mu);
}

const rl_sync_driver_t rl__sync_step_driver = {
    .woken = step_woken,
    .round_done = step_round_done,
    .loop_ended = step_loop_ended,
};

int rl__sync_step(rl_sync_t *s, uint64_t virtual_now_ms)
{
    uv_mutex_lock(&s->step_mu);
    uint64_t ticket = ++s->step_asked;
    /* The loop thread reads it after taking the same mutex. */
    s->virtual_now_ms = virtual_now_ms;
    uv_mutex_unlock(&s->step_mu);
    uv_async_send(&s->wake);
    uv_mutex_lock(&s->step_mu);
    while (s->step_done < ticket)
        uv_cond_wait(&s->step_cv, &s->step_mu);
    int failed = s->step_failed;
    uv_mutex_unlock(&s->step_mu);
    return failed ? -1 : 0;
}

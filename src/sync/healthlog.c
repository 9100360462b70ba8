/* SPDX-License-Identifier: MIT */
/*
 * The health transitions' log lines. A person reading them needs to know
 * when an outage began and why, that it ended, and how long it lasted: a
 * line that leaves healthy or returns to it is WARN (recovering alone is
 * INFO), and each line says what its figure measures. A burst of
 * transitions (a flapping server) is rate-limited by coalescing, never by
 * dropping: at most one line a second, the transitions between two lines
 * counted in the next, and a timer writes the burst's final state when no
 * transition does. An outage's end is written at once whatever the window
 * (there is at most one per recover_after_rounds rounds). The stderr rate
 * limit is honoured the same way (rl__log_keep): a line it has no room for
 * waits, and says the state then current.
 */
#include <stdio.h>
#include "sync/internal.h"

/* Transition lines: at most one in this many ms, outages' ends apart. */
#define HEALTH_LOG_EVERY_MS 1000

static uint64_t ms_between(uint64_t from_fp, uint64_t to_fp)
{
    return to_fp > from_fp ? (to_fp - from_fp) / RL_FP_PER_MS : 0;
}

static void on_timer(uv_timer_t *t);

void rl__sync_healthlog_init(rl_sync_t *s)
{
    rl_healthlog_t *h = &s->hlog;
    uv_timer_init(&s->loop, &h->timer);
    h->timer.data = s;
    h->line_state = RL_HEALTH_HEALTHY; /* what an instance starts as */
}

static uint64_t emit(rl_sync_t *s, int state, uint64_t now_fp);

void rl__sync_healthlog_close(rl_sync_t *s)
{
    /* The loop ends (rl_close): the state a coalesced line was waiting to
     * tell, now or never. */
    if (s->hlog.coalesced > 0)
        /* relaxed: this thread is the only writer. */
        emit(s, RL_HEALTH_STATE(atomic_load_explicit(&s->rl->health.word, memory_order_relaxed)),
             rl__clock_now_fp(&s->rl->clock, RL_CLOCK_PRECISE));
    uv_timer_stop(&s->hlog.timer);
    uv_close((uv_handle_t *)&s->hlog.timer, NULL);
}

/* What the line's figure measures: an ended outage's whole length, or how
 * long the current one has lasted (and, as it begins, how long the
 * instance had been healthy before it). */
static void figure(const rl_healthlog_t *h, int from, int state, uint64_t now_fp, char *out,
                   size_t n)
{
    unsigned long long sofar = ms_between(h->outage_fp, now_fp);
    if (state == RL_HEALTH_HEALTHY)
        snprintf(out, n, "outage over, it lasted %llu ms (from leaving healthy to healthy again)",
                 (unsigned long long)h->ended_ms);
    else if (from == RL_HEALTH_HEALTHY && h->coalesced == 0)
        snprintf(out, n, "outage began, after %llu ms healthy; synced limits answer by their "
                 "on_failure while degraded", (unsigned long long)h->healthy_ms);
    else if (from == RL_HEALTH_HEALTHY)
        snprintf(out, n, "outage began %llu ms ago, after %llu ms healthy", sofar,
                 (unsigned long long)h->healthy_ms);
    else
        snprintf(out, n, "outage %llu ms so far", sofar);
}

/* The line naming `state` now, with the transitions coalesced into it.
 * 0: written (or handed to the hook); else the ms until the log has room. */
static uint64_t emit(rl_sync_t *s, int state, uint64_t now_fp)
{
    rl_healthlog_t *h = &s->hlog;
    int from = h->line_state;
    int level = state == RL_HEALTH_RECOVERING && from != RL_HEALTH_HEALTHY && !h->end_pending
                    ? RL_LOG_INFO
                    : RL_LOG_WARN;
    char fig[160], more[160] = "";
    figure(h, from, state, now_fp, fig, sizeof fig);
    if (h->coalesced > 0)
        snprintf(more, sizeof more,
                 "; %u transition%s since the last line, coalesced into this one%s", h->coalesced,
                 h->coalesced == 1 ? "" : "s",
                 h->end_pending && state != RL_HEALTH_HEALTHY ? ", an outage's end among them"
                                                              : "");
    char move[64];
    if (from == state)
        snprintf(move, sizeof move, "%s again", rl__health_name(state));
    else
        snprintf(move, sizeof move, "%s -> %s", rl__health_name(from), rl__health_name(state));
    uint64_t wait = rl__log_keep(&s->rl->logger, level, "sync: %s (%s): %s%s", move, h->why, fig,
                                 more);
    if (wait != 0)
        return wait;
    h->last_line_ms = uv_now(&s->loop);
    h->any_line = 1;
    h->line_state = state;
    h->coalesced = 0;
    h->end_pending = 0;
    uv_timer_stop(&h->timer);
    return 0;
}

/* Coalesce this transition into a later line, written in delay_ms. */
static void defer(rl_sync_t *s, int ends, uint64_t delay_ms)
{
    rl_healthlog_t *h = &s->hlog;
    h->coalesced++;
    h->end_pending |= ends;
    if (!uv_is_active((uv_handle_t *)&h->timer))
        uv_timer_start(&h->timer, on_timer, delay_ms, 0);
}

void rl__sync_healthlog(rl_sync_t *s, int old, int state, const char *why, uint64_t since_fp,
                        uint64_t now_fp)
{
    rl_healthlog_t *h = &s->hlog;
    if (old == RL_HEALTH_HEALTHY) {
        h->outage_fp = now_fp;
        h->healthy_ms = ms_between(since_fp, now_fp);
    }
    int ends = state == RL_HEALTH_HEALTHY;
    if (ends)
        h->ended_ms = ms_between(h->outage_fp, now_fp);
    snprintf(h->why, sizeof h->why, "%s", why);
    uint64_t now_ms = uv_now(&s->loop);
    uint64_t open_ms = h->last_line_ms + HEALTH_LOG_EVERY_MS;
    if (ends || !h->any_line || now_ms >= open_ms) {
        uint64_t wait = emit(s, state, now_fp);
        if (wait != 0)
            defer(s, ends, wait);
        return;
    }
    defer(s, 0, open_ms - now_ms);
}

/* The end of a window with transitions coalesced: the state now. */
static void on_timer(uv_timer_t *t)
{
    rl_sync_t *s = t->data;
    if (s->hlog.coalesced == 0)
        return;
    /* relaxed: this thread is the only writer. */
    int state = RL_HEALTH_STATE(atomic_load_explicit(&s->rl->health.word, memory_order_relaxed));
    uint64_t wait = emit(s, state, rl__clock_now_fp(&s->rl->clock, RL_CLOCK_PRECISE));
    if (wait != 0)
        uv_timer_start(&s->hlog.timer, on_timer, wait, 0);
}

/* SPDX-License-Identifier: MIT */
/*
 * rl_metrics_text: an instance's counters in the Prometheus text exposition
 * format, version 0.0.4 (the format every Prometheus-compatible scraper
 * reads; served as "text/plain; version=0.0.4").
 *
 * Choices, and why:
 * - Every family has its # HELP and # TYPE lines, and all of a family's
 *   samples follow them, as the format requires. So the per-limit counters
 *   are read once into a snapshot first (the slot counts take a key-table
 *   walk per 64 limits: reading them again per family would multiply that).
 *   The instance-wide families need no slot counts, so they walk nothing.
 * - The limit registry is walked under its writers' lock only to copy ids
 *   and names (a name is writer-owned while live; copying it under the lock
 *   is what makes reading it safe). The counters are read after the lock is
 *   released, so a scrape never holds up rl_limit_add/update/remove for a
 *   table walk. A limit removed in between answers RL_ENOTFOUND and is left
 *   out; one added in between shows up in the next scrape.
 * - Counters end in _total; times are in seconds (Prometheus base units)
 *   with millisecond precision, written as exact decimals.
 * - Health is a state set: ratelimit_health{state="..."} is 1 for the
 *   current state and 0 for the others, the usual way to expose an enum
 *   (alerts and graphs select the state by label, not by a magic number).
 * - The families of the global tier (health, degraded decisions by policy,
 *   sync) appear only on instances with a redis_url: on a local-only one
 *   they are constant zeros that would read as "never connected".
 * - Numbers are written by hand, not with snprintf: no locale, no format
 *   strings, and the snprintf-style length is counted in one pass.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include "base/alloc.h"
#include "local/health.h"
#include "core.h"
#include "hot/hot.h"
#include "inflight/inflight.h"
#include "metrics.h"
#include "stats.h"
#include "text/textsink.h"
#include "redis/errclass.h"

size_t rl__prom_escape(const char *src, size_t n, char *dst, size_t cap)
{
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        char c = src[i];
        char esc = c == '\\' ? '\\' : c == '"' ? '"' : c == '\n' ? 'n' : 0;
        char pair[2] = {'\\', esc};
        const char *p = esc != 0 ? pair : &src[i];
        size_t k = esc != 0 ? 2 : 1;
        for (size_t j = 0; j < k; j++, out++)
            if (out + 1 < cap) /* cap - 1: the last byte is the NUL's */
                dst[out] = p[j];
    }
    if (cap > 0)
        dst[out < cap ? out : cap - 1] = '\0';
    return out;
}

/* v / 10^digits as an exact decimal, e.g. (1234, 3) -> "1.234". */
static void put_fixed(rl_sink_t *s, uint64_t v, unsigned digits)
{
    uint64_t one = 1;
    for (unsigned i = 0; i < digits; i++)
        one *= 10;
    rl__put_u64(s, v / one);
    char frac[8] = {'.'};
    uint64_t f = v % one;
    for (unsigned i = digits; i > 0; i--, f /= 10)
        frac[i] = (char)('0' + f % 10);
    rl__put_bytes(s, frac, digits + 1);
}


static void put_escaped(rl_sink_t *s, const char *v)
{
    /* The escaper writes (and NUL-terminates) straight into the free tail of
     * the buffer; a later write overwrites that NUL, and rl_metrics_text
     * places the final one. */
    int fits = s->len < s->cap;
    s->len += rl__prom_escape(v, strlen(v), fits ? s->buf + s->len : NULL,
                              fits ? s->cap - s->len : 0);
}

/* The # HELP and # TYPE lines. help is a constant without backslashes or
 * line feeds, the only bytes HELP text would need escaped. */
static void family(rl_sink_t *s, const char *name, const char *type, const char *help)
{
    rl__put_str(s, "# HELP ");
    rl__put_str(s, name);
    rl__put_bytes(s, " ", 1);
    rl__put_str(s, help);
    rl__put_str(s, "\n# TYPE ");
    rl__put_str(s, name);
    rl__put_bytes(s, " ", 1);
    rl__put_str(s, type);
    rl__put_bytes(s, "\n", 1);
}

/* One sample line up to its value: name, and {label="value"} when label is
 * not NULL. The caller writes the value. */
static void sample_head(rl_sink_t *s, const char *name, const char *label, const char *value)
{
    rl__put_str(s, name);
    if (label != NULL) {
        rl__put_bytes(s, "{", 1);
        rl__put_str(s, label);
        rl__put_str(s, "=\"");
        put_escaped(s, value);
        rl__put_str(s, "\"}");
    }
    rl__put_bytes(s, " ", 1);
}

/* A whole sample line whose value is v / 10^digits (an exact decimal:
 * digits 3 for milliseconds as seconds, 6 for microseconds or ppm). */
static void sample_fixed(rl_sink_t *s, const char *name, const char *label, const char *value,
                         uint64_t v, unsigned digits)
{
    sample_head(s, name, label, value);
    if (digits != 0)
        put_fixed(s, v, digits);
    else
        rl__put_u64(s, v);
    rl__put_bytes(s, "\n", 1);
}

static void sample(rl_sink_t *s, const char *name, const char *label, const char *value, uint64_t v)
{
    sample_fixed(s, name, label, value, v, 0);
}

/* A family with one unlabelled sample. */
static void single(rl_sink_t *s, const char *name, const char *type, const char *help, uint64_t v)
{
    family(s, name, type, help);
    sample(s, name, NULL, NULL, v);
}

/* One limit of the snapshot; id 0: left out (removed before it was read). */
typedef struct entry {
    int id;
    char name[RL_NAME_MAX];
    rl_limit_stats_t st;
} entry_t;

/* A per-limit family: one sample per limit of the snapshot, of the field
 * at `field` (`width` bytes), written as value / 10^digits. */
static void per_limit_as(rl_sink_t *s, const entry_t *e, uint32_t n, const char *name,
                         const char *type, const char *help, size_t field, size_t width,
                         unsigned digits)
{
    family(s, name, type, help);
    for (uint32_t i = 0; i < n; i++) {
        if (e[i].id == 0)
            continue;
        uint64_t v = 0;
        const char *at = (const char *)&e[i].st + field;
        if (width == sizeof(uint32_t)) {
            uint32_t v32;
            memcpy(&v32, at, sizeof v32);
            v = v32;
        } else {
            memcpy(&v, at, sizeof v);
        }
        sample_fixed(s, name, "limit", e[i].name, v, digits);
    }
}

static void per_limit(rl_sink_t *s, const entry_t *e, uint32_t n, const char *name, const char *type,
                      const char *help, size_t field)
{
    per_limit_as(s, e, n, name, type, help, field, sizeof(uint64_t), 0);
}

/* Copy the live limits' ids and names under the registry's lock, then read
 * each one's counters without it. Returns how many entries were filled. */
static uint32_t snapshot(rl_t *rl, entry_t *e)
{
    rl_limits_t *ls = &rl->limits;
    uint32_t n = 0;
    rl__limits_lock(ls);
    for (uint32_t i = 0; i < ls->cap; i++) {
        rl_limit_slot_t *slot = &ls->slots[i];
        /* relaxed: under the writers' lock, which orders every id store. */
        uint32_t id = atomic_load_explicit(&slot->id, memory_order_relaxed);
        if (id == 0)
            continue;
        e[n].id = (int)id;
        memcpy(e[n].name, slot->name, RL_NAME_MAX);
        e[n].name[RL_NAME_MAX - 1] = '\0'; /* names are validated; stay bounded anyway */
        n++;
    }
    pthread_mutex_unlock(&ls->lock);
    /* The entries are in index order, as rl__limit_stats_many wants; their
     * stats go in ascending index windows, one table walk per window. */
    enum { CHUNK = 64 };
    int ids[CHUNK];
    rl_limit_stats_t st[CHUNK];
    for (uint32_t i = 0; i < n; i += CHUNK) {
        uint32_t k = n - i < CHUNK ? n - i : CHUNK;
        for (uint32_t j = 0; j < k; j++)
            ids[j] = e[i + j].id;
        rl__limit_stats_many(rl, ids, k, st);
        for (uint32_t j = 0; j < k; j++) {
            e[i + j].st = st[j];
            e[i + j].st.size = sizeof st[j];
            rl__inflight_stats(rl, e[i + j].id, &e[i + j].st);
            /* A limit removed since the copy is left out. */
            if (rl__limit_get(&rl->limits, e[i + j].id) == NULL)
                e[i + j].id = 0;
        }
    }
    return n;
}

static void render_limits(rl_sink_t *s, const entry_t *e, uint32_t n)
{
    per_limit(s, e, n, "ratelimit_limit_admitted_total", "counter",
              "Requests answered allow (shadow would-denies included; a denied "
              "rl_check_multi admits none of its requests), by limit.",
              offsetof(rl_limit_stats_t, admitted));
    per_limit(s, e, n, "ratelimit_limit_denied_total", "counter",
              "Requests answered deny (each one a denied rl_check_multi checked), by limit.",
              offsetof(rl_limit_stats_t, denied));
    per_limit(s, e, n, "ratelimit_limit_shadow_denied_total", "counter",
              "Checks of a shadow limit that would have denied (they were allowed), by limit.",
              offsetof(rl_limit_stats_t, shadow_denied));
    per_limit(s, e, n, "ratelimit_limit_noslot_total", "counter",
              "Checks whose key found no table slot, decided by on_failure, by limit.",
              offsetof(rl_limit_stats_t, noslot));
    per_limit(s, e, n, "ratelimit_limit_degraded_total", "counter",
              "Checks decided by the limit's on_failure policy (no table slot, or the global "
              "tier degraded), by limit.",
              offsetof(rl_limit_stats_t, degraded));
    per_limit(s, e, n, "ratelimit_limit_degraded_spells_total", "counter",
              "Runs of the limit's degraded answers, each begun by the first after the "
              "instance's health changed or a minute after the last began (each logged), by "
              "limit.",
              offsetof(rl_limit_stats_t, degraded_spells));
    per_limit(s, e, n, "ratelimit_limit_keys", "gauge", "Table slots held by the limit's keys now.",
              offsetof(rl_limit_stats_t, keys_live));
}

/* The in-flight limits' families, with a sample for each in-flight limit
 * (whose limit is never 0); none at all on an instance without one. */
static void per_inflight(rl_sink_t *s, const entry_t *e, uint32_t n, const char *name,
                         const char *type, const char *help, size_t field)
{
    family(s, name, type, help);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t v;
        memcpy(&v, (const char *)&e[i].st + field, sizeof v);
        if (e[i].id != 0 && e[i].st.inflight_limit != 0)
            sample_fixed(s, name, "limit", e[i].name, v, 0);
    }
}

static void render_inflight(rl_sink_t *s, const entry_t *e, uint32_t n)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        k += e[i].id != 0 && e[i].st.inflight_limit != 0;
    if (k == 0)
        return;
    per_inflight(s, e, n, "ratelimit_limit_inflight", "gauge",
                 "Permits of the in-flight limit held now, all keys together.",
                 offsetof(rl_limit_stats_t, inflight));
    per_inflight(s, e, n, "ratelimit_limit_inflight_limit", "gauge",
                 "The in-flight limit now (an adaptive one as its algorithm moved it).",
                 offsetof(rl_limit_stats_t, inflight_limit));
    per_inflight(s, e, n, "ratelimit_limit_inflight_reclaimed_total", "counter",
                 "Permits held past the limit's max_hold and reclaimed (never released).",
                 offsetof(rl_limit_stats_t, inflight_reclaimed));
    per_inflight(s, e, n, "ratelimit_limit_inflight_late_total", "counter",
                 "Releases of a permit already reclaimed (counted no-ops).",
                 offsetof(rl_limit_stats_t, inflight_late));
}

/* What Redis said of each limit's keys: only on instances with a redis_url. */
static void render_limits_global(rl_sink_t *s, const entry_t *e, uint32_t n)
{
    per_limit(s, e, n, "ratelimit_limit_sync_keys", "gauge",
              "Keys of the limit reported to Redis in the last complete window of "
              "10 sync rounds.",
              offsetof(rl_limit_stats_t, sync_keys));
    per_limit(s, e, n, "ratelimit_limit_overshoot_keys", "gauge",
              "Of those keys, the ones the whole fleet admitted faster than the limit's rate.",
              offsetof(rl_limit_stats_t, overshoot_keys));
    per_limit_as(s, e, n, "ratelimit_limit_usage_max_ratio", "gauge",
                 "The highest fleet-wide admitted rate of one key in that window, as a fraction "
                 "of the limit's rate (above 1: overshoot).",
                 offsetof(rl_limit_stats_t, usage_max_ppm), sizeof(uint32_t), 6);
    per_limit_as(s, e, n, "ratelimit_limit_share_skew_max_ratio", "gauge",
                 "The highest share this node got of one key in that window, as a multiple of "
                 "an even split among the key's live nodes.",
                 offsetof(rl_limit_stats_t, share_skew_max_ppm), sizeof(uint32_t), 6);
    per_limit_as(s, e, n, "ratelimit_limit_nodes_max", "gauge",
                 "The most live nodes Redis saw on one key of the limit in that window.",
                 offsetof(rl_limit_stats_t, nodes_max), sizeof(uint32_t), 0);
}

static void render_instance(rl_sink_t *s, const rl_stats_t *st)
{
    single(s, "ratelimit_limits", "gauge", "Limits defined now.", st->limits);
    single(s, "ratelimit_keys_live", "gauge", "Keys holding a table slot now.", st->keys_live);
    single(s, "ratelimit_keys_capacity", "gauge", "Key table capacity in keys (max_keys).",
           st->keys_capacity);
    single(s, "ratelimit_keys_reclaimed_total", "counter",
           "Idle key slots reclaimed since the instance opened.", st->reclaimed);
    single(s, "ratelimit_table_slots", "gauge", "Key table slots allocated (max_keys plus headroom).",
           st->table_slots);
    single(s, "ratelimit_table_bytes", "gauge", "Bytes allocated for the key table.",
           st->table_bytes);
}

/* Reservations and waits (rl_reserve_stats_t), when the instance has them. */
static void render_reserve(rl_sink_t *s, rl_t *rl)
{
    rl_reserve_stats_t r;
    rl_reserve_stats_init(&r);
    if (rl->reserve == NULL || rl_reserve_stats(rl, &r) != 0)
        return;
    single(s, "ratelimit_reserve_reserved_total", "counter",
           "Reservations admitted (rl_reserve, rl_reserve_wait).", r.reserved);
    single(s, "ratelimit_reserve_denied_total", "counter", "Reservations denied.", r.denied);
    single(s, "ratelimit_reserve_settled_up_total", "counter",
           "Reservations settled above their estimate (the difference charged as debt).",
           r.settled_up);
    single(s, "ratelimit_reserve_settled_down_total", "counter",
           "Reservations settled below their estimate (the difference given back).",
           r.settled_down);
    single(s, "ratelimit_reserve_settled_even_total", "counter",
           "Reservations settled at their estimate.", r.settled_even);
    single(s, "ratelimit_reserve_released_total", "counter",
           "Reservations released whole (rl_release).", r.released);
    single(s, "ratelimit_reserve_expired_total", "counter",
           "Reservations neither settled nor released within their ttl.", r.expired);
    single(s, "ratelimit_reserve_debt_tokens_total", "counter",
           "Tokens charged by settles above the estimate.", r.debt_tokens);
    single(s, "ratelimit_reserve_refund_tokens_total", "counter",
           "Tokens given back by settles below the estimate and by releases.",
           r.refund_tokens);
    single(s, "ratelimit_reserve_in_flight", "gauge", "Reservations held now.", r.in_flight);
    single(s, "ratelimit_reserve_capacity", "gauge",
           "Reservations that can be held at once (max_reservations).", r.capacity);
    single(s, "ratelimit_reserve_full_total", "counter",
           "rl_reserve calls refused because every entry was held.", r.full);
    single(s, "ratelimit_wait_admitted_total", "counter", "rl_wait calls admitted.", r.waits);
    single(s, "ratelimit_wait_slept_total", "counter",
           "rl_wait calls admitted after a sleep.", r.waits_slept);
    single(s, "ratelimit_wait_refused_total", "counter",
           "rl_wait calls refused at once: the wait needed exceeded max_wait_ms.",
           r.waits_refused);
}

/* A family of one unlabelled sample: its name, type, help and the
 * rl_stats_t field it shows. */
typedef struct {
    const char *name, *type, *help;
    size_t field;
} single_row_t;

/* The field must be a uint64_t: _Generic has no other association. */
#define ROW(name, type, help, field)                                                         \
    {name, type, help,                                                                       \
     offsetof(rl_stats_t, field) + 0 * sizeof(char[_Generic(((rl_stats_t *)0)->field, uint64_t: 1)])}

static const single_row_t sync_rows[] = {
    ROW("ratelimit_sync_rounds_total", "counter", "Sync rounds started.", sync_rounds),
    ROW("ratelimit_sync_rounds_failed_total", "counter",
        "Sync rounds that errored or missed their deadline.", sync_rounds_failed),
    ROW("ratelimit_sync_reports_total", "counter", "Key usage reports sent to Redis.",
        sync_reports),
    ROW("ratelimit_sync_errors_total", "counter",
        "Redis error replies, timeouts and failed connects.", sync_errors),
};

static const single_row_t fleet_quota_rows[] = {
    ROW("ratelimit_sync_reports_last_round", "gauge",
        "Key usage reports the last sync round sent.", sync_reports_last_round),
    ROW("ratelimit_sync_connected", "gauge",
        "1 while connected to Redis with the scripts loaded, else 0.", sync_connected),
    ROW("ratelimit_fleet_nodes", "gauge",
        "Live nodes of this key_prefix at the last node registry heartbeat (0: none seen "
        "yet); the pessimistic shares divide the rate by it.", fleet_nodes),
    ROW("ratelimit_fleet_split_total", "counter",
        "Registry heartbeats that saw a live node of this key_prefix with another "
        "key_secret fingerprint: a split fleet, each part enforcing the whole limit.",
        fleet_split_rounds),
    ROW("ratelimit_fleet_split_fingerprints", "gauge",
        "Other key_secret fingerprints among the live nodes at the last heartbeat: "
        "non-zero while the fleet is split.", fleet_split_fingerprints),
    ROW("ratelimit_log_dropped_total", "counter",
        "Log lines to stderr (no log hook set) dropped by the log rate limit.", log_dropped),
    ROW("ratelimit_quota_charges_total", "counter",
        "Quota charges Redis answered, duplicates included.", quota_charges),
    ROW("ratelimit_quota_duplicates_total", "counter",
        "Quota charges whose request id Redis had seen: the first answer repeated, "
        "nothing charged.", quota_duplicates),
    ROW("ratelimit_quota_degraded_total", "counter",
        "Quota charges and reads answered by on_failure: Redis did not answer in time.",
        quota_degraded),
    ROW("ratelimit_quota_journaled_total", "counter",
        "Open quota charges put in the journal while Redis was out.", quota_journaled),
    ROW("ratelimit_quota_replayed_total", "counter",
        "Journaled quota charges Redis has answered since.", quota_replayed),
    ROW("ratelimit_quota_lost_total", "counter",
        "Open quota charges never counted in Redis: the journal was full, or their quota "
        "was removed.", quota_lost),
    ROW("ratelimit_quota_journal_entries", "gauge",
        "Quota charges in the journal now, waiting for Redis.", quota_journal_len),
};

#undef ROW

static void render_rows(rl_sink_t *s, const rl_stats_t *st, const single_row_t *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        memcpy(&v, (const char *)st + rows[i].field, sizeof v);
        single(s, rows[i].name, rows[i].type, rows[i].help, v);
    }
}

static void render_health(rl_sink_t *s, const rl_stats_t *st)
{
    const uint64_t ms_in[3] = {st->ms_healthy, st->ms_degraded, st->ms_recovering};

    family(s, "ratelimit_health", "gauge",
           "Health of the global tier, 1 for the current state: healthy (shares from Redis), "
           "degraded (on_failure policies decide), recovering (shares being re-established).");
    for (int i = 0; i < 3; i++)
        sample(s, "ratelimit_health", "state", rl__health_name(i), st->health == i);
    family(s, "ratelimit_health_state_seconds", "gauge",
           "Time since the global tier entered its current health state.");
    sample_fixed(s, "ratelimit_health_state_seconds", NULL, NULL, st->health_since_ms, 3);
    family(s, "ratelimit_health_seconds_total", "counter",
           "Time spent in each health state since the instance opened.");
    for (int i = 0; i < 3; i++)
        sample_fixed(s, "ratelimit_health_seconds_total", "state", rl__health_name(i), ms_in[i], 3);
    single(s, "ratelimit_health_transitions_total", "counter", "Health state changes.",
           st->health_transitions);

    family(s, "ratelimit_degraded_decisions_total", "counter",
           "Checks decided by an on_failure policy because the global tier was degraded, "
           "by policy.");
    sample(s, "ratelimit_degraded_decisions_total", "policy", "open", st->degraded_open);
    sample(s, "ratelimit_degraded_decisions_total", "policy", "closed", st->degraded_closed);
    sample(s, "ratelimit_degraded_decisions_total", "policy", "local", st->degraded_local);
}

/* Errors by class, and the round latency as a summary without quantiles:
 * _sum and _count give the mean over any scrape interval; last and max
 * are gauges beside it. */
static void render_sync_latency(rl_sink_t *s, const rl_stats_t *st)
{
    family(s, "ratelimit_sync_errors_by_class_total", "counter",
           "Redis error replies, timeouts and failed connects, by class.");
    const struct {
        const char *name;
        uint64_t v;
    } cls[] = {
#define RL_X_(up, word, doc) {#word, st->sync_err_##word},
        RL_REDIS_ERR_MAP(RL_X_)
#undef RL_X_
    };
    for (size_t i = 0; i < sizeof cls / sizeof cls[0]; i++)
        sample(s, "ratelimit_sync_errors_by_class_total", "class", cls[i].name, cls[i].v);
    family(s, "ratelimit_sync_round_seconds", "summary",
           "Latency of the sync rounds whose every reply arrived: from the round's start to "
           "its last reply.");
    sample_fixed(s, "ratelimit_sync_round_seconds_sum", NULL, NULL, st->sync_round_us_sum, 6);
    sample(s, "ratelimit_sync_round_seconds_count", NULL, NULL, st->sync_rounds_completed);
    family(s, "ratelimit_sync_round_last_seconds", "gauge",
           "Latency of the last sync round that completed.");
    sample_fixed(s, "ratelimit_sync_round_last_seconds", NULL, NULL, st->sync_round_us_last, 6);
    family(s, "ratelimit_sync_round_max_seconds", "gauge",
           "The longest latency of a completed sync round since the instance opened.");
    sample_fixed(s, "ratelimit_sync_round_max_seconds", NULL, NULL, st->sync_round_us_max, 6);
}

static void render_global(rl_sink_t *s, const rl_stats_t *st)
{
    render_health(s, st);
    render_rows(s, st, sync_rows, sizeof sync_rows / sizeof sync_rows[0]);
    render_sync_latency(s, st);
    render_rows(s, st, fleet_quota_rows, sizeof fleet_quota_rows / sizeof fleet_quota_rows[0]);
}

/* Hot keys shown per limit: the busiest few, so the families' cardinality
 * stays bounded (RL_METRICS_HOT_PER_LIMIT x limits) whatever keys callers
 * send. */
#define RL_METRICS_HOT_PER_LIMIT 3
#define RL_METRICS_HOT_MAX 512 /* rl_hotkeys' most entries: 2 sketches x 256 */
/* A scrape closes the local limits' interval at most once a second, so two
 * scrapes in quick succession (sizing the buffer, then filling it) read the
 * same text. */
#define RL_METRICS_HOT_HARVEST_MS 1000

/* A key as a label value: its kept bytes, printable ASCII as is (\\ and \"
 * escaped as the format wants), any other byte as the four characters \xNN
 * (a backslash escaped, then xNN), "..." when the key was longer; a key
 * whose bytes are not kept yet as "#" and its limit-local rank. Keys are
 * untrusted: the label never carries a raw byte the format could misread. */
static void put_key_label(rl_sink_t *s, const rl_hotkey_t *k, unsigned rank)
{
    static const char hex[] = "0123456789abcdef";
    if (k->key_kept == 0) {
        rl__put_bytes(s, "#", 1);
        rl__put_u64(s, rank);
        return;
    }
    for (uint32_t i = 0; i < k->key_kept; i++) {
        unsigned char c = k->key[i];
        if (c == '\\' || c == '"') {
            char e[2] = {'\\', (char)c};
            rl__put_bytes(s, e, 2);
        } else if (c >= 0x20 && c < 0x7f) {
            rl__put_bytes(s, (const char *)&c, 1);
        } else {
            char e[5] = {'\\', '\\', 'x', hex[c >> 4], hex[c & 15]};
            rl__put_bytes(s, e, 5);
        }
    }
    if (k->key_len > k->key_kept)
        rl__put_str(s, "...");
}

/* The busiest keys of each limit (rl_hotkeys, which also harvests the local
 * limits' counts: a scrape is one of its calls). */
static void render_hot(rl_sink_t *s, const entry_t *e, uint32_t n, const rl_hotkey_t *hk,
                       int got)
{
    family(s, "ratelimit_hot_key_demand_per_second", "gauge",
           "The busiest keys of each limit (at most 3 per limit): requests offered per second "
           "on this node, label key the key's first 64 bytes (other than printable ASCII as "
           "\\\\xNN).");
    for (uint32_t i = 0; i < n; i++) {
        unsigned rank = 0;
        for (int j = 0; j < got && rank < RL_METRICS_HOT_PER_LIMIT; j++) {
            if (e[i].id == 0 || hk[j].limit != e[i].id)
                continue;
            rl__put_str(s, "ratelimit_hot_key_demand_per_second{limit=\"");
            put_escaped(s, e[i].name);
            rl__put_str(s, "\",key=\"");
            put_key_label(s, &hk[j], ++rank);
            rl__put_str(s, "\"} ");
            /* milli-requests per second, as an exact decimal */
            put_fixed(s, (uint64_t)(hk[j].demand_per_s * 1000.0 + 0.5), 3);
            rl__put_bytes(s, "\n", 1);
        }
    }
    family(s, "ratelimit_hot_keys", "gauge",
           "Keys of the limit marked hot now (their demand passed the limit's hot= share of "
           "its rate).");
    for (uint32_t i = 0; i < n; i++) {
        if (e[i].id == 0)
            continue;
        uint64_t marked = 0;
        for (int j = 0; j < got; j++)
            marked += hk[j].limit == e[i].id && hk[j].hot;
        sample(s, "ratelimit_hot_keys", "limit", e[i].name, marked);
    }
}

int rl_metrics_text(rl_t *rl, char *buf, size_t len)
{
    if (rl == NULL || (buf == NULL && len > 0))
        return RL_EINVAL;
    int rc = rl__fork_check(rl);
    if (rc != 0)
        return rc;
    /* One entry per registry slot: the most limits the snapshot can see. */
    size_t bytes = (size_t)rl->limits.cap * sizeof(entry_t);
    entry_t *e = rl__calloc(&rl->alloc, bytes, _Alignof(entry_t));
    if (e == NULL)
        return RL_ENOMEM;
    uint32_t n = snapshot(rl, e);
    size_t hk_bytes = RL_METRICS_HOT_MAX * sizeof(rl_hotkey_t);
    rl_hotkey_t *hk = NULL;
    int got = 0;
    if (rl->hot != NULL) {
        hk = rl__calloc(&rl->alloc, hk_bytes, _Alignof(rl_hotkey_t));
        if (hk == NULL) {
            rl__free(&rl->alloc, e, bytes, _Alignof(entry_t));
            return RL_ENOMEM;
        }
        for (size_t i = 0; i < RL_METRICS_HOT_MAX; i++)
            rl_hotkey_init(&hk[i]);
        got = rl__hot_report(rl, -1, hk, RL_METRICS_HOT_MAX, RL_METRICS_HOT_HARVEST_MS);
    }
    /* The instance families read no decision counts (the per-limit ones
     * above have them): no second table walk. */
    rl_stats_t st;
    rl__stats_read(rl, &st, 0);

    rl_sink_t s = {buf, len, 0};
    render_limits(&s, e, n);
    render_inflight(&s, e, n);
    if (rl__has_global(rl))
        render_limits_global(&s, e, n);
    if (got >= 0 && hk != NULL)
        render_hot(&s, e, n, hk, got);
    render_instance(&s, &st);
    render_reserve(&s, rl);
    if (rl__has_global(rl))
        render_global(&s, &st);
    rl__free(&rl->alloc, e, bytes, _Alignof(entry_t));
    rl__free(&rl->alloc, hk, hk_bytes, _Alignof(rl_hotkey_t));
    rl__sink_finish(&s);
    /* At most RL_MAX_LIMITS limits of about 1 KB each plus a fixed 5 KB:
     * far below INT_MAX. */
    return (int)s.len;
}

/* SPDX-License-Identifier: MIT */
#include <string.h>
#include "local/inflightdef.h"
#include "local/limitdef.h"
#include "base/errors.h"

/* The adaptive algorithms' defaults (inflight/adaptive.h says whose). */
static uint32_t default_min(int32_t algo) { return algo == RL_INFLIGHT_VEGAS ? 1u : 20u; }
static uint32_t default_max(int32_t algo) { return algo == RL_INFLIGHT_VEGAS ? 1000u : 200u; }

static int rate_fields_zero(const rl_limit_t *lim, char *err, size_t errlen)
{
    static const rl_rate_t none = {0, 0};
    const char *f = memcmp(&lim->rate, &none, sizeof none) != 0            ? "rate"
                    : lim->burst != 0                                      ? "burst"
                    : memcmp(&lim->degraded_rate, &none, sizeof none) != 0 ? "degraded_rate"
                    : lim->shadow != 0                                     ? "shadow"
                    : lim->hot_ppm != 0                                    ? "hot_ppm"
                    : lim->near_ppm != 0                                   ? "near_ppm"
                    : lim->hot_policy != 0                                 ? "hot_policy"
                    : lim->hot_every != 0                                  ? "hot_every"
                                                                           : NULL;
    if (f == NULL)
        return 0;
    return rl__errf(err, errlen, RL_ERANGE,
                    "%s: an in-flight limit counts permits held, not a rate (leave it 0)", f);
}

static int inflight_fields_zero(const rl_limit_t *lim, char *err, size_t errlen)
{
    const char *f = lim->inflight_algo != 0  ? "inflight_algo"
                    : lim->inflight_max != 0 ? "inflight_max"
                    : lim->inflight_min != 0 ? "inflight_min"
                    : lim->max_hold_ms != 0  ? "max_hold_ms"
                    : lim->classes[0].name[0] != '\0' || lim->classes[0].share_ppm != 0
                        ? "classes"
                        : NULL;
    if (f == NULL)
        return 0;
    return rl__errf(err, errlen, RL_ERANGE, "%s: only a limit of kind inflight has it (set "
                    "kind=inflight, or leave it 0)", f);
}

static int classes_valid(const rl_limit_t *lim, char *err, size_t errlen)
{
    uint64_t total = 0;
    int ended = 0;
    for (int i = 0; i < RL_INFLIGHT_CLASSES; i++) {
        const rl_inflight_class_t *c = &lim->classes[i];
        if (c->name[0] == '\0') {
            if (c->share_ppm != 0)
                return rl__errf(err, errlen, RL_ENAME, "classes[%d]: a share without a name", i);
            ended = 1;
            continue;
        }
        if (ended)
            return rl__errf(err, errlen, RL_ENAME, "classes[%d]: after an empty one", i);
        if (!rl__name_valid(c->name, sizeof c->name))
            return rl__errf(err, errlen, RL_ENAME,
                            "classes[%d]: name must be 1..%d bytes of [A-Za-z0-9_.:-]", i,
                            RL_INFLIGHT_CLASS_NAME - 1);
        for (int j = 0; j < i; j++)
            if (strcmp(lim->classes[j].name, c->name) == 0)
                return rl__errf(err, errlen, RL_ENAME, "classes[%d]: \"%s\" is named twice", i,
                                c->name);
        if (c->share_ppm == 0 || c->share_ppm > 1000000u)
            return rl__errf(err, errlen, RL_ERANGE, "classes[%d]: share %u ppm is outside "
                            "1..1000000", i, (unsigned)c->share_ppm);
        total += c->share_ppm;
    }
    if (total > 1000000u)
        return rl__errf(err, errlen, RL_ERANGE,
                        "classes: their shares add up to %llu ppm, more than the whole limit",
                        (unsigned long long)total);
    return 0;
}

static int bounds_valid(const rl_limit_t *lim, char *err, size_t errlen)
{
    int32_t algo = lim->inflight_algo;
    if (algo < RL_INFLIGHT_FIXED || algo > RL_INFLIGHT_AIMD)
        return rl__errf(err, errlen, RL_EMODE, "inflight_algo: unknown value %d", (int)algo);
    if (algo == RL_INFLIGHT_FIXED && lim->inflight_max == 0)
        return rl__errf(err, errlen, RL_ERANGE,
                        "inflight_max: a fixed in-flight limit needs its max (e.g. max=64)");
    if (lim->inflight_max > RL_INFLIGHT_MAX)
        return rl__errf(err, errlen, RL_ERANGE, "inflight_max: %u is above %u",
                        (unsigned)lim->inflight_max, (unsigned)RL_INFLIGHT_MAX);
    if (algo == RL_INFLIGHT_FIXED && lim->inflight_min != 0)
        return rl__errf(err, errlen, RL_ERANGE,
                        "inflight_min: only an adaptive limit has a floor (limit=adaptive)");
    uint32_t max = lim->inflight_max != 0 ? lim->inflight_max : default_max(algo);
    uint32_t min = lim->inflight_min != 0 ? lim->inflight_min : default_min(algo);
    if (algo != RL_INFLIGHT_FIXED && min > max)
        return rl__errf(err, errlen, RL_ERANGE,
                        "inflight_min: %u is above the max, %u (the algorithm's defaults are "
                        "min %u, max %u)",
                        (unsigned)min, (unsigned)max, (unsigned)default_min(algo),
                        (unsigned)default_max(algo));
    if (lim->max_hold_ms > RL_INFLIGHT_HOLD_MAX_MS)
        return rl__errf(err, errlen, RL_ERANGE, "max_hold_ms: %llu is above a day",
                        (unsigned long long)lim->max_hold_ms);
    if (lim->max_keys > RL_INFLIGHT_KEYS_MAX)
        return rl__errf(err, errlen, RL_ERANGE, "max_keys: an in-flight limit keeps at most %u "
                        "keys", (unsigned)RL_INFLIGHT_KEYS_MAX);
    return 0;
}

/* mode=exact: one Redis set of holders per key, leased for max_hold. */
static int exact_valid(const rl_limit_t *lim, char *err, size_t errlen)
{
    if (lim->inflight_algo != RL_INFLIGHT_FIXED)
        return rl__errf(err, errlen, RL_EMODE,
                        "limit=adaptive: an adaptive limit moves with one process's latencies; "
                        "mode=exact takes a fixed max (limit=fixed)");
    if (lim->classes[0].name[0] != '\0')
        return rl__errf(err, errlen, RL_EMODE,
                        "partitions: classes are not built for mode=exact (drop partitions=, "
                        "or use mode=local)");
    if (lim->max_hold_ms == 0)
        return rl__errf(err, errlen, RL_ERANGE,
                        "max_hold: mode=exact needs it set: each permit is a lease in Redis "
                        "that ends max_hold after its acquire, which is how long a node killed "
                        "while holding it keeps it from the fleet (e.g. max_hold=30s, longer "
                        "than any request holds a permit)");
    if (lim->on_failure < RL_FAIL_DEFAULT || lim->on_failure > RL_FAIL_CLOSED)
        return rl__errf(err, errlen, RL_EMODE, "on_failure: unknown value %d",
                        (int)lim->on_failure);
    return 0;
}

int rl__inflight_validate(const rl_limit_t *lim, char *err, size_t errlen)
{
    if (lim->kind == RL_KIND_RATE)
        return inflight_fields_zero(lim, err, errlen);
    if (lim->kind != RL_KIND_INFLIGHT)
        return rl__errf(err, errlen, RL_EMODE, "kind: unknown value %d", (int)lim->kind);
    int rc = rate_fields_zero(lim, err, errlen);
    if (rc == 0 && lim->mode != RL_MODE_LOCAL && lim->mode != RL_MODE_GLOBAL &&
        lim->mode != RL_MODE_EXACT)
        rc = rl__errf(err, errlen, RL_EMODE,
                      "mode: an in-flight limit is per process (mode=local) or fleet-wide "
                      "(mode=global, mode=exact); mode=%s is not built for it",
                      lim->mode == RL_MODE_TIERED ? "tiered" : "unknown");
    if (rc == 0 && lim->mode == RL_MODE_EXACT)
        rc = exact_valid(lim, err, errlen);
    else if (rc == 0 && lim->on_failure != RL_FAIL_DEFAULT && lim->on_failure != RL_FAIL_CLOSED &&
             lim->mode != RL_MODE_GLOBAL)
        rc = rl__errf(err, errlen, RL_ERANGE,
                      "on_failure: a per-process in-flight limit has no lease to lose (open and "
                      "local are for mode=global, without its lease)");
    if (rc == 0)
        rc = bounds_valid(lim, err, errlen);
    return rc != 0 ? rc : classes_valid(lim, err, errlen);
}

void rl__inflight_resolve(const rl_limit_t *lim, rl_inflight_def_t *d)
{
    memset(d, 0, sizeof *d);
    d->algo = lim->inflight_algo;
    d->max = lim->inflight_max != 0 ? lim->inflight_max : default_max(d->algo);
    d->min = d->algo == RL_INFLIGHT_FIXED ? d->max
             : lim->inflight_min != 0     ? lim->inflight_min
                                          : default_min(d->algo);
    uint64_t hold = lim->max_hold_ms != 0 ? lim->max_hold_ms : RL_INFLIGHT_HOLD_DEFAULT_MS;
    d->max_hold_ns = hold * 1000000u;
    d->keys = lim->max_keys != 0 ? lim->max_keys : RL_INFLIGHT_KEYS_DEFAULT;
    uint64_t pool = (uint64_t)d->keys * d->max;
    d->pool = pool > RL_INFLIGHT_POOL_MAX ? RL_INFLIGHT_POOL_MAX : (uint32_t)pool;
    for (int i = 0; i < RL_INFLIGHT_CLASSES && lim->classes[i].name[0] != '\0'; i++)
        d->class_ppm[d->nclasses++] = lim->classes[i].share_ppm;
}

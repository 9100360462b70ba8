/* SPDX-License-Identifier: MIT */
/*
 * rl_limit_parse: the text form of a limit ("name=api rate=100/s burst=200").
 *
 * One left-to-right pass over the string, no allocation, no recursion: the
 * spec may come from a config file or a request, so it is treated as hostile.
 * The first error stops the parse; its message names the offending word.
 *
 * Which code a bad number gets (one rule for every numeric field):
 * - RL_ERANGE: it reads as a number but not an acceptable one: zero,
 *   negative ("-5", "-0"), non-finite ("nan", "inf", "infinity", any case,
 *   signed or not), or past what the field can hold (past uint64, or past
 *   2^32-1 for max_keys).
 * - RL_ESPEC: anything else that is not only decimal digits: "1.5", "1e3",
 *   "+5", "0x10", "abc", "". Leading zeros are plain decimal ("007" is 7).
 * hot_policy is a keyword (sync, local; RL_EMODE otherwise); hot_every a
 * whole number in 2..RL_HOT_EVERY_MAX.
 * hot and near are the fractions: digits with an optional point and up to
 * six decimals ("0.5", "2", ".25" is RL_ESPEC, so is a seventh decimal), hot
 * in (0, 1000] (of the rate), near in (0, 1] (of the burst), under the same
 * rule otherwise ("0" and "-1" are RL_ERANGE).
 * shadow follows the same rule ("2" is RL_ERANGE, "yes" is RL_ESPEC); an
 * unknown mode or on_failure value is always RL_EMODE. Words and keyword
 * values are matched case-sensitively, as the header spells them.
 */
#include <stdint.h>
#include <string.h>
#include "ratelimit.h"
#include "base/errors.h"
#include "local/limitdef.h"
#include "local/bucket.h"
#include "base/structsize.h"
#include "text/speclex.h"


enum {
    W_NAME,
    W_RATE,
    W_BURST,
    W_MODE,
    W_ON_FAILURE,
    W_DEGRADED_RATE,
    W_SHADOW,
    W_MAX_KEYS,
    W_HOT,
    W_NEAR,
    W_HOT_POLICY,
    W_HOT_EVERY,
    W_KIND,
    W_MAX,
    W_MAX_HOLD,
    W_LIMIT,
    W_ALGO,
    W_MIN,
    W_PARTITIONS,
    W_COUNT
};

static const char *const word_names[W_COUNT] = {
    "name", "rate", "burst", "mode", "on_failure", "degraded_rate", "shadow", "max_keys",
    "hot", "near", "hot_policy", "hot_every", "kind", "max", "max_hold", "limit", "algo",
    "min", "partitions",
};

typedef struct keyword {
    const char *text;
    int32_t value;
} keyword_t;

static const keyword_t modes[] = {
    {"global", RL_MODE_GLOBAL},
    {"local", RL_MODE_LOCAL},
    {"exact", RL_MODE_EXACT},
    {"tiered", RL_MODE_TIERED},
};

static const keyword_t failures[] = {
    {"local", RL_FAIL_LOCAL},
    {"open", RL_FAIL_OPEN},
    {"closed", RL_FAIL_CLOSED},
};

static const keyword_t hot_policies[] = {
    {"sync", RL_HOT_POLICY_SYNC},
    {"local", RL_HOT_POLICY_LOCAL},
};

static const keyword_t kinds[] = {
    {"rate", RL_KIND_RATE},
    {"inflight", RL_KIND_INFLIGHT},
};

static const keyword_t limit_kinds[] = {
    {"fixed", 0},
    {"adaptive", 1},
};

static const keyword_t algos[] = {
    {"gradient2", RL_INFLIGHT_GRADIENT2},
    {"vegas", RL_INFLIGHT_VEGAS},
    {"aimd", RL_INFLIGHT_AIMD},
};

static const keyword_t booleans[] = {
    {"0", 0},
    {"1", 1},
    {"false", 0},
    {"true", 1},
};

/* Units in milliseconds. */
static const keyword_t units[] = {
    {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000},
};

static int lower_is(rl_span_t v, const char *s)
{
    size_t n = strlen(s);
    if (v.n != n)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = v.p[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != s[i])
            return 0;
    }
    return 1;
}

/* See the rule at the top of the file: does v read as a number at all? */
static int looks_numeric(rl_span_t v)
{
    rl_span_t body = v;
    if (body.n > 0 && (body.p[0] == '-' || body.p[0] == '+')) {
        body.p++;
        body.n--;
    }
    if (lower_is(body, "nan") || lower_is(body, "inf") || lower_is(body, "infinity"))
        return 1;
    if (body.n == 0 || rl__span_digits(body) != body.n)
        return 0;
    /* "+5" is not negative nor out of range: it is a syntax the grammar lacks. */
    return v.p[0] != '+';
}

static int bad_number(rl_span_t v, const char *word, const char *part, char *err, size_t errlen)
{
    rl_spec_quote_t q;
    if (!looks_numeric(v))
        return rl__errf(err, errlen, RL_ESPEC,
                        "%s: %s\"%s\" is not a whole number (decimal digits only: "
                        "no sign, point or exponent)",
                        word, part, rl__spec_quote(&q, v));
    if (v.p[0] == '-')
        return rl__errf(err, errlen, RL_ERANGE, "%s: %s\"%s\" is negative", word, part,
                        rl__spec_quote(&q, v));
    return rl__errf(err, errlen, RL_ERANGE, "%s: %s\"%s\" is not finite", word, part,
                    rl__spec_quote(&q, v));
}

/*
 * A whole number in 1..max. `part` says which number of the word it is
 * ("count ", "multiplier ", or "" for the whole value), for the message.
 */
static int read_positive(rl_span_t v, uint64_t max, const char *word, const char *part,
                         uint64_t *out, char *err, size_t errlen)
{
    rl_spec_quote_t q;
    if (v.n == 0 || rl__span_digits(v) != v.n)
        return bad_number(v, word, part, err, errlen);
    uint64_t x = 0;
    for (size_t i = 0; i < v.n; i++) {
        unsigned d = (unsigned)(v.p[i] - '0');
        /* Checked before the multiply: unsigned wrap would hide the overflow. */
        if (x > (max - d) / 10)
            return rl__errf(err, errlen, RL_ERANGE, "%s: %s\"%s\" is too large (at most %llu)",
                            word, part, rl__spec_quote(&q, v), (unsigned long long)max);
        x = x * 10 + d;
    }
    if (x == 0)
        return rl__errf(err, errlen, RL_ERANGE, "%s: %s\"%s\" must be at least 1", word,
                        part, rl__spec_quote(&q, v));
    *out = x;
    return 0;
}

static const keyword_t *find_keyword(const keyword_t *table, size_t n, rl_span_t v)
{
    for (size_t i = 0; i < n; i++)
        if (rl__span_is(v, table[i].text))
            return &table[i];
    return NULL;
}

/* COUNT/UNIT or COUNT/NUNIT, stored exactly as {count, N * unit}. */
static int parse_rate(rl_rate_t *r, const char *word, rl_span_t v, char *err, size_t errlen)
{
    rl_spec_quote_t q, qu;
    const char *slash = memchr(v.p, '/', v.n);
    if (slash == NULL)
        return rl__errf(err, errlen, RL_ESPEC,
                        "%s: \"%s\" is not COUNT/UNIT (e.g. 100/s or 5/10m)", word,
                        rl__spec_quote(&q, v));
    rl_span_t count = {v.p, (size_t)(slash - v.p)};
    rl_span_t per = {slash + 1, v.n - count.n - 1};
    rl_span_t mult = {per.p, rl__span_digits(per)};
    rl_span_t unit = {per.p + mult.n, per.n - mult.n};

    int rc = read_positive(count, UINT64_MAX, word, "count ", &r->count, err, errlen);
    if (rc != 0)
        return rc;
    if (unit.n == 0)
        return rl__errf(err, errlen, RL_ESPEC, "%s: \"%s\" has no unit (use ms, s, m, h or d)",
                        word, rl__spec_quote(&q, v));
    const keyword_t *u = find_keyword(units, sizeof units / sizeof units[0], unit);
    if (u == NULL)
        return rl__errf(err, errlen, RL_ESPEC,
                        "%s: \"%s\" has unknown unit \"%s\" (use ms, s, m, h or d)", word,
                        rl__spec_quote(&q, v), rl__spec_quote(&qu, unit));
    uint64_t n = 1;
    if (mult.n > 0) {
        rc = read_positive(mult, UINT64_MAX, word, "multiplier ", &n, err, errlen);
        if (rc != 0)
            return rc;
    }
    /* Checked here, not left to rl__limit_validate: the product could wrap. */
    if (n > RL_PERIOD_MS_MAX / (uint64_t)u->value)
        return rl__errf(err, errlen, RL_ERANGE, "%s: \"%s\" has a period longer than 30 days",
                        word, rl__spec_quote(&q, v));
    r->period_ms = n * (uint64_t)u->value;
    return 0;
}

/* Length checked before the copy: a long name is an error, never truncated. */
static int parse_name(rl_limit_t *out, rl_span_t v, char *err, size_t errlen)
{
    rl_spec_quote_t q;
    if (v.n > RL_NAME_MAX - 1)
        return rl__errf(err, errlen, RL_ENAME, "name: \"%s\" is longer than %d bytes",
                        rl__spec_quote(&q, v), RL_NAME_MAX - 1);
    memcpy(out->name, v.p, v.n);
    out->name[v.n] = '\0';
    if (!rl__name_valid(out->name, sizeof out->name))
        return rl__errf(err, errlen, RL_ENAME,
                        "name: \"%s\" has a byte outside [A-Za-z0-9_.:-]", rl__spec_quote(&q, v));
    return 0;
}

static int parse_choice(int32_t *out, const keyword_t *table, size_t n, int code,
                        const char *word, const char *hint, rl_span_t v, char *err, size_t errlen)
{
    rl_spec_quote_t q;
    const keyword_t *k = find_keyword(table, n, v);
    if (k == NULL)
        return rl__errf(err, errlen, code, "%s: unknown value \"%s\" (use %s)", word,
                        rl__spec_quote(&q, v), hint);
    *out = k->value;
    return 0;
}

static int parse_shadow(rl_limit_t *out, rl_span_t v, char *err, size_t errlen)
{
    int code = looks_numeric(v) ? RL_ERANGE : RL_ESPEC;
    return parse_choice(&out->shadow, booleans, sizeof booleans / sizeof booleans[0], code,
                        "shadow", "0, 1, true or false", v, err, errlen);
}

static int parse_max_keys(rl_limit_t *out, rl_span_t v, char *err, size_t errlen)
{
    uint64_t x;
    int rc = read_positive(v, UINT32_MAX, "max_keys", "", &x, err, errlen);
    if (rc == 0)
        out->max_keys = (uint32_t)x;
    return rc;
}

/* A fraction in (0, max_ppm / 10^6], as ppm (see the rule at the top):
 * hot's of the rate, near's of the burst. */
static int parse_fraction(uint32_t *out, const char *word, const char *of, uint32_t max_ppm,
                          rl_span_t v, char *err, size_t errlen)
{
    rl_spec_quote_t q;
    size_t whole = rl__span_digits(v);
    rl_span_t frac = {v.p + whole + 1, 0};
    if (whole < v.n && v.p[whole] == '.' && whole > 0) {
        frac.n = v.n - whole - 1;
        if (frac.n == 0 || frac.n > 6 || rl__span_digits(frac) != frac.n)
            return rl__errf(err, errlen, RL_ESPEC,
                            "%s: \"%s\" is not a fraction of the %s (digits, then "
                            "optionally a point and 1 to 6 decimals: 0.5, 2)",
                            word, rl__spec_quote(&q, v), of);
    } else if (whole != v.n || whole == 0) {
        if (looks_numeric(v))
            return bad_number(v, word, "", err, errlen);
        return rl__errf(err, errlen, RL_ESPEC,
                        "%s: \"%s\" is not a fraction of the %s (digits, then "
                        "optionally a point and 1 to 6 decimals: 0.5, 2)",
                        word, rl__spec_quote(&q, v), of);
    }
    uint64_t ppm = 0;
    for (size_t i = 0; i < whole; i++) {
        ppm = ppm * 10 + (uint64_t)(v.p[i] - '0');
        if (ppm > max_ppm / 1000000u)
            return rl__errf(err, errlen, RL_ERANGE, "%s: \"%s\" is above %u (times the %s)",
                            word, rl__spec_quote(&q, v), (unsigned)(max_ppm / 1000000u), of);
    }
    ppm *= 1000000u;
    uint64_t scale = 100000;
    for (size_t i = 0; i < frac.n; i++, scale /= 10)
        ppm += (uint64_t)(frac.p[i] - '0') * scale;
    if (ppm == 0 || ppm > max_ppm)
        return rl__errf(err, errlen, RL_ERANGE, "%s: \"%s\" must be in (0, %u]", word,
                        rl__spec_quote(&q, v), (unsigned)(max_ppm / 1000000u));
    *out = (uint32_t)ppm;
    return 0;
}

/* Rounds between a hot key's reports: 2..RL_HOT_EVERY_MAX (1 would be
 * hot_policy=sync). */
static int parse_hot_every(rl_limit_t *out, rl_span_t v, char *err, size_t errlen)
{
    rl_spec_quote_t q;
    uint64_t x;
    int rc = read_positive(v, RL_HOT_EVERY_MAX, "hot_every", "", &x, err, errlen);
    if (rc != 0)
        return rc;
    if (x < 2)
        return rl__errf(err, errlen, RL_ERANGE,
                        "hot_every: \"%s\" must be at least 2 (rounds between a hot key's "
                        "reports; every round is hot_policy=sync)",
                        rl__spec_quote(&q, v));
    out->hot_every = (uint32_t)x;
    return 0;
}

/* max_hold: COUNT UNIT, in milliseconds, at most RL_INFLIGHT_HOLD_MAX_MS. */
static int parse_hold(rl_limit_t *out, rl_span_t v, char *err, size_t errlen)
{
    rl_spec_quote_t q;
    rl_span_t count = {v.p, rl__span_digits(v)};
    rl_span_t unit = {v.p + count.n, v.n - count.n};
    const keyword_t *u = find_keyword(units, sizeof units / sizeof units[0], unit);
    if (count.n == 0 || u == NULL)
        return looks_numeric(v) && v.p[0] == '-'
                   ? bad_number(v, "max_hold", "", err, errlen)
                   : rl__errf(err, errlen, RL_ESPEC,
                              "max_hold: \"%s\" is not a duration (COUNT then ms, s, m, h or "
                              "d: 30s, 500ms)",
                              rl__spec_quote(&q, v));
    uint64_t n;
    int rc = read_positive(count, RL_INFLIGHT_HOLD_MAX_MS, "max_hold", "", &n, err, errlen);
    if (rc != 0)
        return rc;
    if (n > RL_INFLIGHT_HOLD_MAX_MS / (uint64_t)u->value)
        return rl__errf(err, errlen, RL_ERANGE, "max_hold: \"%s\" is longer than a day",
                        rl__spec_quote(&q, v));
    out->max_hold_ms = n * (uint64_t)u->value;
    return 0;
}

/* partitions: NAME:FRACTION[,NAME:FRACTION...], each fraction of the limit
 * as near's form; rl__inflight_validate checks names, repeats and sum. */
static int parse_partitions(rl_limit_t *out, rl_span_t v, char *err, size_t errlen)
{
    rl_spec_quote_t q;
    size_t n = 0;
    while (v.n > 0) {
        const char *comma = memchr(v.p, ',', v.n);
        rl_span_t item = {v.p, comma != NULL ? (size_t)(comma - v.p) : v.n};
        const char *colon = memchr(item.p, ':', item.n);
        if (n == RL_INFLIGHT_CLASSES)
            return rl__errf(err, errlen, RL_ERANGE, "partitions: at most %d classes",
                            RL_INFLIGHT_CLASSES);
        size_t name_n = colon != NULL ? (size_t)(colon - item.p) : 0;
        if (colon == NULL || name_n == 0 || name_n >= RL_INFLIGHT_CLASS_NAME)
            return rl__errf(err, errlen, RL_ESPEC,
                            "partitions: \"%s\" is not NAME:FRACTION (a name of 1..%d "
                            "bytes: live:0.8,batch:0.2)",
                            rl__spec_quote(&q, item), RL_INFLIGHT_CLASS_NAME - 1);
        memcpy(out->classes[n].name, item.p, name_n);
        out->classes[n].name[name_n] = '\0';
        rl_span_t frac = {colon + 1, item.n - name_n - 1};
        int rc = parse_fraction(&out->classes[n].share_ppm, "partitions", "limit", 1000000u,
                                frac, err, errlen);
        if (rc != 0)
            return rc;
        n++;
        if (comma == NULL)
            break;
        v.p = comma + 1;
        v.n -= item.n + 1;
        if (v.n == 0)
            return rl__errf(err, errlen, RL_ESPEC, "partitions: ends with a comma");
    }
    return 0;
}

/* The in-flight words: kind, max, max_hold, limit, algo, min, partitions.
 * limit= is remembered in ctx: only parse_spec knows whether algo= met it. */
static int parse_inflight(rl_limit_t *out, int *adaptive, int word, rl_span_t v, char *err,
                          size_t errlen)
{
    uint64_t x;
    int rc;
    switch (word) {
    case W_KIND:
        return parse_choice(&out->kind, kinds, sizeof kinds / sizeof kinds[0], RL_EMODE, "kind",
                            "rate or inflight", v, err, errlen);
    case W_MAX:
    case W_MIN:
        rc = read_positive(v, RL_INFLIGHT_MAX, word == W_MAX ? "max" : "min", "", &x, err,
                           errlen);
        if (rc == 0 && word == W_MAX)
            out->inflight_max = (uint32_t)x;
        else if (rc == 0)
            out->inflight_min = (uint32_t)x;
        return rc;
    case W_MAX_HOLD:
        return parse_hold(out, v, err, errlen);
    case W_LIMIT:
        return parse_choice(adaptive, limit_kinds, sizeof limit_kinds / sizeof limit_kinds[0],
                            RL_EMODE, "limit", "fixed or adaptive", v, err, errlen);
    case W_ALGO:
        return parse_choice(&out->inflight_algo, algos, sizeof algos / sizeof algos[0],
                            RL_EMODE, "algo", "gradient2, vegas or aimd", v, err, errlen);
    default:
        return parse_partitions(out, v, err, errlen);
    }
}

typedef struct spec_ctx {
    rl_limit_t *out;
    int32_t adaptive; /* limit=adaptive */
} spec_ctx_t;

static int parse_value(rl_limit_t *out, int word, rl_span_t v, char *err, size_t errlen)
{
    switch (word) {
    case W_NAME:
        return parse_name(out, v, err, errlen);
    case W_RATE:
        return parse_rate(&out->rate, "rate", v, err, errlen);
    case W_BURST:
        return read_positive(v, UINT64_MAX, "burst", "", &out->burst, err, errlen);
    case W_MODE:
        return parse_choice(&out->mode, modes, sizeof modes / sizeof modes[0], RL_EMODE, "mode",
                            "global, local, exact or tiered", v, err, errlen);
    case W_ON_FAILURE:
        return parse_choice(&out->on_failure, failures, sizeof failures / sizeof failures[0],
                            RL_EMODE, "on_failure", "local, open or closed", v, err, errlen);
    case W_DEGRADED_RATE:
        return parse_rate(&out->degraded_rate, "degraded_rate", v, err, errlen);
    case W_SHADOW:
        return parse_shadow(out, v, err, errlen);
    case W_HOT:
        return parse_fraction(&out->hot_ppm, "hot", "rate", RL_HOT_PPM_MAX, v, err, errlen);
    case W_NEAR:
        return parse_fraction(&out->near_ppm, "near", "burst", RL_NEAR_PPM_MAX, v, err,
                              errlen);
    case W_HOT_POLICY:
        return parse_choice(&out->hot_policy, hot_policies,
                            sizeof hot_policies / sizeof hot_policies[0], RL_EMODE, "hot_policy",
                            "sync or local", v, err, errlen);
    case W_HOT_EVERY:
        return parse_hot_every(out, v, err, errlen);
    default:
        return parse_max_keys(out, v, err, errlen);
    }
}

static int value_of(void *ctx, int word, rl_span_t v, char *err, size_t errlen)
{
    spec_ctx_t *c = ctx;
    if (word >= W_KIND)
        return parse_inflight(c->out, &c->adaptive, word, v, err, errlen);
    return parse_value(c->out, word, v, err, errlen);
}

static int parse_spec(rl_limit_t *out, const char *spec, char *err, size_t errlen);

/* Parenthesised: the header's macro of the same name is for callers. */
int(rl_limit_parse)(rl_limit_t *out, const char *spec, char *err, size_t errlen)
{
    /* Callers of this form may have been built against the 0.1 header:
     * their struct is that layout, whatever this library's is. */
    return rl_limit_parse_sized(out, RL_LIMIT_SIZE_MIN, spec, err, errlen);
}

int rl_limit_parse_sized(rl_limit_t *out, size_t size, const char *spec, char *err,
                         size_t errlen)
{
    /* A stale message from an earlier call must not survive a success. */
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (out == NULL || spec == NULL)
        return rl__errf(err, errlen, RL_EINVAL, "%s is NULL", out == NULL ? "out" : "spec");
    if (size < RL_LIMIT_SIZE_MIN)
        return rl__errf(err, errlen, RL_ESIZE, "size: %zu is smaller than the oldest rl_limit_t "
                        "(%zu bytes)", size, (size_t)RL_LIMIT_SIZE_MIN);
    /* The fields are parsed into a whole struct of this library's layout
     * and only the caller's `size` bytes are written: rl_limit_init's
     * appended defaults are all zero, so a larger caller struct gets a zero
     * tail. */
    rl_limit_t lim;
    memset(&lim, 0, sizeof lim);
    lim.on_failure = RL_FAIL_DEFAULT;
    int rc = parse_spec(&lim, spec, err, errlen);
    if (rc == 0 && lim.hot_ppm != 0 && size < offsetof(rl_limit_t, hot_ppm) + sizeof lim.hot_ppm)
        rc = rl__errf(err, errlen, RL_ESIZE,
                      "hot: the caller's rl_limit_t (%zu bytes) has no hot_ppm field: use "
                      "rl_limit_parse_sized(&lim, sizeof lim, ...)",
                      size);
    if (rc == 0 && lim.near_ppm != 0 &&
        size < offsetof(rl_limit_t, near_ppm) + sizeof lim.near_ppm)
        rc = rl__errf(err, errlen, RL_ESIZE,
                      "near: the caller's rl_limit_t (%zu bytes) has no near_ppm field: use "
                      "rl_limit_parse_sized(&lim, sizeof lim, ...)",
                      size);
    /* hot_every needs hot_policy=local: one check names both. */
    if (rc == 0 && lim.hot_policy != RL_HOT_POLICY_SYNC &&
        size < offsetof(rl_limit_t, hot_every) + sizeof lim.hot_every)
        rc = rl__errf(err, errlen, RL_ESIZE,
                      "hot_policy: the caller's rl_limit_t (%zu bytes) has no hot_policy and "
                      "hot_every fields: use rl_limit_parse_sized(&lim, sizeof lim, ...)",
                      size);
    if (rc == 0 && lim.kind != RL_KIND_RATE &&
        size < offsetof(rl_limit_t, classes) + sizeof lim.classes)
        rc = rl__errf(err, errlen, RL_ESIZE,
                      "kind: the caller's rl_limit_t (%zu bytes) has no in-flight fields: use "
                      "rl_limit_parse_sized(&lim, sizeof lim, ...)",
                      size);
    memset(out, 0, size);
    memcpy(out, &lim, size < sizeof lim ? size : sizeof lim);
    out->size = size;
    return rc;
}

/* What only the spec's words can tell of an in-flight limit: algo= without
 * limit=adaptive, mode=global written out with an adaptive limit or
 * partitions, max= missing. */
static int inflight_words(rl_limit_t *out, const spec_ctx_t *c, unsigned seen, char *err,
                          size_t errlen)
{
    if ((seen & (1u << W_ALGO)) && !c->adaptive)
        return rl__errf(err, errlen, RL_ERANGE,
                        "algo: only an adaptive limit has an algorithm (add limit=adaptive)");
    if ((seen & (1u << W_MIN)) && !c->adaptive)
        return rl__errf(err, errlen, RL_ERANGE,
                        "min: only an adaptive limit has a floor (add limit=adaptive)");
    if (c->adaptive && !(seen & (1u << W_ALGO)))
        out->inflight_algo = RL_INFLIGHT_GRADIENT2;
    if (!c->adaptive && !(seen & (1u << W_MAX)))
        return rl__errf(err, errlen, RL_ESPEC,
                        "missing max (e.g. max=64: permits a key may hold at once)");
    if (!(seen & (1u << W_MODE)))
        out->mode = RL_MODE_LOCAL; /* an in-flight limit is per process */
    else if (out->mode == RL_MODE_GLOBAL && (c->adaptive || out->classes[0].name[0] != '\0'))
        return rl__errf(err, errlen, RL_EMODE,
                        "mode: a fleet-wide in-flight limit (mode=global) has a fixed max and "
                        "no partitions; limit=adaptive and partitions are per process "
                        "(mode=local)");
    rl__limit_resolve(out);
    return rl__limit_validate(out, err, errlen);
}

static int parse_spec(rl_limit_t *out, const char *spec, char *err, size_t errlen)
{
    out->size = sizeof *out;

    unsigned seen = 0;
    spec_ctx_t ctx = {out, 0};
    int rc = rl__spec_walk(spec, word_names, W_COUNT,
                           "name, rate, burst, mode, on_failure, degraded_rate, shadow, "
                           "max_keys, hot, near, hot_policy, hot_every, kind, max, max_hold, "
                           "limit, algo, min or partitions",
                           value_of, &ctx, &seen, err, errlen);
    if (rc != 0)
        return rc;
    if (!(seen & (1u << W_NAME)))
        return rl__errf(err, errlen, RL_ESPEC, "missing name (e.g. name=api)");
    if (out->kind == RL_KIND_INFLIGHT)
        return inflight_words(out, &ctx, seen, err, errlen);
    if (!(seen & (1u << W_RATE)))
        return rl__errf(err, errlen, RL_ESPEC, "missing rate (e.g. rate=100/s)");
    /* Named by its word here; rl__limit_validate's message names the field. */
    if ((seen & (1u << W_NEAR)) && out->mode != RL_MODE_TIERED)
        return rl__errf(err, errlen, RL_ERANGE,
                        "near: only mode=tiered confirms near its limit (add mode=tiered or "
                        "drop near=)");
    if (out->hot_policy == RL_HOT_POLICY_LOCAL && out->mode != RL_MODE_GLOBAL)
        return rl__errf(err, errlen, RL_ERANGE,
                        "hot_policy: local applies to mode=global only (its keys sync with "
                        "Redis every round; this limit's %s)",
                        out->mode == RL_MODE_LOCAL   ? "never sync"
                        : out->mode == RL_MODE_EXACT ? "are decided in Redis per check"
                                                     : "confirm in Redis near the limit");
    if (out->hot_policy == RL_HOT_POLICY_LOCAL && !(seen & (1u << W_HOT)))
        return rl__errf(err, errlen, RL_ERANGE,
                        "hot_policy: local needs hot= (the threshold that marks a key hot; "
                        "e.g. hot=0.5)");
    if ((seen & (1u << W_HOT_EVERY)) && out->hot_policy != RL_HOT_POLICY_LOCAL)
        return rl__errf(err, errlen, RL_ERANGE,
                        "hot_every: only hot_policy=local reports every Nth round (add "
                        "hot_policy=local or drop hot_every=)");
    rl__limit_resolve(out); /* no on_failure= word: the mode's default */
    return rl__limit_validate(out, err, errlen);
}

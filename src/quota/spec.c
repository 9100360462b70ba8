/* SPDX-License-Identifier: MIT */
/*
 * rl_quota_parse: the text form of a quota
 * ("name=plan amount=1000000 period=month dedup=24h on_failure=open"), and
 * the validation rl_quota_add shares with it.
 *
 * As text/spec.c for limits: one left-to-right pass, no allocation; the first
 * error stops the parse and its message names the offending word, with the
 * spec's bytes quoted safely (it may come from a config file or a request).
 * A number that reads as one but is not acceptable (zero, too large) is
 * RL_ERANGE; anything that is not decimal digits is RL_ESPEC.
 */
#include <string.h>
#include "quota/spec.h"
#include "base/errors.h"
#include "local/limitdef.h"
#include "base/structsize.h"
#include "text/speclex.h"


enum { W_NAME, W_AMOUNT, W_PERIOD, W_DEDUP, W_ON_FAILURE, W_COUNT };

static const char *const word_names[W_COUNT] = {"name", "amount", "period", "dedup",
                                                "on_failure"};

typedef struct keyword {
    const char *text;
    uint64_t value;
} keyword_t;

/* One table: the parser's words and the names messages and the CLI print. */
static const keyword_t periods[] = {
    {"hour", RL_PERIOD_HOUR},
    {"day", RL_PERIOD_DAY},
    {"week", RL_PERIOD_WEEK},
    {"month", RL_PERIOD_MONTH},
    {"fixed", RL_PERIOD_FIXED},
};

static const keyword_t units[] = {
    {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000},
};

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

static const keyword_t *find_keyword(const keyword_t *t, size_t n, rl_span_t v)
{
    for (size_t i = 0; i < n; i++)
        if (rl__span_is(v, t[i].text))
            return &t[i];
    return NULL;
}

const char *rl__quota_period_name(int32_t period)
{
    for (size_t i = 0; i < COUNT_OF(periods); i++)
        if (periods[i].value == (uint64_t)period)
            return periods[i].text;
    return "unknown";
}

/* A whole number 1..max of decimal digits. */
static int read_positive(rl_span_t v, uint64_t max, const char *word, uint64_t *out, char *err,
                         size_t errlen)
{
    rl_spec_quote_t q;
    if (v.n == 0 || rl__span_digits(v) != v.n)
        return rl__errf(err, errlen, RL_ESPEC,
                        "%s: \"%s\" is not a whole number (decimal digits only: no sign, "
                        "point or exponent)",
                        word, rl__spec_quote(&q, v));
    uint64_t x = 0;
    for (size_t i = 0; i < v.n; i++) {
        unsigned d = (unsigned)(v.p[i] - '0');
        /* Checked before the multiply: unsigned wrap would hide the overflow. */
        if (x > (max - d) / 10)
            return rl__errf(err, errlen, RL_ERANGE, "%s: \"%s\" is too large (at most %llu)",
                            word, rl__spec_quote(&q, v), (unsigned long long)max);
        x = x * 10 + d;
    }
    if (x == 0)
        return rl__errf(err, errlen, RL_ERANGE, "%s: \"%s\" must be at least 1", word,
                        rl__spec_quote(&q, v));
    *out = x;
    return 0;
}

/* COUNT UNIT ("30d", "600s"): milliseconds in [lo, hi]. */
static int read_duration(rl_span_t v, const char *word, uint64_t lo, uint64_t hi, uint64_t *out,
                         char *err, size_t errlen)
{
    rl_spec_quote_t q, qu;
    rl_span_t count = {v.p, rl__span_digits(v)};
    rl_span_t unit = {v.p + count.n, v.n - count.n};
    if (count.n == 0)
        return rl__errf(err, errlen, RL_ESPEC,
                        "%s: \"%s\" is not a duration (COUNT UNIT, e.g. 30d, 24h, 600s)", word,
                        rl__spec_quote(&q, v));
    const keyword_t *u = find_keyword(units, COUNT_OF(units), unit);
    if (u == NULL)
        return rl__errf(err, errlen, RL_ESPEC, "%s: \"%s\" has %s unit \"%s\" (use ms, s, m, h "
                        "or d)", word, rl__spec_quote(&q, v), unit.n ? "unknown" : "no",
                        rl__spec_quote(&qu, unit));
    uint64_t n;
    int rc = read_positive(count, UINT64_MAX / u->value, word, &n, err, errlen);
    if (rc != 0)
        return rc;
    n *= u->value;
    if (n < lo || n > hi)
        return rl__errf(err, errlen, RL_ERANGE, "%s: \"%s\" is outside %llu s..%llu d", word,
                        rl__spec_quote(&q, v), (unsigned long long)(lo / 1000),
                        (unsigned long long)(hi / 86400000));
    *out = n;
    return 0;
}

static int parse_name(rl_quota_t *q, rl_span_t v, char *err, size_t errlen)
{
    rl_spec_quote_t qq;
    if (v.n > RL_NAME_MAX - 1)
        return rl__errf(err, errlen, RL_ENAME, "name: \"%s\" is longer than %d bytes",
                        rl__spec_quote(&qq, v), RL_NAME_MAX - 1);
    memcpy(q->name, v.p, v.n);
    q->name[v.n] = '\0';
    if (!rl__name_valid(q->name, sizeof q->name))
        return rl__errf(err, errlen, RL_ENAME, "name: \"%s\" has a byte outside [A-Za-z0-9_.:-]",
                        rl__spec_quote(&qq, v));
    return 0;
}

static int parse_period(rl_quota_t *q, rl_span_t v, char *err, size_t errlen)
{
    const keyword_t *k = find_keyword(periods, COUNT_OF(periods), v);
    if (k != NULL && k->value != RL_PERIOD_FIXED) {
        q->period = (int32_t)k->value;
        q->period_ms = 0;
        return 0;
    }
    if (rl__span_digits(v) == 0) {
        rl_spec_quote_t qq;
        return rl__errf(err, errlen, RL_ESPEC, "period: unknown value \"%s\" (use hour, day, "
                        "week, month, or a duration such as 30d)", rl__spec_quote(&qq, v));
    }
    q->period = RL_PERIOD_FIXED;
    return read_duration(v, "period", RL_QUOTA_FIXED_MIN_MS, RL_QUOTA_FIXED_MAX_MS,
                         &q->period_ms, err, errlen);
}

static int parse_on_failure(rl_quota_t *q, rl_span_t v, char *err, size_t errlen)
{
    rl_spec_quote_t qq;
    if (rl__span_is(v, "open"))
        q->on_failure = RL_FAIL_OPEN;
    else if (rl__span_is(v, "closed"))
        q->on_failure = RL_FAIL_CLOSED;
    else
        return rl__errf(err, errlen, RL_EMODE, "on_failure: unknown value \"%s\" (use open or "
                        "closed; a quota has no local mode)", rl__spec_quote(&qq, v));
    return 0;
}

static int parse_value(rl_quota_t *q, int word, rl_span_t v, char *err, size_t errlen)
{
    switch (word) {
    case W_NAME:
        return parse_name(q, v, err, errlen);
    case W_AMOUNT:
        return read_positive(v, RL_QUOTA_AMOUNT_MAX, "amount", &q->amount, err, errlen);
    case W_PERIOD:
        return parse_period(q, v, err, errlen);
    case W_DEDUP:
        return read_duration(v, "dedup", RL_QUOTA_DEDUP_MIN_MS, RL_QUOTA_DEDUP_MAX_MS,
                             &q->dedup_ms, err, errlen);
    default:
        return parse_on_failure(q, v, err, errlen);
    }
}

static int value_of(void *q, int word, rl_span_t v, char *err, size_t errlen)
{
    return parse_value(q, word, v, err, errlen);
}

void rl_quota_init_sized(rl_quota_t *q, size_t size)
{
    static const rl_quota_t defaults = {
        .period = RL_PERIOD_MONTH,
        .on_failure = RL_FAIL_CLOSED,
        .dedup_ms = RL_QUOTA_DEDUP_DEFAULT_MS,
    };
    rl__struct_init(q, size, &defaults, sizeof defaults);
}

void rl_quota_result_init_sized(rl_quota_result_t *r, size_t size)
{
    rl__struct_init(r, size, NULL, 0);
}

int rl__quota_validate(const rl_quota_t *q, char *err, size_t errlen)
{
    if (rl__struct_ok(q, q->size, RL_QUOTA_SIZE_MIN, sizeof *q) != 0)
        return rl__errf(err, errlen, RL_ESIZE, "size: %zu is no rl_quota_t this library knows",
                        q->size);
    if (!rl__name_valid(q->name, sizeof q->name))
        return rl__errf(err, errlen, RL_ENAME, "name: must be 1..%d bytes of [A-Za-z0-9_.:-]",
                        RL_NAME_MAX - 1);
    if (q->amount < 1 || q->amount > RL_QUOTA_AMOUNT_MAX)
        return rl__errf(err, errlen, RL_ERANGE, "amount: %llu is outside 1..%llu",
                        (unsigned long long)q->amount, (unsigned long long)RL_QUOTA_AMOUNT_MAX);
    if (q->period < RL_PERIOD_HOUR || q->period > RL_PERIOD_FIXED)
        return rl__errf(err, errlen, RL_ERANGE, "period: %d is no RL_PERIOD_*", (int)q->period);
    if (q->period == RL_PERIOD_FIXED &&
        (q->period_ms < RL_QUOTA_FIXED_MIN_MS || q->period_ms > RL_QUOTA_FIXED_MAX_MS ||
         q->period_ms % 1000 != 0))
        return rl__errf(err, errlen, RL_ERANGE, "period_ms: %llu is not a whole number of "
                        "seconds from 1 s to 400 d", (unsigned long long)q->period_ms);
    if (q->period != RL_PERIOD_FIXED && q->period_ms != 0)
        return rl__errf(err, errlen, RL_ERANGE, "period_ms: %llu set for a calendar period "
                        "(only RL_PERIOD_FIXED has one)", (unsigned long long)q->period_ms);
    if (q->dedup_ms < RL_QUOTA_DEDUP_MIN_MS || q->dedup_ms > RL_QUOTA_DEDUP_MAX_MS)
        return rl__errf(err, errlen, RL_ERANGE, "dedup_ms: %llu is outside 1 s..31 d",
                        (unsigned long long)q->dedup_ms);
    if (q->on_failure != RL_FAIL_OPEN && q->on_failure != RL_FAIL_CLOSED)
        return rl__errf(err, errlen, RL_EMODE, "on_failure: %d is neither RL_FAIL_OPEN nor "
                        "RL_FAIL_CLOSED (a quota has no local mode)", (int)q->on_failure);
    return 0;
}

int rl_quota_parse(rl_quota_t *q, const char *spec, char *err, size_t err_len)
{
    /* A stale message from an earlier call must not survive a success. */
    if (err != NULL && err_len > 0)
        err[0] = '\0';
    if (q == NULL || spec == NULL)
        return rl__errf(err, err_len, RL_EINVAL, "%s is NULL", q == NULL ? "q" : "spec");
    /* The caller may not have set q->size: this writes the first layout of
     * rl_quota_t, whatever header the caller was built with (as
     * rl_limit_parse does with rl_limit_t's). */
    rl_quota_init_sized(q, RL_QUOTA_SIZE_MIN);
    unsigned seen = 0;
    int rc = rl__spec_walk(spec, word_names, W_COUNT, "name, amount, period, dedup or on_failure",
                           value_of, q, &seen, err, err_len);
    if (rc != 0)
        return rc;
    if (!(seen & (1u << W_NAME)))
        return rl__errf(err, err_len, RL_ESPEC, "missing name (e.g. name=plan)");
    if (!(seen & (1u << W_AMOUNT)))
        return rl__errf(err, err_len, RL_ESPEC, "missing amount (e.g. amount=1000000)");
    return rl__quota_validate(q, err, err_len);
}

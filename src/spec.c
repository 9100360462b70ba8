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
 * hot is the one fraction: digits with an optional point and up to six
 * decimals ("0.5", "2", ".25" is RL_ESPEC, so is a seventh decimal), in
 * (0, 1000], under the same rule otherwise ("0" and "-1" are RL_ERANGE).
 * shadow follows the same rule ("2" is RL_ERANGE, "yes" is RL_ESPEC); an
 * unknown mode or on_failure value is always RL_EMODE. Words and keyword
 * values are matched case-sensitively, as the header spells them.
 */
#include <stdint.h>
#include <string.h>
#include "ratelimit.h"
#include "errbuf.h"
#include "limitdef.h"
#include "bucket.h"
#include "structsize.h"

typedef struct span {
    const char *p;
    size_t n;
} span_t;

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
    W_COUNT
};

static const char *const word_names[W_COUNT] = {
    "name", "rate", "burst", "mode", "on_failure", "degraded_rate", "shadow", "max_keys",
    "hot",
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

/*
 * An excerpt of the spec fit for a message: a hostile spec may be megabytes
 * long or hold control bytes, and messages end up in logs. Bytes outside
 * printable ASCII (and the quote and backslash) become \xNN; a long excerpt
 * is cut and ends in "...".
 */
#define QUOTE_SRC_MAX 40
typedef struct quote {
    char s[QUOTE_SRC_MAX * 4 + 4];
} quote_t;

static const char *quote(quote_t *q, span_t v)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < v.n && i < QUOTE_SRC_MAX; i++) {
        unsigned char c = (unsigned char)v.p[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            q->s[o++] = (char)c;
        } else {
            q->s[o++] = '\\';
            q->s[o++] = 'x';
            q->s[o++] = hex[c >> 4];
            q->s[o++] = hex[c & 15];
        }
    }
    if (v.n > QUOTE_SRC_MAX) {
        memcpy(q->s + o, "...", 3);
        o += 3;
    }
    q->s[o] = '\0';
    return q->s;
}

static int span_is(span_t v, const char *s)
{
    size_t n = strlen(s);
    return v.n == n && memcmp(v.p, s, n) == 0;
}

static size_t digit_run(span_t v)
{
    size_t i = 0;
    while (i < v.n && v.p[i] >= '0' && v.p[i] <= '9')
        i++;
    return i;
}

static int lower_is(span_t v, const char *s)
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
static int looks_numeric(span_t v)
{
    span_t body = v;
    if (body.n > 0 && (body.p[0] == '-' || body.p[0] == '+')) {
        body.p++;
        body.n--;
    }
    if (lower_is(body, "nan") || lower_is(body, "inf") || lower_is(body, "infinity"))
        return 1;
    if (body.n == 0 || digit_run(body) != body.n)
        return 0;
    /* "+5" is not negative nor out of range: it is a syntax the grammar lacks. */
    return v.p[0] != '+';
}

static int bad_number(span_t v, const char *word, const char *part, char *err, size_t errlen)
{
    quote_t q;
    if (!looks_numeric(v))
        return rl__errf(err, errlen, RL_ESPEC,
                        "%s: %s\"%s\" is not a whole number (decimal digits only: "
                        "no sign, point or exponent)",
                        word, part, quote(&q, v));
    if (v.p[0] == '-')
        return rl__errf(err, errlen, RL_ERANGE, "%s: %s\"%s\" is negative", word, part,
                        quote(&q, v));
    return rl__errf(err, errlen, RL_ERANGE, "%s: %s\"%s\" is not finite", word, part,
                    quote(&q, v));
}

/*
 * A whole number in 1..max. `part` says which number of the word it is
 * ("count ", "multiplier ", or "" for the whole value), for the message.
 */
static int read_positive(span_t v, uint64_t max, const char *word, const char *part,
                         uint64_t *out, char *err, size_t errlen)
{
    quote_t q;
    if (v.n == 0 || digit_run(v) != v.n)
        return bad_number(v, word, part, err, errlen);
    uint64_t x = 0;
    for (size_t i = 0; i < v.n; i++) {
        unsigned d = (unsigned)(v.p[i] - '0');
        /* Checked before the multiply: unsigned wrap would hide the overflow. */
        if (x > (max - d) / 10)
            return rl__errf(err, errlen, RL_ERANGE, "%s: %s\"%s\" is too large (at most %llu)",
                            word, part, quote(&q, v), (unsigned long long)max);
        x = x * 10 + d;
    }
    if (x == 0)
        return rl__errf(err, errlen, RL_ERANGE, "%s: %s\"%s\" must be at least 1", word,
                        part, quote(&q, v));
    *out = x;
    return 0;
}

static const keyword_t *find_keyword(const keyword_t *table, size_t n, span_t v)
{
    for (size_t i = 0; i < n; i++)
        if (span_is(v, table[i].text))
            return &table[i];
    return NULL;
}

/* COUNT/UNIT or COUNT/NUNIT, stored exactly as {count, N * unit}. */
static int parse_rate(rl_rate_t *r, const char *word, span_t v, char *err, size_t errlen)
{
    quote_t q, qu;
    const char *slash = memchr(v.p, '/', v.n);
    if (slash == NULL)
        return rl__errf(err, errlen, RL_ESPEC,
                        "%s: \"%s\" is not COUNT/UNIT (e.g. 100/s or 5/10m)", word,
                        quote(&q, v));
    span_t count = {v.p, (size_t)(slash - v.p)};
    span_t per = {slash + 1, v.n - count.n - 1};
    span_t mult = {per.p, digit_run(per)};
    span_t unit = {per.p + mult.n, per.n - mult.n};

    int rc = read_positive(count, UINT64_MAX, word, "count ", &r->count, err, errlen);
    if (rc != 0)
        return rc;
    if (unit.n == 0)
        return rl__errf(err, errlen, RL_ESPEC, "%s: \"%s\" has no unit (use ms, s, m, h or d)",
                        word, quote(&q, v));
    const keyword_t *u = find_keyword(units, sizeof units / sizeof units[0], unit);
    if (u == NULL)
        return rl__errf(err, errlen, RL_ESPEC,
                        "%s: \"%s\" has unknown unit \"%s\" (use ms, s, m, h or d)", word,
                        quote(&q, v), quote(&qu, unit));
    uint64_t n = 1;
    if (mult.n > 0) {
        rc = read_positive(mult, UINT64_MAX, word, "multiplier ", &n, err, errlen);
        if (rc != 0)
            return rc;
    }
    /* Checked here, not left to rl__limit_validate: the product could wrap. */
    if (n > RL_PERIOD_MS_MAX / (uint64_t)u->value)
        return rl__errf(err, errlen, RL_ERANGE, "%s: \"%s\" has a period longer than 30 days",
                        word, quote(&q, v));
    r->period_ms = n * (uint64_t)u->value;
    return 0;
}

/* Length checked before the copy: a long name is an error, never truncated. */
static int parse_name(rl_limit_t *out, span_t v, char *err, size_t errlen)
{
    quote_t q;
    if (v.n > RL_NAME_MAX - 1)
        return rl__errf(err, errlen, RL_ENAME, "name: \"%s\" is longer than %d bytes",
                        quote(&q, v), RL_NAME_MAX - 1);
    memcpy(out->name, v.p, v.n);
    out->name[v.n] = '\0';
    if (!rl__name_valid(out->name, sizeof out->name))
        return rl__errf(err, errlen, RL_ENAME,
                        "name: \"%s\" has a byte outside [A-Za-z0-9_.:-]", quote(&q, v));
    return 0;
}

static int parse_choice(int32_t *out, const keyword_t *table, size_t n, int code,
                        const char *word, const char *hint, span_t v, char *err, size_t errlen)
{
    quote_t q;
    const keyword_t *k = find_keyword(table, n, v);
    if (k == NULL)
        return rl__errf(err, errlen, code, "%s: unknown value \"%s\" (use %s)", word,
                        quote(&q, v), hint);
    *out = k->value;
    return 0;
}

static int parse_shadow(rl_limit_t *out, span_t v, char *err, size_t errlen)
{
    int code = looks_numeric(v) ? RL_ERANGE : RL_ESPEC;
    return parse_choice(&out->shadow, booleans, sizeof booleans / sizeof booleans[0], code,
                        "shadow", "0, 1, true or false", v, err, errlen);
}

static int parse_max_keys(rl_limit_t *out, span_t v, char *err, size_t errlen)
{
    uint64_t x;
    int rc = read_positive(v, UINT32_MAX, "max_keys", "", &x, err, errlen);
    if (rc == 0)
        out->max_keys = (uint32_t)x;
    return rc;
}

/* A fraction of the rate, as ppm of it (see the rule at the top). */
static int parse_hot(rl_limit_t *out, span_t v, char *err, size_t errlen)
{
    quote_t q;
    size_t whole = digit_run(v);
    span_t frac = {v.p + whole + 1, 0};
    if (whole < v.n && v.p[whole] == '.' && whole > 0) {
        frac.n = v.n - whole - 1;
        if (frac.n == 0 || frac.n > 6 || digit_run(frac) != frac.n)
            return rl__errf(err, errlen, RL_ESPEC,
                            "hot: \"%s\" is not a fraction of the rate (digits, then "
                            "optionally a point and 1 to 6 decimals: 0.5, 2)",
                            quote(&q, v));
    } else if (whole != v.n || whole == 0) {
        if (looks_numeric(v))
            return bad_number(v, "hot", "", err, errlen);
        return rl__errf(err, errlen, RL_ESPEC,
                        "hot: \"%s\" is not a fraction of the rate (digits, then "
                        "optionally a point and 1 to 6 decimals: 0.5, 2)",
                        quote(&q, v));
    }
    uint64_t ppm = 0;
    for (size_t i = 0; i < whole; i++) {
        ppm = ppm * 10 + (uint64_t)(v.p[i] - '0');
        if (ppm > RL_HOT_PPM_MAX / 1000000u)
            return rl__errf(err, errlen, RL_ERANGE, "hot: \"%s\" is above %u (times the rate)",
                            quote(&q, v), (unsigned)(RL_HOT_PPM_MAX / 1000000u));
    }
    ppm *= 1000000u;
    uint64_t scale = 100000;
    for (size_t i = 0; i < frac.n; i++, scale /= 10)
        ppm += (uint64_t)(frac.p[i] - '0') * scale;
    if (ppm == 0 || ppm > RL_HOT_PPM_MAX)
        return rl__errf(err, errlen, RL_ERANGE, "hot: \"%s\" must be in (0, %u]",
                        quote(&q, v), (unsigned)(RL_HOT_PPM_MAX / 1000000u));
    out->hot_ppm = (uint32_t)ppm;
    return 0;
}

static int parse_value(rl_limit_t *out, int word, span_t v, char *err, size_t errlen)
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
        return parse_hot(out, v, err, errlen);
    default:
        return parse_max_keys(out, v, err, errlen);
    }
}

static int find_word(span_t w)
{
    for (int i = 0; i < W_COUNT; i++)
        if (span_is(w, word_names[i]))
            return i;
    return -1;
}

/* One word=value token; `seen` has a bit per word already given. */
static int parse_pair(rl_limit_t *out, span_t tok, unsigned *seen, char *err, size_t errlen)
{
    quote_t q;
    const char *eq = memchr(tok.p, '=', tok.n);
    if (eq == NULL)
        return rl__errf(err, errlen, RL_ESPEC, "\"%s\" has no '=' (expected word=value)",
                        quote(&q, tok));
    span_t w = {tok.p, (size_t)(eq - tok.p)};
    span_t v = {eq + 1, tok.n - w.n - 1};
    int word = find_word(w);
    if (word < 0)
        return rl__errf(err, errlen, RL_ESPEC,
                        "unknown word \"%s\" (use name, rate, burst, mode, on_failure, "
                        "degraded_rate, shadow, max_keys or hot)",
                        quote(&q, w));
    if (*seen & (1u << word))
        return rl__errf(err, errlen, RL_ESPEC, "duplicate word \"%s\"", word_names[word]);
    *seen |= 1u << word;
    if (v.n == 0)
        return rl__errf(err, errlen, RL_ESPEC, "%s: empty value", word_names[word]);
    return parse_value(out, word, v, err, errlen);
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
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
     * defaults are all zero, so a larger caller struct gets a zero tail. */
    rl_limit_t lim;
    memset(&lim, 0, sizeof lim);
    int rc = parse_spec(&lim, spec, err, errlen);
    if (rc == 0 && lim.hot_ppm != 0 && size < offsetof(rl_limit_t, hot_ppm) + sizeof lim.hot_ppm)
        rc = rl__errf(err, errlen, RL_ESIZE,
                      "hot: the caller's rl_limit_t (%zu bytes) has no hot_ppm field: use "
                      "rl_limit_parse_sized(&lim, sizeof lim, ...)",
                      size);
    memset(out, 0, size);
    memcpy(out, &lim, size < sizeof lim ? size : sizeof lim);
    out->size = size;
    return rc;
}

static int parse_spec(rl_limit_t *out, const char *spec, char *err, size_t errlen)
{
    out->size = sizeof *out;

    unsigned seen = 0;
    const char *p = spec;
    for (;;) {
        while (is_blank(*p))
            p++;
        if (*p == '\0')
            break;
        span_t tok = {p, 0};
        while (p[tok.n] != '\0' && !is_blank(p[tok.n]))
            tok.n++;
        p += tok.n;
        int rc = parse_pair(out, tok, &seen, err, errlen);
        if (rc != 0)
            return rc;
    }
    if (!(seen & (1u << W_NAME)))
        return rl__errf(err, errlen, RL_ESPEC, "missing name (e.g. name=api)");
    if (!(seen & (1u << W_RATE)))
        return rl__errf(err, errlen, RL_ESPEC, "missing rate (e.g. rate=100/s)");
    return rl__limit_validate(out, err, errlen);
}

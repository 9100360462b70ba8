/* SPDX-License-Identifier: MIT */
/*
 * rl_retry_hint: when a server said to come back, from Retry-After (RFC
 * 9110, section 10.2.3: delta-seconds or an HTTP-date in its preferred
 * IMF-fixdate form) and RateLimit (draft-ietf-httpapi-ratelimit-headers:
 * items `"policy";r=<remaining>;t=<seconds>`, the form rl_headers
 * writes). A header is untrusted input: every byte is checked, numbers
 * saturate instead of wrapping, and anything else is RL_ESPEC.
 */
#include <stdint.h>
#include <string.h>
#include "ratelimit.h"

/* Seconds past this are a hint no cap honours: saturate there. */
#define SECONDS_MAX UINT64_C(1000000000000)

static const char *skip_ows(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* Decimal digits at *p (at least one), saturating at SECONDS_MAX. */
static int digits(const char **p, uint64_t *out)
{
    const char *q = *p;
    uint64_t v = 0;
    while (*q >= '0' && *q <= '9') {
        v = v >= SECONDS_MAX ? SECONDS_MAX : v * 10 + (uint64_t)(*q - '0');
        q++;
    }
    if (q == *p)
        return -1;
    *p = q;
    *out = v > SECONDS_MAX ? SECONDS_MAX : v;
    return 0;
}

/* Exactly n digits. */
static int fixed(const char *p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's
 * days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* "Sun, 06 Nov 1994 08:49:37 GMT" as Unix milliseconds. */
static int imf_fixdate(const char *p, int64_t *unix_ms)
{
    static const char days[] = "MonTueWedThuFriSatSun";
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    if (strlen(p) != 29 || p[3] != ',' || p[4] != ' ' || p[7] != ' ' || p[11] != ' ' ||
        p[16] != ' ' || p[19] != ':' || p[22] != ':' || p[25] != ' ' ||
        memcmp(p + 26, "GMT", 3) != 0)
        return -1;
    int day_ok = 0, month = 0;
    for (int i = 0; i < 7; i++)
        day_ok |= memcmp(p, days + 3 * i, 3) == 0;
    for (int i = 0; i < 12; i++)
        if (memcmp(p + 8, months + 3 * i, 3) == 0)
            month = i + 1;
    int d, y, hh, mm, ss;
    if (!day_ok || month == 0 || fixed(p + 5, 2, &d) || fixed(p + 12, 4, &y) ||
        fixed(p + 17, 2, &hh) || fixed(p + 20, 2, &mm) || fixed(p + 23, 2, &ss) || d < 1 ||
        d > 31 || hh > 23 || mm > 59 || ss > 60)
        return -1;
    int64_t secs = days_from_civil(y, month, d) * 86400 + hh * 3600 + mm * 60 + ss;
    *unix_ms = secs * 1000;
    return 0;
}

static int retry_after(const char *v, uint64_t now_unix_ms, uint64_t *ms)
{
    const char *p = skip_ows(v);
    uint64_t secs;
    const char *q = p;
    if (digits(&q, &secs) == 0 && *skip_ows(q) == '\0') {
        *ms = secs * 1000;
        return 0;
    }
    char date[32];
    size_t n = strlen(p);
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    if (n >= sizeof date)
        return -1;
    memcpy(date, p, n);
    date[n] = '\0';
    int64_t at;
    if (imf_fixdate(date, &at) != 0)
        return -1;
    *ms = at <= 0 || (uint64_t)at <= now_unix_ms ? 0 : (uint64_t)at - now_unix_ms;
    return 0;
}

/* One item's bare token or quoted string (RFC 8941), skipped. */
static int skip_item_name(const char **p)
{
    const char *q = *p;
    if (*q == '"') {
        for (q++; *q != '"'; q++) {
            if (*q == '\\' && (q[1] == '"' || q[1] == '\\'))
                q++;
            else if ((unsigned char)*q < 0x20 || *q == 0x7f)
                return -1; /* the end of the value, or a control byte */
        }
        q++;
    } else {
        while ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
               (*q != '\0' && strchr("!#$%&'*+-.^_`|~:/", *q) != NULL))
            q++;
        if (q == *p)
            return -1;
    }
    *p = q;
    return 0;
}

/* The largest t (ms) of an item whose r is 0; 0 found, 1 none, -1 bad. */
static int ratelimit(const char *v, uint64_t *ms)
{
    const char *p = skip_ows(v);
    int found = 0;
    while (*p != '\0') {
        if (skip_item_name(&p) != 0)
            return -1;
        int has_r = 0, has_t = 0;
        uint64_t r = 0, t = 0;
        while (*p == ';') {
            p = skip_ows(p + 1);
            const char *key = p;
            while (*p >= 'a' && *p <= 'z')
                p++;
            size_t klen = (size_t)(p - key);
            uint64_t val = 0;
            if (*p == '=') {
                p++;
                if (digits(&p, &val) != 0) {
                    /* another parameter's non-integer value: skip it */
                    if (klen == 1 && (*key == 'r' || *key == 't'))
                        return -1;
                    while (*p != ';' && *p != ',' && *p != '\0')
                        p++;
                }
            }
            if (klen == 1 && *key == 'r')
                has_r = 1, r = val;
            else if (klen == 1 && *key == 't')
                has_t = 1, t = val;
        }
        if (has_r && has_t && r == 0 && (!found || t * 1000 > *ms)) {
            *ms = t * 1000;
            found = 1;
        }
        p = skip_ows(p);
        if (*p == ',')
            p = skip_ows(p + 1);
        else if (*p != '\0')
            return -1;
    }
    return found ? 0 : 1;
}

int rl_retry_hint(const char *retry_after_value, const char *ratelimit_value,
                  uint64_t now_unix_ms, int64_t *hint_ms)
{
    if (hint_ms == NULL)
        return RL_EINVAL;
    *hint_ms = -1;
    uint64_t a = 0, b = 0;
    int have_a = 0, have_b = 0;
    if (retry_after_value != NULL) {
        if (retry_after(retry_after_value, now_unix_ms, &a) != 0)
            return RL_ESPEC;
        have_a = 1;
    }
    if (ratelimit_value != NULL) {
        int rc = ratelimit(ratelimit_value, &b);
        if (rc < 0)
            return RL_ESPEC;
        have_b = rc == 0;
    }
    if (!have_a && !have_b)
        return 0;
    uint64_t ms = have_a && (!have_b || a >= b) ? a : b;
    *hint_ms = (int64_t)ms; /* at most SECONDS_MAX x 1000 < 2^63 */
    return 1;
}

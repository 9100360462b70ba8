/* SPDX-License-Identifier: MIT */
/*
 * rl_headers: render a decision as HTTP response header lines.
 *
 * RateLimit-Policy and RateLimit follow draft-ietf-httpapi-ratelimit-headers-11
 * (23 May 2026), "RateLimit header fields for HTTP", sections 3 and 4. Both are
 * Structured Field Lists (RFC 9651) of one Item each: the policy name as an
 * sf-string, then Integer parameters:
 *   RateLimit-Policy: "<name>";q=<quota>;w=<window seconds>
 *   RateLimit: "<name>";r=<available quota>;t=<seconds>
 * The same syntax holds since -08 (-09 and -10 are identical on this point).
 *
 * Choices the draft leaves to us, and why:
 * - The name is an sf-string (the draft says the Item MUST be a String), so
 *   every byte of a valid limit name ([A-Za-z0-9_.:-]) is written as is. A
 *   name that breaks the contract is still rendered safely: '"' and '\' are
 *   escaped as RFC 9651 requires, and bytes an sf-string cannot hold (controls
 *   such as CR/LF, non-ASCII) become '_', so no input can inject a header.
 *   At most RL_NAME_MAX - 1 bytes are read: names are never longer, and the
 *   bound keeps the output length (an int) bounded whatever the pointer holds.
 * - An sf-integer has at most 15 digits; a larger value would make the whole
 *   field malformed (and the draft tells clients to ignore malformed fields),
 *   so q, w, r and t saturate at 999999999999999 instead. The X-RateLimit-*
 *   and Retry-After lines are plain decimal and carry the full uint64 value.
 * - Millisecond values become whole seconds rounded up, so a client that
 *   waits that long is never early.
 * - t: on an allow, the seconds until the bucket is full again (as
 *   X-RateLimit-Reset). On a deny, the Retry-After value itself, both taken
 *   from one rounded-up figure: section 6 says Retry-After SHOULD NOT
 *   reference a point in time earlier than the end of the effective window,
 *   and a bucket that denies can be full again long after it admits the
 *   retry (t=100 with Retry-After: 1 told a client both "wait 1 s" and "no
 *   more than r=0 for 100 s"). Retry-After is the sooner, exact answer and
 *   the one clients must follow (section 7), so t follows it. Only
 *   saturation (t at 15 digits, Retry-After past 10^15 s) makes them differ,
 *   and then Retry-After is the later one, as the draft wants.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "ratelimit.h"
#include "text/textsink.h"
#include "base/structsize.h"

/* RFC 9651 section 3.3.1: sf-integer is at most 15 decimal digits. */
#define RL_SF_INT_MAX UINT64_C(999999999999999)

/* The longest text rl_headers can produce: a 63-byte name of escaped
 * characters (128 bytes quoted), 15-digit parameters, 20-digit X-RateLimit
 * counts, 17-digit second counts (ceil(UINT64_MAX / 1000)), and Retry-After.
 * 184 + 177 + 41 + 45 + 38 + 32; tests/test_headers.c checks it. */
#define RL_HEADERS_WORST 517

/* rl_headers_jitter's widest jitter: one hour. */
#define RL_HEADERS_JITTER_MAX_MS 3600000u

/* Policy name used when the decision carries none. */
#define RL_DEFAULT_POLICY "default"

/* A string literal's length at compile time: no strlen on the hot path. */
#define PUT_LIT(s, lit) rl__put_bytes((s), (lit), sizeof(lit) - 1)

/* ceil(ms / 1000) without the overflow of (ms + 999) / 1000 near UINT64_MAX. */
static uint64_t ms_to_s_up(uint64_t ms)
{
    return ms / 1000 + (ms % 1000 != 0);
}

static uint64_t sf_int(uint64_t v)
{
    return v > RL_SF_INT_MAX ? RL_SF_INT_MAX : v;
}

/* The policy name as an sf-string, quotes included (see the file comment). */
static void put_sf_string(rl_sink_t *s, const char *name)
{
    rl__put_char(s, '"');
    for (size_t i = 0; i < RL_NAME_MAX - 1 && name[i] != '\0'; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c == '"' || c == '\\')
            rl__put_char(s, '\\');
        else if (c < 0x20 || c > 0x7e)
            c = '_';
        rl__put_char(s, (char)c);
    }
    rl__put_char(s, '"');
}

/* The text, a deny's Retry-After extra_ms later (rl_headers_jitter's). */
static int render(const rl_decision_t *d, uint64_t extra_ms, char *buf, size_t len)
{
    if (d == NULL || (buf == NULL && len > 0))
        return RL_EINVAL;
    /* An output struct: a newer caller's larger size is fine whatever its
     * tail holds (we write nothing there), so only the minimum is checked. */
    if (d->size < RL_DECISION_SIZE_MIN)
        return RL_ESIZE;

    rl_sink_t s = {buf, len, 0};
    uint64_t reset_s = ms_to_s_up(d->reset_ms);
    /* Anything but an allow is a refusal (compare with RL_ALLOW, never 0). */
    int deny = d->allowed != RL_ALLOW;
    /* Saturating: a retry near UINT64_MAX ms stays there, never wraps early. */
    uint64_t retry_ms = d->retry_after_ms > UINT64_MAX - extra_ms ? UINT64_MAX
                                                                   : d->retry_after_ms + extra_ms;
    uint64_t retry_s = ms_to_s_up(retry_ms);
    /* Retry-After: 0 invites an immediate retry that will be refused. */
    if (retry_s == 0)
        retry_s = 1;

    /* An in-flight limit's decision has no window and no reset: a permit
     * comes back when a request ends, not on a schedule. Its policy names
     * the limit (q) without w, its RateLimit the permits left (r) with t
     * only on a deny, and X-RateLimit-Reset is left out. */
    int inflight = (d->flags & RL_FLAG_INFLIGHT) != 0;
    /* window_ms and policy exist only in the appended part of the struct: an
     * older caller's decision ends before them, so they must not be read. */
    if (d->size >= offsetof(rl_decision_t, policy) + sizeof(d->policy)) {
        const char *name = d->policy;
        if (name == NULL || name[0] == '\0')
            name = RL_DEFAULT_POLICY;
        uint64_t window_s = ms_to_s_up(d->window_ms);
        if (window_s == 0)
            window_s = 1; /* the draft requires w to be non-zero */

        PUT_LIT(&s, "RateLimit-Policy: ");
        put_sf_string(&s, name);
        PUT_LIT(&s, ";q=");
        rl__put_u64(&s, sf_int(d->limit));
        if (!inflight) {
            PUT_LIT(&s, ";w=");
            rl__put_u64(&s, sf_int(window_s));
        }
        PUT_LIT(&s, "\r\nRateLimit: ");
        put_sf_string(&s, name);
        PUT_LIT(&s, ";r=");
        rl__put_u64(&s, sf_int(d->remaining));
        if (!inflight || deny) {
            PUT_LIT(&s, ";t=");
            rl__put_u64(&s, sf_int(deny ? retry_s : reset_s));
        }
        PUT_LIT(&s, "\r\n");
    }

    PUT_LIT(&s, "X-RateLimit-Limit: ");
    rl__put_u64(&s, d->limit);
    PUT_LIT(&s, "\r\nX-RateLimit-Remaining: ");
    rl__put_u64(&s, d->remaining);
    if (!inflight) {
        /* Delta seconds until the bucket is full, not an epoch timestamp. */
        PUT_LIT(&s, "\r\nX-RateLimit-Reset: ");
        rl__put_u64(&s, reset_s);
    }
    PUT_LIT(&s, "\r\n");

    if (deny) {
        PUT_LIT(&s, "Retry-After: ");
        rl__put_u64(&s, retry_s);
        PUT_LIT(&s, "\r\n");
    }

    rl__sink_finish(&s);
    /* At most RL_HEADERS_WORST (517) bytes, so the cast cannot truncate. */
    return (int)s.len;
}

int rl_headers(const rl_decision_t *d, char *buf, size_t len) { return render(d, 0, buf, len); }

int rl_headers_jitter(const rl_decision_t *d, uint32_t jitter_ms, uint64_t rnd, char *buf,
                      size_t len)
{
    if (jitter_ms > RL_HEADERS_JITTER_MAX_MS)
        return RL_ERANGE;
    return render(d, rnd % ((uint64_t)jitter_ms + 1), buf, len);
}

/* SPDX-License-Identifier: MIT */
/*
 * An snprintf-like text sink, shared by the renderers (rl_headers,
 * rl_metrics_text): it counts every byte of the full text and stores those
 * that fit before the final NUL slot, so a short buffer gets a prefix and the
 * caller gets the length it needed. cap is 0 when there is no buffer at all.
 */
#ifndef RL_TEXTSINK_H
#define RL_TEXTSINK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct rl_sink {
    char *buf;
    size_t cap;
    size_t len; /* bytes the full text needs so far */
} rl_sink_t;

static inline void rl__put_bytes(rl_sink_t *s, const char *p, size_t n)
{
    /* cap - 1: the last byte is reserved for the NUL. */
    size_t room = s->len + 1 < s->cap ? s->cap - 1 - s->len : 0;
    size_t k = n < room ? n : room;
    if (k > 0) /* memcpy to a NULL buffer is undefined even for 0 bytes */
        memcpy(s->buf + s->len, p, k);
    s->len += n;
}

static inline void rl__put_char(rl_sink_t *s, char c) { rl__put_bytes(s, &c, 1); }

static inline void rl__put_str(rl_sink_t *s, const char *p) { rl__put_bytes(s, p, strlen(p)); }

/* Decimal without snprintf: faster, and free of locale and format-string
 * concerns. */
static inline void rl__put_u64(rl_sink_t *s, uint64_t v)
{
    char tmp[20]; /* UINT64_MAX has 20 digits */
    size_t i = sizeof tmp;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    rl__put_bytes(s, tmp + i, sizeof tmp - i);
}

/* NUL-terminate what was stored; returns the full length (snprintf's). */
static inline size_t rl__sink_finish(rl_sink_t *s)
{
    if (s->cap > 0)
        s->buf[s->len < s->cap ? s->len : s->cap - 1] = '\0';
    return s->len;
}

#endif

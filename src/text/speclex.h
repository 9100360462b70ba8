/* SPDX-License-Identifier: MIT */
/*
 * The word=value grammar the spec parsers share (text/spec.c for limits,
 * quota/spec.c for quotas): splitting a hostile string into tokens, checking
 * each word is known and given once, and quoting its bytes safely into
 * messages. Each parser keeps its own words and what their values mean.
 * Pure: no allocation, no state.
 */
#ifndef RL_SPECLEX_H
#define RL_SPECLEX_H

#include <stddef.h>
#include <string.h>

typedef struct rl_span {
    const char *p;
    size_t n;
} rl_span_t;

static inline int rl__span_is(rl_span_t v, const char *s)
{
    size_t n = strlen(s);
    return v.n == n && memcmp(v.p, s, n) == 0;
}

/* The length of v's leading run of decimal digits. */
static inline size_t rl__span_digits(rl_span_t v)
{
    size_t i = 0;
    while (i < v.n && v.p[i] >= '0' && v.p[i] <= '9')
        i++;
    return i;
}

/*
 * An excerpt of the spec fit for a message: a hostile spec may be megabytes
 * long or hold control bytes, and messages end up in logs. Bytes outside
 * printable ASCII (and the quote and backslash) become \xNN; an excerpt
 * longer than RL_SPEC_QUOTE_MAX bytes is cut and ends in "...".
 */
#define RL_SPEC_QUOTE_MAX 40
typedef struct rl_spec_quote {
    char s[RL_SPEC_QUOTE_MAX * 4 + 4];
} rl_spec_quote_t;

const char *rl__spec_quote(rl_spec_quote_t *q, rl_span_t v);

/* The value of one word: `word` indexes the parser's word list. */
typedef int rl_spec_value_fn(void *ctx, int word, rl_span_t value, char *err, size_t errlen);

/*
 * Walk spec's space- or tab-separated word=value tokens left to right. A
 * token without '=', a word not in words[0, nwords) (nwords <= 32), a word
 * given twice, or an empty value is RL_ESPEC, with a message naming it
 * (`known` lists the words for the "unknown word" message); otherwise
 * on_value decides, and its first error stops the walk. *seen gets a bit
 * per word given. 0 when every token was taken.
 */
int rl__spec_walk(const char *spec, const char *const *words, int nwords, const char *known,
                  rl_spec_value_fn *on_value, void *ctx, unsigned *seen, char *err,
                  size_t errlen);

#endif

/* SPDX-License-Identifier: MIT */
/* The word=value grammar the spec parsers share (text/speclex.h). */
#include "text/speclex.h"
#include "ratelimit.h"
#include "base/errors.h"

const char *rl__spec_quote(rl_spec_quote_t *q, rl_span_t v)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < v.n && i < RL_SPEC_QUOTE_MAX; i++) {
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
    if (v.n > RL_SPEC_QUOTE_MAX) {
        memcpy(q->s + o, "...", 3);
        o += 3;
    }
    q->s[o] = '\0';
    return q->s;
}

static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* One word=value token. */
static int take_pair(rl_span_t tok, const char *const *words, int nwords, const char *known,
                     rl_spec_value_fn *on_value, void *ctx, unsigned *seen, char *err,
                     size_t errlen)
{
    rl_spec_quote_t q;
    const char *eq = memchr(tok.p, '=', tok.n);
    if (eq == NULL)
        return rl__errf(err, errlen, RL_ESPEC, "\"%s\" has no '=' (expected word=value)",
                        rl__spec_quote(&q, tok));
    rl_span_t w = {tok.p, (size_t)(eq - tok.p)};
    rl_span_t v = {eq + 1, tok.n - w.n - 1};
    int word = -1;
    for (int i = 0; i < nwords && word < 0; i++)
        if (rl__span_is(w, words[i]))
            word = i;
    if (word < 0)
        return rl__errf(err, errlen, RL_ESPEC, "unknown word \"%s\" (use %s)",
                        rl__spec_quote(&q, w), known);
    if (*seen & (1u << word))
        return rl__errf(err, errlen, RL_ESPEC, "duplicate word \"%s\"", words[word]);
    *seen |= 1u << word;
    if (v.n == 0)
        return rl__errf(err, errlen, RL_ESPEC, "%s: empty value", words[word]);
    return on_value(ctx, word, v, err, errlen);
}

int rl__spec_walk(const char *spec, const char *const *words, int nwords, const char *known,
                  rl_spec_value_fn *on_value, void *ctx, unsigned *seen, char *err,
                  size_t errlen)
{
    const char *p = spec;
    for (;;) {
        while (is_blank(*p))
            p++;
        if (*p == '\0')
            return 0;
        rl_span_t tok = {p, 0};
        while (p[tok.n] != '\0' && !is_blank(p[tok.n]))
            tok.n++;
        p += tok.n;
        int rc = take_pair(tok, words, nwords, known, on_value, ctx, seen, err, errlen);
        if (rc != 0)
            return rc;
    }
}

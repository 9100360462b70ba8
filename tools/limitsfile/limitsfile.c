/* SPDX-License-Identifier: MIT */
/* The limits file: one parser for every consumer (limitsfile.h). */
#include "limitsfile.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const scope_names[] = {NULL, "client", "ip", "shared"};

typedef struct parser {
    limitsfile_t *out;
    size_t max_rules;
    unsigned flags;
    limitsfile_report_fn report;
    void *ud;
    int errors;
} parser_t;

__attribute__((format(printf, 4, 5))) static void bad(parser_t *p, unsigned line, int code,
                                                       const char *fmt, ...)
{
    char msg[LIMITSFILE_LINE_MAX + 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->errors++;
    if (p->report != NULL)
        p->report(p->ud, line, code, msg);
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t';
}

/* The next whitespace-separated word of *s, NUL-terminated in place. */
static char *next_word(char **s)
{
    char *p = *s;
    while (is_space(*p))
        p++;
    if (*p == '\0')
        return NULL;
    char *word = p;
    while (*p != '\0' && !is_space(*p))
        p++;
    if (*p != '\0')
        *p++ = '\0';
    *s = p;
    return word;
}

/* NULL, or why the word is not a pattern. */
static const char *parse_pattern(limitsfile_rule_t *r, const char *word)
{
    size_t n = strlen(word);
    if (strcmp(word, "*") == 0) {
        r->prefix = true;
        r->pattern_len = 0;
        r->pattern[0] = '\0';
        return NULL;
    }
    if (word[0] != '/')
        return "a pattern is \"*\", or a path starting with '/'";
    if (n >= LIMITSFILE_PATTERN_MAX)
        return "pattern longer than 255 bytes";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)word[i];
        if (c < 0x21 || c > 0x7e)
            return "pattern with a byte that is not visible ASCII";
        if (c == '?')
            return "pattern with '?': rules match the path, never the query";
        if (c == '*' && i != n - 1)
            return "'*' is allowed only at the end of a pattern";
    }
    r->prefix = word[n - 1] == '*';
    r->pattern_len = r->prefix ? n - 1 : n;
    memcpy(r->pattern, word, r->pattern_len);
    r->pattern[r->pattern_len] = '\0';
    return NULL;
}

/* A spec's words are name=value and start with a letter; a pattern is "*"
 * or a path, which may hold '=' too. */
static bool is_spec_word(const char *s)
{
    size_t n = 0;
    while (s[n] != '\0' && !is_space(s[n]))
        n++;
    return s[0] != '/' && s[0] != '*' && memchr(s, '=', n) != NULL;
}

/* Whether a SPEC has a word starting with w ("amount="): a quota's. */
static bool has_word(const char *s, const char *w)
{
    size_t n = strlen(w);
    for (;;) {
        while (is_space(*s))
            s++;
        if (*s == '\0')
            return false;
        if (strncmp(s, w, n) == 0)
            return true;
        while (*s != '\0' && !is_space(*s))
            s++;
    }
}

static limitsfile_rule_t *next_rule(limitsfile_t *lf)
{
    if (lf->count == lf->cap) {
        size_t cap = lf->cap != 0 ? 2 * lf->cap : 16;
        limitsfile_rule_t *grown = realloc(lf->rules, cap * sizeof *grown);
        if (grown == NULL)
            return NULL;
        lf->rules = grown;
        lf->cap = cap;
    }
    return &lf->rules[lf->count];
}

/* One line, comment and surrounding blanks removed, NUL-terminated and
 * modified in place. Returns 0, or RL_ENOMEM. */
static int parse_line(parser_t *p, char *s, unsigned line)
{
    limitsfile_rule_t *r = next_rule(p->out);
    if (r == NULL)
        return RL_ENOMEM;
    memset(r, 0, sizeof *r);
    r->line = line;
    if (!is_spec_word(s)) {
        char *pattern = next_word(&s);
        char *scope = next_word(&s);
        while (is_space(*s))
            s++;
        if (scope == NULL || *s == '\0') {
            bad(p, line, RL_ESPEC,
                "expected PATTERN SCOPE SPEC, e.g. \"* client name=api rate=10/s\"");
            return 0;
        }
        const char *why = parse_pattern(r, pattern);
        if (why != NULL) {
            bad(p, line, RL_ESPEC, "%s: %s", why, pattern);
            return 0;
        }
        size_t i;
        for (i = 1; i < sizeof scope_names / sizeof scope_names[0]; i++)
            if (strcmp(scope, scope_names[i]) == 0)
                break;
        if (i == sizeof scope_names / sizeof scope_names[0]) {
            bad(p, line, RL_ESPEC, "unknown scope \"%s\" (client, ip or shared)", scope);
            return 0;
        }
        r->scope = (limitsfile_scope_t)i;
        if (strncmp(s, "tokens", 6) == 0 && (s[6] == '\0' || is_space(s[6]))) {
            r->tokens = true;
            next_word(&s);
            while (is_space(*s))
                s++;
            if (*s == '\0') {
                bad(p, line, RL_ESPEC, "expected a SPEC after \"tokens\"");
                return 0;
            }
        }
    } else if (p->flags & LIMITSFILE_ROUTES_REQUIRED) {
        bad(p, line, RL_ESPEC,
            "expected PATTERN SCOPE SPEC, e.g. \"* client name=api rate=10/s\": "
            "this reader routes requests, so every rule needs a pattern and a scope");
        return 0;
    }
    char err[256] = "";
    rl_limit_init(&r->limit);
    int rc;
    if (has_word(s, "amount=")) {
        r->is_quota = true;
        rc = rl_quota_parse(&r->quota, s, err, sizeof err);
        memcpy(r->limit.name, r->quota.name, sizeof r->limit.name);
    } else {
        rc = rl_limit_parse(&r->limit, s, err, sizeof err);
    }
    if (rc < 0) {
        bad(p, line, rc, "%s", err[0] != '\0' ? err : rl_strerror(rc));
        return 0;
    }
    if (r->tokens && (r->is_quota || r->limit.kind != RL_KIND_RATE)) {
        bad(p, line, RL_ESPEC, "\"tokens\" is for a rate limit (not a quota or kind=inflight)");
        return 0;
    }
    for (size_t j = 0; j < p->out->count; j++) {
        if (strcmp(p->out->rules[j].limit.name, r->limit.name) == 0) {
            bad(p, line, RL_EEXIST, "duplicate limit name \"%s\" (first defined on line %u)",
                r->limit.name, p->out->rules[j].line);
            return 0;
        }
    }
    if (p->out->count == p->max_rules) {
        bad(p, line, RL_ELIMITS, "more than %zu limits", p->max_rules);
        return 0;
    }
    p->out->count++;
    return 0;
}

static size_t count_matches(const limitsfile_t *lf, const char *path, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < lf->count; i++)
        n += limitsfile_rule_matches(&lf->rules[i], path, len);
    return n;
}

/*
 * rl_check_multi takes at most RL_MULTI_MAX limits. The rules a path
 * matches are its exact rule and the prefix rules along it, and any path's
 * set is contained in that of the longest pattern it matches (checked as a
 * path itself), so checking each pattern as a path bounds every path.
 */
static void check_match_bound(parser_t *p)
{
    for (size_t i = 0; i < p->out->count; i++) {
        const limitsfile_rule_t *r = &p->out->rules[i];
        if (r->scope == LIMITSFILE_SCOPE_NONE)
            continue;
        size_t n = count_matches(p->out, r->pattern, r->pattern_len);
        if (n > RL_MULTI_MAX)
            bad(p, r->line, RL_ERANGE,
                "a path matching \"%s%s\" would be checked against %zu rules; at most %d can be",
                r->pattern, r->prefix ? "*" : "", n, RL_MULTI_MAX);
    }
}

int limitsfile_parse(limitsfile_t *out, const char *text, size_t len,
                     const limitsfile_opts_t *opts, limitsfile_report_fn report, void *ud)
{
    memset(out, 0, sizeof *out);
    parser_t p = {out, RL_MAX_LIMITS, 0, report, ud, 0};
    if (opts != NULL) {
        if (opts->max_rules != 0)
            p.max_rules = opts->max_rules;
        p.flags = opts->flags;
    }
    char buf[LIMITSFILE_LINE_MAX];
    unsigned line = 0;
    for (size_t pos = 0; pos < len;) {
        line++;
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl != NULL ? (size_t)(nl - text) : len;
        const char *s = text + pos;
        size_t n = end - pos;
        pos = end + 1;
        if (n > 0 && s[n - 1] == '\r')
            n--;
        if (n >= sizeof buf) {
            bad(&p, line, RL_ERANGE, "line longer than %d bytes", LIMITSFILE_LINE_MAX - 1);
            continue;
        }
        if (memchr(s, '\0', n) != NULL) {
            /* rl_limit_parse would stop at it and read a different spec */
            bad(&p, line, RL_ESPEC, "the line holds a NUL byte");
            continue;
        }
        const char *hash = memchr(s, '#', n);
        if (hash != NULL)
            n = (size_t)(hash - s);
        while (n > 0 && (is_space(*s) || *s == '\r')) {
            s++;
            n--;
        }
        while (n > 0 && (is_space(s[n - 1]) || s[n - 1] == '\r'))
            n--;
        if (n == 0)
            continue;
        memcpy(buf, s, n);
        buf[n] = '\0';
        if (parse_line(&p, buf, line) != 0)
            return RL_ENOMEM;
    }
    if (p.errors == 0)
        check_match_bound(&p);
    return p.errors;
}

int limitsfile_load(limitsfile_t *out, const char *path, const limitsfile_opts_t *opts,
                    limitsfile_report_fn report, void *ud)
{
    memset(out, 0, sizeof *out);
    parser_t p = {out, 0, 0, report, ud, 0};
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        bad(&p, 0, RL_EINVAL, "cannot open: %s", strerror(errno));
        return p.errors;
    }
    char *text = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (len == cap) {
            cap = cap != 0 ? 2 * cap : 64 * 1024;
            if (cap > LIMITSFILE_MAX_BYTES + 1)
                cap = LIMITSFILE_MAX_BYTES + 1;
            char *grown = realloc(text, cap);
            if (grown == NULL) {
                rc = RL_ENOMEM;
                break;
            }
            text = grown;
        }
        size_t got = fread(text + len, 1, cap - len, f);
        len += got;
        if (got == 0 || len > LIMITSFILE_MAX_BYTES)
            break;
    }
    int failed = ferror(f);
    fclose(f);
    if (rc == 0) {
        if (failed)
            bad(&p, 0, RL_EINVAL, "read error");
        else if (len > LIMITSFILE_MAX_BYTES)
            bad(&p, 0, RL_ERANGE, "file larger than %u bytes", LIMITSFILE_MAX_BYTES);
        else
            rc = limitsfile_parse(out, text, len, opts, report, ud);
    }
    free(text);
    if (rc < 0)
        return rc;
    return p.errors != 0 ? p.errors : rc;
}

void limitsfile_free(limitsfile_t *lf)
{
    free(lf->rules);
    memset(lf, 0, sizeof *lf);
}

bool limitsfile_rule_matches(const limitsfile_rule_t *r, const char *path, size_t len)
{
    if (r->scope == LIMITSFILE_SCOPE_NONE)
        return false;
    if (!r->prefix)
        return len == r->pattern_len && memcmp(path, r->pattern, len) == 0;
    return len >= r->pattern_len && memcmp(path, r->pattern, r->pattern_len) == 0;
}

const char *limitsfile_scope_name(limitsfile_scope_t scope)
{
    if ((size_t)scope >= sizeof scope_names / sizeof scope_names[0])
        return NULL;
    return scope_names[scope];
}

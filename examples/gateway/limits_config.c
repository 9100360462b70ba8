/* SPDX-License-Identifier: MIT */
/* The limits file: parse, apply to an instance (all or nothing), match. */
#include "limits_config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const scope_names[] = {"client", "ip", "shared"};

__attribute__((format(printf, 4, 5))) static void reportf(limits_report_fn report, void *ud,
                                                           int line, const char *fmt, ...)
{
    char msg[LIMITS_LINE_MAX + 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (report != NULL)
        report(ud, line, msg);
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

static const char *parse_pattern(limit_rule_t *r, const char *word)
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
    if (n >= LIMITS_PATTERN_MAX)
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

/* One line (NUL-terminated, modified in place): a rule, or nothing. */
static int parse_line(limit_set_t *set, char *text, int line, limits_report_fn report, void *ud)
{
    char *s = text;
    while (is_space(*s))
        s++;
    if (*s == '\0' || *s == '#')
        return 0;
    char *pattern = next_word(&s);
    char *scope = next_word(&s);
    while (is_space(*s))
        s++;
    if (scope == NULL || *s == '\0') {
        reportf(report, ud, line, "expected PATTERN SCOPE SPEC, e.g. \"* client name=api rate=10/s\"");
        return 1;
    }
    if (set->count == LIMITS_MAX_RULES) {
        reportf(report, ud, line, "more than %d rules", LIMITS_MAX_RULES);
        return 1;
    }
    limit_rule_t *r = &set->rules[set->count];
    memset(r, 0, sizeof *r);
    r->line = line;
    r->id = -1;
    const char *bad = parse_pattern(r, pattern);
    if (bad != NULL) {
        reportf(report, ud, line, "%s: %s", bad, pattern);
        return 1;
    }
    size_t i;
    for (i = 0; i < sizeof scope_names / sizeof scope_names[0]; i++)
        if (strcmp(scope, scope_names[i]) == 0)
            break;
    if (i == sizeof scope_names / sizeof scope_names[0]) {
        reportf(report, ud, line, "unknown scope \"%s\" (client, ip or shared)", scope);
        return 1;
    }
    r->scope = (limit_scope_t)i;
    char err[256];
    int rc = rl_limit_parse(&r->limit, s, err, sizeof err);
    if (rc < 0) {
        reportf(report, ud, line, "bad limit spec: %s (%s)", err, rl_err_name(rc));
        return 1;
    }
    for (size_t j = 0; j < set->count; j++) {
        if (strcmp(set->rules[j].limit.name, r->limit.name) == 0) {
            reportf(report, ud, line, "limit name \"%s\" already used on line %d", r->limit.name,
                    set->rules[j].line);
            return 1;
        }
    }
    set->count++;
    return 0;
}

static bool rule_matches(const limit_rule_t *r, const char *path, size_t len, bool metrics)
{
    if (!r->prefix)
        return len == r->pattern_len && memcmp(path, r->pattern, len) == 0;
    return !metrics && len >= r->pattern_len && memcmp(path, r->pattern, r->pattern_len) == 0;
}

static size_t count_matches(const limit_set_t *set, const char *path, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < set->count; i++)
        n += rule_matches(&set->rules[i], path, len, false);
    return n;
}

/*
 * rl_check_multi takes at most RL_MULTI_MAX limits. The rules a path
 * matches are its exact rule and the prefix rules along it, and any path's
 * set is contained in that of the longest pattern it matches (checked as a
 * path itself), so checking each pattern as a path bounds every path.
 */
static int check_match_bound(const limit_set_t *set, limits_report_fn report, void *ud)
{
    int errors = 0;
    for (size_t i = 0; i < set->count; i++) {
        const limit_rule_t *r = &set->rules[i];
        size_t n = count_matches(set, r->pattern, r->pattern_len);
        if (n > RL_MULTI_MAX) {
            reportf(report, ud, r->line,
                    "a path matching \"%s%s\" would be checked against %zu rules; at most %d can be",
                    r->pattern, r->prefix ? "*" : "", n, RL_MULTI_MAX);
            errors++;
        }
    }
    return errors;
}

int limits_parse(limit_set_t *out, const char *text, size_t len, limits_report_fn report, void *ud)
{
    out->count = 0;
    int errors = 0;
    int line = 0;
    char buf[LIMITS_LINE_MAX];
    for (size_t pos = 0; pos < len;) {
        line++;
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl != NULL ? (size_t)(nl - text) : len;
        size_t n = end - pos;
        if (n > 0 && text[pos + n - 1] == '\r')
            n--;
        if (n >= sizeof buf) {
            reportf(report, ud, line, "line longer than %d bytes", LIMITS_LINE_MAX - 1);
            errors++;
        } else if (memchr(text + pos, '\0', n) != NULL) {
            reportf(report, ud, line, "NUL byte in the line");
            errors++;
        } else {
            memcpy(buf, text + pos, n);
            buf[n] = '\0';
            errors += parse_line(out, buf, line, report, ud);
        }
        pos = end + 1;
    }
    if (errors == 0)
        errors = check_match_bound(out, report, ud);
    return errors;
}

int limits_load(limit_set_t *out, const char *path, limits_report_fn report, void *ud)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        reportf(report, ud, 0, "cannot open: %s", strerror(errno));
        return 1;
    }
    char *text = malloc(LIMITS_FILE_MAX + 1);
    if (text == NULL) {
        fclose(f);
        reportf(report, ud, 0, "out of memory");
        return 1;
    }
    size_t len = fread(text, 1, LIMITS_FILE_MAX + 1, f);
    int failed = ferror(f);
    fclose(f);
    int errors;
    if (failed) {
        reportf(report, ud, 0, "read error");
        errors = 1;
    } else if (len > LIMITS_FILE_MAX) {
        reportf(report, ud, 0, "file larger than %d bytes", LIMITS_FILE_MAX);
        errors = 1;
    } else {
        errors = limits_parse(out, text, len, report, ud);
    }
    free(text);
    return errors;
}

static bool has_name(const limit_set_t *set, const char *name)
{
    for (size_t i = 0; i < set->count; i++)
        if (strcmp(set->rules[i].limit.name, name) == 0)
            return true;
    return false;
}

int limits_apply(rl_t *rl, const limit_set_t *prev, limit_set_t *next, limits_change_t *change,
                 char *err, size_t errlen)
{
    /* what to put back if a later rule fails */
    struct undo {
        int id;
        bool added;
        rl_limit_t old;
    } *undo = calloc(next->count ? next->count : 1, sizeof *undo);
    if (undo == NULL) {
        snprintf(err, errlen, "out of memory");
        return RL_ENOMEM;
    }
    limits_change_t done = {0, 0, 0};
    int rc = 0;
    size_t i;
    for (i = 0; i < next->count; i++) {
        limit_rule_t *r = &next->rules[i];
        int id = rl_limit_find(rl, r->limit.name);
        if (id >= 0) {
            rl_limit_init(&undo[i].old);
            rc = rl_limit_get(rl, id, &undo[i].old);
            if (rc == 0)
                rc = rl_limit_update(rl, id, &r->limit);
            undo[i].added = false;
        } else {
            rc = id = rl_limit_add(rl, &r->limit);
            undo[i].added = true;
        }
        if (rc < 0) {
            snprintf(err, errlen, "line %d: limit \"%s\": %s", r->line, r->limit.name,
                     rl_strerror(rc));
            break;
        }
        undo[i].id = id;
        r->id = id;
        if (undo[i].added)
            done.added++;
        else
            done.updated++;
    }
    if (rc < 0) {
        while (i-- > 0) {
            if (undo[i].added)
                rl_limit_remove(rl, undo[i].id);
            else
                rl_limit_update(rl, undo[i].id, &undo[i].old);
        }
        free(undo);
        return rc;
    }
    free(undo);
    for (size_t j = 0; prev != NULL && j < prev->count; j++) {
        const limit_rule_t *r = &prev->rules[j];
        if (!has_name(next, r->limit.name) && rl_limit_remove(rl, r->id) == 0)
            done.removed++;
    }
    if (change != NULL)
        *change = done;
    return 0;
}

size_t limits_match(const limit_set_t *set, const char *path, size_t path_len,
                    const limit_rule_t **out)
{
    /* /metrics is the gateway's own endpoint: only a rule naming it exactly
     * limits it, so an API-wide rule never starves monitoring */
    bool metrics = path_len == 8 && memcmp(path, "/metrics", 8) == 0;
    size_t n = 0;
    for (size_t i = 0; i < set->count && n < RL_MULTI_MAX; i++)
        if (rule_matches(&set->rules[i], path, path_len, metrics))
            out[n++] = &set->rules[i];
    return n;
}

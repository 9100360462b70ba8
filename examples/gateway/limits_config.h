/* SPDX-License-Identifier: MIT */
/*
 * The gateway's limits file: which limits apply to which requests.
 *
 * The one limits-file format (tools/limitsfile/limitsfile.h), read by the
 * shared parser, with every rule in its routed form:
 *
 *   PATTERN  SCOPE  SPEC
 *   *        client name=per_client rate=20/s burst=40
 *   /search  shared name=search rate=100/s
 *   /search  client name=search_client rate=5/s burst=5
 *   /admin*  ip     name=admin_ip rate=1/s
 *
 * PATTERN  an exact path ("/search"), a prefix ending in '*' ("/admin*"),
 *          or "*" (every path but /metrics, which only an exact "/metrics"
 *          rule matches). The query string is never part of the path.
 * SCOPE    whose bucket a request is charged to:
 *          client  one per client: its X-API-Key, or its IP without one
 *          ip      one per client IP, whatever key it sends
 *          shared  one for every request the pattern matches
 * SPEC     an rl_limit_parse spec (README "Limit specs"); names are unique.
 * Blank lines and '#' comments are ignored. `ratelimit check FILE` checks a
 * file with the same parser.
 *
 * Every rule that matches a request is checked at once with rl_check_multi:
 * all are charged or none is. With --redis, mode=exact rules are the
 * exception: Redis decides them (rl_check_async) once the others admitted;
 * when one denies, the others' charges are refunded (an exact charge made
 * by another exact rule of the same request stays: Redis takes no refunds).
 * A rule whose SPEC is a quota's ("/api* client name=plan amount=1000000
 * period=month", rl_quota_parse) is charged after the limits allowed the
 * request (handler.c); quotas need --redis. Parsing is pure (no instance involved);
 * limits_apply turns a parsed set into the instance's limits.
 */
#ifndef GATEWAY_LIMITS_CONFIG_H
#define GATEWAY_LIMITS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include <ratelimit.h>

#include "limitsfile.h"

#define LIMITS_MAX_RULES 256
#define LIMITS_PATTERN_MAX LIMITSFILE_PATTERN_MAX /* bytes, NUL included */
#define LIMITS_LINE_MAX LIMITSFILE_LINE_MAX       /* bytes per line */
#define LIMITS_FILE_MAX LIMITSFILE_MAX_BYTES

typedef enum limit_scope { SCOPE_CLIENT, SCOPE_IP, SCOPE_SHARED } limit_scope_t;

typedef struct limit_rule {
    char pattern[LIMITS_PATTERN_MAX]; /* without a trailing '*' */
    size_t pattern_len;
    bool prefix;                      /* the pattern ended in '*' */
    limit_scope_t scope;
    rl_limit_t limit;                 /* a quota rule: only its name */
    int line;                         /* in the file, from 1 */
    int id;                           /* the instance's id, after limits_apply */
    bool is_quota;                    /* a quota rule (SPEC with amount=) */
    rl_quota_t quota;
    bool tokens;                      /* "PATTERN SCOPE tokens SPEC": charged the
                                         request's tokens (proxy.c) */
} limit_rule_t;

typedef struct limit_set {
    size_t count;
    limit_rule_t rules[LIMITS_MAX_RULES];
} limit_set_t;

/* Told about each bad line (line 0: the file as a whole); the message ends
 * with the error's name, e.g. "unknown scope \"x\" (...) (RL_ESPEC)". */
typedef void (*limits_report_fn)(void *ud, int line, const char *msg);

/* Parse a file's text into *out. Returns the number of bad lines (each
 * reported); *out is only meaningful when that is 0. */
int limits_parse(limit_set_t *out, const char *text, size_t len, limits_report_fn report, void *ud);

/* Read a file (at most LIMITS_FILE_MAX bytes) and parse it. Returns the
 * number of errors, as limits_parse (an unreadable file is one). */
int limits_load(limit_set_t *out, const char *path, limits_report_fn report, void *ud);

/* What limits_apply did. */
typedef struct limits_change {
    size_t added, updated, removed;
} limits_change_t;

/*
 * Make the instance's limits those of `next` (whose ids it sets): a limit
 * whose name is already there is updated in place with rl_limit_update, so
 * its keys keep their tokens; a new name is added; a limit of `prev` (may be
 * NULL) missing from `next` is removed, its keys forgotten. All or nothing:
 * on an error, what was already changed is put back and `err` says what
 * failed. Returns 0 or the RL_E* code. The instance needs room for both
 * sets at once (max_limits >= 2 x LIMITS_MAX_RULES).
 * Quota rules are added by the first apply (prev NULL); a reload keeps them
 * (their ids carried over) and refuses to add, drop or change one
 * (RL_ENOTSUP: restart the gateway for that; the usage stays in Redis).
 */
int limits_apply(rl_t *rl, const limit_set_t *prev, limit_set_t *next, limits_change_t *change,
                 char *err, size_t errlen);

/* The rules that apply to a path (the target up to '?'), in file order.
 * Returns how many; at most RL_MULTI_MAX (limits_parse guarantees that no
 * path matches more). */
size_t limits_match(const limit_set_t *set, const char *path, size_t path_len,
                    const limit_rule_t **out);

#endif

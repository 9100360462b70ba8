/* SPDX-License-Identifier: MIT */
/*
 * The limits file: the one format every consumer reads (the `ratelimit`
 * CLI, the gateway example, later the nginx module), parsed here and
 * nowhere else, with line-numbered errors.
 *
 * One rule per line, in one of two forms:
 *
 *   SPEC                     name=api rate=100/s burst=200
 *   PATTERN SCOPE SPEC       /search client name=search rate=5/s
 *   PATTERN SCOPE tokens SPEC  /v1/chat client tokens name=tpm rate=6000/m
 *
 * SPEC     an rl_limit_parse spec, or an rl_quota_parse spec (a quota rule:
 *          its SPEC has an amount= word, e.g. "name=plan amount=1000000
 *          period=month"); names are unique within a file, limits and
 *          quotas together.
 * PATTERN  which requests a routing consumer applies the rule to: an exact
 *          path ("/search"), a prefix ending in '*' ("/admin*"), or "*".
 *          A query string is never part of a path.
 * SCOPE    whose bucket a request is charged to: client (its API key, else
 *          its IP), ip, or shared (one bucket for every matching request).
 * tokens   (optional, routed form only) the rule counts a request's tokens,
 *          not the request: a routing consumer reserves its estimate and
 *          settles at the real cost (the gateway: X-Max-Tokens, then the
 *          upstream's X-Usage-Tokens). Only on a rate limit's SPEC.
 *
 * A line whose first word holds '=' and is not a path is a SPEC; any other
 * is PATTERN SCOPE SPEC. '#' starts a comment anywhere on a line (a spec
 * never holds one, and a request path never does: a fragment is not sent);
 * blank lines are skipped; a trailing '\r' is dropped.
 *
 * A consumer that routes (the gateway) requires PATTERN SCOPE on every rule
 * (LIMITSFILE_ROUTES_REQUIRED); one that does not (the CLI's `inspect`)
 * reads the SPEC of either form, and `ratelimit check` validates both, so
 * it accepts exactly the files the gateway accepts. The routed rules of a
 * file must not let any path match more than RL_MULTI_MAX of them (what one
 * rl_check_multi takes).
 *
 * Pure: no instance, no I/O but limitsfile_load's read of the file.
 */
#ifndef RL_LIMITSFILE_H
#define RL_LIMITSFILE_H

#include <stdbool.h>
#include <stddef.h>

#include <ratelimit.h>

#define LIMITSFILE_LINE_MAX 1024          /* bytes per line, '\n' excluded, plus one */
#define LIMITSFILE_PATTERN_MAX 256        /* bytes, NUL included */
#define LIMITSFILE_MAX_BYTES (16u << 20)  /* a limits file is a config file */

typedef enum limitsfile_scope {
    LIMITSFILE_SCOPE_NONE,   /* a SPEC line: no route */
    LIMITSFILE_SCOPE_CLIENT,
    LIMITSFILE_SCOPE_IP,
    LIMITSFILE_SCOPE_SHARED
} limitsfile_scope_t;

typedef struct limitsfile_rule {
    unsigned line;                          /* in the file, from 1 */
    limitsfile_scope_t scope;               /* NONE: no PATTERN SCOPE */
    char pattern[LIMITSFILE_PATTERN_MAX];   /* without a trailing '*' */
    size_t pattern_len;
    bool prefix;                            /* the pattern ended in '*' ("*": "" prefix) */
    bool tokens;                            /* "tokens" after SCOPE: charged in tokens */
    rl_limit_t limit;                       /* a quota rule: only its name is set */
    bool is_quota;                          /* a quota rule: SPEC has amount= */
    rl_quota_t quota;                       /* is_quota: rl_quota_parse's result */
} limitsfile_rule_t;

/* The good rules of a file, in file order. */
typedef struct limitsfile {
    limitsfile_rule_t *rules;
    size_t count, cap;
} limitsfile_t;

/* Every rule must carry PATTERN SCOPE. */
#define LIMITSFILE_ROUTES_REQUIRED 0x1u

typedef struct limitsfile_opts {
    size_t max_rules;  /* rules beyond this many are errors (RL_ELIMITS); 0: RL_MAX_LIMITS */
    unsigned flags;    /* LIMITSFILE_* */
} limitsfile_opts_t;

/*
 * Told about each bad line, in line order: its number (0: the file as a
 * whole), an RL_E* code (RL_ESPEC for the format, rl_limit_parse's own for
 * a bad spec, RL_EEXIST for a duplicate name, RL_ELIMITS past max_rules,
 * RL_ERANGE for a line too long or a path matching too many rules) and a
 * message that names what was wrong.
 */
typedef void (*limitsfile_report_fn)(void *ud, unsigned line, int code, const char *msg);

/*
 * Parse text[0, len) into *out (which the call initialises; free it with
 * limitsfile_free whatever the result). opts may be NULL. Returns the number
 * of bad lines, each reported (out then holds the good rules only), or
 * RL_ENOMEM.
 */
int limitsfile_parse(limitsfile_t *out, const char *text, size_t len,
                     const limitsfile_opts_t *opts, limitsfile_report_fn report, void *ud);

/* Read a file (at most LIMITSFILE_MAX_BYTES) and parse it; a file that
 * cannot be read is one error, on line 0 (RL_EINVAL, or RL_ERANGE when too
 * large). Returns as limitsfile_parse. */
int limitsfile_load(limitsfile_t *out, const char *path, const limitsfile_opts_t *opts,
                    limitsfile_report_fn report, void *ud);

void limitsfile_free(limitsfile_t *lf);

/* Whether a routed rule applies to a path (the request target up to '?');
 * never for a SPEC-only rule. */
bool limitsfile_rule_matches(const limitsfile_rule_t *r, const char *path, size_t len);

/* "client", "ip", "shared", or NULL for LIMITSFILE_SCOPE_NONE. */
const char *limitsfile_scope_name(limitsfile_scope_t scope);

#endif

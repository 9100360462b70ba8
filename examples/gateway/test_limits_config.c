/* SPDX-License-Identifier: MIT */
/*
 * The gateway's limits file: parsing with line-numbered errors, the match
 * bound, path matching, and limits_apply (state kept on update, all or
 * nothing on failure) against a local-only instance.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limits_config.h"

/* The errors a parse reported. */
typedef struct errs {
    int n;
    int line[32];
    char msg[32][512];
} errs_t;

static void collect(void *ud, int line, const char *msg)
{
    errs_t *e = ud;
    if (e->n < 32) {
        e->line[e->n] = line;
        snprintf(e->msg[e->n], sizeof e->msg[0], "%s", msg);
    }
    e->n++;
}

static limit_set_t *parse(const char *text, errs_t *e)
{
    limit_set_t *set = malloc(sizeof *set);
    ck_assert_ptr_nonnull(set);
    memset(e, 0, sizeof *e);
    int errors = limits_parse(set, text, strlen(text), collect, e);
    ck_assert_int_eq(errors, e->n);
    return set;
}

START_TEST(valid_file)
{
    errs_t e;
    limit_set_t *set = parse("# the API\r\n"
                             "\n"
                             "*        client name=per_client rate=20/s burst=40\r\n"
                             "   /search  shared  name=search rate=100/s   \n"
                             "/search  client name=search_client rate=5/s burst=5\n"
                             "/admin/* ip     name=admin_ip rate=1/m mode=local\n"
                             "/metrics shared name=scrapes rate=10/s",
                             &e);
    ck_assert_int_eq(e.n, 0);
    ck_assert_uint_eq(set->count, 5);
    const limit_rule_t *r = set->rules;
    ck_assert_int_eq(r[0].prefix, 1);
    ck_assert_uint_eq(r[0].pattern_len, 0);
    ck_assert_int_eq(r[0].scope, SCOPE_CLIENT);
    ck_assert_int_eq(r[0].line, 3);
    ck_assert_str_eq(r[0].limit.name, "per_client");
    ck_assert_uint_eq(r[0].limit.burst, 40);
    ck_assert_str_eq(r[1].pattern, "/search");
    ck_assert_int_eq(r[1].prefix, 0);
    ck_assert_int_eq(r[1].scope, SCOPE_SHARED);
    ck_assert_str_eq(r[3].pattern, "/admin/");
    ck_assert_int_eq(r[3].prefix, 1);
    ck_assert_int_eq(r[3].scope, SCOPE_IP);
    ck_assert_int_eq(r[3].limit.mode, RL_MODE_LOCAL);
    ck_assert_uint_eq(r[3].limit.rate.period_ms, 60000);
    ck_assert_int_eq(r[4].line, 7);
    free(set);
}
END_TEST

START_TEST(errors_name_their_lines)
{
    errs_t e;
    limit_set_t *set = parse("* client name=ok rate=1/s\n"
                             "* nobody name=a rate=1/s\n"          /* 2: scope */
                             "search client name=b rate=1/s\n"     /* 3: pattern */
                             "/a*b client name=c rate=1/s\n"       /* 4: inner star */
                             "/a?x=1 client name=d rate=1/s\n"     /* 5: query */
                             "/x client name=e rate=fast\n"        /* 6: spec */
                             "/y client name=ok rate=2/s\n"        /* 7: duplicate */
                             "/z client\n"                         /* 8: no spec */
                             "/w client rate=1/s\n"                /* 9: no name */
                             "/v client name=f rate=1/s colour=red\n", /* 10 */
                             &e);
    ck_assert_int_eq(e.n, 9);
    for (int i = 0; i < 9; i++)
        ck_assert_int_eq(e.line[i], i + 2);
    ck_assert_ptr_nonnull(strstr(e.msg[0], "unknown scope \"nobody\""));
    ck_assert_ptr_nonnull(strstr(e.msg[1], "starting with '/'"));
    ck_assert_ptr_nonnull(strstr(e.msg[2], "only at the end"));
    ck_assert_ptr_nonnull(strstr(e.msg[3], "never the query"));
    ck_assert_ptr_nonnull(strstr(e.msg[4], "(RL_ESPEC)")); /* rl_limit_parse's */
    ck_assert_ptr_nonnull(strstr(e.msg[5], "first defined on line 1"));
    ck_assert_ptr_nonnull(strstr(e.msg[6], "expected PATTERN SCOPE SPEC"));
    ck_assert_ptr_nonnull(strstr(e.msg[8], "colour"));
    free(set);
}
END_TEST

/* The gateway routes requests: a rule in the plain SPEC form, which the CLI
 * and other readers accept, is refused here with its line. */
START_TEST(spec_lines_need_a_route)
{
    errs_t e;
    limit_set_t *set = parse("* client name=ok rate=1/s\n"
                             "name=plain rate=1/s  # no PATTERN SCOPE\n",
                             &e);
    ck_assert_int_eq(e.n, 1);
    ck_assert_int_eq(e.line[0], 2);
    ck_assert_ptr_nonnull(strstr(e.msg[0], "expected PATTERN SCOPE SPEC"));
    ck_assert_ptr_nonnull(strstr(e.msg[0], "(RL_ESPEC)"));
    free(set);
}
END_TEST

START_TEST(line_and_file_bounds)
{
    errs_t e;
    char *text = malloc(LIMITS_LINE_MAX + 64);
    strcpy(text, "* client name=a rate=1/s ");
    size_t n = strlen(text);
    memset(text + n, ' ', LIMITS_LINE_MAX);
    strcpy(text + n + LIMITS_LINE_MAX, "\n");
    limit_set_t *set = parse(text, &e);
    ck_assert_int_eq(e.n, 1);
    ck_assert_int_eq(e.line[0], 1);
    ck_assert_ptr_nonnull(strstr(e.msg[0], "line longer"));
    free(set);
    free(text);

    /* LIMITS_MAX_RULES rules fit, one more does not */
    size_t cap = (LIMITS_MAX_RULES + 1) * 48;
    text = malloc(cap);
    text[0] = '\0';
    for (int i = 0; i <= LIMITS_MAX_RULES; i++) {
        char line[48];
        snprintf(line, sizeof line, "/p%d shared name=r%d rate=1/s\n", i, i);
        strcat(text, line);
    }
    set = parse(text, &e);
    ck_assert_int_eq(e.n, 1);
    ck_assert_int_eq(e.line[0], LIMITS_MAX_RULES + 1);
    free(set);
    free(text);

    memset(&e, 0, sizeof e);
    set = malloc(sizeof *set);
    ck_assert_int_eq(limits_load(set, "/nonexistent/limits.conf", collect, &e), 1);
    ck_assert_int_eq(e.line[0], 0);
    free(set);
}
END_TEST

/* rl_check_multi takes RL_MULTI_MAX limits: a file where some path would
 * match more is refused at load, at the rule that shows it. */
START_TEST(match_bound)
{
    errs_t e;
    size_t cap = (RL_MULTI_MAX + 2) * 48;
    char *text = malloc(cap);
    text[0] = '\0';
    for (int i = 0; i < RL_MULTI_MAX - 1; i++) {
        char line[48];
        snprintf(line, sizeof line, "* shared name=all%d rate=1/s\n", i);
        strcat(text, line);
    }
    strcat(text, "/a* shared name=a rate=1/s\n"); /* 64 for /a...: fine */
    limit_set_t *set = parse(text, &e);
    ck_assert_int_eq(e.n, 0);
    free(set);
    strcat(text, "/b shared name=b rate=1/s\n"); /* 64 for /b: fine */
    set = parse(text, &e);
    ck_assert_int_eq(e.n, 0);
    free(set);
    strcat(text, "/a/x shared name=ax rate=1/s\n"); /* 65 for /a/x */
    set = parse(text, &e);
    ck_assert_int_eq(e.n, 1);
    ck_assert_int_eq(e.line[0], RL_MULTI_MAX + 2);
    ck_assert_ptr_nonnull(strstr(e.msg[0], "\"/a/x\" would be checked against 65 rules"));
    free(set);
    free(text);
}
END_TEST

static size_t match(const limit_set_t *set, const char *path, const char **names)
{
    const limit_rule_t *out[RL_MULTI_MAX];
    size_t n = limits_match(set, path, strlen(path), out);
    for (size_t i = 0; i < n; i++)
        names[i] = out[i]->limit.name;
    return n;
}

START_TEST(matching)
{
    errs_t e;
    limit_set_t *set = parse("* client name=all rate=1/s\n"
                             "/search shared name=search rate=1/s\n"
                             "/api/* ip name=api rate=1/s\n"
                             "/api/v1/users client name=users rate=1/s\n"
                             "/metrics shared name=scrape rate=1/s\n",
                             &e);
    ck_assert_int_eq(e.n, 0);
    const char *names[RL_MULTI_MAX];
    ck_assert_uint_eq(match(set, "/search", names), 2);
    ck_assert_str_eq(names[0], "all");
    ck_assert_str_eq(names[1], "search");
    ck_assert_uint_eq(match(set, "/search/more", names), 1); /* exact is exact */
    ck_assert_uint_eq(match(set, "/api/v1/users", names), 3);
    ck_assert_str_eq(names[2], "users");
    ck_assert_uint_eq(match(set, "/api/", names), 2);
    ck_assert_uint_eq(match(set, "/api", names), 1);
    /* /metrics: only the exact rule, never "*" */
    ck_assert_uint_eq(match(set, "/metrics", names), 1);
    ck_assert_str_eq(names[0], "scrape");
    ck_assert_uint_eq(match(set, "/metricsx", names), 1);
    ck_assert_str_eq(names[0], "all");
    free(set);
}
END_TEST

static rl_t *open_local(uint32_t max_limits)
{
    rl_config_t cfg;
    rl_config_init(&cfg);
    cfg.max_limits = max_limits;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &cfg), 0);
    return rl;
}

static uint64_t remaining(rl_t *rl, int id, const char *key)
{
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_ge(rl_check(rl, id, key, strlen(key), 0, &d), 0); /* cost 0: peek */
    return d.remaining;
}

START_TEST(apply_keeps_state_adds_and_removes)
{
    rl_t *rl = open_local(16);
    errs_t e;
    limit_set_t *a = parse("* client name=keep rate=10/m burst=10\n"
                           "/x shared name=gone rate=1/s\n",
                           &e);
    limits_change_t ch;
    char err[256];
    ck_assert_int_eq(limits_apply(rl, NULL, a, &ch, err, sizeof err), 0);
    ck_assert_uint_eq(ch.added, 2);
    int keep = a->rules[0].id, gone = a->rules[1].id;
    ck_assert_int_ge(keep, 0);
    for (int i = 0; i < 7; i++)
        ck_assert_int_eq(rl_check(rl, keep, "k", 1, 1, NULL), RL_ALLOW);
    ck_assert_uint_eq(remaining(rl, keep, "k"), 3);

    limit_set_t *b = parse("* client name=keep rate=20/m burst=20\n"
                           "/y shared name=new rate=1/s\n",
                           &e);
    ck_assert_int_eq(limits_apply(rl, a, b, &ch, err, sizeof err), 0);
    ck_assert_uint_eq(ch.added, 1);
    ck_assert_uint_eq(ch.updated, 1);
    ck_assert_uint_eq(ch.removed, 1);
    ck_assert_int_eq(b->rules[0].id, keep); /* same limit, same id */
    /* what the key used is kept across the update: 7 of the new 20 (a
     * fresh key would have all 20; 3 s per token, so none comes back) */
    ck_assert_uint_eq(remaining(rl, keep, "k"), 13);
    rl_limit_t now;
    rl_limit_init(&now);
    ck_assert_int_eq(rl_limit_get(rl, keep, &now), 0);
    ck_assert_uint_eq(now.rate.count, 20);
    ck_assert_int_eq(rl_limit_find(rl, "gone"), RL_ENOTFOUND);
    ck_assert_int_eq(rl_check(rl, gone, "k", 1, 1, NULL), RL_ENOTFOUND);
    ck_assert_int_ge(rl_limit_find(rl, "new"), 0);
    free(a);
    free(b);
    rl_close(rl);
}
END_TEST

START_TEST(apply_is_all_or_nothing)
{
    rl_t *rl = open_local(3); /* room for three limits */
    errs_t e;
    limit_set_t *a = parse("* client name=one rate=10/s\n", &e);
    char err[256];
    ck_assert_int_eq(limits_apply(rl, NULL, a, NULL, err, sizeof err), 0);
    /* an update, two adds that fit, and a third that does not */
    limit_set_t *b = parse("* client name=one rate=99/s\n"
                           "/a shared name=two rate=1/s\n"
                           "/b shared name=three rate=1/s\n"
                           "/c shared name=four rate=1/s\n",
                           &e);
    ck_assert_int_eq(limits_apply(rl, a, b, NULL, err, sizeof err), RL_ELIMITS);
    ck_assert_ptr_nonnull(strstr(err, "line 4"));
    ck_assert_ptr_nonnull(strstr(err, "\"four\""));
    /* put back: "one" at its old rate, nothing added */
    rl_limit_t now;
    rl_limit_init(&now);
    ck_assert_int_eq(rl_limit_get(rl, a->rules[0].id, &now), 0);
    ck_assert_uint_eq(now.rate.count, 10);
    ck_assert_int_eq(rl_limit_find(rl, "two"), RL_ENOTFOUND);
    ck_assert_int_eq(rl_limit_find(rl, "three"), RL_ENOTFOUND);
    free(a);
    free(b);
    rl_close(rl);
}
END_TEST

/* Without --redis an exact or tiered rule is refused, naming the rule and
 * the missing --redis: a per-process bucket is not what the file says. */
START_TEST(apply_refuses_exact_without_redis)
{
    rl_t *rl = open_local(16);
    errs_t e;
    const char *files[] = {"/login client name=login rate=5/m burst=5 mode=exact\n",
                           "/t client name=t rate=5/m mode=tiered\n"};
    for (int i = 0; i < 2; i++) {
        limit_set_t *a = parse(files[i], &e);
        char err[256] = "";
        ck_assert_int_eq(limits_apply(rl, NULL, a, NULL, err, sizeof err), RL_ENOTSUP);
        ck_assert_msg(strstr(err, "line 1") != NULL && strstr(err, i ? "\"t\"" : "\"login\"") &&
                          strstr(err, "--redis") != NULL,
                      "names the rule and --redis: %s", err);
        free(a);
    }
    rl_close(rl);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gateway_limits");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, valid_file);
    tcase_add_test(tc, errors_name_their_lines);
    tcase_add_test(tc, spec_lines_need_a_route);
    tcase_add_test(tc, line_and_file_bounds);
    tcase_add_test(tc, match_bound);
    tcase_add_test(tc, matching);
    suite_add_tcase(s, tc);
    tc = tcase_create("apply");
    tcase_add_test(tc, apply_keeps_state_adds_and_removes);
    tcase_add_test(tc, apply_is_all_or_nothing);
    tcase_add_test(tc, apply_refuses_exact_without_redis);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

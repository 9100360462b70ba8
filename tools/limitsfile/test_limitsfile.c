/* SPDX-License-Identifier: MIT */
/*
 * The shared limits-file parser: both forms of line, line-numbered errors
 * with their codes, comments and blanks, the options, the match bound and
 * reading a file. The gateway's suite (examples/gateway/test_limits_config.c)
 * covers the routed form's pattern and scope errors through its wrapper.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "limitsfile.h"

typedef struct errs {
    int n;
    unsigned line[32];
    int code[32];
    char msg[32][512];
} errs_t;

static void collect(void *ud, unsigned line, int code, const char *msg)
{
    errs_t *e = ud;
    if (e->n < 32) {
        e->line[e->n] = line;
        e->code[e->n] = code;
        snprintf(e->msg[e->n], sizeof e->msg[0], "%s", msg);
    }
    e->n++;
}

static int parse(limitsfile_t *lf, const char *text, const limitsfile_opts_t *opts, errs_t *e)
{
    memset(e, 0, sizeof *e);
    int rc = limitsfile_parse(lf, text, strlen(text), opts, collect, e);
    ck_assert_int_eq(rc, e->n);
    return rc;
}

/* The CLI's plain spec files and the gateway's routed files are one
 * format: both forms in one file, each rule with its line. */
START_TEST(both_forms)
{
    limitsfile_t lf;
    errs_t e;
    parse(&lf,
          "# limits\r\n"
          "name=api rate=100/s burst=200   # trailing comment\n"
          "\n"
          "   /search  shared  name=search rate=10/s\t\r\n"
          "* client name=per_client rate=20/s\n"
          "/admin/* ip name=admin rate=1/m mode=local\n"
          "/a=b client name=eq rate=1/s\n",
          NULL, &e);
    ck_assert_int_eq(e.n, 0);
    ck_assert_uint_eq(lf.count, 5);
    const limitsfile_rule_t *r = lf.rules;
    ck_assert_uint_eq(r[0].line, 2);
    ck_assert_int_eq(r[0].scope, LIMITSFILE_SCOPE_NONE);
    ck_assert_str_eq(r[0].limit.name, "api");
    ck_assert_uint_eq(r[0].limit.burst, 200);
    ck_assert_uint_eq(r[1].line, 4);
    ck_assert_int_eq(r[1].scope, LIMITSFILE_SCOPE_SHARED);
    ck_assert_str_eq(r[1].pattern, "/search");
    ck_assert_int_eq(r[1].prefix, 0);
    ck_assert_int_eq(r[2].scope, LIMITSFILE_SCOPE_CLIENT);
    ck_assert_int_eq(r[2].prefix, 1);
    ck_assert_uint_eq(r[2].pattern_len, 0);
    ck_assert_int_eq(r[3].scope, LIMITSFILE_SCOPE_IP);
    ck_assert_str_eq(r[3].pattern, "/admin/");
    ck_assert_int_eq(r[3].prefix, 1);
    ck_assert_int_eq(r[3].limit.mode, RL_MODE_LOCAL);
    ck_assert_str_eq(r[4].pattern, "/a=b"); /* a path with '=' is a pattern */
    ck_assert_str_eq(limitsfile_scope_name(r[3].scope), "ip");
    ck_assert_ptr_null(limitsfile_scope_name(LIMITSFILE_SCOPE_NONE));
    limitsfile_free(&lf);
}
END_TEST

START_TEST(errors_carry_line_and_code)
{
    limitsfile_t lf;
    errs_t e;
    int rc = parse(&lf,
                   "name=api rate=100/s\n"
                   "name=api rate=5/s\n"                 /* 2: duplicate */
                   "name=b rate=10/x\n"                  /* 3: spec */
                   "name=c rate=0/s\n"                   /* 4: range */
                   "/x nobody name=d rate=1/s\n"         /* 5: scope */
                   "x client name=e rate=1/s\n"          /* 6: pattern */
                   "/y client\n"                         /* 7: no spec */
                   "/api client name=api rate=1/s\n"     /* 8: duplicate, routed */
                   "name=f rate=1/s\n",
                   NULL, &e);
    ck_assert_int_eq(rc, 7);
    const unsigned lines[] = {2, 3, 4, 5, 6, 7, 8};
    const int codes[] = {RL_EEXIST, RL_ESPEC, RL_ERANGE, RL_ESPEC, RL_ESPEC, RL_ESPEC, RL_EEXIST};
    for (int i = 0; i < 7; i++) {
        ck_assert_uint_eq(e.line[i], lines[i]);
        ck_assert_int_eq(e.code[i], codes[i]);
    }
    ck_assert_str_eq(e.msg[0], "duplicate limit name \"api\" (first defined on line 1)");
    ck_assert_ptr_nonnull(strstr(e.msg[3], "unknown scope \"nobody\""));
    ck_assert_ptr_nonnull(strstr(e.msg[4], "starting with '/'"));
    ck_assert_ptr_nonnull(strstr(e.msg[5], "expected PATTERN SCOPE SPEC"));
    ck_assert_uint_eq(lf.count, 2); /* the good rules only */
    ck_assert_str_eq(lf.rules[1].limit.name, "f");
    limitsfile_free(&lf);
}
END_TEST

START_TEST(quota_rules)
{
    /* A SPEC with amount= is a quota's (rl_quota_parse); names are shared
     * with the limits; its errors are rl_quota_parse's. */
    limitsfile_t lf;
    errs_t e;
    int rc = parse(&lf,
                   "/api* client name=plan amount=1000000 period=month on_failure=open\n"
                   "/api* client name=api rate=10/s\n"
                   "/x client name=plan rate=1/s\n"                  /* 3: duplicate */
                   "/y client name=q amount=5 period=fortnight\n"    /* 4: quota spec */
                   "/z client name=q2 amount=5 on_failure=local\n",  /* 5: no local */
                   NULL, &e);
    ck_assert_int_eq(rc, 3);
    ck_assert_int_eq(e.code[0], RL_EEXIST);
    ck_assert_int_eq(e.code[1], RL_ESPEC);
    ck_assert_ptr_nonnull(strstr(e.msg[1], "period: unknown value \"fortnight\""));
    ck_assert_int_eq(e.code[2], RL_EMODE);
    ck_assert_uint_eq(lf.count, 2);
    ck_assert(lf.rules[0].is_quota);
    ck_assert_str_eq(lf.rules[0].limit.name, "plan");
    ck_assert_uint_eq(lf.rules[0].quota.amount, 1000000);
    ck_assert_int_eq(lf.rules[0].quota.period, RL_PERIOD_MONTH);
    ck_assert_int_eq(lf.rules[0].quota.on_failure, RL_FAIL_OPEN);
    ck_assert(!lf.rules[1].is_quota);
    limitsfile_free(&lf);
}
END_TEST

/* "tokens" after SCOPE: the rule counts tokens; only on a rate limit, only
 * in the routed form (a SPEC line's first word is the spec). */
START_TEST(tokens_rules)
{
    limitsfile_t lf;
    errs_t e;
    int rc = parse(&lf,
                   "/v1/* client tokens name=tpm rate=6000/m burst=1000\n"
                   "/v1/* client name=rpm rate=60/m\n"
                   "/v1/* shared tokens name=up kind=inflight max=4\n" /* 3: in-flight */
                   "/v1/* client tokens name=plan amount=5 period=month\n" /* 4: quota */
                   "/v1/* client tokens\n"                             /* 5: no spec */
                   "/v1/* client tokenz name=t2 rate=1/s\n",           /* 6: a bad spec word */
                   NULL, &e);
    ck_assert_int_eq(rc, 4);
    ck_assert_uint_eq(e.line[0], 3);
    ck_assert_int_eq(e.code[0], RL_ESPEC);
    ck_assert_ptr_nonnull(strstr(e.msg[0], "\"tokens\" is for a rate limit"));
    ck_assert_uint_eq(e.line[1], 4);
    ck_assert_int_eq(e.code[1], RL_ESPEC);
    ck_assert_uint_eq(e.line[2], 5);
    ck_assert_uint_eq(e.line[3], 6);
    ck_assert_uint_eq(lf.count, 2);
    ck_assert(lf.rules[0].tokens);
    ck_assert_str_eq(lf.rules[0].limit.name, "tpm");
    ck_assert_uint_eq(lf.rules[0].limit.burst, 1000);
    ck_assert(!lf.rules[1].tokens);
    limitsfile_free(&lf);
}
END_TEST

START_TEST(options)
{
    limitsfile_t lf;
    errs_t e;
    limitsfile_opts_t routed = {0, LIMITSFILE_ROUTES_REQUIRED};
    parse(&lf, "* client name=a rate=1/s\nname=b rate=1/s\n", &routed, &e);
    ck_assert_int_eq(e.n, 1);
    ck_assert_uint_eq(e.line[0], 2);
    ck_assert_int_eq(e.code[0], RL_ESPEC);
    limitsfile_free(&lf);

    limitsfile_opts_t two = {2, 0};
    parse(&lf, "name=a rate=1/s\nname=b rate=1/s\nname=c rate=1/s\nname=d rate=1/s\n", &two, &e);
    ck_assert_int_eq(e.n, 2); /* every rule past the bound */
    ck_assert_uint_eq(e.line[0], 3);
    ck_assert_uint_eq(e.line[1], 4);
    ck_assert_int_eq(e.code[0], RL_ELIMITS);
    ck_assert_str_eq(e.msg[0], "more than 2 limits");
    ck_assert_uint_eq(lf.count, 2);
    limitsfile_free(&lf);
}
END_TEST

START_TEST(line_bounds)
{
    limitsfile_t lf;
    errs_t e;
    char *text = malloc(LIMITSFILE_LINE_MAX + 64);
    ck_assert_ptr_nonnull(text);
    strcpy(text, "name=a rate=1/s ");
    size_t n = strlen(text);
    memset(text + n, ' ', LIMITSFILE_LINE_MAX);
    strcpy(text + n + LIMITSFILE_LINE_MAX, "\nname=b rate=1/s\n");
    parse(&lf, text, NULL, &e);
    ck_assert_int_eq(e.n, 1);
    ck_assert_uint_eq(e.line[0], 1);
    ck_assert_int_eq(e.code[0], RL_ERANGE);
    ck_assert_uint_eq(lf.count, 1);
    limitsfile_free(&lf);
    free(text);

    static const char nul[] = "name=a rate=1/s\nname=b\0 rate=1/s\n";
    memset(&e, 0, sizeof e);
    ck_assert_int_eq(limitsfile_parse(&lf, nul, sizeof nul - 1, NULL, collect, &e), 1);
    ck_assert_uint_eq(e.line[0], 2);
    ck_assert_ptr_nonnull(strstr(e.msg[0], "NUL"));
    limitsfile_free(&lf);
}
END_TEST

/* Only routed rules count toward a path's RL_MULTI_MAX; the error names
 * the rule that shows it. */
START_TEST(match_bound)
{
    limitsfile_t lf;
    errs_t e;
    size_t cap = (RL_MULTI_MAX + 4) * 48;
    char *text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    text[0] = '\0';
    for (int i = 0; i < RL_MULTI_MAX; i++) {
        char line[48];
        snprintf(line, sizeof line, "* shared name=all%d rate=1/s\n", i);
        strcat(text, line);
    }
    strcat(text, "name=plain rate=1/s\n"); /* no route: matches nothing */
    parse(&lf, text, NULL, &e);
    ck_assert_int_eq(e.n, 0);
    limitsfile_free(&lf);
    strcat(text, "/x shared name=x rate=1/s\n");
    parse(&lf, text, NULL, &e);
    ck_assert_int_eq(e.n, 1);
    ck_assert_uint_eq(e.line[0], RL_MULTI_MAX + 2);
    ck_assert_int_eq(e.code[0], RL_ERANGE);
    limitsfile_free(&lf);
    free(text);
}
END_TEST

START_TEST(matching)
{
    limitsfile_t lf;
    errs_t e;
    parse(&lf, "name=plain rate=1/s\n* client name=all rate=1/s\n/api/* ip name=api rate=1/s\n"
               "/s shared name=s rate=1/s\n",
          NULL, &e);
    ck_assert_int_eq(e.n, 0);
    ck_assert(!limitsfile_rule_matches(&lf.rules[0], "/api", 4));
    ck_assert(limitsfile_rule_matches(&lf.rules[1], "/anything", 9));
    ck_assert(limitsfile_rule_matches(&lf.rules[2], "/api/v1", 7));
    ck_assert(!limitsfile_rule_matches(&lf.rules[2], "/api", 4));
    ck_assert(limitsfile_rule_matches(&lf.rules[3], "/s", 2));
    ck_assert(!limitsfile_rule_matches(&lf.rules[3], "/s/", 3));
    limitsfile_free(&lf);
}
END_TEST

START_TEST(load)
{
    limitsfile_t lf;
    errs_t e;
    memset(&e, 0, sizeof e);
    ck_assert_int_eq(limitsfile_load(&lf, "/nonexistent/limits.conf", NULL, collect, &e), 1);
    ck_assert_uint_eq(e.line[0], 0);
    ck_assert_ptr_nonnull(strstr(e.msg[0], "cannot open"));
    limitsfile_free(&lf);

    char path[] = "/tmp/test_limitsfile_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    /* more than one read buffer (64 KiB), so the file is read in parts */
    FILE *f = fdopen(fd, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 3000; i++)
        fprintf(f, "name=l%d rate=%d/s   # padding padding padding\n", i, i + 1);
    ck_assert_int_eq(fclose(f), 0);
    memset(&e, 0, sizeof e);
    ck_assert_int_eq(limitsfile_load(&lf, path, NULL, collect, &e), 0);
    ck_assert_uint_eq(lf.count, 3000);
    ck_assert_uint_eq(lf.rules[2999].line, 3000);
    ck_assert_uint_eq(lf.rules[2999].limit.rate.count, 3000);
    limitsfile_free(&lf);
    unlink(path);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("limitsfile");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, both_forms);
    tcase_add_test(tc, errors_carry_line_and_code);
    tcase_add_test(tc, options);
    tcase_add_test(tc, quota_rules);
    tcase_add_test(tc, tokens_rules);
    tcase_add_test(tc, line_bounds);
    tcase_add_test(tc, match_bound);
    tcase_add_test(tc, matching);
    tcase_add_test(tc, load);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

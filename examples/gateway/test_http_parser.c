/* SPDX-License-Identifier: MIT */
/*
 * The gateway's request parser: every limit at its maximum and one past it,
 * chunking (every split point gives the same result as one feed),
 * pipelining, keep-alive rules, and the strictness that keeps request
 * smuggling out (bare LF, obs-fold, CR/LF injection, duplicate or
 * conflicting framing fields, overflowing Content-Length).
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_parser.h"

/* What a run over some input reported, event by event. */
#define MAX_EVENTS 8
typedef struct trace {
    size_t n;
    struct {
        http_event_t ev;
        size_t at;          /* input offset just after the event */
        http_error_t error;
        http_request_t req; /* at HTTP_HEAD */
    } e[MAX_EVENTS];
} trace_t;

/* Feed `in` in chunks of the given sizes (0-terminated list; the rest in
 * one chunk), following every event to the end or the first error. */
static void run_chunks(const http_limits_t *lim, const char *in, size_t len, const size_t *chunks,
                       trace_t *t)
{
    http_parser_t p;
    ck_assert_int_eq(http_parser_init(&p, lim), 0);
    memset(t, 0, sizeof *t);
    size_t off = 0;
    while (t->n < MAX_EVENTS) {
        size_t end = len;
        if (chunks != NULL && *chunks != 0) {
            end = off + *chunks < len ? off + *chunks : len;
        }
        /* a private copy of exactly the chunk, so a read past it is caught
         * by ASan */
        size_t n = end - off;
        char *chunk = malloc(n ? n : 1);
        ck_assert_ptr_nonnull(chunk);
        memcpy(chunk, in + off, n);
        size_t pos = 0;
        int stop = 0;
        for (;;) {
            size_t used = 0;
            http_event_t ev = http_parser_feed(&p, chunk + pos, n - pos, &used);
            ck_assert_uint_le(used, n - pos);
            pos += used;
            if (ev == HTTP_NEED_MORE) {
                ck_assert_uint_eq(pos, n);
                break;
            }
            t->e[t->n].ev = ev;
            t->e[t->n].at = off + pos;
            t->e[t->n].error = p.error;
            if (ev == HTTP_HEAD)
                t->e[t->n].req = p.req;
            t->n++;
            if (ev == HTTP_ERROR || t->n == MAX_EVENTS) {
                stop = 1;
                break;
            }
            if (ev == HTTP_DONE)
                http_parser_next(&p);
        }
        free(chunk);
        off = end;
        if (stop || off == len)
            break;
        if (chunks != NULL && *chunks != 0)
            chunks++;
    }
}

static void run(const http_limits_t *lim, const char *in, size_t len, trace_t *t)
{
    run_chunks(lim, in, len, NULL, t);
}

static void assert_same_request(const http_request_t *a, const http_request_t *b)
{
    ck_assert_str_eq(a->method, b->method);
    ck_assert_str_eq(a->target, b->target);
    ck_assert_str_eq(a->api_key, b->api_key);
    ck_assert_uint_eq(a->method_len, b->method_len);
    ck_assert_uint_eq(a->target_len, b->target_len);
    ck_assert_uint_eq(a->api_key_len, b->api_key_len);
    ck_assert_int_eq(a->version_minor, b->version_minor);
    ck_assert_uint_eq(a->content_length, b->content_length);
    ck_assert_int_eq(a->keep_alive, b->keep_alive);
    ck_assert_int_eq(a->expect_continue, b->expect_continue);
    ck_assert_uint_eq(a->header_count, b->header_count);
    ck_assert_uint_eq(a->head_bytes, b->head_bytes);
}

static void assert_same_trace(const trace_t *a, const trace_t *b)
{
    ck_assert_uint_eq(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        ck_assert_int_eq(a->e[i].ev, b->e[i].ev);
        ck_assert_uint_eq(a->e[i].at, b->e[i].at);
        ck_assert_int_eq(a->e[i].error, b->e[i].error);
        if (a->e[i].ev == HTTP_HEAD)
            assert_same_request(&a->e[i].req, &b->e[i].req);
    }
}

/* The error a whole input ends in (HTTP_ERR_NONE if it parses). */
static http_error_t error_of(const http_limits_t *lim, const char *in, size_t len)
{
    trace_t t;
    run(lim, in, len, &t);
    return t.n > 0 && t.e[t.n - 1].ev == HTTP_ERROR ? t.e[t.n - 1].error : HTTP_ERR_NONE;
}

#define ERR(s) error_of(NULL, (s), strlen(s))

/* One complete request: its head, asserted to be followed by DONE. */
static http_request_t parse_ok(const char *in)
{
    trace_t t;
    run(NULL, in, strlen(in), &t);
    ck_assert_msg(t.n >= 2, "no complete request in \"%s\" (events %zu, error %s)", in, t.n,
                  t.n ? http_error_name(t.e[t.n - 1].error) : "-");
    ck_assert_int_eq(t.e[0].ev, HTTP_HEAD);
    ck_assert_int_eq(t.e[1].ev, HTTP_DONE);
    return t.e[0].req;
}

/* Inputs for the chunking tests: valid, pipelined and broken ones. */
static const char *const corpus[] = {
    "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /search?q=1 HTTP/1.1\r\nHost: example.com\r\nX-API-Key:  k-123 \r\n"
    "Connection: keep-alive, close\r\n\r\n",
    "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello"
    "GET /next HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    "\r\n\r\nGET / HTTP/1.1\r\nhOsT: a\r\ncOnTeNt-LeNgTh: 0003\r\n\r\nabcGET / HTTP/1.1\r\n",
    "GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nX: y\r\n z\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n",
    "GET /\x01 HTTP/1.1\r\n\r\n",
    "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\nGET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\n"
    "Host: a\r\nConnection: close\r\n\r\n",
};

START_TEST(every_split_matches_one_feed)
{
    const char *in = corpus[_i];
    size_t len = strlen(in);
    trace_t whole, split;
    run(NULL, in, len, &whole);
    ck_assert_uint_gt(whole.n, 0);
    for (size_t pos = 0; pos <= len; pos++) {
        size_t chunks[] = {pos, 0};
        run_chunks(NULL, in, len, pos ? chunks : NULL, &split);
        assert_same_trace(&whole, &split);
    }
    /* one byte at a time */
    size_t *ones = malloc((len + 1) * sizeof *ones);
    ck_assert_ptr_nonnull(ones);
    for (size_t i = 0; i < len; i++)
        ones[i] = 1;
    ones[len] = 0;
    run_chunks(NULL, in, len, ones, &split);
    assert_same_trace(&whole, &split);
    free(ones);
}
END_TEST

START_TEST(pipelined_requests_in_order)
{
    const char *in = "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nxyz"
                     "GET /b HTTP/1.1\r\nHost: h\r\nX-API-Key: k\r\n\r\n"
                     "GET /c HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
                     "GET /d HT";
    trace_t t;
    run(NULL, in, strlen(in), &t);
    ck_assert_uint_eq(t.n, 6);
    const char *targets[] = {"/a", "/b", "/c"};
    size_t at = 0;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(t.e[2 * i].ev, HTTP_HEAD);
        ck_assert_int_eq(t.e[2 * i + 1].ev, HTTP_DONE);
        ck_assert_str_eq(t.e[2 * i].req.target, targets[i]);
        ck_assert_uint_gt(t.e[2 * i + 1].at, at);
        at = t.e[2 * i + 1].at;
    }
    ck_assert_uint_eq(t.e[0].req.content_length, 3);
    ck_assert_str_eq(t.e[2].req.api_key, "k");
    ck_assert_int_eq(t.e[2].req.keep_alive, 1);
    ck_assert_int_eq(t.e[4].req.keep_alive, 0);
    /* the partial fourth request is left unreported, its bytes consumed */
    ck_assert_uint_eq(t.e[5].at, strlen(in) - strlen("GET /d HT"));
}
END_TEST

START_TEST(body_consumed_across_feeds)
{
    http_parser_t p;
    ck_assert_int_eq(http_parser_init(&p, NULL), 0);
    const char *head = "PUT /x HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123";
    size_t used;
    ck_assert_int_eq(http_parser_feed(&p, head, strlen(head), &used), HTTP_HEAD);
    ck_assert_uint_eq(used, strlen(head) - 4);
    ck_assert_int_eq(http_parser_feed(&p, "0123", 4, &used), HTTP_NEED_MORE);
    ck_assert_uint_eq(used, 4);
    ck_assert_int_eq(http_parser_feed(&p, NULL, 0, &used), HTTP_NEED_MORE);
    ck_assert_int_eq(http_parser_feed(&p, "456789GET", 9, &used), HTTP_DONE);
    ck_assert_uint_eq(used, 6);
    /* DONE repeats until next */
    ck_assert_int_eq(http_parser_feed(&p, "GET", 3, &used), HTTP_DONE);
    ck_assert_uint_eq(used, 0);
    http_parser_next(&p);
    ck_assert_int_eq(http_parser_started(&p), 0);
    ck_assert_int_eq(http_parser_feed(&p, "GET", 3, &used), HTTP_NEED_MORE);
    ck_assert_int_eq(http_parser_started(&p), 1);
}
END_TEST

START_TEST(no_body_done_on_empty_feed)
{
    http_parser_t p;
    ck_assert_int_eq(http_parser_init(&p, NULL), 0);
    const char *in = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
    size_t used;
    ck_assert_int_eq(http_parser_feed(&p, in, strlen(in), &used), HTTP_HEAD);
    ck_assert_uint_eq(used, strlen(in));
    ck_assert_int_eq(http_parser_feed(&p, NULL, 0, &used), HTTP_DONE);
    ck_assert_uint_eq(used, 0);
}
END_TEST

START_TEST(error_is_sticky_and_stops_before_the_bad_byte)
{
    http_parser_t p;
    ck_assert_int_eq(http_parser_init(&p, NULL), 0);
    const char *in = "GET / HTTP/1.1\r\nHo st: h\r\n\r\n";
    size_t used;
    ck_assert_int_eq(http_parser_feed(&p, in, strlen(in), &used), HTTP_ERROR);
    ck_assert_uint_eq(used, strlen("GET / HTTP/1.1\r\nHo"));
    ck_assert_int_eq(p.error, HTTP_ERR_BAD_HEADER_NAME);
    ck_assert_int_eq(http_parser_feed(&p, "GET", 3, &used), HTTP_ERROR);
    ck_assert_uint_eq(used, 0);
}
END_TEST

/* --------------------------------------------------------------- limits */

/* A request whose part under test is `n` bytes of 'a' (or what fits). */
static char *with_method(size_t n)
{
    char *s = malloc(n + 64);
    memset(s, 'A', n);
    strcpy(s + n, " / HTTP/1.1\r\nHost: h\r\n\r\n");
    return s;
}

static char *with_target(size_t n)
{
    char *s = malloc(n + 64);
    strcpy(s, "GET /");
    memset(s + 5, 'a', n - 1);
    strcpy(s + 4 + n, " HTTP/1.1\r\nHost: h\r\n\r\n");
    return s;
}

static char *with_field(size_t name_len, size_t value_len)
{
    char *s = malloc(name_len + value_len + 64);
    strcpy(s, "GET / HTTP/1.1\r\nHost: h\r\n");
    size_t o = strlen(s);
    memset(s + o, 'n', name_len);
    o += name_len;
    s[o++] = ':';
    memset(s + o, 'v', value_len);
    o += value_len;
    strcpy(s + o, "\r\n\r\n");
    return s;
}

static char *with_api_key(size_t n)
{
    char *s = malloc(n + 64);
    strcpy(s, "GET / HTTP/1.1\r\nHost: h\r\nX-API-Key: ");
    size_t o = strlen(s);
    memset(s + o, 'k', n);
    strcpy(s + o + n, "\r\n\r\n");
    return s;
}

static char *with_fields(size_t count)
{
    char *s = malloc(count * 8 + 64);
    strcpy(s, "GET / HTTP/1.1\r\nHost: h\r\n");
    for (size_t i = 1; i < count; i++)
        strcat(s, "X: y\r\n");
    strcat(s, "\r\n");
    return s;
}

/* A head of exactly n bytes (n >= 64), padded with field lines of at most
 * 4000 bytes each (below the value limit) and one last exact one. */
static char *with_head_size(size_t n)
{
    char *s = malloc(n + 1);
    strcpy(s, "GET / HTTP/1.1\r\nHost: h\r\n");
    size_t o = strlen(s);
    while (n - o - 2 > 4000 + 5) {
        memcpy(s + o, "P: ", 3);
        memset(s + o + 3, 'p', 4000 - 5);
        memcpy(s + o + 3 + 4000 - 5, "\r\n", 2);
        o += 4000;
    }
    size_t last = n - o - 2; /* "P: " + pad + CRLF */
    ck_assert_uint_ge(last, 6);
    memcpy(s + o, "P: ", 3);
    memset(s + o + 3, 'p', last - 5);
    strcpy(s + o + last - 2, "\r\n\r\n");
    ck_assert_uint_eq(strlen(s), n);
    return s;
}

static void expect_limit(char *at_max, char *over, http_error_t e)
{
    ck_assert_str_eq(http_error_name(ERR(at_max)), "NONE");
    ck_assert_str_eq(http_error_name(ERR(over)), http_error_name(e));
    free(at_max);
    free(over);
}

START_TEST(limit_method)
{
    http_limits_t l = http_limits_default();
    expect_limit(with_method(l.max_method), with_method(l.max_method + 1),
                 HTTP_ERR_METHOD_TOO_LONG);
    ck_assert_int_eq(http_error_status(HTTP_ERR_METHOD_TOO_LONG), 501);
}
END_TEST

START_TEST(limit_target)
{
    http_limits_t l = http_limits_default();
    expect_limit(with_target(l.max_target), with_target(l.max_target + 1),
                 HTTP_ERR_TARGET_TOO_LONG);
    ck_assert_int_eq(http_error_status(HTTP_ERR_TARGET_TOO_LONG), 414);
}
END_TEST

START_TEST(limit_header_name)
{
    http_limits_t l = http_limits_default();
    expect_limit(with_field(l.max_header_name, 1), with_field(l.max_header_name + 1, 1),
                 HTTP_ERR_HEADER_NAME_TOO_LONG);
    ck_assert_int_eq(http_error_status(HTTP_ERR_HEADER_NAME_TOO_LONG), 431);
}
END_TEST

START_TEST(limit_header_value)
{
    http_limits_t l = http_limits_default();
    expect_limit(with_field(1, l.max_header_value), with_field(1, l.max_header_value + 1),
                 HTTP_ERR_HEADER_VALUE_TOO_LONG);
    ck_assert_int_eq(http_error_status(HTTP_ERR_HEADER_VALUE_TOO_LONG), 431);
}
END_TEST

START_TEST(limit_header_count)
{
    http_limits_t l = http_limits_default();
    expect_limit(with_fields(l.max_headers), with_fields(l.max_headers + 1),
                 HTTP_ERR_TOO_MANY_HEADERS);
}
END_TEST

START_TEST(limit_head_size)
{
    http_limits_t l = http_limits_default();
    expect_limit(with_head_size(l.max_head), with_head_size(l.max_head + 1),
                 HTTP_ERR_HEAD_TOO_LARGE);
    /* a smaller head limit bites the same way */
    l.max_head = 200;
    char *s = with_head_size(200), *t = with_head_size(201);
    ck_assert_int_eq(error_of(&l, s, strlen(s)), HTTP_ERR_NONE);
    ck_assert_int_eq(error_of(&l, t, strlen(t)), HTTP_ERR_HEAD_TOO_LARGE);
    free(s);
    free(t);
}
END_TEST

START_TEST(limit_api_key)
{
    http_limits_t l = http_limits_default();
    expect_limit(with_api_key(l.max_api_key), with_api_key(l.max_api_key + 1),
                 HTTP_ERR_API_KEY_TOO_LONG);
    char *s = with_api_key(l.max_api_key);
    http_request_t r = parse_ok(s);
    ck_assert_uint_eq(r.api_key_len, l.max_api_key);
    ck_assert_uint_eq(strlen(r.api_key), l.max_api_key);
    free(s);
}
END_TEST

START_TEST(limit_body)
{
    http_limits_t l = http_limits_default();
    char in[128];
    snprintf(in, sizeof in, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: %llu\r\n\r\n",
             (unsigned long long)l.max_body);
    trace_t t;
    run(NULL, in, strlen(in), &t);
    ck_assert_uint_eq(t.n, 1);
    ck_assert_int_eq(t.e[0].ev, HTTP_HEAD);
    ck_assert_uint_eq(t.e[0].req.content_length, l.max_body);
    snprintf(in, sizeof in, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: %llu\r\n\r\n",
             (unsigned long long)l.max_body + 1);
    ck_assert_int_eq(ERR(in), HTTP_ERR_BODY_TOO_LARGE);
    ck_assert_int_eq(http_error_status(HTTP_ERR_BODY_TOO_LARGE), 413);
}
END_TEST

START_TEST(huge_content_length_never_wraps)
{
    /* 2^64 and beyond are too large, not zero */
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 18446744073709551616\r\n\r\n"),
                     HTTP_ERR_BODY_TOO_LARGE);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: "
                         "99999999999999999999999999999999999999\r\n\r\n"),
                     HTTP_ERR_BODY_TOO_LARGE);
    /* with no cap below 2^64 - 1, the largest value parses and one more fails */
    http_limits_t l = http_limits_default();
    l.max_body = UINT64_MAX;
    const char *max = "GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 18446744073709551615\r\n\r\n";
    trace_t t;
    run(&l, max, strlen(max), &t);
    ck_assert_int_eq(t.e[0].ev, HTTP_HEAD);
    ck_assert_uint_eq(t.e[0].req.content_length, UINT64_MAX);
    const char *over = "GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 18446744073709551616\r\n\r\n";
    ck_assert_int_eq(error_of(&l, over, strlen(over)), HTTP_ERR_BODY_TOO_LARGE);
    /* leading zeros are digits, not size */
    http_request_t r = parse_ok("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: "
                                "000000000000000000000000000000000000000002\r\n\r\nab");
    ck_assert_uint_eq(r.content_length, 2);
}
END_TEST

START_TEST(init_refuses_bad_limits)
{
    http_parser_t p;
    http_limits_t l = http_limits_default();
    l.max_target = HTTP_TARGET_CAP + 1;
    ck_assert_int_eq(http_parser_init(&p, &l), -1);
    l = http_limits_default();
    l.max_method = 0;
    ck_assert_int_eq(http_parser_init(&p, &l), -1);
    l = http_limits_default();
    l.max_api_key = HTTP_API_KEY_CAP + 1;
    ck_assert_int_eq(http_parser_init(&p, &l), -1);
    l = http_limits_default();
    l.max_head = 0;
    ck_assert_int_eq(http_parser_init(&p, &l), -1);
    ck_assert_int_eq(http_parser_init(&p, NULL), 0);
}
END_TEST

/* -------------------------------------------------------------- semantics */

START_TEST(field_names_are_case_insensitive)
{
    http_request_t r = parse_ok("GET / HTTP/1.1\r\nhOsT: h\r\nCONTENT-LENGTH: 2\r\n"
                                "x-api-KEY: Key-1\r\ncOnNeCtIoN: ClOsE\r\n\r\nab");
    ck_assert_uint_eq(r.content_length, 2);
    ck_assert_str_eq(r.api_key, "Key-1"); /* the value keeps its case */
    ck_assert_int_eq(r.keep_alive, 0);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHOST: a\r\nhost: b\r\n\r\n"), HTTP_ERR_DUPLICATE_HEADER);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: a\r\nTRANSFER-encoding: CHUNKED\r\n\r\n"),
                     HTTP_ERR_CHUNKED_NOT_SUPPORTED);
}
END_TEST

START_TEST(keep_alive_rules)
{
    ck_assert_int_eq(parse_ok("GET / HTTP/1.1\r\nHost: h\r\n\r\n").keep_alive, 1);
    ck_assert_int_eq(parse_ok("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n").keep_alive, 0);
    ck_assert_int_eq(parse_ok("GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive , Close\r\n\r\n")
                         .keep_alive,
                     0);
    ck_assert_int_eq(parse_ok("GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\n"
                              "Connection: ,, closed\r\n\r\n")
                         .keep_alive,
                     1);
    ck_assert_int_eq(parse_ok("GET / HTTP/1.0\r\n\r\n").keep_alive, 0);
    ck_assert_int_eq(parse_ok("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive, 1);
    ck_assert_int_eq(parse_ok("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n").keep_alive,
                     0);
    /* a token longer than any the parser knows is just another token */
    ck_assert_int_eq(parse_ok("GET / HTTP/1.1\r\nHost: h\r\nConnection: close-but-longer-than-16\r\n\r\n")
                         .keep_alive,
                     1);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nConnection: close keep-alive\r\n\r\n"),
                     HTTP_ERR_BAD_CONNECTION);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nConnection: \"close\"\r\n\r\n"),
                     HTTP_ERR_BAD_CONNECTION);
}
END_TEST

START_TEST(obs_fold_rejected)
{
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n"), HTTP_ERR_OBS_FOLD);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n\tb\r\n\r\n"), HTTP_ERR_OBS_FOLD);
    /* whitespace between the request line and the first field */
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\n Host: h\r\n\r\n"), HTTP_ERR_OBS_FOLD);
    ck_assert_int_eq(http_error_status(HTTP_ERR_OBS_FOLD), 400);
}
END_TEST

START_TEST(bare_lf_and_bare_cr_rejected)
{
    ck_assert_int_eq(ERR("GET / HTTP/1.1\nHost: h\r\n\r\n"), HTTP_ERR_BAD_LINE_END);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\n\r\n"), HTTP_ERR_BAD_LINE_END);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\n\n"), HTTP_ERR_BAD_LINE_END);
    ck_assert_int_eq(ERR("\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"), HTTP_ERR_BAD_LINE_END);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\rHost: h\r\n\r\n"), HTTP_ERR_BAD_LINE_END);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\r\n\r\n"), HTTP_ERR_BAD_LINE_END);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\n\r\r"), HTTP_ERR_BAD_LINE_END);
    /* empty lines before the request line are skipped (RFC 9112 2.2) */
    ck_assert_str_eq(parse_ok("\r\n\r\nGET /x HTTP/1.1\r\nHost: h\r\n\r\n").target, "/x");
}
END_TEST

START_TEST(crlf_injection_rejected)
{
    /* a lone CR or LF inside a value cannot start a new field line */
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nX-API-Key: a\rX-Admin: 1\r\n\r\n"),
                     HTTP_ERR_BAD_LINE_END);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nX-API-Key: a\nX-Admin: 1\r\n\r\n"),
                     HTTP_ERR_BAD_LINE_END);
    ck_assert_int_eq(ERR("GET /a\r\nX: b HTTP/1.1\r\nHost: h\r\n\r\n"), HTTP_ERR_BAD_TARGET);
    /* NUL and other controls in a value */
    ck_assert_int_eq(error_of(NULL, "GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n", 36),
                     HTTP_ERR_BAD_HEADER_VALUE);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nX: a\x7f\r\n\r\n"), HTTP_ERR_BAD_HEADER_VALUE);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nX: a\x1b[0m\r\n\r\n"), HTTP_ERR_BAD_HEADER_VALUE);
    /* HTAB and obs-text are legal in an ordinary value */
    parse_ok("GET / HTTP/1.1\r\nHost: h\r\nX: a\tb \xe9\xff\r\n\r\n");
}
END_TEST

START_TEST(duplicate_content_length_rejected)
{
    ck_assert_int_eq(ERR("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc"),
                     HTTP_ERR_DUPLICATE_HEADER);
    ck_assert_int_eq(ERR("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabc"),
                     HTTP_ERR_DUPLICATE_HEADER);
    ck_assert_int_eq(ERR("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3, 3\r\n\r\nabc"),
                     HTTP_ERR_BAD_CONTENT_LENGTH);
    ck_assert_int_eq(ERR("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3 3\r\n\r\nabc"),
                     HTTP_ERR_BAD_CONTENT_LENGTH);
    ck_assert_int_eq(ERR("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +3\r\n\r\nabc"),
                     HTTP_ERR_BAD_CONTENT_LENGTH);
    ck_assert_int_eq(ERR("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n"),
                     HTTP_ERR_BAD_CONTENT_LENGTH);
    ck_assert_int_eq(ERR("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0x10\r\n\r\n"),
                     HTTP_ERR_BAD_CONTENT_LENGTH);
    ck_assert_int_eq(ERR("POST / HTTP/1.1\r\nHost: h\r\nContent-Length:   \r\n\r\n"),
                     HTTP_ERR_BAD_CONTENT_LENGTH);
    ck_assert_uint_eq(parse_ok("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: \t 3 \t\r\n\r\nabc")
                          .content_length,
                      3);
}
END_TEST

START_TEST(length_and_transfer_encoding_rejected)
{
    /* CL.TE and TE.CL smuggling: both orders */
    ck_assert_int_eq(ERR("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
                     HTTP_ERR_LENGTH_AND_CHUNKED);
    ck_assert_int_eq(ERR("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                         "Content-Length: 4\r\n\r\n0\r\n\r\n"),
                     HTTP_ERR_LENGTH_AND_CHUNKED);
    ck_assert_int_eq(http_error_status(HTTP_ERR_LENGTH_AND_CHUNKED), 400);
    ck_assert_int_eq(ERR("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"),
                     HTTP_ERR_CHUNKED_NOT_SUPPORTED);
    ck_assert_int_eq(http_error_status(HTTP_ERR_CHUNKED_NOT_SUPPORTED), 411);
    ck_assert_int_eq(ERR("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
                     HTTP_ERR_TE_NOT_IMPLEMENTED);
    ck_assert_int_eq(ERR("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n"),
                     HTTP_ERR_TE_NOT_IMPLEMENTED);
    ck_assert_int_eq(ERR("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: xchunked\r\n\r\n"),
                     HTTP_ERR_TE_NOT_IMPLEMENTED);
    ck_assert_int_eq(http_error_status(HTTP_ERR_TE_NOT_IMPLEMENTED), 501);
    ck_assert_int_eq(ERR("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
                     HTTP_ERR_TE_IN_HTTP10);
    /* a space before the colon must not hide the field */
    ck_assert_int_eq(ERR("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding : chunked\r\n"
                         "Content-Length: 4\r\n\r\n"),
                     HTTP_ERR_BAD_HEADER_NAME);
}
END_TEST

START_TEST(invalid_token_characters)
{
    ck_assert_int_eq(ERR("G(T / HTTP/1.1\r\nHost: h\r\n\r\n"), HTTP_ERR_BAD_METHOD);
    ck_assert_int_eq(ERR("GET  / HTTP/1.1\r\nHost: h\r\n\r\n"), HTTP_ERR_BAD_TARGET);
    ck_assert_int_eq(ERR("G\xc3\x89T / HTTP/1.1\r\nHost: h\r\n\r\n"), HTTP_ERR_BAD_METHOD);
    ck_assert_int_eq(ERR(" GET / HTTP/1.1\r\nHost: h\r\n\r\n"), HTTP_ERR_BAD_METHOD);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nX@Y: z\r\n\r\n"), HTTP_ERR_BAD_HEADER_NAME);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\n: z\r\n\r\n"), HTTP_ERR_BAD_HEADER_NAME);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n"), HTTP_ERR_BAD_HEADER_NAME);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nX\xe9: z\r\n\r\n"), HTTP_ERR_BAD_HEADER_NAME);
    ck_assert_int_eq(ERR("GET /caf\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n"), HTTP_ERR_BAD_TARGET);
    ck_assert_int_eq(ERR("GET /a\tb HTTP/1.1\r\nHost: h\r\n\r\n"), HTTP_ERR_BAD_TARGET);
    ck_assert_int_eq(ERR("GET http://evil/ HTTP/1.1\r\nHost: h\r\n\r\n"), HTTP_ERR_BAD_TARGET);
    ck_assert_int_eq(ERR("GET *x HTTP/1.1\r\nHost: h\r\n\r\n"), HTTP_ERR_BAD_TARGET);
    ck_assert_str_eq(parse_ok("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n").target, "*");
    /* tchar punctuation is fine in a method and a name */
    ck_assert_str_eq(parse_ok("M-S.E_A~R!C#H / HTTP/1.1\r\nHost: h\r\nX-a!#$%&'*+.^_`|~: 1\r\n\r\n")
                         .method,
                     "M-S.E_A~R!C#H");
}
END_TEST

START_TEST(versions)
{
    ck_assert_int_eq(parse_ok("GET / HTTP/1.0\r\n\r\n").version_minor, 0);
    ck_assert_int_eq(parse_ok("GET / HTTP/1.1\r\nHost: h\r\n\r\n").version_minor, 1);
    ck_assert_int_eq(ERR("GET / HTTP/2.0\r\nHost: h\r\n\r\n"), HTTP_ERR_VERSION_NOT_SUPPORTED);
    ck_assert_int_eq(ERR("GET / HTTP/1.2\r\nHost: h\r\n\r\n"), HTTP_ERR_VERSION_NOT_SUPPORTED);
    ck_assert_int_eq(http_error_status(HTTP_ERR_VERSION_NOT_SUPPORTED), 505);
    ck_assert_int_eq(ERR("GET / http/1.1\r\nHost: h\r\n\r\n"), HTTP_ERR_BAD_VERSION);
    ck_assert_int_eq(ERR("GET / HTTP/1.11\r\nHost: h\r\n\r\n"), HTTP_ERR_BAD_VERSION);
    ck_assert_int_eq(ERR("GET / HTTP/1.1 \r\nHost: h\r\n\r\n"), HTTP_ERR_BAD_VERSION);
    ck_assert_int_eq(ERR("GET / HTTP/1\r\nHost: h\r\n\r\n"), HTTP_ERR_BAD_VERSION);
    ck_assert_int_eq(ERR("GET /\r\n\r\n"), HTTP_ERR_BAD_TARGET); /* HTTP/0.9 */
    ck_assert_int_eq(ERR("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), HTTP_ERR_VERSION_NOT_SUPPORTED);
}
END_TEST

START_TEST(host_rules)
{
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\n\r\n"), HTTP_ERR_MISSING_HOST);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"), HTTP_ERR_DUPLICATE_HEADER);
    parse_ok("GET / HTTP/1.1\r\nHost:\r\n\r\n"); /* empty: allowed (RFC 9112 3.2) */
    parse_ok("GET / HTTP/1.0\r\n\r\n");
}
END_TEST

START_TEST(api_key_rules)
{
    ck_assert_str_eq(parse_ok("GET / HTTP/1.1\r\nHost: h\r\nX-API-Key: \t abc-DEF_1.2 \t\r\n\r\n").api_key,
                     "abc-DEF_1.2");
    ck_assert_uint_eq(parse_ok("GET / HTTP/1.1\r\nHost: h\r\n\r\n").api_key_len, 0);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nX-API-Key:\r\n\r\n"), HTTP_ERR_BAD_API_KEY);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nX-API-Key: a b\r\n\r\n"), HTTP_ERR_BAD_API_KEY);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nX-API-Key: caf\xc3\xa9\r\n\r\n"),
                     HTTP_ERR_BAD_API_KEY);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nX-API-Key: a\r\nX-Api-Key: b\r\n\r\n"),
                     HTTP_ERR_DUPLICATE_HEADER);
}
END_TEST

START_TEST(idempotency_key_rules)
{
    http_request_t r = parse_ok("GET / HTTP/1.1\r\nHost: h\r\nIdempotency-Key: \t \"8e03978e-40d5\" \r\n\r\n");
    ck_assert_str_eq(r.idem_key, "\"8e03978e-40d5\"");
    ck_assert_uint_eq(r.idem_key_len, 15);
    ck_assert_uint_eq(parse_ok("GET / HTTP/1.1\r\nHost: h\r\n\r\n").idem_key_len, 0);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nIdempotency-Key:\r\n\r\n"),
                     HTTP_ERR_BAD_IDEM_KEY);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nIdempotency-Key: a b\r\n\r\n"),
                     HTTP_ERR_BAD_IDEM_KEY);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nIdempotency-Key: caf\xc3\xa9\r\n\r\n"),
                     HTTP_ERR_BAD_IDEM_KEY);
    ck_assert_int_eq(
        ERR("GET / HTTP/1.1\r\nHost: h\r\nIdempotency-Key: a\r\nidempotency-key: a\r\n\r\n"),
        HTTP_ERR_DUPLICATE_HEADER);
    char ok[256], over[256];
    char k[HTTP_IDEM_KEY_CAP + 2];
    memset(k, 'k', sizeof k);
    k[HTTP_IDEM_KEY_CAP] = '\0';
    snprintf(ok, sizeof ok, "GET / HTTP/1.1\r\nHost: h\r\nIdempotency-Key: %s\r\n\r\n", k);
    ck_assert_uint_eq(parse_ok(ok).idem_key_len, HTTP_IDEM_KEY_CAP);
    k[HTTP_IDEM_KEY_CAP] = 'k';
    k[HTTP_IDEM_KEY_CAP + 1] = '\0';
    snprintf(over, sizeof over, "GET / HTTP/1.1\r\nHost: h\r\nIdempotency-Key: %s\r\n\r\n", k);
    ck_assert_int_eq(ERR(over), HTTP_ERR_IDEM_KEY_TOO_LONG);
}
END_TEST

/* X-Max-Tokens: a decimal number in 1..HTTP_MAX_TOKENS, once. */
START_TEST(max_tokens_rules)
{
    ck_assert_uint_eq(parse_ok("GET / HTTP/1.1\r\nHost: h\r\nX-Max-Tokens:  250 \r\n\r\n").max_tokens,
                      250);
    ck_assert_uint_eq(parse_ok("GET / HTTP/1.1\r\nHost: h\r\n\r\n").max_tokens, 0);
    ck_assert_uint_eq(
        parse_ok("GET / HTTP/1.1\r\nHost: h\r\nx-max-tokens: 1000000000\r\n\r\n").max_tokens,
        HTTP_MAX_TOKENS);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nX-Max-Tokens: 1000000001\r\n\r\n"),
                     HTTP_ERR_BAD_MAX_TOKENS);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nX-Max-Tokens: 99999999999999999999\r\n\r\n"),
                     HTTP_ERR_BAD_MAX_TOKENS);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nX-Max-Tokens: 0\r\n\r\n"),
                     HTTP_ERR_BAD_MAX_TOKENS);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nX-Max-Tokens:\r\n\r\n"),
                     HTTP_ERR_BAD_MAX_TOKENS);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nX-Max-Tokens: 1 2\r\n\r\n"),
                     HTTP_ERR_BAD_MAX_TOKENS);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nX-Max-Tokens: -1\r\n\r\n"),
                     HTTP_ERR_BAD_MAX_TOKENS);
    ck_assert_int_eq(ERR("GET / HTTP/1.1\r\nHost: h\r\nX-Max-Tokens: 1\r\nX-Max-Tokens: 1\r\n\r\n"),
                     HTTP_ERR_DUPLICATE_HEADER);
}
END_TEST

START_TEST(expect_rules)
{
    ck_assert_int_eq(parse_ok("POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\n"
                              "Content-Length: 1\r\n\r\nx")
                         .expect_continue,
                     1);
    /* nothing to wait for without a body */
    ck_assert_int_eq(parse_ok("GET / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n\r\n")
                         .expect_continue,
                     0);
    ck_assert_int_eq(ERR("POST / HTTP/1.1\r\nHost: h\r\nExpect: 200-ok\r\nContent-Length: 1\r\n\r\nx"),
                     HTTP_ERR_EXPECTATION_FAILED);
    ck_assert_int_eq(http_error_status(HTTP_ERR_EXPECTATION_FAILED), 417);
    /* HTTP/1.0 ignores Expect altogether */
    ck_assert_int_eq(parse_ok("POST / HTTP/1.0\r\nExpect: 200-ok\r\nContent-Length: 1\r\n\r\nx")
                         .expect_continue,
                     0);
}
END_TEST

START_TEST(error_table)
{
    for (int e = 0; e < HTTP_ERR_COUNT; e++) {
        int s = http_error_status((http_error_t)e);
        ck_assert(e == HTTP_ERR_NONE ? s == 0 : (s >= 400 && s <= 505));
        ck_assert_uint_gt(strlen(http_error_message((http_error_t)e)), 0);
        ck_assert_str_ne(http_error_name((http_error_t)e), "UNKNOWN");
    }
    ck_assert_str_eq(http_error_name(HTTP_ERR_BAD_LINE_END), "BAD_LINE_END");
    ck_assert_str_eq(http_error_name(HTTP_ERR_COUNT), "UNKNOWN");
    ck_assert_int_eq(http_error_status(HTTP_ERR_COUNT), 500);
}
END_TEST

static Suite *parser_suite(void)
{
    Suite *s = suite_create("http_parser");
    TCase *tc = tcase_create("chunking");
    tcase_add_loop_test(tc, every_split_matches_one_feed, 0, (int)(sizeof corpus / sizeof corpus[0]));
    tcase_add_test(tc, pipelined_requests_in_order);
    tcase_add_test(tc, body_consumed_across_feeds);
    tcase_add_test(tc, no_body_done_on_empty_feed);
    tcase_add_test(tc, error_is_sticky_and_stops_before_the_bad_byte);
    suite_add_tcase(s, tc);
    tc = tcase_create("limits");
    tcase_add_test(tc, limit_method);
    tcase_add_test(tc, limit_target);
    tcase_add_test(tc, limit_header_name);
    tcase_add_test(tc, limit_header_value);
    tcase_add_test(tc, limit_header_count);
    tcase_add_test(tc, limit_head_size);
    tcase_add_test(tc, limit_api_key);
    tcase_add_test(tc, limit_body);
    tcase_add_test(tc, huge_content_length_never_wraps);
    tcase_add_test(tc, init_refuses_bad_limits);
    suite_add_tcase(s, tc);
    tc = tcase_create("semantics");
    tcase_add_test(tc, field_names_are_case_insensitive);
    tcase_add_test(tc, keep_alive_rules);
    tcase_add_test(tc, obs_fold_rejected);
    tcase_add_test(tc, bare_lf_and_bare_cr_rejected);
    tcase_add_test(tc, crlf_injection_rejected);
    tcase_add_test(tc, duplicate_content_length_rejected);
    tcase_add_test(tc, length_and_transfer_encoding_rejected);
    tcase_add_test(tc, invalid_token_characters);
    tcase_add_test(tc, versions);
    tcase_add_test(tc, host_rules);
    tcase_add_test(tc, api_key_rules);
    tcase_add_test(tc, idempotency_key_rules);
    tcase_add_test(tc, max_tokens_rules);
    tcase_add_test(tc, expect_rules);
    tcase_add_test(tc, error_table);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(parser_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

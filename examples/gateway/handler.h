/* SPDX-License-Identifier: MIT */
/*
 * What each request gets: the routes, the rate-limit check, and the bodies
 * of error responses. No I/O: the server formats and sends the reply.
 *
 * Routes: GET or HEAD /metrics (Prometheus text); every other path is the
 * API this example stands in front of, answered 200 with a small JSON body
 * when every rule that matches it admits the request, 429 otherwise.
 */
#ifndef GATEWAY_HANDLER_H
#define GATEWAY_HANDLER_H

#include <stdatomic.h>
#include <ratelimit.h>
#include <uv.h>

#include "http_parser.h"
#include "limits_config.h"
#include "metrics.h"
#include "response.h"

struct pending;
struct reply;
struct upstream;

/* A request answered later (a quota or an exact rule): the server's hook,
 * on the loop. */
typedef void handler_done_fn(void *conn, struct reply *r);

typedef struct gateway {
    rl_t *rl;
    limit_set_t *limits; /* the rules in force; a reload swaps them */
    gw_metrics_t metrics;
    uint64_t request_seq; /* quota request ids: node id + this (loop thread only) */
    const char *node_id;  /* in quota request ids; NULL: "gw" */
    /* Quotas (charged with rl_quota_charge_async) and exact rules
     * (mode=exact with --redis, checked with rl_check_async): their answers
     * come on the library's exact thread and are handed back to the loop
     * through `wake` (uv_async_send). */
    bool exact_async;
    uv_async_t wake;
    uv_mutex_t done_mu;
    struct pending *done_head; /* answered, not yet finished (done_mu) */
    unsigned pending;          /* requests waiting for Redis (loop only) */
    bool wake_closed;
    handler_done_fn *done;
    struct upstream *upstream; /* --upstream: where admitted requests go; NULL:
                                  the gateway answers them itself */
} gateway_t;

/* A response and the buffers it points into, until it is formatted. */
typedef struct reply {
    response_t resp;
    char headers[1024]; /* rl_headers needs at most 517 bytes */
    char body[2 * HTTP_TARGET_CAP + 256]; /* JSON, the escaped path included */
    char *owned;        /* a heap body (the metrics), or NULL */
} reply_t;

/* Set up the hand-back of exact answers on loop (exact_async: the instance
 * has Redis). 0 or a libuv error. */
int handler_init(gateway_t *g, uv_loop_t *loop, bool exact_async, handler_done_fn *done);

/* Close the hand-back once nothing is pending (the loop can then end);
 * again when the last pending request finishes. */
void handler_stop(gateway_t *g);

#define HANDLER_PENDING 1

/* The reply to a parsed request from client_ip (a numeric address): 0 with
 * *out ready, or HANDLER_PENDING when a quota or an exact rule waits for
 * Redis (quotas first, then, all allowed, the exact rules): then
 * g->done(conn, reply) runs later on the loop, once. */
int handler_request(gateway_t *g, const http_request_t *req, const char *client_ip, reply_t *out,
                    void *conn);

/* The reply to a request the parser refused (counted by reason); it closes
 * the connection. */
void handler_parse_error(gateway_t *g, http_error_t e, reply_t *out);

/* The reply to a request that did not arrive within the request timeout. */
void handler_timeout(reply_t *out);

/* A reply's parts, for the stages in other files (proxy.c). */
void reply_init(reply_t *r, int status);
/* The body: JSON from a format. */
__attribute__((format(printf, 2, 3))) void json_body(reply_t *r, const char *fmt, ...);
/* Append one header line (whatever rl_headers put there first); a line
 * that does not fit is left out. */
__attribute__((format(printf, 2, 3))) void add_header(reply_t *out, const char *fmt, ...);

/* Free what a reply owns (after formatting it). */
void reply_free(reply_t *r);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The upstream the gateway forwards admitted requests to (--upstream): one
 * HTTP/1.0 request per connection (Connection: close), the whole response
 * read until the upstream closes, on the gateway's loop. No request body
 * is forwarded: the example's upstream needs the path and a few headers.
 */
#ifndef GATEWAY_UPSTREAM_H
#define GATEWAY_UPSTREAM_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define UPSTREAM_RESPONSE_MAX 16384 /* bytes; a longer response is a failure */

typedef struct upstream {
    uv_loop_t *loop;
    struct sockaddr_storage addr;
    uint64_t timeout_ms; /* connect to the last byte */
} upstream_t;

/* What came back: status 0 when the upstream failed (refused, reset, timed
 * out, a response too long or not HTTP); usage is its X-Usage-Tokens
 * (has_usage false without one). body points into the call, valid only
 * during the callback. */
typedef struct upstream_result {
    int status;
    bool has_usage;
    uint64_t usage;
    const char *body;
    size_t body_len;
    const char *content_type; /* "" without one */
} upstream_result_t;

typedef void upstream_done_fn(void *ud, const upstream_result_t *res);

/* Forward `method target` with the client's X-API-Key (api_key may be "")
 * and X-Max-Tokens (0: none). done runs once, later, on the loop. 0, or a
 * libuv error (done will not run). */
int upstream_request(upstream_t *u, const char *method, const char *target, const char *api_key,
                     uint64_t max_tokens, upstream_done_fn *done, void *ud);

#endif

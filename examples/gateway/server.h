/* SPDX-License-Identifier: MIT */
/*
 * The HTTP/1.1 server on a libuv loop: accepts connections (at most
 * max_connections), parses requests with http_parser, answers them in order
 * through the handler, and enforces the timeouts. One thread: the loop's.
 *
 * A connection's life: idle (waiting for a request, idle_timeout_ms), a
 * request in progress (it must arrive whole within request_timeout_ms of its
 * first byte, else 408), answered (keep-alive: idle again; else the
 * response is flushed, the write side shut down, and what the client still
 * sends is read and dropped for at most linger_ms, so a close never resets
 * the connection before the client has read the response).
 * Pipelined requests are answered in order; when a client does not read its
 * responses (more than 256 KiB queued), the server stops reading from it
 * until it does.
 */
#ifndef GATEWAY_SERVER_H
#define GATEWAY_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "handler.h"
#include "http_parser.h"

typedef struct server_config {
    struct sockaddr_storage addr;
    uint32_t max_connections;
    uint64_t idle_timeout_ms;
    uint64_t request_timeout_ms;
    uint64_t linger_ms;
    http_limits_t http;
} server_config_t;

struct conn;

typedef struct server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_timer_t drain_timer;
    server_config_t cfg;
    gateway_t *gw;
    struct conn *conns; /* open connections */
    bool draining;
    bool drain_timer_closed;
    char date[40];      /* the Date header, rendered once a second */
    int64_t date_at;
    char bound[80];     /* "HOST:PORT" actually bound (port 0 picks one) */
} server_t;

/* Bind, listen and start accepting. 0, or a libuv error with a message. */
int server_start(server_t *s, uv_loop_t *loop, const server_config_t *cfg, gateway_t *gw,
                 char *err, size_t errlen);

/* Stop accepting; close idle connections now, let the ones with a request
 * in progress finish it (then close), and close whatever is left after
 * deadline_ms. The loop ends once everything is closed. */
void server_stop(server_t *s, uint64_t deadline_ms);

#endif

/* SPDX-License-Identifier: MIT */
/* Connections: reading, parsing, answering in order, timeouts, closing. */
#include "server.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

#define CONN_READ_BUF (16 * 1024)
/* Stop reading from a client with this much of its responses unsent, and
 * start again once it has read them down to the low mark. */
#define WRITE_HIGH (256 * 1024)
#define WRITE_LOW (64 * 1024)

enum { T_NONE, T_IDLE, T_REQUEST, T_LINGER };

typedef struct conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_shutdown_t shutdown;
    server_t *srv;
    struct conn *prev, *next;
    int timer_mode;
    int open_handles; /* the conn is freed when both handles are closed */
    bool reading;
    bool paused;      /* the client is not reading its responses */
    bool closing;     /* last response sent: no more requests */
    bool closed;      /* uv_close called */
    bool peer_eof;
    bool pending;     /* a request waits for its exact rules (handler.h) */
    char ip[64];
    size_t in_pos, in_len; /* in[in_pos..in_len) is not parsed yet */
    http_parser_t parser;
    char in[CONN_READ_BUF];
} conn_t;

/* A response on its way out: freed when libuv is done with it. */
typedef struct out {
    uv_write_t req;
    conn_t *conn;
    char data[];
} out_t;

static void process(conn_t *c);

static size_t queued(conn_t *c)
{
    return uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp);
}

static const char *server_date(server_t *s)
{
    time_t now = time(NULL);
    if ((int64_t)now != s->date_at) {
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(s->date, sizeof s->date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        s->date_at = (int64_t)now;
    }
    return s->date;
}

static void maybe_drained(server_t *s)
{
    if (s->draining && s->conns == NULL && !s->drain_timer_closed) {
        s->drain_timer_closed = true;
        uv_close((uv_handle_t *)&s->drain_timer, NULL);
        handler_stop(s->gw); /* no connection left to answer */
    }
}

static void conn_free(conn_t *c)
{
    server_t *s = c->srv;
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    s->gw->metrics.connections_open--;
    free(c);
    maybe_drained(s);
}

static void on_conn_handle_closed(uv_handle_t *h)
{
    conn_t *c = h->data;
    if (--c->open_handles > 0)
        return;
    if (!c->pending) /* else its answer frees it (on_answer) */
        conn_free(c);
}

static void conn_close(conn_t *c)
{
    if (c->closed)
        return;
    c->closed = true;
    c->closing = true;
    /* pending writes are cancelled: their callbacks free them first */
    uv_close((uv_handle_t *)&c->tcp, on_conn_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_conn_handle_closed);
}

static void on_timer(uv_timer_t *t);

static void set_timer(conn_t *c, int mode, uint64_t ms)
{
    c->timer_mode = mode;
    uv_timer_start(&c->timer, on_timer, ms, 0);
}

/* Idle between requests, or a request in progress: each has its deadline,
 * kept (not restarted) while the state lasts, so trickling bytes in does
 * not keep a connection open. */
static void arm_timer(conn_t *c)
{
    int want = http_parser_started(&c->parser) ? T_REQUEST : T_IDLE;
    if (c->timer_mode != want)
        set_timer(c, want,
                  want == T_REQUEST ? c->srv->cfg.request_timeout_ms : c->srv->cfg.idle_timeout_ms);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    conn_t *c = h->data;
    (void)suggested;
    /* reading is on only once every byte read before is parsed (or while
     * lingering, when bytes are dropped), so the whole buffer is free */
    *buf = uv_buf_init(c->in, sizeof c->in);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

static void start_reading(conn_t *c)
{
    if (!c->reading && !c->closed && !c->peer_eof &&
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
        c->reading = true;
}

static void stop_reading(conn_t *c)
{
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    conn_t *c = req->data;
    /* the client has everything; if it is done sending too, close now,
     * else let the linger timer or its EOF close */
    if (status < 0 || c->peer_eof)
        conn_close(c);
}

/* After the last response: flush, shut the write side, then linger. */
static void conn_end(conn_t *c)
{
    if (c->closing)
        return;
    c->closing = true;
    c->shutdown.data = c;
    if (uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
        conn_close(c);
        return;
    }
    set_timer(c, T_LINGER, c->srv->cfg.linger_ms);
    start_reading(c); /* to drop what the client still sends */
}

static void on_write(uv_write_t *req, int status)
{
    out_t *o = (out_t *)req;
    conn_t *c = o->conn;
    free(o);
    if (status < 0) {
        conn_close(c);
        return;
    }
    if (c->paused && !c->closing && queued(c) <= WRITE_LOW) {
        c->paused = false;
        process(c);
    }
}

static void send_bytes(conn_t *c, const char *data, size_t len, int status)
{
    out_t *o = malloc(sizeof *o + len);
    if (o == NULL) {
        conn_close(c);
        return;
    }
    memcpy(o->data, data, len);
    o->conn = c;
    uv_buf_t b = uv_buf_init(o->data, (unsigned)len);
    if (uv_write(&o->req, (uv_stream_t *)&c->tcp, &b, 1, on_write) != 0) {
        free(o);
        conn_close(c);
        return;
    }
    metrics_count_response(&c->srv->gw->metrics, status);
}

static void send_reply(conn_t *c, reply_t *r)
{
    r->resp.date = server_date(c->srv);
    size_t n = response_format(&r->resp, NULL, 0);
    out_t *o = malloc(sizeof *o + n);
    if (o == NULL) {
        reply_free(r);
        conn_close(c);
        return;
    }
    response_format(&r->resp, o->data, n);
    reply_free(r);
    o->conn = c;
    uv_buf_t b = uv_buf_init(o->data, (unsigned)n);
    if (uv_write(&o->req, (uv_stream_t *)&c->tcp, &b, 1, on_write) != 0) {
        free(o);
        conn_close(c);
        return;
    }
    metrics_count_response(&c->srv->gw->metrics, r->resp.status);
    if (r->resp.close)
        conn_end(c);
}

static void on_timer(uv_timer_t *t)
{
    conn_t *c = t->data;
    if (c->timer_mode == T_LINGER || c->closing) {
        conn_close(c);
        return;
    }
    c->srv->gw->metrics.timeouts++;
    if (c->timer_mode == T_REQUEST && !c->paused) {
        reply_t r;
        handler_timeout(&r);
        send_reply(c, &r);
    } else {
        conn_close(c);
    }
}

/* Answer the parsed request; false when its answer comes later (an exact
 * rule): the connection then reads and parses nothing more until it has. */
static bool answer(conn_t *c)
{
    const http_request_t *req = &c->parser.req;
    reply_t r;
    if (handler_request(c->srv->gw, req, c->ip, &r, c) == HANDLER_PENDING) {
        c->pending = true;
        stop_reading(c);
        uv_timer_stop(&c->timer); /* the answer comes by the exact deadline */
        c->timer_mode = T_NONE;
        return false;
    }
    r.resp.close = r.resp.close || !req->keep_alive || c->srv->draining;
    send_reply(c, &r);
    return true;
}

/* handler_done_fn: a pending request's reply, on the loop. Pipelined
 * requests behind it are parsed and answered now, in order. */
static void on_answer(void *conn, reply_t *r)
{
    conn_t *c = conn;
    c->pending = false;
    if (c->closed) { /* closed meanwhile (drain deadline, write error) */
        reply_free(r);
        if (c->open_handles == 0)
            conn_free(c);
        return;
    }
    r->resp.close = r->resp.close || !c->parser.req.keep_alive || c->srv->draining;
    send_reply(c, r);
    http_parser_next(&c->parser);
    c->timer_mode = T_NONE;
    process(c);
}

/* Parse and answer what has been read, in order, until the input is used
 * up, the connection ends, or the client stops reading its responses. */
static void process(conn_t *c)
{
    while (!c->closing) {
        if (queued(c) > WRITE_HIGH) {
            c->paused = true;
            stop_reading(c);
            if (c->timer_mode == T_NONE)
                arm_timer(c);
            return;
        }
        size_t used = 0;
        http_event_t ev =
            http_parser_feed(&c->parser, c->in + c->in_pos, c->in_len - c->in_pos, &used);
        c->in_pos += used;
        if (ev == HTTP_NEED_MORE)
            break;
        if (ev == HTTP_HEAD) {
            if (c->parser.req.expect_continue) {
                static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
                send_bytes(c, cont, sizeof cont - 1, 100);
            }
        } else if (ev == HTTP_DONE) {
            if (!answer(c))
                return; /* on_answer carries on */
            http_parser_next(&c->parser);
            c->timer_mode = T_NONE; /* the next request's clock starts afresh */
        } else {
            reply_t r;
            handler_parse_error(c->srv->gw, c->parser.error, &r);
            send_reply(c, &r);
            return;
        }
    }
    if (c->closing)
        return;
    arm_timer(c);
    start_reading(c);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    conn_t *c = st->data;
    (void)buf;
    if (nread == 0)
        return;
    if (nread < 0) {
        stop_reading(c);
        if (nread != UV_EOF || c->closing) {
            conn_close(c);
            return;
        }
        /* The client is done sending; whatever it sent has been answered
         * (reading is on only when all input is parsed). A request cut
         * short by the EOF is dropped. Flush the responses, then close. */
        c->peer_eof = true;
        conn_end(c);
        return;
    }
    if (c->closing)
        return; /* lingering: dropped */
    c->in_pos = 0;
    c->in_len = (size_t)nread;
    process(c); /* parses all of it, or pauses reading */
}

static void free_handle(uv_handle_t *h)
{
    free(h);
}

/* Over max_connections: a short 503, best effort, and close. */
static void reject(server_t *s)
{
    static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n"
                               "Content-Length: 0\r\nRetry-After: 1\r\n\r\n";
    uv_tcp_t *t = malloc(sizeof *t);
    if (t == NULL)
        return;
    uv_tcp_init(s->loop, t);
    if (uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)t) == 0) {
        uv_buf_t b = uv_buf_init((char *)busy, sizeof busy - 1);
        if (uv_try_write((uv_stream_t *)t, &b, 1) > 0)
            metrics_count_response(&s->gw->metrics, 503);
    }
    s->gw->metrics.connections_rejected++;
    uv_close((uv_handle_t *)t, free_handle);
}

static void peer_address(conn_t *c)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    strcpy(c->ip, "unknown");
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) != 0)
        return;
    if (ss.ss_family == AF_INET)
        uv_ip4_name((const struct sockaddr_in *)&ss, c->ip, sizeof c->ip);
    else if (ss.ss_family == AF_INET6)
        uv_ip6_name((const struct sockaddr_in6 *)&ss, c->ip, sizeof c->ip);
}

static void on_connection(uv_stream_t *listener, int status)
{
    server_t *s = listener->data;
    if (status < 0) {
        gw_log("accept: %s", uv_strerror(status));
        return;
    }
    if (s->gw->metrics.connections_open >= s->cfg.max_connections) {
        reject(s);
        return;
    }
    conn_t *c = calloc(1, sizeof *c);
    if (c == NULL) {
        reject(s);
        return;
    }
    c->srv = s;
    uv_tcp_init(s->loop, &c->tcp);
    uv_timer_init(s->loop, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    c->open_handles = 2;
    c->next = s->conns;
    if (s->conns != NULL)
        s->conns->prev = c;
    s->conns = c;
    s->gw->metrics.connections_open++;
    s->gw->metrics.connections_total++;
    http_parser_init(&c->parser, &s->cfg.http);
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    peer_address(c);
    arm_timer(c);
    start_reading(c);
}

int server_start(server_t *s, uv_loop_t *loop, const server_config_t *cfg, gateway_t *gw,
                 char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->loop = loop;
    s->cfg = *cfg;
    s->gw = gw;
    s->date_at = -1;
    http_parser_t probe;
    if (http_parser_init(&probe, &cfg->http) != 0) {
        snprintf(err, errlen, "invalid HTTP limits");
        return UV_EINVAL;
    }
    uv_tcp_init(loop, &s->listener);
    s->listener.data = s;
    uv_timer_init(loop, &s->drain_timer);
    s->drain_timer.data = s;
    int rc = uv_tcp_bind(&s->listener, (const struct sockaddr *)&cfg->addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&s->listener, 511, on_connection);
    if (rc != 0) {
        snprintf(err, errlen, "cannot listen: %s", uv_strerror(rc));
        uv_close((uv_handle_t *)&s->listener, NULL);
        uv_close((uv_handle_t *)&s->drain_timer, NULL);
        s->drain_timer_closed = true;
        return rc;
    }
    /* Exact rules' answers come back to this loop (handler.h). */
    if ((rc = handler_init(gw, loop, gw->exact_async, on_answer)) != 0) {
        snprintf(err, errlen, "cannot start: %s", uv_strerror(rc));
        uv_close((uv_handle_t *)&s->listener, NULL);
        uv_close((uv_handle_t *)&s->drain_timer, NULL);
        s->drain_timer_closed = true;
        return rc;
    }
    struct sockaddr_storage ss;
    int len = sizeof ss;
    char host[64] = "?";
    int port = 0;
    if (uv_tcp_getsockname(&s->listener, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET) {
            uv_ip4_name((const struct sockaddr_in *)&ss, host, sizeof host);
            port = ntohs(((const struct sockaddr_in *)&ss)->sin_port);
        } else {
            uv_ip6_name((const struct sockaddr_in6 *)&ss, host, sizeof host);
            port = ntohs(((const struct sockaddr_in6 *)&ss)->sin6_port);
        }
    }
    snprintf(s->bound, sizeof s->bound, ss.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", host,
             port);
    return 0;
}

static void on_drain_timeout(uv_timer_t *t)
{
    server_t *s = t->data;
    for (conn_t *c = s->conns; c != NULL; c = c->next)
        conn_close(c);
}

void server_stop(server_t *s, uint64_t deadline_ms)
{
    if (s->draining)
        return;
    s->draining = true;
    uv_close((uv_handle_t *)&s->listener, NULL);
    for (conn_t *c = s->conns; c != NULL; c = c->next) {
        /* between requests with nothing left to send: nothing to finish */
        if (!c->closing && !http_parser_started(&c->parser) && queued(c) == 0)
            conn_close(c);
    }
    uv_timer_start(&s->drain_timer, on_drain_timeout, deadline_ms, 0);
    maybe_drained(s);
}

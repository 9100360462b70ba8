/* SPDX-License-Identifier: MIT */
/* One forwarded request: connect, write, read until close, parse. */
#include "upstream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct call {
    uv_tcp_t tcp;
    uv_connect_t connect;
    uv_write_t write;
    uv_timer_t timer;
    int open_handles;
    bool finished;
    upstream_done_fn *done;
    void *ud;
    char req[8192];
    size_t req_len;
    char ctype[128]; /* the response's Content-Type */
    char resp[UPSTREAM_RESPONSE_MAX + 1];
    size_t resp_len;
} call_t;

static void on_closed(uv_handle_t *h)
{
    call_t *c = h->data;
    if (--c->open_handles == 0)
        free(c);
}

/* "Name: value" in the head [head, end), case-insensitive name; the value
 * without surrounding blanks into out (NUL-terminated), false if absent. */
static bool find_header(const char *head, const char *end, const char *name, char *out,
                        size_t outlen)
{
    size_t n = strlen(name);
    for (const char *line = head; line < end;) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (eol == NULL)
            eol = end;
        if ((size_t)(eol - line) > n && strncasecmp(line, name, n) == 0 && line[n] == ':') {
            const char *v = line + n + 1, *ve = eol;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            size_t len = (size_t)(ve - v) < outlen - 1 ? (size_t)(ve - v) : outlen - 1;
            memcpy(out, v, len);
            out[len] = '\0';
            return true;
        }
        line = eol + 1;
    }
    return false;
}

/* The response as read, parsed: status line, X-Usage-Tokens, body. */
static void parse_response(call_t *c, upstream_result_t *res)
{
    memset(res, 0, sizeof *res);
    res->content_type = "";
    c->resp[c->resp_len] = '\0';
    int minor, status;
    if (sscanf(c->resp, "HTTP/1.%d %3d", &minor, &status) != 2 || status < 100 || status > 599)
        return;
    char *sep = strstr(c->resp, "\r\n\r\n");
    if (sep == NULL)
        return;
    char v[64];
    if (find_header(c->resp, sep, "X-Usage-Tokens", v, sizeof v)) {
        char *e;
        unsigned long long u = strtoull(v, &e, 10);
        if (v[0] >= '0' && v[0] <= '9' && *e == '\0' && u <= UINT32_MAX) {
            res->has_usage = true;
            res->usage = u;
        }
    }
    if (find_header(c->resp, sep, "Content-Type", c->ctype, sizeof c->ctype))
        res->content_type = c->ctype;
    res->status = status;
    res->body = sep + 4;
    res->body_len = c->resp_len - (size_t)(sep + 4 - c->resp);
}

static void finish(call_t *c, bool failed)
{
    if (c->finished)
        return;
    c->finished = true;
    upstream_result_t res;
    if (failed) {
        memset(&res, 0, sizeof res);
        res.content_type = "";
    } else {
        parse_response(c, &res);
    }
    c->done(c->ud, &res);
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, on_closed);
    uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void on_timeout(uv_timer_t *t) { finish(t->data, true); }

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    call_t *c = h->data;
    /* one byte past the cap tells a too-long response from a full one */
    size_t room = UPSTREAM_RESPONSE_MAX + 1 - c->resp_len;
    *buf = uv_buf_init(c->resp + c->resp_len, (unsigned)room);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    (void)buf;
    call_t *c = s->data;
    if (n > 0) {
        c->resp_len += (size_t)n;
        if (c->resp_len > UPSTREAM_RESPONSE_MAX)
            finish(c, true);
        return;
    }
    if (n == UV_EOF)
        finish(c, false);
    else if (n < 0)
        finish(c, true);
}

static void on_write(uv_write_t *w, int status)
{
    call_t *c = w->data;
    if (status != 0)
        finish(c, true);
}

static void on_connect(uv_connect_t *req, int status)
{
    call_t *c = req->data;
    if (status != 0 || c->finished) {
        finish(c, true);
        return;
    }
    uv_buf_t b = uv_buf_init(c->req, (unsigned)c->req_len);
    c->write.data = c;
    if (uv_write(&c->write, (uv_stream_t *)&c->tcp, &b, 1, on_write) != 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0)
        finish(c, true);
}

int upstream_request(upstream_t *u, const char *method, const char *target, const char *api_key,
                     uint64_t max_tokens, upstream_done_fn *done, void *ud)
{
    call_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return UV_ENOMEM;
    c->done = done;
    c->ud = ud;
    int n = snprintf(c->req, sizeof c->req, "%s %s HTTP/1.0\r\nHost: upstream\r\n", method, target);
    if (api_key[0] != '\0')
        n += snprintf(c->req + n, sizeof c->req - (size_t)n, "X-API-Key: %s\r\n", api_key);
    if (max_tokens > 0)
        n += snprintf(c->req + n, sizeof c->req - (size_t)n, "X-Max-Tokens: %llu\r\n",
                      (unsigned long long)max_tokens);
    n += snprintf(c->req + n, sizeof c->req - (size_t)n, "Connection: close\r\n\r\n");
    c->req_len = (size_t)n; /* the parts' caps keep it well inside req */
    int rc = uv_tcp_init(u->loop, &c->tcp);
    if (rc != 0) {
        free(c);
        return rc;
    }
    c->tcp.data = c;
    c->open_handles = 1;
    rc = uv_timer_init(u->loop, &c->timer);
    if (rc == 0) {
        c->open_handles++;
        c->timer.data = c;
        c->connect.data = c;
        rc = uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr *)&u->addr, on_connect);
    }
    if (rc != 0) {
        c->finished = true; /* done is not called */
        if (c->open_handles == 2)
            uv_close((uv_handle_t *)&c->timer, on_closed);
        uv_close((uv_handle_t *)&c->tcp, on_closed);
        return rc;
    }
    uv_timer_start(&c->timer, on_timeout, u->timeout_ms, 0);
    return 0;
}

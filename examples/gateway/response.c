/* SPDX-License-Identifier: MIT */
/* Status line, framing headers, the caller's headers, then the body. */
#include "response.h"

#include <stdio.h>
#include <string.h>

const char *response_reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

typedef struct out {
    char *buf;
    size_t cap, len;
} out_t;

static void add(out_t *o, const char *s, size_t n)
{
    if (o->len < o->cap) {
        size_t room = o->cap - o->len;
        memcpy(o->buf + o->len, s, n < room ? n : room);
    }
    o->len += n;
}

static void adds(out_t *o, const char *s)
{
    add(o, s, strlen(s));
}

size_t response_format(const response_t *r, char *buf, size_t cap)
{
    out_t o = {buf, cap, 0};
    char line[96];
    snprintf(line, sizeof line, "HTTP/1.1 %d %s\r\n", r->status, response_reason(r->status));
    adds(&o, line);
    if (r->date != NULL) {
        adds(&o, "Date: ");
        adds(&o, r->date);
        adds(&o, "\r\n");
    }
    if (r->close)
        adds(&o, "Connection: close\r\n");
    else if (r->version_minor == 0)
        adds(&o, "Connection: keep-alive\r\n");
    if (r->content_type != NULL) {
        adds(&o, "Content-Type: ");
        adds(&o, r->content_type);
        adds(&o, "\r\n");
    }
    snprintf(line, sizeof line, "Content-Length: %zu\r\n", r->body_len);
    adds(&o, line);
    if (r->headers != NULL)
        adds(&o, r->headers);
    adds(&o, "\r\n");
    if (!r->head_only && r->body_len > 0)
        add(&o, r->body, r->body_len);
    return o.len;
}

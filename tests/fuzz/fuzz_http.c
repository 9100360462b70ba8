/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the gateway's HTTP/1.1 request parser
 * (examples/gateway/http_parser.c), fed arbitrary bytes in arbitrary
 * chunkings.
 *
 * Input layout: one flags byte (bit 0: small limits, so the fuzzer reaches
 * every limit's edge; bit 1: also feed one byte at a time), eight bytes of
 * limits (used with bit 0), eight bytes seeding the chunk sizes, then the
 * stream. Each chunk is copied into a heap block of exactly its size, so
 * ASan flags any read past it.
 *
 * Checks: the events (head, done, error), the offsets they happen at, the
 * error and every parsed field are the same whether the stream is fed
 * whole, in random chunks, or byte by byte; every parsed length is within
 * its limit and every stored string is NUL-terminated and holds only the
 * bytes its grammar allows; a head's size is what it consumed; a body is
 * exactly Content-Length bytes; an error is sticky and has a 4xx/5xx
 * status; NEED_MORE means every byte was consumed.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http_parser.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_EVENTS 64

typedef struct event {
    http_event_t ev;
    size_t at; /* stream offset after the event */
    http_error_t error;
    uint64_t fields; /* a digest of the request at HTTP_HEAD */
} event_t;

typedef struct run {
    size_t n;
    event_t e[MAX_EVENTS];
} run_t;

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * UINT64_C(0x100000001b3);
    return h;
}

static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static int is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* A parsed head: lengths within limits, strings as the grammar allows. */
static uint64_t check_request(const http_request_t *r, const http_limits_t *l, size_t consumed)
{
    if (r->method_len < 1 || r->method_len > l->max_method || strlen(r->method) != r->method_len)
        abort();
    for (size_t i = 0; i < r->method_len; i++)
        if (!is_tchar((unsigned char)r->method[i]))
            abort();
    if (r->target_len < 1 || r->target_len > l->max_target || strlen(r->target) != r->target_len)
        abort();
    for (size_t i = 0; i < r->target_len; i++)
        if ((unsigned char)r->target[i] < 0x21 || (unsigned char)r->target[i] > 0x7e)
            abort();
    if (r->target[0] != '/' && strcmp(r->target, "*") != 0)
        abort();
    if (r->api_key_len > l->max_api_key || strlen(r->api_key) != r->api_key_len)
        abort();
    for (size_t i = 0; i < r->api_key_len; i++)
        if ((unsigned char)r->api_key[i] < 0x21 || (unsigned char)r->api_key[i] > 0x7e)
            abort();
    if (r->version_minor != 0 && r->version_minor != 1)
        abort();
    if (r->content_length > l->max_body || r->header_count > l->max_headers)
        abort();
    if (r->head_bytes > l->max_head || r->head_bytes != consumed)
        abort();
    if (r->expect_continue && (r->version_minor != 1 || r->content_length == 0))
        abort();
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    h = mix(h, r->method, r->method_len + 1);
    h = mix(h, r->target, r->target_len + 1);
    h = mix(h, r->api_key, r->api_key_len + 1);
    h = mix(h, &r->content_length, sizeof r->content_length);
    int flags[] = {r->version_minor, r->keep_alive, r->expect_continue};
    h = mix(h, flags, sizeof flags);
    h = mix(h, &r->header_count, sizeof r->header_count);
    return h;
}

/* Feed `stream` in chunks (sizes drawn from `seed`; 0: all at once, 1: one
 * byte at a time) and record what happens. */
static void feed(const http_limits_t *l, const uint8_t *stream, size_t len, int mode, uint64_t seed,
                 run_t *out)
{
    http_parser_t p;
    if (http_parser_init(&p, l) != 0)
        abort();
    out->n = 0;
    size_t off = 0, req_start = 0, head_end = 0;
    int stopped = 0;
    while (!stopped && out->n < MAX_EVENTS) {
        size_t n = len - off;
        if (mode == 1 && n > 1)
            n = 1;
        else if (mode == 2 && n > 0) {
            uint64_t r = next_u64(&seed);
            size_t want = (r & 3) == 0 ? (size_t)(r >> 8) % 4096 + 1 : (size_t)(r >> 8) % 16 + 1;
            if (want < n)
                n = want;
        }
        char *chunk = malloc(n ? n : 1);
        if (chunk == NULL)
            abort();
        memcpy(chunk, stream + off, n);
        size_t pos = 0;
        for (;;) {
            size_t used = (size_t)-1;
            http_event_t ev = http_parser_feed(&p, n ? chunk + pos : NULL, n - pos, &used);
            if (used > n - pos)
                abort();
            pos += used;
            if (ev == HTTP_NEED_MORE) {
                if (pos != n)
                    abort();
                break;
            }
            event_t *e = &out->e[out->n++];
            e->ev = ev;
            e->at = off + pos;
            e->error = p.error;
            e->fields = 0;
            if (ev == HTTP_HEAD) {
                e->fields = check_request(&p.req, l, e->at - req_start);
                head_end = e->at;
            } else if (ev == HTTP_DONE) {
                if (e->at - head_end != p.req.content_length)
                    abort();
                http_parser_next(&p);
                if (http_parser_started(&p))
                    abort();
                req_start = e->at;
            } else {
                int status = http_error_status(p.error);
                if (p.error == HTTP_ERR_NONE || status < 400 || status > 505)
                    abort();
                size_t again = 1;
                if (http_parser_feed(&p, "x", 1, &again) != HTTP_ERROR || again != 0)
                    abort();
                stopped = 1;
                break;
            }
            if (out->n == MAX_EVENTS) {
                stopped = 1;
                break;
            }
        }
        free(chunk);
        off += n;
        if (off == len)
            break;
    }
}

static void same(const run_t *a, const run_t *b)
{
    if (a->n != b->n)
        abort();
    for (size_t i = 0; i < a->n; i++)
        if (a->e[i].ev != b->e[i].ev || a->e[i].at != b->e[i].at ||
            a->e[i].error != b->e[i].error || a->e[i].fields != b->e[i].fields)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 17)
        return 0;
    uint8_t flags = data[0];
    http_limits_t l = http_limits_default();
    if (flags & 1) {
        const uint8_t *b = data + 1;
        l.max_method = (size_t)b[0] % HTTP_METHOD_CAP + 1;
        l.max_target = (size_t)b[1] % 64 + 1;
        l.max_api_key = (size_t)b[2] % 16 + 1;
        l.max_header_name = (size_t)b[3] % 32 + 1;
        l.max_header_value = (size_t)b[4] % 64 + 1;
        l.max_headers = (size_t)b[5] % 8;
        l.max_head = (size_t)b[6] * 2 + 1;
        l.max_body = b[7] == 255 ? UINT64_MAX : b[7];
    }
    uint64_t seed = 0;
    memcpy(&seed, data + 9, 8);
    const uint8_t *stream = data + 17;
    size_t len = size - 17;

    static run_t whole, chunked, bytes;
    feed(&l, stream, len, 0, 0, &whole);
    feed(&l, stream, len, 2, seed, &chunked);
    same(&whole, &chunked);
    if ((flags & 2) && len <= 8192) {
        feed(&l, stream, len, 1, 0, &bytes);
        same(&whole, &bytes);
    }
    return 0;
}

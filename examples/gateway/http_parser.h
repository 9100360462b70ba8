/* SPDX-License-Identifier: MIT */
/*
 * An incremental HTTP/1.1 request parser for the gateway: feed it bytes as
 * they arrive, in any chunking, and it reports the head, then the end of the
 * request. It parses only what the gateway needs (method, target, version,
 * Host, Content-Length, Transfer-Encoding, Connection, Expect, X-API-Key),
 * validates every other field line's syntax, and puts a limit on every
 * length. It never allocates and has no I/O: it is unit tested
 * (test_http_parser.c) and fuzzed (tests/fuzz/fuzz_http.c) on its own.
 *
 * Strict by design (a gateway that parses more leniently than the server
 * behind it is how request smuggling happens):
 * - lines end in CRLF; a bare LF or a CR without LF is an error;
 * - obsolete line folding (a field line starting with SP/HTAB) is an error;
 * - no whitespace between a field name and its colon;
 * - Transfer-Encoding is refused: with Content-Length (smuggling) or in
 *   HTTP/1.0, 400; "chunked" alone, 411 (send a Content-Length); anything
 *   else, 501. Bodies are framed by Content-Length only, capped;
 * - Content-Length must be digits, given once (a repeated or list value is
 *   400, even when the copies agree);
 * - Host must appear exactly once in HTTP/1.1, at most once in 1.0;
 * - X-API-Key, at most once, is visible ASCII without inner whitespace;
 * - Idempotency-Key likewise, at most HTTP_IDEM_KEY_CAP bytes (a UUID,
 *   quoted as the IETF draft writes it, is 38);
 * - the target is origin-form ("/path?query") or "*" (absolute-form is
 *   refused: this gateway is not a forward proxy).
 * Up to max_head bytes of empty lines before a request line are skipped
 * (RFC 9112 section 2.2).
 */
#ifndef GATEWAY_HTTP_PARSER_H
#define GATEWAY_HTTP_PARSER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Storage for the fields the parser keeps; a limit may be set lower. */
#define HTTP_METHOD_CAP 16
#define HTTP_TARGET_CAP 4096
#define HTTP_API_KEY_CAP 256
#define HTTP_IDEM_KEY_CAP 64
#define HTTP_MAX_TOKENS 1000000000u /* X-Max-Tokens' largest value */

/* Every error, its HTTP status and its message; the name is
 * the label the gateway's metrics use. */
#define HTTP_ERRNO_MAP(XX)                                                                    \
    XX(NONE, 0, "no error")                                                                  \
    XX(BAD_METHOD, 400, "invalid character in the method")                                   \
    XX(METHOD_TOO_LONG, 501, "method longer than any this server implements")                \
    XX(BAD_TARGET, 400, "invalid request target (origin-form or * only)")                    \
    XX(TARGET_TOO_LONG, 414, "request target too long")                                      \
    XX(BAD_VERSION, 400, "malformed HTTP version")                                           \
    XX(VERSION_NOT_SUPPORTED, 505, "HTTP version other than 1.0 or 1.1")                     \
    XX(BAD_LINE_END, 400, "line not ended by CRLF (bare LF or bare CR)")                     \
    XX(OBS_FOLD, 400, "obsolete line folding (field line starting with whitespace)")         \
    XX(BAD_HEADER_NAME, 400, "invalid character in a field name, or space before the colon") \
    XX(HEADER_NAME_TOO_LONG, 431, "field name too long")                                     \
    XX(BAD_HEADER_VALUE, 400, "control character in a field value")                          \
    XX(HEADER_VALUE_TOO_LONG, 431, "field value too long")                                   \
    XX(TOO_MANY_HEADERS, 431, "too many field lines")                                        \
    XX(HEAD_TOO_LARGE, 431, "request head too large")                                        \
    XX(MISSING_HOST, 400, "HTTP/1.1 request without Host")                                   \
    XX(DUPLICATE_HEADER, 400,                                                                \
       "Host, Content-Length, X-API-Key, Idempotency-Key or X-Max-Tokens given more than once")             \
    XX(BAD_CONTENT_LENGTH, 400, "Content-Length is not a single decimal number")             \
    XX(BODY_TOO_LARGE, 413, "Content-Length above the body limit")                          \
    XX(LENGTH_AND_CHUNKED, 400, "Transfer-Encoding with Content-Length (request smuggling)") \
    XX(TE_IN_HTTP10, 400, "Transfer-Encoding in an HTTP/1.0 request")                        \
    XX(CHUNKED_NOT_SUPPORTED, 411, "chunked request body: send a Content-Length")            \
    XX(TE_NOT_IMPLEMENTED, 501, "transfer coding not implemented")                           \
    XX(BAD_CONNECTION, 400, "Connection is not a list of tokens")                            \
    XX(BAD_API_KEY, 400, "X-API-Key empty or not visible ASCII")                             \
    XX(API_KEY_TOO_LONG, 431, "X-API-Key too long")                                          \
    XX(EXPECTATION_FAILED, 417, "Expect other than 100-continue")                            \
    XX(BAD_IDEM_KEY, 400, "Idempotency-Key empty or not visible ASCII")                      \
    XX(IDEM_KEY_TOO_LONG, 400, "Idempotency-Key longer than 64 bytes")                       \
    XX(BAD_MAX_TOKENS, 400, "X-Max-Tokens is not a single decimal number in 1..1000000000")

typedef enum http_error {
#define HTTP_ERRNO_ENUM_(name, status, msg) HTTP_ERR_##name,
    HTTP_ERRNO_MAP(HTTP_ERRNO_ENUM_)
#undef HTTP_ERRNO_ENUM_
    HTTP_ERR_COUNT
} http_error_t;

/* The limits; http_limits_default() gives the gateway's. */
typedef struct http_limits {
    size_t max_method;       /* 1..HTTP_METHOD_CAP bytes; longer: 501 */
    size_t max_target;       /* 1..HTTP_TARGET_CAP bytes; longer: 414 */
    size_t max_api_key;      /* 1..HTTP_API_KEY_CAP bytes; longer: 431 */
    size_t max_header_name;  /* >= 1 byte; longer: 431 */
    size_t max_header_value; /* >= 1 byte, whitespace included; longer: 431 */
    size_t max_headers;      /* field lines; more: 431 */
    size_t max_head;         /* everything up to and including the empty
                                line; more: 431 */
    uint64_t max_body;       /* Content-Length above it: 413 */
} http_limits_t;

/* What the gateway uses of a request: valid from HTTP_HEAD until the next
 * http_parser_next. Strings are NUL-terminated; their bytes never include
 * NUL, CR or LF. */
typedef struct http_request {
    char method[HTTP_METHOD_CAP + 1];
    size_t method_len;
    char target[HTTP_TARGET_CAP + 1];
    size_t target_len;
    int version_minor;         /* HTTP/1.0 or HTTP/1.1 */
    char api_key[HTTP_API_KEY_CAP + 1];
    size_t api_key_len;        /* 0: no X-API-Key */
    char idem_key[HTTP_IDEM_KEY_CAP + 1];
    size_t idem_key_len;       /* 0: no Idempotency-Key */
    uint64_t max_tokens;       /* X-Max-Tokens, 1..HTTP_MAX_TOKENS; 0: none */
    uint64_t content_length;   /* 0 without Content-Length */
    bool keep_alive;           /* from the version and Connection */
    bool expect_continue;      /* HTTP/1.1, Expect: 100-continue, a body */
    size_t header_count;
    size_t head_bytes;         /* the head's size on the wire */
} http_request_t;

typedef enum http_event {
    HTTP_NEED_MORE = 0, /* every byte given was consumed: feed more */
    HTTP_HEAD,          /* the head is complete (req is valid): feed again,
                           even with no bytes, to read the body */
    HTTP_DONE,          /* the request is complete: the bytes not consumed
                           belong to the next one (http_parser_next first) */
    HTTP_ERROR          /* p->error says why; the parser stays here */
} http_event_t;

/* Internal state; read only req, error and the functions below. */
typedef struct http_parser {
    http_limits_t limits;
    http_request_t req;
    http_error_t error;
    int state;
    size_t head_bytes;       /* bytes of this head so far */
    uint64_t body_left;
    /* the field line being read */
    char name[24];           /* lower-cased prefix, to recognise a field */
    size_t name_len;
    int field;               /* which of the recognised fields, if any */
    size_t value_len;        /* raw value bytes (whitespace included) */
    bool value_started;      /* past the leading whitespace */
    bool value_ended;        /* whitespace seen after the value's token */
    char small[16];          /* Transfer-Encoding or Expect value, lowered */
    size_t small_len;
    bool small_mismatch;     /* longer than small, or inner whitespace */
    /* across the field lines of one head */
    bool has_host, has_length, has_api_key, has_idem_key, has_max_tokens, has_te, te_chunked_only;
    bool expect_seen, expect_other;
    bool conn_close, conn_keep_alive;
    size_t version_pos;
} http_parser_t;

/* The gateway's limits (README "Limits"). */
http_limits_t http_limits_default(void);

/* Start a parser. limits NULL: the defaults. Returns 0, or -1 if a limit is
 * zero or above its storage cap. */
int http_parser_init(http_parser_t *p, const http_limits_t *limits);

/* Parse up to len bytes; *used receives how many were consumed (on an
 * error, those before the offending byte). data may be NULL when len is 0. */
http_event_t http_parser_feed(http_parser_t *p, const char *data, size_t len, size_t *used);

/* After HTTP_DONE: get ready for the next request on the connection. */
void http_parser_next(http_parser_t *p);

/* True once any byte of the current request (empty lines included) has
 * been consumed: a connection timing out then gets a 408, not a silent
 * close. */
bool http_parser_started(const http_parser_t *p);

/* The status to answer an error with (400, 411, 413, 414, 417, 431, 501,
 * 505), its message, and its name ("BAD_LINE_END"). */
int http_error_status(http_error_t e);
const char *http_error_message(http_error_t e);
const char *http_error_name(http_error_t e);

#endif

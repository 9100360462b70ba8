/* SPDX-License-Identifier: MIT */
/*
 * The request parser: a byte-at-a-time state machine over the head, then a
 * counted skip over the body. Byte at a time keeps every decision local to
 * one byte, so the result cannot depend on how the input was chunked (the
 * fuzz target checks exactly that). Grammar: RFC 9112 sections 2-6.
 */
#include "http_parser.h"

#include <string.h>

enum {
    S_START,       /* before the method; empty lines are skipped here */
    S_START_LF,    /* CR of an empty line seen */
    S_METHOD,
    S_TARGET,
    S_VERSION,
    S_LINE_LF,     /* CR after the version seen */
    S_FIELD_START, /* a field line or the empty line that ends the head */
    S_NAME,
    S_VALUE,
    S_FIELD_LF,    /* CR after a field value seen */
    S_HEAD_LF,     /* CR of the empty line seen */
    S_BODY,
    S_DONE,
    S_ERROR
};

/* The fields the parser acts on. */
enum { F_OTHER, F_HOST, F_LENGTH, F_TE, F_CONNECTION, F_EXPECT, F_API_KEY, F_IDEM_KEY, F_MAX_TOKENS };

static const struct {
    const char *name; /* lower case */
    int field;
} known_fields[] = {
    {"host", F_HOST},
    {"content-length", F_LENGTH},
    {"transfer-encoding", F_TE},
    {"connection", F_CONNECTION},
    {"expect", F_EXPECT},
    {"x-api-key", F_API_KEY},
    {"idempotency-key", F_IDEM_KEY},
    {"x-max-tokens", F_MAX_TOKENS},
};

http_limits_t http_limits_default(void)
{
    http_limits_t l = {
        .max_method = HTTP_METHOD_CAP,
        .max_target = HTTP_TARGET_CAP,
        .max_api_key = HTTP_API_KEY_CAP,
        .max_header_name = 256,
        .max_header_value = 8192,
        .max_headers = 100,
        .max_head = 16384,
        .max_body = 1024 * 1024,
    };
    return l;
}

int http_parser_init(http_parser_t *p, const http_limits_t *limits)
{
    http_limits_t l = limits != NULL ? *limits : http_limits_default();
    if (l.max_method < 1 || l.max_method > HTTP_METHOD_CAP || l.max_target < 1 ||
        l.max_target > HTTP_TARGET_CAP || l.max_api_key < 1 || l.max_api_key > HTTP_API_KEY_CAP ||
        l.max_header_name < 1 || l.max_header_value < 1 || l.max_head < 1)
        return -1;
    memset(p, 0, sizeof *p);
    p->limits = l;
    p->state = S_START;
    return 0;
}

void http_parser_next(http_parser_t *p)
{
    http_limits_t l = p->limits;
    memset(p, 0, sizeof *p);
    p->limits = l;
    p->state = S_START;
}

bool http_parser_started(const http_parser_t *p)
{
    return p->state != S_START || p->head_bytes > 0;
}

/* token characters (RFC 9110 section 5.6.2) */
static bool is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool is_ws(unsigned char c)
{
    return c == ' ' || c == '\t';
}

static bool is_vchar(unsigned char c)
{
    return c >= 0x21 && c <= 0x7e;
}

static unsigned char lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

static bool small_is(const http_parser_t *p, const char *word)
{
    size_t n = strlen(word);
    return !p->small_mismatch && p->small_len == n && memcmp(p->small, word, n) == 0;
}

/* Start of a field value: which field, and refuse a forbidden repeat. */
static http_error_t begin_value(http_parser_t *p)
{
    p->field = F_OTHER;
    if (p->name_len <= sizeof p->name) {
        for (size_t i = 0; i < sizeof known_fields / sizeof known_fields[0]; i++) {
            size_t n = strlen(known_fields[i].name);
            if (n == p->name_len && memcmp(p->name, known_fields[i].name, n) == 0)
                p->field = known_fields[i].field;
        }
    }
    bool *seen = NULL;
    switch (p->field) {
    case F_HOST: seen = &p->has_host; break;
    case F_LENGTH: seen = &p->has_length; break;
    case F_API_KEY: seen = &p->has_api_key; break;
    case F_IDEM_KEY: seen = &p->has_idem_key; break;
    case F_MAX_TOKENS: seen = &p->has_max_tokens; break;
    default: break;
    }
    if (seen != NULL) {
        if (*seen)
            return HTTP_ERR_DUPLICATE_HEADER;
        *seen = true;
    }
    p->value_len = 0;
    p->value_started = false;
    p->value_ended = false;
    p->small_len = 0;
    p->small_mismatch = false;
    return HTTP_ERR_NONE;
}

/* One token of a Connection list ended (at a comma or the line's end). */
static void connection_token(http_parser_t *p)
{
    if (small_is(p, "close"))
        p->conn_close = true;
    else if (small_is(p, "keep-alive"))
        p->conn_keep_alive = true;
    p->small_len = 0;
    p->small_mismatch = false;
    p->value_started = false;
    p->value_ended = false;
}

/* A single-token value (Transfer-Encoding, Expect), kept lower-cased in
 * `small`; anything longer or with inner whitespace just never matches. */
static void small_value_byte(http_parser_t *p, unsigned char c)
{
    if (is_ws(c)) {
        p->value_ended = p->value_started;
        return;
    }
    if (p->value_ended || p->small_len == sizeof p->small)
        p->small_mismatch = true;
    else
        p->small[p->small_len++] = (char)lower(c);
    p->value_started = true;
}

/* One byte of a field value (already checked to be a legal value byte). */
static http_error_t value_byte(http_parser_t *p, unsigned char c)
{
    http_request_t *r = &p->req;
    switch (p->field) {
    case F_LENGTH:
        if (is_ws(c)) {
            p->value_ended = p->value_started;
        } else if (c >= '0' && c <= '9' && !p->value_ended) {
            uint64_t d = (uint64_t)(c - '0');
            /* content_length * 10 + d > max_body, without overflowing */
            if (d > p->limits.max_body || r->content_length > (p->limits.max_body - d) / 10)
                return HTTP_ERR_BODY_TOO_LARGE;
            r->content_length = r->content_length * 10 + d;
            p->value_started = true;
        } else {
            return HTTP_ERR_BAD_CONTENT_LENGTH;
        }
        return HTTP_ERR_NONE;
    case F_MAX_TOKENS:
        if (is_ws(c)) {
            p->value_ended = p->value_started;
        } else if (c >= '0' && c <= '9' && !p->value_ended) {
            uint64_t d = (uint64_t)(c - '0');
            /* max_tokens * 10 + d > HTTP_MAX_TOKENS, without overflowing */
            if (r->max_tokens > (HTTP_MAX_TOKENS - d) / 10)
                return HTTP_ERR_BAD_MAX_TOKENS;
            r->max_tokens = r->max_tokens * 10 + d;
            p->value_started = true;
        } else {
            return HTTP_ERR_BAD_MAX_TOKENS;
        }
        return HTTP_ERR_NONE;
    case F_TE:
    case F_EXPECT:
        small_value_byte(p, c);
        return HTTP_ERR_NONE;
    case F_CONNECTION:
        if (c == ',') {
            connection_token(p);
        } else if (is_ws(c)) {
            p->value_ended = p->value_started;
        } else if (is_tchar(c) && !p->value_ended) {
            if (p->small_len == sizeof p->small)
                p->small_mismatch = true;
            else
                p->small[p->small_len++] = (char)lower(c);
            p->value_started = true;
        } else {
            return HTTP_ERR_BAD_CONNECTION;
        }
        return HTTP_ERR_NONE;
    case F_API_KEY:
        if (is_ws(c)) {
            p->value_ended = p->value_started;
            return HTTP_ERR_NONE;
        }
        if (!is_vchar(c) || p->value_ended)
            return HTTP_ERR_BAD_API_KEY;
        if (r->api_key_len == p->limits.max_api_key)
            return HTTP_ERR_API_KEY_TOO_LONG;
        r->api_key[r->api_key_len++] = (char)c;
        p->value_started = true;
        return HTTP_ERR_NONE;
    case F_IDEM_KEY:
        if (is_ws(c)) {
            p->value_ended = p->value_started;
            return HTTP_ERR_NONE;
        }
        if (!is_vchar(c) || p->value_ended)
            return HTTP_ERR_BAD_IDEM_KEY;
        if (r->idem_key_len == HTTP_IDEM_KEY_CAP)
            return HTTP_ERR_IDEM_KEY_TOO_LONG;
        r->idem_key[r->idem_key_len++] = (char)c;
        p->value_started = true;
        return HTTP_ERR_NONE;
    default:
        return HTTP_ERR_NONE;
    }
}

/* A field line is complete. */
static http_error_t end_value(http_parser_t *p)
{
    switch (p->field) {
    case F_LENGTH:
        return p->value_started ? HTTP_ERR_NONE : HTTP_ERR_BAD_CONTENT_LENGTH;
    case F_API_KEY:
        return p->value_started ? HTTP_ERR_NONE : HTTP_ERR_BAD_API_KEY;
    case F_IDEM_KEY:
        return p->value_started ? HTTP_ERR_NONE : HTTP_ERR_BAD_IDEM_KEY;
    case F_MAX_TOKENS:
        return p->value_started && p->req.max_tokens > 0 ? HTTP_ERR_NONE : HTTP_ERR_BAD_MAX_TOKENS;
    case F_TE:
        /* a second Transfer-Encoding line makes a list: not "chunked" alone */
        p->te_chunked_only = !p->has_te && small_is(p, "chunked");
        p->has_te = true;
        return HTTP_ERR_NONE;
    case F_EXPECT:
        p->expect_seen = true;
        if (!small_is(p, "100-continue"))
            p->expect_other = true;
        return HTTP_ERR_NONE;
    case F_CONNECTION:
        connection_token(p);
        return HTTP_ERR_NONE;
    default:
        return HTTP_ERR_NONE;
    }
}

/* The empty line: decide what the head means as a whole. */
static http_error_t end_head(http_parser_t *p)
{
    http_request_t *r = &p->req;
    bool v11 = r->version_minor == 1;
    if (v11 && !p->has_host)
        return HTTP_ERR_MISSING_HOST;
    if (p->has_te) {
        if (p->has_length)
            return HTTP_ERR_LENGTH_AND_CHUNKED;
        if (!v11)
            return HTTP_ERR_TE_IN_HTTP10;
        return p->te_chunked_only ? HTTP_ERR_CHUNKED_NOT_SUPPORTED : HTTP_ERR_TE_NOT_IMPLEMENTED;
    }
    /* HTTP/1.0 servers must ignore Expect (RFC 9110 section 10.1.1). */
    if (v11 && p->expect_other)
        return HTTP_ERR_EXPECTATION_FAILED;
    r->keep_alive = v11 ? !p->conn_close : (p->conn_keep_alive && !p->conn_close);
    r->expect_continue = v11 && p->expect_seen && r->content_length > 0;
    r->head_bytes = p->head_bytes;
    r->method[r->method_len] = '\0';
    r->target[r->target_len] = '\0';
    r->api_key[r->api_key_len] = '\0';
    r->idem_key[r->idem_key_len] = '\0';
    p->body_left = r->content_length;
    return HTTP_ERR_NONE;
}

/* The request target is complete (at its SP). */
static http_error_t end_target(const http_request_t *r)
{
    if (r->target_len == 0)
        return HTTP_ERR_BAD_TARGET;
    if (r->target[0] == '*')
        return r->target_len == 1 ? HTTP_ERR_NONE : HTTP_ERR_BAD_TARGET;
    return r->target[0] == '/' ? HTTP_ERR_NONE : HTTP_ERR_BAD_TARGET;
}

/* "HTTP/x.y", one byte at a time; then the CR. */
static http_error_t version_byte(http_parser_t *p, unsigned char c)
{
    static const char prefix[] = "HTTP/";
    size_t pos = p->version_pos++;
    if (pos < 5)
        return c == (unsigned char)prefix[pos] ? HTTP_ERR_NONE : HTTP_ERR_BAD_VERSION;
    if (pos == 5)
        return c == '1' ? HTTP_ERR_NONE
                        : (c >= '0' && c <= '9' ? HTTP_ERR_VERSION_NOT_SUPPORTED : HTTP_ERR_BAD_VERSION);
    if (pos == 6)
        return c == '.' ? HTTP_ERR_NONE : HTTP_ERR_BAD_VERSION;
    if (pos == 7) {
        if (c < '0' || c > '9')
            return HTTP_ERR_BAD_VERSION;
        if (c > '1')
            return HTTP_ERR_VERSION_NOT_SUPPORTED;
        p->req.version_minor = c - '0';
        return HTTP_ERR_NONE;
    }
    if (c == '\r') {
        p->state = S_LINE_LF;
        return HTTP_ERR_NONE;
    }
    return c == '\n' ? HTTP_ERR_BAD_LINE_END : HTTP_ERR_BAD_VERSION;
}

/* One byte of a field name, or its colon. */
static http_error_t name_byte(http_parser_t *p, unsigned char c)
{
    if (c == ':') {
        p->state = S_VALUE;
        return begin_value(p);
    }
    if (!is_tchar(c))
        return HTTP_ERR_BAD_HEADER_NAME;
    if (p->name_len == p->limits.max_header_name)
        return HTTP_ERR_HEADER_NAME_TOO_LONG;
    if (p->name_len < sizeof p->name)
        p->name[p->name_len] = (char)lower(c);
    p->name_len++;
    return HTTP_ERR_NONE;
}

/* One byte of the head. */
static http_error_t head_byte(http_parser_t *p, unsigned char c)
{
    http_request_t *r = &p->req;
    switch (p->state) {
    case S_START:
        if (c == '\r') {
            p->state = S_START_LF;
            return HTTP_ERR_NONE;
        }
        if (c == '\n')
            return HTTP_ERR_BAD_LINE_END;
        if (!is_tchar(c))
            return HTTP_ERR_BAD_METHOD;
        p->state = S_METHOD;
        r->method[r->method_len++] = (char)c;
        return HTTP_ERR_NONE;
    case S_START_LF:
        if (c != '\n')
            return HTTP_ERR_BAD_LINE_END;
        p->state = S_START;
        return HTTP_ERR_NONE;
    case S_METHOD:
        if (c == ' ') {
            p->state = S_TARGET;
            return HTTP_ERR_NONE;
        }
        if (!is_tchar(c))
            return HTTP_ERR_BAD_METHOD;
        if (r->method_len == p->limits.max_method)
            return HTTP_ERR_METHOD_TOO_LONG;
        r->method[r->method_len++] = (char)c;
        return HTTP_ERR_NONE;
    case S_TARGET:
        if (c == ' ') {
            p->state = S_VERSION;
            return end_target(r);
        }
        if (!is_vchar(c))
            return HTTP_ERR_BAD_TARGET;
        if (r->target_len == p->limits.max_target)
            return HTTP_ERR_TARGET_TOO_LONG;
        r->target[r->target_len++] = (char)c;
        return HTTP_ERR_NONE;
    case S_VERSION:
        return version_byte(p, c);
    case S_LINE_LF:
    case S_FIELD_LF:
        if (c != '\n')
            return HTTP_ERR_BAD_LINE_END;
        if (p->state == S_FIELD_LF) {
            http_error_t e = end_value(p);
            if (e != HTTP_ERR_NONE)
                return e;
        }
        p->state = S_FIELD_START;
        return HTTP_ERR_NONE;
    case S_FIELD_START:
        if (c == '\r') {
            p->state = S_HEAD_LF;
            return HTTP_ERR_NONE;
        }
        if (c == '\n')
            return HTTP_ERR_BAD_LINE_END;
        if (is_ws(c))
            return HTTP_ERR_OBS_FOLD;
        if (!is_tchar(c))
            return HTTP_ERR_BAD_HEADER_NAME;
        if (r->header_count == p->limits.max_headers)
            return HTTP_ERR_TOO_MANY_HEADERS;
        r->header_count++;
        p->name_len = 0;
        p->state = S_NAME;
        return name_byte(p, c);
    case S_NAME:
        return name_byte(p, c);
    case S_VALUE:
        if (c == '\r') {
            p->state = S_FIELD_LF;
            return HTTP_ERR_NONE;
        }
        /* field-content: HTAB, SP, VCHAR, obs-text; no other control */
        if (!(is_ws(c) || is_vchar(c) || c >= 0x80))
            return c == '\n' ? HTTP_ERR_BAD_LINE_END : HTTP_ERR_BAD_HEADER_VALUE;
        if (p->value_len == p->limits.max_header_value)
            return HTTP_ERR_HEADER_VALUE_TOO_LONG;
        p->value_len++;
        return value_byte(p, c);
    case S_HEAD_LF:
        if (c != '\n')
            return HTTP_ERR_BAD_LINE_END;
        p->state = S_BODY;
        return end_head(p);
    default:
        return HTTP_ERR_NONE;
    }
}

static http_event_t fail(http_parser_t *p, http_error_t e)
{
    p->error = e;
    p->state = S_ERROR;
    return HTTP_ERROR;
}

http_event_t http_parser_feed(http_parser_t *p, const char *data, size_t len, size_t *used)
{
    *used = 0;
    if (p->state == S_ERROR)
        return HTTP_ERROR;
    if (p->state == S_DONE)
        return HTTP_DONE;
    if (p->state == S_BODY) {
        size_t n = p->body_left < len ? (size_t)p->body_left : len;
        p->body_left -= n;
        *used = n;
        if (p->body_left > 0)
            return HTTP_NEED_MORE;
        p->state = S_DONE;
        return HTTP_DONE;
    }
    for (size_t i = 0; i < len; i++) {
        if (p->head_bytes == p->limits.max_head)
            return fail(p, HTTP_ERR_HEAD_TOO_LARGE);
        p->head_bytes++;
        http_error_t e = head_byte(p, (unsigned char)data[i]);
        if (e != HTTP_ERR_NONE)
            return fail(p, e);
        *used = i + 1;
        if (p->state == S_BODY)
            return HTTP_HEAD;
    }
    return HTTP_NEED_MORE;
}

int http_error_status(http_error_t e)
{
    switch (e) {
#define HTTP_STATUS_(name, status, msg) \
    case HTTP_ERR_##name:               \
        return status;
        HTTP_ERRNO_MAP(HTTP_STATUS_)
#undef HTTP_STATUS_
    default:
        return 500;
    }
}

const char *http_error_message(http_error_t e)
{
    switch (e) {
#define HTTP_MSG_(name, status, msg) \
    case HTTP_ERR_##name:            \
        return msg;
        HTTP_ERRNO_MAP(HTTP_MSG_)
#undef HTTP_MSG_
    default:
        return "unknown error";
    }
}

const char *http_error_name(http_error_t e)
{
    switch (e) {
#define HTTP_NAME_(name, status, msg) \
    case HTTP_ERR_##name:             \
        return #name;
        HTTP_ERRNO_MAP(HTTP_NAME_)
#undef HTTP_NAME_
    default:
        return "UNKNOWN";
    }
}

/* SPDX-License-Identifier: MIT */
/* HTTP/1.1 responses as bytes: pure formatting, no I/O. */
#ifndef GATEWAY_RESPONSE_H
#define GATEWAY_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct response {
    int status;
    int version_minor;        /* the request's: 1.0 keep-alive must be said */
    bool close;               /* the connection ends after this response */
    bool head_only;           /* answer to HEAD: the headers of a GET, no body */
    const char *date;         /* IMF-fixdate, or NULL */
    const char *content_type; /* NULL with no body */
    const char *headers;      /* extra CRLF-terminated field lines, or NULL */
    const char *body;
    size_t body_len;
} response_t;

/* The reason phrase for a status ("Too Many Requests"). */
const char *response_reason(int status);

/* Format into buf, snprintf-style but binary: writes at most cap bytes
 * (no NUL) and returns the full length. buf may be NULL when cap is 0. */
size_t response_format(const response_t *r, char *buf, size_t cap);

#endif

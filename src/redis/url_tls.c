/* SPDX-License-Identifier: MIT */
/* A rediss URL's query: the TLS files and the server name (url.h). Pure. */
#include <stddef.h>
#include <string.h>
#include "ratelimit.h"
#include "redis/url.h"
#include "base/errors.h"

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* [s, s+n) percent-decoded into dst[cap]: 1, 0 (too long) or -1 (a bad
 * escape: a path is written exactly, so '%' must start one). */
static int decode(char *dst, size_t cap, const char *s, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            int hi = i + 2 < n ? hex_digit(s[i + 1]) : -1;
            int lo = hi >= 0 ? hex_digit(s[i + 2]) : -1;
            if (lo < 0 || (hi == 0 && lo == 0))
                return -1;
            c = (char)(hi * 16 + lo);
            i += 2;
        }
        if (w + 1 >= cap)
            return 0;
        dst[w++] = c;
    }
    dst[w] = '\0';
    return 1;
}

typedef struct param {
    const char *name;
    size_t off; /* of its buffer in rl_redistls_t */
    size_t cap;
} param_t;

#define P(n, f) {n, offsetof(rl_redistls_t, f), sizeof(((rl_redistls_t *)0)->f)}
static const param_t params[] = {
    P("tls_ca_file", ca_file), P("tls_ca_dir", ca_dir),          P("tls_cert", cert),
    P("tls_key", key),         P("tls_server_name", server_name),
};
#undef P

static int one_param(const char *s, size_t n, rl_redistls_t *out, char *err, size_t errlen)
{
    const char *eq = memchr(s, '=', n);
    size_t klen = eq != NULL ? (size_t)(eq - s) : n;
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        if (strlen(params[i].name) != klen || memcmp(s, params[i].name, klen) != 0)
            continue;
        char *dst = (char *)out + params[i].off;
        if (dst[0] != '\0')
            return rl__errf(err, errlen, RL_ERANGE, "redis_url: %s given twice",
                            params[i].name);
        size_t vlen = eq != NULL ? n - klen - 1 : 0;
        if (vlen == 0)
            return rl__errf(err, errlen, RL_ERANGE, "redis_url: %s: empty (write %s=VALUE)",
                            params[i].name, params[i].name);
        int rc = decode(dst, params[i].cap, eq + 1, vlen);
        if (rc <= 0)
            return rl__errf(err, errlen, RL_ERANGE, "redis_url: %s: %s", params[i].name,
                            rc == 0 ? "too long"
                                    : "a '%' not followed by two hex digits, or %00");
        return 0;
    }
    return rl__errf(err, errlen, RL_ERANGE,
                    "redis_url: query parameter \"%.*s\" unknown (a rediss:// URL takes "
                    "tls_ca_file, tls_ca_dir, tls_cert, tls_key and tls_server_name)",
                    (int)(klen < 40 ? klen : 40), s);
}

/* A server name as a certificate holds it: a DNS name or an IP address. */
static int name_ok(const char *s)
{
    for (; *s != '\0'; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '.' || *s == '-' || *s == '_' || *s == ':'))
            return 0;
    return 1;
}

int rl__redisurl_tls_query(const char *q, rl_redistls_t *out, char *err, size_t errlen)
{
    while (*q != '\0') {
        size_t n = strcspn(q, "&");
        if (n == 0)
            return rl__errf(err, errlen, RL_ERANGE, "redis_url: query: an empty parameter "
                            "(\"&&\", or '&' at an end)");
        int rc = one_param(q, n, out, err, errlen);
        if (rc != 0)
            return rc;
        q += n;
        if (*q == '&' && *++q == '\0')
            return rl__errf(err, errlen, RL_ERANGE, "redis_url: query: ends with '&'");
    }
    if ((out->cert[0] != '\0') != (out->key[0] != '\0'))
        return rl__errf(err, errlen, RL_ERANGE,
                        "redis_url: tls_cert and tls_key go together (a client certificate "
                        "and its private key): %s is missing",
                        out->cert[0] != '\0' ? "tls_key" : "tls_cert");
    if (!name_ok(out->server_name))
        return rl__errf(err, errlen, RL_ERANGE,
                        "redis_url: tls_server_name: a DNS name or an IP address (letters, "
                        "digits, '.', '-', '_', ':')");
    return 0;
}

/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <string.h>
#include "ratelimit.h"
#include "redis/url.h"
#include "base/errors.h"

/* Copy [s, s+n) into a bounded buffer; 0 when it does not fit. */
static int copy_part(char *dst, size_t cap, const char *s, size_t n)
{
    if (n >= cap)
        return 0;
    memcpy(dst, s, n);
    dst[n] = '\0';
    return 1;
}

static int parse_uint(const char *s, size_t n, long max, long *out)
{
    long v = 0;
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (s[i] - '0');
        if (v > max)
            return 0;
    }
    *out = v;
    return 1;
}

static int name_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '-' || c == '_';
}

static int hex_val(char c)
{
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* A user or password of [s, s+n) with RFC 3986 percent-escapes decoded: the
 * form secret stores and other clients write. A '%' not followed by two hex
 * digits stays itself, so a raw password keeps working where it cannot be
 * read as an escape. 1, 0 (too long) or -1 (an escape decodes to NUL). */
static int copy_userinfo(char *dst, size_t cap, const char *s, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        int hi = s[i] == '%' && i + 2 < n ? hex_val(s[i + 1]) : -1;
        int lo = hi >= 0 ? hex_val(s[i + 2]) : -1;
        char c = s[i];
        if (lo >= 0) {
            c = (char)(hi * 16 + lo);
            i += 2;
            if (c == '\0')
                return -1;
        }
        if (w + 1 >= cap)
            return 0;
        dst[w++] = c;
    }
    dst[w] = '\0';
    return 1;
}

static const struct {
    const char *scheme;
    int kind;
} schemes[] = {
    {"redis://", RL_REDISURL_TCP},
    {"redis+unix://", RL_REDISURL_UNIX},
    {"unix://", RL_REDISURL_UNIX},
    {"unix:", RL_REDISURL_UNIX}, /* unix:/path, as other clients write it */
    {"redis+cluster://", RL_REDISURL_CLUSTER},
    {"redis+sentinel://", RL_REDISURL_SENTINEL},
};

/* Anything from a '?' on, outside redis+unix://: named as the query. */
static int query_refused(const char *q, char *err, size_t errlen)
{
    return rl__errf(err, errlen, RL_ERANGE,
                    "redis_url: query \"%.40s\" is not understood (write the db as /N after "
                    "the host; only a unix socket's URL takes ?db=N, and a rediss:// URL "
                    "its tls_ settings)",
                    q);
}

/* A bracketed IPv6 literal at s ("[::1]" or "[::1]:port", n bytes): its
 * address into a->host; *rest is what follows the ']'. */
static int parse_ipv6(const char *s, size_t n, size_t i, rl_redisaddr_t *a, const char **rest,
                      char *err, size_t errlen)
{
    const char *close = memchr(s, ']', n);
    if (close == NULL)
        return rl__errf(err, errlen, RL_ERANGE, "redis_url: host %zu: '[' without its ']' "
                        "(an IPv6 address is written [::1]:6379)", i);
    size_t hlen = (size_t)(close - s) - 1;
    if (hlen == 0)
        return rl__errf(err, errlen, RL_ERANGE, "redis_url: host %zu: empty [] (an IPv6 "
                        "address goes inside)", i);
    if (!copy_part(a->host, sizeof a->host, s + 1, hlen))
        return rl__errf(err, errlen, RL_ERANGE, "redis_url: host %zu: too long", i);
    for (size_t j = 0; j < hlen; j++)
        if (hex_val(s[1 + j]) < 0 && s[1 + j] != ':' && s[1 + j] != '.')
            return rl__errf(err, errlen, RL_ERANGE,
                            "redis_url: host %zu: byte %zu of the IPv6 address is 0x%02x (hex "
                            "digits, ':' and '.')",
                            i, j, (unsigned)(unsigned char)s[1 + j]);
    *rest = close + 1;
    if (*rest < s + n && **rest != ':')
        return rl__errf(err, errlen, RL_ERANGE, "redis_url: host %zu: after ']' only :port "
                        "may follow", i);
    return 0;
}

static int unknown_scheme(const char *url, char *err, size_t errlen)
{
    size_t n = strcspn(url, ":/@");
    if (strncmp(url + n, "://", 3) != 0)
        return rl__errf(err, errlen, RL_ERANGE,
                        "redis_url: no scheme: write redis://host[:port][/db]");
    return rl__errf(err, errlen, RL_ERANGE,
                    "redis_url: must start with redis://, redis+unix:// (or unix://), "
                    "redis+cluster://, redis+sentinel:// or their rediss forms (TLS) "
                    "(scheme \"%.*s\" unknown)",
                    (int)(n < 32 ? n : 32), url);
}

/* One host[:port] of [s, s+n): the i-th of the list (from 1, for messages). */
static int parse_addr(const char *s, size_t n, size_t i, rl_redisaddr_t *a, char *err,
                      size_t errlen)
{
    const char *colon = NULL;
    size_t hlen;
    if (n > 0 && s[0] == '[') {
        int rc = parse_ipv6(s, n, i, a, &colon, err, errlen);
        if (rc != 0)
            return rc;
        hlen = (size_t)(colon - s);
        colon = colon < s + n ? colon : NULL;
    } else {
        colon = memchr(s, ':', n);
        hlen = colon ? (size_t)(colon - s) : n;
        if (hlen == 0)
            return rl__errf(err, errlen, RL_ERANGE, "redis_url: host %zu: missing", i);
        if (!copy_part(a->host, sizeof a->host, s, hlen))
            return rl__errf(err, errlen, RL_ERANGE, "redis_url: host %zu: too long", i);
        for (size_t j = 0; j < hlen; j++)
            if (!name_byte((unsigned char)s[j]))
                return rl__errf(err, errlen, RL_ERANGE,
                                "redis_url: host byte %zu is 0x%02x (host %zu of the list; a "
                                "host name or IPv4 address is letters, digits, '.', '-', '_'; "
                                "an IPv6 address is bracketed, [::1])",
                                j, (unsigned)(unsigned char)s[j], i);
    }
    a->port = 6379;
    if (colon != NULL) {
        long v;
        if (!parse_uint(colon + 1, n - hlen - 1, 65535, &v) || v == 0)
            return rl__errf(err, errlen, RL_ERANGE, "redis_url: port must be 1..65535 (host %zu "
                            "of the list)", i);
        a->port = (int)v;
    }
    return 0;
}

/* The host list up to '/' or the end; *p moves past it. */
static int parse_hosts(const char **p, rl_redisurl_t *out, char *err, size_t errlen)
{
    const char *s = *p;
    size_t len = strcspn(s, "/?");
    if (len == 0)
        return rl__errf(err, errlen, RL_ERANGE, "redis_url: host list: empty");
    const char *end = s + len;
    out->nhosts = 0;
    while (s <= end) {
        size_t n = strcspn(s, ",/");
        if (s + n > end)
            n = (size_t)(end - s);
        if (out->nhosts == RL_REDISURL_HOSTS_MAX)
            return rl__errf(err, errlen, RL_ERANGE, "redis_url: host list: more than %d hosts",
                            RL_REDISURL_HOSTS_MAX);
        int rc = parse_addr(s, n, (size_t)out->nhosts + 1, &out->hosts[out->nhosts], err,
                            errlen);
        if (rc != 0)
            return rc;
        out->nhosts++;
        s += n + 1;
    }
    memcpy(out->host, out->hosts[0].host, sizeof out->host);
    out->port = out->hosts[0].port;
    *p = end;
    return 0;
}

static int parse_db(const char *s, rl_redisurl_t *out, char *err, size_t errlen)
{
    long v;
    size_t n = strcspn(s, "?");
    if (s[n] == '?' && out->kind != RL_REDISURL_UNIX)
        return query_refused(s + n, err, errlen);
    if (*s == '\0')
        return 0;
    if (!parse_uint(s, strlen(s), 1000000, &v))
        return rl__errf(err, errlen, RL_ERANGE, "redis_url: db must be a number");
    out->db = (int)v;
    return 0;
}

static int parse_unix(const char *p, rl_redisurl_t *out, char *err, size_t errlen)
{
    if (*p != '/')
        return rl__errf(err, errlen, RL_ERANGE,
                        "redis_url: socket path: must be absolute (redis+unix:///path/to/sock)");
    size_t n = strcspn(p, "?");
    if (!copy_part(out->path, sizeof out->path, p, n))
        return rl__errf(err, errlen, RL_ERANGE, "redis_url: socket path: longer than %zu bytes",
                        sizeof out->path - 1);
    p += n;
    if (*p == '\0')
        return 0;
    if (strncmp(p, "?db=", 4) != 0)
        return rl__errf(err, errlen, RL_ERANGE,
                        "redis_url: after the socket path only ?db=N is understood");
    if (p[4] == '\0')
        return rl__errf(err, errlen, RL_ERANGE, "redis_url: db must be a number");
    return parse_db(p + 4, out, err, errlen);
}

static int parse_sentinel_tail(const char *p, rl_redisurl_t *out, char *err, size_t errlen)
{
    if (*p != '/' || p[1] == '\0' || p[1] == '/')
        return rl__errf(err, errlen, RL_ERANGE,
                        "redis_url: master name: missing (redis+sentinel://host:port/NAME)");
    p++;
    size_t n = strcspn(p, "/");
    if (!copy_part(out->master, sizeof out->master, p, n))
        return rl__errf(err, errlen, RL_ERANGE, "redis_url: master name: longer than %zu bytes",
                        sizeof out->master - 1);
    for (size_t i = 0; i < n; i++)
        if (!name_byte((unsigned char)p[i]))
            return rl__errf(err, errlen, RL_ERANGE,
                            "redis_url: master name: byte %zu is 0x%02x (letters, digits, '.', "
                            "'-', '_')",
                            i, (unsigned)(unsigned char)p[i]);
    p += n;
    return *p == '/' ? parse_db(p + 1, out, err, errlen) : 0;
}

static int parse_plain(const char *url, rl_redisurl_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->port = 6379;
    if (url == NULL)
        return rl__errf(err, errlen, RL_ERANGE, "redis_url: NULL");
    /* Bytes that could end a line of a log, a registry record or a
     * protocol line never belong in a URL (percent-escapes are decoded in
     * the user and password only, where secret stores write them). */
    for (size_t i = 0; url[i] != '\0'; i++)
        if ((unsigned char)url[i] <= 0x20 || url[i] == 0x7f)
            return rl__errf(err, errlen, RL_ERANGE,
                            "redis_url: byte %zu is 0x%02x (a control byte or space)", i,
                            (unsigned)(unsigned char)url[i]);
    const char *p = NULL;
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
        size_t n = strlen(schemes[i].scheme);
        if (strncmp(url, schemes[i].scheme, n) == 0) {
            p = url + n;
            out->kind = schemes[i].kind;
            break;
        }
    }
    if (p == NULL)
        return unknown_scheme(url, err, errlen);
    /* The credentials end at the last '@' (a password may hold one). */
    const char *at = strrchr(p, '@');
    if (at != NULL) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        const char *pw = colon ? colon + 1 : p;
        size_t ulen = colon ? (size_t)(colon - p) : 0;
        int uok = copy_userinfo(out->user, sizeof out->user, p, ulen);
        int pok = copy_userinfo(out->password, sizeof out->password, pw, (size_t)(at - pw));
        if (uok <= 0 || pok <= 0)
            return rl__errf(err, errlen, RL_ERANGE, "redis_url: %s: %s",
                            uok <= 0 ? "user" : "password",
                            (uok <= 0 ? uok : pok) == 0 ? "too long"
                                                        : "%00 (a NUL byte) is not allowed");
        p = at + 1;
    }
    if (out->kind == RL_REDISURL_UNIX)
        return parse_unix(p, out, err, errlen);
    if (out->kind == RL_REDISURL_TCP) {
        /* One server: the classic form, its messages unchanged. */
        size_t n = strcspn(p, "/");
        if (n == 0)
            return rl__errf(err, errlen, RL_ERANGE, "redis_url: missing or too long host");
        if (memchr(p, ',', n) != NULL)
            return rl__errf(err, errlen, RL_ERANGE,
                            "redis_url: host list: redis:// names one server (several are "
                            "redis+cluster:// seeds or redis+sentinel:// Sentinels)");
    }
    int rc = parse_hosts(&p, out, err, errlen);
    if (rc != 0)
        return rc;
    if (*p == '?')
        return query_refused(p, err, errlen);
    if (out->kind == RL_REDISURL_SENTINEL)
        return parse_sentinel_tail(p, out, err, errlen);
    if (*p == '/' && (rc = parse_db(p + 1, out, err, errlen)) != 0)
        return rc;
    if (out->kind == RL_REDISURL_CLUSTER && out->db != 0)
        return rl__errf(err, errlen, RL_ERANGE, "redis_url: db: a Redis Cluster has db 0 only");
    return 0;
}

/* A rediss URL: the redis URL it is over TLS, then its query. */
static int parse_tls(const char *url, rl_redisurl_t *out, char *err, size_t errlen)
{
    if (strncmp(url, "rediss+unix://", 14) == 0)
        return rl__errf(err, errlen, RL_ERANGE,
                        "redis_url: rediss+unix://: TLS over a unix socket is not supported "
                        "(a local socket needs none: use redis+unix://)");
#ifndef RL_HAVE_TLS
    (void)out;
    return rl__errf(err, errlen, RL_ERANGE,
                    "redis_url: rediss:// (TLS): this build has no TLS (built on hiredis 0.14; "
                    "build with -DRL_TLS=ON on hiredict, or use redis:// through a TLS tunnel, "
                    "docs/deployment.md)");
#else
    /* The query starts after the credentials, which end at the last '@'. */
    const char *at = strrchr(url, '@');
    const char *q = strchr(at != NULL ? at : url, '?');
    size_t n = q != NULL ? (size_t)(q - url) : strlen(url);
    char plain[4096];
    if (n - 1 >= sizeof plain)
        return rl__errf(err, errlen, RL_ERANGE, "redis_url: longer than %zu bytes before its "
                        "query", sizeof plain);
    memcpy(plain, url, 5); /* "rediss..." less its 's' */
    memcpy(plain + 5, url + 6, n - 6);
    plain[n - 1] = '\0';
    int rc = parse_plain(plain, out, err, errlen);
    if (rc != 0)
        return rc;
    if (out->kind == RL_REDISURL_UNIX)
        return rl__errf(err, errlen, RL_ERANGE,
                        "redis_url: TLS over a unix socket is not supported");
    out->tls.on = 1;
    return q != NULL ? rl__redisurl_tls_query(q + 1, &out->tls, err, errlen) : 0;
#endif
}

int rl__redisurl_parse(const char *url, rl_redisurl_t *out, char *err, size_t errlen)
{
    if (url != NULL && strncmp(url, "rediss", 6) == 0 && (url[6] == '+' || url[6] == ':')) {
        memset(out, 0, sizeof *out);
        return parse_tls(url, out, err, errlen);
    }
    return parse_plain(url, out, err, errlen);
}

void rl__redisurl_where(const rl_redisurl_t *u, char *buf, size_t cap)
{
    if (u->kind == RL_REDISURL_UNIX) {
        snprintf(buf, cap, "unix:%s", u->path);
        return;
    }
    const char *what = u->kind == RL_REDISURL_CLUSTER    ? "cluster "
                       : u->kind == RL_REDISURL_SENTINEL ? "sentinel "
                                                         : "";
    int w = snprintf(buf, cap, "%s%s", u->tls.on ? "tls " : "", what);
    for (int i = 0; i < u->nhosts && w >= 0 && (size_t)w < cap; i++) {
        int v6 = strchr(u->hosts[i].host, ':') != NULL; /* bracketed, as written */
        w += snprintf(buf + w, cap - (size_t)w, "%s%s%s%s:%d", i ? "," : "", v6 ? "[" : "",
                      u->hosts[i].host, v6 ? "]" : "", u->hosts[i].port);
    }
    if (u->kind == RL_REDISURL_SENTINEL && w >= 0 && (size_t)w < cap)
        snprintf(buf + w, cap - (size_t)w, "/%s", u->master);
}

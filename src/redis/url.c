/* SPDX-License-Identifier: MIT */
#include <string.h>
#include "ratelimit.h"
#include "redis/url.h"
#include "errbuf.h"

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

int rl__redisurl_parse(const char *url, rl_redisurl_t *out, char *err, size_t errlen)
{
    static const char scheme[] = "redis://";
    memset(out, 0, sizeof *out);
    out->port = 6379;
    if (url == NULL)
        return rl__errf(err, errlen, RL_ERANGE, "redis_url: NULL");
    /* Bytes that could end a line of a log, a registry record or a
     * protocol line never belong in a URL (percent-encoding is not decoded
     * either: nothing here needs it). */
    for (size_t i = 0; url[i] != '\0'; i++)
        if ((unsigned char)url[i] <= 0x20 || url[i] == 0x7f)
            return rl__errf(err, errlen, RL_ERANGE,
                            "redis_url: byte %zu is 0x%02x (a control byte or space)", i,
                            (unsigned)(unsigned char)url[i]);
    if (strncmp(url, scheme, sizeof scheme - 1) != 0) {
        size_t n = strcspn(url, ":/@");
        if (strncmp(url + n, "://", 3) != 0)
            return rl__errf(err, errlen, RL_ERANGE,
                            "redis_url: no scheme: write redis://host[:port][/db]");
        if (n == 6 && strncmp(url, "rediss", 6) == 0)
            return rl__errf(err, errlen, RL_ERANGE,
                            "redis_url: rediss:// (TLS) is not supported by this build: use "
                            "redis:// (through a TLS tunnel if the network needs one)");
        if (strstr(url, "unix") != NULL && strstr(url, "unix") < url + n)
            return rl__errf(err, errlen, RL_ERANGE,
                            "redis_url: unix sockets (%.*s://) are not supported by this build: "
                            "use redis://host:port",
                            (int)(n < 32 ? n : 32), url);
        return rl__errf(err, errlen, RL_ERANGE,
                        "redis_url: must start with redis:// (scheme \"%.*s\" unknown)",
                        (int)(n < 32 ? n : 32), url);
    }
    const char *p = url + sizeof scheme - 1;
    const char *at = strrchr(p, '@');
    if (at != NULL) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        const char *pw = colon ? colon + 1 : p;
        size_t ulen = colon ? (size_t)(colon - p) : 0;
        if (!copy_part(out->user, sizeof out->user, p, ulen) ||
            !copy_part(out->password, sizeof out->password, pw, (size_t)(at - pw)))
            return rl__errf(err, errlen, RL_ERANGE, "redis_url: user or password too long");
        p = at + 1;
    }
    size_t hlen = strcspn(p, ":/");
    if (hlen == 0 || !copy_part(out->host, sizeof out->host, p, hlen))
        return rl__errf(err, errlen, RL_ERANGE, "redis_url: missing or too long host");
    for (size_t i = 0; i < hlen; i++) {
        unsigned char c = (unsigned char)p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_'))
            return rl__errf(err, errlen, RL_ERANGE,
                            "redis_url: host byte %zu is 0x%02x (a host name or IPv4 address "
                            "is letters, digits, '.', '-', '_')",
                            i, (unsigned)c);
    }
    p += hlen;
    long v;
    if (*p == ':') {
        size_t n = strcspn(++p, "/");
        if (!parse_uint(p, n, 65535, &v) || v == 0)
            return rl__errf(err, errlen, RL_ERANGE, "redis_url: port must be 1..65535");
        out->port = (int)v;
        p += n;
    }
    if (*p == '/') {
        p++;
        if (*p != '\0') {
            if (!parse_uint(p, strlen(p), 1000000, &v))
                return rl__errf(err, errlen, RL_ERANGE, "redis_url: db must be a number");
            out->db = (int)v;
        }
    } else if (*p != '\0') {
        return rl__errf(err, errlen, RL_ERANGE, "redis_url: unexpected text after the port");
    }
    return 0;
}

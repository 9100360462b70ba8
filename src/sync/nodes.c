/* SPDX-License-Identifier: MIT */
/* The node registry's record: format and parse (see sync/nodes.h). Pure. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "ratelimit.h"
#include "local/health.h"
#include "sync/nodes.h"
#include "local/limitdef.h"
#include "base/decimal.h"

int rl__nodes_key_names(const char *prefix, char *hash, size_t hash_cap, char *live,
                        size_t live_cap)
{
    int a = snprintf(hash, hash_cap, "{%s:v1}:nodes", prefix);
    int b = snprintf(live, live_cap, "{%s:v1}:nodes:live", prefix);
    return a < 0 || (size_t)a >= hash_cap || b < 0 || (size_t)b >= live_cap ? -1 : 0;
}

int rl__nodes_fp_key_name(const char *prefix, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "{%s:v1}:nodes:fp", prefix);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

void rl__nodes_fp_text(uint64_t fingerprint, char out[17])
{
    snprintf(out, 17, "%016" PRIx64, fingerprint);
}

uint64_t rl__nodes_fp(uint64_t secret_fp, unsigned layout)
{
    /* An odd multiplier is a bijection: distinct layouts give distinct
     * fingerprints for one secret, and layout 1 changes nothing. */
    return secret_fp ^ ((uint64_t)(layout - 1u) * UINT64_C(0x9E3779B97F4A7C15));
}

const char *rl__nodes_health_name(int32_t health)
{
    const char *name = rl__health_name(health);
    return name != NULL ? name : "unknown";
}

static int name_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == ':' || c == '-';
}

int rl__nodes_format(const rl_nodes_record_t *r, char *buf, size_t cap)
{
    /* A host name is free text to the OS: keep the record one line of
     * space-free words whatever it holds. */
    char host[sizeof r->host];
    size_t n = strnlen(r->host, sizeof r->host - 1);
    for (size_t i = 0; i < n; i++)
        host[i] = name_byte((unsigned char)r->host[i]) ? r->host[i] : '_';
    if (n == 0)
        host[n++] = '-';
    host[n] = '\0';
    char lib[sizeof r->lib];
    size_t m = strnlen(r->lib, sizeof r->lib - 1);
    for (size_t i = 0; i < m; i++)
        lib[i] = name_byte((unsigned char)r->lib[i]) ? r->lib[i] : '_';
    lib[m] = '\0';
    /* Hex only: a record stays one line of words whatever the caller set. */
    char fp[sizeof r->fp];
    size_t k = 0;
    for (; k < sizeof fp - 1 && r->fp[k] != '\0'; k++)
        fp[k] = isxdigit((unsigned char)r->fp[k]) ? r->fp[k] : '_';
    fp[k] = '\0';
    int w = snprintf(buf, cap,
                     "v=%d lib=%s host=%s pid=%" PRIu64 " start=%" PRIu64 " int=%" PRIu32
                     " health=%s limits=%" PRIu64 " keys=%" PRIu64 " rkeys=%" PRIu64
                     " rlimits=%" PRIu64 " rounds=%" PRIu64 " failed=%" PRIu64 "%s%s",
                     RL_NODES_VERSION, m ? lib : "-", host, r->pid, r->start_ms, r->interval_ms,
                     rl__nodes_health_name(r->health), r->limits, r->keys, r->rkeys,
                     r->rlimits, r->rounds, r->failed, fp[0] ? " fp=" : "", fp);
    if (w < 0 || r->hot == NULL || r->hot[0] == '\0')
        return w;
    /* The items' own bytes only (name bytes, hex, digits, '/', ','): a
     * record stays one line of words whatever the caller passed. */
    size_t hn = strnlen(r->hot, RL_HOT_WORD_TEXT_MAX);
    size_t at = (size_t)w;
    const char *word = " hot=";
    for (size_t i = 0; i < 5 + hn; i++, at++) {
        char c = i < 5 ? word[i] : r->hot[i - 5];
        if (i >= 5 && !name_byte((unsigned char)c) && c != '/' && c != ',')
            c = '_';
        if (at + 1 < cap)
            buf[at] = c;
    }
    if (cap > 0)
        buf[at < cap ? at : cap - 1] = '\0';
    return (int)at;
}

static void copy_text(char *dst, size_t cap, const char *p, size_t n)
{
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, p, n);
    dst[n] = '\0';
}

static int word_is(const char *w, size_t wn, const char *name)
{
    return strlen(name) == wn && memcmp(w, name, wn) == 0;
}

int rl__nodes_parse(const char *value, size_t len, rl_nodes_record_t *out)
{
    memset(out, 0, sizeof *out);
    out->health = -1;
    size_t i = 0;
    while (i < len) {
        while (i < len && value[i] == ' ')
            i++;
        size_t start = i;
        while (i < len && value[i] != ' ')
            i++;
        const char *w = value + start;
        const char *eq = memchr(w, '=', i - start);
        if (eq == NULL)
            continue;
        size_t wn = (size_t)(eq - w);
        const char *v = eq + 1;
        size_t vn = (size_t)(value + i - v);
        uint64_t u = rl__decimal_u64(v, vn);
        if (word_is(w, wn, "v"))
            out->version = u > UINT32_MAX ? UINT32_MAX : (uint32_t)u;
        else if (word_is(w, wn, "seen"))
            out->seen_ms = u;
        else if (word_is(w, wn, "lib"))
            copy_text(out->lib, sizeof out->lib, v, vn);
        else if (word_is(w, wn, "host"))
            copy_text(out->host, sizeof out->host, v, vn);
        else if (word_is(w, wn, "pid"))
            out->pid = u;
        else if (word_is(w, wn, "start"))
            out->start_ms = u;
        else if (word_is(w, wn, "int"))
            out->interval_ms = u > UINT32_MAX ? 0 : (uint32_t)u;
        else if (word_is(w, wn, "health")) {
            for (int32_t h = 0; h < RL_HEALTH_N; h++)
                if (word_is(v, vn, rl__health_name(h)))
                    out->health = h;
        } else if (word_is(w, wn, "limits"))
            out->limits = u;
        else if (word_is(w, wn, "keys"))
            out->keys = u;
        else if (word_is(w, wn, "rkeys"))
            out->rkeys = u;
        else if (word_is(w, wn, "rlimits"))
            out->rlimits = u;
        else if (word_is(w, wn, "rounds"))
            out->rounds = u;
        else if (word_is(w, wn, "failed"))
            out->failed = u;
        else if (word_is(w, wn, "fp"))
            copy_text(out->fp, sizeof out->fp, v, vn);
        else if (word_is(w, wn, "hot")) {
            out->hot = v;
            out->hot_len = vn;
        }
    }
    return out->version == RL_NODES_VERSION ? 0 : -1;
}

int rl__nodes_incarnation_split(const char *inc, size_t len)
{
    for (size_t i = len; i > 0; i--)
        if (inc[i - 1] == ':')
            return (int)(i - 1);
    return -1;
}

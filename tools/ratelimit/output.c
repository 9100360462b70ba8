/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* vasprintf */
#include <math.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "output.h"

/* --------------------------------------------------------------- JSON */

void json_init(json_t *j, FILE *f)
{
    memset(j, 0, sizeof *j);
    j->f = f;
}

static void indent(json_t *j)
{
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++)
        fputs("  ", j->f);
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    size_t len;
    unsigned min;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, min = 0x10000;
    else
        return 0;
    if (len > n)
        return 0;
    unsigned cp = c & (0x7fu >> len);
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3fu);
    }
    /* No overlong forms, no surrogates, nothing past U+10FFFF. */
    if (cp < min || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
        return 0;
    return len;
}

static void put_string(FILE *f, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc((int)c, f);
        } else if (c == '\n') {
            fputs("\\n", f);
        } else if (c == '\r') {
            fputs("\\r", f);
        } else if (c == '\t') {
            fputs("\\t", f);
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(f, "\\u%04x", c);
        } else if (c < 0x80) {
            fputc((int)c, f);
        } else {
            size_t len = utf8_len(p + i, n - i);
            if (len == 0) {
                /* Not UTF-8: the byte as the code point of the same value
                 * (keys are bytes; key_hex has them exactly). */
                fprintf(f, "\\u%04x", c);
            } else {
                fwrite(p + i, 1, len, f);
                i += len;
                continue;
            }
        }
        i++;
    }
    fputc('"', f);
}

/* Start a member or element: its comma, its line, its name. */
static void member(json_t *j, const char *key)
{
    if (j->depth > 0) {
        if (j->items[j->depth - 1]++ > 0)
            fputc(',', j->f);
        indent(j);
    }
    if (key != NULL) {
        put_string(j->f, key, strlen(key));
        fputs(": ", j->f);
    }
}

static void open_container(json_t *j, const char *key, char open, char close)
{
    member(j, key);
    fputc(open, j->f);
    if (j->depth == JSON_DEPTH_MAX)
        abort(); /* a programming error: the tool's documents are shallow */
    j->close[j->depth] = close;
    j->items[j->depth] = 0;
    j->depth++;
}

void json_object(json_t *j, const char *key) { open_container(j, key, '{', '}'); }
void json_array(json_t *j, const char *key) { open_container(j, key, '[', ']'); }

void json_end(json_t *j)
{
    if (j->depth == 0)
        return;
    j->depth--;
    if (j->items[j->depth] > 0)
        indent(j);
    fputc(j->close[j->depth], j->f);
}

void json_finish(json_t *j)
{
    while (j->depth > 0)
        json_end(j);
    fputc('\n', j->f);
}

void json_str(json_t *j, const char *key, const char *s)
{
    if (s == NULL) {
        json_null(j, key);
        return;
    }
    json_strn(j, key, s, strlen(s));
}

void json_strn(json_t *j, const char *key, const char *s, size_t n)
{
    member(j, key);
    put_string(j->f, s, n);
}

void json_u64(json_t *j, const char *key, uint64_t v)
{
    member(j, key);
    fprintf(j->f, "%" PRIu64, v);
}

void json_i64(json_t *j, const char *key, int64_t v)
{
    member(j, key);
    fprintf(j->f, "%" PRId64, v);
}

void json_double(json_t *j, const char *key, double v)
{
    member(j, key);
    if (isfinite(v))
        fprintf(j->f, "%.10g", v);
    else
        fputs("null", j->f);
}

void json_bool(json_t *j, const char *key, int v)
{
    member(j, key);
    fputs(v ? "true" : "false", j->f);
}

void json_null(json_t *j, const char *key)
{
    member(j, key);
    fputs("null", j->f);
}

/* -------------------------------------------------------------- tables */

void table_init(table_t *t, int ncols, const char *const *head, const char *align)
{
    memset(t, 0, sizeof *t);
    t->ncols = ncols > TABLE_COLS_MAX ? TABLE_COLS_MAX : ncols;
    for (int c = 0; c < t->ncols; c++) {
        t->head[c] = head[c];
        t->align[c] = align[c] == 'r' ? 'r' : 'l';
    }
}

void table_cell(table_t *t, const char *fmt, ...)
{
    if (t->oom)
        return;
    if (t->ncells == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        char **grown = realloc(t->cells, cap * sizeof *grown);
        if (grown == NULL) {
            t->oom = 1;
            return;
        }
        t->cells = grown;
        t->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    char *cell = NULL;
    if (vasprintf(&cell, fmt, ap) < 0)
        cell = NULL;
    va_end(ap);
    if (cell == NULL) {
        t->oom = 1;
        return;
    }
    t->cells[t->ncells++] = cell;
}

/* Display width: UTF-8 continuation bytes take no column. */
static size_t width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        w += ((unsigned char)*s & 0xc0) != 0x80;
    return w;
}

static void pad(FILE *f, size_t n)
{
    for (; n > 0; n--)
        fputc(' ', f);
}

int table_print(const table_t *t, FILE *f)
{
    size_t w[TABLE_COLS_MAX];
    for (int c = 0; c < t->ncols; c++)
        w[c] = width(t->head[c]);
    for (size_t i = 0; i < t->ncells; i++) {
        size_t cw = width(t->cells[i]);
        int c = (int)(i % (size_t)t->ncols);
        if (cw > w[c])
            w[c] = cw;
    }
    size_t rows = (t->ncells + (size_t)t->ncols - 1) / (size_t)t->ncols;
    for (size_t r = 0; r <= rows; r++) {
        for (int c = 0; c < t->ncols; c++) {
            size_t i = r == 0 ? 0 : (r - 1) * (size_t)t->ncols + (size_t)c;
            const char *s = r == 0 ? t->head[c] : i < t->ncells ? t->cells[i] : "";
            size_t gap = w[c] - width(s);
            int last = c == t->ncols - 1;
            if (t->align[c] == 'r')
                pad(f, gap);
            fputs(s, f);
            if (!last) {
                if (t->align[c] == 'l')
                    pad(f, gap);
                fputs("  ", f);
            }
        }
        fputc('\n', f);
    }
    return t->oom ? -1 : 0;
}

void table_free(table_t *t)
{
    for (size_t i = 0; i < t->ncells; i++)
        free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof *t);
}

void fmt_duration(char *buf, size_t cap, int64_t ms)
{
    if (ms < 0) {
        snprintf(buf, cap, "-");
        return;
    }
    uint64_t v = (uint64_t)ms;
    if (v < 1000)
        snprintf(buf, cap, "%" PRIu64 "ms", v);
    else if (v < 60000)
        snprintf(buf, cap, "%.1fs", (double)v / 1000.0);
    else if (v < 3600000)
        snprintf(buf, cap, "%" PRIu64 "m%02" PRIu64 "s", v / 60000, v / 1000 % 60);
    else if (v < 86400000)
        snprintf(buf, cap, "%" PRIu64 "h%02" PRIu64 "m", v / 3600000, v / 60000 % 60);
    else
        snprintf(buf, cap, "%" PRIu64 "d%02" PRIu64 "h", v / 86400000, v / 3600000 % 24);
}

void fmt_printable(char *buf, size_t cap, const void *bytes, size_t n)
{
    const unsigned char *p = bytes;
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        char one[5];
        int len;
        if (p[i] == '\\')
            len = snprintf(one, sizeof one, "\\\\");
        else if (p[i] >= 0x20 && p[i] < 0x7f)
            len = snprintf(one, sizeof one, "%c", p[i]);
        else
            len = snprintf(one, sizeof one, "\\x%02x", p[i]);
        if (w + (size_t)len + 4 > cap) {
            snprintf(buf + w, cap - w, "...");
            return;
        }
        memcpy(buf + w, one, (size_t)len);
        w += (size_t)len;
    }
    buf[w] = '\0';
}

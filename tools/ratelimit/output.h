/* SPDX-License-Identifier: MIT */
/*
 * Output: a streaming JSON writer (valid JSON whatever the bytes: strings
 * are escaped, invalid UTF-8 is written as \u00XX per byte, non-finite
 * numbers as null) and aligned text tables.
 */
#ifndef RL_CLI_OUTPUT_H
#define RL_CLI_OUTPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Nesting the writer tracks; deeper is a programming error (abort). */
#define JSON_DEPTH_MAX 16

typedef struct json {
    FILE *f;
    int depth;
    int items[JSON_DEPTH_MAX]; /* members written so far at each depth */
    char close[JSON_DEPTH_MAX]; /* the bracket that closes each level */
} json_t;

void json_init(json_t *j, FILE *f);
/* Containers: key is the member name inside an object, NULL elsewhere. */
void json_object(json_t *j, const char *key);
void json_array(json_t *j, const char *key);
void json_end(json_t *j);  /* closes the innermost container */
void json_finish(json_t *j); /* closes what is open, ends the line */
void json_str(json_t *j, const char *key, const char *s);
void json_strn(json_t *j, const char *key, const char *s, size_t n);
void json_u64(json_t *j, const char *key, uint64_t v);
void json_i64(json_t *j, const char *key, int64_t v);
void json_double(json_t *j, const char *key, double v); /* null if not finite */
void json_bool(json_t *j, const char *key, int v);
void json_null(json_t *j, const char *key);

#define TABLE_COLS_MAX 16

typedef struct table {
    int ncols;
    const char *head[TABLE_COLS_MAX];
    char align[TABLE_COLS_MAX]; /* 'l' or 'r' */
    char **cells;               /* row-major */
    size_t ncells, cap;
    int oom;
} table_t;

/* align: one 'l' or 'r' per column. */
void table_init(table_t *t, int ncols, const char *const *head, const char *align);
/* The next cell, left to right, row after row. */
void table_cell(table_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print with two spaces between columns; 0, or -1 if a cell could not be stored. */
int table_print(const table_t *t, FILE *f);
void table_free(table_t *t);

/* A duration for people: 850ms, 12.3s, 5m12s, 3h04m, 2d03h ("-" for none). */
void fmt_duration(char *buf, size_t cap, int64_t ms);

/* Bytes for a terminal: printable ASCII as is, others as \xNN (and \\ for a
 * backslash). Truncated with "..." to fit cap (at least 8). */
void fmt_printable(char *buf, size_t cap, const void *bytes, size_t n);

#endif

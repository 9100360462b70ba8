/* SPDX-License-Identifier: MIT */
/* One log line to stderr, prefixed with the program and node name. */
#ifndef GATEWAY_LOG_H
#define GATEWAY_LOG_H

/* Set once at startup, before any other thread exists. */
void gw_log_set_prefix(const char *prefix);

/* Safe from any thread (the library's log hook runs on its sync thread):
 * the line is formatted first and written with one call. */
__attribute__((format(printf, 1, 2))) void gw_log(const char *fmt, ...);

#endif

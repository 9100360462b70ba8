/* SPDX-License-Identifier: MIT */
/*
 * Reading Redis replies: pure functions of a hiredis reply, no connection,
 * no state. Fuzzed in tests/fuzz/fuzz_reply.c.
 */
#ifndef RL_REDIS_REPLY_H
#define RL_REDIS_REPLY_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>
#include "redis/errclass.h"

/* The class of an error reply by its prefix (NOSCRIPT, READONLY, ...);
 * RL_REDIS_ERR_OTHER for any other error, for NULL or a non-error reply. */
int rl__redis_classify(const redisReply *reply);

/* A SCRIPT LOAD reply: 1 and the SHA in sha[41] if it is one (40
 * characters), else 0 and sha untouched. */
int rl__redis_sha_reply(const redisReply *reply, char sha[41]);

/* An array reply of exactly n non-negative integers (the exact path's
 * scripts answer so): 1 with them in out, else 0 and out partly written. */
int rl__redis_uint_array(const redisReply *reply, uint64_t *out, size_t n);

/* The text of an error reply for a log line, or "unexpected reply". */
const char *rl__redis_reply_text(const redisReply *reply);

#endif

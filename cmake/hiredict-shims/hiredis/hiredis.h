/* SPDX-License-Identifier: MIT */
/*
 * The hiredis names this project uses, mapped onto hiredict's (a hiredis
 * fork with TLS; RL_TLS's build). It stands where <hiredis/hiredis.h> would,
 * on the build's include path only: Debian's libhiredict-shims-dev puts the
 * same kind of file in /usr/include/hiredis, where it conflicts with
 * libhiredis-dev. A name missing here fails the build loudly: it falls
 * through to hiredis 0.14's header, whose functions the TLS build does not
 * link.
 */
#ifndef RL_HIREDICT_SHIM_HIREDIS_H
#define RL_HIREDICT_SHIM_HIREDIS_H

#include <hiredict/hiredict.h>

#define REDIS_OK REDICT_OK
#define REDIS_ERR REDICT_ERR
#define REDIS_ERR_IO REDICT_ERR_IO
#define REDIS_ERR_EOF REDICT_ERR_EOF
#define REDIS_ERR_PROTOCOL REDICT_ERR_PROTOCOL
#define REDIS_ERR_OOM REDICT_ERR_OOM
#define REDIS_ERR_TIMEOUT REDICT_ERR_TIMEOUT
#define REDIS_ERR_OTHER REDICT_ERR_OTHER
#define REDIS_CONNECTED REDICT_CONNECTED

#define REDIS_REPLY_STRING REDICT_REPLY_STRING
#define REDIS_REPLY_ARRAY REDICT_REPLY_ARRAY
#define REDIS_REPLY_INTEGER REDICT_REPLY_INTEGER
#define REDIS_REPLY_NIL REDICT_REPLY_NIL
#define REDIS_REPLY_STATUS REDICT_REPLY_STATUS
#define REDIS_REPLY_ERROR REDICT_REPLY_ERROR
#define REDIS_REPLY_DOUBLE REDICT_REPLY_DOUBLE
#define REDIS_REPLY_BOOL REDICT_REPLY_BOOL
#define REDIS_REPLY_MAP REDICT_REPLY_MAP
#define REDIS_REPLY_SET REDICT_REPLY_SET
#define REDIS_REPLY_PUSH REDICT_REPLY_PUSH
#define REDIS_REPLY_BIGNUM REDICT_REPLY_BIGNUM
#define REDIS_REPLY_VERB REDICT_REPLY_VERB

#define redisReply redictReply
#define redisReader redictReader
#define redisReaderCreate redictReaderCreate
#define redisReaderFree redictReaderFree
#define redisReaderFeed redictReaderFeed
#define redisReaderGetReply redictReaderGetReply

#define redisContext redictContext
#define redisConnect redictConnect
#define redisConnectWithTimeout redictConnectWithTimeout
#define redisConnectUnix redictConnectUnix
#define redisConnectUnixWithTimeout redictConnectUnixWithTimeout
#define redisSetTimeout redictSetTimeout
#define redisFree redictFree
#define redisBufferWrite redictBufferWrite
#define redisGetReply redictGetReply
#define redisAppendCommand redictAppendCommand
#define redisAppendCommandArgv redictAppendCommandArgv
#define redisCommand redictCommand
#define redisCommandArgv redictCommandArgv
#define redisvCommand redictvCommand

#endif

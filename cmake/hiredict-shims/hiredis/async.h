/* SPDX-License-Identifier: MIT */
/* hiredis's async names on hiredict's (see hiredis.h beside this file). */
#ifndef RL_HIREDICT_SHIM_ASYNC_H
#define RL_HIREDICT_SHIM_ASYNC_H

#include <hiredict/async.h>
#include <hiredis/hiredis.h>

#define redisCallbackFn redictCallbackFn
#define redisConnectCallback redictConnectCallback
#define redisDisconnectCallback redictDisconnectCallback
#define redisAsyncContext redictAsyncContext
#define redisAsyncConnect redictAsyncConnect
#define redisAsyncConnectUnix redictAsyncConnectUnix
#define redisAsyncSetConnectCallback redictAsyncSetConnectCallback
#define redisAsyncSetDisconnectCallback redictAsyncSetDisconnectCallback
#define redisAsyncDisconnect redictAsyncDisconnect
#define redisAsyncFree redictAsyncFree
#define redisAsyncHandleRead redictAsyncHandleRead
#define redisAsyncHandleWrite redictAsyncHandleWrite
#define redisAsyncCommand redictAsyncCommand
#define redisAsyncCommandArgv redictAsyncCommandArgv
#define redisAsyncFormattedCommand redictAsyncFormattedCommand

#endif

/* SPDX-License-Identifier: MIT */
/*
 * hiredis_ssl's names on hiredict's (see hiredis.h beside this file). Debian's
 * shim of this header omits the include of <hiredict/hiredict_ssl.h>, so a
 * file that includes it alone does not compile; this one includes it.
 */
#ifndef RL_HIREDICT_SHIM_SSL_H
#define RL_HIREDICT_SHIM_SSL_H

#include <hiredis/hiredis.h>
#include <hiredict/hiredict_ssl.h>

#define redisInitiateSSL redictInitiateSSL

#endif

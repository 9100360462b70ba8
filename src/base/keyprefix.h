/* SPDX-License-Identifier: MIT */
/*
 * The longest rl_config_t.key_prefix ([A-Za-z0-9_.:-]{1,32}, as
 * include/ratelimit.h documents it): rl_open refuses a longer one, and the
 * command-line tool a --prefix that no node could have.
 */
#ifndef RL_KEYPREFIX_H
#define RL_KEYPREFIX_H

#define RL_KEY_PREFIX_MAX 32

#endif

/* SPDX-License-Identifier: MIT */
/* The Redis scripts, embedded at build time from src/lua (cmake/embed_lua.cmake). */
#ifndef RL_SCRIPTS_H
#define RL_SCRIPTS_H

extern const char rl__lua_report[];
extern const char rl__lua_nodes[];
extern const char rl__lua_exact[];
extern const char rl__lua_quota[];
extern const char rl__lua_inflight[];
extern const char rl__lua_reserve[];
extern const char rl__lua_inflight_lease[];

#endif

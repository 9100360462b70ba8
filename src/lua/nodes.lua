-- SPDX-License-Identifier: MIT
-- The fleet's node registry: one node's heartbeat, once per sync round,
-- pipelined with the round's reports (src/syncnodes.h has the data model).
-- The build prepends share.lua; nothing here uses it.
--
-- KEYS[1]  {prefix:v1}:nodes       hash: incarnation -> "seen=<ms> <record>",
--                                  and "t" -> the last Redis time seen (ms)
-- KEYS[2]  {prefix:v1}:nodes:live  zset: incarnation -> deadline (ms)
-- ARGV     1 incarnation   2 record (v=1 ...)   3 stale ms (how long the
--          entry lives without a new write)   4 leaving (1: remove it)
--          5 most stale entries to prune in this call
-- Returns  the number of stale entries this call pruned.
local nodes, live = KEYS[1], KEYS[2]
local inc, record, stale = ARGV[1], ARGV[2], tonumber(ARGV[3])
local prune_max = tonumber(ARGV[5])

if ARGV[4] == '1' then
  redis.call('HDEL', nodes, inc)
  redis.call('ZREM', live, inc)
  return 0
end

-- TIME is a wall clock: keep max(last, now), so deadlines never move back.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
now = math.max(now, tonumber(redis.call('HGET', nodes, 't')) or 0)

redis.call('HSET', nodes, inc, 'seen=' .. string.format('%d', now) .. ' ' .. record,
           't', string.format('%d', now))
redis.call('ZADD', live, now + stale, inc)

-- Entries whose deadline passed belong to nodes that died without closing:
-- a few per call, so one call's work stays bounded however many there are.
local dead = redis.call('ZRANGEBYSCORE', live, '-inf', '(' .. string.format('%d', now),
                        'LIMIT', 0, prune_max)
for _, who in ipairs(dead) do
  redis.call('HDEL', nodes, who)
  redis.call('ZREM', live, who)
end

-- Both keys outlive every entry written to them; a fleet that is gone
-- altogether leaves nothing behind.
local keep = 2 * stale
for _, k in ipairs({nodes, live}) do
  if redis.call('PTTL', k) < keep then
    redis.call('PEXPIRE', k, keep)
  end
end
return #dead

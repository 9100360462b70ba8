-- SPDX-License-Identifier: MIT
-- The fleet's node registry: one node's heartbeat, once per sync round,
-- pipelined with the round's reports (src/sync/nodes.h has the data model).
-- It uses nothing of share.lua, so the build does not prepend it.
--
-- KEYS[1]  {prefix:v1}:nodes       hash: incarnation -> "seen=<ms> <record>",
--                                  and "t" -> the last Redis time seen (ms)
-- KEYS[2]  {prefix:v1}:nodes:live  zset: incarnation -> deadline (ms)
-- KEYS[3]  {prefix:v1}:nodes:fp    hash: key_secret fingerprint -> the
--                                  latest deadline of a node holding it
-- ARGV     1 incarnation   2 record (v=1 ...)   3 stale ms (how long the
--          entry lives without a new write)   4 leaving (1: remove it)
--          5 most stale entries to prune in this call
--          6 this node's fingerprint   7 most other fingerprints to return
-- Returns  {pruned, live, fp...}: the stale entries this call pruned, the
--          live nodes of the prefix (this one included), and the live
--          fingerprints other than this node's: a split fleet.
local nodes, live, fps = KEYS[1], KEYS[2], KEYS[3]
local inc, record, stale = ARGV[1], ARGV[2], tonumber(ARGV[3])
local prune_max = tonumber(ARGV[5])
local fp, fp_max = ARGV[6], tonumber(ARGV[7])

if ARGV[4] == '1' then
  redis.call('HDEL', nodes, inc)
  redis.call('ZREM', live, inc)
  return {0, 0}
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

-- One field per secret in use, so this walk is bounded by the number of
-- distinct secrets, never by the number of nodes.
local deadline = now + stale
if deadline > (tonumber(redis.call('HGET', fps, fp)) or 0) then
  redis.call('HSET', fps, fp, string.format('%d', deadline))
end
local others = {}
local all = redis.call('HGETALL', fps)
for i = 1, #all, 2 do
  if (tonumber(all[i + 1]) or 0) < now then
    redis.call('HDEL', fps, all[i])
  elseif all[i] ~= fp and #others < fp_max then
    others[#others + 1] = all[i]
  end
end

-- Every key outlives every entry written to it; a fleet that is gone
-- altogether leaves nothing behind.
local keep = 2 * stale
for _, k in ipairs({nodes, live, fps}) do
  if redis.call('PTTL', k) < keep then
    redis.call('PEXPIRE', k, keep)
  end
end
local result = {#dead, redis.call('ZCOUNT', live, string.format('%d', now), '+inf')}
for _, f in ipairs(others) do
  result[#result + 1] = f
end
return result

-- SPDX-License-Identifier: MIT
-- An exact in-flight limit's acquire or release (kind=inflight mode=exact):
-- one atomic step on the key's holders, a sorted set of permit ids scored
-- by the ms their lease ends, in Redis TIME (never a node's clock).
--
-- KEYS[1]  the key's holders, {prefix:i1:limit:<16 hex>} (redis/keys.h).
-- KEYS[2]  its mark, the same name and ":m": the Redis ms it was made at,
--          by the first admitted acquire after none was there; never
--          written by a release, its TTL raised by every acquire to at
--          least the last lease end's. A mark made after a permit's acquire
--          means Redis lost the holders since (a restart empty, a flush,
--          an eviction): that permit's release is late, not a second one.
-- ARGV[1]  "a": acquire. ARGV[2] the permit id, ARGV[3] max, ARGV[4] the
--          lease in ms. Expired holders (lease end <= now) are removed
--          first; then the id is added, NX, scored now + lease, when fewer
--          than max remain. Both keys' TTLs are only ever raised, to the
--          newest lease end + 1 s: they outlive every holder the set has.
--          Returns {1, held, lease end ms} admitted; {0, held, ms until
--          the first lease ends} denied; {2, held, 0} the id is a live
--          holder's already (the caller draws another).
-- ARGV[1]  "r": release. ARGV[2] the permit id, ARGV[3] its lease end ms
--          mod 2^40 (the permit's), or "*" when the acquire had no answer
--          (on_failure=open: any score); ARGV[4] the lease in ms. The
--          holder is removed when its score matches: {0, held}. Else
--          nothing changes, and the answer says why: {1, held} late, the
--          lease has ended (the holder expired), or the mark is missing or
--          younger than the acquire (Redis lost the holders); {2, held}
--          released already, while the lease still runs. "*" without a
--          holder: {0, held}.
-- Scores are whole ms below 2^53: a double holds them exactly.
local call = redis.call
local k = KEYS[1]
local id = ARGV[2]
local t = call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
call('ZREMRANGEBYSCORE', k, '-inf', now)
local M = 1099511627776
if ARGV[1] == 'r' then
  local s = call('ZSCORE', k, id)
  if ARGV[3] == '*' then
    if s then
      call('ZREM', k, id)
    end
    return {0, call('ZCARD', k)}
  end
  local want = tonumber(ARGV[3])
  if s and tonumber(s) % M == want then
    call('ZREM', k, id)
    return {0, call('ZCARD', k)}
  end
  local d = (want - now % M) % M
  local born = tonumber(call('GET', KEYS[2]) or 'x')
  if d == 0 or d >= M / 2 or not born or born > now + d - tonumber(ARGV[4]) then
    return {1, call('ZCARD', k)}
  end
  return {2, call('ZCARD', k)}
end
local max = tonumber(ARGV[3])
local lease = tonumber(ARGV[4])
local n = call('ZCARD', k)
if n >= max then
  local first = call('ZRANGE', k, 0, 0, 'WITHSCORES')
  local wait = 1
  if first[2] then
    wait = tonumber(first[2]) - now
  end
  return {0, n, wait}
end
local e = now + lease
if call('ZADD', k, 'NX', e, id) == 0 then
  return {2, n, 0}
end
if not call('SET', KEYS[2], now, 'NX', 'PX', lease + 1000) and
   call('PTTL', KEYS[2]) < lease + 1000 then
  call('PEXPIRE', KEYS[2], lease + 1000)
end
if call('PTTL', k) < lease + 1000 then
  call('PEXPIRE', k, lease + 1000)
end
return {1, n + 1, e}

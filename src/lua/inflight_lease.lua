-- SPDX-License-Identifier: MIT
-- A fleet-wide in-flight limit's leases (mode=global): one node's renewal
-- of its blocks for up to RL_IFL_LEASE_KEYS keys of one limit, once per sync
-- round (src/sync/inflight.c). It uses nothing of share.lua, so the build
-- does not prepend it.
--
-- KEYS[1]  {prefix:f1:limit}:born  the Redis time (ms) the limit's leases
--          began; missing after a flush or an empty restart
-- KEYS[2..] {prefix:f1:limit}:k:<32 hex>  one hash per key: incarnation ->
--          "<block> <expiry ms> <want>"
-- ARGV     1 incarnation   2 now ms (0: Redis TIME, the only clock; virtual
--          time in simulations)   3 lease ms (a block unrenewed that long
--          is gone)   4 max   5 how long a hash lives unreported (ms)
--          then per key (3 each): held, want (the round's peak demand:
--          the most held at once, one more per acquire denied; at most
--          max), cap (the most the
--          node may admit before it applies this reply: its block, or
--          on_failure's cap when its lease may run out first; >= held)
-- Returns  one block per key: the node's new local cap for it.
--
-- The rule, per key: the blocks of unexpired nodes sum to at most max.
-- A node's block is what it wants (with a quarter and one more of
-- headroom while no other node lacks), within what the others leave free;
-- while others want more than they have, the capacity nobody holds is
-- split between the wanting nodes in proportion to what each lacks. A
-- block is below what the node holds only while the fleet holds more than
-- max (after an outage under on_failure open or local, or a flush): the
-- node then admits nothing until its releases bring it under its block.
-- The node is counted at max(block, cap) until its next report (cap >=
-- held): a cut takes effect once the node has applied it. For one lease after the born marker was made (the
-- first use, or a flush: the hashes are gone while the nodes still use
-- the blocks they had) no block grows past the node's cap, so the nodes
-- that still hold blocks are all counted before any is handed out again.
local inc = ARGV[1]
local now = tonumber(ARGV[2])
local lease, max, keep = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local floor = math.floor

if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
end

local born = tonumber(redis.call('GET', KEYS[1]) or '')
if born == nil or born > now then
  born = now
end
redis.call('SET', KEYS[1], string.format('%d', born), 'PX', keep)
local young = now < born + lease

local out = {}
for i = 2, #KEYS do
  local a = 5 + (i - 2) * 3
  local held, want, cap = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local key = KEYS[i]
  local f = redis.call('HGETALL', key)
  local others, lack = 0, 0
  for j = 1, #f, 2 do
    if f[j] ~= inc then
      local b, e, w = string.match(f[j + 1], '^(%d+) (%d+) (%d+)$')
      b, e, w = tonumber(b), tonumber(e), tonumber(w)
      if b == nil or e <= now then
        redis.call('HDEL', key, f[j])
      else
        others = others + b
        if w > b then
          lack = lack + w - b
        end
      end
    end
  end
  if want > max then
    want = max
  end
  -- Headroom while nobody else lacks: a quarter of the demand and one
  -- more, so a node's concurrency may rise between rounds unrefused.
  local target = want
  if want > 0 and lack == 0 then
    target = want + floor((want + 3) / 4) + 1
  end
  local g = max - others
  if g > target then
    g = target
  end
  local mine = want - cap
  if mine > 0 and lack > 0 then
    local spare = max - others - cap
    if spare > 0 then
      local extra = floor(spare * mine / (mine + lack))
      if extra < 1 then
        extra = 1
      end
      if g > cap + extra then
        g = cap + extra
      end
    end
  end
  if young and g > cap then
    g = cap
  end
  if g < 0 then
    g = 0
  end
  local counted = g
  if cap > counted then
    counted = cap
  end
  if counted == 0 and want == 0 then
    redis.call('HDEL', key, inc)
  else
    redis.call('HSET', key, inc, string.format('%d %d %d', counted, now + lease, want))
    redis.call('PEXPIRE', key, keep)
  end
  out[#out + 1] = g
end
return out

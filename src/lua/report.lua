-- SPDX-License-Identifier: MIT
-- One sync round of one node for one virtual shard of one limit.
-- The build prepends share.lua (share_compute, share_ewma, SHARE_ONE).
--
-- KEYS[i]  the per-key hash of key i, all under one hash tag
--          {prefix:v1:limit:vshard}, so this is one call on one slot.
-- ARGV     A_<word> (fixed), then key i's at A_N + K_N*(i-1) + K_<word>:
--          indices generated from src/reportargs.h, which documents them.
-- Returns  per key: {rate share (Q24), burst tokens, the fleet's admitted
--          rate (the live nodes' smoothed rates summed, Q24 of the limit's
--          rate: above 2^24 is overshoot), live nodes}; zeros for a node
--          that is leaving or has left.
--
-- Idempotent and order-free: counters are cumulative per occupancy (epoch),
-- so a repeated or late report changes nothing. Redis TIME only measures the
-- interval between reports, kept monotonic per key with max(last, now).
-- Under 16 KB with share.lua: Redis 7 answers a longer SCRIPT LOAD from an
-- unauthenticated client with a protocol error, not NOAUTH (rl_open's EAUTH).
local inc = ARGV[A_inc]
local rate = tonumber(ARGV[A_rate])
local period = tonumber(ARGV[A_period])
local burst = tonumber(ARGV[A_burst])
local alpha = tonumber(ARGV[A_alpha])
local reserve = tonumber(ARGV[A_reserve])
local gain = tonumber(ARGV[A_gain])
local max_cut = tonumber(ARGV[A_max_cut])
local ttl = tonumber(ARGV[A_ttl])
local leaving = ARGV[A_leaving] == '1'
local expected = tonumber(ARGV[A_expected])
local young = tonumber(ARGV[A_young])

local wall = tonumber(ARGV[A_now])
if wall == 0 then
  local t = redis.call('TIME')
  wall = tonumber(t[1]) * 1000 + share_floor(tonumber(t[2]) / 1000)
end

-- Offered load over dt ms as a fraction of the limit's rate, in Q24.
local function rate_q(count, dt)
  local q = count * period / (rate * dt) * SHARE_ONE
  if q > SHARE_ONE then return SHARE_ONE end
  return share_floor(q)
end

-- The per-node entries of one key hash: {inc -> {e, a, o, d, r, t, x}}.
local function load_nodes(key)
  local flat = redis.call('HGETALL', key)
  local nodes, order, meta = {}, {}, {}
  for i = 1, #flat, 2 do
    local f, v = flat[i], flat[i + 1]
    local sep = string.find(f, '|', 1, true)
    if sep then
      local who, what = string.sub(f, 1, sep - 1), string.sub(f, sep + 1)
      local n = nodes[who]
      if not n then
        n = {}
        nodes[who] = n
        order[#order + 1] = who
      end
      n[what] = tonumber(v)
    else
      meta[f] = tonumber(v)
    end
  end
  table.sort(order) -- the same node order on every call: shares are stable
  return nodes, order, meta
end

-- A node that left (or went stale) loses its liveness and demand but keeps
-- its high-water marks (e, a, o) while the key lives: a report of it that
-- Redis runs late (a replayed queue, a last round racing the close) then
-- counts nothing twice.
local function drop(key, who)
  redis.call('HDEL', key, who .. '|d', who .. '|r', who .. '|t', who .. '|x')
end

-- One key's report: fold it in, then this node's share of the key.
local function report_key(i)
  local key = KEYS[i]
  local base = A_N + K_N * (i - 1)
  local epoch = tonumber(ARGV[base + K_epoch])
  local cum_a = tonumber(ARGV[base + K_cum_a])
  local cum_o = tonumber(ARGV[base + K_cum_o])
  local stale = tonumber(ARGV[base + K_stale])
  local new_a = tonumber(ARGV[base + K_new_a])
  local new_o = tonumber(ARGV[base + K_new_o])
  local span = math.max(1, tonumber(ARGV[base + K_span]))
  local first = new_a >= cum_a and new_o >= cum_o -- nothing sent before
  local nodes, order, meta = load_nodes(key)
  local now = math.max(wall, meta['t'] or 0)
  local me = nodes[inc]

  -- Fold this report in: deltas since what Redis already has.
  local da, doff = 0, 0
  local gone = me ~= nil and me.x == nil
  if gone and epoch <= me.e and cum_a <= me.a and cum_o <= me.o then
    -- A late report of a node that has left: nothing new, nothing to revive.
    return {0, 0, 0, 0}
  end
  -- An entry made again (hash lost, node stale) starts at the rate of what is
  -- new since the node's last report, not its history over one period.
  local again = false
  if not me or epoch > me.e then
    da, doff = cum_a, cum_o
    -- A first report covers about one report period (stale / 3).
    me = {e = epoch, a = cum_a, o = cum_o, d = 0, r = 0, t = now - math.max(1, share_floor(stale / 3))}
    again = not first
    if not nodes[inc] then order[#order + 1] = inc; table.sort(order) end
    nodes[inc] = me
  elseif gone then
    -- epoch == me.e with new counts: a node that went stale is back.
    if cum_a > me.a then da = cum_a - me.a; me.a = cum_a end
    if cum_o > me.o then doff = cum_o - me.o; me.o = cum_o end
    me.d, me.r = 0, 0
    again = true
  elseif epoch == me.e then
    if cum_a > me.a then da = cum_a - me.a; me.a = cum_a end
    if cum_o > me.o then doff = cum_o - me.o; me.o = cum_o end
  end
  if again then
    me.d = rate_q(new_o, span)
    me.r = rate_q(new_a, span)
    me.t = now
    me.x = now + stale
  elseif epoch >= me.e then
    local dt = math.max(1, now - me.t)
    me.d = share_ewma(me.d, rate_q(doff, dt), alpha)
    me.r = share_ewma(me.r, rate_q(da, dt), alpha)
    me.t = now
    me.x = now + stale
  end
  local total = (meta['a'] or 0) + da

  -- The counters' high-water marks are stored whatever happens next.
  redis.call('HSET', key, inc .. '|e', me.e, inc .. '|a', me.a, inc .. '|o', me.o)
  if leaving then
    drop(key, inc)
    nodes[inc] = nil
  else
    redis.call('HSET', key, inc .. '|d', me.d, inc .. '|r', me.r, inc .. '|t', me.t,
               inc .. '|x', me.x)
  end
  redis.call('HSET', key, 'a', total, 't', now)
  -- A hash made by a node that had reported it was lost, not new: not young.
  local created = meta['c']
  if not created then
    created = first and now or now - young
    redis.call('HSET', key, 'c', created)
  end

  -- Live nodes only: an entry not refreshed in time has left.
  local demand, over, mine = {}, 0, nil
  for _, who in ipairs(order) do
    local n = nodes[who]
    if n and n.x ~= nil then
      if n.x < now then
        drop(key, who)
      else
        demand[#demand + 1] = n.d or 0
        over = over + (n.r or 0)
        if who == inc then mine = #demand end
      end
    end
  end
  redis.call('PEXPIRE', key, ttl)
  if not mine then
    return {0, 0, 0, 0}
  end
  local usage, live = over, #demand
  -- A young key: the first reporter would see only itself and take the whole
  -- limit. Until `young` ms old, the expected nodes not seen yet are stood in
  -- for with even parts (their shares and tokens go to nobody).
  if now - created < young and #demand < expected then
    local part = share_floor((SHARE_ONE - reserve) / expected)
    for _ = #demand + 1, expected do
      demand[#demand + 1] = part
    end
  end
  over = math.max(0, over - SHARE_ONE)
  local q, tokens = share_compute(burst, reserve, over, gain, max_cut, demand)
  return {q[mine], tokens[mine], usage, live}
end

local out = {}
for i = 1, #KEYS do
  out[i] = report_key(i)
end
return out

-- SPDX-License-Identifier: MIT
-- One sync round of one node for one virtual shard of one limit.
-- The build prepends share.lua (share_compute, share_ewma, SHARE_ONE).
--
-- KEYS[i]  the per-key hash of key i, all under one hash tag
--          {prefix:v1:limit:vshard}, so this is one call on one slot.
-- ARGV     A_<word> (fixed), then key i's at A_N + K_N*(i-1) + K_<word>:
--          indices generated from src/sync/reportargs.h, which documents them.
-- Returns  per key: {rate share (Q24), burst tokens, the fleet's admitted
--          rate (the live nodes' smoothed rates summed, Q24 of the limit's
--          rate: above 2^24 is overshoot), live nodes, fleet remaining};
--          zeros for a node that is leaving or has left. Fleet remaining:
--          of a tiered limit (A_tiered 1), the tokens left in the key's
--          Redis bucket (exact.lua's fields xn, xl, xr: one ledger), which
--          each report refills at the rate and charges what the node
--          admitted locally since its last one (it may go below zero: the
--          nodes admitted before Redis heard; 0 is returned then); else 0.
--          Hold: 1 while the key's hash is being rebuilt after it was lost
--          (evicted, flushed, a failover to an empty replica): the node
--          keeps at most the rate and tokens it holds (fields g and h).
--
-- A key's shares are computed once per round, not once per report: the
-- first report at least `fresh` ms (one round) after the last computation,
-- one that adds, brings back or removes a node, and (at most EXTRA a round)
-- one whose demand moved by a third, runs the share rule over every live
-- node and stores each one's result (<inc>|q rate share, <inc>|b tokens; k
-- its time, u the fleet's rate, l the live nodes, n the extra ones this
-- round); the others fold their counts in and read their stored share. So a
-- key costs O(N) Redis time per round (a few HGETALLs and share rules, N
-- small reports), not O(N^2), and a round's shares come from one snapshot.
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
local fresh = tonumber(ARGV[A_fresh])
local tiered = ARGV[A_tiered] == '1'

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

-- The per-node entries of one key hash: {inc -> {e, a, o, d, r, t, x, q, b}}.
local function load_nodes(key)
  local flat = redis.call('HGETALL', key)
  local nodes, order = {}, {}
  for i = 1, #flat, 2 do
    local f = flat[i]
    local sep = string.find(f, '|', 1, true)
    if sep then
      local who = string.sub(f, 1, sep - 1)
      local n = nodes[who]
      if not n then
        n = {}
        nodes[who] = n
        order[#order + 1] = who
      end
      n[string.sub(f, sep + 1)] = tonumber(flat[i + 1])
    end
  end
  table.sort(order) -- the same node order on every call: shares are stable
  return nodes, order
end

-- A node that left (or went stale) loses its liveness, demand and share but
-- keeps its high-water marks (e, a, o) while the key lives: a report of it
-- that Redis runs late (a replayed queue, a last round racing the close)
-- then counts nothing twice.
local function drop(key, who)
  redis.call('HDEL', key, who .. '|d', who .. '|r', who .. '|t', who .. '|x', who .. '|q',
             who .. '|b')
end

-- HSET in parts: unpack() of one long list would overflow Lua's C stack.
local function hset_all(key, kv)
  for i = 1, #kv, 4000 do
    redis.call('HSET', key, unpack(kv, i, math.min(#kv, i + 3999)))
  end
end

-- Every live node's share of the key, stored in the hash; inc's returned.
-- back: inc's entry had expired too; if no other is live, the key is idle
-- fleet-wide and comes back young (below).
local function compute(key, now, created, extra, back)
  local nodes, order = load_nodes(key)
  local demand, who_at, over = {}, {}, 0
  for _, who in ipairs(order) do
    local n = nodes[who]
    if n.x ~= nil then
      if n.x < now then
        drop(key, who)
      else
        demand[#demand + 1] = n.d or 0
        who_at[#demand] = who
        over = over + (n.r or 0)
      end
    end
  end
  local usage, live = over, #demand
  if live == 0 then
    redis.call('HSET', key, 'k', now, 'u', 0, 'l', 0, 'n', extra)
    return {0, 0, 0, 0}
  end
  -- Back from idle (every entry expired): its first reporters would see only
  -- themselves, the first the whole limit, as a new key's would; so it is
  -- young again from now (created moves, for the reports after this one).
  if back and live == 1 and who_at[1] == inc and now - created >= young then
    created = now
    redis.call('HSET', key, 'c', now)
  end
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
  local kv, mine = {'k', now, 'u', usage, 'l', live, 'n', extra}, {0, 0, 0, 0}
  for j = 1, live do
    local who = who_at[j]
    kv[#kv + 1] = who .. '|q'
    kv[#kv + 1] = q[j]
    kv[#kv + 1] = who .. '|b'
    kv[#kv + 1] = tokens[j]
    if who == inc then mine = {q[j], tokens[j], usage, live} end
  end
  hset_all(key, kv)
  return mine
end

-- A tiered key's bucket, as exact.lua keeps it (in us), refilled to now
-- and charged `take`: the tokens left, at least 0.
local function fleet(key, take)
  local v = redis.call('HMGET', key, 'xn', 'xl', 'xr')
  local per, now = period * 1000, wall * 1000
  local tokens, last, rem = burst, now, 0
  if v[1] then tokens, last, rem = tonumber(v[1]), tonumber(v[2]), tonumber(v[3]) end
  if now < last then now = last end
  local acc = (now - last) * rate + rem
  if tokens >= burst or acc >= (burst - tokens) * per then
    tokens, rem = burst, 0
  else
    local add = share_idiv(acc, per)
    tokens, rem = tokens + add, acc - add * per
  end
  tokens = tokens - take
  redis.call('HSET', key, 'xn', tokens, 'xl', now, 'xr', rem)
  return math.max(tokens, 0)
end
-- What this report admitted that Redis's bucket has not been charged.
local charge = 0
-- The key's hold (see report_key), read by each key's report.
local hold_until, hold_nodes, hold_now = nil, 0, 0

-- A hash made again by a node that had reported it (made, not first) was
-- lost: the other nodes it last saw on the key still hold their shares,
-- which the hash no longer counts. Until they are back (h live nodes) or
-- their entries would have gone stale (g), every node keeps at most what it
-- holds (the reply's hold), so no share grows on a partial view. A later
-- reporter that saw more nodes raises h. Appends the fields to kv.
local function hold_fields(kv, made, first, seen, now, stale)
  if made and not first and seen > 1 then
    hold_until, hold_nodes = now + stale, seen
    kv[#kv + 1] = 'g'
    kv[#kv + 1] = hold_until
    kv[#kv + 1] = 'h'
    kv[#kv + 1] = hold_nodes
  elseif hold_until and seen > hold_nodes then
    hold_nodes = seen
    kv[#kv + 1] = 'h'
    kv[#kv + 1] = hold_nodes
  end
end

-- 1 while the key's hold lasts; a hold that is over is removed.
local function holding(key, now, live)
  if not hold_until then return 0 end
  if now < hold_until and live < hold_nodes then return 1 end
  redis.call('HDEL', key, 'g', 'h')
  return 0
end

local EXTRA = 4
local MINE = {'e', 'a', 'o', 'd', 'r', 't', 'x', 'q', 'b'}

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
  local seen = tonumber(ARGV[base + K_seen])
  local first = new_a >= cum_a and new_o >= cum_o -- nothing sent before
  -- This node's fields and the key's own: O(1), whatever the node count.
  local get = {'a', 't', 'c', 'k', 'u', 'l', 'n', 'g', 'h'}
  local OWN = #get
  for j, f in ipairs(MINE) do get[OWN + j] = inc .. '|' .. f end
  local v = redis.call('HMGET', key, unpack(get))
  if leaving and not v[1] and not v[3] and new_a == 0 and new_o == 0 then
    -- The hash is gone (expired, evicted, flushed) and nothing of this node
    -- is unreported: no share to hand back, and a write would make it again.
    return {0, 0, 0, 0}
  end
  local now = math.max(wall, tonumber(v[2]) or 0)
  hold_now = now
  local me = nil
  if v[OWN + 1] then
    me = {}
    for j, f in ipairs(MINE) do me[f] = tonumber(v[OWN + j]) end
  end
  local back = me ~= nil and (me.x == nil or me.x < now)

  -- Fold this report in: deltas since what Redis already has.
  local da, doff = 0, 0
  local gone = me ~= nil and me.x == nil
  if gone and epoch <= me.e and cum_a <= me.a and cum_o <= me.o then
    -- A late report of a node that has left: nothing new, nothing to revive.
    return {0, 0, 0, 0}
  end
  -- An entry made again (hash lost, node stale) starts at the rate of what is
  -- new since the node's last report, not its history over one period.
  local again, d0 = false, nil
  local made = not me or epoch > me.e
  if made then
    da, doff = cum_a, cum_o
    -- A lost hash lost the bucket too: charge only what is new.
    charge = (me or first) and cum_a or math.min(cum_a, new_a)
    -- A first report covers about one report period (stale / 3).
    me = {e = epoch, a = cum_a, o = cum_o, d = 0, r = 0, t = now - math.max(1, share_floor(stale / 3))}
    again = not first
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
    d0 = me.d
    local dt = math.max(1, now - me.t)
    me.d = share_ewma(me.d, rate_q(doff, dt), alpha)
    me.r = share_ewma(me.r, rate_q(da, dt), alpha)
    me.t = now
    me.x = now + stale
  end
  if not made then charge = da end
  local total = (tonumber(v[1]) or 0) + da

  -- One HSET: the counters' high-water marks whatever happens next, the
  -- entry unless the node leaves, the key's own fields.
  local kv = {inc .. '|e', me.e, inc .. '|a', me.a, inc .. '|o', me.o, 'a', total, 't', now}
  if not leaving then
    for _, f in ipairs({'d', 'r', 't', 'x'}) do
      kv[#kv + 1] = inc .. '|' .. f
      kv[#kv + 1] = me[f]
    end
  end
  -- A hash made by a node that had reported it was lost, not new: not young.
  local created = tonumber(v[3])
  hold_until, hold_nodes = tonumber(v[8]), tonumber(v[9]) or 0
  if not created then
    created = first and now or now - young
    kv[#kv + 1] = 'c'
    kv[#kv + 1] = created
  end
  hold_fields(kv, not v[3], first, seen, now, stale)
  redis.call('HSET', key, unpack(kv))
  if leaving then drop(key, inc) end
  redis.call('PEXPIRE', key, ttl)

  local computed, extra = tonumber(v[4]), tonumber(v[7]) or 0
  -- A hold that ran out: the stored shares may be a partial view's.
  if leaving or again or me.q == nil or computed == nil or
     (hold_until and now >= hold_until) then
    return compute(key, now, created, extra, back) -- zeros for a leaving node: not live
  end
  if now - computed >= fresh then
    return compute(key, now, created, 0, back)
  end
  -- A demand that moved by a third of itself or more since the stored
  -- shares (a node that stopped: a half), and by more than a quarter of an
  -- even part, computes them again: else a node that stopped would hold its
  -- share a round more, which the others' reports this round can use. At
  -- most EXTRA such a round: O(N) stays the bound.
  local l, moved = tonumber(v[6]) or 1, d0 and math.abs(me.d - d0)
  if extra < EXTRA and moved and moved * 3 >= math.max(me.d, d0) and
     moved * 4 * l > SHARE_ONE - reserve then
    return compute(key, now, created, extra + 1)
  end
  return {me.q, me.b, tonumber(v[5]) or 0, tonumber(v[6]) or 0}
end

local out = {}
for i = 1, #KEYS do
  charge = 0
  hold_until, hold_nodes = nil, 0
  local r = report_key(i)
  r[5] = tiered and fleet(KEYS[i], charge) or 0
  r[6] = leaving and 0 or holding(KEYS[i], hold_now, r[4])
  out[i] = r
end
return out

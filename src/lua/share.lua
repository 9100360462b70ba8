-- SPDX-License-Identifier: MIT
-- The share rule: a line-for-line mirror of src/sync/share.c (the rule itself is
-- documented in src/sync/share.h). The build prepends this file to the scripts
-- that need it, so it defines local functions only: no globals, no redis.*.
-- Redis runs Lua 5.1, whose numbers are doubles: every value below is an
-- integer under 2^53, and integer division is floor(a / b), exact in that
-- range (see share_idiv). On Lua 5.4 every value stays an integer subtype
-- (no / result is kept unfloored). A change to the rule is made here and in
-- sync/share.c together; tests/test_share_lua.c compares them bit for bit on
-- Redis's Lua, tests/test_share_lua54.c on Lua 5.4.

local SHARE_ONE = 16777216          -- 2^24, RL_SHARE_ONE
local SHARE_Q16_ONE = 65536
local SHARE_GAIN_MAX = 1048576      -- 16 in Q16, RL_SHARE_GAIN_MAX
local SHARE_MAX_NODES = 16777216
local SHARE_U32_MAX = 4294967295

local share_floor = math.floor

-- floor(a / b) for integers a >= 0, b >= 1 with a + b < 2^53 (every use
-- here stays below 2^52 + 2^16). a / b is rounded to nearest, but a true
-- quotient q + r/b with r > 0 lies at least 1/b below q + 1, which is more
-- than half an ulp of q + 1 while b * (q + 1) <= a + b < 2^53: it never
-- rounds up to q + 1, and it never rounds below the representable q.
local function share_idiv(a, b)
  return share_floor(a / b)
end

local function share_mod(a, b)
  return a - share_idiv(a, b) * b
end

-- The C side takes uint32_t: make any Lua number the integer C would see
-- after its own clamp (NaN and negatives become 0).
local function share_clamp(x, hi)
  x = tonumber(x) or 0
  if x ~= x or x < 0 then return 0 end
  x = share_floor(x)
  if x > hi then return hi end
  return x
end

local function share_cap_demand(d)
  return share_clamp(d, SHARE_ONE)
end

local function share_cut(over_q, gain_q16, max_cut_q)
  local gain = share_clamp(gain_q16, SHARE_GAIN_MAX)
  local cut = share_idiv(share_clamp(over_q, SHARE_U32_MAX) * gain, SHARE_Q16_ONE)
  local max_cut = share_clamp(max_cut_q, SHARE_ONE)
  if cut < max_cut then return cut end
  return max_cut
end

local function share_ewma(prev, sample, alpha_q16)
  prev = share_cap_demand(prev)
  sample = share_cap_demand(sample)
  local a = share_clamp(alpha_q16, SHARE_Q16_ONE)
  local num = a * sample + (SHARE_Q16_ONE - a) * prev
  local v = share_idiv(num + share_idiv(SHARE_Q16_ONE, 2), SHARE_Q16_ONE)
  -- Plain rounding stalls within 1/(2 alpha) units of the sample: step.
  if v == prev and sample ~= prev and a > 0 then
    if sample > prev then v = prev + 1 else v = prev - 1 end
  end
  return v
end

-- Largest L with sum(min(d[i], L)) <= avail, given sum(d) > avail. tmp is
-- scratch. table.sort is not sync/share.c's heapsort, but sorted values are the
-- same whatever the algorithm.
local function share_water_level(d, n, avail, tmp)
  for i = 1, n do tmp[i] = d[i] end
  table.sort(tmp)
  local left = avail
  for k = 1, n do
    local cnt = n - k + 1
    if tmp[k] * cnt > left then return share_idiv(left, cnt) end
    left = left - tmp[k]
  end
  return SHARE_ONE
end

-- Max-min fair split of avail into fill (d already capped); returns slack.
local function share_water_fill(d, n, avail, fill)
  local total = 0
  for i = 1, n do total = total + d[i] end
  if total <= avail then
    for i = 1, n do fill[i] = d[i] end
    return avail - total
  end
  local level = share_water_level(d, n, avail, fill)
  local used = 0
  for i = 1, n do
    if d[i] < level then used = used + d[i] else used = used + level end
  end
  local left = avail - used
  for i = 1, n do
    if d[i] < level then fill[i] = d[i] else fill[i] = level end
    if d[i] > level and left > 0 then
      fill[i] = fill[i] + 1
      left = left - 1
    end
  end
  return 0
end

local function share_add_floor_and_slack(rate, n, floor_q, slack)
  local per = share_idiv(slack, n)
  local extra = share_mod(slack, n)
  for i = 1, n do
    rate[i] = rate[i] + floor_q + per
    if i <= extra then rate[i] = rate[i] + 1 end
  end
end

local function share_burst_equal(n, burst, out)
  local per = share_idiv(burst, n)
  local extra = share_mod(burst, n)
  for i = 1, n do
    out[i] = per
    if i <= extra then out[i] = per + 1 end
  end
end

-- The k-th largest of a[1..n] (1 <= k <= n), sorting a in place. table.sort
-- is not sync/share.c's heapsort, but ties are broken by index afterwards, so
-- only the value matters.
local function share_kth_largest(a, n, k)
  table.sort(a)
  return a[n - k + 1]
end

local function share_count_above(a, n, t)
  local c = 0
  for i = 1, n do
    if a[i] > t then c = c + 1 end
  end
  return c
end

-- Largest-remainder split of burst in proportion to rate into out (also the
-- scratch for the cut-off remainder). burst * r can pass 2^53: with
-- burst = bq * total + br, floor(burst * r / total) is
-- bq * r + floor(br * r / total) and the remainder is (br * r) mod total.
-- (br * r < 2^48, the quotient inlined for speed.)
local function share_burst_by_share(rate, n, burst, total, out)
  local bq = share_idiv(burst, total)
  local br = burst - bq * total
  local given = 0
  for i = 1, n do
    given = given + bq * rate[i] + share_floor(br * rate[i] / total)
  end
  -- left < n: the fractional parts sum to left, each below 1.
  local left = burst - given
  local t = total
  local at_t = 0
  if left > 0 then
    for i = 1, n do
      local x = br * rate[i]
      out[i] = x - share_floor(x / total) * total
    end
    t = share_kth_largest(out, n, left)
    at_t = left - share_count_above(out, n, t)
  end
  -- Every remainder above t wins; ties at t go to the lowest indices.
  for i = 1, n do
    local x = br * rate[i]
    local q = share_floor(x / total)
    local rem = x - q * total
    out[i] = bq * rate[i] + q
    if rem > t or (rem == t and at_t > 0) then
      out[i] = out[i] + 1
      if rem == t then at_t = at_t - 1 end
    end
  end
end

-- 1 <= burst < n: one token each to the burst nodes with the largest rate,
-- ties to the lowest indices.
local function share_burst_to_largest(rate, n, burst, out)
  for i = 1, n do out[i] = rate[i] end
  local t = share_kth_largest(out, n, burst)
  local at_t = burst - share_count_above(out, n, t)
  for i = 1, n do
    out[i] = 0
    if rate[i] > t or (rate[i] == t and at_t > 0) then
      out[i] = 1
      if rate[i] == t then at_t = at_t - 1 end
    end
  end
end

-- Step 7: a node without a token cannot admit, so its rate goes to the
-- holders in proportion to theirs. held > 0 whenever freed > 0: holders
-- have the largest rates, so if all theirs were 0 every rate would be, and
-- the equal split of nothing changes nothing.
local function share_hand_over_rate(rate, n, tokens)
  local freed, held = 0, 0
  for i = 1, n do
    if tokens[i] > 0 then held = held + rate[i] else freed = freed + rate[i] end
  end
  if freed == 0 then return end
  local given = 0
  for i = 1, n do
    if tokens[i] > 0 then given = given + share_idiv(freed * rate[i], held) end
  end
  local left = freed - given
  for i = 1, n do
    if tokens[i] == 0 then
      rate[i] = 0
    else
      rate[i] = rate[i] + share_idiv(freed * rate[i], held)
      if left > 0 then
        rate[i] = rate[i] + 1
        left = left - 1
      end
    end
  end
end

-- Steps 6 and 7.
local function share_split_burst(rate, n, burst, out)
  if burst == 0 then
    -- Nobody holds a token and nobody could take the rate: step 5's rates
    -- stand (the library always leases at least one token).
    share_burst_equal(n, 0, out)
    return
  end
  if burst < n then
    share_burst_to_largest(rate, n, burst, out)
    share_hand_over_rate(rate, n, out)
    return
  end
  -- One token each first: a bucket with none admits nothing at any rate,
  -- and a new or idle node's floor is there so that it can admit.
  local rest = burst - n
  local total = 0
  for i = 1, n do total = total + rate[i] end
  if total == 0 then
    share_burst_equal(n, rest, out)
  else
    share_burst_by_share(rate, n, rest, total, out)
  end
  for i = 1, n do out[i] = out[i] + 1 end
end

-- Split one key's limit among #demand nodes. Returns two arrays (1-based,
-- node i of demand is entry i): rate shares in 1/2^24 and burst tokens.
-- Raises an error beyond SHARE_MAX_NODES nodes, where C returns RL_ERANGE.
local function share_compute(burst, reserve_q, over_q, gain_q16, max_cut_q, demand)
  local n = #demand
  local rate, tokens = {}, {}
  if n == 0 then return rate, tokens end
  if n > SHARE_MAX_NODES then error('share_compute: too many nodes') end
  local d = {}
  for i = 1, n do d[i] = share_cap_demand(demand[i]) end
  local floor_q = share_idiv(share_clamp(reserve_q, SHARE_ONE), n)
  local room = SHARE_ONE - floor_q * n
  local cut = share_cut(over_q, gain_q16, max_cut_q)
  local avail = 0
  if cut < room then avail = room - cut end
  local slack = share_water_fill(d, n, avail, rate)
  share_add_floor_and_slack(rate, n, floor_q, slack)
  share_split_burst(rate, n, share_clamp(burst, SHARE_U32_MAX), tokens)
  return rate, tokens
end

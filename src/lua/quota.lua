-- SPDX-License-Identifier: MIT
-- A quota's charge (or read): one atomic step of a durable ledger, with the
-- request id remembered so a retried charge is never counted twice. It
-- uses nothing of share.lua, so the build does not prepend it.
--
-- KEYS[1]  {prefix:q1:quota:<key>}:p:<start>  the counter of the period
--          holding the node's clock (start in Unix ms): one per period
-- KEYS[2]  {prefix:q1:quota:<key>}:r:<id>  the request id's answer (charge;
--          a read passes KEYS[1] again and never touches it)
-- KEYS[3], KEYS[4]  the counters of the periods before and after KEYS[1]'s
-- Every key a call may touch is declared: Redis TIME decides the period,
-- so the node names the three around its own clock and the script takes
-- the one holding Redis's now.
-- ARGV     1 op: c (charge) or g (read)   2 cost   3 amount
--          4 period (RL_PERIOD_*: 0 hour 1 day 2 week 3 month 4 fixed)
--          5 fixed period ms   6 dedup ms
--          7 time override ms (tests; 0: Redis TIME, the only clock)
-- Returns  {allowed, used, reset ms, duplicate}: allowed 1/0, the period's
--          usage after the charge, its end (Unix ms), 1 when the id's first
--          answer is being repeated; or {-1, now ms} having touched
--          nothing when none of the three counters is Redis's period (the
--          node's clock is a period or more off: it asks again from now).
-- A counter lives until its period's end plus the dedup window, so a retry
-- near a boundary still finds the answer it was given. Numbers are doubles
-- (Lua 5.1): amounts stay below 2^53 (RL_QUOTA_AMOUNT_MAX). Each goes to
-- Redis as a %d string (string.format's %d is a C long here, exact below
-- 2^53; integral values print as %.0f would), or as the C side sent it:
-- Redis 7.0 turns a Lua number into an argument with %.17g, and %.0f, %.17g
-- cost several times %d.
local op, cost, amount = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local kind, fixed, dedup = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local now = tonumber(ARGV[7])
local floor = math.floor

if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
end

-- src/quota/period.c, line for line: H. Hinnant's civil calendar on day
-- numbers from 1970 on.
local function days_from_civil(y, m, d)
  if m <= 2 then
    y = y - 1
  end
  local era = floor(y / 400)
  local yoe = y - era * 400
  local mm = m + 9
  if m > 2 then mm = m - 3 end
  local doy = floor((153 * mm + 2) / 5) + d - 1
  local doe = yoe * 365 + floor(yoe / 4) - floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end

local function civil_from_days(z)
  z = z + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local m = mp - 9
  if mp < 10 then m = mp + 3 end
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return y, m
end

local HOUR, DAY = 3600000, 86400000
local function period(t)
  local day = floor(t / DAY)
  if kind == 0 then
    local s = floor(t / HOUR) * HOUR
    return s, s + HOUR
  elseif kind == 1 then
    return day * DAY, day * DAY + DAY
  elseif kind == 2 then
    local monday = day - (day + 3) % 7
    local s = monday * DAY
    if s < 0 then s = 0 end
    return s, (monday + 7) * DAY
  elseif kind == 3 then
    local y, m = civil_from_days(day)
    local ny, nm = y, m + 1
    if m == 12 then ny, nm = y + 1, 1 end
    return days_from_civil(y, m, 1) * DAY, days_from_civil(ny, nm, 1) * DAY
  end
  local s = floor(t / fixed) * fixed
  return s, s + fixed
end

local start, reset = period(now)
local suffix = ':p:' .. string.format('%d', start)
local counter
for _, k in ipairs({KEYS[1], KEYS[3], KEYS[4]}) do
  if string.sub(k, -#suffix) == suffix then
    counter = k
    break
  end
end
if counter == nil then
  return {-1, now}
end
local used = tonumber(redis.call('GET', counter) or '0')
if op == 'g' then
  return {1, used, reset, 0}
end

-- The answer is decided first, then remembered with SET NX: a second
-- charge of the same id finds it and is answered the same, charging
-- nothing, whatever happened to the counter in between.
local allowed = 0
if used + cost <= amount then
  allowed = 1
  used = used + cost
end
local answer = string.format('%d:%d:%d', allowed, used, reset)
if not redis.call('SET', KEYS[2], answer, 'NX', 'PX', ARGV[6]) then
  local first = redis.call('GET', KEYS[2])
  local a, u, r = string.match(first or '', '^(%d):(%d+):(%d+)$')
  if a == nil then
    return redis.error_reply('ERR quota: request id key holds no answer')
  end
  return {tonumber(a), tonumber(u), tonumber(r), 1}
end
if allowed == 1 then
  -- Strings, not numbers: Lua 5.1 prints a number past 10^14 as 1e+14.
  redis.call('INCRBY', counter, ARGV[2])
  -- Relative to the script's now, so a test's moved clock (ARGV[7]) ages
  -- keys as Redis's own would.
  redis.call('PEXPIRE', counter, string.format('%d', reset - now + dedup))
end
return {allowed, used, reset, 0}

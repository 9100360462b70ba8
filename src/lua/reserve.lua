-- SPDX-License-Identifier: MIT
-- A reservation on an exact (or tiered) key: exact.lua's bucket, reserved
-- and settled atomically, with a record of the reservation beside it.
--
-- KEYS[1]  the key's hash (redis/keys.h): exact.lua's bucket, the same
--          fields (xn xl xr xc xf) in the same units, so rl_check and
--          rl_reserve on one key share one budget.
-- KEYS[2]  the reservation's record, <KEYS[1]>:r:<32 hex> (one hash tag):
--          'h<estimate>' while held, 's<actual>' once settled; PX the
--          reservation's ttl plus a margin. A record that expires held was
--          settled at its estimate: the bucket keeps the estimate charged.
-- ARGV     op ('r' reserve, 's' settle), amount (the estimate, or the
--          actual), rate count, period in us, burst, the bucket's TTL in
--          ms (as exact.lua's), the record's PX in ms, the deepest debt in
--          tokens (the C side keeps (burst + debt) x period_us + rate below
--          2^53), now in us (0: Redis TIME; simulations only).
-- Returns  reserve: {allowed 0/1, tokens left, us until amount tokens are
--          there (0 when allowed), us until the bucket is full}; a record
--          that exists already (a reserve sent twice) is admitted again
--          without a charge.
--          settle: {0 settled now, tokens left, the estimate, us until
--          full} or {1 settled before (the record says so: charged once),
--          tokens, the first actual, 0} or {2 no record (expired, lost with
--          Redis's data, or its tombstone gone): nothing charged, 0, 0, 0}.
local call = redis.call
local op = ARGV[1]
local amount = tonumber(ARGV[2])
local rate = tonumber(ARGV[3])
local per = tonumber(ARGV[4])
local burst = tonumber(ARGV[5])
local ttl = tonumber(ARGV[6])
local debt = tonumber(ARGV[8])

local rec = call('GET', KEYS[2])
if op == 's' then
  if rec == false then return {2, 0, 0, 0} end
  if string.sub(rec, 1, 1) == 's' then
    return {1, 0, tonumber(string.sub(rec, 2)), 0}
  end
end

local now = tonumber(ARGV[9] or 0)
if now == 0 then
  local t = call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local v = call('HMGET', KEYS[1], 'xn', 'xl', 'xr', 'xc')
local tokens, last, rem, charged = burst, now, 0, 0
local made = v[1] == false
if not made then
  tokens = tonumber(v[1])
  last = tonumber(v[2])
  rem = tonumber(v[3])
  charged = tonumber(v[4]) or 0
end
if now < last then now = last end

-- floor(a / b) for integers a, b < 2^53 (exact.lua's).
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

-- exact.lua's refill, line for line.
if tokens >= burst then
  tokens, rem = burst, 0
else
  local elapsed = now - last
  local need = (burst - tokens) * per - rem
  if elapsed * rate >= need then
    tokens, rem = burst, 0
  else
    local acc = elapsed * rate + rem
    local add = idiv(acc, per)
    tokens = tokens + add
    rem = acc - add * per
  end
end

local f = string.format
local first = 0
local est = 0
if op == 'r' then
  if rec ~= false then
    first = 1 -- a reserve sent twice: admitted once
  elseif amount > tokens then
    local wait = idiv((amount - tokens) * per - rem + rate - 1, rate)
    local full = 0
    if tokens < burst then full = idiv((burst - tokens) * per - rem + rate - 1, rate) end
    return {0, math.max(tokens, 0), wait, full}
  else
    tokens = tokens - amount
    charged = charged + amount
    call('SET', KEYS[2], 'h' .. f('%d', amount), 'PX', ARGV[7])
  end
else
  -- A settle: the difference either way, debt past the burst allowed
  -- down to -debt, a refund never past the burst.
  est = tonumber(string.sub(rec, 2))
  tokens = tokens - (amount - est)
  charged = charged + (amount - est)
  if tokens >= burst then tokens, rem = burst, 0 end
  if tokens < -debt then tokens = -debt end
  local left = call('PTTL', KEYS[2])
  if left < 1 then left = 1 end
  call('SET', KEYS[2], 's' .. f('%d', amount), 'PX', left)
end

local full = 0
if tokens < burst then full = idiv((burst - tokens) * per - rem + rate - 1, rate) end
if first == 0 then
  if made then
    call('HSET', KEYS[1], 'xn', f('%d', tokens), 'xl', f('%d', now), 'xr', f('%d', rem),
      'xc', f('%d', charged), 'xf', f('%d', now))
  else
    call('HSET', KEYS[1], 'xn', f('%d', tokens), 'xl', f('%d', now), 'xr', f('%d', rem),
      'xc', f('%d', charged))
  end
  -- Never shorten it (exact.lua's rule), and never let a debt expire
  -- unpaid: the key lives at least until it is full again.
  local keep = idiv(full + 999, 1000) + 1000
  if keep < ttl then keep = ttl end
  if call('PTTL', KEYS[1]) < keep then call('PEXPIRE', KEYS[1], f('%d', keep)) end
end
if op == 'r' then return {1, math.max(tokens, 0), 0, full} end
return {0, math.max(tokens, 0), est, full}

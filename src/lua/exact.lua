-- SPDX-License-Identifier: MIT
-- One exact check (mode=exact): an atomic token bucket in Redis.
-- It uses nothing of share.lua, so the build does not prepend it: every
-- EVALSHA runs the whole text, and each line costs every check
-- (bench/README.md, "Exact mode", measures the choices below).
--
-- KEYS[1]  the key's hash, {prefix:v1:limit:vshard}:k:<hex> (redis/keys.h):
--          the same name the global tier uses, so one key has one ledger.
-- ARGV     cost (0: peek, nothing charged), rate count, period in
--          microseconds, burst, TTL in ms (the C side makes it at least
--          the time to refill a whole burst; a longer TTL the key has is
--          kept), now in us (0: Redis TIME; simulations only).
-- Fields   xn tokens, xl last refill (us, Redis TIME), xr the refill
--          remainder (token-us: rate x elapsed not yet a whole token),
--          xf first check (us, written once, when this script makes the
--          key), xc tokens charged since the key was made.
--          A tiered key (mode=tiered) shares them with report.lua, which
--          charges the bucket what the nodes admitted locally: one ledger.
--          xn may then be below zero (admitted before Redis heard of it),
--          and xf, xc may be missing (report.lua made the key).
-- Returns  {allowed 0/1, tokens left, us until cost tokens are there (0
--          when allowed), us until the bucket is full}.
--
-- Integer arithmetic only: every value stays below 2^53 because the C side
-- admits an exact limit only when burst x period_us + rate < 2^53
-- (local/limitdef.c), so a double holds each one exactly. Redis TIME is the only
-- clock, kept monotonic per key with max(last, now). Over any interval the
-- bucket mints exactly floor(rate x elapsed / period) tokens (the remainder
-- carries), so the fleet admits at most burst + rate x elapsed.
-- Written back as %d strings: Redis 7.0 turns a Lua number into a command
-- argument with %.17g, several times slower than %d (string.format's %d
-- is a C long here, exact below 2^53); the TTL goes on as the C side sent it.
local call = redis.call
local cost = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local per = tonumber(ARGV[3])
local burst = tonumber(ARGV[4])
local ttl = tonumber(ARGV[5])

local now = tonumber(ARGV[6] or 0)
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
if now < last then now = last end -- a wall clock: never back

-- floor(a / b) for integers a, b < 2^53, corrected for the division's rounding.
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

if tokens >= burst then
  tokens, rem = burst, 0
else
  local elapsed = now - last
  -- Past the time to fill up, the bucket is full: the product stays small.
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

local allowed = 0
if cost == 0 then
  if tokens >= 1 then allowed = 1 end
elseif cost <= tokens then
  tokens = tokens - cost
  charged = charged + cost
  allowed = 1
end

local wait = 0
if allowed == 0 then
  local want = cost
  if want == 0 then want = 1 end
  wait = idiv((want - tokens) * per - rem + rate - 1, rate)
end
local full = 0
if tokens < burst then full = idiv((burst - tokens) * per - rem + rate - 1, rate) end

if cost > 0 then
  local f = string.format
  if made then
    call('HSET', KEYS[1], 'xn', f('%d', tokens), 'xl', f('%d', now), 'xr', f('%d', rem),
      'xc', f('%d', charged), 'xf', f('%d', now))
  else
    call('HSET', KEYS[1], 'xn', f('%d', tokens), 'xl', f('%d', now), 'xr', f('%d', rem),
      'xc', f('%d', charged))
  end
  -- Never shorten the TTL: a tiered key's hash also holds report.lua's
  -- node entries, which may need longer than this bucket's refill time.
  if call('PTTL', KEYS[1]) < ttl then call('PEXPIRE', KEYS[1], ARGV[5]) end
end
return {allowed, math.max(tokens, 0), wait, full}

-- SPDX-License-Identifier: MIT
-- Baseline (d) of rl_bench: the centralized design's per-request atomic
-- token bucket. One EVALSHA per request; Redis runs it atomically, so the
-- read-refill-charge-write below needs no other coordination.
-- KEYS[1]: the bucket. ARGV: tokens per second, burst, cost.
-- Returns 1 (allowed) or 0 (denied).
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2]) -- microseconds
local s = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(s[1])
local ts = tonumber(s[2])
if tokens == nil or ts == nil then
  tokens = burst
  ts = now
end
if now > ts then
  tokens = math.min(burst, tokens + (now - ts) * rate / 1000000)
end
local allowed = 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
-- Idle buckets expire once they would be full again.
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return allowed

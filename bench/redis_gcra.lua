-- The Redis baseline of bench/run.sh: GCRA in one Lua script, the way people usually
-- rate-limit with Redis (the shape of rwz/redis-gcra and go-redis/redis_rate, which many
-- libraries copy): the theoretical arrival time (TAT) is one string key, the clock is Redis's
-- own TIME, a denial writes nothing, an admission sets the key with an expiry at the moment
-- the key would be fresh again. Called by EVALSHA:
--   KEYS[1] the key; ARGV burst, rate (requests per period), period (seconds), cost
-- Returns {allowed (0/1), remaining, retry_after_ms, reset_after_ms}.
local key = KEYS[1]
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

-- microseconds since the epoch: exact in a double up to 2^53
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local interval = period * 1000000 / rate -- emission interval T
local tolerance = interval * burst       -- tau
local increment = interval * cost

local tat = tonumber(redis.call('GET', key))
if not tat or tat < now then
  tat = now
end

local new_tat = tat + increment
local allow_at = new_tat - tolerance
if now < allow_at then
  local remaining = math.floor((tolerance - (tat - now)) / interval)
  if remaining < 0 then remaining = 0 end
  return {0, remaining, math.ceil((allow_at - now) / 1000), math.ceil((tat - now) / 1000)}
end

local reset_after = new_tat - now
redis.call('SET', key, string.format('%d', new_tat), 'PX', math.ceil(reset_after / 1000))
return {1, math.floor((tolerance - reset_after) / interval), 0, math.ceil(reset_after / 1000)}

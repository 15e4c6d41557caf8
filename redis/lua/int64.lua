-- int64.lua: exact signed 64-bit integers for the tokentriage scripts.
--
-- This is a prelude, not a script: the build prepends it to gcra.lua and to window.lua, and the
-- concatenation is what Redis runs (see redis/CMakeLists.txt and docs/redis.md).
--
-- Why: Redis runs Lua 5.1, whose only number is an IEEE double, exact for integers up to 2^53.
-- A nanosecond timestamp is about 2^60 and a state may be any int64, so no int64 ever lives in
-- one Lua number here. A value is a pair (h, l) meaning h * 2^32 + l with 0 <= l < 2^32; h is
-- in [-2^31, 2^31) for an int64, and in [0, 2^32) for the unsigned magnitudes the multiply and
-- divide work on. The 32-bit split is the packed window layout's own ([index:32][prev:16]
-- [curr:16]), so unpacking a window state is free. Every intermediate is an integer below 2^53,
-- so every operation is exact; sums saturate at the int64 bounds exactly as ratealg.c does.
-- Values cross the Redis boundary as decimal strings.

local floor = math.floor
local B16 = 65536
local B32 = 4294967296
local MAXH, MAXL = 2147483647, 4294967295 -- INT64_MAX
local MINH = -2147483648 -- INT64_MIN is (MINH, 0)
local NS = 1000000000

local function lt(ah, al, bh, bl)
  return ah < bh or (ah == bh and al < bl)
end

local function split16(x)
  local hi = floor(x / B16)
  return hi, x - hi * B16
end

-- a Lua integer n with |n| < 2^53
local function from_num(n)
  local h = floor(n / B32)
  return h, n - h * B32
end

local function neg(h, l)
  if l == 0 then return 0 - h, 0 end
  return -h - 1, B32 - l
end

-- unsaturated sum and difference of two pairs (mathematical, any h)
local function addr(ah, al, bh, bl)
  local h, l = ah + bh, al + bl
  if l >= B32 then return h + 1, l - B32 end
  return h, l
end

local function subr(ah, al, bh, bl)
  local h, l = ah - bh, al - bl
  if l < 0 then return h - 1, l + B32 end
  return h, l
end

local function clamp(h, l)
  if h > MAXH then return MAXH, MAXL end
  if h < MINH then return MINH, 0 end
  return h, l
end

-- saturating int64 a + b and a - b: the exact result, clamped, which is what sat_add/sat_sub give
local function add(ah, al, bh, bl)
  return clamp(addr(ah, al, bh, bl))
end

local function sub(ah, al, bh, bl)
  return clamp(subr(ah, al, bh, bl))
end

-- unsigned 64 x 64 -> 128 bits as four 32-bit limbs, high first, through 16-bit digits (no
-- table: this runs several times per decision)
local function umul(ah, al, bh, bl)
  local a3, a2 = split16(ah)
  local a1, a0 = split16(al)
  local b3, b2 = split16(bh)
  local b1, b0 = split16(bl)
  local t, k, d0, d1, d2, d3, d4, d5, d6
  t = a0 * b0; k = floor(t / B16); d0 = t - k * B16
  t = a1 * b0 + a0 * b1 + k; k = floor(t / B16); d1 = t - k * B16
  t = a2 * b0 + a1 * b1 + a0 * b2 + k; k = floor(t / B16); d2 = t - k * B16
  t = a3 * b0 + a2 * b1 + a1 * b2 + a0 * b3 + k; k = floor(t / B16); d3 = t - k * B16
  t = a3 * b1 + a2 * b2 + a1 * b3 + k; k = floor(t / B16); d4 = t - k * B16
  t = a3 * b2 + a2 * b3 + k; k = floor(t / B16); d5 = t - k * B16
  t = a3 * b3 + k; k = floor(t / B16); d6 = t - k * B16
  return k * B16 + d6, d5 * B16 + d4, d3 * B16 + d2, d1 * B16 + d0
end

-- signed int64 product: h, l, or nil when it leaves int64 (__builtin_mul_overflow)
local function mul(ah, al, bh, bl)
  if ah >= 0 and bh >= 0 and ah < 2097152 and bh < 2097152 then -- both below 2^53
    local p = (ah * B32 + al) * (bh * B32 + bl)
    if p < 4503599627370496 then return from_num(p) end -- below 2^52: the double is exact
  end
  local negative = false
  if ah < 0 then ah, al = neg(ah, al); negative = true end
  if bh < 0 then bh, bl = neg(bh, bl); negative = not negative end
  local p3, p2, p1, p0 = umul(ah, al, bh, bl)
  if p3 ~= 0 or p2 ~= 0 then return nil end
  if negative then
    if p1 > 2147483648 or (p1 == 2147483648 and p0 > 0) then return nil end
    return neg(p1, p0)
  end
  if p1 > MAXH then return nil end
  return p1, p0
end

-- floor(X / d) and X mod d for X = x2 * 2^64 + x1 * 2^32 + x0 when the quotient is known to be
-- below 2^28: a double estimate is then off by at most one, and the exact remainder fixes it.
local function udiv_est(x2, x1, x0, dh, dl)
  local q = floor(((x2 * B32 + x1) * B32 + x0) / (dh * B32 + dl))
  local _, s2, s1, s0 = umul(0, q, dh, dl)
  local rh, rl = subr((x2 - s2) * B32 + x1 - s1, x0, 0, s0)
  while rh < 0 do q = q - 1; rh, rl = addr(rh, rl, dh, dl) end
  while not lt(rh, rl, dh, dl) do q = q + 1; rh, rl = subr(rh, rl, dh, dl) end
  return q, rh, rl
end

-- unsigned a / d for a < 2^64, 0 < d < 2^63: qh, ql, rh, rl
local function udivmod(ah, al, dh, dl)
  if ah < 1048576 and dh < 1048576 then -- a, d < 2^52: one exact double division, corrected
    local a, d = ah * B32 + al, dh * B32 + dl
    local q = floor(a / d)
    local r = a - q * d
    if r < 0 then q = q - 1; r = r + d elseif r >= d then q = q + 1; r = r - d end
    local qh, ql = from_num(q)
    local rh, rl = from_num(r)
    return qh, ql, rh, rl
  end
  if dh >= 16 then -- d >= 2^36, so the quotient is below 2^28
    local q, rh, rl = udiv_est(0, ah, al, dh, dl)
    return 0, q, rh, rl
  end
  local d = dh * B32 + dl
  -- d < 2^36: long division by 16-bit digits; each partial dividend stays below 2^52
  local a3, a2 = split16(ah)
  local a1, a0 = split16(al)
  local q3, q2, q1, q0, t
  q3 = floor(a3 / d); local r = a3 - q3 * d
  t = r * B16 + a2; q2 = floor(t / d); r = t - q2 * d
  if r < 0 then q2 = q2 - 1; r = r + d elseif r >= d then q2 = q2 + 1; r = r - d end
  t = r * B16 + a1; q1 = floor(t / d); r = t - q1 * d
  if r < 0 then q1 = q1 - 1; r = r + d elseif r >= d then q1 = q1 + 1; r = r - d end
  t = r * B16 + a0; q0 = floor(t / d); r = t - q0 * d
  if r < 0 then q0 = q0 - 1; r = r + d elseif r >= d then q0 = q0 + 1; r = r - d end
  local rh, rl = from_num(r)
  return q3 * B16 + q2, q1 * B16 + q0, rh, rl
end

-- floor division and modulo of a signed a by a positive d: qh, ql, rh, rl with 0 <= r < d
local function fdivmod(ah, al, dh, dl)
  if ah >= 0 then return udivmod(ah, al, dh, dl) end
  local mh, ml = neg(ah, al)
  local qh, ql, rh, rl = udivmod(mh, ml, dh, dl)
  qh, ql = neg(qh, ql)
  if rh == 0 and rl == 0 then return qh, ql, 0, 0 end
  qh, ql = subr(qh, ql, 0, 1)
  rh, rl = subr(dh, dl, rh, rl)
  return qh, ql, rh, rl
end

-- ceil(x / d) for a small positive d, 0 when x <= 0, as a Lua number (callers keep it < 2^53)
local function ceil_div(h, l, d)
  if h < 0 or (h == 0 and l == 0) then return 0 end
  local qh, ql, rh, rl = udivmod(h, l, 0, d)
  local q = qh * B32 + ql
  if rh ~= 0 or rl ~= 0 then q = q + 1 end
  return q
end

-- ra_ceil_s: whole seconds, rounded up (at most 9223372037, exact)
local function ceil_s(h, l)
  return ceil_div(h, l, NS)
end

-- hi x 10^9 + lo as a pair, for 0 <= hi < 2^34 and 0 <= lo < 10^9 (a decimal's halves, or
-- TIME's seconds and nanoseconds): hi is split at 2^16 so that every product is exact
local function billions(hi, lo)
  local q, r = split16(hi)
  local a1, a0 = split16(q * NS) -- hi x 10^9 = q x 10^9 x 2^16 + r x 10^9
  local h, l = from_num(a0 * B16 + r * NS + lo)
  return h + a1, l
end

-- decimal text -> h, l; nil for anything but an optional '-' and 1..19 digits within int64
local function parse(s)
  if type(s) ~= 'string' then return nil end
  local sign, digits = string.match(s, '^(%-?)(%d+)$')
  if not digits or #digits > 19 then return nil end
  local n, mh, ml = #digits, 0, 0
  if n <= 15 then -- below 10^15 < 2^53: one exact number
    mh, ml = from_num(tonumber(digits))
  else -- hi x 10^9 + lo, with hi (at most 10 digits) split at 2^16 so every product is exact
    mh, ml = billions(tonumber(string.sub(digits, 1, n - 9)), tonumber(string.sub(digits, n - 8)))
    if mh > 2147483648 then return nil end -- beyond 2^63 whatever the sign
  end
  if sign == '-' then
    if mh == 2147483648 and ml > 0 then return nil end
    return neg(mh, ml)
  end
  if mh > MAXH then return nil end
  return mh, ml
end

-- h, l -> decimal text, as C's %lld writes it
local function to_dec(h, l)
  if h >= -2097152 and h < 2097152 then -- |value| <= 2^53: one exact number
    return string.format('%.0f', h * B32 + l)
  end
  local sign = ''
  if h < 0 then sign = '-'; h, l = neg(h, l) end
  local qh, ql, _, r0 = udivmod(h, l, 0, NS)
  local q2h, q2l, _, r1 = udivmod(qh, ql, 0, NS)
  local top = q2h * B32 + q2l
  if top > 0 then return string.format('%s%d%09d%09d', sign, top, r1, r0) end
  if r1 > 0 then return string.format('%s%d%09d', sign, r1, r0) end
  return string.format('%s%d', sign, r0)
end

-- The decision time: ARGV's now when given (tests, the vectors), else the Redis server's clock,
-- so the replicas' own clocks never matter. TIME has microseconds: now = s * 10^9 + us * 1000.
local function decision_now(arg)
  if arg ~= nil and arg ~= '' then return parse(arg) end
  local t = redis.call('TIME')
  return billions(tonumber(t[1]), tonumber(t[2]) * 1000)
end

-- Error replies name the script, the argument and (clipped) what was wrong.
local function bad(script, what, value)
  return redis.error_reply(string.format('tokentriage %s: %s, got %q', script, what,
                                         string.sub(tostring(value), 1, 40)))
end

-- The stored state: 0 when the key is absent; nil and the raw value when it holds anything but
-- an int64 (a GET on a key of another type raises Redis' own WRONGTYPE error).
local function load_state(key)
  local v = redis.call('GET', key)
  if not v then return 0, 0 end
  local h, l = parse(v)
  if h == nil then return nil, v end
  return h, l
end

-- Stores an admitted state. It decides as a fresh key does once `ttl` ns have passed
-- (ra_state_is_idle), so the key expires then, rounded up to whole ms; a state that is already
-- idle is removed. nh is now's high half: a TAT at or before a negative now is not idle.
local function store_state(key, sh, sl, nh, ttl_h, ttl_l)
  local ttl_ms = ceil_div(ttl_h, ttl_l, 1000000)
  if ttl_ms > 0 then
    redis.call('SET', key, to_dec(sh, sl), 'PX', string.format('%.0f', ttl_ms))
  elseif nh >= 0 or (sh == 0 and sl == 0) then
    redis.call('DEL', key)
  else
    redis.call('SET', key, to_dec(sh, sl))
  end
end

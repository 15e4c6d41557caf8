-- int64.lua: exact signed 64-bit integers for the tokentriage scripts, at the cost of doubles.
--
-- This is a prelude, not a script: the build prepends it to gcra.lua and to window.lua, and the
-- concatenation is what Redis runs (see redis/CMakeLists.txt and docs/redis.md).
--
-- Why: Redis runs Lua 5.1, whose only number is an IEEE double, exact for integers up to 2^53.
-- A nanosecond timestamp is about 2^60 and a state may be any int64, so no int64 lives in one
-- Lua number here. A value v is a pair (a, b) of Lua numbers, seconds and nanoseconds:
-- v = a * 10^9 + b with 0 <= b < 10^9 and a = floor(v / 10^9), so a is in
-- [-9223372037, 9223372036] for an int64: both halves are far below 2^53. The base is the
-- decimal one, so what crosses the Redis boundary as decimal text is split and joined by string
-- slicing (no arithmetic), Redis' TIME is a pair already, and whole seconds and milliseconds
-- (retry, reset, the key's PX) come from a and b directly. Sums, differences and comparisons
-- carry between the halves exactly. Products and quotients run as one double when every value
-- is below 2^52 (then the double is exact, or off by one and corrected from the exact
-- remainder); beyond that, wide() builds the exact 32-bit-limb arithmetic for that one call.
-- Every Lua number in here stays an integer below 2^53, so every operation is exact.
--
-- Redis runs this chunk on every call and a Lua call costs what a dozen operations do, so each
-- `local function` below is a closure made per call: the prelude holds only what both scripts
-- use on every call, the scripts inline the pair operations, and the rare wide path is built on
-- demand.

local floor = math.floor
local MAXA, MAXB = 9223372036, 854775807 -- INT64_MAX = MAXA * 10^9 + MAXB
local MINA, MINB = -9223372037, 145224192 -- INT64_MIN = MINA * 10^9 + MINB

-- floor(x / d) and x - q * d for integers |x| < 2^52, 0 < d < 2^52: the double quotient's floor
-- is off by at most one, and q * d stays below 2^53, so the remainder is exact and corrects it
local function fdiv(x, d)
  local q = floor(x / d)
  local r = x - q * d
  if r < 0 then return q - 1, r + d end
  if r >= d then return q + 1, r - d end
  return q, r
end

-- (a, b) -> (h, l) = h * 2^32 + l, 0 <= l < 2^32: the packed window layout's split, and wide's
-- limbs. v = (a1 * 10^9) * 2^16 + a0 * 10^9 + b for a = a1 * 2^16 + a0, each piece exact.
local function hl(a, b)
  local a1 = floor(a / 65536)
  local y = a1 * 1000000000
  local y1 = floor(y / 65536)
  local z = (y - y1 * 65536) * 65536 + (a - a1 * 65536) * 1000000000 + b
  local z1 = floor(z / 4294967296)
  return y1 + z1, z - z1 * 4294967296
end

-- (h, l) -> (a, b), for a signed h (an int64) or 0 <= h < 2^32 (an unsigned magnitude):
-- h = h1 * 2^16 + h0 and 2^48 = 281474 * 10^9 + 976710656
local function ab(h, l)
  local h1 = floor(h / 65536)
  local a, b = fdiv((h - h1 * 65536) * 4294967296 + l + h1 * 976710656, 1000000000)
  return h1 * 281474 + a, b
end

-- Exact products and quotients beyond 2^52, on 32-bit limbs: a value is (h, l) = h * 2^32 + l
-- with 0 <= l < 2^32, h signed for an int64 and in [0, 2^32) for the unsigned magnitudes.
-- Built only when a call needs it (a huge T, tau or cost, a period that is not whole seconds).
local function wide()
  local B16, B32 = 65536, 4294967296
  local W = {}

  local function split16(x)
    local hi = floor(x / B16)
    return hi, x - hi * B16
  end

  local function neg(h, l)
    if l == 0 then return 0 - h, 0 end
    return -h - 1, B32 - l
  end

  local function addl(ah, al, bh, bl)
    local h, l = ah + bh, al + bl
    if l >= B32 then return h + 1, l - B32 end
    return h, l
  end

  local function subl(ah, al, bh, bl)
    local h, l = ah - bh, al - bl
    if l < 0 then return h - 1, l + B32 end
    return h, l
  end

  -- unsigned 64 x 64 -> 128 bits as four 32-bit limbs, high first, through 16-bit digits
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

  -- floor(X / d) and X mod d for X = x2 * 2^64 + x1 * 2^32 + x0 when the quotient is known to
  -- be below 2^28: a double estimate is then off by at most one, and the exact remainder fixes it
  local function udiv_est(x2, x1, x0, dh, dl)
    local q = floor(((x2 * B32 + x1) * B32 + x0) / (dh * B32 + dl))
    local _, s2, s1, s0 = umul(0, q, dh, dl)
    local rh, rl = subl((x2 - s2) * B32 + x1 - s1, x0, 0, s0)
    while rh < 0 do q = q - 1; rh, rl = addl(rh, rl, dh, dl) end
    while rh > dh or (rh == dh and rl >= dl) do q = q + 1; rh, rl = subl(rh, rl, dh, dl) end
    return q, rh, rl
  end

  -- unsigned a / d for a < 2^64, 0 < d < 2^63: qh, ql, rh, rl
  local function udivmod(ah, al, dh, dl)
    if dh >= 16 then -- d >= 2^36, so the quotient is below 2^28
      local q, rh, rl = udiv_est(0, ah, al, dh, dl)
      return 0, q, rh, rl
    end
    -- d < 2^36: long division by 16-bit digits; each partial dividend stays below 2^52
    local d = dh * B32 + dl
    local a3, a2 = split16(ah)
    local a1, a0 = split16(al)
    local q3, r = fdiv(a3, d)
    local q2, q1, q0
    q2, r = fdiv(r * B16 + a2, d)
    q1, r = fdiv(r * B16 + a1, d)
    q0, r = fdiv(r * B16 + a0, d)
    local rh = floor(r / B32)
    return q3 * B16 + q2, q1 * B16 + q0, rh, r - rh * B32
  end

  -- the signed int64 product of two pairs, or nil when it leaves int64 (__builtin_mul_overflow)
  function W.mul(xa, xb, ya, yb)
    local ah, al = hl(xa, xb)
    local bh, bl = hl(ya, yb)
    local negative = false
    if ah < 0 then ah, al = neg(ah, al); negative = true end
    if bh < 0 then bh, bl = neg(bh, bl); negative = not negative end
    local p3, p2, p1, p0 = umul(ah, al, bh, bl)
    if p3 ~= 0 or p2 ~= 0 then return nil end
    if negative then
      if p1 > 2147483648 or (p1 == 2147483648 and p0 > 0) then return nil end
      return ab(neg(p1, p0))
    end
    if p1 > 2147483647 then return nil end
    return ab(p1, p0)
  end

  -- floor(x / d) for 0 <= x, 0 < d, both int64 pairs: a pair
  function W.div(xa, xb, da, db)
    local ah, al = hl(xa, xb)
    local dh, dl = hl(da, db)
    local qh, ql = udivmod(ah, al, dh, dl)
    return ab(qh, ql)
  end

  -- window_load's floor(now / w) mod 2^32 and now mod w, for any int64 now and w > 0
  function W.window(na, nb, wa, wb)
    local nh, nl = hl(na, nb)
    local dh, dl = hl(wa, wb)
    local negative = nh < 0
    if negative then nh, nl = neg(nh, nl) end
    local _, ql, rh, rl = udivmod(nh, nl, dh, dl)
    if negative and (rh ~= 0 or rl ~= 0) then -- floor, not truncation: q = -q - 1, r = d - r
      ql = B32 - ql - 1
      rh, rl = subl(dh, dl, rh, rl)
    elseif negative and ql ~= 0 then
      ql = B32 - ql
    end
    local ea, eb = ab(rh, rl)
    return ql, ea, eb
  end

  -- floor(prev * e / w) for 0 <= prev < 2^16 and 0 <= e < w: the quotient is below prev
  function W.carried(prev, ea, eb, wa, wb)
    local eh, el = hl(ea, eb)
    local dh, dl = hl(wa, wb)
    local _, x2, x1, x0 = umul(0, prev, eh, el)
    return (udiv_est(x2, x1, x0, dh, dl))
  end

  return W
end

-- the signed product of two pairs, or nil when it leaves int64 (__builtin_mul_overflow)
local function mul(xa, xb, ya, yb)
  if xa > -4503599 and xa < 4503599 and ya > -4503599 and ya < 4503599 then -- both below 2^52
    local p = (xa * 1000000000 + xb) * (ya * 1000000000 + yb)
    -- exact below 2^52, and at or above it in magnitude whenever the true product is
    if p < 4503599627370496 and p > -4503599627370496 then return fdiv(p, 1000000000) end
  end
  return wide().mul(xa, xb, ya, yb)
end

-- floor(x / d) for x >= 0 and d > 0, as a reply field: a Lua number below 2^52 (Redis answers
-- it as an integer), else decimal text
local function count(xa, xb, da, db)
  if xa < 4503599 and da < 4503599 then
    return (fdiv(xa * 1000000000 + xb, da * 1000000000 + db))
  end
  if xa < da or (xa == da and xb < db) then return 0 end
  local qa, qb = wide().div(xa, xb, da, db)
  if qa < 4503599 then return qa * 1000000000 + qb end
  return string.format('%d%09d', qa, qb)
end

-- Text -> a, b, or nil unless Lua reads the text as an integer and, from 2^52 up where a double
-- cannot hold it, the text is a plain decimal (digits, an optional sign) ending in nine digits:
-- "twelve", "1.5", "1e18" and "99999999999999999999" are refused, and no value is ever rounded.
-- Below 2^52 the double is exact. Beyond, the last nine digits are b, read from their bytes (no
-- new strings), and the double, within 2^11 of the value, rounds (v - b) / 10^9 to a exactly.
local function parse(s)
  local v = tonumber(s)
  if v == nil or v % 1 ~= 0 then return nil end -- NaN and the infinities too
  if v < 4503599627370496 and v > -4503599627370496 then
    -- |v / 10^9| < 2^23: the quotient is at least 10^-9 from the next integer above, more
    -- than half its double's spacing (2^-30), so its floor is exact without a correction
    local a = floor(v / 1000000000)
    return a, v - a * 1000000000
  end
  if #s < 16 or #s > 20 then return nil end -- 2^52 has 16 digits; a sign and 19 at most
  local n1, n2, n3, n4, n5, n6, n7, n8, n9 = string.byte(s, -9, -1)
  if not tonumber(s, 10) or math.min(n1, n2, n3, n4, n5, n6, n7, n8, n9) < 48 or
      math.max(n1, n2, n3, n4, n5, n6, n7, n8, n9) > 57 then
    return nil -- tonumber(s, 10) refuses all but digits, a sign and spaces
  end
  local m = n1 * 100000000 + n2 * 10000000 + n3 * 1000000 + n4 * 100000 + n5 * 10000 +
            n6 * 1000 + n7 * 100 + n8 * 10 + n9 - 5333333328 -- 48 x 111111111
  if v < 0 then
    local a = floor((-v - m) / 1000000000 + 0.5) -- the magnitude's
    if a > MAXA or (a == MAXA and m > MAXB + 1) then return nil end
    if m == 0 then return -a, 0 end
    return -a - 1, 1000000000 - m
  end
  local a = floor((v - m) / 1000000000 + 0.5)
  if a > MAXA or (a == MAXA and m > MAXB) then return nil end
  return a, m
end

-- a, b -> decimal text, as C's %lld writes it
local function to_dec(a, b)
  if a > 0 then return string.format('%d%09d', a, b) end
  if a == 0 then return string.format('%d', b) end
  if b > 0 then a, b = -a - 1, 1000000000 - b else a = 0 - a end -- the magnitude
  if a == 0 then return string.format('-%d', b) end
  return string.format('-%d%09d', a, b)
end

-- The decision time: ARGV's now when given (tests, the vectors), else the Redis server's clock,
-- so the replicas' own clocks never matter. TIME is seconds and microseconds: a pair already.
local function decision_now(arg)
  if arg ~= '' and arg ~= nil then return parse(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]), tonumber(t[2]) * 1000
end

-- Error replies name the script, the argument and (clipped) what was wrong.
local function bad(script, what, value)
  return redis.error_reply(string.format('tokentriage %s: %s, got %q', script, what,
                                         string.sub(tostring(value), 1, 40)))
end

-- The stored state: 0 when the key is absent; nil and an error reply naming `script` when it
-- holds anything but an int64, or nil and Redis' own error (WRONGTYPE for a key of another
-- type). Errors come back by pcall, so that one operation's bad key answers that operation alone
-- and never aborts the others of its call (a script that raises stops where it is, its writes
-- kept).
local function load_state(script, key)
  local v = redis.pcall('GET', key)
  if not v then return 0, 0 end
  if type(v) == 'table' then return nil, v end
  local a, b = parse(v)
  if a == nil then
    return nil, bad(script, 'key ' .. string.sub(key, 1, 80) .. ' holds no int64 state', v)
  end
  return a, b
end

-- Stores an admitted state, given as text. It decides as a fresh key does once ttl ns have
-- passed (ra_state_is_idle), so the key expires then, rounded up to whole ms (a Lua number:
-- Redis writes it as an integer); a state that is already idle is removed. na is now's
-- seconds: a TAT at or before a negative now is not idle. Returns Redis' error reply (a table,
-- an OOM say) when the write was refused, else nil.
local function store_state(key, text, na, ttl_a, ttl_b)
  local r
  if ttl_a >= 0 and (ttl_a > 0 or ttl_b > 0) then
    local ms = floor((ttl_b + 999999) / 1000000) -- ceil(ttl_b / 10^6), exact below 2^53
    r = redis.pcall('SET', key, text, 'PX', ttl_a * 1000 + ms)
  elseif na >= 0 or text == '0' then
    r = redis.pcall('DEL', key)
  else
    r = redis.pcall('SET', key, text)
  end
  if type(r) == 'table' and r.err then return r end
  return nil
end

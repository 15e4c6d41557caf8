-- window.lua: one fixed_window or sliding_window step on one counter key, atomically
-- (docs/redis.md). Runs after the int64.lua prelude. The arithmetic is ratealg.c's window_step:
-- the packed state [index:32][prev:16][curr:16] from bit 63 down, index = floor(now / w) mod 2^32,
-- and the sliding test prev * (w - elapsed) + (curr + n) * w <= amount * w in exact integers.
-- burst is not read by either algorithm, so it is not an argument.
--
-- KEYS[1]  the counter: absent = state 0, else the packed state as a decimal int64
-- ARGV[1]  "fixed" | "sliding"
-- ARGV[2]  amount, 1..65535 (the packed counters are 16 bits)
-- ARGV[3]  w, the period in ns (> 0)
-- ARGV[4]  now in ns since the epoch, or "" for the Redis server's TIME
-- ARGV[5]  cost
--
-- Reply: {admit, 0, remaining, retry_after_s, reset_after_s, state} as gcra.lua's; a window
-- has no unfittable signal (a cost above amount is simply denied). Only an admission writes.

local flag = ARGV[1]
if flag ~= 'fixed' and flag ~= 'sliding' then
  return bad('window', 'ARGV[1] must be "fixed" or "sliding"', flag)
end
local amh, amount = parse(ARGV[2])
if amh ~= 0 or amount < 1 or amount > 65535 then
  return bad('window', 'ARGV[2] (amount) must be 1..65535', ARGV[2])
end
local wh, wl = parse(ARGV[3])
if wh == nil or wh < 0 or (wh == 0 and wl == 0) then
  return bad('window', 'ARGV[3] (w) must be a positive int64', ARGV[3])
end
local nh, nl = decision_now(ARGV[4])
if nh == nil then
  return bad('window', 'ARGV[4] (now) must be an int64 or empty', ARGV[4])
end
local ch, cl = parse(ARGV[5])
if ch == nil then
  return bad('window', 'ARGV[5] (cost) must be an int64', ARGV[5])
end
local sh, sl = load_state(KEYS[1])
if sh == nil then
  return bad('window', 'key ' .. string.sub(KEYS[1], 1, 80) .. ' holds no int64 state', sl)
end

-- window_load: the current index and elapsed time; the stored counters carry over as they are
-- (same index), shift to prev (the next index), or vanish (anything else, clocks going back too)
local _, index, eh, el = fdivmod(nh, nl, wh, wl)
local stored = sh % B32
local prev, curr = split16(sl)
if stored ~= index then
  if (stored + 1) % B32 == index then prev, curr = curr, 0 else prev, curr = 0, 0 end
end

-- window_room: fixed, amount; sliding, floor((amount*w - prev*(w - e)) / w), which is
-- amount - prev + floor(prev * e / w) with 0 <= prev * e / w < prev (so the quotient is small)
local room = amount
if flag == 'sliding' and prev > 0 then
  local _, x2, x1, x0 = umul(0, prev, eh, el)
  room = amount - prev + udiv_est(x2, x1, x0, wh, wl)
end

local reset = ceil_s(sub(wh, wl, eh, el))
local kh, kl = from_num(room - curr)
if ch >= 0 and not lt(kh, kl, ch, cl) then
  curr = curr + cl -- cost <= room - curr <= 65535 here, so cl is the cost
  local ih = index
  if ih > MAXH then ih = ih - B32 end
  local state_h, state_l = ih, prev * B16 + curr
  -- the window data is gone (a fresh key's (0, 0) loads) once the index has moved on twice
  local rest_h, rest_l = subr(wh, wl, eh, el) -- (w - e) + w, exact below 2^64: no saturation
  store_state(KEYS[1], state_h, state_l, nh, addr(rest_h, rest_l, wh, wl))
  return {1, 0, tostring(room - curr), 0, reset, to_dec(state_h, state_l)}
end
local remaining = room - curr
if remaining < 0 then remaining = 0 end
return {0, 0, tostring(remaining), reset, reset, to_dec(sh, sl)}

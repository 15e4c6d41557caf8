-- window.lua: fixed_window, sliding_window or envoy_window steps, one per key, in order,
-- atomically (docs/redis.md). Runs after the int64.lua prelude. The arithmetic is ratealg.c's
-- window_step: the packed state [index:32][prev:16][curr:16] from bit 63 down, index =
-- floor(now / w) mod 2^32, and the sliding test prev * (w - elapsed) + (curr + n) * w <= amount
-- * w in exact integers; and its envoy_step: [index:32][count:32], count + n <= amount.
-- burst is not read by these algorithms, so it is not an argument.
--
-- One call carries k >= 1 steps, as gcra.lua's: KEYS[j] is the counter of step j (absent =
-- state 0, else the packed state as a decimal int64), and its five arguments follow those of
-- step j - 1 in ARGV:
--   flag     "fixed" | "sliding" | "envoy" | "envoy-settle"
--   amount   1..65535 (the packed counters are 16 bits); envoy: 0..4294967295
--   w        the period in ns (> 0)
--   now      in ns since the epoch, or "" for the Redis server's TIME (read once per call)
--   cost     (envoy-settle: reserved, then actual: six arguments)
-- envoy-settle is ratealg.c's envoy_settle: the count of now's window moves by actual -
-- reserved, never below 0 nor past 2^32 - 1 (a refund, or a charge counted past the limit as
-- INCRBY counts it), and replies {1, 0, 0, 0, 0, state}.
--
-- Reply: an array of k, element j step j's {admit, 0, remaining, retry_after_s, reset_after_s,
-- state} as gcra.lua's (remaining here is always a small integer), or an error reply for that
-- step alone; a window has no unfittable signal (a cost above amount is simply denied). Only an
-- admission writes.

-- the arguments a run of steps on one limit repeats, parsed once (see gcra.lua)
local last_m, amh, amount, last_w, wa, wb, last_n, na, nb

local function one(key, flag, m_arg, w_arg, n_arg, c_arg, y_arg)
  local settle = flag == 'envoy-settle'
  local envoy = flag == 'envoy' or settle
  if flag ~= 'fixed' and flag ~= 'sliding' and not envoy then
    return bad('window', 'ARGV[1] must be "fixed", "sliding", "envoy" or "envoy-settle"', flag)
  end
  if m_arg ~= last_m then
    last_m, amh, amount = m_arg, parse(m_arg)
  end
  local limit = amount -- envoy's reaches 2^32 - 1: seconds and nanoseconds joined
  if envoy then
    if amh == nil or amh < 0 or amh > 4 then
      return bad('window', 'ARGV[2] (amount) must be 0..4294967295', m_arg)
    end
    limit = amh * 1000000000 + amount
    if limit > 4294967295 then
      return bad('window', 'ARGV[2] (amount) must be 0..4294967295', m_arg)
    end
  elseif amh ~= 0 or amount < 1 or amount > 65535 then
    return bad('window', 'ARGV[2] (amount) must be 1..65535', m_arg)
  end
  if w_arg ~= last_w then
    last_w, wa, wb = w_arg, parse(w_arg)
  end
  if wa == nil or wa < 0 or (wa == 0 and wb == 0) then
    return bad('window', 'ARGV[3] (w) must be a positive int64', w_arg)
  end
  if n_arg ~= last_n then
    last_n, na, nb = n_arg, decision_now(n_arg)
  end
  if na == nil then
    return bad('window', 'ARGV[4] (now) must be an int64 or empty', n_arg)
  end
  local ca, cb = parse(c_arg)
  if ca == nil then
    return bad('window', 'ARGV[5] (cost) must be an int64', c_arg)
  end
  local ya, yb
  if settle then
    ya, yb = parse(y_arg)
    if ya == nil then
      return bad('window', 'ARGV[6] (actual) must be an int64', y_arg)
    end
  end
  local sa, sb = load_state('window', key)
  if sa == nil then return sb end

  -- the packed layout splits at bit 32: the state in base 2^32, index and counters in the low half
  local sh, low = hl(sa, sb)
  local stored = sh % 4294967296
  local prev = floor(low / 65536)
  local curr = low - prev * 65536
  if envoy then prev, curr = 0, low end -- [index:32][count:32]

  -- window_load: the current index and elapsed time; the stored counters carry over as they are
  -- (same index), shift to prev (the next index), or vanish (anything else, clocks going back
  -- too). A period of whole seconds divides now's seconds alone: floor((a * 10^9 + b) / (wa *
  -- 10^9)) = floor(a / wa) since b < 10^9, and the elapsed time keeps now's nanoseconds.
  local index, ea, eb
  if wb == 0 then
    local q, r = fdiv(na, wa)
    index, ea, eb = q % 4294967296, r, nb
  else
    index, ea, eb = wide().window(na, nb, wa, wb)
  end
  if stored ~= index then
    if not envoy and (stored + 1) % 4294967296 == index then prev, curr = curr, 0 else prev, curr = 0, 0 end
  end

  -- window_room: fixed, amount; sliding, floor((amount*w - prev*(w - e)) / w), which is
  -- amount - prev + floor(prev * e / w) with 0 <= prev * e / w < prev (so the quotient is small).
  -- Whole seconds: prev * e = (prev * ea + floor(prev * eb / 10^9)) * 10^9 + (a rest below 10^9),
  -- and the rest cannot reach the next multiple of w, so it drops out of the floor.
  local room = limit
  if flag == 'sliding' and prev > 0 then
    local carried, p
    if ea < 4503599 and wa < 4503599 then p = prev * (ea * 1000000000 + eb) end
    if p and p < 4503599627370496 then
      carried = fdiv(p, wa * 1000000000 + wb)
    elseif wb == 0 then
      carried = fdiv(prev * ea + fdiv(prev * eb, 1000000000), wa)
    else
      carried = wide().carried(prev, ea, eb, wa, wb)
    end
    room = amount - prev + carried
  end

  local ra, rb = wa - ea, wb - eb -- w - e > 0
  if rb < 0 then ra, rb = ra - 1, rb + 1000000000 end
  local reset = rb > 0 and ra + 1 or ra
  if settle then -- the count moves by actual - reserved (ra_settle's sat_sub, then clamped)
    local da, db = ya - ca, yb - cb
    local delta
    if da > 5 then delta = 5000000000 elseif da < -5 then delta = -5000000000
    else delta = da * 1000000000 + db end
    curr = curr + delta
    if curr < 0 then curr = 0 elseif curr > 4294967295 then curr = 4294967295 end
    local ih = index
    if ih >= 2147483648 then ih = ih - 4294967296 end
    local text = to_dec(ab(ih, curr))
    if curr > 0 or text ~= to_dec(sa, sb) then
      local e = store_state(key, text, na, ra, rb)
      if e then return e end
    end
    return {1, 0, 0, 0, 0, text}
  end
  local fits = ca == 0 and cb <= room - curr -- 0 <= cost <= room - curr
  if envoy and ca > 0 and ca < 5 then -- an envoy count reaches 2^32 - 1: cost below 5 x 10^9
    cb = ca * 1000000000 + cb
    fits = cb <= room - curr
  end
  if fits then
    curr = curr + cb
    local ih = index
    if ih >= 2147483648 then ih = ih - 4294967296 end -- the top bit is the int64's sign
    local text = to_dec(ab(ih, prev * 65536 + curr))
    -- the window data is gone (a fresh key's (0, 0) loads) once the index has moved on twice:
    -- after (w - e) + w, exact below 2^64; an envoy count once the window ends, after w - e
    if not envoy then
      ra, rb = ra + wa, rb + wb
      if rb >= 1000000000 then ra, rb = ra + 1, rb - 1000000000 end
    end
    local e = store_state(key, text, na, ra, rb)
    if e then return e end
    return {1, 0, room - curr, 0, reset, text}
  end
  local remaining = room - curr
  if remaining < 0 then remaining = 0 end
  return {0, 0, remaining, reset, reset, to_dec(sa, sb)}
end

local out, i = {}, 1
for j = 1, #KEYS do
  local flag = ARGV[i]
  out[j] = one(KEYS[j], flag, ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5])
  i = i + (flag == 'envoy-settle' and 6 or 5)
end
return out

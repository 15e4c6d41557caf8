-- gcra.lua: one GCRA step, or one settle, on one counter key, atomically (docs/redis.md).
-- Runs after the int64.lua prelude. The arithmetic is ratealg.c's gcra_step and ra_settle,
-- operation for operation, on exact int64 pairs (seconds, nanoseconds).
--
-- KEYS[1]  the counter: absent = state 0 (a fresh key), else the TAT as a decimal int64
-- ARGV[1]  "step" | "settle"
-- ARGV[2]  T, the emission interval in ns (> 0)
-- ARGV[3]  tau, the allowance offset in ns (>= 0)
-- ARGV[4]  now in ns since the epoch, or "" for the Redis server's TIME
-- step:    ARGV[5] cost
-- settle:  ARGV[5] reserved, ARGV[6] actual
--
-- Reply: {admit, unfittable, remaining, retry_after_s, reset_after_s, state}: state as decimal
-- text, remaining as an integer below 2^52 or else as decimal text (it can exceed 2^53; the
-- durations cannot). A step writes only when it admits; a denied or unfittable step writes
-- nothing. A settle replies {1, 0, 0, 0, 0, new state}.

local op = ARGV[1]
if op ~= 'step' and op ~= 'settle' then
  return bad('gcra', 'ARGV[1] must be "step" or "settle"', op)
end
local ta, tb = parse(ARGV[2])
if ta == nil or ta < 0 or (ta == 0 and tb == 0) then
  return bad('gcra', 'ARGV[2] (T) must be a positive int64', ARGV[2])
end
local ua, ub = parse(ARGV[3])
if ua == nil or ua < 0 then
  return bad('gcra', 'ARGV[3] (tau) must be a non-negative int64', ARGV[3])
end
local na, nb = decision_now(ARGV[4])
if na == nil then
  return bad('gcra', 'ARGV[4] (now) must be an int64 or empty', ARGV[4])
end
local sa, sb = load_state(KEYS[1])
if sa == nil then
  return bad('gcra', 'key ' .. string.sub(KEYS[1], 1, 80) .. ' holds no int64 state', sb)
end

-- The step and the settle run here, not in functions (each closure costs every call), with the
-- pair operations written out: a sum carries when b reaches 10^9, a difference borrows when b
-- drops below 0. ra_ceil_s of a pair v >= 0 is a, plus one when b > 0.
if op == 'step' then
  local ca, cb = parse(ARGV[5])
  if ca == nil then
    return bad('gcra', 'ARGV[5] (cost) must be an int64', ARGV[5])
  end
  -- Distances from now (tat - now, new_tat - now) are taken unsaturated: a pair holds every
  -- value in [0, 2^64) exactly, as ratealg's unsigned differences do.
  local xa, xb = sa, sb -- tat = max(state, now)
  if sa < na or (sa == na and sb < nb) then xa, xb = na, nb end
  local ba, bb = xa - na, xb - nb -- behind = tat - now
  if bb < 0 then ba, bb = ba - 1, bb + 1000000000 end
  local ga, gb, new_a, new_b
  if ca >= 0 then ga, gb = mul(ca, cb, ta, tb) end -- the charge n x T; nil when it leaves int64
  if ga ~= nil and (ga < ua or (ga == ua and gb <= ub)) then
    new_a, new_b = xa + ga, xb + gb
    if new_b >= 1000000000 then new_a, new_b = new_a + 1, new_b - 1000000000 end
    if new_a > MAXA or (new_a == MAXA and new_b > MAXB) then new_a = nil end -- leaves int64
  end
  local retry = 0
  if new_a ~= nil then -- fits: ahead (f) = new_tat - now = behind + charge, left = tau - ahead
    local fa, fb = ba + ga, bb + gb
    if fb >= 1000000000 then fa, fb = fa + 1, fb - 1000000000 end
    local la, lb = ua - fa, ub - fb
    if lb < 0 then la, lb = la - 1, lb + 1000000000 end
    if la >= 0 then -- now >= allow_at
      local text = to_dec(new_a, new_b)
      store_state(KEYS[1], text, na, fa, fb)
      return {1, 0, count(la, lb, ta, tb), 0, fb > 0 and fa + 1 or fa, text}
    end
    retry = -la -- ra_ceil_s(allow_at - now), allow_at - now = -left > 0
  end
  -- denied or unfittable: what is left of the allowance now, and when the TAT is reached
  local remaining, la, lb = 0, ua - ba, ub - bb
  if lb < 0 then la, lb = la - 1, lb + 1000000000 end
  if la > 0 or (la == 0 and lb > 0) then remaining = count(la, lb, ta, tb) end
  return {0, new_a == nil and 1 or 0, remaining, retry, bb > 0 and ba + 1 or ba, to_dec(sa, sb)}
end

-- ra_settle: move the TAT by (actual - reserved) x T; a refund never below now, an overrun
-- always charged but never past INT64_MAX - tau (a later fitting cost is a denial with a retry,
-- never unfittable).
local ra, rb = parse(ARGV[5])
local qa, qb = parse(ARGV[6])
if ra == nil or qa == nil then
  return bad('gcra', 'ARGV[5] (reserved) and ARGV[6] (actual) must be int64s',
             tostring(ARGV[5]) .. ' ' .. tostring(ARGV[6]))
end
local da, db = qa - ra, qb - rb -- delta = sat_sub(actual, reserved)
if db < 0 then da, db = da - 1, db + 1000000000 end
if da > MAXA or (da == MAXA and db > MAXB) then
  da, db = MAXA, MAXB
elseif da < MINA or (da == MINA and db < MINB) then
  da, db = MINA, MINB
end
local xa, xb = mul(da, db, ta, tb) -- the shift, saturated
if xa == nil then
  if da >= 0 then xa, xb = MAXA, MAXB else xa, xb = MINA, MINB end
end
local new_a, new_b
if xa >= 0 then -- from max(state, now), up to the ceiling INT64_MAX - tau
  local ba, bb = sa, sb
  if sa < na or (sa == na and sb < nb) then ba, bb = na, nb end
  local ca, cb = MAXA - ua, MAXB - ub
  if cb < 0 then ca, cb = ca - 1, cb + 1000000000 end
  new_a, new_b = ba + xa, bb + xb
  if new_b >= 1000000000 then new_a, new_b = new_a + 1, new_b - 1000000000 end
  if ba > ca or (ba == ca and bb >= cb) then
    new_a, new_b = ba, bb
  elseif new_a > ca or (new_a == ca and new_b > cb) then
    new_a, new_b = ca, cb
  end
elseif sa < na or (sa == na and sb <= nb) then
  new_a, new_b = sa, sb -- a full bucket stays full
else -- a refund, never below now (sat_add's floor at INT64_MIN is below now anyway)
  new_a, new_b = sa + xa, sb + xb
  if new_b >= 1000000000 then new_a, new_b = new_a + 1, new_b - 1000000000 end
  if new_a < na or (new_a == na and new_b < nb) then new_a, new_b = na, nb end
end
local text = to_dec(new_a, new_b)
if new_a ~= sa or new_b ~= sb then
  local la, lb = new_a - na, new_b - nb
  if lb < 0 then la, lb = la - 1, lb + 1000000000 end
  store_state(KEYS[1], text, na, la, lb)
end
return {1, 0, 0, 0, 0, text}

-- gcra.lua: GCRA steps and settles, one per key, in order, atomically (docs/redis.md). Runs
-- after the int64.lua prelude. The arithmetic is ratealg.c's gcra_step and ra_settle, operation
-- for operation, on exact int64 pairs (seconds, nanoseconds).
--
-- One call carries k >= 1 operations (a batch, docs/redis.md "Batches"): KEYS[j] is the counter
-- of operation j (absent = state 0, a fresh key; else the TAT as a decimal int64), and its
-- arguments follow those of operation j - 1 in ARGV:
--   op       "step" | "settle"
--   T        the emission interval in ns (> 0)
--   tau      the allowance offset in ns (>= 0)
--   now      in ns since the epoch, or "" for the Redis server's TIME (read once per call)
--   step:    cost
--   settle:  reserved, actual
-- The operations run one after the other, exactly as k separate calls in that order would.
--
-- Reply: an array of k, element j operation j's: {admit, unfittable, remaining, retry_after_s,
-- reset_after_s, state}, state as decimal text, remaining as an integer below 2^52 or else as
-- decimal text (it can exceed 2^53; the durations cannot); or an error reply for that operation
-- alone (bad arguments, a key holding no int64 or another type), which wrote nothing. A step
-- writes only when it admits; a denied or unfittable step writes nothing. A settle replies
-- {1, 0, 0, 0, 0, new state}.

-- the arguments a run of operations on one limit repeats, parsed once: Lua interns strings, so
-- comparing one with the last is a pointer comparison
local last_t, ta, tb, last_u, ua, ub, last_n, na, nb

local function one(key, op, t_arg, u_arg, n_arg, a5, a6)
  if op ~= 'step' and op ~= 'settle' then
    return bad('gcra', 'ARGV[1] must be "step" or "settle"', op)
  end
  if t_arg ~= last_t then
    last_t, ta, tb = t_arg, parse(t_arg)
  end
  if ta == nil or ta < 0 or (ta == 0 and tb == 0) then
    return bad('gcra', 'ARGV[2] (T) must be a positive int64', t_arg)
  end
  if u_arg ~= last_u then
    last_u, ua, ub = u_arg, parse(u_arg)
  end
  if ua == nil or ua < 0 then
    return bad('gcra', 'ARGV[3] (tau) must be a non-negative int64', u_arg)
  end
  if n_arg ~= last_n then
    last_n, na, nb = n_arg, decision_now(n_arg)
  end
  if na == nil then
    return bad('gcra', 'ARGV[4] (now) must be an int64 or empty', n_arg)
  end
  local sa, sb = load_state('gcra', key)
  if sa == nil then return sb end
  -- The step and the settle run here, not in functions of their own, with the pair operations
  -- written out: a sum carries when b reaches 10^9, a difference borrows when b drops below 0.
  -- ra_ceil_s of a pair v >= 0 is a, plus one when b > 0.
  if op == 'step' then
    local ca, cb = parse(a5)
    if ca == nil then
      return bad('gcra', 'ARGV[5] (cost) must be an int64', a5)
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
        local e = store_state(key, text, na, fa, fb)
        if e then return e end
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
  local ra, rb = parse(a5)
  local qa, qb = parse(a6)
  if ra == nil or qa == nil then
    return bad('gcra', 'ARGV[5] (reserved) and ARGV[6] (actual) must be int64s',
               tostring(a5) .. ' ' .. tostring(a6))
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
    local e = store_state(key, text, na, la, lb)
    if e then return e end
  end
  return {1, 0, 0, 0, 0, text}
end

local out, i = {}, 1
for j = 1, #KEYS do
  local op = ARGV[i]
  out[j] = one(KEYS[j], op, ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5])
  i = i + (op == 'settle' and 6 or 5)
end
return out

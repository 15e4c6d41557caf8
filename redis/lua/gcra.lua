-- gcra.lua: one GCRA step, or one settle, on one counter key, atomically (docs/redis.md).
-- Runs after the int64.lua prelude. The arithmetic is ratealg.c's gcra_step and ra_settle,
-- operation for operation, on exact int64 pairs.
--
-- KEYS[1]  the counter: absent = state 0 (a fresh key), else the TAT as a decimal int64
-- ARGV[1]  "step" | "settle"
-- ARGV[2]  T, the emission interval in ns (> 0)
-- ARGV[3]  tau, the allowance offset in ns (>= 0)
-- ARGV[4]  now in ns since the epoch, or "" for the Redis server's TIME
-- step:    ARGV[5] cost
-- settle:  ARGV[5] reserved, ARGV[6] actual
--
-- Reply: {admit, unfittable, remaining, retry_after_s, reset_after_s, state}, remaining and
-- state as decimal strings (they can exceed 2^53; the durations cannot). A step writes only when it admits; a denied
-- or unfittable step writes nothing. A settle replies {1, 0, "0", 0, 0, new state}.

-- Distances from now (tat - now, new_tat - now) are taken unsaturated: the pair arithmetic holds
-- every value in [0, 2^64) exactly, as ratealg's unsigned differences do.
local function gcra_step(key, sh, sl, nh, nl, th, tl, tauh, taul, ch, cl)
  local tath, tatl = sh, sl
  if lt(sh, sl, nh, nl) then tath, tatl = nh, nl end
  local behind_h, behind_l = subr(tath, tatl, nh, nl)
  local gh, gl, new_h, new_l
  if ch >= 0 then gh, gl = mul(ch, cl, th, tl) end
  if gh ~= nil and not lt(tauh, taul, gh, gl) then
    new_h, new_l = addr(tath, tatl, gh, gl)
    if new_h > MAXH then new_h = nil end -- the TAT would leave int64: unfittable
  end
  local retry = 0
  if new_h ~= nil then
    local ahead_h, ahead_l = subr(new_h, new_l, nh, nl)
    if not lt(tauh, taul, ahead_h, ahead_l) then
      local rh, rl = subr(tauh, taul, ahead_h, ahead_l)
      local qh, ql = udivmod(rh, rl, th, tl)
      store_state(key, new_h, new_l, nh, ahead_h, ahead_l)
      return {1, 0, to_dec(qh, ql), 0, ceil_s(ahead_h, ahead_l), to_dec(new_h, new_l)}
    end
    retry = ceil_s(subr(ahead_h, ahead_l, tauh, taul))
  end
  -- denied or unfittable: what is left of the allowance now, and when the TAT is reached
  local remaining = '0'
  if lt(behind_h, behind_l, tauh, taul) then
    local rh, rl = subr(tauh, taul, behind_h, behind_l)
    remaining = to_dec(udivmod(rh, rl, th, tl))
  end
  return {0, new_h == nil and 1 or 0, remaining, retry, ceil_s(behind_h, behind_l),
          to_dec(sh, sl)}
end

-- ra_settle: move the TAT by (actual - reserved) x T; a refund never below now, an overrun
-- always charged but never past INT64_MAX - tau (a later fitting cost is a denial with a retry,
-- never unfittable).
local function gcra_settle(key, sh, sl, nh, nl, th, tl, tauh, taul, rh, rl, ah, al)
  local dh, dl = sub(ah, al, rh, rl)
  local xh, xl = mul(dh, dl, th, tl)
  if xh == nil then
    if dh >= 0 then xh, xl = MAXH, MAXL else xh, xl = MINH, 0 end
  end
  local new_h, new_l
  if xh >= 0 then
    local tath, tatl = sh, sl
    if lt(sh, sl, nh, nl) then tath, tatl = nh, nl end
    local ch, cl = subr(MAXH, MAXL, tauh, taul)
    new_h, new_l = addr(tath, tatl, xh, xl)
    if not lt(tath, tatl, ch, cl) then
      new_h, new_l = tath, tatl
    elseif lt(ch, cl, new_h, new_l) then
      new_h, new_l = ch, cl
    end
  elseif not lt(nh, nl, sh, sl) then
    new_h, new_l = sh, sl -- a full bucket stays full
  else
    new_h, new_l = add(sh, sl, xh, xl)
    if lt(new_h, new_l, nh, nl) then new_h, new_l = nh, nl end
  end
  if new_h ~= sh or new_l ~= sl then
    store_state(key, new_h, new_l, nh, subr(new_h, new_l, nh, nl))
  end
  return {1, 0, '0', 0, 0, to_dec(new_h, new_l)}
end

local op = ARGV[1]
if op ~= 'step' and op ~= 'settle' then
  return bad('gcra', 'ARGV[1] must be "step" or "settle"', op)
end
local th, tl = parse(ARGV[2])
if th == nil or th < 0 or (th == 0 and tl == 0) then
  return bad('gcra', 'ARGV[2] (T) must be a positive int64', ARGV[2])
end
local tauh, taul = parse(ARGV[3])
if tauh == nil or tauh < 0 then
  return bad('gcra', 'ARGV[3] (tau) must be a non-negative int64', ARGV[3])
end
local nh, nl = decision_now(ARGV[4])
if nh == nil then
  return bad('gcra', 'ARGV[4] (now) must be an int64 or empty', ARGV[4])
end
local sh, sl = load_state(KEYS[1])
if sh == nil then
  return bad('gcra', 'key ' .. string.sub(KEYS[1], 1, 80) .. ' holds no int64 state', sl)
end
if op == 'step' then
  local ch, cl = parse(ARGV[5])
  if ch == nil then
    return bad('gcra', 'ARGV[5] (cost) must be an int64', ARGV[5])
  end
  return gcra_step(KEYS[1], sh, sl, nh, nl, th, tl, tauh, taul, ch, cl)
end
local rh, rl = parse(ARGV[5])
local ah, al = parse(ARGV[6])
if rh == nil or ah == nil then
  return bad('gcra', 'ARGV[5] (reserved) and ARGV[6] (actual) must be int64s',
             tostring(ARGV[5]) .. ' ' .. tostring(ARGV[6]))
end
return gcra_settle(KEYS[1], sh, sl, nh, nl, th, tl, tauh, taul, rh, rl, ah, al)

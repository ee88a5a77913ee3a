-- reserve: ARGV = base, id, campaign, amount, expires_at, day, ledger id (optional).
-- Checks in pacing::Book's order, so that both answer the same refusal.
local id, c = ARGV[2], ARGV[3]
local amount, exp, day = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
if amount <= 0 then return { 'NonPositiveAmount' } end
if not ledger_ok(ARGV[7]) then return { 'NoLedger' } end
-- An id is used once: an open reservation or a tombstone both make a second reserve a duplicate.
if redis.call('EXISTS', rkey(id)) == 1 then return { 'DuplicateId' } end
local C = load_campaign(c, day)
if not C then return { 'UnknownCampaign' } end
-- A refusal still keeps the day's rollover (as Book does), so that a later call carrying an
-- older clock cannot see the previous day again.
local refusal = nil
local d = day_available(C)
if amount > available(C) then
  refusal = 'InsufficientBudget'
elseif d and amount > d then
  refusal = 'InsufficientDailyBudget'
end
if refusal then
  if C.rolled then save_campaign(C) end
  return { refusal }
end
C.reserved = C.reserved + amount
C.day_reserved = C.day_reserved + amount
local err = save_all({ C })
if err then return err end
redis.call('HSET', rkey(id), 'campaign', c, 'amount', fmt(amount), 'day', fmt(C.day),
  'expires_at', fmt(exp), 'state', 'open')
redis.call('ZADD', EXP, fmt(exp), 'r:' .. id)
return { 'ok' }

-- set_limits: ARGV = base, campaign, total, daily ('' for none), day, ledger id (optional).
-- Creates the campaign or replaces its configured limits. Limits are stored as configured; the
-- budget in force (see load_campaign) never drops below what is already spent or reserved.
local c = ARGV[2]
local day = tonumber(ARGV[5])
if not ledger_ok(ARGV[6]) then return { 'NoLedger' } end
local C = load_campaign(c, day)
if not C then
  -- Listed but gone: evicted. Re-creating it would reopen its budget.
  if ARGV[6] and ARGV[6] ~= '' and redis.call('HEXISTS', CAMPAIGNS, c) == 1 then
    return { 'NoLedger' }
  end
  C = { key = ckey(c), name = c, spent = 0, reserved = 0, day = day, day_spent = 0,
    day_reserved = 0 }
end
C.total = tonumber(ARGV[3])
C.daily = nil
if ARGV[4] ~= '' then C.daily = tonumber(ARGV[4]) end
local err = save_all({ C })
if err then return err end
-- The slot's list of campaigns: name to key base, for the audit and for `campaigns`.
redis.call('HSET', CAMPAIGNS, c, P)
return { 'ok' }

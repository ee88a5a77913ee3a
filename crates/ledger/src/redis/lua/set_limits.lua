-- set_limits: creates a campaign or changes its configured limits, as a compare-and-set on the
-- limits' `version`, so that one writer changes them and nobody overwrites a change unseen.
-- ARGV: [2] campaign, [3] total, [4] daily ('' = none), [5] today, [6] ledger id, [7] writer
-- (`file:<node>`, `admin:<name>`), [8] base: the version the writer based its change on (0:
-- the campaign must not exist yet, or predates versions), '' = the writer's own (accepted if
-- the campaign is missing, unclaimed, or last written by this same writer), '*' = any (tools).
-- Limits equal to the stored ones change nothing, whatever the base: { 'ok', version, 0 }.
-- A write: { 'ok', version + 1, 1 }. A stale base writes nothing and answers what is stored:
-- { 'Conflict', version, writer, total, daily } (all '' but the version for a missing campaign).
-- A campaign the ledger lists whose record is gone: { 'CampaignGone' }, nothing written.
-- Limits are stored as configured; the budget in force (see load_campaign) never drops below
-- what is already spent or reserved.
local c = ARGV[2]
local day = tonumber(ARGV[5])
local writer, base = ARGV[7], ARGV[8]
if not ledger_ok(ARGV[6]) then return { 'NoLedger' } end
local C = load_campaign(c, day)
if not C then
  -- Listed but gone: deleted or evicted. Re-creating it would reopen its budget; the ledger
  -- itself is still open, so this names the campaign, not the ledger.
  if ARGV[6] and ARGV[6] ~= '' and redis.call('HEXISTS', CAMPAIGNS, c) == 1 then
    return { 'CampaignGone' }
  end
end
local meta = redis.call('HMGET', ckey(c), 'version', 'writer')
local version = num(meta[1])
local stored_by = meta[2] or ''
local total = tonumber(ARGV[3])
local daily = nil
if ARGV[4] ~= '' then daily = tonumber(ARGV[4]) end
if C and C.total == total and C.daily == daily then
  return { 'ok', version, 0 }
end
local fresh
if base == '*' then
  fresh = true
elseif base == '' then
  fresh = (not C) or stored_by == '' or stored_by == writer
else
  fresh = tonumber(base) == version
end
if not fresh then
  if not C then return { 'Conflict', version, '', '', '' } end
  local d = ''
  if C.daily then d = fmt(C.daily) end
  return { 'Conflict', version, stored_by, fmt(C.total), d }
end
if not C then
  C = { key = ckey(c), name = c, spent = 0, reserved = 0, day = day, day_spent = 0,
    day_reserved = 0 }
end
C.total = total
C.daily = daily
local err = save_all({ C })
if err then return err end
version = version + 1
redis.call('HSET', C.key, 'version', fmt(version), 'writer', writer)
-- The slot's list of campaigns: name to key base, for the audit and for `campaigns`.
redis.call('HSET', CAMPAIGNS, c, P)
return { 'ok', version, 1 }

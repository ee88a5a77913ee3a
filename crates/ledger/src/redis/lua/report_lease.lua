-- report_lease: ARGV = base, lease id, cumulative spent, new expires_at, day.
-- Cumulative, so a repeated or reordered report changes nothing; an open lease's expiry is
-- extended (never shortened).
local L = load_lease(ARGV[2])
local cum, exp, day = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if not L then return { 'UnknownLease' } end
if cum < 0 then return { 'NegativeSpend' } end
local C = load_campaign(L.campaign, day)
if not C then return { 'UnknownCampaign' } end
lease_day(C, L)
local charged, lost = report(C, L, cum)
if L.state == 'open' and exp > L.expires_at then L.expires_at = exp end
local err = save_all({ C })
if err then return err end
-- HSET keeps a tombstone's TTL, so a late report does not revive a resolved lease's key.
save_lease(L)
if L.state == 'open' then redis.call('ZADD', EXP, fmt(L.expires_at), 'l:' .. L.id) end
return { 'ok', charged, lost, L.state, L.amount, L.reported, L.expires_at }

-- close_lease: ARGV = base, lease id, cumulative spent, day, tombstone ttl (ms).
-- Reports, then returns the unreported remainder. Closing again only reports.
local L = load_lease(ARGV[2])
local cum, day, ttl = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if not L then return { 'UnknownLease' } end
if cum < 0 then return { 'NegativeSpend' } end
local C = load_campaign(L.campaign, day)
if not C then return { 'UnknownCampaign' } end
lease_day(C, L)
local charged, lost = report(C, L, cum)
local released = 0
local was_open = L.state == 'open'
if was_open then released = unlease(C, L, 'closed') end
local err = save_all({ C })
if err then return err end
if was_open then bury_lease(L, ttl) else save_lease(L) end
return { 'ok', charged, lost, released, L.amount, L.reported }

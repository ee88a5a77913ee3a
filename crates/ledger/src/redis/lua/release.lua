-- release: ARGV = base, id, day, tombstone ttl (ms).
local R = load_reservation(ARGV[2])
local day, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
if not R then return { 'UnknownReservation' } end
if R.state == 'committed' then return { 'AlreadyCommitted' } end
if R.state ~= 'open' then return { 'AlreadyReleased' } end
local C = load_campaign(R.campaign, day)
if not C then
  return redis.error_reply('GAVEL reservation ' .. R.id .. ' names a missing campaign')
end
unreserve(C, R)
local err = save_all({ C })
if err then return err end
tombstone(R, 'released', ttl)
return { 'Released', R.amount }

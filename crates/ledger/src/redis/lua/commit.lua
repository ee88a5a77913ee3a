-- commit: ARGV = prefix, id, price, now, day, tombstone ttl (ms).
local R = load_reservation(ARGV[2])
local price, now, day, ttl = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]),
  tonumber(ARGV[6])
if not R then return { 'UnknownReservation' } end
-- A resolved reservation answers with its recorded outcome and changes nothing.
if R.state == 'committed' then return { 'AlreadyCommitted', R.charged } end
if R.state == 'released' then return { 'AlreadyReleased' } end
if R.state == 'expired' then return { 'Expired' } end
if price < 0 then return { 'NegativePrice' } end
local C = load_campaign(R.campaign, day)
if not C then
  return redis.error_reply('GAVEL reservation ' .. R.id .. ' names a missing campaign')
end
if now >= R.expires_at then
  -- Too late to charge: the reservation is released, as the sweep would have done.
  unreserve(C, R)
  local err = save_all({ C })
  if err then return err end
  tombstone(R, 'expired', ttl)
  return { 'Expired' }
end
-- Never charge more than was reserved; the reservation stays open for a correct price.
if price > R.amount then return { 'AboveReservation', R.amount, price } end
unreserve(C, R)
C.spent = C.spent + price
if R.day == C.day then C.day_spent = C.day_spent + price end
local err = save_all({ C })
if err then return err end
tombstone(R, 'committed', ttl, price)
return { 'Charged', price }

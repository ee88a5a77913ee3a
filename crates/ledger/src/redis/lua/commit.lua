-- commit: ARGV = base, id, price, now, day, tombstone ttl (ms).
-- As pacing::Book::commit: an open reservation is charged (whatever its expiry: the sweep has
-- not released it yet); a released or expired one is charged all the same, from the campaign's
-- available money (the impression was served), and says so; a committed one reports its charge.
local R = load_reservation(ARGV[2])
local price, day, ttl = tonumber(ARGV[3]), tonumber(ARGV[5]), tonumber(ARGV[6])
if not R then return { 'UnknownReservation' } end
if R.state == 'committed' then return { 'AlreadyCommitted', R.charged } end
if price < 0 then return { 'NegativePrice' } end
-- Never charge more than was reserved; an open reservation stays open for a correct price.
if price > R.amount then return { 'AboveReservation', R.amount, price } end
local C = load_campaign(R.campaign, day)
if not C then
  return redis.error_reply('GAVEL reservation ' .. R.id .. ' names a missing campaign')
end
local late = R.state ~= 'open'
if not late then unreserve(C, R) end
C.spent = C.spent + price
if R.day == C.day then C.day_spent = C.day_spent + price end
local err = save_all({ C })
if err then return err end
if late then
  -- Keep the tombstone's remaining life: it is forgotten when it was due.
  redis.call('HSET', R.key, 'state', 'committed', 'charged', fmt(price))
  return { 'ChargedAfterRelease', price }
end
tombstone(R, 'committed', ttl, price)
return { 'Charged', price }

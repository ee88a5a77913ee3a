-- settle: ARGV = base, reservation id, kind ('charge' or 'release'), price, campaign, owner
-- node, here ('1' when the caller holds the reservation in its local book), day, ttl (ms).
-- Lease mode: a win, billing or loss notice may reach any instance. The first notice of a
-- reservation claims its outcome here (`d:<id>`, kept `ttl`), so that a replay to any instance
-- finds it: a charge is made once, and a loss after a charge changes nothing.
-- - The holder ('here') only claims: it settles in its local book and reports through its lease.
-- - Another instance charges the holder's current lease of the campaign in its place (the
--   reservation's money is in that lease), or, when the holder has no open lease (it stopped
--   or died and the lease was reclaimed) or the reservation was released first, charges the
--   campaign directly, as a late win. It then tells the holder through its inbox, so that the
--   holder's local book stops holding the money.
local id, kind, price, c, owner = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6]
local here, day, ttl = ARGV[7] == '1', tonumber(ARGV[8]), tonumber(ARGV[9])
local dk = dkey(id)
local d = redis.call('HMGET', dk, 'state', 'charged')
if d[1] == 'charged' then return { 'AlreadyCommitted', num(d[2]) } end
if kind == 'release' then
  if d[1] == 'released' then return { 'AlreadyReleased' } end
  redis.call('HSET', dk, 'state', 'released')
  redis.call('PEXPIRE', dk, ttl)
  if here then return { 'Local' } end
  local inbox = inbox_key(owner)
  redis.call('RPUSH', inbox, 'r ' .. id)
  redis.call('PEXPIRE', inbox, ttl)
  return { 'Released' }
end
if price < 0 then return { 'NegativePrice' } end
local late = d[1] == 'released'
if here then
  redis.call('HSET', dk, 'state', 'charged', 'charged', fmt(price))
  redis.call('PEXPIRE', dk, ttl)
  -- A loss claimed first (perhaps at another instance, whose note to the holder's inbox may
  -- not be read yet): the holder charges locally all the same, as a charge after a release.
  if late then return { 'LocalAfterRelease' } end
  return { 'Local' }
end
local C = load_campaign(c, day)
if not C then return { 'UnknownReservation' } end
local lid = redis.call('GET', owner_key(owner, c))
local L = nil
if lid then L = load_lease(lid) end
local via = '-'
if not late and L and L.state == 'open' and L.campaign == c and L.amount - L.reported >= price then
  lease_day(C, L)
  charge_lease(C, L, price)
  via = L.id
else
  -- From what the campaign has: the impression was served, whatever the budget says now.
  C.spent = C.spent + price
  C.day_spent = C.day_spent + price
end
local err = save_all({ C })
if err then return err end
if via ~= '-' then save_lease(L) end
redis.call('HSET', dk, 'state', 'charged', 'charged', fmt(price))
redis.call('PEXPIRE', dk, ttl)
local inbox = inbox_key(owner)
redis.call('RPUSH', inbox, 'c ' .. fmt(price) .. ' ' .. id .. ' ' .. via .. ' ' .. c)
redis.call('PEXPIRE', inbox, ttl)
if via == '-' then return { 'ChargedAfterRelease', price } end
return { 'Charged', price }

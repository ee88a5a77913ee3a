-- take_lease: ARGV = base, lease id, campaign, want, expires_at, day, grow only ('1', or
-- '0' / absent), holder node (optional: a new lease becomes the node's lease of the campaign,
-- which other instances charge when they settle the node's reservations), ledger id (optional).
-- Grants min(want, total headroom, today's headroom), counted as reserved,
-- creating or growing the lease; its expiry only moves forward. ARGV[7] '1' (grow only): an
-- unknown lease is refused instead of created (its holder believes it exists: Redis lost it).
-- '2' (create once): an existing lease is answered as it stands, granting nothing more (the
-- creation was sent again after its answer was lost; growing it would grant a second chunk).
local id, c = ARGV[2], ARGV[3]
local want, exp, day = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
if want <= 0 then return { 'NonPositiveAmount' } end
if not ledger_ok(ARGV[9]) then return { 'NoLedger' } end
local L = load_lease(id)
if not L and ARGV[7] == '1' then return { 'UnknownLease' } end
if L and L.state ~= 'open' then return { 'LeaseClosed' } end
if L and L.campaign ~= c then return { 'CampaignMismatch' } end
if L and ARGV[7] == '2' then return { 'ok', 0, L.amount, L.expires_at } end
local C = load_campaign(c, day)
if not C then return { 'UnknownCampaign' } end
if not L then
  L = { key = lkey(id), id = id, campaign = c, amount = 0, reported = 0, seen = 0, lost = 0,
    day = C.day, day_open = 0, expires_at = exp, state = 'open', remote = 0,
    node = ARGV[8] or '' }
  if L.node ~= '' then redis.call('SET', owner_key(L.node, c), id) end
end
-- Growing a lease on a later day: its older part no longer counts against any day.
if L.day ~= C.day then
  L.day = C.day
  L.day_open = 0
end
local g = headroom(C)
if want < g then g = want end
C.reserved = C.reserved + g
C.day_reserved = C.day_reserved + g
L.amount = L.amount + g
L.day_open = L.day_open + g
if exp > L.expires_at then L.expires_at = exp end
local err = save_all({ C })
if err then return err end
save_lease(L)
redis.call('ZADD', EXP, fmt(L.expires_at), 'l:' .. id)
return { 'ok', g, L.amount, L.expires_at }

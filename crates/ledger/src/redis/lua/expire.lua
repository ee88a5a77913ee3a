-- expire: ARGV = base, now, day, tombstone ttl (ms), batch limit.
-- One campaign's sweep index (its tag's). Releases open reservations and reclaims open leases
-- whose expiry is at or before `now`, at
-- most `limit` per call so that one script never blocks Redis for long.
local now, day, ttl, limit = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]),
  tonumber(ARGV[5])
local members = redis.call('ZRANGEBYSCORE', EXP, '-inf', fmt(now), 'LIMIT', 0, limit)
local cache, loaded = {}, {}
local function camp(name)
  local C = cache[name]
  if C == nil then
    C = load_campaign(name, day) or false
    cache[name] = C
    if C then loaded[name] = C end
  end
  return C or nil
end
local rs, ls, stale = {}, {}, {}
for _, m in ipairs(members) do
  local kind, id = string.sub(m, 1, 2), string.sub(m, 3)
  local done = true
  if kind == 'r:' then
    local R = load_reservation(id)
    if R and R.state == 'open' then
      local C = camp(R.campaign)
      if R.expires_at > now then
        done = false
        redis.call('ZADD', EXP, fmt(R.expires_at), m)
      elseif C then
        unreserve(C, R)
        rs[#rs + 1] = R
        done = false
      end
    end
  elseif kind == 'l:' then
    local L = load_lease(id)
    if L and L.state == 'open' then
      local C = camp(L.campaign)
      if L.expires_at > now then
        done = false
        redis.call('ZADD', EXP, fmt(L.expires_at), m)
      elseif C then
        lease_day(C, L)
        unlease(C, L, 'reclaimed')
        ls[#ls + 1] = L
        done = false
      end
    end
  end
  -- Index entries with nothing open behind them (or whose campaign vanished) are dropped.
  if done then stale[#stale + 1] = m end
end
local err = save_all(loaded)
if err then return err end
for _, R in ipairs(rs) do tombstone(R, 'expired', ttl) end
for _, L in ipairs(ls) do bury_lease(L, ttl) end
for _, m in ipairs(stale) do redis.call('ZREM', EXP, m) end
local more = 0
if #members >= limit then more = 1 end
return { #rs, #ls, more }

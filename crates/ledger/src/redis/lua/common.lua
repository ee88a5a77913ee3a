-- Shared prelude of every Gavel ledger script (prepended by scripts.rs).
-- KEYS (built by keys.rs, never rebuilt here): [1] the ledger marker of the call's hash slot,
-- [2] the slot's campaign list, [3] the campaign's sweep index, [4] the campaign's hash, then
-- the script's own (a slot-wide script declares only [1] and [2]). ARGV[1] is the base of the
-- keys a script finds inside (ids read from an index), `P{tag}`: they share the declared keys'
-- hash tag, so every key a script touches is in one slot (Redis Cluster runs it on that slot's
-- node). Money and times are integers below 2^53, checked by the Rust side before sending, so
-- Lua's doubles hold them exactly; `fmt` writes them back as plain integers (tostring would
-- switch to exponent notation above 1e14).
local P = ARGV[1]
local LEDGER, CAMPAIGNS, EXP = KEYS[1], KEYS[2], KEYS[3]
-- The ledger's marker: its id, written into every slot when the ledger is created. An instance
-- passes the id it opened; a Redis (or a cluster node) that lost its data (restart without
-- persistence, failover to an empty replica, eviction) no longer holds it, and the scripts that
-- would re-create campaigns or take budget refuse ('NoLedger') instead of reopening full
-- budgets. An empty id skips the check (the library's own tests and tools).
local function ledger_ok(id)
  if not id or id == '' then return true end
  return redis.call('HGET', LEDGER, 'id') == id
end

local function fmt(n) return string.format('%.0f', n) end
local function num(v) if v then return tonumber(v) or 0 end return 0 end
-- `b`: another base than ARGV[1] (the audit walks every campaign of a slot).
local function ckey(c, b) return (b or P) .. 'c:' .. c end
local function rkey(id, b) return (b or P) .. 'r:' .. id end
local function lkey(id, b) return (b or P) .. 'l:' .. id end
-- Lease mode, notices settled by any instance: the claim on a reservation's outcome, the
-- lease an instance (node) holds for a campaign, and the node's inbox of settlements that
-- other instances made for its reservations.
local function dkey(id) return P .. 'd:' .. id end
local function owner_key(node, c) return P .. 'own:' .. node .. ':' .. c end
local function inbox_key(node) return P .. 'in:' .. node end

-- A campaign as a table, rolled over to `day` if that is later than its stored day (lazily:
-- the day's counters restart at zero; older reservations stop counting against any day).
-- `total` and `daily` are the configured limits, kept as configured (the budget in force is
-- computed: a limit lowered below what is spent+reserved clamps the budget up to that, and the
-- clamp follows the money back down, as in pacing::Book).
local function load_campaign(c, day, b)
  local k = ckey(c, b)
  local v = redis.call('HMGET', k, 'total', 'spent', 'reserved', 'daily', 'day', 'day_spent',
    'day_reserved')
  if not v[1] then return nil end
  local C = { key = k, name = c, total = num(v[1]), spent = num(v[2]), reserved = num(v[3]),
    day = num(v[5]), day_spent = num(v[6]), day_reserved = num(v[7]) }
  if v[4] then C.daily = tonumber(v[4]) end
  if day > C.day then
    C.day = day
    C.day_spent = 0
    C.day_reserved = 0
    C.rolled = true
  end
  return C
end

-- What can still be reserved, in total: never negative (a negative limit behaves as zero).
local function available(C)
  local a = C.total - C.spent - C.reserved
  if a < 0 then a = 0 end
  return a
end

-- What can still be reserved today; nil without a daily budget.
local function day_available(C)
  if not C.daily then return nil end
  local a = C.daily - C.day_spent - C.day_reserved
  if a < 0 then a = 0 end
  return a
end

-- What can still be reserved or charged now: the total headroom, capped by today's.
local function headroom(C)
  local a = available(C)
  local d = day_available(C)
  if d and d < a then a = d end
  return a
end

-- Checked before any write: a script that finds its result broken writes nothing and fails.
-- Money only enters through `headroom`/`available`, so this is the last line, not the first.
local function broken(C)
  if C.spent < 0 or C.reserved < 0 or C.day_spent < 0 or C.day_reserved < 0 then
    return 'negative counter'
  end
  if C.day_spent > C.spent or C.day_reserved > C.reserved then
    return 'day counters above the totals'
  end
  return nil
end

local function save_campaign(C)
  redis.call('HSET', C.key, 'total', fmt(C.total), 'spent', fmt(C.spent), 'reserved',
    fmt(C.reserved), 'day', fmt(C.day), 'day_spent', fmt(C.day_spent), 'day_reserved',
    fmt(C.day_reserved))
  if C.daily then
    redis.call('HSET', C.key, 'daily', fmt(C.daily))
  else
    redis.call('HDEL', C.key, 'daily')
  end
end

-- Saves every campaign in `cs` (name -> table) after checking all of them.
local function save_all(cs)
  for _, C in pairs(cs) do
    local why = broken(C)
    if why then
      return redis.error_reply('GAVEL invariant broken for ' .. C.name .. ': ' .. why)
    end
  end
  for _, C in pairs(cs) do save_campaign(C) end
  return nil
end

local function load_reservation(id, b)
  local k = rkey(id, b)
  local v = redis.call('HMGET', k, 'campaign', 'amount', 'day', 'expires_at', 'state', 'charged')
  if not v[1] then return nil end
  return { key = k, id = id, campaign = v[1], amount = num(v[2]), day = num(v[3]),
    expires_at = num(v[4]), state = v[5], charged = num(v[6]) }
end

-- Returns an open reservation's amount to its campaign (and to its day if still current).
local function unreserve(C, R)
  C.reserved = C.reserved - R.amount
  if R.day == C.day then C.day_reserved = C.day_reserved - R.amount end
end

-- Marks a reservation resolved and keeps it as a tombstone for `ttl` ms.
local function tombstone(R, state, ttl, charged)
  if charged then
    redis.call('HSET', R.key, 'state', state, 'charged', fmt(charged))
  else
    redis.call('HSET', R.key, 'state', state)
  end
  redis.call('PEXPIRE', R.key, ttl)
  redis.call('ZREM', EXP, 'r:' .. R.id)
end

local function load_lease(id, b)
  local k = lkey(id, b)
  local v = redis.call('HMGET', k, 'campaign', 'amount', 'reported', 'seen', 'lost', 'day',
    'day_open', 'expires_at', 'state', 'remote', 'node')
  if not v[1] then return nil end
  return { key = k, id = id, campaign = v[1], amount = num(v[2]), reported = num(v[3]),
    seen = num(v[4]), lost = num(v[5]), day = num(v[6]), day_open = num(v[7]),
    expires_at = num(v[8]), state = v[9], remote = num(v[10]), node = v[11] or '' }
end

-- A lease granted on an earlier day than the campaign's current one no longer counts against
-- any day (the day's counters restarted without it).
local function lease_day(C, L)
  if L.day ~= C.day then L.day_open = 0 end
end

local function save_lease(L)
  redis.call('HSET', L.key, 'campaign', L.campaign, 'amount', fmt(L.amount), 'reported',
    fmt(L.reported), 'seen', fmt(L.seen), 'lost', fmt(L.lost), 'day', fmt(L.day), 'day_open',
    fmt(L.day_open), 'expires_at', fmt(L.expires_at), 'state', L.state, 'remote', fmt(L.remote),
    'node', L.node)
end

-- Moves `x` of an open lease from reserved to spent (today's part first from what the lease
-- holds of today's budget).
local function spend_lease(C, L, x)
  C.reserved = C.reserved - x
  local dd = x
  if dd > L.day_open then dd = L.day_open end
  C.day_reserved = C.day_reserved - dd
  C.day_spent = C.day_spent + dd
  L.day_open = L.day_open - dd
  C.spent = C.spent + x
  L.reported = L.reported + x
end

-- Applies a cumulative spend report: charges what is new since the last report, capped at the
-- lease's unreported amount and, for a lease no longer open (its remainder already returned),
-- at what the campaign can still afford. Returns charged, uncharged.
local function report(C, L, cumulative)
  if cumulative <= L.seen then return 0, 0 end
  local delta = cumulative - L.seen
  local room = L.amount - L.reported
  if L.state ~= 'open' then
    local h = available(C)
    if L.day == C.day then h = headroom(C) end
    if h < room then room = h end
  end
  if room < 0 then room = 0 end
  local x = delta
  if x > room then x = room end
  if L.state == 'open' then
    spend_lease(C, L, x)
  else
    if L.day == C.day then C.day_spent = C.day_spent + x end
    C.spent = C.spent + x
    L.reported = L.reported + x
  end
  L.seen = cumulative
  L.lost = L.lost + (delta - x)
  return x, delta - x
end

-- Charges `x` against an open lease on behalf of its holder (another instance settled one of
-- the holder's reservations): spent as by a report, and counted in `remote`, which the holder
-- subtracts from what it may spend. `seen` (the holder's own cumulative spend) is untouched.
-- The caller checked `x <= L.amount - L.reported`.
local function charge_lease(C, L, x)
  spend_lease(C, L, x)
  L.remote = L.remote + x
end

-- Returns an open lease's unreported remainder to its campaign (tables only: the caller saves
-- the campaign first, then buries the lease). Returns the amount released.
local function unlease(C, L, state)
  local rest = L.amount - L.reported
  C.reserved = C.reserved - rest
  C.day_reserved = C.day_reserved - L.day_open
  L.day_open = 0
  L.state = state
  return rest
end

-- Writes a resolved lease and keeps it as a tombstone for `ttl` ms, so that late reports still
-- find it (and are charged at most what the campaign can afford).
local function bury_lease(L, ttl)
  save_lease(L)
  if L.node ~= '' then
    local ok = owner_key(L.node, L.campaign)
    if redis.call('GET', ok) == L.id then redis.call('DEL', ok) end
  end
  redis.call('PEXPIRE', L.key, ttl)
  redis.call('ZREM', EXP, 'l:' .. L.id)
end

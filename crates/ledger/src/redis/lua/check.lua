-- check: KEYS = the marker and the campaign list of one hash slot. ARGV = base. An O(n) audit
-- for tests and operators, not for the request path: every campaign of the slot has reserved
-- (total and today's) equal to the sum of its open reservations and open leases, and its
-- invariant holds. Returns a list of problems (empty when all is well).
local problems = {}
local listed = redis.call('HGETALL', CAMPAIGNS)
local names, bases = {}, {}
for i = 1, #listed, 2 do
  names[#names + 1] = listed[i]
  bases[listed[i]] = listed[i + 1]
end
table.sort(names)
local sums, dsums, days, swept = {}, {}, {}, {}
for _, c in ipairs(names) do
  days[c] = num(redis.call('HGET', ckey(c, bases[c]), 'day'))
  sums[c] = 0
  dsums[c] = 0
end
for _, name in ipairs(names) do
  local b = bases[name]
  -- Campaigns sharing a tag share its index: walk each index once.
  if not swept[b] then
    swept[b] = true
    for _, m in ipairs(redis.call('ZRANGE', b .. 'exp', 0, -1)) do
      local kind, id = string.sub(m, 1, 2), string.sub(m, 3)
      local c, amount, dayamount, itemday = nil, 0, 0, -1
      if kind == 'r:' then
        local R = load_reservation(id, b)
        if R and R.state == 'open' then
          c, amount, dayamount, itemday = R.campaign, R.amount, R.amount, R.day
        end
      elseif kind == 'l:' then
        local L = load_lease(id, b)
        if L and L.state == 'open' then
          c, amount, dayamount, itemday = L.campaign, L.amount - L.reported, L.day_open, L.day
          if L.reported > L.amount then
            problems[#problems + 1] = 'lease ' .. id .. ' reported beyond its amount'
          end
        end
      end
      if c then
        if sums[c] == nil then
          problems[#problems + 1] = m .. ' belongs to unknown campaign ' .. c
        else
          sums[c] = sums[c] + amount
          if itemday == days[c] then dsums[c] = dsums[c] + dayamount end
        end
      end
    end
  end
end
for _, c in ipairs(names) do
  local C = load_campaign(c, 0, bases[c])
  if not C then
    problems[#problems + 1] = 'campaign ' .. c .. ' listed but missing'
  else
    local why = broken(C)
    if why then problems[#problems + 1] = c .. ': ' .. why end
    if C.reserved ~= sums[c] then
      problems[#problems + 1] = c .. ': reserved ' .. fmt(C.reserved) .. ' but open items sum to '
        .. fmt(sums[c])
    end
    if C.day_reserved ~= dsums[c] then
      problems[#problems + 1] = c .. ': day_reserved ' .. fmt(C.day_reserved) ..
        ' but open items of the day sum to ' .. fmt(dsums[c])
    end
  end
end
return problems

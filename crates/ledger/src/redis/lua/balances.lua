-- balances: ARGV = prefix, day, campaign... Read only: the day's rollover is applied to the
-- view, not stored. Unknown campaigns are left out. Returns the raw counters; the Rust side
-- computes the budget in force and availability exactly as pacing::Book does.
local day = tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV do
  local C = load_campaign(ARGV[i], day)
  if C then
    local daily = -1
    local has_daily = 0
    if C.daily then
      daily = C.daily
      has_daily = 1
    end
    out[#out + 1] = { ARGV[i], C.total, C.spent, C.reserved, has_daily, daily, C.day,
      C.day_spent, C.day_reserved }
  end
end
return out

-- open_ledger: KEYS = the marker and the campaign list of one hash slot. ARGV = base, mode, id.
-- Mode '0' reads the slot's marker; '1' creates it with `id` when missing; '2' writes `id`
-- over whatever is there (an operator's `ledger create` after part of a cluster lost its data:
-- every slot then holds the one new id). Answers { 'ok', id } when it exists, { 'created', id }
-- when this call wrote it, { 'missing' } otherwise. Writing forgets the campaigns listed whose
-- hash is gone (evicted, or lost with a node), so that their limits can be written again.
local id = redis.call('HGET', LEDGER, 'id')
local mode = ARGV[2]
if id and mode ~= '2' then return { 'ok', id } end
if mode == '0' then return { 'missing' } end
local listed = redis.call('HGETALL', CAMPAIGNS)
for i = 1, #listed, 2 do
  local c, b = listed[i], listed[i + 1]
  if redis.call('EXISTS', ckey(c, b)) == 0 then redis.call('HDEL', CAMPAIGNS, c) end
end
redis.call('HSET', LEDGER, 'id', ARGV[3])
return { 'created', ARGV[3] }

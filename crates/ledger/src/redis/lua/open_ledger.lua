-- open_ledger: ARGV = prefix, create ('1' to create the marker when it is missing), new id.
-- Answers the ledger's id: { 'ok', id } when it exists, { 'created', id } when this call made it
-- (first start, or an operator's decision after a data loss), { 'missing' } otherwise. Creating
-- forgets the campaigns listed whose hash is gone (evicted), so that their limits can be
-- written again.
local id = redis.call('HGET', LEDGER, 'id')
if id then return { 'ok', id } end
if ARGV[2] ~= '1' then return { 'missing' } end
for _, c in ipairs(redis.call('SMEMBERS', CAMPAIGNS)) do
  if redis.call('EXISTS', ckey(c)) == 0 then redis.call('SREM', CAMPAIGNS, c) end
end
redis.call('HSET', LEDGER, 'id', ARGV[3])
return { 'created', ARGV[3] }

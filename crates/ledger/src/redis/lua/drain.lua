-- drain: ARGV = base, node, limit. Takes up to `limit` settlements from the node's inbox of
-- this campaign's tag
-- (oldest first): 'c <reservation> <lease or -> <price>' (charged by another instance) or
-- 'r <reservation>' (released by another instance).
local k = inbox_key(ARGV[2])
local limit = tonumber(ARGV[3])
local items = redis.call('LRANGE', k, 0, limit - 1)
if #items > 0 then redis.call('LTRIM', k, #items, -1) end
return items

--[[
  Marks a task cancelled, once, and returns every key filed under it, in the order of their first filing: the
  first of a cancel's steps. The store then runs cancel-record on each of those keys. Every claim that files
  after this mark is refused (file, claim-filed); every one filed before it is among the keys returned.

  Input:
    KEYS[1] the task entry (hash)
    ARGV[1] by (who cancels; the store has checked it is not blank)
    ARGV[2] why
    ARGV[3] retention, ms
    ARGV[4] the task id, ARGV[5] its namespace: kept on the entry; "" when the store keeps no task identity

  Output:
    {1, by, why, at, key, ...}   cancelled now, by this call; the keys filed before it
    {0, by, why, at, key, ...}   already cancelled: the first cancel's who, why and when; nothing changed
]]
--- @include "includes/now"

local key = KEYS[1]
local first = redis.call('HMGET', key, 'cancel_by', 'cancel_why', 'cancel_at')
local reply
if first[1] then
  reply = {0, first[1], first[2] or '', tonumber(first[3])}
else
  redis.call('HSET', key, 'cancel_by', ARGV[1], 'cancel_why', ARGV[2], 'cancel_at', now)
  if ARGV[4] ~= '' then redis.call('HSET', key, 'ns', ARGV[5], 'task_id', ARGV[4]) end
  redis.call('PEXPIRE', key, ARGV[3])
  reply = {1, ARGV[1], ARGV[2], now}
end

local filed = {}
local flat = redis.call('HGETALL', key)
for i = 1, #flat, 2 do
  if string.sub(flat[i], 1, 2) == 'c:' then filed[#filed + 1] = {string.sub(flat[i], 3), tonumber(flat[i + 1])} end
end
table.sort(filed, function(a, b) return a[2] < b[2] end)
for _, call in ipairs(filed) do reply[#reply + 1] = call[1] end
return reply

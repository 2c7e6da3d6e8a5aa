--[[
  claimed -> failed: a terminal failure (e.g. card declined), replayed to every later attempt.

  Input:
    KEYS[1] the record (hash)
    ARGV[1] owner token
    ARGV[2] error (JSON of { name, message, code? })
    ARGV[3] retention, ms

  Output:
    {10, fence}    ok
    {11}           lost: the token is not the owner's; nothing changed
    {12, reason}   refused: the state does not allow it; nothing changed
]]
local key = KEYS[1]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

-- The full token, fence and nonce: a former owner whose lease was taken over must not write.
local r = redis.call('HMGET', key, 'owner', 'state', 'fence')
if r[1] ~= ARGV[1] then return {11} end
if r[2] ~= 'claimed' then return {12, 'state is ' .. r[2] .. ', not claimed'} end

redis.call('HDEL', key, 'owner', 'lease_until', 'result')
redis.call('HSET', key, 'state', 'failed', 'error', ARGV[2], 'updated_at', now)
redis.call('PEXPIRE', key, ARGV[3])
return {10, tonumber(r[3])}

--[[
  reconciling -> claimed(effect): the reconcile hook found the effect had not happened. The same token
  keeps the key and goes ahead with the effect.

  Input:
    KEYS[1] the record (hash)
    ARGV[1] owner token
    ARGV[2] retention, ms

  Output:
    {10, fence, lease_until}   ok
    {11}                       lost: the token is not the owner's; nothing changed
    {12, reason}               refused: the state does not allow it; nothing changed
]]
local key = KEYS[1]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

-- The full token, fence and nonce: a former owner whose lease was taken over must not write.
local r = redis.call('HMGET', key, 'owner', 'state', 'fence', 'lease_until')
if r[1] ~= ARGV[1] then return {11} end
if r[2] ~= 'reconciling' then return {12, 'state is ' .. r[2] .. ', not reconciling'} end

redis.call('HSET', key, 'state', 'claimed', 'phase', 'effect', 'updated_at', now)
redis.call('PEXPIRE', key, ARGV[2])
return {10, tonumber(r[3]), tonumber(r[4])}

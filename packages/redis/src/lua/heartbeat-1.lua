--[[
  Extends the lease of a claimed or reconciling owner to now + lease. The lease is a field: when it
  runs out the record stays, and the next claim decides (takeover or reconcile).

  Input:
    KEYS[1] the record (hash)
    ARGV[1] owner token
    ARGV[2] lease, ms
    ARGV[3] retention, ms

  Output:
    {10, fence, lease_until}   ok
    {11}                       lost: the token is not the owner's; nothing changed
    {12, reason}               refused: the state does not allow it; nothing changed
]]
local key = KEYS[1]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

-- The full token, fence and nonce: a former owner whose lease was taken over must not write.
local r = redis.call('HMGET', key, 'owner', 'state', 'fence')
if r[1] ~= ARGV[1] then return {11} end
if r[2] ~= 'claimed' and r[2] ~= 'reconciling' then
  return {12, 'state is ' .. r[2] .. ', not claimed or reconciling'}
end

local leaseUntil = now + tonumber(ARGV[2])
redis.call('HSET', key, 'lease_until', leaseUntil, 'updated_at', now)
redis.call('PEXPIRE', key, ARGV[3])
return {10, tonumber(r[3]), leaseUntil}

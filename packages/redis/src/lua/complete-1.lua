--[[
  claimed -> done: the effect happened and this is its result, replayed to every later attempt.

  Input:
    KEYS[1] the record (hash)
    ARGV[1] owner token
    ARGV[2] result (JSON text)
    ARGV[3] retention, ms

  Output:
    {10, fence}    ok
    {11}           lost: the token is not the owner's; nothing changed
    {12, reason}   refused: the state does not allow it; nothing changed
]]
-- A result of 65 to 128 bytes in two fields, 'result' and 'result2', of at most 64 bytes each, cut between
-- UTF-8 characters: Redis keeps a hash whose values are all that short as a listpack (hash-max-listpack-value
-- 64), about half the memory of a hashtable. A longer result stays one field: a listpack is scanned from end
-- to end on every read, and past two parts the replays cost Redis more than the memory saved is worth.
local function resultFields(text, fields)
  local cut = math.min(64, #text)
  while cut < #text do
    local b = string.byte(text, cut + 1)
    if b < 128 or b >= 192 then break end
    cut = cut - 1
  end
  if #text > 64 and #text - cut <= 64 then
    fields[#fields + 1] = 'result'
    fields[#fields + 1] = string.sub(text, 1, cut)
    fields[#fields + 1] = 'result2'
    fields[#fields + 1] = string.sub(text, cut + 1)
  else
    fields[#fields + 1] = 'result'
    fields[#fields + 1] = text
  end
end

local key = KEYS[1]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

-- The full token, fence and nonce: a former owner whose lease was taken over must not write.
local r = redis.call('HMGET', key, 'owner', 'state', 'fence')
if r[1] ~= ARGV[1] then return {11} end
if r[2] ~= 'claimed' then return {12, 'state is ' .. r[2] .. ', not claimed'} end

-- A done record needs no phase (a reader takes a missing one as effect): a smaller record.
redis.call('HDEL', key, 'owner', 'lease_until', 'error', 'phase')
local fields = {'state', 'done', 'updated_at', now}
resultFields(ARGV[2], fields)
redis.call('HSET', key, unpack(fields))
redis.call('PEXPIRE', key, ARGV[3])
return {10, tonumber(r[3])}

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
-- The result in fields of at most 64 bytes ('result', 'result2', ...), each cut between UTF-8 characters:
-- Redis keeps a hash whose values are all that short as a listpack (hash-max-listpack-value 64), about half
-- the memory of a hashtable. Every part but the last is at least 61 bytes (a cut backs up over at most 3
-- continuation bytes), so a reader knows a shorter part is the last. A result over 4 KB would need more
-- fields than a listpack holds (hash-max-listpack-entries 128): it stays one field.
local function resultFields(text, fields)
  if #text <= 64 or #text > 4096 then
    fields[#fields + 1] = 'result'
    fields[#fields + 1] = text
    return
  end
  local n, at = 0, 1
  while at <= #text do
    local stop = math.min(at + 63, #text)
    while stop < #text do
      local b = string.byte(text, stop + 1)
      if b < 128 or b >= 192 then break end
      stop = stop - 1
    end
    n = n + 1
    fields[#fields + 1] = n == 1 and 'result' or 'result' .. n
    fields[#fields + 1] = string.sub(text, at, stop)
    at = stop + 1
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

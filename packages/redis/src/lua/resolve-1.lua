--[[
  unknown -> done | released | failed, by an operator (code or CLI). Fence + 1, so any owner still
  holding an old token loses; who, when and why are kept on the record.

  Input:
    KEYS[1] the record (hash)
    ARGV[1] decision: "applied" | "not_applied" | "failed"
    ARGV[2] result JSON (applied), error JSON (failed), "" (not_applied)
    ARGV[3] by
    ARGV[4] why
    ARGV[5] the fence the operator saw, "" for any
    ARGV[6] retention, ms

  Output:
    {10, fence}    ok
    {12, reason}   refused: no record, not unknown, or the fence moved on; nothing changed
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

local r = redis.call('HMGET', key, 'state', 'fence')
if not r[1] then return {12, 'no record'} end
if r[1] ~= 'unknown' then return {12, 'state is ' .. r[1] .. ', not unknown'} end
if ARGV[5] ~= '' and tonumber(ARGV[5]) ~= tonumber(r[2]) then
  return {12, 'fence is ' .. r[2] .. ', expected ' .. ARGV[5]}
end

local decision = ARGV[1]
local state
if decision == 'applied' then
  state = 'done'
elseif decision == 'failed' then
  state = 'failed'
elseif decision == 'not_applied' then
  state = 'released'
else
  return redis.error_reply('ONCE_BAD_ARGUMENT unknown decision ' .. decision)
end

local fence = tonumber(r[2]) + 1
redis.call('HDEL', key, 'owner', 'lease_until', 'result', 'error')
redis.call('HSET', key, 'state', state, 'fence', fence, 'res_as', decision, 'res_by', ARGV[3],
  'res_why', ARGV[4], 'res_at', now, 'updated_at', now)
if state == 'done' then
  local fields = {}
  resultFields(ARGV[2], fields)
  redis.call('HSET', key, unpack(fields))
  redis.call('HDEL', key, 'phase')
end
if state == 'failed' then redis.call('HSET', key, 'error', ARGV[2]) end
redis.call('PEXPIRE', key, ARGV[6])
return {10, fence}

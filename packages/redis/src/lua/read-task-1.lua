--[[
  Reads a task on one server (or a Sentinel's master) in one round trip: its entry and every record filed
  under it. Changes nothing. The records are not among KEYS: their keys are only known from the entry, so
  this script is for one server, where a script may read any key; on a Cluster they are in other slots, and
  the store reads the entry and then the records on their own nodes.

  Input:
    KEYS[1] the task entry (hash)
    ARGV[1] the store's prefix, put before each filed key to name its record

  Output:
    {{field, value, ...}, key, pttl, {field, value, ...}, key, pttl, {...}, ...}
      the entry's fields, then each filed key with its record as the get script answers it (pttl -2 and an
      empty list when the record has expired), in no particular order: the entry's `c:<key>` numbers say the
      filing order
    {13, layout, known, key}
      a filed record's layout is newer than these scripts know (key: that record's, without the prefix)
]]
--- @include "includes/record"

local entry = redis.call('HGETALL', KEYS[1])
local reply = {entry}
for i = 1, #entry, 2 do
  local field = entry[i]
  if string.sub(field, 1, 2) == 'c:' then
    local key = string.sub(field, 3)
    local record = ARGV[1] .. key
    local rec, refused = loadRecord(record)
    -- One record this build cannot read fails the whole read: its answer names that record.
    if refused then
      if type(refused) == 'table' and refused[1] == 13 then return {13, refused[2], refused[3], key} end
      return refused
    end
    reply[#reply + 1] = key
    if rec then
      reply[#reply + 1] = redis.call('PTTL', record)
      reply[#reply + 1] = recordFields(rec)
    else
      reply[#reply + 1] = -2
      reply[#reply + 1] = {}
    end
  end
end
return reply

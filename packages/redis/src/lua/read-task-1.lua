--[[
  Reads a task on one server (or a Sentinel's master) in one round trip: its entry and every record filed
  under it. Changes nothing. The records are not among KEYS: their keys are only known from the entry, so
  this script is for one server, where a script may read any key; on a Cluster they are in other slots, and
  the store reads the entry and then the records on their own nodes.

  Input:
    KEYS[1] the task entry (hash)
    ARGV[1] the store's prefix, put before each filed key to name its record

  Output:
    {{field, value, ...}, FIELDS, STATES, PHASES, key, pttl, record, key, pttl, record, ...}
      the entry's fields, the names a packed record's positions and codes stand for (includes/record.lua),
      then each filed key with its record: the string it is kept in (layout 6 and later) as it is, for the
      store to unpack — Redis spends nothing on unpacking it — or a hash of an earlier layout as the get script
      answers it; pttl -2 and an empty list when the record has expired. In no particular order: the entry's
      `c:<key>` numbers say the filing order. The store refuses a packed record of a newer layout.
    {13, layout, known, key}
      a filed hash's layout is newer than these scripts know (key: that record's, without the prefix)
]]
--- @include "includes/record"

local entry = redis.call('HGETALL', KEYS[1])
local reply = {entry, FIELDS, STATES, PHASES}
for i = 1, #entry, 2 do
  local field = entry[i]
  if string.sub(field, 1, 2) == 'c:' then
    local key = string.sub(field, 3)
    local record = ARGV[1] .. key
    local kept = redis.pcall('GET', record)
    if type(kept) == 'string' then
      reply[#reply + 1] = key
      reply[#reply + 1] = redis.call('PTTL', record)
      reply[#reply + 1] = kept
    else
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
end
return reply

--[[
  Reads a record and its remaining retention in one round trip. Changes nothing.

  Input:
    KEYS[1] the record

  Output:
    {pttl, {field, value, ...}}   the record's fields by name (includes/record), in the form they are kept in;
                                  pttl is -2 (and the list empty) when there is no record
    {13, layout, known}           the record's layout is newer than these scripts know
]]
--- @include "includes/record"

local rec, refused = loadRecord(KEYS[1])
if refused then return refused end
if not rec then return {-2, {}} end
return {redis.call('PTTL', KEYS[1]), recordFields(rec)}

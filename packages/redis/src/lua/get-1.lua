--[[
  Reads a record and its remaining retention in one round trip. Changes nothing.

  Input:
    KEYS[1] the record (hash)

  Output:
    {pttl, {field, value, ...}}   pttl is -2 (and the list empty) when there is no record
]]
return {redis.call('PTTL', KEYS[1]), redis.call('HGETALL', KEYS[1])}

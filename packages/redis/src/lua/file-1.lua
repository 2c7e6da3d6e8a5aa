--[[
  Files a call under its task on a Redis Cluster, the first of a claim's two steps there (the record and the
  task entry are in different slots, so no one script touches both): the claim script runs only after this
  one filed the key. A cancel marks the task entry first and then visits every key filed before the mark, so
  a call filed here is reached by any later cancel, and a call refused here never claims.

  Input:
    KEYS[1] the task entry (hash)
    ARGV[1] the record's key, without the prefix
    ARGV[2] the task id, ARGV[3] its namespace: kept on the entry; "" when the store keeps no task identity
    ARGV[4] retention, ms

  Output:
    {10}                      filed (or filed before)
    {9, 0, by, why, at}       cancelled: the task was cancelled; nothing filed
]]
--- @include "includes/file"

local cancelled = fileUnder(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
if cancelled then return {9, 0, cancelled[1], cancelled[2], cancelled[3]} end
return {10}

--[[
  reconciling -> done: the reconcile hook found the effect had happened; this is its result.

  Input:
    KEYS[1] the record
    ARGV[1] owner token
    ARGV[2] result (JSON text)
    ARGV[3] retention, ms

  Output:
    {10, fence}    ok
    {11}           lost: the token is not the owner's; nothing changed
    {12, reason}   refused: the state does not allow it; nothing changed
    {13, layout, known}the record's layout is newer than these scripts know; nothing changed
]]
--- @include "includes/now"
--- @include "includes/record"
--- @include "includes/owned"

local rec, refused = owned({'reconciling'})
if refused then return refused end
-- A done record needs no phase (a reader takes a missing one as effect): a smaller record.
rec.state = 'done'
rec.phase = nil
rec.error = nil
rec.result = ARGV[2]
rec.updated_at = now
saveRecord(KEYS[1], rec, ARGV[3])
return {10, rec.fence}

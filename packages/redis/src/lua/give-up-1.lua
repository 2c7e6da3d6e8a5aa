--[[
  reconciling -> unknown: nothing could tell whether the effect happened (no reconcile hook, or it
  failed). An operator resolves it; the next claim reconciles again.

  Input:
    KEYS[1] the record
    ARGV[1] owner token
    ARGV[2] why, as an error (JSON of { name, message, code? }), "" for none
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
rec.state = 'unknown'
rec.result = nil
rec.error = nil
if ARGV[2] ~= '' then rec.error = ARGV[2] end
rec.updated_at = now
saveRecord(KEYS[1], rec, ARGV[3])
return {10, rec.fence}

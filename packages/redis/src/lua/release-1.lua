--[[
  claimed -> released: the next claim acquires the key afresh (fence + 1). Refused in the effect phase
  unless the caller asserts the effect was not applied: otherwise a retry could fire it twice.

  Input:
    KEYS[1] the record
    ARGV[1] owner token
    ARGV[2] "1" when the caller asserts the effect was not applied, else ""
    ARGV[3] retention, ms

  Output:
    {10, fence}    ok
    {11}           lost: the token is not the owner's; nothing changed
    {12, reason}   refused: the state or phase does not allow it; nothing changed
    {13, layout, known}the record's layout is newer than these scripts know; nothing changed
]]
--- @include "includes/now"
--- @include "includes/record"
--- @include "includes/owned"

local rec, refused = owned({'claimed'})
if refused then return refused end
if rec.phase == 'effect' and ARGV[2] ~= '1' then
  return {12, 'the effect phase has begun: release needs the assertion that the effect was not applied'}
end
rec.state = 'released'
rec.result = nil
rec.error = nil
rec.updated_at = now
saveRecord(KEYS[1], rec, ARGV[3])
return {10, rec.fence}

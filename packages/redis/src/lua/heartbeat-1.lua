--[[
  Extends the lease of a claimed or reconciling owner to now + lease. The lease is a field: when it
  runs out the record stays, and the next claim decides (takeover or reconcile).

  Input:
    KEYS[1] the record
    ARGV[1] owner token
    ARGV[2] lease, ms
    ARGV[3] retention, ms

  Output:
    {10, fence, lease_until, cancel}   ok; cancel is 1 when the call's task was cancelled while its effect
                                       ran (the owner aborts it), false otherwise
    {11}                       lost: the token is not the owner's; nothing changed
    {12, reason}               refused: the state does not allow it; nothing changed
    {13, layout, known}        the record's layout is newer than these scripts know; nothing changed
]]
--- @include "includes/now"
--- @include "includes/record"
--- @include "includes/owned"

local rec, refused = owned({'claimed', 'reconciling'})
if refused then return refused end
rec.lease_until = now + tonumber(ARGV[2])
rec.updated_at = now
saveRecord(KEYS[1], rec, ARGV[3])
local cancel = false
if rec.cancel_by then cancel = 1 end
return {10, rec.fence, rec.lease_until, cancel}

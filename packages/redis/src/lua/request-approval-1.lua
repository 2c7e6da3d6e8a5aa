--[[
  claimed -> awaiting_approval: the tool's policy wants a person's yes before the effect. The owner gives up
  the key (owner and lease go) and the request is kept: reason, when asked, when it expires. A record is asked
  about once: refused when it has had a request before.

  Input:
    KEYS[1] the record
    ARGV[1] owner token
    ARGV[2] reason
    ARGV[3] how long the request waits for a decision, ms
    ARGV[4] retention, ms

  Output:
    {10, fence, requested_at, expires_at}   ok: this write created the request
    {11}                                    lost: the token is not the owner's; nothing changed
    {12, reason}                            refused: not claimed, or asked before; nothing changed
    {13, layout, known}                     the record's layout is newer than these scripts know; nothing changed
]]
--- @include "includes/now"
--- @include "includes/record"
--- @include "includes/owned"

local rec, refused = owned({'claimed'})
if refused then return refused end
if rec.apr_at then return {12, 'an approval was requested for this record before'} end
rec.state = 'awaiting_approval'
rec.result = nil
rec.error = nil
rec.apr_reason = ARGV[2]
rec.apr_at = now
rec.apr_until = now + tonumber(ARGV[3])
rec.updated_at = now
saveRecord(KEYS[1], rec, ARGV[4])
return {10, rec.fence, now, rec.apr_until}

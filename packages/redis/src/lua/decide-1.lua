--[[
  awaiting_approval -> approved | failed (denied), by a person (code, CLI). Fence + 1; who, when and why are
  kept on the record. Bound to what the person saw: refused unless the record awaits approval, its request
  has not expired, and its fence and fingerprint are the ones given.

  Input:
    KEYS[1] the record
    ARGV[1] decision: "approved" | "denied"
    ARGV[2] the stored error of a denial (JSON), "" for approved
    ARGV[3] by
    ARGV[4] why
    ARGV[5] the fence the person saw
    ARGV[6] the fingerprint the person saw, in the record's form of it (includes/record)
    ARGV[7] retention, ms

  Output:
    {10, fence}           ok
    {12, reason}          refused: no record, not awaiting approval, expired, another fence or fingerprint;
                          nothing changed
    {13, layout, known}   the record's layout is newer than these scripts know; nothing changed
]]
--- @include "includes/now"
--- @include "includes/record"

local key = KEYS[1]
local rec, refused = loadRecord(key)
if refused then return refused end
if not rec then return {12, 'no record'} end
if rec.state ~= 'awaiting_approval' then return {12, 'state is ' .. rec.state .. ', not awaiting_approval'} end
if rec.apr_until <= now then return {12, 'the approval request expired'} end
if tonumber(ARGV[5]) ~= rec.fence then return {12, 'fence is ' .. rec.fence .. ', expected ' .. ARGV[5]} end
if ARGV[6] ~= rec.fp then return {12, "the fingerprint is another call's"} end

if ARGV[1] == 'approved' then
  rec.state = 'approved'
elseif ARGV[1] == 'denied' then
  rec.state = 'failed'
  rec.error = ARGV[2]
else
  return redis.error_reply('ONCE_BAD_ARGUMENT unknown decision ' .. ARGV[1])
end
rec.fence = rec.fence + 1
rec.apr_as = ARGV[1]
rec.apr_by = ARGV[3]
rec.apr_why = ARGV[4]
rec.apr_decided = now
rec.updated_at = now
saveRecord(key, rec, ARGV[7])
return {10, rec.fence}

--[[
  unknown -> done | released | failed, by an operator (code or CLI). Fence + 1, so any owner still
  holding an old token loses; who, when and why are kept on the record.

  Input:
    KEYS[1] the record
    ARGV[1] decision: "applied" | "not_applied" | "failed"
    ARGV[2] result JSON (applied), error JSON (failed), "" (not_applied)
    ARGV[3] by
    ARGV[4] why
    ARGV[5] the fence the operator saw, "" for any
    ARGV[6] retention, ms

  Output:
    {10, fence}           ok
    {12, reason}          refused: no record, not unknown, or the fence moved on; nothing changed
    {13, layout, known}   the record's layout is newer than these scripts know; nothing changed
]]
--- @include "includes/now"
--- @include "includes/record"

local key = KEYS[1]
local rec, refused = loadRecord(key)
if refused then return refused end
if not rec then return {12, 'no record'} end
if rec.state ~= 'unknown' then return {12, 'state is ' .. rec.state .. ', not unknown'} end
if ARGV[5] ~= '' and tonumber(ARGV[5]) ~= rec.fence then
  return {12, 'fence is ' .. rec.fence .. ', expected ' .. ARGV[5]}
end

local decision = ARGV[1]
rec.result = nil
rec.error = nil
if decision == 'applied' then
  rec.state = 'done'
  rec.result = ARGV[2]
  -- A done record needs no phase (a reader takes a missing one as effect).
  rec.phase = nil
elseif decision == 'failed' then
  rec.state = 'failed'
  rec.error = ARGV[2]
elseif decision == 'not_applied' then
  rec.state = 'released'
else
  return redis.error_reply('ONCE_BAD_ARGUMENT unknown decision ' .. decision)
end
rec.fence = rec.fence + 1
rec.res_as = decision
rec.res_by = ARGV[3]
rec.res_why = ARGV[4]
rec.res_at = now
rec.updated_at = now
saveRecord(key, rec, ARGV[6])
return {10, rec.fence}

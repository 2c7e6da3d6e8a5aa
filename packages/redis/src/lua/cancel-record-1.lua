--[[
  A cancel's visit of one call filed under the task: stops it if its effect has not begun, flags it if the
  effect may be running, leaves a settled one alone. Serialized with the call's claim and beginEffect on its
  record: if the effect began first, it began before the cancel returned; otherwise this leaves the record
  `cancelled` and its claim is answered cancelled, its beginEffect lost. A record that already holds the
  cancellation is left as it is (a cancel that is repeated, or resumed after a failure, changes nothing).

  Input:
    KEYS[1] the record
    ARGV[1] by, ARGV[2] why, ARGV[3] at (ms): the task's cancellation
    ARGV[4] retention, ms

  Output:
    {1, fence}            stopped: no record (a tombstone is left, fence 1), or claimed in the prepare phase,
                          released, awaiting_approval, approved: now `cancelled`, fence + 1, owner and lease gone
    {2, fence}            running: claimed in the effect phase, reconciling, unknown: unchanged but for the
                          cancellation, which the owner's next heartbeat reports
    {0, fence}            unchanged: done, failed, cancelled, or already told
    {13, layout, known}   the record's layout is newer than these scripts know; nothing changed
]]
--- @include "includes/now"
--- @include "includes/record"

local key = KEYS[1]
local rec, refused = loadRecord(key)
if refused then return refused end
if not rec then
  -- Filed but never claimed (a Cluster claim between its two steps): the claim that follows is refused.
  saveRecord(key, {state = 'cancelled', phase = 'prepare', fence = 1, claims = 0, fp = '', tool = '',
    created_at = now, updated_at = now, cancel_by = ARGV[1], cancel_why = ARGV[2], cancel_at = tonumber(ARGV[3])},
    ARGV[4])
  return {1, 1}
end

local state = rec.state
local running = state == 'reconciling' or state == 'unknown' or (state == 'claimed' and rec.phase == 'effect')
local unstarted = state == 'released' or state == 'awaiting_approval' or state == 'approved' or
  (state == 'claimed' and rec.phase == 'prepare')
if rec.cancel_by then
  if running then return {2, rec.fence} end
  return {0, rec.fence}
end
if not unstarted and not running then return {0, rec.fence} end
rec.cancel_by = ARGV[1]
rec.cancel_why = ARGV[2]
rec.cancel_at = tonumber(ARGV[3])
rec.updated_at = now
if running then
  saveRecord(key, rec, ARGV[4])
  return {2, rec.fence}
end
rec.state = 'cancelled'
rec.fence = rec.fence + 1
rec.result = nil
rec.error = nil
saveRecord(key, rec, ARGV[4])
return {1, rec.fence}

--[[
  The claim of a call that names its task, on one Redis server (or a Sentinel's master): the key is filed
  under its task and the record claimed in the same script, or the claim is refused because the task was
  cancelled. So a claim is wholly before a cancel's mark of the task entry (and the cancel then reaches its
  record) or wholly after it (and refused). A Cluster keeps the two keys in different slots: there the store
  runs file on the task entry, then claim.

  Input:
    KEYS[1] the record
    KEYS[2] the task entry (hash)
    ARGV[1] to ARGV[10] as claim's
    ARGV[11] the record's key, without the prefix (what the task entry files)
    ARGV[12] to ARGV[14] as claim's ARGV[11] to ARGV[13] (liveness)

  Output: claim's; {9, fence, by, why, at} (cancelled) also when the task was cancelled, whatever the record
  (fence 0 when there is none), and then nothing is filed, nothing claimed.
]]
--- @include "includes/now"
--- @include "includes/record"
--- @include "includes/claim-record"
--- @include "includes/file"

local cancelled = fileUnder(KEYS[2], ARGV[11], ARGV[9], ARGV[8], ARGV[5])
if cancelled then
  local rec, refused = loadRecord(KEYS[1])
  if refused then return refused end
  return {9, rec and rec.fence or 0, cancelled[1], cancelled[2], cancelled[3]}
end
return claimRecord(12)

--[[
  Claims a key for a new owner, or says why not. The one place ownership is granted.

  Input:
    KEYS[1] the record (hash)
    ARGV[1] fingerprint of the call
    ARGV[2] tool name
    ARGV[3] phase a fresh owner starts in: "prepare" or "effect"
    ARGV[4] lease, ms
    ARGV[5] retention, ms
    ARGV[6] owner nonce (the token is "<fence>.<nonce>")
    ARGV[7] W3C traceparent of this attempt, "" for none

  Output (first element is the code):
    {1, fence, token, lease_until, claims}          acquired: no record, or released
    {2, fence, token, lease_until, claims}          takeover: a prepare-phase lease ran out
    {3, fence, token, lease_until, claims, from}    reconcile: from "claimed" | "reconciling" | "unknown"
    {4, fence, result, trace}                       replay: done
    {5, fence, error, trace}                        replay_error: failed
    {6, fence, state, lease_remaining_ms}           in_flight: another owner's lease is alive
    {7, tool}                                       conflict: the fingerprint differs
]]
local key = KEYS[1]
-- The server's clock: every worker judges leases by the same time, whatever its own clock says.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local r = redis.call('HMGET', key, 'state', 'phase', 'fence', 'lease_until', 'fp', 'tool', 'result', 'error', 'trace',
  'result2')
local state = r[1]

local function grant(code, newState, from)
  local fence = (tonumber(r[3]) or 0) + 1
  local token = fence .. '.' .. ARGV[6]
  local leaseUntil = now + tonumber(ARGV[4])
  -- A reconciler always works in the effect phase: the effect may already have happened.
  local phase = 'effect'
  if newState == 'claimed' then phase = ARGV[3] end
  local claims = redis.call('HINCRBY', key, 'claims', 1)
  redis.call('HSET', key, 'state', newState, 'phase', phase, 'fence', fence, 'owner', token,
    'lease_until', leaseUntil, 'updated_at', now)
  if ARGV[7] ~= '' then redis.call('HSET', key, 'trace', ARGV[7]) end
  redis.call('PEXPIRE', key, ARGV[5])
  return {code, fence, token, leaseUntil, claims, from}
end

if not state then
  -- grant() for a record born now, written in one HSET: the commonest claim, and fewer calls cost Redis less.
  local token = '1.' .. ARGV[6]
  local leaseUntil = now + tonumber(ARGV[4])
  redis.call('HSET', key, 'fp', ARGV[1], 'tool', ARGV[2], 'fence', 1, 'claims', 1, 'created_at', now,
    'state', 'claimed', 'phase', ARGV[3], 'owner', token, 'lease_until', leaseUntil, 'updated_at', now)
  if ARGV[7] ~= '' then redis.call('HSET', key, 'trace', ARGV[7]) end
  redis.call('PEXPIRE', key, ARGV[5])
  return {1, 1, token, leaseUntil, 1}
end

if r[5] ~= ARGV[1] then return {7, r[6]} end

local fence = tonumber(r[3])
if state == 'done' then
  -- A result of 65 to 128 bytes is kept in two parts (see complete).
  local result = r[7]
  if r[10] then result = result .. r[10] end
  return {4, fence, result, r[9]}
end
if state == 'failed' then return {5, fence, r[8], r[9]} end
if state == 'released' then return grant(1, 'claimed') end
if state == 'unknown' then return grant(3, 'reconciling', 'unknown') end
if state == 'claimed' or state == 'reconciling' then
  local leaseUntil = tonumber(r[4]) or 0
  if leaseUntil > now then return {6, fence, state, leaseUntil - now} end
  -- Nothing has touched the outside world in the prepare phase, so a new owner may simply start over.
  if state == 'claimed' and r[2] == 'prepare' then return grant(2, 'claimed') end
  return grant(3, 'reconciling', state)
end
return redis.error_reply('ONCE_CORRUPT record ' .. key .. ' has state ' .. tostring(state))

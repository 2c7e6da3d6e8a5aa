-- The claim of the record KEYS[1], the one place ownership is granted, as the claim script's contract says
-- (ARGV[1] to ARGV[10] as there): shared by claim, and by claim-filed, which files the key under its task in
-- the same script. The liveness arguments start at ARGV[live]: the claimant's own entry ('' for none), the
-- entry the claimant saw gone ('' for none) and the fence of the record it saw naming that entry.
local function claimRecord(live)
  local key = KEYS[1]
  local rec, refused = loadRecord(key)
  if refused then return refused end
  local ownLive = ARGV[live]
  if ownLive == '' then ownLive = nil end
  local trace = ARGV[7]
  if trace == '' then trace = nil end

  if not rec then
    -- The commonest claim: a record born now, and its task's identity when the store keeps it.
    local token = '1.' .. ARGV[6]
    local leaseUntil = now + tonumber(ARGV[4])
    rec = {state = 'claimed', phase = ARGV[3], fence = 1, claims = 1, created_at = now, updated_at = now,
      fp = ARGV[1], tool = ARGV[2], owner = token, lease_until = leaseUntil, trace = trace, live = ownLive}
    if ARGV[10] ~= '' then
      rec.ns = ARGV[8]
      rec.task_id = ARGV[9]
      rec.step_id = ARGV[10]
    end
    saveRecord(key, rec, ARGV[5])
    return {1, 1, token, leaseUntil, 1}
  end

  local function grant(code, newState, from)
    local fence = rec.fence + 1
    local token = fence .. '.' .. ARGV[6]
    local leaseUntil = now + tonumber(ARGV[4])
    -- A reconciler always works in the effect phase: the effect may already have happened.
    local phase = 'effect'
    if newState == 'claimed' then phase = ARGV[3] end
    -- A person's yes is used by the owner that runs the effect: it is not asked again.
    local approved = false
    if rec.apr_as == 'approved' then approved = 1 end
    rec.claims = (rec.claims or 0) + 1
    rec.state = newState
    rec.phase = phase
    rec.fence = fence
    rec.owner = token
    rec.lease_until = leaseUntil
    rec.updated_at = now
    if trace then rec.trace = trace end
    -- The new owner's process's entry, or none: a former owner's entry says nothing about this one.
    rec.live = ownLive
    saveRecord(key, rec, ARGV[5])
    return {code, fence, token, leaseUntil, rec.claims, from or false, approved}
  end

  local state = rec.state
  -- A cancel's record answers every claim alike, before the fingerprint: a tombstone knows no call.
  if state == 'cancelled' then return {9, rec.fence, rec.cancel_by, rec.cancel_why or '', rec.cancel_at} end
  if rec.fp ~= ARGV[1] then return {7, rec.tool} end

  local fence = rec.fence
  if state == 'done' then return {4, fence, rec.result, rec.trace or false} end
  if state == 'failed' then return {5, fence, rec.error, rec.trace or false} end
  if state == 'released' or state == 'approved' then return grant(1, 'claimed') end
  if state == 'awaiting_approval' then
    if rec.apr_until > now then return {8, fence, rec.apr_reason, rec.apr_at, rec.apr_until} end
    -- Nobody decided in time: the call fails for good, replayed to every later attempt (APPROVAL_EXPIRED_ERROR
    -- of @once/core, the same text).
    local expired = '{"name":"ApprovalExpiredError","message":"the approval request expired with no decision",' ..
      '"code":"approval_expired"}'
    rec.state = 'failed'
    rec.error = expired
    rec.apr_as = 'expired'
    rec.apr_decided = now
    rec.updated_at = now
    saveRecord(key, rec, ARGV[5])
    return {5, fence, expired, rec.trace or false}
  end
  if state == 'unknown' then return grant(3, 'reconciling', 'unknown') end
  if state == 'claimed' or state == 'reconciling' then
    local leaseUntil = rec.lease_until or 0
    -- The claimant saw the owner's liveness entry gone, and the record still names that entry at the fence it
    -- saw: the owner's process is gone (an entry is never made again), so its lease is not waited out.
    local ownerGone = rec.live ~= nil and rec.live == ARGV[live + 1] and fence == tonumber(ARGV[live + 2])
    if leaseUntil > now and not ownerGone then return {6, fence, state, leaseUntil - now, rec.live or false} end
    -- Nothing has touched the outside world in the prepare phase, so a new owner may simply start over.
    if state == 'claimed' and rec.phase == 'prepare' then return grant(2, 'claimed') end
    return grant(3, 'reconciling', state)
  end
  return redis.error_reply('ONCE_CORRUPT record ' .. key .. ' has state ' .. tostring(state))
end

--[[
  Claims a key for a new owner, or says why not. The one place ownership is granted (includes/claim-record).
  A claim that names its task runs claim-filed instead, or on a Cluster first file on the task entry.

  Input:
    KEYS[1] the record
    ARGV[1] fingerprint of the call, in the record's form of it (includes/record)
    ARGV[2] tool name
    ARGV[3] phase a fresh owner starts in: "prepare" or "effect"
    ARGV[4] lease, ms
    ARGV[5] retention, ms
    ARGV[6] owner nonce (the token is "<fence>.<nonce>")
    ARGV[7] W3C traceparent of this attempt in the record's form of it (its 25 bytes), "" for none
    ARGV[8] the call's namespace, ARGV[9] its task id, ARGV[10] its step id: kept on a record born now when
            ARGV[10] is not "" (the store keeps task identity and the claim named its task)
    ARGV[11] the claimant's liveness entry id, kept on the record (`live`) if it becomes the owner; "" for none
    ARGV[12] the id of a liveness entry the claimant saw gone, "" for none, and ARGV[13] the fence of the
             record it read that id from: while the record still names that entry at that fence, its owner's
             lease counts as run out (docs/protocol.md, "Liveness")

  Output (first element is the code):
    {1, fence, token, lease_until, claims, false, approved}   acquired: no record, released, or approved
    {2, fence, token, lease_until, claims, false, approved}   takeover: a prepare-phase lease ran out
    {3, fence, token, lease_until, claims, from, approved}    reconcile: from "claimed" | "reconciling" |
                                                    "unknown"; approved is 1 when the record holds a
                                                    person's approval, false otherwise
    {4, fence, result, trace}                       replay: done (trace as kept, false for none)
    {5, fence, error, trace}                        replay_error: failed; or awaiting_approval past its
                                                    expiry, which this claim fails for good
                                                    (approval_expired)
    {6, fence, state, lease_remaining_ms, live}     in_flight: another owner's lease is alive; live is the
                                                    liveness entry its process named (false for none),
                                                    for the claimant to look at
    {7, tool}                                       conflict: the fingerprint differs
    {8, fence, reason, requested_at, expires_at}    awaiting_approval: a person has not decided yet
    {9, fence, by, why, at}                         cancelled: the record is its task's cancel's; nothing
                                                    granted, in any case and for any fingerprint
    {13, layout, known}                             the record's layout is newer than these scripts know;
                                                    nothing read, nothing changed
]]
--- @include "includes/now"
--- @include "includes/record"
--- @include "includes/claim-record"

return claimRecord(11)

--[[
  A process's liveness entry (docs/protocol.md, "Liveness"): one key per process, renewed by one heartbeat for
  all of its claims; a claim names it, and while it lives its owner's claims wait out their leases. The key is
  in a slot of its own (on a Cluster not the record's), so no claim reads it: a claimant does, and tells the
  claim what it saw. An entry is made once: renew never makes a missing one, so gone is for good.

  Input:
    KEYS[1] the entry (string)
    ARGV[1] "open" (create, only if absent), "renew" (extend, only if present), "end" (delete) or "read"
    ARGV[2] time to live from now, ms (open, renew)

  Output:
    open, renew   1 when done; 0 when not (open: the entry exists; renew: it is gone, and stays gone)
    end           1
    read          the entry's time left in ms; -2 when it is gone
]]
local op = ARGV[1]
if op == 'open' then
  if redis.call('SET', KEYS[1], '1', 'PX', ARGV[2], 'NX') then return 1 end
  return 0
end
if op == 'renew' then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if op == 'end' then
  redis.call('DEL', KEYS[1])
  return 1
end
if op == 'read' then return redis.call('PTTL', KEYS[1]) end
return redis.error_reply('ONCE_ARGS liveness: unknown operation ' .. tostring(op))

-- The record an owner write is about (KEYS[1]); or nil and the reply that refuses the write: {11} (lost) when
-- ARGV[1] is not the owner's full token, fence and nonce, since a former owner whose lease was taken over must
-- not write; {12, reason} when the state is none of `states`, those the transition leaves from; {13, layout,
-- known} when the record is of a newer layout.
local function owned(states)
  local rec, refused = loadRecord(KEYS[1])
  if refused then return nil, refused end
  if not rec or rec.owner ~= ARGV[1] then return nil, {11} end
  for _, state in ipairs(states) do
    if rec.state == state then return rec end
  end
  return nil, {12, 'state is ' .. rec.state .. ', not ' .. table.concat(states, ' or ')}
end

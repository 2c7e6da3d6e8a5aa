-- Files the record key `recordKey` under the task entry `taskKey` (a hash: 'seq', and 'c:<key>' = the order
-- of each key's first filing; 'ns' and 'task_id' when `taskId` is not ""), or refuses when the task was
-- cancelled: then the cancel's {by, why, at}, and nothing filed. Either way the entry lives another retention
-- (`retention`, ms): a cancelled task stays cancelled while its calls are retried.
local function fileUnder(taskKey, recordKey, taskId, ns, retention)
  local cancel = redis.call('HMGET', taskKey, 'cancel_by', 'cancel_why', 'cancel_at')
  if not cancel[1] then
    local field = 'c:' .. recordKey
    if redis.call('HEXISTS', taskKey, field) == 0 then
      redis.call('HSET', taskKey, field, redis.call('HINCRBY', taskKey, 'seq', 1))
      if taskId ~= '' then redis.call('HSET', taskKey, 'ns', ns, 'task_id', taskId) end
    end
  end
  redis.call('PEXPIRE', taskKey, retention)
  if cancel[1] then return {cancel[1], cancel[2] or '', tonumber(cancel[3])} end
  return nil
end

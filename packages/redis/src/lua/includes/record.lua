-- A record, read and written in one place: every script works on a table of its fields by name (`rec.state`,
-- `rec.fence`, …) and leaves the form they are kept in to loadRecord and saveRecord.
--
-- Layout 6 keeps a record as one string: a MessagePack array whose first element is the layout and whose
-- others are the fields in the order of FIELDS, `false` for a field the record lacks, ending at its last
-- field present. A string of a few hundred bytes costs Redis half what a hash of the same fields does (no
-- field names, no per-field headers; numbers as integers), and a transition is one GET and one SET. The
-- fingerprint and the traceparent arrive and are kept as bytes (FINGERPRINT and TRACE below); every other
-- field as text or a number. Every later layout keeps the string a MessagePack array that starts with its
-- layout, so these scripts refuse it ({13, layout, known}) before reading anything else.
--
-- Layouts 1 to 5 kept a record as a hash of named fields. loadRecord reads one as it is, in the same table;
-- the first transition that writes it saves it in layout 6. A hash whose `layout` field is newer than LAYOUT is
-- refused like a newer string.
--
--   fingerprint  1 byte of kind, then: 1 → the 32 bytes of a 64-hex-character fingerprint; 0 → any other text
--   traceparent  the 16 bytes of the trace id, the 8 of the span id, 1 of flags (version 00); none otherwise

local LAYOUT = 6
local FIELDS = {'state', 'fence', 'claims', 'created_at', 'updated_at', 'fp', 'tool', 'result', 'error', 'trace',
  'ns', 'task_id', 'step_id', 'phase', 'owner', 'lease_until', 'live', 'apr_as', 'apr_reason', 'apr_at',
  'apr_until', 'apr_by', 'apr_why', 'apr_decided', 'res_as', 'res_by', 'res_why', 'res_at', 'cancel_by',
  'cancel_why', 'cancel_at'}
-- States and phases are kept as their number here (a byte each).
local STATES = {'claimed', 'reconciling', 'unknown', 'released', 'done', 'failed', 'awaiting_approval',
  'approved', 'cancelled'}
local PHASES = {'prepare', 'effect'}
local NUMBERED = {}
for i, name in ipairs(STATES) do NUMBERED[name] = i end
for i, name in ipairs(PHASES) do NUMBERED[name] = i end
-- The fields kept as numbers (a hash of an earlier layout kept them as text).
local NUMBERS = {fence = true, claims = true, created_at = true, updated_at = true, lease_until = true,
  apr_at = true, apr_until = true, apr_decided = true, res_at = true, cancel_at = true}
-- Only an owned record has an owner, a lease and its owner's liveness entry.
local OWNED = {claimed = true, reconciling = true}

local function corrupt(key, what)
  return redis.error_reply('ONCE_CORRUPT record ' .. key .. ' ' .. what)
end

-- A hash of layouts 1 to 5, in this layout's terms: numbers, the result's two parts as one, the fingerprint and
-- the traceparent as their bytes.
local function loadHash(key)
  local flat = redis.call('HGETALL', key)
  local h = {}
  for i = 1, #flat, 2 do h[flat[i]] = flat[i + 1] end
  if h.layout then
    local n = tonumber(h.layout)
    if not n or n < 1 or n ~= math.floor(n) then return nil, corrupt(key, 'has layout ' .. h.layout) end
    if n > LAYOUT then return nil, {13, n, LAYOUT} end
  end
  local rec = {}
  for _, name in ipairs(FIELDS) do
    local value = h[name]
    if value and NUMBERS[name] then value = tonumber(value) end
    rec[name] = value
  end
  if h.result2 then rec.result = (rec.result or '') .. h.result2 end
  local fp = rec.fp or ''
  if #fp == 64 and not string.find(fp, '[^0-9a-f]') then
    rec.fp = '\1' .. string.gsub(fp, '..', function(hex) return string.char(tonumber(hex, 16)) end)
  else
    rec.fp = '\0' .. fp
  end
  if rec.trace then
    local id, span, flags = string.match(rec.trace, '^00%-(%x+)%-(%x+)%-(%x%x)$')
    if id and #id == 32 and #span == 16 then
      rec.trace = string.gsub(id .. span .. flags, '..', function(hex) return string.char(tonumber(hex, 16)) end)
    else
      rec.trace = nil
    end
  end
  return rec
end

-- The record at `key` as a table, nil when there is none; or nil and the reply that refuses it: {13, layout,
-- known} when it is of a newer layout (nothing may be read from it, nothing written), an error when it is no
-- record.
local function loadRecord(key)
  local raw = redis.pcall('GET', key)
  if type(raw) == 'table' then return loadHash(key) end
  if not raw then return nil end
  local ok, a = pcall(cmsgpack.unpack, raw)
  if not ok or type(a) ~= 'table' or type(a[1]) ~= 'number' then return nil, corrupt(key, 'is not a record') end
  if a[1] > LAYOUT then return nil, {13, a[1], LAYOUT} end
  local rec = {}
  for i, name in ipairs(FIELDS) do
    local value = a[i + 1]
    if value ~= nil and value ~= false then rec[name] = value end
  end
  rec.state = STATES[rec.state]
  if rec.phase then rec.phase = PHASES[rec.phase] end
  if not rec.state then return nil, corrupt(key, 'has no state') end
  return rec
end

-- Writes `rec` at `key` in this layout, to live `ttl` ms from now (every transition starts a new retention). A
-- record that is not owned keeps no owner, lease or liveness entry, whatever the script left in it.
local function saveRecord(key, rec, ttl)
  if not OWNED[rec.state] then
    rec.owner = nil
    rec.lease_until = nil
    rec.live = nil
  end
  local last = 0
  for i, name in ipairs(FIELDS) do
    if rec[name] ~= nil then last = i end
  end
  local a = {LAYOUT}
  for i = 1, last do
    local name = FIELDS[i]
    local value = rec[name]
    if value == nil then
      value = false
    elseif name == 'state' or name == 'phase' then
      value = NUMBERED[value]
    end
    a[i + 1] = value
  end
  redis.call('SET', key, cmsgpack.pack(a), 'PX', ttl)
end

-- The record as the get script answers it: {field, value, …} by the names of FIELDS, the fingerprint and the
-- traceparent as their bytes (the store turns them back into text).
local function recordFields(rec)
  local flat = {}
  for _, name in ipairs(FIELDS) do
    local value = rec[name]
    if value ~= nil then
      flat[#flat + 1] = name
      flat[#flat + 1] = value
    end
  end
  return flat
end

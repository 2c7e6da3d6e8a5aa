-- The server's clock, in ms: every worker judges leases by the same time, whatever its own clock says.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

-- Fixed-window rate limit: one counter per caller, restarted by its own expiry.
--
-- KEYS[1]  the caller's counter
-- ARGV[1]  the window in milliseconds
-- ARGV[2]  the limit: hits allowed per window
--
-- Returns {allowed (1|0), count, pttl}: count is the hits of the current
-- window, this one included (refused hits count too); pttl is what is left
-- of the window in milliseconds.
local key = KEYS[1]
local window = tonumber(ARGV[1])

local count = redis.call('INCR', key)
if count == 1 then
  -- The first hit opens the window. Later hits never touch the expiry:
  -- refreshing it on every hit would keep a busy caller's window open forever.
  redis.call('PEXPIRE', key, window)
  return {1, count, window}
end

local pttl = redis.call('PTTL', key)
if pttl == -1 then
  -- A counter without an expiry was left by another writer (INCR, then a
  -- crash before its EXPIRE). It would never restart: give it a window now.
  redis.call('PEXPIRE', key, window)
  pttl = window
end

local allowed = 0
if count <= tonumber(ARGV[2]) then
  allowed = 1
end
return {allowed, count, pttl}

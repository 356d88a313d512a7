-- Crash-safe slot acquire. One sorted set per user: member = holder id,
-- score = the moment that slot stops being believable (its expiry).
--
-- KEYS[1]  the slot set
-- ARGV[1]  now, in the score unit (ms or s)
-- ARGV[2]  now + ttl, in the score unit: the new member's score
-- ARGV[3]  the key's own expiry in milliseconds (2 x ttl)
-- ARGV[4]  the limit
-- ARGV[5]  the holder id
--
-- Returns {granted (1|0), used}: used counts the slots held after the call,
-- the new one included when granted.
local key = KEYS[1]
local id = ARGV[5]

-- Prune slots whose holders stopped heartbeating (score <= now).
redis.call('ZREMRANGEBYSCORE', key, '-inf', ARGV[1])
local used = redis.call('ZCARD', key)

-- Idempotent re-acquire: the holder already owns a slot. Refresh it (never
-- moving its expiry back) and grant without counting it twice.
if redis.call('ZSCORE', key, id) then
  redis.call('ZADD', key, 'GT', ARGV[2], id)
  redis.call('PEXPIRE', key, ARGV[3])
  return {1, used}
end

if used < tonumber(ARGV[4]) then
  redis.call('ZADD', key, ARGV[2], id)
  redis.call('PEXPIRE', key, ARGV[3])
  return {1, used + 1}
end

return {0, used}

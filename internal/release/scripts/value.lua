-- Compare-and-set for counters and rate counters: sets KEYS[1] to ARGV[2]
-- only if it still holds ARGV[1], the previewed value, keeping its TTL.
-- A counter that changed since the preview was moved by live traffic and
-- is not overwritten. Returns {1, previous} when set, {0, current} when
-- not (current is '' for a key that is gone). The value is read bounded
-- as lock.lua reads a token.
local now = redis.call('GETRANGE', KEYS[1], 0, 512)
local exists = now ~= '' or redis.call('PTTL', KEYS[1]) ~= -2
if exists and now == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
  return {1, now}
end
if not exists then now = '' end
return {0, now}

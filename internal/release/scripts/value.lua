-- Compare-and-set for counters and rate counters: sets KEYS[1] to ARGV[2]
-- only if it still holds ARGV[1], the previewed value, keeping its TTL.
-- A counter that changed since the preview was moved by live traffic and
-- is not overwritten. Returns {1, previous} when set, {0, current} when
-- not (current is '' for a key that is gone).
local now = redis.call('GET', KEYS[1])
if now == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
  return {1, now}
end
return {0, now or ''}

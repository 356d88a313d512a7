-- Deletes a lock only if it still holds the previewed token, as the
-- owner-lock recipe's own release does. KEYS[1] is the lock, ARGV[1] the
-- token. Returns {1} when deleted, {0, current} when another token (or
-- none: current is '') holds it now.
local now = redis.call('GET', KEYS[1])
if now == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return {1, now}
end
return {0, now or ''}

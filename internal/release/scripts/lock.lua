-- Deletes a lock only if it still holds the previewed token, as the
-- owner-lock recipe's own release does. KEYS[1] is the lock, ARGV[1] the
-- token (at most 512 bytes: the preview reads no more). Returns {1} when
-- deleted, {0, current} when another token (or none: current is '') holds
-- it now. The token is read bounded, 513 bytes at most (GETRANGE 0 512):
-- a longer value cannot equal ARGV[1], and is not copied whole into the
-- reply. GETRANGE answers '' for a missing key too; PTTL tells.
local now = redis.call('GETRANGE', KEYS[1], 0, 512)
local exists = now ~= '' or redis.call('PTTL', KEYS[1]) ~= -2
if exists and now == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return {1, now}
end
if not exists then now = '' end
return {0, now}

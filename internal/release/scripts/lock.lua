-- Deletes a lock only if it still holds the previewed token, as the
-- owner-lock recipe's own release does. KEYS[1] is the lock, ARGV[1] the
-- token (at most 512 bytes: the preview reads no more). Returns {1} when
-- deleted, {0, current} when another token (or none: current is '') holds
-- it now. The token is read bounded, 513 bytes at most (GETRANGE 0 512):
-- a longer value cannot equal ARGV[1], and is not copied whole into the
-- reply. GETRANGE answers '' for a missing key too; PTTL tells.
-- Redis refuses a command a script may not run with an error that names
-- neither the command nor the user; redis.acl_check_cmd (Redis 7+) lets
-- the script name it before it writes anything.
if redis.acl_check_cmd then
  for _, c in ipairs({{'GETRANGE', KEYS[1], '0', '512'}, {'PTTL', KEYS[1]}, {'DEL', KEYS[1]}}) do
    if not redis.acl_check_cmd(unpack(c)) then
      return redis.error_reply("NOPERM this user has no permissions to run the '" .. string.lower(c[1]) .. "' command (in the release script)")
    end
  end
end
local now = redis.call('GETRANGE', KEYS[1], 0, 512)
local exists = now ~= '' or redis.call('PTTL', KEYS[1]) ~= -2
if exists and now == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return {1, now}
end
if not exists then now = '' end
return {0, now}

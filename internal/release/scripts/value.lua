-- Compare-and-set for counters and rate counters: sets KEYS[1] to ARGV[2]
-- only if it still holds ARGV[1], the previewed value, keeping its TTL.
-- A counter that changed since the preview was moved by live traffic and
-- is not overwritten. Returns {1, previous} when set, {0, current} when
-- not (current is '' for a key that is gone). The value is read bounded
-- as lock.lua reads a token.
-- Redis refuses a command a script may not run with an error that names
-- neither the command nor the user; redis.acl_check_cmd (Redis 7+) lets
-- the script name it before it writes anything.
if redis.acl_check_cmd then
  for _, c in ipairs({{'GETRANGE', KEYS[1], '0', '512'}, {'PTTL', KEYS[1]}, {'SET', KEYS[1], 'v'}}) do
    if not redis.acl_check_cmd(unpack(c)) then
      return redis.error_reply("NOPERM this user has no permissions to run the '" .. string.lower(c[1]) .. "' command (in the release script)")
    end
  end
end
local now = redis.call('GETRANGE', KEYS[1], 0, 512)
local exists = now ~= '' or redis.call('PTTL', KEYS[1]) ~= -2
if exists and now == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
  return {1, now}
end
if not exists then now = '' end
return {0, now}

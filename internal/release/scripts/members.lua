-- Removes the previewed members of one slot set whose scores have not
-- moved since the preview. KEYS[1] is the set; ARGV holds pairs of member
-- and previewed score. A member whose score moved was refreshed by a
-- heartbeat: its holder is alive, and it stays.
--
-- Returns, per pair, 1 removed, 0 kept (score moved; the current score
-- follows), -1 gone already; as a flat list {code, score, code, score...}.
-- Redis refuses a command a script may not run with an error that names
-- neither the command nor the user; redis.acl_check_cmd (Redis 7+) lets
-- the script name it before it writes anything.
if redis.acl_check_cmd then
  for _, c in ipairs({{'ZSCORE', KEYS[1], 'm'}, {'ZREM', KEYS[1], 'm'}}) do
    if not redis.acl_check_cmd(unpack(c)) then
      return redis.error_reply("NOPERM this user has no permissions to run the '" .. string.lower(c[1]) .. "' command (in the release script)")
    end
  end
end
local out = {}
for i = 1, #ARGV, 2 do
  local member, was = ARGV[i], ARGV[i + 1]
  local now = redis.call('ZSCORE', KEYS[1], member)
  if not now then
    out[#out + 1] = -1
    out[#out + 1] = ''
  elseif now == was or tonumber(now) == tonumber(was) then
    redis.call('ZREM', KEYS[1], member)
    out[#out + 1] = 1
    out[#out + 1] = now
  else
    out[#out + 1] = 0
    out[#out + 1] = now
  end
end
return out

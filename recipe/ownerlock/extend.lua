-- Token-checked extension of an owner lock's lease.
--
-- KEYS[1]  the lock
-- ARGV[1]  the token its holder was given when it acquired the lock
-- ARGV[2]  the new lease, in milliseconds from now
--
-- Returns 1 if the lock is still held with that token and its lease now ends
-- ARGV[2] ms from now, else 0: the holder has lost the lock and must stop.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0

-- Token-checked release of an owner lock.
--
-- KEYS[1]  the lock
-- ARGV[1]  the token its holder was given when it acquired the lock
--
-- Returns 1 if the lock was held with that token and is now deleted, else 0
-- (the lease ran out, and the lock is free or someone else's).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0

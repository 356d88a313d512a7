-- Token-checked extension of a taken job's lease.
--
-- KEYS[1]  the job's lease key
-- ARGV[1]  the token its worker was given when it took the job
-- ARGV[2]  the new lease, in milliseconds from now
--
-- Returns 1 if the lease still holds that token and now ends ARGV[2] ms
-- from now, else 0 with nothing changed: the lease ran out, and it may be
-- another take's now.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0

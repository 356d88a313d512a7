-- Token-checked completion of a job taken from a reliable list queue.
--
-- KEYS[1]  the processing list
-- KEYS[2]  the job's lease key
-- ARGV[1]  the job
-- ARGV[2]  the token its worker was given when it took the job
--
-- Returns 1 if the job was in the processing list and is now gone from it,
-- else 0, with nothing changed. The lease decides whose job it is:
--   - it holds the token: this take's, completed;
--   - it holds anything else (a later take's token, or the mark a reaper
--     leaves when it gives the job back): someone else's, left alone;
--   - it is gone: the lease ran out. If the job is still in the processing
--     list, nobody gave it back, so it is still this take's and completes;
--     if it is not, a reaper gave it back (someone else may be working on
--     it again).
local lease = redis.call('GET', KEYS[2])
if lease and lease ~= ARGV[2] then
  return 0
end
local n = redis.call('LREM', KEYS[1], 1, ARGV[1])
if lease then
  redis.call('DEL', KEYS[2])
end
return n

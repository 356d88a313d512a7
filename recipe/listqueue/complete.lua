-- Completion of a job taken from a reliable list queue.
--
-- KEYS[1]  the processing list
-- KEYS[2]  the job's lease key
-- ARGV[1]  the job
--
-- Returns 1 if the job was in the processing list and is now gone from it,
-- 0 if it was not there (a reaper gave it back to the queue: someone else
-- may be working on it again).
local n = redis.call('LREM', KEYS[1], 1, ARGV[1])
redis.call('DEL', KEYS[2])
return n

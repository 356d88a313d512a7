-- A reaper gives a dead worker's job back to its queue.
--
-- KEYS[1]  the processing list
-- KEYS[2]  the queue
-- KEYS[3]  the job's lease key
-- ARGV[1]  the job
--
-- Returns 1 if the job was moved back, 0 if it was left alone: its lease
-- exists (its worker is alive), or it is no longer in the processing list
-- (completed, or moved back by another reaper).
if redis.call('EXISTS', KEYS[3]) == 1 then
  return 0
end
if redis.call('LREM', KEYS[1], -1, ARGV[1]) == 0 then
  return 0
end
-- The pop side: the job is taken next, before younger work.
redis.call('RPUSH', KEYS[2], ARGV[1])
return 1

-- A reaper gives a dead worker's job back to its queue.
--
-- KEYS[1]  the processing list
-- KEYS[2]  the queue
-- KEYS[3]  the job's lease key
-- ARGV[1]  the job
-- ARGV[2]  the mark left as the job's lease (never a take's token)
-- ARGV[3]  how long the mark lasts, in milliseconds
--
-- Returns 1 if the job was moved back, 0 if it was left alone: it has a
-- lease (its worker is alive, or a take is writing its lease), or it is no
-- longer in the processing list (completed, or moved back by another
-- reaper).
if redis.call('EXISTS', KEYS[3]) == 1 then
  return 0
end
if redis.call('LREM', KEYS[1], -1, ARGV[1]) == 0 then
  return 0
end
-- The pop side: the job is taken next, before younger work.
redis.call('RPUSH', KEYS[2], ARGV[1])
-- The mark: the overrunning worker's Complete and Extend find the lease
-- held by someone else, even when the next take has moved the job into the
-- processing list but not yet written its own lease.
redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[3])
return 1

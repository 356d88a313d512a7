package kind

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
)

// bullmq reads the layout that BullMQ (5 and 6) and Bull (3 and 4) share,
// learned from their Lua scripts (BullMQ 6.7.0, Bull 4.16.5). A queue q
// under prefix p keeps:
//
//   - p:q:id, the job-id counter every add INCRs: the discovery key;
//   - p:q:wait and p:q:paused, lists of waiting job ids (LPUSHed, taken
//     from the right: the oldest is at index -1); BullMQ's p:q:prioritized
//     zset holds waiting jobs with a priority (Bull's p:q:priority zset
//     only orders ids that are in wait, and is not counted);
//   - p:q:active, the list of started job ids; a worker holds each with a
//     lock, p:q:<id>:lock (SET PX lockDuration, renewed every half of it);
//   - p:q:delayed, a zset scored due time (ms) * 0x1000 + a 12-bit counter
//     (getDelayedScore.lua in BullMQ, addJob-6.lua in Bull);
//   - p:q:<id>, the job hash: name, timestamp (added, ms), delay,
//     processedOn (started, ms), attempts made (atm in BullMQ 5+,
//     attemptsMade before and in Bull), stalled counter (stc,
//     stalledCounter).
//
// A started job whose worker died keeps its id in active; its lock
// expires lockDuration (30 s by default) later. Only a healthy worker's
// stalled check (every stalledInterval, 30 s) moves it back to wait (or
// fails it after maxStalledCount): with no healthy worker of the queue it
// stays there. So, per queue, two pipelined rounds per batch:
//
//  1. GET p:q:id, LLEN wait and paused, ZCARD prioritized, LLEN active and
//     its first bullActiveScan ids, ZCARD delayed and ZCOUNT of those due
//     more than max_wait ago, the oldest waiting id;
//  2. per active id read, GET of its lock and HMGET of its job hash; the
//     oldest waiting job's timestamp and delay.
//
// An active job with no lock is orphaned; one with its lock, started
// (processedOn) more than max_hold ago, is stuck; any other is active.
// Active jobs beyond the first bullActiveScan are counted active. A job
// whose hash is missing or not a hash, or whose lock is not a string, is
// skipped: counted in keys_skipped_total and in none of the states.
// Waiting is wait + paused + prioritized; waiting age is since the oldest
// waiting job's timestamp + delay. Scheduled is delayed minus overdue.
func init() { registerFramework(config.KindBullMQ, func() frameworkLayout { return &bullLayout{} }) }

// bullActiveScan bounds the active ids classified per queue and sweep.
const bullActiveScan = 1000

type bullLayout struct {
	prefix           string
	maxWait, maxHold int64 // ms
	watches          func(string) bool
}

func (l *bullLayout) configure(f *config.Family) {
	l.prefix, l.maxWait, l.maxHold = f.Prefix, f.MaxWait.Milliseconds(), f.MaxHold.Milliseconds()
	fam := *f
	l.watches = fam.Watches
}

func (l *bullLayout) reads(now int64) redisread.Reads {
	return &bullReads{l: l, now: now}
}

func (l *bullLayout) settle([]*FrameworkRead, bool) int64 { return 0 }
func (l *bullLayout) registersWorkers() bool              { return false }
func (l *bullLayout) recovery() string {
	return "BullMQ and Bull requeue a job whose lock expired only from a healthy worker of the same queue: its stalled check (every stalledInterval, 30 s by default) moves the job back to wait, or fails it once it has stalled more than maxStalledCount times. Start a worker for this queue; nothing else moves these jobs."
}

type bullReads struct {
	l   *bullLayout
	now int64
}

// bullQueue is one queue's first-round commands.
type bullQueue struct {
	key, base                     string // discovery key, "p:q:"
	q                             QueueJobs
	id                            *redis.StringCmd
	wait, paused, active          *redis.IntCmd
	prioritized, delayed, overdue *redis.IntCmd
	activeIDs                     *redis.StringSliceCmd
	oldestWait, oldestPaused      *redis.StringCmd
	locks                         []*redis.StringCmd
	jobs                          []*redis.SliceCmd
	ids                           []string
	oldestJob                     *redis.SliceCmd
	oldestJobKey                  string
	fr                            *FrameworkRead
	skip                          bool
}

func (b *bullReads) Read(ctx context.Context, c redis.Cmdable, keys []string, reads []redisread.KeyRead) error {
	qs := make([]*bullQueue, len(keys))
	pipe := c.Pipeline()
	// Due more than max_wait ago: a score below (now - max_wait + 1) * 0x1000.
	overdue := "(" + strconv.FormatInt((b.now-b.l.maxWait+1)*0x1000, 10)
	for i, k := range keys {
		reads[i].Key = k
		name := strings.TrimSuffix(strings.TrimPrefix(k, b.l.prefix+":"), ":id")
		if !b.l.watches(name) {
			continue
		}
		base := b.l.prefix + ":" + name + ":"
		q := &bullQueue{key: k, base: base, q: NewQueueJobs(name), fr: &FrameworkRead{}}
		q.id = pipe.Get(ctx, k)
		q.wait = pipe.LLen(ctx, base+"wait")
		q.paused = pipe.LLen(ctx, base+"paused")
		q.prioritized = pipe.ZCard(ctx, base+"prioritized")
		q.active = pipe.LLen(ctx, base+"active")
		q.activeIDs = pipe.LRange(ctx, base+"active", 0, bullActiveScan-1)
		q.delayed = pipe.ZCard(ctx, base+"delayed")
		q.overdue = pipe.ZCount(ctx, base+"delayed", "-inf", overdue)
		q.oldestWait = pipe.LIndex(ctx, base+"wait", -1)
		q.oldestPaused = pipe.LIndex(ctx, base+"paused", -1)
		qs[i] = q
	}
	_, _ = pipe.Exec(ctx)

	pipe = c.Pipeline()
	second := false
	for i, q := range qs {
		if q == nil {
			// Not watched: read as nothing, and not counted as skipped.
			reads[i].Status = redisread.Gone
			continue
		}
		r := &reads[i]
		if err := q.id.Err(); err != nil {
			if err := r.Judge(err); err != nil {
				return err
			}
			q.skip = true
			continue
		}
		// Each key is judged once, by the first error of the commands
		// that read it: a bad key counts once in keys_skipped_total.
		counts := []struct {
			cmd   *redis.IntCmd
			key   string
			state JobState
		}{
			{q.wait, "wait", JobWaiting}, {q.paused, "paused", JobWaiting}, {q.prioritized, "prioritized", JobWaiting},
		}
		for _, p := range counts {
			ok, err := partJudge(r, q.fr, q.base+p.key, p.cmd.Err())
			if err != nil {
				return err
			}
			if ok {
				q.q.Jobs[p.state] += p.cmd.Val()
			}
		}
		if ok, err := partJudge(r, q.fr, q.base+"delayed", firstErr(q.delayed.Err(), q.overdue.Err())); err != nil {
			return err
		} else if ok {
			q.q.Jobs[JobOverdue] = q.overdue.Val()
			q.q.Jobs[JobScheduled] = q.delayed.Val() - q.overdue.Val()
		}
		var active int64
		if ok, err := partJudge(r, q.fr, q.base+"active", firstErr(q.active.Err(), q.activeIDs.Err())); err != nil {
			return err
		} else if ok {
			active = q.active.Val()
			q.ids = q.activeIDs.Val()
		}
		// Active jobs not read are counted active: the ids read are
		// classified in the second round.
		q.q.Jobs[JobActive] = max(active-int64(len(q.ids)), 0)
		for _, id := range q.ids {
			q.locks = append(q.locks, pipe.Get(ctx, q.base+id+":lock"))
			q.jobs = append(q.jobs, pipe.HMGet(ctx, q.base+id, "name", "processedOn", "atm", "attemptsMade"))
			second = true
		}
		for _, head := range []*redis.StringCmd{q.oldestWait, q.oldestPaused} {
			id, err := head.Result()
			if err != nil || q.oldestJob != nil {
				// A list of the wrong type was counted above.
				continue
			}
			q.oldestJobKey = q.base + id
			q.oldestJob = pipe.HMGet(ctx, q.oldestJobKey, "timestamp", "delay")
			second = true
		}
		if r.Status != redisread.OK {
			q.skip = true
		}
	}
	if second {
		_, _ = pipe.Exec(ctx)
	}
	for i, q := range qs {
		if q == nil || q.skip {
			continue
		}
		r := &reads[i]
		if err := b.classify(r, q); err != nil {
			return err
		}
		if r.Status != redisread.OK {
			continue
		}
		q.fr.Queues = []QueueJobs{q.q}
		r.Extra = q.fr
	}
	return nil
}

// classify sorts a queue's active ids read in the second round, and dates
// its oldest waiting job.
func (b *bullReads) classify(r *redisread.KeyRead, q *bullQueue) error {
	for j, id := range q.ids {
		jobKey := q.base + id
		hasLock, err := partJudge(r, q.fr, jobKey+":lock", q.locks[j].Err())
		if err != nil {
			return err
		}
		if !hasLock && q.locks[j].Err() != nil && !isNil(q.locks[j].Err()) {
			continue // a lock of the wrong type: skipped
		}
		ok, err := partJudge(r, q.fr, jobKey, q.jobs[j].Err())
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		v := q.jobs[j].Val()
		if v[0] == nil && v[1] == nil && v[2] == nil && v[3] == nil {
			q.fr.Bad = append(q.fr.Bad, BadData{Key: jobKey, Reason: redisread.SkipBadValue,
				Detail: fmt.Sprintf("job %s is in %sactive but its hash is missing, or holds none of name, processedOn, atm and attemptsMade", id, q.base), Vanished: true})
			continue
		}
		started := hashInt(v[1])
		attempts := hashInt(v[2])
		if attempts < 0 {
			attempts = max(hashInt(v[3]), 0)
		}
		switch {
		case !hasLock:
			q.q.AddOrphan(Job{ID: id, Name: hashStr(v[0]), Started: started, Attempts: attempts})
		case started >= 0 && b.now-started > b.l.maxHold:
			q.q.Jobs[JobStuck]++
		default:
			q.q.Jobs[JobActive]++
		}
	}
	if q.oldestJob != nil {
		ok, err := partJudge(r, q.fr, q.oldestJobKey, q.oldestJob.Err())
		if err != nil {
			return err
		}
		if ok {
			v := q.oldestJob.Val()
			if ts := hashInt(v[0]); ts >= 0 {
				q.q.Waited(ts + max(hashInt(v[1]), 0))
			}
		}
	}
	return nil
}

func isNil(err error) bool { return errors.Is(err, redis.Nil) }

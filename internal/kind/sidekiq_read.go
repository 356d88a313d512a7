package kind

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redisread"
)

// sidekiqScheduledRead bounds how many entries of `schedule` and of
// `retry` (the first due) one sweep reads to attribute them to their
// queues; the rest count under the queue of the last entry read, so that
// the family's totals stay exact.
const sidekiqScheduledRead = 1000

// sidekiqRead is one sweep's read of a Sidekiq layout under a namespace
// (redis-namespace's "<ns>:", empty without one), for one discovery key
// (the `queues` set).
type sidekiqRead struct {
	Queues map[string]*QueueJobs
	// Procs is every process in `processes`, and every remembered one
	// with jobs to judge.
	Procs map[string]sidekiqSighting
}

// queue returns q's figures, made on first use: a queue may show up only
// in a work entry or a scheduled job.
func (s *sidekiqRead) queue(q string) *QueueJobs {
	j := s.Queues[q]
	if j == nil {
		nj := NewQueueJobs(q)
		j = &nj
		s.Queues[q] = j
	}
	return j
}

// readSidekiq reads the layout in three pipelined rounds: the sets and
// the sizes of `schedule` and `retry`; per queue LLEN and LINDEX -1
// (Sidekiq pushes left and BRPOPs: the right end is the oldest), per
// process the heartbeat's beat and the work hash (both names), and the
// first entries of `schedule` and `retry`. queues overrides discovery.
// The discovery key's own error is judged on r; the other keys' through
// partJudge.
func readSidekiq(ctx context.Context, c redis.Cmdable, r *redisread.KeyRead, fr *FrameworkRead, ns string, queues, remembered []string, now, maxWait int64) (*sidekiqRead, error) {
	out := &sidekiqRead{Queues: map[string]*QueueJobs{}, Procs: map[string]sidekiqSighting{}}
	pipe := c.Pipeline()
	qset := pipe.SMembers(ctx, r.Key)
	pset := pipe.SMembers(ctx, ns+"processes")
	type zread struct {
		key              string
		card, overdue    *redis.IntCmd
		entries          *redis.ZSliceCmd
		nOverdue, nSched int64
	}
	due := "-inf"
	if now-maxWait > 0 {
		due = fmt.Sprintf("(%d.%03d", (now-maxWait)/1000, (now-maxWait)%1000)
	}
	zs := []*zread{{key: ns + "schedule"}, {key: ns + "retry"}}
	for _, z := range zs {
		z.card, z.overdue = pipe.ZCard(ctx, z.key), pipe.ZCount(ctx, z.key, "-inf", due)
		z.entries = pipe.ZRangeWithScores(ctx, z.key, 0, sidekiqScheduledRead-1)
	}
	_, _ = pipe.Exec(ctx)
	if err := qset.Err(); err != nil {
		return nil, r.Judge(err)
	}
	if queues == nil {
		queues = qset.Val()
	}
	listed := map[string]bool{}
	if ok, err := partJudge(r, fr, ns+"processes", pset.Err()); err != nil {
		return nil, err
	} else if ok {
		for _, p := range pset.Val() {
			listed[p] = true
		}
	}
	for _, z := range zs {
		ok1, err1 := partJudge(r, fr, z.key, z.card.Err())
		if err1 != nil {
			return nil, err1
		}
		ok2, err2 := partJudge(r, fr, z.key, z.overdue.Err())
		if err2 != nil {
			return nil, err2
		}
		ok3, err3 := partJudge(r, fr, z.key, z.entries.Err())
		if err3 != nil {
			return nil, err3
		}
		if !ok1 || !ok2 || !ok3 {
			continue
		}
		z.nOverdue, z.nSched = z.overdue.Val(), z.card.Val()-z.overdue.Val()
		dueBefore := float64(now-maxWait) / 1000
		last := ""
		for _, e := range z.entries.Val() {
			m, _ := e.Member.(string)
			var p sidekiqPayload
			if err := json.Unmarshal([]byte(m), &p); err != nil || p.Queue == "" {
				fr.Bad = append(fr.Bad, BadData{Key: z.key, Reason: redisread.SkipBadValue,
					Detail: fmt.Sprintf("an entry due at %.3f has no queue (not a job's JSON): counted, not attributed", e.Score)})
				continue
			}
			last = p.Queue
			if e.Score < dueBefore {
				out.queue(p.Queue).Jobs[JobOverdue]++
				z.nOverdue--
			} else {
				out.queue(p.Queue).Jobs[JobScheduled]++
				z.nSched--
			}
		}
		if last != "" {
			out.queue(last).Jobs[JobOverdue] += max(z.nOverdue, 0)
			out.queue(last).Jobs[JobScheduled] += max(z.nSched, 0)
		}
	}

	ids := make([]string, 0, len(listed)+len(remembered))
	for p := range listed {
		ids = append(ids, p)
	}
	for _, p := range remembered {
		if !listed[p] {
			ids = append(ids, p)
		}
	}
	pipe = c.Pipeline()
	lens := make([]*redis.IntCmd, len(queues))
	heads := make([]*redis.StringCmd, len(queues))
	for i, q := range queues {
		lens[i] = pipe.LLen(ctx, ns+"queue:"+q)
		heads[i] = pipe.LIndex(ctx, ns+"queue:"+q, -1)
	}
	beats := make([]*redis.StringCmd, len(ids))
	works := make([][2]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		beats[i] = pipe.HGet(ctx, ns+id, "beat")
		works[i] = [2]*redis.MapStringStringCmd{pipe.HGetAll(ctx, ns+id+":workers"), pipe.HGetAll(ctx, ns+id+":work")}
	}
	_, _ = pipe.Exec(ctx)
	for i, q := range queues {
		key := ns + "queue:" + q
		qj := out.queue(q)
		if ok, err := partJudge(r, fr, key, lens[i].Err()); err != nil {
			return nil, err
		} else if !ok {
			continue
		}
		qj.Jobs[JobWaiting] += lens[i].Val()
		head, err := heads[i].Result()
		if err != nil {
			continue // emptied since, or the wrong type: judged above
		}
		at, ok, err := parseSidekiqEnqueuedAt(head)
		switch {
		case err != nil:
			fr.Bad = append(fr.Bad, BadData{Key: key, Reason: redisread.SkipBadValue, Detail: "the next job: " + err.Error()})
		case ok:
			qj.Waited(at)
		}
	}
	for i, id := range ids {
		s := sidekiqSighting{Listed: listed[id]}
		beat, err := beats[i].Result()
		if ok, ferr := partJudge(r, fr, ns+id, err); ferr != nil {
			return nil, ferr
		} else if ok {
			s.Heartbeat = true
			if s.Beat, err = parseSidekiqBeat(beat); err != nil {
				fr.Bad = append(fr.Bad, BadData{Key: ns + id, Reason: redisread.SkipBadValue, Detail: err.Error()})
			}
		} else if err != nil && !isNil(err) {
			// Unreadable is not gone: never judged lost by it.
			s.Heartbeat = true
		}
		for k, w := range works[i] {
			key := ns + id + [2]string{":workers", ":work"}[k]
			if ok, err := partJudge(r, fr, key, w.Err()); err != nil {
				return nil, err
			} else if !ok {
				continue
			}
			for tid, v := range w.Val() {
				j, err := parseSidekiqWork(v)
				if err != nil {
					fr.Bad = append(fr.Bad, BadData{Key: key, Reason: redisread.SkipBadValue, Detail: fmt.Sprintf("thread %s: %v", tid, err)})
					continue
				}
				if s.Work == nil {
					s.Work = map[string]sidekiqJob{}
				}
				s.Work[j.JID] = j
			}
		}
		out.Procs[id] = s
		switch {
		case s.Listed && s.Heartbeat:
			fr.Workers[WorkerLive]++
		case s.Listed:
			fr.Workers[WorkerDead]++
		}
	}
	return out, nil
}

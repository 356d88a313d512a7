package kind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// sidekiqOverdueRead bounds how many due entries of `schedule` and
// `retry` one sweep reads to attribute them to their queues; past it the
// rest count for the family only.
const sidekiqOverdueRead = 1000

// sidekiqRead is one sweep's read of a Sidekiq 6.4 / 7 layout under a
// namespace (redis-namespace's "<ns>:", empty without one).
type sidekiqRead struct {
	Queues map[string]*sidekiqQueueRead
	// Procs is every process in `processes`, and every remembered one
	// with jobs to judge.
	Procs map[string]sidekiqSighting
	// Scheduled and Overdue count `schedule` and `retry` entries: due
	// more than max_wait ago is overdue (no process is polling them).
	Scheduled, Overdue int64
	// OverdueByQueue attributes the overdue entries read.
	OverdueByQueue map[string]int64
	// Bad says what was skipped as malformed, one line each.
	Bad []string
}

type sidekiqQueueRead struct {
	Waiting int64
	// Oldest is the enqueued_at (Redis ms) of the job BRPOP takes next,
	// the queue's oldest; 0 when unknown.
	Oldest int64
}

// readSidekiq reads the layout in three pipelined rounds: the sets, then
// per queue LLEN and LINDEX -1 (Sidekiq pushes left and pops right) and
// per process the heartbeat's beat and the work hash, then the due
// entries of `schedule` and `retry`. queues overrides discovery (the
// `queues` set).
func readSidekiq(ctx context.Context, c redis.Cmdable, ns string, queues []string, remembered []string, now, maxWait int64) (*sidekiqRead, error) {
	out := &sidekiqRead{Queues: map[string]*sidekiqQueueRead{}, Procs: map[string]sidekiqSighting{}, OverdueByQueue: map[string]int64{}}
	pipe := c.Pipeline()
	var qset *redis.StringSliceCmd
	if queues == nil {
		qset = pipe.SMembers(ctx, ns+"queues")
	}
	pset := pipe.SMembers(ctx, ns+"processes")
	due := fmt.Sprintf("(%d.%03d", (now-maxWait)/1000, (now-maxWait)%1000)
	if now-maxWait < 0 {
		due = "-inf"
	}
	type zread struct{ card, overdue *redis.IntCmd }
	sets := map[string]zread{}
	for _, z := range []string{"schedule", "retry"} {
		sets[z] = zread{pipe.ZCard(ctx, ns+z), pipe.ZCount(ctx, ns+z, "-inf", due)}
	}
	if _, err := pipe.Exec(ctx); failed(err) {
		return nil, err
	}
	if qset != nil {
		if err := qset.Err(); err != nil {
			out.Bad = append(out.Bad, fmt.Sprintf("%squeues is not a set: %v", ns, err))
		} else {
			queues = qset.Val()
		}
	}
	listed := map[string]bool{}
	if err := pset.Err(); err != nil {
		out.Bad = append(out.Bad, fmt.Sprintf("%sprocesses is not a set: %v", ns, err))
	} else {
		for _, p := range pset.Val() {
			listed[p] = true
		}
	}
	for z, r := range sets {
		card, err1 := r.card.Result()
		overdue, err2 := r.overdue.Result()
		if err := errors.Join(err1, err2); err != nil {
			out.Bad = append(out.Bad, fmt.Sprintf("%s%s is not a sorted set", ns, z))
			continue
		}
		out.Scheduled += card - overdue
		out.Overdue += overdue
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
	works := make([]*redis.MapStringStringCmd, len(ids))
	works7 := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		beats[i] = pipe.HGet(ctx, ns+id, "beat")
		works[i] = pipe.HGetAll(ctx, ns+id+":workers")
		works7[i] = pipe.HGetAll(ctx, ns+id+":work")
	}
	var overdueReads []*redis.StringSliceCmd
	if out.Overdue > 0 {
		for _, z := range []string{"schedule", "retry"} {
			overdueReads = append(overdueReads, pipe.ZRangeByScore(ctx, ns+z, &redis.ZRangeBy{Min: "-inf", Max: due, Count: sidekiqOverdueRead}))
		}
	}
	if _, err := pipe.Exec(ctx); failed(err) {
		return nil, err
	}
	for i, q := range queues {
		n, err := lens[i].Result()
		if err != nil {
			out.Bad = append(out.Bad, fmt.Sprintf("%squeue:%s is not a list: %v", ns, q, err))
			continue
		}
		qr := &sidekiqQueueRead{Waiting: n}
		out.Queues[q] = qr
		head, err := heads[i].Result()
		if err != nil {
			continue
		}
		at, ok, err := parseSidekiqEnqueuedAt(head)
		if err != nil {
			out.Bad = append(out.Bad, fmt.Sprintf("%squeue:%s: next job skipped: %v", ns, q, err))
			continue
		}
		if ok {
			qr.Oldest = at
		}
	}
	for i, id := range ids {
		s := sidekiqSighting{Listed: listed[id]}
		beat, err := beats[i].Result()
		switch {
		case err == nil:
			s.Heartbeat = true
			if s.Beat, err = parseSidekiqBeat(beat); err != nil {
				out.Bad = append(out.Bad, fmt.Sprintf("process %s: %v", id, err))
			}
		case errors.Is(err, redis.Nil):
		default:
			out.Bad = append(out.Bad, fmt.Sprintf("process %s: heartbeat %s%s is not a hash: %v", id, ns, id, err))
			s.Heartbeat = true // unreadable, not gone: never judged lost by it
		}
		for _, w := range []*redis.MapStringStringCmd{works[i], works7[i]} {
			m, err := w.Result()
			if err != nil {
				out.Bad = append(out.Bad, fmt.Sprintf("process %s: work hash is not a hash: %v", id, err))
				continue
			}
			for tid, v := range m {
				j, err := parseSidekiqWork(v)
				if err != nil {
					out.Bad = append(out.Bad, fmt.Sprintf("process %s thread %s: skipped: %v", id, tid, err))
					continue
				}
				if s.Work == nil {
					s.Work = map[string]sidekiqJob{}
				}
				s.Work[j.JID] = j
			}
		}
		out.Procs[id] = s
	}
	for _, r := range overdueReads {
		entries, err := r.Result()
		if err != nil {
			continue
		}
		for _, e := range entries {
			var p sidekiqPayload
			if pe := json.Unmarshal([]byte(e), &p); pe != nil || p.Queue == "" {
				out.Bad = append(out.Bad, "a due entry of schedule or retry has no queue: skipped")
				continue
			}
			out.OverdueByQueue[p.Queue]++
		}
	}
	return out, nil
}

// failed reports whether a pipeline's error is the sweep's (the
// connection, the deadline) rather than one key's: a key of the wrong
// type is that key's, skipped and counted by its reader.
func failed(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) {
		return false
	}
	var re redis.Error
	return !errors.As(err, &re) || !strings.HasPrefix(re.Error(), "WRONGTYPE")
}
